"""Attribution slice by slice: the attributor each slice asks, its operations' sites at their
launch (found once per slice, ahead when possible), and the slice's share of each selector's time
per site in a window (``Window.where``, see :data:`nsysdoc.engine.attribute.SELECTORS`). Split out
of :mod:`nsysdoc.engine.slices` (issue 51): phase A reads the sites ahead, and both halves of
phase B add them up."""
from __future__ import annotations

import numpy as np

from ..metrics import gpu as gpu_m
from ..metrics.gpu import CAUSE_HOST, CAUSE_LAUNCH, CAUSES
from ..metrics.ops import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET
from ..trace import schema as S
from .attribute import SELECTORS, SiteSums, accumulate, add_sites, site_counts, site_index, site_rows
from .data import FLAG_DTOH, FLAG_FP32, FLAG_PAGEABLE, FLAG_UNDERFILLED, NEG, Ops
from .slice_state import Context, SliceState, Window


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
