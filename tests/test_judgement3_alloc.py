"""Issue 46 item 3: allocator growth is set-up, allocation churn is repetition.

Scenarios of ``nsysdoc/testing/alloc_scenarios.py`` (and ``scenarios.allocator_churn``). Every
expected number is computed by hand from the scenario code, the builder's timing model (header of
``tests/test_judgement_scenarios.py``: a launch at host time ``a`` takes ``[a, a+5)`` us and its
kernel starts at ``max(a+5, stream free)``; an operator range adds 1 us on entry and 1 us on exit)
and the definitions of ``docs/glossary.md`` ("allocation repeats"); never from the tool.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.metrics import alloc as alloc_m  # noqa: E402
from nsysdoc.testing import alloc_scenarios as AS  # noqa: E402
from nsysdoc.testing import scenarios as SC  # noqa: E402
from tests.conftest import diagnose_path  # noqa: E402

A = 6e-5  # JSON rounds to 4 decimals


def _run(tmp_path, cap) -> dict:
    return diagnose_path(cap.write(tmp_path / "t.sqlite"))


def _rules(r: dict) -> dict:
    return {f["rule"]: f for f in r["findings"]}


# ---------------------------------------------------------------------------------------------
# the metric on hand-written call sequences
# ---------------------------------------------------------------------------------------------
def test_repeats_need_a_free_after_an_earlier_allocation():
    """Thread 1: free(0) malloc malloc free malloc malloc free free malloc -> the first free has no
    allocation before it (cudaFree(0): context), the malloc after the 2nd call's free repeats (5th
    call), the 6th follows an allocation (one growth of several calls), the 9th follows frees.
    Thread 2 interleaved in time: malloc free malloc -> its 3rd call repeats; thread 1's calls do
    not count for it."""
    th = np.array([1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2])
    t = np.array([0, 10, 20, 30, 40, 50, 60, 70, 80, 35, 45, 55])
    rel = np.array([1, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0], bool)
    got = alloc_m.repeats(th, t, rel)
    assert got.tolist() == [False, False, False, False, True, False, False, False, True, False, False, True]


def test_release_names():
    assert alloc_m.is_release("cudaFree_v3020") and alloc_m.is_release("cuMemRelease")
    assert alloc_m.is_release("hipFree") and alloc_m.is_release("cudaFreeHost_v3020")
    assert not alloc_m.is_release("cudaMalloc_v3020") and not alloc_m.is_release("cuMemCreate")
    assert not alloc_m.is_release("cudaHostAlloc_v3020") and not alloc_m.is_release("cuMemMap")


def test_repeat_steps_leave_out_each_threads_first_step():
    """Steps [0,100) [100,200) [200,300) on thread 7 and [0,150) [150,300) on thread 8; repeats at
    50 (first step of both threads: not counted), 120 (thread 7's 2nd step) and 160 (thread 8's
    2nd step; also inside thread 7's 2nd step): later steps = 2 + 1 = 3, with a repeat: 7's 2nd
    and 8's 2nd = 2 -> 66.67%. Calls: malloc 10, free 40, malloc 50, free 110, malloc 120,
    free 155, malloc 160 on one thread."""
    th = np.zeros(7, np.int64)
    t = np.array([10, 40, 50, 110, 120, 155, 160])
    rel = np.array([0, 1, 0, 1, 0, 1, 0], bool)
    got = alloc_m.alloc_repeats(th, t, rel, None, 0, 300, np.array([0, 100, 200, 0, 150]),
                                np.array([100, 200, 300, 150, 300]), np.array([7, 7, 7, 8, 8]))
    assert (got.alloc_count, got.release_count, got.repeat_count, got.growth_count) == (4, 3, 3, 1)
    assert (got.later_steps, got.repeat_steps) == (3, 2)
    assert got.repeat_steps_pct == pytest.approx(200 / 3)
    # the window [100, 300) counts the calls starting there; the history before it still counts
    got = alloc_m.alloc_repeats(th, t, rel, None, 100, 300)
    assert (got.alloc_count, got.release_count, got.repeat_count, got.repeat_steps_pct) == (2, 2, 2, None)
    # an allocation inside its first operator call never repeats
    got = alloc_m.alloc_repeats(th, t, rel, np.array([0, 0, 1, 0, 0, 0, 0], bool), 0, 300)
    assert (got.repeat_count, got.growth_count, got.first_call_count) == (2, 2, 1)


# ---------------------------------------------------------------------------------------------
# allocator_growth_first_step
# ---------------------------------------------------------------------------------------------
# Step 0 from host time s: layer j at a_j = s + 205j us: cudaMalloc [a_j, a_j+200), launch
# [a_j+200, a_j+205), kernel [a_j+205, a_j+305). The next kernel starts at a_j+410: each of the 19
# gaps between kernels is 105 us, 100 us of it in cudaMalloc (until a_j+405) and 5 us launch.
# After the 20 layers (s+4100) item(): copy at kernel 19's end s+19*205+305 = s+4200, 1 us;
# cudaStreamSynchronize returns at s+4203 = end of step 0.
# Steps 1-3 from s': 20 launches 5 us apart, kernels back to back [s'+5, s'+2005), copy
# [s'+2005, s'+2006), sync returns s'+2008: 2,008 us each.
GROWTH_STEP0_US = 4203
GROWTH_STEP_US = 2008


def test_allocator_growth_first_step_is_setup_not_churn(tmp_path):
    """With ProfilerStep ranges the window is the 4 steps: 4,203 + 3 x 2,008 = 10,227 us. GPU idle
    in cudaMalloc: the first one [s, s+200) (the window starts at the step) + 19 x 100 =
    2,100 us = 2.1 ms, 20.53% of the window. 20 allocations, no free: 0 repeats, 20 growth; later
    steps 3, none with a repeat. allocation-churn quiet; one-time-setup counts the 2.1 ms."""
    r = _run(tmp_path, AS.allocator_growth_first_step())
    v = r["metrics"]["values"]
    window_ms = (GROWTH_STEP0_US + 3 * GROWTH_STEP_US) / 1000
    assert v["window_ms"] == pytest.approx(window_ms, abs=A)
    assert v["idle_alloc_ms"] == pytest.approx(2.1, abs=A)
    assert (v["alloc_count"], v["alloc_release_count"], v["alloc_repeat_count"], v["alloc_growth_count"]) == (20, 0, 0, 20)
    assert (v["alloc_repeat_steps"], v["alloc_repeat_steps_pct"]) == (0, 0.0)
    assert v["alloc_growth_ms"] == pytest.approx(2.1, abs=A)
    found = _rules(r)
    assert "allocation-churn" not in found
    setup = found["one-time-setup"]
    assert setup["impact_ms"] == pytest.approx(2.1, abs=A)
    assert "memory allocator grew (20 allocation call(s)" in setup["message"]


def test_allocator_growth_without_markers_was_called_churn(tmp_path):
    """The cold forward with no step markers (the unseen Switch-Transformer): the window starts at
    the first kernel (s+205), so the first cudaMalloc is before it: 19 allocations in the window,
    19 x 100 us = 1.9 ms of GPU idle in them, window 4,203 - 205 + 3 x 2,008 - 2 = 10,020 us (it
    ends at the last copy's end, 2 us before the last sync returns): 18.96%. The old condition
    (idle >= 1% and no steps) fired; no allocation repeats, so it is set-up now."""
    r = _run(tmp_path, AS.allocator_growth_first_step(markers=False))
    v = r["metrics"]["values"]
    assert v["window_ms"] == pytest.approx((GROWTH_STEP0_US - 205 + 3 * GROWTH_STEP_US - 2) / 1000, abs=A)
    assert v["idle_alloc_ms"] == pytest.approx(1.9, abs=A)
    assert v["idle_alloc_pct"] >= 1 and v["alloc_steps_pct"] is None  # what fired before
    assert (v["alloc_count"], v["alloc_repeat_count"], v["alloc_repeat_steps_pct"]) == (19, 0, None)
    found = _rules(r)
    assert "allocation-churn" not in found
    assert found["one-time-setup"]["impact_ms"] == pytest.approx(1.9, abs=A)


# ---------------------------------------------------------------------------------------------
# cublas_workspace_first_call
# ---------------------------------------------------------------------------------------------
# Weights cudaMalloc [0, 200) us from T0 (h = 200). Iteration 0: aten::embedding enters (+1), launch
# [h+1, h+6), kernel [h+6, h+106); exit +1, aten::addmm enters +1: 3 x (cudaFree 300 + cudaMalloc
# 200) [h+8, h+1508); launch [h+1508, h+1513), GEMM [h+1513, h+2013). The gap [h+106, h+1513):
# 1,402 us in allocation calls, 5 us launch. Later iterations are queued back to back (host 14 us
# per iteration, GPU 600 us): the GPU ends 19 x 600 us later at h+13413, item()'s copy h+13414.
# Window [h+6, h+13414) = 13,408 us. Thread's calls: malloc, then free/malloc x 3: each of those 3
# mallocs follows a free after an allocation, but inside the thread's first aten::addmm.
def test_cublas_workspace_in_first_call_is_setup(tmp_path):
    r = _run(tmp_path, AS.cublas_workspace_first_call())
    v = r["metrics"]["values"]
    assert v["window_ms"] == pytest.approx(13.408, abs=A)
    assert v["idle_alloc_ms"] == pytest.approx(1.402, abs=A)
    assert v["idle_alloc_pct"] == pytest.approx(1.402 / 13.408 * 100, abs=A)
    # the weights' cudaMalloc is before the window: 3 allocations and 3 frees in it
    assert (v["alloc_count"], v["alloc_release_count"], v["alloc_first_call_count"]) == (3, 3, 3)
    assert (v["alloc_repeat_count"], v["alloc_growth_count"]) == (0, 3)
    assert v["alloc_growth_ms"] == pytest.approx(1.402, abs=A)
    found = _rules(r)
    assert "allocation-churn" not in found
    assert found["one-time-setup"]["impact_ms"] == pytest.approx(1.402, abs=A)


def test_same_frees_outside_a_first_call_are_churn(tmp_path):
    """Control for the test above: ``retries`` free/malloc pairs in every aten::addmm would be
    churn. With retries=1 and 20 iterations: 20 allocations each after a free, the first inside
    the first call (not a repeat): 19 repeats >= 3 (no steps), and the GPU waits in them."""
    r = _run(tmp_path, AS.cublas_workspace_first_call(retries=1, every_call=True))
    v = r["metrics"]["values"]
    assert (v["alloc_count"], v["alloc_first_call_count"], v["alloc_repeat_count"]) == (20, 1, 19)
    assert v["alloc_growth_ms"] is None
    assert "allocation-churn" in _rules(r)


# ---------------------------------------------------------------------------------------------
# allocator_churn (golden scenario) still fires
# ---------------------------------------------------------------------------------------------
def test_allocator_churn_still_fires(tmp_path):
    """4 steps x 20 x (kernel, cudaFree, cudaMalloc): the first cudaFree has no allocation before
    it, so 80 allocations of which 79 follow a free; later steps 3, all with repeats (100%).
    Impact 32 ms (allocation-churn.cases.yaml); no allocator growth counted as set-up."""
    r = _run(tmp_path, SC.allocator_churn())
    v = r["metrics"]["values"]
    assert (v["alloc_count"], v["alloc_release_count"], v["alloc_repeat_count"], v["alloc_growth_count"]) == (80, 80, 79, 1)
    assert (v["alloc_repeat_steps"], v["alloc_repeat_steps_pct"]) == (3, 100.0)
    assert v["alloc_growth_ms"] is None
    f = _rules(r)["allocation-churn"]
    assert f["impact_ms"] == pytest.approx(32.0, abs=A)
    assert "79 allocations followed a free" in f["message"]


def test_only_the_threads_that_launch_gpu_work_count(tmp_path):
    """The main thread launches 10 kernels of 100 us and allocates once (cudaMalloc [0, 200) us,
    before the first launch, so before the window); a helper thread that launches nothing frees
    and allocates 5 times while the kernels run (from 300 us). Only launching threads count: no
    allocation or release in the window, nothing repeats; the helper's 5 repeats would be
    churn-shaped if it counted."""
    from nsysdoc.testing.builder import Capture

    cap = Capture()
    proc = cap.process(pid=4630)
    main = proc.thread()
    main.malloc(us=200)
    for _ in range(10):
        main.launch(SC.ELEMENTWISE, 100)
    main.item()
    helper = proc.thread(tid=4631)
    helper.at(cap.start_ns + 300_000)  # kernels run [205, 1205) us: inside the window
    helper.malloc(us=20)
    for _ in range(5):
        helper.free(us=20)
        helper.malloc(us=20)
    r = _run(tmp_path, cap)
    v = r["metrics"]["values"]
    assert v["alloc_call_count"] == 11  # the helper's calls are in the window (any thread)
    assert (v["alloc_count"], v["alloc_release_count"], v["alloc_repeat_count"]) == (0, 0, 0)


def _growth_then_one_repeat():
    """Four ProfilerStep#N steps of 20 x (100 us kernel); step 0 grows the allocator (a 200 us
    cudaMalloc before each launch), step 2 frees and allocates once (a 300 us cudaFree and a 200 us
    cudaMalloc before its first launch); every step ends with ``loss.item()``."""
    cap = SC.Capture()
    t = cap.process(pid=4610).thread()
    for i in range(4):
        with t.range(f"ProfilerStep#{i}"):
            for j in range(20):
                if i == 0:
                    t.malloc(us=200)
                if i == 2 and j == 0:
                    t.free(us=300)
                    t.malloc(us=200)
                t.launch(SC.ELEMENTWISE, 100)
            t.item()
    return cap


def test_growth_with_one_later_repeat_is_still_setup(tmp_path):
    """Review of issue 46: one repeat made all of the allocation idle neither churn nor set-up.

    Step 0 (the window starts at its range start): the GPU idles through the first cudaMalloc
    (200 us) and, between kernels, through each later one: a kernel launched at host time a runs
    [a+5, a+105); the host is in the next cudaMalloc [a+5, a+205), so 100 us of it leaves the GPU
    idle: 200 + 19 x 100 = 2,100 us of growth. Step 2: after the previous step's item() the GPU
    waits through the cudaFree and the cudaMalloc, 300 + 200 = 500 us: the one repeat (1 of the 3
    later steps, 33% < 50%: no churn). alloc_growth_ms = 2.6 - 0.5 = 2.1 ms, and it is set-up."""
    r = _run(tmp_path, _growth_then_one_repeat())
    v = r["metrics"]["values"]
    assert v["alloc_repeat_count"] == 1
    assert v["idle_alloc_ms"] == pytest.approx(2.6, abs=0.01)
    assert v["alloc_growth_ms"] == pytest.approx(2.1, abs=0.01)
    rules = _rules(r)
    assert "allocation-churn" not in rules
    assert rules["one-time-setup"]["impact_ms"] == pytest.approx(2.1, abs=0.01)
