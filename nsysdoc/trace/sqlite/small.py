"""The small tables of an export: devices, thread names, GPU metrics, memory, diagnostics.

Why a module of its own (issue 51): these tables are read whole (or, for ``GPU_METRICS``,
streamed into a few arrays) and become frames of the :class:`~nsysdoc.trace.model.Trace`, not
blocks of the store; each refuses or leaves out the values no nsys export holds and counts what
it dropped. Their ids are the export's own (``StringIds`` as exported, device ids, global pids).
"""
from __future__ import annotations

import numpy as np

from ...errors import CorruptFileError
from .. import schema as S
from ..allocator import _malloc_trim
from ..columns import Columns
from ..model import StringTable
from ..open import ExportFile
from ..tables import TIME_LIMIT_NS
from . import chunks as chunked  # looked up at call time: tests patch _adbc_module and CHUNK_ROWS there
from .cells import _int
from .chunks import _fetch_arrow, _fetch_rows, _pipelined, _query, _safe_expr, _table_ranges
from .clock import _session_duration, _session_start


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
        if chunked._adbc_module() is not None:
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
    from ..model import empty_memory_frame

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
