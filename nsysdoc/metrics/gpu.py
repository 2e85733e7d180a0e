"""Device activity: busy time as interval unions, communication overlap, idle gaps and their causes.

Definitions (``docs/glossary.md``):

* **GPU busy** of a device = length of the union of its kernel, memcpy and memset intervals inside
  the analysis window, over the window length. Never a sum of durations.
* **Compute** = union of non-NCCL kernels; **communication** = union of NCCL kernels;
  **exposed communication** = communication not overlapped by compute
  (= |compute ∪ comm| − |compute|); **copy-only** = busy time with no kernel running.
* **Idle gap** = a stretch of the window with no GPU operation on the device. Each gap gets one
  cause from the host thread that launched the operation ending the gap (see :func:`classify_gaps`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import intervals as iv
from .ops import KIND_KERNEL, GpuOps

# gap causes (order = reporting order)
CAUSES = ("sync", "input", "launch", "host", "dependency", "tail", "unattributed")
CAUSE_SYNC, CAUSE_INPUT, CAUSE_LAUNCH, CAUSE_HOST, CAUSE_DEP, CAUSE_TAIL, CAUSE_UNATTR = range(7)
CAUSE_LABELS = {
    "sync": "waiting on a host sync",
    "input": "host waiting for input",
    "launch": "launch overhead",
    "host": "host busy (Python/CPU)",
    "dependency": "GPU-side dependency",
    "tail": "after the last GPU operation",
    "unattributed": "no launching API known",
}

#: A blocking sync call counts for a gap when it covers the instant the GPU ran dry, ± this much.
SYNC_TOLERANCE_NS = 10_000
#: An operation already submitted when the GPU went idle, and started within this time of its
#: API call, was simply in flight: the gap is launch latency, not a GPU-side dependency.
LAUNCH_LATENCY_NS = 20_000
#: Share of the host's late window that must be covered by waits / API calls for those causes.
MAJORITY = 0.5


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
    kernels = busy if bool(k.all()) else u(k)
    any_nccl = bool(ops.is_nccl.any())
    compute = u(k & ~ops.is_nccl) if any_nccl else kernels
    comm = u(k & ops.is_nccl) if any_nccl else iv.union([], [], [])
    return Activity(ndev=ndev, busy=busy, kernels=kernels, compute=compute, comm=comm)


def breakdown_ns(act: Activity, gap_unions: dict[str, iv.Union], dev, lo, hi) -> dict[str, np.ndarray]:
    """Exclusive split of ``[lo, hi)`` on device ``dev`` (arrays allowed) — sums to ``hi - lo``.

    compute, exposed communication, copies (no kernel running), then idle split by gap cause.
    """
    dev = np.asarray(dev, dtype=np.int64)
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.maximum(np.asarray(hi, dtype=np.int64), lo)
    compute = act.compute.covered(dev, lo, hi)
    kern = act.kernels.covered(dev, lo, hi)
    busy = act.busy.covered(dev, lo, hi)
    out = {"compute_ns": compute, "exposed_comm_ns": kern - compute, "copy_ns": busy - kern}
    idle_total = (hi - lo) - busy
    assigned = np.zeros_like(idle_total)
    for cause in CAUSES:
        u = gap_unions.get(cause)
        val = u.covered(dev, lo, hi) if u is not None else np.zeros_like(idle_total)
        out[f"idle_{cause}_ns"] = val
        assigned += val
    # idle outside any classified gap cannot happen inside the window; keep the split exact
    out["idle_unattributed_ns"] = out["idle_unattributed_ns"] + (idle_total - assigned)
    return out


@dataclass
class HostUnions:
    """Per-thread unions used to explain gaps. Keys are indices into ``thread_keys``.

    The union of *all* CUDA API calls (millions of rows) is only needed inside the host windows of
    late launches, so it is built on demand from the calls that overlap those windows.
    """

    thread_keys: np.ndarray  # sorted global_tid values
    sync: iv.Union
    waits: iv.Union
    api_thread: np.ndarray   # per CUDA API row: thread index, start, end
    api_start_ns: np.ndarray
    api_end_ns: np.ndarray

    def api_covered(self, thread: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Length of each ``[lo, hi)`` covered by CUDA API calls of ``thread`` (element-wise)."""
        if len(thread) == 0 or len(self.api_start_ns) == 0:
            return np.zeros(len(thread), dtype=np.int64)
        windows = iv.union(thread, lo, hi)
        rows = np.flatnonzero(windows.covered(self.api_thread, self.api_start_ns, self.api_end_ns) > 0)
        calls = iv.union(self.api_thread[rows], self.api_start_ns[rows], self.api_end_ns[rows])
        return calls.covered(thread, lo, hi)

    def index(self, gtid: np.ndarray) -> np.ndarray:
        pos = np.clip(np.searchsorted(self.thread_keys, gtid), 0, max(len(self.thread_keys) - 1, 0))
        ok = (len(self.thread_keys) > 0) & (self.thread_keys[pos] == gtid) if len(self.thread_keys) else np.zeros(len(gtid), bool)
        return np.where(ok, pos, -1)


@dataclass
class Gaps:
    device: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    cause: np.ndarray       # index into CAUSES
    thread: np.ndarray      # global_tid of the launching thread (0 if unknown)
    next_api_start_ns: np.ndarray

    def __len__(self) -> int:
        return len(self.start_ns)

    def unions(self) -> dict[str, iv.Union]:
        """Per-cause unions of the gaps (built once; the device and step breakdowns both use them)."""
        cached = self.__dict__.get("_unions")
        if cached is None:
            cached = {c: iv.union(self.device[self.cause == i], self.start_ns[self.cause == i],
                                  self.end_ns[self.cause == i]) for i, c in enumerate(CAUSES)}
            self.__dict__["_unions"] = cached
        return cached


def classify_gaps(ops: GpuOps, act: Activity, host: HostUnions, w0: int, w1: int) -> Gaps:
    """Find idle gaps per device inside the window and give each one cause.

    For the GPU operation that ends a gap ``[g0, g1)``, launched by thread T whose API call
    started at ``a``:

    1. no more GPU work before the window end → ``tail``; launching API unknown → ``unattributed``;
    2. ``a <= g0`` (already submitted when the GPU went idle): ``launch`` if it started within
       ``LAUNCH_LATENCY_NS`` of its API call (launch latency), else ``dependency`` (it waited on
       other GPU work: an event, another stream or device);
    3. otherwise (``a > g0``) the host launched late. Over the host window ``[g0, a)`` on T (only
       T's own calls and ranges count):
       ``input`` if OS waits (poll, futex, read, ...) or DataLoader NVTX ranges cover at least half;
       else ``sync`` if T was inside a blocking sync call when the GPU went idle (± 10 µs);
       else ``launch`` if CUDA API calls cover at least half (the host was busy issuing work);
       else ``host`` (untraced CPU work: Python, data preparation).
    """
    ndev = act.ndev
    lo = np.full(ndev, w0, dtype=np.int64)
    hi = np.full(ndev, w1, dtype=np.int64)
    gk, gs, ge = iv.gaps(act.busy, ndev, lo, hi)
    n = len(gs)
    cause = np.full(n, CAUSE_UNATTR, dtype=np.int8)
    thread = np.zeros(n, dtype=np.int64)
    next_api = np.full(n, -1, dtype=np.int64)
    if n == 0 or len(ops) == 0:  # no GPU operation at all (e.g. only sync rows): every gap is a tail
        cause[:] = CAUSE_TAIL
        return Gaps(gk, gs, ge, cause, thread, next_api)
    # the operation that starts at the gap end on the same device: look every op up among the
    # (few) gap ends instead of sorting all ops
    span = max(int(ge.max()), int(ops.start_ns.max()) if len(ops) else 0) - w0 + 1
    gap_key = gk * span + (ge - w0)
    order = np.argsort(gap_key, kind="stable")
    sorted_keys = gap_key[order]
    j = np.full(n, -1, dtype=np.int64)
    if len(ops):
        in_range = (ops.start_ns >= w0)
        op_key = ops.device.astype(np.int64) * span + (ops.start_ns - w0)
        pos = np.searchsorted(sorted_keys, op_key)
        pos_c = np.minimum(pos, n - 1)
        hit = np.flatnonzero(in_range & (pos < n) & (sorted_keys[pos_c] == op_key))
        # several ops may start at the same instant: keep the first row (any is a valid witness)
        first = hit[::-1]
        j[order[pos_c[first]]] = first
    has_next = j >= 0
    j = np.maximum(j, 0)
    is_tail = ~has_next
    cause[is_tail] = CAUSE_TAIL
    a = np.where(has_next, ops.api_start_ns[j], -1)
    t = np.where(has_next, ops.api_tid(j), 0)
    known = ~is_tail & (a >= 0)
    thread[known] = t[known]
    next_api[known] = a[known]
    early = known & (a <= gs)  # submitted no later than the GPU went idle: the host was not late
    in_flight = early & (ge - a <= LAUNCH_LATENCY_NS)
    cause[in_flight] = CAUSE_LAUNCH
    cause[early & ~in_flight] = CAUSE_DEP
    late = known & ~early
    if late.any():
        idx = np.flatnonzero(late)
        ti = host.index(t[idx])
        has_t = ti >= 0
        g0, aa = gs[idx], a[idx]
        win = np.maximum(aa - g0, 1)
        tk = np.maximum(ti, 0)
        wait = np.where(has_t, host.waits.covered(tk, g0, aa), 0)
        sync_hit = np.where(has_t, host.sync.covered(tk, g0 - SYNC_TOLERANCE_NS, g0 + SYNC_TOLERANCE_NS) > 0, False)
        api = np.where(has_t, host.api_covered(tk, g0, aa), 0)
        c = np.full(len(idx), CAUSE_HOST, dtype=np.int8)
        c[api >= MAJORITY * win] = CAUSE_LAUNCH
        c[sync_hit] = CAUSE_SYNC
        c[wait >= MAJORITY * win] = CAUSE_INPUT
        cause[idx] = c
    return Gaps(gk, gs, ge, cause, thread, next_api)
