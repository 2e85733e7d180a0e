"""Critical path of a step (issue 48, milestone 1; ``docs/glossary.md``, "Critical path").

Every expected number is computed by hand from the scenario code
(``nsysdoc/testing/critical_path_scenarios.py``) and the builder's timing model
(``nsysdoc/testing/builder.py``, header of ``tests/test_judgement_scenarios.py``); never from the
tool. ``S`` is a step's start. Timing model used below:

* ``launch(us, api_us=5)`` at host time ``a``: call ``[a, a+5000)``; kernel at ``max(a+5000, free)``.
* ``nccl(us)`` = a launch with ``api_us=8``: call ``[a, a+8000)``; kernel at ``max(a+6800, free)``.
* ``memcpy(api_us=6)`` at ``a``: call ``[a, a+6000)``; copy at ``max(a+5600, free)``, ``nbytes/12`` ns (pinned).
* ``wait_event``: ``cudaEventRecord`` 2 us + ``cudaStreamWaitEvent`` 2 us on the host; the waiting
  stream is free no earlier than the other stream.
* ``sync_stream``/``sync_device`` at ``a``: call ``[a, max(a+3000, free+2000))``.
* Each step's range ends when its closing sync returns and the next starts there, so every step
  is the same and its step time is its sync's end minus its start.

Path rules (glossary): walk back from the step end through the predecessor that arrived last; the
edge from a launch call's *start* to its operation's start is ``launch``, a blocking sync's time
after the awaited operation ended is ``wait``, host time between calls is ``cpu``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.metrics import critical_path as cp  # noqa: E402
from nsysdoc.testing.critical_path_scenarios import CP_SCENARIOS  # noqa: E402
from tests.conftest import diagnose_path  # noqa: E402

A = 6e-5  # JSON rounds to 4 decimals


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    d = tmp_path_factory.mktemp("critical-path")
    return {n: diagnose_path(f().write(d / f"{n}.sqlite")) for n, f in CP_SCENARIOS.items()}


def path_of(r: dict, step: int = 1) -> dict:
    (row,) = [s for s in r["metrics"]["critical_path"]["steps"] if s["step"] == step]
    return row


def seg(row: dict) -> dict:
    return {k: v for k, v in row["segments_ms"].items() if v}


def top(r: dict) -> dict:
    return {(x["name"], x["kind"]): x["ms_per_step"] for x in r["metrics"]["critical_path"]["top"]}


def test_copy_stream_feeds_compute_runs_through_the_copy(reports):
    """Step at S: copy call [S, S+6000), copy [S+5600, S+1_005_600) (12 MB / 12 B/ns = 1 ms);
    record+wait [S+6000, S+10000); GEMM call [S+10000, S+15000), GEMM at max(S+15000, copy end
    S+1_005_600) to S+1_305_600; sync [S+15000, S+1_307_600): step 1.3076 ms.
    Walk back: sync's tail after the GEMM: wait 2000; GEMM 300_000 (kernel); its launch (S+10000)
    and stream predecessor (last step's GEMM) arrived 995_600 ns before it started (> 20 us): the
    op on another stream that ended last before it is the copy (S+1_005_600, no gap); copy
    1_000_000 (copy); its launch call started at S: launch 5600. Sum 1_307_600."""
    r = reports["copy_stream_feeds_compute"]
    row = path_of(r)
    assert row["length_ms"] == pytest.approx(1.3076, abs=A)
    assert seg(row) == pytest.approx({"launch": 0.0056, "kernel": 0.3, "copy": 1.0, "wait": 0.002}, abs=A)
    t = top(r)
    assert t[("memcpy", "copy")] == pytest.approx(1.0, abs=A)


def test_launch_bound_loop_path_is_host_time_and_launches(reports):
    """50 x (40 us Python, 4 us kernel): launch k's call [S+45000k+40000, +5000), kernel
    [S+45000k+45000, +4000) (the stream is free: the previous kernel ended 41 us earlier). Kernel 49
    ends S+2_254_000, sync [S+2_250_000, S+2_256_000): step 2.256 ms.
    Walk: wait 2000 (sync tail), kernel 49: 4000, its launch call started 5000 before it: launch
    5000; then the host: 50 gaps of 40_000 (cpu 2_000_000; the first from the step start) and
    launch calls 0..48 of 5000 (launch 245_000). launch = 250_000 in all; sum 2_256_000."""
    row = path_of(reports["launch_bound_loop"])
    assert row["length_ms"] == pytest.approx(2.256, abs=A)
    assert seg(row) == pytest.approx({"cpu": 2.0, "launch": 0.25, "kernel": 0.004, "wait": 0.002}, abs=A)


def test_input_wait_at_step_start_opens_the_path(reports):
    """5 ms of host time, then 3 GEMMs of 500 us launched back to back: calls at S+5_000_000,
    +5_005_000, +5_010_000; GEMMs [S+5_005_000, S+6_505_000) back to back; sync to S+6_507_000.
    Walk: wait 2000; the three GEMMs through stream order (1_500_000); GEMM 0's launch call started
    5000 before it (launch 5000); that call's thread predecessor is the last step's sync (ended
    at S): cpu 5_000_000, the start of the path."""
    r = reports["input_wait_at_step_start"]
    row = path_of(r)
    assert row["length_ms"] == pytest.approx(6.507, abs=A)
    assert seg(row) == pytest.approx({"cpu": 5.0, "launch": 0.005, "kernel": 1.5, "wait": 0.002}, abs=A)


def test_exposed_nccl_is_on_the_path(reports):
    """GEMM [S+5000, S+505_000); record+wait [S+5000, S+9000); all-reduce call [S+9000, S+17000),
    kernel at max(S+15800, S+505_000) for 800 us to S+1_305_000; record+wait [S+17000, S+21000);
    Adam call [S+21000, S+26000), kernel [S+1_305_000, S+1_505_000); sync to S+1_507_000.
    Walk: wait 2000; Adam 200_000; it started 800 us after both its launch and its stream
    predecessor (the GEMM): its producer is the all-reduce (comm 800_000), which waited 496 us after
    its launch: its producer is the GEMM (500_000); GEMM's launch at S: launch 5000."""
    r = reports["nccl_exposed"]
    row = path_of(r)
    assert row["length_ms"] == pytest.approx(1.507, abs=A)
    assert seg(row) == pytest.approx({"launch": 0.005, "kernel": 0.7, "comm": 0.8, "wait": 0.002}, abs=A)
    assert [k for k in top(r) if k[1] == "comm"]


def test_overlapped_nccl_is_off_the_path(reports):
    """GEMM a [S+5000, S+505_000); all-reduce [S+505_000, S+905_000) on stream 13; GEMM b (1 ms,
    launched at S+17000) [S+505_000, S+1_505_000) on stream 7; Adam [S+1_505_000, S+1_705_000);
    sync to S+1_707_000. Walk: wait 2000, Adam, GEMM b, GEMM a by stream order (kernel 1_700_000),
    launch 5000. The all-reduce ended 600 us before Adam's stream was free: not on the path."""
    r = reports["nccl_overlapped"]
    row = path_of(r)
    assert row["length_ms"] == pytest.approx(1.707, abs=A)
    assert seg(row) == pytest.approx({"launch": 0.005, "kernel": 1.7, "wait": 0.002}, abs=A)
    assert not [k for k in top(r) if k[1] == "comm"]


def test_long_kernel_on_a_side_stream_is_off_the_path(reports):
    """Side kernel (2 ms, stream 9) call [S, S+5000), kernel [S+5000, S+2_005_000); four 1 ms GEMMs
    (stream 7), calls from S+5000 every 5000, kernels [S+10_000, S+4_010_000) back to back;
    device sync to S+4_012_000. Walk: wait 2000, GEMMs 4_000_000, GEMM 0's launch edge 5000; its
    call's thread predecessor is the side kernel's call (5000, launch) that started at S.
    launch 10_000. The 2 ms side kernel, the longest kernel, has no time on the path."""
    r = reports["long_kernel_off_path"]
    row = path_of(r)
    assert row["length_ms"] == pytest.approx(4.012, abs=A)
    assert seg(row) == pytest.approx({"launch": 0.01, "kernel": 4.0, "wait": 0.002}, abs=A)
    assert not [k for k in top(r) if k[0].startswith("void side_stream")]


@pytest.mark.parametrize("name", sorted(CP_SCENARIOS))
def test_every_step_path_is_the_step_time(reports, name):
    """Length = step time (the step's duration), segments sum to it, none negative, and each top
    item's time per step is no more than the mean path length."""
    r = reports[name]
    cpm = r["metrics"]["critical_path"]
    dur = {s["step"]: s["duration_ms"] for s in r["steps"] if s["primary"]}
    assert {s["step"] for s in cpm["steps"]} == set(dur)
    for s in cpm["steps"]:
        assert s["length_ms"] == pytest.approx(dur[s["step"]], abs=1e-3)
        assert sum(s["segments_ms"].values()) == pytest.approx(s["length_ms"], abs=A * 6)
        assert min(s["segments_ms"].values()) >= 0
    mean = sum(s["length_ms"] for s in cpm["steps"]) / len(cpm["steps"])
    assert all(x["ms_per_step"] <= mean + A for x in cpm["top"])
    assert cpm["median_step"]["step"] == r["metrics"]["step_picks"]["median_step"]


# the graph on arrays -----------------------------------------------------------------------------
def graph(calls, ops, procs=None):
    """``calls``: (start, end, thread, kind, key); ``ops``: (start, end, stream, seg, key); with
    ``procs`` (each call's process), an operation's process is its stream number."""
    c = np.array(calls, dtype=np.int64).reshape(-1, 5)
    o = np.array(ops, dtype=np.int64).reshape(-1, 5)
    return cp.build_graph(c[:, 0], c[:, 1], c[:, 2], c[:, 3], c[:, 4], o[:, 0], o[:, 1], o[:, 2], o[:, 3],
                          np.arange(len(o)), o[:, 4], c_proc=procs, o_proc=None if procs is None else o[:, 2])


def test_thread_hand_off_follows_the_thread_that_woke_the_idle_one():
    """Main thread (0): a call [0, 100), then a call [4_000, 4_100) (3.9 us of Python between).
    Backward thread (1): its last call ended at -10_000_000 (before the window), then a launch call
    [5_000, 6_000) of a kernel [7_000, 9_000). Window [0, 9_000).
    Walk: kernel 2000; launch edge from the call's start 5000 -> 7000: 2000; the backward thread
    was idle 10 ms (> THREAD_IDLE_NS) before its call, so the call follows the main thread's call
    that ended last before 5000 (ended 4100): cpu 900; that call 100 (cpu, a plain call); host
    order back to the first call's end (100): cpu 3900; first call 100 (cpu). Sum 9000: cpu 5000,
    launch 2000, kernel 2000. Without the hand-off the path would cover [0, 5000) as the backward
    thread's own host time, and the same numbers would hold only by chance: check the hand-off
    index too."""
    g = graph([(0, 100, 0, cp.CALL_OTHER, 0), (4_000, 4_100, 0, cp.CALL_OTHER, 0),
               (-10_000_100, -10_000_000, 1, cp.CALL_OTHER, 0), (5_000, 6_000, 1, cp.CALL_LAUNCH, 7)],
              [(7_000, 9_000, 0, cp.KERNEL, 7)])
    assert g.call_other.tolist() == [-1, -1, -1, 1]
    p = cp.critical_path(g, 0, 9_000)
    assert dict(zip(cp.SEGMENTS, p.segments_ns.tolist())) == {"cpu": 5000, "launch": 2000, "kernel": 2000,
                                                              "copy": 0, "comm": 0, "wait": 0}
    assert p.call_ns.tolist() == [100, 100, 0, 0]


def test_hand_off_stays_in_its_process():
    """The same calls with the main thread in another process: no hand-off."""
    g = graph([(0, 100, 0, cp.CALL_OTHER, 0), (4_000, 4_100, 0, cp.CALL_OTHER, 0),
               (-10_000_100, -10_000_000, 1, cp.CALL_OTHER, 0), (5_000, 6_000, 1, cp.CALL_LAUNCH, 7)],
              [(7_000, 9_000, 0, cp.KERNEL, 7)], procs=[0, 0, 1, 1])
    assert g.call_other.tolist() == [-1, -1, -1, -1]
    p = cp.critical_path(g, 0, 9_000)
    # the backward thread's own host time back to the window start: cpu 5000
    assert p.segments_ns.tolist() == [5000, 2000, 2000, 0, 0, 0]


def test_unexplained_stream_wait_without_producer_is_wait():
    """One launch call [0, 1000) of a kernel that ran at [50_000, 60_000): nothing else ended in
    between, so no producer. The launch edge covers from the call's start (0) up to 20 us
    (LAUNCH_LATENCY_NS) after the call's end: launch 21_000; the rest, [21_000, 50_000), the GPU
    waited on something unrecorded: wait 29_000; kernel 10_000."""
    g = graph([(0, 1_000, 0, cp.CALL_LAUNCH, 3)], [(50_000, 60_000, 0, cp.KERNEL, 3)])
    p = cp.critical_path(g, 0, 60_000)
    assert p.segments_ns.tolist() == [0, 21_000, 10_000, 0, 0, 29_000]


def test_empty_and_degenerate_windows():
    """No node: the whole window is host time; an empty window has length 0."""
    g = graph([], [])
    assert cp.critical_path(g, 0, 1000).segments_ns.tolist() == [1000, 0, 0, 0, 0, 0]
    assert cp.critical_path(g, 5, 5).length_ns == 0


def test_report_critical_path_frame(tmp_path):
    """``Report.critical_path``: one row per step of the copy-stream scenario, the columns of
    docs/api.md, the numbers of the JSON (1.3076 ms: launch 0.0056, kernel 0.3, copy 1.0, wait 0.002)."""
    import nsysdoc

    path = CP_SCENARIOS["copy_stream_feeds_compute"]().write(tmp_path / "copy.sqlite")
    df = nsysdoc.report(path, no_config=True, cache=False).critical_path
    assert list(df.columns) == ["step", "start_ns", "length_ms", "cpu_ms", "launch_ms", "kernel_ms", "copy_ms",
                                "comm_ms", "wait_ms"]
    assert df["step"].tolist() == [0, 1, 2]
    row = df.iloc[1]
    assert (row["length_ms"], row["copy_ms"], row["kernel_ms"], row["launch_ms"], row["wait_ms"], row["cpu_ms"]) == \
        pytest.approx((1.3076, 1.0, 0.3, 0.0056, 0.002, 0.0), abs=A)


#: the middle step's path of each scenario, as computed by hand in the tests above
BY_HAND = {
    "copy_stream_feeds_compute": (1.3076, {"launch": 0.0056, "kernel": 0.3, "copy": 1.0, "wait": 0.002}),
    "launch_bound_loop": (2.256, {"cpu": 2.0, "launch": 0.25, "kernel": 0.004, "wait": 0.002}),
    "input_wait_at_step_start": (6.507, {"cpu": 5.0, "launch": 0.005, "kernel": 1.5, "wait": 0.002}),
    "nccl_exposed": (1.507, {"launch": 0.005, "kernel": 0.7, "comm": 0.8, "wait": 0.002}),
    "nccl_overlapped": (1.707, {"launch": 0.005, "kernel": 1.7, "wait": 0.002}),
    "long_kernel_off_path": (4.012, {"launch": 0.01, "kernel": 4.0, "wait": 0.002}),
}


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_pytorch_profiler_form_gives_the_same_path(tmp_path, name):
    """The same captures written as PyTorch Profiler traces (launch by correlation id / flow,
    ``cuda_runtime`` calls, sync calls by name): the same paths as computed by hand."""
    path = CP_SCENARIOS[name]().write_kineto(tmp_path / f"{name}.pt.trace.json.gz")
    row = path_of(diagnose_path(path))
    length, segs = BY_HAND[name]
    assert row["length_ms"] == pytest.approx(length, abs=A)
    assert seg(row) == pytest.approx(segs, abs=A)


def test_host_blocking_sync_waits_on_its_own_process():
    """A stream synchronize [0, 10_000) of process 0 while a kernel of process 1 ran [2_000, 9_000)
    and process 0's own kernel ran [1_000, 5_000): the sync waits for its process's kernel (ended
    5000), not the other process's (ended later, 9000)."""
    g = graph([(0, 10_000, 0, cp.CALL_SYNC, 0)],
              [(1_000, 5_000, 0, cp.KERNEL, 0), (2_000, 9_000, 1, cp.KERNEL, 0)], procs=[0])
    assert g.call_await.tolist() == [0]


def _ops_launch_the_path() -> "object":
    """Two steps: ``aten::mm`` launches a 500 us GEMM, then (after its range closed) ``aten::add``
    a 20 us elementwise kernel, then a stream synchronize."""
    from nsysdoc.testing.builder import Capture
    from nsysdoc.testing.scenarios import ELEMENTWISE, GEMM

    cap = Capture()
    t = cap.process(pid=6700).thread()
    for i in range(2):
        with t.range(f"step {i}"):
            with t.op("aten::mm"):
                t.launch(GEMM, 500)
            with t.op("aten::add"):
                t.launch(ELEMENTWISE, 20)
            t.sync_stream(7)
    return cap


@pytest.mark.parametrize("form", ["sqlite", "kineto"])
def test_top_names_the_operator_that_launched_each_kernel(tmp_path, form):
    """Each kernel runs back to back after its launch (the GEMM from its launch edge, the
    elementwise kernel after the GEMM by stream order): both are on the path with their whole
    time, 0.5 and 0.02 ms per step, and each is named with the operator open at its launch call."""
    cap = _ops_launch_the_path()
    path = cap.write(tmp_path / "ops.sqlite") if form == "sqlite" else cap.write_kineto(tmp_path / "ops.pt.trace.json.gz")
    top = diagnose_path(path)["metrics"]["critical_path"]["top"]
    got = {(x["kind"], x["op"]): x["ms_per_step"] for x in top}
    assert got == pytest.approx({("kernel", "aten::mm"): 0.5, ("kernel", "aten::add"): 0.02}, abs=A)


# host-blocking copies (issue 48: the HTA trace's pageable device-to-host copies) ---------------------
def blocking_graph(ops, calls, blocking):
    c = np.array(calls, dtype=np.int64).reshape(-1, 5)
    o = np.array(ops, dtype=np.int64).reshape(-1, 5)
    return cp.build_graph(c[:, 0], c[:, 1], c[:, 2], c[:, 3], c[:, 4], o[:, 0], o[:, 1], o[:, 2], o[:, 3],
                          np.arange(len(o)), o[:, 4], o_blocking=blocking)


def test_pageable_device_to_host_copy_blocks_until_its_copy_ends():
    """Thread 0: a launch [0, 5_000) of a kernel on stream 7 [5_000, 905_000); a cudaMemcpyAsync
    to pageable memory [10_000, 910_000) (launched as any copy, key 2) whose copy, queued behind
    the kernel, ran [905_000, 908_000); Python [910_000, 1_000_000) then a call [1_000_000,
    1_005_000). Window [0, 1_005_000).
    The copy call is a blocking call awaiting its own copy. Walk: last call 5000 (cpu); host order
    to the copy call's end 910_000: cpu 90_000; the call's own time after its copy ended
    [908_000, 910_000): wait 2000; the copy 3000 (copy); stream order to the kernel: 900_000
    (kernel); launch edge [0, 5000): launch 5000. Sum 1_005_000: cpu 95_000, launch 5000, kernel
    900_000, copy 3000, wait 2000. Read as a launch (the loader's kind alone), the copy call's
    whole 900 us would be launch time and the kernel would not be on the path."""
    calls = [(0, 5_000, 0, cp.CALL_LAUNCH, 1), (10_000, 910_000, 0, cp.CALL_LAUNCH, 2),
             (1_000_000, 1_005_000, 0, cp.CALL_OTHER, 0)]
    ops = [(5_000, 905_000, 7, cp.KERNEL, 1), (905_000, 908_000, 7, cp.COPY, 2)]
    g = blocking_graph(ops, calls, [False, True])
    assert g.c_kind.tolist() == [cp.CALL_LAUNCH, cp.CALL_SYNC, cp.CALL_OTHER]
    assert g.call_await.tolist() == [-1, 1, -1]
    p = cp.critical_path(g, 0, 1_005_000)
    assert dict(zip(cp.SEGMENTS, p.segments_ns.tolist())) == {
        "cpu": 95_000, "launch": 5_000, "kernel": 900_000, "copy": 3_000, "comm": 0, "wait": 2_000}
    assert not p.truncated and p.pieces == cp.critical_path_reference(g, 0, 1_005_000).pieces
    # not blocking (a pinned copy): the call stays a launch, the kernel is off the path
    g2 = blocking_graph(ops, calls, [False, False])
    assert g2.c_kind[1] == cp.CALL_LAUNCH and cp.critical_path(g2, 0, 1_005_000).segments_ns[cp.KERNEL] == 0


def test_blocking_copy_that_started_at_its_launch_is_no_cycle():
    """Thread 0: a call [0, 10_000); a pageable cudaMemcpyAsync [20_000, 530_000) whose copy starts
    at once on an idle stream [25_000, 525_000) (the call's await is its copy, the copy's last
    arrival is its launch: the same call). Window [0, 530_000).
    The walk must not go call -> copy -> call: the copy follows the call's host predecessor. Path:
    the call's 5 us after its copy ended (wait 5_000); the copy 500_000 (copy); [10_000, 25_000)
    cpu 15_000 (the host time before the call and its launch latency); the first call 10_000 (cpu).
    Sum 530_000; not truncated; the reference walk agrees. Without a host predecessor (the copy call
    alone in the window), the whole call is the host's wait: 530_000 - 20_000 = 510_000 wait, and
    [0, 20_000) before it cpu."""
    calls = [(0, 10_000, 0, cp.CALL_OTHER, 0), (20_000, 530_000, 0, cp.CALL_LAUNCH, 1)]
    ops = [(25_000, 525_000, 7, cp.COPY, 1)]
    g = blocking_graph(ops, calls, [True])
    assert g.call_await.tolist() == [-1, 0]
    p, ref = cp.critical_path(g, 0, 530_000), cp.critical_path_reference(g, 0, 530_000)
    assert dict(zip(cp.SEGMENTS, p.segments_ns.tolist())) == {
        "cpu": 25_000, "launch": 0, "kernel": 0, "copy": 500_000, "comm": 0, "wait": 5_000}
    assert not p.truncated and not ref.truncated
    assert p.segments_ns.tolist() == ref.segments_ns.tolist() and p.pieces == ref.pieces
    alone = blocking_graph(ops, calls[1:], [True])
    p, ref = cp.critical_path(alone, 0, 530_000), cp.critical_path_reference(alone, 0, 530_000)
    assert dict(zip(cp.SEGMENTS, p.segments_ns.tolist())) == {
        "cpu": 20_000, "launch": 0, "kernel": 0, "copy": 0, "comm": 0, "wait": 510_000}
    assert not p.truncated and not ref.truncated and p.pieces == ref.pieces


def test_copy_that_outlived_its_call_did_not_block_it():
    """A pageable host-to-device cudaMemcpyAsync [0, 10_000) whose copy ran [8_000, 600_000): the
    call returned before the copy ended (the driver staged it and returned), so it stays a launch."""
    g = blocking_graph([(8_000, 600_000, 7, cp.COPY, 1)], [(0, 10_000, 0, cp.CALL_LAUNCH, 1)], [True])
    assert g.c_kind.tolist() == [cp.CALL_LAUNCH] and g.call_await.tolist() == [-1]
