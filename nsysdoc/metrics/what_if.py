"""What-if per finding (issue 48, milestone 2): a named change of a step's dependency graph
(:mod:`nsysdoc.metrics.critical_path`) and the step time recomputed on the changed graph.

Definitions (also in ``docs/glossary.md``, "What-if"):

* **Replay.** The step's calls and GPU operations are replayed in their recorded order; each node
  starts when its predecessors (the graph's edges) have arrived, plus the *lag* the capture shows on
  that edge, and lasts its (possibly changed) duration. The lag of the edge a node actually waited
  on (its last arrival, as on the critical path) is the recorded one (host CPU time between two
  calls, launch latency, a wait nothing in the capture explains); the lag of the other edges is the
  smallest the capture allows (0 after the stream's previous operation or a producer, the launch
  call's length after a launch), so a node moves earlier when what it waited on does, up to the next
  constraint. A blocking sync ends its recorded return time after the GPU operation it waited for.
  Nodes that started before the step stay where they were (their time inside the step changes with
  their duration). Unchanged, the replay gives back every recorded time, so the step time after is
  the step time before.
* **Step time after** = the step's start to the last node's end (clipped to the step's end, as the
  path is), plus the host time the step spent after its last node. Changes only shorten durations,
  cut lags or drop edges, so it never exceeds the step time before.
* A change is one :class:`Change` (durations scaled or capped, host lags cut, blocking waits or
  cross-stream waits removed); several fixes together are one :class:`Change` (:func:`combine`),
  replayed once — never a sum of separate savings.

The replay runs vectorised (:func:`replay_chains`: each thread's calls and each stream's operations
are chains solved by a running maximum, swept until no time changes); :func:`replay`, one node at a
time, is its reference and its fallback after ``MAX_SWEEPS`` sweeps. Pure functions on arrays;
times in ns.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import critical_path as cp_m
from .gpu import LAUNCH_LATENCY_NS

#: launch-bound's floor: a launch call lasts at most this (about a CUDA Graph kernel node's or a C++
#: dispatch's cost per kernel) ...
LAUNCH_FLOOR_CALL_NS = 2_000
#: ... and the host time before a launch call, when under this (the dispatch gaps launch-bound
#: counts: under 1 ms), drops to 0
DISPATCH_GAP_MAX_NS = 1_000_000
#: data-starvation: a step's first call on a thread that came this long or more after the step's
#: start (or after the thread's previous call) waited for input
INPUT_WAIT_MIN_NS = cp_m.THREAD_IDLE_NS
#: FP32 GEMM/conv kernels under TF32 (the fp32-gemm rule's ``tf32_speedup`` default)
TF32_SPEEDUP = 2.0
#: the dominant kernel made this much faster (a tuned, fused or tensor-core version; an
#: illustration of what its efficiency is worth, not a measurement)
DOMINANT_SPEEDUP = 2.0

_NEG = -(1 << 62)


@dataclass
class Change:
    """A change of a graph: ``op_scale`` (per operation, its duration times this), ``call_ns``
    (per call, its own time capped at this; -1: unchanged), ``lag_cut_ns`` (per call, its host lag
    after the thread's previous call, or its start when it has none, cut by this), ``handoff_off``
    (per call: the thread hand-off edge dropped), ``sync_off`` (per call: the blocking wait
    removed), ``producers_off`` (every cross-stream wait dropped). ``text`` says what changed."""

    text: str
    op_scale: np.ndarray | None = None
    call_ns: np.ndarray | None = None
    lag_cut_ns: np.ndarray | None = None
    handoff_off: np.ndarray | None = None
    sync_off: np.ndarray | None = None
    producers_off: bool = False
    rules: list = field(default_factory=list)

    def empty(self) -> bool:
        """True when the change touches nothing."""
        return not (self.producers_off
                    or (self.op_scale is not None and bool((self.op_scale != 1.0).any()))
                    or (self.call_ns is not None and bool((self.call_ns >= 0).any()))
                    or (self.lag_cut_ns is not None and bool((self.lag_cut_ns > 0).any()))
                    or (self.handoff_off is not None and bool(self.handoff_off.any()))
                    or (self.sync_off is not None and bool(self.sync_off.any())))


def combine(changes: list[Change], text: str) -> Change:
    """Several changes as one: each node takes the strongest change any of them makes."""
    def pick(attr, fn):
        arrs = [getattr(c, attr) for c in changes if getattr(c, attr) is not None]
        if not arrs:
            return None
        out = arrs[0].copy()
        for x in arrs[1:]:
            out = fn(out, x)
        return out

    def cap_min(a, b):  # -1 = unchanged
        return np.where(a < 0, b, np.where(b < 0, a, np.minimum(a, b)))

    return Change(text, op_scale=pick("op_scale", np.minimum), call_ns=pick("call_ns", cap_min),
                  lag_cut_ns=pick("lag_cut_ns", np.maximum), handoff_off=pick("handoff_off", np.logical_or),
                  sync_off=pick("sync_off", np.logical_or), producers_off=any(c.producers_off for c in changes),
                  rules=[r for c in changes for r in c.rules])


@dataclass
class Replay:
    """What a replay of step ``[t0, t1)`` of graph ``g`` needs, computed once per step: the lag of
    each edge, each operation's cross-stream producer, the replay order."""

    g: cp_m.Graph
    t0: int
    t1: int
    lag_prev: np.ndarray
    lag_hand: np.ndarray
    own_sync: np.ndarray
    lag_await: np.ndarray
    op_lag_prev: np.ndarray
    op_lag_call: np.ndarray
    producer: np.ndarray
    op_lag_prod: np.ndarray
    order: list
    tail_ns: int
    best_ns: int
    live_c: np.ndarray
    live_o: np.ndarray


def prepare(g: cp_m.Graph, t0: int, t1: int) -> Replay:
    """The edges' lags and the replay order of step ``[t0, t1)`` (module docstring)."""
    t0, t1 = int(t0), int(t1)
    cs, ce, os_, oe = g.c_start, g.c_end, g.o_start, g.o_end
    nc, no = len(cs), len(os_)
    p, h, w = g.call_prev, g.call_other, g.call_await
    pe = ce[np.maximum(p, 0)] if nc else ce
    lag_prev = np.where(p >= 0, cs - pe, 0)
    lag_prev = np.where(h >= 0, 0, lag_prev)  # the idle time before a hand-off was a wait on the other thread
    lag_hand = np.where(h >= 0, cs - ce[np.maximum(h, 0)], 0) if nc else np.zeros(0, np.int64)
    we = oe[np.maximum(w, 0)] if (nc and no) else np.zeros(nc, np.int64)
    waited = (w >= 0) & (we > cs)
    own_sync = np.where(waited, ce - we, ce - cs)
    lag_await = np.where(waited, ce - we, 0)
    # operations: arrivals of the stream predecessor and the launch call, the producer when the
    # operation waited on something else (as on the critical path's walk)
    op_prev, op_call = g.op_prev, g.op_call
    a_p = np.where(op_prev >= 0, oe[np.maximum(op_prev, 0)], _NEG) if no else np.zeros(0, np.int64)
    a_c = np.where(op_call >= 0, cs[np.maximum(op_call, 0)], _NEG) if (no and nc) else np.full(no, _NEG)
    c_dur = np.where(op_call >= 0, (ce - cs)[np.maximum(op_call, 0)], 0) if (no and nc) else np.zeros(no, np.int64)
    if no and nc:
        # a host-blocking copy's call lasts until its copy ended: its length is no launch lag, the
        # copy could start a launch latency after the call did
        own = (op_call >= 0) & (w[np.maximum(op_call, 0)] == np.arange(no))
        c_dur = np.where(own, np.minimum(c_dur, LAUNCH_LATENCY_NS), c_dur)
    # the producer each operation waited on, as the critical path's walk finds it
    _, bnode, _ = cp_m.bindings(g, t0)
    onode = bnode[nc:] - nc
    producer = np.where((bnode[nc:] >= nc) & (onode != op_prev), onode, -1) if no else np.zeros(0, np.int64)
    has_k = producer >= 0
    bind_call = ~has_k & (a_c > a_p)  # the walk takes the launch only when it arrived strictly later
    bind_prev = ~has_k & ~bind_call
    op_lag_prev = np.where(bind_prev, os_ - a_p, np.minimum(os_ - a_p, 0))
    op_lag_call = np.where(bind_call, os_ - a_c, np.minimum(os_ - a_c, c_dur))
    op_lag_prod = np.where(has_k, os_ - oe[np.maximum(producer, 0)], 0) if no else np.zeros(0, np.int64)
    # replay order: blocking syncs' ends (at their recorded end), then calls, then operations, by
    # time: every node's predecessors come before it
    # time: every node's predecessors come before it. Nodes that ended by the step's start are
    # given (nothing before the step changes): left out
    sync_end = np.flatnonzero((w >= 0) & (ce > t0))
    c_in, o_in = np.flatnonzero(ce > t0), np.flatnonzero(oe > t0)
    keys = np.concatenate([cs[c_in], os_[o_in], ce[sync_end]])
    rank = np.concatenate([np.ones(len(c_in), np.int64), np.full(len(o_in), 2, np.int64),
                           np.zeros(len(sync_end), np.int64)])
    ids = np.concatenate([c_in, nc + o_in, nc + no + sync_end])
    order = ids[np.lexsort((rank, keys))].tolist()
    live_c = np.flatnonzero((cs < t1) & (ce > t0))
    live_o = np.flatnonzero((os_ < t1) & (oe > t0))
    best = t0
    if len(live_c):
        best = max(best, int(np.minimum(ce[live_c], t1).max()))
    if len(live_o):
        best = max(best, int(np.minimum(oe[live_o], t1).max()))
    return Replay(g, t0, t1, lag_prev, lag_hand, own_sync, lag_await, op_lag_prev, op_lag_call, producer,
                  op_lag_prod, order, t1 - best, best, live_c, live_o)


def replay(r: Replay, ch: Change | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The calls' and operations' start and end times after change ``ch``: ``(c_start, c_end,
    o_start, o_end)``."""
    g, t0 = r.g, r.t0
    nc, no = len(g.c_start), len(g.o_start)
    cs0, ce0, os0, oe0 = g.c_start.tolist(), g.c_end.tolist(), g.o_start.tolist(), g.o_end.tolist()
    cs, ce, os_, oe = list(cs0), list(ce0), list(os0), list(oe0)
    cprev, chand, cawait = g.call_prev.tolist(), g.call_other.tolist(), g.call_await.tolist()
    oprev, ocall, oprod = g.op_prev.tolist(), g.op_call.tolist(), r.producer.tolist()
    lag_prev, lag_hand = r.lag_prev.tolist(), r.lag_hand.tolist()
    own_sync, lag_await = r.own_sync.tolist(), r.lag_await.tolist()
    olp, olc, olk = r.op_lag_prev.tolist(), r.op_lag_call.tolist(), r.op_lag_prod.tolist()
    dur_c = (g.c_end - g.c_start)
    shrink = np.zeros(nc, np.int64)
    if ch is not None and ch.call_ns is not None:
        capped = np.where(ch.call_ns >= 0, np.minimum(dur_c, ch.call_ns), dur_c)
        shrink = dur_c - capped
        dur_c = capped
    dur_c = dur_c.tolist()
    shrink = shrink.tolist()
    scale = ch.op_scale.tolist() if ch is not None and ch.op_scale is not None else None
    cut = ch.lag_cut_ns.tolist() if ch is not None and ch.lag_cut_ns is not None else None
    hoff = ch.handoff_off.tolist() if ch is not None and ch.handoff_off is not None else None
    soff = ch.sync_off.tolist() if ch is not None and ch.sync_off is not None else None
    prod_on = not (ch is not None and ch.producers_off)
    for e in r.order:
        if e < nc:
            i = e
            s0 = cs0[i]
            if s0 < t0:
                s = s0
            else:
                s = _NEG
                p = cprev[i]
                c = cut[i] if cut is not None else 0
                if p >= 0:
                    s = ce[p] + max(lag_prev[i] - c, 0)
                h = chand[i]
                if h >= 0 and not (hoff is not None and hoff[i]):
                    s = max(s, ce[h] + lag_hand[i])
                if s == _NEG:
                    s = s0 - c
                s = max(s, t0)  # the step's own calls never move before its start
            cs[i] = s
            if cawait[i] < 0:
                # a call that started before the step keeps its recorded length (it is given)
                ce[i] = s + (dur_c[i] if s0 >= t0 else ce0[i] - s0)
        elif e < nc + no:
            j = e - nc
            s0 = os0[j]
            d = oe0[j] - s0
            if s0 < t0:
                s = s0
                if scale is not None and scale[j] != 1.0 and oe0[j] > t0:
                    d = (t0 - s0) + int(round((oe0[j] - t0) * scale[j]))
            else:
                s = _NEG
                p = oprev[j]
                if p >= 0:
                    s = oe[p] + olp[j]
                c = ocall[j]
                if c >= 0:
                    s = max(s, cs[c] + max(olc[j] - shrink[c], 0))
                k = oprod[j]
                if k >= 0 and prod_on:
                    s = max(s, oe[k] + olk[j])
                if s == _NEG:
                    s = s0
                if scale is not None and scale[j] != 1.0:
                    d = int(round(d * scale[j]))
            os_[j] = s
            oe[j] = s + d
        else:
            i = e - nc - no
            if cs0[i] < t0:
                ce[i] = max(cs[i] + own_sync[i], oe[cawait[i]] + lag_await[i])
            elif soff is not None and soff[i]:
                ce[i] = cs[i] + min(own_sync[i], dur_c[i])
            else:
                ce[i] = max(cs[i] + min(own_sync[i], dur_c[i]), oe[cawait[i]] + lag_await[i])
    i64 = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return i64(cs), i64(ce), i64(os_), i64(oe)


#: sweeps of :func:`replay_chains` before it gives up (then :func:`replay`, one node at a time)
MAX_SWEEPS = 48


def _chains(s0: np.ndarray, e0: np.ndarray, prev: np.ndarray, lane: np.ndarray, t0: int) -> tuple:
    """For the calls (lane: thread) or the operations (lane: stream): ``act`` (ended after the
    step's start), ``fix`` (started before it: given start), ``link`` (follows an active
    predecessor in its chain), ``order`` (the active ones by lane, then start) and its
    :func:`_segments`."""
    n = len(s0)
    act = e0 > t0
    fix = s0 < t0
    link = (prev >= 0) & act[np.maximum(prev, 0)] & ~fix if n else np.zeros(0, bool)
    order = np.lexsort((np.arange(n), s0, lane))
    order = order[act[order]]
    return act, fix, link, order, _segments(order, link)


def _segments(order: np.ndarray, linked: np.ndarray) -> list:
    """Slices of ``order`` (nodes in chain order) where each node is linked to the one before."""
    if not len(order):
        return []
    starts = np.flatnonzero(~linked[order])
    if not len(starts) or starts[0] != 0:
        starts = np.r_[0, starts]
    ends = np.r_[starts[1:], len(order)]
    return list(zip(starts.tolist(), ends.tolist()))


def _chain_solve(order, segs, w, e, out) -> None:
    """``out[order[k]] = max(out[order[k-1]] + w[order[k]], e[order[k]])`` along each segment (the
    first node of a segment: ``e``), as ``W + cummax(e - W)`` with ``W`` the running sum of ``w``."""
    wo, eo = w[order], e[order]
    for a, b in segs:
        ww = wo[a:b].copy()
        ww[0] = 0
        W = np.cumsum(ww)
        out[order[a:b]] = W + np.maximum.accumulate(eo[a:b] - W)


def replay_chains(r: Replay, ch: Change | None = None):
    """:func:`replay`, vectorised: each thread's calls and each stream's operations form chains solved
    at once by a running maximum (a node ends at the later of its chain predecessor's end plus
    lag and duration, and its other arrivals plus duration); the chains are swept — calls, then
    operations — until no time changes (each sweep carries a hand-off, launch, sync or producer
    edge one hop further). Same times as :func:`replay`; None after ``MAX_SWEEPS`` sweeps."""
    g, t0 = r.g, r.t0
    nc, no = len(g.c_start), len(g.o_start)
    cs0, ce0, os0, oe0 = g.c_start, g.c_end, g.o_start, g.o_end
    neg = _NEG // 4
    # --- what the change does to durations and lags
    dur_c = ce0 - cs0
    shrink = np.zeros(nc, np.int64)
    if ch is not None and ch.call_ns is not None:
        capped = np.where(ch.call_ns >= 0, np.minimum(dur_c, ch.call_ns), dur_c)
        shrink, dur_c = dur_c - capped, capped
    cut = ch.lag_cut_ns if ch is not None and ch.lag_cut_ns is not None else np.zeros(nc, np.int64)
    hoff = ch.handoff_off if ch is not None and ch.handoff_off is not None else np.zeros(nc, bool)
    soff = ch.sync_off if ch is not None and ch.sync_off is not None else np.zeros(nc, bool)
    prod_on = not (ch is not None and ch.producers_off)
    # --- calls: active (ended after the step's start), fixed (started before it: given start)
    p, h, w = g.call_prev, g.call_other, g.call_await
    c_act, c_fix, c_link, c_order, c_segs = _chains(cs0, ce0, p, g.c_thread, t0)
    lagp = np.maximum(r.lag_prev - cut, 0)
    D = np.where(c_fix, ce0 - cs0, dur_c)
    sync = (w >= 0) & c_act
    own = np.where(c_fix, r.own_sync, np.minimum(r.own_sync, dur_c))
    D = np.where(sync, own, D)
    # --- operations
    op, oc, ok_ = g.op_prev, g.op_call, r.producer
    o_act, o_fix, o_link, o_order, o_segs = _chains(os0, oe0, op, g.o_stream, t0)
    d0 = oe0 - os0
    if ch is not None and ch.op_scale is not None:
        sc = ch.op_scale
        od = np.where(o_fix, np.where(oe0 > t0, (t0 - os0) + np.round((oe0 - t0) * sc).astype(np.int64), d0),
                      np.round(d0 * sc).astype(np.int64))
        od = np.where(sc != 1.0, od, d0)
    else:
        od = d0
    olc = np.maximum(r.op_lag_call - shrink[np.maximum(oc, 0)], 0) if (no and nc) else np.zeros(no, np.int64)
    cs, ce, os_, oe = cs0.copy(), ce0.copy(), os0.copy(), oe0.copy()
    pc, hc, wc = np.maximum(p, 0), np.maximum(h, 0), np.maximum(w, 0)
    opc, occ, okc = np.maximum(op, 0), np.maximum(oc, 0), np.maximum(ok_, 0)
    has_h = (h >= 0) & ~hoff
    c_src = (p < 0) & (h < 0)
    o_src = (op < 0) & (oc < 0) & (ok_ < 0) if no else np.zeros(0, bool)
    has_k = (ok_ >= 0) & prod_on
    for _ in range(MAX_SWEEPS):
        # calls: start = max(prev end + lag [linked], X); end = max(start + D, Y)
        X = np.full(nc, neg, np.int64)
        X = np.where(has_h, ce[hc] + r.lag_hand, X)
        X = np.where((p >= 0) & ~c_link, np.maximum(X, ce[pc] + lagp), X)
        X = np.where(c_src, cs0 - cut, X)
        X = np.where(c_fix, cs0, np.maximum(X, t0))  # the step's own calls never move before its start
        Y = np.where(sync & ~soff, oe[wc] + r.lag_await, neg) if no else np.full(nc, neg, np.int64)
        Y = np.where(sync & c_fix, np.maximum(Y, oe[wc] + r.lag_await) if no else Y, Y)
        new_ce = ce.copy()
        _chain_solve(c_order, c_segs, lagp + D, np.maximum(X + D, Y), new_ce)
        new_cs = np.where(c_link, np.maximum(new_ce[pc] + lagp, X), X)
        new_cs = np.where(c_act, new_cs, cs0)
        new_ce = np.where(c_act, new_ce, ce0)
        # operations: start = max(stream predecessor's end + lag [linked], launch, producer, X)
        Xo = np.full(no, neg, np.int64)
        if nc:
            Xo = np.where(oc >= 0, new_cs[occ] + olc, Xo)
        Xo = np.where(has_k, np.maximum(Xo, oe[okc] + r.op_lag_prod), Xo)
        Xo = np.where((op >= 0) & ~o_link, np.maximum(Xo, oe[opc] + r.op_lag_prev), Xo)
        Xo = np.where(o_src, os0, Xo)
        Xo = np.where(o_fix, os0, Xo)
        new_oe = oe.copy()
        _chain_solve(o_order, o_segs, r.op_lag_prev + od, Xo + od, new_oe)
        new_os = np.where(o_link, np.maximum(new_oe[opc] + r.op_lag_prev, Xo), Xo)
        new_os = np.where(o_act, new_os, os0)
        new_oe = np.where(o_act, new_oe, oe0)
        same = (np.array_equal(new_cs, cs) and np.array_equal(new_ce, ce) and np.array_equal(new_os, os_)
                and np.array_equal(new_oe, oe))
        cs, ce, os_, oe = new_cs, new_ce, new_os, new_oe
        if same:
            return cs, ce, os_, oe
    return None


def step_ns_after(r: Replay, ch: Change | None = None) -> int:
    """The step time after change ``ch`` (module docstring): never more than before."""
    if ch is None or ch.empty():
        return r.t1 - r.t0
    got = replay_chains(r, ch)
    _, ce, _, oe = got if got is not None else replay(r, ch)
    best = r.t0
    if len(r.live_c):
        best = max(best, int(np.minimum(ce[r.live_c], r.t1).max()))
    if len(r.live_o):
        best = max(best, int(np.minimum(oe[r.live_o], r.t1).max()))
    return min(best - r.t0 + r.tail_ns, r.t1 - r.t0)


# --- the changes each rule's fix makes (docs/glossary.md, "What-if") ------------------------------

def launch_floor(g: cp_m.Graph, t0: int) -> Change:
    """launch-bound: every launch call shorter than ``DISPATCH_GAP_MAX_NS`` cut to
    ``LAUNCH_FLOOR_CALL_NS`` and the host time before a launch call (when under
    ``DISPATCH_GAP_MAX_NS``) cut to 0."""
    launch = g.c_kind == cp_m.CALL_LAUNCH
    # long launch calls (1 ms or more: module loading, a full queue, a driver stall) are not
    # per-launch overhead: launch-bound does not count them, and they keep their length
    short = launch & (g.c_end - g.c_start < DISPATCH_GAP_MAX_NS)
    call_ns = np.where(short, LAUNCH_FLOOR_CALL_NS, -1).astype(np.int64)
    p = g.call_prev
    gap = np.where(p >= 0, g.c_start - g.c_end[np.maximum(p, 0)], 0) if len(p) else np.zeros(0, np.int64)
    cut = np.where(launch & (p >= 0) & (gap > 0) & (gap < DISPATCH_GAP_MAX_NS), gap, 0).astype(np.int64)
    return Change(f"each launch call cut to {LAUNCH_FLOOR_CALL_NS / 1000:g} us and no host time between launches, "
                  f"as with CUDA Graphs",
                  call_ns=call_ns, lag_cut_ns=cut)


def syncs_removed(g: cp_m.Graph, t0: int) -> Change:
    """host-sync: every blocking sync of the step no longer waits for the GPU."""
    off = (g.c_kind == cp_m.CALL_SYNC) & (g.call_await >= 0) & (g.c_start >= t0)
    return Change("the blocking syncs removed, so the host no longer waits for the GPU",
                  sync_off=off)


def input_wait_removed(g: cp_m.Graph, t0: int) -> Change:
    """data-starvation: the host time before a thread's first call of the step, when at least
    ``INPUT_WAIT_MIN_NS`` (waiting for the batch), removed (and its thread hand-off dropped)."""
    n = len(g.c_start)
    cut = np.zeros(n, np.int64)
    hoff = np.zeros(n, bool)
    if n:
        inside = np.flatnonzero(g.c_start >= t0)
        if len(inside):
            th = g.c_thread[inside]
            o = np.lexsort((g.c_start[inside], th))
            first = inside[o][np.r_[True, th[o][1:] != th[o][:-1]]]
            p = g.call_prev[first]
            since = np.where(p >= 0, np.maximum(g.c_end[np.maximum(p, 0)], t0), t0)
            wait = g.c_start[first] - since
            big = wait >= INPUT_WAIT_MIN_NS
            cut[first[big]] = wait[big]
            hoff[first[big]] = True
    return Change("the wait for input at the step's start removed",
                  lag_cut_ns=cut, handoff_off=hoff)


def ops_faster(g: cp_m.Graph, mask: np.ndarray, k: float, text: str) -> Change:
    """The operations in ``mask`` ``k`` times faster."""
    return Change(text, op_scale=np.where(mask, 1.0 / k, 1.0))


def comm_hidden(g: cp_m.Graph) -> Change:
    """nccl-exposed: communication fully overlapped with compute (its kernels off every path: the
    most overlap can recover)."""
    return Change("communication fully hidden under the compute it depends on",
                  op_scale=np.where(g.o_seg == cp_m.COMM, 0.0, 1.0))


def pinned_copies(g: cp_m.Graph, pageable: np.ndarray, nbytes: np.ndarray, pinned_gbps: float,
                  to_host: np.ndarray | None = None) -> Change:
    """pageable-memcpy: each pageable host<->device copy at pinned bandwidth (``nbytes /
    pinned_gbps``, never longer than it was), and its ``cudaMemcpyAsync``, which a pageable copy
    blocks, returning when the copy starts (an asynchronous call, as from pinned memory) — except
    a device-to-host copy (``to_host``) whose call waited for it: the host reads the data it
    waited for, so its call still returns when the (faster) copy ends."""
    dur = (g.o_end - g.o_start).astype(np.float64)
    fast = nbytes / max(float(pinned_gbps), 1e-9)  # bytes / (GB/s) = ns
    scale = np.where(pageable & (dur > 0), np.minimum(1.0, fast / np.maximum(dur, 1.0)), 1.0)
    call_ns = np.full(len(g.c_start), -1, np.int64)
    c = g.op_call
    blocked = pageable & (c >= 0)
    sync_off = np.zeros(len(g.c_start), bool)
    if blocked.any() and len(g.c_start):
        cc = c[blocked]
        th = np.zeros(len(cc), bool) if to_host is None else np.asarray(to_host, bool)[blocked]
        # a host-blocking copy's call (metrics.critical_path: it awaits its own copy) turns
        # asynchronous unless the host waited for data coming back to it
        own = (g.c_kind[cc] == cp_m.CALL_SYNC) & (g.call_await[cc] == np.flatnonzero(blocked)) & ~th
        sync_off[cc[own]] = True
        launch = (g.c_kind[cc] == cp_m.CALL_LAUNCH) | own
        cc, os_ = cc[launch], g.o_start[blocked][launch]
        long_ = g.c_end[cc] > os_
        call_ns[cc[long_]] = np.maximum(os_[long_] - g.c_start[cc[long_]], 0)
    return Change(f"pageable copies at pinned bandwidth ({pinned_gbps:.1f} GB/s) and their calls asynchronous",
                  op_scale=scale, call_ns=call_ns, sync_off=sync_off)


def waits_removed(g: cp_m.Graph) -> Change:
    """gpu-dependency: the cross-stream waits dropped (each operation starts when its own stream and
    launch allow)."""
    return Change("the GPU-side waits on other streams removed", producers_off=True)


__all__ = ["Change", "Replay", "prepare", "replay", "step_ns_after", "combine", "launch_floor", "syncs_removed",
           "input_wait_removed", "ops_faster", "comm_hidden", "waits_removed", "pinned_copies", "LAUNCH_FLOOR_CALL_NS",
           "DISPATCH_GAP_MAX_NS", "INPUT_WAIT_MIN_NS", "TF32_SPEEDUP", "DOMINANT_SPEEDUP"]


# --- the fixes of the fired findings together (``metrics.critical_path.what_if_all``) -----------
#: the last reports' combiners (a function of rule ids replaying their fixes together on the median
#: step's graph, :func:`nsysdoc.assembly.critical_path.what_if_metrics`), keyed by the identity of
#: the report's ``metrics.critical_path``: the rules, which run after the assembly and must not
#: import it, reach the graph here. Few are kept (a graph is large).
_KEEP = 4
_combiners: dict = {}


def remember(cp: dict, combine_fn) -> None:
    """Keep ``combine_fn`` for the report whose ``metrics.critical_path`` is ``cp``."""
    _combiners[id(cp)] = (cp, combine_fn)
    while len(_combiners) > _KEEP:
        _combiners.pop(next(iter(_combiners)))


def combined(cp: dict, rule_ids: list[str]):
    """The combined what-if of ``rule_ids`` on the report whose critical path is ``cp`` (its row, or
    None: fewer than two with a what-if, or the graph gone — a saved report, or one of the
    last ``_KEEP`` no more)."""
    kept = _combiners.get(id(cp))
    if kept is None or kept[0] is not cp:
        return None
    return kept[1](rule_ids)
