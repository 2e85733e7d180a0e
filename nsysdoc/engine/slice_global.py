"""Phase B, independent of the analysis window: what a slice hands on to the next
(:func:`next_carry`) and its share of the capture's totals (:func:`global_totals`: per step,
set-up gaps and calls, allocation rows, the all-device idle stretches, operator attribution and
counters, scalar reads), added in place into :class:`nsysdoc.engine.slice_state.Global`. Split out
of :mod:`nsysdoc.engine.slices` (issue 51): run once per slice, unlike the per-window totals
(:mod:`nsysdoc.engine.slice_window`)."""
from __future__ import annotations

import numpy as np

from ..metrics import gpu as gpu_m
from ..metrics import intervals as iv
from ..metrics.gpu import CAUSE_SETUP
from ..metrics.ops import KIND_KERNEL
from ..trace import schema as S
from ..trace.tables import unique_ints
from . import fill as fill_m
from .attribute import gpu_labels
from .data import FLAG_DTOH, FLAG_IN_WINDOW, NEG, Ops
from .slice_counters import _operator_counter_sums
from .slice_scalar_reads import _scalar_reads
from .slice_sites import _view, op_sites
from .slice_state import Carry, Context, Global, SliceState, _both


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
