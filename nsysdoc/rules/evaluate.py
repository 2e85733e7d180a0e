"""Load rules (built-in catalogue, team folders, project config) and turn metrics into findings."""
from __future__ import annotations

import math
import os
import re
import shlex
import stat
import tomllib
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..errors import RuleError
from . import policy, text
from . import text as text_m
from .expr import ExprError
from .spec import SEVERITIES, Rule, _key, _short, load_rule, load_yaml, validate
from .values import IDLE_CAUSES

from ..severity import WORST_FIRST  # noqa: E402

REQUIREMENT_REASONS = {
    "kernels": ("kernel_count", "needs CUDA kernel rows; the capture has none"),
    "gpu_activity": ("gpu_activity", "needs GPU activity (kernels, copies); the capture has none"),
    "cuda_api": ("cuda_api_traced", "needs CUDA API calls (nsys --trace=cuda); none were traced"),
    "nvtx": ("nvtx_traced", "needs NVTX ranges (nsys --trace=nvtx); none were traced"),
    "osrt": ("osrt_traced", "needs OS runtime calls (nsys --trace=osrt); none were traced"),
    "steps": ("has_steps", "needs training steps (NVTX ranges such as ProfilerStep#N, or GPU work that repeats); "
                           "none found"),
    "gpu_metrics": ("gpu_metrics_present", "needs GPU metrics (nsys --gpu-metrics-devices=all); none captured"),
    "memcpy": ("_memcpy_traced", "needs CUDA memcpy rows; the capture has none"),
    "sm_count": ("sm_count", "needs the GPU's SM count (smCount in TARGET_INFO_GPU, numSms in a PyTorch Profiler "
                             "trace's deviceProperties); the capture does not record it"),
    "memory": ("memory_recorded", "needs GPU memory events (torch.profiler profile_memory=True, nsys "
                                  "--cuda-memory-usage=true); the capture has none that could be read"),
}


def _not_recorded(result: dict) -> dict[str, dict]:
    """Trace types the tool that made the capture cannot record (``capture.not_recorded``)."""
    return {n["kind"]: n for n in (result.get("capture") or {}).get("not_recorded") or [] if isinstance(n, dict)}


def _requirement_reason(req: str, result: dict) -> str:
    """Why a rule needing ``req`` is skipped: the tool cannot record it, or it was not traced."""
    n = _not_recorded(result).get(req)  # requirement names are ``traced`` keys where they overlap
    return f"needs {n['what']}; {n['why']}" if n else REQUIREMENT_REASONS[req][1]


def builtin_rules_dir() -> Path:
    """The built-in catalogue: top-level ``rules/`` in the repository, installed as the package
    data folder ``nsysdoc/builtin_rules`` (see pyproject.toml)."""
    installed = Path(str(files("nsysdoc") / "builtin_rules"))
    if installed.is_dir():
        return installed
    source_tree = Path(__file__).resolve().parents[2] / "rules"
    if source_tree.is_dir() and (source_tree / "host-sync.yaml").is_file():
        return source_tree
    raise RuleError("the built-in rules are missing from this installation (nsysdoc/builtin_rules)",
                    hint="reinstall nsysdoc: pip install --force-reinstall nsysdoc")


# --- configuration ----------------------------------------------------------------------------
CONFIG_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "rule_dirs": {"type": "array", "items": {"type": "string"}},
        "fail_on": {"enum": list(SEVERITIES)},
        "step_marker": {"type": "string"},
        "rules": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": False,
            "properties": {"enabled": {"type": "boolean"}, "severity": {"enum": list(SEVERITIES)},
                           "params": {"type": "object"}}}},
    },
}


@dataclass
class Config:
    path: Path | None = None
    rule_dirs: list[Path] = field(default_factory=list)
    rules: dict[str, dict] = field(default_factory=dict)
    fail_on: str | None = None
    step_marker: str | None = None
    #: how ``path`` was chosen: "given" (``--config``), "found" (walking up from the current
    #: folder), "disabled" (``--no-config``), or None (nothing found)
    origin: str | None = None
    #: configuration files found walking up but not read, each ``{"path", "reason"}``
    #: (:func:`discover_config`); the command line prints :attr:`warnings`
    ignored: list[dict] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """One line per configuration file found but not read (for the caller to print)."""
        return [ignored_warning(i) for i in self.ignored]


CONFIG_NAMES = ("nsysdoc.yaml", ".nsysdoc.yaml")


@dataclass
class Discovery:
    """What walking up from a folder found: the configuration to read (or None) and the files
    that were passed over, each ``{"path", "reason"}``."""

    path: Path | None
    ignored: list[dict] = field(default_factory=list)


def ignored_warning(item: dict) -> str:
    return (f"{item['path']}: configuration not read: {item['reason']}; if you trust it, pass it with "
            f"--config")


def discover_config(start: Path | None = None) -> Discovery:
    """The nearest ``nsysdoc.yaml`` (or ``.nsysdoc.yaml``), else ``pyproject.toml`` with
    ``[tool.nsysdoc]``, in ``start`` (default: the current folder) or its parents, that can be
    trusted: a regular file owned by this user or root, writable by nobody else, in a folder
    owned by this user or root that nobody else can write to (a group that is the user's own
    private group does not count as others). Anything else found on the way is passed over,
    never opened (a FIFO cannot block the run) and listed in ``ignored`` with the reason, so the
    caller can say so; the walk then goes on upwards."""
    try:
        here = (start or Path.cwd()).resolve()
    except OSError:  # the current folder was removed: there is nothing above it to find
        return Discovery(None, [])
    ignored: list[dict] = []
    for d in (here, *here.parents):
        for name in (*CONFIG_NAMES, "pyproject.toml"):
            p = d / name
            try:
                os.lstat(p)
            except OSError:  # absent, or the folder cannot be listed
                continue
            reason = _distrust(p)
            if name == "pyproject.toml":
                if reason is None:
                    if _pyproject_is_ours(p):
                        return Discovery(p, ignored)
                elif _regular(p) and _pyproject_is_ours(p):  # another's, but it would have been read
                    ignored.append({"path": str(p), "reason": reason})
                continue
            if reason is None:
                return Discovery(p, ignored)
            ignored.append({"path": str(p), "reason": reason})
    return Discovery(None, ignored)


def find_config(start: Path | None = None) -> Path | None:
    """The configuration :func:`discover_config` picks (None when there is none it can trust)."""
    return discover_config(start).path


def _regular(p: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(p).st_mode)
    except OSError:
        return False


def _trusted_uid(uid: int) -> bool:
    return uid in (_uid(), 0)


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def _private_group(gid: int) -> bool:
    """Whether ``gid`` is the user's own group (a "user private group": same name as the user,
    the user's primary group, no other member), so group write access is the user's alone."""
    try:
        import grp
        import pwd

        user = pwd.getpwuid(_uid())
        group = grp.getgrgid(gid)
    except (ImportError, KeyError, OSError):
        return False
    return user.pw_gid == gid and group.gr_name == user.pw_name and not set(group.gr_mem) - {user.pw_name}


def _writable_by_others(st: os.stat_result) -> bool:
    return bool(st.st_mode & stat.S_IWOTH) or bool(st.st_mode & stat.S_IWGRP and not _private_group(st.st_gid))


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _distrust(p: Path) -> str | None:
    """Why a configuration file found by walking up must not be read, or None when it can be.
    Only ``stat``: the file is never opened here."""
    if hasattr(os, "getuid"):  # POSIX ownership and modes (Windows has neither)
        try:
            link = os.lstat(p)
            st = os.stat(p)
        except OSError as exc:
            return f"cannot be read ({exc.strerror or exc})"
        if not stat.S_ISREG(st.st_mode):
            return f"it is {_kind(st.st_mode)}, not a regular file"
        if stat.S_ISLNK(link.st_mode) and not _trusted_uid(link.st_uid):
            return f"it is a symlink owned by another user (uid {link.st_uid})"
        if not _trusted_uid(st.st_uid):
            return f"it is owned by another user (uid {st.st_uid})"
        if _writable_by_others(st):
            return "other users can write to it"
        folders = [p.parent]
        try:
            real = p.resolve().parent
        except (OSError, RuntimeError):
            return "it is a symlink that cannot be followed"
        if real != p.parent:
            folders.append(real)
        for folder in folders:
            try:
                fst = os.stat(folder)
            except OSError as exc:
                return f"its folder {folder} cannot be read ({exc.strerror or exc})"
            if not _trusted_uid(fst.st_uid):
                return f"its folder {folder} is owned by another user (uid {fst.st_uid})"
            if _writable_by_others(fst):
                return f"its folder {folder} can be written by other users"
        return None
    return None if _regular(p) else "it is not a regular file"


def _pyproject_is_ours(pp: Path) -> bool:
    """Whether a ``pyproject.toml`` found by walking up holds a ``[tool.nsysdoc]`` table. Any
    other one is not ours and is ignored, whatever it holds: invalid or non-UTF-8 TOML, ``tool``
    that is not a table, arrays nested past the parser's recursion limit, more than
    ``MAX_TEXT_BYTES``, a FIFO (an explicit ``--config`` gets those refused instead)."""
    from ..inputs import MAX_TEXT_BYTES

    try:
        fd = os.open(pp, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return False
    try:
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # replaced by a FIFO since: never read
                return False
            raw = fh.read(MAX_TEXT_BYTES + 1)
        if len(raw) > MAX_TEXT_BYTES or b"nsysdoc" not in raw:
            return False
        tool = tomllib.loads(raw.decode("utf-8").removeprefix("\ufeff")).get("tool")
    except (OSError, ValueError, RecursionError, MemoryError):  # TOMLDecodeError, UnicodeDecodeError are ValueErrors
        return False
    return isinstance(tool, dict) and isinstance(tool.get("nsysdoc"), dict)


def load_config(path: Path | None) -> Config:
    if path is None:
        return Config()
    path = Path(path)
    if not path.exists():
        raise RuleError(f"{path}: config file not found")
    if path.suffix == ".toml":
        from ..errors import InputError
        from ..inputs import read_text

        try:
            doc = tomllib.loads(read_text(path, "config"))
        except InputError as exc:
            raise RuleError(exc.message) from None
        except tomllib.TOMLDecodeError as exc:
            raise RuleError(f"{path}: invalid TOML: {str(exc)[:120]}") from None
        except RecursionError:
            raise RuleError(f"{path}: invalid TOML: nested too deeply") from None
        tool = doc.get("tool", {})
        data = tool.get("nsysdoc", {}) if isinstance(tool, dict) else {}
        if not isinstance(data, dict):
            raise RuleError(f"{path}: tool.nsysdoc: expected a table, got {_short(data)}")
        lines: dict = {}
    else:
        data, lines = load_yaml(path, "config")
        data = data or {}
    errs = validate(data, CONFIG_SCHEMA)
    if errs:
        key_path, msg = errs[0]
        line = lines.get(key_path) or lines.get(key_path[:1]) or 1
        raise RuleError(f"{path}:{line}: {'.'.join(_key(k) for k in key_path) or '(top)'}: {msg}")
    dirs = [_project_rule_dir(path, lines, i, d) for i, d in enumerate(data.get("rule_dirs", []))]
    return Config(path=path, rule_dirs=dirs,
                  rules=data.get("rules", {}), fail_on=data.get("fail_on"), step_marker=data.get("step_marker"))


def _project_rule_dir(path: Path, lines: dict, i: int, d: str) -> Path:
    """A config's ``rule_dirs`` entry, which must be inside the config's own folder (the project):
    a config can come with a repository, and a rule folder outside it (``~/.ssh``, ``/etc``)
    would have files that are no rules read and quoted in error lines. Refused in one line,
    before anything there is read; ``--rules`` takes a folder from anywhere."""
    base = path.parent
    project = base.resolve()
    try:
        real = (base / d).resolve()
        inside = real.is_relative_to(project)
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte
        inside = False
    if not inside:
        line = lines.get(("rule_dirs", i)) or lines.get(("rule_dirs",)) or 1
        raise RuleError(f"{path}:{line}: rule_dirs.{i}: {_short(d)} is outside the project folder {project}; a "
                        "configuration reads rules only from inside its own folder",
                        hint="move the rules into the project, or pass the folder with --rules")
    return base / d


# --- rule sets --------------------------------------------------------------------------------
@dataclass
class RuleSet:
    rules: list[Rule]
    disabled: set[str] = field(default_factory=set)
    forced_severity: dict[str, str] = field(default_factory=dict)
    param_values: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the team rule folders loaded, in order (the configuration's, then ``--rules``)
    rule_dirs: list[Path] = field(default_factory=list)

    def by_id(self, rule_id: str) -> Rule:
        for r in self.rules:
            if r.id == rule_id:
                return r
        import difflib

        close = difflib.get_close_matches(rule_id, [r.id for r in self.rules], n=1)
        raise RuleError(f"no rule {rule_id!r}" + (f"; did you mean {close[0]!r}?" if close else ""))


def check_inside(folder: Path, p: Path) -> None:
    """Refuse a rule or cases file that is a symlink to a file outside its folder (never read: a
    link to ``/etc/shadow`` or a ``.env`` must not be quoted in an error line, nor run as a rule).
    A link to another file of the same folder (or below it) is read as usual."""
    if not p.is_symlink():
        return
    try:
        inside = p.resolve().is_relative_to(Path(folder).resolve())
    except (OSError, RuntimeError):  # a symlink loop
        inside = False
    if not inside:
        raise RuleError(f"{p}: a symlink to a file outside the rules folder; refusing to read it",
                        hint="copy the rule into the folder (or link to one inside it)")


def load_dir(folder: Path, source: str) -> list[Rule]:
    folder = Path(folder)
    if not folder.is_dir():
        raise RuleError(f"{folder}: rules folder not found")
    rules = []
    for p in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")):
        if p.name.endswith((".cases.yaml", ".cases.yml")):
            continue
        check_inside(folder, p)
        rules.append(load_rule(p, source if source == "builtin" else str(p)))
    seen: dict[str, Path] = {}
    for r in rules:
        if r.id in seen:
            raise RuleError(f"{r.path}:1: id: rule {r.id!r} is also defined in {seen[r.id]}")
        seen[r.id] = r.path
    return rules


def _distinct_dirs(dirs) -> list[Path]:
    """The folders in order, each once: the same folder named twice (by the configuration and by
    ``--rules``, or by two spellings of one path) is loaded once."""
    out, seen = [], set()
    for d in dirs:
        d = Path(d)
        try:
            key = d.resolve()
        except (OSError, RuntimeError, ValueError):
            key = d
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def load_rules(rule_dirs: list[Path] | tuple = (), config: Config | None = None, builtin: bool = True) -> RuleSet:
    """Built-in rules, then each team folder (a team rule with a built-in's id replaces it; the
    same id in two team folders is refused, naming both files), then the project config's
    overrides (enabled / severity / params)."""
    config = config or Config()
    by_id: dict[str, Rule] = {}
    if builtin:
        for r in load_dir(builtin_rules_dir(), "builtin"):
            by_id[r.id] = r
    dirs = _distinct_dirs(list(config.rule_dirs) + [Path(x) for x in rule_dirs])
    for d in dirs:
        for r in load_dir(d, str(d)):
            prev = by_id.get(r.id)
            if prev is not None and prev.source != "builtin":
                raise RuleError(f"{r.path}:1: id: rule {r.id!r} is also defined in {prev.path}; a rule id may come "
                                "from one team rules folder only",
                                hint="rename one of them, or drop one folder from --rules / rule_dirs")
            if prev is not None:
                r = replace(r, replaces_builtin=True)
            by_id[r.id] = r
    rs = RuleSet(rules=sorted(by_id.values(), key=lambda r: r.id), rule_dirs=dirs)
    where = str(config.path) if config.path else "config"
    for rid, over in config.rules.items():
        if rid not in by_id:
            import difflib

            close = difflib.get_close_matches(rid, list(by_id), n=1)
            raise RuleError(f"{where}: rules.{str(rid)[:40]}: no such rule" + (f"; did you mean {close[0]!r}?" if close else ""))
        rule = by_id[rid]
        if over.get("enabled") is False:
            rs.disabled.add(rid)
        if "severity" in over:
            rs.forced_severity[rid] = over["severity"]
        for pname, pval in (over.get("params") or {}).items():
            if pname not in rule.params:
                import difflib

                close = difflib.get_close_matches(pname, list(rule.params), n=1)
                raise RuleError(f"{where}: rules.{rid}.params.{pname}: rule {rid!r} has no such parameter"
                                + (f"; did you mean {close[0]!r}?" if close else ""))
            default = rule.params[pname].default
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                if not isinstance(pval, (int, float)) or isinstance(pval, bool):
                    raise RuleError(f"{where}: rules.{rid}.params.{pname}: expected a number, got {_short(pval)}")
                if not math.isfinite(pval):  # a NaN threshold never compares true; inf always/never does
                    raise RuleError(f"{where}: rules.{rid}.params.{pname}: expected a finite number, got {pval}")
            elif type(pval) is not type(default):
                raise RuleError(f"{where}: rules.{rid}.params.{pname}: expected {type(default).__name__}, got {_short(pval)}")
            rs.param_values.setdefault(rid, {})[pname] = pval
    return rs


# --- evaluation -------------------------------------------------------------------------------
def tables(result: dict) -> dict[str, list[dict]]:
    """Evidence tables (rows of the result) by name; see ``values.TABLE_COLUMNS``."""
    from ..metrics.kernels import is_fp32_gemm, uses_tensor_cores

    m = result["metrics"]
    steps = []
    for s in result["steps"]:
        if not s["primary"]:
            continue
        row = dict(s)
        bd = s.get("breakdown_ms") or {}
        for k in [f"idle_{c}" for c in IDLE_CAUSES] + ["exposed_comm", "compute", "copy"]:
            row[f"{k}_ms"] = bd.get(k)
        steps.append(row)

    def kern(rows):
        return [{**r, "fp32_gemm": is_fp32_gemm(r["name"]), "tensor_cores": uses_tensor_cores(r["name"])} for r in rows]

    gaps = []
    for g in m["idle_gaps"]["longest"]:
        row = dict(g)
        for c, v in (g.get("split_ms") or {}).items():
            row[f"{c}_ms"] = v
        gaps.append(row)
    return {
        "steps": steps,
        "devices": result["devices"],
        "alloc_calls": m.get("alloc_calls") or [],
        "setup_events": (m.get("setup") or {}).get("events") or [],
        "kernels": kern(m["kernels"]["by_short_name"]),
        "kernels_by_name": kern(m["kernels"]["by_name"]),
        "copies": m["copies"],
        "sync_calls": m["sync"]["sync_calls"],
        "sync_threads": m["sync"]["host_sync_ms_by_thread"],
        "gaps": gaps,
        "dependency_waits": m["idle_gaps"].get("dependency_waits") or [],
        "underfilled_kernels": (m.get("underfilled") or {}).get("kernels") or [],
        "host_outside_phases": [{**p, "name": f"host phase {p['where']}"} for p in
                                ((result["capture"].get("host_outside_window") or {}).get("phases") or [])],
        **_memory_tables(m),  # issue 47
    }


def _memory_tables(m: dict) -> dict:
    from ..metrics.memory import memory_tables  # (pure; rules never import assembly)

    return memory_tables(m.get("memory"))


#: Wording that depends on the tool that made the capture (``source.tool``): rule messages name the
#: Nsight Systems GUI and nsys switches for an nsys export, a trace viewer and torch.profiler switches
#: for a PyTorch Profiler trace (docs/kineto.md). Engine values: rules quote them as ``{name}``.
TOOL_WORDING: dict[str, dict[str, str]] = {
    "nsys": {
        "trace_viewer": "the Nsight Systems GUI",
        "trace_timeline": "the Nsight Systems timeline",
        "capture_check": ("Check the capture command and the Diagnostics Summary of the report in the Nsight Systems "
                          "GUI (or the capture section below, which quotes nsys's own messages)."),
        "stack_switch": "with --python-backtrace=cuda (nsysdoc capture --python-backtrace)",
        "copy_rows": "the CUDA HW row is filled by [CUDA memcpy Host-to-Device] (or Device-to-Host) blocks",
        "kernel_summary_cmd": "nsys stats -r cuda_gpu_kern_sum",
        "pageable_check": ('In the timeline\'s CUDA HW row the memcpy is labelled "Pageable" (nsys memory kind 0); '
                           "nsys analyze -r cuda_memcpy_async lists the same copies."),
        "cpu_sampling_capture": "Capture with CPU sampling (nsys profile --sample=process-tree, or nsysdoc capture "
                                "--cpu-sampling)",
        "host_ranges": "NVTX ranges",
        "steady_capture": ("capture with nsysdoc capture --delay SECONDS, or mark steps and use "
                           "--capture-range=cudaProfilerApi with torch.cuda.profiler.start()/stop() or "
                           "--capture-range=nvtx"),
    },
    "pytorch-profiler": {
        "trace_viewer": "the trace viewer (ui.perfetto.dev, chrome://tracing or TensorBoard's trace view)",
        "trace_timeline": "the trace viewer's timeline (ui.perfetto.dev, chrome://tracing or TensorBoard's trace view)",
        "capture_check": ("Check the torch.profiler.profile call that wrote the trace: activities "
                          "(ProfilerActivity.CPU and ProfilerActivity.CUDA), the schedule (wait, warmup, active "
                          "steps) and prof.step() once per iteration (or the capture section below)."),
        "stack_switch": "with torch.profiler.profile(with_stack=True)",
        "copy_rows": "the GPU stream rows are filled by Memcpy HtoD (or DtoH) blocks",
        "kernel_summary_cmd": 'prof.key_averages().table(sort_by="count")',
        "pageable_check": ('In the trace viewer the copy is named "Memcpy HtoD (Pageable -> Device)" (or DtoH '
                           '"Device -> Pageable"), and the cudaMemcpyAsync call above it lasts as long as the copy.'),
        "cpu_sampling_capture": ("Profile with with_stack=True (torch.profiler.profile(with_stack=True): the Python "
                                 "frames of the operators)"),
        "host_ranges": "torch.profiler.record_function ranges",
        "steady_capture": ("profile with schedule=torch.profiler.schedule(wait=1, warmup=2, active=5) and call "
                           "prof.step() every iteration, so that the trace holds steady steps only"),
    },
}


def _tool(result: dict) -> str:
    tool = (result.get("source") or {}).get("tool")
    return tool if tool in TOOL_WORDING else "nsys"


def _extras(result: dict) -> dict:
    v = result["metrics"]["values"]
    extra: dict[str, Any] = {"_memcpy_traced": result["capture"]["traced"].get("cuda_memcpy", False)}
    kineto = _tool(result) == "pytorch-profiler"
    extra.update(TOOL_WORDING[_tool(result)])
    short = v.get("top_kernel_short_name")
    if short:
        count = v.get("top_kernel_count") or 1
        skip = min(10, max(count // 2, 0)) if count > 1 else 0
        from ..metrics.kernels import ncu_kernel_filter

        safe = re.sub(r"[^A-Za-z0-9_]+", "_", short)[:40] or "kernel"
        base, pattern = ncu_kernel_filter(short)  # a name built from a generic short name: its type
        extra["ncu_command"] = (
            f"ncu --kernel-name-base {base} --kernel-name {shlex.quote(pattern)} "
            f"--launch-skip {skip} --launch-count 1 --set full -o {safe}_ncu <your training command>")
    else:
        extra["ncu_command"] = None
    problems = []
    cap = result["capture"]
    if not v.get("gpu_activity"):
        problems.append("no GPU activity was recorded")
    elif not v.get("kernel_count") and v.get("launch_call_count"):
        problems.append(f"{v['launch_call_count']} kernel launch call(s) were recorded but no kernel execution: "
                        "GPU activity was not recorded")
    elif not v.get("kernel_count"):
        loads = v.get("module_load_count") or 0
        problems.append(f"no kernel was captured: the GPU activity is {v.get('gpu_op_count') or 0} copy/memset "
                        "operation(s)" + (f", and {loads} module/library load call(s) show the program loaded GPU code"
                                          if loads else "") + ", so its kernel launches were not traced (or it has none)")
    elif cap.get("not_judgeable_reason"):
        problems.append(cap["not_judgeable_reason"])
    for n in cap.get("nsys_notes") or []:
        if n["kind"] == "no-cuda" and v.get("kernel_count"):
            continue  # said by processes that did no CUDA work (a launcher, pytest workers)
        times = f" ({n['count']} times)" if n["count"] > 1 else ""
        problems.append(f'nsys says: "{n["text"].rstrip(".")}"{times}')
    if not v.get("has_step_markers"):
        problems.append(_no_steps_text(result))
    elif (v.get("step_count") or 0) < 3:
        problems.append(f"only {v.get('step_count')} step(s) captured; capture at least 3-5 after warm-up")
    if not v.get("has_steps") and (v.get("setup_pct") or 0) >= 15 and not v.get("warmup_ms"):
        problems.append(f"one-time set-up runs through the capture ({v['setup_pct']:.0f}% of the GPU span), so no "
                        "steady state could be separated from it")
    if cap.get("steps_set_aside"):
        problems.append(cap["steps_set_aside"]["description"])
    for x in cap.get("excluded") or []:
        what = {"warm-up": "one-time set-up at the start", "idle head": "an idle stretch at the start",
                "idle tail": "an idle stretch at the end",
                "copies before the first kernel": "copies before the first kernel (data or weights uploaded "
                                                  "before any kernel ran)",
                "set-up phase": f"the set-up phase '{str(x.get('text') or '')[:60]}' before the first kernel",
                "before the loop range": f"what comes before the range '{str(x.get('text') or '')[:60]}' around "
                                         "the measured loop (warm-up, set-up)"
                }.get(x["kind"], x["kind"])
        problems.append(f"the analysis window leaves out {x['duration_ms']:,.1f} ms of {what}")
    if (v.get("profiler_overhead_pct") or 0) >= 5:
        problems.append(f"profiler overhead covers {v['profiler_overhead_pct']:.1f}% of the window")
    problems += _support_problems(v, kineto)
    unrecordable = _not_recorded(result)
    switches = ((("cuda_api_traced", "cuda_api", "CUDA API calls (ProfilerActivity.CUDA) were"),
                 ("nvtx_traced", "nvtx", "CPU operators and annotations (ProfilerActivity.CPU) were"),
                 ("osrt_traced", "osrt", "OS runtime calls were")) if kineto else
                (("cuda_api_traced", "cuda_api", "CUDA API (--trace=cuda) was"),
                 ("nvtx_traced", "nvtx", "NVTX (--trace=nvtx) was"),
                 ("osrt_traced", "osrt", "OS runtime (--trace=osrt) was")))
    for flag, kind, what in switches:
        if kind in unrecordable:
            problems.append(f"{unrecordable[kind]['what']} are {unrecordable[kind]['why']}")
        elif not v.get(flag):
            problems.append(f"{what} {'not recorded' if kineto else 'not traced'}")
    cc, tf32 = v.get("compute_capability"), v.get("tf32_capable")
    if tf32 is True:
        extra["fp32_advice"] = (f"This GPU (compute capability {cc:.1f}) runs them on tensor cores with TF32, or with "
                                "bf16/fp16, several times faster.")
        extra["fp32_fix"] = ("Enable TF32 (torch.backends.cuda.matmul.allow_tf32 = True and "
                             "torch.backends.cudnn.allow_tf32 = True, or torch.set_float32_matmul_precision(\"high\")), "
                             "or train with AMP (torch.autocast with bf16 or fp16).")
    elif tf32 is False and cc is not None and cc >= 7.0:
        extra["fp32_advice"] = (f"This GPU (compute capability {cc:.1f}) has no TF32, but its tensor cores run fp16 "
                                "several times faster than FP32.")
        extra["fp32_fix"] = ("Train with AMP: torch.autocast(device_type=\"cuda\", dtype=torch.float16) with a "
                             "GradScaler (TF32 needs compute capability 8.0, Ampere, or newer).")
    elif tf32 is False:
        extra["fp32_advice"] = (f"This GPU (compute capability {cc:.1f}) has no tensor cores: fp16 (AMP) may still "
                                "help where the GPU has fast fp16 math; otherwise the gain needs a newer GPU.")
        extra["fp32_fix"] = ("Try AMP (torch.autocast with fp16) and measure; tensor cores need compute capability "
                             "7.0 (Volta) or newer, TF32 needs 8.0 (Ampere).")
    else:
        extra["fp32_advice"] = ("On GPUs with tensor cores, TF32 (compute capability 8.0, Ampere, and newer) or "
                                "bf16/fp16 (7.0 and newer) run these several times faster.")
        extra["fp32_fix"] = ("On Ampere or newer enable TF32 (torch.backends.cuda.matmul.allow_tf32 = True, "
                             "torch.backends.cudnn.allow_tf32 = True, or torch.set_float32_matmul_precision(\"high\")); "
                             "on any GPU with tensor cores train with AMP (torch.autocast with bf16 or fp16).")
    left_out = max((v.get("setup_ms") or 0) - (v.get("idle_setup_ms") or 0) - (v.get("alloc_growth_ms") or 0), 0)
    extra["warmup_note"] = (f"The analysis window leaves {text.duration(left_out * 1e6)} of it out, so the other "
                            "findings describe the steady state." if left_out > 0.5 * (v.get("setup_ms") or 0) else
                            "The analysis window still contains most of it: capture after warm-up to see the "
                            "steady state.")
    extra["launch_ratio_note"] = _launch_ratio_note(v)
    extra["pageable_cost_note"] = _pageable_cost_note(v)
    extra["capture_problems"] = "; ".join(problems) if problems else None
    extra["capture_fix"] = _capture_fix(v, cap, unrecordable, kineto)
    extra["capture_problem_count"] = len(problems)
    return extra


#: Idle time that stays unexplained (class ``unattributed``) from this share of the window is named
#: among the capture's problems, with what the capture lacks (issue 46).
UNEXPLAINED_IDLE_MIN_PCT = 10.0


def _support_problems(v: dict, kineto: bool) -> list[str]:
    """What the capture cannot support (:mod:`nsysdoc.metrics.capture_checks`): GPU work not
    recorded under a blocking call, idle time no launching call explains or that follows the last
    GPU operation (above ``UNEXPLAINED_IDLE_MIN_PCT`` % of the window), a sliver of GPU work."""
    out = []
    n = v.get("unrecorded_call_count") or 0
    if n:
        more = f" ({n} such blocking calls, {text.duration((v.get('unrecorded_gpu_ms') or 0) * 1e6)} in all)" if n > 1 else ""
        out.append(f"GPU work not recorded: {v.get('unrecorded_call_name')} lasts "
                   f"{text.duration((v.get('unrecorded_call_ms') or 0) * 1e6)}, recorded GPU work covers only its first "
                   f"{text.duration((v.get('unrecorded_covered_ms') or 0) * 1e6)}{more}; the host waited on GPU work the "
                   "capture does not hold, so GPU busy time and the bound it suggests cannot be trusted")
    pct = v.get("idle_unattributed_pct")
    if isinstance(pct, (int, float)) and pct > UNEXPLAINED_IDLE_MIN_PCT and v.get("cuda_api_traced") is False:
        # no launching call is known because no CUDA API call was recorded at all (said by its own line)
        out.append(f"{text.duration((v.get('idle_unattributed_ms') or 0) * 1e6)} ({pct:.1f}% of the window) of GPU "
                   "idle cannot be explained: no CUDA API call was recorded, so nothing says what the host was doing "
                   "when the GPU went idle")
    elif isinstance(pct, (int, float)) and pct > UNEXPLAINED_IDLE_MIN_PCT:
        how = ("record CUDA activity and runtime calls of every thread (ProfilerActivity.CUDA), or capture with "
               "Nsight Systems (nsys profile --trace=cuda --cuda-um-cpu-page-faults=true "
               "--cuda-um-gpu-page-faults=true --cuda-graph-trace=node)") if kineto else (
               "trace CUDA API calls of every process and thread (--trace=cuda), unified-memory page faults "
               "(--cuda-um-cpu-page-faults=true --cuda-um-gpu-page-faults=true) and CUDA graphs node by node "
               "(--cuda-graph-trace=node)")
        out.append(f"{text.duration((v.get('idle_unattributed_ms') or 0) * 1e6)} ({pct:.1f}% of the window) of GPU "
                   "idle ends in operations with no recorded launching call (unified-memory migrations, driver or "
                   f"graph work), so what the GPU waited on is unknown: {how}")
    tail = v.get("idle_tail_pct")
    if isinstance(tail, (int, float)) and tail > UNEXPLAINED_IDLE_MIN_PCT:
        out.append(f"{text.duration((v.get('idle_tail_ms') or 0) * 1e6)} ({tail:.1f}% of the window) of GPU idle comes "
                   "after the last GPU operation: the window ends with host work that launches nothing the capture "
                   "holds (the last step's tail, tear-down), so it cannot say what comes next; capture more steps")
    if v.get("gpu_work_sliver"):
        share = v.get("busy_capture_share_pct")
        out.append(f"the window holds only {text.duration((v.get('busy_ms') or 0) * 1e6)} of GPU work"
                   + (f" ({share:.3g}% of the capture from the first CUDA call on)"
                      if isinstance(share, (int, float)) else "")
                   + f", under {SLIVER_TEXT}: findings other than set-up, the capture's own and those measured over "
                     "the whole capture are info at most")
    return out


SLIVER_TEXT = "1 ms or 0.1% of the capture from the first CUDA call on"


#: What to change in the capture, worded for the tool that made it (nsys, or the PyTorch Profiler:
#: torch.profiler's switches). :func:`_capture_fix` picks one text per problem.
_FIX_TEXTS = {
    "nsys": {
        "no_activity": "Make CUDA activity recording work: match the driver and CUDA versions (a mismatch breaks "
                       "CUPTI), give containers the /dev/nvidia* devices and SYS_ADMIN, and trace the process that "
                       "does the GPU work (with launchers such as torchrun, the whole process tree).",
        "no_markers": 'Mark training steps with NVTX ranges (the PyTorch profiler\'s ProfilerStep#N, or '
                      'torch.cuda.nvtx.range("step N") around each step).',
        "few_steps": "Capture at least 3-5 steps after warm-up.",
        "steady": "Capture the steady state after warm-up: nsysdoc capture --delay SECONDS, or "
                  "--capture-range=cudaProfilerApi with torch.cuda.profiler.start()/stop() around 5-10 steps.",
        "overhead": "Keep the capture short and the trace types few: profiler overhead inflates step times.",
    },
    "pytorch-profiler": {
        "no_activity": "Make CUDA activity recording work: match the driver and CUDA versions (a mismatch breaks "
                       "CUPTI), give containers the /dev/nvidia* devices, and profile inside the process that does "
                       "the GPU work.",
        "no_markers": "Mark training steps: call prof.step() once per iteration inside torch.profiler.profile (it "
                      'writes ProfilerStep#N), or wrap each step in torch.profiler.record_function("train_step").',
        "few_steps": "Profile at least 3-5 steps after warm-up (torch.profiler.schedule(wait=1, warmup=2, active=5)).",
        "steady": "Profile the steady state after warm-up: schedule=torch.profiler.schedule(wait=1, warmup=2, "
                  "active=5) with prof.step() every iteration leaves the first steps out of the trace.",
        "overhead": "Keep the profiled range short and the switches few (record_shapes, with_stack and "
                    "profile_memory add overhead): profiler overhead inflates step times.",
    },
}


def _capture_fix(v: dict, cap: dict, unrecordable: dict | None = None, kineto: bool = False) -> str:
    """What to change in the capture, only for what this capture actually lacks, in the words of
    the tool that made it (``kineto``: torch.profiler's switches, not nsys's)."""
    texts = _FIX_TEXTS["pytorch-profiler" if kineto else "nsys"]
    todo = []
    unrecordable = unrecordable or {}
    if not v.get("kernel_count") and v.get("cuda_api_traced"):
        todo.append(texts["no_activity"])
    if kineto:
        missing = [a for a, kind, flag in (("ProfilerActivity.CUDA", "cuda_api", "cuda_api_traced"),
                                           ("ProfilerActivity.CPU", "nvtx", "nvtx_traced"))
                   if not v.get(flag) and kind not in unrecordable]
        if missing:
            todo.append(f"Add {' and '.join(missing)} to the profiler's activities "
                        "(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]).")
    else:
        missing = [t for t, kind, flag in (("cuda", "cuda_api", "cuda_api_traced"), ("nvtx", "nvtx", "nvtx_traced"),
                                           ("osrt", "osrt", "osrt_traced")) if not v.get(flag) and kind not in unrecordable]
        if missing:
            todo.append(f"Trace {', '.join(missing)} as well (nsysdoc capture traces cuda,nvtx,osrt).")
    wanted = [n["what"] for k, n in unrecordable.items() if k in ("cuda_api", "nvtx", "osrt", "gpu_metrics")]
    if wanted:
        todo.append(f"For {' and '.join(wanted)}, capture with Nsight Systems as "
                    "well (nsysdoc capture traces cuda,nvtx,osrt; add --gpu-metrics-devices all for GPU metrics).")
    if not v.get("has_step_markers"):
        todo.append(texts["no_markers"])
    elif (v.get("step_count") or 0) < 3:
        todo.append(texts["few_steps"])
    if v.get("kernel_count") and (cap.get("enough_gpu_work") is False or
                                  ((v.get("setup_pct") or 0) >= 15 and not v.get("warmup_ms"))):
        todo.append(texts["steady"])
    if v.get("lost_event_notes") and not kineto:
        todo.append("Nsight Systems may have lost events: let the program exit normally (buffers are flushed "
                    "at exit), flush periodically, or capture a shorter range.")
    if (v.get("profiler_overhead_pct") or 0) >= 5:
        todo.append(texts["overhead"])
    return " ".join(todo) or "Nothing to change in the capture."


def _format(template: str, env: dict) -> str:
    """Fill a message template (``nsysdoc.rules.text``: ``{name:spec}``, ``:time``, ``:bytes``,
    optional ``[[ ... ]]`` parts)."""
    return text.render(template, env)


def _num(x):
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, (int, float)):
        return None if isinstance(x, float) and (math.isnan(x) or math.isinf(x)) else round(float(x), 4)
    return None


def evaluate(rs: RuleSet, result: dict) -> tuple[list[dict], list[dict]]:
    """Findings (ranked by impact) and one status per rule."""
    values = dict(result["metrics"]["values"])
    values.update(_extras(result))
    tabs = tables(result)
    findings, statuses = [], []
    window = result["capture"]["window"]
    for rule in rs.rules:
        status = {"rule": rule.id, "source": rule.source, "replaces_builtin": rule.replaces_builtin}
        if rule.id in rs.disabled:
            statuses.append({**status, "status": "disabled", "reason": "disabled in the project config"})
            continue
        missing = [_requirement_reason(r, result) for r in rule.requires if not values.get(REQUIREMENT_REASONS[r][0])]
        if missing:
            statuses.append({**status, "status": "skipped", "reason": "; ".join(missing)})
            continue
        params = {n: p.default for n, p in rule.params.items()}
        params.update(rs.param_values.get(rule.id, {}))
        env = {**values, **params}
        absent = sorted(n for n in rule.when.names - rule.when.guarded if env.get(n) is None)
        if absent:  # never "passed" on missing data: say what is missing
            statuses.append({**status, "status": "skipped",
                             "reason": "metric(s) not available in this capture: " + ", ".join(absent)})
            continue
        try:
            finding = _evaluate_rule(rule, rs, env, values, tabs, result, window)
        except (ExprError, ArithmeticError, TypeError, ValueError, KeyError, RecursionError, MemoryError) as exc:
            # one broken team rule must not take the report down: it is reported, the rest run
            reason = exc.args[0] if isinstance(exc, ExprError) and exc.args else f"{type(exc).__name__}: {exc}"
            statuses.append({**status, "status": "broken", "reason": f"{rule.path}: {str(reason)[:200]}"})
            continue
        if finding is None:
            statuses.append({**status, "status": "passed", "reason": None})
            continue
        findings.append(finding)
        statuses.append({**status, "status": "fired", "reason": None})
    from .verdict import rank_findings, steady_state_judgeable

    # the one order of the findings list (JSON, page, Markdown, terminal), which the verdict follows
    return rank_findings(findings, steady_state_judgeable(result)), statuses


#: A cost per step is given only when the steps hold at least this share of the cost in the window.
PER_STEP_MIN_SHARE = 0.5


def _steps_share(result: dict) -> float:
    """The share of the window the primary steps cover: per process, the sum of its primary steps'
    durations; their mean over the processes with steps, over the window, at most 1."""
    win = ((result.get("capture") or {}).get("window") or {}).get("duration_ms") or 0
    by: dict = {}
    for s in result.get("steps") or []:
        if s.get("primary") and isinstance(s.get("duration_ms"), (int, float)):
            by[s.get("pid")] = by.get(s.get("pid"), 0.0) + s["duration_ms"]
    if not by or not win:
        return 1.0
    return min(1.0, sum(by.values()) / len(by) / win)


def _evaluate_rule(rule: Rule, rs: RuleSet, env: dict, values: dict, tabs: dict, result: dict, window: dict) -> dict | None:
    """The rule's finding, or None when its condition does not hold. Raises on a broken rule."""
    if not rule.when.evaluate(env):
        return None
    impact = _num(rule.impact_ms.evaluate(env)) if rule.impact_ms else None
    steps_n = values.get("step_count") or 0
    if rule.impact_ms_per_step is not None:
        per_step = _num(rule.impact_ms_per_step.evaluate(env))
    elif "impact_ms_per_step" in rule.raw:  # explicitly null: the cost does not recur per step
        per_step = None
    else:
        # the cost in the window spread evenly over it: the steps' share of it, per step (a
        # window longer than its primary steps -- a trimmed one, a process without steps -- does
        # not put its whole cost in the steps)
        per_step = _num(impact * _steps_share(result) / steps_n) if impact is not None and steps_n else None
    if per_step is not None and impact is not None and steps_n and per_step * steps_n > impact:
        # never more per step than the cost in the window allows (several processes with unequal
        # step counts, or a process without steps beside them)
        per_step = _num(impact / steps_n)
    if per_step is not None and impact and steps_n and per_step * steps_n < PER_STEP_MIN_SHARE * impact:
        # the cost lies mostly outside the steps (before the first, between or after them): a
        # cost per step would say it is small when it is not; it is given in the window
        per_step = None
    win = window.get("duration_ms")
    if rule.impact_pct is not None:
        impact_pct = _num(rule.impact_pct.evaluate(env))
    else:  # impacts are wall-clock time of one GPU (values average over devices)
        impact_pct = _num(impact / win * 100) if impact is not None and win else None
    judgeable = bool(values.get("enough_gpu_work", True)) or rule.scope == "capture" or (
        rule.scope == "host" and bool(values.get("kernel_count")) and (win or 0) >= policy.HOST_JUDGE_MIN_WINDOW_MS)
    severity = _severity(rule, env, rs.forced_severity.get(rule.id), impact_pct, judgeable)
    if values.get("gpu_work_sliver") and not rs.forced_severity.get(rule.id) and not _sliver_exempt(rule):
        severity = "info"  # a sliver of GPU work: nothing but set-up and the capture's own problems is judged
    finding = {
        "rule": rule.id, "severity": severity, "category": rule.category, "title": rule.title,
        "message": _format(rule.message, env).strip(),
        "impact_ms": impact, "impact_ms_per_step": per_step,
        "impact_pct": impact_pct,
        "impact_of": str(rule.raw.get("impact_of") or "analysis window"),
        # "framing": about the capture's framing (one-time set-up), not the steady state
        "phase": rule.phase,
        "evidence": _evidence(rule, tabs, env),
        "verify": _format(rule.verify, env).strip(), "fix": _format(rule.fix, env).strip(),
        "references": list(rule.references),
        "time_ranges": _time_ranges(rule, result, tabs),
        "source": rule.source, "replaces_builtin": rule.replaces_builtin,
    }
    finding["where"], finding["where_note"] = _where(rule, result)
    # issue 48: the median step's time before and after this rule's fix, replayed on its graph
    what_if = (((result.get("metrics") or {}).get("critical_path") or {}).get("what_if") or {}).get(rule.id)
    finding["what_if"] = dict(what_if) if isinstance(what_if, dict) else None
    if rule.id == "gpu-dependency":  # issue 48: what the GPU waited on, from the graph
        dep = ((result.get("metrics") or {}).get("critical_path") or {}).get("dependency")
        finding["dependency"] = dep if isinstance(dep, dict) else None
    return finding


def _sliver_exempt(rule: Rule) -> bool:
    """Rules that keep their severity when the window holds a sliver of GPU work (glossary "What the
    capture can support"): the capture's own problems, set-up (framing) and rules measured over
    the whole capture (``scope: capture``)."""
    return rule.category == "capture" or rule.phase == "framing" or rule.scope == "capture"


def _pageable_cost_note(v: dict) -> str:
    """What pinning the pageable copies would save, or that it would save nothing measurable."""
    ref, save = v.get("pinned_gbps_reference"), v.get("pageable_saving_ms")
    if not isinstance(ref, (int, float)) or not isinstance(save, (int, float)):
        return ""
    where = "as pinned copies reach in this capture" if v.get("pinned_gbps_measured") else \
        "typical of pinned copies on this GPU's PCIe generation"
    if save < 0.0005:
        return (f"They already move about as fast as pinned memory would ({ref:.1f} GB/s, {where}), so pinning "
                "would save no measurable time; they still block the host while they run.")
    return f"At {ref:.1f} GB/s ({where}) they would take {text.duration(save * 1e6)} less."


def _step_candidates(result: dict, k: int = 3) -> list[dict]:
    """NVTX ranges that repeat like steps (3 times or more, not a library's, no operator, not a part
    of another repeated range), step-like names first, then most time first."""
    from ..trace.schema import LIBRARY_NVTX_DOMAINS

    rows = (result.get("metrics") or {}).get("nvtx") or []
    # texts that are data (pyprof's dict texts, multi-line ones) or markup-like are no step names;
    # a range looks like a step when it repeats and is no operator (aten::mul, a::b) nor data text
    out = [r for r in rows if isinstance(r, dict) and (r.get("count") or 0) >= 3 and r.get("text")
           and str(r.get("domain") or "").lower() not in LIBRARY_NVTX_DOMAINS
           and "::" not in str(r["text"]) and not str(r["text"]).lower().startswith("aten")
           and not str(r["text"]).lstrip().startswith(("{", "[")) and not any(c in str(r["text"]) for c in "\n{}<>")]

    def nested(b: dict) -> bool:
        # b repeats a whole number of times per repetition of a longer range a, and its time per
        # repetition of a fits inside a's: a part of a (a layer in a step, a forward pass in it)
        return any(a is not b and b["count"] % a["count"] == 0 and (a.get("mean_ms") or 0) > (b.get("mean_ms") or 0)
                   and (b.get("mean_ms") or 0) * (b["count"] // a["count"]) <= 1.05 * (a.get("mean_ms") or 0)
                   for a in out)

    out = [r for r in out if not nested(r)]
    from ..trace.schema import is_step_like

    out.sort(key=lambda r: (not is_step_like(r["text"]), -(r.get("total_ms") or 0)))
    return out[:k]


def _no_steps_text(result: dict) -> str:
    """Why nothing is per step: the default pattern found no step ranges, or the user's
    ``--step-marker`` matched nothing; with the ranges that repeat like steps and the option that
    would use one of them."""
    from ..trace.schema import DEFAULT_STEP_PATTERN

    pattern = (result.get("capture") or {}).get("step_pattern") or DEFAULT_STEP_PATTERN
    cands = _step_candidates(result)
    if pattern != DEFAULT_STEP_PATTERN:
        what = "CPU operator or annotation" if _tool(result) == "pytorch-profiler" else "NVTX"
        text = f"no {what} range matches the step marker '{pattern}' (--step-marker), so nothing is per step"
    elif _tool(result) == "pytorch-profiler":
        text = ("no training-step markers (ProfilerStep#N ranges, which prof.step() writes), so nothing is per "
                "step")
    else:
        text = "no training-step markers (NVTX ranges such as ProfilerStep#N), so nothing is per step"
    cap = result.get("capture") or {}
    if cap.get("steps_set_aside"):
        text = "the step markers were set aside (they hold too little of the GPU work), so nothing is per step"
    inferred = cap.get("steps_inferred")
    if inferred and inferred.get("method") == "one training step":
        text = text.replace(", so nothing is per step", "") + (
            "; the capture holds one training step (forward, backward and optimizer once), so per-step numbers "
            "are those of that one step")
    elif inferred:
        n = sum(p.get("steps") or 0 for p in inferred.get("processes") or [])
        period = "/".join(f"{p['period_ops']:,}" for p in inferred.get("processes") or [])
        layer = any(p.get("unit") != "training step" for p in inferred.get("processes") or [])
        text = text.replace(", so nothing is per step", "") + (
            f"; {n:,} steps were inferred from the repeating GPU work (every {period} GPU operations), so step "
            "times are estimates" + (" and a step may be one layer or block rather than a whole training step"
                                     if layer else ""))
    elif cap.get("steps_not_inferred"):
        why = "; ".join(str(x.get("reason")) for x in cap["steps_not_inferred"][:2])
        text += f"; no steps were inferred from the repeating GPU work ({why}), so costs are given in the window"
    if cands:
        names = ", ".join(f"{c['text'][:60]!r} ({c['count']}x, {text_m.duration((c.get('mean_ms') or 0) * 1e6)} each)"
                          for c in cands)
        first = re.sub(r"(?<![A-Za-z0-9])N(?![A-Za-z0-9])", lambda _: r"\d+",
                       re.escape(str(cands[0]["text"])[:60]).replace("\\#", "#"))
        text += f"; ranges that repeat like steps: {names} (for example --step-marker {shlex.quote(first)})"
    return text


def _launch_ratio_note(v: dict) -> str:
    """What the launch gaps' length says next to the kernels', in words that agree with the ratio
    (``launch_gap_to_kernel_ratio``: mean launch gap / median kernel)."""
    r, gap, kern = v.get("launch_gap_to_kernel_ratio"), v.get("launch_gap_us_mean"), v.get("kernel_median_us")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (r, gap, kern)):
        return ""
    g, k = text.duration(gap * 1e3), text.duration(kern * 1e3)
    if r >= 3:
        return (f"The gaps last {g} on average, {r:.1f}x the median kernel ({k}): the CPU sets the pace, and "
                "a faster GPU would not help.")
    if r >= 1:
        return (f"The gaps last {g} on average, {r:.1f}x the median kernel ({k}): the host takes about as long "
                "to issue a kernel as the GPU takes to run it.")
    return (f"The gaps ({g} on average) are shorter than the median kernel ({k}; {r:.1f}x), but there are so "
            "many of them that they add up.")


def _where(rule: Rule, result: dict) -> tuple[list[dict], str | None]:
    """The finding's ``where`` (sites of its time, most first) and, when the list is empty or
    could say more, what the capture lacks and the switch that adds it."""
    if not rule.where:
        return [], None
    metrics = result["metrics"]
    if "operators" not in metrics:  # a result without attribution (contract 2, synthetic metrics)
        return [], None
    rows = list((metrics.get("where") or {}).get(rule.where) or [])
    ops = metrics.get("operators") or {}
    missing = ops.get("missing") or []
    note = None
    if missing:
        parts = [f"{m['what']}: {m['switch']}" for m in missing]
        lead = "Not in this capture, so the list above cannot say more — " if rows else \
            "This capture cannot say where this time comes from — "
        note = lead + "; ".join(parts) + "."
    elif not rows:
        note = "No operator, module or frame encloses this time in the capture."
    if rule.where in DISPATCH_WHERE:
        extra = dispatch_rows(ops.get("rows") or [])
        if extra and not rows and not missing:
            note = None  # the operators listed say where, though no site holds the gaps
        rows += extra
    return rows, note


#: ``where:`` selections whose findings also name the operators whose CPU dispatch is slower than
#: their GPU work (issue 47, the article's second table, ``sort_by="cpu_time_total"``)
DISPATCH_WHERE = frozenset({"launch_gaps"})
#: how those rows say why they are there (``via``), and how many at most
VIA_DISPATCH = "CPU dispatch slower than the GPU"
DISPATCH_MAX = 3


def dispatch_rows(op_rows: list) -> list[dict]:
    """Where rows for the operators whose CPU time per call, less its waits in blocking CUDA
    calls, exceeds the GPU time they launched per call (``cpu_exceeds_gpu`` in
    ``metrics.operators.rows``), the most host time in excess first: ``excess_ms`` = (CPU − wait −
    GPU per call) × outer calls = ``cpu_ms − cpu_wait_ms − gpu_ms``, whole capture (ties: the
    name); ``count`` is the outer calls (not inside a call of the same name: what the per-call
    times divide by; ``calls`` when a row lacks them). ``share_pct`` and ``ms`` are None: this is
    host time, not the selection's."""
    num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    cand = [r for r in op_rows if isinstance(r, dict) and r.get("cpu_exceeds_gpu") is True
            and num(r.get("cpu_ms")) and num(r.get("gpu_ms"))]
    excess = lambda r: r["cpu_ms"] - (r.get("cpu_wait_ms") if num(r.get("cpu_wait_ms")) else 0.0) - r["gpu_ms"]  # noqa: E731
    cand.sort(key=lambda r: (-excess(r), str(r.get("name"))))

    def wait_per_call(r):
        w, c, cu = r.get("cpu_wait_ms"), r.get("cpu_ms"), r.get("cpu_us_per_call")
        return round(w / c * cu, 4) if num(w) and num(c) and c and num(cu) else None

    return [{"op": r.get("name"), "module": r.get("module"), "frame": r.get("frame"), "backward_op": None,
             "forward_op": None, "via": VIA_DISPATCH, "share_pct": None, "ms": None,
             "count": r.get("outer_calls") if num(r.get("outer_calls")) else r.get("calls"),
             "cpu_us_per_call": r.get("cpu_us_per_call"), "gpu_us_per_call": r.get("gpu_us_per_call"),
             "cpu_wait_us_per_call": wait_per_call(r), "excess_ms": round(excess(r), 4)} for r in cand[:DISPATCH_MAX]]


def _severity(rule: Rule, env: dict, forced: str | None, impact_pct: float | None, judgeable: bool) -> str:
    """The project config's forced severity, else the rule's: ``by-impact`` (the policy in
    :mod:`nsysdoc.rules.policy`, capped at info when there is too little GPU work to judge), a fixed
    severity, or the first band that holds; then capped at the rule's ``max_severity``."""
    if forced:
        return forced
    if rule.severity == "by-impact":
        sev = policy.by_impact(impact_pct)
        if not judgeable:
            sev = "info"
    elif isinstance(rule.severity, str):
        sev = rule.severity
    else:
        sev = "info"
        for level in WORST_FIRST:
            e = rule.severity.get(level)
            if e is not None and e.evaluate(env):
                sev = level
                break
    return policy.cap(sev, rule.max_severity)


def _evidence(rule: Rule, tabs: dict, env: dict) -> dict | None:
    ev = rule.evidence
    if not ev:
        return None
    rows = tabs.get(ev["table"], [])
    if rule.evidence_where is not None:
        rows = [r for r in rows if rule.evidence_where.evaluate({**env, **r})]
    if ev.get("sort"):
        key = ev["sort"]
        rows = sorted(rows, key=lambda r: (r.get(key) is None, r.get(key) if r.get(key) is not None else 0),
                      reverse=ev.get("descending", True))
        if ev.get("descending", True):  # keep nulls last
            rows = [r for r in rows if r.get(key) is not None] + [r for r in rows if r.get(key) is None]
    rows = rows[: ev.get("limit", 10)]
    cols = ev["columns"]
    return {"title": ev.get("title", rule.title), "columns": cols, "rows": [[r.get(c) for c in cols] for r in rows]}


#: issue 49: the exposed-communication stretches a finding points at (the longest, in time order)
EXPOSED_RANGES_MAX = 8


def _exposed_comm_ranges(result: dict) -> list[dict]:
    """The longest stretches of ``metrics.exposed_comm`` of the slowest step (or the window), in
    time order; ``[]`` when none is known."""
    ex = (result.get("metrics") or {}).get("exposed_comm") or {}
    r = ex.get("worst_step") or ex.get("window") or {}
    st = [x for x in r.get("stretches") or [] if x.get("end_ns") is not None and x["end_ns"] > x["start_ns"]]
    st = sorted(st, key=lambda x: (-(x["end_ns"] - x["start_ns"]), x["start_ns"]))[:EXPOSED_RANGES_MAX]
    where = f"slowest step {r.get('name') or r['step']}" if r.get("step") is not None else "window"
    return [{"label": f"communication alone on the GPU ({where})", "start_ns": x["start_ns"], "end_ns": x["end_ns"],
             "device": x.get("device")} for x in sorted(st, key=lambda x: (x["start_ns"], str(x.get("device"))))]


def _time_ranges(rule: Rule, result: dict, tabs: dict) -> list[dict]:
    kind, _, arg = rule.time_ranges.partition(":")
    w = result["capture"]["window"]
    if kind == "exposed_comm":
        out = _exposed_comm_ranges(result)
        if out:
            return out
        kind = "worst_step"  # no stretch known (an older JSON): the slowest step, as before
    if kind == "window" or (kind in ("worst_step", "median_step") and not tabs["steps"]):
        if w.get("start_ns") is None:
            return []
        return [{"label": "analysis window", "start_ns": w["start_ns"], "end_ns": w["end_ns"], "device": None}]
    if kind in ("worst_step", "median_step"):
        picks = result["metrics"].get("step_picks") or {}
        want = picks.get(kind)
        s = next((x for x in tabs["steps"] if x["step"] == want), None)
        if s is None:  # a result without picks (older JSON): the same rule
            by = sorted(tabs["steps"], key=lambda x: (x["step_time_ms"] or 0, x["step"]))
            s = by[(len(by) - 1) // 2] if kind == "median_step" else \
                min((x for x in by if x["step_time_ms"] == by[-1]["step_time_ms"]), key=lambda x: x["step"])
        return [{"label": f"{'slowest' if kind == 'worst_step' else 'median'} step {s['name']}",
                 "start_ns": s["start_ns"], "end_ns": s["end_ns"], "device": s.get("device")}]
    if kind == "gaps":
        gaps = [g for g in tabs["gaps"] if not arg or g["cause"] == arg][:3]
        return [{"label": f"{g['duration_ms']:.3f} ms idle ({g['cause']})", "start_ns": g["start_ns"],
                 "end_ns": g["end_ns"], "device": g["device"]} for g in gaps]
    if kind == "setup":
        out = [{"label": f"warm-up left out of the window ({x['duration_ms']:,.1f} ms)", "start_ns": x["start_ns"],
                "end_ns": x["end_ns"], "device": None}
               for x in result["capture"].get("excluded") or [] if x["kind"] == "warm-up"]
        gaps = sorted((g for g in tabs["gaps"] if (g.get("setup_ms") or 0) > 0), key=lambda g: -g["setup_ms"])
        out += [{"label": f"{g['setup_ms']:.3f} ms of set-up in a {g['duration_ms']:.3f} ms gap", "start_ns": g["start_ns"],
                 "end_ns": g["end_ns"], "device": g["device"]} for g in gaps[:3 - len(out)]]
        return out
    if kind == "evidence" and rule.evidence:
        rows = [r for r in tabs.get(rule.evidence["table"], []) if r.get("start_ns") is not None][:3]
        return [{"label": str(r.get("name") or r.get("cause") or "range"), "start_ns": r["start_ns"],
                 "end_ns": r["end_ns"], "device": r.get("device")} for r in rows]
    return []


def apply_rules(result: dict, rs: RuleSet) -> dict:
    """Fill ``result["findings"]`` and ``result["rules"]``; returns the result."""
    from .verdict import verdict

    findings, statuses = evaluate(rs, result)
    result["findings"] = findings
    _what_if_all(result, findings)
    result["rules"] = statuses
    result["verdict"] = verdict(result)
    return result


def _what_if_all(result: dict, findings: list[dict]) -> None:
    """Issue 48: ``metrics.critical_path.what_if_all``, the fixes of the findings at warning or above
    that have a what-if, replayed together on the median step's graph (not a sum)."""
    cp = (result.get("metrics") or {}).get("critical_path")
    if not isinstance(cp, dict) or not cp.get("what_if"):
        return
    from ..metrics.what_if import combined

    ids = [f["rule"] for f in findings if f.get("what_if") and f.get("severity") in ("warning", "critical")
           and (f["what_if"].get("saved_ms_per_step") or 0) > 0]
    both = combined(cp, ids)
    if both is not None:
        cp["what_if_all"] = both


def default_ruleset(rule_dirs=(), config_path: Path | None = None, use_config: bool = True) -> RuleSet:
    path = config_path if config_path is not None else (find_config() if use_config else None)
    return load_rules(rule_dirs, load_config(path))


__all__ = ["RuleSet", "Config", "load_rules", "load_config", "find_config", "evaluate", "apply_rules",
           "builtin_rules_dir", "tables", "default_ruleset"]
