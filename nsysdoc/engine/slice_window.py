"""Phase B, per analysis window: a slice's share of the totals of a window ``[w0, w1)``
(:func:`window_totals`: counts, busy and idle time, kernels by name, copies, the longest and the
GPU-dependency gaps, host sync and allocation calls, attribution), added over slices into
:class:`nsysdoc.engine.slice_state.Window`. Split out of :mod:`nsysdoc.engine.slices` (issue 51):
the part run again for every window, unlike the window-independent totals
(:mod:`nsysdoc.engine.slice_global`)."""
from __future__ import annotations

import numpy as np

from ..metrics import gpu as gpu_m
from ..metrics import intervals as iv
from ..metrics.copies import copy_groups
from ..metrics.gpu import CAUSE_HOST, CAUSE_LAUNCH
from ..metrics.ops import KIND_KERNEL, KIND_MEMCPY
from ..trace import schema as S
from . import fill as fill_m
from .data import FLAG_DTOH, FLAG_FP32, FLAG_IN_WINDOW, FLAG_LOW_OCC, FLAG_PAGEABLE, FLAG_TUNING, Ops, in_window
from .slice_counters import _kernel_counter_sums
from .slice_sites import _where
from .slice_state import NC, TOP_GAPS, Context, SliceState, Window, _both, _top_gaps


def _in_window_of(ctx: Context, ops: Ops, w0, w1) -> np.ndarray:
    """:func:`in_window` of the operations for ``[w0, w1)``: for the run's window, the flag
    :func:`_op_flags` set once per slice."""
    if (w0, w1) == (ctx.w0, ctx.w1) and ops.flags is not None:
        return (ops.flags & FLAG_IN_WINDOW) != 0
    return in_window(ops.start_ns, ops.end_ns, w0, w1)


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
