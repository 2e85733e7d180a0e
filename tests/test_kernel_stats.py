"""Per-name kernel statistics on hand-computed examples (nsysdoc.metrics.kernels)."""

import numpy as np
import pytest

from nsysdoc.metrics.kernels import kernel_summary, kernels_by_name
from nsysdoc.trace.model import StringTable

NAMES = StringTable(np.array([10, 20, 30]), np.array(["gemm", "relu", "ncclAllReduce"]))


def test_by_name_with_codes_gives_group_and_exact_total():
    # codes 0 -> id 10 (gemm), 1 -> id 20 (relu), 2 -> id 30 (nccl); dense codes via ``ids``
    code = np.array([1, 0, 1, 2, 0, 1], dtype=np.uint16)
    dur = np.array([5, 1000, 7, 300, 2000, 9], dtype=np.uint32)
    nccl = code == 2
    df = kernels_by_name(code, dur, NAMES, nccl, ids=np.array([10, 20, 30]), codes=True)
    assert df["name"].tolist() == ["gemm", "ncclAllReduce", "relu"]
    assert df["code"].tolist() == [0, 2, 1]
    assert df["total_ns"].tolist() == [3000, 300, 21]
    assert df["count"].tolist() == [2, 1, 3]
    assert df["median_us"].tolist() == [1.5, 0.3, 0.007]
    assert df["is_nccl"].tolist() == [False, True, False]
    # without ``codes`` the table has neither column
    plain = kernels_by_name(code, dur, NAMES, nccl, ids=np.array([10, 20, 30]), limit=2)
    assert "code" not in plain and "total_ns" not in plain and len(plain) == 2


def test_by_name_empty_keeps_the_requested_columns():
    empty = np.array([], dtype=np.uint16)
    df = kernels_by_name(empty, np.array([], dtype=np.uint32), NAMES, np.array([], dtype=bool), codes=True)
    assert len(df) == 0 and {"code", "total_ns", "name", "is_nccl"} <= set(df.columns)
    assert df.head(5).drop(["code", "total_ns"]).columns[0] == "name"


def test_summary_in_place_same_numbers_and_reorders_only_the_input():
    dur = np.array([40_000, 1_000, 3_000, 20_000, 9_999], dtype=np.uint32)
    # sorted: 1000, 3000, 9999, 20000, 40000 -> median 9999; p95 = 20000 + 0.8*(40000-20000) = 36000
    want = {"count": 5, "total_ms": 0.073999, "mean_us": 14.7998, "median_us": 9.999, "p95_us": 36.0,
            "under_10us_pct": 60.0}
    copy = dur.copy()
    assert kernel_summary(copy) == want
    assert (copy == dur).all()
    got = kernel_summary(copy, in_place=True)
    assert got == want
    assert sorted(copy.tolist()) == sorted(dur.tolist())


def test_group_stats_every_path_gives_numpys_exact_quantiles():
    """The three ways per-group statistics are computed (radix order + selection when a few big
    groups hold most rows, one packed sort otherwise, a lexicographic sort for wide ids) agree
    with numpy's quantiles computed group by group (to the last bits of the interpolation)."""
    from nsysdoc.metrics import kernels as K

    rng = np.random.default_rng(7)
    big = np.repeat([3, 0], [5000, 3000])                  # two groups over the selection threshold
    few = np.arange(5, 45).repeat(3)                     # forty groups of three rows
    cases = {
        "radix + selection": np.concatenate([big, few]),
        "packed sort": np.concatenate([big[:40], big[-40:], few]),  # most rows in small groups
        "wide ids": np.concatenate([big, few]).astype(np.int64) * (1 << 30),
    }
    for label, group in cases.items():
        group = rng.permutation(group)
        dur = rng.integers(0, 40_000, len(group)).astype(np.uint32)
        st = K._group_stats(group, dur.copy())
        for g, n, tot, med, p95, tiny in zip(st["group"], st["count"], st["total_ns"], st["median_ns"],
                                             st["p95_ns"], st["tiny"]):
            d = dur[group == g].astype(np.int64)
            assert (n, tot, tiny) == (len(d), d.sum(), (d < K.TINY_KERNEL_NS).sum()), label
            # the same order statistics; the interpolation may differ from numpy's in the last bit
            assert np.allclose((med, p95), np.quantile(d, [0.5, 0.95]), rtol=1e-12, atol=0), label
        assert st["group"].tolist() == sorted(set(group.tolist())), label


def test_group_stats_hand_computed_big_group():
    """One group of 10,000 durations 0..9999 (shuffled) beside a small one: median 4999.5,
    p95 = 9499.05 (position 0.95 * 9999 = 9499.05 between 9499 and 9500)."""
    from nsysdoc.metrics import kernels as K

    group = np.array([1] * 10_000 + [0, 0], dtype=np.uint16)
    dur = np.array(list(np.random.default_rng(0).permutation(10_000)) + [10_000, 30_000], dtype=np.uint32)
    st = K._group_stats(group, dur)
    assert st["group"].tolist() == [0, 1]
    assert st["count"].tolist() == [2, 10_000]
    assert st["total_ns"].tolist() == [40_000, 49_995_000]
    assert st["median_ns"].tolist() == [20_000.0, 4999.5]
    assert abs(st["p95_ns"][1] - 9499.05) < 1e-6 and st["p95_ns"][0] == 29_000.0
    assert st["tiny"].tolist() == [0, 10_000]


def test_short_name_stats_reuse_full_name_stats_by_hand():
    """Full names 0, 1 share short name 0; full name 2 alone has short name 1; full name 3 has rows
    under two short names (2 and 3), so neither of those is a copy of it."""
    from nsysdoc.metrics.kernels import _coarser_stats, _group_stats

    full = np.array([0, 1, 0, 2, 2, 3, 3, 3], dtype=np.uint16)
    short = np.array([0, 0, 0, 1, 1, 2, 3, 2], dtype=np.uint16)
    dur = np.array([10, 20, 30, 5, 7, 100, 200, 300], dtype=np.uint32)
    got = _coarser_stats(_group_stats(full, dur), full, short, dur)
    assert got["group"].tolist() == [0, 1, 2, 3]
    assert got["count"].tolist() == [3, 2, 2, 1]
    assert got["total_ns"].tolist() == [60, 12, 400, 200]
    assert got["median_ns"].tolist() == [20.0, 6.0, 200.0, 200.0]


@pytest.mark.parametrize("seed", range(60))
def test_short_name_stats_equal_a_direct_grouping(seed):
    """Whatever the mapping of full names to short names (one to one, many to one, a full name
    under several short names, big and small groups), the reused table equals grouping by short
    name directly, dtypes included, and so do the two kernels_by_name tables."""
    import pandas as pd

    from nsysdoc.metrics.kernels import _coarser_stats, _group_stats, kernel_tables

    rng = np.random.default_rng(seed)
    n = int(rng.choice([0, 1, 50, 3000, 20000]))
    nfull = int(rng.integers(1, 300))
    full = rng.zipf(1.5, n).astype(np.int64) % nfull
    kind = seed % 3
    to_short = np.arange(nfull) if kind == 0 else rng.integers(0, max(1, nfull // 3), nfull)
    short = to_short[full]
    if kind == 2 and n:  # some full names also appear under another short name
        flip = rng.random(n) < 0.05
        short = np.where(flip, (short + 1) % (nfull // 3 + 1), short)
    full, short = full.astype(np.uint16), short.astype(np.uint16)
    dur = rng.integers(1, 50_000, n).astype(np.uint32)
    want = _group_stats(short, dur)
    got = _coarser_stats(_group_stats(full, dur), full, short, dur)
    pd.testing.assert_frame_equal(got.to_pandas(), want.to_pandas())
    ids = np.arange(max(nfull, int(short.max()) + 1 if n else 1))
    names = StringTable(ids, np.array([f"k{i}" for i in ids]))
    nccl = full == 1
    by_short, by_name = kernel_tables(full, short, dur, names, nccl, ids, ids, short_limit=50)
    pd.testing.assert_frame_equal(by_short.to_pandas(),
                                  kernels_by_name(short, dur, names, nccl, limit=50, ids=ids).to_pandas())
    pd.testing.assert_frame_equal(by_name.to_pandas(),
                                  kernels_by_name(full, dur, names, nccl, ids=ids, codes=True).to_pandas())
