"""Issue 50: the GPU-bound shape of real training captures, a 1-3 µs gap at every kernel boundary
with the next kernel already queued, takes the short paths (``nsysdoc/metrics/gpu.py``) and they
give what the general ones give.

* a gap whose next operation was launched before the GPU went idle has no host part: its whole
  length is queue time (``launch``, or ``dependency``), and :meth:`Gaps.split` reads the host's
  activity only for the gaps that have a host part;
* on one stream per device no two operations overlap or touch, so each operation is its own piece
  of every device union (:func:`device_activity`), in (device, start) order only;
* a slice's union needs no rebuilding when nothing is carried and nothing is clipped, and the few
  operations carried from the previous slice are put in order among the pieces
  (:func:`extend_activity`).

Expected values are computed by hand in each docstring (times in ns, arbitrary origin).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.metrics import gpu as gpu_m  # noqa: E402
from nsysdoc.metrics import intervals as iv  # noqa: E402
from nsysdoc.metrics.ops import KIND_KERNEL  # noqa: E402


class _Ops:
    """The columns of GpuOps that the device unions read."""

    def __init__(self, device, start_ns, end_ns, is_nccl=None):
        self.device = np.asarray(device, dtype=np.int32)
        self.start_ns = np.asarray(start_ns, dtype=np.int64)
        self.end_ns = np.asarray(end_ns, dtype=np.int64)
        self.kind = np.full(len(self.start_ns), KIND_KERNEL, dtype=np.int8)
        self.is_nccl = np.zeros(len(self.start_ns), bool) if is_nccl is None else np.asarray(is_nccl, bool)

    def __len__(self):
        return len(self.start_ns)


def _pieces(u: iv.Union) -> list[tuple[int, int, int]]:
    return list(zip(u.keys.tolist(), u.starts.tolist(), u.ends.tolist()))


def _same_union(a: iv.Union, b: iv.Union) -> None:
    assert _pieces(a) == _pieces(b)
    if len(a):
        assert (a.tmin, a.span) == (b.tmin, b.span)
        # the same answers to the queries the engine asks
        assert a.covered(np.array([0, 1]), np.array([0, 0]), np.array([10**4, 10**4])).tolist() == \
            b.covered(np.array([0, 1]), np.array([0, 0]), np.array([10**4, 10**4])).tolist()


def test_one_stream_per_device_kernels_with_a_gap_at_every_boundary_are_their_own_union_pieces():
    """Device 0: kernels [100, 110), [112, 120), an NCCL kernel [122, 130); device 1: [105, 115),
    [117, 125): sorted by (device, start), 2 ns gaps, nothing overlaps or touches. Busy = the five
    kernels; compute (non-NCCL) = [100, 110), [112, 120) on 0 and both of device 1; comm = [122, 130)
    on 0. Compute time: device 0 10 + 8 = 18, device 1 10 + 8 = 18; comm 8 on device 0."""
    ops = _Ops([0, 0, 0, 1, 1], [100, 112, 122, 105, 117], [110, 120, 130, 115, 125],
               is_nccl=[False, False, True, False, False])
    a = gpu_m.device_activity(ops, 2, None, None)
    assert _pieces(a.busy) == [(0, 100, 110), (0, 112, 120), (0, 122, 130), (1, 105, 115), (1, 117, 125)]
    assert _pieces(a.compute) == [(0, 100, 110), (0, 112, 120), (1, 105, 115), (1, 117, 125)]
    assert _pieces(a.comm) == [(0, 122, 130)]
    assert a.compute.total_by_key(2).tolist() == [18, 18]
    assert a.comm.total_by_key(2).tolist() == [8, 0]
    for name, mask in (("compute", ~ops.is_nccl), ("comm", ops.is_nccl)):
        _same_union(getattr(a, name), iv.union(ops.device[mask], ops.start_ns[mask], ops.end_ns[mask]))


def test_disjoint_kernels_listed_in_time_order_across_devices_are_still_sorted_by_device():
    """The same kernels listed by start time (devices interleaved: 0, 1, 0, 1, 0), as a slice's
    operations can come. Each is still its own piece, but the union must come out sorted by
    device: compute = device 0 [100, 110), [112, 120), then device 1 [105, 115), [117, 125); a
    query of [0, 10,000) on device 1 covers 10 + 8 = 18 ns."""
    ops = _Ops([0, 1, 0, 1, 0], [100, 105, 112, 117, 122], [110, 115, 120, 125, 130],
               is_nccl=[False, False, False, False, True])
    a = gpu_m.device_activity(ops, 2, None, None)
    assert _pieces(a.compute) == [(0, 100, 110), (0, 112, 120), (1, 105, 115), (1, 117, 125)]
    assert a.compute.covered(np.array([1]), np.array([0]), np.array([10_000])).tolist() == [18]
    assert _pieces(a.comm) == [(0, 122, 130)]


def test_a_carried_kernel_is_inserted_in_order_and_merged():
    """Own kernels: device 0 [100, 110), [112, 120); device 1 [105, 115), [130, 140). Carried from the
    previous slice, still running: device 1 [90, 106) (overlaps [105, 115)) and device 0 [50, 60).
    Window [0, 1,000) clips nothing. Busy: device 0 [50, 60), [100, 110), [112, 120); device 1
    [90, 115) (merged), [130, 140). Without a carried kernel the union is kept as it is."""
    own = _Ops([0, 0, 1, 1], [100, 112, 105, 130], [110, 120, 115, 140])
    extra = _Ops([1, 0], [90, 50], [106, 60])
    ahead = gpu_m.device_activity(own, 2, None, None)
    a = gpu_m.extend_activity(ahead, own, extra, 0, 1_000)
    assert _pieces(a.busy) == [(0, 50, 60), (0, 100, 110), (0, 112, 120), (1, 90, 115), (1, 130, 140)]
    # merged into the pieces they touch, the others copied: origin 50 (the earliest start), span
    # 140 - 50 + 1 = 91, as a rebuild gives
    assert (a.busy.tmin, a.busy.span) == (50, 91)
    both = _Ops([0, 0, 1, 1, 1, 0], [100, 112, 105, 130, 90, 50], [110, 120, 115, 140, 106, 60])
    _same_union(a.busy, gpu_m.device_activity(both, 2, 0, 1_000).busy)
    kept = gpu_m.extend_activity(ahead, own, None, 0, 1_000)
    assert kept.busy is ahead.busy
    # a window that cuts: [105, 135) -> device 0 [105, 110), [112, 120); device 1 [105, 115), [130, 135)
    cut = gpu_m.extend_activity(ahead, own, None, 105, 135)
    assert _pieces(cut.busy) == [(0, 105, 110), (0, 112, 120), (1, 105, 115), (1, 130, 135)]


def _gaps() -> gpu_m.Gaps:
    """Three gaps on device 0, launching thread index 0:

    * A [100, 102): the next kernel was queued (its launch returned before 100): no host part
      (painted end = 100), queue 2 ns, not a dependency -> launch 2;
    * B [200, 230): queued too, the queue part a dependency (another stream) -> dependency 30;
    * C [300, 400): the launching call [340, 350) (host window 340 - 300 = 40 ns < DISPATCH_MAX_NS:
      a short window) returned at 350, so the painted host part is [300, 350) and the queue part
      [350, 400) = 50 ns, not a dependency -> launch 50; the thread sat in a blocking sync
      [290, 320) -> sync 20 (300-320); the uncovered [320, 350) in a short window is dispatch ->
      launch 30. Total C: sync 20, launch 50 + 30 = 80."""
    part = iv.paint([0], [290], [320], [gpu_m.LV_SYNC], gpu_m.NLEVELS)
    n = 3
    return gpu_m.Gaps(device=np.zeros(n, np.int32), start_ns=np.array([100, 200, 300]), end_ns=np.array([102, 230, 400]),
                      thread=np.full(n, 7), next_api_start_ns=np.array([50, 150, 340]), kind=np.zeros(n, np.int8),
                      thread_index=np.zeros(n, np.int64), painted_end_ns=np.array([100, 200, 350]),
                      host_window_ns=np.array([0, 0, 40]), queue_is_dependency=np.array([False, True, False]),
                      partition=part)


def test_queued_gaps_are_all_queue_time_and_only_host_parts_are_painted():
    g = _gaps()
    c = {name: i for i, name in enumerate(gpu_m.CAUSES)}
    out = g.split(np.arange(3), g.start_ns, g.end_ns)
    expect = np.zeros((3, len(gpu_m.CAUSES)), np.int64)
    expect[0, c["launch"]] = 2
    expect[1, c["dependency"]] = 30
    expect[2, c["sync"]], expect[2, c["launch"]] = 20, 50 + 30  # queue 350-400, dispatch 320-350
    assert out.tolist() == expect.tolist()
    # cut at 310: A and B whole; C's host part is [300, 310): sync 10, nothing else
    cut = g.split(np.arange(3), np.zeros(3, np.int64), np.full(3, 310))
    expect[2] = 0
    expect[2, c["sync"]] = 10
    assert cut.tolist() == expect.tolist()
    # only the queued gaps: no host part at all, whatever the partition holds
    only = g.split(np.array([0, 1]), 0, 10**6)
    assert only.tolist() == expect[:2].tolist()


def test_whole_gap_amounts_read_one_class_gaps_directly_and_split_only_host_parts():
    """The three gaps of :func:`_gaps` plus a tail D [500, 540) (kind 1) and an unattributed gap E
    [600, 610) (kind 2). Whole gaps: A launch 2; B dependency 30; C sync 20 and launch 80 (its
    class: launch, the larger); D tail 40; E unattributed 10. The same as Gaps.split of every gap
    over its own extent, and its argmax."""
    a = _gaps()
    n = 5
    g = gpu_m.Gaps(device=np.zeros(n, np.int32), start_ns=np.array([100, 200, 300, 500, 600]),
                   end_ns=np.array([102, 230, 400, 540, 610]), thread=np.full(n, 7),
                   next_api_start_ns=np.array([50, 150, 340, -1, -1]), kind=np.array([0, 0, 0, 1, 2], np.int8),
                   thread_index=np.array([0, 0, 0, -1, -1]), painted_end_ns=np.array([100, 200, 350, 500, 600]),
                   host_window_ns=np.array([0, 0, 40, 0, 0]), queue_is_dependency=np.array([False, True, False, False, False]),
                   partition=a.partition)
    c = {name: i for i, name in enumerate(gpu_m.CAUSES)}
    expect = np.zeros((n, len(gpu_m.CAUSES)), np.int64)
    expect[0, c["launch"]] = 2
    expect[1, c["dependency"]] = 30
    expect[2, c["sync"]], expect[2, c["launch"]] = 20, 80
    expect[3, c["tail"]] = 40
    expect[4, c["unattributed"]] = 10
    amounts, cause = gpu_m._whole_gap_amounts(g, np.int32)
    assert amounts.dtype == np.int32 and amounts.tolist() == expect.tolist()
    assert cause.tolist() == [c["launch"], c["dependency"], c["launch"], c["tail"], c["unattributed"]]
    assert amounts.tolist() == g.split(np.arange(n), g.start_ns, g.end_ns).tolist()


def _union_of_all(u: iv.Union, k2, s2, e2, lo, hi) -> iv.Union:
    return iv.union(np.concatenate([u.keys, k2]), np.concatenate([u.starts, s2]), np.concatenate([u.ends, e2]),
                    lo=lo, hi=hi)


def test_a_carried_interval_touching_two_pieces_merges_them_and_the_window_cuts_the_ends():
    """Pieces: device 0 [10, 20), [30, 40), [50, 60), [70, 80); device 2 [15, 25). New intervals:
    device 0 [20, 30) (touches [10, 20) and [30, 40): one piece [10, 40)), [45, 52) (overlaps
    [50, 60): [45, 60)); device 1 [5, 8) (a device with no piece yet); device 2 [24, 26) (overlaps
    [15, 25): [15, 26)). Window [12, 75): device 0 [12, 40), [45, 60), [70, 75); device 1 nothing
    ([5, 8) ends before 12); device 2 [15, 26). Origin 12, span 75 - 12 + 1 = 64. Covered on
    device 0 over [0, 100): 28 + 15 + 5 = 48."""
    u = iv.union([0, 0, 0, 0, 2], [10, 30, 50, 70, 15], [20, 40, 60, 80, 25])
    k2, s2, e2 = np.array([0, 0, 1, 2]), np.array([20, 45, 5, 24]), np.array([30, 52, 8, 26])
    m = iv.merge_few(u, k2, s2, e2, lo=12, hi=75)
    assert _pieces(m) == [(0, 12, 40), (0, 45, 60), (0, 70, 75), (2, 15, 26)]
    assert (m.tmin, m.span) == (12, 64)
    assert m.covered(np.array([0]), np.array([0]), np.array([100])).tolist() == [48]
    _same_union(m, _union_of_all(u, k2, s2, e2, 12, 75))
    # two new intervals overlapping one piece: [0, 12) and [18, 22) both overlap [10, 20): [0, 22)
    m2 = iv.merge_few(u, np.array([0, 0]), np.array([0, 18]), np.array([12, 22]))
    assert _pieces(m2)[:2] == [(0, 0, 22), (0, 30, 40)]
    _same_union(m2, _union_of_all(u, np.array([0, 0]), np.array([0, 18]), np.array([12, 22]), None, None))


def test_merging_a_few_intervals_equals_the_rebuilt_union_on_random_inputs():
    """merge_few against iv.union of everything (pieces, origin, span and prefix sums) on 3,000
    random cases: 1-3 devices, empty and out-of-window intervals, with and without bounds."""
    rng = np.random.default_rng(50)
    for _ in range(3_000):
        nd, n, m = int(rng.integers(1, 4)), int(rng.integers(0, 30)), int(rng.integers(1, 6))
        s = rng.integers(0, 300, n)
        u = iv.union(rng.integers(0, nd, n), s, s + rng.integers(-2, 40, n))
        k2, s2 = rng.integers(0, nd + 1, m), rng.integers(-20, 320, m)
        e2 = s2 + rng.integers(-2, 60, m)
        lo = None if rng.random() < 0.2 else int(rng.integers(-30, 150))
        hi = None if rng.random() < 0.2 else int(rng.integers(150, 350))
        got, want = iv.merge_few(u, k2, s2, e2, lo=lo, hi=hi), _union_of_all(u, k2, s2, e2, lo, hi)
        assert _pieces(got) == _pieces(want)
        if len(want):
            assert (got.tmin, got.span) == (want.tmin, want.span)
            assert got._cum.tolist() == want._cum.tolist()


def test_distinct_devices_without_sorting_the_operations():
    """Devices of a slice's operations [3, 1, 3, -1, 1]: distinct -1, 1, 3 (sorted, as np.unique);
    ids spanning 4,096 or more ([0, 5000]) take np.unique: 0, 5000; none: []."""
    assert gpu_m._distinct_small(np.array([3, 1, 3, -1, 1], np.int32)) == [-1, 1, 3]
    assert gpu_m._distinct_small(np.array([5000, 0, 5000], np.int32)) == [0, 5000]
    assert gpu_m._distinct_small(np.zeros(0, np.int32)) == []


def _slice_ops(start, end, kind, row, api_start, api_end, api_thread):
    from nsysdoc.engine.data import Ops

    n = len(start)
    def a(v, dt=np.int64):
        return np.asarray(v, dtype=dt)

    return Ops(start_ns=a(start), end_ns=a(end), device=np.zeros(n, np.int32), kind=a(kind, np.int8),
               is_nccl=np.zeros(n, bool), proc=np.zeros(n, np.int32), stream=np.zeros(n, np.int32), row=a(row),
               api=np.arange(n, dtype=np.int64), api_start_ns=a(api_start), api_end=a(api_end),
               api_thread=a(api_thread, np.int32), api_kind=np.zeros(n, np.int8), name_id=np.zeros(n, np.int32),
               short_id=np.zeros(n, np.int32), launch=np.zeros(n, np.int32), nbytes=np.zeros(n, np.int64),
               copy_kind=np.full(n, -1, np.int8), host_kind=np.full(n, -1, np.int8), owned=np.ones(n, bool),
               step=np.full(n, -1, np.int64), flags=np.zeros(n, np.int16), thread_gtid=np.array([7, 9]))


def test_the_operation_ending_a_gap_is_the_first_in_table_order_when_two_start_there():
    """Gap [100, 200) on device 0. Kernel row 1 [50, 100) (call [40, 45)); at 200 two kernels
    start: row 3 (call [120, 130), thread index 0 = global_tid 7) listed first, and row 5 (call
    [150, 160), thread index 1 = global_tid 9). The gap ends with row 3 (lower row): launching
    call start 120, thread 7 (host index 0), painted host part [100, 130) (host window 20 ns: short,
    uncovered -> launch 30) and queue [130, 200) = 70 ns (not a dependency: launch 70). A second
    gap [300, 310) ends with the single kernel row 6 at 310 (call [200, 305), thread 9, host index
    1): queue [305, 310) -> launch 5, host part [300, 305) -> launch 5."""
    ops = _slice_ops([50, 200, 200, 310], [100, 260, 250, 400], [KIND_KERNEL] * 4, [1, 3, 5, 6],
                     [40, 120, 150, 200], [45, 130, 160, 305], [0, 0, 1, 1])
    host = gpu_m.HostActivity(thread_keys=np.array([7, 9]), sync=iv.union([], [], []))
    g = gpu_m.classify_found_gaps(ops, host, np.array([0, 0]), np.array([100, 300]), np.array([200, 310]), 0)
    assert g.next_op.tolist() == [1, 3]
    assert g.next_api_start_ns.tolist() == [120, 200] and g.thread.tolist() == [7, 9]
    assert g.thread_index.tolist() == [0, 1] and g.painted_end_ns.tolist() == [130, 305]
    launch = gpu_m.CAUSES.index("launch")
    assert g.amounts[:, launch].tolist() == [100, 10] and int(g.amounts.sum()) == 110


def test_launch_calls_are_painted_only_where_they_meet_a_long_window_of_their_own_thread():
    """Thread 0 has a long window [100, 2,000,100) and a short one [5,000,000, 5,000,100). Launch
    calls (the lowest level): thread 0 [150, 160) (in the long window: painted, 10 ns), thread 0
    [5,000,010, 5,000,020) (only in the short window: not painted), thread 1 [150, 160) (the long
    window's time, but thread 0's window: not painted). A sync call on thread 0 [5,000,050,
    5,000,060) is painted wherever it meets a window: 10 ns."""
    L, S_ = gpu_m.LV_LAUNCH, gpu_m.LV_SYNC
    src = (np.array([L, L, L, S_]), np.array([0, 0, 1, 0]), np.array([150, 5_000_010, 150, 5_000_050]),
           np.array([160, 5_000_020, 160, 5_000_060]))
    host = gpu_m.HostActivity(thread_keys=np.array([7, 9]), sync=iv.union([], [], []), sources=[src])
    part = host.paint(np.array([0, 0]), np.array([100, 5_000_000]), np.array([2_000_100, 5_000_100]),
                      long_window=np.array([True, False]))
    got = part.amounts(np.array([0, 1]), np.array([0, 0]), np.array([10**7, 10**7]), gpu_m.NLEVELS)
    assert got[0, L] == 10 and got[0, S_] == 10 and int(got.sum()) == 20


def test_meeting_a_union_on_the_raw_time_axis():
    """Pieces [10, 20), [30, 40). [0, 10) touches but shares no time; [5, 11), [25, 35), [39, 50)
    share time; [20, 30) lies between; [40, 45) after; [15, 15) is empty."""
    u = iv.union([0, 0], [10, 30], [20, 40])
    s = np.array([0, 5, 25, 39, 20, 40, 15])
    e = np.array([10, 11, 35, 50, 30, 45, 15])
    assert gpu_m._meets_any(u, s, e).tolist() == [False, True, True, True, False, False, False]


def test_the_longest_gaps_with_ties_at_the_cut():
    """25 gaps: durations 100..118 at positions 0..18 (19 gaps), then 50 at positions 19..24 (six
    ties). The 20 longest: the 19 of 100 ns or more and the first tied 50 (position 19), in array
    order. With 20 gaps or fewer every one is kept."""
    from nsysdoc.engine.slices import TOP_GAPS, _top_idx

    assert TOP_GAPS == 20
    dur = np.array(list(range(100, 119)) + [50] * 6)
    assert _top_idx(dur).tolist() == list(range(20))
    assert _top_idx(dur[::-1]).tolist() == [0] + list(range(6, 25))  # reversed: the first 50 is at 0
    assert _top_idx(np.array([3, 1, 2])).tolist() == [0, 1, 2]
