"""Open an nsys SQLite export read-only and decide whether it is one.

Never writes to the input: connections use ``mode=ro`` and ``immutable=1`` URIs (no journal, no
lock files, nothing created next to the file). ``immutable=1`` tells SQLite to ignore a ``-wal`` or
hot ``-journal`` beside the file, which would hide committed rows (or show rolled-back ones); so
when either exists, the export and its sidecar are copied to a private temporary folder, settled
there by SQLite (WAL checkpointed, hot journal rolled back), and the copy is read instead.

Every statement can be stopped (:class:`Watch`, SQLite's progress handler): at Ctrl-C, when the load
was given up on another thread, and past a time budget for the probes of the export's layout
(:data:`PROBE_SECONDS`). Only real tables are read: a view or a virtual table under the name of a
table nsysdoc reads is refused in one line (:data:`READ_TABLES`), any other one is ignored.
"""
from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CorruptFileError, InputError, NotNsysExportError, NotSqliteError
from ..inputs import regular_file
from . import schema as S

from ..formats import SQLITE_MAGIC  # noqa: E402

#: Seconds a probe of the export's layout may take (``sqlite_master``, column lists, rowid
#: bounds, a table's first rows): an nsys export answers each at once, so a file that takes longer
#: is refused in one line instead of being waited for.
PROBE_SECONDS = 30.0
#: SQLite virtual-machine steps between two calls of a connection's progress handler (each call
#: costs ~0.3 us of Python: below 1% of a statement's time, and a stop within a few ms)
PROGRESS_STEPS = 1000
#: Tables nsysdoc reads (the loaders and ``trace.stacks``): each must be a real table. SQLite
#: compares names without case, and so does the check.
READ_TABLES = frozenset(n.lower() for n in (
    *(t for ts in S.TRACE_TYPES.values() for t in ts), S.STRINGS, S.GPU_METRICS, S.GPU_METRICS_INFO,
    *S.META_TABLES, "ANALYSIS_DETAILS", "DIAGNOSTIC_EVENT", "PROCESSES", "PROFILER_OVERHEAD", "ProcessStreams",
    "TARGET_INFO_GPU", "TARGET_INFO_SESSION_START_TIME", "ThreadNames", "CUDA_CALLCHAINS"))


class Watch:
    """A connection's progress handler: SQLite calls it every :data:`PROGRESS_STEPS` steps of a
    statement, and a true answer stops the statement (``sqlite3.OperationalError: interrupted``).

    * **Ctrl-C**: SQLite runs in C, where the interpreter cannot deliver SIGINT; it does while
      Python code runs, which this handler is: the ``KeyboardInterrupt`` raised in it stops the
      statement (the sqlite3 module clears the exception), and :meth:`reason` raises it again;
    * ``stop`` set: another thread gave up on the load (its worker threads' statements stop);
    * past ``deadline`` (:data:`PROBE_SECONDS` for a probe): the export is refused in one line."""

    __slots__ = ("deadline", "stop", "budget", "expired", "stopped")

    def __init__(self, budget: float | None = None, stop: threading.Event | None = None) -> None:
        self.budget = budget
        self.deadline = None if budget is None else time.monotonic() + budget
        self.stop = stop
        self.expired = self.stopped = False

    def __call__(self) -> int:
        try:
            if self.stop is not None and self.stop.is_set():
                self.stopped = True
                return 1
            if self.deadline is not None and time.monotonic() > self.deadline:
                self.expired = True
                return 1
            return 0
        except KeyboardInterrupt:  # SIGINT delivered inside the handler: stop the statement
            return 1

    def reason(self, exc: BaseException, path) -> BaseException:
        """What an ``interrupted`` statement of this connection raises: a one-line refusal past the
        budget, ``KeyboardInterrupt`` at Ctrl-C (or when the load was given up), else ``exc``."""
        if not (isinstance(exc, sqlite3.OperationalError) and "interrupt" in str(exc).lower()):
            return exc
        if self.expired:
            return CorruptFileError(
                f"{path}: SQLite took more than {self.budget:g} s to answer a probe of the export's layout; "
                "an nsys export answers at once", hint="export again with nsys export --type sqlite")
        return KeyboardInterrupt()


class _Cursor(sqlite3.Cursor):
    """A cursor whose statements stopped by the connection's :class:`Watch` raise what it says."""

    def _why(self, exc: sqlite3.OperationalError) -> BaseException:
        con = self.connection
        return con.watch.reason(exc, con.path) if isinstance(con, _Connection) else exc

    def execute(self, *args):
        try:
            return super().execute(*args)
        except sqlite3.OperationalError as exc:
            raise self._why(exc) from None

    def fetchone(self):
        try:
            return super().fetchone()
        except sqlite3.OperationalError as exc:
            raise self._why(exc) from None

    def fetchmany(self, *args):
        try:
            return super().fetchmany(*args)
        except sqlite3.OperationalError as exc:
            raise self._why(exc) from None

    def fetchall(self):
        try:
            return super().fetchall()
        except sqlite3.OperationalError as exc:
            raise self._why(exc) from None

    def __next__(self):
        try:
            return super().__next__()
        except sqlite3.OperationalError as exc:
            raise self._why(exc) from None


class _Connection(sqlite3.Connection):
    """A read-only connection with a :class:`Watch` (``con.execute`` uses :class:`_Cursor`)."""

    watch: Watch
    path: str

    def cursor(self, factory=_Cursor):  # noqa: D102
        return super().cursor(factory)

    def execute(self, sql, parameters=()):  # noqa: D102
        return self.cursor().execute(sql, parameters)


def readonly_uri(path: str | os.PathLike) -> str:
    """``file:`` URI that opens ``path`` read-only and immutable (no locks, no -journal files)."""
    # the name's bytes, not its str: a file name that is not UTF-8 (surrogateescape) quotes byte for byte
    quoted = urllib.parse.quote(os.fsencode(str(Path(path).resolve())))
    return f"file:{quoted}?mode=ro&immutable=1"


def check_sqlite_file(path: str | os.PathLike) -> Path:
    """Raise a one-line error unless ``path`` is a readable, complete SQLite file."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not an nsys export", hint="pass a .sqlite or .nsys-rep file")
    p = regular_file(p, "input")  # never opens a FIFO or device
    try:
        with open(p, "rb") as fh:
            header = fh.read(100)
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror})") from None
    if not header.startswith(SQLITE_MAGIC):
        if len(header) == 0:
            raise NotSqliteError(f"{p}: file is empty, not an SQLite nsys export")
        raise NotSqliteError(
            f"{p}: not an SQLite file",
            hint="export the capture first: nsys export --type sqlite run.nsys-rep (or pass the .nsys-rep)",
        )
    if len(header) < 100:
        raise CorruptFileError(f"{p}: truncated SQLite file ({len(header)} bytes)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    change_counter = int.from_bytes(header[24:28], "big")
    page_count = int.from_bytes(header[28:32], "big")
    valid_for = int.from_bytes(header[92:96], "big")
    size = p.stat().st_size
    if page_size < 512 or page_size & (page_size - 1):
        raise CorruptFileError(f"{p}: damaged SQLite header (page size {page_size})")
    if page_count and valid_for == change_counter and size < page_count * page_size:
        raise CorruptFileError(
            f"{p}: truncated SQLite file ({size} of {page_count * page_size} bytes)",
            hint="the export or copy was interrupted; export again with nsys export --type sqlite",
        )
    return p


@dataclass
class ExportFile:
    """A validated nsys export: its path, tables and their columns."""

    path: Path
    tables: dict[str, list[str]] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    #: the file SQLite reads: ``path``, or a settled private copy when a -wal/-journal is beside it
    read_path: Path | None = None
    #: ``[lo, hi)`` of each table's rowids, once looked up (the file is opened immutable)
    rowid_ranges: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)
    #: set when a load gives up (Ctrl-C, an error): statements still running on its worker
    #: threads stop (:class:`Watch`)
    stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def __post_init__(self) -> None:
        if self.read_path is None:
            self.read_path = self.path

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> list[str]:
        return self.tables.get(table, [])

    def connect(self, budget: float | None = None) -> sqlite3.Connection:
        """A read-only connection whose statements stop at Ctrl-C, when the load gives up, and
        after ``budget`` seconds (one-line refusal)."""
        return connect_readonly(self.read_path, budget=budget, stop=self.stop)

    @property
    def nsys_version(self) -> str | None:
        return self.meta.get("EXPORT_PRODUCT_VERSION")

    @property
    def schema_version(self) -> str | None:
        return self.meta.get("EXPORT_SCHEMA_VERSION")


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")  # one bad string must not refuse the whole capture


def connect_readonly(path: str | os.PathLike, budget: float | None = None,
                     stop: threading.Event | None = None) -> sqlite3.Connection:
    """``path`` opened read-only and immutable, its statements watched (:class:`Watch`)."""
    con = sqlite3.connect(readonly_uri(path), uri=True, check_same_thread=False, factory=_Connection)
    con.text_factory = _decode
    watch(con, path, budget, stop)
    return con


def watch(con: sqlite3.Connection, path, budget: float | None = None, stop: threading.Event | None = None) -> Watch:
    """Installs a :class:`Watch` on ``con`` (a :class:`_Connection` keeps it for its cursors)."""
    w = Watch(budget, stop)
    con.set_progress_handler(w, PROGRESS_STEPS)
    if isinstance(con, _Connection):
        con.watch, con.path = w, str(path)
    return w


SIDECARS = ("-wal", "-journal")
_COPIES: list[str] = []


def _cleanup_copies() -> None:
    while _COPIES:
        shutil.rmtree(_COPIES.pop(), ignore_errors=True)


atexit.register(_cleanup_copies)


def _sidecars(p: Path) -> list[Path]:
    out = []
    for suffix in SIDECARS:
        s = p.with_name(p.name + suffix)
        try:
            if s.is_file() and s.stat().st_size > 0:
                out.append(s)
        except OSError:
            pass
    return out


def settled_copy(p: Path, sidecars: list[Path]) -> Path:
    """A private copy of ``p`` with its sidecars applied by SQLite (the input is only read)."""
    folder = tempfile.mkdtemp(prefix="nsysdoc-settle-")
    _COPIES.append(folder)
    copy = Path(folder) / "export.sqlite"
    try:
        shutil.copyfile(p, copy)
        for s in sidecars:
            shutil.copyfile(s, Path(folder) / ("export.sqlite" + s.name[len(p.name):]))
        con = sqlite3.connect(str(copy), factory=_Connection)
        watch(con, p)  # Ctrl-C stops a long replay
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # replays WAL / rolls back journal
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            con.execute("PRAGMA journal_mode=DELETE").fetchall()
        finally:
            con.close()
    except OSError as exc:
        raise InputError(f"{p}: has a {sidecars[0].name[len(p.name):]} file beside it and no private copy "
                         f"could be made to read it safely ({exc.strerror or exc})",
                         hint="set TMPDIR to a folder with free space, or open the export once in sqlite3 "
                              "to checkpoint it") from None
    except sqlite3.DatabaseError as exc:
        raise CorruptFileError(f"{p}: damaged SQLite file or sidecar ({exc})",
                               hint="export again with nsys export --type sqlite") from None
    return copy


def open_export(path: str | os.PathLike) -> ExportFile:
    """Validate ``path`` and return its table layout; refuses non-nsys SQLite files and views (or
    virtual tables) under the name of a table nsysdoc reads. Every probe has :data:`PROBE_SECONDS`."""
    p = check_sqlite_file(path)
    sidecars = _sidecars(p)
    read = settled_copy(p, sidecars) if sidecars else p
    try:
        con = connect_readonly(read, budget=PROBE_SECONDS)
        try:
            objects = con.execute("SELECT name, type, sql FROM sqlite_master WHERE type IN ('table','view')").fetchall()
            tables: dict[str, list[str]] = {}
            for name, kind, sql in objects:
                if not isinstance(name, str):
                    continue
                # a view runs any query (one over an endless recursion never ends) and a virtual
                # table any module: neither is read, and one standing for a table nsysdoc reads is refused
                real = kind == "table" and not (isinstance(sql, str) and sql.lstrip()[:14].upper() == "CREATE VIRTUAL")
                if not real:
                    if name.lower() in READ_TABLES:
                        what = "a view" if kind == "view" else "a virtual table"
                        raise NotNsysExportError(
                            f"{p}: {name} is {what}, not a table: an nsys export holds only tables",
                            hint="export the capture again with nsys export --type sqlite")
                    continue
                if time.monotonic() > con.watch.deadline:  # millions of tables: the loop is the probe too
                    con.watch.expired = True
                    raise con.watch.reason(sqlite3.OperationalError("interrupted"), p)
                cols = [r[1] for r in con.execute(f'PRAGMA table_info("{_quoted(name)}")')]
                tables[name] = cols
            meta: dict[str, str] = {}
            for mt in S.META_TABLES:
                if mt in tables and {"name", "value"} <= set(tables[mt]):
                    meta.update({str(k): str(v) for k, v in con.execute(f'SELECT name, value FROM "{mt}"')})
        finally:
            con.close()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # SQLite error texts may quote broken bytes
        raise CorruptFileError(f"{p}: damaged SQLite file ({exc})",
                               hint="export again with nsys export --type sqlite") from None
    if not tables:
        raise NotNsysExportError(f"{p}: SQLite file has no tables; not an nsys export")
    if any(m in tables for m in S.NVPROF_MARKERS) and S.STRINGS not in tables:
        raise NotNsysExportError(
            f"{p}: looks like an nvprof/NVVP database, not an Nsight Systems export",
            hint="profile with nsys (nsysdoc capture -- python train.py) and export with nsys export --type sqlite",
        )
    nsys_like = S.STRINGS in tables and (
        any(m in tables for m in S.META_TABLES)
        or "TARGET_INFO_SESSION_START_TIME" in tables
        or "globalTid" in tables.get(S.RUNTIME, [])
        or "ThreadNames" in tables
    )
    if not nsys_like:
        raise NotNsysExportError(
            f"{p}: SQLite file but not an Nsight Systems export (no StringIds/metadata tables)",
            hint="export the capture with: nsys export --type sqlite run.nsys-rep",
        )
    return ExportFile(p, tables, meta, read)


def _quoted(name: str) -> str:
    """A name inside double quotes (a quote in it doubled)."""
    return name.replace('"', '""')
