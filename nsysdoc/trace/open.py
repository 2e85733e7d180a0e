"""Open an nsys SQLite export read-only and decide whether it is one.

Never writes to the input: connections use ``mode=ro`` and ``immutable=1`` URIs (no journal, no
lock files, nothing created next to the file). ``immutable=1`` tells SQLite to ignore a ``-wal`` or
hot ``-journal`` beside the file, which would hide committed rows (or show rolled-back ones); so
when either exists, the export and its sidecar are copied to a private temporary folder, settled
there by SQLite (WAL checkpointed, hot journal rolled back), and the copy is read instead.
"""
from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CorruptFileError, InputError, NotNsysExportError, NotSqliteError
from ..inputs import regular_file
from . import schema as S

SQLITE_MAGIC = b"SQLite format 3\x00"


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

    def __post_init__(self) -> None:
        if self.read_path is None:
            self.read_path = self.path

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> list[str]:
        return self.tables.get(table, [])

    def connect(self) -> sqlite3.Connection:
        return connect_readonly(self.read_path)

    @property
    def nsys_version(self) -> str | None:
        return self.meta.get("EXPORT_PRODUCT_VERSION")

    @property
    def schema_version(self) -> str | None:
        return self.meta.get("EXPORT_SCHEMA_VERSION")


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")  # one bad string must not refuse the whole capture


def connect_readonly(path: str | os.PathLike) -> sqlite3.Connection:
    con = sqlite3.connect(readonly_uri(path), uri=True, check_same_thread=False)
    con.text_factory = _decode
    return con


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
        con = sqlite3.connect(str(copy))
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
    """Validate ``path`` and return its table layout; refuses non-nsys SQLite files."""
    p = check_sqlite_file(path)
    sidecars = _sidecars(p)
    read = settled_copy(p, sidecars) if sidecars else p
    try:
        con = connect_readonly(read)
        try:
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")]
            tables: dict[str, list[str]] = {}
            for name in names:
                cols = [r[1] for r in con.execute(f'PRAGMA table_info("{name}")')]
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
