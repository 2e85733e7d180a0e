"""The SQLite reader: an nsys SQLite export into a :class:`~nsysdoc.trace.model.Trace`.

How (and why this way — measured in ``shared/reference/loading-performance.md`` and
``benchmarks/``):

* Only the needed integer columns are selected, never ``JOIN StringIds`` per row; names are
  mapped once per distinct string id.
* Big tables are **streamed**: read in rowid-range chunks through the ADBC SQLite driver straight
  into Arrow (about 5x faster and 3x less memory than ``pandas.read_sql``; two chunks in flight
  on two connections, the driver releases the GIL), checked, given their small ids, and appended
  to the capture's :class:`~nsysdoc.trace.store.Store` in blocks. No table is ever held whole:
  peak memory is a few chunks plus the per-row arrays the join needs while loading (see
  ``docs/loader.md``). Without ADBC the stdlib ``sqlite3`` cursor is used (slower, same result).
* The launch join (which runtime row launched each GPU row, by process and correlation id) is done
  while loading, with a direct-address table per process: GPU rows carry ``api`` (the runtime
  row's position) and ``api_start_ns``.
* The store's blocks are written as Arrow IPC record batches into the cache folder (never next to the
  input; keys, validation and the size cap are :mod:`nsysdoc.cache`'s), so a second report on the
  same capture skips SQLite and reads only the blocks each part of the analysis needs.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .. import cache as cache_m
from ..errors import CorruptFileError, EmptyCaptureError
from . import schema as S
from .cache_entry import CACHE_FORMAT, cache_read, cache_tmp, publish
from .nvtx_text import PYTHON_GROUPING_MAX, Groups, coded_facts, local_facts, text_facts
from .columns import Columns, factorize
from .tables import (BAD, DROP_REASONS, MAX_STRING_CHARS, SMALL_FRAMES, TABLE_CODED, TABLE_DTYPES, TIME_LIMIT_NS, UNKNOWN_NAME, Drops,
                     FirstLaunches, ProgressFn, api_kind_codes, cap, gpu_table, launch_arrays, median_anchor,
                     row_checks, stream_luts, threads_table, unique_ints, validate)
from .model import StringTable, Trace
from .open import PROBE_SECONDS, ExportFile, connect_readonly, open_export, readonly_uri
from .store import UNCOMPRESSED_MAX_BYTES, UNCOMPRESSED_ROW_BYTES, SpillError, Store, _malloc_trim, release_memory

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


# --------------------------------------------------------------------------------------------
# low-level column reading
# --------------------------------------------------------------------------------------------
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


def _session_duration(exp: ExportFile) -> int | None:
    if exp.has("ANALYSIS_DETAILS") and "duration" in exp.columns("ANALYSIS_DETAILS"):
        rows = _query(exp, 'SELECT duration FROM "ANALYSIS_DETAILS" LIMIT 1', budget=PROBE_SECONDS)
        if rows and isinstance(rows[0][0], int) and not isinstance(rows[0][0], bool) and 0 < rows[0][0] < TIME_LIMIT_NS:
            return int(rows[0][0])
    return None


def _session_start(exp: ExportFile) -> int | None:
    """``TARGET_INFO_SESSION_START_TIME.utcEpochNs``: the UTC wall clock (ns) at session start."""
    if exp.has("TARGET_INFO_SESSION_START_TIME") and "utcEpochNs" in exp.columns("TARGET_INFO_SESSION_START_TIME"):
        rows = _query(exp, 'SELECT utcEpochNs FROM "TARGET_INFO_SESSION_START_TIME" LIMIT 1', budget=PROBE_SECONDS)
        if rows and type(rows[0][0]) is int and 0 < rows[0][0] < TIME_LIMIT_NS:
            return int(rows[0][0])
    return None


#: An event time at or beyond this (3 * 10^17 ns: 1979) is on the UNIX epoch, not on the session's
#: timeline (which counts from 0 at the session start: days are 10^14 ns)
ABSOLUTE_MIN_NS = 3 * 10 ** 17
#: tables sampled to tell the clock of an export's timestamps (their first rows)
_CLOCK_TABLES = (S.RUNTIME, S.KERNEL, S.MEMCPY, S.MEMSET, S.OSRT, S.NVTX)


def timestamp_clock(exp: ExportFile, session_start: int | None) -> tuple[str, int]:
    """How the export's timestamps count: ``("session", 0)`` from the session start (nsys's
    default), or ``("absolute", shift)`` on the UTC wall clock, as ``nsys export
    --ts-normalize=true`` writes them. ``shift`` is what the loader subtracts to put them back on
    the session timeline: ``utcEpochNs``, or without it the earliest time sampled.

    Told from the first rows of the event tables: their median is absolute when it lies nearer
    ``utcEpochNs`` than 0 (without ``utcEpochNs``: at or beyond :data:`ABSOLUTE_MIN_NS`)."""
    sample: list[int] = []
    for table in _CLOCK_TABLES:
        if exp.has(table) and "start" in exp.columns(table):
            rows = _query(exp, f'SELECT start FROM "{table}" WHERE typeof(start) = \'integer\' AND start != 0 LIMIT 3',
                          budget=PROBE_SECONDS)
            sample += [int(r[0]) for r in rows if abs(r[0]) < TIME_LIMIT_NS]
    if not sample:
        return "session", 0
    med = int(np.median(sample))
    if session_start:
        return ("absolute", session_start) if abs(med - session_start) < abs(med) else ("session", 0)
    return ("absolute", min(sample)) if med >= ABSOLUTE_MIN_NS else ("session", 0)


def _shift_times(d: dict[str, np.ndarray], shift: int, cols=("start_ns", "end_ns")) -> dict[str, np.ndarray]:
    """``d`` with ``shift`` subtracted from its time columns (NULLs, read as BAD, stay BAD)."""
    if shift:
        for c in cols:
            if c in d:
                v = d[c]
                d[c] = np.where(v != BAD, v - shift, BAD)
    return d


def _strings(exp: ExportFile) -> StringTable:
    if not exp.has(S.STRINGS):
        return StringTable(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object))
    rows = _query(exp, 'SELECT id, value FROM "StringIds"')
    rows = [r for r in rows if type(r[0]) is int]  # a NULL or non-integer id names nothing
    if not rows:
        return StringTable(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object))
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    vals = np.array([_text(r[1]) for r in rows], dtype=object)
    return StringTable(ids, vals)


class _Codes:
    """First-seen codes of int64 keys, assigned incrementally chunk by chunk (a chunk's keys are
    few: processes, devices, streams, threads)."""

    def __init__(self) -> None:
        self.index: dict[int, int] = {}
        self.keys: list[int] = []

    def __call__(self, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.int64)
        if len(keys) and (keys == keys[0]).all():  # the usual chunk: one process, device or thread
            k = int(keys[0])
            c = self.index.get(k)
            if c is None:
                c = self.index[k] = len(self.keys)
                self.keys.append(k)
            return np.full(len(keys), c, dtype=np.int32)
        codes, uniq = factorize(keys)
        lut = np.empty(len(uniq), dtype=np.int32)
        for j, k in enumerate(np.asarray(uniq).tolist()):
            c = self.index.get(k)
            if c is None:
                c = self.index[k] = len(self.keys)
                self.keys.append(k)
            lut[j] = c
        return lut[codes] if len(codes) else np.zeros(0, dtype=np.int32)

    def add(self, keys) -> None:
        self(np.asarray(list(keys), dtype=np.int64))

    def remap(self) -> tuple[np.ndarray, np.ndarray]:
        """``(sorted keys, code -> index in the sorted keys)``."""
        keys = np.asarray(self.keys, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        remap = np.empty(len(keys), dtype=np.int32)
        remap[order] = np.arange(len(keys), dtype=np.int32)
        return keys[order], remap


class _TupleCodes:
    """First-seen codes of rows of several int columns (a stream: process, device, context, id)."""

    def __init__(self) -> None:
        self.index: dict[tuple, int] = {}
        self.rows: list[tuple] = []

    def __call__(self, *cols: np.ndarray) -> np.ndarray:
        n = len(cols[0])
        if n == 0:
            return np.zeros(0, dtype=np.int32)
        cols = [np.asarray(c, dtype=np.int64) for c in cols]
        # one int64 key when every column fits 16 bits (codes, context and stream ids do), else a
        # nested factorisation: either way codes follow the first appearance of the whole tuple
        if len(cols) <= 4 and all(int(c.min()) >= 0 and int(c.max()) < (1 << 15) for c in cols):
            key = np.zeros(n, dtype=np.int64)
            for c in cols:
                key = (key << 16) | c
            code, _ = factorize(key)
        else:
            code = np.zeros(n, dtype=np.int64)
            for c in cols:
                cc, _ = factorize(c)
                code, _ = factorize((code << 32) | cc.astype(np.int64))
        nu = int(code.max()) + 1
        first = np.empty(nu, dtype=np.int64)
        first[code[::-1]] = np.arange(n - 1, -1, -1)
        lut = np.empty(nu, dtype=np.int32)
        vals = [np.asarray(c)[first].tolist() for c in cols]
        for j, row in enumerate(zip(*vals)):
            c = self.index.get(row)
            if c is None:
                c = self.index[row] = len(self.rows)
                self.rows.append(row)
            lut[j] = c
        return lut[code]


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


#: Fewest bytes a stored event row takes (runtime rows ~35, GPU rows ~70 with their launch columns).
_MIN_ROW_BYTES = 32


def _expected_rows(exp: ExportFile, tables) -> int:
    """Upper bound of the event rows: each big table's rowid range, at most what the file holds."""
    n = 0
    for t in set(_TABLE_OF.values()) | {S.NVTX, S.OSRT}:
        if t in tables:
            lo, hi = _rowid_range(exp, t)
            n += min(max(0, hi - lo), _rows_bound(exp))
    return n


def _file_size(path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class _Grow:
    """A column filled chunk by chunk into one array reserved for the expected row count (no
    list of pieces and no final concatenation: the two would both be held at the end). Codes that
    outgrow the dtype widen it once."""

    def __init__(self, dtype) -> None:
        self.a = np.zeros(0, dtype)
        self.n = 0

    def reserve(self, n: int) -> None:
        if n > len(self.a):
            grown = np.empty(n, self.a.dtype)
            grown[:self.n] = self.a[:self.n]
            self.a = grown

    def add(self, v: np.ndarray) -> None:
        if self.a.dtype.kind == "i" and len(v) and int(v.max()) > np.iinfo(self.a.dtype).max:
            self.a = self.a.astype(np.int32 if int(v.max()) <= np.iinfo(np.int32).max else np.int64)
        if self.n + len(v) > len(self.a):
            self.reserve(max(self.n + len(v), 2 * len(self.a)))
        self.a[self.n:self.n + len(v)] = v
        self.n += len(v)

    def done(self) -> np.ndarray:
        """The filled part (copied when rows were dropped, so the reserve is not kept)."""
        a, self.a = self.a, np.zeros(0, self.a.dtype)
        return a[:self.n] if self.n == len(a) else a[:self.n].copy()


class _CorrIndex:
    """Runtime row position per (process code, correlation id): the launch join. A dense table per
    process (correlation ids are small consecutive integers); a process whose ids are too sparse
    for one keeps sorted (id, position) pairs. When several rows share an id the last one wins
    (nsys writes one launch per id)."""

    def __init__(self) -> None:
        self.dense: dict[int, np.ndarray] = {}
        self.rows: dict[int, int] = {}
        self.sparse: dict[int, list] = {}
        self._sorted: dict[int, tuple] = {}

    def add(self, proc: np.ndarray, corr: np.ndarray, pos: np.ndarray) -> None:
        if not len(pos):
            return
        procs = [int(proc[0])] if (proc == proc[0]).all() else np.unique(proc).tolist()
        for p in procs:
            sel = proc == p if len(procs) > 1 else slice(None)
            c = corr[sel].astype(np.int64)
            q = pos[sel].astype(np.int64)
            self.rows[p] = self.rows.get(p, 0) + len(c)
            if p not in self.sparse:
                mx = int(c.max())
                if mx + 1 > 8 * self.rows[p] + (1 << 22):
                    old = self.dense.pop(p, None)
                    self.sparse[p] = []
                    if old is not None:
                        have = np.flatnonzero(old >= 0)
                        self.sparse[p].append((have, old[have].astype(np.int64)))
                else:
                    arr = self.dense.get(p)
                    if arr is None or len(arr) <= mx:
                        grown = np.full(max(mx + 1, 2 * (len(arr) if arr is not None else 0)), -1, dtype=np.int32)
                        if arr is not None:
                            grown[:len(arr)] = arr
                        arr = self.dense[p] = grown
                    arr[c] = q
                    continue
            self.sparse[p].append((c, q))
            self._sorted.pop(p, None)

    def lookup(self, proc: np.ndarray, corr: np.ndarray) -> np.ndarray:
        out = np.full(len(corr), -1, dtype=np.int64)
        if not len(corr):
            return out
        corr = corr.astype(np.int64)
        procs = [int(proc[0])] if (proc == proc[0]).all() else np.unique(proc).tolist()
        for p in procs:
            sel = np.flatnonzero(proc == p) if len(procs) > 1 else np.arange(len(corr))
            c = corr[sel]
            arr = self.dense.get(p)
            if arr is not None:
                ok = (c > 0) & (c < len(arr))
                out[sel[ok]] = arr[c[ok]]
            elif p in self.sparse:
                if p not in self._sorted:
                    ks = np.concatenate([a for a, _ in self.sparse[p]])
                    vs = np.concatenate([b for _, b in self.sparse[p]])
                    order = np.argsort(ks, kind="stable")
                    self._sorted[p] = (ks[order], vs[order])
                ks, vs = self._sorted[p]
                ok = c > 0
                i = np.searchsorted(ks, c[ok], side="right") - 1  # last row of equal ids
                hit = (i >= 0) & (ks[np.maximum(i, 0)] == c[ok])
                res = np.full(int(ok.sum()), -1, dtype=np.int64)
                res[hit] = vs[i[hit]]
                out[sel[ok]] = res
        return out


GPU_TABLES = ("kernels", "memcpy", "memset", "sync")
_TABLE_OF = {"kernels": S.KERNEL, "memcpy": S.MEMCPY, "memset": S.MEMSET, "sync": S.SYNC, "runtime": S.RUNTIME,
             "osrt": S.OSRT, "nvtx": S.NVTX}
_COLS_OF = {"kernels": S.KERNEL_COLS, "memcpy": S.MEMCPY_COLS, "memset": S.MEMSET_COLS, "sync": S.SYNC_COLS,
            "runtime": S.RUNTIME_COLS, "osrt": S.OSRT_COLS}
#: the order tables' refused rows are listed in (as the tables appear in the report)
_DROP_ORDER = (S.KERNEL, S.RUNTIME, S.MEMCPY, S.MEMSET, S.SYNC, S.OSRT, S.NVTX)


class _Ingest:
    """Streams an export's tables into a :class:`Store` (see the module docstring)."""

    def __init__(self, exp: ExportFile, store: Store, strings: StringTable, duration_ns: int | None,
                 drops: Drops, progress: ProgressFn | None = None, shift: int = 0) -> None:
        self.exp, self.store, self.duration_ns, self.drops = exp, store, duration_ns, drops
        #: ``StringIds`` as exported (NVTX ``textId`` and the small tables' ids look names up in it)
        self.raw_strings = strings
        #: string ids size arrays (per-name counts and codes): ids far beyond the number of
        #: strings (a ``StringIds`` row at id 2^31) are renumbered to their rank, and the event
        #: tables' name ids with them (``None``: the ids are kept, the usual dense 0..n-1)
        self.string_ids: np.ndarray | None = None
        if len(strings) and (int(strings.ids[0]) < 0 or int(strings.ids[-1]) >= max(1 << 22, 4 * len(strings))):
            self.string_ids = strings.ids
            strings = StringTable(np.arange(len(strings), dtype=np.int64), strings.values)
        self.strings = strings
        #: subtracted from every time read: absolute timestamps back on the session timeline
        self.shift = shift
        self.say = progress or (lambda _msg: None)
        self.procs, self.devices, self.threads = _Codes(), _Codes(), _Codes()
        self.streams = _TupleCodes()
        self.corr = _CorrIndex()
        #: the largest string id: a name id beyond it names nothing (and must not size an array)
        self.max_id = int(strings.ids.max()) if len(strings) else -1
        self.unknown_id = self.max_id + 1
        self.unknown_used = False
        # per runtime row, for the launch join: start, kind, duration (uint32; longer ones in
        # rt_long) and thread code (int16 until there are more threads)
        self.rt_start, self.rt_kind = _Grow(np.int64), _Grow(np.int8)
        self.rt_dur, self.rt_thread = _Grow(np.uint32), _Grow(np.int16)
        self.rt_long: dict[int, int] = {}  # durations of 2^32 ns or more, by position
        self.rt_n = 0
        self.kind_of = api_kind_codes(strings)
        self.launch_name = strings.flags(lambda v: S.KERNEL_LAUNCH_APIS.match(S.strip_api_suffix(v)) is not None)
        self.is_wait = strings.flags(lambda v: S.OS_WAIT_CALLS.match(v) is not None)
        self.name_counts = np.zeros(0, dtype=np.int64)
        self.candidates: list[np.ndarray] = []
        self.pageable: list[np.ndarray] = []
        self.first = FirstLaunches()
        self.kernel_names: set[int] = set()
        self.expected: dict[str, int] = {}  # rows of each big table (its rowid range)
        self.kernel_shorts: set[int] = set()
        #: distinct packed launch configurations (schema.launch_key_sql): a kernel row keeps its code
        self.launch = _Codes()
        self.nvtx_domains = _TupleCodes()
        self.nvtx_groups = Groups()
        self.domain_names: dict[tuple[int, int], str] = {}
        self.domain_any: dict[int, str] = {}
        self.counts: dict[str, int] = {}

    # ---- shared steps ------------------------------------------------------------------------
    def _names(self, d: dict[str, np.ndarray]) -> None:
        """Name ids that are NULL, negative or beyond the strings table's largest id point at one
        added string, so per-name statistics keep the row's time under a visible name instead of
        failing (an id of 2^31 - 1 would size a per-name count at 16 GiB); with renumbered strings
        (:attr:`string_ids`) each id becomes its rank, an id without a string the added one."""
        for c in ("name_id", "short_id"):
            if c in d and len(d[c]):
                v = d[c]
                if self.string_ids is not None:
                    ids = self.string_ids
                    pos = np.minimum(np.searchsorted(ids, v), len(ids) - 1)
                    found = ids[pos] == v
                    d[c] = np.where(found, pos, self.unknown_id)
                    self.unknown_used |= not found.all()
                    continue
                bad = (v < 0) | (v > self.max_id)
                if bad.any():
                    d[c] = v.copy()
                    d[c][bad] = self.unknown_id
                    self.unknown_used = True

    def _rows(self, key: str, where: str = "", cols=None, end_optional: bool = False):
        """Validated chunks of one table (dict of columns), in rowid order."""
        table = _TABLE_OF[key]
        # a kernel's launch configuration, packed by SQLite into one column (schema.launch_key_sql)
        extra = {"launch_key": (S.launch_key_sql(self.exp.columns(table)), S.LAUNCH_UNKNOWN)} \
            if key == "kernels" else None
        reader = _ChunkReader(self.exp, table, cols or _COLS_OF[key], where, extra=extra)
        self.expected[key] = min(max(0, reader.hi - reader.lo), _rows_bound(self.exp))
        anchor = None
        if len(reader.ranges) > 1 and self.duration_ns:
            smp = reader.sample()
            ok, _, _ = row_checks(smp, end_optional)
            anchor = median_anchor(smp["start_ns"], ok)
            anchor = None if anchor is None else anchor - self.shift
        for chunk in reader.chunks():
            self._names(chunk)
            _shift_times(chunk, self.shift)
            d = validate(chunk, table, self.duration_ns, self.drops, end_optional, anchor=anchor if len(reader.ranges) > 1 else None)
            yield d

    # ---- tables ------------------------------------------------------------------------------
    def runtime(self) -> None:
        t = self.store.table("runtime", TABLE_DTYPES["runtime"], TABLE_CODED["runtime"])
        if not self.exp.has(S.RUNTIME):
            return
        for d in self._rows("runtime"):
            n = len(d["start_ns"])
            if n == 0:
                continue
            if not self.rt_n:  # the rowid range bounds the rows; a row takes more than 8 bytes on disk
                rows = min(self.expected.get("runtime", 0), _file_size(self.exp.read_path) // 8)
                for g in (self.rt_start, self.rt_kind, self.rt_dur, self.rt_thread):
                    g.reserve(rows)
            pos = np.arange(self.rt_n, self.rt_n + n, dtype=np.int64)
            gtid = d["global_tid"]
            proc = self.procs(gtid & S.PROCESS_MASK)
            kind = self.kind_of(d["name_id"]).astype(np.int8)
            corr = d["correlation_id"]
            valid = (d["event_class"] != 67) & (corr > 0)
            self.corr.add(proc[valid], corr[valid], pos[valid])
            dur = d["end_ns"] - d["start_ns"]
            from .schema import SETUP_LAUNCH_MIN_NS

            cand = (kind == S.API_LAUNCH) & (dur >= SETUP_LAUNCH_MIN_NS)
            if cand.any():
                cand &= self.launch_name(d["name_id"])
                self.candidates.append(pos[cand])
            nid = d["name_id"]
            if len(nid):
                bc = np.bincount(np.maximum(nid, 0).astype(np.int64))
                if len(bc) > len(self.name_counts):
                    bc[:len(self.name_counts)] += self.name_counts
                    self.name_counts = bc
                else:
                    self.name_counts[:len(bc)] += bc
            thread = self.threads(gtid)
            self.rt_start.add(d["start_ns"])
            self.rt_kind.add(kind)
            self.rt_thread.add(thread)
            big = dur >= (1 << 32)
            if big.any():
                self.rt_long.update(zip(pos[big].tolist(), dur[big].tolist()))
                dur = np.where(big, 0, dur)
            self.rt_dur.add(dur)
            self.rt_n += n
            t.append({"start_ns": d["start_ns"], "end_ns": d["end_ns"], "correlation_id": corr,
                      "name_id": nid, "event_class": d["event_class"], "api_kind": kind, "proc": proc,
                      "thread": thread})
        self._cand = np.unique(np.concatenate(self.candidates) if self.candidates else np.zeros(0, np.int64))
        self._rt_start, self._rt_kind = self.rt_start.done(), self.rt_kind.done()
        self._rt_dur, self._rt_thread = self.rt_dur.done(), self.rt_thread.done()

    def gpu(self, key: str) -> None:
        t = gpu_table(self.store, key)
        table = _TABLE_OF[key]
        if not self.exp.has(table):
            return
        rt_kind = getattr(self, "_rt_kind", np.zeros(0, np.int8))
        nrows = 0
        for d in self._rows(key):
            n = len(d["start_ns"])
            if n == 0:
                continue
            if "row" in t.dtypes:
                if t._buckets is None:
                    self._buckets(t, d["start_ns"])
                d["row"] = np.arange(nrows, nrows + n, dtype=np.int64)
                nrows += n
            gpid = d.pop("global_pid")
            proc = self.procs(gpid & S.PROCESS_MASK)
            dev_key = ((gpid >> 48) & 0xFFFF) * 65536 + d["device_id"]
            dev = self.devices(dev_key)
            d["proc"], d["device"] = proc, dev
            d["stream"] = self.streams(proc, dev, d["context_id"], d["stream_id"])
            if key == "memcpy":
                host_kind = np.full(n, -1, dtype=np.int8)
                h2d = d["copy_kind"] == S.COPY_HTOD
                d2h = d["copy_kind"] == S.COPY_DTOH
                host_kind[h2d] = d["src_kind"][h2d]
                host_kind[d2h] = d["dst_kind"][d2h]
                d["host_kind"] = host_kind
            if key != "sync":
                api = self.corr.lookup(proc, d["correlation_id"])
                has = api >= 0
                d["api"] = api
                d.update(self._launching(api, has, n))
                if key == "kernels":
                    d["launch"] = self.launch(d.pop("launch_key"))
                    self.kernel_names.update(unique_ints(d["name_id"]).tolist())
                    self.kernel_shorts.update(unique_ints(d["short_id"]).tolist())
                    self.first.add(getattr(self, "_cand", None), proc, d["name_id"], api, d["api_start_ns"], d["row"])
                if key == "memcpy" and len(rt_kind):
                    pg = has & (d["host_kind"] == S.MEM_PAGEABLE)
                    rows = api[pg]
                    rows = rows[rt_kind[rows] == S.API_ASYNC_COPY]
                    if len(rows):
                        self.pageable.append(rows)
            t.append(d)

    def _launching(self, api: np.ndarray, has: np.ndarray, n: int) -> dict[str, np.ndarray]:
        """Start, end, thread and kind of the launching call of each GPU row (-1: unknown)."""
        rt_start = getattr(self, "_rt_start", None)
        if rt_start is None or not len(rt_start):
            return {"api_start_ns": np.full(n, -1, np.int64), "api_end_ns": np.full(n, -1, np.int64),
                    "api_thread": np.full(n, -1, np.int32), "api_kind": np.full(n, -1, np.int8)}
        a = np.maximum(api, 0)
        start = rt_start[a]
        dur = self._rt_dur[a].astype(np.int64)
        if self.rt_long:
            for i in np.flatnonzero(has & (dur == 0)).tolist():
                dur[i] = self.rt_long.get(int(api[i]), 0)
        return {"api_start_ns": np.where(has, start, -1), "api_end_ns": np.where(has, start + dur, -1),
                "api_thread": np.where(has, self._rt_thread[a], -1).astype(np.int32),
                "api_kind": np.where(has, self._rt_kind[a], -1).astype(np.int8)}

    def _buckets(self, t, first_starts: np.ndarray) -> None:
        """Start-time buckets over the capture: the CUDA API calls' span (launches precede their
        operations), else the first chunk's, widened by the session's duration."""
        rt = self.store.get("runtime")
        st = rt.stats() if rt is not None else {"start_min": None}
        if st["start_min"] is not None:
            lo, hi = st["start_min"], st["end_max"]
        else:
            lo, hi = int(first_starts.min()), int(first_starts.max())
        hi = max(hi, lo + (self.duration_ns or 0), int(first_starts.max()) + 1)
        # blocks need only be narrower than a slice: about four buckets per slice of the capture
        from .rows import slice_rows

        rows = sum(self.expected.values()) or 1
        buckets = int(np.clip(4 * rows // slice_rows(), 16, 4096))
        t.bucket_by_start(lo, (hi - lo) // buckets + 1)

    def osrt(self) -> None:
        t = self.store.table("osrt", TABLE_DTYPES["osrt"], TABLE_CODED["osrt"])
        if not self.exp.has(S.OSRT):
            return
        where = f"WHERE eventClass = {S.OSRT_EVENT_CLASS}" if "eventClass" in self.exp.columns(S.OSRT) else ""
        for d in self._rows("osrt", where):
            if not len(d["start_ns"]):
                continue
            d["is_wait"] = self.is_wait(d["name_id"])
            d["thread"] = self.threads(d["global_tid"])
            t.append(d)

    def nvtx(self) -> None:
        t = self.store.table("nvtx", TABLE_DTYPES["nvtx"], TABLE_CODED["nvtx"])
        if not self.exp.has(S.NVTX):
            return
        present = set(self.exp.columns(S.NVTX))
        if not {"start", "eventType"} <= present:  # a quoted missing column would read as a string literal
            n = _query(self.exp, f'SELECT count(*) FROM "{S.NVTX}"')[0][0]
            self.drops.add(S.NVTX, DROP_REASONS[5], n)
            return
        for d in _NvtxReader(self.exp, present).chunks(self):
            n = len(d["start_ns"])
            if n == 0:
                continue
            t.append(d)

    # ---- end ---------------------------------------------------------------------------------
    def finish(self, thread_names: dict[int, str]) -> dict:
        """Final indices of the coded columns, and the small tables they index."""
        exp = self.exp
        self._rt_start = self._rt_kind = self._rt_dur = self._rt_thread = None
        self.rt_long = {}
        self.threads.add(thread_names)
        all_keys, proc_remap = self.procs.remap()
        all_dev, dev_remap = self.devices.remap()
        tids, thread_remap = self.threads.remap()
        self.store.remaps.update({"proc": proc_remap, "device": dev_remap, "thread": thread_remap})
        proc_names = {}
        if exp.has("PROCESSES") and {"globalPid", "name"} <= set(exp.columns("PROCESSES")):
            for gp, name in _query(exp, 'SELECT globalPid, name FROM "PROCESSES"'):
                if type(gp) is int:
                    proc_names[gp & S.PROCESS_MASK] = name if isinstance(name, str) else ""
        out = {"processes": Columns({"global_pid": all_keys, "pid": S.decode_pid(all_keys),
                                     "name": np.array([proc_names.get(int(k), "") for k in all_keys], dtype=object)})}
        out["devices"] = _devices_frame(exp, all_dev)
        rows = np.asarray(self.streams.rows, dtype=np.int64).reshape(-1, 4)
        out["streams"] = Columns({"stream": np.arange(len(rows), dtype=np.int32),
                                  "proc": proc_remap[rows[:, 0]].astype(np.int64) if len(rows) else rows[:, 0],
                                  "device": dev_remap[rows[:, 1]].astype(np.int64) if len(rows) else rows[:, 1],
                                  "context_id": rows[:, 2], "stream_id": rows[:, 3]})
        out["threads"] = threads_table(tids, thread_names)
        self.store.luts.update(stream_luts(out["streams"], out["devices"]))
        # NVTX domains: matched on (process bits, domainId), else any process's name for the id
        dnames = [self.domain_names.get((p, dom), self.domain_any.get(dom, "")) if dom else ""
                  for p, dom in self.nvtx_domains.rows]
        strings = self.strings
        if self.unknown_used:
            strings = StringTable(np.append(strings.ids, self.unknown_id),
                                  np.append(strings.values, np.array([UNKNOWN_NAME], dtype=object)))
        derived = {
            "pageable_async_api": np.unique(np.concatenate(self.pageable)) if self.pageable else np.zeros(0, np.int64),
            "launch_candidates": np.unique(np.concatenate(self.candidates)) if self.candidates else np.zeros(0, np.int64),
            "setup_launch": self.first.setup_launches(getattr(self, "_cand", np.zeros(0, np.int64))),
            "kernel_name_ids": np.array(sorted(self.kernel_names), dtype=np.int64),
            "kernel_short_ids": np.array(sorted(self.kernel_shorts), dtype=np.int64),
            "runtime_name_counts": self.name_counts,
            **launch_arrays(self.launch.keys),
        }
        return {"frames": out, "strings": strings, "nvtx_domains": np.array(dnames, dtype=object),
                "nvtx_groups": self.nvtx_groups.texts, "derived": derived}


class _NvtxReader:
    """NVTX rows in rowid chunks: ranges, marks and domain names; texts interned (inline text, else
    the ``textId`` string)."""

    TYPES = S.NVTX_RANGE_TYPES + (S.NVTX_MARK, S.NVTX_DOMAIN_CREATE)

    def __init__(self, exp: ExportFile, present: set[str]) -> None:
        self.exp = exp
        ints = (("start", "NULL"), ("end", "NULL"), ("eventType", "NULL"), ("globalTid", "0"), ("textId", "NULL"),
                ("domainId", "0"))
        # as bytes: decoded here, with replacement characters for invalid UTF-8; a value of another
        # storage class is NULL (the ADBC driver would turn an integer or a blob into text)
        text = "CASE WHEN typeof(\"text\") = 'text' THEN CAST(\"text\" AS BLOB) END" if "text" in present else "NULL"
        types = ",".join(str(t) for t in self.TYPES)
        tail = f' FROM "{S.NVTX}" WHERE rowid >= ? AND rowid < ? AND eventType IN ({types})'
        # the integer columns as stored: half the cost of a chunk's read; a chunk where one holds
        # another storage class (the driver refuses it, or types the column otherwise) is read
        # again with every value that is not an integer as NULL
        self.plain_sql = "SELECT " + ", ".join([f'"{c}"' if c in present else d for c, d in ints] + [text]) + tail
        self.sql = "SELECT " + ", ".join([_safe_expr(f'"{c}"') if c in present else d for c, d in ints] + [text]) + tail
        self.ranges = _table_ranges(exp, S.NVTX, CHUNK_ROWS)
        self.lo, self.hi = self.ranges.lo, self.ranges.hi

    def _read(self, lo: int, hi: int):
        rows = _fetch_rows(self.exp, self.sql, lo, hi)
        n = len(rows)
        ints = {}
        for j, (name, default) in enumerate((("start_ns", BAD), ("end_ns", BAD), ("event_type", -1),
                                              ("global_tid", 0), ("text_id", -1), ("domain_id", 0))):
            ints[name] = np.fromiter((default if r[j] is None else r[j] for r in rows), dtype=np.int64, count=n)
        text = [r[6] for r in rows]
        return ints, text

    def _read_adbc(self, lo: int, hi: int):
        import pyarrow as pa

        tbl = _fetch_integers(self.exp, self.plain_sql, self.sql, lo, hi, n_int=6)  # (the text is the 7th)
        ints = {}
        for j, (name, default) in enumerate((("start_ns", BAD), ("end_ns", BAD), ("event_type", -1),
                                              ("global_tid", 0), ("text_id", -1), ("domain_id", 0))):
            col = tbl.column(j)
            if pa.types.is_null(col.type):
                ints[name] = np.full(tbl.num_rows, default, dtype=np.int64)
            else:
                ints[name] = col.fill_null(default).cast(pa.int64()).to_numpy()
        tc = tbl.column(6)
        return ints, tc

    def _read_with_facts(self, lo: int, hi: int):
        """A chunk read with ADBC, and when every row holds a text of its own (autograd-nvtx: the
        per-row Arrow path of :meth:`_chunk`), those texts' facts found here on the worker thread
        (Arrow's string kernels release the GIL; the groups are coded later, in chunk order)."""
        ints, tc = self._read_adbc(lo, hi)
        return ints, tc, _per_row_facts(tc, len(ints["start_ns"]))

    def chunks(self, ing: "_Ingest"):
        reader = self._read_adbc if _adbc_module() is not None else self._read
        chunk_reader = self._read_with_facts if _adbc_module() is not None else self._read
        anchor = None
        multi = len(self.ranges) > 1
        if multi and ing.duration_ns:
            # the sample's windows are read on the pool: this thread waits, which Ctrl-C interrupts
            parts = []
            for ints, _ in _pipelined(self.exp, _sample_windows(self.exp, S.NVTX, self.ranges), reader):
                keep = ints["event_type"] != S.NVTX_DOMAIN_CREATE
                parts.append({k: v[keep] for k, v in ints.items()})
            if parts:
                smp = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
                ok, _, _ = row_checks(smp, True)
                anchor = median_anchor(smp["start_ns"], ok)
                anchor = None if anchor is None else anchor - ing.shift
        for got in _pipelined(self.exp, self.ranges, chunk_reader):
            yield self._chunk(ing, *got, anchor=anchor, multi=multi)

    def _chunk(self, ing: "_Ingest", ints: dict, text, pre=None, *, anchor, multi: bool) -> dict:
        """One chunk's rows: the text column as Arrow (inline text, decoded with replacement
        characters and capped, else the ``textId`` string), DomainCreate rows kept aside. ``pre``:
        the per-row texts and their facts when the reader found them (:func:`_per_row_facts`)."""
        import pyarrow as pa

        _shift_times(ints, ing.shift)
        n = len(ints["start_ns"])
        idx = np.full(n, -1, dtype=np.int64)
        values: list[str] = []
        arrow_values = None  # the distinct texts as Arrow when they never were Python strings
        per_row = False  # arrow_values holds every row's text (idx = row)
        if pre is not None:
            arrow_values, per_row, idx = pre[0], True, np.arange(n, dtype=np.int64)
        elif not isinstance(text, list):  # an Arrow column of bytes
            if not pa.types.is_null(text.type) and text.null_count < n:
                col = text.combine_chunks() if hasattr(text, "combine_chunks") else text
                if col.null_count == 0 and n > PYTHON_GROUPING_MAX and _mostly_distinct(col):
                    # autograd-nvtx: a distinct text per range; hashing them all to find the few
                    # repeats costs more than reading each (0.45 us a text)
                    arrow_values = _utf8_as_is(col)
                    per_row = arrow_values is not None
                if per_row:
                    idx = np.arange(n, dtype=np.int64)
                else:
                    enc = col.dictionary_encode()
                    idx = enc.indices.fill_null(-1).to_numpy().astype(np.int64)
                    # many distinct texts stay Arrow: no Python string each
                    arrow_values = _utf8_as_is(enc.dictionary) if len(enc.dictionary) > PYTHON_GROUPING_MAX else None
                    values = [_text(v) for v in enc.dictionary.to_pylist()] if arrow_values is None else []
        else:
            seen: dict = {}
            for i, v in enumerate(text):
                if isinstance(v, (str, bytes)):
                    j = seen.get(v)
                    if j is None:
                        j = seen[v] = len(values)
                        values.append(_text(v))
                    idx[i] = j
        need = idx < 0
        extra: list[str] = []
        base = len(values) if arrow_values is None else len(arrow_values)
        if need.any():
            uniq, inv = np.unique(ints["text_id"][need], return_inverse=True)
            idx[need] = base + inv
            extra = [str(v) for v in ing.raw_strings.lookup(uniq)]
        if arrow_values is None:
            values += extra
            varr = pa.array(values, type=pa.large_string())
        else:
            varr = pa.concat_arrays([arrow_values, pa.array(extra, type=pa.large_string())]) if extra else arrow_values
        etype, gtid, dom = ints["event_type"], ints["global_tid"], ints["domain_id"]
        pbits = gtid & S.PROCESS_MASK
        is_dom = etype == S.NVTX_DOMAIN_CREATE
        if is_dom.any():
            for p, d_, j in zip(pbits[is_dom].tolist(), dom[is_dom].tolist(), idx[is_dom].tolist()):
                name = values[j] if arrow_values is None else varr[j].as_py()
                ing.domain_names[(p, d_)] = name
                ing.domain_any[d_] = name
        keep = ~is_dom
        kidx = idx[keep]
        if per_row:
            textcol = varr if keep.all() else varr.filter(pa.array(keep))
        else:
            textcol = pa.DictionaryArray.from_arrays(pa.array(kidx.astype(np.int32)), varr).dictionary_decode() \
                if len(kidx) else pa.array([], type=pa.large_string())
        # PyTorch's per-call fields, read once per distinct text (nsysdoc.trace.nvtx_text)
        if pre is not None:
            grp, seq, flags = coded_facts(pre[1], ing.nvtx_groups)
        else:
            small = len(varr) <= PYTHON_GROUPING_MAX
            grp, seq, flags = text_facts((values if arrow_values is None else varr.to_pylist()) if small else varr,
                                         ing.nvtx_groups)
        d = {"start_ns": ints["start_ns"][keep], "end_ns": ints["end_ns"][keep], "event_type": etype[keep],
             "global_tid": gtid[keep], "text": textcol, "text_group": grp[kidx], "seq": seq[kidx],
             "call_flags": flags[kidx], "_pbits": pbits[keep], "_dom": dom[keep]}
        d = validate(d, S.NVTX, ing.duration_ns, ing.drops, end_optional=True, anchor=anchor if multi else None)
        d["end_ns"] = np.where(d["end_ns"] == BAD, -1, d["end_ns"])
        # domain: (process bits, domainId); names are resolved once every DomainCreate row is read
        pb, dm = d.pop("_pbits"), d.pop("_dom")
        d["domain"] = ing.nvtx_domains(np.where(dm != 0, pb, 0), dm)
        d["thread"] = ing.threads(d["global_tid"])
        return d


def _devices_frame(exp: ExportFile, all_dev: np.ndarray) -> Columns:
    gpu_names = {}
    limits: dict[int, list] = {}  # per GPU id: S.GPU_LIMIT_COLUMNS values (None when absent)
    if exp.has("TARGET_INFO_GPU") and {"id", "name"} <= set(exp.columns("TARGET_INFO_GPU")):
        have = set(exp.columns("TARGET_INFO_GPU"))
        srcs = ("smCount", "computeMajor", "computeMinor", *S.GPU_LIMIT_COLUMNS.values())
        extra = "".join(f', "{c}"' if c in have else ", NULL" for c in srcs)
        for gid, name, sm, major, minor, *lim in _query(exp, f'SELECT id, name{extra} FROM "TARGET_INFO_GPU"'):
            if type(gid) is not int:
                continue
            cc = float(f"{major}.{_int(minor, 0)}") if type(major) is int and 0 < major < 100 \
                and 0 <= _int(minor, 0) < 100 else None
            gpu_names[gid] = (name if isinstance(name, str) else "", sm if type(sm) is int and sm > 0 else None, cc)
            limits[gid] = [v if type(v) is int and 0 < v < (1 << 31) else None for v in lim]
    hosts = all_dev // 65536
    dev_ids = all_dev % 65536
    multi_host = len(np.unique(hosts)) > 1
    return Columns({
        "device": np.arange(len(all_dev), dtype=np.int32),
        "host": hosts,
        "device_id": dev_ids,
        "label": np.array([f"{h}:{d}" if multi_host else str(d) for h, d in zip(hosts, dev_ids)], dtype=object),
        "name": np.array([gpu_names.get(int(d), ("", None, None))[0] if not multi_host else "" for d in dev_ids],
                         dtype=object),
        "sm_count": [gpu_names.get(int(d), ("", None, None))[1] if not multi_host else None for d in dev_ids],
        # compute capability (e.g. 8.0 for A100), from TARGET_INFO_GPU; None when not exported
        "compute_capability": [gpu_names.get(int(d), ("", None, None))[2] if not multi_host else None
                               for d in dev_ids],
        # per-SM limits (occupancy calculator); None when not exported
        **{c: [limits.get(int(d), [None] * len(S.GPU_LIMIT_COLUMNS))[j] if not multi_host else None
               for d in dev_ids] for j, c in enumerate(S.GPU_LIMIT_COLUMNS)},
    })


def _thread_names(exp: ExportFile, strings: StringTable) -> dict[int, str]:
    """``ThreadNames`` as global_tid -> name (one query; threads named but silent still count)."""
    names: dict[int, str] = {}
    if exp.has("ThreadNames") and {"nameId", "globalTid"} <= set(exp.columns("ThreadNames")):
        for gtid, name_id in _query(exp, 'SELECT globalTid, nameId FROM "ThreadNames"'):
            if type(gtid) is int:
                names[gtid] = strings.get(name_id) if type(name_id) is int else ""
    return names


def _per_row_facts(text, n: int):
    """``(texts, local facts)`` of a chunk's text column (Arrow bytes) when :meth:`_NvtxReader._chunk`
    would keep every row's text as it is (no NULL, more than ``PYTHON_GROUPING_MAX`` rows, mostly
    distinct, valid UTF-8 within the cap), else None."""
    import pyarrow as pa

    if isinstance(text, list) or pa.types.is_null(text.type) or text.null_count:
        return None
    col = text.combine_chunks() if hasattr(text, "combine_chunks") else text
    if n <= PYTHON_GROUPING_MAX or not _mostly_distinct(col):
        return None
    values = _utf8_as_is(col)
    return None if values is None else (values, local_facts(values))


def _mostly_distinct(col, sample: int = 4096) -> bool:
    """Whether most of a column's first ``sample`` texts differ (then hashing the column to find
    its distinct texts saves nothing)."""
    return len(col.slice(0, sample).dictionary_encode().dictionary) > sample // 2


def _utf8_as_is(dictionary):
    """Distinct text cells (Arrow binary) as an Arrow string array when every one is valid UTF-8
    and within :data:`~nsysdoc.trace.tables.MAX_STRING_CHARS` bytes (what :func:`_text` would
    leave unchanged), else None (then each is decoded in Python, with replacement characters)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if dictionary.null_count or not len(dictionary):
        return None
    if int(pc.max(pc.binary_length(dictionary)).as_py()) > MAX_STRING_CHARS:
        return None
    try:
        return dictionary.cast(pa.large_string())  # validates the UTF-8
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _text(v) -> str:
    """A string cell as text: bytes are decoded with replacement characters, NULL is "", and the
    length is capped (:data:`~nsysdoc.trace.tables.MAX_STRING_CHARS`)."""
    if isinstance(v, str):
        return cap(v)
    if isinstance(v, bytes):
        return cap(v.decode("utf-8", "replace"))
    return "" if v is None else cap(str(v))


def _int(v, default: int) -> int:
    """``v`` if SQLite gave an integer, else ``default`` (NULL, text, real and blob values)."""
    return v if type(v) is int else default


#: Rows per chunk of ``GPU_METRICS`` (few columns, many rows: smaller chunks keep the transient
#: arrays of the reads in flight small beside the samples kept)
METRICS_CHUNK_ROWS = 1 << 17


#: why a GPU_METRICS sample is dropped (``Drops``): its value is not a finite number
GPU_METRICS_DROP_REASON = "value not a finite number (Inf or NaN)"


def _gpu_metrics(exp: ExportFile, shift: int = 0, nonfinite_out: list | None = None) -> dict[str, np.ndarray]:
    """``GPU_METRICS`` samples of the metrics nsysdoc summarises (matched by name in
    ``TARGET_INFO_GPU_METRICS``), in rowid order: timestamp (``shift`` subtracted), device (the low
    byte of ``typeId``, uint8), metric name and value. Streamed in rowid chunks into arrays (25
    bytes a sample: the metric is one of four shared strings; a fetch of every row held ~200 bytes a
    row in Python tuples: 2.4 GB for the 12 M rows of four minutes of one GPU at nsys's default
    rate); a sample whose timestamp is not an integer or whose value is not a number is left out,
    and a table without the columns is refused. Values of +-Inf or NaN are left out too; their
    number is appended to ``nonfinite_out`` (the loader counts them as dropped rows)."""
    empty = {"timestamp_ns": np.zeros(0, np.int64), "device_id": np.zeros(0, np.uint8),
             "metric": np.zeros(0, object), "value": np.zeros(0, np.float64)}
    if not (exp.has(S.GPU_METRICS) and exp.has(S.GPU_METRICS_INFO)):
        return empty
    info = _query(exp, f'SELECT typeId, metricId, metricName FROM "{S.GPU_METRICS_INFO}"')
    wanted: dict[tuple[int, int], str] = {}
    for type_id, metric_id, name in info:
        if type(type_id) is not int or type(metric_id) is not int:
            continue  # ids are pasted into SQL below: integers only
        lname = (name if isinstance(name, str) else "").lower()
        for canon, prefixes in S.GPU_METRIC_PREFIXES.items():
            if lname.startswith(prefixes):
                wanted[(type_id, metric_id)] = canon
    if not wanted:
        return empty
    missing = [c for c in ("timestamp", "typeId", "metricId", "value") if c not in exp.columns(S.GPU_METRICS)]
    if missing:
        raise CorruptFileError(f"{exp.path}: cannot read (no such column: {missing[0]})")
    ids = sorted({m for _, m in wanted})
    canon = sorted(set(wanted.values()))
    code_of = {c: i for i, c in enumerate(canon)}
    pairs = [(t, m, code_of[c]) for (t, m), c in wanted.items()]
    sql = (f'SELECT {_safe_expr("timestamp")}, {_safe_expr("typeId")}, {_safe_expr("metricId")}, '
           "CASE WHEN typeof(value) IN ('integer', 'real') THEN CAST(value AS REAL) END "
           f'FROM "{S.GPU_METRICS}" WHERE rowid >= ? AND rowid < ? AND metricId IN ({",".join(map(str, ids))})')

    def read(lo: int, hi: int):
        if _adbc_module() is not None:
            import pyarrow as pa

            tbl = _fetch_arrow(exp, sql, lo, hi)
            ok = np.ones(tbl.num_rows, dtype=bool)
            out = []
            for j in range(4):
                c = tbl.column(j)
                if pa.types.is_null(c.type):  # every value NULL (or not a number)
                    ok[:] = False
                    out.append(np.zeros(tbl.num_rows))
                    continue
                if c.null_count:
                    ok &= ~np.asarray(c.is_null().to_numpy(), dtype=bool)
                    c = c.fill_null(0)
                out.append(c.to_numpy())
        else:
            rows = _fetch_rows(exp, sql, lo, hi)
            ok = np.fromiter((None not in r for r in rows), dtype=bool, count=len(rows))
            out = [np.fromiter((0 if r[j] is None else r[j] for r in rows), dtype=np.float64 if j == 3 else np.int64,
                               count=len(rows)) for j in range(4)]
        ts, tid, mid = (np.asarray(o, dtype=np.int64) for o in out[:3])
        val = np.asarray(out[3], dtype=np.float64)
        code = np.full(len(ts), -1, dtype=np.int8)
        for t, m, c in pairs:
            code[ok & (tid == t) & (mid == m)] = c
        # a value of +-Inf or NaN (SQLite stores 9e999 as Inf) would poison every running sum it
        # enters: such samples are left out and counted as dropped rows
        finite = np.isfinite(val)
        nonfinite[0] += int(((code >= 0) & ~finite).sum())
        keep = np.flatnonzero((code >= 0) & finite)
        return ts[keep], (tid[keep] & 0xFF).astype(np.uint8), code[keep], val[keep]

    parts: dict[str, list] = {"ts": [], "dev": [], "code": [], "val": []}
    lo64, hi64 = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    nonfinite = [0]
    for ts, dev, code, val in _pipelined(exp, _table_ranges(exp, S.GPU_METRICS, METRICS_CHUNK_ROWS), read):
        if shift and len(ts) and ((ts < lo64 + shift).any() if shift > 0 else (ts > hi64 + shift).any()):
            raise OverflowError("a GPU metrics timestamp less the session start is beyond 64 bits")
        for k, v in zip(parts, (ts - shift if shift else ts, dev, code, val)):
            parts[k].append(v)
    if nonfinite_out is not None:
        nonfinite_out.append(nonfinite[0])
    if not parts["ts"]:
        return empty
    # one column at a time (a column's chunks and the column are held at once, never all four),
    # the metric names last: 8 bytes a sample where the chunks held a 1-byte code
    out = {"timestamp_ns": np.concatenate(parts.pop("ts")), "device_id": np.concatenate(parts.pop("dev")),
           "value": np.concatenate(parts.pop("val"))}
    code = np.concatenate(parts.pop("code"))
    names = np.empty(len(canon), dtype=object)
    names[:] = canon
    out["metric"] = names[code]  # shared strings
    del code
    _malloc_trim()  # the chunks' arrays, freed on the reader threads (whose heaps the main thread never reuses)
    return {k: out[k] for k in ("timestamp_ns", "device_id", "metric", "value")}


#: ``CUDA_GPU_MEMORY_USAGE_EVENTS.memKind`` values of host memory (``ENUM_CUDA_MEM_KIND``: 0
#: pageable, 1 pinned); the others (device, array, managed, static) count as the GPU's
_HOST_MEM_KINDS = (0, 1)
MEMORY_USAGE = "CUDA_GPU_MEMORY_USAGE_EVENTS"


#: why a ``CUDA_GPU_MEMORY_USAGE_EVENTS`` row is dropped (``Drops``)
MEMORY_DROP_REASON = "start, bytes or memoryOperationType missing, not an integer or out of range"


def _memory_usage(exp: ExportFile, shift: int = 0, dropped: list | None = None) -> Columns:
    """Issue 47: ``CUDA_GPU_MEMORY_USAGE_EVENTS`` as the ``memory`` table (time order): bytes
    signed by ``memoryOperationType`` (0 allocation: +, 1 deallocation: -), ``device_type`` 1
    for GPU memory kinds and 0 for host ones (-1 when the kind is not recorded), the thread of
    the CUDA call that made it (by ``correlationId`` within the process; 0 when none), no running
    totals (-1: the driver's view has none). Rows without an integer time, size or operation are
    left out (their number appended to ``dropped``); an export without the table (or its columns)
    gives an empty table."""
    from .model import empty_memory_frame

    if not exp.has(MEMORY_USAGE):
        return empty_memory_frame("memory")
    have = set(exp.columns(MEMORY_USAGE))
    if not {"start", "bytes", "memoryOperationType"} <= have:
        return empty_memory_frame("memory")
    col = lambda c: f'm."{c}"' if c in have else "NULL"  # noqa: E731
    join, tid = "", "NULL"
    if "correlationId" in have and "globalPid" in have and exp.has("CUPTI_ACTIVITY_KIND_RUNTIME") and \
            {"correlationId", "globalTid"} <= set(exp.columns("CUPTI_ACTIVITY_KIND_RUNTIME")):
        join = ('LEFT JOIN "CUPTI_ACTIVITY_KIND_RUNTIME" r ON r.correlationId = m.correlationId '
                "AND (r.globalTid & -16777216) = m.globalPid")
        tid = "r.globalTid"
    rows = _query(exp, f'SELECT m.start, {col("deviceId")}, m.bytes, m.memoryOperationType, {col("memKind")}, '
                       f'{col("address")}, {tid}, m.rowid FROM "{MEMORY_USAGE}" m {join} ORDER BY m.start, m.rowid')
    out: dict[str, list] = {c: [] for c in ("timestamp_ns", "device_type", "device_id", "bytes", "total_allocated_bytes",
                                            "total_reserved_bytes", "global_tid", "address")}
    last = None
    bad = 0
    for start, dev, nbytes, op, kind, addr, gtid, rowid in rows:
        if rowid == last:  # two CUDA calls with its correlation id in its process: the row once
            continue
        last = rowid
        if type(start) is not int or type(nbytes) is not int or op not in (0, 1) or abs(start) >= TIME_LIMIT_NS \
                or not 0 <= nbytes < (1 << 62):
            bad += 1
            continue
        out["timestamp_ns"].append(start - shift)
        out["device_type"].append(-1 if type(kind) is not int else (0 if kind in _HOST_MEM_KINDS else 1))
        out["device_id"].append(dev if type(dev) is int and 0 <= dev < 65536 else -2)
        out["bytes"].append(nbytes if op == 0 else -nbytes)
        out["total_allocated_bytes"].append(-1)
        out["total_reserved_bytes"].append(-1)
        out["global_tid"].append(_int(gtid, 0))
        out["address"].append(addr if type(addr) is int and 0 <= addr < (1 << 62) else -1)
    if dropped is not None:
        dropped.append(bad)
    return Columns({k: np.asarray(v, dtype=np.int64) for k, v in out.items()})


def _device_memory(exp: ExportFile) -> Columns:
    """Issue 47: ``TARGET_INFO_GPU.totalMemory`` per device id (GPUs that give a positive size)."""
    ids, total = [], []
    if exp.has("TARGET_INFO_GPU") and {"id", "totalMemory"} <= set(exp.columns("TARGET_INFO_GPU")):
        for gid, mem in _query(exp, 'SELECT id, totalMemory FROM "TARGET_INFO_GPU" ORDER BY id'):
            if type(gid) is int and 0 <= gid < 65536 and type(mem) is int and 0 < mem < (1 << 62) and gid not in ids:
                ids.append(gid)
                total.append(mem)
    return Columns({"device_id": np.asarray(ids, dtype=np.int64), "total_bytes": np.asarray(total, dtype=np.int64)})


def _small_tables(exp: ExportFile, strings: StringTable, shift: int = 0) -> dict:
    """The small tables; ``shift`` is subtracted from their times (:func:`timestamp_clock`)."""
    res: dict = {}
    # diagnostics
    diag = {"timestamp_ns": [], "severity": [], "text": []}
    if exp.has("DIAGNOSTIC_EVENT") and {"severity", "text"} <= set(exp.columns("DIAGNOSTIC_EVENT")):
        for ts, sev, text in _query(exp, 'SELECT timestamp, severity, text FROM "DIAGNOSTIC_EVENT"'):
            diag["timestamp_ns"].append(_int(ts, shift) - shift)
            diag["severity"].append(S.DIAG_SEVERITY.get(sev, str(sev)) if type(sev) is int else str(sev))
            diag["text"].append(text if isinstance(text, str) else "")
    res["diagnostics"] = Columns(diag)
    # profiler overhead
    ov = {"start_ns": [], "end_ns": [], "global_tid": [], "name": []}
    if exp.has("PROFILER_OVERHEAD"):
        rows = _query(exp, 'SELECT start, "end", globalTid, nameId FROM "PROFILER_OVERHEAD"')
        names = strings.lookup(np.array([_int(r[3], -1) for r in rows], dtype=np.int64))
        for r, n in zip(rows, names):
            if type(r[0]) is int and type(r[1]) is int and r[0] <= r[1] and abs(r[0]) < TIME_LIMIT_NS \
                    and abs(r[1]) < TIME_LIMIT_NS:
                ov["start_ns"].append(r[0] - shift); ov["end_ns"].append(r[1] - shift); ov["global_tid"].append(_int(r[2], 0)); ov["name"].append(n)
    res["overhead"] = Columns({"start_ns": np.asarray(ov["start_ns"], dtype=np.int64),
                               "end_ns": np.asarray(ov["end_ns"], dtype=np.int64),
                               "global_tid": np.asarray(ov["global_tid"], dtype=np.int64),
                               "name": np.asarray(ov["name"], dtype=object)})
    # GPU metrics (only the metrics we summarise), streamed
    nonfinite: list[int] = []
    gm = _gpu_metrics(exp, shift, nonfinite)
    res["gpu_metrics"] = Columns(gm)
    res["gpu_metrics_nonfinite"] = sum(nonfinite)
    # issue 47: memory allocations and releases (--cuda-memory-usage=true), each GPU's memory
    mem_dropped: list[int] = []
    res["memory"], res["device_memory"] = _memory_usage(exp, shift, mem_dropped), _device_memory(exp)
    res["memory_dropped"] = sum(mem_dropped)
    # capture duration
    res["duration_ns"] = _session_duration(exp)
    # wall-clock start of the session (UTC epoch ns): aligns per-rank captures (nsysdoc job)
    # (absolute timestamps without utcEpochNs: the time they were shifted by stands for it)
    res["session_start_utc_ns"] = _session_start(exp) or (shift or None)
    # messages the profiled process wrote (shows why a capture failed: e.g. injection errors)
    msgs: list[str] = []
    if exp.has("ProcessStreams") and "contentId" in exp.columns("ProcessStreams"):
        rows = _query(exp, 'SELECT contentId FROM "ProcessStreams"')
        for (cid,) in rows:
            if type(cid) is not int:
                continue
            text = strings.get(cid)
            for line in text.splitlines():
                low = line.lower()
                if "error" in low or "cupti" in low or "injection" in low:
                    msgs.append(line.strip()[:300])
    res["process_messages"] = msgs[:10]
    return res


# --------------------------------------------------------------------------------------------
# public (through nsysdoc.trace.load_trace)
# --------------------------------------------------------------------------------------------
EVENT_TABLES = (S.KERNEL, S.MEMCPY, S.MEMSET, S.RUNTIME, S.NVTX, S.OSRT)


def load_export(path: str | os.PathLike, *, cache: bool, cache_dir: str | os.PathLike | None,
                progress: ProgressFn | None) -> Trace:
    """An nsys SQLite export as a :class:`Trace`, from its cache entry when there is a valid one."""
    t0 = time.perf_counter()
    exp = open_export(path)
    tables = frozenset(exp.tables)
    traced = {k: any(t in tables for t in ts) for k, ts in S.TRACE_TYPES.items()}
    # an export with a -wal/-journal beside it is read from a settled private copy, never cached
    # (the sidecar's content is not part of the file's identity)
    folder = Path(cache_dir or cache_m.default_cache_dir())
    entry = cache_m.entry_path(folder, exp.path, "trace", CACHE_FORMAT) \
        if cache and exp.read_path == exp.path else None
    cached = cache_read(entry) if entry is not None else None
    if cached is not None:
        meta, frames, strings, store = cached["meta"], cached["frames"], cached["strings"], cached["store"]
        extras = cached
        from_cache = True
    else:
        if not any(t in tables for t in EVENT_TABLES):
            small = _small_tables(exp, _strings(exp))
            why = "; ".join(small["process_messages"][:2])
            raise EmptyCaptureError(
                f"{exp.path}: capture is empty: no CUDA, NVTX or OS-runtime events were recorded",
                hint=(f"the profiled process reported: {why}" if why else
                      "check that the program ran under nsys with --trace=cuda,nvtx,osrt and did GPU work"),
            )
        tmp = cache_tmp(folder) if entry is not None else None
        store = Store(tmp, write_all=tmp is not None)
        try:
            # a capture whose blocks would not all fit the memory budget keeps none in memory:
            # the first blocks held would only raise the peak (every later phase reads from disk)
            expected = _expected_rows(exp, tables)
            if expected * _MIN_ROW_BYTES > store.memory_budget:
                store.memory_budget = 0
            store.compress = expected * UNCOMPRESSED_ROW_BYTES > UNCOMPRESSED_MAX_BYTES
            strings = _strings(exp)
            drops = Drops(order=_DROP_ORDER)
            clock, shift = timestamp_clock(exp, _session_start(exp))
            ing = _Ingest(exp, store, strings, _session_duration(exp), drops, progress, shift=shift)
            say = progress or (lambda _msg: None)
            say("reading the CUDA API calls")
            ing.runtime()
            say("reading the GPU operations")
            for key in GPU_TABLES:
                ing.gpu(key)
            say("reading OS runtime calls and NVTX ranges")
            ing.osrt()
            ing.nvtx()
            built = ing.finish(_thread_names(exp, strings))
            store.finish_writes()
            release_memory()
            strings = built["strings"]
            frames = built["frames"]
            # (the small tables' name ids are the export's own: renumbered strings do not fit them)
            small = _small_tables(exp, strings if ing.string_ids is None else ing.raw_strings, shift)
        except (ValueError, TypeError, OverflowError, KeyError, IndexError, UnicodeError) as exc:
            store.close()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            # values no export of nsys holds, in a place the row checks do not cover: refuse in one line
            raise CorruptFileError(f"{exp.path}: damaged export: unexpected values ({type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0][:120] if str(exc) else ''})",
                                   hint="export again with nsys export --type sqlite") from None
        except BaseException:
            store.close()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        frames.update({k: small[k] for k in ("diagnostics", "overhead", "gpu_metrics")})
        frames.update({k: small[k] for k in ("memory", "device_memory")})  # issue 47
        drops.add(S.GPU_METRICS, GPU_METRICS_DROP_REASON, small.get("gpu_metrics_nonfinite", 0))
        drops.add(MEMORY_USAGE, MEMORY_DROP_REASON, small.get("memory_dropped", 0))
        meta = {"nsys_version": exp.nsys_version, "schema_version": exp.schema_version,
                "duration_ns": small["duration_ns"], "process_messages": small["process_messages"],
                "session_start_utc_ns": small["session_start_utc_ns"], "clock": clock,
                "dropped_rows": drops.as_list()}
        extras = built
        from_cache = False
        if tmp is not None and not publish(tmp, entry, meta, frames, strings, store, built):
            store._own_tmp = tmp  # the store still reads its spilled blocks there; removed with it
            if not store.files_present():  # the folder was removed under us (another nsysdoc's clear)
                store.close()
                raise SpillError(f"the cache's working folder {tmp} was removed while in use")
            cache_m.note_problem(f"cannot write the cache entry {entry}; carrying on without it")
    trace = Trace(
        path=str(exp.path), nsys_version=meta["nsys_version"], schema_version=meta["schema_version"],
        tables=tables, traced=traced, strings=strings, store=store,
        **{name: frames[name] for name in SMALL_FRAMES},
        nvtx_domains=extras["nvtx_domains"], nvtx_groups=extras["nvtx_groups"], derived=extras["derived"],
        duration_ns=meta["duration_ns"], process_messages=list(meta["process_messages"]),
        session_start_utc_ns=meta.get("session_start_utc_ns"), clock=meta["clock"],
        dropped_rows=list(meta.get("dropped_rows", [])),
        from_cache=from_cache,
    )
    trace.load_seconds = time.perf_counter() - t0
    return trace
