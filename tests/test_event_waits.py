"""Exact cross-stream edges from CUDA events (issue 48, milestone 2): nsysdoc/metrics/event_waits.py
and the ``event_producer`` keyword of ``build_graph``. Numbers by hand in each docstring."""
from __future__ import annotations

import numpy as np

from nsysdoc.metrics import critical_path as cp
from nsysdoc.metrics.event_waits import event_producers, pair_records


def test_a_wait_pairs_with_the_last_record_of_its_event_before_it():
    """Records: event 1 at 100 (record 0) and 500 (record 1), event 2 at 300 (record 2). Waits:
    event 1 at 400 -> record 0 (500 is later); event 1 at 600 -> record 1; event 2 at 200 -> none
    (its record comes after); event 3 -> none; event 1 at exactly 500 -> record 1."""
    got = pair_records([1, 1, 2, 3, 1], [400, 600, 200, 1000, 500], [1, 1, 2], [100, 500, 300])
    assert got.tolist() == [0, 1, -1, -1, 1]
    assert pair_records([1], [5], [], []).tolist() == [-1]


def test_producer_is_the_last_work_before_the_record_and_consumer_the_first_after_the_wait():
    """Operations (stream, launch call start): 0 (s1, 0), 1 (s1, 50), 2 (s2, 80), 3 (s3, 90), 4 (s2, 20).
    A record on s1 at 60 marks op 1 (launched 50 < 60; op 0 comes before it in stream order). A wait
    on s2 at 70: the first s2 operation launched after 70 is op 2 (op 4 was launched at 20, before
    the wait, and does not wait). So op 2's producer is op 1; nothing else has one. A wait whose
    record is unknown (r_time -1) and a wait on the record's own stream give no edge."""
    o_stream, o_launch, o_end = [1, 1, 2, 3, 2], [0, 50, 80, 90, 20], [10, 70, 100, 120, 40]
    got = event_producers([2, 3, 1], [70, 85, 55], [1, 1, 1], [60, -1, 60], o_stream, o_launch, o_end)
    assert got.tolist() == [-1, -1, 1, -1, -1]
    # two waits land on op 2: the producer that ends last wins (op 3 on s3 ends at 120 > op 1's 70)
    got = event_producers([2, 2], [70, 75], [1, 3], [60, 95], o_stream, o_launch, o_end)
    assert got.tolist() == [-1, -1, 3, -1, -1]


def _graph(event_producer=None):
    """Host thread 0: launch calls c0 [0, 1000) of A (stream 1), c1 [1000, 2000) of C (stream 3),
    c2 [2000, 3000) of B (stream 2). GPU: A [1_500, 50_000) on s1; C [3_000, 50_010) on s3; B
    [50_015, 60_000) on s2. B waited on A through an event (recorded on s1 after c0, waited on s2
    before c2), but C happens to end 10 ns later than A, nearer B's start."""
    calls = np.array([(0, 1000, 0, cp.CALL_LAUNCH, 1), (1000, 2000, 0, cp.CALL_LAUNCH, 2),
                      (2000, 3000, 0, cp.CALL_LAUNCH, 3)], dtype=np.int64)
    ops = np.array([(1_500, 50_000, 1, cp.KERNEL, 1), (3_000, 50_010, 3, cp.KERNEL, 2),
                    (50_015, 60_000, 2, cp.KERNEL, 3)], dtype=np.int64)
    return cp.build_graph(calls[:, 0], calls[:, 1], calls[:, 2], calls[:, 3], calls[:, 4], ops[:, 0], ops[:, 1],
                          ops[:, 2], ops[:, 3], np.arange(3), ops[:, 4], event_producer=event_producer)


def test_the_event_edge_replaces_the_timing_guess_on_the_path():
    """B started 48 µs after its launch call: it waited on other work. By timing, its producer is the
    operation on another stream that ended last before it started: C (ends 50_010), so C's 47_010
    ns are on the path and A's are not. With the event edge, B follows A: the path takes A's
    [1_500, 50_000) = 48_500 ns and a 15 ns wait (50_000 -> 50_015), and C is off it. Both paths
    are 60_000 ns long; B's own 9_985 ns are on both."""
    timing = cp.critical_path(_graph(), 0, 60_000)
    assert timing.op_ns.tolist() == [0, 47_010, 9_985]
    exact_edges = event_producers([2], [1_500], [1], [1_000], [1, 3, 2], [0, 1000, 2000], [50_000, 50_010, 60_000])
    assert exact_edges.tolist() == [-1, -1, 0]
    exact = cp.critical_path(_graph(exact_edges), 0, 60_000)
    assert exact.op_ns.tolist() == [48_500, 0, 9_985]
    assert exact.length_ns == timing.length_ns == 60_000
    assert dict(zip(cp.SEGMENTS, exact.segments_ns.tolist()))["kernel"] == 48_500 + 9_985
    # an edge list with no edge keeps the timing rule
    assert cp.critical_path(_graph(np.full(3, -1)), 0, 60_000).op_ns.tolist() == [0, 47_010, 9_985]
