"""Hardware counters per kernel (issue 47): GPU metrics samples inside each kernel's executions,
averaged per kernel name, and the kernel's class (glossary, "Hardware counters per kernel").

Every expected number is computed by hand from the scenario code
(``nsysdoc/testing/counter_scenarios.py``) and the builder's timing model (header of
``tests/test_judgement_scenarios.py``). Times are in us after the capture start T0; samples are
written every P = 100 us at T0 + k * P (10 kHz), each covering ``(t - P, t]``; a sample is inside a
kernel ``[s, e]`` when ``s <= t - P`` and ``t <= e``, i.e. ``t`` in ``[s + 100, e]``.

``gemm_and_elementwise_counters`` (3 steps; the host launches the three kernels 5 us apart, then
``item()``: a 1 us copy after the last kernel and the sync returning 2 us after it; the next
launch 5 us later starts its kernel 5 us after the call):

========  =====================  ===============  ==================  ========
step      GEMM (1000 us)         elementwise      short (150 us)      samples
========  =====================  ===============  ==================  ========
1         [5, 1005]: 200..1000   [1005, 1505]:    [1505, 1655]: none  9, 4, 0
                                 1200..1500
2         [1663, 2663]:          [2663, 3163]:    [3163, 3313]: 3300  9, 4, 1
          1800..2600             2800..3100
3         [3321, 4321]:          [4321, 4821]:    [4821, 4971]: none  9, 4, 0
          3500..4300             4500..4800
========  =====================  ===============  ==================  ========

(step 2 starts when step 1's sync returns: 1655 + 1 + 2 = 1658, GEMM at 1658 + 5 = 1663; step 3:
3313 + 3 = 3316, GEMM at 3321.) A sample inside one kernel has exactly that kernel's values (its
period is all that kernel), written as integer percentages.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.conftest import diagnose_path  # noqa: E402
from tests.test_judgement_scenarios import approx, finding  # noqa: E402


def _rows(result: dict) -> dict:
    return {r["name"]: r for r in result["metrics"]["kernels"]["by_name"]}


@pytest.fixture(scope="module")
def two_kernels(tmp_path_factory):
    from nsysdoc.testing.counter_scenarios import gemm_and_elementwise_counters

    path = gemm_and_elementwise_counters().write(tmp_path_factory.mktemp("ctr") / "g.sqlite")
    return diagnose_path(path)


def test_gemm_counters_are_the_means_of_the_samples_inside_it(two_kernels):
    """GEMM: 9 samples a step x 3 = 27, each SM Active 90, SM Issue 70, Tensor Active 80, DRAM
    read 20 + write 5 = 25. Compute = max(70, 80) = 80 >= 60 and DRAM 25 < 80: compute-bound."""
    from nsysdoc.testing.scenarios import GEMM

    g = _rows(two_kernels)[GEMM]
    assert g["counter_samples"] == 27
    assert (g["sm_active_pct"], g["sm_issue_pct"], g["tensor_active_pct"], g["dram_bandwidth_pct"]) == \
        (approx(90), approx(70), approx(80), approx(25))
    assert g["bound"] == "compute-bound"


def test_elementwise_kernel_is_memory_bound(two_kernels):
    """Elementwise: 4 samples a step x 3 = 12; SM Issue 20, Tensor Active 0, DRAM 60 + 25 = 85 >= 60
    and >= compute max(20, 0): memory-bound."""
    from nsysdoc.testing.scenarios import ELEMENTWISE

    e = _rows(two_kernels)[ELEMENTWISE]
    assert e["counter_samples"] == 12
    assert (e["sm_active_pct"], e["sm_issue_pct"], e["tensor_active_pct"], e["dram_bandwidth_pct"]) == \
        (approx(95), approx(20), approx(0), approx(85))
    assert e["bound"] == "memory-bound"


def test_short_kernel_has_too_few_samples(two_kernels):
    """The 150 us kernel holds one sample in all (3300, step 2) < 5: null counters, class unknown."""
    from nsysdoc.testing.counter_scenarios import SHORT

    s = _rows(two_kernels)[SHORT]
    assert s["counter_samples"] == 1
    assert s["sm_active_pct"] is None and s["sm_issue_pct"] is None and s["dram_bandwidth_pct"] is None
    assert s["bound"] == "unknown"


def test_counters_summary(two_kernels):
    """Period 100 us; kernel time by class: compute-bound 3 x 1 ms = 3.0, memory-bound 3 x 0.5 =
    1.5, unknown 3 x 0.15 = 0.45 ms; nothing missing."""
    cs = two_kernels["metrics"]["kernels"]["counters"]
    assert cs["present"] is True and cs["missing"] is None
    assert cs["sample_period_us"] == approx(100) and cs["min_samples"] == 5
    assert cs["kernel_ms_by_class"] == {"memory-bound": approx(1.5), "compute-bound": approx(3.0),
                                        "latency-bound": 0, "tensor cores idle": 0, "unknown": approx(0.45)}


def test_dominant_kernel_says_the_class(two_kernels):
    """The GEMM is 3.0 of 4.95 ms of kernel time (60.6% >= 50) and one launch 1000 us of a median
    step of 1658 us (60% >= 20): dominant-kernel fires and names its class and counters."""
    f = finding(two_kernels, "dominant-kernel")
    assert f is not None
    assert "GPU metrics inside its launches (SM Issue 70%, Tensor Active 80%, DRAM bandwidth 25% of peak, " \
           "27 samples) read it as compute-bound" in f["message"]


def test_concurrent_kernels_share_the_samples(tmp_path):
    """kernel_a [5, 1005] on stream 7, kernel_b [10, 1010] on stream 8: samples 200..1000 lie inside
    both (9 each). Each sample is the GPU's sum: SM Issue 30 + 30 = 60, DRAM read 20 + 10 = 30, SM
    Active min(80 + 80, 100) = 100. Both read 60% SM Issue -> compute-bound, though each alone
    issues at 30% (the definition counts a shared sample for every kernel it lies in)."""
    from nsysdoc.testing.counter_scenarios import concurrent_kernels_counters

    r = _rows(diagnose_path(concurrent_kernels_counters().write(tmp_path / "c.sqlite")))
    for name in ("kernel_a", "kernel_b"):
        k = r[name]
        assert k["counter_samples"] == 9
        assert (k["sm_active_pct"], k["sm_issue_pct"], k["dram_bandwidth_pct"]) == (approx(100), approx(60), approx(30))
        assert k["bound"] == "compute-bound"


def test_same_counters_whatever_the_slices(tmp_path, monkeypatch):
    """The per-name sums are added over slices: 7-row slices give the same table."""
    from nsysdoc.testing.counter_scenarios import gemm_and_elementwise_counters

    path = gemm_and_elementwise_counters().write(tmp_path / "g.sqlite")
    one = _rows(diagnose_path(path))
    monkeypatch.setenv("NSYSDOC_SLICE_ROWS", "7")
    many = _rows(diagnose_path(path))
    cols = ("sm_active_pct", "sm_issue_pct", "tensor_active_pct", "dram_bandwidth_pct", "counter_samples", "bound")
    assert {n: [r[c] for c in cols] for n, r in many.items()} == {n: [r[c] for c in cols] for n, r in one.items()}


def test_without_gpu_metrics_fields_are_null_and_missing_says_the_switch(tmp_path):
    """No GPU_METRICS table: every counter null, class unknown, ``missing`` names
    --gpu-metrics-devices; dominant-kernel's message has no counter sentence."""
    from nsysdoc.testing.scenarios import dominant_kernel

    res = diagnose_path(dominant_kernel(steps=3).write(tmp_path / "d.sqlite"))
    cs = res["metrics"]["kernels"]["counters"]
    assert cs["present"] is False and "--gpu-metrics-devices" in cs["missing"]
    for r in res["metrics"]["kernels"]["by_name"]:
        assert r["sm_issue_pct"] is None and r["counter_samples"] == 0 and r["bound"] == "unknown"
    f = finding(res, "dominant-kernel")
    assert f is not None and "GPU metrics" not in f["message"]


# --- the pure functions ---------------------------------------------------------------------------
def test_sample_sums_inside_executions():
    """Samples at 100, 200, ..., 1000 (P = 100) of values 1..10. Execution [150, 520]: t in
    [250, 520] -> 300, 400, 500 (values 3 + 4 + 5 = 12, 3 samples); [0, 100]: t in [100, 100] -> the
    sample at 100 (value 1); [130, 220]: t in [230, 220] -> none."""
    from nsysdoc.metrics.gpu_metrics import DeviceCounters

    dc = DeviceCounters()
    dc.add("sm_issue_pct", np.arange(1000, 0, -100), np.arange(10, 0, -1, dtype=float))  # unsorted on purpose
    s, n = dc.sums("sm_issue_pct", np.array([150, 0, 130]), np.array([520, 100, 220]))
    assert list(s) == [12.0, 1.0, 0.0] and list(n) == [3, 1, 0]


@pytest.mark.parametrize("issue,tensor,dram,gemm,expected", [
    (59.9, 0, 59.9, False, "latency-bound"),      # both just under 60
    (60, 0, 10, False, "compute-bound"),          # compute at the threshold
    (10, 60, 10, True, "compute-bound"),          # tensor cores count as compute
    (61, 0, 60, False, "compute-bound"),          # both >= 60: the larger decides
    (60, 0, 60, False, "memory-bound"),           # a tie goes to memory
    (90, 9.9, 20, True, "tensor cores idle"),     # a GEMM under 10% Tensor Active
    (90, 9.9, 20, False, "compute-bound"),        # not a GEMM: tensor cores do not matter
    (float("nan"), float("nan"), float("nan"), True, "unknown"),
])
def test_kernel_class_thresholds(issue, tensor, dram, gemm, expected):
    from nsysdoc.metrics.gpu_metrics import kernel_class

    assert kernel_class(issue, tensor, dram, gemm) == expected


# --- Kineto's own occupancy fields ------------------------------------------------------------------
@pytest.mark.real  # issue 49: reads ../shared/traces
def test_kineto_blocks_per_sm_is_the_sm_fill_the_under_filled_reading_uses():
    """PyTorch Profiler kernel events carry ``blocks per SM`` (grid blocks / the device's SMs) and
    ``warps per SM``; nsysdoc computes SM fill = min(1, blocks / SMs) from the grid and the trace's
    deviceProperties (numSms 108 on this A100), and reads ``est. achieved occupancy %`` into
    ``est_achieved_occupancy_pct`` (test_occupancy.py::test_real_kineto_trace_launch_fields). Here:
    for all 8,568 kernels, nsysdoc's SM fill equals min(1, Kineto's blocks per SM), so the field
    would add nothing the grid does not give (checked with independent JSON code)."""
    import collections
    import gzip
    import json

    from nsysdoc.metrics.occupancy import sm_fill
    from nsysdoc.trace import load_trace
    from nsysdoc.trace import schema as S

    from tests.conftest import SHARED_TRACES, skip_without_shared

    path = SHARED_TRACES / "kineto" / "hta_a100_rank3of8.pt.trace.json.gz"
    skip_without_shared("kineto/hta_a100_rank3of8.pt.trace.json.gz")
    with gzip.open(path) as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel"]
    want = collections.Counter(round(min(1.0, e["args"]["blocks per SM"]), 5) for e in events)
    tr = load_trace(path, cache=False)
    codes = tr.store.get("kernels").read_all(["launch"])["launch"]
    blocks = S.unpack_launch(tr.derived["launch_keys"])["blocks"][codes]
    sm = int(tr.devices.row(0)["sm_count"])
    got = collections.Counter(round(float(f), 5) for f in sm_fill(blocks, sm))
    assert sm == 108 and len(events) == 8568
    assert got == want


def test_degenerate_gpu_metrics_give_null_counters_not_a_crash(tmp_path):
    """Every sample of the capture moved to one timestamp (no sampling period can be read) and
    one DRAM value made huge: no traceback; the period is unknown, so no sample is inside any
    kernel and every counter is null."""
    import sqlite3

    from nsysdoc.testing.counter_scenarios import gemm_and_elementwise_counters

    path = gemm_and_elementwise_counters().write(tmp_path / "g.sqlite")
    con = sqlite3.connect(path)
    con.execute("UPDATE GPU_METRICS SET timestamp = 1000500000")
    con.execute("UPDATE GPU_METRICS SET value = 9223372036854775807 WHERE rowid = 4")
    con.commit()
    con.close()
    res = diagnose_path(path)
    cs = res["metrics"]["kernels"]["counters"]
    assert cs["present"] is True and cs["sample_period_us"] is None
    assert all(r["counter_samples"] == 0 and r["bound"] == "unknown" for r in res["metrics"]["kernels"]["by_name"])


def test_page_table_shows_the_counters_and_escapes_names(tmp_path):
    """The page's "Hardware counters per kernel" table: one row per kernel name with its means and
    class (the numbers of the tests above, rounded to whole percent), a kernel name holding markup
    shown as text; no such table without GPU metrics."""
    from nsysdoc.analysis import analyze
    from nsysdoc.testing.counter_scenarios import gemm_and_elementwise_counters
    from nsysdoc.testing.scenarios import GEMM, dominant_kernel
    from nsysdoc.trace import load_trace
    from nsysdoc.views import render_html
    from tests.test_report import parse

    evil = "<img src=x onerror=alert(1)>_kernel"
    import sqlite3

    path = gemm_and_elementwise_counters().write(tmp_path / "g.sqlite")
    con = sqlite3.connect(path)  # rename the short kernel (its string) to markup
    con.execute("UPDATE StringIds SET value = ? WHERE value = 'short_reduce_kernel'", (evil,))
    con.commit()
    con.close()
    html = render_html(analyze(load_trace(path, cache=False)))
    assert evil not in html
    table = parse(html).by_id("kernel-counters")
    rows = {r.find_all("td")[0].norm(): [c.norm() for c in r.find_all("td")[1:]] for r in table.find_all("tr")
            if r.find_all("td")}
    assert rows[GEMM[:119] + "…" if len(GEMM) > 120 else GEMM] == ["3.00", "90", "70", "80", "25", "27", "compute-bound"]
    assert rows[evil] == ["0.45", "—", "—", "—", "—", "1", "unknown"]
    plain = render_html(analyze(load_trace(dominant_kernel(steps=2).write(tmp_path / "d.sqlite"), cache=False)))
    assert 'id="kernel-counters"' not in plain


# --- per operator ---------------------------------------------------------------------------------
@pytest.mark.parametrize("env", [{}, {"NSYSDOC_SLICE_ROWS": "5"}, {"NSYSDOC_SLICE_ROWS": "5", "NSYSDOC_ATTR_SLICED_ROWS": "1"}])
def test_operator_counters_are_those_of_the_kernels_it_launched(env, tmp_path, monkeypatch):
    """``operator_counters``: per step ``aten::mm`` (entered 1 us after the step starts) launches the
    1000 us GEMM, ``aten::add`` the 500 us elementwise kernel, then ``item()``. Step 1: launch at 1 us,
    GEMM [6, 1006] -> samples 200..1000 (9); ops exit/enter 2 us, launch at 8 us, elementwise
    [1006, 1506] -> 1200..1500 (4); the sync returns at 1506 + 1 + 2 = 1509. Step 2: GEMM [1515, 2515]
    -> 1700..2500 (9), elementwise [2515, 3015] -> 2700..3000 (4), sync back at 3018. Step 3: GEMM
    [3024, 4024] -> 3200..4000 (9), elementwise [4024, 4524] -> 4200..4500 (4). So aten::mm: 27
    samples, the GEMM's values, compute-bound; aten::add: 12 samples, memory-bound; "(no operator)"
    (the item's copy) has none. The same with small slices and with the sliced attributor."""
    from nsysdoc.testing.counter_scenarios import operator_counters

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    res = diagnose_path(operator_counters().write(tmp_path / "o.sqlite"))
    rows = {r["name"]: r for r in res["metrics"]["operators"]["rows"]}
    mm, add = rows["aten::mm"], rows["aten::add"]
    assert mm["counter_samples"] == 27 and mm["bound"] == "compute-bound"
    assert (mm["sm_active_pct"], mm["sm_issue_pct"], mm["tensor_active_pct"], mm["dram_bandwidth_pct"]) == \
        (approx(90), approx(70), approx(80), approx(25))
    assert add["counter_samples"] == 12 and add["bound"] == "memory-bound"
    assert (add["sm_issue_pct"], add["dram_bandwidth_pct"]) == (approx(20), approx(85))
    none = rows["(no operator)"]
    assert none["counter_samples"] == 0 and none["sm_issue_pct"] is None and none["bound"] == "unknown"


def test_an_infinite_sample_is_dropped_and_does_not_null_every_kernel(tmp_path):
    """The first sample of every metric (at T0, inside no kernel) holds +Inf (SQLite's 9e999). It
    is left out at read and counted as a dropped GPU_METRICS row (one per metric: the builder
    writes 5 metrics, SM Active, SM Issue, Tensor Active, DRAM read and write), so the GEMM keeps
    its 27 samples of 90/70/80/25 and the elementwise kernel its 12 of 95/20/0/85, as in the clean
    capture; no RuntimeWarning from a sum of Inf - Inf."""
    import sqlite3
    import warnings

    from nsysdoc.testing.counter_scenarios import gemm_and_elementwise_counters
    from nsysdoc.testing.scenarios import ELEMENTWISE, GEMM

    path = gemm_and_elementwise_counters().write(tmp_path / "g.sqlite")
    con = sqlite3.connect(path)
    con.execute("UPDATE GPU_METRICS SET value = 9e999 WHERE rowid IN (SELECT min(rowid) FROM GPU_METRICS "
                "GROUP BY metricId)")
    con.commit()
    con.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = diagnose_path(path)
    rows = _rows(res)
    g, e = rows[GEMM], rows[ELEMENTWISE]
    assert g["counter_samples"] == 27 and g["bound"] == "compute-bound"
    assert (g["sm_active_pct"], g["sm_issue_pct"], g["tensor_active_pct"], g["dram_bandwidth_pct"]) == \
        (approx(90), approx(70), approx(80), approx(25))
    assert e["counter_samples"] == 12 and e["bound"] == "memory-bound" and e["dram_bandwidth_pct"] == approx(85)
    drops = [d for d in res["capture"]["dropped_rows"] if d["table"] == "GPU_METRICS"]
    assert drops == [{"table": "GPU_METRICS", "reason": "value not a finite number (Inf or NaN)", "rows": 5}]


def test_window_means_leave_out_infinite_samples():
    """Samples of SM Active at 100, 200, 300 us: 40, +Inf, 60. The window [0, 400) holds the two
    finite ones: (40 + 60) / 2 = 50; the window [150, 250) holds only the Inf one: NaN (no sample)."""
    from nsysdoc.metrics.gpu_metrics import window_means

    gm = {"metric": np.array(["sm_active_pct"] * 3, dtype=object), "device_id": np.zeros(3, np.int64),
          "timestamp_ns": np.array([100_000, 200_000, 300_000]), "value": np.array([40.0, np.inf, 60.0])}

    class Cols(dict):
        def __len__(self):
            return 3

    got = window_means(Cols(gm), np.array([0, 0]), np.array([0, 150_000]), np.array([400_000, 250_000]))
    assert got["sm_active_pct"][0] == approx(50) and np.isnan(got["sm_active_pct"][1])


def test_below_min_samples_every_counter_is_null_whatever_the_other_metrics_hold():
    """One kernel name: 3 SM Active samples (the count the gate reads) but 6 SM Issue samples summing
    to 60 (mean 10) - a duplicated-rows export. 3 < 5: every counter is null and the class unknown,
    not SM Issue 10% alone making it latency-bound."""
    from nsysdoc.metrics.gpu_metrics import KERNEL_METRICS, kernel_counter_means

    nm = len(KERNEL_METRICS)
    sums = np.zeros((1, 2 * nm))
    j = {m: i for i, m in enumerate(KERNEL_METRICS)}
    sums[0, j["sm_active_pct"]], sums[0, nm + j["sm_active_pct"]] = 150.0, 3
    sums[0, j["sm_issue_pct"]], sums[0, nm + j["sm_issue_pct"]] = 60.0, 6
    sums[0, j["dram_read_pct"]], sums[0, nm + j["dram_read_pct"]] = 60.0, 6
    got = kernel_counter_means(sums, np.array([0]))
    assert int(got["counter_samples"][0]) == 3
    for m in ("sm_active_pct", "sm_issue_pct", "tensor_active_pct", "dram_bandwidth_pct"):
        assert np.isnan(got[m][0]), m
