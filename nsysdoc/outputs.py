"""Writing what nsysdoc produces: report, diff and job pages, the job's per-rank reports, exports
and their markers; and what it prints on a terminal. The one output guard.

* **Checked before the work.** :func:`check_outputs` refuses, before any capture is read: an output
  that is, or links to, a file the run reads (:func:`run_reads`: the captures, their ``-wal``,
  ``-shm`` and ``-journal`` files, the SQLite export beside a ``.nsys-rep`` and its marker, rule
  files, the configuration file); two outputs that are one file; a name the file system cannot
  hold (a component over ``NAME_MAX`` bytes, a path over ``PATH_MAX``); a folder that cannot be
  written; and a symbolic link that another user owns in a shared folder.
* **Shared folders.** A symbolic link in a sticky or world-writable folder (``/tmp``) that is owned
  by someone else (neither this user nor root) is never followed, anywhere in an output's path:
  another user could otherwise point it at any file this user may write.
* **Atomic.** :func:`write_text_atomic` writes a temporary file (``O_CREAT | O_EXCL | O_NOFOLLOW``)
  in the target's own folder, opened once as a directory handle, flushes it to disk and renames it
  over the target name on that same handle: a full disk, a permission problem or a crash never
  leaves a truncated report and never destroys the previous one, and the rename replaces a
  directory entry, never writes through a link planted after the check. An existing file keeps
  its permission bits; a new one gets the usual ones (``0666`` less the umask).
* **Standard output.** ``-o -`` means standard output (:data:`STDOUT`); :func:`write_stdout` writes
  there and turns a full device (``> /dev/full``) into an :class:`~nsysdoc.errors.OutputError`, and a
  reader that went away (``| head``) into :class:`StdoutClosed` (the CLI then exits quietly).
* **Terminal text.** :func:`terminal_text` removes every control character and escape sequence
  from text shown on a terminal (the one sanitiser: the CLI's lines and the terminal summary).

Errors are :mod:`nsysdoc.errors` exceptions; only ``nsysdoc.cli`` prints.
"""
from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .errors import OutputError, UsageError

#: the ``-o`` value that means standard output
STDOUT = "-"
#: longest file name (one path component, in bytes) most file systems hold
NAME_MAX = 255
#: longest path (bytes, with its final NUL) Linux takes in one system call
PATH_MAX = 4096
#: files SQLite keeps beside a database: a ``-wal`` holds committed rows the database file lacks
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
#: Nsight Systems reports (exported to ``<stem>.sqlite`` beside them, :mod:`nsysdoc.nsys.export`)
from .formats import REPORT_SUFFIXES, is_report_name  # noqa: E402,F401
#: the export's ownership marker: ``run.sqlite.nsysdoc``
EXPORT_MARKER_SUFFIX = ".nsysdoc"
#: symbolic links followed in one path before giving up (the kernel's limit)
MAX_LINKS = 40


class StdoutClosed(Exception):
    """Standard output's reader went away (a closed pipe): exit quietly, as ``head`` expects."""


# ---------------------------------------------------------------------------------------------
# terminal text
# ---------------------------------------------------------------------------------------------
#: escape sequences removed whole: CSI (ESC [ or 0x9b, parameters, final byte); OSC, DCS, SOS, PM
#: and APC strings (ESC ] P X ^ _ or 0x9d 0x90 0x98 0x9e 0x9f) up to their terminator (BEL, ESC \,
#: 0x9c) or the end of the line; any other two- or three-byte ESC sequence (ESC ( B, ESC c ...)
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])(?:[^\x07\x1b\x9c\n]|\x1b(?!\\))*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)
#: what is left: C0 controls but tab and newline, DEL, C1 controls
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_text(text) -> str:
    """``text`` safe to show on a terminal: escape sequences removed whole (CSI, OSC such as
    OSC 52 that writes the clipboard, DCS, APC, PM, SOS, in their 7-bit and C1 forms), then every
    other control character (C0 but tab and newline, DEL, C1). Tabs and newlines are kept."""
    s = str(text if text is not None else "")
    if s.isprintable():
        return s
    return _CONTROLS.sub("", _ESCAPES.sub("", s))


# ---------------------------------------------------------------------------------------------
# what a run reads
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Read:
    """A file the run reads, and how an error names it."""

    path: Path
    what: str


def _side_files(path: Path, of: str) -> list[Read]:
    return [Read(Path(f"{path}{s}"), f"{of}'s {s[1:]} file") for s in SQLITE_SIDE_FILES]


def run_reads(inputs: Iterable = (), *, rule_dirs: Iterable = (), config=None) -> list[Read]:
    """Every file a run reads (that no output may replace): each input and its ``-wal``, ``-shm``
    and ``-journal`` files; for an Nsight Systems report, the export ``<stem>.sqlite`` beside it
    (reused or written there) with its files and its marker; each rule file (``*.yaml``, ``*.yml``)
    of the rule folders; the configuration file."""
    out: list[Read] = []
    for raw in inputs:
        p = Path(raw)
        out.append(Read(p, f"the input {p}"))
        out += _side_files(p, f"the input {p}")
        if is_report_name(p):
            export = p.with_suffix(".sqlite")
            of = f"the SQLite export of the input {p}"
            out.append(Read(export, f"{export}, {of}"))
            out += _side_files(export, of)
            out.append(Read(Path(f"{export}{EXPORT_MARKER_SUFFIX}"), f"the marker of {export}"))
    for raw in rule_dirs or ():
        d = Path(raw)
        try:
            files = sorted(d.glob("*.yaml")) + sorted(d.glob("*.yml")) if d.is_dir() else [d]
        except OSError:
            files = [d]
        out += [Read(f, f"the rule file {f}") for f in files]
    if config is not None:
        out.append(Read(Path(config), f"the configuration file {config}"))
    return out


def _identity(p: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(p)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _resolved(p: Path) -> str:
    try:
        return os.path.realpath(p)
    except (OSError, ValueError, RuntimeError):
        return os.path.abspath(p)


# ---------------------------------------------------------------------------------------------
# names and folders
# ---------------------------------------------------------------------------------------------
def _fs_bytes(part) -> bytes:
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


def check_path_value(path, what: str = "output") -> Path:
    """``path`` as a Path, or UsageError for a value that names no file: not a path, empty, or
    holding a NUL byte (which no system call takes)."""
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"the {what} must be a path, got {type(path).__name__}")
    raw = os.fspath(path)
    if isinstance(raw, bytes):
        raw = os.fsdecode(raw)
    if raw == "":
        raise UsageError(f"the {what} path is empty")
    if "\x00" in raw:
        raise UsageError(f"the {what} path {raw.replace(chr(0), '?')!r} holds a NUL byte")
    return Path(raw)


def _shown(part: str) -> str:
    return part if len(part) <= 60 else part[:28] + "..." + part[-28:]


def check_output_name(path: Path) -> None:
    """Refuse (OutputError) an output path with a component longer than the file system allows,
    or a whole path longer than ``PATH_MAX``."""
    path = check_path_value(path)
    limit = min(NAME_MAX, name_max(path.parent))
    for part in path.parts:
        if len(_fs_bytes(part)) > limit:
            raise OutputError(f"{_shown(part)}: output name is {len(_fs_bytes(part))} bytes long; the file system "
                              f"allows at most {limit}", hint="choose a shorter name with -o")
    full = len(_fs_bytes(os.path.abspath(path)))
    if full >= PATH_MAX:
        raise OutputError(f"{_shown(str(path))}: output path is {full:,} bytes long; the system allows at most "
                          f"{PATH_MAX - 1:,}", hint="choose a shorter path with -o")


def _shared(dir_st: os.stat_result) -> bool:
    """A folder other users may create names in: sticky (``/tmp``) or world-writable."""
    return bool(dir_st.st_mode & (stat.S_ISVTX | stat.S_IWOTH))


def _untrusted_link(link: str, link_st: os.stat_result) -> str | None:
    """Why the link ``link`` must not be followed, or None: it sits in a shared folder and belongs
    to another user (not this one, not root)."""
    if link_st.st_uid in (os.geteuid(), 0):
        return None
    try:
        dir_st = os.stat(os.path.dirname(link) or ".")
    except OSError:
        return None
    if not _shared(dir_st):
        return None
    return (f"{link} is a symbolic link owned by another user (uid {link_st.st_uid}) in a shared folder; "
            "nsysdoc does not follow it")


def _absolute(path: Path) -> str:
    """``path`` made absolute without normalising ``..`` (which must follow the links before it)."""
    raw = os.fspath(path)
    return raw if os.path.isabs(raw) else os.path.join(os.getcwd(), raw)


def _refuse_link(path, what: str, why: str):
    raise OutputError(f"cannot write {what} {path}: {why}",
                      hint="choose another -o, or remove the link if it is yours")


def resolve_output(path, what: str = "the output", *, follow_last: bool = True) -> Path:
    """``path`` with every symbolic link resolved, one at a time, like ``realpath``, but refusing
    (OutputError) a link another user owns in a sticky or world-writable folder. Components that do
    not exist yet are kept as they are. With ``follow_last=False`` a link at the last component is
    left alone (the writer replaces the link itself)."""
    todo = [c for c in _absolute(check_path_value(path)).split(os.sep) if c]
    todo.reverse()  # a stack: next component last
    cur = os.sep
    hops = 0
    while todo:
        part = todo.pop()
        if part == ".":
            continue
        if part == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, part)
        if not todo and not follow_last:
            cur = nxt
            break
        try:
            st = os.lstat(nxt)
        except (FileNotFoundError, NotADirectoryError):  # nothing further exists: no more links
            cur = os.path.join(nxt, *reversed(todo))
            break
        except OSError as exc:
            raise OutputError(f"cannot write {what} {path}: {nxt}: {exc.strerror or exc}") from None
        if not stat.S_ISLNK(st.st_mode):
            cur = nxt
            continue
        why = _untrusted_link(nxt, st)
        if why is not None:
            _refuse_link(path, what, why)
        hops += 1
        if hops > MAX_LINKS:
            raise OutputError(f"cannot write {what} {path}: too many levels of symbolic links")
        try:
            dest = os.readlink(nxt)
        except OSError as exc:
            raise OutputError(f"cannot write {what} {path}: {nxt}: {exc.strerror or exc}") from None
        if os.path.isabs(dest):
            cur = os.sep
        todo.extend(reversed([c for c in dest.split(os.sep) if c]))
    return Path(cur)


def _check_links_only(path, what: str, _hops: int = 0) -> None:
    """The link check of :func:`resolve_output` for a device or a pipe, whose ``/proc/self/fd``
    links do not name files: refuse another user's link in a shared folder, met anywhere on the
    way; a link whose text names nothing that exists (``pipe:[...]``) ends the walk."""
    parts = [c for c in _absolute(path).split(os.sep) if c]
    cur = os.sep
    for i, part in enumerate(parts):
        cur = os.path.join(cur, part)
        try:
            st = os.lstat(cur)
        except OSError:
            return
        if not stat.S_ISLNK(st.st_mode):
            continue
        why = _untrusted_link(cur, st)
        if why is not None:
            _refuse_link(path, what, why)
        if _hops >= MAX_LINKS:
            raise OutputError(f"cannot write {what} {path}: too many levels of symbolic links")
        try:
            dest = os.path.join(os.path.dirname(cur), os.readlink(cur))
        except OSError:
            return
        if not os.path.lexists(dest):
            return
        return _check_links_only(os.path.join(dest, *parts[i + 1:]), what, _hops + 1)


def _special(path: Path) -> os.stat_result | None:
    """The stat of ``path`` when it exists and is neither a regular file nor a folder
    (``/dev/null``, a named pipe, ``/dev/stdout``): written to directly, never replaced by a
    renamed file (as root, a rename over ``/dev/null`` would turn the device into a plain file
    for every program)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)) else None


def _may_write(folder: str) -> bool:
    kw = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
    return os.access(folder, os.W_OK | os.X_OK, **kw)


def check_writable(path, what: str = "the output") -> None:
    """Refuse (OutputError) an output that cannot be written: a folder in its place, a file where
    a folder of its path should be, or a folder without write permission; an untrusted link."""
    path = check_path_value(path)
    special = _special(path)
    if special is not None:
        _check_links_only(path, what)
        kw = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
        if not os.access(path, os.W_OK, **kw):
            raise OutputError(f"cannot write {what} {path}: permission denied")
        return
    real = resolve_output(path, what)
    if os.path.isdir(real):
        raise OutputError(f"cannot write {what} {path}: it is a folder",
                          hint="name a file, or end the name with / to write into the folder")
    folder = real.parent
    while not os.path.lexists(folder) and folder.parent != folder:
        folder = folder.parent
    if not os.path.isdir(folder):
        raise OutputError(f"cannot write {what} {path}: {folder} is a file, not a folder")
    if not _may_write(str(folder)):
        raise OutputError(f"cannot write {what} {path}: permission denied (cannot create files in {folder})",
                          hint="choose another folder with -o")


def check_outputs(outputs: Iterable, reads: Iterable[Read] = ()) -> None:
    """The guard, before any work: refuse an output that would replace a file the run reads
    (:func:`run_reads`; the same path, a link or a hard link to it), two outputs that are one file,
    a name the file system cannot hold, an output that cannot be written and a link another user
    owns in a shared folder. Raises UsageError or OutputError (one line each)."""
    reads = list(reads)
    by_id: dict = {}
    by_path: dict = {}
    for r in reads:
        ident = _identity(r.path)
        if ident is not None:
            by_id.setdefault(ident, r)
        by_path.setdefault(_resolved(r.path), r)
        by_path.setdefault(os.path.abspath(r.path), r)
    seen: dict[str, Path] = {}
    for raw in outputs:
        if raw is None:
            continue
        o = check_path_value(raw)
        check_output_name(o)
        if _special(o) is not None:  # /dev/null, a pipe: written to, never replaced
            check_writable(o)
            continue
        ident = _identity(o)
        hit = by_id.get(ident) if ident is not None else None
        hit = hit or by_path.get(_resolved(o)) or by_path.get(os.path.abspath(o))
        if hit is not None:
            raise UsageError(f"{o}: the output would overwrite {hit.what}, which this run reads",
                             hint="choose another output name (-o)")
        key = _resolved(o)
        if key in seen:
            raise UsageError(f"{o}: two outputs would be written to the same file", hint="choose another -o")
        seen[key] = o
        check_writable(o)


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------
def _stdout_closed(exc: OSError) -> bool:
    return isinstance(exc, BrokenPipeError) or exc.errno == errno.EPIPE


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``, however many calls it takes. (A buffered stream's ``write``
    returns a short count without an error when a pipe's reader leaves mid-way: ``-o - | head``
    then ended with status 0 and the rest of the report silently dropped.)"""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _write_special(path: Path, chunks, what: str) -> None:
    _check_links_only(path, what)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise OutputError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    try:
        for chunk in chunks:
            _write_all(fd, chunk.encode("utf-8", "replace"))
    except OSError as exc:
        if _stdout_closed(exc):  # -o /dev/stdout | head: the reader went away
            raise StdoutClosed() from None
        raise OutputError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _open_folder(folder: Path, what: str, path) -> int:
    """A directory handle on ``folder`` (created when missing), never through a link at its
    last component (the components before it were resolved by :func:`resolve_output`)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        pass
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(folder, flags)


def new_file_mode() -> int:
    """``0666`` less the umask, read without changing it where the system says it."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def write_text_atomic(path: Path, text: str, what: str = "the output", *, follow_links: bool = True) -> None:
    """Write ``text`` (UTF-8; unpaired surrogates from non-UTF-8 names are replaced) to ``path``
    atomically: a temporary file in the same folder, fsync, then a rename on the folder's handle.
    On failure the previous file is left as it was, the temporary file is removed and OutputError
    is raised. A device or named pipe (``-o /dev/null``) is written to directly; a symbolic link's
    target is replaced, not the link (``follow_links=False``: the link itself is replaced), unless
    it is another user's link in a shared folder (refused)."""
    write_chunks_atomic(path, [text], what, follow_links=follow_links)


def write_chunks_atomic(path: Path, chunks, what: str = "the output", *, follow_links: bool = True) -> None:
    """:func:`write_text_atomic` for text made piece by piece (a trace export of millions of
    events), and what it runs: the pieces are written as they come, never joined; the file appears
    only once all are written. An exception from ``chunks`` leaves the previous file as it was and
    propagates. Devices, named pipes and links as :func:`write_text_atomic`."""
    path = check_path_value(path)
    if follow_links and _special(path) is not None:
        return _write_special(path, chunks, what)
    real = resolve_output(path, what, follow_last=follow_links)
    name = real.name
    dfd: int | None = None
    tmp: str | None = None
    try:
        dfd = _open_folder(real.parent, what, path)
        try:
            old = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISDIR(old.st_mode):
            raise OutputError(f"cannot write {what} {path}: it is a folder")
        keep = stat.S_IMODE(old.st_mode) & 0o777 if old is not None and stat.S_ISREG(old.st_mode) else None
        flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        for _ in range(100):
            candidate = f".{name[:80]}.{secrets.token_hex(6)}.tmp"
            try:
                fd = os.open(candidate, flags, 0o600, dir_fd=dfd)
            except FileExistsError:
                continue
            tmp = candidate
            break
        else:  # pragma: no cover - 100 random names taken
            raise OSError(errno.EEXIST, "could not create a temporary file")
        try:
            for chunk in chunks:  # each chunk whole (a text, or a batch of 65,536 trace events)
                view = memoryview(chunk.encode("utf-8", "replace"))
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
            try:  # the previous file's permission bits, else the usual ones (mkstemp-like 0600 no more)
                os.fchmod(fd, keep if keep is not None else new_file_mode())
            except OSError:
                pass
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        tmp = None
        try:
            os.fsync(dfd)
        except OSError:
            pass
    except OSError as exc:
        blocked = next((p for p in real.parents if p.exists() and not p.is_dir()), None)
        why = f"{blocked} is a file, not a folder" if blocked is not None else (exc.strerror or str(exc))
        raise OutputError(f"cannot write {what} {path}: {why}",
                          hint="the previous file, if any, was left unchanged" if os.path.lexists(real) else None) \
            from None
    finally:
        if tmp is not None and dfd is not None:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
        if dfd is not None:
            os.close(dfd)


def replace_file(src: Path, path: Path, what: str = "the output") -> None:
    """Move the finished file ``src`` (in the same file system) onto ``path`` with a rename on the
    handle of ``path``'s folder: a link at ``path`` is replaced, never written through; links in
    the folder's path are resolved as :func:`resolve_output` does (another user's link in a shared
    folder is refused). Raises OutputError."""
    real = resolve_output(path, what, follow_last=False)
    dfd: int | None = None
    try:
        dfd = _open_folder(real.parent, what, path)
        os.rename(src, real.name, dst_dir_fd=dfd)
    except OSError as exc:
        raise OutputError(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    finally:
        if dfd is not None:
            os.close(dfd)


def write_stdout(text: str) -> None:
    """Write all of ``text`` to standard output. Raises StdoutClosed on a closed pipe (``| head``)
    and OutputError on any other write error (``> /dev/full``)."""
    data = text.encode(getattr(sys.stdout, "encoding", None) or "utf-8", "replace")
    try:
        try:
            fd = sys.stdout.fileno()
        except (AttributeError, ValueError, OSError):  # a replaced stdout (tests): no descriptor
            fd = None
        sys.stdout.flush()
        if fd is not None:
            _write_all(fd, data)
        elif hasattr(sys.stdout, "buffer"):
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:  # pragma: no cover
            sys.stdout.write(text)
            sys.stdout.flush()
    except OSError as exc:
        quiet_stdout()
        if _stdout_closed(exc):
            raise StdoutClosed() from None
        raise OutputError(f"cannot write to standard output: {exc.strerror or exc}") from None


def is_stdout(path) -> bool:
    """Whether ``path`` names the file standard output already is (``-o /dev/stdout``, the pipe
    or terminal it points at): written as ``-o -`` is."""
    try:
        a = os.fstat(sys.stdout.fileno())
        b = os.stat(path)
    except (OSError, ValueError, AttributeError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) and not stat.S_ISREG(b.st_mode)


def quiet_stdout() -> None:
    """Point standard output at /dev/null, so that Python's flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
