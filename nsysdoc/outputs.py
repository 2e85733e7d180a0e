"""Writing what nsysdoc produces: report, diff and job pages, and the job's per-rank reports.

* **Atomic.** :func:`write_text_atomic` writes a temporary file in the target's own folder, flushes
  it to disk and renames it over the target (``os.replace``): a full disk, a permission problem or a
  crash never leaves a truncated report, and never destroys the previous one. The temporary file is
  removed when anything fails.
* **Checked before the work.** :func:`check_output_name` refuses a name the file system cannot hold
  (a component over ``NAME_MAX`` bytes) before any capture is read.
* **Standard output.** ``-o -`` means standard output (:data:`STDOUT`); :func:`write_stdout` writes
  there and turns a full device (``> /dev/full``) into an :class:`~nsysdoc.errors.OutputError`, and a
  reader that went away (``| head``) into :class:`StdoutClosed` (the CLI then exits quietly).

Errors are :mod:`nsysdoc.errors` exceptions; only ``nsysdoc.cli`` prints.
"""
from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from pathlib import Path

from .errors import OutputError

#: the ``-o`` value that means standard output
STDOUT = "-"
#: longest file name (one path component, in bytes) most file systems hold
NAME_MAX = 255


class StdoutClosed(Exception):
    """Standard output's reader went away (a closed pipe): exit quietly, as ``head`` expects."""


def _fs_bytes(part: str) -> bytes:
    return os.fsencode(part)


def name_max(folder: Path) -> int:
    """The longest name ``folder``'s file system holds (its nearest existing parent's), in bytes."""
    p = Path(folder)
    for _ in range(64):
        try:
            return int(os.pathconf(p, "PC_NAME_MAX"))
        except (OSError, ValueError, AttributeError):
            if p.parent == p:
                break
            p = p.parent
    return NAME_MAX


def check_output_name(path: Path) -> None:
    """Refuse (OutputError) an output path with a component longer than the file system allows."""
    path = Path(path)
    limit = min(NAME_MAX, name_max(path.parent))
    for part in path.parts:
        if len(_fs_bytes(part)) > limit:
            shown = part if len(part) <= 60 else part[:28] + "..." + part[-28:]
            raise OutputError(f"{shown}: output name is {len(_fs_bytes(part))} bytes long; the file system "
                              f"allows at most {limit}", hint="choose a shorter name with -o")


def _special(path: Path) -> Path | None:
    """``path`` when it exists and is neither a regular file nor a folder (``/dev/null``, a named
    pipe, ``/dev/stdout``): written to directly, never replaced by a renamed file (as root, a
    rename over ``/dev/null`` would turn the device into a plain file for every program)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return path if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)) else None


def _write_special(path: Path, chunks, what: str) -> None:
    try:
        with open(path, "wb", buffering=1 << 20) as fh:
            for chunk in chunks:
                fh.write(chunk.encode("utf-8", "replace"))
    except OSError as exc:
        raise OutputError(f"cannot write {what} {path}: {exc.strerror or exc}") from None


def _target(path: Path) -> Path:
    """Where to write: a symbolic link's target (the link stays a link), else ``path``."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else path


def write_text_atomic(path: Path, text: str, what: str = "the output") -> None:
    """Write ``text`` (UTF-8; unpaired surrogates from non-UTF-8 names are replaced) to ``path``
    atomically: a temporary file in the same folder, fsync, then ``os.replace``. On failure the
    previous file is left as it was, the temporary file is removed and OutputError is raised.
    A device or named pipe (``-o /dev/null``) is written to directly; a symbolic link's target
    is replaced, not the link."""
    write_chunks_atomic(path, [text], what)


def write_chunks_atomic(path: Path, chunks, what: str = "the output") -> None:
    """:func:`write_text_atomic` for text made piece by piece (a trace export of millions of
    events), and what it runs: the pieces are written as they come, never joined; the file appears
    only once all are written. An exception from ``chunks`` leaves the previous file as it was and
    propagates. Devices, named pipes and links as :func:`write_text_atomic`."""
    path = _target(Path(path))
    if _special(path) is not None:
        return _write_special(path, chunks, what)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:80]}.", suffix=".tmp", dir=path.parent)
        try:
            for chunk in chunks:  # each chunk whole (a text, or a batch of 65,536 trace events)
                view = memoryview(chunk.encode("utf-8", "replace"))
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:  # a new file gets the usual permissions (mkstemp makes it 0600)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        except OSError:
            pass
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        why = f"{blocked} is a file, not a folder" if blocked is not None else (exc.strerror or str(exc))
        raise OutputError(f"cannot write {what} {path}: {why}",
                          hint="the previous file, if any, was left unchanged" if path.exists() else None) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def write_stdout(text: str) -> None:
    """Write ``text`` to standard output and flush. Raises StdoutClosed on a closed pipe and
    OutputError on any other write error (``> /dev/full``)."""
    try:
        out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
        if out is not None:
            sys.stdout.flush()
            out.write(text.encode(sys.stdout.encoding or "utf-8", "replace"))
            out.flush()
        else:  # pragma: no cover - a replaced stdout (tests)
            sys.stdout.write(text)
            sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()
        raise StdoutClosed() from None
    except OSError as exc:
        quiet_stdout()
        if exc.errno == errno.EPIPE:
            raise StdoutClosed() from None
        raise OutputError(f"cannot write to standard output: {exc.strerror or exc}") from None


def quiet_stdout() -> None:
    """Point standard output at /dev/null, so that Python's flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
