"""Read an nsys SQLite export into a :class:`~nsysdoc.trace.model.Trace`.

How (and why this way — measured in ``shared/reference/loading-performance.md`` and
``benchmarks/``):

* Only the needed integer columns are selected, never ``JOIN StringIds`` per row; names are
  mapped once per distinct string id.
* Big tables go through the ADBC SQLite driver straight into Arrow (about 5x faster and 3x less
  memory than ``pandas.read_sql``); the kernel and runtime tables are read concurrently on two
  connections. If ADBC is unavailable the stdlib ``sqlite3`` cursor is used (slower, same result).
* The canonical tables are cached as Parquet in the cache folder (never next to the input; keys,
  validation and the size cap are :mod:`nsysdoc.cache`'s), so a second report on the same capture
  skips SQLite.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from .. import cache as cache_m
from ..errors import CorruptFileError, EmptyCaptureError
from . import schema as S
from .model import StringTable, Trace
from .open import ExportFile, open_export, readonly_uri

#: Bump when the canonical tables change shape: old cache entries are then ignored.
CACHE_FORMAT = 10

ProgressFn = Callable[[str], None]

try:  # pragma: no cover - import guard
    import adbc_driver_sqlite.dbapi as _adbc
except Exception:  # pragma: no cover - exercised when the optional driver is missing
    _adbc = None


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


#: Stands for a NULL, non-integer or out-of-range value in a column that must hold one (times,
#: device ids): rows holding it are dropped and counted (:func:`_validate`). No real nsys time
#: comes near it.
BAD = np.iinfo(np.int64).min
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


#: Rows per rowid-range chunk: bounds memory (one chunk's Arrow table per worker) and lets
#: two connections read one table concurrently (the ADBC driver releases the GIL).
CHUNK_ROWS = 1_000_000
_POOL = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2)))
    return _POOL


class _ColumnReader:
    """Reads integer columns of one table into preallocated arrays of their final dtype, in
    rowid-range chunks (rowids are contiguous in nsys exports; gaps are handled)."""

    def __init__(self, exp: ExportFile, table: str, cols: tuple[S.Col, ...], where: str = "") -> None:
        self.exp, self.table, self.cols = exp, table, cols
        exprs, self.chosen = _select_list(exp, table, cols)
        self.spec = {c.name: c for c in cols}
        cond = where.replace("WHERE", "AND", 1) if where else ""
        self.sql = f'SELECT {", ".join(exprs)} FROM "{table}" WHERE rowid >= ? AND rowid < ? {cond}'
        # for chunks whose columns hold non-integer values (damaged or hand-edited exports)
        self.safe_sql = (f'SELECT {", ".join(_safe_expr(e) for e in exprs)} FROM "{table}" '
                         f'WHERE rowid >= ? AND rowid < ? {cond}')
        # two queries: SQLite answers a lone min()/max() of rowid from the b-tree edge (O(log n)),
        # but scans the table for both in one statement
        lo = _query(exp, f'SELECT min(rowid) FROM "{table}"')[0][0]
        hi = _query(exp, f'SELECT max(rowid) FROM "{table}"')[0][0]
        self.lo = int(lo or 1)
        self.hi = int(hi or 0) + 1
        n = max(self.hi - self.lo, 0)
        # columns that must hold a value stay int64 here (room for BAD) until validated
        self.out = {name: np.empty(n, dtype=np.int64 if _must(self.spec[name]) else self.spec[name].dtype)
                    for name in self.chosen}
        self.ranges = [(lo, min(lo + CHUNK_ROWS, self.hi)) for lo in range(self.lo, self.hi, CHUNK_ROWS)]
        self.got: dict[int, int] = {}

    def _fetch(self, sql: str, lo: int, hi: int):
        with _adbc.connect(readonly_uri(self.exp.read_path)) as con:
            cur = con.cursor()
            try:
                cur.execute(sql, parameters=(lo, hi))
                return cur.fetch_arrow_table()
            finally:
                cur.close()

    def read_chunk(self, lo: int, hi: int) -> None:
        import pyarrow as pa

        try:
            tbl = self._fetch(self.sql, lo, hi)
            clean = all(pa.types.is_integer(c.type) or pa.types.is_null(c.type) for c in tbl.columns)
        except Exception as exc:  # the driver refuses a column whose storage class changes mid-chunk
            if not _is_type_error(exc):
                raise
            clean = False
        if not clean:  # text, real or blob values in integer columns: read them as NULL
            tbl = self._fetch(self.safe_sql, lo, hi)
        off, m = lo - self.lo, tbl.num_rows
        for i, name in enumerate(self.chosen):
            # one C++ pass per column: fill NULLs, cast, concatenate the record batches
            self.out[name][off:off + m] = _fill(tbl.column(i), self.spec[name])
        self.got[lo] = m

    def finish(self) -> dict[str, np.ndarray]:
        expected = {lo: hi - lo for lo, hi in self.ranges}
        if all(self.got.get(lo) == n for lo, n in expected.items()):
            out = self.out
        else:  # rowid gaps or filtered rows: keep only what each chunk returned
            out = {name: np.concatenate([arr[lo - self.lo: lo - self.lo + self.got[lo]] for lo, _ in self.ranges])
                   if self.ranges else arr[:0] for name, arr in self.out.items()}
        n = len(next(iter(out.values()))) if out else 0
        for c in self.cols:
            if c.name not in out:
                out[c.name] = np.full(n, c.default, dtype=c.dtype)
        return out


def _read_tables(exp: ExportFile, jobs: dict[str, tuple]) -> dict[str, dict[str, np.ndarray]]:
    """Read several tables; all their chunks share one thread pool (both cores stay busy)."""
    try:
        if _adbc is None:
            res = {}
            for key, (table, cols, where) in jobs.items():
                _, chosen = _select_list(exp, table, cols)
                exprs = ", ".join(_safe_expr(f'"{c}"') for c in chosen.values())
                out, n = _read_with_sqlite3(exp, f'SELECT {exprs} FROM "{table}" {where}', list(chosen),
                                            {c.name: BAD if _must(c) else c.default for c in cols})
                spec = {c.name: c for c in cols}
                for k, v in out.items():
                    if spec[k].dtype != "int64":
                        info = np.iinfo(spec[k].dtype)
                        lo, hi = (0, 65535) if k == "device_id" else (info.min, info.max)
                        v[(v < lo) | (v > hi)] = BAD if _must(spec[k]) else spec[k].default
                out = {k: v if _must(spec[k]) else v.astype(spec[k].dtype, copy=False) for k, v in out.items()}
                for c in cols:
                    out.setdefault(c.name, np.full(n, c.default, dtype=c.dtype))
                res[key] = out
            return res
        readers = {key: _ColumnReader(exp, *job) for key, job in jobs.items()}
        tasks = [(r, lo, hi) for r in readers.values() for lo, hi in r.ranges]
        tasks.sort(key=lambda t: -(t[2] - t[1]))
        futures = [_pool().submit(r.read_chunk, lo, hi) for r, lo, hi in tasks]
        for f in futures:
            f.result()
        return {key: r.finish() for key, r in readers.items()}
    except (sqlite3.DatabaseError, OSError, UnicodeDecodeError) as exc:
        raise CorruptFileError(f"{exp.path}: cannot read ({exc})") from None
    except Exception as exc:  # ADBC raises its own DB-API error classes
        if type(exc).__module__.startswith("adbc_driver"):
            raise CorruptFileError(f"{exp.path}: cannot read ({str(exc).splitlines()[0]})") from None
        raise


def _read_with_sqlite3(exp: ExportFile, sql: str, names: list[str], defaults: dict[str, int]):
    con = sqlite3.connect(readonly_uri(exp.read_path), uri=True)
    try:
        cur = con.execute(sql)
        chunks = []
        while True:
            rows = cur.fetchmany(200_000)
            if not rows:
                break
            arr = np.array([[defaults[names[j]] if v is None else v for j, v in enumerate(r)] for r in rows],
                           dtype=np.int64).reshape(len(rows), len(names))
            chunks.append(arr)
    finally:
        con.close()
    data = np.concatenate(chunks) if chunks else np.zeros((0, len(names)), dtype=np.int64)
    return {name: np.ascontiguousarray(data[:, j]) for j, name in enumerate(names)}, len(data)


def _query(exp: ExportFile, sql: str, params=()) -> list[tuple]:
    con = exp.connect()
    try:
        return con.execute(sql, params).fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise CorruptFileError(f"{exp.path}: cannot read ({exc})") from None
    finally:
        con.close()


# --------------------------------------------------------------------------------------------
# table builders
# --------------------------------------------------------------------------------------------
def _frame(cols: dict[str, np.ndarray], dtypes: dict[str, str] | None = None) -> pd.DataFrame:
    df = pd.DataFrame(cols, copy=False)
    if dtypes:
        change = {k: v for k, v in dtypes.items() if k in df.columns and df[k].dtype != v}
        if change:
            df = df.astype(change)
    return df


def _empty(cols: tuple[S.Col, ...], extra: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    d = {c.name: np.zeros(0, dtype=np.int64) for c in cols}
    for e in extra:
        d[e] = np.zeros(0, dtype=np.int64)
    return d


def _uniq(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values; hash-based first (linear), so millions of rows with few ids are cheap."""
    return np.unique(pd.unique(np.asarray(values, dtype=np.int64)))


#: Times this far from zero are not nanoseconds of any real session (2^61 ns is the year 2043 as a
#: UNIX epoch, the largest an ``nsys export --ts-normalize`` time can be for a while).
TIME_LIMIT_NS = 1 << 61
#: Slack around the session span for rows a flush writes just after it ends.
SESSION_SLACK_NS = 1_000_000_000


class Drops:
    """Rows the loader refused, counted per (table, reason); shown in the report's capture quality."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}

    def add(self, table: str, reason: str, n: int) -> None:
        if n:
            self.counts[(table, reason)] = self.counts.get((table, reason), 0) + int(n)

    def as_list(self) -> list[dict]:
        return [{"table": t, "reason": r, "rows": n} for (t, r), n in self.counts.items()]


def _session_duration(exp: ExportFile) -> int | None:
    if exp.has("ANALYSIS_DETAILS") and "duration" in exp.columns("ANALYSIS_DETAILS"):
        rows = _query(exp, 'SELECT duration FROM "ANALYSIS_DETAILS" LIMIT 1')
        if rows and isinstance(rows[0][0], int) and not isinstance(rows[0][0], bool) and 0 < rows[0][0] < TIME_LIMIT_NS:
            return int(rows[0][0])
    return None


def _validate(d: dict[str, np.ndarray], table: str, duration_ns: int | None, drops: Drops,
              end_optional: bool = False) -> dict[str, np.ndarray]:
    """Drop rows no session can hold, counting each reason in ``drops``:

    * start or end NULL or not an integer; deviceId NULL or outside 0-65535; contextId or streamId
      NULL, not an integer or beyond 32 bits;
    * start = end = 0: CUPTI wrote no timestamps for the row;
    * end before start;
    * a time outside the session: farther than the session's duration (``ANALYSIS_DETAILS``) from
      the table's median start, or beyond +-2^61 ns.

    Negative times are valid (``nsys export --ts-shift`` with a negative shift)."""
    start, end = d["start_ns"], d["end_ns"]
    n = len(start)
    if n == 0:
        return d
    null_end = (end == BAD) if end_optional else np.zeros(n, dtype=bool)
    end_c = np.where(null_end, start, end) if end_optional else end
    missing = (start == BAD) | ((end == BAD) & ~null_end)
    bad_dev = np.zeros(n, dtype=bool)
    for c in ("device_id", "context_id", "stream_id"):
        if c in d:
            bad_dev |= d[c] == BAD
    bad_dev &= ~missing
    zero = (start == 0) & (end_c == 0) & ~missing & ~bad_dev
    ok = ~(missing | bad_dev | zero)
    inverted = ok & (end_c < start)
    ok &= ~inverted
    far = ok & ((np.abs(start) >= TIME_LIMIT_NS) | (np.abs(end_c) >= TIME_LIMIT_NS))
    ok &= ~far
    if duration_ns and ok.any():
        sample = start[ok][:: max(1, int(ok.sum()) // 100_000)]
        anchor = int(np.median(sample))
        bound = duration_ns + SESSION_SLACK_NS
        outside = ok & ((np.abs(start - anchor) > bound) | (np.abs(end_c - anchor) > bound) | (end_c - start > bound))
        ok &= ~outside
        far |= outside
    if ok.all():
        return d
    drops.add(table, "start or end NULL or not an integer", int(missing.sum()))
    drops.add(table, "deviceId, contextId or streamId NULL or out of range", int(bad_dev.sum()))
    drops.add(table, "no timestamps (start = end = 0)", int(zero.sum()))
    drops.add(table, "end before start", int(inverted.sum()))
    drops.add(table, "time outside the capture's session", int(far.sum()))
    return {k: v[ok] for k, v in d.items()}


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


def _api_kind_codes(strings: StringTable):
    """Per-string-id ``api_kind`` code for CUDA API names (suffix ``_vNNNN`` stripped)."""
    def code(v: str) -> int:
        name = S.strip_api_suffix(v)
        if S.SYNC_ALWAYS_BLOCKING.match(name):
            return S.API_SYNC
        if S.SYNC_MEMSET.match(name):
            return S.API_SYNC_MEMSET
        if S.SYNC_COPY.match(name):
            return S.API_SYNC_COPY
        if S.ASYNC_COPY.match(name):
            return S.API_ASYNC_COPY
        if S.LAUNCH_APIS.match(name):
            return S.API_LAUNCH
        if S.ALLOC_APIS.match(name):
            return S.API_ALLOC
        if S.SETUP_APIS.match(name):
            return S.API_SETUP
        return S.API_OTHER

    return strings.codes(code)


def _load_tables(exp: ExportFile, progress: ProgressFn | None) -> dict:
    say = progress or (lambda _msg: None)
    strings = _strings(exp)
    jobs: dict[str, tuple] = {}
    if exp.has(S.KERNEL):
        jobs["kernels"] = (S.KERNEL, S.KERNEL_COLS, "")
    if exp.has(S.RUNTIME):
        jobs["runtime"] = (S.RUNTIME, S.RUNTIME_COLS, "")
    if exp.has(S.MEMCPY):
        jobs["memcpy"] = (S.MEMCPY, S.MEMCPY_COLS, "")
    if exp.has(S.MEMSET):
        jobs["memset"] = (S.MEMSET, S.MEMSET_COLS, "")
    if exp.has(S.SYNC):
        jobs["sync"] = (S.SYNC, S.SYNC_COLS, "")
    if exp.has(S.OSRT):
        where = f"WHERE eventClass = {S.OSRT_EVENT_CLASS}" if "eventClass" in exp.columns(S.OSRT) else ""
        jobs["osrt"] = (S.OSRT, S.OSRT_COLS, where)
    say(f"reading {', '.join(jobs) or 'metadata'}")
    raw = _read_tables(exp, jobs)
    return {"strings": _unknown_names(raw, strings), "raw": raw}


UNKNOWN_NAME = "<name missing from the export>"


def _unknown_names(raw: dict[str, dict[str, np.ndarray]], strings: StringTable) -> StringTable:
    """Name ids that are NULL, negative or too large (read as -1) point at one added string, so
    per-name statistics keep the row's time under a visible name instead of failing."""
    cols = [(d, c) for d in raw.values() for c in ("name_id", "short_id") if c in d and len(d[c])]
    if not any((d[c] < 0).any() for d, c in cols):
        return strings
    uid = int(strings.ids.max()) + 1 if len(strings) else 0
    for d, c in cols:
        d[c][d[c] < 0] = uid
    return StringTable(np.append(strings.ids, uid), np.append(strings.values, np.array([UNKNOWN_NAME], dtype=object)))


_TABLE_OF = {"kernels": S.KERNEL, "memcpy": S.MEMCPY, "memset": S.MEMSET, "sync": S.SYNC, "runtime": S.RUNTIME,
             "osrt": S.OSRT}


def _build(exp: ExportFile, strings: StringTable, raw: dict[str, dict[str, np.ndarray]],
           duration_ns: int | None = None, drops: Drops | None = None) -> dict[str, pd.DataFrame]:
    out: dict[str, pd.DataFrame] = {}
    drops = drops if drops is not None else Drops()
    raw = {k: _validate(v, _TABLE_OF[k], duration_ns, drops) for k, v in raw.items()}
    gpu_cols = {"kernels": S.KERNEL_COLS, "memcpy": S.MEMCPY_COLS, "memset": S.MEMSET_COLS, "sync": S.SYNC_COLS}
    gpu = {k: raw[k] if k in raw else _empty(cols) for k, cols in gpu_cols.items()}
    rt = raw.get("runtime", _empty(S.RUNTIME_COLS))
    os_ = raw.get("osrt", _empty(S.OSRT_COLS))

    # processes: every process key seen in GPU rows (globalPid) or API rows (globalTid & ~tid)
    rt_proc_key = _uniq(rt["global_tid"] & S.PROCESS_MASK)
    keys = [_uniq(gpu[k]["global_pid"] & S.PROCESS_MASK) for k in gpu] + [rt_proc_key]
    all_keys = np.unique(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
    proc_names = {}
    if exp.has("PROCESSES") and {"globalPid", "name"} <= set(exp.columns("PROCESSES")):
        for gp, name in _query(exp, 'SELECT globalPid, name FROM "PROCESSES"'):
            if type(gp) is int:
                proc_names[gp & S.PROCESS_MASK] = name if isinstance(name, str) else ""
    out["processes"] = pd.DataFrame({
        "global_pid": all_keys,
        "pid": S.decode_pid(all_keys),
        "name": [proc_names.get(int(k), "") for k in all_keys],
    })

    def proc_index(global_ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(all_keys, global_ids & S.PROCESS_MASK).astype(np.int32)

    # devices: (host bits, deviceId) pairs seen in GPU rows
    dev_keys = [_uniq(((gpu[k]["global_pid"] >> 48) & 0xFFFF) * 65536 + gpu[k]["device_id"]) for k in gpu]
    all_dev = np.unique(np.concatenate(dev_keys)) if dev_keys else np.zeros(0, dtype=np.int64)
    gpu_names = {}
    if exp.has("TARGET_INFO_GPU") and {"id", "name"} <= set(exp.columns("TARGET_INFO_GPU")):
        have = set(exp.columns("TARGET_INFO_GPU"))
        extra = "".join(f", {c}" if c in have else ", NULL" for c in ("smCount", "computeMajor", "computeMinor"))
        for gid, name, sm, major, minor in _query(exp, f'SELECT id, name{extra} FROM "TARGET_INFO_GPU"'):
            if type(gid) is not int:
                continue
            cc = float(f"{major}.{_int(minor, 0)}") if type(major) is int and 0 < major < 100 \
                and 0 <= _int(minor, 0) < 100 else None
            gpu_names[gid] = (name if isinstance(name, str) else "", sm if type(sm) is int and sm > 0 else None, cc)
    hosts = all_dev // 65536
    dev_ids = all_dev % 65536
    multi_host = len(np.unique(hosts)) > 1
    out["devices"] = pd.DataFrame({
        "device": np.arange(len(all_dev), dtype=np.int32),
        "host": hosts,
        "device_id": dev_ids,
        "label": [f"{h}:{d}" if multi_host else str(d) for h, d in zip(hosts, dev_ids)],
        "name": [gpu_names.get(int(d), ("", None, None))[0] if not multi_host else "" for d in dev_ids],
        "sm_count": [gpu_names.get(int(d), ("", None, None))[1] if not multi_host else None for d in dev_ids],
        # compute capability (e.g. 8.0 for A100), from TARGET_INFO_GPU; None when not exported
        "compute_capability": [gpu_names.get(int(d), ("", None, None))[2] if not multi_host else None
                               for d in dev_ids],
    })

    stream_parts = []
    for k, d in gpu.items():
        d = dict(d)
        d["device"] = np.searchsorted(all_dev, ((d["global_pid"] >> 48) & 0xFFFF) * 65536 + d["device_id"]).astype(np.int32)
        d["proc"] = proc_index(d.pop("global_pid"))
        if k == "memcpy":
            host_kind = np.full(len(d["copy_kind"]), -1, dtype=np.int8)
            h2d = d["copy_kind"] == S.COPY_HTOD
            d2h = d["copy_kind"] == S.COPY_DTOH
            host_kind[h2d] = d["src_kind"][h2d]
            host_kind[d2h] = d["dst_kind"][d2h]
            d["host_kind"] = host_kind
        out[k] = _frame(d, S.DTYPES)
        stream_parts.append(k)
    _assign_streams(out, stream_parts)

    # runtime API rows
    rt = dict(rt)
    api_kind = _api_kind_codes(strings)(rt["name_id"]).astype(np.int8) if len(rt["name_id"]) else np.zeros(0, np.int8)
    rt["api_kind"] = api_kind
    rt["proc"] = proc_index(rt["global_tid"])  # before global_tid is replaced by a thread index below

    os_ = dict(os_)
    is_wait = strings.flags(lambda v: S.OS_WAIT_CALLS.match(v) is not None)
    os_["is_wait"] = is_wait(os_["name_id"]) if len(os_["name_id"]) else np.zeros(0, dtype=bool)
    nvtx = _nvtx(exp, strings, duration_ns, drops)
    # threads: every global_tid seen; each host table gets a dense ``thread`` index
    thread_names = _thread_names(exp, strings)
    tids = np.unique(np.concatenate([_uniq(rt["global_tid"]), _uniq(os_["global_tid"]),
                                     _uniq(nvtx["global_tid"].to_numpy(np.int64)),
                                     np.fromiter(thread_names, dtype=np.int64, count=len(thread_names))]))
    rt["thread"] = np.searchsorted(tids, rt.pop("global_tid")).astype(np.int32)
    os_["thread"] = np.searchsorted(tids, os_["global_tid"]).astype(np.int32)
    nvtx["thread"] = np.searchsorted(tids, nvtx["global_tid"].to_numpy(np.int64)).astype(np.int32)
    out["runtime"] = _frame(rt, S.DTYPES)
    out["osrt"] = _frame(os_, S.DTYPES)
    out["nvtx"] = nvtx
    out["threads"] = _threads(tids, thread_names)
    return out


def _assign_streams(out: dict[str, pd.DataFrame], names: list[str]) -> None:
    """A stream is (process, device, context, stream id): give every GPU row a dense ``stream``
    index and build the ``streams`` table. Hash factorisation (linear), not a sort."""
    cols = ("proc", "device", "context_id", "stream_id")
    frames = [out[n] for n in names]
    widths = []
    for c in cols:
        mx = max((int(f[c].max()) for f in frames if len(f)), default=0)
        mn = min((int(f[c].min()) for f in frames if len(f)), default=0)
        widths.append(max(1, mx.bit_length()) if mn >= 0 else 64)
    if sum(widths) <= 63:
        shifts = [sum(widths[i + 1:]) for i in range(4)]

        def key(f):
            k = f[cols[0]].to_numpy().astype(np.int64) << shifts[0]
            for c, sh in zip(cols[1:], shifts[1:]):
                k |= f[c].to_numpy().astype(np.int64) << sh
            return k
        keys = [key(f) for f in frames]
        codes, uniq = pd.factorize(np.concatenate(keys) if keys else np.zeros(0, np.int64))
        table = np.stack([(np.asarray(uniq) >> sh) & ((1 << w) - 1) for sh, w in zip(shifts, widths)], axis=1) \
            if len(uniq) else np.zeros((0, 4), np.int64)
    else:  # ids too wide to pack: factorise the tuples
        both = pd.concat([f[list(cols)] for f in frames], ignore_index=True)
        codes = both.groupby(list(cols), sort=False).ngroup().to_numpy()
        table = both.drop_duplicates().to_numpy(np.int64)
    pos = 0
    for name, f in zip(names, frames):
        out[name]["stream"] = codes[pos:pos + len(f)].astype(np.int32)
        pos += len(f)
    out["streams"] = pd.DataFrame({"stream": np.arange(len(table), dtype=np.int32), "proc": table[:, 0],
                                   "device": table[:, 1], "context_id": table[:, 2], "stream_id": table[:, 3]})


def _thread_names(exp: ExportFile, strings: StringTable) -> dict[int, str]:
    """``ThreadNames`` as global_tid -> name (one query; threads named but silent still count)."""
    names: dict[int, str] = {}
    if exp.has("ThreadNames") and {"nameId", "globalTid"} <= set(exp.columns("ThreadNames")):
        for gtid, name_id in _query(exp, 'SELECT globalTid, nameId FROM "ThreadNames"'):
            if type(gtid) is int:
                names[gtid] = strings.get(name_id) if type(name_id) is int else ""
    return names


def _threads(tids: np.ndarray, names: dict[int, str]) -> pd.DataFrame:
    return pd.DataFrame({"thread": np.arange(len(tids), dtype=np.int32), "global_tid": tids,
                         "pid": S.decode_pid(tids), "tid": S.decode_tid(tids),
                         "name": np.array([names.get(int(t), "") for t in tids], dtype=object)})


#: Longest name or NVTX text kept (the longest demangled C++ kernel names in real captures are a
#: few thousand characters); longer ones are cut, saying how much, so one hostile 1 MB string
#: cannot fill the report, its JSON and the cache.
MAX_STRING_CHARS = 8192


def _cap(s: str) -> str:
    return s if len(s) <= MAX_STRING_CHARS else f"{s[:MAX_STRING_CHARS]}... [{len(s) - MAX_STRING_CHARS:,} more characters]"


def _text(v) -> str:
    """A string cell as text: bytes are decoded with replacement characters, NULL is "", and the
    length is capped (:data:`MAX_STRING_CHARS`)."""
    if isinstance(v, str):
        return _cap(v)
    if isinstance(v, bytes):
        return _cap(v.decode("utf-8", "replace"))
    return "" if v is None else _cap(str(v))


def _int(v, default: int) -> int:
    """``v`` if SQLite gave an integer, else ``default`` (NULL, text, real and blob values)."""
    return v if type(v) is int else default


def _nvtx(exp: ExportFile, strings: StringTable, duration_ns: int | None = None,
          drops: Drops | None = None) -> pd.DataFrame:
    cols = ["start_ns", "end_ns", "event_type", "global_tid", "text", "domain"]
    empty = pd.DataFrame({c: pd.Series(dtype="int64" if c.endswith(("_ns", "_type", "_tid")) else object) for c in cols})
    drops = drops if drops is not None else Drops()
    if not exp.has(S.NVTX):
        return empty
    present = set(exp.columns(S.NVTX))
    if not {"start", "eventType"} <= present:  # a quoted missing column would read as a string literal
        n = _query(exp, f'SELECT count(*) FROM "{S.NVTX}"')[0][0]
        drops.add(S.NVTX, "table lacks its start or eventType column", n)
        return empty
    sel = ['"start"', '"end"' if "end" in present else "NULL", '"eventType"',
           '"globalTid"' if "globalTid" in present else "0",
           '"text"' if "text" in present else "NULL",
           '"textId"' if "textId" in present else "NULL",
           '"domainId"' if "domainId" in present else "0"]
    types = ",".join(str(t) for t in S.NVTX_RANGE_TYPES + (S.NVTX_MARK, S.NVTX_DOMAIN_CREATE))
    rows = _query(exp, f'SELECT {", ".join(sel)} FROM "{S.NVTX}" WHERE eventType IN ({types})')
    if not rows:
        return pd.DataFrame({c: [] for c in cols})
    start = np.array([_int(r[0], BAD) for r in rows], dtype=np.int64)
    end = np.array([_int(r[1], BAD) for r in rows], dtype=np.int64)
    etype = np.array([_int(r[2], -1) for r in rows], dtype=np.int64)
    gtid = np.array([_int(r[3], 0) for r in rows], dtype=np.int64)
    text_id = np.array([_int(r[5], -1) for r in rows], dtype=np.int64)
    looked = strings.lookup(text_id)
    text = np.array([_cap(r[4]) if isinstance(r[4], str) else looked[i] for i, r in enumerate(rows)], dtype=object)
    dom_id = np.array([_int(r[6], 0) for r in rows], dtype=np.int64)
    # domain names: DomainCreate rows, matched on (process bits, domainId)
    pbits = gtid & S.PROCESS_MASK
    is_dom = etype == S.NVTX_DOMAIN_CREATE
    names = {(int(p), int(d)): str(t) for p, d, t in zip(pbits[is_dom], dom_id[is_dom], text[is_dom])}
    any_proc = {int(d): str(t) for d, t in zip(dom_id[is_dom], text[is_dom])}
    domain = np.array([names.get((int(p), int(d)), any_proc.get(int(d), "")) if d else ""
                       for p, d in zip(pbits, dom_id)], dtype=object)
    keep = ~is_dom
    d = {"start_ns": start[keep], "end_ns": end[keep], "event_type": etype[keep], "global_tid": gtid[keep],
         "text": text[keep], "domain": domain[keep]}
    # marks have no end: validate them with end = start; a range without an end keeps -1 (open)
    d = _validate(d, S.NVTX, duration_ns, drops, end_optional=True)
    d["end_ns"] = np.where(d["end_ns"] == BAD, -1, d["end_ns"])
    return pd.DataFrame(d)


def _small_tables(exp: ExportFile, strings: StringTable) -> dict:
    res: dict = {}
    # diagnostics
    diag = {"timestamp_ns": [], "severity": [], "text": []}
    if exp.has("DIAGNOSTIC_EVENT") and {"severity", "text"} <= set(exp.columns("DIAGNOSTIC_EVENT")):
        for ts, sev, text in _query(exp, 'SELECT timestamp, severity, text FROM "DIAGNOSTIC_EVENT"'):
            diag["timestamp_ns"].append(_int(ts, 0))
            diag["severity"].append(S.DIAG_SEVERITY.get(sev, str(sev)) if type(sev) is int else str(sev))
            diag["text"].append(text if isinstance(text, str) else "")
    res["diagnostics"] = pd.DataFrame(diag)
    # profiler overhead
    ov = {"start_ns": [], "end_ns": [], "global_tid": [], "name": []}
    if exp.has("PROFILER_OVERHEAD"):
        rows = _query(exp, 'SELECT start, "end", globalTid, nameId FROM "PROFILER_OVERHEAD"')
        names = strings.lookup(np.array([_int(r[3], -1) for r in rows], dtype=np.int64))
        for r, n in zip(rows, names):
            if type(r[0]) is int and type(r[1]) is int and r[0] <= r[1] and abs(r[0]) < TIME_LIMIT_NS \
                    and abs(r[1]) < TIME_LIMIT_NS:
                ov["start_ns"].append(r[0]); ov["end_ns"].append(r[1]); ov["global_tid"].append(_int(r[2], 0)); ov["name"].append(n)
    res["overhead"] = pd.DataFrame(ov).astype({"start_ns": "int64", "end_ns": "int64", "global_tid": "int64"})
    # GPU metrics (only the metrics we summarise)
    gm = {"timestamp_ns": np.zeros(0, np.int64), "device_id": np.zeros(0, np.int64),
          "metric": np.zeros(0, object), "value": np.zeros(0, np.float64)}
    if exp.has(S.GPU_METRICS) and exp.has(S.GPU_METRICS_INFO):
        info = _query(exp, f'SELECT typeId, metricId, metricName FROM "{S.GPU_METRICS_INFO}"')
        wanted = {}
        for type_id, metric_id, name in info:
            if type(type_id) is not int or type(metric_id) is not int:
                continue  # ids are pasted into SQL below: integers only
            lname = (name if isinstance(name, str) else "").lower()
            for canon, prefixes in S.GPU_METRIC_PREFIXES.items():
                if lname.startswith(prefixes):
                    wanted[(type_id, metric_id)] = canon
        if wanted:
            ids = sorted({m for _, m in wanted})
            rows = _query(exp, f'SELECT timestamp, typeId, metricId, value FROM "{S.GPU_METRICS}" '
                               f'WHERE metricId IN ({",".join(str(i) for i in ids)})')
            rows = [r for r in rows if (r[1], r[2]) in wanted and type(r[0]) is int
                    and isinstance(r[3], (int, float)) and not isinstance(r[3], bool)]
            gm = {
                "timestamp_ns": np.array([r[0] for r in rows], dtype=np.int64),
                # UNVERIFIED in NVIDIA docs: the low byte of typeId is the GPU index (nsys2prv).
                "device_id": np.array([r[1] & 0xFF for r in rows], dtype=np.int64),
                "metric": np.array([wanted[(r[1], r[2])] for r in rows], dtype=object),
                "value": np.array([float(r[3]) for r in rows], dtype=np.float64),
            }
    res["gpu_metrics"] = pd.DataFrame(gm)
    # capture duration
    res["duration_ns"] = _session_duration(exp)
    # wall-clock start of the session (UTC epoch ns): aligns per-rank captures (nsysdoc job)
    res["session_start_utc_ns"] = None
    if exp.has("TARGET_INFO_SESSION_START_TIME") and "utcEpochNs" in exp.columns("TARGET_INFO_SESSION_START_TIME"):
        rows = _query(exp, 'SELECT utcEpochNs FROM "TARGET_INFO_SESSION_START_TIME" LIMIT 1')
        if rows and type(rows[0][0]) is int:
            res["session_start_utc_ns"] = int(rows[0][0])
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
# cache
# --------------------------------------------------------------------------------------------
_FRAMES = ("kernels", "memcpy", "memset", "runtime", "sync", "osrt", "nvtx", "devices", "processes", "streams",
           "threads", "gpu_metrics", "diagnostics", "overhead")


def _read_parquet(path: Path) -> pd.DataFrame:
    """Parquet -> DataFrame one column at a time (peak = result + one column, not 2x the table)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    cols = {}
    for name in pf.schema_arrow.names:
        col = pf.read(columns=[name]).column(0)
        numeric = pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type)
        cols[name] = col.to_numpy() if numeric and col.null_count == 0 else col.to_pandas().to_numpy()
        del col
    return pd.DataFrame(cols, copy=False)


#: The columns of each cached frame (a fresh load produces exactly these: tests/test_loader.py).
#: An entry whose frames differ is ignored and rebuilt.
FRAME_COLUMNS = {
    "kernels": ("start_ns", "end_ns", "device_id", "context_id", "stream_id", "correlation_id", "name_id",
                "short_id", "device", "proc", "stream"),
    "memcpy": ("start_ns", "end_ns", "device_id", "context_id", "stream_id", "correlation_id", "bytes", "copy_kind",
               "src_kind", "dst_kind", "device", "proc", "host_kind", "stream"),
    "memset": ("start_ns", "end_ns", "device_id", "context_id", "stream_id", "correlation_id", "bytes", "mem_kind",
               "device", "proc", "stream"),
    "runtime": ("start_ns", "end_ns", "correlation_id", "name_id", "event_class", "api_kind", "proc", "thread"),
    "sync": ("start_ns", "end_ns", "device_id", "context_id", "stream_id", "correlation_id", "sync_type", "device",
             "proc", "stream"),
    "osrt": ("start_ns", "end_ns", "global_tid", "name_id", "is_wait", "thread"),
    "nvtx": ("start_ns", "end_ns", "event_type", "global_tid", "text", "domain", "thread"),
    "devices": ("device", "host", "device_id", "label", "name", "sm_count", "compute_capability"),
    "processes": ("global_pid", "pid", "name"),
    "streams": ("stream", "proc", "device", "context_id", "stream_id"),
    "threads": ("thread", "global_tid", "pid", "tid", "name"),
    "gpu_metrics": ("timestamp_ns", "device_id", "metric", "value"),
    "diagnostics": ("timestamp_ns", "severity", "text"),
    "overhead": ("start_ns", "end_ns", "global_tid", "name"),
}
#: frames whose every column but the text ones must be integer (or bool) in a usable entry
_EVENT_FRAMES = ("kernels", "memcpy", "memset", "runtime", "sync", "osrt", "nvtx", "streams")
_META_KEYS = {"format": int, "nsys_version": (str, type(None)), "schema_version": (str, type(None)),
              "duration_ns": (int, type(None)), "process_messages": list,
              "session_start_utc_ns": (int, type(None)), "dropped_rows": list}


def _entry_ok(meta, frames: dict[str, pd.DataFrame]) -> bool:
    """True when a cache entry has the shape this version writes (else it is rebuilt)."""
    if not isinstance(meta, dict) or meta.get("format") != CACHE_FORMAT:
        return False
    if any(not isinstance(meta.get(k), typ) for k, typ in _META_KEYS.items()):
        return False
    for name, cols in FRAME_COLUMNS.items():
        df = frames[name]
        if tuple(df.columns) != cols:
            return False
        if name in _EVENT_FRAMES and any(df[c].dtype.kind not in "iub" for c in cols if c not in ("text", "domain")):
            return False
    return True


def _cache_read(entry: Path) -> dict | None:
    meta_path = entry / "meta.json"
    try:
        if not meta_path.is_file():
            return None
        import pyarrow.parquet as pq

        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        frames = {name: _read_parquet(entry / f"{name}.parquet") for name in _FRAMES}
        st = pq.read_table(entry / "strings.parquet")
        strings = StringTable(st.column("id").to_numpy(), np.array(st.column("value").to_pylist(), dtype=object))
        if not _entry_ok(meta, frames) or strings.ids.dtype.kind not in "iu":
            return None
    except Exception:
        return None  # an unreadable, damaged or foreign cache entry is ignored and rebuilt
    cache_m.touch(entry)
    return {"meta": meta, "frames": frames, "strings": strings}


_PENDING: dict[Path, threading.Thread] = {}


def wait_for_cache_writes() -> None:
    """Block until background cache writes of this process are done."""
    while _PENDING:
        _PENDING.popitem()[1].join()


def _cache_write_quietly(entry: Path, meta: dict, frames: dict[str, pd.DataFrame], strings: StringTable) -> None:
    try:
        _cache_write(entry, meta, frames, strings)
    except Exception:  # an unwritable or full cache folder only costs speed next time
        pass


def _cache_write(entry: Path, meta: dict, frames: dict[str, pd.DataFrame], strings: StringTable) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cache_m.make_dir(entry.parent)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
    try:
        for name in _FRAMES:
            df = frames[name]
            table = pa.Table.from_pandas(df, preserve_index=False)
            pq.write_table(table, tmp / f"{name}.parquet", compression="lz4")
        pq.write_table(pa.table({"id": strings.ids, "value": pa.array(list(strings.values), type=pa.string())}),
                       tmp / "strings.parquet", compression="lz4")
        (tmp / "meta.json").write_text(json.dumps({**meta, "format": CACHE_FORMAT}), encoding="utf-8")
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        os.replace(tmp, entry)
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    cache_m.evict(entry.parent, keep=entry)


# --------------------------------------------------------------------------------------------
# public
# --------------------------------------------------------------------------------------------
EVENT_TABLES = (S.KERNEL, S.MEMCPY, S.MEMSET, S.RUNTIME, S.NVTX, S.OSRT)


def load_trace(path: str | os.PathLike, *, cache: bool = True, cache_dir: str | os.PathLike | None = None,
               progress: ProgressFn | None = None) -> Trace:
    """Load an nsys SQLite export, or a PyTorch Profiler (Kineto) trace (JSON or gzip-compressed
    JSON: :mod:`nsysdoc.trace.kineto`, cached the same way). Raises :mod:`nsysdoc.errors`
    exceptions on bad input."""
    from . import kineto

    if kineto.routes_here(path):
        return kineto.load_kineto(path, cache=cache, cache_dir=cache_dir, progress=progress)
    t0 = time.perf_counter()
    exp = open_export(path)
    tables = frozenset(exp.tables)
    traced = {k: any(t in tables for t in ts) for k, ts in S.TRACE_TYPES.items()}
    # an export with a -wal/-journal beside it is read from a settled private copy, never cached
    # (the sidecar's content is not part of the file's identity)
    entry = cache_m.entry_path(cache_dir or cache_m.default_cache_dir(), exp.path, "trace", CACHE_FORMAT) \
        if cache and exp.read_path == exp.path else None
    if entry is not None and entry in _PENDING:
        _PENDING.pop(entry).join()  # a write of this entry is still running in this process
    cached = _cache_read(entry) if entry is not None else None
    if cached is not None:
        meta, frames, strings = cached["meta"], cached["frames"], cached["strings"]
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
        try:
            loaded = _load_tables(exp, progress)
            strings = loaded["strings"]
            if progress:
                progress("decoding tables")
            drops = Drops()
            frames = _build(exp, strings, loaded["raw"], _session_duration(exp), drops)
            small = _small_tables(exp, strings)
        except (ValueError, TypeError, OverflowError, KeyError, IndexError, UnicodeError) as exc:
            # values no export of nsys holds, in a place the row checks do not cover: refuse in one line
            raise CorruptFileError(f"{exp.path}: damaged export: unexpected values ({type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0][:120] if str(exc) else ''})",
                                   hint="export again with nsys export --type sqlite") from None
        frames.update({k: small[k] for k in ("diagnostics", "overhead", "gpu_metrics")})
        meta = {"nsys_version": exp.nsys_version, "schema_version": exp.schema_version,
                "duration_ns": small["duration_ns"], "process_messages": small["process_messages"],
                "session_start_utc_ns": small["session_start_utc_ns"], "dropped_rows": drops.as_list()}
        from_cache = False
        if entry is not None:
            # Written in the background while the caller analyses (the two use different cores).
            # Not a daemon thread: the interpreter waits for it before exiting, and the entry
            # only appears, by rename, once complete.
            th = threading.Thread(target=_cache_write_quietly, args=(entry, meta, dict(frames), strings),
                                  name="nsysdoc-cache-write", daemon=False)
            _PENDING[entry] = th
            th.start()
    trace = Trace(
        path=str(exp.path), nsys_version=meta["nsys_version"], schema_version=meta["schema_version"],
        tables=tables, traced=traced, strings=strings,
        **{name: frames[name] for name in _FRAMES},
        duration_ns=meta["duration_ns"], process_messages=list(meta["process_messages"]),
        session_start_utc_ns=meta.get("session_start_utc_ns"),
        dropped_rows=list(meta.get("dropped_rows", [])),
        from_cache=from_cache,
    )
    trace.load_seconds = time.perf_counter() - t0
    return trace
