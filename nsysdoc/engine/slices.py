"""One time slice: its GPU operations, device unions, idle gaps and host activity, and its share
of every total (see :mod:`nsysdoc.engine`).

Ownership (each thing is counted by exactly one slice):

* a GPU operation, a CUDA API call, an OS call: the slice its **start** falls in;
* an idle gap: the slice its **end** falls in (the operation that ends it starts there), so the
  gap is whole when it is classified, however many slices it spans;
* time: positional quantities (busy, compute, host sync...) are clipped to the slice's
  ``[c0, c1)``; idle time is counted with the gap that holds it.

The run's concerns live in modules next to this one (issue 51): the types
(:mod:`.slice_state`), the host rows of phase A (:mod:`.slice_host`), attribution
(:mod:`.slice_sites`), the hardware counters (:mod:`.slice_counters`), phase B per window
(:mod:`.slice_window`) and independent of it (:mod:`.slice_global`, :mod:`.slice_scalar_reads`).
This module keeps phase A itself (:func:`prepare`, :func:`phase_a`: what one slice holds) and
re-exports every name those modules define, so that callers import from here as before.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..metrics import gpu as gpu_m
from ..metrics import intervals as iv
from ..metrics.copies import PAGEABLE_MIN_BYTES
from ..metrics.host import SCALAR_READ_MAX_BYTES
from ..metrics.ops import KIND_KERNEL, KIND_MEMCPY
from ..metrics.steps import assign_ops_to_steps
from ..trace import schema as S
from .attribute import gpu_labels
from .data import (FLAG_DTOH, FLAG_FP32, FLAG_IN_WINDOW, FLAG_PAGEABLE, FLAG_SCALAR, FLAG_TUNING, NEG, POS, Ops,
                   in_window, read_ops)
# re-exported: the callers (engine.run, engine.events, assembly.perfetto_rows, tests) import them from here
from .slice_counters import _kernel_counter_sums, _operator_counter_sums, _slice_counters  # noqa: F401
from .slice_global import (SETUP_MARK_NS, _alloc_rows, _merged, _setup_calls, _setup_pieces,  # noqa: F401
                           global_totals, long_idle, next_carry)
from .slice_host import _host, _setup_stretches, host_range  # noqa: F401
from .slice_scalar_reads import _resolve_pending, _scalar_reads, next_call_syncs  # noqa: F401
from .slice_sites import _sites_of, _view, _where, _where_ops, op_sites, slice_attributor  # noqa: F401
from .slice_state import (NC, TOP_GAPS, Carry, Context, Global, SliceState, Window, _both,  # noqa: F401
                          _kernel_counters_context, _merge_calls, _top_gaps, trace_thread_index)
from .slice_window import (_calls, _compact, _count, _dependency_gaps, _gap_totals, _in_window_of,  # noqa: F401
                           _sel, _top_idx, window_totals)


# ---------------------------------------------------------------------------------------------
# phase A: the slice's operations, unions, gaps and host activity
# ---------------------------------------------------------------------------------------------
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


__all__ = ["Carry", "Context", "Global", "SliceState", "Window", "global_totals", "in_window", "next_carry",
           "phase_a", "prepare", "Prepared", "window_totals", "NEG", "POS", "FLAG_SCALAR"]
