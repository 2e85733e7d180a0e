"""Everything that shells out to NVIDIA Nsight Systems (``nsys``): capture, export, reuse.

Design:

* argv lists are built by pure functions (:func:`build_profile_argv`, :func:`build_export_argv`)
  and run separately (:func:`run_capture`, :func:`ensure_sqlite`), so the flags can be tested
  without an ``nsys`` binary.
* Library code never prints. The only output :func:`run_capture` produces is the profiled
  program's own stdout (inherited) and nsys' stderr, which is forwarded live (and its tail kept).
* Errors are the one-line errors of :mod:`nsysdoc.errors`.

Every flag emitted below is documented in the Nsight Systems User Guide, "CLI Profile Command
Switch Options" and "CLI Export Command Switch Options":
https://docs.nvidia.com/nsight-systems/UserGuide/index.html (see ``docs/capture.md`` for the table).
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import urllib.parse
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO

from .errors import InputError, NsysFailedError, NsysNotFoundError, UsageError

__all__ = [
    "CaptureOptions",
    "CaptureResult",
    "Runner",
    "build_export_argv",
    "build_profile_argv",
    "check_flag_support",
    "default_output_name",
    "ensure_sqlite",
    "expand_inputs",
    "explain_capture_failure",
    "find_nsys",
    "is_nsys_export",
    "nsys_profile_switches",
    "nsys_version",
    "parse_nsys_version",
    "parse_profile_switches",
    "run_capture",
]

USER_GUIDE = "https://docs.nvidia.com/nsight-systems/UserGuide/index.html"

#: Where nsys commonly lives when it is not on PATH (CUDA toolkit and standalone installers).
DEFAULT_FALLBACK_GLOBS: tuple[str, ...] = (
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda-*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems-cli/*/bin/nsys",
)

INSTALL_HINT = (
    "install NVIDIA Nsight Systems (it ships with the CUDA Toolkit as <cuda>/bin/nsys, or as a "
    "standalone package from https://developer.nvidia.com/nsight-systems), then put nsys on PATH "
    "or select a binary with NSYS=/path/to/nsys or --nsys PATH"
)

STDERR_TAIL_LINES = 15
_STDERR_KEEP_BYTES = 256 * 1024  # what run_capture keeps of nsys stderr for diagnosis

REP_SUFFIX = ".nsys-rep"
#: nsys before 2021.4 wrote ``.qdrep`` (the 2020.x guides say ".qdrep", the 2021.4 guide says
#: ".nsys-rep": https://docs.nvidia.com/nsight-systems/2021.4/UserGuide). Accepted as input.
OLD_REP_SUFFIX = ".qdrep"
MARKER_SUFFIX = ".nsysdoc"  # ownership sidecar: run.sqlite.nsysdoc

#: A function that runs a short, non-interactive command (``nsys --version``, ``nsys export``)
#: and returns its CompletedProcess with text stdout/stderr. Injected in tests.
Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


# ----------------------------------------------------------------------------------------------
# finding nsys and its version
# ----------------------------------------------------------------------------------------------

def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _resolve_candidate(value: str, path_env: str | None) -> str | None:
    """A user-given binary: a path (contains a separator) or a name looked up on PATH."""
    expanded = os.path.expanduser(value)
    if os.sep in expanded or (os.altsep and os.altsep in expanded):
        return os.path.abspath(expanded) if _executable(expanded) else None
    found = shutil.which(expanded, path=path_env)
    if found:
        return found
    return os.path.abspath(expanded) if _executable(expanded) else None


def find_nsys(
    explicit: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    fallback_globs: Iterable[str] = DEFAULT_FALLBACK_GLOBS,
) -> str:
    """Locate the nsys binary: ``--nsys PATH`` wins, then ``$NSYS``, then ``nsys`` on PATH, then
    the usual install folders (``fallback_globs``, newest first). Raises NsysNotFoundError."""
    env = os.environ if environ is None else environ
    path_env = env.get("PATH", "")
    if explicit:
        found = _resolve_candidate(explicit, path_env)
        if not found:
            raise NsysNotFoundError(f"--nsys {explicit}: no such executable", hint=INSTALL_HINT)
        return found
    from_env = env.get("NSYS")
    if from_env:
        found = _resolve_candidate(from_env, path_env)
        if not found:
            raise NsysNotFoundError(f"NSYS={from_env}: no such executable", hint=INSTALL_HINT)
        return found
    found = shutil.which("nsys", path=path_env)
    if found:
        return found
    for pattern in fallback_globs:
        for candidate in sorted(glob.glob(pattern), reverse=True):  # newest version dir first
            if _executable(candidate):
                return candidate
    raise NsysNotFoundError("nsys (NVIDIA Nsight Systems CLI) not found", hint=INSTALL_HINT)


def _default_runner(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(argv), stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace"
        )
    except FileNotFoundError:
        raise NsysNotFoundError(f"{argv[0]}: no such executable", hint=INSTALL_HINT) from None
    except PermissionError:
        raise NsysNotFoundError(f"{argv[0]}: not executable", hint=INSTALL_HINT) from None


_VERSION_RE = re.compile(r"\bversion\s+(\d+(?:\.\d+){1,3})", re.IGNORECASE)


def parse_nsys_version(text: str) -> tuple[int, ...] | None:
    """``NVIDIA Nsight Systems version 2024.6.2.225-246235244400v0`` -> ``(2024, 6, 2, 225)``."""
    m = _VERSION_RE.search(text or "")
    if not m:
        m = re.search(r"\b(20\d\d\.\d+(?:\.\d+){0,2})", text or "")
        if not m:
            return None
    return tuple(int(p) for p in m.group(1).split("."))


def nsys_version(nsys: str, runner: Runner | None = None) -> tuple[int, ...] | None:
    """Run ``nsys --version`` and parse it; None when it fails or prints something unexpected."""
    run = runner or _default_runner
    try:
        proc = run([nsys, "--version"])
    except (OSError, NsysNotFoundError):
        return None
    if proc.returncode != 0:
        return None
    return parse_nsys_version(f"{proc.stdout or ''}\n{proc.stderr or ''}")


def version_str(version: Sequence[int] | None) -> str:
    return ".".join(str(v) for v in version) if version else "(unknown version)"


_SWITCH_RE = re.compile(r"(?<![\w-])(--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


def parse_profile_switches(help_text: str) -> frozenset[str]:
    """Long switches (``--trace``, ``--gpu-metrics-devices``...) named in ``nsys profile --help``."""
    return frozenset(_SWITCH_RE.findall(help_text or ""))


def nsys_profile_switches(nsys: str, runner: Runner | None = None) -> frozenset[str] | None:
    """The switches this nsys' ``profile`` command knows, from ``nsys profile --help``.

    Returns None when the help could not be read or does not look like nsys help (so callers
    never refuse a capture because of an unexpected help format)."""
    run = runner or _default_runner
    try:
        proc = run([nsys, "profile", "--help"])
    except (OSError, NsysNotFoundError):
        return None
    switches = parse_profile_switches(f"{proc.stdout or ''}\n{proc.stderr or ''}")
    return switches if _looks_like_profile_help(switches) else None


def _looks_like_profile_help(switches: frozenset[str] | None) -> bool:
    return switches is not None and {"--trace", "--output"} <= switches


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
    extra_args: list[str] = field(default_factory=list)  # passed to nsys profile verbatim


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
    sampling = opts.cpu_sampling or opts.python_backtrace
    argv.append(f"--trace={','.join(trace)}")
    argv.append(f"--sample={_sample_value(version) if sampling else 'none'}")
    argv.append("--cuda-memory-usage=false")
    argv.append("--stats=false")

    # Output -- same table: --output/-o "Set the report file name" (nsys appends .nsys-rep);
    # --force-overwrite/-f true "overwrite all existing result files with same output filename".
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
    if opts.python_backtrace:
        argv.append("--cudabacktrace=sync")
        argv.append("--python-backtrace=cuda")

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


# ----------------------------------------------------------------------------------------------
# diagnosing a capture
# ----------------------------------------------------------------------------------------------

# Each rule: (name, patterns, one-line advice). First match wins; order = severity.
# Sources for the matched strings:
#  * "unrecognised option '--python-backtrace=cuda'": nsys 2023.1.2 rejecting a newer switch
#    (public user report quoting nsys output).
#  * Permissions: https://developer.nvidia.com/ERR_NVGPUCTRPERM ("ERR_NVGPUCTRPERM - The user does
#    not have permission to access NVIDIA GPU Performance Counters"; containers need
#    --cap-add=SYS_ADMIN), https://developer.nvidia.com/CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
#    (CAP_SYS_ADMIN), github.com/geoffxy/habitat/issues/5 (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES in a
#    container), github.com/NVIDIA/nvidia-docker/issues/1041 (--privileged), and nsys' own
#    "Insufficient privilege" for --gpu-metrics-devices (seen in public scripts that grep for it).
#  * Driver/CUDA/CUPTI mismatch: CUPTI result names (https://docs.nvidia.com/cupti/api/group__CUPTI__RESULT__API.html),
#    github.com/HPCToolkit/hpctoolkit/issues/367 (CUPTI_ERROR_NOT_INITIALIZED with an old driver),
#    github.com/geoffxy/habitat/issues/10 (CUPTI_ERROR_UNKNOWN from a driver mismatch),
#    github.com/NVIDIA/JAX-Toolbox/pull/545 (libcupti version mismatch under nsys);
#    libToolsInjection64.so is nsys' CUDA injection library. CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
#    cuptiSubscribe() returns it "if the application is launched with NVIDIA tools like Nsight
#    Systems" (https://docs.nvidia.com/cupti/api/group__CUPTI__CALLBACK__API.html).
#  * CPU sampling unavailable: nsys prints "WARNING: CPU IP/backtrace sampling not supported,
#    disabling. Try the 'nsys status --environment' command to learn more." and "CUDA backtraces
#    will not be collected because CPU sampling is disabled." (quoted in many public READMEs).
#  * Wrong process: https://forums.developer.nvidia.com/t/generating-cupti-tables-with-nsys/236268?page=2
#    (CUDA work in fork()ed children that never exec: "you need to add the
#    --trace-fork-before-exec true option"); the guide's --trace-fork-before-exec entry.
_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "old-nsys",
        (r"unrecogni[sz]ed option '([^']+)'", r"unknown option '?(--[\w-]+)"),
        "nsys rejected {arg}: this Nsight Systems is too old for that option; upgrade nsys "
        "(https://developer.nvidia.com/nsight-systems) or drop the option",
    ),
    (
        "permissions",
        (r"ERR_NVGPUCTRPERM", r"CUPTI_ERROR_INSUFFICIENT_PRIVILEGES", r"Insufficient privilege",
         r"/dev/nvidia[\w-]*: (?:Permission denied|Operation not permitted)",
         r"permission denied.{0,80}/dev/nvidia", r"perf_event_open.{0,80}(?:EACCES|EPERM|Permission denied)"),
        "nsys lacks permissions for GPU/CPU profiling: in Docker run with --cap-add SYS_ADMIN "
        "--cap-add SYS_PTRACE (or --privileged) and --gpus all so /dev/nvidia* is accessible; on bare "
        "metal see https://developer.nvidia.com/ERR_NVGPUCTRPERM (NVreg_RestrictProfilingToAdminUsers=0)",
    ),
    (
        "cupti-conflict",
        (r"CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",),
        "the program itself uses CUPTI (e.g. torch.profiler/Kineto), which cannot run under nsys: "
        "disable the in-process profiler while capturing with nsys",
    ),
    (
        "cupti",
        (r"CUPTI_ERROR_\w+", r"libToolsInjection\w*\.so", r"symbol lookup error",
         r"Unable to initialize CUPTI", r"[Ff]ailed to (?:load|initialize) (?:lib)?cupti",
         r"CUDA_ERROR_INSUFFICIENT_DRIVER", r"CUDA driver version is insufficient"),
        "CUDA events are missing because nsys could not hook into CUDA (driver vs CUDA/CUPTI version "
        "mismatch): update the NVIDIA driver or use the nsys that matches your CUDA toolkit, and make "
        "sure LD_LIBRARY_PATH does not mix CUDA versions",
    ),
)
_NO_CUDA_ADVICE = (
    "no CUDA activity was recorded although the command ran: the CUDA work probably runs in a child "
    "process nsys did not follow (fork without exec, e.g. some launchers/worker pools): retry with "
    "the extra nsys argument --trace-fork-before-exec=true, and check the program really uses the "
    "GPU (CUDA_VISIBLE_DEVICES)"
)
_SAMPLING_PATTERNS = (r"CPU IP/backtrace sampling not supported", r"CUDA backtraces will not be collected")
_SAMPLING_ADVICE = (
    "CPU sampling is not available here, so CPU/Python backtraces were not collected: run "
    "`nsys status --environment`; in Docker add --cap-add SYS_ADMIN, on the host lower "
    "/proc/sys/kernel/perf_event_paranoid (e.g. to 2 or less)"
)


def has_cuda_tables(tables: Iterable[str]) -> bool:
    return any(t.upper().startswith("CUPTI_ACTIVITY_KIND_") for t in tables)


def explain_capture_failure(stderr_text: str | None, sqlite_tables: set[str] | None) -> str | None:
    """One actionable line for a known capture failure mode, or None.

    ``stderr_text``: what nsys (and the program) wrote to stderr. ``sqlite_tables``: table names of
    the export, or None when there is no export to look at."""
    text = stderr_text or ""
    for name, patterns, advice in _RULES:
        for pattern in patterns:
            m = re.search(pattern, text, 0 if name.startswith("cupti") else re.IGNORECASE)
            if m:
                if name == "old-nsys":
                    return advice.format(arg=m.group(1) if m.groups() else "an option")
                return advice
    if sqlite_tables is not None and not has_cuda_tables(sqlite_tables):
        return _NO_CUDA_ADVICE
    if any(re.search(p, text) for p in _SAMPLING_PATTERNS):
        return _SAMPLING_ADVICE
    return None


# ----------------------------------------------------------------------------------------------
# SQLite exports: recognise, reuse, export
# ----------------------------------------------------------------------------------------------

def _readonly_uri(path: Path) -> str:
    # read-only and immutable: no journal/lock files are created next to the user's file
    return f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro&immutable=1"


def sqlite_tables(path: str | os.PathLike) -> set[str] | None:
    """Table names of an SQLite file (opened read-only), or None if it is not a readable SQLite file."""
    p = Path(path)
    if not p.is_file():
        return None
    try:
        con = sqlite3.connect(_readonly_uri(p), uri=True)
        try:
            return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")}
        finally:
            con.close()
    except sqlite3.Error:
        return None


def is_nsys_export(path: str | os.PathLike) -> bool:
    """True for an Nsight Systems SQLite export: ``StringIds`` plus ``META_DATA_EXPORT`` (nsys 2023+)
    or ``EXPORT_META_DATA`` (older)."""
    tables = sqlite_tables(path)
    return tables is not None and "StringIds" in tables and bool({"META_DATA_EXPORT", "EXPORT_META_DATA"} & tables)


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$NSYSDOC_CACHE_DIR``, else ``$XDG_CACHE_HOME/nsysdoc``, else ``~/.cache/nsysdoc``."""
    env = os.environ if environ is None else environ
    if env.get("NSYSDOC_CACHE_DIR"):
        return Path(env["NSYSDOC_CACHE_DIR"]).expanduser()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / "nsysdoc"
    return Path("~/.cache/nsysdoc").expanduser()


def _dir_writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def _sqlite_for(rep: Path) -> Path:
    return rep.with_suffix(".sqlite")


def _marker_for(sqlite_path: Path) -> Path:
    return sqlite_path.with_name(sqlite_path.name + MARKER_SUFFIX)


def _write_marker(sqlite_path: Path, rep: Path) -> None:
    """Record that nsysdoc wrote ``sqlite_path`` from ``rep`` (sidecar ``<name>.sqlite.nsysdoc``)."""
    s, r = sqlite_path.stat(), rep.stat()
    data = {
        "tool": "nsysdoc",
        "rep": str(rep.resolve()),
        "rep_size": r.st_size,
        "rep_mtime_ns": r.st_mtime_ns,
        "sqlite_size": s.st_size,
        "sqlite_mtime_ns": s.st_mtime_ns,
    }
    try:
        _marker_for(sqlite_path).write_text(json.dumps(data, indent=1) + "\n")
    except OSError:
        pass  # without a marker the file is treated as the user's: never overwritten, only reused


def owned_by_us(sqlite_path: str | os.PathLike, rep_path: str | os.PathLike) -> bool:
    """True when ``sqlite_path`` was exported by nsysdoc from ``rep_path`` and not modified since.

    Ownership is recorded in a sidecar ``<name>.sqlite.nsysdoc`` (JSON: report path, and the
    sqlite's size and mtime when we wrote it). The export's own META_DATA tables are not used: they
    do not reliably record the input report path across nsys versions."""
    sp = Path(sqlite_path)
    try:
        data = json.loads(_marker_for(sp).read_text())
        st = sp.stat()
    except (OSError, ValueError):
        return False
    return (
        isinstance(data, dict)
        and data.get("tool") == "nsysdoc"
        and data.get("rep") == str(Path(rep_path).resolve())
        and data.get("sqlite_size") == st.st_size
        and data.get("sqlite_mtime_ns") == st.st_mtime_ns
    )


def _fresh_export(sqlite_path: Path, rep: Path) -> bool:
    try:
        fresh = sqlite_path.stat().st_mtime_ns >= rep.stat().st_mtime_ns
    except OSError:
        return False
    return fresh and is_nsys_export(sqlite_path)


def cache_path_for(rep_path: str | os.PathLike, cache_dir: str | os.PathLike) -> Path:
    """``<cache_dir>/<key>/<stem>.sqlite``; key = hash of the report's resolved path, size, mtime."""
    rep = Path(rep_path).resolve()
    st = rep.stat()
    key = hashlib.sha256(f"{rep}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:20]
    return Path(cache_dir) / key / (rep.stem + ".sqlite")


def _tail_lines(text: str, n: int = STDERR_TAIL_LINES) -> str:
    lines = [ln.rstrip() for ln in re.split(r"[\r\n]+", text or "") if ln.strip()]
    return "\n".join(lines[-n:])


def _export(nsys: str, rep: Path, target: Path, runner: Runner) -> None:
    """Export ``rep`` to ``target`` atomically (temp file in the same folder, then rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.stem}.nsysdoc-tmp-{os.getpid()}.sqlite")
    argv = build_export_argv(nsys, rep, tmp)
    try:
        proc = runner(argv)
        if proc.returncode != 0 or not tmp.is_file():
            tail = _tail_lines(f"{proc.stdout or ''}\n{proc.stderr or ''}")
            raise NsysFailedError(
                f"nsys export failed for {rep} (exit {proc.returncode})",
                hint=tail or "run the export by hand: " + " ".join(argv),
            )
        if not is_nsys_export(tmp):
            raise NsysFailedError(f"nsys export of {rep} did not produce an nsys SQLite export")
        os.replace(tmp, target)
    finally:
        try:
            tmp.unlink()
        except OSError:
            pass
    _write_marker(target, rep)


def ensure_sqlite(
    rep_path: str | os.PathLike,
    *,
    nsys: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    runner: Runner | None = None,
    environ: Mapping[str, str] | None = None,
    is_writable: Callable[[Path], bool] | None = None,
) -> str:
    """SQLite export of an ``.nsys-rep`` (for ``nsysdoc report run.nsys-rep``); exports only if needed.

    1. ``run.sqlite`` next to the report is reused when it is an nsys export no older than the report.
    2. Otherwise it is (re-)exported next to the report when that folder is writable and
       ``run.sqlite`` is absent or was written by nsysdoc (see :func:`owned_by_us`).
    3. Otherwise (a ``.sqlite`` of the user's is in the way, or the folder is read-only) the export
       goes to the cache: ``<cache_dir>/<hash of report path+size+mtime>/run.sqlite``, reused while
       the report is unchanged. ``cache_dir`` defaults to :func:`default_cache_dir`.

    ``nsys`` is looked up (:func:`find_nsys`) only when an export is needed."""
    rep = Path(rep_path)
    if not rep.is_file():
        raise InputError(f"{rep}: no such file" if not rep.exists() else f"{rep}: not a file")
    writable = is_writable or _dir_writable
    run = runner or _default_runner

    beside = _sqlite_for(rep)
    if _fresh_export(beside, rep):
        return str(beside)

    if writable(rep.parent) and (not beside.exists() or owned_by_us(beside, rep)):
        target = beside
    else:
        cached = cache_path_for(rep, cache_dir if cache_dir is not None else default_cache_dir(environ))
        if _fresh_export(cached, rep):
            return str(cached)
        target = cached

    binary = find_nsys(nsys, environ)
    try:
        _export(binary, rep, target, run)
    except OSError as exc:
        raise NsysFailedError(f"cannot write the SQLite export {target}: {exc.strerror or exc}") from None
    return str(target)


def expand_inputs(paths: Sequence[str | os.PathLike]) -> list[str]:
    """Expand CLI inputs: files are kept (in order); a directory stands for all ``*.nsys-rep`` and
    ``*.sqlite`` in it (sorted), keeping one of ``x.nsys-rep``/``x.sqlite``: the sqlite when it is
    newer, else the report. Missing paths raise InputError."""
    out: list[str] = []
    seen: set[str] = set()

    def add(p: Path) -> None:
        key = str(p.resolve())
        if key not in seen:
            seen.add(key)
            out.append(str(p))

    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise InputError(f"{p}: no such file or directory")
        if not p.is_dir():
            add(p)
            continue
        by_stem: dict[str, dict[str, Path]] = {}
        for child in p.iterdir():
            if child.name.startswith(".") or not child.is_file():
                continue
            if child.suffix in (REP_SUFFIX, ".sqlite"):
                by_stem.setdefault(child.stem, {})[child.suffix] = child
        if not by_stem:
            raise InputError(f"{p}: no .nsys-rep or .sqlite files in this directory")
        for stem in sorted(by_stem):
            pair = by_stem[stem]
            rep, db = pair.get(REP_SUFFIX), pair.get(".sqlite")
            if rep and db:
                add(db if db.stat().st_mtime_ns > rep.stat().st_mtime_ns else rep)
            else:
                add(rep or db)  # type: ignore[arg-type]
    return out


# ----------------------------------------------------------------------------------------------
# running a capture
# ----------------------------------------------------------------------------------------------

@dataclass
class CaptureResult:
    rep_path: str
    sqlite_path: str | None
    program_exit_code: int  # exit code of `nsys profile`, which passes on the program's
    interrupted: bool
    nsys_stderr_tail: str
    diagnosis: str | None
    export_error: str | None = None  # why sqlite_path is None (the report is still there)
    nsys_version: tuple[int, ...] | None = None
    argv: list[str] = field(default_factory=list)


class _StderrTee:
    """Forward a child's stderr live to ``sink`` while keeping the last bytes for diagnosis."""

    def __init__(self, stream: IO[bytes], sink: IO[str] | None) -> None:
        self._stream = stream
        self._sink = sink
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._thread = threading.Thread(target=self._pump, name="nsys-stderr", daemon=True)
        self._thread.start()

    def _write(self, data: bytes) -> None:
        sink = self._sink if self._sink is not None else sys.stderr
        if sink is None:
            return
        try:
            buf = getattr(sink, "buffer", None)
            if buf is not None:
                sink.flush()
                buf.write(data)
                buf.flush()
            else:
                sink.write(data.decode("utf-8", "replace"))
                sink.flush()
        except (OSError, ValueError):
            pass  # closed terminal: keep collecting the tail

    def _pump(self) -> None:
        fd = self._stream.fileno()
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            self._write(data)
            self._chunks.append(data)
            self._size += len(data)
            while self._size > _STDERR_KEEP_BYTES and len(self._chunks) > 1:
                self._size -= len(self._chunks.popleft())

    def finish(self, timeout: float = 5.0) -> str:
        """Wait for EOF (a surviving grandchild may hold the pipe open: then stop waiting after
        ``timeout`` s and leave the daemon thread draining) and return what was collected."""
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._stream.close()
        return b"".join(list(self._chunks)).decode("utf-8", "replace")


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Signal the process group we created for nsys (pgid == its pid); never anything else."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _rep_signature(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def run_capture(
    nsys: str,
    opts: CaptureOptions,
    command: Sequence[str],
    *,
    runner: Runner | None = None,
    stderr_sink: IO[str] | None = None,
    now: datetime | None = None,
    environ: Mapping[str, str] | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> CaptureResult:
    """Profile ``command`` under ``nsys profile``, then export the report to SQLite.

    * The program's stdout goes straight to ours (inherited); nsys' stderr -- which, with nsys'
      default ``--show-output=true``, includes the program's stderr -- is forwarded live to
      ``stderr_sink`` (default ``sys.stderr``) and its tail kept.
    * nsys runs in its own process group, so a terminal Ctrl-C reaches only us: on
      KeyboardInterrupt SIGINT is sent once to nsys' process group, nsys is left to finish writing
      the report, and the result is marked ``interrupted``. A second Ctrl-C while waiting sends
      SIGTERM (then SIGKILL after 10 s) and re-raises KeyboardInterrupt.
    * A failing program still gets its report exported; ``program_exit_code`` is nsys' exit code,
      which passes on the program's (see docs/capture.md for that assumption).
    * Raises NsysFailedError (stderr tail in the hint) when nsys wrote no report.
    """
    run = runner or _default_runner
    version = nsys_version(nsys, run)
    switches = nsys_profile_switches(nsys, run)
    argv = build_profile_argv(nsys, opts, command, version=version, switches=switches, now=now)
    check_flag_support(version, argv, switches)

    base = next(a.split("=", 1)[1] for a in argv if a.startswith("--output="))
    rep = Path(base + REP_SUFFIX)
    old_rep = Path(base + OLD_REP_SUFFIX)
    before = {p: _rep_signature(p) for p in (rep, old_rep)}
    Path(base).parent.mkdir(parents=True, exist_ok=True)

    env = dict(os.environ if environ is None else environ)
    if opts.capture_range and opts.capture_range.lower() == "nvtx":
        # The guide: by default only NVTX *registered* strings are matched by --nvtx-capture;
        # torch.cuda.nvtx.range_push() does not register its strings, so opt into all strings.
        env.setdefault("NSYS_NVTX_PROFILER_REGISTER_ONLY", "0")

    try:
        proc = subprocess.Popen(argv, stdin=None, stdout=None, stderr=subprocess.PIPE, env=env, process_group=0)
    except FileNotFoundError:
        raise NsysNotFoundError(f"{nsys}: no such executable", hint=INSTALL_HINT) from None
    except PermissionError:
        raise NsysNotFoundError(f"{nsys}: not executable", hint=INSTALL_HINT) from None
    assert proc.stderr is not None
    tee = _StderrTee(proc.stderr, stderr_sink)

    interrupted = False
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        interrupted = True
        _signal_group(proc, signal.SIGINT)  # once: nsys stops collecting and writes the report
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
            raise
    stderr_text = tee.finish()
    if rc < 0:
        rc = 128 - rc  # killed by a signal: shell convention
    tail = _tail_lines(stderr_text)

    written = [p for p in (rep, old_rep) if _rep_signature(p) is not None and _rep_signature(p) != before[p]]
    if not written:
        diagnosis = explain_capture_failure(stderr_text, None)
        what = (
            "was interrupted before nsys wrote a report" if interrupted else f"failed (exit {rc}) and wrote no report"
        )
        hints = [h for h in (diagnosis, _no_report_hint(opts), tail) if h]
        raise NsysFailedError(f"nsys profile {what} ({rep})", hint="\n".join(hints) or None)
    rep_written = written[0]

    sqlite_path: str | None = None
    export_error: str | None = None
    try:
        sqlite_path = ensure_sqlite(rep_written, nsys=nsys, runner=run, environ=environ, cache_dir=cache_dir)
    except (NsysFailedError, NsysNotFoundError, InputError) as exc:
        export_error = exc.message + (f" ({exc.hint.splitlines()[-1]})" if exc.hint else "")

    tables = sqlite_tables(sqlite_path) if sqlite_path else None
    diagnosis = explain_capture_failure(stderr_text, tables)
    return CaptureResult(
        rep_path=str(rep_written),
        sqlite_path=sqlite_path,
        program_exit_code=rc,
        interrupted=interrupted,
        nsys_stderr_tail=tail,
        diagnosis=diagnosis,
        export_error=export_error,
        nsys_version=version,
        argv=argv,
    )


def _no_report_hint(opts: CaptureOptions) -> str | None:
    cr = (opts.capture_range or "").lower()
    if cr == "nvtx":
        return (f"no report: the NVTX range {opts.nvtx_capture!r} may never have been opened "
                "(check the name and domain; range@* matches any domain)")
    if cr == "cudaprofilerapi":
        return "no report: the program may never have called cudaProfilerStart() (torch.cuda.profiler.start())"
    return None
