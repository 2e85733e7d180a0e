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

from ..trace import schema as S
from ..trace.columns import Columns
from ..trace.schema import (API_ALLOC, API_ASYNC_COPY, API_LAUNCH, API_SETUP)
from . import intervals as iv
from .gpu import (SETUP_LAUNCH_MIN_NS, LV_ALLOC, LV_API, LV_DRIVER, LV_INPUT_NVTX, LV_LAUNCH, LV_SETUP_API, LV_SETUP_NVTX, LV_SYNC, LV_WAIT,
                  HostActivity)

SCALAR_READ_MAX_BYTES = 16
#: Set-up calls at least this long (ns) that follow each other on a thread within
#: ``SETUP_CLUSTER_GAP_NS`` form one set-up stretch: a library initialising itself (cuBLAS loading
#: its 15 kernel libraries, a module's first launches) runs host code between its driver calls, and
#: that time is the library's set-up, not the program's host work.
SETUP_CLUSTER_MIN_NS = 200_000
SETUP_CLUSTER_GAP_NS = 10_000_000


def levels_of(kind: np.ndarray, blocking: np.ndarray, setup_launch: np.ndarray | None = None,
              dur_ns: np.ndarray | None = None) -> np.ndarray:
    """Painting level of each CUDA API row (see :func:`nsysdoc.metrics.gpu.classify_found_gaps`) from
    its ``api_kind`` code; ``setup_launch`` marks the launch calls that are set-up work; with the
    calls' durations ``dur_ns``, the other launch calls of ``SETUP_LAUNCH_MIN_NS`` or more are
    driver work (``LV_DRIVER``), not per-launch overhead."""
    level = np.full(len(kind), LV_API, dtype=np.int8)
    level[np.isin(kind, (API_LAUNCH, API_ASYNC_COPY))] = LV_LAUNCH
    if dur_ns is not None and len(dur_ns):
        level[(kind == API_LAUNCH) & (dur_ns >= SETUP_LAUNCH_MIN_NS)] = LV_DRIVER
    level[kind == API_ALLOC] = LV_ALLOC
    level[kind == API_SETUP] = LV_SETUP_API
    if setup_launch is not None and len(setup_launch):
        level[setup_launch] = LV_SETUP_API
    level[blocking] = LV_SYNC
    return level


def setup_stretches(thread: np.ndarray, start: np.ndarray, end: np.ndarray, level: np.ndarray,
                    lib_init: np.ndarray | None = None):
    """``(thread, start, end)`` of the host time between consecutive set-up calls of the same thread
    (each ``SETUP_CLUSTER_MIN_NS`` or longer, or a library's driver initialisation call of any
    length: ``lib_init``, see ``nsysdoc.trace.schema.LIB_INIT_APIS``) that are at most
    ``SETUP_CLUSTER_GAP_NS`` apart."""
    long_enough = end - start >= SETUP_CLUSTER_MIN_NS
    if lib_init is not None and len(lib_init) == len(level):
        long_enough |= lib_init
    sel = np.flatnonzero((level == LV_SETUP_API) & long_enough)
    empty = (np.zeros(0, np.int64),) * 3
    if len(sel) < 2:
        return empty
    o = sel[np.lexsort((start[sel], thread[sel]))]
    t, s, e = thread[o].astype(np.int64), start[o], end[o]
    nxt = np.flatnonzero((t[1:] == t[:-1]) & (s[1:] > e[:-1]) & (s[1:] - e[:-1] <= SETUP_CLUSTER_GAP_NS))
    if not len(nxt):
        return empty
    return t[nxt + 1], e[nxt], s[nxt + 1]


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
    near = np.flatnonzero(waits.overlaps_any(rt_thread, rs, re_))
    if not len(near):
        return wait
    calls = iv.union(rt_thread[near], rs[near], re_[near])
    inside = calls.covered(ot, os_, oe) * 2 > np.maximum(oe - os_, 1)
    out = wait.copy()
    out[idx[inside]] = False
    return out


def host_activity_from(rt: dict, blocking: np.ndarray, osrt: dict, loader_ranges: tuple, setup_ranges: tuple,
                       thread_keys: np.ndarray, setup_launch: np.ndarray | None = None,
                       stretches: tuple | None = None) -> HostActivity:
    """Per-thread blocking-sync union, plus the painting sources (CUDA API rows by class, OS waits,
    DataLoader and compile/autotune/warm-up NVTX ranges), from arrays: CUDA API rows ``rt``
    (thread, start_ns, end_ns, api_kind), OS runtime rows ``osrt`` (thread, start_ns, end_ns, is_wait), the DataLoader
    and set-up NVTX ranges as ``(thread, start, end)`` arrays, and the set-up ``stretches`` (same form) the
    caller found with :func:`setup_stretches`."""
    rt_thread = np.asarray(rt["thread"])
    rs, re_ = np.asarray(rt["start_ns"], dtype=np.int64), np.asarray(rt["end_ns"], dtype=np.int64)
    levels = levels_of(np.asarray(rt["api_kind"]), blocking, setup_launch, re_ - rs)
    wait = _outside_cuda_calls(osrt, np.asarray(osrt["is_wait"], dtype=bool), rt_thread, rs, re_)
    ot = np.asarray(osrt["thread"])
    os_, oe = np.asarray(osrt["start_ns"], dtype=np.int64), np.asarray(osrt["end_ns"], dtype=np.int64)
    sources = [
        (levels, rt_thread, rs, re_),
        (LV_WAIT, ot[wait], os_[wait], oe[wait]),
        (LV_INPUT_NVTX, *loader_ranges),
        (LV_SETUP_NVTX, *setup_ranges),
        # set-up stretches (``setup_stretches``): the caller finds them, from set-up calls beyond these
        # rows too, so that a stretch does not depend on where a slice of the capture begins or ends
        (LV_SETUP_API, *(stretches if stretches is not None else (np.zeros(0, np.int64),) * 3)),
    ]
    return HostActivity(
        thread_keys=np.asarray(thread_keys, dtype=np.int64),
        sync=iv.union(rt_thread[blocking], rs[blocking], re_[blocking]),
        sources=sources, runtime_level=levels, setup_nvtx=None,
    )


def setup_events(runtime, nvtx, host: HostActivity, strings, lo: int, hi: int,
                 idle_launch_rows: np.ndarray | None = None) -> Columns:
    """Set-up work overlapping ``[lo, hi)`` on any thread: set-up CUDA calls, and launch calls long
    enough to be set-up that launched an operation ending a GPU-idle gap (``idle_launch_rows``: a
    long launch while the GPU is busy is a full launch queue, not set-up), grouped by API name; and
    compile/autotune/warm-up NVTX ranges (grouped by text with digits folded). ``count``, ``max_ms``
    and ``total_ms`` (wall-clock time the group's events cover: nested or concurrent events count
    once) of the parts inside the range."""
    parts = []
    if len(runtime) and host.runtime_level is not None:
        s, e = np.asarray(runtime["start_ns"], dtype=np.int64), np.asarray(runtime["end_ns"], dtype=np.int64)
        sel = (host.runtime_level == LV_SETUP_API) & (s < hi) & (e > lo)
        is_launch = np.asarray(runtime["api_kind"]) == API_LAUNCH
        if idle_launch_rows is not None:
            ok = np.zeros(len(sel), dtype=bool)
            ok[idle_launch_rows[(idle_launch_rows >= 0) & (idle_launch_rows < len(ok))]] = True
            sel &= ~is_launch | ok
        if sel.any():
            kind = np.asarray(runtime["api_kind"])[sel]
            names = [S.strip_api_suffix(x) for x in strings.lookup(np.asarray(runtime["name_id"])[sel])]
            names = [f"{n} (launch far longer than usual: first-launch loading/JIT)" if k == API_LAUNCH else n
                     for n, k in zip(names, kind)]
            s0, e0 = np.maximum(s[sel], lo), np.minimum(e[sel], hi)
            parts.append(_part(names, "CUDA API", s0, e0))
    if host.setup_nvtx is not None and host.setup_nvtx.any():
        s, e = np.asarray(nvtx["start_ns"], dtype=np.int64), np.asarray(nvtx["end_ns"], dtype=np.int64)
        sel = host.setup_nvtx & (s < hi) & (e > lo)
        if sel.any():
            texts = [S.fold_nvtx_text(str(x)) for x in np.asarray(nvtx["text"])[sel]]
            s0, e0 = np.maximum(s[sel], lo), np.minimum(e[sel], hi)
            parts.append(_part(texts, "NVTX range", s0, e0))
    return setup_table(parts)


def _part(names, kind: str, s0: np.ndarray, e0: np.ndarray) -> dict:
    return {"name": [str(n) for n in names], "kind": kind, "s": np.asarray(s0, dtype=np.int64),
            "e": np.asarray(e0, dtype=np.int64)}


def setup_parts(names, kinds, start_ns: np.ndarray, end_ns: np.ndarray, lo: int, hi: int, nvtx: bool) -> dict:
    """One part of :func:`setup_table`: events clipped to ``[lo, hi)`` (CUDA calls, with their
    API names and ``api_kind`` codes, or set-up NVTX ranges with their folded texts)."""
    s0, e0 = np.maximum(start_ns, lo), np.minimum(end_ns, hi)
    if nvtx:
        return _part(names, "NVTX range", s0, e0)
    names = [f"{n} (launch far longer than usual: first-launch loading/JIT)" if k == API_LAUNCH else n
             for n, k in zip(names, kinds)]
    return _part(names, "CUDA API", s0, e0)


def setup_table(parts: list[dict]) -> Columns:
    """Set-up events grouped by (name, kind): count, wall-clock total, longest (top 20 by total;
    ties in name, then kind order)."""
    empty = Columns({"name": [], "kind": [], "count": [], "total_ms": [], "max_ms": []})
    parts = [p for p in parts if len(p["s"])]
    if not parts:
        return empty
    keys = [(n, p["kind"]) for p in parts for n in p["name"]]
    s = np.concatenate([p["s"] for p in parts])
    e = np.concatenate([p["e"] for p in parts])
    groups = sorted(set(keys))  # by name, then kind
    index = {k: i for i, k in enumerate(groups)}
    codes = np.fromiter((index[k] for k in keys), dtype=np.int64, count=len(keys))
    # total = wall-clock time covered by the name's events (nested or concurrent ones count once)
    total = iv.union(codes, s, e).total_by_key(len(groups))
    count = np.bincount(codes, minlength=len(groups)).astype(np.int64)
    mx = np.full(len(groups), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(mx, codes, e - s)
    top = np.argsort(-np.asarray(total, dtype=np.float64), kind="stable")[:20]
    return Columns({"name": np.array([groups[i][0] for i in top], dtype=object),
                    "kind": np.array([groups[i][1] for i in top], dtype=object),
                    "count": count[top], "total_ms": total[top] / 1e6, "max_ms": mx[top] / 1e6})


def quantiles(values: np.ndarray, qs=(0.5, 0.95), in_place: bool = False) -> list[float | None]:
    """Exact quantiles with linear interpolation (numpy's default, same as pandas). With
    ``in_place`` the array is reordered instead of copied."""
    if len(values) == 0:
        return [None for _ in qs]
    return [float(v) for v in np.quantile(values, qs, overwrite_input=in_place)]


def calls_table_from(groups: dict, strings) -> Columns:
    """CUDA API calls (blocking sync calls, set-up calls) inside the window grouped by API name, from
    partial totals ``{name_id: [count, total_ns, max_ns]}`` (the analysis engine adds them up slice
    by slice)."""
    if not groups:
        return Columns({"api": [], "count": [], "total_ms": [], "max_ms": []})
    ids = sorted(groups)
    apis = [S.strip_api_suffix(v) for v in strings.lookup(np.array(ids, dtype=np.int64))]
    names = sorted(set(apis))  # several ids can share an API name once the suffix is stripped
    index = {a: i for i, a in enumerate(names)}
    code = np.array([index[a] for a in apis], dtype=np.int64)
    count = np.zeros(len(names), dtype=np.int64)
    np.add.at(count, code, np.array([groups[i][0] for i in ids], dtype=np.int64))
    total = np.zeros(len(names), dtype=np.int64)
    np.add.at(total, code, np.array([groups[i][1] for i in ids], dtype=np.int64))
    mx = np.full(len(names), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(mx, code, np.array([groups[i][2] for i in ids], dtype=np.int64))
    order = np.argsort(-total, kind="stable")  # by total, descending; ties in API name order
    return Columns({"api": np.array(names, dtype=object)[order], "count": count[order],
                    "total_ms": total[order] / 1e6, "max_ms": mx[order] / 1e6})
