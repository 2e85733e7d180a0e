"""The host side of phase A (:func:`nsysdoc.engine.slices.phase_a`): which CUDA API and OS rows a
slice reads around its idle gaps, the host activity built from them, and the set-up stretches
painted on it, the same whichever slice paints them. Split out of :mod:`nsysdoc.engine.slices`
(issue 51): the only part of a slice that reads host rows."""
from __future__ import annotations

import numpy as np

from ..metrics import gpu as gpu_m
from ..metrics.gpu import SYNC_TOLERANCE_NS
from ..metrics.host import host_activity_from
from ..trace import schema as S
from .data import NEG, POS, blocking_of, in_sorted, osrt_rows, runtime_rows
from .slice_state import Context


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
