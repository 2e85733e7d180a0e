"""Chunked SQL: how the SQLite reader gets integer columns out of an export fast and bounded.

Why a module of its own (issue 51): every table the reader streams goes through the same few
steps, and their trade-offs are measured (``shared/reference/loading-performance.md``):

* only the needed columns are selected (:func:`_select_list`), never ``JOIN StringIds`` per row;
* a big table is read in rowid-range chunks (:data:`CHUNK_ROWS`) through the ADBC SQLite driver
  straight into Arrow, two chunks in flight on a thread pool (:func:`_pipelined`: the driver
  releases the GIL), or with the stdlib ``sqlite3`` cursor when the driver is not installed;
* a chunk whose integer column holds another storage class (a damaged or hand-edited export) is
  read again with every non-integer value as NULL (:func:`_fetch_integers`, :func:`_safe_expr`);
* rowids far apart (a row at 2^62) are chunked by keyset, never by a list of every range
  (:class:`_Ranges`).

Every statement runs on a read-only connection of its own (``trace.open``); a driver error is
one line (:class:`~nsysdoc.errors.CorruptFileError`), and Ctrl-C stops a running statement.
Tests patch :func:`_adbc_module` and :data:`CHUNK_ROWS` here: the other modules of this package
look both up through this module at call time.
"""
from __future__ import annotations

import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...errors import CorruptFileError
from .. import schema as S
from ..open import PROBE_SECONDS, ExportFile, connect_readonly, readonly_uri
from ..tables import BAD


_ADBC: list = []


def _adbc_module():
    """The ADBC SQLite driver, imported on first use (0.5 s: a report from the cache never needs
    it), or None when it is not installed (the stdlib cursor is used instead)."""
    if not _ADBC:
        try:  # pragma: no cover - import guard
            import adbc_driver_sqlite.dbapi as mod
        except Exception:  # pragma: no cover - exercised when the optional driver is missing
            mod = None
        _ADBC.append(mod)
    return _ADBC[0]


def _select_list(exp: ExportFile, table: str, cols: tuple[S.Col, ...]) -> tuple[list[str], dict[str, str]]:
    """SQL expressions to select, and canonical name -> source column actually present."""
    present = set(exp.columns(table))
    chosen: dict[str, str] = {}
    for c in cols:
        src = next((s for s in c.sources if s in present), None)
        if src is None:
            if c.required:
                raise CorruptFileError(f"{exp.path}: table {table} lacks column {c.sources[0]!r}",
                                       hint="this export's schema is not one nsysdoc knows; please report it")
            continue
        chosen[c.name] = src
    return [f'"{src}"' for src in chosen.values()], chosen


#: Columns whose bad values make the row unusable (the others fall back to their default).
_MUST = {"start_ns", "end_ns", "device_id", "context_id", "stream_id"}


def _must(col: S.Col) -> bool:
    """A bad value in this column makes its row unusable (an optional column falls back to its default)."""
    return col.name in _MUST and col.required


def _fill(batch_col, col: S.Col) -> np.ndarray:
    """An Arrow (chunked) integer column as int64 numpy: NULLs, and values that do not fit the
    column's dtype, become the column's default, or :data:`BAD` for a column that must hold one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    default = BAD if _must(col) else col.default
    arr = batch_col
    if pa.types.is_null(arr.type):
        return np.full(len(arr), default, dtype=np.int64)
    if arr.null_count:  # fill_null keeps chunking; fine for ChunkedArray and Array alike
        arr = pc.fill_null(arr, pa.scalar(default, type=arr.type) if pa.types.is_integer(arr.type) else default)
    if not pa.types.is_int64(arr.type):
        arr = arr.cast(pa.int64(), safe=False)
    out = arr.to_numpy(zero_copy_only=False)
    if col.dtype != "int64":
        info = np.iinfo(col.dtype)
        lo, hi = (0, 65535) if col.name == "device_id" else (info.min, info.max)
        bad = (out < lo) | (out > hi)
        if bad.any():
            out = out.copy() if not out.flags.writeable else out
            out[bad] = default
    return out


def _safe_expr(src: str) -> str:
    """The column as SQL that yields only integers or NULL (text, real and blob values -> NULL)."""
    return f"CASE WHEN typeof({src}) = 'integer' THEN {src} END"


def _is_type_error(exc: Exception) -> bool:
    return "type mismatch" in str(exc).lower()


_INT64_MAX = (1 << 63) - 1


def _bound(sql: str, lo: int, hi: int) -> tuple[str, tuple[int, int]]:
    """``sql``'s ``rowid >= ? AND rowid < ?`` bound to ``[lo, hi)``; a range that ends past the
    largest rowid SQLite has (2^63 - 1, one past it does not fit a parameter) is bound inclusive."""
    if hi > _INT64_MAX:
        return sql.replace("rowid < ?", "rowid <= ?", 1), (lo, _INT64_MAX)
    return sql, (lo, hi)


def _fetch_arrow(exp: ExportFile, sql: str, lo: int, hi: int):
    """One rowid range ``[lo, hi)`` of ``sql`` as an Arrow table, on its own ADBC connection."""
    sql, params = _bound(sql, lo, hi)
    with _adbc_module().connect(readonly_uri(exp.read_path)) as con:
        cur = con.cursor()
        try:
            cur.execute(sql, parameters=params)
            return cur.fetch_arrow_table()
        finally:
            cur.close()


def _fetch_rows(exp: ExportFile, sql: str, lo: int, hi: int) -> list[tuple]:
    """One rowid range ``[lo, hi)`` of ``sql`` through the stdlib cursor (no ADBC driver), on its
    own connection, whose statement stops when the load gives up (``exp.stop``)."""
    sql, params = _bound(sql, lo, hi)
    con = connect_readonly(exp.read_path, stop=exp.stop)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def _fetch_integers(exp: ExportFile, sql: str, safe_sql: str, lo: int, hi: int, n_int: int | None = None):
    """A chunk read with its integer columns as stored (``sql``), and again with every value that
    is not an integer as NULL (``safe_sql``) when one of them holds a real, a text or a blob: the
    driver refuses a column whose storage class changes mid-chunk, or types the column otherwise.
    ``n_int``: how many leading columns are integers (all when None)."""
    import pyarrow as pa

    try:
        tbl = _fetch_arrow(exp, sql, lo, hi)
        cols = tbl.columns if n_int is None else tbl.columns[:n_int]
        clean = all(pa.types.is_integer(c.type) or pa.types.is_null(c.type) for c in cols)
    except Exception as exc:
        if not _is_type_error(exc):
            raise
        clean = False
    return tbl if clean else _fetch_arrow(exp, safe_sql, lo, hi)


#: Rows per rowid-range chunk: bounds memory (a chunk's Arrow table per reader) and lets two
#: connections read one table concurrently (the ADBC driver releases the GIL).
CHUNK_ROWS = 1 << 19
#: Chunks read ahead of the one being processed.
CHUNKS_IN_FLIGHT = 2
_POOL = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2)))
    return _POOL


def _pipelined(exp: ExportFile, ranges, read):
    """``read(lo, hi)`` of each range, in order, with :data:`CHUNKS_IN_FLIGHT` more read ahead on
    the pool. A driver error is one line (:class:`CorruptFileError`); when the reading stops early
    (Ctrl-C, an error, the caller gave up) the reads not started are cancelled and those running
    on the stdlib cursor stop (``exp.stop``)."""
    futures: list = []
    try:
        for lo, hi in ranges:
            futures.append(_pool().submit(read, lo, hi))
            if len(futures) > CHUNKS_IN_FLIGHT:
                yield futures.pop(0).result()
        while futures:
            yield futures.pop(0).result()
    except (sqlite3.DatabaseError, OSError, UnicodeDecodeError) as exc:
        raise CorruptFileError(f"{exp.path}: cannot read ({exc})") from None
    except Exception as exc:  # ADBC raises its own DB-API error classes
        if type(exc).__module__.startswith("adbc_driver"):
            raise CorruptFileError(f"{exp.path}: cannot read ({str(exc).splitlines()[0]})") from None
        raise
    finally:
        if futures:
            exp.stop.set()
            for f in futures:
                f.cancel()


class _Ranges:
    """A table's rowid chunks ``[a, b)`` in order, never held as a list of every chunk: fixed
    steps over ``[lo, hi)`` when the rowids are dense, else between boundaries ``step`` rows apart
    found by keyset (:func:`_keyset_starts`: a table with a row at rowid 2^62 is read in as many
    chunks as its rows fill)."""

    def __init__(self, lo: int, hi: int, step: int, starts: list[int] | None = None) -> None:
        self.lo, self.hi, self.step, self.starts = lo, hi, step, starts

    def __len__(self) -> int:
        if self.starts is not None:
            return len(self.starts)
        return max(0, -(-(self.hi - self.lo) // self.step))

    def __iter__(self):
        if self.starts is not None:
            ends = self.starts[1:] + [self.hi]
            return iter(list(zip(self.starts, ends)))
        step, hi = self.step, self.hi
        return ((a, min(a + step, hi)) for a in range(self.lo, hi, step))

    @property
    def sparse(self) -> bool:
        return self.starts is not None


def _rows_bound(exp: ExportFile) -> int:
    """Most rows the file's bytes can hold (an SQLite row takes more than 4 bytes on its page)."""
    return max(CHUNK_ROWS, _file_size(exp.read_path) // 4)


def _keyset_starts(exp: ExportFile, table: str, lo: int, step: int) -> list[int]:
    """The first rowid of each chunk of ``step`` rows, by keyset (``rowid >= ? ORDER BY rowid LIMIT 1
    OFFSET ?``: each query walks one chunk's rowids in the table's b-tree, ~20 ms per 512 k rows)."""
    starts = [lo]
    con = exp.connect()
    try:
        sql = f'SELECT rowid FROM "{table}" WHERE rowid >= ? ORDER BY rowid LIMIT 1 OFFSET ?'
        while True:
            row = con.execute(sql, (starts[-1], step)).fetchone()
            if row is None:
                return starts
            starts.append(int(row[0]))
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise CorruptFileError(f"{exp.path}: cannot read ({exc})") from None
    finally:
        con.close()


def _table_ranges(exp: ExportFile, table: str, step: int) -> _Ranges:
    """The rowid chunks of ``table`` (:class:`_Ranges`): fixed steps over the rowid span when the
    file could hold that many rows, else keyset boundaries."""
    lo, hi = _rowid_range(exp, table)
    if hi - lo > _rows_bound(exp):
        return _Ranges(lo, hi, step, _keyset_starts(exp, table, lo, step))
    return _Ranges(lo, hi, step)


def _sample_windows(exp: ExportFile, table: str, ranges: _Ranges, rows: int = 100_000,
                    windows: int = 200) -> list[tuple[int, int]]:
    """``windows`` evenly spaced rowid windows of about ``rows`` rows in all: over the rowid span
    (dense rowids), or from chunk boundaries (sparse rowids: the window's end found by keyset)."""
    lo, hi = ranges.lo, ranges.hi
    if hi - lo <= 0:
        return []
    width = max(1, rows // windows)
    if not ranges.sparse:
        starts = np.unique(np.linspace(lo, max(lo, hi - width), windows).astype(np.int64))
        return [(int(a), int(min(a + width, hi))) for a in starts]
    picks = sorted({ranges.starts[int(i)] for i in np.linspace(0, len(ranges.starts) - 1, windows)})
    out = []
    con = exp.connect()
    try:
        sql = f'SELECT rowid FROM "{table}" WHERE rowid >= ? ORDER BY rowid LIMIT 1 OFFSET ?'
        for a in picks:
            row = con.execute(sql, (a, width)).fetchone()
            out.append((a, int(row[0]) if row is not None else hi))
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise CorruptFileError(f"{exp.path}: cannot read ({exc})") from None
    finally:
        con.close()
    return out


class _ChunkReader:
    """Reads integer columns of one table in rowid-range chunks (rowids are contiguous in nsys
    exports; gaps and ``where`` filters only make chunks shorter)."""

    def __init__(self, exp: ExportFile, table: str, cols: tuple[S.Col, ...], where: str = "",
                 chunk_rows: int | None = None, extra: dict[str, tuple[str, int]] | None = None) -> None:
        exprs, self.chosen = _select_list(exp, table, cols)
        # computed columns: name -> (SQL expression over the table's columns, value for NULL)
        for name, (sql, default) in (extra or {}).items():
            exprs.append(f"({sql})")
            self.chosen[name] = sql
            cols = cols + (S.Col(name, (), required=False, default=default),)
        self.exp, self.table, self.cols = exp, table, cols
        self.spec = {c.name: c for c in cols}
        self.where = where
        cond = where.replace("WHERE", "AND", 1) if where else ""
        self.exprs = exprs
        self.sql = f'SELECT {", ".join(exprs)} FROM "{table}" WHERE rowid >= ? AND rowid < ? {cond}'
        # for chunks whose columns hold non-integer values (damaged or hand-edited exports)
        self.safe_sql = (f'SELECT {", ".join(_safe_expr(e) for e in exprs)} FROM "{table}" '
                         f'WHERE rowid >= ? AND rowid < ? {cond}')
        self.ranges = _table_ranges(exp, table, chunk_rows or CHUNK_ROWS)
        self.lo, self.hi = self.ranges.lo, self.ranges.hi

    def read_chunk(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        if _adbc_module() is None:
            return self._read_sqlite3(lo, hi)
        tbl = _fetch_integers(self.exp, self.sql, self.safe_sql, lo, hi)
        out = {name: _fill(tbl.column(i), self.spec[name]) for i, name in enumerate(self.chosen)}
        return self._defaults(out, tbl.num_rows)

    def _read_sqlite3(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        names = list(self.chosen)
        rows = _fetch_rows(self.exp, self.safe_sql, lo, hi)
        defaults = {c.name: BAD if _must(c) else c.default for c in self.cols}
        data = np.array([[defaults[names[j]] if v is None else v for j, v in enumerate(r)] for r in rows],
                        dtype=np.int64).reshape(len(rows), len(names))
        out = {}
        for j, name in enumerate(names):
            v = np.ascontiguousarray(data[:, j])
            c = self.spec[name]
            if c.dtype != "int64":
                info = np.iinfo(c.dtype)
                lo_, hi_ = (0, 65535) if name == "device_id" else (info.min, info.max)
                v[(v < lo_) | (v > hi_)] = BAD if _must(c) else c.default
            out[name] = v
        return self._defaults(out, len(rows))

    def _defaults(self, out: dict, n: int) -> dict[str, np.ndarray]:
        for c in self.cols:
            if c.name not in out:
                out[c.name] = np.full(n, c.default, dtype=np.int64 if _must(c) else c.dtype)
        return out

    def chunks(self):
        """Columns per chunk, in rowid order; a few chunks are read ahead."""
        return _pipelined(self.exp, self.ranges, self.read_chunk)

    def sample(self, rows: int = 100_000, windows: int = 200) -> dict[str, np.ndarray]:
        """About ``rows`` rows from ``windows`` evenly spaced rowid ranges (for the table's median
        start when the table spans several chunks), read on the pool: this thread only waits, a
        wait Ctrl-C interrupts (a driver call on it could not be)."""
        wins = _sample_windows(self.exp, self.table, self.ranges, rows, windows)
        if not wins:
            return self._defaults({}, 0)
        parts = list(_pipelined(self.exp, wins, self.read_chunk))
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _query(exp: ExportFile, sql: str, params=(), budget: float | None = None) -> list[tuple]:
    """Every row of one statement, on a connection of its own; ``budget``: seconds it may take (a
    probe of the export's layout: :data:`~nsysdoc.trace.open.PROBE_SECONDS`). Ctrl-C stops it."""
    con = exp.connect(budget)
    try:
        return con.execute(sql, params).fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise CorruptFileError(f"{exp.path}: cannot read ({exc})") from None
    finally:
        con.close()


def _rowid_range(exp: ExportFile, table: str) -> tuple[int, int]:
    """``[lo, hi)`` covering the table's rowids (``(1, 1)`` when empty), looked up once per export:
    two queries, since SQLite answers a lone min()/max() of rowid from the b-tree edge (O(log n))
    but scans the table for both in one statement."""
    got = exp.rowid_ranges.get(table)
    if got is None:
        lo = _query(exp, f'SELECT min(rowid) FROM "{table}"', budget=PROBE_SECONDS)[0][0]
        hi = _query(exp, f'SELECT max(rowid) FROM "{table}"', budget=PROBE_SECONDS)[0][0]
        got = exp.rowid_ranges[table] = (int(lo or 1), int(hi or 0) + 1)
    return got


def _file_size(path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
