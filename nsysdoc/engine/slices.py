"""One time slice: its GPU operations, device unions, idle gaps and host activity, and its share
of every total (see :mod:`nsysdoc.engine`).

Ownership (each thing is counted by exactly one slice):

* a GPU operation, a CUDA API call, an OS call: the slice its **start** falls in;
* an idle gap: the slice its **end** falls in (the operation that ends it starts there), so the
  gap is whole when it is classified, however many slices it spans;
* time: positional quantities (busy, compute, host sync...) are clipped to the slice's
  ``[c0, c1)``; idle time is counted with the gap that holds it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..metrics import gpu as gpu_m
from ..metrics import intervals as iv
from ..metrics.copies import PAGEABLE_MIN_BYTES, copy_groups, merge_groups
from ..metrics.gpu import CAUSE_HOST, CAUSE_LAUNCH, CAUSE_SETUP, CAUSES, SYNC_TOLERANCE_NS
from ..metrics.host import SCALAR_READ_MAX_BYTES, host_activity_from
from ..metrics.ops import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET
from ..metrics.steps import assign_ops_to_steps
from ..trace import schema as S
from ..trace.tables import unique_ints
from . import fill as fill_m
from .attribute import (SELECTORS, SiteSums, accumulate, add_sites, gpu_labels, merge_sites, site_counts, site_index,
                        site_rows)
from .data import (FLAG_DTOH, FLAG_FP32, FLAG_IN_WINDOW, FLAG_LOW_OCC, FLAG_PAGEABLE, FLAG_SCALAR, FLAG_TUNING,
                   FLAG_UNDERFILLED, NEG, POS, Ops, blocking_of, in_sorted, in_window, osrt_rows, read_ops,
                   runtime_rows)

NC = len(CAUSES)


@dataclass
class Carry:
    """What one slice hands on to the next (small, whatever the capture's length)."""

    #: per device: end of the GPU's last busy stretch so far (idle gaps start there)
    last_end: np.ndarray
    #: operations still running at the slice end
    ops: Ops | None = None
    #: scalar-read candidates whose thread's next CUDA call is not read yet: (op step, thread, api start)
    pending: list = field(default_factory=list)
    #: all devices merged (the steady-state window): end of the last busy stretch, busy time before it
    merged_end: int = NEG
    merged_busy: int = 0
    #: per device: launching thread (global_tid, 0: none yet) and start of the last operation so
    #: far with a known launching call (gaps ended by an operation nobody launched are read from it)
    launcher: np.ndarray | None = None
    launcher_start: np.ndarray | None = None

    def copy(self) -> "Carry":
        return Carry(self.last_end.copy(), self.ops, list(self.pending), self.merged_end, self.merged_busy,
                     None if self.launcher is None else self.launcher.copy(),
                     None if self.launcher_start is None else self.launcher_start.copy())


@dataclass
class Window:
    """Per-window totals of one slice (added over slices; see :class:`nsysdoc.engine.run.Totals`)."""

    ndev: int
    kernel_count: np.ndarray = None
    copy_count: np.ndarray = None
    start_count: np.ndarray = None     # operations starting in [w0, w1) (not counting those at w1)
    gap_count: np.ndarray = None
    busy: np.ndarray = None
    kern: np.ndarray = None
    compute: np.ndarray = None
    comm: np.ndarray = None
    idle: np.ndarray = None            # (ndev, NC) idle time by class
    # kernels in the window (compact: for exact per-name statistics)
    k_dur: list = field(default_factory=list)
    k_name: list = field(default_factory=list)
    k_short: list = field(default_factory=list)
    k_nccl: list = field(default_factory=list)
    k_tune: list = field(default_factory=list)
    l_api: list = field(default_factory=list)
    l_queue: list = field(default_factory=list)
    copies: dict = field(default_factory=dict)
    sync_by_thread: np.ndarray = None
    sync_calls: dict = field(default_factory=dict)    # name_id -> [count, total, max]
    alloc_calls: dict = field(default_factory=dict)
    gaps_n: int = 0
    gaps_by_cause: np.ndarray = None
    longest: list = field(default_factory=list)       # candidates: (dur, device, start, end, cause, split, thread)
    #: gaps with the most GPU-side dependency time in the window, and the operation ending each
    #: (``_dependency_gaps``): (dependency ns, device, start, end, stream, kind, row, name id,
    #: op start, launching call's runtime row, its start, its end, its thread's global_tid)
    dep_longest: list = field(default_factory=list)
    launch_gaps: list = field(default_factory=list)   # clipped durations of gaps whose class is launch
    host_gaps: list = field(default_factory=list)     # host-class time of gaps with any
    pageable_wall: np.ndarray = None
    fp32_wall: np.ndarray = None
    dtoh_wall: np.ndarray = None
    dtoh_bytes: int = 0
    dtoh_count: int = 0
    #: attribution: selector -> {site row: [ns, count]} (see nsysdoc.engine.attribute.SELECTORS)
    where: dict = field(default_factory=dict)
    # under-filled kernels (nsysdoc.engine.fill), per device: idle-SM time (ns, float), time with
    # one running, SM Active samples then (sum, count); low-occupancy kernels' union
    uf_idle: np.ndarray = None
    uf_wall: np.ndarray = None
    uf_smact: np.ndarray = None
    uf_smact_n: np.ndarray = None
    lowocc_wall: np.ndarray = None
    #: (name code, launch code, device) key -> [launches, time ns, idle-SM share ns]
    uf_groups: dict = field(default_factory=dict)
    #: hardware counters per kernel name (issue 47): per name code, sums and counts of the GPU
    #: metrics samples inside its executions (``metrics.gpu_metrics.kernel_counter_sums``), or None
    k_counters: np.ndarray = None

    def __post_init__(self) -> None:
        n = self.ndev
        for f in ("kernel_count", "copy_count", "start_count", "gap_count", "busy", "kern", "compute", "comm", "pageable_wall",
                  "fp32_wall", "dtoh_wall", "uf_wall", "uf_smact_n", "lowocc_wall"):
            if getattr(self, f) is None:
                setattr(self, f, np.zeros(n, dtype=np.int64))
        for f in ("uf_idle", "uf_smact"):
            if getattr(self, f) is None:
                setattr(self, f, np.zeros(n, dtype=np.float64))
        if self.idle is None:
            self.idle = np.zeros((n, NC), dtype=np.int64)
        if self.gaps_by_cause is None:
            self.gaps_by_cause = np.zeros(NC, dtype=np.int64)

    def add(self, o: "Window") -> None:
        for f in ("kernel_count", "copy_count", "start_count", "gap_count", "busy", "kern", "compute", "comm", "idle",
                  "pageable_wall", "fp32_wall", "dtoh_wall", "gaps_by_cause", "uf_idle", "uf_wall", "uf_smact",
                  "uf_smact_n", "lowocc_wall"):
            setattr(self, f, getattr(self, f) + getattr(o, f))
        for k, (n, t, r) in o.uf_groups.items():
            acc = self.uf_groups.get(k)
            if acc is None:
                self.uf_groups[k] = [n, t, r]
            else:
                acc[0] += n
                acc[1] += t
                acc[2] += r
        for f in ("k_dur", "k_name", "k_short", "k_nccl", "k_tune", "l_api", "l_queue", "launch_gaps", "host_gaps"):
            getattr(self, f).extend(getattr(o, f))
        merge_groups(self.copies, o.copies)
        merge_sites(self.where, o.where)
        _merge_calls(self.sync_calls, o.sync_calls)
        _merge_calls(self.alloc_calls, o.alloc_calls)
        if o.sync_by_thread is not None:
            self.sync_by_thread = o.sync_by_thread if self.sync_by_thread is None else self.sync_by_thread + o.sync_by_thread
        self.gaps_n += o.gaps_n
        self.longest = _top_gaps(self.longest + o.longest)
        self.dep_longest = _top_gaps(self.dep_longest + o.dep_longest)
        self.dtoh_bytes += o.dtoh_bytes
        self.dtoh_count += o.dtoh_count
        if o.k_counters is not None:
            self.k_counters = o.k_counters if self.k_counters is None else self.k_counters + o.k_counters


def _merge_calls(a: dict, b: dict) -> None:
    for k, (n, tot, mx) in b.items():
        if k in a:
            a[k][0] += n
            a[k][1] += tot
            a[k][2] = max(a[k][2], mx)
        else:
            a[k] = [n, tot, mx]


#: longest gaps kept
TOP_GAPS = 20


def _top_gaps(cands: list) -> list:
    """Longest first; ties: device order, then time order."""
    cands.sort(key=lambda g: (-g[0], g[1], g[2]))
    return cands[:TOP_GAPS]


@dataclass
class Global:
    """Totals that do not depend on the analysis window (added in place by every slice)."""

    nsteps: int
    ndev: int
    nthreads: int
    step_kernels: np.ndarray = None
    step_scalar: np.ndarray = None
    step_busy: np.ndarray = None
    step_kern: np.ndarray = None
    step_compute: np.ndarray = None
    step_idle: np.ndarray = None
    step_before_busy: np.ndarray = None
    step_sync: np.ndarray = None
    step_dtoh_bytes: np.ndarray = None
    step_dtoh_exposed: np.ndarray = None
    step_uf: np.ndarray = None              # idle-SM time while under-filled kernels run (ns, float)
    scalar_reads: int = 0
    setup_idle: np.ndarray = None          # per device, set-up idle time over the GPU span
    busy_span: np.ndarray = None           # per device, busy time over the whole capture (union)
    setup_gaps: list = field(default_factory=list)    # (start, end, setup ns) of gaps with >= 1 ms of set-up
    setup_pieces: list = field(default_factory=list)  # (device, start, end): set-up idle time, positionally
    idle_launch_rows: list = field(default_factory=list)
    setup_calls: list = field(default_factory=list)   # set-up CUDA API rows: (pos, name_id, kind, start, end)
    alloc_rows: list = field(default_factory=list)    # allocation API rows: (thread, name_id, start, end)
    launch_threads: list = field(default_factory=list)  # thread indexes that launched GPU operations
    merged_idle: list = field(default_factory=list)   # (start, end, busy before start) of long all-device idle
    merged_marks: dict = field(default_factory=dict)  # time -> all-device busy time before it
    merged_total: int = 0                              # all-device busy time over the capture
    captures: dict = field(default_factory=dict)
    #: hardware counters per operator (issue 47): per operator name code, the sums and counts of
    #: the GPU metrics samples inside the kernels it launched itself (innermost range), or None
    op_counters: np.ndarray = None

    def __post_init__(self) -> None:
        z = lambda: np.zeros(self.nsteps, dtype=np.int64)  # noqa: E731
        for f in ("step_kernels", "step_scalar", "step_busy", "step_kern", "step_compute", "step_before_busy",
                  "step_sync", "step_dtoh_bytes", "step_dtoh_exposed"):
            setattr(self, f, z())
        self.step_idle = np.zeros((self.nsteps, NC), dtype=np.int64)
        self.step_uf = np.zeros(self.nsteps, dtype=np.float64)
        self.setup_idle = np.zeros(self.ndev, dtype=np.int64)
        self.busy_span = np.zeros(self.ndev, dtype=np.int64)


class Context:
    """What every slice needs: the trace, the plan and fixed per-name flags."""

    def __init__(self, trace, plan, ndev: int) -> None:
        from ..metrics.kernels import is_fp32_gemm

        self.trace = trace
        self.plan = plan
        self.ndev = ndev
        st = trace.strings
        self.nccl = st.flags(lambda v: S.NCCL_KERNEL.match(v) is not None)
        self.lib_init = st.flags(lambda v: v[:2] in ("cu", "hi") and S.LIB_INIT_APIS.match(S.strip_api_suffix(v)) is not None)
        self.fp32 = st.flags(is_fp32_gemm)
        self.thread_keys = np.asarray(trace.threads["global_tid"], dtype=np.int64)
        self.pageable_api = np.asarray(trace.derived.get("pageable_async_api", np.zeros(0, np.int64)), dtype=np.int64)
        #: kernel names as dense codes (uint16 when there are fewer than 65,536): the per-kernel
        #: arrays kept for exact per-name statistics are then 2 bytes a name
        self.name_ids = np.asarray(trace.derived.get("kernel_name_ids", np.zeros(0, np.int64)), dtype=np.int64)
        self.short_ids = np.asarray(trace.derived.get("kernel_short_ids", np.zeros(0, np.int64)), dtype=np.int64)
        #: launch configurations per device: under-filled and low-occupancy kernels
        self.fill = fill_m.FillContext(trace, ndev)
        self._luts: dict = {}
        #: GPU metrics samples per device index, for the counters per kernel name (issue 47)
        self.counters = _kernel_counters_context(trace)
        w0, w1 = plan.window
        self.w0, self.w1 = w0, w1
        s0, s1 = plan.span
        self.active = w0 is not None and w1 is not None and w1 > w0 and ndev > 0
        self.o0 = min(w0, s0) if self.active and s0 is not None else w0
        self.o1 = max(w1, s1) if self.active and s1 is not None else w1
        self.has_markers = plan.steps.has_markers
        st_t = plan.steps.table
        self.step_start = np.asarray(st_t["start_ns"], dtype=np.int64) if len(st_t) else np.zeros(0, np.int64)
        self.step_end = np.asarray(st_t["end_ns"], dtype=np.int64) if len(st_t) else np.zeros(0, np.int64)
        self.step_thread = trace_thread_index(self.thread_keys, np.asarray(st_t["global_tid"], dtype=np.int64)) \
            if len(st_t) else np.zeros(0, np.int64)
        self.step_primary = np.asarray(st_t["primary"], dtype=bool) if len(st_t) else np.zeros(0, bool)
        #: process of each thread (an index over the processes of ``thread_keys``) and of each
        #: step's thread (-1 unknown): a step's host sync is the union over its process's threads
        #: that launch GPU work or run steps (``host_thread``)
        self.thread_proc = np.unique(S.decode_pid(self.thread_keys), return_inverse=True)[1].astype(np.int64) \
            if len(self.thread_keys) else np.zeros(0, np.int64)
        self.host_thread = np.zeros(len(self.thread_keys), dtype=bool)
        lt = np.asarray(getattr(plan, "launch_threads", np.zeros(0, np.int64)), dtype=np.int64)
        self.host_thread[lt[lt < len(self.thread_keys)]] = True
        self.host_thread[self.step_thread[(self.step_thread >= 0) & (self.step_thread < len(self.thread_keys))]] = True
        self.step_proc = np.where(self.step_thread >= 0, self.thread_proc[np.maximum(self.step_thread, 0)], -1) \
            if len(self.step_thread) and len(self.thread_proc) else np.full(len(self.step_thread), -1, np.int64)

    def _code(self, ids: np.ndarray, values: np.ndarray) -> np.ndarray:
        dt = np.uint16 if len(ids) < (1 << 16) else np.int32
        lut = self._luts.get(id(ids))
        if lut is None:
            # a table indexed by string id when ids are not too sparse, else a binary search
            top = int(ids.max()) + 1 if len(ids) else 0
            lut = np.zeros(top, dtype=dt) if top <= max(1 << 22, 16 * len(ids)) else False
            if lut is not False:
                lut[ids] = np.arange(len(ids), dtype=dt)
            self._luts[id(ids)] = lut
        if lut is not False and len(values) and int(values.min()) >= 0:
            return lut[values]
        return np.searchsorted(ids, values).astype(dt)

    def name_code(self, values: np.ndarray) -> np.ndarray:
        return self._code(self.name_ids, values)

    def short_code(self, values: np.ndarray) -> np.ndarray:
        return self._code(self.short_ids, values)

    def first_carry(self) -> Carry:
        start = self.o0 if self.o0 is not None else 0
        return Carry(last_end=np.full(self.ndev, start, dtype=np.int64))


def _kernel_counters_context(trace) -> dict:
    """Per device index, its GPU metrics samples (:func:`nsysdoc.metrics.gpu_metrics.device_counters`);
    empty without GPU metrics."""
    from ..metrics.gpu_metrics import device_counters

    gm = trace.gpu_metrics
    if gm is None or not len(gm) or not len(trace.devices):
        return {}
    return device_counters(gm, trace.devices["device_id"])


def _slice_counters(ctx: "Context", ops, cache: dict):
    """(device of each operation of the slice, -1 unless an owned kernel; the index ranges of the
    samples inside them: ``metrics.gpu_metrics.execution_bounds``), found once per slice for the
    kernel and the operator sums."""
    got = cache.get("counters", False)
    if got is False:
        from ..metrics.gpu_metrics import execution_bounds

        dev = np.where((ops.kind == KIND_KERNEL) & ops.owned, ops.device.astype(np.int64), -1)
        got = cache["counters"] = (dev, execution_bounds(ctx.counters, dev, ops.start_ns, ops.end_ns))
    return got


def _kernel_counter_sums(ctx: "Context", ops, kin: np.ndarray, cache: dict | None = None):
    """Per kernel name code, the sums and counts of the samples inside the executions of the
    window's kernels ``kin`` of the slice (``metrics.gpu_metrics.group_sums``)."""
    from ..metrics.gpu_metrics import group_sums

    rows = np.arange(len(ops))[kin]
    dev, bounds = _slice_counters(ctx, ops, {} if cache is None else cache)
    return group_sums(ctx.counters, bounds, dev, rows, ctx.name_code(ops.name_id[rows]), max(len(ctx.name_ids), 1))


def _operator_counter_sums(ctx: "Context", view, ops, rng: np.ndarray, tot, cache: dict) -> None:
    """Adds to ``tot.op_counters``, per operator name code, the sums and counts of the samples inside
    the slice's kernels whose innermost operator range is ``rng`` (the self attribution of the
    operator view's ``self_gpu_ms``)."""
    from ..metrics.gpu_metrics import group_sums

    k = np.flatnonzero(ops.owned & (ops.kind == KIND_KERNEL) & (np.asarray(rng) >= 0))
    if not len(k):
        return
    code = np.asarray(getattr(view, "attr", view).ops.name, dtype=np.int64)[np.asarray(rng)[k]]
    n = max(len(ctx.plan.attr.names), int(code.max()) + 1)
    dev, bounds = _slice_counters(ctx, ops, cache)
    part = group_sums(ctx.counters, bounds, dev, k, code, n)
    if part is None:
        return
    have = tot.op_counters
    if have is None:
        tot.op_counters = part
        return
    if len(have) < len(part):  # operator names met since (the sliced attributor adds them as it goes)
        have = np.vstack([have, np.zeros((len(part) - len(have), have.shape[1]))])
    have[:len(part)] += part
    tot.op_counters = have


def trace_thread_index(keys: np.ndarray, gtid: np.ndarray) -> np.ndarray:
    if not len(keys):
        return np.full(len(gtid), -1, dtype=np.int64)
    pos = np.clip(np.searchsorted(keys, gtid), 0, len(keys) - 1)
    return np.where(keys[pos] == gtid, pos, -1)


# ---------------------------------------------------------------------------------------------
# phase A: the slice's operations, unions, gaps and host activity
# ---------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class SliceState:
    """What phase A (:func:`phase_a`) found in one slice; phase B (:func:`next_carry`,
    :func:`global_totals`, :func:`window_totals`) reads it. Built by keyword only: twelve fields
    of which eight may be None were too easy to pass in the wrong order."""

    c0: int
    c1: int
    last: bool
    ops: Ops                  # the operations the slice owns (start in [c0, c1))
    carried: Ops | None       # operations from earlier slices still running at c0
    act: gpu_m.Activity | None
    gaps: gpu_m.Gaps | None
    host: gpu_m.HostActivity | None
    rt: dict | None
    blocking: np.ndarray | None
    osrt: dict | None
    lo_dev: np.ndarray | None
    rt_lo: int = NEG          # the CUDA API rows read are all those overlapping [rt_lo, c1)
    #: attribution of the slice's operations (site rows, innermost operator range), computed once
    attr_cache: dict = field(default_factory=dict)
    #: the idle-SM sweep of its under-filled kernels (nsysdoc.engine.fill), computed once
    fill_cache: dict = field(default_factory=dict)


def _op_flags(ctx: Context, ops: Ops) -> None:
    """Flags of newly read operations (owned ones), fixed for their whole life."""
    n = len(ops)
    if n == 0:
        return
    fl = np.zeros(n, dtype=np.int16)
    fl[in_window(ops.start_ns, ops.end_ns, ctx.w0, ctx.w1)] |= FLAG_IN_WINDOW
    m = ops.kind == KIND_MEMCPY
    if m.any():
        host = ops.host_kind == S.MEM_PAGEABLE
        # staged through the driver's buffer: small ones are latency, which pinning does not cut
        fl[m & host & np.isin(ops.copy_kind, (S.COPY_HTOD, S.COPY_DTOH))
           & (ops.nbytes >= PAGEABLE_MIN_BYTES)] |= FLAG_PAGEABLE
        fl[m & (ops.copy_kind == S.COPY_DTOH) & (ops.nbytes > SCALAR_READ_MAX_BYTES)] |= FLAG_DTOH
    k = ops.kind == KIND_KERNEL
    if k.any():
        tune = np.zeros(n, dtype=bool)
        if ctx.plan.tuning is not None:
            ka = np.flatnonzero(k & (ops.api >= 0))
            if len(ka):
                t, s = ops.api_thread[ka].astype(np.int64), ops.api_start_ns[ka]
                tune[ka[ctx.plan.tuning.contains(t, s)]] = True
        fl[tune] |= FLAG_TUNING
        fl[k & ctx.fp32(ops.name_id) & ~tune] |= FLAG_FP32
        fl |= ctx.fill.flags(ops, k, tune)
    ops.flags = fl
    if ctx.has_markers:
        when = np.where(ops.api >= 0, ops.api_start_ns, ops.start_ns)
        ops.step = assign_ops_to_steps(ctx.plan.steps, ops.proc, when)


def _in_window_of(ctx: Context, ops: Ops, w0, w1) -> np.ndarray:
    """:func:`in_window` of the operations for ``[w0, w1)``: for the run's window, the flag
    :func:`_op_flags` set once per slice."""
    if (w0, w1) == (ctx.w0, ctx.w1) and ops.flags is not None:
        return (ops.flags & FLAG_IN_WINDOW) != 0
    return in_window(ops.start_ns, ops.end_ns, w0, w1)


def host_range(c0: int, c1: int, lo_min: int) -> tuple[int, int]:
    """The host rows a slice ``[c0, c1)`` reads: from its earliest gap start ``lo_min`` (or ``c0``)
    to its end, widened by the sync tolerance."""
    lo = NEG if c0 <= NEG else min(c0, lo_min) - SYNC_TOLERANCE_NS
    hi = POS if c1 >= POS else c1 + SYNC_TOLERANCE_NS
    return lo, hi


def _host(ctx: Context, lo: int, hi: int):
    """Host rows overlapping ``[lo, hi)`` (the CUDA API read widened to every OS wait read, so that
    waits inside CUDA calls are seen) and the host activity built from them. The blocking-sync
    union is closed on the left: while a blocking call read starts before the read's start, the
    read is widened (a union piece may continue through calls that ended earlier)."""
    trace, plan = ctx.trace, ctx.plan
    while True:
        os_ = osrt_rows(trace, lo, hi)
        r_lo, r_hi = lo, hi
        w = np.asarray(os_["is_wait"], dtype=bool)
        if w.any():
            r_lo = min(r_lo, int(os_["start_ns"][w].min()))
            r_hi = max(r_hi, int(os_["end_ns"][w].max()) + 1)
        rt = runtime_rows(trace, r_lo, r_hi)
        blocking = blocking_of(rt, ctx.pageable_api)
        if r_lo <= NEG or not blocking.any() or int(rt["start_ns"][blocking].min()) >= r_lo:
            break
        lo = max(NEG, r_lo - max(hi - r_lo, 1 << 20))
    setup_launch = in_sorted(plan.setup_launch, rt["pos"]) if len(plan.setup_launch) else None
    stretches = _setup_stretches(ctx, rt, r_lo, r_hi)
    host = host_activity_from(rt, blocking, os_, plan.loader_ranges, plan.setup_ranges[:3], ctx.thread_keys,
                              setup_launch, stretches=stretches)
    return rt, blocking, os_, host, r_lo


def _setup_stretches(ctx: Context, rt: dict, lo: int, hi: int) -> tuple:
    """Set-up stretches (``nsysdoc.metrics.host.setup_stretches``) of the rows ``rt`` read for
    ``[lo, hi)``, with the CUDA calls within ``SETUP_CLUSTER_GAP_NS`` beyond it on either side as
    well, so that a stretch is the same whichever slice paints it (only those margins are read
    again). Only set-up calls can start or end a stretch, so only they are kept: set-up API calls
    and the plan's set-up launches (the rows ``levels_of`` paints ``LV_SETUP_API``)."""
    from ..metrics.host import SETUP_CLUSTER_GAP_NS, setup_stretches

    plan = ctx.plan
    cols = ("pos", "start_ns", "end_ns", "thread", "name_id")

    def setup_rows(p):
        m = np.asarray(p["api_kind"]) == S.API_SETUP
        if len(plan.setup_launch):
            m |= in_sorted(plan.setup_launch, p["pos"])
        return {c: np.asarray(p[c])[m] for c in cols}

    keep = [setup_rows(rt)]
    if not len(keep[0]["pos"]) and hi - lo > SETUP_CLUSTER_GAP_NS:
        # no set-up call among the rows read: a stretch of the margins' calls alone ends before
        # lo or starts after hi (a call that reaches into [lo, hi] is a row read), and cannot
        # join the two margins across more than SETUP_CLUSTER_GAP_NS, so it paints nothing here:
        # the margins are not read (issue 50)
        return (np.zeros(0, np.int64),) * 3
    if lo > NEG:
        keep.append(setup_rows(runtime_rows(ctx.trace, max(NEG, lo - SETUP_CLUSTER_GAP_NS), lo)))
    if hi < POS:
        keep.append(setup_rows(runtime_rows(ctx.trace, hi, min(POS, hi + SETUP_CLUSTER_GAP_NS))))
    allr = {c: np.concatenate([k[c] for k in keep]) for c in cols}
    if len(allr["pos"]) < 2:
        return (np.zeros(0, np.int64),) * 3
    _, first = np.unique(allr["pos"], return_index=True)  # the margins overlap the rows read
    allr = {c: v[first] for c, v in allr.items()}
    s, e = allr["start_ns"].astype(np.int64), allr["end_ns"].astype(np.int64)
    return setup_stretches(allr["thread"], s, e, np.full(len(s), gpu_m.LV_SETUP_API, dtype=np.int8),
                           ctx.lib_init(allr["name_id"]))


@dataclass
class Prepared:
    """What a slice reads and computes before it needs the previous slice's carry: its own
    operations (flags set) and their device unions (unclipped). :func:`run` builds the next
    slice's on a worker thread while the current one runs (numpy's sorts and copies release the
    GIL)."""

    c0: int
    c1: int
    ops: Ops
    own: gpu_m.Activity | None
    #: the operations' attribution at their launch (:func:`op_sites`), when there is an attributor
    sites: tuple | None = None
    #: the attributor the slice asks (:meth:`nsysdoc.engine.attribute.Attributor.for_slice`)
    view: object = None
    #: (w0, w1, the operations' time per site and selector in that window: :func:`_where_ops`)
    where_ops: tuple | None = None


def prepare(ctx: Context, c0: int, c1: int) -> Prepared:
    ops = read_ops(ctx.trace, c0, c1, ctx.nccl)
    _op_flags(ctx, ops)
    own = gpu_m.device_activity(ops, ctx.ndev, None, None) if ctx.active else None
    # the attribution lookups need only the operations: on the worker thread too (mostly
    # searchsorted and gathers over the range forests)
    view = slice_attributor(ctx, c0, c1, ops) if ctx.plan.attr is not None else None
    sites = _sites_of(view, ops) if view is not None and len(ops) else None
    where_ops = None
    if sites is not None:
        # what needs only the operations, here too: the run's window's time per site
        if ctx.w0 is not None and ctx.w1 is not None:
            inw = ops.owned & _in_window_of(ctx, ops, ctx.w0, ctx.w1)
            where_ops = (ctx.w0, ctx.w1, _where_ops(ops, inw, *sites[2]))
        if hasattr(view, "prepare"):  # and the operator view's part (sliced attribution)
            view.prepare(sites[1], sites[0], ops.end_ns - ops.start_ns, gpu_labels(ops.kind, ops.name_id, ops.copy_kind),
                         sites[2])
    return Prepared(c0, c1, ops, own, sites, view, where_ops)


def phase_a(ctx: Context, c0: int, c1: int, carry: Carry, last: bool, prep: Prepared | None = None) -> SliceState:
    """Phase A of the slice ``[c0, c1)`` (``last``: the capture's last slice): what it holds.

    The GPU operations that start in it (``prep``, read ahead by :func:`prepare`, or read now)
    and those still running from earlier slices (``carry.ops``); the devices' busy unions; the
    idle gaps that end in it (a gap still open at ``c1`` is the next slice's, unless this is the
    last one), classified with the host rows (CUDA API and OS calls) around their whole extent.
    Nothing is added to a total here: phase B does that (:func:`next_carry`, what the next slice
    needs; :func:`global_totals` and :func:`window_totals`, the slice's share of every total).
    A context without GPU activity (``ctx.active`` false) gives the operations only. A slice can
    be run again from its saved carry (timeline windows, the event tables, Perfetto): the same
    state each time."""
    if prep is None or (prep.c0, prep.c1) != (c0, c1):
        prep = prepare(ctx, c0, c1)
    ops = prep.ops
    carried = carry.ops if carry.ops is not None and len(carry.ops) else None
    cache = {"ops": prep.sites} if prep.sites is not None else {}  # (op_sites, found in prepare)
    if prep.view is not None:
        cache["view"] = prep.view
    if prep.where_ops is not None:
        cache["where_ops"] = prep.where_ops
    if not ctx.active:
        return SliceState(c0=c0, c1=c1, last=last, ops=ops, carried=carried, act=None, gaps=None, host=None, rt=None,
                          blocking=None, osrt=None, lo_dev=None, attr_cache=cache)
    ndev = ctx.ndev
    # a device's gaps start where it last went idle, or at the slice start when it is busy there;
    # never before the span's start (``last_end`` starts there)
    lo_dev = np.maximum(np.minimum(carry.last_end, c0), ctx.o0) if c0 > NEG else carry.last_end.copy()
    lo_min = int(lo_dev.min())
    act = gpu_m.extend_activity(prep.own, ops, carried, lo_min, ctx.o1)
    hi = np.full(ndev, ctx.o1 if last else c1, dtype=np.int64)
    gk, gs, ge = iv.gaps(act.busy, ndev, np.maximum(lo_dev, lo_min), hi)
    if not last:  # the stretch after the last operation is not a gap yet: the next slice has its end
        keep = ge < c1
        gk, gs, ge = gk[keep], gs[keep], ge[keep]
    h_lo, h_hi = host_range(c0, c1, int(gs.min()) if len(gs) else lo_min)
    rt, blocking, os_, host, r_lo = _host(ctx, h_lo, h_hi)
    gaps = gpu_m.classify_found_gaps(ops, host, gk, gs, ge, lo_min, prev_launcher=carry.launcher)
    return SliceState(c0=c0, c1=c1, last=last, ops=ops, carried=carried, act=act, gaps=gaps, host=host, rt=rt,
                      blocking=blocking, osrt=os_, lo_dev=lo_dev, rt_lo=r_lo, attr_cache=cache)


# ---------------------------------------------------------------------------------------------
# phase B: what the slice hands on, and its share of every total
# ---------------------------------------------------------------------------------------------
def next_carry(ctx: Context, st: SliceState, carry: Carry) -> Carry:
    """What the next slice needs from this one (phase B): per device the time its GPU last went
    idle, the last launching thread, and the operations still running at ``c1``."""
    ops = st.ops
    out = Carry(last_end=carry.last_end.copy(), pending=list(carry.pending), merged_end=carry.merged_end,
                merged_busy=carry.merged_busy)
    out.launcher, out.launcher_start = gpu_m.last_launchers(ops, ctx.ndev, carry.launcher, carry.launcher_start)
    if len(ops):
        nonempty = ops.end_ns > ops.start_ns
        if nonempty.any():
            np.maximum.at(out.last_end, ops.device[nonempty].astype(np.int64), ops.end_ns[nonempty])
    if not st.last:
        parts = []
        for p in (st.carried, ops):
            if p is not None and len(p):
                run = np.flatnonzero(p.end_ns > st.c1)
                if len(run):
                    parts.append(p.take(run))
        if parts:
            out.ops = Ops.concat(parts) if len(parts) > 1 else parts[0]
            out.ops.owned = np.zeros(len(out.ops), dtype=bool)
    return out


def _both(st: SliceState) -> list[Ops]:
    return [p for p in (st.carried, st.ops) if p is not None and len(p)]


def window_totals(ctx: Context, st: SliceState, w0, w1) -> Window:
    """The slice's share of the per-window totals for the window ``[w0, w1)``."""
    ndev = ctx.ndev
    win = Window(ndev)
    ops = st.ops
    own = ops.owned
    if w0 is None or w1 is None:
        return win
    inw = own & _in_window_of(ctx, ops, w0, w1)
    is_k = ops.kind == KIND_KERNEL
    dev = ops.device
    kin = _sel(inw & is_k)
    win.kernel_count = _count(dev[kin], ndev)
    win.copy_count = _count(dev[inw & ~is_k], ndev)
    sc = own & (ops.start_ns >= w0) & (ops.start_ns < w1)
    win.start_count = _count(dev[_sel(sc)], ndev)
    # kernels: durations and names; launches: API and queue times
    if len(win.k_dur) or win.kernel_count.sum():
        dur = ops.end_ns[kin] - ops.start_ns[kin]
        win.k_dur.append(_compact(dur))
        win.k_name.append(ctx.name_code(ops.name_id[kin]))
        win.k_short.append(ctx.short_code(ops.short_id[kin]))
        win.k_nccl.append(ops.is_nccl[kin].copy())
        win.k_tune.append((ops.flags[kin] & FLAG_TUNING) != 0)
        api = ops.api[kin]
        la = _sel(api >= 0)
        ae, ast_, st_ = ops.api_end[kin][la], ops.api_start_ns[kin][la], ops.start_ns[kin][la]
        if len(ae):
            win.l_api.append(_compact(ae - ast_))
            win.l_queue.append(_compact(np.maximum(st_ - ae, 0)))
        if ctx.counters:
            win.k_counters = _kernel_counter_sums(ctx, ops, kin, st.attr_cache)
    mi = np.flatnonzero(inw & (ops.kind == KIND_MEMCPY))
    if len(mi):
        win.copies = copy_groups(ops.copy_kind[mi], ops.host_kind[mi], ops.nbytes[mi], ops.end_ns[mi] - ops.start_ns[mi])
    di = np.flatnonzero(inw & ((ops.flags & FLAG_DTOH) != 0))
    win.dtoh_bytes = int(ops.nbytes[di].sum())
    win.dtoh_count = len(di)
    if st.act is None:
        return win
    c0, c1 = st.c0, st.c1
    devs = np.arange(ndev)
    a, b = max(w0, c0), min(w1, c1)
    if b > a:
        lo, hi = np.full(ndev, a), np.full(ndev, b)
        win.busy = st.act.busy.covered(devs, lo, hi)
        win.kern = st.act.kernels.covered(devs, lo, hi)
        win.compute = st.act.compute.covered(devs, lo, hi)
        win.comm = st.act.comm.covered(devs, lo, hi)
        # wall-clock union of selected operations (every op in the window, owned or still running)
        for flag, attr, no_k in ((FLAG_PAGEABLE, "pageable_wall", False), (FLAG_FP32, "fp32_wall", False),
                                 (FLAG_DTOH, "dtoh_wall", True), (FLAG_LOW_OCC, "lowocc_wall", False)):
            sd, ss_, se_ = [], [], []
            for p in _both(st):
                sel_win = _in_window_of(ctx, p, w0, w1)
                m = np.flatnonzero(sel_win & ((p.flags & flag) != 0))
                if len(m):
                    sd.append(p.device[m]); ss_.append(p.start_ns[m]); se_.append(p.end_ns[m])
            if not sd:
                continue
            dd, s_, e_ = np.concatenate(sd), np.concatenate(ss_), np.concatenate(se_)
            u = iv.union(dd, np.maximum(s_, max(w0, a)), np.minimum(e_, b))
            tot = u.total_by_key(ndev)
            if no_k and len(u):
                cov = st.act.kernels.covered(u.keys, u.starts, u.ends)
                tot = tot - np.bincount(u.keys, weights=cov, minlength=ndev)[:ndev].astype(np.int64)
            setattr(win, attr, tot)
        if ctx.fill.active:
            fill_m.window(ctx, st, win, w0, w1, a, b)
    g = st.gaps
    if g is not None and len(g):
        win.idle = g.amounts_in(devs, np.full(ndev, w0), np.full(ndev, w1)).astype(np.int64)
        sel = np.flatnonzero((g.start_ns < w1) & (g.end_ns > w0))
        win.gap_count = np.bincount(g.device[sel].astype(np.int64), minlength=ndev)[:ndev].astype(np.int64)
        if len(sel):
            _gap_totals(win, g, sel, w0, w1)
            _dependency_gaps(win, g, sel, w0, w1, st.ops)
    # host: sync time per thread, sync and allocation calls by name
    if st.host is not None:
        nth = len(ctx.thread_keys)
        if b > a:
            win.sync_by_thread = st.host.sync.covered(np.arange(nth), np.full(nth, a), np.full(nth, b))
        rt = st.rt
        mine = (rt["start_ns"] >= c0) & (rt["start_ns"] < c1)
        over = mine & (rt["start_ns"] < w1) & (rt["end_ns"] > w0)
        for mask, out in ((st.blocking, win.sync_calls), (rt["api_kind"] == S.API_ALLOC, win.alloc_calls)):
            m = np.flatnonzero(over & mask)
            if len(m):
                dur = np.minimum(rt["end_ns"][m], w1) - np.maximum(rt["start_ns"][m], w0)
                _calls(out, rt["name_id"][m], dur)
    if ctx.plan.attr is not None:
        _where(ctx, st, win, inw, w0, w1)
    return win


def op_sites(ctx: Context, st: SliceState) -> tuple:
    """Site rows, innermost operator range and (distinct sites, each operation's index into them)
    of the slice's operations, at their launch; computed once per slice."""
    got = st.attr_cache.get("ops")
    if got is None:
        got = st.attr_cache["ops"] = _sites_of(_view(ctx, st), st.ops)
    return got


def slice_attributor(ctx: Context, c0: int, c1: int, ops: Ops):
    """The attributor slice ``[c0, c1)`` asks: told the span of its operations' launches (the
    sliced attributor then reads the ranges around them once)."""
    ok = (ops.api >= 0) & (ops.api_thread >= 0) if len(ops) else np.zeros(0, bool)
    if ok.any():
        t = ops.api_start_ns[ok]
        lo, hi = int(t.min()), int(t.max())
    else:
        lo = hi = c0 if c0 > NEG else c1 - 1
    return ctx.plan.attr.for_slice(c0, c1, lo, hi)


def _view(ctx: Context, st: SliceState):
    v = st.attr_cache.get("view")
    if v is None:
        v = st.attr_cache["view"] = slice_attributor(ctx, st.c0, st.c1, st.ops)
    return v


def _sites_of(view, ops: Ops) -> tuple:
    # launches: a thread with no operator range of its own defers to its main thread's (autograd)
    sites, ranges = view.sites_and_ranges(ops.api_thread, ops.api_start_ns, ops.api >= 0, enclosing=True)
    return sites, ranges, site_index(sites)


def _where(ctx: Context, st: SliceState, win: Window, inw: np.ndarray, w0: int, w1: int) -> None:
    """The slice's share of each selector's time per site (``SELECTORS``), in ``[w0, w1)``."""
    attr, ops = _view(ctx, st), st.ops
    acc = {k: SiteSums() for k in SELECTORS}
    if len(ops) and inw.any():
        pre = st.attr_cache.get("where_ops")
        if pre is not None and pre[0] == w0 and pre[1] == w1:
            acc.update(pre[2])
        else:
            acc.update(_where_ops(ops, inw, *op_sites(ctx, st)[2]))
    g = st.gaps
    if g is not None and len(g):
        sel = np.flatnonzero((g.start_ns < w1) & (g.end_ns > w0) & (g.kind == 0))
        if len(sel):
            # a gap inside the window keeps its whole classification (found with the gaps); only
            # those the window cuts are split again
            amounts = g.amounts[sel].astype(np.int64)
            cut = np.flatnonzero((g.start_ns[sel] < w0) | (g.end_ns[sel] > w1))
            if len(cut):
                amounts[cut] = g.split(sel[cut], w0, w1)
            th = g.thread_index[sel]
            mid = (np.maximum(g.start_ns[sel], w0) + np.minimum(g.end_ns[sel], w1)) // 2
            for name, cause, when in (("launch_gaps", CAUSE_LAUNCH, g.next_api_start_ns[sel]),
                                      ("dependency_gaps", gpu_m.CAUSE_DEP, g.next_api_start_ns[sel]),
                                      ("host_gaps", CAUSE_HOST, mid), ("input_gaps", CAUSES.index("input"), mid),
                                      ("sync_gaps", CAUSES.index("sync"), g.start_ns[sel])):
                w = amounts[:, cause]
                m = np.flatnonzero(w > 0)
                if not len(m):
                    continue
                if name in ("launch_gaps", "dependency_gaps") and len(ops):
                    # at the launch of the operation ending the gap: that operation's site, already
                    # found (op_sites), when the gap names the same thread and call
                    nxt = g.next_op[sel[m]]
                    same = (nxt >= 0).all() and (ops.api_thread[nxt] == th[m]).all() \
                        and (ops.api_start_ns[nxt] == when[m]).all() and (ops.api[nxt] >= 0).all()
                    if same:
                        distinct, inv = op_sites(ctx, st)[2]
                        accumulate(acc[name], distinct, inv[nxt], w[m])
                        continue
                add_sites(acc[name], attr.sites(th[m], when[m]), w[m])
    if st.host is not None and st.rt is not None:
        rt = st.rt
        mine = (rt["start_ns"] >= st.c0) & (rt["start_ns"] < st.c1) & (rt["start_ns"] < w1) & (rt["end_ns"] > w0)
        for name, mask in (("sync_calls", st.blocking), ("alloc_calls", rt["api_kind"] == S.API_ALLOC)):
            m = np.flatnonzero(mine & mask)
            if len(m):
                dur = np.minimum(rt["end_ns"][m], w1) - np.maximum(rt["start_ns"][m], w0)
                add_sites(acc[name], attr.sites(rt["thread"][m], rt["start_ns"][m]), dur)
    win.where = {k: v for k, v in acc.items() if v}


def _where_ops(ops: Ops, inw: np.ndarray, distinct: np.ndarray, inv: np.ndarray) -> dict:
    """The operations' part of :func:`_where`: each operation selector's time per site, and
    kernels' time per (site, kernel name), for the operations ``inw`` of the window."""
    acc: dict = {}
    if not inw.any():
        return acc
    dur = ops.end_ns - ops.start_ns
    is_k = ops.kind == KIND_KERNEL
    fl = ops.flags
    masks = (("gpu_ops", inw), ("kernels", inw & is_k), ("tiny_kernels", inw & is_k & (dur < 10_000)),
             ("nccl_kernels", inw & is_k & ops.is_nccl), ("fp32_kernels", inw & ((fl & FLAG_FP32) != 0)),
             ("underfilled_kernels", inw & ((fl & FLAG_UNDERFILLED) != 0)),
             ("copies", inw & (ops.kind == KIND_MEMCPY)),
             ("copy_ops", inw & ((ops.kind == KIND_MEMCPY) | (ops.kind == KIND_MEMSET))),
             ("pageable_copies", inw & ((fl & FLAG_PAGEABLE) != 0)),
             ("dtoh_copies", inw & ((fl & FLAG_DTOH) != 0)))
    # one pass over the operations: each one's pattern of selectors (few patterns occur), the
    # time and count per (pattern, site), then each selector's sum over its patterns (exact:
    # integer nanoseconds, far below 2**53)
    pat = np.zeros(len(ops), dtype=np.int32)
    for j, (_sel, mask) in enumerate(masks):
        pat |= mask.astype(np.int32) << j
    m = np.flatnonzero(pat)
    if len(m):
        pm = pat[m]
        used_p = np.flatnonzero(np.bincount(pm, minlength=1 << len(masks)))
        code = np.zeros(1 << len(masks), dtype=np.int64)
        code[used_p] = np.arange(len(used_p))
        nd = len(distinct)
        key = code[pm] * nd + inv[m]
        ns = np.bincount(key, weights=dur[m].astype(np.float64), minlength=len(used_p) * nd).reshape(-1, nd)
        cnt = np.bincount(key, minlength=len(used_p) * nd).reshape(-1, nd)
        for j, (sel, _mask) in enumerate(masks):
            rows = ((used_p >> j) & 1) == 1
            if rows.any():
                acc.setdefault(sel, SiteSums()).add(distinct, ns[rows].sum(axis=0), cnt[rows].sum(axis=0))
    # kernels by full name, for the kernel with the most time (known once every slice is in)
    m = np.flatnonzero(inw & is_k)
    if len(m):
        pairs, pinv = site_index(site_rows(inv[m], ops.name_id[m]))
        _, ns, cnt = site_counts(pairs, pinv, dur[m])
        # back to full site rows: (site..., kernel name id)
        full = np.empty((len(pairs), distinct.shape[1] + 1), dtype=np.int64)
        full[:, :-1] = distinct[pairs[:, 0]]
        full[:, -1] = pairs[:, 1]
        acc.setdefault("by_kernel", SiteSums()).add(full, ns, cnt)
    return {k: v for k, v in acc.items() if v}


def _sel(mask: np.ndarray):
    """Index for a mask: every element as a slice (no copy), else the positions."""
    return slice(None) if mask.all() else np.flatnonzero(mask)


def _count(dev: np.ndarray, ndev: int) -> np.ndarray:
    return np.bincount(dev, minlength=ndev)[:ndev].astype(np.int64) if len(dev) else np.zeros(ndev, np.int64)


def _calls(out: dict, name_id: np.ndarray, dur: np.ndarray) -> None:
    uk, inv = np.unique(name_id, return_inverse=True)
    tot = np.zeros(len(uk), dtype=np.int64)
    np.add.at(tot, inv, dur)
    mx = np.full(len(uk), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(mx, inv, dur)
    cnt = np.bincount(inv, minlength=len(uk))
    for j, k in enumerate(uk.tolist()):
        out[int(k)] = [int(cnt[j]), int(tot[j]), int(mx[j])]


def _compact(a: np.ndarray) -> np.ndarray:
    """Non-negative int64 values as uint32 when they fit (exact, half the memory)."""
    if len(a) and int(a.min()) >= 0 and int(a.max()) < (1 << 32):
        return a.astype(np.uint32)
    return a.astype(np.int64)


def _top_idx(dur: np.ndarray) -> np.ndarray:
    """The TOP_GAPS longest (ties: the earlier in device, then time order, which is array order)."""
    if len(dur) <= TOP_GAPS:
        return np.arange(len(dur))
    # the TOP_GAPS-th longest: a value selection (no index array, no negated copy)
    v = np.partition(dur, len(dur) - TOP_GAPS)[len(dur) - TOP_GAPS]
    above = np.flatnonzero(dur > v)
    tied = np.flatnonzero(dur == v)[:TOP_GAPS - len(above)]
    return np.sort(np.concatenate([above, tied]))


def _gap_totals(win: Window, g: gpu_m.Gaps, sel: np.ndarray, w0: int, w1: int) -> None:
    s0, s1 = np.maximum(g.start_ns[sel], w0), np.minimum(g.end_ns[sel], w1)
    cut = np.flatnonzero((g.start_ns[sel] < w0) | (g.end_ns[sel] > w1))
    cause = g.cause[sel].astype(np.int64)
    if len(cut):
        part = g.split(sel[cut], w0, w1)
        cause[cut] = np.argmax(part, axis=1)
    win.gaps_n = len(sel)
    win.gaps_by_cause = np.bincount(cause, minlength=NC)[:NC].astype(np.int64)
    dur = s1 - s0
    top = _top_idx(dur)
    amounts = g.split(sel[top], w0, w1)
    for n_, k in enumerate(top.tolist()):
        i = sel[k]
        win.longest.append((int(dur[k]), int(g.device[i]), int(s0[k]), int(s1[k]), int(cause[k]),
                            amounts[n_].astype(np.int64), int(g.thread[i])))
    win.longest = _top_gaps(win.longest)
    # gap shapes: the class of the whole gap (not re-cut by the window), as the report defines them
    gc = g.cause[sel]
    lg = dur[gc == CAUSE_LAUNCH]
    if len(lg):
        win.launch_gaps.append(_compact(lg))
    hg = g.amounts[sel, CAUSE_HOST].astype(np.int64)
    hg = hg[hg > 0]
    if len(hg):
        win.host_gaps.append(_compact(hg))


def _dependency_gaps(win: Window, g: gpu_m.Gaps, sel: np.ndarray, w0: int, w1: int, ops: Ops) -> None:
    """The TOP_GAPS gaps with the most GPU-side dependency time inside ``[w0, w1)``, with what is
    known of the operation that ends each (its stream and launching call): the evidence of the
    gpu-dependency rule (``nsysdoc.metrics.dependency``)."""
    dep = g.amounts[sel, gpu_m.CAUSE_DEP].astype(np.int64)
    cut = np.flatnonzero(((g.start_ns[sel] < w0) | (g.end_ns[sel] > w1)) & (dep > 0))
    if len(cut):
        dep[cut] = g.split(sel[cut], w0, w1)[:, gpu_m.CAUSE_DEP]
    has = np.flatnonzero(dep > 0)
    if not len(has) or g.next_op is None:
        return
    top = has[_top_idx(dep[has])]
    for k in top.tolist():
        i = int(sel[k])
        j = int(g.next_op[i])
        if j < 0 or j >= len(ops):
            continue
        api = int(ops.api[j])
        win.dep_longest.append((int(dep[k]), int(g.device[i]), int(max(g.start_ns[i], w0)), int(min(g.end_ns[i], w1)),
                                int(ops.stream[j]), int(ops.kind[j]), int(ops.row[j]), int(ops.name_id[j]),
                                int(ops.start_ns[j]), api, int(ops.api_start_ns[j]) if api >= 0 else -1,
                                int(ops.api_end[j]) if api >= 0 else -1, int(ops.api_tid(np.array([j]))[0])))
    win.dep_longest = _top_gaps(win.dep_longest)


def global_totals(ctx: Context, st: SliceState, tot: Global, carry: Carry, nxt: Carry) -> None:
    """The slice's share of the window-independent totals (steps, set-up, scalar reads)."""
    ops = st.ops
    own = ops.owned
    c0, c1 = st.c0, st.c1
    # scalar reads: tiny device-to-host copies whose call syncs, or whose thread's next call does
    _scalar_reads(ctx, st, tot, carry, nxt)
    if ctx.plan.attr is not None:
        view = _view(ctx, st)
        if len(ops):
            sites, rng, index = op_sites(ctx, st)
            view.add_ops(rng, sites, ops.end_ns - ops.start_ns, gpu_labels(ops.kind, ops.name_id, ops.copy_kind), index)
            if ctx.counters:
                _operator_counter_sums(ctx, view, ops, rng, tot, st.attr_cache)
        view.count_ranges()
    if ctx.has_markers and len(ops):
        has = own & (ops.step >= 0)
        k = has & (ops.kind == KIND_KERNEL)
        tot.step_kernels += np.bincount(ops.step[k], minlength=tot.nsteps)[:tot.nsteps]
    if st.act is None:
        return
    ndev = ctx.ndev
    if c1 > c0:  # busy time over the whole capture: the slices are disjoint, so their parts add up
        tot.busy_span += st.act.busy.covered(np.arange(ndev), np.full(ndev, c0), np.full(ndev, c1))
    # set-up over the GPU span, and what the steady-state window needs
    g = st.gaps
    s0, s1 = ctx.plan.span
    if g is not None and len(g):
        if s0 is not None and s1 is not None and s1 > s0:
            tot.setup_idle += g.amounts_in(np.arange(ndev), np.full(ndev, s0), np.full(ndev, s1))[:, CAUSE_SETUP]
        su = g.amounts[:, CAUSE_SETUP]
        ends_idle = (g.next_op >= 0) & (su > 0)
        if ends_idle.any():
            rows = ops.api[g.next_op[ends_idle]]
            tot.idle_launch_rows.append(rows[rows >= 0].astype(np.int64))
        some = np.flatnonzero(su > 0)
        if len(some):
            for i in np.flatnonzero(su >= SETUP_MARK_NS).tolist():
                tot.setup_gaps.append((int(g.start_ns[i]), int(g.end_ns[i]), int(su[i]), int(g.device[i])))
            tot.setup_pieces.extend(_setup_pieces(g, some))
    _merged(ctx, st, tot, carry, nxt)
    _setup_calls(ctx, st, tot)
    _alloc_rows(st, tot)
    if not ctx.has_markers or not tot.nsteps:
        return
    # per step: breakdown on the step's device, time busy, idle before the first op, host sync
    plan = ctx.plan
    lo_region = int(st.lo_dev.min()) if st.lo_dev is not None else c0
    ss, se = ctx.step_start, ctx.step_end
    dev = plan.step_dev
    ok = np.flatnonzero((dev >= 0) & (ss < c1) & (se > min(lo_region, c0)))
    if len(ok):
        d, s, e = dev[ok], ss[ok], se[ok]
        a, b = np.maximum(s, c0), np.maximum(np.minimum(e, c1), np.maximum(s, c0))
        tot.step_busy[ok] += st.act.busy.covered(d, a, b)
        tot.step_kern[ok] += st.act.kernels.covered(d, a, b)
        tot.step_compute[ok] += st.act.compute.covered(d, a, b)
        if g is not None and len(g):
            tot.step_idle[ok] += g.amounts_in(d, s, e).astype(np.int64)
        fs = np.maximum(plan.step_first[ok], s)
        a2, b2 = np.maximum(s, c0), np.maximum(np.minimum(fs, c1), np.maximum(s, c0))
        tot.step_before_busy[ok] += st.act.busy.covered(d, a2, b2)
        if ctx.fill.active:
            fill_m.steps(ctx, st, tot, ok, d, a, b)
    if st.host is not None:
        sel = np.flatnonzero((ctx.step_thread >= 0) & (ss < c1) & (se > c0))
        if len(sel):
            a, b = np.maximum(ss[sel], c0), np.maximum(np.minimum(se[sel], c1), np.maximum(ss[sel], c0))
            # wall-clock time of the step during which a thread of its process was blocked in a
            # sync: the union over those threads, clipped to the step (never a sum over threads,
            # never more than the step: issue 46)
            u = st.host.sync
            uk = np.asarray(u.keys, dtype=np.int64)
            keep = np.flatnonzero((uk < len(ctx.host_thread)) & ctx.host_thread[np.minimum(uk, max(len(ctx.host_thread) - 1, 0))]) \
                if len(u) and len(ctx.host_thread) else np.zeros(0, np.int64)
            by_proc = iv.union(ctx.thread_proc[u.keys[keep]], u.starts[keep], u.ends[keep]) if len(keep) \
                else iv.union(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
            tot.step_sync[sel] += by_proc.covered(ctx.step_proc[sel], a, b)
    # device-to-host copies per step: bytes (by start), time with no kernel running (by position)
    for p in _both(st):
        di = np.flatnonzero(((p.flags & FLAG_DTOH) != 0) & ((p.flags & FLAG_IN_WINDOW) != 0) & (p.step >= 0))
        if not len(di):
            continue
        if p is ops:
            tot.step_dtoh_bytes += np.bincount(p.step[di], weights=p.nbytes[di],
                                               minlength=tot.nsteps)[:tot.nsteps].astype(np.int64)
        w0, w1 = ctx.w0, ctx.w1
        x0 = np.maximum(np.maximum(p.start_ns[di], w0), c0)
        x1 = np.maximum(np.minimum(np.minimum(p.end_ns[di], w1), c1), x0)
        exposed = (x1 - x0) - st.act.kernels.covered(p.device[di], x0, x1)
        tot.step_dtoh_exposed += np.bincount(p.step[di], weights=exposed, minlength=tot.nsteps)[:tot.nsteps].astype(np.int64)


def _setup_pieces(g: gpu_m.Gaps, idx: np.ndarray) -> list:
    """Where in gaps ``idx`` the set-up idle time lies: ``(device, start, end)`` pieces of their
    host part painted with a set-up level."""
    out = []
    att = idx[g.kind[idx] == 0]
    if not len(att):
        return out
    h0 = g.start_ns[att]
    h1 = np.maximum(np.minimum(g.end_ns[att], g.painted_end_ns[att]), h0)
    part = g.partition
    if not len(part):
        return out
    keys = g.thread_index[att].astype(np.int64)
    top = part.tmin + part.span - 1
    shift = keys * part.span - part.tmin
    a = np.clip(h0, part.tmin, top) + shift
    b = np.clip(h1, part.tmin, top) + shift
    i0 = np.searchsorted(part._e, a, side="right")
    i1 = np.searchsorted(part._s, b, side="left")
    for j in range(len(att)):
        for seg in range(int(i0[j]), int(i1[j])):
            lev = int(part.level[seg])
            if gpu_m.LEVEL_CAUSE[lev] != CAUSE_SETUP:
                continue
            s_ = max(int(part._s[seg]), int(a[j])) - int(shift[j])
            e_ = min(int(part._e[seg]), int(b[j])) - int(shift[j])
            if e_ > s_:
                out.append((int(g.device[att[j]]), s_, e_))
    return out


def _merged(ctx: Context, st: SliceState, tot: Global, carry: Carry, nxt: Carry) -> None:
    """All devices merged (no step markers: the steady-state window): idle stretches long enough
    to be an idle head or tail (at least a quarter of what is left of the span after them), with
    the busy time before them, and the busy time before each end of a set-up gap of 1 ms or more
    (where a warm-up may end)."""
    nxt.merged_end, nxt.merged_busy = carry.merged_end, carry.merged_busy
    if ctx.has_markers:
        return
    c0, c1 = st.c0, st.c1
    busy = st.act.busy  # per-device busy pieces: far fewer than operations
    s = np.maximum(busy.starts, c0)
    e = np.minimum(busy.ends, c1)
    keep = e > s
    u = iv.union(np.zeros(int(keep.sum()), np.int64), s[keep], e[keep])
    starts, ends = u.starts, u.ends
    cum = carry.merged_busy + np.concatenate(([0], np.cumsum(ends - starts)))
    tot.merged_idle.extend(long_idle(carry.merged_end, starts, ends, cum, ctx.o1))
    g = st.gaps
    if g is not None and len(g):
        su = g.amounts[:, CAUSE_SETUP]
        for t in np.unique(g.end_ns[su >= SETUP_MARK_NS]).tolist():
            tot.merged_marks[int(t)] = int(carry.merged_busy + u.covered(np.zeros(1, np.int64), [c0], [t])[0]) \
                if len(u) else int(carry.merged_busy)
    if len(starts):
        nxt.merged_end = int(ends[-1])
        nxt.merged_busy = int(cum[-1])


def long_idle(prev_end: int, starts: np.ndarray, ends: np.ndarray, busy_before: np.ndarray,
              span_end: int) -> list[tuple[int, int, int]]:
    """The idle stretches between merged busy intervals ``[starts, ends)`` (the first one after
    ``prev_end``, ``NEG`` for none) that last at least a quarter of what is left of the span after
    their start: ``(start, end, busy time before start)``, ``busy_before[j]`` being the busy time
    before interval ``j``. Vectorised: a launch-bound capture has one interval per kernel (a
    Python loop over them took 1-2 s at 5 M kernels)."""
    if len(starts) == 0:
        return []
    a = np.concatenate(([int(prev_end)], np.asarray(ends[:-1], dtype=np.int64)))
    b = np.asarray(starts, dtype=np.int64)
    real = a > NEG
    a_ = np.where(real, a, b)  # keeps the arithmetic of the "no previous interval" case in range
    sel = np.flatnonzero(real & (b > a_) & ((b - a_) * 4 >= span_end - a_))
    return list(zip(a[sel].tolist(), b[sel].tolist(), np.asarray(busy_before)[sel].astype(np.int64).tolist()))


#: set-up gaps at least this long mark where a warm-up may end (``window.SETUP_GAP_MIN_NS``)
SETUP_MARK_NS = 1_000_000


def _setup_calls(ctx: Context, st: SliceState, tot: Global) -> None:
    """Set-up CUDA API rows owned by the slice (set-up events of the report)."""
    if st.host is None or st.host.runtime_level is None:
        return
    rt = st.rt
    c0, c1 = st.c0, st.c1
    mine = (rt["start_ns"] >= c0) & (rt["start_ns"] < c1)
    sel = np.flatnonzero(mine & (st.host.runtime_level == gpu_m.LV_SETUP_API))
    if len(sel):
        tot.setup_calls.append({k: rt[k][sel] for k in ("pos", "name_id", "api_kind", "start_ns", "end_ns")})


def _alloc_rows(st: SliceState, tot: Global) -> None:
    """Allocation CUDA API rows owned by the slice and the threads its operations were launched
    from (``nsysdoc.metrics.alloc``: growth or churn); allocation calls are few."""
    ops = st.ops
    if ops is not None and len(ops):
        th = ops.api_thread[ops.owned & (ops.api >= 0) & (ops.api_thread >= 0)]
        if len(th):
            tot.launch_threads.append(unique_ints(th))  # indices >= 0: a mark per value, no sort
    if st.host is None or st.rt is None:
        return
    rt = st.rt
    sel = np.flatnonzero((rt["start_ns"] >= st.c0) & (rt["start_ns"] < st.c1) & (rt["api_kind"] == S.API_ALLOC))
    if len(sel):
        tot.alloc_rows.append({k: np.asarray(rt[k][sel], np.int64) for k in ("thread", "name_id", "start_ns", "end_ns")})


def _scalar_reads(ctx: Context, st: SliceState, tot: Global, carry: Carry, nxt: Carry) -> None:
    """Scalar reads (definition: ``nsysdoc.metrics.host``) among the slice's own copies, and
    the checks left waiting by earlier slices for their thread's next call."""
    ops = st.ops
    m = np.flatnonzero(ops.owned & (ops.kind == KIND_MEMCPY) & (ops.api >= 0) & (ops.copy_kind == S.COPY_DTOH)
                       & (ops.nbytes <= SCALAR_READ_MAX_BYTES))
    pending = list(carry.pending)
    nxt.pending = []
    found = []
    if len(m):
        kind = ops.api_kind[m]
        blocking = (np.isin(kind, (S.API_SYNC, S.API_SYNC_COPY, S.API_SYNC_MEMSET))
                    | in_sorted(ctx.pageable_api, ops.api[m]))
        itself = (kind == S.API_SYNC_COPY) | blocking
        for i in m[itself].tolist():
            found.append(int(ops.step[i]))
        rest = m[~itself]
        pending += [(int(ops.step[i]), int(ops.api_thread[i]), int(ops.api_start_ns[i])) for i in rest.tolist()]
    if pending:
        found += _resolve_pending(ctx, st, pending, nxt)
    for step in found:
        tot.scalar_reads += 1
        if ctx.has_markers and 0 <= step < tot.nsteps:
            tot.step_scalar[step] += 1


def _resolve_pending(ctx: Context, st: SliceState, pending: list, nxt: Carry) -> list:
    """Checks ``(step, thread, call start)``: is the thread's next CUDA call (the earliest starting
    strictly later) a blocking sync call? Answered from the CUDA API rows that start up to the
    slice end; a check with no later call yet waits for the next slice."""
    c1 = st.c1
    lo = min(t for _s, _th, t in pending)
    if st.rt is not None and lo >= st.rt_lo:
        rows = st.rt  # every row starting in [rt_lo, c1) was read
        m = (rows["start_ns"] > lo) & (rows["start_ns"] < c1)
        th, s, k = rows["thread"][m].astype(np.int64), rows["start_ns"][m], rows["api_kind"][m]
    else:
        rt = ctx.trace.store.get("runtime")
        if rt is None or not len(rt):
            return []
        rows = rt.rows_starting_in(lo + 1, None if c1 >= POS else c1, ["start_ns", "thread", "api_kind"])
        th, s, k = rows["thread"].astype(np.int64), rows["start_ns"], rows["api_kind"]
    q_step = np.array([p[0] for p in pending], dtype=np.int64)
    q_thread = np.array([p[1] for p in pending], dtype=np.int64)
    q_time = np.array([p[2] for p in pending], dtype=np.int64)
    later, syncs = next_call_syncs(th, s, k == S.API_SYNC, q_thread, q_time)
    if c1 < POS:
        nxt.pending.extend(pending[i] for i in np.flatnonzero(~later).tolist())
    return q_step[later & syncs].tolist()


def next_call_syncs(thread: np.ndarray, start_ns: np.ndarray, is_sync: np.ndarray, q_thread: np.ndarray,
                    q_time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each query (thread, time): whether the thread has a call starting strictly later among
    the rows, and whether one of its earliest such calls (all those starting at that instant) is
    a blocking sync. One sort of the rows and one binary search for all queries (a Python loop per
    query cost ~10 us each: seconds on a capture with a million scalar reads)."""
    n, q = len(start_ns), len(q_time)
    later, syncs = np.zeros(q, dtype=bool), np.zeros(q, dtype=bool)
    if n == 0 or q == 0:
        return later, syncs
    th, st, sy = iv.take(iv.sort_order(thread, start_ns), np.asarray(thread, dtype=np.int64),
                         np.asarray(start_ns, dtype=np.int64), np.asarray(is_sync, dtype=bool))
    # both sorted by (thread, start): pack into one axis where every thread has its own band
    uth, rank = np.unique(th, return_inverse=True)
    base = int(min(st.min(), q_time.min()))
    span = max(int(st.max()), int(q_time.max())) - base + 2
    if (len(uth) + 1).bit_length() + span.bit_length() > 62:  # too wide to pack: rare, per thread
        for i in range(q):
            m = th == q_thread[i]
            ts, ss = st[m], sy[m]
            j = int(np.searchsorted(ts, q_time[i], side="right"))
            if j < len(ts):
                later[i] = True
                syncs[i] = bool(ss[j:int(np.searchsorted(ts, ts[j], side="right"))].any())
        return later, syncs
    key = rank.astype(np.int64) * span + (st - base)
    qpos = np.searchsorted(uth, q_thread)
    known = (qpos < len(uth)) & (uth[np.minimum(qpos, len(uth) - 1)] == q_thread)
    qkey = qpos.astype(np.int64) * span + (q_time - base)
    j = np.searchsorted(key, qkey, side="right")  # first row after the query, in its band or later
    jc = np.minimum(j, n - 1)
    later = known & (j < n) & (rank[jc] == qpos)
    cs = np.concatenate(([0], np.cumsum(sy, dtype=np.int64)))
    j_end = np.searchsorted(key, key[jc], side="right")  # every row starting at that same instant
    syncs = later & (cs[j_end] - cs[jc] > 0)
    return later, syncs


__all__ = ["Carry", "Context", "Global", "SliceState", "Window", "global_totals", "in_window", "next_carry",
           "phase_a", "prepare", "Prepared", "window_totals", "NEG", "POS", "FLAG_SCALAR"]
