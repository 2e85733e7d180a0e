"""What both trace readers share: the canonical tables and the checks every row passes. (Named
``tables``, not ``frames``: in nsysdoc a frame is a stack frame, :mod:`nsysdoc.trace.python_frames`.)

The SQLite reader (:mod:`nsysdoc.trace.sqlite_reader`) and the PyTorch Profiler reader
(:mod:`nsysdoc.trace.kineto`) each map their format onto the same tables; this module holds what
that mapping must produce and the helpers both use to produce it:

* the column contract: :data:`FRAME_COLUMNS` (a table as a whole DataFrame, ``Trace.frame``),
  :data:`SMALL_FRAMES`, the stored columns and dtypes of each event table (:data:`TABLE_DTYPES`);
* the row checks (:func:`validate`, counted in :class:`Drops`) and their limits (:data:`BAD`,
  :data:`TIME_LIMIT_NS`);
* the shared table builders: threads, streams, CUDA API kinds, launch configurations, the set-up
  launches (:class:`FirstLaunches`);
* :func:`column_table` and :func:`store_from_frames` (a store from whole event tables held as
  numpy :class:`~nsysdoc.trace.columns.Columns`, the PyTorch Profiler path, without pandas);
  :func:`nsysdoc.trace.model.whole_frame` turns a stored event table back into one DataFrame.

It knows neither input format: nothing here reads a file.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from . import schema as S
from .columns import Columns, factorize, factorize_objects
from .nvtx_text import Groups, row_facts
from .store import STR, Store, take

if TYPE_CHECKING:
    from .strings import StringTable


#: What a reader tells its progress to (one line of text at a time).
ProgressFn = Callable[[str], None]


#: Stands for a NULL, non-integer or out-of-range value in a column that must hold one (times,
#: device ids): rows holding it are dropped and counted (:func:`validate`). No real nsys time
#: comes near it.
BAD = np.iinfo(np.int64).min


def column_table(cols: dict[str, np.ndarray], dtypes: dict[str, str] | None = None) -> Columns:
    """An event table as :class:`~nsysdoc.trace.columns.Columns` (no pandas; a column already of
    its type is not copied): the columns named in ``dtypes`` cast to their type."""
    out = {}
    for k, v in cols.items():
        v = np.asarray(v)
        dt = dtypes.get(k) if dtypes else None
        out[k] = v.astype(dt) if dt is not None and v.dtype != dt else v
    return Columns(out)


def _col(frame, name: str, dtype=None) -> np.ndarray:
    """Column ``name`` of a table (:class:`Columns`, or a DataFrame from a caller) as numpy."""
    return np.asarray(frame[name], dtype=dtype)


def unique_ints(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an integer column: a mark per value (linear) when the values are
    small non-negative ids (string ids: fewer than the export's strings), else a sort."""
    values = np.asarray(values, dtype=np.int64)
    if len(values) and int(values.min()) >= 0 and int(values.max()) < max(1 << 20, 4 * len(values)):
        seen = np.zeros(int(values.max()) + 1, dtype=bool)
        seen[values] = True
        return np.flatnonzero(seen)
    return np.unique(values)


#: Times this far from zero are not nanoseconds of any real session (2^61 ns is the year 2043 as a
#: UNIX epoch, the largest an ``nsys export --ts-normalize`` time can be for a while).
TIME_LIMIT_NS = 1 << 61
#: Slack around the session span for rows a flush writes just after it ends.
SESSION_SLACK_NS = 1_000_000_000


class Drops:
    """Rows the loader refused, counted per (table, reason); shown in the report's capture quality."""

    def __init__(self, order: tuple[str, ...] | None = None) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        #: tables in listing order (the streaming loader reads them in another order, chunk by
        #: chunk); reasons are listed in the order of the row checks
        self.order = order

    def add(self, table: str, reason: str, n: int) -> None:
        if n:
            self.counts[(table, reason)] = self.counts.get((table, reason), 0) + int(n)

    def as_list(self) -> list[dict]:
        items = list(self.counts.items())
        if self.order is not None:
            rank = {t: i for i, t in enumerate(self.order)}
            items.sort(key=lambda kv: (rank.get(kv[0][0], len(rank)),
                                       DROP_REASONS.index(kv[0][1]) if kv[0][1] in DROP_REASONS else len(DROP_REASONS)))
        return [{"table": t, "reason": r, "rows": n} for (t, r), n in items]


DROP_REASONS = ("start or end NULL or not an integer", "deviceId, contextId or streamId NULL or out of range",
            "no timestamps (start = end = 0)", "end before start", "time outside the capture's session",
            "table lacks its start or eventType column")


def row_checks(d: dict[str, np.ndarray], end_optional: bool = False):
    """The row checks of :func:`validate` except the session bound: ``(ok, end_c, masks)``."""
    start, end = d["start_ns"], d["end_ns"]
    n = len(start)
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
    return ok, end_c, {"missing": missing, "bad_dev": bad_dev, "zero": zero, "inverted": inverted, "far": far}


def median_anchor(start: np.ndarray, ok: np.ndarray) -> int | None:
    """The table's median start over its valid rows (every k-th of them above 100 k rows)."""
    if not ok.any():
        return None
    sample = start[ok][:: max(1, int(ok.sum()) // 100_000)]
    return int(np.median(sample))


def validate(d: dict[str, np.ndarray], table: str, duration_ns: int | None, drops: Drops,
              end_optional: bool = False, anchor: int | None = None) -> dict[str, np.ndarray]:
    """Drop rows no session can hold, counting each reason in ``drops``:

    * start or end NULL or not an integer; deviceId NULL or outside 0-65535; contextId or streamId
      NULL, not an integer or beyond 32 bits;
    * start = end = 0: CUPTI wrote no timestamps for the row;
    * end before start;
    * a time outside the session: farther than the session's duration (``ANALYSIS_DETAILS``) from
      the table's median start (``anchor``: computed from ``d`` when not given; the loader gives
      the median of a sample of the whole table when it spans several chunks), or beyond
      +-2^61 ns.

    Negative times are valid (``nsys export --ts-shift`` with a negative shift)."""
    start = d["start_ns"]
    n = len(start)
    if n == 0:
        return d
    ok, end_c, m = row_checks(d, end_optional)
    far = m["far"]
    if duration_ns and ok.any():
        if anchor is None:
            anchor = median_anchor(start, ok)
        bound = duration_ns + SESSION_SLACK_NS
        outside = ok & ((np.abs(start - anchor) > bound) | (np.abs(end_c - anchor) > bound) | (end_c - start > bound))
        ok &= ~outside
        far = far | outside
    if ok.all():
        return d
    drops.add(table, DROP_REASONS[0], int(m["missing"].sum()))
    drops.add(table, DROP_REASONS[1], int(m["bad_dev"].sum()))
    drops.add(table, DROP_REASONS[2], int(m["zero"].sum()))
    drops.add(table, DROP_REASONS[3], int(m["inverted"].sum()))
    drops.add(table, DROP_REASONS[4], int(far.sum()))
    return {k: take(v, ok) for k, v in d.items()}


def api_kind_codes(strings: StringTable):
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


UNKNOWN_NAME = "<name missing from the export>"


#: Stored columns (and dtypes) of each event table; ``coded`` ones hold first-seen codes.
GPU_BASE = {"start_ns": "int64", "end_ns": "int64", "correlation_id": "uint32", "stream": "int32"}
#: GPU row columns that follow from the row's stream (``Trace.streams``): looked up when read
STREAM_COLUMNS = {"device": "stream_device", "proc": "stream_proc", "device_id": "stream_device_id",
                  "context_id": "stream_context_id", "stream_id": "stream_stream_id"}
#: the launching CUDA API call of a GPU row, joined while loading: its row (position in the runtime
#: table), start, end, thread (a ``thread`` code) and ``api_kind``; -1 when unknown
LAUNCHED = {"api": "int32", "api_start_ns": "int64", "api_end_ns": "int64", "api_thread": "int32", "api_kind": "int8"}
#: GPU operation tables are stored in start-time buckets (``Table.bucket_by_start``); ``row`` keeps
#: each row's place in the table.
TABLE_DTYPES = {
    "kernels": {**GPU_BASE, "name_id": "int32", "short_id": "int32", "launch": "int32", **LAUNCHED, "row": "int32"},
    "memcpy": {**GPU_BASE, "bytes": "int64", "copy_kind": "int8", "src_kind": "int8", "dst_kind": "int8",
               "host_kind": "int8", **LAUNCHED, "row": "int32"},
    "memset": {**GPU_BASE, "bytes": "int64", "mem_kind": "int8", **LAUNCHED, "row": "int32"},
    "sync": {**GPU_BASE, "sync_type": "int8"},
    "runtime": {"start_ns": "int64", "end_ns": "int64", "correlation_id": "uint32", "name_id": "int32",
                "event_class": "int16", "api_kind": "int8", "proc": "int32", "thread": "int32"},
    "osrt": {"start_ns": "int64", "end_ns": "int64", "global_tid": "int64", "name_id": "int32", "is_wait": "bool",
             "thread": "int32"},
    "nvtx": {"start_ns": "int64", "end_ns": "int64", "event_type": "int16", "global_tid": "int64",
             "text": STR, "domain": "int32", "thread": "int32",
             # nsysdoc.trace.nvtx_text: the text's group (into Trace.nvtx_groups), seq, flags
             "text_group": "int32", "seq": "int64", "call_flags": "int8"},
}
TABLE_CODED = {"kernels": ("api_thread=thread",), "memcpy": ("api_thread=thread",), "memset": ("api_thread=thread",),
               "sync": (), "runtime": ("proc", "thread"), "osrt": ("thread",),
               "nvtx": ("thread",)}


class FirstLaunches:
    """Which long kernel-launch calls are set-up work (``nsysdoc.trace.schema.SETUP_LAUNCH_MIN_NS``:
    at least that long and the *first* launch of one of its kernels in its process; a long launch
    whose kernels are unknown counts as set-up), found while the kernel rows stream by: the first launch of each kernel (name) in each process
    (earliest call start; ties: the kernel row first in the table), and which candidate calls (kernel
    launches of 1 ms or more) launched any known kernel. Only kept when candidates exist."""

    def __init__(self) -> None:
        self.first: dict[tuple[int, int], tuple[int, int, int]] = {}  # (proc, name) -> (start, row, api)
        self.used: list[np.ndarray] = []

    def add(self, cand, proc, name, api, api_start, row) -> None:
        if cand is None or not len(cand):
            return
        ka = np.flatnonzero(api >= 0)
        if not len(ka):
            return
        p, nm, a, st, rw = proc[ka].astype(np.int64), name[ka].astype(np.int64), api[ka].astype(np.int64), \
            api_start[ka], row[ka]
        mine = in_sorted_pos(cand, a)
        if mine.any():
            self.used.append(a[mine])
        codes, uniq = factorize((p << 32) | (nm & 0xFFFFFFFF))
        k = len(uniq)
        cmin = np.full(k, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(cmin, codes, st)
        at = st == cmin[codes]
        crow = np.full(k, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(crow, codes[at], rw[at])
        sel = at & (rw == crow[codes])
        capi = np.full(k, -1, dtype=np.int64)
        capi[codes[sel]] = a[sel]
        for j, key in enumerate(np.asarray(uniq).tolist()):
            new = (int(cmin[j]), int(crow[j]), int(capi[j]))
            old = self.first.get(key)
            if old is None or new[:2] < old[:2]:
                self.first[key] = new

    def setup_launches(self, cand: np.ndarray) -> np.ndarray:
        if not len(cand):
            return np.zeros(0, np.int64)
        used = np.unique(np.concatenate(self.used)) if self.used else np.zeros(0, np.int64)
        out = set(cand[~in_sorted_pos(used, cand)].tolist())  # launched no known kernel: set-up
        firsts = np.array([v[2] for v in self.first.values()], dtype=np.int64)
        out |= set(firsts[in_sorted_pos(cand, firsts)].tolist())
        return np.array(sorted(out), dtype=np.int64)


def launch_arrays(keys, est_occupancy=None) -> dict[str, np.ndarray]:
    """The derived arrays of the launch configurations: ``launch_keys`` (the packed key of each
    code a kernel row holds, ``schema.launch_key_sql``) and ``launch_est_occupancy`` (PyTorch
    Profiler's "est. achieved occupancy %" of each code; -1 when not recorded, always for nsys)."""
    keys = np.asarray(keys, dtype=np.int64).reshape(-1)
    est = np.full(len(keys), -1, dtype=np.int64) if est_occupancy is None else \
        np.asarray(est_occupancy, dtype=np.int64).reshape(-1)
    return {"launch_keys": keys, "launch_est_occupancy": est}


def in_sorted_pos(sorted_values: np.ndarray, x: np.ndarray) -> np.ndarray:
    if not len(sorted_values) or not len(x):
        return np.zeros(len(x), dtype=bool)
    i = np.minimum(np.searchsorted(sorted_values, x), len(sorted_values) - 1)
    return sorted_values[i] == x


def gpu_table(store: Store, key: str):
    """A GPU operation table: its stored columns, and the stream's columns looked up on read."""
    t = store.table(key, TABLE_DTYPES[key], TABLE_CODED[key])
    t.virtual = {c: ("stream", lut) for c, lut in STREAM_COLUMNS.items()}
    return t


def stream_luts(streams: Columns, devices: Columns) -> dict[str, np.ndarray]:
    """Per stream index: its process, device, raw deviceId, contextId and streamId (int32)."""
    dev = np.asarray(streams["device"], dtype=np.int64)
    dev_ids = np.asarray(devices["device_id"], dtype=np.int64)
    return {"stream_proc": np.asarray(streams["proc"], dtype=np.int64).astype(np.int32),
            "stream_device": dev.astype(np.int32),
            "stream_device_id": (dev_ids[dev] if len(dev) else dev).astype(np.int32),
            "stream_context_id": np.asarray(streams["context_id"], dtype=np.int64).astype(np.int32),
            "stream_stream_id": np.asarray(streams["stream_id"], dtype=np.int64).astype(np.int32)}


def assign_streams(out: dict, names: list[str]) -> None:
    """A stream is (process, device, context, stream id): give every GPU row a dense ``stream``
    index and build the ``streams`` table (codes in order of first appearance). The tables are
    :class:`Columns` (or DataFrames); no pandas is needed."""
    cols = ("proc", "device", "context_id", "stream_id")
    frames = [out[n] for n in names]
    widths = []
    for c in cols:
        mx = max((int(_col(f, c).max()) for f in frames if len(f)), default=0)
        mn = min((int(_col(f, c).min()) for f in frames if len(f)), default=0)
        widths.append(max(1, mx.bit_length()) if mn >= 0 else 64)
    if sum(widths) <= 63:
        shifts = [sum(widths[i + 1:]) for i in range(4)]

        def key(f):
            k = _col(f, cols[0]).astype(np.int64) << shifts[0]
            for c, sh in zip(cols[1:], shifts[1:]):
                k |= _col(f, c).astype(np.int64) << sh
            return k
        keys = [key(f) for f in frames]
        codes, uniq = factorize(np.concatenate(keys) if keys else np.zeros(0, np.int64))
        table = np.stack([(np.asarray(uniq) >> sh) & ((1 << w) - 1) for sh, w in zip(shifts, widths)], axis=1) \
            if len(uniq) else np.zeros((0, 4), np.int64)
    else:  # ids too wide to pack: factorise the tuples (rows of 4), first appearance first
        both = np.concatenate([np.stack([_col(f, c, np.int64) for c in cols], axis=1) for f in frames]) \
            if frames else np.zeros((0, 4), np.int64)
        if len(both):
            uniq, first, inverse = np.unique(both, axis=0, return_index=True, return_inverse=True)
            order = np.argsort(first, kind="stable")
            rank = np.empty(len(uniq), dtype=np.int64)
            rank[order] = np.arange(len(uniq), dtype=np.int64)
            codes, table = rank[inverse.reshape(-1)], uniq[order]
        else:
            codes, table = np.zeros(0, np.int64), np.zeros((0, 4), np.int64)
    pos = 0
    for name, f in zip(names, frames):
        out[name]["stream"] = codes[pos:pos + len(f)].astype(np.int32)
        pos += len(f)
    out["streams"] = Columns({"stream": np.arange(len(table), dtype=np.int32), "proc": table[:, 0],
                                   "device": table[:, 1], "context_id": table[:, 2], "stream_id": table[:, 3]})


def threads_table(tids: np.ndarray, names: dict[int, str]) -> Columns:
    return Columns({"thread": np.arange(len(tids), dtype=np.int32), "global_tid": tids,
                    "pid": S.decode_pid(tids), "tid": S.decode_tid(tids),
                    "name": np.array([names.get(int(t), "") for t in tids], dtype=object)})


#: Longest name or NVTX text kept (the longest demangled C++ kernel names in real captures are a
#: few thousand characters); longer ones are cut, saying how much, so one hostile 1 MB string
#: cannot fill the report, its JSON and the cache.
MAX_STRING_CHARS = 8192


def cap(s: str) -> str:
    return s if len(s) <= MAX_STRING_CHARS else f"{s[:MAX_STRING_CHARS]}... [{len(s) - MAX_STRING_CHARS:,} more characters]"


#: The columns of each table as a whole DataFrame (``Trace.frame``) and of each small table.
FRAME_COLUMNS = {
    "kernels": ("start_ns", "end_ns", "device_id", "context_id", "stream_id", "correlation_id", "name_id",
                "short_id", "launch", "device", "proc", "stream"),
    "memcpy": ("start_ns", "end_ns", "device_id", "context_id", "stream_id", "correlation_id", "bytes", "copy_kind",
               "src_kind", "dst_kind", "device", "proc", "host_kind", "stream"),
    "memset": ("start_ns", "end_ns", "device_id", "context_id", "stream_id", "correlation_id", "bytes", "mem_kind",
               "device", "proc", "stream"),
    "runtime": ("start_ns", "end_ns", "correlation_id", "name_id", "event_class", "api_kind", "proc", "thread"),
    "sync": ("start_ns", "end_ns", "device_id", "context_id", "stream_id", "correlation_id", "sync_type", "device",
             "proc", "stream"),
    "osrt": ("start_ns", "end_ns", "global_tid", "name_id", "is_wait", "thread"),
    "nvtx": ("start_ns", "end_ns", "event_type", "global_tid", "text", "domain", "thread"),
    "devices": ("device", "host", "device_id", "label", "name", "sm_count", "compute_capability",
                *S.GPU_LIMIT_COLUMNS),
    "processes": ("global_pid", "pid", "name"),
    "streams": ("stream", "proc", "device", "context_id", "stream_id"),
    "threads": ("thread", "global_tid", "pid", "tid", "name"),
    "gpu_metrics": ("timestamp_ns", "device_id", "metric", "value"),
    "diagnostics": ("timestamp_ns", "severity", "text"),
    "overhead": ("start_ns", "end_ns", "global_tid", "name"),
    # issue 47: the allocator's and the driver's memory events (docs/loader.md); -1 where absent
    "memory": ("timestamp_ns", "device_type", "device_id", "bytes", "total_allocated_bytes", "total_reserved_bytes",
               "global_tid", "address"),
    # issue 47: each GPU's memory (TARGET_INFO_GPU.totalMemory, Kineto deviceProperties.totalGlobalMem)
    "device_memory": ("device_id", "total_bytes"),
}
SMALL_FRAMES = ("devices", "processes", "streams", "threads", "gpu_metrics", "diagnostics", "overhead")
#: issue 47: the memory tables, small tables too (cached as Parquet, rebuilt when an entry lacks them)
SMALL_FRAMES = SMALL_FRAMES + ("memory", "device_memory")


def _domain_texts(col) -> np.ndarray:
    """The NVTX domain column as str objects ("" for a value that is not a str); without a
    Python call per row when every value is a str already (a PyTorch trace's 350,000 host ranges)."""
    vals = np.asarray(col, dtype=object)
    if set(map(type, vals)) <= {str}:
        return vals
    return np.array([v if isinstance(v, str) else "" for v in vals], dtype=object)


def store_from_frames(frames: dict[str, Columns], strings: StringTable, spill_dir: Path | None = None,
                      write_all: bool = False, launch_configs: dict[str, np.ndarray] | None = None,
                      nvtx_facts: tuple | None = None, memory_budget: int | None = None) -> tuple[Store, dict]:
    """A store holding whole event frames (a PyTorch Profiler trace, parsed in one go), with the
    columns and derived arrays the streaming loader computes: ``(store, extras)``. The event
    tables are :class:`Columns` (DataFrames work too); no pandas is needed. ``nvtx_facts``: the
    nvtx rows' ``text_group``, ``seq`` and ``call_flags`` columns and the group texts, when the
    reader found them (:mod:`nsysdoc.trace.nvtx_text`); else they are found here. ``memory_budget``:
    the store's (0: no block is kept in memory, every one is written)."""
    from .schema import SETUP_LAUNCH_MIN_NS
    from .correlation import match_api

    store = Store(spill_dir, write_all=write_all, memory_budget=memory_budget)
    store.luts.update(stream_luts(frames["streams"], frames["devices"]))
    rt = frames["runtime"]
    api_valid = _col(rt, "event_class") != 67 if len(rt) else np.zeros(0, dtype=bool)
    rt_start = _col(rt, "start_ns", np.int64)
    rt_kind = _col(rt, "api_kind")
    pageable = []
    launched = {}
    for key in ("kernels", "memcpy", "memset", "sync"):
        df = frames[key]
        d = {c: _col(df, c) for c in df.columns}
        d["row"] = np.arange(len(df), dtype=np.int64)
        launched[key] = d
        if key != "sync":
            api = match_api(_col(rt, "proc"), _col(rt, "correlation_id"), api_valid,
                            d["proc"], d["correlation_id"])
            d["api"] = api
            has = api >= 0
            a = np.maximum(api, 0)
            if len(rt_start):
                d["api_start_ns"] = np.where(has, rt_start[a], -1)
                d["api_end_ns"] = np.where(has, _col(rt, "end_ns", np.int64)[a], -1)
                d["api_thread"] = np.where(has, _col(rt, "thread")[a], -1)
                d["api_kind"] = np.where(has, rt_kind[a], -1)
            else:
                for c, dt in (("api_start_ns", np.int64), ("api_end_ns", np.int64), ("api_thread", np.int32),
                              ("api_kind", np.int8)):
                    d[c] = np.full(len(api), -1, dtype=dt)
            if key == "memcpy" and len(rt_kind):
                rows = api[(api >= 0) & (d["host_kind"] == S.MEM_PAGEABLE)]
                pageable.append(rows[rt_kind[rows] == S.API_ASYNC_COPY])
        t = gpu_table(store, key)
        if len(df):
            t.append(d)
    d = {c: _col(rt, c) for c in rt.columns}
    store.table("runtime", TABLE_DTYPES["runtime"]).append(d) if len(rt) else store.table("runtime", TABLE_DTYPES["runtime"])
    os_ = frames["osrt"]
    t = store.table("osrt", TABLE_DTYPES["osrt"])
    if len(os_):
        t.append({c: _col(os_, c) for c in os_.columns})
    nv = frames["nvtx"]
    t = store.table("nvtx", TABLE_DTYPES["nvtx"])
    dom_codes, doms = factorize_objects(_domain_texts(nv["domain"])) if len(nv) else (np.zeros(0, np.int64), [])
    groups = Groups()
    if len(nv):
        text = _col(nv, "text", object)
        if nvtx_facts is not None:  # the reader's, found per distinct name (nsysdoc.trace.nvtx_text)
            facts, groups = nvtx_facts[0], Groups(nvtx_facts[1])
        else:
            facts = row_facts(text, groups)
        t.append({"start_ns": _col(nv, "start_ns", np.int64), "end_ns": _col(nv, "end_ns", np.int64),
                  "event_type": _col(nv, "event_type"), "global_tid": _col(nv, "global_tid", np.int64),
                  "text": text, "domain": dom_codes, "thread": _col(nv, "thread"), **facts})
    cand = np.zeros(0, np.int64)
    if len(rt):
        launch = strings.flags(lambda v: S.KERNEL_LAUNCH_APIS.match(S.strip_api_suffix(v)) is not None)
        dur = _col(rt, "end_ns", np.int64) - rt_start
        c = (rt_kind == S.API_LAUNCH) & (dur >= SETUP_LAUNCH_MIN_NS)
        if c.any():
            c &= launch(_col(rt, "name_id"))
        cand = np.flatnonzero(c).astype(np.int64)
    nid = _col(rt, "name_id") if len(rt) else np.zeros(0, np.int64)
    fl = FirstLaunches()
    kd = launched.get("kernels")
    if kd is not None and len(kd["proc"]) and len(cand):
        fl.add(cand, kd["proc"], kd["name_id"], kd["api"], kd["api_start_ns"], kd["row"])
    extras = {"nvtx_domains": np.array(list(doms), dtype=object), "nvtx_groups": groups.texts,
              "derived": {"pageable_async_api": np.unique(np.concatenate(pageable)) if pageable else np.zeros(0, np.int64),
                          "launch_candidates": cand, "setup_launch": fl.setup_launches(cand),
                          "kernel_name_ids": np.unique(_col(frames["kernels"], "name_id")).astype(np.int64),
                          "kernel_short_ids": np.unique(_col(frames["kernels"], "short_id")).astype(np.int64),
                          "runtime_name_counts": np.bincount(np.maximum(nid, 0).astype(np.int64)) if len(nid)
                          else np.zeros(0, np.int64),
                          **(launch_configs if launch_configs is not None else launch_arrays([]))}}
    store.finish_writes()
    return store, extras
