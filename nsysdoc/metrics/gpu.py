"""Device activity: busy time as interval unions, communication overlap, idle gaps and what the
host was doing during them.

Definitions (``docs/glossary.md``):

* **GPU busy** of a device = length of the union of its kernel, memcpy and memset intervals inside
  the analysis window, over the window length. Never a sum of durations.
* **Compute** = union of non-NCCL kernels; **communication** = union of NCCL kernels;
  **exposed communication** = communication not overlapped by compute
  (= |compute ∪ comm| − |compute|); **copy-only** = busy time with no kernel running.
* **Idle gap** = a stretch of the window with no GPU operation on the device. Its time is split
  into idle classes by what the thread that launched the next GPU operation was doing (see
  :func:`classify_found_gaps`): an instant of the gap belongs to exactly one class.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import intervals as iv
from .ops import KIND_KERNEL, GpuOps
# set-up launch calls are found while loading: the threshold lives with the launch APIs in trace/
from ..trace.schema import SETUP_LAUNCH_MIN_NS  # noqa: F401 - re-exported

# idle causes (order = reporting order): the vocabulary lives in nsysdoc/idle_causes.py
from ..idle_causes import IDLE_CAUSE_LABELS as CAUSE_LABELS  # noqa: E402,F401 - re-exported
from ..idle_causes import IDLE_CAUSES as CAUSES  # noqa: E402

(CAUSE_SYNC, CAUSE_INPUT, CAUSE_ALLOC, CAUSE_SETUP, CAUSE_LAUNCH, CAUSE_API, CAUSE_HOST, CAUSE_DEP, CAUSE_TAIL,
 CAUSE_UNATTR) = range(len(CAUSES))

#: A blocking sync call counts for a gap when it covers the instant the GPU ran dry, ± this much.
SYNC_TOLERANCE_NS = 10_000
#: The next operation starting at most this long after its launching call returned (or after the
#: GPU went idle, whichever is later) is launch latency; longer, it waited on other GPU work.
LAUNCH_LATENCY_NS = 20_000
#: Host windows (GPU idle → the next launching call) shorter than this are per-launch dispatch:
#: Python/framework time between ordinary launches. Longer ones are host phases.
DISPATCH_MAX_NS = 1_000_000
#: After a blocking sync returns, the host time up to the next launching call is the sync's
#: *refill* (part of what the sync costs, at most the time the host was blocked) only when it is at
#: most this long: the framework going straight back to launching (``.item()``, then µs of
#: Python, then the next kernel) is the per-launch dispatch time ``DISPATCH_MAX_NS`` bounds. A
#: longer stretch is a host phase (MPI, CPU code, logging) that would keep the GPU idle even
#: without the sync: host work.
SYNC_REFILL_MAX_NS = DISPATCH_MAX_NS

# Painting levels of the host timeline: where several activities overlap, the smallest level wins.
# LV_DRIVER: a launch call of SETUP_LAUNCH_MIN_NS or more that is not a first launch: the driver
# doing something else inside it (module loading, a lock, a full launch queue of another GPU the
# thread feeds), never per-launch overhead, in short windows as in long ones.
(LV_SETUP_NVTX, LV_INPUT_NVTX, LV_SETUP_API, LV_ALLOC, LV_SYNC, LV_WAIT, LV_SYNC_BUDGET, LV_DRIVER, LV_LAUNCH,
 LV_API) = range(1, 11)
NLEVELS = 10
#: Idle class of each level (index 0 = uncovered: host CPU work, or dispatch in a short window).
LEVEL_CAUSE = np.array([CAUSE_HOST, CAUSE_SETUP, CAUSE_INPUT, CAUSE_SETUP, CAUSE_ALLOC, CAUSE_SYNC, CAUSE_INPUT,
                        CAUSE_SYNC, CAUSE_API, CAUSE_LAUNCH, CAUSE_API], dtype=np.int64)

@dataclass
class Activity:
    """Per-device unions clipped to the window."""

    ndev: int
    busy: iv.Union
    kernels: iv.Union
    compute: iv.Union
    comm: iv.Union


def device_activity(ops: GpuOps, ndev: int, w0: int, w1: int) -> Activity:
    k = ops.kind == KIND_KERNEL

    def u(mask):  # ops are sorted by (device, start), and so is every subset
        if mask is None:
            return iv.union(ops.device, ops.start_ns, ops.end_ns, lo=w0, hi=w1, presorted=True)
        return iv.union(ops.device[mask], ops.start_ns[mask], ops.end_ns[mask], lo=w0, hi=w1, presorted=True)

    # the same union is not built twice: often every op is a kernel and none is NCCL
    busy = u(None)
    if w0 is None and w1 is None:
        nonempty = ops.end_ns > ops.start_ns
        if len(busy) == int(nonempty.sum()) and iv._in_key_start_order(ops.device, ops.start_ns):
            # no two operations overlap or touch (one stream per device, a gap at every kernel
            # boundary: issue 50): each is its own piece, in every subset too, so a subset's union
            # is its operations as they are (what iv.union's running maximum would find)
            def u(mask):  # noqa: F811
                sel = np.flatnonzero(mask & nonempty)
                if len(sel) == 0:
                    return iv.union([], [], [])
                # the gathers are copies already: no second copy when the times are int64
                s, e = ops.start_ns[sel].astype(np.int64, copy=False), ops.end_ns[sel].astype(np.int64, copy=False)
                tmin = int(s.min())
                return iv.Union(ops.device[sel].astype(np.int64), s, e, tmin, int(e.max()) - tmin + 1)
    kernels = busy if bool(k.all()) else u(k)
    any_nccl = bool(ops.is_nccl.any())
    compute = u(k & ~ops.is_nccl) if any_nccl else kernels
    comm = u(k & ops.is_nccl) if any_nccl else iv.union([], [], [])
    return Activity(ndev=ndev, busy=busy, kernels=kernels, compute=compute, comm=comm)


def extend_activity(own: Activity, own_ops: GpuOps, extra: GpuOps | None, w0: int, w1: int) -> Activity:
    """``device_activity(own_ops + extra, ...)`` from ``own = device_activity(own_ops, ndev, None,
    None)``: each union of ``own_ops`` joined with ``extra``'s matching operations (usually a
    few), then clipped to ``[w0, w1)``. A union of union pieces and intervals is the union of all
    the intervals, and clipping commutes with union, so the result is the same union."""
    n_extra = 0 if extra is None else len(extra)
    all_k = bool((own_ops.kind == KIND_KERNEL).all())
    any_nccl = bool(own_ops.is_nccl.any())
    if n_extra:
        ek = extra.kind == KIND_KERNEL
        all_k = all_k and bool(ek.all())
        any_nccl = any_nccl or bool(extra.is_nccl.any())

    def j(u: iv.Union, mask):
        if n_extra:
            if mask is None:
                k2, s2, e2 = extra.device, extra.start_ns, extra.end_ns
            else:
                k2, s2, e2 = extra.device[mask], extra.start_ns[mask], extra.end_ns[mask]
            if len(k2):
                if len(u) and len(k2) <= _FEW_EXTRA:
                    # the few carried operations merged into the pieces they touch; every other
                    # piece is copied as it is (no rebuild of the slice's union: issue 50)
                    return iv.merge_few(u, k2, s2, e2, lo=w0, hi=w1)
                return iv.union(np.concatenate([u.keys, k2.astype(np.int64)]), np.concatenate([u.starts, s2]),
                                np.concatenate([u.ends, e2]), lo=w0, hi=w1)
        if len(u) and (w0 is None or u.tmin >= w0) and (w1 is None or u.tmin + u.span - 1 <= w1):
            return u  # already inside [w0, w1): clipping would rebuild the same pieces
        return iv.union(u.keys, u.starts, u.ends, lo=w0, hi=w1) if len(u) else u

    busy = j(own.busy, None)
    kernels = busy if all_k else j(own.kernels, ek if n_extra else None)
    compute = j(own.compute, (ek & ~extra.is_nccl) if n_extra else None) if any_nccl else kernels
    comm = j(own.comm, (ek & extra.is_nccl) if n_extra else None) if any_nccl else iv.union([], [], [])
    return Activity(ndev=own.ndev, busy=busy, kernels=kernels, compute=compute, comm=comm)


@dataclass
class HostActivity:
    """What each host thread was doing, as interval sources for :func:`classify_found_gaps`. Thread
    keys are indices into ``thread_keys`` (sorted global_tid values).

    ``sync`` (the union of blocking sync calls per thread) is built at once; everything else is
    painted on demand, only from the rows that overlap the host windows of idle gaps.
    """

    thread_keys: np.ndarray
    sync: iv.Union
    #: painting sources: (level per row or scalar, thread index, start, end); the runtime source
    #: carries one level per row
    sources: list[tuple] = field(default_factory=list)
    #: painting level of each CUDA API row, and which NVTX rows are compile/autotune/warm-up ranges
    runtime_level: np.ndarray | None = None
    setup_nvtx: np.ndarray | None = None

    def index(self, gtid: np.ndarray) -> np.ndarray:
        gtid = np.asarray(gtid, dtype=np.int64)
        if len(self.thread_keys) == 0:
            return np.full(len(gtid), -1, dtype=np.int64)
        pos = np.clip(np.searchsorted(self.thread_keys, gtid), 0, len(self.thread_keys) - 1)
        return np.where(self.thread_keys[pos] == gtid, pos, -1)

    def paint(self, keys: np.ndarray, lo: np.ndarray, hi: np.ndarray, extra: tuple | None = None,
              long_window: np.ndarray | None = None) -> iv.Partition:
        """Partition of the host timeline, painted from the rows that overlap the windows
        ``[lo, hi)`` of threads ``keys`` (plus ``extra`` intervals: level, keys, starts, ends).

        Launch and other-API calls (the lowest levels) change a gap's split only in long windows
        (in a short one they, and uncovered time, are all dispatch), so with ``long_window`` they
        are painted only where they overlap a long window: on a launch-bound capture that skips
        millions of launch calls."""
        parts_k, parts_s, parts_e, parts_l = [], [], [], []
        if len(keys):
            windows = iv.union(keys, lo, hi)
            lw = None
            if long_window is not None and not long_window.all():
                lw = iv.union(keys[long_window], lo[long_window], hi[long_window])
                lw_all = iv.union(np.zeros(len(lw), np.int64), lw.starts, lw.ends)
            for level, k, s, e in self.sources:
                if len(s) == 0:
                    continue
                if lw is not None and np.ndim(level):
                    k, s, e = np.asarray(k), np.asarray(s), np.asarray(e)
                    low = np.asarray(level) >= LV_LAUNCH
                    keep = np.zeros(len(s), dtype=bool)
                    r = np.flatnonzero(~low)
                    keep[r] = windows.overlaps_any(k[r], s[r], e[r])
                    if len(lw):
                        # first a test on the raw time axis against the long windows of every
                        # thread (a superset, a few passes over the rows: millions of launch calls,
                        # a few hundred windows), then the exact test on those that pass (issue 50)
                        r = np.flatnonzero(low & _meets_any(lw_all, s, e))
                        if len(r):
                            keep[r] = lw.overlaps_any(k[r], s[r], e[r])
                    hit = np.flatnonzero(keep)
                else:
                    hit = np.flatnonzero(windows.overlaps_any(k, s, e))
                if len(hit) == 0:
                    continue
                parts_k.append(np.asarray(k)[hit]); parts_s.append(np.asarray(s)[hit]); parts_e.append(np.asarray(e)[hit])
                parts_l.append(np.asarray(level)[hit] if np.ndim(level) else np.full(len(hit), level, dtype=np.int64))
        if extra is not None and len(extra[1]):
            level, k, s, e = extra
            parts_k.append(k); parts_s.append(s); parts_e.append(e); parts_l.append(np.full(len(k), level, np.int64))
        if not parts_k:
            return iv.paint([], [], [], [], NLEVELS)
        return iv.paint(np.concatenate(parts_k), np.concatenate(parts_s), np.concatenate(parts_e),
                        np.concatenate(parts_l), NLEVELS)


def _meets_any(u: iv.Union, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Whether each interval ``[s, e)`` shares time with the one-key union ``u`` (raw times, one
    binary search per interval; an empty interval meets nothing)."""
    m = len(u)
    if m == 0:
        return np.zeros(len(s), dtype=bool)
    us, ue = u.starts, u.ends
    p = np.searchsorted(ue, s, side="right")  # the first piece ending after s
    return (p < m) & (us[np.minimum(p, m - 1)] < e) & (e > s)


@dataclass
class Gaps:
    """Idle gaps (sorted by device, then time) and how their time splits into idle classes.

    ``amounts[:, j]`` is the time of gap ``i`` in class ``CAUSES[j]`` (ns, sums to the gap);
    ``cause`` is the gap's largest class (for colouring and for picking example gaps).
    """

    device: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    thread: np.ndarray          # global_tid of the launching thread (0 if unknown)
    next_api_start_ns: np.ndarray  # start of the launching call of the op ending the gap (kind 0 only)
    kind: np.ndarray            # 0 attributed, 1 tail, 2 unattributed
    thread_index: np.ndarray    # index into HostActivity.thread_keys (-1 if unknown)
    painted_end_ns: np.ndarray  # end of the painted host part [start, painted_end)
    host_window_ns: np.ndarray  # time from the GPU going idle to the launching call's start (W)
    queue_is_dependency: np.ndarray
    partition: iv.Partition
    next_op: np.ndarray = None  # index in GpuOps of the operation ending the gap (-1 for tails)
    amounts: np.ndarray = None  # (n, len(CAUSES)) int64, filled by classify_found_gaps
    cause: np.ndarray = None
    #: gaps ended by an operation nobody launched, read from the device's launching thread (the
    #: whole gap is its host part, never dispatch); None: none
    inferred: np.ndarray = None

    def __len__(self) -> int:
        return len(self.start_ns)

    def split(self, idx: np.ndarray, lo, hi, dtype=np.int64) -> np.ndarray:
        """Class amounts (shape ``(len(idx), len(CAUSES))``) of the parts of gaps ``idx`` inside
        ``[lo, hi)`` (scalars or arrays aligned with ``idx``)."""
        idx = np.asarray(idx, dtype=np.int64)
        m = len(idx)
        out = np.zeros((m, len(CAUSES)), dtype=dtype)
        if m == 0:
            return out
        g0, g1 = self.start_ns[idx], self.end_ns[idx]
        p0 = np.maximum(g0, np.broadcast_to(np.asarray(lo, dtype=np.int64), (m,)))
        p1 = np.maximum(np.minimum(g1, np.broadcast_to(np.asarray(hi, dtype=np.int64), (m,))), p0)
        del g0, g1
        kind = self.kind[idx]
        out[kind == 1, CAUSE_TAIL] = (p1 - p0)[kind == 1]
        out[kind == 2, CAUSE_UNATTR] = (p1 - p0)[kind == 2]
        att = np.flatnonzero(kind == 0)
        if len(att) == 0:
            return out
        gi = idx[att]
        x_end = self.painted_end_ns[gi]
        h0 = p0[att]
        h1 = np.maximum(np.minimum(p1[att], x_end), h0)
        qlen = np.maximum(p1[att] - np.maximum(h0, x_end), 0)
        del x_end
        dep = self.queue_is_dependency[gi]
        out[att[dep], CAUSE_DEP] += qlen[dep].astype(dtype)
        out[att[~dep], CAUSE_LAUNCH] += qlen[~dep].astype(dtype)
        del qlen
        # only the gaps with a host part inside [lo, hi) need the host's activity: on a GPU-bound
        # capture almost every gap is the GPU's own (the next operation was queued before the
        # GPU went idle: no host part), and the rest of this is per host part (issue 50)
        hp = np.flatnonzero(h1 > h0)
        if len(hp) < len(att):
            att, gi, h0, h1 = att[hp], gi[hp], h0[hp], h1[hp]
        del hp
        if len(att) == 0:
            return out
        short = self.host_window_ns[gi] < DISPATCH_MAX_NS
        if self.inferred is not None:
            short &= ~self.inferred[gi]
        uncovered = h1 - h0
        # labelled pieces of the host parts: memory follows the pieces, not gaps x levels
        win, lev, ov = self.partition.overlaps(self.thread_index[gi], h0, h1)
        del h0, h1
        if len(win):
            uncovered -= np.bincount(win, weights=ov, minlength=len(att)).astype(np.int64)
            cause = LEVEL_CAUSE[lev]
            api = lev == LV_API
            if api.any():  # in a short window other CUDA calls are part of the dispatch
                cause[api & short[win]] = CAUSE_LAUNCH
            for c in np.unique(cause):
                sel = cause == c
                out[att, c] += np.bincount(win[sel], weights=ov[sel], minlength=len(att)).astype(dtype)
        out[att[short], CAUSE_LAUNCH] += uncovered[short].astype(dtype)
        out[att[~short], CAUSE_HOST] += uncovered[~short].astype(dtype)
        return out

    def amounts_in(self, dev, lo, hi) -> np.ndarray:
        """Class amounts of the idle time inside ``[lo, hi)`` on device ``dev`` (arrays aligned),
        shape ``(len(lo), len(CAUSES))``: whole gaps from prefix sums of their stored amounts, the
        (at most two) gaps cut by the range's ends by :meth:`split`."""
        dev = np.asarray(dev, dtype=np.int64)
        lo = np.asarray(lo, dtype=np.int64)
        hi = np.maximum(np.asarray(hi, dtype=np.int64), lo)
        q = len(lo)
        out = np.zeros((q, len(CAUSES)), dtype=np.int64)
        n = len(self.start_ns)
        if n == 0 or q == 0:
            return out
        # gaps are sorted by (device, start) and disjoint per device: per device, one searchsorted
        # in its own block (a few devices; no packed keys over every gap on each call)
        i0 = np.empty(q, dtype=np.int64)
        i1 = np.empty(q, dtype=np.int64)
        gdev = self.device if self.device.dtype == np.int64 else self.device.astype(np.int64)
        for d in np.unique(dev).tolist():
            b0, b1 = (int(x) for x in np.searchsorted(gdev, np.array([d, d + 1], dtype=np.int64)))
            m = np.flatnonzero(dev == d) if q > 1 else np.zeros(1, dtype=np.int64)
            i0[m] = b0 + np.searchsorted(self.end_ns[b0:b1], lo[m], side="right")  # first gap ending after lo
            i1[m] = b0 + np.searchsorted(self.start_ns[b0:b1], hi[m], side="left")  # gaps starting before hi
        i1 = np.maximum(i1, i0)
        # prefix sums, built once per set of gaps (the window, the devices and the steps each ask)
        cached = self.__dict__.get("_cum")
        if cached is None:
            # only the classes that occur, column by column into a column-major table: a
            # cumsum down the columns of the row-major (n, classes) array is strided and costs
            # 3-4x more (0.14-0.27 s at 1 M gaps), and a full table holds 13 int64 per gap
            # a column is used when the OR of its amounts is not 0 (3x faster than any(axis=0),
            # which converts every amount to bool first)
            cols = np.flatnonzero(np.bitwise_or.reduce(self.amounts, axis=0)) if n else np.zeros(0, np.int64)
            cum = np.zeros((n + 1, len(cols)), dtype=np.int64, order="F")
            for i, c in enumerate(cols):
                np.cumsum(self.amounts[:, c], out=cum[1:, i])
            cached = self.__dict__["_cum"] = (cols, cum)
        cols, cum = cached
        if len(cols):
            out[:, cols] += cum[i1] - cum[i0]
        for first in (True, False):  # correct the gaps cut by lo, then by hi
            j = i0 if first else i1 - 1
            has = i1 > i0
            jj = np.where(has, j, 0)
            cut = has & ((self.start_ns[jj] < lo) if first else (self.end_ns[jj] > hi))
            if first is False:  # a single gap cut at both ends was already fixed in the first pass
                cut &= ~((i1 - i0 == 1) & (self.start_ns[jj] < lo))
            w = np.flatnonzero(cut)
            if len(w) == 0:
                continue
            out[w] += self.split(jj[w], lo[w], hi[w]) - self.amounts[jj[w]]
        return out


#: carried operations :func:`extend_activity` merges into a union's pieces (more: a rebuild)
_FEW_EXTRA = 64


def _whole_gap_amounts(g: Gaps, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``g.split(all gaps, their starts, their ends)`` and each gap's largest class (the first on
    ties), read directly where a gap has one class: a tail, an unattributed gap, and a gap with no
    host part (the next operation was queued before the GPU went idle: its whole length is queue
    time, ``launch`` or ``dependency``; almost every gap of a GPU-bound capture, issue 50). Only
    the gaps with a host part go through :meth:`Gaps.split`. Stored column by column (Fortran
    order): the columns are what the totals read (prefix sums, one class of every gap)."""
    n = len(g)
    out = np.zeros((n, len(CAUSES)), dtype=dtype, order="F")
    cause = np.zeros(n, dtype=np.int8)
    if n == 0:
        return out, cause
    att = g.kind == 0
    queue = np.where(att, g.end_ns - g.painted_end_ns, g.end_ns - g.start_ns)  # x_end = g0 when not att
    dep = g.queue_is_dependency
    for c, m in ((CAUSE_TAIL, g.kind == 1), (CAUSE_UNATTR, g.kind == 2), (CAUSE_DEP, att & dep),
                 (CAUSE_LAUNCH, att & ~dep)):
        idx = np.flatnonzero(m)
        if len(idx):
            out[idx, c] = queue[idx]
            cause[idx] = c
    hp = np.flatnonzero(att & (g.painted_end_ns > g.start_ns))
    if len(hp):
        part = g.split(hp, g.start_ns[hp], g.end_ns[hp], dtype=dtype)
        out[hp] = part
        cause[hp] = np.argmax(part, axis=1)
    return out, cause


def classify_found_gaps(ops: GpuOps, host: HostActivity, gk: np.ndarray, gs: np.ndarray, ge: np.ndarray,
                        base: int, prev_launcher: np.ndarray | None = None) -> Gaps:
    """Split idle gaps already found (sorted by device, then time; disjoint per device) by what the
    host was doing; ``base`` is at most every gap start (a time origin for packed keys). The
    analysis engine finds a time slice's gaps itself (each gap once, owned by the slice where it
    ends).

    For the GPU operation that ends a gap ``[g0, g1)``, launched by thread T with a call
    ``[a, b)``:

    1. no more GPU work before the window end → ``tail``;
    2. the **queue part** ``[x, g1)``, where ``x = max(g0, min(b, g1))`` (the op was submitted and
       the call returned): ``launch`` (latency) when at most ``LAUNCH_LATENCY_NS`` long, else
       ``dependency`` (it waited on other GPU work: an event, another stream or device);
    3. the **host part** ``[g0, x)`` is labelled instant by instant by T's own activity, the first
       that applies: compile/autotune/warm-up NVTX ranges (setup); DataLoader NVTX ranges (input);
       set-up CUDA calls and first launches of a kernel lasting 1 ms or more (setup);
       allocation calls (alloc); blocking sync calls (sync); OS waits (input); the *sync refill*
       — after a blocking sync that covered ``g0`` (blocked time B) and returned at ``r``, when
       the host went straight back to launching (``a − max(r, g0)`` at most
       ``SYNC_REFILL_MAX_NS``), the first ``min(B, a − g0)`` of the host part: what it queues
       then is what it could have queued while blocked; after a longer stretch the host time
       with no CUDA call is host work, not the sync's cost (sync); ordinary launch calls
       (launch); other CUDA calls (api); nothing (host).
       When the host reached the launching call less than ``DISPATCH_MAX_NS`` after ``g0``, the
       ``api`` and uncovered time is per-launch dispatch (launch).

    **Operations nobody launched** (a unified-memory migration, a driver memset, a CUDA-graph node
    whose launch is unknown: no runtime row carries its correlation id) end a gap whose launching
    call is unknown. The gap is then read from the thread that launches the device's GPU work:
    the launching thread of the last operation on the same device, started before ``g0``, with a
    known launching call (in this slice, else ``prev_launcher[device]``: the same found by the
    earlier slices, so the reading does not depend on where slices are cut). The whole gap
    ``[g0, g1)`` is that thread's host part, painted as above with no queue part and no sync
    refill (there is no launching call) and never as dispatch: its uncovered time is ``host``.
    Only when no operation with a known launching call precedes the gap on its device does the
    gap stay ``unattributed`` (``kind`` 2). Gaps read this way are ``kind`` 0 with ``inferred``
    True.
    """
    w0 = int(min(base, int(gs.min()))) if len(gs) else int(base)
    n = len(gs)
    kind = np.full(n, 2, dtype=np.int8)
    thread = np.zeros(n, dtype=np.int64)
    next_api = np.full(n, -1, dtype=np.int64)
    empty_part = iv.paint([], [], [], [], NLEVELS)

    def done(tindex, x_end, hostw, dep, part, next_op, inferred=None):
        g = Gaps(gk, gs, ge, thread, next_api, kind, tindex, x_end, hostw, dep, part, next_op,
                 inferred=inferred if inferred is not None and inferred.any() else None)
        # int32 when every gap is shorter than 2.1 s: half the memory on captures with millions of gaps
        small = n == 0 or int((ge - gs).max()) < 2**31
        g.amounts, g.cause = _whole_gap_amounts(g, np.int32 if small else np.int64)
        return g

    if n == 0 or len(ops) == 0:  # no GPU operation at all: every gap is a tail
        kind[:] = 1
        z = np.zeros(n, dtype=np.int64)
        return done(z - 1, gs.copy(), z, np.zeros(n, bool), empty_part, z - 1)
    # the operation that starts at the gap end on the same device: look every op up among the
    # (few) gap ends instead of sorting all ops
    span = max(int(ge.max()), int(ops.start_ns.max())) - w0 + 1
    # gaps come sorted by (device, start) and are disjoint per device, so their ends are sorted too
    sorted_keys = gk * span + (ge - w0)
    j = np.full(n, -1, dtype=np.int64)
    in_range = ops.start_ns >= w0
    op_key = ops.device.astype(np.int64) * span + (ops.start_ns - w0)
    pos = np.searchsorted(sorted_keys, op_key)
    pos_c = np.minimum(pos, n - 1)
    hit = np.flatnonzero(in_range & (pos < n) & (sorted_keys[pos_c] == op_key))
    # several ops may start at the same instant: keep the first in table order (kernels, then
    # copies, then memsets; each by row), whatever order the operations come in
    if len(hit):
        g_of = pos_c[hit]
    if len(hit) and int(np.bincount(g_of, minlength=n).max()) == 1:
        j[g_of] = hit  # one operation per gap end (the usual case): no order to pick
    elif len(hit):
        key = (ops.kind[hit].astype(np.int64) << 48) | ops.row[hit].astype(np.int64)
        o = np.lexsort((key, g_of))
        firsts = np.concatenate(([True], g_of[o][1:] != g_of[o][:-1]))
        j[g_of[o][firsts]] = hit[o][firsts]
    has_next = j >= 0
    j = np.maximum(j, 0)
    kind[~has_next] = 1
    # a launching call is known by its row, never by the sign of its time (negative times are valid:
    # nsys export --ts-shift)
    known = has_next & (ops.api[j] >= 0)
    a = np.where(known, ops.api_start_ns[j], 0)
    b = np.where(known, ops.api_end_ns(j), 0)
    # launching threads by their index (-1 unknown: the appended last entry, global_tid 0), looked
    # up among the host's threads once per thread, not once per gap
    th = ops.api_thread[j]
    if len(th) and int(th.min()) < -1:
        th = np.maximum(th, -1)
    gtid_of = np.append(np.asarray(ops.thread_gtid, dtype=np.int64), 0)
    t = np.where(known, gtid_of[th], 0)
    kind[known] = 0
    thread[known] = t[known]
    next_api[known] = a[known]
    tindex = np.where(known, host.index(gtid_of)[th], -1)
    x_end = np.where(known, np.clip(np.minimum(b, ge), gs, ge), gs)
    hostw = np.where(known, np.clip(a, gs, ge) - gs, 0)
    dep = known & (ge - x_end > LAUNCH_LATENCY_NS)
    # an operation nobody launched: the gap is read from the device's launching thread
    inferred = np.zeros(n, dtype=bool)
    nobody = np.flatnonzero(has_next & ~known)
    if len(nobody):
        t_inf = _launching_thread(ops, gk[nobody], gs[nobody], prev_launcher)
        ti = host.index(t_inf)
        ok = (t_inf != 0) & (ti >= 0)
        r = nobody[ok]
        kind[r] = 0
        thread[r] = t_inf[ok]
        next_api[r] = ge[r]  # no launching call: the thread's site at the gap end
        tindex[r] = ti[ok]
        x_end[r] = ge[r]
        hostw[r] = ge[r] - gs[r]
        inferred[r] = True
    # sync refill: the host sat in a blocking sync when the GPU went idle and went straight back
    # to launching after it returned (at r): the first min(B, a - g0) of the host part, B = the
    # blocked time (what it could have queued ahead); host work after the sync longer than
    # SYNC_REFILL_MAX_NS is not the sync's
    late = np.flatnonzero(known & (hostw > 0) & (tindex >= 0))
    extra = None
    if len(late):
        ok, s0, s1 = host.sync.interval_near(tindex[late], gs[late], SYNC_TOLERANCE_NS)
        late, s0, s1 = late[ok], s0[ok], s1[ok]
        a_in = gs[late] + hostw[late]  # the launching call's start, inside the gap
        straight = a_in - np.maximum(s1, gs[late]) <= SYNC_REFILL_MAX_NS
        late, s0, s1 = late[straight], s0[straight], s1[straight]
        budget = np.minimum(s1 - s0, hostw[late])
        extra = (LV_SYNC_BUDGET, tindex[late], gs[late], gs[late] + budget)
    paint_rows = np.flatnonzero((kind == 0) & (tindex >= 0) & (x_end > gs))
    part = host.paint(tindex[paint_rows], gs[paint_rows], x_end[paint_rows], extra,
                      long_window=(hostw[paint_rows] >= DISPATCH_MAX_NS) | inferred[paint_rows]) \
        if len(paint_rows) else empty_part
    return done(tindex, x_end, hostw, dep, part, np.where(has_next, j, -1), inferred)


def _launching_thread(ops: GpuOps, dev: np.ndarray, g0: np.ndarray, prev: np.ndarray | None) -> np.ndarray:
    """global_tid of the thread that launches device ``dev``'s GPU work before the gaps starting
    at ``g0`` (arrays aligned): the launching thread of the last operation on the device that
    starts before ``g0`` and has a known launching call, among ``ops``, else ``prev[dev]`` (the
    earlier slices'); 0 when there is none."""
    out = np.zeros(len(dev), dtype=np.int64)
    if prev is not None and len(prev):
        d = np.asarray(dev, dtype=np.int64)
        ok = (d >= 0) & (d < len(prev))
        out[ok] = prev[d[ok]]
    kn = np.flatnonzero(ops.api >= 0)
    if not len(kn):
        return out
    kdev = ops.device[kn].astype(np.int64)
    ks = ops.start_ns[kn]
    for d in np.unique(dev).tolist():
        m = np.flatnonzero(dev == d)
        sel = kdev == d
        mine = kn[sel]
        if not len(mine):
            continue
        s = ks[sel]
        o = np.argsort(s, kind="stable")
        mine, s = mine[o], s[o]
        prv = np.searchsorted(s, g0[m], side="left") - 1
        good = prv >= 0
        if good.any():
            out[m[good]] = ops.api_tid(mine[prv[good]])
    return out


def last_launchers(ops: GpuOps, ndev: int, prev: np.ndarray | None, prev_start: np.ndarray | None):
    """Per device, the launching thread (global_tid) and start of the last operation with a known
    launching call among ``ops`` (by start; the later in table order on ties) or, where the
    device has none there or only earlier ones, ``prev``/``prev_start`` (carried from the earlier
    time slices)."""
    thr = np.zeros(ndev, dtype=np.int64) if prev is None else prev.copy()
    st = np.full(ndev, np.iinfo(np.int64).min, dtype=np.int64) if prev_start is None else prev_start.copy()
    kn = np.flatnonzero(ops.api >= 0) if len(ops) else np.zeros(0, np.int64)
    if not len(kn):
        return thr, st
    kdev = ops.device[kn]
    ks = ops.start_ns[kn]
    # one linear pass per device (a few; no sort of a slice's million launches): the latest start,
    # the last in table order among equal starts
    devs = _distinct_small(kdev)
    for d in devs:
        if not 0 <= d < ndev:
            continue
        sel = np.flatnonzero(kdev == d) if len(devs) > 1 else None
        sd = ks if sel is None else ks[sel]
        top = int(sd.max())
        if top < st[d]:
            continue
        i = int(np.flatnonzero(sd == top)[-1])
        i = i if sel is None else int(sel[i])
        thr[d] = int(ops.api_tid(kn[i:i + 1])[0])
        st[d] = top
    return thr, st


def _distinct_small(v: np.ndarray) -> list[int]:
    """Sorted distinct values of a column of small ids (devices): a mark per value when they span
    less than 4,096 ids, no sort of the rows (a slice's million operations, issue 50); else
    ``np.unique``."""
    if len(v) == 0:
        return []
    lo, hi = int(v.min()), int(v.max())
    if hi - lo >= 4096:
        return np.unique(v).tolist()
    seen = np.zeros(hi - lo + 1, dtype=bool)
    seen[np.asarray(v, dtype=np.int64) - lo] = True
    return (np.flatnonzero(seen) + lo).tolist()
