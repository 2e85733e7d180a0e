"""Interval unions, coverage queries and gaps against a brute-force timeline."""
from __future__ import annotations

import numpy as np
import pytest

from nsysdoc.metrics import intervals as iv


def brute(keys, starts, ends, nkeys, horizon):
    cov = np.zeros((nkeys, horizon), dtype=bool)
    for k, s, e in zip(keys, starts, ends):
        cov[k, max(s, 0):max(e, 0)] = True
    return cov


def test_hand_example_union_is_not_a_sum():
    # device 0: [0,10) and [5,20) overlap -> union 20, sum 25; device 1: [100,110)
    u = iv.union([0, 0, 1], [0, 5, 100], [10, 20, 110])
    assert u.total_by_key(2).tolist() == [20, 10]
    assert u.starts.tolist() == [0, 100] and u.ends.tolist() == [20, 110]
    assert u.covered([0, 0, 1], [0, 15, 0], [100, 100, 105]).tolist() == [20, 5, 5]


def test_overlaps_any_hand_example():
    u = iv.union([0, 0, 1], [0, 30, 100], [10, 40, 110])  # key 0: [0,10) [30,40); key 1: [100,110)
    got = u.overlaps_any([0, 0, 0, 0, 1, 1, 0], [5, 10, 20, 39, 90, 110, 100], [6, 30, 31, 50, 101, 120, 110])
    # inside; exactly between [0,10) and [30,40); touching 30; last instant; key 1 at 100;
    # after key 1's end; key 0 over key 1's time (never another key's interval)
    assert got.tolist() == [True, False, True, True, True, False, False]
    assert u.overlaps_any([0], [5], [5]).tolist() == [False]  # empty range


def test_intersection_hand_example():
    a = iv.union([0, 0], [0, 50], [30, 80])     # [0,30) [50,80)
    b = iv.union([0], [20], [60])               # [20,60)
    assert iv.intersection_length(a, b, 1).tolist() == [20]  # [20,30) + [50,60)


def test_gaps_hand_example_with_window():
    u = iv.union([0, 0], [10, 40], [20, 50])
    k, s, e = iv.gaps(u, 2, lo=[0, 0], hi=[60, 60])
    assert list(zip(k.tolist(), s.tolist(), e.tolist())) == [(0, 0, 10), (0, 20, 40), (0, 50, 60), (1, 0, 60)]


def test_gaps_with_bounds_that_cut_a_key_s_pieces():
    """Key 0 pieces [10, 20), [40, 50), [70, 80); key 1 none; key 2 [5, 15). Bounds: key 0
    [45, 75) (cuts its first and last pieces: the gap [20, 40) is outside, [50, 70) is kept, no
    leading gap since [45, 50) is busy, no trailing gap since [70, 75) is busy); key 1 [0, 30)
    (one gap, all of it); key 2 [0, 30) (leading [0, 5), trailing [15, 30))."""
    u = iv.union([0, 0, 0, 2], [10, 40, 70, 5], [20, 50, 80, 15])
    k, s, e = iv.gaps(u, 3, lo=[45, 0, 0], hi=[75, 30, 30])
    assert list(zip(k.tolist(), s.tolist(), e.tolist())) == [(0, 50, 70), (1, 0, 30), (2, 0, 5), (2, 15, 30)]
    # bounds holding every piece: [0, 100) on key 0 -> [0, 10), [20, 40), [50, 70), [80, 100)
    k, s, e = iv.gaps(u, 3, lo=0, hi=100)
    assert list(zip(k.tolist(), s.tolist(), e.tolist()))[:4] == [(0, 0, 10), (0, 20, 40), (0, 50, 70), (0, 80, 100)]


@pytest.mark.parametrize("seed", range(40))
def test_random_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, nkeys, horizon = int(rng.integers(0, 40)), 3, 200
    keys = rng.integers(0, nkeys, n)
    starts = rng.integers(0, 150, n)
    ends = starts + rng.integers(0, 30, n)
    u = iv.union(keys, starts, ends)
    cov = brute(keys, starts, ends, nkeys, horizon)
    assert u.total_by_key(nkeys).tolist() == cov.sum(axis=1).tolist()
    for _ in range(20):
        k = int(rng.integers(0, nkeys))
        lo = int(rng.integers(-20, 200))
        hi = lo + int(rng.integers(0, 80))
        expect = cov[k, max(lo, 0):max(min(hi, horizon), 0)].sum() if hi > 0 else 0
        assert u.covered(np.array([k]), np.array([lo]), np.array([hi]))[0] == expect
        assert bool(u.overlaps_any(np.array([k]), np.array([lo]), np.array([hi]))[0]) == bool(expect > 0)
        t = int(rng.integers(0, horizon))
        assert bool(u.contains(np.array([k]), np.array([t]))[0]) == bool(cov[k, t])
    lo = np.full(nkeys, 5)
    hi = np.full(nkeys, 190)
    gk, gs, ge = iv.gaps(u, nkeys, lo, hi)
    idle = np.zeros_like(cov)
    for k, s, e in zip(gk, gs, ge):
        assert not idle[k, s:e].any(), "gaps overlap"
        idle[k, s:e] = True
    assert (idle[:, 5:190] == ~cov[:, 5:190]).all()
    keys2 = rng.integers(0, nkeys, n)
    u2 = iv.union(keys2, starts, ends)
    cov2 = brute(keys2, starts, ends, nkeys, horizon)
    assert iv.intersection_length(u, u2, nkeys).tolist() == (cov & cov2).sum(axis=1).tolist()


def test_clipping_to_window():
    u = iv.union([0, 0], [0, 90], [20, 200], lo=10, hi=100)
    assert u.starts.tolist() == [10, 90] and u.ends.tolist() == [20, 100]


def test_presorted_gives_same_result():
    rng = np.random.default_rng(1)
    keys = np.sort(rng.integers(0, 4, 1000))
    starts = np.concatenate([np.sort(rng.integers(0, 10_000, (keys == k).sum())) for k in range(4)])
    ends = starts + rng.integers(1, 50, 1000)
    a, b = iv.union(keys, starts, ends), iv.union(keys, starts, ends, presorted=True)
    assert a.starts.tolist() == b.starts.tolist() and a.ends.tolist() == b.ends.tolist()


def test_large_timestamps_near_epoch():
    """--ts-normalize exports have UTC-epoch nanoseconds (~1.7e18)."""
    base = 1_764_000_000_000_000_000
    u = iv.union([0, 1, 1], [base, base + 5, base + 7], [base + 10, base + 8, base + 20])
    assert u.total_by_key(2).tolist() == [10, 15]
    assert u.covered([1], [base], [base + 10]).tolist() == [5]


@pytest.mark.parametrize("seed", range(5))
def test_fallback_path_for_unpackable_keys_matches(seed):
    """Negative keys cannot be packed: the permutation-based path must agree with the event sort."""
    rng = np.random.default_rng(100 + seed)
    n = 50
    keys = rng.integers(0, 3, n)
    starts = rng.integers(0, 150, n)
    ends = starts + rng.integers(0, 30, n)
    a = iv.union(keys, starts, ends)
    b = iv.union(keys - 5, starts, ends)   # keys -5..-3 take the fallback
    assert a.total_by_key(3).tolist() == [int(b.lengths[b.keys == k - 5].sum()) for k in range(3)]
    assert sorted(zip(a.starts.tolist(), a.ends.tolist())) == sorted(zip(b.starts.tolist(), b.ends.tolist()))


def test_paint_labels_each_instant_with_the_highest_priority_level():
    # key 0: level 2 on [0,10), level 1 on [5,7), level 3 on [8,20); key 1: level 1 on [0,4)
    p = iv.paint([0, 0, 0, 1], [0, 5, 8, 0], [10, 7, 20, 4], [2, 1, 3, 1], 3)
    out = p.amounts([0, 0, 1, 1], [0, 6, 2, 10], [25, 9, 10, 20], 3)
    # [0,25) on key 0: level 1 [5,7) = 2; level 2 [0,5)+[7,10) = 8; level 3 [10,20) = 10
    assert out[0].tolist() == [0, 2, 8, 10]
    # [6,9): level 1 [6,7) = 1, level 2 [7,9) = 2
    assert out[1].tolist() == [0, 1, 2, 0]
    assert out[2].tolist() == [0, 2, 0, 0]   # key 1 [2,10): level 1 [2,4)
    assert out[3].tolist() == [0, 0, 0, 0]   # nothing on key 1 after 4


def test_paint_matches_a_brute_force_sweep():
    rng = np.random.default_rng(3)
    n = 300
    keys = rng.integers(0, 4, n)
    s = rng.integers(0, 1000, n)
    e = s + rng.integers(0, 80, n)
    lv = rng.integers(1, 6, n)
    p = iv.paint(keys, s, e, lv, 5)
    for k in range(4):
        lo, hi = 100 * k, 100 * k + 400
        got = p.amounts([k], [lo], [hi], 5)[0]
        want = np.zeros(6, dtype=np.int64)
        for t in range(lo, hi):
            cover = [lv[i] for i in range(n) if keys[i] == k and s[i] <= t < e[i]]
            if cover:
                want[min(cover)] += 1
        assert got.tolist() == want.tolist()


def test_interval_near_finds_the_merged_call_around_an_instant():
    u = iv.union([0, 0, 1], [10, 50, 10], [20, 60, 30])
    found, s, e = u.interval_near([0, 0, 0, 1, 1, 0], [20, 25, 45, 5, 31, 100], 2)
    assert found.tolist() == [True, False, False, False, True, False]
    assert s[found].tolist() == [10, 10] and e[found].tolist() == [20, 30]
    # negative times are valid (nsys export --ts-shift)
    found, s, e = iv.union([0], [-50], [-30]).interval_near([0, 0], [-31, -10], 2)
    assert found.tolist() == [True, False] and (s[0], e[0]) == (-50, -30)


@pytest.mark.parametrize("seed", range(20))
def test_rows_in_key_start_order_take_the_one_pass_path_and_agree(seed):
    """GPU operations arrive ordered by (device, start): the union is then a running maximum with
    no sort. It must equal the event-sort union of the same rows shuffled, and the brute force
    (touching intervals merge, empty ones vanish, clipping applies)."""
    rng = np.random.default_rng(200 + seed)
    n, nkeys, horizon = int(rng.integers(2, 60)), 3, 200
    keys = rng.integers(0, nkeys, n)
    starts = rng.integers(0, 150, n)
    ends = starts + rng.integers(0, 30, n)
    order = np.lexsort((starts, keys))
    k, s, e = keys[order], starts[order], ends[order]
    assert iv._in_key_start_order(k, s)
    shuffled = rng.permutation(n)
    a = iv.union(k, s, e, lo=3, hi=170)
    b = iv.union(k[shuffled], s[shuffled], e[shuffled], lo=3, hi=170)
    assert (a.keys.tolist(), a.starts.tolist(), a.ends.tolist()) == (b.keys.tolist(), b.starts.tolist(), b.ends.tolist())
    cov = brute(k, np.maximum(s, 3), np.minimum(e, 170), nkeys, horizon)
    assert a.total_by_key(nkeys).tolist() == cov.sum(axis=1).tolist()


def test_key_start_order_check_on_hand_examples():
    assert iv._in_key_start_order(np.array([0, 0, 1, 1]), np.array([5, 9, 1, 1]))
    assert not iv._in_key_start_order(np.array([0, 1, 0]), np.array([1, 2, 3]))  # key goes back
    assert not iv._in_key_start_order(np.array([0, 0]), np.array([9, 5]))  # start goes back in a key
    # touching intervals [0,10) [10,20) merge on the one-pass path too
    u = iv.union([0, 0, 1], [0, 10, 0], [10, 20, 5])
    assert (u.keys.tolist(), u.starts.tolist(), u.ends.tolist()) == ([0, 1], [0, 0], [20, 5])


def test_ordered_union_with_a_span_too_wide_to_shift_keys_apart():
    big = 1 << 61  # times this far apart cannot be packed as key * span in int64
    u = iv.union([0, 0, 3, 3], [-big, 5, 0, 8], [10, 20, big, big + 1])
    assert (u.keys.tolist(), u.starts.tolist(), u.ends.tolist()) == ([0, 3], [-big, 0], [20, big + 1])


class _Ops:
    """The five columns the device unions read."""

    def __init__(self, device, start_ns, end_ns, kind, is_nccl):
        self.device, self.start_ns, self.end_ns = device, start_ns, end_ns
        self.kind, self.is_nccl = kind, is_nccl

    def __len__(self):
        return len(self.start_ns)

    def take(self, idx):
        return _Ops(self.device[idx], self.start_ns[idx], self.end_ns[idx], self.kind[idx], self.is_nccl[idx])


def _same(a: iv.Union, b: iv.Union) -> bool:
    return (np.array_equal(a.keys, b.keys) and np.array_equal(a.starts, b.starts)
            and np.array_equal(a.ends, b.ends))


@pytest.mark.parametrize("seed", range(40))
def test_extending_a_slice_union_with_carried_ops_equals_the_union_of_all(seed):
    """engine.slices computes a slice's own unions ahead (unclipped) and joins the operations
    carried from the previous slice afterwards: the four unions must equal the direct ones."""
    from nsysdoc.metrics import gpu as gpu_m
    from nsysdoc.metrics.ops import KIND_KERNEL, KIND_MEMCPY

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    ndev = int(rng.integers(1, 4))
    s = rng.integers(0, 1000, n).astype(np.int64)
    e = s + rng.integers(-3, 80, n)  # some empty (end <= start)
    kinds = np.where(rng.random(n) < (0.3 if seed % 3 else 0.0), KIND_MEMCPY, KIND_KERNEL).astype(np.int8)
    nccl = (rng.random(n) < (0.3 if seed % 2 else 0.0)) & (kinds == KIND_KERNEL)
    ops = _Ops(rng.integers(0, ndev, n).astype(np.int32), s, e, kinds, nccl)
    extra_mask = rng.random(n) < [0.0, 0.1, 0.5, 1.0][seed % 4]
    own, extra = ops.take(~extra_mask), ops.take(extra_mask)
    lo, hi = int(rng.integers(-10, 300)), int(rng.integers(600, 1200))
    direct = gpu_m.device_activity(ops, ndev, lo, hi)
    ahead = gpu_m.device_activity(own, ndev, None, None)
    joined = gpu_m.extend_activity(ahead, own, extra if len(extra) else None, lo, hi)
    for name in ("busy", "kernels", "compute", "comm"):
        assert _same(getattr(joined, name), getattr(direct, name)), name


def test_extend_activity_hand_example():
    """Device 0: own kernels [10, 20) and [30, 40); a kernel carried from the previous slice
    [5, 12) and an NCCL kernel [35, 50). Window [8, 45)."""
    from nsysdoc.metrics import gpu as gpu_m

    own = _Ops(np.array([0, 0], np.int32), np.array([10, 30]), np.array([20, 40]), np.zeros(2, np.int8),
               np.zeros(2, bool))
    extra = _Ops(np.array([0, 0], np.int32), np.array([5, 35]), np.array([12, 50]), np.zeros(2, np.int8),
                 np.array([False, True]))
    a = gpu_m.extend_activity(gpu_m.device_activity(own, 1, None, None), own, extra, 8, 45)
    assert a.busy.starts.tolist() == [8, 30] and a.busy.ends.tolist() == [20, 45]
    assert a.compute.starts.tolist() == [8, 30] and a.compute.ends.tolist() == [20, 40]
    assert a.comm.starts.tolist() == [35] and a.comm.ends.tolist() == [45]
