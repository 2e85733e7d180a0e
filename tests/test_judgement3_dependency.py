"""Issue 46, item 2: GPU-side dependency idle gets a rule of its own (gpu-dependency), saying what the
GPU waited on and where the waiting operation was launched; a step's host sync never exceeds the step.

Every expected number is computed by hand from the scenario code, the builder's timing model
(``nsysdoc/testing/builder.py``; header of ``tests/test_judgement_scenarios.py``) and the
definitions of ``docs/glossary.md`` ("What the GPU waited on", "Host sync time of a step"). Times in
ns, T0 = 1e9 ns = the first step's start.

Scenario ``event_wait_on_other_gpu`` (6 steps, producer 20 ms, local 1 ms, consumer 2 ms), step i
starting at host time h = T0 + i * P:

* producer launch API [h, h+5,000) -> kernel on GPU 1 stream 9 [h+5,000, h+20,005,000);
* local launch API [h+5,000, h+10,000) -> GPU 0 stream 7 [h+10,000, h+1,010,000);
* cudaEventRecord [h+10,000, h+12,000), cudaStreamWaitEvent [h+12,000, h+14,000) (stream 7 of GPU 0
  waits for stream 9 of GPU 1);
* consumer launch API [h+14,000, h+19,000) -> starts when the producer ends: [h+20,005,000, h+22,005,000);
* item(): DtoH copy [h+22,005,000, h+22,006,000), cudaStreamSynchronize until h+22,008,000 = range end.

P = 22,008,000 ns; window = 6 P = 132.048 ms. GPU 0 idles [h+1,010,000, h+20,005,000) = 18.995 ms per
step; the consumer's call returned (h+19,000) before the gap began, so the whole gap is the queue
part, longer than 20 us: dependency. GPU 1 has no dependency idle (its gaps end with the producer's
launch after the host's sync). Per GPU (mean over the 2 GPUs): 6 * 18.995 / 2 = 56.985 ms = 43.15% of
the window.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.metrics import dependency as dep_m  # noqa: E402
from nsysdoc.rules.policy import by_impact  # noqa: E402
from nsysdoc.testing import Capture  # noqa: E402
from tests.conftest import diagnose_path  # noqa: E402
from tests.test_frame_invariants import CASES, IDS, report, store  # noqa: E402,F401 - fixtures

T0 = 1_000_000_000
A = 6e-5  # JSON rounds to 4 decimals
P = 22_008_000
STEPS = 6
WINDOW_MS = STEPS * P / 1e6                      # 132.048
GAP_NS = 20_005_000 - 1_010_000                 # 18,995,000 per step on GPU 0
DEP_MS = STEPS * GAP_NS / 1e6 / 2                # 56.985 per GPU (mean over 2)
DEP_PCT = DEP_MS / WINDOW_MS * 100               # 43.155 %


def approx(x, tol=A):
    return pytest.approx(x, abs=tol)


@pytest.fixture(scope="module")
def ew(tmp_path_factory):
    from nsysdoc.testing.scenarios import event_wait_on_other_gpu

    path = event_wait_on_other_gpu().write(tmp_path_factory.mktemp("ew") / "ew.sqlite")
    return diagnose_path(path)


def _finding(r, rule):
    f = [x for x in r["findings"] if x["rule"] == rule]
    return f[0] if f else None


def test_dependency_idle_is_measured_per_gpu(ew):
    assert ew["capture"]["window"]["duration_ms"] == approx(WINDOW_MS)
    by_dev = {d["label"]: d["idle_ms_by_cause"]["dependency"] for d in ew["devices"]}
    assert by_dev == {"0": approx(STEPS * GAP_NS / 1e6), "1": approx(0.0)}
    v = ew["metrics"]["values"]
    assert v["idle_dependency_ms"] == approx(DEP_MS)
    assert v["idle_dependency_pct"] == approx(DEP_PCT)
    # every step's device is GPU 0 (its first GPU-0 work); its breakdown holds the whole gap
    for s in ew["steps"]:
        assert s["breakdown_ms"]["idle_dependency"] == approx(GAP_NS / 1e6)


def test_gpu_dependency_fires_and_is_the_headline(ew):
    f = _finding(ew, "gpu-dependency")
    assert f is not None
    assert f["impact_ms"] == approx(DEP_MS)
    assert f["impact_pct"] == approx(DEP_PCT)
    # 18.995 ms per step on the step's GPU, but never more per step than impact / steps
    assert f["impact_ms_per_step"] == approx(DEP_MS / STEPS)
    assert f["severity"] == by_impact(DEP_PCT) == "critical"
    vd = ew["verdict"]
    assert (vd["status"], vd["headline"], vd["rule"]) == ("bottleneck", "gpu-dependency", "gpu-dependency")
    # the message says what the GPU waited on: launched 19.986 ms before it ran (shown as 20.0 ms)
    assert "consumer_kernel on stream 7 of GPU 0, launched by cudaLaunchKernel 20.0 ms before it ran" in f["message"]
    assert "after a cudaStreamWaitEvent on the same thread" in f["message"]
    assert "waited for producer_kernel on stream 9 of GPU 1" in f["message"]
    # the three time ranges are the first three dependency gaps (equal lengths: time order)
    assert [(t["start_ns"], t["end_ns"], t["device"]) for t in f["time_ranges"]] == [
        (T0 + i * P + 1_010_000, T0 + i * P + 20_005_000, "0") for i in range(3)]


def test_evidence_names_the_producer_and_the_launch(ew):
    rows = ew["metrics"]["idle_gaps"]["dependency_waits"]
    assert len(rows) == STEPS
    for i, r in enumerate(sorted(rows, key=lambda x: x["start_ns"])):
        h = T0 + i * P
        assert (r["start_ns"], r["end_ns"]) == (h + 1_010_000, h + 20_005_000)
        assert r["dependency_ms"] == approx(18.995)
        assert (r["device"], r["stream"], r["waiting_op"]) == ("0", 7, "consumer_kernel")
        assert r["op_start_ns"] == h + 20_005_000
        # launching call [h+14,000, h+19,000): ran 20,005,000 - 19,000 = 19,986,000 ns after it returned
        assert r["launch_api"] == "cudaLaunchKernel"
        assert r["launched_ms_before"] == approx(19.986)
        # cudaStreamWaitEvent began at h+12,000, 2 us before the launching call
        assert r["host_call"] == "cudaStreamWaitEvent"
        assert r["host_call_us_before"] == approx(2.0)
        # the producer on GPU 1 ended exactly at the gap end
        assert (r["producer"], r["producer_device"], r["producer_stream"]) == ("producer_kernel", "1", 9)
        assert r["producer_end_ns"] == h + 20_005_000
        assert (r["pid"], r["tid"]) == (4600, 4600)


def test_where_is_the_launch_of_the_waiting_op(ew):
    """``dependency_gaps`` weighs each gap's dependency time at the waiting op's launch: every
    consumer launch lies in the NVTX range consume_from_gpu1, so it holds all of the impact."""
    f = _finding(ew, "gpu-dependency")
    assert [(w["op"], w["share_pct"]) for w in f["where"]] == [("consume_from_gpu1", 100.0)]
    assert f["where"][0]["count"] == STEPS
    assert sum(w["ms"] for w in f["where"]) == approx(f["impact_ms"])


def test_threshold_is_ten_percent_on_both_sides(tmp_path):
    """producer 1,800 us, 15 steps: GPU 0 idles 1,800,000 - 1,005,000 = 795,000 ns a step in a
    1,800,000 + 2,000,000 + 8,000 = 3,808,000 ns step: 397,500 / 3,808,000 = 10.44% per GPU;
    producer 1,700 us: 347,500 / 3,708,000 = 9.37%."""
    from nsysdoc.testing.scenarios import event_wait_on_other_gpu

    above = diagnose_path(event_wait_on_other_gpu(steps=15, producer_us=1800).write(tmp_path / "a.sqlite"))
    assert above["metrics"]["values"]["idle_dependency_pct"] == approx(397_500 / 3_808_000 * 100)
    assert _finding(above, "gpu-dependency")["severity"] == "warning"
    below = diagnose_path(event_wait_on_other_gpu(steps=15, producer_us=1700).write(tmp_path / "b.sqlite"))
    assert below["metrics"]["values"]["idle_dependency_pct"] == approx(347_500 / 3_708_000 * 100)
    assert _finding(below, "gpu-dependency") is None


# -- the pure functions (nsysdoc.metrics.dependency), boundaries on both sides ------------------------
def test_producer_ends_inside_the_gap_on_another_gpu():
    g0, g1 = 1_000, 50_000
    tol = dep_m.PRODUCER_TOLERANCE_NS  # 20,000
    # ends: at g0 (not inside), at g1 + tol (inside, the latest), g1 + tol + 1 (too late), and a
    # later end on the gap's own device (never a producer)
    dev = [1, 1, 1, 0]
    end = [g0, g1 + tol, g1 + tol + 1, g1]
    assert dep_m.producer(0, g0, g1, dev, end) == 1
    assert dep_m.producer(0, g0, g1, [1], [g0]) == -1
    assert dep_m.producer(0, g0, g1, [1], [g0 + 1]) == 0
    assert dep_m.producer(0, g0, g1, [0], [g1]) == -1
    # ties: the first in array order
    assert dep_m.producer(0, g0, g1, [1, 2], [g1, g1]) == 0


def test_host_call_looks_back_ten_ms():
    a = 100_000_000
    lb = dep_m.HOST_CALL_LOOKBACK_NS  # 10 ms
    assert dep_m.host_call(a, [a - lb], [True]) == 0
    assert dep_m.host_call(a, [a - lb - 1], [True]) == -1
    assert dep_m.host_call(a, [a + 1], [True]) == -1
    assert dep_m.host_call(a, [a], [True]) == 0            # the launching call itself (a graph launch)
    assert dep_m.host_call(a, [a - 5, a - 2, a - 1], [True, True, False]) == 1  # the latest wait call
    for name in ("cudaStreamWaitEvent", "cuStreamWaitEvent", "cudaEventRecord", "cudaEventRecordWithFlags",
                 "cudaGraphLaunch", "cuGraphLaunch", "hipStreamWaitEvent", "cudaLaunchHostFunc",
                 "cuStreamWaitValue32"):
        assert dep_m.is_wait_call(name), name
    for name in ("cudaLaunchKernel", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpyAsync"):
        assert not dep_m.is_wait_call(name), name


# -- a step's host sync (glossary: "Host sync time of a step"); a worker that only waits does not count:
# tests/test_glossary_examples.py::test_sync_cause_needs_the_launching_thread_in_sync
def two_threads_blocked_in_one_step() -> Capture:
    """Thread A (steps): launch a 10 ms kernel on stream 7, 3 ms of Python, cudaStreamSynchronize;
    3 steps. Thread B of the same process (a launching thread: it launches a kernel): 2 ms of Python,
    a 12 ms kernel on stream 8, then cudaStreamSynchronize - blocked across the end of A's first step.

    A, step i at h: kernel API [h, h+5,000) -> [h+5,000, h+10,005,000); sync [h+3,005,000,
    h+10,007,000) = 7.002 ms; range end h+10,007,000. B: kernel API [T0+2,000,000, +2,005,000) ->
    stream 8 [T0+2,005,000, T0+14,005,000); sync [T0+2,005,000, T0+14,007,000).

    Steps (glossary, "Steps"): operations belong to the step of their process whose range holds their
    launch, so B's kernel is step 0's and step 0's GPU work ends at 14,005,000. Step 1 begins at
    max(range start 10,007,000, min(14,005,000, its first kernel's start 10,012,000)) = 10,012,000;
    step 2 at max(20,014,000, min(20,012,000, 20,019,000)) = 20,014,000; the last ends at its range
    end 30,021,000 (its kernel ended at 30,019,000).

    Step 0 [0, 10.012) ms: A [3.005, 10.007) u B [2.005, 10.012) = 8.007 ms (a sum over threads:
    7.002 + 8.007 = 15.009 > 10.012; A alone: 7.002).
    Step 1 [10.012, 20.014): B [10.012, 14.007) u A [13.012, 20.014) = the whole step, 10.002 ms
    (a sum: 3.995 + 7.002 = 10.997 > 10.002). Step 2 [20.014, 30.021): A alone, 7.002 ms."""
    cap = Capture()
    proc = cap.process(pid=4700)
    a, b = proc.thread(), proc.thread(tid=4701)
    b.cpu(us=2000)
    b.launch("side_kernel", 12_000, stream=8)
    b.sync_stream(8)
    for i in range(3):
        with a.range(f"ProfilerStep#{i}"):
            a.launch("main_kernel", 10_000, stream=7)
            a.cpu(us=3000)
            a.sync_stream(7)
    return cap


def test_step_host_sync_is_the_union_over_the_process_threads(tmp_path):
    r = diagnose_path(two_threads_blocked_in_one_step().write(tmp_path / "s.sqlite"))
    steps = sorted(r["steps"], key=lambda s: s["start_ns"])
    assert [(s["start_ns"] - T0, s["end_ns"] - T0) for s in steps] == [
        (0, 10_012_000), (10_012_000, 20_014_000), (20_014_000, 30_021_000)]
    assert [s["host_sync_ms"] for s in steps] == [approx(8.007), approx(10.002), approx(7.002)]
    for s in steps:
        assert s["host_sync_ms"] <= s["duration_ms"] + A


# -- the bound on every capture we have ---------------------------------------------------------------
@pytest.mark.parametrize("report", CASES, ids=IDS, indirect=True)
def test_step_parts_never_exceed_the_step(report):
    """Per step: host sync and every breakdown part are at most the step's duration (JSON rounding:
    half a unit in the 4th decimal)."""
    for s in report["steps"]:
        d = s.get("duration_ms")
        if d is None:
            continue
        if s.get("host_sync_ms") is not None:
            assert s["host_sync_ms"] <= d + 1e-4, (s["name"], s["host_sync_ms"], d)
        for k, v in (s.get("breakdown_ms") or {}).items():
            if v is not None:
                assert v <= d + 1e-4, (s["name"], k, v, d)


def test_waited_on_sentence_for_a_graph_node_and_for_nothing_recorded():
    """The sentence of ``dependency_waited_on`` (glossary, "Rule values"): a memset launched by the
    cudaGraphLaunch that is itself the last wait call (0 us before) is a graph node; with no
    producer the sentence says nothing recorded on another GPU ended then; no rows -> null."""
    from nsysdoc.assembly.values import _dependency_values

    row = {"waiting_op": "memset", "stream": 21, "device": "0", "launch_api": "cudaGraphLaunch",
           "launched_ms_before": 130.0, "host_call": "cudaGraphLaunch", "host_call_us_before": 0.0,
           "producer": None}
    v = _dependency_values([row])
    assert v["dependency_launched_ms_before"] == 130.0
    assert v["dependency_waited_on"] == (
        "memset on stream 21 of GPU 0, launched by cudaGraphLaunch 130.0 ms before it ran (a node of a CUDA "
        "graph: it waits on the graph's dependencies), waited on nothing the capture recorded on another GPU "
        "(a host callback, another process or rank, or work not recorded)")
    # the same call 1 us before the launch is another call: "after a ..."
    v = _dependency_values([{**row, "host_call_us_before": 1.0}])
    assert "(after a cudaGraphLaunch on the same thread)" in v["dependency_waited_on"]
    assert _dependency_values([]) == {"dependency_waited_on": None, "dependency_launched_ms_before": None}
