"""Recognise, reuse and produce SQLite exports of ``.nsys-rep`` reports; explain failed captures."""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import stat
import tempfile
from pathlib import Path
from collections.abc import Callable, Iterable, Mapping

from .. import cache
from ..cache import default_cache_dir
from ..errors import NsysdocError, NsysFailedError, OutputError
from ..inputs import regular_file
from ..outputs import new_file_mode, replace_file, write_text_atomic
from ..trace.open import readonly_uri as _readonly_uri
from .argv import build_export_argv
from .locate import MARKER_SUFFIX, STDERR_TAIL_LINES, Runner, _default_runner, find_nsys


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


def _dir_writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def _sqlite_for(rep: Path) -> Path:
    return rep.with_suffix(".sqlite")


def _marker_for(sqlite_path: Path) -> Path:
    return sqlite_path.with_name(sqlite_path.name + MARKER_SUFFIX)


def _write_marker(sqlite_path: Path, rep: Path) -> None:
    """Record that nsysdoc wrote ``sqlite_path`` from ``rep`` (sidecar ``<name>.sqlite.nsysdoc``),
    atomically and never through a link at the marker's name (:mod:`nsysdoc.outputs`)."""
    s, r = os.stat(sqlite_path, follow_symlinks=False), rep.stat()
    data = {
        "tool": "nsysdoc",
        "rep": str(rep.resolve()),
        "rep_size": r.st_size,
        "rep_mtime_ns": r.st_mtime_ns,
        "sqlite_size": s.st_size,
        "sqlite_mtime_ns": s.st_mtime_ns,
    }
    try:
        write_text_atomic(_marker_for(sqlite_path), json.dumps(data, indent=1) + "\n", "the export marker",
                          follow_links=False)
    except NsysdocError:
        pass  # without a marker the file is treated as the user's: never overwritten, only reused


#: the largest marker read (a marker is ~300 bytes)
_MARKER_MAX_BYTES = 64 * 1024


def _ours(st: os.stat_result) -> bool:
    """A regular file (not a link) that this user owns."""
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()


def owned_by_us(sqlite_path: str | os.PathLike, rep_path: str | os.PathLike) -> bool:
    """True when ``sqlite_path`` was exported by nsysdoc from ``rep_path`` and not modified since.

    Ownership is recorded in a sidecar ``<name>.sqlite.nsysdoc`` (JSON: report path, and the
    sqlite's size and mtime when we wrote it). Both must be regular files (not links) this user
    owns: a marker another user planted in a shared folder claims nothing. The export's own
    META_DATA tables are not used: they do not reliably record the input report path across nsys
    versions."""
    sp = Path(sqlite_path)
    marker = _marker_for(sp)
    try:
        st = os.stat(sp, follow_symlinks=False)
        mst = os.stat(marker, follow_symlinks=False)
        if not (_ours(st) and _ours(mst)):
            return False
        fd = os.open(marker, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            data = json.loads(fh.read(_MARKER_MAX_BYTES + 1)[:_MARKER_MAX_BYTES])
    except (OSError, ValueError):
        return False
    return (
        isinstance(data, dict)
        and data.get("tool") == "nsysdoc"
        and data.get("rep") == str(Path(rep_path).resolve())
        and data.get("sqlite_size") == st.st_size
        and data.get("sqlite_mtime_ns") == st.st_mtime_ns
    )


def _trusted(path: Path) -> bool:
    """An export beside a report may be reused: not another user's file or link in a shared
    (sticky or world-writable) folder, where anyone could have put it."""
    try:
        st = os.stat(path, follow_symlinks=False)
        folder = os.stat(path.parent)
    except OSError:
        return False
    if not folder.st_mode & (stat.S_ISVTX | stat.S_IWOTH):
        return True
    return not stat.S_ISLNK(st.st_mode) and st.st_uid in (os.geteuid(), 0)


def _fresh_export(sqlite_path: Path, rep: Path) -> bool:
    try:
        fresh = sqlite_path.stat().st_mtime_ns >= rep.stat().st_mtime_ns
    except OSError:
        return False
    return fresh and is_nsys_export(sqlite_path)


#: bump when the export cache's layout changes
EXPORT_CACHE_FORMAT = 2


def cache_path_for(rep_path: str | os.PathLike, cache_dir: str | os.PathLike) -> Path:
    """``<cache_dir>/export-<key>/<stem>.sqlite``; the key is the report's identity
    (:func:`nsysdoc.cache.entry_path`)."""
    rep = Path(rep_path).resolve()
    return cache.entry_path(cache_dir, rep, "export", EXPORT_CACHE_FORMAT) / (rep.stem + ".sqlite")


def _tail_lines(text: str, n: int = STDERR_TAIL_LINES) -> str:
    lines = [ln.rstrip() for ln in re.split(r"[\r\n]+", text or "") if ln.strip()]
    return "\n".join(lines[-n:])


def _export(nsys: str, rep: Path, target: Path, runner: Runner) -> None:
    """Export ``rep`` to ``target`` atomically: nsys writes into a private folder (``mkdtemp``,
    mode 0700, a random name) beside the target, and the finished file is renamed onto the
    target's name on its folder's handle (:func:`nsysdoc.outputs.replace_file`). A name another
    user planted (a link at a guessable temporary name) is never written through."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.stem[:80]}.nsysdoc-", dir=target.parent))
    tmp = work / target.name
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
        try:
            os.chmod(tmp, new_file_mode())  # the folder was private, the file need not be
        except OSError:
            pass
        replace_file(tmp, target, "the SQLite export")
    finally:
        shutil.rmtree(work, ignore_errors=True)
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
       goes to the cache: ``<cache_dir>/export-<key>/run.sqlite`` (:mod:`nsysdoc.cache`), reused
       while the report is unchanged; the cache's size cap applies. ``cache_dir`` defaults to :func:`default_cache_dir`.

    ``nsys`` is looked up (:func:`find_nsys`) only when an export is needed."""
    rep = regular_file(rep_path, "report")
    writable = is_writable or _dir_writable
    run = runner or _default_runner

    beside = _sqlite_for(rep)
    if _fresh_export(beside, rep) and _trusted(beside):
        return str(beside)

    if writable(rep.parent) and (not beside.exists() or owned_by_us(beside, rep)):
        target = beside
    else:
        cached = cache_path_for(rep, cache_dir if cache_dir is not None else default_cache_dir(environ))
        # an entry is reused only when it is ours and sealed with its own key (another capture's
        # export renamed to this key, or a folder another user planted, is never served)
        if _fresh_export(cached, rep) and cache.trusted_entry(cached.parent):
            cache.touch(cached.parent)
            return str(cached)
        target = cached
        if os.path.lexists(target.parent) and not _own_private_dir(target.parent):
            raise NsysFailedError(f"the cache entry {target.parent} is not a private folder of this user, so the "
                                  "export is not written there", hint="remove it, or pass another --cache-dir")
        cache.make_dir(target.parent)

    binary = find_nsys(nsys, environ)
    try:
        _export(binary, rep, target, run)
    except OSError as exc:
        raise NsysFailedError(f"cannot write the SQLite export {target}: {exc.strerror or exc}") from None
    except OutputError as exc:
        raise NsysFailedError(exc.message, hint=exc.hint) from None
    if target != beside:
        cache.seal(target.parent, target.parent.name)
        cache.evict(target.parent.parent, keep=target.parent)
    return str(target)


def _own_private_dir(path: Path) -> bool:
    """A real folder (not a link) of this user that nobody else can write to."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and not st.st_mode & 0o022 and (
        not hasattr(os, "getuid") or st.st_uid == os.getuid())
