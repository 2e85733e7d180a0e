"""``nsysdoc diff``: verdicts and "why" on fixture pairs with hand-computed truth, the definitions
on hand examples, the CLI (formats, exit codes, errors), and one real before/after pair.

Fixture pairs come from ``steady_training`` (nsysdoc/testing/scenarios.py): per step 8 GEMMs of
``gemm_us``, 16 elementwise kernels of 40 µs, an optimizer kernel of 300 µs, an 8 MiB copy and one
``.item()``; GPU-bound, so a step lasts 13.6477 ms with the defaults (the GPU work plus the copy,
the item round trip and the first launch latency).
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from .conftest import ROOT, SHARED_TRACES, diagnose_path, run_cli
from .conftest import needs_shared  # issue 49
from nsysdoc.compare import (NEGLIGIBLE_PCT, bootstrap_median_change, check_report, compare, regression)
from nsysdoc.errors import InputError
from nsysdoc.testing.scenarios import GEMM, SOFTMAX, dataloader_starvation, steady_training

SOFTMAX_SHORT = SOFTMAX  # the builder's short name of a demangled kernel is its whole name here
STEP_MS = 13.6477


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Diagnosed fixture captures, built once: name -> (path, result)."""
    d = tmp_path_factory.mktemp("diff-runs")
    specs = {
        "base": dict(),
        "gemm_slower": dict(gemm_us=1650),
        "noise_a": dict(jitter_pct=3, seed=1),
        "noise_b": dict(jitter_pct=3, seed=2),
        "noise_slower": dict(jitter_pct=3, seed=3, gemm_us=1650),
        "twelve_steps": dict(steps=12),
        "new_kernel": dict(extra_kernel_us=500),
        "few_steps": dict(steps=3, gemm_us=1650),
        # no markers, and kernels in a shuffled order: no steps can be inferred either
        "no_markers": dict(step_markers=False, order_seed=11),
        "no_markers_slower": dict(step_markers=False, gemm_us=1800, order_seed=12),
    }
    out = {}
    for name, kw in specs.items():
        path = steady_training(**kw).write(d / f"{name}.sqlite")
        out[name] = (path, diagnose_path(path))
    for name, wait in (("starved", 40.0), ("fed", 2.0)):
        path = dataloader_starvation(wait_ms=wait).write(d / f"{name}.sqlite")
        out[name] = (path, diagnose_path(path))
    return out


def _diff(runs, a, b):
    return compare(runs[a][1], runs[b][1], names=(a, b))


# ---------------------------------------------------------------------------------------------
# verdicts on fixture pairs
# ---------------------------------------------------------------------------------------------
def test_base_step_time_is_what_the_docstring_says(runs):
    steps = [s["step_time_ms"] for s in runs["base"][1]["steps"] if s["primary"]]
    assert len(steps) == 20 and all(abs(t - STEP_MS) < 1e-3 for t in steps)


def test_dataloader_fix_is_faster_and_input_wait_explains_it(runs):
    d = _diff(runs, "starved", "fed")
    assert d["per"] == "step" and d["verdict"] == "faster" and d["strength"] == "strong"
    st = d["step_time_ms_median"]
    # each step loses 40 - 2 = 38 ms of DataLoader wait, nothing else changes
    assert st["candidate"] == pytest.approx(st["base"] - 38.0, abs=1e-3)
    top = d["breakdown"][0]
    assert top["part"] == "idle_input"
    assert top["base_ms_per_step"] == pytest.approx(40.0, abs=1e-3)
    assert top["candidate_ms_per_step"] == pytest.approx(2.0, abs=1e-3)
    assert top["delta_ms_per_step"] == pytest.approx(-38.0, abs=1e-3)
    assert all(abs(r["delta_ms_per_step"]) < 1e-3 for r in d["breakdown"][1:])
    # the DataLoader NVTX range moves by the same 38 ms; kernels do not move
    dl = next(r for r in d["nvtx"] if r["name"].startswith("enumerate(DataLoader)"))
    assert dl["delta_ms_per_step"] == pytest.approx(-38.0, abs=1e-3)
    assert all(abs(k["delta_ms_per_step"]) < 1e-6 for k in d["kernels"])
    ch = {c["rule"]: c for c in d["findings"]["changed"]}
    assert ch["data-starvation"]["base_severity"] == "critical"
    assert ch["data-starvation"]["candidate_impact_pct"] < ch["data-starvation"]["base_impact_pct"]
    assert "idle: waiting for input -38.00 ms per step" in d["sentence"]
    # 53.07 -> 15.07 ms: (15.07 / 53.07 - 1) = -71.6%
    assert d["headline"] == "Faster: 71.6% less time per step (strong evidence)"
    assert d["comparability"]["status"] == "comparable" and d["comparability"]["shared_kernel_time_pct"] == \
        {"base": 100.0, "candidate": 100.0}


def test_slower_gemm_is_slower_and_that_kernel_moves_first(runs):
    d = _diff(runs, "base", "gemm_slower")
    assert d["verdict"] == "slower" and d["strength"] == "strong"
    st = d["step_time_ms_median"]
    # 8 GEMMs per step, each 150 µs longer: +1.2 ms per step
    assert st["candidate"] - st["base"] == pytest.approx(1.2, abs=1e-3)
    assert st["change_pct"] == pytest.approx(1.2 / STEP_MS * 100, abs=0.01)
    k = d["kernels"][0]
    assert k["name"] == GEMM and k["status"] == "matched"
    assert k["base_ms_per_step"] == pytest.approx(12.0, abs=1e-6)
    assert k["candidate_ms_per_step"] == pytest.approx(13.2, abs=1e-6)
    assert k["delta_ms_per_step"] == pytest.approx(1.2, abs=1e-6)
    assert k["base_count_per_step"] == 8 and k["candidate_count_per_step"] == 8
    assert k["base_mean_us"] == pytest.approx(1500) and k["candidate_mean_us"] == pytest.approx(1650)
    assert d["breakdown"][0]["part"] == "compute"
    assert d["breakdown"][0]["delta_ms_per_step"] == pytest.approx(1.2, abs=1e-3)
    assert regression(d, 2.0) and not regression(d, 9.0)


def test_noise_only_pair_is_no_significant_change(runs):
    d = _diff(runs, "noise_a", "noise_b")
    st = d["step_time_ms_median"]
    assert d["verdict"] == "no significant change"
    lo, hi = st["ci95_pct"]
    assert lo <= 0 <= hi or abs(st["change_pct"]) < NEGLIGIBLE_PCT
    assert not regression(d, 2.0)


@pytest.fixture(scope="module")
def noisy15(tmp_path_factory):
    """15-step runs with ±3% per-step GEMM jitter: seeds 1..10 unchanged, 11..13 with GEMMs of
    1585.3 µs instead of 1500 (8 x 85.3 µs = +0.682 ms per 13.6477 ms step = +5.0%)."""
    d = tmp_path_factory.mktemp("noisy15")
    out = {}
    for seed in range(1, 14):
        gemm = 1585.3 if seed > 10 else 1500.0
        out[seed] = diagnose_path(steady_training(steps=15, jitter_pct=3, seed=seed, gemm_us=gemm)
                                  .write(d / f"seed{seed}.sqlite"))
    return out


@pytest.mark.parametrize("a, b", [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)])
def test_noise_is_never_a_regression(noisy15, a, b):
    d = compare(noisy15[a], noisy15[b])
    assert d["verdict"] == "no significant change", d["sentence"]
    assert not regression(d, 2.0)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_a_real_five_percent_regression_on_15_steps_is_slower(noisy15, seed):
    d = compare(noisy15[1], noisy15[seed])
    assert d["verdict"] == "slower" and d["strength"] == "strong", d["sentence"]
    assert d["step_time_ms_median"]["ci95_pct"][0] > 0
    assert 3 < d["step_time_ms_median"]["change_pct"] < 7
    assert d["kernels"][0]["name"] == GEMM
    assert regression(d, 2.0)


def test_real_change_is_found_through_noise(runs):
    d = _diff(runs, "noise_a", "noise_slower")
    assert d["verdict"] == "slower"
    lo, hi = d["step_time_ms_median"]["ci95_pct"]
    assert lo > 0
    assert d["kernels"][0]["name"] == GEMM


def test_same_work_with_different_step_counts_changes_nothing(runs):
    d = _diff(runs, "base", "twelve_steps")
    st = d["step_time_ms_median"]
    assert (st["base_steps"], st["candidate_steps"]) == (20, 12)
    assert d["verdict"] == "no significant change" and st["change_pct"] == 0
    # per-step normalisation: 20 and 12 steps of the same work give the same per-step numbers
    for k in d["kernels"]:
        assert k["delta_ms_per_step"] == pytest.approx(0, abs=1e-6)
        assert k["base_count_per_step"] == k["candidate_count_per_step"]
    # kernel launches per step: 8 GEMMs + 16 elementwise + 1 optimizer = 25 (copies are not launches)
    assert d["launches_per_step"]["base"] == d["launches_per_step"]["candidate"] == 25
    assert d["sync_calls_per_step"]["base"] == d["sync_calls_per_step"]["candidate"]


def test_new_kernel_is_reported_as_new(runs):
    d = _diff(runs, "base", "new_kernel")
    assert d["verdict"] == "slower"
    k = d["kernels"][0]
    assert k["name"] == SOFTMAX_SHORT and k["status"] == "new"
    assert k["base_ms_per_step"] == 0 and k["candidate_ms_per_step"] == pytest.approx(0.5, abs=1e-6)
    assert k["base_mean_us"] is None and k["candidate_mean_us"] == pytest.approx(500)
    back = _diff(runs, "new_kernel", "base")
    assert back["verdict"] == "faster"
    assert back["kernels"][0]["status"] == "vanished"


def test_capture_against_itself_is_identical(runs):
    """The same capture on both sides: the verdict says so ("identical", strong), no interval is
    drawn (nothing differs to resample) and nothing moves. steady_training's defaults: 20 steps of
    25 kernel launches (8 GEMMs, 16 elementwise, 1 optimizer) = 500 launches of 3 kernels."""
    d = _diff(runs, "base", "base")
    assert d["verdict"] == "identical" and d["strength"] == "strong" and d["comparable"] is True
    st = d["step_time_ms"]
    assert st["statistic"] == "median" and st["change_pct"] == 0 and st["ci95_pct"] is None
    assert st["significant"] is False and st == d["step_time_ms_median"]
    window = runs["base"][1]["capture"]["window"]["duration_ms"]
    assert d["headline"] == ("Identical: the two captures hold the same GPU work and timings (20 timed steps, "
                             f"500 kernel launches of 3 kernels, a {window:,.1f} ms window)")
    assert d["sentence"].startswith("Identical: the base and the candidate hold the same GPU work and timings")
    assert all(r["delta_ms_per_step"] == 0 for r in d["breakdown"] + d["kernels"] + d["nvtx"])
    assert d["findings"] == {"resolved": [], "new": [], "changed": []}
    assert not regression(d, 0.0)


def test_few_steps_make_a_weak_verdict(runs):
    d = _diff(runs, "base", "few_steps")
    assert d["per"] == "step" and d["verdict"] == "slower" and d["strength"] == "weak"
    assert "Weak: fewer than 5 steps" in d["sentence"]


def test_without_markers_on_one_side_the_verdict_is_per_unit_of_work(runs):
    d = _diff(runs, "base", "no_markers")
    assert d["per"] == "work" and d["strength"] == "weak"
    assert d["verdict"] == "no significant change"
    assert abs(d["work_rate"]["time_per_work_change_pct"]) < 1
    assert d["work_rate"]["kernels_compared"] == 3
    assert "without timed steps on the candidate" in d["sentence"]
    assert any("Fewer than 2 timed steps in the candidate" in w for w in d["warnings"])


def test_without_markers_a_slower_run_is_slower_per_unit_of_work(runs):
    d = _diff(runs, "no_markers", "no_markers_slower")
    assert d["per"] == "work" and d["verdict"] == "slower" and d["strength"] == "weak"
    # same kernels, 8 GEMMs 300 µs longer: a step takes 13.6477 + 2.4 ms, so each kernel runs
    # 13.6477 / 16.0477 as often per second; the window edges move the estimate by < 0.2 point
    expected = (16.0477 / STEP_MS - 1) * 100
    assert d["work_rate"]["time_per_work_change_pct"] == pytest.approx(expected, abs=0.2)
    # per unit of work (the base's second), the unchanged kernels do not move; the GEMM does:
    # 12 ms of GEMM per 13.6477 ms step = 879.3 ms/unit, 14.4 ms per step = 1055.1 ms/unit
    k = {r["name"]: r for r in d["kernels"]}
    assert k[GEMM]["base_ms_per_step"] == pytest.approx(12 / STEP_MS * 1000, rel=0.005)
    assert k[GEMM]["candidate_ms_per_step"] == pytest.approx(14.4 / STEP_MS * 1000, rel=0.005)
    others = [r for r in d["kernels"] if r["name"] != GEMM]
    assert all(abs(r["delta_ms_per_step"]) / r["base_ms_per_step"] < 0.005 for r in others)
    assert regression(d, 10) and not regression(d, 20)


# ---------------------------------------------------------------------------------------------
# definitions on hand examples
# ---------------------------------------------------------------------------------------------
def test_bootstrap_of_constant_samples_is_exact():
    change, lo, hi = bootstrap_median_change(np.array([10.0, 10, 10]), np.array([11.0, 11, 11, 11]))
    assert (change, lo, hi) == pytest.approx((10.0, 10.0, 10.0))


def test_bootstrap_interval_is_the_percentiles_of_resampled_median_changes():
    a = np.array([10.0, 11, 12, 13, 14])
    b = np.array([10.0, 11, 12, 13, 14])
    change, lo, hi = bootstrap_median_change(a, b, resamples=4000, seed=5)
    assert change == 0
    # resampled medians of 5 values range over 10..14: the change of two of them lies within
    # (10/14 - 1, 14/10 - 1); the interval is symmetric-ish around 0 and excludes neither end
    assert -28.6 <= lo < 0 < hi <= 40.0
    # deterministic for a fixed seed
    assert bootstrap_median_change(a, b, resamples=4000, seed=5) == (change, lo, hi)


def _fake(window_ms: float, kernels: dict[str, tuple[int, float]], devices: int = 1) -> dict:
    """A minimal report result without steps: window, kernel names (count, total_ms)."""
    return {"nsysdoc_version": "test", "contract": 2, "findings": [], "verdict": {"status": "bound"},
            "capture": {"window": {"duration_ms": window_ms}}, "steps": [], "devices": [],
            "metrics": {"values": {"device_count": devices}, "copies": [], "nvtx": [],
                        "sync": {"sync_calls": []}, "launch": {"launch_count": 0},
                        "kernels": {"names": [{"name": n, "count": c, "total_ms": t} for n, (c, t) in kernels.items()]}}}


def test_work_rate_is_the_time_weighted_geometric_mean_of_rate_ratios():
    # A runs half as often per second, B as often; equal base time in each:
    # geometric mean of (0.5, 1) = sqrt(0.5); time per work = 1/sqrt(0.5) = 1.4142 -> +41.42%
    base = _fake(1000, {"A": (100, 50.0), "B": (10, 50.0)})
    cand = _fake(1000, {"A": (50, 25.0), "B": (10, 50.0)})
    d = compare(base, cand)
    assert d["per"] == "work" and d["verdict"] == "slower"
    assert d["work_rate"]["time_per_work_change_pct"] == pytest.approx((1 / math.sqrt(0.5) - 1) * 100, abs=0.01)
    # weights are the base's kernel time: 90 ms in A, 10 in B -> 0.5 ** 0.9
    base = _fake(1000, {"A": (100, 90.0), "B": (10, 10.0)})
    d = compare(base, cand)
    assert d["work_rate"]["time_per_work_change_pct"] == pytest.approx((0.5 ** -0.9 - 1) * 100, abs=0.01)


def test_work_rate_is_per_gpu_and_per_second():
    # the candidate runs twice as long on two GPUs with four times the launches: the same rate per GPU
    base = _fake(1000, {"A": (100, 50.0)})
    cand = _fake(2000, {"A": (400, 200.0)}, devices=2)
    d = compare(base, cand)
    assert d["work_rate"]["time_per_work_change_pct"] == pytest.approx(0, abs=1e-9)
    assert d["verdict"] == "no significant change"
    assert any("different GPU counts" in w for w in d["warnings"])
    assert d["comparability"]["limits"] == ["different GPU counts"]
    assert d["comparability"]["device_count"] == {"base": 1, "candidate": 2}


def test_work_rate_ignores_rare_and_unshared_kernels():
    base = _fake(1000, {"A": (100, 50.0), "rare": (2, 500.0), "gone": (50, 500.0)})
    cand = _fake(1000, {"A": (100, 50.0), "rare": (1, 500.0), "new": (50, 5.0)})
    d = compare(base, cand)
    assert d["work_rate"]["kernels_compared"] == 1
    assert d["work_rate"]["time_per_work_change_pct"] == 0
    st = {r["name"]: r["status"] for r in d["kernels"]}
    assert st == {"A": "matched", "rare": "matched", "gone": "vanished", "new": "new"}


def test_no_shared_kernels_gives_no_verdict():
    d = compare(_fake(1000, {"A": (100, 50.0)}), _fake(1000, {"B": (100, 50.0)}))
    assert d["per"] == "second" and d["verdict"] == "no significant change"
    assert d["comparable"] is False and d["strength"] == "none"
    assert d["sentence"].startswith("No verdict possible") and "Largest moves" not in d["sentence"]
    assert any("nothing to measure work by" in w for w in d["warnings"])
    assert not any("compares kernel launch rates" in w for w in d["warnings"])
    assert not regression(d, 0)
    from nsysdoc.views.diff_page import render_diff_markdown

    assert "*(no verdict)*" in render_diff_markdown(d)


def test_findings_resolved_new_and_changed():
    base = _fake(1000, {})
    cand = _fake(1000, {})
    base["findings"] = [{"rule": "host-sync", "severity": "warning", "impact_pct": 5.0},
                        {"rule": "pageable-memcpy", "severity": "warning", "impact_pct": 4.0},
                        {"rule": "small-kernels", "severity": "info", "impact_pct": 1.0}]
    cand["findings"] = [{"rule": "host-sync", "severity": "critical", "impact_pct": 20.0},
                        {"rule": "launch-bound", "severity": "warning", "impact_pct": 6.0},
                        {"rule": "small-kernels", "severity": "info", "impact_pct": 1.5}]
    f = compare(base, cand)["findings"]
    assert [x["rule"] for x in f["resolved"]] == ["pageable-memcpy"]
    assert [x["rule"] for x in f["new"]] == ["launch-bound"]
    # small-kernels moved 0.5 point (< 1) at the same severity: not changed
    assert [(x["rule"], x["base_severity"], x["candidate_severity"], x["delta_impact_pct"]) for x in f["changed"]] == \
        [("host-sync", "warning", "critical", 15.0)]


def test_data_parallel_steps_count_once_per_job(tmp_path):
    """Two ranks time the same 3 steps: the job has 3 steps (each the slower rank's), not 6, so
    the verdict is weak; +1 ms of all-reduce per step is +1 ms on the job's median step."""
    from nsysdoc.testing.scenarios import ddp_nccl

    a = diagnose_path(ddp_nccl(steps=3, ranks=2).write(tmp_path / "a.sqlite"))
    b = diagnose_path(ddp_nccl(steps=3, ranks=2, allreduce_us=7000).write(tmp_path / "b.sqlite"))
    d = compare(a, b)
    st = d["step_time_ms_median"]
    assert (st["base_steps"], st["candidate_steps"]) == (3, 3)
    assert d["base"]["steps"] == 3 and d["strength"] == "weak"
    assert st["candidate"] - st["base"] == pytest.approx(1.0, abs=1e-3)
    job = [max(s["step_time_ms"] for s in a["steps"] if s["primary"] and s["index"] == i) for i in range(3)]
    assert st["base"] == pytest.approx(float(np.median(job)), abs=1e-4)


def _mutations():
    """(name, how to break a valid report): each must be refused as malformed, never crash."""
    def put(path, value):
        def f(r):
            obj = r
            for k in path[:-1]:
                obj = obj[k]
            obj[path[-1]] = value
        return f

    def drop(path):
        def f(r):
            obj = r
            for k in path[:-1]:
                obj = obj[k]
            del obj[path[-1]]
        return f

    return [
        ("metrics empty", put(["metrics"], {})), ("metrics null", put(["metrics"], None)),
        ("kernels null", put(["metrics", "kernels"], None)), ("names missing", drop(["metrics", "kernels", "names"])),
        ("kernel count null", put(["metrics", "kernels", "names", 0, "count"], None)),
        ("kernel total text", put(["metrics", "kernels", "names", 0, "total_ms"], "12")),
        ("sync missing", drop(["metrics", "sync"])), ("values null", put(["metrics", "values"], None)),
        ("nvtx row without total", drop(["metrics", "nvtx", 0, "total_ms"])),
        ("copy gbps text", put(["metrics", "copies", 0, "gbps"], "fast")),
        ("finding without rule", put(["findings"], [{"severity": "warning"}])),
        ("findings null", put(["findings"], None)),
        ("step null", put(["steps"], [None])), ("step time text", put(["steps", 0, "step_time_ms"], "abc")),
        ("step time NaN", put(["steps", 0, "step_time_ms"], float("nan"))),
        ("breakdown text", put(["steps", 0, "breakdown_ms", "compute"], "x")),
        ("verdict text", put(["verdict"], "str")), ("capture null", put(["capture"], None)),
        ("window text", put(["capture", "window"], "long")),
        ("device count text", put(["metrics", "values", "device_count"], "two")),
        ("devices null entries", put(["devices"], [None])),
        ("step source guessed", put(["capture", "step_source"], "guessed")),
        ("steps inferred text", put(["capture", "steps_inferred"], "by period")),
    ]


@pytest.mark.parametrize("name, mutate", _mutations(), ids=[m[0] for m in _mutations()])
def test_malformed_reports_are_refused_by_field(runs, name, mutate):
    import copy

    r = copy.deepcopy(runs["starved"][1])
    mutate(r)
    with pytest.raises(InputError, match="malformed nsysdoc report|no findings"):
        compare(runs["base"][1], r)


@pytest.mark.slow  # issue 50: diff commands in processes (1.7 s of CPU); .ci/run runs it
def test_malformed_report_json_is_one_line_exit_2(runs, tmp_path):
    import copy

    r = copy.deepcopy(runs["base"][1])
    r["metrics"]["kernels"]["names"][0]["count"] = None
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(r))
    p = run_cli("diff", runs["base"][0], bad, "-f", "json", "--no-config")
    assert p.returncode == 2 and "Traceback" not in p.stderr and "internal error" not in p.stderr
    assert "malformed nsysdoc report: metrics.kernels.names[0].count is not num" in p.stderr
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(runs["base"][1]).encode())
    p = run_cli("diff", runs["base"][0], bom, "-f", "json", "-q", "--no-config")
    assert p.returncode == 0, p.stderr


def test_colours_only_significant_changes_of_at_least_one_percent(runs):
    from nsysdoc.views.diff_page import breakdown_table, movers_table

    noise = _diff(runs, "noise_a", "noise_b")  # the GEMM moves +0.05 ms, inside the noise
    assert noise["verdict"] == "no significant change"
    assert all(c.cls == "" for row in movers_table(noise, "kernels", "", "kernels").rows for c in row[4:5])
    assert all(row[3].cls == "" for row in breakdown_table(noise).rows)
    slow = _diff(runs, "base", "gemm_slower")  # +1.2 ms of a 13.6 ms step: coloured; 0 ms moves are not
    rows = {row[0].sort: row[4].cls for row in movers_table(slow, "kernels", "", "kernels").rows}
    assert rows[GEMM] == "worse"
    assert {row[0].sort: row[3].cls for row in breakdown_table(slow).rows}["compute"] == "worse"


def test_markdown_kernel_names_are_plain_escaped_text(runs):
    from nsysdoc.views.diff_page import render_diff_markdown

    md = render_diff_markdown(_diff(runs, "base", "new_kernel"))
    row = next(line for line in md.splitlines() if line.startswith("| void") and "cunn_SoftMaxForward" in line)
    assert "`" not in row and "\\<4, float" in row  # '<' escaped once, outside a code span


def test_check_report_refuses_other_json():
    with pytest.raises(InputError, match="not an nsysdoc report"):
        check_report({"traceEvents": []}, "base")
    with pytest.raises(InputError, match="JSON contract 1"):
        check_report(dict(_fake(1, {}), contract=1), "base")
    with pytest.raises(InputError, match="JSON contract None"):
        check_report({k: v for k, v in _fake(1, {}).items() if k != "contract"}, "candidate")
    bare = _fake(1, {})
    del bare["findings"]
    with pytest.raises(InputError, match="no findings"):
        check_report(bare, "base")


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # issue 50: diff commands in processes (3 s of CPU); .ci/run runs it
def test_cli_diff_of_saved_json_equals_diff_of_captures(runs, tmp_path):
    a, b = runs["base"][0], runs["gemm_slower"][0]
    for src, dst in ((a, tmp_path / "base.json"), (b, tmp_path / "cand.json")):
        r = run_cli("report", src, "--format", "json", "-o", dst, "-q", "--no-config")
        assert r.returncode == 0, r.stderr
    r1 = run_cli("diff", a, b, "-f", "json", "-q", "--no-config")
    r2 = run_cli("diff", tmp_path / "base.json", tmp_path / "cand.json", "-f", "json", "-q", "--no-config")
    assert r1.returncode == r2.returncode == 0, r1.stderr + r2.stderr
    d1, d2 = json.loads(r1.stdout), json.loads(r2.stdout)
    for d in (d1, d2):  # the names are how the inputs were given
        d["base"].pop("input"), d["candidate"].pop("input")
    assert d1 == d2
    assert d1["verdict"] == "slower" and d1["kind"] == "diff" and d1["contract"] == 1


@pytest.mark.slow  # issue 50: diff commands in processes (3.6 s of CPU); .ci/run runs it
def test_cli_fail_on_regression_exit_codes(runs, tmp_path):
    base, slow = runs["base"][0], runs["gemm_slower"][0]
    r = run_cli("diff", base, slow, "-o", tmp_path / "d.md", "--fail-on-regression", "2", "--no-config")
    assert r.returncode == 1, r.stderr  # +8.8% > 2%
    assert "Slower: median step 13.65 ms -> 14.85 ms" in r.stdout
    text = (tmp_path / "d.md").read_text()
    assert text.startswith("### nsysdoc diff: base.sqlite → gemm_slower.sqlite")
    assert "| Median step time | 13.65 ms | 14.85 ms |" in text
    r = run_cli("diff", base, slow, "-o", tmp_path / "d.md", "--fail-on-regression", "10", "-q", "--no-config")
    assert r.returncode == 0, r.stderr  # +8.8% < 10%
    r = run_cli("diff", slow, base, "-o", tmp_path / "d.md", "--fail-on-regression", "0", "-q", "--no-config")
    assert r.returncode == 0, r.stderr  # faster
    noise_a, noise_b = runs["noise_a"][0], runs["noise_b"][0]
    r = run_cli("diff", noise_a, noise_b, "-f", "json", "--fail-on-regression", "2", "-q", "--no-config")
    assert r.returncode == 0 and json.loads(r.stdout)["verdict"] == "no significant change"


@pytest.mark.slow  # issue 50: diff commands in processes (1 s of CPU); .ci/run runs it
def test_cli_default_output_is_an_html_page(runs, tmp_path):
    r = run_cli("diff", runs["base"][0], runs["new_kernel"][0], "--no-config", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    page = tmp_path / "base-vs-new_kernel.nsysdoc-diff.html"
    html = page.read_text()
    assert "Diff: " + str(page) in r.stdout
    assert 'id="verdict-sentence">Slower: median step 13.65 ms → 14.15 ms' in html
    # the headline comes first: on the terminal and before anything else in the page's main part
    assert r.stdout.splitlines()[0] == "Slower: 3.7% more time per step (strong evidence)"  # 0.5 / 13.6477
    main = html[html.index("<main>"):]
    assert main.index('id="diff-headline"><strong>Slower: 3.7% more time per step (strong evidence)') < \
        main.index('id="verdict-sentence"')
    assert "cunn_SoftMaxForward" in html and 'st-new" data-sort="new">new</td>' in html
    assert 'http-equiv="Content-Security-Policy"' in html and "<script src" not in html and "<link" not in html


@pytest.mark.parametrize("content, message", [
    ('{"schemaVersion": 1, "events": []}', "not an nsysdoc report"),
    ('{"traceEvents": []}', "empty trace"),  # a PyTorch Profiler trace (by content), with no events
    ('{"nsysdoc_version": "0.0.1", "metrics": {}}', "JSON contract None"),
    ('{"broken', "not valid JSON"),
])
def test_cli_refuses_bad_json_with_one_line(runs, tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    r = run_cli("diff", bad, runs["base"][0], "-f", "json", "--no-config")
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


@pytest.mark.slow  # issue 50: diff commands in processes (1.9 s of CPU); .ci/run runs it
def test_cli_refuses_missing_and_ambiguous_inputs(runs, tmp_path):
    r = run_cli("diff", tmp_path / "nope.sqlite", runs["base"][0], "--no-config")
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr
    folder = tmp_path / "two"
    folder.mkdir()
    for name in ("x", "y"):
        (folder / f"{name}.sqlite").write_bytes(runs["base"][0].read_bytes())
    r = run_cli("diff", folder, runs["base"][0], "--no-config")
    assert r.returncode == 2 and "holds 2 captures" in r.stderr
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("hello")
    r = run_cli("diff", runs["base"][0], not_sqlite, "--no-config")
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 2


# ---------------------------------------------------------------------------------------------
# a real before/after pair
# ---------------------------------------------------------------------------------------------
FASTVIDEO = ("fastvideo_torchrun_h100x2_before.sqlite", "fastvideo_torchrun_h100x2_after.sqlite")


@needs_shared(*FASTVIDEO)
def test_real_fastvideo_before_after():
    """Expert reading (SQL in docs/diff.md): no step markers, but each process launches the same
    157 GPU operations over and over (one DiT block: no optimizer, no backward), one H2D copy
    each time. SQL: the H2D copy launches come every 16.70 / 16.75 ms (median, per process) before
    and every 18.44 / 19.57 ms after: the after-run is slower per repeating unit by 10-17%, its
    GPUs idle on launches instead. The diff times the inferred units: slower, weak (a unit may be a
    layer), launch idle and exposed NCCL explain it, compute per unit unchanged."""
    a, b = (diagnose_path(SHARED_TRACES / f) for f in FASTVIDEO)
    d = compare(a, b)
    # the steps are inferred, so the verdict compares the mean job step (idle in any unit counts)
    assert d["per"] == "step" and d["strength"] == "weak" and d["step_time_ms"]["statistic"] == "mean"
    st = d["step_time_ms_median"]
    # the job's step: per job step (the two processes' inferred steps matched by start) the longer
    # process's; steps begin where the GPU reaches them. Median 16.68 -> 18.95 ms (+13.6%)
    assert 16.3 < st["base"] < 17.0 and 18.5 < st["candidate"] < 19.5
    assert 10 < st["change_pct"] < 20
    # the mean job step (every unit's time, the idle in any of them counts): 18.12 -> 20.71 ms
    # (+14.3%, interval +2.6% to +26.3%): slower, as the expert's H2D cadence says (10-17%)
    sm = d["step_time_ms"]
    assert 17.5 < sm["base"] < 18.7 and 20.2 < sm["candidate"] < 21.2 and 10 < sm["change_pct"] < 20
    assert (sm["base_steps"], sm["candidate_steps"]) == (st["base_steps"], st["candidate_steps"]) == (16, 14)
    assert sm["ci95_pct"][0] > 0 and d["verdict"] == "slower"
    assert regression(d, 5.0) and not regression(d, 20.0)
    assert d["comparability"]["limits"] == ["inferred steps may be layers"]
    parts = {r["part"]: r for r in d["breakdown"]}
    assert d["breakdown"][0]["part"] == "idle_launch" and parts["idle_launch"]["delta_ms_per_step"] > 1
    assert abs(parts["compute"]["delta_ms_per_step"]) < 0.05 * parts["compute"]["base_ms_per_step"]
    flash = next(k for k in d["kernels"] if k["name"] == "flash_fwd_kernel")
    assert abs(flash["candidate_mean_us"] / flash["base_mean_us"] - 1) < 0.01
    assert "launch-bound" in [f["rule"] for f in d["findings"]["new"]]
    assert d["comparability"]["status"] == "limited"
    assert d["comparability"]["shared_kernel_time_pct"] == {"base": 100.0, "candidate": 100.0}
    assert d["headline"] == (f"Slower: the mean step takes {sm['change_pct']:.1f}% more time (weak evidence: "
                             "inferred steps may be layers)")


# ---------------------------------------------------------------------------------------------
# comparability (issue 29): what differs between the runs, and when there is no verdict
# ---------------------------------------------------------------------------------------------
def _on_gpu(result: dict, name: str) -> dict:
    """The same report, as if captured on a GPU called ``name``."""
    import copy

    r = copy.deepcopy(result)
    for d in r["devices"]:
        d["name"] = name
    return r


def unrelated_models_on_v100_and_a100() -> tuple[dict, dict]:
    """Two runs of different models on different GPUs: the base spends 90 ms in its own GEMM and
    10 ms in an elementwise kernel; the candidate 80 ms in its own convolution and 20 ms in the same
    elementwise kernel. Shared kernel time: 10 / 100 = 10% of the base's, 20 / 100 = 20% of the
    candidate's."""
    base = _fake(1000, {"sgemm_v100": (100, 90.0), "elementwise_kernel": (50, 10.0)})
    cand = _fake(1000, {"conv_a100": (100, 80.0), "elementwise_kernel": (50, 20.0)})
    base["devices"] = [{"device": 0, "name": "Tesla V100-SXM2-16GB"}]
    cand["devices"] = [{"device": 0, "name": "NVIDIA A100-SXM4-80GB"}]
    return base, cand


def test_unrelated_models_on_different_gpus_are_not_comparable():
    base, cand = unrelated_models_on_v100_and_a100()
    d = compare(base, cand)
    c = d["comparability"]
    assert c["status"] == "not comparable" and d["comparable"] is False
    assert c["shared_kernel_time_pct"] == {"base": 10.0, "candidate": 20.0}
    assert c["gpu_models"] == {"base": ["Tesla V100-SXM2-16GB"], "candidate": ["A100-SXM4-80GB"], "same": False}
    assert d["headline"] == ("Not comparable: different models (10% and 20% of kernel time in shared kernels) "
                             "on different GPUs (Tesla V100-SXM2-16GB vs A100-SXM4-80GB)")
    # the elementwise kernel runs as often: the launch-rate measure alone would say "no change"
    assert d["verdict"] == "no significant change" and d["strength"] == "none" and not regression(d, 0)
    assert d["sentence"].startswith("No verdict:") and "Slower" not in d["sentence"]
    assert any("Tesla V100-SXM2-16GB vs A100-SXM4-80GB" in w for w in d["warnings"])
    assert any(w.startswith("Only 10% of the base's kernel time and 20% of the candidate's") for w in d["warnings"])


KINETO = SHARED_TRACES / "kineto"


@needs_shared("kineto/hta_a100_rank3of8.pt.trace.json.gz", "kineto/kineto_resnet50_v100_oldformat.pt.trace.json.gz")
def test_real_resnet_v100_against_another_model_on_a100_is_not_comparable():
    """Expert reading: a ResNet-50 on a V100 and a recommender model (embedding and NCCL kernels) on
    an A100; only generic elementwise kernels share a name (about 15% of either's kernel time). The
    diff used to say "Faster -56.5%, strong"; it must refuse a verdict and name both GPUs."""
    a = diagnose_path(KINETO / "kineto_resnet50_v100_oldformat.pt.trace.json.gz")
    b = diagnose_path(KINETO / "hta_a100_rank3of8.pt.trace.json.gz")
    d = compare(a, b)
    assert d["comparability"]["status"] == "not comparable" and d["strength"] == "none"
    assert d["verdict"] == "no significant change"
    assert d["headline"].startswith("Not comparable: different models (")
    assert "on different GPUs (Tesla V100-DGXS-32GB vs A100-PG509-200)" in d["headline"]
    sa, sb = d["comparability"]["shared_kernel_time_pct"].values()
    assert 5 < sa < 25 and 5 < sb < 25
    assert d["comparability"]["tool"] == {"base": "pytorch-profiler", "candidate": "pytorch-profiler"}


def test_same_work_on_different_gpu_models_is_at_most_weak(runs):
    """base vs gemm_slower (+1.2 ms on a 13.6477 ms step = +8.79%, strong on one GPU type) with the
    candidate on another GPU: still slower, but weak, and the warning names both models."""
    d = compare(runs["base"][1], _on_gpu(runs["gemm_slower"][1], "NVIDIA A100-SXM4-80GB"))
    assert d["verdict"] == "slower" and d["strength"] == "weak"
    assert d["comparability"]["status"] == "limited" and d["comparability"]["limits"] == ["different GPU models"]
    assert d["headline"] == "Slower: 8.8% more time per step (weak evidence: different GPU models)"
    assert any("(H100 80GB HBM3 vs A100-SXM4-80GB)" in w for w in d["warnings"])
    same = _diff(runs, "base", "gemm_slower")
    assert same["comparability"]["status"] == "comparable" and same["strength"] == "strong"
    assert same["headline"] == "Slower: 8.8% more time per step (strong evidence)"
    assert same["comparability"]["gpu_models"]["same"] is True


def test_marked_against_inferred_steps_is_said_and_at_most_weak(runs):
    """A report written after step inference: ``capture.step_source`` and ``steps_inferred``. The
    same steps, once marked and once inferred: the text says which were inferred and how."""
    import copy

    cand = copy.deepcopy(runs["gemm_slower"][1])
    cand["capture"].update(step_source="inferred", has_step_markers=False,
                           steps_inferred={"method": "kernel sequence period", "description": "steps were inferred",
                                           "processes": [{"pid": 4700, "steps": 20, "period_ops": 27,
                                                          "unit": "training step"}]})
    d = compare(runs["base"][1], cand)
    assert d["comparability"]["step_source"] == {"base": "markers", "candidate": "inferred"}
    assert d["strength"] == "weak" and d["verdict"] == "slower"
    # inferred on a side: the mean step is compared (every step lasts the same here: mean = median)
    assert d["step_time_ms"]["statistic"] == "mean"
    assert d["headline"] == ("Slower: the mean step takes 8.8% more time (weak evidence: marked steps against "
                             "inferred steps, inferred steps on the candidate)")
    assert ("The steps of the candidate were inferred from the repeating GPU work, not marked (candidate: a unit "
            "of 27 GPU operations repeats)") in d["sentence"]
    assert any("steps are marked and the candidate's inferred (a unit of 27 GPU operations repeats)" in w
               for w in d["warnings"])
    inferred_base = copy.deepcopy(runs["base"][1])
    inferred_base["capture"].update({k: copy.deepcopy(v) for k, v in cand["capture"].items()
                                     if k in ("step_source", "has_step_markers", "steps_inferred")})
    both = compare(inferred_base, cand)
    assert both["comparability"]["status"] == "comparable" and both["strength"] == "strong"
    assert both["headline"] == "Slower: the mean step takes 8.8% more time (strong evidence: inferred steps on both sides)"
    # a unit with no optimizer or backward kernel may be a layer: said, and at most weak
    cand["capture"]["steps_inferred"]["processes"][0]["unit"] = "repeating unit"
    d = compare(runs["base"][1], cand)
    assert d["comparability"]["limits"] == ["marked steps against inferred steps", "inferred steps may be layers"]
    assert "may be one layer or block rather than a whole step" in d["sentence"]


def test_reports_without_step_source_read_as_marked(runs):
    """Reports made before step inference have no capture.step_source: has_step_markers decides."""
    import copy

    old = [copy.deepcopy(runs[n][1]) for n in ("base", "no_markers")]
    for r in old:
        r["capture"].pop("step_source", None)
        r["capture"].pop("steps_inferred", None)
    d = compare(*old)
    assert d["comparability"]["step_source"] == {"base": "markers", "candidate": None}


def test_twice_the_kernels_per_step_is_at_most_weak(runs):
    """The candidate's step launches every kernel twice (25 -> 50 per step: ratio 2 >= 1.5)."""
    import copy

    cand = copy.deepcopy(runs["gemm_slower"][1])
    for k in cand["metrics"]["kernels"]["names"]:
        k["count"] *= 2
    d = compare(runs["base"][1], cand)
    assert d["comparability"]["kernels_per_step"] == {"base": 25.0, "candidate": 50.0}
    assert d["comparability"]["limits"] == ["kernels per step differ"] and d["strength"] == "weak"
    assert any(w.startswith("A step launches 25 kernels per GPU in the base and 50 in the candidate") for w in d["warnings"])


def test_nsys_against_pytorch_profiler_is_at_most_weak(runs):
    import copy

    cand = copy.deepcopy(runs["gemm_slower"][1])
    cand["source"].update(tool="pytorch-profiler", nsys_version=None, schema_version="1")
    d = compare(runs["base"][1], cand)
    assert d["comparability"]["limits"] == ["different profilers"] and d["strength"] == "weak"
    assert d["comparability"]["tool"] == {"base": "nsys", "candidate": "pytorch-profiler"}
    assert any("captured by Nsight Systems and the candidate by the PyTorch Profiler" in w for w in d["warnings"])


def test_text_uses_plain_units(runs):
    """Per step, or per second of work without steps; never "unit of work" or "ms/"."""
    from nsysdoc.views.diff_page import diff_terminal_summary, render_diff_html, render_diff_markdown

    for d in (_diff(runs, "no_markers", "no_markers_slower"), _diff(runs, "base", "gemm_slower")):
        texts = [render_diff_markdown(d), diff_terminal_summary(d), d["headline"], d["sentence"], *d["warnings"]]
        page = render_diff_html(d)
        texts.append(page[:page.index('id="nsysdoc-diff"')])  # the embedded JSON keeps its key names
        for t in texts:
            assert "unit of work" not in t and "ms/" not in t, t[:200]
    d = _diff(runs, "no_markers", "no_markers_slower")
    assert "ms per second of work" in d["sentence"]
    assert d["headline"].startswith("Slower: the same work takes 17.6% more time (weak evidence: no timed steps")


# ---------------------------------------------------------------------------------------------
# the bootstrap: bounded memory, and the interval's level
# ---------------------------------------------------------------------------------------------
def long_run_report(tmp_path, steps: int = 50_000, seed: int = 7) -> dict:
    """A saved report of a run of ``steps`` steps, built from a report JSON (not the builder: a
    50,000-step capture would take minutes to build and diagnose): the 6-step ``steady_training``
    report with its step records capped as ``nsysdoc report`` caps them (``steps_truncated``) and
    every step in ``step_series``, step times 13.6477 ms ± 3% (normal, seeded by ``seed``)."""
    r = diagnose_path(steady_training(steps=6).write(tmp_path / f"six{seed}.sqlite"))
    rng = np.random.default_rng(seed)
    ms = np.round(STEP_MS * (1 + 0.03 * rng.standard_normal(steps)), 4)
    pid = next(s["pid"] for s in r["steps"] if s["primary"])
    r["steps_truncated"] = {"shown": len(r["steps"]), "total": steps}
    r["step_series"] = {"index": list(range(steps)), "pid": [pid] * steps, "step_time_ms": ms.tolist()}
    return r


@pytest.mark.slow  # issue 50: a large generated capture (4.7 s of CPU); .ci/run runs it
@pytest.mark.skipif(not __import__("shutil").which("prlimit"), reason="prlimit missing")
def test_diff_of_50000_steps_runs_in_bounded_memory(tmp_path):
    """Two 50,000-step runs of the same work (different noise) diffed under a 3 GB address space
    (prlimit --as), and the peak resident memory stays under 600 MB. Before the resamples were
    chunked the bootstrap held (2000 x 50,000) index and value arrays: 1.6 GB peak, and it failed
    under 1.5 GB. (Not a run against itself: that is "identical", with no bootstrap to measure.)"""
    import subprocess
    import sys

    path, other = tmp_path / "long.json", tmp_path / "long8.json"
    path.write_text(json.dumps(long_run_report(tmp_path)))
    other.write_text(json.dumps(long_run_report(tmp_path, seed=8)))
    out = tmp_path / "d.json"
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(p.returncode)")
    p = subprocess.run([sys.executable, "-c", probe, "prlimit", "--as=3000000000", sys.executable, "-m", "nsysdoc",
                        "diff", str(path), str(other), "-o", str(out), "-q", "--no-config"],
                       capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr
    peak_kb = int(p.stdout.split()[-1])
    assert peak_kb < 600_000, f"peak {peak_kb / 1000:.0f} MB"
    d = json.loads(out.read_text())
    assert d["step_time_ms_median"]["base_steps"] == 50_000 and d["verdict"] == "no significant change"
    assert d["step_time_ms"]["statistic"] == "median"
    # the same distribution on both sides, resampled independently: the interval straddles 0;
    # the median of 50,000 steps of ±3% moves by about 0.02% between resamples
    lo, hi = d["step_time_ms_median"]["ci95_pct"]
    assert -0.2 < lo <= 0 <= hi < 0.2


def _exact_median_quantile(values: np.ndarray, p: float) -> float:
    """The ``p`` quantile of the median of n (odd) draws with replacement from ``values`` (sorted,
    distinct), computed exactly: P(median <= v_k) = P(Binomial(n, k/n) >= (n + 1) / 2)."""
    n = len(values)
    half = (n + 1) // 2
    for k in range(1, n + 1):
        q = k / n
        cdf = sum(math.exp(math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                           + j * math.log(q) + ((n - j) * math.log1p(-q) if q < 1 else 0.0))
                  for j in range(half, n + 1))
        if cdf >= p:
            return float(values[k - 1])
    return float(values[-1])


def test_bootstrap_interval_is_95_percent():
    """The interval's level, against an exact computation independent of the random stream. The
    base is constant (1000 ms: its resampled median is always 1000), the candidate 1001 distinct
    steps 1000..2000 ms, so the resampled change is (median of 1001 draws ÷ 1000 − 1) × 100, whose
    quantiles follow from the binomial law: 2.5% and 97.5% at 1469 and 1531 ms (+46.9%, +53.1%),
    5% and 95% at 1474 and 1526 ms (+47.4%, +52.6%). The bootstrap's ends must be nearer the
    95% interval's quantiles than the 90% one's. Checked to fail: with the default level mutated
    to 90 in bootstrap_median_change the ends are +47.3% and +52.6%, with 50 +48.9% and +51.1%
    (mutation not committed)."""
    a = np.full(11, 1000.0)
    b = 1000.0 + np.arange(1001, dtype=float)
    change, lo, hi = bootstrap_median_change(a, b)
    assert change == pytest.approx(50.0)
    q = {p: (_exact_median_quantile(b, p) / 1000 - 1) * 100 for p in (0.025, 0.05, 0.95, 0.975)}
    assert q[0.05] - q[0.025] > 0.4 and q[0.975] - q[0.95] > 0.4  # the levels are told apart (≥ 4 steps)
    assert abs(lo - q[0.025]) < abs(lo - q[0.05]), (lo, q)
    assert abs(hi - q[0.975]) < abs(hi - q[0.95]), (hi, q)


def test_different_nsys_versions_are_noted_without_weakening(runs):
    import copy

    cand = copy.deepcopy(runs["gemm_slower"][1])
    va = runs["base"][1]["source"]["nsys_version"]
    cand["source"]["nsys_version"] = "2099.1.1"
    d = compare(runs["base"][1], cand)
    assert d["comparability"]["status"] == "comparable" and d["strength"] == "strong"
    assert d["comparability"]["version"] == {"base": f"nsys {va}", "candidate": "nsys 2099.1.1"}
    assert any(f"different profiler versions (nsys {va} and nsys 2099.1.1)" in w for w in d["warnings"])


def test_a_third_of_the_kernels_replaced_is_at_most_weak():
    """A compiler change: the base spends 100 ms in GEMMs and 60 ms in elementwise kernels, the
    candidate the same 100 ms in GEMMs and 40 ms in one fused kernel instead. Shared kernel time:
    100 / 160 = 62.5% of the base's (between 50 and 80: limited), 100 / 140 = 71.4% of the
    candidate's; the GEMM runs as often: no change of the time for the same work."""
    base = _fake(1000, {"gemm": (100, 100.0), "add": (300, 30.0), "mul": (300, 30.0)})
    cand = _fake(1000, {"gemm": (100, 100.0), "triton_fused_add_mul": (300, 40.0)})
    d = compare(base, cand)
    assert d["comparability"]["shared_kernel_time_pct"] == {"base": 62.5, "candidate": 71.4}
    assert d["comparability"]["status"] == "limited" and d["comparability"]["limits"] == ["many kernels differ"]
    assert d["comparable"] is True and d["work_rate"]["time_per_work_change_pct"] == 0
    assert any(w.startswith("Only 63% of the base's kernel time and 71% of the candidate's") for w in d["warnings"])
