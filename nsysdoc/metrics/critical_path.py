"""The critical path of a step (issue 48, milestone 1): a dependency graph of the step's host calls
and GPU operations, and the chain of work and waits that set the step's length.

Definitions (also in ``docs/glossary.md``, "Critical path"):

* **Nodes** are time intervals: each host API call (CUDA runtime/driver call, on its thread) and
  each GPU operation (kernel, copy, memset, on its stream). Host time between two calls of a thread
  is the edge between them (``cpu``).
* **Edges** (a node cannot start before its predecessors *arrive*):

  - *host order*: a call follows the previous call of its thread (arrives at that call's end);
  - *thread hand-off*: when a call's thread made no call for more than ``THREAD_IDLE_NS`` before
    it, the thread may have waited on another one (the autograd engine's backward thread waits for
    the main thread's ``backward()``, a main thread for a data-loader thread): the call also follows
    the call of another thread of its process that ended last before it started. Neither format
    records which thread woke which, so the edge is found by timing;
  - *launch*: a GPU operation follows the **start** of the call that launched it (correlation id;
    the time from the call's start to the operation's start is ``launch``: the call itself and the
    launch latency);
  - *stream order*: a GPU operation follows the previous operation of its stream (arrives at its end);
  - *cross-stream wait*: when an operation started more than ``LAUNCH_LATENCY_NS`` after both its
    launch call returned and its stream predecessor arrived, it waited on other work: the operation on another
    stream that ended last before it started (at most ``LAUNCH_LATENCY_NS`` after) is its producer
    (``cudaStreamWaitEvent`` after ``cudaEventRecord``, a collective, a copy stream). The reader
    keeps neither nsys's ``eventId`` (SYNCHRONIZATION, CUDA_EVENT) nor Kineto's
    ``wait_on_cuda_event_record_corr_id``, so the edge is found by timing (``missing`` says so);
  - *host-blocking sync*: a blocking call (stream/device/event synchronize, synchronous copy or
    memset) waits for the GPU operation of its process that ended last inside the call (arrives at
    that operation's end): the host resumed when the awaited GPU work ended.

* The **critical path** of a step ``[t0, t1)`` is walked back from ``t1`` by the *last arrival*
  rule: start at the node that ended last (clipped to ``t1``), take its own time, then move to the
  predecessor that arrived last, covering the time between the predecessor's arrival and the node
  as that edge's segment (host order: ``cpu``; launch: ``launch``; stream order and cross-stream
  wait: ``wait``). Time before ``t0`` is cut off; a node without a predecessor in the capture
  covers the time back to ``t0`` (a call: ``cpu``; an operation: ``wait``), and time after the last
  node before ``t1`` is ``cpu``. So the path's **length equals the step time** and its
  **segments** ``cpu, launch, kernel, copy, comm, wait`` sum to it.
* Segments of nodes: a launch call's time is ``launch``; a blocking sync call's time is ``wait``
  (after the awaited GPU work ended: the call's return); any other call is ``cpu``; a kernel is
  ``kernel`` (a communication kernel: ``comm``), a copy or memset is ``copy``.

The graph (:class:`Graph`) keeps each node's duration and predecessors as arrays so a what-if
(milestone 2) can change a duration or drop an edge and recompute. Pure functions on arrays; times
in ns.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .gpu import LAUNCH_LATENCY_NS

#: the path's segments, in the JSON's order
SEGMENTS = ("cpu", "launch", "kernel", "copy", "comm", "wait")
CPU, LAUNCH, KERNEL, COPY, COMM, WAIT = range(6)
#: host call kinds (``c_kind``)
CALL_OTHER, CALL_LAUNCH, CALL_SYNC = 0, 1, 2
#: a producer on another stream may end this long after the waiting operation started
PRODUCER_TOLERANCE_NS = LAUNCH_LATENCY_NS
#: candidate producers looked at (latest ends first) per waiting operation
PRODUCER_SCAN = 256
#: a thread that made no call for this long may have waited on another thread (thread hand-off)
THREAD_IDLE_NS = 1_000_000
#: node types on the path
NODE_CALL, NODE_OP = 0, 1


@dataclass
class Graph:
    """A step's dependency graph. Calls ``c_*`` (start, end, thread, kind), operations ``o_*``
    (start, end, stream, segment ``KERNEL``/``COPY``/``COMM``, name code); predecessors as indices
    (-1: none): ``call_prev`` (host order), ``call_await`` (host-blocking sync), ``op_prev`` (stream
    order), ``op_call`` (launch). Cross-stream producers are looked up on the walk
    (:meth:`producer`), as only operations on the path need one."""

    c_start: np.ndarray
    c_end: np.ndarray
    c_thread: np.ndarray
    c_kind: np.ndarray
    o_start: np.ndarray
    o_end: np.ndarray
    o_stream: np.ndarray
    o_seg: np.ndarray
    o_name: np.ndarray
    call_prev: np.ndarray = field(default=None)
    #: thread hand-off (-1: none)
    call_other: np.ndarray = field(default=None)
    call_await: np.ndarray = field(default=None)
    op_prev: np.ndarray = field(default=None)
    op_call: np.ndarray = field(default=None)
    _by_end: np.ndarray = field(default=None, repr=False)

    def producer(self, j: int, after: int) -> int:
        """The operation on another stream than ``j``'s that ended last in
        ``(after, start_j + PRODUCER_TOLERANCE_NS]``; -1 when none."""
        order = self._by_end
        ends = self.o_end[order]
        hi = int(np.searchsorted(ends, int(self.o_start[j]) + PRODUCER_TOLERANCE_NS, side="right")) - 1
        stream = self.o_stream[j]
        for p in range(hi, max(hi - PRODUCER_SCAN, -1), -1):
            if ends[p] <= after:
                break
            k = int(order[p])
            if k != j and self.o_stream[k] != stream and self.o_start[k] < self.o_start[j]:
                return k
        return -1


def _prev_in_group(group: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Index of the previous element of the same group in start order (-1 for the first)."""
    n = len(start)
    out = np.full(n, -1, dtype=np.int64)
    if not n:
        return out
    order = np.lexsort((np.arange(n), start, group))
    same = np.zeros(n, dtype=bool)
    same[1:] = group[order][1:] == group[order][:-1]
    prev = np.full(n, -1, dtype=np.int64)
    prev[1:] = order[:-1]
    out[order] = np.where(same, prev, -1)
    return out


def _hand_offs(g: Graph, c_proc: np.ndarray) -> np.ndarray:
    """The thread hand-off of each call (module docstring): -1 for calls whose thread made a call
    less than ``THREAD_IDLE_NS`` before them."""
    n = len(g.c_start)
    out = np.full(n, -1, dtype=np.int64)
    if not n:
        return out
    prev_end = np.where(g.call_prev >= 0, g.c_end[np.maximum(g.call_prev, 0)], np.iinfo(np.int64).min)
    idle = np.flatnonzero(g.c_start - prev_end > THREAD_IDLE_NS)
    if not len(idle):
        return out
    order = np.argsort(g.c_end, kind="stable")
    ends = g.c_end[order]
    pos = np.searchsorted(ends, g.c_start[idle], side="right") - 1
    for i, p in zip(idle.tolist(), pos.tolist()):
        th, proc, floor = g.c_thread[i], c_proc[i], prev_end[i]
        for q in range(p, max(p - PRODUCER_SCAN, -1), -1):
            if ends[q] <= floor:
                break
            k = int(order[q])
            if g.c_thread[k] != th and c_proc[k] == proc:
                out[i] = k
                break
    return out


def _own_copy_awaits(g: Graph, o_blocking) -> None:
    """Host-blocking copies (module docstring): a call that launched a copy in ``o_blocking`` and
    returned at or after the copy's end becomes a blocking call awaiting it; a blocking call
    (a synchronous ``cudaMemcpy``) whose own copy ended inside it awaits that copy rather than
    whatever operation ended last inside it."""
    mine = np.flatnonzero(g.op_call >= 0)
    if not len(mine):
        return
    c = g.op_call[mine]
    inside = (g.o_end[mine] <= g.c_end[c]) & (g.o_end[mine] > g.c_start[c])
    blocking = np.zeros(len(g.o_start), bool) if o_blocking is None else np.asarray(o_blocking, bool)
    turn = inside & blocking[mine] & (g.c_kind[c] == CALL_LAUNCH)
    if turn.any():
        g.c_kind = g.c_kind.copy()  # never the caller's array
        g.c_kind[c[turn]] = CALL_SYNC
    own = inside & (g.c_kind[c] == CALL_SYNC)
    g.call_await[c[own]] = mine[own]


def build_graph(c_start, c_end, c_thread, c_kind, c_key, o_start, o_end, o_stream, o_seg, o_name, o_key,
                c_proc=None, o_proc=None, event_producer=None, o_blocking=None) -> Graph:
    """The graph of calls and operations. ``c_key``/``o_key`` join an operation to its launching
    call (correlation key, <= 0 for none); ``c_proc``/``o_proc`` (default: one process) keep thread
    hand-offs and host-blocking syncs inside a process. ``event_producer`` (issue 48, from
    :func:`nsysdoc.metrics.event_waits.event_producers`; default None: the timing rule alone): per
    operation, the operation it waited on through a CUDA event (-1 none); an operation with one
    takes it as its cross-stream producer, the others keep the timing rule. ``o_blocking`` (per
    operation, default none): copies whose call blocks the host until they end (device to pageable
    host memory, ...): their launching call, when the copy ended inside it, is a blocking call
    (``CALL_SYNC``) awaiting that copy (module docstring, *host-blocking copy*)."""
    i64 = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    g = Graph(i64(c_start), i64(c_end), i64(c_thread), i64(c_kind), i64(o_start), i64(o_end), i64(o_stream),
              i64(o_seg), i64(o_name))
    c_key, o_key = i64(c_key), i64(o_key)
    g.call_prev = _prev_in_group(g.c_thread, g.c_start)
    g.op_prev = _prev_in_group(g.o_stream, g.o_start)
    g.call_other = _hand_offs(g, np.zeros(len(g.c_start), np.int64) if c_proc is None else i64(c_proc))
    # launch: the call with the operation's correlation key (the last such call)
    g.op_call = np.full(len(o_key), -1, dtype=np.int64)
    ok = np.flatnonzero(c_key > 0)
    if len(ok) and len(o_key):
        order = ok[np.argsort(c_key[ok], kind="stable")]
        sk = c_key[order]
        pos = np.searchsorted(sk, o_key, side="right") - 1
        hit = (o_key > 0) & (pos >= 0) & (sk[np.maximum(pos, 0)] == o_key)
        g.op_call[hit] = order[pos[hit]]
    # host-blocking sync: the operation of the call's process that ended last inside the call (and
    # started before its end)
    g._by_end = np.argsort(g.o_end, kind="stable")
    g.call_await = np.full(len(g.c_start), -1, dtype=np.int64)
    c_proc = np.zeros(len(g.c_start), np.int64) if c_proc is None else i64(c_proc)
    o_proc = np.zeros(len(g.o_start), np.int64) if o_proc is None else i64(o_proc)
    for proc in np.unique(c_proc[g.c_kind == CALL_SYNC]).tolist():
        sync = np.flatnonzero((g.c_kind == CALL_SYNC) & (c_proc == proc))
        mine = g._by_end[o_proc[g._by_end] == proc]
        if not len(mine):
            continue
        ends = g.o_end[mine]
        pos = np.searchsorted(ends, g.c_end[sync], side="right") - 1
        okp = pos >= 0
        cand = np.where(okp, mine[np.maximum(pos, 0)], -1)
        good = okp & (g.o_end[np.maximum(cand, 0)] > g.c_start[sync]) & (g.o_start[np.maximum(cand, 0)] < g.c_end[sync])
        g.call_await[sync[good]] = cand[good]
    _own_copy_awaits(g, o_blocking)
    if event_producer is not None:  # issue 48: exact cross-stream edges from CUDA events
        exact, timing, o_end_l = i64(event_producer).tolist(), g.producer, g.o_end.tolist()

        def producer(j: int, after: int) -> int:
            k = exact[j] if 0 <= j < len(exact) else -1
            if k >= 0:
                return k if o_end_l[k] > after else -1
            return timing(j, after)
        g.producer = producer
        g._event_producer = i64(event_producer)  # the vectorised walk's :func:`producers` reads it too
    return g


@dataclass
class Path:
    """A step's critical path: ``segments_ns`` (``SEGMENTS`` order, summing to ``length_ns``), the
    time each operation and call spent on it (``op_ns``, ``call_ns``), and the walk as pieces
    ``(node_type, index, start_ns, end_ns, segment)`` from the end back to the start."""

    length_ns: int
    segments_ns: np.ndarray
    op_ns: np.ndarray
    call_ns: np.ndarray
    #: a list, or a function that builds it (the vectorised walk builds it only when asked)
    _pieces: object
    #: the walk stopped on its step limit (a cycle in timing-inferred edges): the rest is ``wait``
    truncated: bool = False

    @property
    def pieces(self) -> list:
        if callable(self._pieces):
            self._pieces = self._pieces()
        return self._pieces


def critical_path_reference(g: Graph, t0: int, t1: int) -> Path:
    """The critical path of ``[t0, t1)`` on graph ``g`` by the last-arrival rule (module docstring),
    one node at a time on Python lists: the reference :func:`critical_path` (vectorised) is tested
    against."""
    t0, t1 = int(t0), int(t1)
    seg = [0] * len(SEGMENTS)
    op_ns = [0] * len(g.o_start)
    call_ns = [0] * len(g.c_start)
    pieces: list = []

    def done(truncated: bool = False) -> Path:
        segs = np.asarray(seg, dtype=np.int64)
        length = int(segs.sum())
        assert length == max(t1 - t0, 0), (length, t1 - t0)
        return Path(length, segs, np.asarray(op_ns, dtype=np.int64), np.asarray(call_ns, dtype=np.int64), pieces,
                    truncated)

    if t1 <= t0:
        return done()
    cur = t1

    def cover(lo: int, label: int, typ: int = -1, idx: int = -1) -> None:
        """Cover ``[max(lo, t0), cur)`` with ``label`` (the own time of node ``typ, idx`` when
        given) and move the cursor there."""
        nonlocal cur
        lo = max(min(lo, cur), t0)
        d = cur - lo
        if d > 0:
            seg[label] += d
            if typ == NODE_OP:
                op_ns[idx] += d
            elif typ == NODE_CALL:
                call_ns[idx] += d
            pieces.append((typ, idx, lo, cur, label))
        cur = lo

    # the node that ended last (clipped to the step end); ties: a GPU operation
    typ, i = -1, -1
    best = t0 - 1
    live_o = np.flatnonzero((g.o_start < t1) & (g.o_end > t0))
    if len(live_o):
        e = np.minimum(g.o_end[live_o], t1)
        k = int(np.argmax(e))
        best, typ, i = int(e[k]), NODE_OP, int(live_o[k])
    live_c = np.flatnonzero((g.c_start < t1) & (g.c_end > t0))
    if len(live_c):
        e = np.minimum(g.c_end[live_c], t1)
        k = int(np.argmax(e))
        if int(e[k]) > best:
            best, typ, i = int(e[k]), NODE_CALL, int(live_c[k])
    if typ < 0:
        cover(t0, CPU)
        return done()
    cover(best, CPU)
    o_start, o_end, o_seg = g.o_start.tolist(), g.o_end.tolist(), g.o_seg.tolist()
    op_prev, op_call = g.op_prev.tolist(), g.op_call.tolist()
    c_start, c_end, c_kind = g.c_start.tolist(), g.c_end.tolist(), g.c_kind.tolist()
    call_prev, call_other, call_await = g.call_prev.tolist(), g.call_other.tolist(), g.call_await.tolist()
    own_of_call = {CALL_LAUNCH: LAUNCH, CALL_SYNC: WAIT}

    def op_pred(i: int) -> tuple:
        """Operation ``i``'s last arrival ``(arrival, node type, index, edge segment)``."""
        s = o_start[i]
        a, nt, ni, label = None, -1, -1, WAIT
        p = op_prev[i]
        if p >= 0:
            a, nt, ni, label = o_end[p], NODE_OP, p, WAIT
        c = op_call[i]
        if c >= 0 and (a is None or c_start[c] > a):
            a, nt, ni, label = c_start[c], NODE_CALL, c, LAUNCH
        ready = a if c < 0 or a is None else max(a, c_end[c])  # the launch call returned
        if a is None or s - ready > LAUNCH_LATENCY_NS:
            k = g.producer(i, a if a is not None else t0 - 1)
            if k >= 0 and (a is None or o_end[k] > a):
                a, nt, ni, label = o_end[k], NODE_OP, k, WAIT
        if label == LAUNCH and call_await[ni] == i:
            # a blocking copy that started at its launch: it follows its call's host predecessor
            # (as :func:`_bindings`), when the call has one
            ha, hn = host_pred(ni)
            if hn >= 0:
                a, nt, ni, label = ha, NODE_CALL, hn, CPU
        return a, nt, ni, label

    def host_pred(i: int) -> tuple:
        """Call ``i``'s host predecessor ``(arrival, index)``: host order, or a later hand-off."""
        a, n = None, -1
        p = call_prev[i]
        if p >= 0:
            a, n = c_end[p], p
        h = call_other[i]
        if h >= 0 and (a is None or c_end[h] > a):
            a, n = c_end[h], h
        return a, n
    limit = 4 * (len(o_start) + len(c_start)) + 16
    while cur > t0:
        limit -= 1
        if limit < 0:
            cover(t0, WAIT)
            return done(True)
        # predecessors as (arrival, node type, index, edge segment); the last arrival wins (the
        # first listed among equal arrivals)
        if typ == NODE_OP:
            s = o_start[i]
            a, nt, ni, label = op_pred(i)
            cover(s, o_seg[i], NODE_OP, i)
            if a is None:
                cover(t0, WAIT)
                break
            if label == LAUNCH:
                # an operation that ran long after its launch call returned waited on something
                # the capture did not record: that part is wait
                cover(c_end[ni] + LAUNCH_LATENCY_NS, WAIT)
            cover(a, label)
        else:
            s = c_start[i]
            a, ni = host_pred(i)
            nt, label = (NODE_CALL if ni >= 0 else -1), CPU
            w = call_await[i]
            if w >= 0 and (a is None or o_end[w] > a) \
                    and not (op_call[w] == i and op_pred(w)[1:] == (NODE_CALL, i, LAUNCH)):
                # (a blocking copy's call and its copy, which started at its launch: the call's
                # start takes its host predecessor, as :func:`_bindings`)
                a, nt, ni, label = o_end[w], NODE_OP, w, WAIT
            cover(max(s, min(s if a is None else a, cur)), own_of_call.get(c_kind[i], CPU), NODE_CALL, i)
            if a is None:
                cover(t0, CPU)
                break
            cover(a, label)
        typ, i = nt, ni
    return done()


# --- the walk, vectorised (issue 48, milestone 2) -------------------------------------------------

_NONE = np.iinfo(np.int64).min


def producers(g: Graph, js: np.ndarray, after: np.ndarray) -> np.ndarray:
    """:meth:`Graph.producer` of each operation ``js[m]`` after ``after[m]``, all at once: the scan
    back over operations by end runs as at most ``PRODUCER_SCAN`` rounds over the operations still
    looking."""
    js = np.asarray(js, np.int64)
    out = np.full(len(js), -1, np.int64)
    if not len(js):
        return out
    order = g._by_end
    ends = g.o_end[order]
    pos = np.searchsorted(ends, g.o_start[js] + PRODUCER_TOLERANCE_NS, side="right") - 1
    active = np.arange(len(js))
    exact = getattr(g, "_event_producer", None)
    if exact is not None and len(exact) == len(g.o_start):  # exact event edges first (build_graph)
        k = exact[js]
        has = k >= 0
        out[has] = np.where(g.o_end[np.maximum(k[has], 0)] > np.asarray(after)[has], k[has], -1)
        active = active[~has]
    for _ in range(PRODUCER_SCAN):
        if not len(active):
            break
        p = pos[active]
        ok = p >= 0
        pc = np.maximum(p, 0)
        alive = ok & (ends[pc] > after[active])
        active, pc = active[alive], pc[alive]
        k = order[pc]
        j = js[active]
        hit = (k != j) & (g.o_stream[k] != g.o_stream[j]) & (g.o_start[k] < g.o_start[j])
        out[active[hit]] = k[hit]
        active = active[~hit]
        pos[active] -= 1
    return out


def bindings(g: Graph, t0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every node (calls ``0..nc-1``, then operations ``nc..``), the predecessor that arrived last
    as the walk picks it (the first listed among equal arrivals): ``(arrival, node, edge segment)``;
    node -1 (arrival ``_NONE``) when it has none in the graph. Kept on the graph for ``t0`` (the
    walk and the what-if replay of a step share them)."""
    kept = getattr(g, "_bindings", None)
    if kept is not None and kept[0] == t0:
        return kept[1]
    out = _bindings(g, t0)
    g._bindings = (t0, out)
    return out


def _bindings(g: Graph, t0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nc, no = len(g.c_start), len(g.o_start)
    cs, ce, os_, oe = g.c_start, g.c_end, g.o_start, g.o_end
    # calls: host order, then a later thread hand-off, then a later awaited operation
    p, h, w = g.call_prev, g.call_other, g.call_await
    a = np.where(p >= 0, ce[np.maximum(p, 0)] if nc else ce, _NONE)
    node = np.where(p >= 0, p, -1)
    lab = np.full(nc, CPU, np.int64)
    ah = np.where(h >= 0, ce[np.maximum(h, 0)] if nc else ce, _NONE)
    take = (h >= 0) & (ah > a)
    a, node = np.where(take, ah, a), np.where(take, h, node)
    a_host, n_host = a.copy(), node.copy()
    if no:
        aw = np.where(w >= 0, oe[np.maximum(w, 0)], _NONE)
        take = (w >= 0) & (aw > a)
        a, node, lab = np.where(take, aw, a), np.where(take, nc + w, node), np.where(take, WAIT, lab)
    c_arr, c_node, c_lab = a, node, lab
    c_host = (a_host, n_host) if no else None
    # operations: stream order, then a later launch, then a producer on another stream when the
    # operation started more than LAUNCH_LATENCY_NS after both
    p, c = g.op_prev, g.op_call
    a = np.where(p >= 0, oe[np.maximum(p, 0)] if no else oe, _NONE)
    node = np.where(p >= 0, nc + p, -1)
    lab = np.full(no, WAIT, np.int64)
    if nc:
        ac = np.where(c >= 0, cs[np.maximum(c, 0)], _NONE)
        take = (c >= 0) & ((a == _NONE) | (ac > a))
        a, node, lab = np.where(take, ac, a), np.where(take, c, node), np.where(take, LAUNCH, lab)
    ready = np.maximum(a, ce[np.maximum(c, 0)]) if nc else a
    ready = np.where(c >= 0, ready, a) if nc else a  # ... and its launch call returned
    need = np.flatnonzero((a == _NONE) | (os_ - ready > LAUNCH_LATENCY_NS))
    if len(need):
        after = np.where(a[need] == _NONE, t0 - 1, a[need])
        k = producers(g, need, after)
        okk = k >= 0
        ak = oe[np.maximum(k, 0)]
        take = okk & ((a[need] == _NONE) | (ak > a[need]))
        sel = need[take]
        a[sel], node[sel], lab[sel] = ak[take], nc + k[take], WAIT
    if c_host is not None and nc:
        # a blocking copy's call awaits its own copy, which it launched: when the copy's last arrival
        # is that launch (it started at once), the walk would go call -> copy -> call. The copy
        # then follows the call's host predecessor (its launch latency and the host time before the
        # call are cpu); a call without one takes no await (the whole call is the host's wait)
        ww = np.flatnonzero((c_node >= nc) & (c_lab == WAIT))
        j = c_node[ww] - nc
        back = (node[j] == ww) & (lab[j] == LAUNCH)
        ww, j = ww[back], j[back]
        host = c_host[1][ww] >= 0
        a, node, lab = a.copy(), node.copy(), lab.copy()
        a[j[host]], node[j[host]], lab[j[host]] = c_host[0][ww[host]], c_host[1][ww[host]], CPU
        ww = ww[~host]
        c_arr, c_node, c_lab = c_arr.copy(), c_node.copy(), c_lab.copy()
        c_arr[ww], c_node[ww], c_lab[ww] = c_host[0][ww], c_host[1][ww], CPU
    return np.concatenate([c_arr, a]), np.concatenate([c_node, node]), np.concatenate([c_lab, lab])


def _chain(nxt: np.ndarray, start: int) -> np.ndarray | None:
    """``start, nxt[start], nxt[nxt[start]], ...`` up to the first node whose ``nxt`` is -1, without a
    Python step per node: tables of ``nxt`` applied 2^k times (pointer jumping), the chain's length
    found by descending them, and position ``m`` of the chain as ``start`` moved by the bits of
    ``m``. None when the chain does not end (a cycle)."""
    tables = [nxt]
    while len(tables) <= max(len(nxt), 1).bit_length():
        j = tables[-1]
        nj = np.where(j >= 0, j[np.maximum(j, 0)], -1)
        tables.append(nj)
        if not (nj >= 0).any():
            break
    cur, length = int(start), 1
    for k in range(len(tables) - 1, -1, -1):
        j = int(tables[k][cur])
        if j >= 0:
            cur, length = j, length + (1 << k)
    if int(nxt[cur]) >= 0:
        return None
    m = np.arange(length)
    pos = np.full(length, int(start), np.int64)
    for k, tab in enumerate(tables):
        bit = ((m >> k) & 1).astype(bool)
        if bit.any():
            pos[bit] = tab[pos[bit]]
    return pos


def critical_path(g: Graph, t0: int, t1: int, bound: tuple | None = None) -> Path:
    """The critical path of ``[t0, t1)`` on graph ``g`` by the last-arrival rule (module docstring),
    vectorised: every node's last arrival at once (:func:`bindings`, or ``bound``), the chain of
    last arrivals from the node that ended last by pointer jumping (:func:`_chain`; a cycle of
    timing-inferred edges falls back to the reference), then the covers of the walk — each node's own time, a launch's unexplained wait,
    the edge to its predecessor — as one running minimum of the cursor (numpy). Same result as
    :func:`critical_path_reference`."""
    t0, t1 = int(t0), int(t1)
    nc, no = len(g.c_start), len(g.o_start)
    if t1 <= t0:
        return Path(0, np.zeros(len(SEGMENTS), np.int64), np.zeros(no, np.int64), np.zeros(nc, np.int64), [], False)
    best, start = t0 - 1, -1
    live_o = np.flatnonzero((g.o_start < t1) & (g.o_end > t0))
    if len(live_o):
        e = np.minimum(g.o_end[live_o], t1)
        k = int(np.argmax(e))
        best, start = int(e[k]), nc + int(live_o[k])
    live_c = np.flatnonzero((g.c_start < t1) & (g.c_end > t0))
    if len(live_c):
        e = np.minimum(g.c_end[live_c], t1)
        k = int(np.argmax(e))
        if int(e[k]) > best:
            best, start = int(e[k]), int(live_c[k])
    seg = np.zeros(len(SEGMENTS), np.int64)
    if start < 0:
        seg[CPU] = t1 - t0
        return Path(t1 - t0, seg, np.zeros(no, np.int64), np.zeros(nc, np.int64), [(-1, -1, t0, t1, CPU)], False)
    pieces: list = [(-1, -1, best, t1, CPU)] if best < t1 else []
    seg[CPU] += t1 - best
    arr, nxt, lab = bindings(g, t0) if bound is None else bound
    # the chain of last arrivals, until a node without predecessor or one whose predecessor
    # arrived at or before the step's start (the cursor then reaches it), by pointer jumping
    S = _chain(np.where((nxt < 0) | (arr <= t0), -1, nxt), start)
    if S is None:  # a cycle in timing-inferred edges: the reference walk stops on its step limit
        return critical_path_reference(g, t0, t1)
    truncated = False
    is_op = S >= nc
    oi, ci = np.maximum(S - nc, 0), np.minimum(S, max(nc - 1, 0))
    has = nxt[S] >= 0
    a = arr[S]
    own_kind = np.where(g.c_kind[ci] == CALL_LAUNCH, LAUNCH, np.where(g.c_kind[ci] == CALL_SYNC, WAIT, CPU)) \
        if nc else np.zeros(len(S), np.int64)
    own_lo = np.where(is_op, g.o_start[oi] if no else 0,
                      np.where(has, np.maximum(g.c_start[ci] if nc else 0, a), g.c_start[ci] if nc else 0))
    own_lab = np.where(is_op, g.o_seg[oi] if no else 0, own_kind)
    big = np.iinfo(np.int64).max
    launch = has & (lab[S] == LAUNCH)
    lw_lo = np.where(launch, (g.c_end[np.clip(nxt[S], 0, max(nc - 1, 0))] if nc else 0) + LAUNCH_LATENCY_NS, big)
    edge_lo = np.where(has, a, t0)
    edge_lab = np.where(has, lab[S], np.where(is_op, WAIT, CPU))
    lo = np.stack([own_lo, lw_lo, edge_lo], axis=1).ravel()
    labels = np.stack([own_lab, np.full(len(S), WAIT, np.int64), edge_lab], axis=1).ravel()
    if truncated:
        lo, labels = np.append(lo, t0), np.append(labels, WAIT)
    cur = np.maximum(np.minimum.accumulate(np.concatenate([[best], lo])), t0)
    d = cur[:-1] - cur[1:]
    seg += np.bincount(labels, weights=d, minlength=len(SEGMENTS)).astype(np.int64)
    d_own = d[0:3 * len(S):3]
    op_ns = np.bincount(oi[is_op], weights=d_own[is_op], minlength=no).astype(np.int64) if no else np.zeros(0, np.int64)
    call_ns = np.bincount(ci[~is_op], weights=d_own[~is_op], minlength=nc).astype(np.int64) if nc \
        else np.zeros(0, np.int64)
    length = int(seg.sum())
    assert length == t1 - t0, (length, t1 - t0)

    def listed() -> list:
        """The pieces as the reference lists them (built when asked: ~1 us a piece)."""
        out = list(pieces)
        nz = np.flatnonzero(d > 0)
        nz = nz[nz < 3 * len(S)]
        if len(nz):
            which, kind = nz // 3, nz % 3
            typ = np.where(kind == 0, np.where(is_op[which], NODE_OP, NODE_CALL), -1)
            idx = np.where(kind == 0, np.where(is_op[which], oi[which], ci[which]), -1)
            out += list(zip(typ.tolist(), idx.tolist(), cur[nz + 1].tolist(), cur[nz].tolist(), labels[nz].tolist()))
        if truncated and d[-1] > 0:
            out.append((-1, -1, int(cur[-1]), int(cur[-2]), WAIT))
        return out

    return Path(length, seg, op_ns, call_ns, listed, truncated)
