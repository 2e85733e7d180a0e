"""Per-name kernel statistics on hand-computed examples (nsysdoc.metrics.kernels)."""

import numpy as np

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
    assert df.head(5).drop(columns=["code", "total_ns"]).columns.tolist()[0] == "name"


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
