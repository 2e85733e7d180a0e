"""Run a capture: ``nsys profile`` then ``nsys export``, stderr forwarded live."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import IO

from ..errors import InputError, NsysFailedError, NsysNotFoundError, UsageError
from .argv import CaptureOptions, build_profile_argv, check_flag_support, output_base, where_switches_missing
from .argv import memory_switch_missing
from .export import _tail_lines, ensure_sqlite, explain_capture_failure, sqlite_tables
from ..formats import REP_SUFFIX
from .locate import (INSTALL_HINT, OLD_REP_SUFFIX, _STDERR_KEEP_BYTES, Runner, _default_runner,
                     nsys_profile_switches, nsys_version)


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
    #: ``--where`` switches this nsys does not list (so not used)
    where_missing: list[str] = field(default_factory=list)
    #: files of the same name that existed before and were replaced (``force``)
    replaced: list[str] = field(default_factory=list)
    #: ``--memory`` asked for --cuda-memory-usage and this nsys does not list it (so not used)
    memory_missing: bool = False


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
    * Refuses (UsageError, before running anything) a report name that exists already
      (:func:`existing_outputs`) unless ``opts.force``; the result lists what was replaced.
    """
    run = runner or _default_runner
    now = now or datetime.now()
    existing = existing_outputs(output_base(opts, command, now))
    if existing and not opts.force:  # before nsys runs: a long training must not be lost to a name
        raise UsageError(f"{existing[0]} already exists; nsysdoc capture does not replace it",
                         hint="pass --force to replace it, or choose another --output-name")
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
        where_missing=where_switches_missing(switches) if opts.where else [],
        replaced=[str(p) for p in existing],
        memory_missing=memory_switch_missing(switches) if opts.memory else False,
    )


def existing_outputs(base: str) -> list[Path]:
    """What a capture named ``base`` would replace: its report (``.nsys-rep``, or an older
    ``.qdrep``) and the pages nsysdoc writes of it (``.nsysdoc.html``, ``.nsysdoc.json``). The
    export ``.sqlite`` is not listed: one nsysdoc did not write is never replaced anyway."""
    names = [base + REP_SUFFIX, base + OLD_REP_SUFFIX, base + ".nsysdoc.html", base + ".nsysdoc.json"]
    return [Path(n) for n in names if os.path.lexists(n)]


def _no_report_hint(opts: CaptureOptions) -> str | None:
    cr = (opts.capture_range or "").lower()
    if cr == "nvtx":
        return (f"no report: the NVTX range {opts.nvtx_capture!r} may never have been opened "
                "(check the name and domain; range@* matches any domain)")
    if cr == "cudaprofilerapi":
        return "no report: the program may never have called cudaProfilerStart() (torch.cuda.profiler.start())"
    return None
