"""nsysdoc's one cache: where it lives, how entries are keyed, and how it stays bounded.

Two kinds of entries live side by side in the cache folder, one folder each:

* ``trace-<key>/``: the tables of an export, as the loader stores them (:mod:`nsysdoc.trace.store`:
  Arrow IPC files of blocks, uncompressed up to about 2 GB and lz4 above; small tables as Parquet);
* ``export-<key>/``: an SQLite export of an ``.nsys-rep`` made when the report's own folder is
  not writable (:mod:`nsysdoc.nsys.export`);
* ``templates-<key>/``: the HTML report's templates compiled by Jinja (its bytecode cache: 0.1 s
  saved per page), one folder per nsysdoc version (:func:`templates_dir`).

Guarantees, each enforced here and nowhere else:

* **Keyed by identity, not by name.** A key hashes the resolved path with the file's size, mtime,
  *ctime* and inode (ctime cannot be set back with ``utime``, so content changed in place and the
  mtime restored is a new key), a fingerprint of its content (:func:`content_fingerprint`), the
  user id (entries are per user: another user's entries are never read, and a cache folder shared
  by several users cannot break anybody's report) and a format version.
* **Bound to the content.** An entry is sealed with its own key when written (:func:`seal`) and
  read only when it still carries that key and is a folder of this user's that nobody else can
  write to (:func:`trusted_entry`): an entry of another capture renamed to this key, or one
  planted by another user, is a miss, never served.
* **Private.** Folders are created with mode 0700.
* **Bounded.** After a write, least-recently-used entries are removed until the cache is under
  ``NSYSDOC_CACHE_MAX_MB`` (default 4096 MB). A read marks the entry used.
* **Never fatal.** Readers treat any unreadable or wrong-shaped entry as a miss and rebuild it;
  writers that fail only cost speed next time. A cache folder that cannot be written (full disk,
  no permission, removed while in use) means carrying on without the cache: the problem is
  recorded with :func:`note_problem` and ``nsysdoc.cli`` prints it as one warning line
  (:func:`take_problems`).
* **Runs in progress are safe.** An entry is written in a ``.tmp-*`` folder and renamed when
  complete; :func:`clear` and :func:`evict` remove a ``.tmp-*`` folder only once it is older than
  :data:`STALE_TMP_S` (another nsysdoc may be writing it right now).
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
import stat
import time
from collections.abc import Mapping
from pathlib import Path

CACHE_ENV = "NSYSDOC_CACHE_DIR"
MAX_ENV = "NSYSDOC_CACHE_MAX_MB"
DEFAULT_MAX_MB = 4096
KINDS = ("trace", "export", "templates")
#: temporary folders of interrupted writes older than this are removed by :func:`evict`
STALE_TMP_S = 3600
#: the only folder names the cache ever creates (older versions used 20 hex digits); nothing else
#: in the folder is counted, evicted or cleared, whatever ``NSYSDOC_CACHE_DIR`` points at
_ENTRY_NAME = re.compile(r"^(?:(?:trace|export|templates)-[0-9a-f]{24}|[0-9a-f]{20})$")
_TMP_NAME = re.compile(r"^\.tmp-[a-z0-9_]+$")


_PROBLEMS: list[str] = []


def note_problem(message: str) -> None:
    """Record that the cache could not be used (printed once by the CLI as a warning)."""
    if message not in _PROBLEMS:
        _PROBLEMS.append(message)


def take_problems() -> list[str]:
    """The problems recorded since the last call (and forget them)."""
    out = list(_PROBLEMS)
    _PROBLEMS.clear()
    return out


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$NSYSDOC_CACHE_DIR``, else ``$XDG_CACHE_HOME/nsysdoc``, else ``~/.cache/nsysdoc``."""
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / "nsysdoc"
    return Path("~/.cache/nsysdoc").expanduser()


def _max_mb(environ: Mapping[str, str] | None = None) -> tuple[float, str | None]:
    """The cap in MB and, when ``NSYSDOC_CACHE_MAX_MB`` is set to something unusable, why the
    default is used instead."""
    env = os.environ if environ is None else environ
    raw = env.get(MAX_ENV, "")
    if not raw.strip():
        return DEFAULT_MAX_MB, None
    try:
        mb = float(raw)
    except ValueError:
        mb = float("nan")
    if not math.isfinite(mb) or mb < 0 or mb * 1024 * 1024 > MAX_CAP_BYTES:
        shown = raw.strip()[:40]
        return DEFAULT_MAX_MB, (f"{MAX_ENV}={shown!r} is not a size in MB (a finite number from 0 to "
                                f"{MAX_CAP_BYTES >> 20:,}); using the default, {DEFAULT_MAX_MB} MB")
    return mb, None


#: the largest cap ``NSYSDOC_CACHE_MAX_MB`` can set (1 EiB: no practical limit)
MAX_CAP_BYTES = 1 << 60


def max_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The size cap in bytes (``NSYSDOC_CACHE_MAX_MB``). Never raises: a value that is not a
    finite number of MB from 0 up (``inf``, ``nan``, ``-1``, ``lots``) means the default, and
    :func:`settings_problems` says so."""
    mb, _problem = _max_mb(environ)
    return int(mb * 1024 * 1024)


def settings_problems(environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per cache setting that cannot be used as given (the CLI prints each as a warning)."""
    _mb, problem = _max_mb(environ)
    return [problem] if problem else []


#: files up to this size are fingerprinted whole; larger ones by their first and last
#: :data:`FINGERPRINT_EDGE` bytes and :data:`FINGERPRINT_PAGES` pages spread evenly between
FINGERPRINT_WHOLE = 8 << 20
FINGERPRINT_EDGE = 64 << 10
FINGERPRINT_PAGES = 64
_PAGE = 4096


def content_fingerprint(path: str | os.PathLike) -> str:
    """A hash of the file's size and content: the whole file up to :data:`FINGERPRINT_WHOLE`
    bytes, else its first and last 64 KiB and 64 pages of 4 KiB spread over it (an nsys export's
    header and schema, and rows from its whole length; 0.4 MB read whatever the size). Opened
    without blocking (a FIFO put in the file's place is never waited on) and read-only."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb", buffering=0) as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path}: not a regular file")
        size = st.st_size
        h = hashlib.blake2b(digest_size=16)
        h.update(f"{size}\0".encode())
        if size <= FINGERPRINT_WHOLE:
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                h.update(chunk)
        else:
            pages = [((size - _PAGE) * (i + 1) // (FINGERPRINT_PAGES + 1), _PAGE) for i in range(FINGERPRINT_PAGES)]
            for off, n in [(0, FINGERPRINT_EDGE), *pages, (size - FINGERPRINT_EDGE, FINGERPRINT_EDGE)]:
                fh.seek(off)
                h.update(fh.read(n))
    return h.hexdigest()


def file_identity(path: str | os.PathLike) -> dict:
    """What identifies a file: its place and ``stat`` fields, and a fingerprint of its content
    (see the module docstring)."""
    p = Path(path).resolve()
    st = p.stat()
    return {"path": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "inode": st.st_ino, "device": st.st_dev, "content": content_fingerprint(p)}


def entry_key(identity: dict, kind: str, version: int | str) -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    raw = "\0".join(f"{k}={identity[k]}" for k in sorted(identity)) + f"\0uid={uid}\0kind={kind}\0v={version}"
    return hashlib.sha256(raw.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def entry_path(cache_dir: str | os.PathLike, path: str | os.PathLike, kind: str, version: int | str) -> Path:
    """``<cache_dir>/<kind>-<key>`` for the file at ``path`` (which must exist)."""
    assert kind in KINDS
    return Path(cache_dir) / f"{kind}-{entry_key(file_identity(path), kind, version)}"


def templates_dir(cache_dir: str | os.PathLike | None = None) -> Path | None:
    """The folder for the report's compiled templates, created private to the user; None when it
    cannot be made, or is not a real folder owned by this user and writable by nobody else (Jinja
    reads these files back as code)."""
    from .version import __version__

    key = entry_key({}, "templates", __version__)  # per user and version, not per input file
    folder = (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / f"templates-{key}"
    try:
        make_dir(folder)
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()) or st.st_mode & 0o022:
        return None
    touch(folder)
    return folder


#: the file in every entry folder that holds the entry's own name (its key), written last
SEAL_NAME = "entry-key"


def seal(folder: Path, name: str) -> None:
    """Mark a finished entry folder (still under its temporary name) as the entry ``name``."""
    (Path(folder) / SEAL_NAME).write_text(name, encoding="ascii")


def trusted_entry(entry: Path) -> bool:
    """Whether ``entry`` may be read: a real folder (not a link) owned by this user that nobody
    else can write to, sealed with its own name (:func:`seal`). An entry renamed from another
    key (another capture's tables) or made by another user is not; it is a miss and rebuilt."""
    try:
        st = os.lstat(entry)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o022:
        return False
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return False
    try:
        with open(Path(entry) / SEAL_NAME, "rb") as fh:
            return fh.read(128) == entry.name.encode("ascii")
    except (OSError, UnicodeError):
        return False


def make_dir(folder: Path) -> None:
    """Create ``folder`` (and parents) private to the user."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)


def touch(entry: Path) -> None:
    """Mark an entry as just used (its folder's mtime is the LRU clock)."""
    try:
        os.utime(entry)
    except OSError:
        pass


def _entries(cache_dir: Path) -> list[tuple[float, int, Path]]:
    """(last use, bytes, folder) of every entry, oldest first; temporary folders excluded."""
    out = []
    try:
        children = list(cache_dir.iterdir())
    except OSError:
        return []
    for child in children:
        if not _ENTRY_NAME.match(child.name) or child.is_symlink() or not child.is_dir():
            continue
        size = 0
        try:
            for root, _dirs, files in os.walk(child):
                for f in files:
                    try:
                        size += os.lstat(os.path.join(root, f)).st_size
                    except OSError:
                        pass
            used = child.stat().st_mtime
        except OSError:
            continue
        out.append((used, size, child))
    out.sort(key=lambda e: e[0])
    return out


def evict(cache_dir: str | os.PathLike, limit: int | None = None, keep: Path | None = None) -> int:
    """Remove least-recently-used entries until the cache holds at most ``limit`` bytes (default
    :func:`max_bytes`); ``keep`` (the entry just written) is removed last. Returns bytes freed."""
    folder = Path(cache_dir)
    limit = max_bytes() if limit is None else limit
    now = time.time()
    try:
        for child in folder.iterdir():  # leftovers of interrupted writes
            if _TMP_NAME.match(child.name) and not child.is_symlink() and now - child.stat().st_mtime > STALE_TMP_S:
                shutil.rmtree(child, ignore_errors=True)
    except OSError:
        return 0
    entries = _entries(folder)
    total = sum(e[1] for e in entries)
    if keep is not None:
        entries.sort(key=lambda e: (e[2] == keep, e[0]))
    freed = 0
    for _used, size, path in entries:
        if total <= limit:
            break
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            total -= size
            freed += size
    return freed


def info(cache_dir: str | os.PathLike | None = None) -> dict:
    """Location, entry count, size and cap of the cache (``nsysdoc cache info``)."""
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    entries = _entries(folder)
    kinds = {k: sum(1 for e in entries if e[2].name.startswith(k + "-")) for k in KINDS}
    kinds["older"] = len(entries) - sum(kinds.values())  # written by an older nsysdoc; never read again
    return {"location": str(folder), "exists": folder.is_dir(), "entries": len(entries),
            "bytes": sum(e[1] for e in entries), "max_bytes": max_bytes(), "by_kind": kinds}


def clear(cache_dir: str | os.PathLike | None = None) -> tuple[int, int]:
    """Remove every entry (``nsysdoc cache clear``); returns (entries, bytes) removed."""
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    n = b = 0
    for _used, size, path in _entries(folder):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            n, b = n + 1, b + size
    now = time.time()
    try:
        for child in folder.iterdir():  # a fresh one is the working folder of a run in progress
            if _TMP_NAME.match(child.name) and not child.is_symlink() and now - child.stat().st_mtime > STALE_TMP_S:
                shutil.rmtree(child, ignore_errors=True)
    except OSError:
        pass
    return n, b
