"""The frame's review (issue 44): situations a reviewer built against the first version of the
step partition, the marker check and the inference, each named after what the program did, with
what the glossary says must come out ("Steps and the analysis window").

Timing model of the builder (docs/testing.md): a launch call takes 5 µs and its kernel starts at
API start + 0.6 x 5 + 2 = +5 µs, or when its stream is free; ``item()`` is a tiny device-to-host
copy and a stream sync that returns 2 µs after the GPU finishes. Where a number depends on that
model's microseconds only, the test states the bound it checks and why.
"""
from __future__ import annotations

import contextlib

import pytest

from nsysdoc.testing import Capture
from nsysdoc.testing.scenarios import ELEMENTWISE, GEMM, launch_each

from .conftest import diagnose_path

approx = pytest.approx
MS = 1_000_000


def report(cap: Capture, tmp_path, name: str, **kw) -> dict:
    return diagnose_path(cap.write(tmp_path / f"{name}.sqlite"), **kw)


def primary(r: dict) -> list[dict]:
    return [s for s in r["steps"] if s["primary"]]


def finding(r: dict, rule: str):
    return next((f for f in r["findings"] if f["rule"] == rule), None)


# --------------------------------------------------------------------------------------------
def host_ahead_then_a_short_last_step() -> Capture:
    """Six ProfilerSteps that each queue 20 GEMMs of 500 µs (10 ms of GPU work) in about 0.6 ms of
    host time and never sync, then the profiler's short last step (50 µs of Python): the host runs
    ahead and the GPU drains its queue after the last step's range has ended."""
    cap = Capture()
    t = cap.process(pid=100).thread()
    for i in range(6):
        with t.range(f"ProfilerStep#{i}"):
            t.os_call("poll", us=500)
            for _ in range(20):
                launch_each(t, (GEMM, 500))
    with t.range("ProfilerStep#6"):
        t.cpu(us=50)
    t.sync_device()
    return cap


def test_a_short_last_step_after_queued_work_keeps_the_gpu_work_in_the_window(tmp_path):
    r = report(host_ahead_then_a_short_last_step(), tmp_path, "ahead")
    # 120 GEMMs of 0.5 ms run back to back from the first kernel (the 500 µs poll, 10 µs of Python
    # before the launch call, +5 µs in it: T0 + 515 µs): the GPU span is 60 ms. The last step ends
    # where the GPU work launched in any step of its thread ends, so the window (the steps) holds
    # all of it: [T0, T0 + 0.515 + 60 ms)
    span = r["capture"]["span"]
    assert span["duration_ms"] == approx(60.0, abs=1e-6)
    w = r["capture"]["window"]
    assert w["kind"] == "steps" and w["end_ns"] == span["end_ns"]
    assert w["duration_ms"] == approx(60.515, abs=1e-6)
    # the GPU is busy 60 of the 60.515 ms: judged, compute-bound (not "too little GPU work")
    assert r["capture"]["enough_gpu_work"] is True
    assert r["verdict"]["headline"] == "compute-bound"


def weight_upload_then_profiler_steps() -> Capture:
    """``init_model`` copies 20 x 680 MiB from pageable memory (4.7 s), then 10 ProfilerSteps of a
    2 ms input wait, 20 GEMMs of 2 ms and ``loss.item()``."""
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("init_model"):
        for _ in range(20):
            t.memcpy("HtoD", 680 << 20, asynchronous=False, pageable=True)
    for i in range(10):
        with t.range(f"ProfilerStep#{i}"):
            t.os_call("poll", us=2000)
            for _ in range(20):
                launch_each(t, (GEMM, 2000))
            t.item()
    return cap


def test_markers_after_a_weight_upload_are_kept(tmp_path):
    r = report(weight_upload_then_profiler_steps(), tmp_path, "upload")
    cap = r["capture"]
    # the upload holds 93% of the GPU time, but it is launched before the first marker: the
    # markers hold all the GPU work launched from their first start to their last end
    assert cap["steps_set_aside"] is None and cap["step_source"] == "markers"
    assert r["summary"]["step_count"] == 10
    # a step: 2 ms of input wait + 40 ms of GEMMs + the item() copy and sync (microseconds)
    assert 42.0 < r["summary"]["step_time_ms_median"] < 42.1
    assert cap["window"]["kind"] == "steps"


def per_iteration_loop_named_range() -> Capture:
    """No step markers; each of 12 iterations: a 1 ms input wait, then a ``train_forward_backward``
    range holding an H2D copy, 60 GEMMs of 500 µs and ``loss.item()``."""
    cap = Capture()
    t = cap.process(pid=100).thread()
    for _ in range(12):
        t.os_call("poll", us=1000)
        with t.range("train_forward_backward"):
            t.memcpy("HtoD", 6_000_000, pageable=False)
            for _ in range(60):
                launch_each(t, (GEMM, 500))
            t.item()
    return cap


def test_a_loop_named_range_that_recurs_never_cuts_the_window(tmp_path):
    r = report(per_iteration_loop_named_range(), tmp_path, "loopname")
    cap = r["capture"]
    # "train_forward_backward" occurs 12 times: per iteration, no range around the loop
    assert not [x for x in cap["excluded"] if x["kind"] == "before the loop range"]
    assert cap["window"]["kind"] == "gpu-span"
    # the 12 iterations are inferred (1 copy + 60 GEMMs + the item() copy = 62 operations)
    (p,) = cap["steps_inferred"]["processes"]
    assert (p["period_ops"], p["steps"], p["anchor"]) == (62, 12, "memcpy HtoD")


def steps_inside_an_outer_training_range(outer: str | None) -> Capture:
    """8 ``train_step`` ranges (3 ms input wait, 10 GEMMs of 400 µs, item()), optionally inside
    one outer range."""
    cap = Capture()
    t = cap.process(pid=100).thread()
    with (t.range(outer) if outer else contextlib.nullcontext()):
        for _ in range(8):
            with t.range("train_step"):
                t.os_call("poll", us=3000)
                for _ in range(10):
                    launch_each(t, (GEMM, 400))
                t.item()
    return cap


@pytest.mark.parametrize("outer", [None, "training", "benchmark"])
def test_an_outer_range_does_not_hide_the_step_ranges_inside_it(tmp_path, outer):
    r = report(steps_inside_an_outer_training_range(outer), tmp_path, f"outer_{outer}")
    cap = r["capture"]
    # "training" (step-like, but once) is no step: the repeating "train_step" ranges are
    assert cap["step_source"] == "markers" and cap["steps_found_by"] == "name"
    assert [s["name"] for s in primary(r)] == ["train_step"] * 8
    # 3 ms of input wait per 7.018 ms step: 8 x 3 = 24 ms of input idle
    assert finding(r, "data-starvation")["impact_ms"] == approx(24.0, abs=1e-3)


def train_and_eval_steps() -> Capture:
    """6 ``train_step`` ranges (3 ms input wait, 20 GEMMs of 500 µs, item()) and after every
    second one an ``eval_step`` (4 GEMMs of 200 µs, item())."""
    cap = Capture()
    t = cap.process(pid=100).thread()
    for i in range(6):
        with t.range("train_step"):
            t.os_call("poll", us=3000)
            for _ in range(20):
                launch_each(t, (GEMM, 500))
            t.item()
        if i % 2 == 1:
            with t.range("eval_step"):
                for _ in range(4):
                    launch_each(t, (GEMM, 200))
                t.item()
    return cap


def test_two_step_like_names_are_not_mixed(tmp_path):
    r = report(train_and_eval_steps(), tmp_path, "train_eval")
    # per thread one name: the one whose ranges last longest in all (train_step, 6 x ~13 ms,
    # against 3 x ~0.8 ms)
    assert [s["name"] for s in primary(r)] == ["train_step"] * 6
    # every train step waits 3 ms for input: 3.0 ms per step (not diluted by the eval steps)
    assert finding(r, "data-starvation")["impact_ms_per_step"] == approx(3.0, abs=1e-3)


def worker_thread_iteration_ranges() -> Capture:
    """The main thread's 8 ProfilerSteps (2 ms input wait, 20 GEMMs of 500 µs, item()); a
    pin-memory thread marks 30 short ``iteration N`` ranges of its own and does no CUDA work."""
    cap = Capture()
    p = cap.process(pid=100)
    t = p.thread()
    w = p.thread(tid=101, name="pin_memory")
    for i in range(8):
        with t.range(f"ProfilerStep#{i}"):
            t.os_call("poll", us=2000)
            for _ in range(20):
                launch_each(t, (GEMM, 500))
            t.item()
    w.at(cap.start_ns)
    for j in range(30):
        with w.range(f"iteration {j}"):
            w.cpu(us=300)
        w.cpu(us=3000)
    return cap


def test_another_threads_markers_are_tried_before_setting_markers_aside(tmp_path):
    r = report(worker_thread_iteration_ranges(), tmp_path, "worker")
    cap = r["capture"]
    # the worker's 30 ranges outnumber the 8 ProfilerSteps, but hold 0% of the GPU work launched
    # from the first to the last of them: the main thread's markers are used instead
    assert cap["step_source"] == "markers" and cap["steps_set_aside"] is None
    assert [s["name"] for s in primary(r)] == [f"ProfilerStep#{i}" for i in range(8)]


def markers_in_a_process_without_gpu_work() -> Capture:
    """Process 100 marks 5 ProfilerSteps of 100 µs and does no CUDA work; process 200 (no
    markers) runs 100 GEMMs of 1 ms, starting 1 ms later."""
    cap = Capture()
    a = cap.process(pid=100, device=0).thread()
    for i in range(5):
        with a.range(f"ProfilerStep#{i}"):
            a.cpu(us=100)
    b = cap.process(pid=200, device=0).thread()
    b.cpu(us=1000)
    for _ in range(100):
        launch_each(b, (GEMM, 1000))
    b.sync_device()
    return cap


def test_markers_that_frame_no_gpu_work_never_make_no_gpu_activity(tmp_path):
    r = report(markers_in_a_process_without_gpu_work(), tmp_path, "nogpu_markers")
    aside = r["capture"]["steps_set_aside"]
    assert aside is not None and aside["count"] == 5 and aside["gpu_work_pct"] == 0.0
    assert r["verdict"]["headline"] != "no-gpu-activity"
    assert r["summary"]["kernel_count"] == 100
    assert r["capture"]["window"]["duration_ms"] == approx(100.0, abs=1e-6)   # the GPU span


def steps_without_gpu_work_between_steps_with_it() -> Capture:
    """8 ProfilerSteps: the even ones wait 20 ms for input and run 20 GEMMs of 500 µs and
    item(); the odd ones run 1 ms of Python and launch nothing (a logging step)."""
    cap = Capture()
    t = cap.process(pid=100).thread()
    for i in range(8):
        with t.range(f"ProfilerStep#{i}"):
            if i % 2 == 0:
                t.os_call("poll", us=20000)
                for _ in range(20):
                    launch_each(t, (GEMM, 500))
                t.item()
            else:
                t.cpu(us=1000)
    return cap


def test_a_step_that_launched_nothing_still_counts_in_the_cost_per_step(tmp_path):
    r = report(steps_without_gpu_work_between_steps_with_it(), tmp_path, "empty_steps")
    steps = primary(r)
    # every primary step has a breakdown (the odd ones: on the process's device, all idle)
    assert len(steps) == 8 and all(s["breakdown_ms"] for s in steps)
    f = finding(r, "data-starvation")
    # 4 waits of 20 ms: 80 ms in the window, 80 / 8 = 10 ms per step (not 80 / 4 = 20)
    assert f["impact_ms"] == approx(80.0, abs=1e-3)
    assert f["impact_ms_per_step"] == approx(10.0, abs=1e-3)
    assert f["impact_ms_per_step"] <= r["summary"]["step_time_ms_mean"]


def one_step_then_part_of_the_next() -> Capture:
    """One training step without markers (12 layers forward, 12 backward with dgrad/wgrad, then 4
    AdamW kernels), then the next step's forward cut after 7 of its 12 layers."""
    cap = Capture()
    t = cap.process(pid=6000).thread()
    fwd = (("gemm_fwd", 300), ("softmax_fwd", 60))
    bwd = (("sm90_gemm_dgrad_kernel", 300), ("sm90_gemm_wgrad_kernel", 300))
    for _ in range(12):
        launch_each(t, *fwd)
    for _ in range(12):
        launch_each(t, *bwd)
    for _ in range(4):
        launch_each(t, ("multi_tensor_apply_kernel_adamw", 100))
    for _ in range(7):
        launch_each(t, *fwd)
    t.sync_device()
    return cap


def test_one_step_and_part_of_the_next_is_not_one_step(tmp_path):
    r = report(one_step_then_part_of_the_next(), tmp_path, "partial")
    # the optimizer is followed by 14 launches of the next forward: more than max(5, 2% of 66)
    inf = r["capture"]["steps_inferred"]
    assert inf is None or inf["method"] != "one training step"
    assert r["summary"]["step_count"] == 0 or inf["method"] == "kernel sequence period"


def partly_marked_run() -> Capture:
    """30 iterations (4 ms input wait, an H2D copy, 20 GEMMs of 500 µs, item()); only iterations
    10-14 are inside ProfilerStep ranges."""
    cap = Capture()
    t = cap.process(pid=100).thread()
    for i in range(30):
        with (t.range(f"ProfilerStep#{i}") if 10 <= i < 15 else contextlib.nullcontext()):
            t.os_call("poll", us=4000)
            t.memcpy("HtoD", 6_000_000, pageable=False)
            for _ in range(20):
                launch_each(t, (GEMM, 500))
            t.item()
    return cap


def test_five_marked_steps_of_thirty_are_the_steps(tmp_path):
    r = report(partly_marked_run(), tmp_path, "partly")
    cap = r["capture"]
    # the 5 markers hold all the GPU work launched from the first to the last of them
    assert cap["step_source"] == "markers" and cap["steps_set_aside"] is None
    assert r["summary"]["step_count"] == 5
    # the same run with an explicit --step-marker: used as given (and never set aside)
    r2 = report(partly_marked_run(), tmp_path, "partly2", step_pattern=r"ProfilerStep#\d+")
    assert r2["summary"]["step_count"] == 5 and r2["capture"]["steps_set_aside"] is None


def test_an_explicit_step_marker_is_never_set_aside_but_its_low_share_is_said(tmp_path):
    # markers_in_a_process_without_gpu_work with --step-marker: the 5 markers hold 0% of the GPU
    # work, yet they are what the user asked for: used, and the capture-quality notes say so
    r = report(markers_in_a_process_without_gpu_work(), tmp_path, "explicit", step_pattern=r"ProfilerStep#\d+")
    assert r["capture"]["steps_set_aside"] is None and r["capture"]["step_source"] == "markers"
    assert any("--step-marker hold only 0.0%" in w for w in r["capture"]["warnings"])


def bounded_launch_queue_loop(queue: int = 250, iterations: int = 20) -> Capture:
    """No markers; the host runs ahead of the GPU until the launch queue holds ``queue``
    operations (then each launch waits for the operation ``queue`` places earlier to finish, as
    the CUDA launch queue does). Each iteration: a 300 µs input wait, a 1 MB H2D copy, 100 kernels
    (a 4-kernel layer of 200, 60, 80 and 60 µs) with 10 µs of Python before each."""
    cap = Capture()
    t = cap.process(pid=100).thread()
    layer = ((GEMM, 200.0), (ELEMENTWISE, 60.0), ("softmax_fwd", 80.0), (ELEMENTWISE, 60.0))
    ends: list[int] = []

    def throttle():  # Thread.at never moves the clock backwards
        if len(ends) >= queue:
            t.at(ends[-queue])

    for _ in range(iterations):
        t.os_call("poll", us=300)
        throttle()
        ends.append(t.memcpy("HtoD", 1_000_000, pageable=False).end)
        for k in range(100):
            throttle()
            t.cpu(us=10)
            ends.append(t.launch(*layer[k % 4]).end)
    t.sync_device()
    return cap


def test_a_loop_throttled_by_the_launch_queue_tiles(tmp_path):
    r = report(bounded_launch_queue_loop(), tmp_path, "queue")
    # the last unit runs to the end of the queued work; its length is not held against the units
    # (its operations are: 101, like the others)
    (p,) = r["capture"]["steps_inferred"]["processes"]
    assert (p["period_ops"], p["steps"], p["anchor"]) == (101, 20, "memcpy HtoD")
    # per iteration the GPU runs 25 x (200 + 60 + 80 + 60) = 10,000 µs of kernels and the
    # 1 MB copy (~83 µs at the builder's 12 GB/s): a step is the GPU's pace, about 10.08 ms
    assert 10.0 < r["summary"]["step_time_ms_median"] < 10.2


def marked_and_unmarked_processes() -> Capture:
    """Process 100 (GPU 0): 6 ProfilerSteps of an 8 ms input wait, 8 GEMMs of 500 µs and item();
    process 200 (GPU 1, no markers) keeps its GPU busy with 120 GEMMs of 600 µs meanwhile."""
    cap = Capture(gpu_names={0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H100 80GB HBM3"})
    a = cap.process(pid=100, device=0).thread()
    for i in range(6):
        with a.range(f"ProfilerStep#{i}"):
            a.os_call("poll", us=8000)
            for _ in range(8):
                launch_each(a, (GEMM, 500))
            a.item()
    b = cap.process(pid=200, device=1).thread()
    for _ in range(120):
        b.launch(GEMM, 600)
        b.cpu(us=5)
    b.sync_device()
    return cap


def ranks_with_unequal_step_counts() -> Capture:
    """Two processes on two GPUs: 10 steps of a 1 ms input wait and 8 GEMMs of 500 µs on one, 3
    steps of a 15 ms wait and the same GEMMs on the other."""
    cap = Capture(gpu_names={0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H100 80GB HBM3"})
    for pid, dev, steps, wait in ((100, 0, 10, 1000), (200, 1, 3, 15000)):
        t = cap.process(pid=pid, device=dev).thread()
        for i in range(steps):
            with t.range(f"ProfilerStep#{i}"):
                t.os_call("poll", us=wait)
                for _ in range(8):
                    launch_each(t, (GEMM, 500))
                t.item()
    return cap


@pytest.mark.parametrize("build", [marked_and_unmarked_processes, ranks_with_unequal_step_counts])
def test_cost_per_step_times_the_step_count_never_exceeds_the_cost(tmp_path, build):
    r = report(build(), tmp_path, build.__name__)
    f = finding(r, "data-starvation")
    n = r["summary"]["step_count"]
    # the input waits: 6 x 8 ms on GPU 0 and none on GPU 1: 24 ms per GPU (mean over both);
    # or 10 x 1 + 3 x 15 = 55 ms over two GPUs: 27.5 ms. The cost per step times the step count
    # (6, or 10: the most steps on one thread) is never more than that
    assert f["impact_ms"] == approx({"marked_and_unmarked_processes": 24.0,
                                     "ranks_with_unequal_step_counts": 27.5}[build.__name__], abs=1e-3)
    assert f["impact_ms_per_step"] * n <= f["impact_ms"] + 1e-3


def test_the_step_time_note_counts_job_steps(tmp_path):
    from nsysdoc.views.build import headline

    r = report(ranks_with_unequal_step_counts(), tmp_path, "note")
    step = next(h for h in headline(r) if h.key == "step_time_ms_median")
    # 10 job steps (indices 0-9; 3 of them on both processes), not "6 steps x 2 processes"
    assert step.note == "median over 10 job steps of 2 processes (the slowest per step)"
