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
    launch and its stream predecessor arrived, it waited on other work: the operation on another
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


def build_graph(c_start, c_end, c_thread, c_kind, c_key, o_start, o_end, o_stream, o_seg, o_name, o_key,
                c_proc=None, o_proc=None, event_producer=None) -> Graph:
    """The graph of calls and operations. ``c_key``/``o_key`` join an operation to its launching
    call (correlation key, <= 0 for none); ``c_proc``/``o_proc`` (default: one process) keep thread
    hand-offs and host-blocking syncs inside a process. ``event_producer`` (issue 48, from
    :func:`nsysdoc.metrics.event_waits.event_producers`; default None: the timing rule alone): per
    operation, the operation it waited on through a CUDA event (-1 none); an operation with one
    takes it as its cross-stream producer, the others keep the timing rule."""
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
    if event_producer is not None:  # issue 48: exact cross-stream edges from CUDA events
        exact, timing, o_end_l = i64(event_producer).tolist(), g.producer, g.o_end.tolist()

        def producer(j: int, after: int) -> int:
            k = exact[j] if 0 <= j < len(exact) else -1
            if k >= 0:
                return k if o_end_l[k] > after else -1
            return timing(j, after)
        g.producer = producer
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
    pieces: list
    #: the walk stopped on its step limit (a cycle in timing-inferred edges): the rest is ``wait``
    truncated: bool = False


def critical_path(g: Graph, t0: int, t1: int) -> Path:
    """The critical path of ``[t0, t1)`` on graph ``g`` by the last-arrival rule (module docstring).
    The walk runs on Python lists (one step per node on the path: numpy scalar access would
    dominate)."""
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
            a, nt, ni, label = None, -1, -1, WAIT
            p = op_prev[i]
            if p >= 0:
                a, nt, ni, label = o_end[p], NODE_OP, p, WAIT
            c = op_call[i]
            if c >= 0 and (a is None or c_start[c] > a):
                a, nt, ni, label = c_start[c], NODE_CALL, c, LAUNCH
            if a is None or s - a > LAUNCH_LATENCY_NS:
                k = g.producer(i, a if a is not None else t0 - 1)
                if k >= 0 and (a is None or o_end[k] > a):
                    a, nt, ni, label = o_end[k], NODE_OP, k, WAIT
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
            a, nt, ni, label = None, -1, -1, CPU
            p = call_prev[i]
            if p >= 0:
                a, nt, ni, label = c_end[p], NODE_CALL, p, CPU
            h = call_other[i]
            if h >= 0 and (a is None or c_end[h] > a):
                a, nt, ni, label = c_end[h], NODE_CALL, h, CPU
            w = call_await[i]
            if w >= 0 and (a is None or o_end[w] > a):
                a, nt, ni, label = o_end[w], NODE_OP, w, WAIT
            cover(max(s, min(s if a is None else a, cur)), own_of_call.get(c_kind[i], CPU), NODE_CALL, i)
            if a is None:
                cover(t0, CPU)
                break
            cover(a, label)
        typ, i = nt, ni
    return done()
