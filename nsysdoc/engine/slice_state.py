"""The types a run over time slices passes around (see :mod:`nsysdoc.engine.slices`): the fixed
:class:`Context` every slice needs, the small :class:`Carry` one slice hands on to the next, what
phase A found in a slice (:class:`SliceState`), and the totals phase B adds up (:class:`Window`
per analysis window, :class:`Global` for the whole capture). Split out of
:mod:`nsysdoc.engine.slices` (issue 51) so that each phase's module imports the types from below
instead of from one another."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..metrics import gpu as gpu_m
from ..metrics.copies import merge_groups
from ..metrics.gpu import CAUSES
from ..trace import schema as S
from . import fill as fill_m
from .attribute import merge_sites
from .data import NEG, Ops

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


def trace_thread_index(keys: np.ndarray, gtid: np.ndarray) -> np.ndarray:
    if not len(keys):
        return np.full(len(gtid), -1, dtype=np.int64)
    pos = np.clip(np.searchsorted(keys, gtid), 0, len(keys) - 1)
    return np.where(keys[pos] == gtid, pos, -1)


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


def _both(st: SliceState) -> list[Ops]:
    return [p for p in (st.carried, st.ops) if p is not None and len(p)]
