"""Host-side metrics: blocking synchronisation, scalar reads (``.item()``) and the launch path.

Definitions (``docs/glossary.md``):

* **Blocking sync call**: ``cudaDeviceSynchronize``, ``cudaStreamSynchronize``,
  ``cudaEventSynchronize`` (and driver/legacy equivalents), synchronous ``cudaMemcpy*`` /
  ``cudaMemset*`` (no ``Async`` in the name), and ``cudaMemcpy*Async`` calls whose host side is
  pageable memory (kind 0), which the driver makes synchronous. ``cudaStreamWaitEvent``,
  ``cudaEventQuery``/``cudaStreamQuery`` and ``cudaEventRecord`` never block the host.
* **Host sync time** of a thread = length of the union of its blocking sync calls (inside the
  window). Threads are never summed into a share of wall time.
* **Scalar read** (``.item()``): a device-to-host copy of at most 16 bytes whose API call is itself
  synchronous, or is followed on the same thread by a blocking sync call with no other CUDA call
  in between.
* **Launch API time** = API end − API start of the call that launched a kernel; **queue delay** =
  kernel start − API end, floored at 0 (the kernel may start before its launch call returns).
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from ..trace import schema as S
from ..trace.schema import (API_ALLOC, API_ASYNC_COPY, API_LAUNCH, API_SETUP, API_SYNC, API_SYNC_COPY,
                            API_SYNC_MEMSET)
from . import intervals as iv
from .gpu import (LV_ALLOC, LV_API, LV_INPUT_NVTX, LV_LAUNCH, LV_SETUP_API, LV_SETUP_NVTX, LV_SYNC, LV_WAIT,
                  SETUP_LAUNCH_MIN_NS, HostActivity)
from .ops import KIND_KERNEL, KIND_MEMCPY, GpuOps

SCALAR_READ_MAX_BYTES = 16


def blocking_api_mask(runtime: pd.DataFrame, memcpy: pd.DataFrame, ops: GpuOps) -> np.ndarray:
    """Which runtime rows block the host (see module docstring)."""
    kind = runtime["api_kind"].to_numpy()
    blocking = np.isin(kind, (API_SYNC, API_SYNC_COPY, API_SYNC_MEMSET))
    if len(memcpy) and len(ops):
        m = (ops.kind == KIND_MEMCPY) & (ops.api >= 0)
        host_kind = memcpy["host_kind"].to_numpy()[ops.row[m]]
        pageable = host_kind == S.MEM_PAGEABLE
        rows = ops.api[m][pageable]
        rows = rows[kind[rows] == API_ASYNC_COPY]
        blocking[rows] = True
    return blocking


def setup_launch_mask(runtime: pd.DataFrame, strings, ops: GpuOps, kernel_name_id: np.ndarray) -> np.ndarray:
    """Kernel/graph launch calls that are set-up work: at least ``SETUP_LAUNCH_MIN_NS`` long and the
    *first* launch of one of the kernels they launch in their process (CUDA lazy loading and JIT
    happen on a kernel's first launch). A later launch that long is back-pressure (a full launch
    queue, possibly of another GPU the thread also feeds): ordinary launch time. A long launch whose
    kernels are unknown counts as set-up."""
    kind = runtime["api_kind"].to_numpy()
    out = np.zeros(len(kind), dtype=bool)
    if not len(kind):
        return out
    dur = runtime["end_ns"].to_numpy(np.int64) - runtime["start_ns"].to_numpy(np.int64)
    cand = (kind == API_LAUNCH) & (dur >= SETUP_LAUNCH_MIN_NS)
    if not cand.any():
        return out
    is_kernel_launch = strings.flags(lambda v: S.KERNEL_LAUNCH_APIS.match(S.strip_api_suffix(v)) is not None)
    cand &= is_kernel_launch(runtime["name_id"].to_numpy())
    if not cand.any():
        return out
    k = np.flatnonzero((ops.kind == KIND_KERNEL) & (ops.api >= 0))
    rows = ops.api[k].astype(np.int64)
    key = (ops.proc[k].astype(np.int64) << 32) | kernel_name_id[ops.row[k]].astype(np.int64)
    mine = cand[rows]                       # kernels launched by candidate calls
    out[cand] = True                        # unknown kernels: set-up
    if not mine.any():
        return out
    out[np.unique(rows[mine])] = False      # known kernels: only a first launch is set-up
    keys = np.unique(key[mine])
    rel = np.isin(key, keys)                # every launch of those kernels, to find the first one
    df = pd.DataFrame({"key": key[rel], "start": ops.api_start_ns[k][rel], "row": rows[rel]})
    first = df.loc[df.groupby("key")["start"].idxmin(), "row"].to_numpy()
    first = first[cand[first]]
    out[first] = True
    return out


def runtime_levels(runtime: pd.DataFrame, blocking: np.ndarray, setup_launch: np.ndarray | None = None) -> np.ndarray:
    """Painting level of each CUDA API row (see :func:`nsysdoc.metrics.gpu.classify_gaps`);
    ``setup_launch`` marks the launch calls that are set-up work (:func:`setup_launch_mask`)."""
    return levels_of(np.asarray(runtime["api_kind"]), blocking, setup_launch)


def levels_of(kind: np.ndarray, blocking: np.ndarray, setup_launch: np.ndarray | None = None) -> np.ndarray:
    """:func:`runtime_levels` from the rows' ``api_kind`` codes."""
    level = np.full(len(kind), LV_API, dtype=np.int8)
    level[np.isin(kind, (API_LAUNCH, API_ASYNC_COPY))] = LV_LAUNCH
    level[kind == API_ALLOC] = LV_ALLOC
    level[kind == API_SETUP] = LV_SETUP_API
    if setup_launch is not None and len(setup_launch):
        level[setup_launch] = LV_SETUP_API
    level[blocking] = LV_SYNC
    return level


def _outside_cuda_calls(osrt, wait: np.ndarray, rt_thread, rs, re_) -> np.ndarray:
    """OS wait rows that are not mostly inside a CUDA call of the same thread: a futex or poll the
    driver makes inside cudaLaunchKernel or cudaStreamSynchronize is that call's time, not an input
    wait. Only the CUDA calls that overlap a wait are unioned."""
    idx = np.flatnonzero(wait)
    if not len(idx) or not len(rs):
        return wait
    ot = np.asarray(osrt["thread"])[idx]
    os_, oe = np.asarray(osrt["start_ns"], dtype=np.int64)[idx], np.asarray(osrt["end_ns"], dtype=np.int64)[idx]
    waits = iv.union(ot, os_, oe)
    near = np.flatnonzero(waits.covered(rt_thread, rs, re_) > 0)
    if not len(near):
        return wait
    calls = iv.union(rt_thread[near], rs[near], re_[near])
    inside = calls.covered(ot, os_, oe) * 2 > np.maximum(oe - os_, 1)
    out = wait.copy()
    out[idx[inside]] = False
    return out


def host_activity(runtime: pd.DataFrame, osrt: pd.DataFrame, nvtx: pd.DataFrame, blocking: np.ndarray,
                  thread_keys: np.ndarray, strings, setup_launch: np.ndarray | None = None) -> HostActivity:
    """Per-thread blocking-sync union, plus the painting sources: CUDA API rows (by class), OS
    waits, DataLoader NVTX ranges and compile/autotune/warm-up NVTX ranges. Tables carry a dense
    ``thread`` index into the sorted ``thread_keys``."""
    is_range = np.isin(nvtx["event_type"].to_numpy(), S.NVTX_RANGE_TYPES) & (nvtx["end_ns"].to_numpy() >= nvtx["start_ns"].to_numpy())
    texts = nvtx["text"].astype(object)
    uniq = pd.unique(texts[is_range])
    loader_texts = {t for t in uniq if isinstance(t, str) and S.DATALOADER_NVTX.search(t)}
    setup_texts = {t for t in uniq if isinstance(t, str) and S.SETUP_NVTX.search(t)} - loader_texts
    dl = is_range & texts.isin(loader_texts).to_numpy()
    st = is_range & texts.isin(setup_texts).to_numpy()
    rt_thread = runtime["thread"].to_numpy()
    rs, re_ = runtime["start_ns"].to_numpy(np.int64), runtime["end_ns"].to_numpy(np.int64)
    wait = osrt["is_wait"].to_numpy(bool)
    nv_thread = nvtx["thread"].to_numpy()
    nv_s = nvtx["start_ns"].to_numpy(np.int64)
    nv_e = nvtx["end_ns"].to_numpy(np.int64)
    h = host_activity_from(
        {"thread": rt_thread, "start_ns": rs, "end_ns": re_, "api_kind": runtime["api_kind"].to_numpy()}, blocking,
        {"thread": osrt["thread"].to_numpy(), "start_ns": osrt["start_ns"].to_numpy(np.int64),
         "end_ns": osrt["end_ns"].to_numpy(np.int64), "is_wait": wait},
        (nv_thread[dl], nv_s[dl], nv_e[dl]), (nv_thread[st], nv_s[st], nv_e[st]), thread_keys, setup_launch)
    h.setup_nvtx = st
    return h


def host_activity_from(rt: dict, blocking: np.ndarray, osrt: dict, loader_ranges: tuple, setup_ranges: tuple,
                       thread_keys: np.ndarray, setup_launch: np.ndarray | None = None) -> HostActivity:
    """:func:`host_activity` from arrays: CUDA API rows ``rt`` (thread, start_ns, end_ns,
    api_kind), OS runtime rows ``osrt`` (thread, start_ns, end_ns, is_wait), and the DataLoader
    and set-up NVTX ranges as ``(thread, start, end)`` arrays."""
    rt_thread = np.asarray(rt["thread"])
    rs, re_ = np.asarray(rt["start_ns"], dtype=np.int64), np.asarray(rt["end_ns"], dtype=np.int64)
    levels = levels_of(np.asarray(rt["api_kind"]), blocking, setup_launch)
    wait = _outside_cuda_calls(osrt, np.asarray(osrt["is_wait"], dtype=bool), rt_thread, rs, re_)
    ot = np.asarray(osrt["thread"])
    os_, oe = np.asarray(osrt["start_ns"], dtype=np.int64), np.asarray(osrt["end_ns"], dtype=np.int64)
    sources = [
        (levels, rt_thread, rs, re_),
        (LV_WAIT, ot[wait], os_[wait], oe[wait]),
        (LV_INPUT_NVTX, *loader_ranges),
        (LV_SETUP_NVTX, *setup_ranges),
    ]
    return HostActivity(
        thread_keys=np.asarray(thread_keys, dtype=np.int64),
        sync=iv.union(rt_thread[blocking], rs[blocking], re_[blocking]),
        sources=sources, runtime_level=levels, setup_nvtx=None,
    )


def setup_events(runtime: pd.DataFrame, nvtx: pd.DataFrame, host: HostActivity, strings, lo: int, hi: int,
                 idle_launch_rows: np.ndarray | None = None) -> pd.DataFrame:
    """Set-up work overlapping ``[lo, hi)`` on any thread: set-up CUDA calls, and launch calls long
    enough to be set-up that launched an operation ending a GPU-idle gap (``idle_launch_rows``: a
    long launch while the GPU is busy is a full launch queue, not set-up), grouped by API name; and
    compile/autotune/warm-up NVTX ranges (grouped by text with digits folded). ``count``, ``max_ms``
    and ``total_ms`` (wall-clock time the group's events cover: nested or concurrent events count
    once) of the parts inside the range."""
    parts = []
    if len(runtime) and host.runtime_level is not None:
        s, e = runtime["start_ns"].to_numpy(np.int64), runtime["end_ns"].to_numpy(np.int64)
        sel = (host.runtime_level == LV_SETUP_API) & (s < hi) & (e > lo)
        is_launch = runtime["api_kind"].to_numpy() == API_LAUNCH
        if idle_launch_rows is not None:
            ok = np.zeros(len(sel), dtype=bool)
            ok[idle_launch_rows[(idle_launch_rows >= 0) & (idle_launch_rows < len(ok))]] = True
            sel &= ~is_launch | ok
        if sel.any():
            kind = runtime["api_kind"].to_numpy()[sel]
            names = [S.strip_api_suffix(x) for x in strings.lookup(runtime["name_id"].to_numpy()[sel])]
            names = [f"{n} (launch far longer than usual: first-launch loading/JIT)" if k == API_LAUNCH else n
                     for n, k in zip(names, kind)]
            s0, e0 = np.maximum(s[sel], lo), np.minimum(e[sel], hi)
            parts.append(pd.DataFrame({"name": names, "kind": "CUDA API", "s": s0, "e": e0, "dur": e0 - s0}))
    if host.setup_nvtx is not None and host.setup_nvtx.any():
        s, e = nvtx["start_ns"].to_numpy(np.int64), nvtx["end_ns"].to_numpy(np.int64)
        sel = host.setup_nvtx & (s < hi) & (e > lo)
        if sel.any():
            texts = [S.fold_nvtx_text(str(x)) for x in nvtx["text"].to_numpy()[sel]]
            s0, e0 = np.maximum(s[sel], lo), np.minimum(e[sel], hi)
            parts.append(pd.DataFrame({"name": texts, "kind": "NVTX range", "s": s0, "e": e0, "dur": e0 - s0}))
    return setup_table(parts)


def setup_parts(names, kinds, start_ns: np.ndarray, end_ns: np.ndarray, lo: int, hi: int, nvtx: bool) -> pd.DataFrame:
    """One part of :func:`setup_table`: events clipped to ``[lo, hi)`` (CUDA calls, with their
    API names and ``api_kind`` codes, or set-up NVTX ranges with their folded texts)."""
    s0, e0 = np.maximum(start_ns, lo), np.minimum(end_ns, hi)
    if nvtx:
        return pd.DataFrame({"name": list(names), "kind": "NVTX range", "s": s0, "e": e0, "dur": e0 - s0})
    names = [f"{n} (launch far longer than usual: first-launch loading/JIT)" if k == API_LAUNCH else n
             for n, k in zip(names, kinds)]
    return pd.DataFrame({"name": names, "kind": "CUDA API", "s": s0, "e": e0, "dur": e0 - s0})


def setup_table(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Set-up events grouped by (name, kind): count, wall-clock total, longest (top 20 by total)."""
    if not parts:
        return pd.DataFrame({"name": [], "kind": [], "count": [], "total_ms": [], "max_ms": []})
    df = pd.concat(parts, ignore_index=True)
    # total = wall-clock time covered by the name's events (nested or concurrent ones count once)
    codes, uniq = pd.factorize(df["name"] + "\x00" + df["kind"])
    cover = iv.union(codes, df["s"].to_numpy(np.int64), df["e"].to_numpy(np.int64)).total_by_key(len(uniq))
    df["code"] = codes
    g = df.groupby(["name", "kind"]).agg(count=("dur", "size"), code=("code", "first"), mx=("dur", "max")).reset_index()
    g["total"] = cover[g["code"].to_numpy()]
    g = g.sort_values("total", ascending=False).head(20)
    return pd.DataFrame({"name": g["name"], "kind": g["kind"], "count": g["count"].astype(int),
                         "total_ms": g["total"] / 1e6, "max_ms": g["mx"] / 1e6}).reset_index(drop=True)


def api_calls_table(runtime: pd.DataFrame, mask: np.ndarray, strings, w0: int, w1: int) -> pd.DataFrame:
    """CUDA API calls selected by ``mask`` overlapping the window, grouped by API name."""
    return sync_calls_table(runtime, mask, strings, w0, w1)


def scalar_read_mask(runtime: pd.DataFrame, memcpy: pd.DataFrame, ops: GpuOps, blocking: np.ndarray) -> np.ndarray:
    """Boolean over GPU ops: which memcpy ops are scalar reads (``.item()``-like)."""
    out = np.zeros(len(ops), dtype=bool)
    if len(memcpy) == 0 or len(runtime) == 0:
        return out
    m = np.flatnonzero((ops.kind == KIND_MEMCPY) & (ops.api >= 0))
    if len(m) == 0:
        return out
    rows = ops.row[m]
    tiny = (memcpy["copy_kind"].to_numpy()[rows] == S.COPY_DTOH) & (memcpy["bytes"].to_numpy()[rows] <= SCALAR_READ_MAX_BYTES)
    m = m[tiny]
    if len(m) == 0:
        return out
    api = ops.api[m]
    kind = runtime["api_kind"].to_numpy()
    sync_itself = np.isin(kind[api], (API_SYNC_COPY,)) | blocking[api]
    # "followed by a blocking sync": the thread's next CUDA call is a blocking sync call, i.e.
    # the first blocking call after this one on the thread has no other call before it. Done on
    # sorted (thread, start) values, without sorting all rows by a permutation.
    tid = runtime["thread"].to_numpy().astype(np.int64)
    start = runtime["start_ns"].to_numpy(np.int64)
    t0 = int(start.min())
    span = int(start.max()) - t0 + 2
    comp_all = tid * span + (start - t0)
    comp_sync = np.sort(comp_all[kind == API_SYNC])
    comp_all = np.sort(comp_all)
    mine = tid[api] * span + (start[api] - t0)
    k = np.searchsorted(comp_sync, mine, side="right")
    has = k < len(comp_sync)
    nxt = comp_sync[np.minimum(k, max(len(comp_sync) - 1, 0))] if len(comp_sync) else np.zeros(len(k), np.int64)
    same_thread = has & (nxt // span == tid[api])
    between = np.searchsorted(comp_all, nxt, side="left") - np.searchsorted(comp_all, mine, side="right")
    followed = same_thread & (between == 0)
    out[m[sync_itself | followed]] = True
    return out


def quantiles(values: np.ndarray, qs=(0.5, 0.95), in_place: bool = False) -> list[float | None]:
    """Exact quantiles with linear interpolation (numpy's default, same as pandas). With
    ``in_place`` the array is reordered instead of copied."""
    if len(values) == 0:
        return [None for _ in qs]
    return [float(v) for v in np.quantile(values, qs, overwrite_input=in_place)]


def launch_path(ops: GpuOps, in_window: np.ndarray) -> dict:
    """Summary of API time and queue delay of kernel launches inside the window."""
    k = np.flatnonzero(in_window & (ops.kind == KIND_KERNEL) & (ops.api >= 0))
    api_end = ops.api_end_ns(k)
    api_ns = api_end - ops.api_start_ns[k]
    queue_ns = np.maximum(ops.start_ns[k] - api_end, 0)
    api_med, api_p95 = quantiles(api_ns)
    q_med, q_p95 = quantiles(queue_ns)
    n = len(k)
    return {
        "launch_count": n,
        "launch_api_us_median": None if api_med is None else api_med / 1e3,
        "launch_api_us_p95": None if api_p95 is None else api_p95 / 1e3,
        "queue_delay_us_median": None if q_med is None else q_med / 1e3,
        "queue_delay_us_p95": None if q_p95 is None else q_p95 / 1e3,
        "queue_delay_under_10us_pct": (float((queue_ns < 10_000).mean() * 100) if n else None),
    }


def sync_calls_table(runtime: pd.DataFrame, blocking: np.ndarray, strings, w0: int, w1: int) -> pd.DataFrame:
    """Blocking sync calls inside the window grouped by API name."""
    s = runtime["start_ns"].to_numpy(np.int64)
    e = runtime["end_ns"].to_numpy(np.int64)
    sel = blocking & (s < w1) & (e > w0)
    if not sel.any():
        return pd.DataFrame({"api": [], "count": [], "total_ms": [], "max_ms": []})
    df = pd.DataFrame({"name_id": runtime["name_id"].to_numpy()[sel], "dur": (np.minimum(e, w1) - np.maximum(s, w0))[sel]})
    g = df.groupby("name_id")["dur"].agg(["count", "sum", "max"]).reset_index()
    return _calls_by_api(g, strings)


def calls_table_from(groups: dict, strings) -> pd.DataFrame:
    """:func:`sync_calls_table` from partial totals ``{name_id: [count, total_ns, max_ns]}`` (the
    analysis engine adds them up slice by slice)."""
    if not groups:
        return pd.DataFrame({"api": [], "count": [], "total_ms": [], "max_ms": []})
    ids = sorted(groups)
    g = pd.DataFrame({"name_id": np.array(ids, dtype=np.int64),
                      "count": np.array([groups[i][0] for i in ids], dtype=np.int64),
                      "sum": np.array([groups[i][1] for i in ids], dtype=np.int64),
                      "max": np.array([groups[i][2] for i in ids], dtype=np.int64)})
    return _calls_by_api(g, strings)


def _calls_by_api(g: pd.DataFrame, strings) -> pd.DataFrame:
    g["api"] = [S.strip_api_suffix(v) for v in strings.lookup(g["name_id"].to_numpy())]
    g = g.groupby("api").agg(count=("count", "sum"), total=("sum", "sum"), mx=("max", "max")).reset_index()
    g = g.sort_values("total", ascending=False)
    return pd.DataFrame({"api": g["api"], "count": g["count"].astype(int), "total_ms": g["total"] / 1e6,
                         "max_ms": g["mx"] / 1e6}).reset_index(drop=True)
