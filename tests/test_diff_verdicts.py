"""``nsysdoc diff``'s frame (issue 44, part 5): what a step time is and which verdicts exist.

- With inferred steps on a side the verdict compares the **mean** job step (total ÷ count: the
  idle inside every unit counts), bootstrapped like the median; marked steps on both sides keep
  the median (``step_time_ms.statistic``).
- Two results of the same run are ``identical`` (no bootstrap).
- A change of at least 5% whose interval includes 0 is ``inconclusive``; smaller ones whose
  interval includes 0 stay ``no significant change``.
- Only ``slower`` is a regression.

Every expected number is computed by hand in the test, from the builder's timing model
(``nsysdoc/testing/builder.py``: a launch call lasts 5 µs, an async pinned copy call 6 µs) or
from the hand-made step times. Two tests pin mutations an audit found surviving the suite: the
bootstrap skipping its last (partial) chunk of resamples, and the job step taken from the last
rank instead of the slowest.
"""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import nsysdoc.compare as compare_mod
from .conftest import diagnose_path, run_cli
from nsysdoc.compare import (bootstrap_change, bootstrap_mean_change, bootstrap_median_change, compare,
                             identical, regression)
from nsysdoc.testing import Capture
from nsysdoc.testing.scenarios import ELEMENTWISE, GEMM, SOFTMAX, dataloader_starvation


# ---------------------------------------------------------------------------------------------
# hand-made reports
# ---------------------------------------------------------------------------------------------
def _report(steps: list[tuple[int, int, float]], step_source: str | None = "markers", window_ms: float = 1000.0,
            kernels: dict[str, tuple[int, float]] | None = None) -> dict:
    """A minimal report result (the fields ``check_report`` requires) with primary steps given as
    ``(pid, index, step_time_ms)`` in record order, and how its steps were found."""
    kernels = {"k": (100, 50.0)} if kernels is None else kernels
    cap = {"window": {"duration_ms": window_ms}, "step_source": step_source,
           "has_step_markers": step_source == "markers"}
    return {"nsysdoc_version": "test", "contract": 2, "findings": [], "verdict": {"status": "bound"},
            "capture": cap, "devices": [],
            "steps": [{"primary": True, "pid": p, "index": i, "step_time_ms": ms} for p, i, ms in steps],
            "metrics": {"values": {"device_count": 1}, "copies": [], "nvtx": [], "sync": {"sync_calls": []},
                        "launch": {"launch_count": 0},
                        "kernels": {"names": [{"name": n, "count": c, "total_ms": t} for n, (c, t) in kernels.items()]}}}


def _one_rank(times, **kw) -> dict:
    return _report([(1, i, float(t)) for i, t in enumerate(times)], **kw)


# ---------------------------------------------------------------------------------------------
# the situation of the issue: a markerless loop whose input wait shrank
# ---------------------------------------------------------------------------------------------
ITERATIONS = 30
LAYERS = 20  # 4 kernels each: 80 kernels per iteration


def markerless_loop_waiting_for_input(wait_us: float, iterations: int = ITERATIONS) -> Capture:
    """A training loop without step markers whose every iteration waits ``wait_us`` for its input
    (``poll``), copies it to the GPU (4 MiB, pinned, async) and runs 20 identical layers of 4
    short kernels (5 µs each, 10 µs of Python before each launch). No optimizer or backward
    kernel: the GPU work repeats every layer as well as every iteration, so inferred steps may be
    layers (the report that prompted this said "No significant change (+0.0%)" for a run 45%
    faster: the median of 400 layer-sized units ignored the wait that sits in one unit of 20).

    The host bounds the loop (the GPU work of an iteration, 350 µs of copy and 80 × 5 µs of
    kernels, finishes within the 1,200 µs of launching it), so an iteration lasts, on the host
    and on the GPU alike: wait + 6 µs (copy call) + 80 × (10 + 5) µs = wait + 1,206 µs."""
    cap = Capture()
    t = cap.process(pid=6100).thread()
    for _ in range(iterations):
        t.os_call("poll", us=wait_us)
        t.memcpy("HtoD", 4 << 20, pageable=False)
        for _ in range(LAYERS):
            for name in (GEMM, ELEMENTWISE, SOFTMAX, ELEMENTWISE):
                t.cpu(us=10)
                t.launch(name, 5)
    return cap


def test_markerless_loop_with_a_shorter_input_wait_is_faster(tmp_path):
    """Base: a 2,000 µs wait, an iteration of 2,000 + 1,206 = 3,206 µs; candidate: a 560 µs
    wait, 560 + 1,206 = 1,766 µs: 1,766 / 3,206 − 1 = −44.92% per iteration.

    The verdict compares the mean unit, which counts the wait whichever unit holds it: the 30
    iterations make 29 whole iterations plus a last unit of L ms that ends with its last kernel
    (inferred by iteration: L = the 1.2 ms of launches without the wait; by layer: the last
    iteration's 20 layers hold no wait either), so the change is (29 × 1.766 + L) / (29 × 3.206 +
    L) − 1 with L between 0 (−44.92%) and one whole candidate iteration, 1.766 ms (52.980 /
    94.740 − 1 = −44.08%). Faster, never "no significant change"."""
    a = diagnose_path(markerless_loop_waiting_for_input(2000).write(tmp_path / "waits_2ms.sqlite"))
    b = diagnose_path(markerless_loop_waiting_for_input(560).write(tmp_path / "waits_0.56ms.sqlite"))
    d = compare(a, b)
    assert d["comparability"]["step_source"] == {"base": "inferred", "candidate": "inferred"}
    assert d["per"] == "step" and d["step_time_ms"]["statistic"] == "mean"
    change = d["step_time_ms"]["change_pct"]
    assert (1.766 / 3.206 - 1) * 100 - 0.01 <= change <= ((29 * 1.766 + 1.766) / (29 * 3.206 + 1.766) - 1) * 100 + 0.01
    assert d["verdict"] == "faster" and d["step_time_ms"]["ci95_pct"][1] < 0
    assert d["headline"].startswith(f"Faster: the mean step takes {abs(change):.1f}% less time (")
    assert "mean step" in d["sentence"] and "idle inside every step counts" in d["sentence"]
    # the time saved is the input wait: it moves most
    assert d["breakdown"][0]["part"] == "idle_input" and d["breakdown"][0]["delta_ms_per_step"] < 0


# ---------------------------------------------------------------------------------------------
# the mean: marked steps keep the median, inferred ones use the mean
# ---------------------------------------------------------------------------------------------
def test_inferred_steps_compare_the_mean_marked_ones_the_median():
    """Per side 20 steps: the first holding 19 ms of input wait (20 ms), then 19 of 1 ms; the
    candidate waits 9 ms instead (10 ms). Median: 1 ms → 1 ms (+0%): with marked steps (a step is a
    whole training step) no significant change. Mean: (20 + 19) / 20 = 1.95 ms → (10 + 19) / 20 =
    1.45 ms: 1.45 / 1.95 − 1 = −25.64%, compared whenever a side's steps are not marked. Its
    interval includes 0: a resample of 20 steps misses the long one with P = (19/20)^20 = 35.8%,
    so in at least 35.8% × (1 − 35.8%) = 23% of resamples the base has none and the candidate one
    or more (a positive change), and in as many the reverse: inconclusive (−25.6% ≥ 5%)."""
    base_t = [20.0] + [1.0] * 19
    cand_t = [10.0] + [1.0] * 19
    marked = compare(_one_rank(base_t), _one_rank(cand_t))
    assert marked["step_time_ms"]["statistic"] == "median"
    assert marked["step_time_ms"] == marked["step_time_ms_median"]
    assert marked["step_time_ms"]["change_pct"] == 0 and marked["verdict"] == "no significant change"
    for sources in (("inferred", "inferred"), ("markers", "inferred"), ("inferred", "markers"), (None, None)):
        d = compare(_one_rank(base_t, step_source=sources[0]), _one_rank(cand_t, step_source=sources[1]))
        st = d["step_time_ms"]
        assert d["per"] == "step" and st["statistic"] == "mean", sources
        assert (st["base"], st["candidate"]) == (1.95, 1.45) and (st["base_steps"], st["candidate_steps"]) == (20, 20)
        assert st["change_pct"] == pytest.approx((1.45 / 1.95 - 1) * 100, abs=0.005)
        lo, hi = st["ci95_pct"]
        assert lo < 0 < hi and d["verdict"] == "inconclusive"
        assert d["headline"].startswith("Inconclusive: the mean step time changed by -25.6%, but the steps vary")
        # the median stays in step_time_ms_median, for reference, without an interval
        med = d["step_time_ms_median"]
        assert (med["statistic"], med["base"], med["candidate"], med["change_pct"]) == ("median", 1.0, 1.0, 0)
        assert med["ci95_pct"] is None and med["significant"] is None


def test_bootstrap_of_the_mean_on_a_hand_example():
    """a = 3 steps of 10 ms; b = (10, 10, 40): mean 20 ms (+100%), median 10 ms (+0%). A resample
    of b holds k ~ Binomial(3, 1/3) copies of 40: its mean is 10 + 10k (+0, +100, +200, +300% with
    probabilities 8/27, 12/27, 6/27, 1/27 = 3.7%), its median 40 when k ≥ 2 (7/27) else 10. The
    2.5th percentile is +0% (8/27 = 30% of resamples) and the 97.5th +300% (3.7% > 2.5%) for
    both statistics; only the change differs."""
    a, b = np.full(3, 10.0), np.array([10.0, 10.0, 40.0])
    assert bootstrap_mean_change(a, b) == pytest.approx((100.0, 0.0, 300.0))
    assert bootstrap_median_change(a, b) == pytest.approx((0.0, 0.0, 300.0))
    assert bootstrap_change(a, b, "mean") == bootstrap_mean_change(a, b)


# ---------------------------------------------------------------------------------------------
# identical
# ---------------------------------------------------------------------------------------------
def test_a_scenario_against_itself_is_identical(tmp_path):
    """dataloader_starvation (6 steps, 40 ms of DataLoader wait) written and diagnosed twice, at
    two paths: the same numbers, so "identical" (the paths do not count), strong, no interval,
    and never a regression. Its step: 8 GEMMs + 16 elementwise + 1 optimizer = 25 launches."""
    a = diagnose_path(dataloader_starvation().write(tmp_path / "first.sqlite"))
    b = diagnose_path(dataloader_starvation().write(tmp_path / "second.sqlite"))
    assert a["source"]["path"] != b["source"]["path"] and identical(a, b)
    for d in (compare(a, a), compare(a, b)):
        assert d["verdict"] == "identical" and d["strength"] == "strong" and d["comparable"]
        assert d["step_time_ms"]["ci95_pct"] is None and d["step_time_ms"]["change_pct"] == 0
        assert d["headline"].startswith("Identical: the two captures hold the same GPU work and timings (6 timed "
                                        "steps, ")
        assert not regression(d, 0.0)
    # one kernel's total time off by 1 µs: not the same run any more
    c = copy.deepcopy(b)
    c["metrics"]["kernels"]["names"][0]["total_ms"] += 0.001
    assert not identical(a, c) and compare(a, c)["verdict"] == "no significant change"
    # the same kernels and window, one step 1 µs longer: not identical either
    c = copy.deepcopy(b)
    next(s for s in c["steps"] if s["primary"])["step_time_ms"] += 0.001
    assert not identical(a, c)
    # the window 1 µs longer
    c = copy.deepcopy(b)
    c["capture"]["window"]["duration_ms"] += 0.001
    assert not identical(a, c)


def test_identical_without_steps_is_identical_too():
    """No timed steps: the work-rate path, where a run against itself is 0% by construction."""
    r = _report([], step_source=None, kernels={"A": (100, 50.0), "B": (10, 5.0)})
    d = compare(r, copy.deepcopy(r))
    assert d["per"] == "work" and d["verdict"] == "identical" and d["strength"] == "strong"
    assert d["work_rate"]["time_per_work_change_pct"] == 0 and d["work_rate"]["significant"] is False
    # 100 + 10 launches of 2 kernels in the 1,000 ms window
    assert d["headline"] == ("Identical: the two captures hold the same GPU work and timings (no timed steps, "
                             "110 kernel launches of 2 kernels, a 1,000.0 ms window)")


def test_identical_runs_with_nothing_to_measure_work_by_are_still_identical():
    """2 launches of one kernel and no steps: no kernel is launched 3 times, so two different
    runs would get no verdict ("no shared measure of work"); the same run twice is identical,
    and no warning says "no verdict"."""
    r = _report([], step_source=None, kernels={"A": (2, 5.0)})
    d = compare(r, copy.deepcopy(r))
    assert d["per"] == "second" and d["verdict"] == "identical" and d["comparable"] is True
    assert d["strength"] == "strong" and not any("no verdict" in w for w in d["warnings"])
    other = compare(r, _report([], step_source=None, kernels={"A": (2, 6.0)}))
    assert other["verdict"] == "no significant change" and other["comparable"] is False
    assert any("no verdict" in w for w in other["warnings"])


@pytest.mark.slow  # issue 50: diff commands in processes (1.9 s of CPU); .ci/run runs it
def test_cli_capture_against_its_saved_report_is_identical_and_exits_0(tmp_path):
    cap = dataloader_starvation(steps=5).write(tmp_path / "run.sqlite")
    r = run_cli("report", cap, "--format", "json", "-o", tmp_path / "run.json", "-q", "--no-config")
    assert r.returncode == 0, r.stderr
    r = run_cli("diff", cap, tmp_path / "run.json", "-f", "json", "--fail-on-regression", "0", "-q", "--no-config")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["verdict"] == "identical" and d["headline"].startswith("Identical: ")


# ---------------------------------------------------------------------------------------------
# inconclusive
# ---------------------------------------------------------------------------------------------
BASE_100 = [100.0] * 6
#: two fast steps, four slow: median 130 ms (+30%), mean (2 × 60 + 4 × 130) / 6 = 106.67 ms (+6.67%)
SPREAD = [60.0, 60.0, 130.0, 130.0, 130.0, 130.0]


def test_a_large_median_change_whose_interval_includes_0_is_inconclusive():
    """Base 6 steps of 100 ms (every resample: 100). Candidate SPREAD: a resample of 6 draws holds
    j ~ Binomial(6, 1/3) steps of 60 ms; its median is 60 when j ≥ 4 (P = (15·4 + 6·2 + 1) / 729
    = 73/729 = 10.0%), (60 + 130) / 2 = 95 when j = 3 (160/729 = 21.9%), else 130 (68.0%). The
    2.5th percentile lies in the lowest 10%: −40%; the 97.5th in the top 68%: +30%. The change
    (+30%) is at least 5% but the interval (−40% to +30%) includes 0: inconclusive."""
    d = compare(_one_rank(BASE_100), _one_rank(SPREAD))
    st = d["step_time_ms"]
    assert st["statistic"] == "median" and st["change_pct"] == 30.0 and st["ci95_pct"] == [-40.0, 30.0]
    assert d["verdict"] == "inconclusive" and d["strength"] == "strong" and st["significant"] is False
    assert d["headline"] == ("Inconclusive: the median step time changed by +30.0%, but the steps vary too much to "
                             "be sure (95% interval -40.0% to +30.0%)")
    assert d["sentence"].startswith("Inconclusive: median step 100.00 ms → 130.00 ms (+30.0%, 95% interval "
                                    "-40.0% to +30.0%, 6 and 6 steps); the change is large (at least 5%) but the "
                                    "steps vary too much to be sure")
    assert not regression(d, 0.0)


def test_a_large_mean_change_whose_interval_includes_0_is_inconclusive():
    """The same steps, inferred: the mean. A resample's mean is (60 j + 130 (6 − j)) / 6 = 130 −
    70 j / 6 ms: +30% at j = 0 (P = (2/3)^6 = 64/729 = 8.8%, above 2.5%: the 97.5th percentile),
    −16.67% at j = 4 and −28.33% at j = 5; P(j ≥ 4) = 10.0% and P(j ≥ 5) = 13/729 = 1.8%, so the
    2.5th percentile lies between −28.33% and −16.67%. Change (106.67 / 100 − 1) = +6.67% ≥ 5%,
    interval includes 0: inconclusive."""
    d = compare(_one_rank(BASE_100, step_source="inferred"), _one_rank(SPREAD, step_source="inferred"))
    st = d["step_time_ms"]
    assert st["statistic"] == "mean" and st["change_pct"] == pytest.approx(640 / 6 - 100, abs=0.005)
    assert (st["base_steps"], st["candidate_steps"]) == (6, 6)
    lo, hi = st["ci95_pct"]
    assert -28.34 <= lo <= -16.66 and hi == 30.0
    assert d["verdict"] == "inconclusive"
    assert d["headline"].startswith("Inconclusive: the mean step time changed by +6.7%, but the steps vary too much")
    assert not regression(d, 0.0)


def test_a_small_change_whose_interval_includes_0_stays_no_significant_change():
    """Candidate (98, 98, 102, 102, 104, 104): median 102 ms, +2% (under 5%). A resample's median
    is 98 when ≥ 4 of its 6 draws are 98 (P = 73/729 = 10.0%) and 104 when ≥ 4 are 104 (10.0%):
    the interval is −2% to +4%, includes 0: no significant change, not inconclusive."""
    d = compare(_one_rank(BASE_100), _one_rank([98.0, 98.0, 102.0, 102.0, 104.0, 104.0]))
    assert d["step_time_ms"]["change_pct"] == 2.0 and d["step_time_ms"]["ci95_pct"] == [-2.0, 4.0]
    assert d["verdict"] == "no significant change"
    assert d["headline"] == "No significant change in time per step (+2.0%, 95% interval -2.0% to +4.0%)"


def test_only_slower_is_a_regression():
    """The same +30% and +6.67% changes: inconclusive never fails a build; a clear +30% does."""
    assert not regression(compare(_one_rank(BASE_100), _one_rank(SPREAD)), 0.0)
    # every step 130 ms: +30%, interval +30% to +30% (constant samples): slower
    d = compare(_one_rank(BASE_100), _one_rank([130.0] * 6))
    assert d["verdict"] == "slower" and d["step_time_ms"]["ci95_pct"] == [30.0, 30.0]
    assert regression(d, 29.9) and not regression(d, 30.0)
    # inferred: the mean's change is what --fail-on-regression compares (+10% here, median +0%)
    # (a resample holds none of the 160 ms step with P = (5/6)^6 = 33.5%: the interval starts at
    # +0%, so inconclusive, and not a regression however low the threshold)
    base = _one_rank([100.0] * 6, step_source="inferred")
    cand = _one_rank([160.0] + [100.0] * 5, step_source="inferred")  # mean 660 / 6 = 110 ms
    d = compare(base, cand)
    assert d["step_time_ms"]["change_pct"] == 10.0 and d["step_time_ms_median"]["change_pct"] == 0
    assert d["step_time_ms"]["ci95_pct"][0] == 0 and d["verdict"] == "inconclusive" and not regression(d, 0.0)
    # the same +10% on every step is slower, and fails above 9.9%, judged on the mean
    d = compare(base, _one_rank([110.0] * 6, step_source="inferred"))
    assert d["verdict"] == "slower" and regression(d, 9.9) and not regression(d, 10.0)


# ---------------------------------------------------------------------------------------------
# mutation audit: the last chunk of resamples, and the slowest rank
# ---------------------------------------------------------------------------------------------
class StairRng:
    """A stand-in for ``np.random.default_rng(seed)`` whose draws are known by hand: the r-th
    resample of a side of n steps (counting from its first, across chunks) picks step r % n
    every time, so its median (and mean) is that step. Counts the resamples drawn per side."""

    def __init__(self, seed=None) -> None:
        self.drawn: dict[int, int] = {}

    def integers(self, low, high, size):
        k, n = size
        r0 = self.drawn.get(high, 0)
        self.drawn[high] = r0 + k
        return np.repeat((np.arange(r0, r0 + k) % high)[:, None], n, axis=1)


def test_bootstrap_draws_every_chunk_including_the_last_partial_one(monkeypatch):
    """CHUNK_VALUES = 30 with 10 steps: chunks of 30 // 10 = 3 resamples, so 10 resamples are
    drawn as 3 + 3 + 3 + 1. Base: one step of 100 ms (every resample: 100). Candidate: 100, 101,
    …, 109 ms; resample r picks step r: change r% for r = 0..9. Percentiles of 0..9 (linear, at
    position p/100 × 9): 2.5th = 0.225, 97.5th = 8.775; with level 100 the ends, 0 and 9. A
    bootstrap that skips its last partial chunk leaves resample 9 undrawn (its entry unset): the
    97.5th percentile then comes from 0..8 (7.8) or from whatever memory held, and the candidate
    side draws 9 resamples, not 10 (checked by the count, whatever the unset entry holds)."""
    monkeypatch.setattr(compare_mod, "CHUNK_VALUES", 30)
    a, b = np.array([100.0]), 100.0 + np.arange(10, dtype=float)
    for level, expected in ((95.0, (0.225, 8.775)), (100.0, (0.0, 9.0))):
        rng = StairRng()
        monkeypatch.setattr(np.random, "default_rng", lambda seed, rng=rng: rng)
        change, lo, hi = bootstrap_median_change(a, b, resamples=10, level=level)
        assert rng.drawn == {1: 10, 10: 10}  # base (1 step) and candidate (10 steps): 10 resamples each
        assert change == pytest.approx(4.0)  # lower median of 100..109 (the 5th of 10) = 104
        assert (lo, hi) == pytest.approx(expected)
    # the mean goes through the same loop: resample r's mean is step r too
    rng = StairRng()
    monkeypatch.setattr(np.random, "default_rng", lambda seed: rng)
    assert bootstrap_mean_change(a, b, resamples=10)[1:] == pytest.approx((0.225, 8.775))
    assert rng.drawn == {1: 10, 10: 10}


def test_bootstrap_in_chunks_follows_its_documented_draws(monkeypatch):
    """With the real generator: chunks of 7 // 3 = 2 resamples (CHUNK_VALUES = 7, 3 steps a side),
    11 resamples = 2 × 5 + 1. The docstring's draws, replayed here: per chunk of k resamples,
    ``rng.integers(0, 3, (k, 3))`` for the base then for the candidate, from default_rng(seed);
    the interval is the 2.5th and 97.5th percentiles of the 11 changes of the medians. The draws
    the bootstrap makes are recorded (the percentiles alone can miss an undrawn resample whose
    unset entry happens to fall between the ends)."""
    monkeypatch.setattr(compare_mod, "CHUNK_VALUES", 7)
    a, b = np.array([10.0, 12.0, 15.0]), np.array([11.0, 14.0, 19.0])
    real = np.random.default_rng
    sizes = []

    class Recording:
        def __init__(self, seed) -> None:
            self.rng = real(seed)

        def integers(self, low, high, size):
            sizes.append(size)
            return self.rng.integers(low, high, size)

    monkeypatch.setattr(np.random, "default_rng", Recording)
    change, lo, hi = bootstrap_median_change(a, b, resamples=11, seed=3)
    # per chunk the base's then the candidate's: 5 chunks of 2 resamples, then the last one of 1
    assert sizes == [(2, 3)] * 10 + [(1, 3)] * 2
    rng = real(3)
    ratios = []
    for k in (2, 2, 2, 2, 2, 1):
        ia, ib = rng.integers(0, 3, (k, 3)), rng.integers(0, 3, (k, 3))
        for ra, rb in zip(np.median(a[ia], axis=1), np.median(b[ib], axis=1)):
            ratios.append((rb / ra - 1) * 100)
    assert len(ratios) == 11
    expected = np.percentile(ratios, [2.5, 97.5])
    assert change == pytest.approx((14 / 12 - 1) * 100)
    assert (lo, hi) == pytest.approx(tuple(expected))


def test_a_data_parallel_job_step_is_its_slowest_rank_not_its_last():
    """Two ranks per step index, the slow one (pid 1) recorded first, the fast one (pid 2) last.
    Base: pid 1 takes 20, 22, 21, 20, 23, 21 ms, pid 2 10 ms each. Candidate: pid 1 sped up to
    12, 13, 12, 14, 12, 13 ms, pid 2 unchanged. Job steps = the slower rank's: lower median (the
    report's median step, the 3rd of 6 sorted) of (20, 20, 21, 21, 22, 23) = 21 ms → of (12, 12, 12,
    13, 13, 14) = 12 ms: 12 / 21 − 1 = −42.86%; every resampled change lies within 12 / 23 − 1 =
    −47.83% and 14 / 20 − 1 = −30%:
    faster, strong (6 steps). Taking each index's last rank instead would time pid 2's 10 ms on
    both sides and see no change."""
    slow_a, slow_b = [20, 22, 21, 20, 23, 21], [12, 13, 12, 14, 12, 13]

    def job(slow):
        return _report([x for i, t in enumerate(slow) for x in ((1, i, float(t)), (2, i, 10.0))])

    base, cand = job(slow_a), job(slow_b)
    assert [s["pid"] for s in base["steps"][:2]] == [1, 2]  # the slow rank first, the fast one last
    d = compare(base, cand)
    st = d["step_time_ms"]
    assert (st["base_steps"], st["candidate_steps"]) == (6, 6) and d["base"]["steps"] == 6
    assert (st["base"], st["candidate"]) == (21.0, 12.0)
    assert st["change_pct"] == pytest.approx((12 / 21 - 1) * 100, abs=0.005)
    lo, hi = st["ci95_pct"]
    assert (12 / 23 - 1) * 100 - 0.005 <= lo <= hi <= (14 / 20 - 1) * 100 + 0.005
    assert d["verdict"] == "faster" and d["strength"] == "strong"
    assert d["headline"] == "Faster: 42.9% less time per step (strong evidence)"
