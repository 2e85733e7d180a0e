"""The mapping of a Kineto trace's gathered columns onto nsysdoc's canonical tables.

Apart from the parsing: whatever engine read the events, :func:`_frames` makes exactly the frames
and columns the SQLite reader makes (:data:`nsysdoc.trace.tables.FRAME_COLUMNS`): the time base,
threads and processes as nsys's ids, the launch -> GPU join (``correlation`` args, else the
``ac2g`` flows), the SQLite reader's row checks (rows no capture can hold dropped and counted),
devices from ``deviceProperties``, names (kernel short names, copy/memset kinds, sync types),
the memory tables, and what Kineto never records.
"""
from __future__ import annotations

from array import array
from pathlib import Path

import numpy as np

from .. import schema as S
from .. import tables as F
from ..columns import Columns, factorize
from ..model import StringTable
from ..nvtx_text import Groups, text_facts
from .accumulate import _Acc
from .events import (K_HOST, K_KERNEL, K_MEMCPY, K_MEMSET, K_RUNTIME, K_SYNC, MEMORY_EVENT, NOT_RECORDED,
                     TABLE_NAMES, _DOMAINS)
from .names import _copy_kinds, _memset_kind, _sync_type, short_kernel_name
from .numbers import BAD, _I32, _LIM, _small_int

def _np(a: array, dtype) -> np.ndarray:
    """The column as a writable numpy array of ``dtype``; the array's memory is released."""
    out = np.array(np.frombuffer(a, dtype=a.typecode), dtype=dtype) if len(a) else np.zeros(0, dtype=dtype)
    del a[:]
    return out


class _Ids:
    """OS process/thread ids as nsys's 24-bit fields: numbers (or digit strings) that fit are kept
    (a negative tid, from Kineto before it wrote absolute values, by its absolute value); any
    other value gets a stable made-up id from the top of the range (0xFFFFFF, 0xFFFFFE, ...)."""

    def __init__(self) -> None:
        self.made: dict = {}

    def __call__(self, v) -> int:
        if v.__class__ is str and v.strip().lstrip("-").isdigit() and len(v.strip()) < 12:
            v = int(v.strip())
        if v.__class__ is int and abs(v) <= S.TID_MASK:
            return abs(v)
        key = repr(v)[:64]
        if key not in self.made:
            self.made[key] = S.TID_MASK - len(self.made)
        return self.made[key]


def _sorted_by_start(d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    s = d["start_ns"]
    if len(s) < 2 or bool(np.all(s[1:] >= s[:-1])):
        return d
    order = np.argsort(s, kind="stable")
    return {k: v[order] for k, v in d.items()}


def _frames(meta: dict, acc: _Acc, path: Path, drops: F.Drops) -> dict:
    """Every frame of :data:`nsysdoc.trace.tables.FRAME_COLUMNS`, plus the trace's metadata."""
    names = list(acc.names)
    n_names = len(names)
    # ---- time base -------------------------------------------------------------------------
    base = meta.get("baseTimeNanoseconds")
    base = base if base.__class__ is int and 0 < base < (1 << 63) else None
    shift, session_start = 0, base
    if base is None:
        if acc.spans:
            anchor = min(s for s, _ in acc.spans)
        else:  # views, not copies
            starts = [np.frombuffer(a, dtype=np.int64) for a in
                      [t["s"] for t in acc.gpu.values()] + [acc.rt["s"], acc.host["s"]] if len(a)]
            mins = [int(x[x != BAD].min()) for x in starts if (x != BAD).any()]
            del starts
            anchor = min(mins) if mins else 0
        if anchor >= 10 ** 18:  # nanoseconds since the UNIX epoch: PyTorch < 2.0 wrote absolute times
            shift, session_start = anchor, anchor

    def times(a: array) -> np.ndarray:
        x = _np(a, np.int64)
        if shift:
            x = np.where(x != BAD, x - shift, BAD)
        return x

    spans = [(s - shift, e - shift) for s, e in acc.spans]
    span_duration = (max(e for _, e in spans) - min(s for s, _ in spans)) if spans else None
    if span_duration is not None and not 0 < span_duration < F.TIME_LIMIT_NS:
        span_duration = None

    # ---- threads and processes ---------------------------------------------------------------
    ids = _Ids()
    thread_keys = list(acc.threads)
    t_pid = np.array([ids(k[0]) for k in thread_keys], dtype=np.int64)
    t_tid = np.array([ids(k[1]) for k in thread_keys], dtype=np.int64)
    t_gtid = (t_pid << S.PID_SHIFT) | t_tid
    thread_names = {}
    for (pid, tid), label in acc.thread_names.items():
        thread_names[(ids(pid) << S.PID_SHIFT) | ids(tid)] = label

    rt_thr = _np(acc.rt["thr"], np.int64)
    rt = {"start_ns": times(acc.rt["s"]), "end_ns": times(acc.rt["e"]),
          "global_tid": t_gtid[rt_thr] if len(rt_thr) else np.zeros(0, np.int64),
          "correlation_id": _np(acc.rt["corr"], np.int64), "name_id": _np(acc.rt["name"], np.int64),
          "event_class": _np(acc.rt["drv"], np.int64)}
    h_thr = _np(acc.host["thr"], np.int64)
    host = {"start_ns": times(acc.host["s"]), "end_ns": times(acc.host["e"]),
            "global_tid": t_gtid[h_thr] if len(h_thr) else np.zeros(0, np.int64),
            "name_id": _np(acc.host["name"], np.int32), "dom": _np(acc.host["dom"], np.int8)}
    del h_thr
    gpu = {}
    for kind, key in ((K_KERNEL, "kernels"), (K_MEMCPY, "memcpy"), (K_MEMSET, "memset"), (K_SYNC, "sync")):
        t = acc.gpu[kind]
        gpu[key] = {"start_ns": times(t["s"]), "end_ns": times(t["e"]), "device_id": _np(t["dev"], np.int64),
                    "context_id": _np(t["ctx"], np.int64), "stream_id": _np(t["st"], np.int64),
                    "correlation_id": _np(t["corr"], np.int64), "name_id": _np(t["name"], np.int32),
                    "bytes": _np(t["bytes"], np.int64)}
        if kind == K_KERNEL:
            gpu[key]["launch"] = _np(t["launch"], np.int32)

    # ---- launch -> GPU join: ``correlation`` args, else the ac2g flow events ---------------------
    _flow_correlations(acc, rt, rt_thr, gpu, times)
    del rt_thr

    # ---- validation (the SQLite reader's row checks) --------------------------------------
    rt = F.validate(rt, TABLE_NAMES[K_RUNTIME], span_duration, drops)
    host = F.validate(host, TABLE_NAMES[K_HOST], span_duration, drops)
    for kind, key in ((K_KERNEL, "kernels"), (K_MEMCPY, "memcpy"), (K_MEMSET, "memset"), (K_SYNC, "sync")):
        gpu[key] = F.validate(gpu[key], TABLE_NAMES[kind], span_duration, drops)
    rt = _sorted_by_start(rt)
    host = _sorted_by_start(host)
    gpu = {k: _sorted_by_start(v) for k, v in gpu.items()}

    # ---- processes: the launching process of each GPU row (by correlation), else the main one --
    rt_pkey = rt["global_tid"] & S.PROCESS_MASK
    if len(rt_pkey):
        keys, counts = np.unique(rt_pkey, return_counts=True)
        main = int(keys[np.argmax(counts)])
    elif len(host["global_tid"]):
        keys, counts = np.unique(host["global_tid"] & S.PROCESS_MASK, return_counts=True)
        main = int(keys[np.argmax(counts)])
    else:
        main = 0
    ok = rt["correlation_id"] > 0
    rc, rp = rt["correlation_id"][ok], rt_pkey[ok]
    order = np.argsort(rc, kind="stable")
    rc, rp = rc[order], rp[order]
    for d in gpu.values():
        c = d["correlation_id"]
        gp = np.full(len(c), main, dtype=np.int64)
        if len(rc) and len(c):
            pos = np.clip(np.searchsorted(rc, c), 0, len(rc) - 1)
            hit = (rc[pos] == c) & (c > 0)
            gp[hit] = rp[pos[hit]]
        d["global_pid"] = gp
    all_keys = np.unique(np.concatenate([F.unique_ints(rt_pkey)] + [F.unique_ints(d["global_pid"]) for d in gpu.values()]))
    pid_name = {}
    for pid, label in acc.proc_names.items():
        pid_name.setdefault(ids(pid) << S.PID_SHIFT, label)
    processes = Columns({"global_pid": all_keys, "pid": S.decode_pid(all_keys),
                         "name": np.array([pid_name.get(int(k), "") for k in all_keys], dtype=object)})

    # ---- devices: those that ran GPU work, named from deviceProperties ------------------------
    props = {}
    for p in meta.get("deviceProperties") or []:
        if isinstance(p, dict) and p.get("id").__class__ is int:
            props[p["id"]] = p
    dev_ids = np.unique(np.concatenate([F.unique_ints(d["device_id"]) for d in gpu.values()]))

    def prop(d, key, ok):
        v = props.get(int(d), {}).get(key)
        return v if ok(v) else None

    def limit(d, col):
        pos = lambda v: v.__class__ is int and 0 < v < _I32  # noqa: E731
        if col == "max_warps_per_sm":
            threads, warp = prop(d, "maxThreadsPerMultiprocessor", pos), prop(d, "warpSize", pos)
            return threads // warp if threads and warp else None
        src = {"regs_per_sm": "regsPerMultiprocessor", "smem_per_sm": "sharedMemPerMultiprocessor",
               "smem_per_block_optin": "sharedMemPerBlockOptin"}.get(col)
        return prop(d, src, pos) if src else None

    def cc(d):
        # AMD GPUs (ROCm: warp size 64) give their gfx version (MI300X: 9.4), no CUDA compute capability
        if prop(d, "warpSize", lambda v: v == 64) is not None:
            return None
        major = prop(d, "computeMajor", lambda v: v.__class__ is int and 0 < v < 100)
        minor = prop(d, "computeMinor", lambda v: v.__class__ is int and 0 <= v < 100)
        return float(f"{major}.{minor or 0}") if major is not None else None

    devices = Columns({
        "device": np.arange(len(dev_ids), dtype=np.int32), "host": np.zeros(len(dev_ids), dtype=np.int64),
        "device_id": dev_ids.astype(np.int64), "label": np.array([str(int(d)) for d in dev_ids], dtype=object),
        "name": np.array([F.cap(prop(d, "name", lambda v: isinstance(v, str)) or "") for d in dev_ids], dtype=object),
        "sm_count": [prop(d, "numSms", lambda v: v.__class__ is int and v > 0) for d in dev_ids],
        "compute_capability": [cc(d) for d in dev_ids],
        # per-SM limits for the occupancy calculator (maxBlocksPerSm is not recorded: from the
        # compute capability)
        **{c: [limit(d, c) for d in dev_ids] for c in S.GPU_LIMIT_COLUMNS},
    })

    # ---- names: kernel short names, copy and memset kinds ------------------------------------
    short_of: dict[int, int] = {}
    for nid in np.unique(gpu["kernels"]["name_id"]).tolist():
        short = F.cap(short_kernel_name(names[nid]))
        sid = acc.names.get(short)
        if sid is None:
            sid = acc.names[short] = len(acc.names)
            names.append(short)
        short_of[nid] = sid
    if names and max(map(len, names)) > F.MAX_STRING_CHARS:
        names = [F.cap(x) for x in names]
    strings = StringTable(np.arange(len(names), dtype=np.int64), np.array(names, dtype=object))

    out: dict = {}
    for key, d in gpu.items():
        nid = d.pop("name_id")
        nbytes = d.pop("bytes")
        d["device"] = np.searchsorted(dev_ids, d["device_id"]).astype(np.int32)
        d["proc"] = np.searchsorted(all_keys, d.pop("global_pid") & S.PROCESS_MASK).astype(np.int32)
        uniq = np.unique(nid)
        if key == "kernels":
            lut = np.array([short_of.get(int(i), int(i)) for i in uniq], dtype=np.int64)
            d["name_id"] = nid
            d["short_id"] = lut[np.searchsorted(uniq, nid)] if len(nid) else np.zeros(0, np.int64)
        elif key == "memcpy":
            kinds = np.array([_copy_kinds(names[int(i)]) for i in uniq], dtype=np.int64).reshape(-1, 3)
            pos = np.searchsorted(uniq, nid)
            d["bytes"] = nbytes
            d["copy_kind"], d["src_kind"], d["dst_kind"] = (kinds[pos, j] if len(nid) else np.zeros(0, np.int64)
                                                           for j in range(3))
            host_kind = np.full(len(nid), -1, dtype=np.int8)
            h2d, d2h = d["copy_kind"] == S.COPY_HTOD, d["copy_kind"] == S.COPY_DTOH
            host_kind[h2d] = d["src_kind"][h2d]
            host_kind[d2h] = d["dst_kind"][d2h]
            d["host_kind"] = host_kind
        elif key == "memset":
            mk = np.array([_memset_kind(names[int(i)]) for i in uniq], dtype=np.int64)
            d["bytes"] = nbytes
            d["mem_kind"] = mk[np.searchsorted(uniq, nid)] if len(nid) else np.zeros(0, np.int64)
        else:
            st = np.array([_sync_type(names[int(i)]) for i in uniq], dtype=np.int64)
            d["sync_type"] = st[np.searchsorted(uniq, nid)] if len(nid) else np.zeros(0, np.int64)
        out[key] = F.column_table(d, S.DTYPES)
    F.assign_streams(out, ["kernels", "memcpy", "memset", "sync"])

    # ---- host tables ------------------------------------------------------------------------
    tids = np.unique(np.concatenate([F.unique_ints(rt["global_tid"]), F.unique_ints(host["global_tid"])]))
    rt["api_kind"] = F.api_kind_codes(strings)(rt["name_id"]).astype(np.int8) if len(rt["name_id"]) \
        else np.zeros(0, np.int8)
    rt["proc"] = np.searchsorted(all_keys, rt["global_tid"] & S.PROCESS_MASK).astype(np.int32)
    rt["thread"] = np.searchsorted(tids, rt.pop("global_tid")).astype(np.int32)
    out["runtime"] = F.column_table(rt, S.DTYPES)
    text = strings.values[host["name_id"]] if len(host["name_id"]) else np.zeros(0, dtype=object)
    # PyTorch's per-call fields (a 2021 trace's ", stack = "), read once per distinct name
    # (names in order of first appearance: the group codes a per-row pass would give)
    inv, used = factorize(np.asarray(host["name_id"], dtype=np.int64))
    groups = Groups()
    grp, seq, flags = _text_facts_blocks([v if isinstance(v, str) else "" for v in strings.values[used].tolist()],
                                         groups)
    nvtx_facts = ({"text_group": grp[inv], "seq": seq[inv], "call_flags": flags[inv]}, groups.texts)
    # the host ranges' texts are in their own column now (``text``): the string table keeps the
    # names an id column still holds (kernels, their short names, CUDA calls), at their ids. A
    # PyTorch 2 trace's operator texts are each distinct by their ``seq = N``: 400 k Python
    # strings, 50 MB at 400 k launches, that no look-up would ask for (issue 50)
    strings = _referenced(strings, [out["kernels"]["name_id"], out["kernels"]["short_id"], rt["name_id"]])
    domain = np.array(_DOMAINS, dtype=object)[host["dom"]] if len(host["dom"]) else np.zeros(0, dtype=object)
    out["nvtx"] = Columns({
        "start_ns": host["start_ns"], "end_ns": host["end_ns"],
        "event_type": np.full(len(host["start_ns"]), S.NVTX_PUSHPOP, dtype=np.int64),
        "global_tid": host["global_tid"], "text": text, "domain": domain,
        "thread": np.searchsorted(tids, host["global_tid"]).astype(np.int32)})
    out["osrt"] = Columns({"start_ns": np.zeros(0, np.int64), "end_ns": np.zeros(0, np.int64),
                                "global_tid": np.zeros(0, np.int64), "name_id": np.zeros(0, np.int32),
                                "is_wait": np.zeros(0, dtype=bool), "thread": np.zeros(0, np.int32)})
    out["threads"] = F.threads_table(tids, {k: v for k, v in thread_names.items()})
    out["processes"] = processes
    out["devices"] = devices
    out["gpu_metrics"] = Columns({"timestamp_ns": np.zeros(0, np.int64), "device_id": np.zeros(0, np.int64),
                                  "metric": np.zeros(0, object), "value": np.zeros(0, np.float64)})
    out["diagnostics"] = Columns({"timestamp_ns": [], "severity": [], "text": []})
    out["memory"], out["device_memory"] = _memory_frames(acc, t_gtid, times, props, drops)
    ov = [(s - shift, e - shift, name) for s, e, name in acc.overhead if s <= e]
    out["overhead"] = Columns({"start_ns": np.array([o[0] for o in ov], dtype=np.int64),
                               "end_ns": np.array([o[1] for o in ov], dtype=np.int64),
                               "global_tid": np.zeros(len(ov), dtype=np.int64),
                               "name": np.array([o[2] for o in ov], dtype=object)})
    for key, cols in F.FRAME_COLUMNS.items():
        if tuple(out[key].columns) != cols:
            out[key] = out[key].select(cols)

    # ---- what was recorded --------------------------------------------------------------------
    counts = {k: len(out[k]) for k in ("kernels", "memcpy", "memset", "runtime", "sync", "nvtx")}
    traced = {k: False for k in S.TRACE_TYPES}
    traced.update({"cuda_api": counts["runtime"] > 0, "cuda_kernels": counts["kernels"] > 0,
                   "cuda_memcpy": counts["memcpy"] > 0, "cuda_memset": counts["memset"] > 0,
                   "cuda_sync": counts["sync"] > 0, "nvtx": counts["nvtx"] > 0})
    not_recorded = {k: v for k, v in NOT_RECORDED.items() if not traced[k]}
    ends = [int(out[k]["end_ns"].max()) for k in ("kernels", "memcpy", "memset", "runtime", "nvtx") if counts[k]]
    begins = [int(out[k]["start_ns"].min()) for k in ("kernels", "memcpy", "memset", "runtime", "nvtx") if counts[k]]
    duration = span_duration if span_duration is not None else (max(ends) - min(begins) if ends else None)
    # the instant trace viewers (Perfetto, chrome://tracing, TensorBoard's trace view) show as 0:
    # the profiler's span starts first (Kineto writes it at the profiler's start), else the first event
    viewer_origin = min(s for s, _ in spans) if spans else (min(begins) if begins else None)
    dist = meta.get("distributedInfo")
    distributed = None
    if isinstance(dist, dict):
        rank, world = dist.get("rank"), dist.get("world_size")
        backend = dist.get("backend")
        distributed = {"rank": _small_int(rank, 0, 1 << 24, None),
                       "world_size": _small_int(world, 1, 1 << 24, None),
                       "backend": F.cap(backend)[:64] if isinstance(backend, str) else None}
        if distributed["rank"] is None:
            distributed = None
    schema = meta.get("schemaVersion")
    info = {"schema_version": None if schema is None or isinstance(schema, (dict, list)) else str(schema)[:32],
            "duration_ns": duration, "session_start_utc_ns": session_start, "traced": traced,
            "clock": "absolute" if shift else "session",
            "viewer_origin_ns": viewer_origin,
            "not_recorded": not_recorded, "distributed": distributed,
            "tables": sorted({TABLE_NAMES[k] for k in acc.kinds if k in TABLE_NAMES})}
    items = sorted(acc.launch_codes.items(), key=lambda kv: kv[1])
    launch = F.launch_arrays([k for (k, _), _c in items], [e for (_, e), _c in items])
    return {"frames": out, "strings": strings, "info": info, "n_names": n_names, "launch": launch,
            "nvtx_facts": nvtx_facts}


def _referenced(strings: StringTable, id_columns: list) -> StringTable:
    """``strings`` with only the ids some column of ``id_columns`` holds (ids kept as they are)."""
    n = len(strings)
    used = np.zeros(n, dtype=bool)
    for c in id_columns:
        c = np.asarray(c, dtype=np.int64)
        used[c[(c >= 0) & (c < n)]] = True
    if used.all():
        return strings
    keep = np.flatnonzero(used)
    return StringTable(strings.ids[keep], strings.values[keep])


#: distinct texts per :func:`~nsysdoc.trace.nvtx_text.text_facts` call (issue 50): its Arrow string
#: kernels' temporaries grow with the texts it is given (+175 MB at once for a trace's 400 k
#: distinct operator texts, each unique by its ``seq = N``; the SQLite reader gives it a block too)
FACTS_BLOCK = 1 << 16


def _text_facts_blocks(values: list, groups: Groups) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~nsysdoc.trace.nvtx_text.text_facts` of ``values``, :data:`FACTS_BLOCK` texts at a
    time: the same (text group code, seq, call flags), since groups are coded in order of first
    appearance block after block, which is their order of first appearance in ``values``."""
    if len(values) <= FACTS_BLOCK:
        return text_facts(values, groups)
    parts = [text_facts(values[i:i + FACTS_BLOCK], groups) for i in range(0, len(values), FACTS_BLOCK)]
    return tuple(np.concatenate([p[j] for p in parts]) for j in range(3))


#: why a timed ``[memory]`` event made no row
MEMORY_DROP_REASON = "Bytes missing, not an integer or beyond 2^62"


def _memory_frames(acc: _Acc, t_gtid: np.ndarray, times, props: dict, drops: F.Drops) -> tuple[Columns, Columns]:
    """The ``memory`` table (``[memory]`` events in time order; rows without a time or a byte
    count dropped) and ``device_memory`` (``deviceProperties[].totalGlobalMem`` per device id)."""
    m = acc.mem
    d = {"timestamp_ns": times(m["s"]), "device_type": _np(m["dtype"], np.int64),
         "device_id": _np(m["dev"], np.int64), "bytes": _np(m["bytes"], np.int64),
         "total_allocated_bytes": _np(m["alloc"], np.int64), "total_reserved_bytes": _np(m["resv"], np.int64),
         "global_tid": t_gtid[_np(m["thr"], np.int64)] if len(m["thr"]) else np.zeros(0, np.int64),
         "address": _np(m["addr"], np.int64)}
    timed = d["timestamp_ns"] != BAD
    ok = timed & (d["bytes"] != BAD)
    drops.add(MEMORY_EVENT, F.DROP_REASONS[0], int((~timed).sum()))
    drops.add(MEMORY_EVENT, MEMORY_DROP_REASON, int((timed & ~ok).sum()))
    if not ok.all():
        d = {k: v[ok] for k, v in d.items()}
    order = np.argsort(d["timestamp_ns"], kind="stable")
    mem = Columns({c: d[c][order] for c in F.FRAME_COLUMNS["memory"]})
    ids = sorted(i for i, p in props.items() if 0 <= i < 65536)
    total = [props[i].get("totalGlobalMem") for i in ids]
    keep = [j for j, v in enumerate(total) if v.__class__ is int and 0 < v < _LIM]
    dm = Columns({"device_id": np.array([ids[j] for j in keep], dtype=np.int64),
                  "total_bytes": np.array([total[j] for j in keep], dtype=np.int64)})
    return mem, dm


def _flow_correlations(acc: _Acc, rt: dict, rt_thr: np.ndarray, gpu: dict, times) -> None:
    """Rows without a ``correlation`` arg get the id of the ``ac2g`` flow bound to them: a flow
    start on the launching call's thread at its ``ts``, a flow end on the GPU row's device and
    stream at its ``ts`` (Kineto's flow id is the correlation id)."""
    fs, ff = acc.flow_s, acc.flow_f
    need_rt = bool(len(rt["correlation_id"]) and (rt["correlation_id"] == 0).any())
    need_gpu = any(len(d["correlation_id"]) and (d["correlation_id"] == 0).any() for d in gpu.values())
    if need_rt and len(fs["id"]):
        _fill_from_flows(rt["correlation_id"], rt_thr, rt["start_ns"],
                         _np(fs["thr"], np.int64), times(fs["ts"]), _np(fs["id"], np.int64))
    if need_gpu and len(ff["id"]):
        fkey = (_np(ff["dev"], np.int64) << 32) | (_np(ff["st"], np.int64) & 0xFFFFFFFF)
        fts, fid = times(ff["ts"]), _np(ff["id"], np.int64)
        for d in gpu.values():
            if len(d["correlation_id"]) and (d["correlation_id"] == 0).any():
                key = (np.where(d["device_id"] == BAD, -1, d["device_id"]) << 32) | (d["stream_id"] & 0xFFFFFFFF)
                _fill_from_flows(d["correlation_id"], key, d["start_ns"], fkey, fts, fid)
    acc.flow_s = acc.flow_f = None  # type: ignore[assignment]


def _fill_from_flows(corr: np.ndarray, key: np.ndarray, ts: np.ndarray, fkey: np.ndarray, fts: np.ndarray,
                     fid: np.ndarray) -> None:
    """Set ``corr`` of each row holding 0 to the id of the flow with the row's (``key``, ``ts``):
    of several such flows, the last one listed. One sort of the flows and the rows together (each
    row after the flows of its pair), no pandas."""
    miss = np.flatnonzero(corr == 0)
    nf = len(fkey)
    if not len(miss) or not nf:
        return
    k = np.concatenate([np.asarray(fkey, np.int64), np.asarray(key, np.int64)[miss]])
    t = np.concatenate([np.asarray(fts, np.int64), np.asarray(ts, np.int64)[miss]])
    is_row = np.arange(len(k)) >= nf
    order = np.lexsort((is_row, t, k))  # by pair, its flows (in listed order: stable) before its rows
    k, t, is_row = k[order], t[order], is_row[order]
    # the last flow at or before each position, and whether it has that position's pair
    last = np.maximum.accumulate(np.where(is_row, -1, np.arange(len(k))))
    j = np.flatnonzero(is_row)
    f = last[j]
    hit = f >= 0
    j, f = j[hit], f[hit]
    same = (k[f] == k[j]) & (t[f] == t[j])
    j, f = j[same], f[same]
    corr[miss[order[j] - nf]] = np.asarray(fid)[order[f]]


# --------------------------------------------------------------------------------------------
