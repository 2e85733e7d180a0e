"""What a time slice reads from a trace's store: GPU operations (with their launching calls) and
host rows. The only module of the engine that knows the store's table and column names."""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..metrics.ops import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET
from ..trace import schema as S
from ..trace.rows import env_rows  # noqa: F401 - re-exported (the readers size blocks with it too)


#: The GPU tables, in the order their rows make up the operation list (kernels, copies, memsets).
GPU_KINDS = ((KIND_KERNEL, "kernels"), (KIND_MEMCPY, "memcpy"), (KIND_MEMSET, "memset"))
_BASE = ["start_ns", "end_ns", "device", "proc", "stream", "api", "api_start_ns", "api_end_ns",
         "api_thread", "api_kind", "pos"]
_EXTRA = {"kernels": ["name_id", "short_id", "launch"], "memcpy": ["bytes", "copy_kind", "host_kind"],
          "memset": ["bytes"]}
#: Sentinels for unbounded slice edges (every real time is far inside them).
NEG = -(1 << 62)
POS = 1 << 62


@dataclass
class Ops:
    """GPU operations of a slice (aligned arrays), the interface :mod:`nsysdoc.metrics.gpu` uses:
    the launching call's start, end and thread are gathered per operation."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    device: np.ndarray
    kind: np.ndarray
    is_nccl: np.ndarray
    proc: np.ndarray
    stream: np.ndarray
    row: np.ndarray           # row in its own table (global position)
    api: np.ndarray           # runtime row of the launching call (global position), -1 if unknown
    api_start_ns: np.ndarray
    api_end: np.ndarray
    api_thread: np.ndarray    # thread index of the launching call, -1 if unknown
    api_kind: np.ndarray
    name_id: np.ndarray       # kernels: demangled name id (else -1)
    short_id: np.ndarray
    launch: np.ndarray        # kernels: launch configuration code (``trace.derived["launch_keys"]``; else -1)
    nbytes: np.ndarray
    copy_kind: np.ndarray     # memcpy: copyKind (else -1)
    host_kind: np.ndarray     # memcpy: host memory kind (else -1)
    owned: np.ndarray         # starts in this slice (else: still running from an earlier slice)
    step: np.ndarray          # step id (-1)
    flags: np.ndarray         # bit flags (see FLAG_*), fixed when the op is first read
    thread_gtid: np.ndarray   # global_tid of each thread index

    def __len__(self) -> int:
        return len(self.start_ns)

    def api_end_ns(self, idx=None) -> np.ndarray:
        return self.api_end if idx is None else self.api_end[idx]

    def api_tid(self, idx=None) -> np.ndarray:
        """Launching thread's global_tid (0 if unknown)."""
        thread = self.api_thread if idx is None else self.api_thread[idx]
        if len(self.thread_gtid) == 0:
            return np.zeros(len(thread), dtype=np.int64)
        return np.where(thread >= 0, self.thread_gtid[np.maximum(thread, 0)], 0)

    def take(self, idx) -> "Ops":
        vals = {}
        for f in fields(self):
            v = getattr(self, f.name)
            vals[f.name] = v if f.name == "thread_gtid" else v[idx]
        return Ops(**vals)

    @staticmethod
    def concat(parts: list["Ops"]) -> "Ops":
        parts = [p for p in parts if p is not None]
        vals = {}
        for f in fields(Ops):
            if f.name == "thread_gtid":
                vals[f.name] = parts[0].thread_gtid
            else:
                vals[f.name] = np.concatenate([getattr(p, f.name) for p in parts])
        return Ops(**vals)


#: Op flags (bits of ``Ops.flags``): computed once per operation when its slice reads it.
FLAG_IN_WINDOW = 1       # starts inside the analysis window (as :func:`in_window` defines it)
FLAG_PAGEABLE = 2        # a host<->device copy from/to pageable memory
FLAG_DTOH = 4            # a device-to-host copy of more than SCALAR_READ_MAX_BYTES
FLAG_FP32 = 8            # an FP32 GEMM/convolution kernel that is not an autotuning candidate
FLAG_SCALAR = 16         # a scalar read (.item())
FLAG_TUNING = 32         # launched inside a compile/autotune/warm-up NVTX range
FLAG_UNDERFILLED = 64    # a kernel with fewer blocks than its GPU has SMs (not NCCL, not autotuning)
FLAG_LOW_OCC = 128       # a kernel whose theoretical occupancy leaves a warp scheduler idle (likewise)


def read_ops(trace, t0: int, t1: int, nccl_flag) -> Ops:
    """GPU operations starting in ``[t0, t1)``: kernels, then copies, then memsets, each in table
    order; launching calls gathered from the runtime table."""
    store = trace.store
    thread_gtid = np.asarray(trace.threads["global_tid"], dtype=np.int64)
    parts = []
    for kind, name in GPU_KINDS:
        t = store.get(name)
        if t is None or not len(t):
            continue
        d = t.rows_starting_in(None if t0 <= NEG else t0, None if t1 >= POS else t1, _BASE + _EXTRA[name])
        n = len(d["start_ns"])
        if n == 0:
            continue
        neg = np.full(n, -1, dtype=np.int32)
        nid = d.get("name_id", neg)
        sid = d.get("short_id", neg)
        lau = d.get("launch", neg)
        parts.append(dict(
            start_ns=d["start_ns"].astype(np.int64, copy=False), end_ns=d["end_ns"].astype(np.int64, copy=False),
            device=d["device"].astype(np.int32, copy=False), kind=np.full(n, kind, dtype=np.int8),
            is_nccl=(nccl_flag(sid) | nccl_flag(nid)) if kind == KIND_KERNEL else np.zeros(n, dtype=bool),
            proc=d["proc"].astype(np.int32, copy=False), stream=d["stream"].astype(np.int32, copy=False), row=d["pos"],
            api=d["api"], api_start_ns=d["api_start_ns"], api_end=d["api_end_ns"], api_thread=d["api_thread"],
            api_kind=d["api_kind"],
            name_id=nid.astype(np.int32, copy=False), short_id=sid.astype(np.int32, copy=False),
            launch=lau.astype(np.int32, copy=False),
            nbytes=d.get("bytes", np.zeros(n, np.int64)).astype(np.int64, copy=False),
            copy_kind=d.get("copy_kind", np.full(n, -1, np.int8)).astype(np.int8, copy=False),
            host_kind=d.get("host_kind", np.full(n, -1, np.int8)).astype(np.int8, copy=False)))
    if not parts:
        z64 = np.zeros(0, np.int64)
        i32 = np.zeros(0, np.int32)
        return Ops(start_ns=z64, end_ns=z64, device=i32, kind=np.zeros(0, np.int8), is_nccl=np.zeros(0, bool),
                   proc=i32, stream=i32, row=z64, api=z64, api_start_ns=z64, api_end=z64, api_thread=i32,
                   api_kind=np.zeros(0, np.int8), name_id=i32, short_id=i32, launch=i32, nbytes=z64,
                   copy_kind=np.zeros(0, np.int8), host_kind=np.zeros(0, np.int8), owned=np.zeros(0, bool), step=z64,
                   flags=np.zeros(0, np.int16), thread_gtid=thread_gtid)
    cols = {k: np.concatenate([p[k] for p in parts]) if len(parts) > 1 else parts[0][k] for k in parts[0]}
    n = len(cols["start_ns"])
    return Ops(owned=np.ones(n, dtype=bool), step=np.full(n, -1, dtype=np.int64), flags=np.zeros(n, dtype=np.int16),
               thread_gtid=thread_gtid, **cols)


RT_COLS = ["start_ns", "end_ns", "thread", "api_kind", "name_id", "pos"]


def runtime_rows(trace, lo: int, hi: int) -> dict[str, np.ndarray]:
    """CUDA API rows with ``start < hi`` and ``end > lo`` (``end >= lo`` for zero-length calls at
    ``lo``), table order, with their global position."""
    t = trace.store.get("runtime")
    if t is None:
        return {c: np.zeros(0, np.int64) for c in RT_COLS}
    return t.rows_overlapping(lo, hi, RT_COLS, touching=True)


def osrt_rows(trace, lo: int, hi: int) -> dict[str, np.ndarray]:
    t = trace.store.get("osrt")
    cols = ["start_ns", "end_ns", "thread", "is_wait", "name_id"]
    if t is None:
        return {c: np.zeros(0, np.int64) for c in cols}
    return t.rows_overlapping(lo, hi, cols, touching=True)


#: a text column is cut into at most this many runs of rows before the store's own row filter is
#: used instead (runs: one slice each)
_TEXT_RUNS_MAX = 2_000


def rows_overlapping_text(table, lo: int, hi: int, cols: list[str], text: str = "text") -> dict:
    """``table.rows_overlapping(lo, hi, cols)`` with the text column ``text`` given as an object
    array of str: the matching rows of each block are cut from it as runs of consecutive rows
    (slices; a window's rows are mostly one run), never through a row filter of the text
    column, which for an Arrow column loads Arrow's compute module (0.07-0.09 s of a cached
    report: issue 50). More runs than ``_TEXT_RUNS_MAX``: the store's own filter."""
    from ..trace.store import to_text

    blocks = table.blocks_where(start_hi=hi, end_gt=lo)
    if not blocks:
        d = table.rows_overlapping(lo, hi, cols)
        d[text] = to_text(d[text])
        return d
    plain = [c for c in cols if c != text]
    extra = [c for c in ("start_ns", table.end_col) if c not in cols]
    parts = []
    for i in blocks:
        d = table.read_block(i, plain + [text] + extra)
        idx = np.flatnonzero((d["start_ns"] < hi) & (d[table.end_col] > lo))
        cuts = np.flatnonzero(np.diff(idx) != 1) + 1
        if len(cuts) >= _TEXT_RUNS_MAX:
            d = table.rows_overlapping(lo, hi, cols)
            d[text] = to_text(d[text])
            return d
        runs = np.split(idx, cuts) if len(idx) else []
        part = {c: d[c][idx] for c in plain}
        part[text] = np.concatenate([to_text(d[text][int(r[0]):int(r[-1]) + 1]) for r in runs]) if runs \
            else np.zeros(0, dtype=object)
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    return {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}


def blocking_of(rt: dict, pageable_api: np.ndarray) -> np.ndarray:
    """Which CUDA API rows block the host (definition: ``nsysdoc.metrics.host``): sync kinds,
    and async copies from pageable memory (positions found while loading)."""
    kind = rt["api_kind"]
    out = np.isin(kind, (S.API_SYNC, S.API_SYNC_COPY, S.API_SYNC_MEMSET))
    if len(pageable_api) and len(kind):
        out |= in_sorted(pageable_api, rt["pos"])
    return out


def in_sorted(sorted_values: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.isin(x, sorted_values)`` for a sorted, unique ``sorted_values``."""
    if not len(sorted_values) or not len(x):
        return np.zeros(len(x), dtype=bool)
    i = np.minimum(np.searchsorted(sorted_values, x), len(sorted_values) - 1)
    return sorted_values[i] == x


def in_window(start_ns: np.ndarray, end_ns: np.ndarray, w0, w1) -> np.ndarray:
    """The analysis window's operations: those that start inside ``[w0, w1)``, plus those starting
    exactly at ``w1`` when the window is empty, and zero-length operations at ``w1``."""
    if w0 is None or w1 is None:
        return np.zeros(len(start_ns), dtype=bool)
    if w1 == w0:
        return start_ns == w0
    inside = (start_ns >= w0) & (start_ns < w1)
    inside |= (start_ns == w1) & (end_ns == w1)
    return inside
