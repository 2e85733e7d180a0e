"""Steps inferred from repeating GPU work (nsysdoc/metrics/step_inference.py, engine/infer.py).

Truth is computed by hand from the scenario arguments:

* ``layered_training(steps=8, layers=6)``: per step 1 H2D copy + 6 x (GEMM + 2 elementwise)
  forward + 6 x (dgrad + wgrad + 2 elementwise) backward + 1 Adam + 1 item() copy
  = 1 + 18 + 24 + 1 + 1 = 45 GPU operations; the layers repeat inside a step (period 3 forward,
  4 backward) but only the whole step repeats across the sequence.
* ``forward_layers_slice(layers=12)``: 4 operations per layer, no optimizer, no backward.
* ``steady_training(step_markers=False)``: the same loop as with ProfilerStep ranges, so the
  inferred step times equal the marked ones.
"""
from __future__ import annotations

import json
import sqlite3
import statistics
from pathlib import Path

import numpy as np
import pytest

from nsysdoc.analysis import analyze
from nsysdoc.metrics import step_inference as si
from nsysdoc.testing import Capture
from nsysdoc.testing.scenarios import ADAM, GEMM, forward_layers_slice, layered_training, steady_training
from nsysdoc.trace import load_trace

from tests.conftest import SHARED_TRACES as TRACES, needs_shared, skip_without_shared  # noqa: E402  (issue 49)


def _result(cap, tmp_path: Path, name: str) -> dict:
    path = cap.write(tmp_path / f"{name}.sqlite")
    return analyze(load_trace(str(path), cache=False)).to_dict()


# --- the pure functions ----------------------------------------------------------------------

def test_period_is_the_whole_step_not_the_layer_inside_it():
    # 1 = batch copy, (2, 3) x 3 = three identical layers, 4 = loss, 5 = optimizer: 9 per step
    unit = [1, 2, 3, 2, 3, 2, 3, 4, 5]
    tokens = np.array(unit * 10)
    period, agree = si.find_period(tokens)
    assert period == 9
    assert agree == 1.0
    # the layer period (2) agrees on 4 of every 9 positions only
    assert si.agreement(tokens, 2) == pytest.approx(((4 * 10) - 0) / (len(tokens) - 2), abs=0.02)


def test_an_extra_operation_every_few_steps_keeps_the_period():
    unit = [1, 2, 3, 2, 3, 2, 3, 4, 5]
    seq = []
    for i in range(20):
        seq += unit + ([6] if i % 5 == 4 else [])  # a logging kernel every 5th step
    period, agree = si.find_period(np.array(seq))
    assert period == 9
    assert 0.8 <= agree < 1.0


def test_no_period_in_random_work_one_repeated_kernel_or_too_few_repeats():
    rng = np.random.default_rng(0)
    assert si.find_period(rng.integers(0, 50, 600)) is None
    assert si.find_period(np.full(300, 7)) is None            # a micro-benchmark loop of one kernel
    assert si.find_period(np.array([1, 2, 3, 4, 5] * 2)) is None  # 2 repetitions are not a loop
    assert si.find_period(np.array([1, 2, 3] * 20)) is None   # under MIN_PERIOD_OPS operations


def test_anchor_is_the_once_per_period_token_after_the_longest_pause():
    unit = [10, 11, 12, 13, 14, 15]
    tokens = np.array(unit * 5)
    gaps = np.array([0.0, 1e3, 1e3, 5e6, 1e3, 2e6] * 5)  # 5 ms before 13, 2 ms before 15
    assert si.pick_anchor(tokens, gaps, 6) == (13, 5e6)
    # 11 occurs twice per period: never an anchor even after the longest pause
    tokens2 = np.array([10, 11, 12, 11, 14, 15] * 5)
    gaps2 = np.array([0.0, 9e6, 1e3, 9e6, 1e3, 2e6] * 5)
    assert si.pick_anchor(tokens2, gaps2, 6) == (15, 2e6)


def test_step_ranges_drop_a_partial_last_iteration():
    anchors = np.array([100, 200, 300])
    # stretches hold 10, 10 and 5 operations: the last is a capture cut mid-iteration
    s, e = si.step_ranges(anchors, np.array([10, 10, 5]), np.array([150, 250, 320]))
    assert s.tolist() == [100, 200] and e.tolist() == [200, 300]
    # complete (9 >= 0.9 * 10): kept, and it lasts to the end of its last launch call
    s, e = si.step_ranges(anchors, np.array([10, 10, 9]), np.array([150, 250, 390]))
    assert s.tolist() == [100, 200, 300] and e.tolist() == [200, 300, 390]


def test_unit_kind_needs_an_optimizer_or_backward_kernel():
    assert si.unit_kind([GEMM, ADAM]) == "training step"
    assert si.unit_kind(["sm90_gemm_dgrad_kernel", "elementwise"]) == "training step"
    assert si.unit_kind([GEMM, "flash_fwd_kernel", "ncclDevKernel_SendRecv"]) == "repeating unit"


# --- through the analysis ---------------------------------------------------------------------

def test_layered_training_without_markers_gets_its_steps(tmp_path):
    r = _result(layered_training(steps=8, layers=6), tmp_path, "layered")
    marked = _result(layered_training(steps=8, layers=6, step_markers=True), tmp_path, "layered_marked")
    cap = r["capture"]
    assert cap["has_step_markers"] is False
    assert cap["step_source"] == "inferred"
    assert cap["window"]["kind"] in ("gpu-span", "steady-state")  # inferred steps leave the window alone
    (proc,) = cap["steps_inferred"]["processes"]
    assert proc["period_ops"] == 45
    assert proc["steps"] == 8
    assert proc["unit"] == "training step"
    assert proc["anchor"] == "memcpy HtoD"   # after the 3 ms input wait
    assert proc["anchor_gap_ms"] >= 3.0
    assert r["summary"]["step_count"] == 8
    # the same loop timed by its markers: equal median step time
    assert r["summary"]["step_time_ms_median"] == pytest.approx(marked["summary"]["step_time_ms_median"], rel=1e-3)
    assert "steps were inferred" in " ".join(cap["warnings"])
    v = r["metrics"]["values"]
    assert v["has_steps"] is True and v["steps_inferred"] is True and v["has_step_markers"] is False
    assert marked["capture"]["step_source"] == "markers" and marked["capture"]["steps_inferred"] is None


def test_a_slice_of_layers_is_a_repeating_unit_and_says_it_may_be_a_layer(tmp_path):
    r = _result(forward_layers_slice(layers=12), tmp_path, "fwd")
    inf = r["capture"]["steps_inferred"]
    (proc,) = inf["processes"]
    assert proc["period_ops"] == 4 and proc["unit"] == "repeating unit"
    assert "may be one model layer or block rather than a whole training step" in inf["description"]
    # per layer: 1.5 ms of host, 4 launches (10 us of host each but the first) -> 1.53 ms of host
    # per period, GPU 0.9 + 0.03 + 0.03 ms: the host sets the pace
    assert r["summary"]["step_time_ms_median"] == pytest.approx(1.551, abs=0.002)


def test_inferred_steps_time_the_same_loop_as_markers(tmp_path):
    kw = dict(steps=15, jitter_pct=3, seed=2)
    plain = _result(steady_training(step_markers=False, **kw), tmp_path, "plain")
    marked = _result(steady_training(**kw), tmp_path, "marked")
    a = [s["step_time_ms"] for s in plain["steps"] if s["primary"]]
    b = [s["step_time_ms"] for s in marked["steps"] if s["primary"]]
    assert len(a) == len(b) == 15
    # every step but the last (which ends at its GPU work, without the next step's launch) agrees
    assert a[:-1] == pytest.approx(b[:-1], rel=1e-3)


def test_no_inference_without_repetition(tmp_path):
    cap = Capture()
    t = cap.process(pid=77).thread()
    rng = np.random.default_rng(1)
    names = [f"kernel_{i}" for i in range(40)]
    for k in rng.integers(0, 40, 300):
        t.cpu(us=5)
        t.launch(names[int(k)], 20)
    r = _result(cap, tmp_path, "random")
    assert r["capture"]["step_source"] is None
    assert r["capture"]["steps_inferred"] is None
    assert r["summary"]["step_count"] == 0


def test_two_processes_each_get_their_steps(tmp_path):
    cap = Capture()
    for pid, dev in ((900, 0), (901, 1)):
        t = cap.process(pid=pid, device=dev, hw=dev).thread()
        t.at(1_000_000_000)
        for _ in range(6):
            t.os_call("poll", us=2000)
            t.memcpy("HtoD", 1 << 20, pageable=False)
            for _ in range(4):
                t.cpu(us=10)
                t.launch(GEMM, 300)
            t.launch(ADAM, 50)
            t.item()
    r = _result(cap, tmp_path, "two")
    procs = r["capture"]["steps_inferred"]["processes"]
    assert sorted(p["pid"] for p in procs) == [900, 901]
    assert all(p["period_ops"] == 7 and p["steps"] == 6 for p in procs)
    assert "in each of processes 900, 901" in r["capture"]["steps_inferred"]["description"]


def test_diff_without_markers_matches_the_diff_with_markers(tmp_path):
    """Issue 29: on a pair of captures with no NVTX at all, the per-step change matches what the
    same runs with markers give within 3 points."""
    from nsysdoc.compare import compare
    from nsysdoc.rules import apply_rules, load_rules

    rules = load_rules([])

    def run(name, **kw):
        return apply_rules(_result(steady_training(steps=15, jitter_pct=3, **kw), tmp_path, name), rules)

    marked = compare(run("mb", seed=1), run("mc", seed=2, gemm_us=1800))
    plain = compare(run("pb", seed=1, step_markers=False), run("pc", seed=2, gemm_us=1800, step_markers=False))
    assert marked["per"] == plain["per"] == "step"
    cm, cp = marked["step_time_ms_median"]["change_pct"], plain["step_time_ms_median"]["change_pct"]
    assert cm > 10  # 8 GEMMs of 1.5 ms -> 1.8 ms: the step grows by about 18%
    assert abs(cm - cp) <= 3
    assert plain["verdict"] == marked["verdict"] == "slower"


# --- a real capture ---------------------------------------------------------------------------

def _h2d_cadence_ms(path: Path) -> list[float]:
    """Independent SQL: per launching thread, the mean time between successive H2D copy launches
    (first to last launch ÷ intervals: the units' mean cadence; the medians, 16.70/16.75 ms before
    and 18.44/19.57 ms after, scatter with the host's jitter)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute(
        "SELECT r.globalTid, r.start FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = m.correlationId AND (r.globalTid >> 24) = (m.globalPid >> 24) "
        "WHERE m.copyKind = 1 ORDER BY r.globalTid, r.start").fetchall()
    db.close()
    by: dict[int, list[int]] = {}
    for tid, start in rows:
        by.setdefault(tid, []).append(start)
    return [float(np.mean(np.diff(v))) / 1e6 for v in by.values() if len(v) > 3]


@needs_shared()
@pytest.mark.parametrize("name", ["fastvideo_torchrun_h100x2_before", "fastvideo_torchrun_h100x2_after"])
def test_fastvideo_slices_repeat_every_157_operations(name):
    path = TRACES / f"{name}.sqlite"
    skip_without_shared(f"{name}.sqlite")
    r = analyze(load_trace(str(path), cache=False)).to_dict()
    inf = r["capture"]["steps_inferred"]
    assert inf is not None
    assert {p["period_ops"] for p in inf["processes"]} == {157}
    assert {p["unit"] for p in inf["processes"]} == {"repeating unit"}  # a DiT block, not a step
    cadence = _h2d_cadence_ms(path)
    per_proc = {}
    for s in r["steps"]:
        if s["primary"]:
            per_proc.setdefault(s["pid"], []).append(s["step_time_ms"])
    # the units but each process's last (the last H2D launch opens it: the cadence stops there);
    # a unit starts where both the host and the GPU reached it, so ours run up to the GPU falling
    # behind over the slice (before: 18.13/17.99 against 17.40/17.61 ms; after: 20.75/20.86 against
    # 19.96/20.04 ms): within 5%
    ours = sorted(statistics.mean(v[:-1]) for v in per_proc.values())
    assert len(ours) == len(cadence) == 2
    assert ours == pytest.approx(sorted(cadence), rel=0.05)
    json.dumps(inf)  # plain JSON


def test_a_sample_finds_the_period_and_every_step_is_still_counted(tmp_path, monkeypatch):
    """Only the first SAMPLE_OPS launches are read to find the period (memory stays bounded);
    the anchors and steps come from every launch. 150 operations hold 3 periods of 45; the 352
    kernels exceed 2 x 150, so the earliest 150 are kept and later launches (the copies, read from
    their own table afterwards) are cut off by launch time."""
    monkeypatch.setattr(si, "SAMPLE_OPS", 150)
    r = _result(layered_training(steps=8, layers=6), tmp_path, "layered_sampled")
    (proc,) = r["capture"]["steps_inferred"]["processes"]
    assert proc["period_ops"] == 45 and proc["steps"] == 8


# --- issue 44: the iteration period, tiling and one training step (hand examples) -------------

def _loop_tokens(iters: int, copy: bool = True, layers: int = 20):
    """Tokens of a loop: per iteration [7 (an H2D copy token) if copy] + layers x (1, 2, 3, 4);
    host pauses: 5,000 µs before each iteration's first launch, 10 µs elsewhere (in ns)."""
    tok, gap = [], []
    for _ in range(iters):
        first = True
        if copy:
            tok.append(7)
            gap.append(5_000_000)
            first = False
        for _ in range(layers):
            for k in (1, 2, 3, 4):
                tok.append(k)
                gap.append(5_000_000 if first else 10_000)
                first = False
    return np.array(tok), np.array(gap, dtype=np.int64)


def test_a_period_holding_the_input_copy_wins_over_the_layer_period():
    # 10 iterations of 1 copy + 20 x 4 kernels = 81 operations. The base period is the layer, 4:
    # agreement(4) = positions whose token repeats 4 later = 810 - 4 - 2 x 9 ... ≥ 80%; agreement(81)
    # = 1.0, and 81 is "about a multiple" of 4 (20 x 4 + 1), so the base period stays 4. The layer
    # period has no iteration anchor (no token once per 4 is a copy, an optimizer kernel or after a
    # pause 4x the median pause, 10 µs); 81 has two: the copy (an H2D token) after a 5 ms pause.
    tok, gap = _loop_tokens(10)
    base = si.find_period(tok)
    assert base[0] == 4
    assert si.iteration_anchor(tok, gap, 4, np.array([7])) is None
    assert si.iteration_period(tok, gap, base, np.array([7])) == (81, 1.0)
    assert si.iteration_anchor(tok, gap, 81, np.array([7])) == (7, 5_000_000.0)


def test_a_period_after_the_once_per_iteration_pause_wins_without_any_copy():
    # no copy: per iteration an embedding kernel (token 9, once per iteration, first after the 5 ms
    # host pause: 500x the 10 µs median pause) and 20 layers of 4 kernels = 81 launches. The base
    # period is the layer, 4, which has no iteration anchor; 81 does: token 9, after the pause.
    tok, gap = _loop_tokens(10, copy=False)
    tok = tok.reshape(10, 80)
    gap = gap.reshape(10, 80)
    tok = np.concatenate([np.full((10, 1), 9), tok], axis=1).ravel()
    gap = np.concatenate([np.full((10, 1), 5_000_000), np.full((10, 80), 10_000)], axis=1).ravel()
    assert si._pause_candidates(gap, len(tok)) == [81]    # launches after a long pause, 81 apart
    base = si.find_period(tok)
    assert base[0] == 4
    none = np.zeros(0, dtype=np.int64)
    assert si.iteration_period(tok, gap, base, none) == (81, 1.0)
    assert si.iteration_anchor(tok, gap, 81, none) == (9, 5_000_000.0)
    # a loop whose every kernel recurs inside the iteration (no once-per-iteration token) has no
    # iteration anchor at any period: the base period stays (a limit the glossary states)
    tok2, gap2 = _loop_tokens(10, copy=False)
    assert si.iteration_period(tok2, gap2, si.find_period(tok2), none)[0] == 4


def test_the_layer_period_stays_when_nothing_marks_an_iteration():
    # forward_layers_slice-like: every unit of 4 has the same pause; no longer period has an anchor
    tok = np.array([7, 1, 2, 3] * 12)
    gap = np.array([1_500_000, 10_000, 10_000, 10_000] * 12, dtype=np.int64)
    base = si.find_period(tok)
    assert base == (4, 1.0)
    assert si.iteration_period(tok, gap, base, np.array([7])) == (4, 1.0)


def test_units_tile_the_work_only_when_none_is_over_three_medians_and_they_hold_80_percent():
    # a unit of 20 ms among 5 ms ones (not the last): 20 > 3 x 5
    ok, why = si.tiles(np.array([5e6] * 5 + [20e6] + [5e6] * 5), 100, 100)
    assert not ok and "20.0 ms, more than 3x the median unit (5.00 ms)" in why
    # the last unit may be long (the GPU queue draining after the host's last launch) ...
    assert si.tiles(np.array([5e6] * 11 + [175e6]), 100, 100, np.array([52] * 11 + [60])) == (True, None)
    # ... but not hold many more operations: 11 units of 52 launches and a 12th of 3,059 (a
    # one-step capture cut at its layers): 3,059 > 1.5 x 52
    ok, why = si.tiles(np.array([5e6] * 11 + [175e6]), 100, 100, np.array([52] * 11 + [3059]))
    assert not ok and "the last unit holds 3,059 operations, more than 1.5x the median unit (52)" in why
    # equal units holding 79 of 100 ms of GPU time: under 80%
    ok, why = si.tiles(np.array([5e6] * 5), 79, 100)
    assert not ok and "79% of the GPU time" in why
    assert si.tiles(np.array([5e6, 5e6, 14.9e6]), 80, 100) == (True, None)   # 14.9 <= 3 x 5, 80%


def test_one_training_step_is_backward_then_an_optimizer_at_the_end():
    # 100 launches: backward from 40, optimizer at 90-99 (all in the last 40%, after backward)
    opt = np.zeros(100, bool)
    opt[90:] = True
    bwd = np.zeros(100, bool)
    bwd[40:88] = True
    assert si.one_step(opt, bwd)
    opt2 = opt.copy()
    opt2[10] = True                     # an optimizer kernel in the first 60%: steps repeat
    assert not si.one_step(opt2, bwd)
    assert not si.one_step(opt, np.zeros(100, bool))   # no backward: inference, not training
    # optimizer at 60-69 of 100, then 30 launches (a next step's forward): more than max(5, 2%)
    opt3 = np.zeros(100, bool)
    opt3[60:70] = True
    assert not si.one_step(opt3, bwd)
    opt4 = np.zeros(100, bool)
    opt4[60:95] = True                  # 4 launches after it (zero_grad, item()): still one step
    assert si.one_step(opt4, bwd)


def test_the_markerless_loop_pair_gets_its_iterations_not_its_layers(tmp_path):
    # the loop: input wait, one H2D copy, then 20 layers of 4 kernels per iteration, 30
    # iterations: 30 steps of 81 operations (not 600 units of 4), anchored at the copy
    cap = Capture()
    t = cap.process(pid=7200).thread()
    for _ in range(30):
        t.os_call("poll", us=4000)
        t.memcpy("HtoD", 4 << 20, pageable=False)
        for _ in range(20):
            for name, us in (("gemm_a", 60), ("relu_b", 10), ("gemm_c", 60), ("add_d", 10)):
                t.launch(name, us)
    r = _result(cap, tmp_path, "loop")
    (p,) = r["capture"]["steps_inferred"]["processes"]
    assert (p["period_ops"], p["steps"], p["anchor"]) == (81, 30, "memcpy HtoD")
    assert r["summary"]["kernels_per_step_median"] == 80
