"""The straggler's what-if (issue 48): the job step if the straggler ran at the median rank's speed,
replayed through the collectives (nsysdoc/jobs/what_if.py, docs/job.md "Straggler what-if").

Predictions are checked against the fix: each scenario is built twice with the same seed, once with
the slow rank and once without it, and the what-if computed on the first must give the second's
median job step within 10%.

``ddp_job`` (nsysdoc/testing/scenarios.py; timing in tests/test_job_verdict.py's header): per step
every rank waits ``input_ms`` = 2 ms for input (the slow rank 12 ms), copies 4 MiB (5.6 µs after the
call + 349.525 µs), runs 8 × (1.5 ms + 40 µs) = 12.32 ms of kernels, joins an all-reduce that ends
3 ms after the last rank joins, then Adam (0.3 ms) and ``.item()`` (3 µs). The job step is the slow
rank's: 12 + 0.0056 + 0.349525 + 12.32 + 3 + 0.3 + 0.003 = 27.978125 ms; without the slow rank,
2 + 15.978125 = 17.978125 ms. At the median speed the slow rank's 10 ms of extra input wait before
the all-reduce become the others' 2 ms: 27.978125 − 10 = 17.978125 ms, the fixed job's step.
"""
from __future__ import annotations

import numpy as np
import pytest

from nsysdoc.jobs import run_job
from nsysdoc.jobs.what_if import at_median, replay
from nsysdoc.testing.scenarios import ddp_job, three_node_job_two_allreduces

MS = 1e6


def _job(caps, folder):
    folder.mkdir(parents=True, exist_ok=True)
    paths = [str(c.write(folder / f"rank{r}.sqlite")) for r, c in enumerate(caps)]
    return run_job(paths, {"no_cache": True}, jobs=1)


# ---------------------------------------------------------------------------------------------
# the replay on hand-made numbers
# ---------------------------------------------------------------------------------------------
def test_replay_and_median_on_hand_made_numbers():
    """Three ranks start at 0 and meet at two collectives, each ending 1 ms after its last join;
    then 1 ms of tail each. Work before them (ms): rank 0: 2, 6; rank 1: 3, 1; rank 2: 8, 4.

    Measured: c0 last join 8 → ends 9; c1 joins 15, 10, 13 → last 15 → ends 16; steps end at 17.
    Rank 2 at the median of the others: c0 min(8, median(2, 3) = 2.5) = 2.5, c1 min(4, median(6, 1)
    = 3.5) = 3.5. Replay: c0 last join 3 (rank 1) → ends 4; c1 joins 10, 5, 7.5 → 10 → ends 11;
    steps end at 12. Saved 5 ms — not the sum of rank 2's excesses (5.5 + 0.5 = 6): at c1 rank 0,
    not rank 2, is last, so rank 2's 0.5 ms there buys nothing."""
    start = np.zeros(3)
    work = np.array([[2, 3, 8], [6, 1, 4]], dtype=float) * MS
    transfer = np.full((2, 3), 1.0) * MS
    tail = np.full(3, 1.0) * MS
    assert list(replay(start, work, transfer, tail) / MS) == [17, 17, 17]
    w2, t2 = at_median(work, tail, 2)
    assert list(w2[:, 2] / MS) == [2.5, 3.5] and list(t2 / MS) == [1, 1, 1]
    assert list(replay(start, w2, transfer, t2) / MS) == [12, 12, 12]
    # a rank faster than the others is never slowed down: rank 1 keeps its 1 ms before c1
    w1, _ = at_median(work, tail, 1)
    assert list(w1[:, 1] / MS) == [3, 1]


# ---------------------------------------------------------------------------------------------
# before/after pairs: the prediction against the fixed capture
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ddp_pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("whatif")
    return _job(ddp_job(ranks=4, steps=6, slow_rank=3), d / "slow"), _job(ddp_job(ranks=4, steps=6, slow_rank=None),
                                                                          d / "fixed")


def test_slow_input_rank_predicts_the_fixed_jobs_step(ddp_pair):
    """Module doc: 27.978125 ms now, 17.978125 ms at the median speed, and the fixed job's step is
    17.978125 ms."""
    slow, fixed = ddp_pair
    w = slow["straggler"]["what_if"]
    assert w["basis"] == "step" and w["steps"] == 6
    assert w["step_ms_before"] == pytest.approx(27.978125, abs=1e-3)
    assert w["step_ms_after"] == pytest.approx(17.978125, abs=1e-3)
    assert w["saved_ms_per_step"] == pytest.approx(10.0, abs=1e-3)
    assert w["saved_ms_per_step_mean"] == pytest.approx(10.0, abs=1e-3)  # 10 ms in each of the 6 steps
    assert w["saved_pct"] == pytest.approx(10 / 27.978125 * 100, abs=0.01)
    assert fixed["step_time_ms_median"] == pytest.approx(17.978125, abs=1e-3)
    assert abs(w["step_ms_after"] - fixed["step_time_ms_median"]) <= 0.10 * fixed["step_time_ms_median"]
    # the fixed job has no straggler; its most-often-last rank at the median speed buys nothing
    assert fixed["straggler"] is None
    assert fixed["straggler_candidate"]["what_if"]["saved_ms_per_step"] == pytest.approx(0.0, abs=1e-3)


def test_jittered_pair_with_the_same_seed_is_predicted_within_10_percent(tmp_path):
    """Same job with 0–1.5 ms of uniform input jitter per rank and step (seed 5, so both captures
    draw the same jitter). The slow rank (1 of 4) waits 10 ms more: it is last in every step. At the
    median of the others its input wait is about 2 ms + the median jitter, so the prediction is the
    fixed job's step within the jitter (≤ 1.5 ms of ~18 ms, well inside 10%)."""
    slow = _job(ddp_job(ranks=4, steps=6, slow_rank=1, jitter_us=1500, seed=5), tmp_path / "slow")
    fixed = _job(ddp_job(ranks=4, steps=6, slow_rank=None, jitter_us=1500, seed=5), tmp_path / "fixed")
    w = slow["straggler"]["what_if"]
    assert 8.5 <= w["saved_ms_per_step"] <= 11.5
    assert abs(w["step_ms_after"] - fixed["step_time_ms_median"]) <= 0.10 * fixed["step_time_ms_median"]
    assert abs(w["step_ms_after"] - fixed["step_time_ms_median"]) <= 1.5


def test_no_steps_the_chain_of_collectives_is_replayed(tmp_path):
    """``three_node_job_two_allreduces`` with 4 all-reduces and no step markers: rank 4 spends 10 ms
    more on the host before each all-reduce, so it joins each 10 ms after the others. Between the
    end of the first and of the last all-reduce (3 intervals) it costs 3 × 10 = 30 ms; at the median
    speed that span is 30 ms shorter: the fixed capture's span (within its 0–9 µs end jitter)."""
    slow = _job(three_node_job_two_allreduces(slow_rank=4, allreduces=4, gemms=5), tmp_path / "slow")
    fixed = _job(three_node_job_two_allreduces(slow_rank=None, allreduces=4, gemms=5), tmp_path / "fixed")
    w = slow["straggler"]["what_if"]
    assert w["basis"] == "window" and w["step_ms_before"] is None
    fw = fixed["straggler_candidate"]["what_if"]
    assert w["span_ms_before"] - w["span_ms_after"] == pytest.approx(30.0, abs=0.02)
    assert w["saved_ms_per_s"] == pytest.approx(30.0 / w["span_ms_before"] * 1000, abs=0.01)
    assert w["span_ms_after"] == pytest.approx(fw["span_ms_before"], abs=0.02)


# ---------------------------------------------------------------------------------------------
# where it is shown
# ---------------------------------------------------------------------------------------------
def test_sentence_page_and_markdown_say_the_what_if(ddp_pair):
    from nsysdoc.views.job_page import render_job_html, render_job_markdown

    slow, _ = ddp_pair
    said = ("At the other ranks' median speed before each collective, rank 3 would take the median job step "
            "from 27.98 to 17.98 ms.")
    assert said in slow["verdict"]["sentence"]
    assert said in render_job_markdown(slow)
    page = render_job_html(slow)
    assert 'id="straggler-what-if"' in page and "27.98 → 17.98 ms" in page


# ---------------------------------------------------------------------------------------------
# the real two-rank captures
# ---------------------------------------------------------------------------------------------
from .conftest import SHARED_TRACES, needs_shared  # noqa: E402


@needs_shared("fastvideo_torchrun_h100x2_before.sqlite", "fastvideo_torchrun_h100x2_after.sqlite")
@pytest.mark.parametrize("name", ["fastvideo_torchrun_h100x2_before.sqlite", "fastvideo_torchrun_h100x2_after.sqlite"])
def test_real_two_rank_captures_recover_the_wait_they_cause(name):
    """Two ranks, 14 inferred steps each, two or three SendRecv per step (tests/test_job.py). With two
    ranks, lowering rank 1's work before a collective to rank 0's makes both join together: where
    rank 1 was last, exactly rank 0's wait there is recovered, and nothing where rank 0 was last
    (the tails after the last SendRecv are 0.17 ms on both ranks). So the mean saved per step is the
    wait rank 1 causes per step (``wait_ms_per_step``: 0.70 ms before, 0.30 ms after), up to the
    steps that not both ranks hold."""
    d = run_job([str(SHARED_TRACES / name)], {"no_cache": True})
    c = d["straggler_candidate"]
    w = c["what_if"]
    assert c["rank"] == 1 and w["basis"] == "step" and w["steps"] == 14
    assert w["saved_ms_per_step_mean"] == pytest.approx(c["wait_ms_per_step"], abs=0.02)
    assert w["step_ms_after"] < w["step_ms_before"]
