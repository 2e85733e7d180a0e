"""Running the slices: in time order, each slice's window totals kept apart (a steady-state window
found afterwards re-runs only the slices at its edges), window-independent totals added in place,
and the timeline windows captured on the way."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..metrics import gpu as gpu_m
from ..metrics.window import (IDLE_EDGE_MAX_WORK_PCT, IDLE_EDGE_MIN_PCT, MIN_GPU_BUSY_MS, MIN_GPU_OPS,
                              MIN_WINDOW_MS, SETUP_GAP_MIN_NS, SETUP_GAP_MIN_PCT, STEADY_MAX_SETUP_PCT)
from ..trace.store import Releaser, release_memory
from .data import NEG, POS, Ops
from .plan import Plan, middle_window, timeline_windows
from .slices import (Carry, Context, Global, Prepared, SliceState, Window, global_totals, host_range, next_carry,
                     phase_a, prepare, window_totals)

NC = len(gpu_m.CAUSES)


@dataclass
class Capture:
    """What the timeline of ``[start, end)`` needs, gathered from the slices that hold it."""

    start: int
    end: int
    ops: list = field(default_factory=list)
    gaps: list = field(default_factory=list)   # (device, start, end, cause, split) per gap
    #: operations kept at most (None: no limit); past it the capture is dropped (``overflow``)
    max_ops: int | None = None
    n_ops: int = 0
    overflow: bool = False

    def add(self, st: SliceState) -> None:
        if self.overflow:
            return
        ops = st.ops
        m = np.flatnonzero((ops.start_ns < self.end) & (ops.end_ns > self.start))
        if self.max_ops is not None and self.n_ops + len(m) > self.max_ops:
            self.overflow, self.ops, self.gaps = True, [], []
            return
        self.n_ops += len(m)
        if len(m):
            self.ops.append(ops.take(m))
        g = st.gaps
        if g is not None and len(g):
            gm = np.flatnonzero((g.start_ns < self.end) & (g.end_ns > self.start))
            if len(gm):
                split = g.split(gm, self.start, self.end)
                self.gaps.append((g.device[gm].astype(np.int64), g.start_ns[gm], g.end_ns[gm],
                                  g.cause[gm].astype(np.int64), split.astype(np.int64)))


@dataclass
class Result:
    plan: Plan
    ctx: Context
    window: Window
    glob: Global
    window_range: tuple
    excluded: list
    captures: dict
    slices: int
    gap_total: int
    #: the slices and the carry each started from: later captures (:func:`capture_windows`)
    #: replay only the slices they need
    spans: list = field(default_factory=list)
    carries: list = field(default_factory=list)
    #: (w0, w1, future of the NVTX summary over that window), computed during the run when the
    #: window is final from the start (step markers): :func:`nvtx_summary`
    nvtx_ahead: tuple | None = None
    #: per slice, (operations it owns, their latest start, their earliest end): a later capture
    #: known to overflow from these alone replays nothing (:func:`capture_windows`)
    slice_ops: list = field(default_factory=list)


def run(trace, plan: Plan) -> Result:
    ndev = plan.ndev
    ctx = Context(trace, plan, ndev)
    nsteps = len(plan.steps.table)
    glob = Global(nsteps, ndev, len(ctx.thread_keys))
    carry = ctx.first_carry()
    spans = plan.slices()
    parts: list[Window] = []
    carries: list[Carry] = []
    slice_ops: list[tuple[int, int, int]] = []
    caps = {k: Capture(v[0], v[1]) for k, v in plan.timelines.items()}
    gap_total = 0
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsysdoc-prefetch") if len(spans) > 1 else None
    ahead = None  # the next slice's Prepared, being built on the worker thread
    nvtx_ahead = _nvtx_summary_ahead(trace, plan, len(spans))
    # freed memory goes back to the system once it has grown, not after every slice (the next
    # slice would fault the same pages in again)
    release = Releaser()
    try:
        for i, (c0, c1) in enumerate(spans):
            last = i == len(spans) - 1
            prep = ahead.result() if ahead is not None else None
            ahead = pool.submit(_prepare, ctx, *spans[i + 1]) if pool is not None and not last else None
            carries.append(carry.copy())
            st = phase_a(ctx, c0, c1, carry, last, prep)
            del prep
            _device_stats(plan, st.ops)
            slice_ops.append(_owned(st.ops))
            nxt = next_carry(ctx, st, carry)
            global_totals(ctx, st, glob, carry, nxt)
            parts.append(window_totals(ctx, st, ctx.w0, ctx.w1))
            if st.gaps is not None:
                gap_total += len(st.gaps)
            for cap in caps.values():
                # every slice: an operation it owns may run into a later window
                cap.add(st)
            carry = nxt
            del st
            release()
    finally:
        if pool is not None:
            # on an error or Ctrl-C the slice being prepared is not waited for
            pool.shutdown(wait=ahead is None, cancel_futures=True)
    glob.merged_total = carry.merged_busy
    w0, w1 = ctx.w0, ctx.w1
    excluded: list = []
    if ctx.active and plan.steps.source != "markers":  # marked steps are the window
        t0, t1, excluded = _steady(ctx, glob, gap_total, w0, w1)
        if excluded:
            new = _rerun(ctx, spans, carries, parts, t0, t1)
            if _enough_work(new, t0, t1):
                parts, w0, w1 = new, t0, t1
                plan.steps.window_start_ns, plan.steps.window_end_ns = t0, t1
                if _steps_inside(plan, t0, t1):
                    if not np.asarray(plan.steps.table["primary"], dtype=bool).any():
                        # no inferred step lies in the steady state: no steps
                        plan.steps.not_inferred = [{"pid": p.get("pid"), "reason": (
                            "its repeating units lie outside the steady-state window")}
                            for p in (plan.steps.inferred or {}).get("processes") or [{}]]
                        plan.steps.source, plan.steps.inferred = None, None
                        caps = {}
                    # the median or worst step may have changed: capture the steps now picked
                    # (the middle of the window when no step is left)
                    tl = timeline_windows(trace, plan, t0, t1)
                    if not tl:
                        a, b = middle_window(trace, plan, t0, t1)
                        tl = {"middle": (a, b, None, None)}
                    for k, v in tl.items():
                        if k not in caps or (caps[k].start, caps[k].end) != (v[0], v[1]):
                            cap = Capture(v[0], v[1])
                            _recapture(ctx, spans, carries, cap)
                            caps[k] = cap
                    caps = {k: c for k, c in caps.items() if k in tl}
                    plan.timelines = tl
                if "middle" in caps:
                    a, b = middle_window(trace, plan, t0, t1)
                    cap = Capture(a, b)
                    _recapture(ctx, spans, carries, cap)
                    caps = {"middle": cap}
            else:
                excluded = []
    total = Window(ndev)
    for p in parts:
        total.add(p)
    # what the slices freed goes back now: the assembly's large arrays are mapped afresh, never
    # from those freed pages (20 M steps-ops, cold: peak 1.58 -> 1.42 GB)
    release_memory()
    return Result(plan, ctx, total, glob, (w0, w1), excluded, caps, len(spans), gap_total, spans, carries,
                  nvtx_ahead, slice_ops)


def _owned(ops) -> tuple[int, int, int]:
    """(count, latest start, earliest end) of the operations a slice owns."""
    if ops is None or not len(ops):
        return (0, 0, 0)
    return (len(ops), int(ops.start_ns.max()), int(ops.end_ns.min()))


def _sure_overflow(res: Result, cap: Capture) -> int:
    """Operations ``cap`` holds for certain, counted from the slices whose every operation
    overlaps it (:attr:`Result.slice_ops`), when that is more than its ``max_ops`` (it would
    overflow once replayed); else 0."""
    if cap.max_ops is None or len(res.slice_ops) != len(res.spans):
        return 0
    n = sum(k for k, last_start, first_end in res.slice_ops
            if k and last_start < cap.end and first_end > cap.start)
    return n if n > cap.max_ops else 0


#: NVTX rows from which the NVTX summary is computed beside the slices (a thread of its own: it
#: reads only the NVTX table, and the two slice threads leave a core idle part of the time)
NVTX_AHEAD_MIN_ROWS = 1_000_000


def _nvtx_summary_ahead(trace, plan: Plan, nspans: int) -> tuple | None:
    nv = trace.store.get("nvtx")
    w0, w1 = plan.window
    if nv is None or len(nv) < NVTX_AHEAD_MIN_ROWS or nspans < 2 or plan.steps.source != "markers" \
            or w0 is None or w1 is None:
        return None
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsysdoc-nvtx")
    fut = pool.submit(_nvtx_summary_of, trace, w0, w1)
    pool.shutdown(wait=False)
    return (w0, w1, fut)


def _nvtx_summary_of(trace, w0: int | None, w1: int | None) -> list:
    from ..metrics.nvtx import nvtx_summary_blocks

    nv = trace.store.get("nvtx")
    return nvtx_summary_blocks(nv.iter_blocks(["start_ns", "end_ns", "event_type", "domain", "text_group"])
                               if nv is not None else (), trace.nvtx_domains, w0, w1, group_texts=trace.nvtx_groups)


def nvtx_summary(res: Result, w0: int | None, w1: int | None) -> list:
    """``metrics.nvtx`` (:func:`nsysdoc.metrics.nvtx.nvtx_summary_blocks`) over ``[w0, w1)``: the one
    computed during the run when it was over that window, else now."""
    got = res.nvtx_ahead
    if got is not None and got[0] == w0 and got[1] == w1:
        return got[2].result()
    return _nvtx_summary_of(res.ctx.trace, w0, w1)


def capture_windows(res: Result, windows: dict[str, tuple[int, int]], max_ops: int | None = None) -> dict:
    """Capture more timeline windows after the run (a finding's time range, say): the slices that
    hold any of them run again from their saved carry, once for all windows. Each capture keeps at
    most ``max_ops`` operations; one that would hold more is dropped (``overflow``). Adds the
    captures to ``res.captures`` and returns them."""
    caps = {k: Capture(int(a), int(b), max_ops=max_ops) for k, (a, b) in windows.items() if b > a}
    if not caps or not res.spans:
        return caps
    for c in caps.values():
        # issue 50: a capture the slices' own counts already put over max_ops (a finding range
        # spanning the capture) is dropped without replaying them; n_ops: the operations counted
        sure = _sure_overflow(res, c)
        if sure:
            c.overflow, c.n_ops = True, sure
    if all(c.overflow for c in caps.values()):
        return caps
    lo, hi = min(c.start for c in caps.values()), max(c.end for c in caps.values())
    spans, carries = res.spans, res.carries
    for i, (c0, c1) in enumerate(spans):
        if c0 >= hi:
            break
        if i + 1 < len(spans) and carries[i + 1].ops is None and c1 <= lo:
            continue  # nothing this slice owns is still running at its end, and its gaps end in it
        need = [c for c in caps.values() if not c.overflow and c0 < c.end and
                not (i + 1 < len(spans) and carries[i + 1].ops is None and c1 <= c.start)]
        if not need:
            continue
        st = phase_a(res.ctx, c0, c1, carries[i].copy(), i == len(spans) - 1)
        for c in need:
            c.add(st)
        del st
    res.captures.update({k: c for k, c in caps.items() if not c.overflow})
    return caps


def _prepare(ctx: Context, c0: int, c1: int) -> Prepared:
    """While the previous slice runs: the slice ``[c0, c1)``'s operations and their unions, and
    the host blocks around it decoded into the read cache."""
    prep = prepare(ctx, c0, c1)
    _prefetch_host(ctx.trace, c0, c1)
    return prep


def _prefetch_host(trace, c0: int, c1: int) -> None:
    store = trace.store
    lo, hi = host_range(c0, c1, c0)  # the slice's gaps may start earlier: those blocks are read later
    for name in ("runtime", "osrt"):
        t = store.get(name)
        if t is not None and t.blocks:
            store.prefetch(t, t.blocks_where(start_hi=None if hi >= POS else hi, end_gt=None if lo <= NEG else lo))


def _device_stats(plan: Plan, ops: Ops) -> None:
    """Per device: first start, last end of non-empty operations, operation count."""
    if not len(ops) or not plan.ndev:
        return
    dev = ops.device.astype(np.int64)
    np.minimum.at(plan.dev_min_start, dev, ops.start_ns)
    ne = ops.end_ns > ops.start_ns
    np.maximum.at(plan.dev_max_end, dev[ne], ops.end_ns[ne])
    plan.dev_ops += np.bincount(dev, minlength=plan.ndev)[:plan.ndev]


def _steps_inside(plan: Plan, t0: int, t1: int) -> bool:
    """Inferred steps not wholly inside the trimmed window ``[t0, t1]`` are no longer primary: no
    per-step number counts time outside the window."""
    st = plan.steps.table
    if not len(st):
        return
    inside = (np.asarray(st["start_ns"], np.int64) >= t0) & (np.asarray(st["end_ns"], np.int64) <= t1)
    prim = np.asarray(st["primary"], dtype=bool)
    if (prim & ~inside).any():
        plan.steps.table = st.assign(primary=prim & inside)
        return True
    return False


def _rerun(ctx: Context, spans: list, carries: list, parts: list, t0: int, t1: int) -> list:
    """Window totals for the window ``[t0, t1)``: slices wholly inside keep theirs, slices wholly
    outside have none, the others run again from their saved carry."""
    out = []
    for i, (c0, c1) in enumerate(spans):
        last = i == len(spans) - 1
        lo_region = min(c0, int(carries[i].last_end.min()) if len(carries[i].last_end) else c0)
        if lo_region >= t0 and c1 <= t1 and c0 > NEG:
            out.append(parts[i])
            continue
        if c1 <= t0 or c0 > t1:
            out.append(Window(ctx.ndev))
            continue
        carry = carries[i].copy()
        st = phase_a(ctx, c0, c1, carry, last)
        out.append(window_totals(ctx, st, t0, t1))
    return out


def _recapture(ctx: Context, spans: list, carries: list, cap: Capture) -> None:
    for i, (c0, c1) in enumerate(spans):
        if c0 >= cap.end:
            break
        if i + 1 < len(spans) and carries[i + 1].ops is None and c1 <= cap.start:
            continue  # nothing this slice owns is still running at its end, and its gaps end in it
        st = phase_a(ctx, c0, c1, carries[i].copy(), i == len(spans) - 1)
        cap.add(st)


def _enough_work(parts: list, lo: int, hi: int) -> bool:
    """Enough GPU work in the window ``[lo, hi)`` to judge (the thresholds the report's
    ``capture.enough_gpu_work`` uses: ``nsysdoc.metrics.window``)."""
    if hi - lo < MIN_WINDOW_MS * 1e6:
        return False
    n = sum(p.start_count for p in parts)
    if int(n.sum()) >= MIN_GPU_OPS:
        return True
    devs = np.flatnonzero(n > 0)
    if not len(devs):
        return False
    busy = sum(p.busy for p in parts)[devs]
    return float(busy.mean()) / 1e6 >= MIN_GPU_BUSY_MS


#: A set-up phase before the first kernel is left out of the window from this length (ns) and
#: share of the GPU span (%)
PHASE_MIN_NS = 1_000_000
PHASE_MIN_PCT = 5.0


def _steady(ctx: Context, glob: Global, gap_total: int, w0: int, w1: int) -> tuple[int, int, list]:
    """The steady-state window (definition: ``nsysdoc.metrics.window``) from what the slices
    recorded: ``(start, end, excluded)``, ``excluded`` listing ``{"kind", "start_ns", "end_ns"}``."""
    excluded: list[dict] = []
    if w1 - w0 <= 0:
        return w0, w1, excluded
    # a set-up phase before the first kernel: copies alone (weights or data uploaded before any
    # kernel runs), or an NVTX range named like a set-up phase (init_model, setup, load_weights)
    # that starts before it: framing, not the steady state
    k0 = ctx.plan.first_kernel_ns
    if k0 is not None and k0 - w0 >= max(PHASE_MIN_NS, PHASE_MIN_PCT / 100 * (w1 - w0)) and k0 < w1:
        excluded.append({"kind": "copies before the first kernel", "start_ns": w0, "end_ns": int(k0)})
    ps, pe, ptext = ctx.plan.phase_ranges
    if k0 is not None and len(ps):
        # a phase at the start: it ends in the first half of the span (a range around most of the
        # run is no set-up phase)
        ok = np.flatnonzero((ps < k0) & (pe > w0) & (pe <= w0 + (w1 - w0) // 2))
        if len(ok):
            j = ok[np.argmax(pe[ok])]
            if pe[j] - w0 >= PHASE_MIN_NS:
                excluded.append({"kind": "set-up phase", "start_ns": w0, "end_ns": int(pe[j]), "text": str(ptext[j])})
    # a range around the measured loop (benchmark_loop, train) that starts later and lasts at least
    # half of what follows its start: what comes before it (warm-up iterations, set-up) is framing
    ls, le, ltext = ctx.plan.loop_ranges
    if len(ls):
        ok = np.flatnonzero((ls - w0 >= max(PHASE_MIN_NS, PHASE_MIN_PCT / 100 * (w1 - w0))) & (ls < w1)
                            & (np.minimum(le, w1) - ls >= 0.5 * (w1 - ls)))
        if len(ok):
            j = ok[np.argmin(ls[ok])]  # the outermost: the earliest start
            excluded.append({"kind": "before the loop range", "start_ns": w0, "end_ns": int(ls[j]),
                             "text": str(ltext[j])})
    if excluded:
        cut = max(x["end_ns"] for x in excluded)
        excluded = [max(excluded, key=lambda x: (x["end_ns"], x["kind"] != "copies before the first kernel"))]
        excluded[0]["end_ns"] = cut
        w0 = cut
    span = w1 - w0
    if span <= 0 or gap_total == 0:
        return w0, w1, excluded
    t0, t1 = w0, w1
    thr = max(SETUP_GAP_MIN_NS, SETUP_GAP_MIN_PCT / 100 * span)
    early = [g for g in glob.setup_gaps if g[2] >= thr and w0 <= g[0] < w0 + span // 2]
    if early:
        end = max(g[1] for g in early)
        ndev = ctx.ndev
        left = np.zeros(ndev, dtype=np.int64)
        for d, a, b in glob.setup_pieces:
            a2, b2 = max(a, end), min(b, w1)
            if b2 > a2:
                left[d] += b2 - a2
        busy_devs = ctx.plan.dev_max_end > end
        steady = end < w1 and (not busy_devs.any() or
                               left[busy_devs].mean() < STEADY_MAX_SETUP_PCT / 100 * (w1 - end))
        if steady:
            excluded.append({"kind": "warm-up", "start_ns": w0, "end_ns": end})
            t0 = end
    # stretches with no GPU work on any device
    base = glob.merged_marks.get(t0, 0) if t0 != w0 else 0
    total = float(glob.merged_total - base)
    rest = t1 - t0
    inner = sorted((a, b, before - base) for a, b, before in glob.merged_idle if a > t0 and b < t1)
    long_ = [(a, b, before) for a, b, before in inner if (b - a) >= IDLE_EDGE_MIN_PCT / 100 * rest]
    head = [x for x in long_ if x[2] <= IDLE_EDGE_MAX_WORK_PCT / 100 * total]
    tail = [x for x in long_ if total - x[2] <= IDLE_EDGE_MAX_WORK_PCT / 100 * total]
    if head:
        a, b, _ = head[-1]
        excluded.append({"kind": "idle head", "start_ns": t0, "end_ns": int(b)})
        t0 = int(b)
    if tail:
        a, b, _ = tail[0]
        if a > t0:
            excluded.append({"kind": "idle tail", "start_ns": int(a), "end_ns": t1})
            t1 = int(a)
    return t0, t1, excluded


__all__ = ["Capture", "Result", "run", "capture_windows", "nvtx_summary", "Ops", "POS"]


