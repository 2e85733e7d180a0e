"""Capture options and nsys argv building (pure functions; every flag is documented in the
Nsight Systems User Guide, "CLI Profile Command Switch Options" and "CLI Export Command Switch
Options": https://docs.nvidia.com/nsight-systems/UserGuide/index.html; table in ``docs/capture.md``)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from collections.abc import Sequence

from ..errors import NsysFailedError, UsageError
from ..formats import REP_SUFFIX
from .locate import OLD_REP_SUFFIX, _looks_like_profile_help, version_str


# ----------------------------------------------------------------------------------------------
# capture options and argv building (pure)
# ----------------------------------------------------------------------------------------------

CAPTURE_RANGES = ("cudaProfilerApi", "nvtx")
_CAPTURE_RANGE_END_RE = re.compile(r"^(none|stop|stop-shutdown|repeat(:[1-9]\d*)?|repeat-shutdown:[1-9]\d*)$")
_GPU_DEVICES_RE = re.compile(r"^(all|none|\d+(,\d+)*)$")
#: extra args that would change where nsys writes the report (run_capture must know the path)
_OUTPUT_SWITCHES = ("-o", "--output")


@dataclass
class CaptureOptions:
    """What ``nsysdoc capture`` asks nsys for. Defaults: CUDA + NVTX + OS runtime trace, no CPU
    sampling, report ``<output_dir>/<output_name>.nsys-rep``."""

    output_dir: str = "."
    output_name: str | None = None  # without extension; None -> default_output_name(command, now)
    trace_cudnn: bool = False
    trace_cublas: bool = False
    cpu_sampling: bool = False
    delay_s: float | None = None
    duration_s: float | None = None
    capture_range: str | None = None  # None | 'cudaProfilerApi' | 'nvtx'
    capture_range_end: str | None = None  # None = nsys default (stop-shutdown)
    nvtx_capture: str | None = None  # 'range@domain', 'range' or 'range@*'
    gpu_metrics_devices: str | None = None  # 'all' or '0,1'
    cuda_graph_node: bool = False
    python_backtrace: bool = False  # Python backtraces for CUDA sync calls; implies CPU sampling
    #: what attribution needs (docs/capture.md, "Where"): operator ranges (--pytorch=autograd-nvtx)
    #: and CUDA call backtraces (--cudabacktrace=all --python-backtrace=cuda), each when the
    #: installed nsys lists it; costs collection overhead, so off by default
    where: bool = False
    extra_args: list[str] = field(default_factory=list)  # passed to nsys profile verbatim
    #: replace an existing report of the same name (``<name>.nsys-rep`` and nsysdoc's pages of
    #: it); without it :func:`nsysdoc.nsys.run_capture` refuses before running anything
    force: bool = False
    #: GPU memory allocations and frees (issue 47): --cuda-memory-usage=true when the installed
    #: nsys lists it; "may cause significant runtime overhead", so off by default
    memory: bool = False


_PY_LAUNCHERS = re.compile(
    r"^(python[\d.]*|pypy[\d.]*|torchrun|accelerate|deepspeed|uv|poetry|pipenv|conda|mpirun|mpiexec|"
    r"srun|env|time|nohup|numactl|taskset|bash|sh|composer|lightning)$"
)


def _program_label(command: Sequence[str]) -> str:
    """The most telling name in the command: the first ``*.py`` script, else ``-m module``'s last
    part, else the first word that is not a known launcher, else the executable."""
    if not command:
        return "capture"
    for arg in command:
        if arg.endswith(".py") and not arg.startswith("-"):
            return Path(arg).stem
    for i, arg in enumerate(command[:-1]):
        if arg == "-m" and not command[i + 1].startswith("-"):
            return command[i + 1].rsplit(".", 1)[-1]
    for arg in command:
        if arg.startswith("-") or "=" in arg:
            continue
        base = os.path.basename(arg)
        if not _PY_LAUNCHERS.match(base):
            return base
    return os.path.basename(command[0])


def default_output_name(command: Sequence[str], now: datetime) -> str:
    """Filesystem-safe report name from the command and time, e.g. ``nsysdoc-train-20261129-114630``."""
    label = re.sub(r"[^A-Za-z0-9_.-]+", "-", _program_label(command)).strip("-._")[:40] or "capture"
    return f"nsysdoc-{label}-{now:%Y%m%d-%H%M%S}"


def _whole_seconds(name: str, value: float | None, *, allow_zero: bool) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{name} must be a number of seconds, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise UsageError(f"{name} must be {'>= 0' if allow_zero else '> 0'} seconds, got {value:g}")
    if float(value) != int(value):
        raise UsageError(f"{name} must be whole seconds (nsys takes integer seconds), got {value:g}")
    return int(value)


def _normalize_capture_range(value: str | None) -> str | None:
    if value is None or value == "" or value.lower() == "none":
        return None
    for known in CAPTURE_RANGES:
        if value.lower() == known.lower():
            return known
    raise UsageError(
        f"--capture-range must be cudaProfilerApi or nvtx, got {value!r}",
        hint="cudaProfilerApi: capture between torch.cuda.profiler.start()/stop(); "
        "nvtx: capture inside the NVTX range named by --nvtx-capture",
    )


def output_base(opts: CaptureOptions, command: Sequence[str], now: datetime | None = None) -> str:
    """``<output_dir>/<name>``: what is passed to ``--output`` (nsys appends ``.nsys-rep``)."""
    name = opts.output_name or default_output_name(command, now or datetime.now())
    for suffix in (REP_SUFFIX, OLD_REP_SUFFIX):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    if not name or name in (".", ".."):
        raise UsageError(f"invalid output name {opts.output_name!r}")
    if "%" in name:
        # nsys expands %p, %h, %q{VAR} in --output; nsysdoc must know the exact report path.
        raise UsageError(f"output name may not contain '%': {name!r}")
    if opts.output_dir in ("", ".", None):
        return name
    return os.path.join(opts.output_dir, name)


def _sample_value(version: Sequence[int] | None) -> str:
    # CPU sampling value: the 2021.4 guide documents --sample=cpu
    # (https://docs.nvidia.com/nsight-systems/2021.4/UserGuide), the 2022.1 guide and later
    # document --sample=process-tree (https://docs.nvidia.com/nsight-systems/2022.1/UserGuide/index.html,
    # https://docs.nvidia.com/nsight-systems/UserGuide/index.html#cli-profile-command-switch-options).
    if version is not None and tuple(version[:2]) < (2022, 1):
        return "cpu"
    return "process-tree"


def build_profile_argv(
    nsys: str,
    opts: CaptureOptions,
    command: Sequence[str],
    *,
    version: Sequence[int] | None = None,
    switches: frozenset[str] | None = None,
    now: datetime | None = None,
) -> list[str]:
    """The ``nsys profile`` argv for ``command``. Pure; raises UsageError on inconsistent options.

    ``version`` (from :func:`nsys_version`) and ``switches`` (from :func:`nsys_profile_switches`)
    only pick spellings that differ between nsys releases; both may be None.
    """
    command = list(command)
    if not command:
        raise UsageError(
            "no command to profile", hint="put the training command after --: nsysdoc capture -- python train.py"
        )
    capture_range = _normalize_capture_range(opts.capture_range)
    if opts.nvtx_capture and capture_range != "nvtx":
        raise UsageError(
            "--nvtx-capture needs --capture-range=nvtx",
            hint="e.g. --capture-range nvtx --nvtx-capture 'train_step@*'",
        )
    nvtx_capture = (opts.nvtx_capture or "").strip()
    if capture_range == "nvtx" and not nvtx_capture:
        raise UsageError(
            "--capture-range=nvtx needs --nvtx-capture RANGE[@DOMAIN]",
            hint="name the NVTX range that starts the capture, e.g. --nvtx-capture 'train_step@*'",
        )
    if opts.capture_range_end is not None:
        if capture_range is None:
            raise UsageError("--capture-range-end needs --capture-range=cudaProfilerApi or nvtx")
        if not _CAPTURE_RANGE_END_RE.match(opts.capture_range_end):
            raise UsageError(
                f"--capture-range-end must be none, stop, stop-shutdown, repeat[:N] or repeat-shutdown:N, "
                f"got {opts.capture_range_end!r}"
            )
    delay = _whole_seconds("--delay", opts.delay_s, allow_zero=True)
    duration = _whole_seconds("--duration", opts.duration_s, allow_zero=False)
    gpu_devices = opts.gpu_metrics_devices
    if gpu_devices is not None:
        gpu_devices = gpu_devices.strip().replace(" ", "")
        if gpu_devices.lower() == "help":
            raise UsageError(
                "--gpu-metrics-devices help only lists devices",
                hint="run `nsys profile --gpu-metrics-devices=help` yourself, then pass 'all' or GPU ids like 0,1",
            )
        if not _GPU_DEVICES_RE.match(gpu_devices):
            raise UsageError(
                f"--gpu-metrics-devices must be 'all' or GPU ids like 0,1, got {opts.gpu_metrics_devices!r}"
            )
    extra = list(opts.extra_args or [])
    for arg in extra:
        glued_o = arg.startswith("-o") and not arg.startswith("--")  # -o, -ofile
        if arg in _OUTPUT_SWITCHES or arg.startswith("--output=") or glued_o:
            raise UsageError(
                f"extra nsys argument {arg!r} would move the report",
                hint="use nsysdoc's --output-dir/--output-name instead",
            )

    argv = [nsys, "profile"]

    # Trace and sampling -- guide, "CLI Profile Command Switch Options":
    # https://docs.nvidia.com/nsight-systems/UserGuide/index.html#cli-profile-command-switch-options
    # --trace: cuda,nvtx,osrt (+cudnn,cublas); --sample: process-tree|none ("If none is selected,
    # CPU sampling is disabled"); --cuda-memory-usage=false (default false, "may cause significant
    # runtime overhead": made explicit); --stats=false (no post-run SQLite/report; we export ourselves).
    trace = ["cuda", "nvtx", "osrt"]
    if opts.trace_cudnn:
        trace.append("cudnn")
    if opts.trace_cublas:
        trace.append("cublas")
    where = where_switches(switches) if opts.where else []
    sampling = opts.cpu_sampling or opts.python_backtrace or any(a.startswith("--cudabacktrace") for a in where)
    argv.append(f"--trace={','.join(trace)}")
    argv.append(f"--sample={_sample_value(version) if sampling else 'none'}")
    argv.extend(memory_switches(switches, opts.memory))
    argv.append("--stats=false")

    # Output -- same table: --output/-o "Set the report file name" (nsys appends .nsys-rep);
    # --force-overwrite/-f true "overwrite all existing result files with same output filename".
    # run_capture has already refused an existing report of that name unless opts.force: nsys is
    # only told to replace what the user asked to replace (or files it leaves behind itself).
    argv.append(f"--output={output_base(opts, command, now)}")
    argv.append("--force-overwrite=true")

    # Collection window -- same table: --delay/-y "Collection start delay in seconds";
    # --duration/-d "Collection duration in seconds; duration must be greater than zero".
    if delay:
        argv.append(f"--delay={delay}")
    if duration is not None:
        argv.append(f"--duration={duration}")

    # Capture range -- same table: --capture-range/-c none|cudaProfilerApi|hotkey|nvtx;
    # --capture-range-end none|stop|stop-shutdown (default)|repeat[:N]|repeat-shutdown:N;
    # --nvtx-capture/-p range@domain|range|range@* ("applicable only ... with --capture-range=nvtx").
    if capture_range is not None:
        argv.append(f"--capture-range={capture_range}")
        if opts.capture_range_end is not None:
            argv.append(f"--capture-range-end={opts.capture_range_end}")
        if capture_range == "nvtx":
            argv.append(f"--nvtx-capture={nvtx_capture}")

    # GPU metrics -- same table: --gpu-metrics-devices "GPU ID, help, all, none". Older CLIs spell
    # it --gpu-metrics-device (newer ones print "'--gpu-metrics-device' is deprecated. Use
    # '--gpu-metrics-devices' instead."); the old spelling is used only when `nsys profile --help`
    # lists it and not the new one. The release that renamed it could not be sourced.
    if gpu_devices is not None and gpu_devices != "none":
        flag = "--gpu-metrics-devices"
        if switches and flag not in switches and "--gpu-metrics-device" in switches:
            flag = "--gpu-metrics-device"
        argv.append(f"{flag}={gpu_devices}")

    # CUDA graphs -- same table: --cuda-graph-trace graph (default)|node; "node activities will
    # be collected ... may cause significant runtime overhead".
    if opts.cuda_graph_node:
        argv.append("--cuda-graph-trace=node")

    # Python backtraces of CUDA sync calls -- same table: --python-backtrace cuda|none, "Note:
    # tracing and backtraces of the selected API and CPU sampling must be enabled. For example,
    # --cudabacktrace must be set when using --python-backtrace=cuda"; --cudabacktrace
    # all|none|kernel|memory|sync|other, "Note CPU sampling must be enabled". Hence sampling above.
    if opts.python_backtrace and not where:
        argv.append("--cudabacktrace=sync")
        argv.append("--python-backtrace=cuda")
    argv.extend(where)

    argv.extend(extra)  # user pass-through, verbatim (e.g. --trace-fork-before-exec=true)
    argv.extend(command)
    return argv


def build_export_argv(nsys: str, rep_path: str | os.PathLike, sqlite_path: str | os.PathLike) -> list[str]:
    """``nsys export`` to SQLite -- guide, "CLI Export Command Switch Options":
    https://docs.nvidia.com/nsight-systems/UserGuide/index.html#cli-export-command-switch-options
    (--type/-t sqlite; --output/-o <filename>; --force-overwrite/-f true). ``--lazy`` is left at its
    default (true: "a table will only be created when it contains data"), which the loader and
    :func:`explain_capture_failure` rely on: a missing CUPTI table means no such events."""
    return [
        nsys,
        "export",
        "--type=sqlite",
        f"--output={os.fspath(sqlite_path)}",
        "--force-overwrite=true",
        os.fspath(rep_path),
    ]


#: Minimum nsys versions for emitted switches that could be sourced from NVIDIA documentation.
#: Attribution switches of ``nsysdoc capture --where`` (User Guide, "CLI Profile Command Switch
#: Options" and "PyTorch Profiling"): --pytorch=autograd-nvtx = torch.autograd.profiler.emit_nvtx()
#: (an NVTX range per operator, "seq = N" linking backward to forward); --cudabacktrace=all with
#: --python-backtrace=cuda (a backtrace per CUDA call; "Significant runtime overhead may occur";
#: needs CPU sampling). Versions: --pytorch is rejected by nsys 2023.4.4 and accepted by 2024.7;
#: --python-backtrace is rejected by 2022.4.2 and accepted by 2023.4.4 (docs/capture.md). Each is
#: used only when `nsys profile --help` lists it.
WHERE_SWITCHES = (("--pytorch", ["--pytorch=autograd-nvtx"]),
                  ("--python-backtrace", ["--cudabacktrace=all", "--python-backtrace=cuda"]))


def where_switches(switches: frozenset[str] | None) -> list[str]:
    """The attribution switches the installed nsys takes (all of them when its switch list is
    unknown)."""
    out: list[str] = []
    for name, args in WHERE_SWITCHES:
        if switches is None or not _looks_like_profile_help(switches) or name in switches:
            out.extend(args)
    return out


#: GPU memory usage (``nsysdoc capture --memory``; User Guide, "CLI Profile Command Switch
#: Options": --cuda-memory-usage true|false, "Track the GPU memory usage. Applicable only when
#: CUDA tracing is enabled. This feature may cause significant runtime overhead." Default false).
MEMORY_SWITCH = "--cuda-memory-usage"


def memory_switches(switches: frozenset[str] | None, memory: bool) -> list[str]:
    """``--cuda-memory-usage=true`` with ``memory``, else ``=false`` (the default, made explicit),
    when the installed nsys lists the switch or its switch list is unknown; nothing when it does
    not list it (an nsys without it records no memory usage either way)."""
    if switches is not None and _looks_like_profile_help(switches) and MEMORY_SWITCH not in switches:
        return []
    return [f"{MEMORY_SWITCH}={'true' if memory else 'false'}"]


def memory_switch_missing(switches: frozenset[str] | None) -> bool:
    """Whether ``--memory`` wanted a switch the installed nsys does not list."""
    return switches is not None and _looks_like_profile_help(switches) and MEMORY_SWITCH not in switches


def where_switches_missing(switches: frozenset[str] | None) -> list[str]:
    """Attribution switches ``--where`` wanted that the installed nsys does not list."""
    if switches is None or not _looks_like_profile_help(switches):
        return []
    return [name for name, _args in WHERE_SWITCHES if name not in switches]


#: (argv element prefix, minimum version, source)
#: Could NOT be sourced (no release note found): the first releases with --python-backtrace,
#: --cudabacktrace=sync, --capture-range-end, --cuda-graph-trace and the --gpu-metrics-devices
#: spelling. For those, check_flag_support() relies on the switch list of `nsys profile --help`.
FLAG_MIN_VERSIONS: tuple[tuple[str, tuple[int, ...], str], ...] = (
    ("--sample=process-tree", (2022, 1), "https://docs.nvidia.com/nsight-systems/2022.1/UserGuide/index.html"),
)


def _profile_switch_args(argv: Sequence[str]) -> list[str]:
    """The nsys options of a profile argv (between 'profile' and the application)."""
    out: list[str] = []
    try:
        start = list(argv).index("profile") + 1
    except ValueError:
        start = 0
    for arg in argv[start:]:
        if not arg.startswith("-"):
            break
        out.append(arg)
    return out


def check_flag_support(
    version: Sequence[int] | None,
    argv: Sequence[str],
    switches: frozenset[str] | None = None,
) -> None:
    """Raise NsysFailedError "nsys X is too old for --flag (needs Y)" when the installed nsys cannot
    take an option in ``argv``: by documented minimum version (:data:`FLAG_MIN_VERSIONS`) and, when
    ``switches`` (from ``nsys profile --help``) is known, by absence from that list."""
    args = _profile_switch_args(argv)
    if version is not None:
        for prefix, minimum, source in FLAG_MIN_VERSIONS:
            for arg in args:
                if arg.startswith(prefix) and tuple(version) < minimum:
                    raise NsysFailedError(
                        f"nsys {version_str(version)} is too old for {prefix} (needs {version_str(minimum)})",
                        hint=f"upgrade Nsight Systems (see {source})",
                    )
    if switches is not None and _looks_like_profile_help(switches):
        for arg in args:
            if not arg.startswith("--"):
                continue
            name = arg.split("=", 1)[0]
            if name not in switches:
                raise NsysFailedError(
                    f"nsys {version_str(version)} is too old for {name} (not listed by `nsys profile --help`)",
                    hint="upgrade Nsight Systems (https://developer.nvidia.com/nsight-systems) or drop that option",
                )


