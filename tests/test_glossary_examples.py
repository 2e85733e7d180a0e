"""Hand-computed examples for every definition family in docs/glossary.md.

Written from the glossary and the fixture builder (nsysdoc/testing/builder.py) only. Builder timing
model used in the arithmetic below (all times in ns, relative to the capture start T0 = 1e9 ns):

* ``launch(us, api_us=5)`` at host time ``a``: API row ``[a, a + api_us]``; GPU row starts at
  ``max(a + 0.6*api_us + 2000, stream free time)`` and lasts ``us``. With api_us=5 and a free
  stream the kernel starts exactly at the API end (a + 5000).
* ``memcpy(api_us=6)``: API ``[a, a + 6000]`` (blocking copies: until max(a+6000, copy end+2000));
  GPU start ``max(a + 5600, stream free)``, duration ``max(1000, int(nbytes / gbps))`` with
  gbps 12 (pinned HtoD/DtoH), 3 (pageable HtoD/DtoH).
* ``sync_stream(api_us=3)``: ``[a, max(a + 3000, stream free + 2000)]``.
* ``item()`` = 4-byte pinned async DtoH memcpy + ``sync_stream``.
* ``wait_event``: cudaEventRecord 2 µs + cudaStreamWaitEvent 2 µs on the host; device-side only.
* ``cpu(us)`` advances the host clock.

Every expected number is derived in comments from the scenario parameters.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.analysis import analyze
from nsysdoc.testing import Capture
from nsysdoc.trace import load_trace
from tests.conftest import analyze_path, diagnose_path

T0 = 1_000_000_000
DL = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
A = 6e-5  # JSON rounds to 4 decimals: half a unit in the last place plus float slack
# Idle classes in the glossary's reporting order ("Idle gaps and what the host was doing").
CAUSES = ("sync", "input", "alloc", "setup", "launch", "api", "host", "dependency", "tail", "unattributed")
BREAKDOWN_KEYS = ("compute", "exposed_comm", "copy") + tuple(f"idle_{c}" for c in CAUSES)


def run(cap: Capture, tmp_path: Path, name: str = "t.sqlite", step_pattern: str | None = None) -> dict:
    path = cap.write(tmp_path / name)
    return analyze(load_trace(path, cache=False), step_pattern=step_pattern).to_dict()


def device(d: dict, dev_id: int) -> dict:
    (found,) = [x for x in d["devices"] if x["device"] == dev_id]
    return found


def primary_steps(d: dict) -> list[dict]:
    return [s for s in d["steps"] if s.get("primary", True)]


def approx(x: float, tol: float = A):
    return pytest.approx(x, abs=tol)


def causes(**ms: float) -> dict:
    """Expected idle_ms_by_cause with all other causes zero."""
    return {c: ms.get(c, 0.0) for c in CAUSES}


def assert_causes(actual: dict, expected: dict) -> None:
    for c in CAUSES:
        assert actual[c] == approx(expected[c]), c


def assert_breakdown(step: dict, expected: dict) -> None:
    full = {k: expected.get(k, 0.0) for k in BREAKDOWN_KEYS}
    for k in BREAKDOWN_KEYS:
        assert step["breakdown_ms"][k] == approx(full[k]), k
    # the split is exclusive and sums to the step duration
    assert sum(step["breakdown_ms"].values()) == approx(step["duration_ms"], 1e-3)


def assert_not_judgeable(d: dict) -> None:
    """Fewer than 50 GPU operations and under 50 ms of GPU time: "Enough GPU work to judge" fails,
    so summary.gpu_busy_pct is null and the reason is given."""
    assert d["capture"]["enough_gpu_work"] is False
    assert d["summary"]["gpu_busy_pct"] is None
    assert d["capture"]["not_judgeable_reason"]


def assert_device_identities(dv: dict) -> None:
    # Busy = compute + exposed communication + copy-only, exactly; idle = 100 - busy.
    assert dv["compute_pct"] + dv["exposed_comm_pct"] + dv["copy_only_pct"] == approx(dv["busy_pct"], 2e-4)
    assert dv["busy_pct"] + dv["idle_pct"] == approx(100.0, 2e-4)


# ------------------------------------------------------------------------------------------
# GPU busy: union, never a sum
# ------------------------------------------------------------------------------------------

def test_busy_is_union_of_two_overlapping_streams(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    t.launch("kA", us=100, stream=7)  # API [0,5000]      GPU [5000,105000]
    t.launch("kB", us=100, stream=8)  # API [5000,10000]  GPU [10000,110000] (overlaps kA)
    t.cpu(us=200)                     # host at 210000
    t.launch("kC", us=50, stream=7)   # API [210000,215000] GPU [215000,265000]
    d = run(cap, tmp_path)

    # No markers: window = first GPU op start (5000) -> last GPU op end (265000) = 260000 ns.
    # Steady state leaves nothing out: no set-up idle time (no warm-up); the one stretch without GPU
    # work [110000,215000) has 105000 of 155000 busy ns before it and 50000 after it (> 5 % each
    # side), so it is no idle head/tail; and 3 ops / 0.155 ms is too little work to trim anyway.
    assert d["capture"]["has_step_markers"] is False
    assert d["capture"]["window"]["start_ns"] == T0 + 5_000
    assert d["capture"]["window"]["end_ns"] == T0 + 265_000
    assert not d["summary"]["step_count"]
    # union = [5000,110000] (105000) + [215000,265000] (50000) = 155000 -> 155000/260000 = 59.6154 %
    # (a sum of durations would give 250000/260000 = 96.15 %)
    dv = device(d, 0)
    assert dv["busy_pct"] == approx(155_000 / 260_000 * 100)
    # 3 operations and 0.155 ms of GPU time: not enough GPU work to judge -> summary value null
    assert_not_judgeable(d)
    assert dv["compute_pct"] == approx(155_000 / 260_000 * 100)
    assert dv["copy_only_pct"] == approx(0.0)
    assert dv["idle_pct"] == approx(105_000 / 260_000 * 100)
    # the one gap [g0=110000, g1=215000): kC's call [a=210000, b=215000); x = max(g0, min(b, g1))
    # = 215000 -> empty queue part. Host part [110000,215000): [110000,210000) nothing on the
    # thread in a short window (a - g0 = 100 us < 1 ms) -> launch 100 us; [210000,215000) the
    # ordinary launch call -> launch 5 us. All 105 us launch.
    assert_causes(dv["idle_ms_by_cause"], causes(launch=0.105))
    assert dv["kernel_count"] == 3
    assert d["summary"]["kernel_count"] == 3
    assert_device_identities(dv)


# ------------------------------------------------------------------------------------------
# Compute / communication / exposed / overlapped
# ------------------------------------------------------------------------------------------

def test_nccl_partly_overlapped_in_a_step(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):                      # push at 0
        t.cpu(us=10)                             # 10000
        t.launch("gemm_kernel", us=100)          # API [10000,15000] GPU [15000,115000] (stream 7)
        t.nccl("AllReduce", us=200, api_us=8)    # API [15000,23000] GPU start 15000+4800+2000=21800
        #                                          -> [21800,221800] on stream 13
    # range [0,23000]; step end = last GPU op end = 221800; window = [0,221800] = 221800 ns
    d = run(cap, tmp_path)
    W = 221_800
    compute, comm = 100_000, 200_000
    union = 221_800 - 15_000                     # [15000,221800] = 206800
    exposed = union - compute                    # 106800
    overlapped = comm - exposed                  # 93200 -> 46.6 % of comm
    dv = device(d, 0)
    assert dv["busy_pct"] == approx(union / W * 100)            # 93.2372
    assert dv["compute_pct"] == approx(compute / W * 100)       # 45.0857
    assert dv["exposed_comm_pct"] == approx(exposed / W * 100)  # 48.1515
    assert dv["copy_only_pct"] == approx(0.0)
    assert dv["comm_ms"] == approx(0.2)
    assert dv["exposed_comm_ms"] == approx(0.1068)
    assert d["metrics"]["communication"]["comm_ms"] == approx(0.2)
    assert d["metrics"]["communication"]["exposed_comm_ms"] == approx(0.1068)
    assert d["metrics"]["communication"]["overlapped_pct"] == approx(overlapped / comm * 100)
    assert d["metrics"]["kernels"]["nccl_count"] == 1
    assert_device_identities(dv)
    # gap [g0=0, g1=15000): gemm call [10000,15000) -> x = 15000, no queue part. Host part:
    # [0,10000) nothing, short window (a - g0 = 10 us) -> launch; [10000,15000) launch call -> launch
    assert_causes(dv["idle_ms_by_cause"], causes(launch=0.015))
    (s,) = primary_steps(d)
    assert s["end_ns"] == T0 + 221_800
    assert_breakdown(s, {"compute": 0.1, "exposed_comm": 0.1068, "idle_launch": 0.015})


def test_comm_pct_is_comm_over_window(tmp_path):
    # Same scenario as above; comm_pct is not spelled out in the glossary, read here as
    # comm_ms / window like every other per-device _pct: 200000 / 221800 = 90.1713 %.
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):
        t.cpu(us=10)
        t.launch("gemm_kernel", us=100)
        t.nccl("AllReduce", us=200, api_us=8)
    d = run(cap, tmp_path)
    assert device(d, 0)["comm_pct"] == approx(200_000 / 221_800 * 100)


def test_nccl_fully_exposed_after_compute(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    t.launch("gemm_kernel", us=100)   # API [0,5000] GPU [5000,105000]
    t.wait_event(13, 7)               # record [5000,7000], wait [7000,9000]; stream 13 free at 105000
    t.nccl("AllReduce", us=200)       # API [9000,17000]; GPU start max(15800,105000) -> [105000,305000]
    d = run(cap, tmp_path)
    # window [5000,305000] = 300000; compute 100000, comm 200000, no overlap -> exposed 200000
    dv = device(d, 0)
    assert dv["busy_pct"] == approx(100.0)
    assert dv["compute_pct"] == approx(100 / 3)
    assert dv["exposed_comm_pct"] == approx(200 / 3)
    assert dv["exposed_comm_ms"] == approx(0.2)
    assert d["metrics"]["communication"]["overlapped_pct"] == approx(0.0)
    assert_device_identities(dv)


# ------------------------------------------------------------------------------------------
# Step markers
# ------------------------------------------------------------------------------------------

def _one_range(text: str, **kw) -> Capture:
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range(text, **kw):
        t.cpu(us=10)
        t.launch("k", us=20)
    return cap


@pytest.mark.parametrize("text", [
    "ProfilerStep#12", "train_step_3", "train step 5", "step 7", "step_7", "step#2", "iteration 4",
    "iter_4", "STEP 7", "profilerstep#3", "Train_Step_9",
])
def test_default_pattern_accepts(text, tmp_path):
    d = run(_one_range(text), tmp_path)
    assert d["capture"]["has_step_markers"] is True
    assert d["summary"]["step_count"] == 1
    assert [s["name"] for s in primary_steps(d)] == [text]


@pytest.mark.parametrize("text", [
    "stepping", "ProfilerStep", "forward", "step", "ProfilerStep#", "step 7 forward", "my_step_7",
    "iterations 4", "optimizer.step",
])
def test_default_pattern_rejects(text, tmp_path):
    # the whole text must match
    d = run(_one_range(text), tmp_path)
    assert d["capture"]["has_step_markers"] is False
    assert not d["summary"]["step_count"]
    assert primary_steps(d) == []


def test_registered_string_marker_is_recognised(tmp_path):
    # NVTX text stored via textId (registered string) in the 2026 schema
    d = run(_one_range("ProfilerStep#0", registered=True), tmp_path)
    assert d["summary"]["step_count"] == 1


def test_nested_markers_counted_once(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    for i in range(2):
        with t.range(f"ProfilerStep#{i}"):
            with t.range(f"step_{i}"):          # nested inside a marker of the same thread: ignored
                t.cpu(us=10)
                t.launch("k", us=20)
            t.cpu(us=30)
    d = run(cap, tmp_path)
    assert d["summary"]["step_count"] == 2
    assert [s["name"] for s in primary_steps(d)] == ["ProfilerStep#0", "ProfilerStep#1"]


def test_nccl_domain_range_never_a_step(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_1"):
        t.cpu(us=10)
        t.launch("k", us=100)   # 100 of the process's 140 us of GPU work: the marker frames it
    t.cpu(us=50)
    for i in (2, 3):
        with t.range(f"step_{i}", domain="NCCL"):   # library domain: never a step
            t.cpu(us=10)
            t.nccl("AllReduce", us=20)
        t.cpu(us=50)
    d = run(cap, tmp_path)
    assert d["summary"]["step_count"] == 1
    assert [s["name"] for s in primary_steps(d)] == ["step_1"]


def test_nccl_domain_only_means_no_markers(tmp_path):
    d = run(_one_range("step_3", domain="NCCL"), tmp_path)
    assert d["capture"]["has_step_markers"] is False
    assert not d["summary"]["step_count"]


def test_custom_step_pattern_replaces_default(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    for text in ("batch-1", "BATCH-2", "ProfilerStep#3"):
        with t.range(text):
            t.cpu(us=10)
            t.launch("k", us=20)
        t.cpu(us=20)
    d = run(cap, tmp_path, step_pattern=r"batch-\d+")
    # whole-text, case-insensitive match of the custom pattern; the default one no longer applies
    assert d["summary"]["step_count"] == 2
    assert [s["name"] for s in primary_steps(d)] == ["batch-1", "BATCH-2"]
    d2 = run(cap, tmp_path, name="t2.sqlite")
    # the default pattern matches only ProfilerStep#3; it holds all the GPU work launched from its
    # start to its end (its own kernel), so it is trusted: one step
    assert d2["summary"]["step_count"] == 1
    assert d2["capture"]["steps_set_aside"] is None


def test_start_end_ranges_mark_steps(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    t.cpu(us=10)
    t.launch("k", us=20)                        # API [10000,15000] GPU [15000,35000]
    t.start_end_range("step_0", T0, T0 + 50_000)
    t.start_end_range("step_1", T0 + 50_000, T0 + 100_000)
    t.at(T0 + 60_000)
    t.launch("k", us=20)                        # API [60000,65000] GPU [65000,85000]
    d = run(cap, tmp_path)
    assert d["summary"]["step_count"] == 2
    steps = primary_steps(d)
    # start-to-start 50000 ns; last step: end - start = 100000 - 50000
    assert [s["step_time_ms"] for s in steps] == [approx(0.05), approx(0.05)]


def test_step_thread_and_ops_from_any_thread(tmp_path):
    cap = Capture()
    p = cap.process(pid=100)
    main = p.thread()
    w = p.thread(tid=101)
    with main.range("step_0"):                  # [0,100000]
        main.cpu(us=10)
        main.launch("a", us=10)                 # API [10000,15000] GPU [15000,25000]
        main.cpu(us=85)                         # 100000
    w.at(T0 + 50_000)
    w.launch("wk", us=10, stream=9)             # worker call at 50000: inside step_0 -> its op
    for i in (1, 2):                            # [100000,200000], [200000,300000]
        with main.range(f"step_{i}"):
            main.cpu(us=10)
            main.launch("b", us=10)
            main.cpu(us=85)
    w.at(T0 + 200_000)
    with w.range("step_5"):                     # worker has 1 marker, main 3 -> main is the step thread
        w.cpu(us=10)
    d = run(cap, tmp_path)
    steps = primary_steps(d)
    assert d["summary"]["step_count"] == 3
    assert [s["name"] for s in steps] == ["step_0", "step_1", "step_2"]
    assert [s["kernel_count"] for s in steps] == [2, 1, 1]
    assert d["summary"]["kernels_per_step_median"] == approx(1.0)
    assert d["summary"]["kernel_count"] == 4
    assert d["summary"]["step_time_ms_median"] == approx(0.1)


# ------------------------------------------------------------------------------------------
# Step end / step time / duration / window / idle before first op
# ------------------------------------------------------------------------------------------

def test_step_end_extended_by_gpu_work_and_step_times(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):                     # push at 0
        t.cpu(us=10)
        t.launch("k0", us=1000)                 # API [10000,15000] GPU [15000,1015000]
    # pop at 15000
    t.cpu(us=35)                                # 50000
    with t.range("step_1"):                     # push at 50000
        t.launch("k1", us=100)                  # API [50000,55000] GPU max(55000,1015000) -> [1015000,1115000]
    # pop at 55000
    d = run(cap, tmp_path)
    s0, s1 = primary_steps(d)
    # steps partition the thread's timeline; step 1 begins at the later of its range start (50000)
    # and (the earlier of) the end of step 0's GPU work and its own first kernel, both 1015000:
    # step 0 = [0, 1015000), step 1 = [1015000, 1115000) (the last: to the end of its GPU work)
    assert s0["start_ns"] == T0
    assert s0["range_end_ns"] == T0 + 15_000
    assert s0["end_ns"] == s1["start_ns"] == T0 + 1_015_000
    assert s0["duration_ms"] == s0["step_time_ms"] == approx(1.015)
    assert s1["end_ns"] == T0 + 1_115_000
    assert s1["step_time_ms"] == approx(0.1)
    assert s1["duration_ms"] == approx(0.1)
    # the median step: the lower of the two (0.1 ms), its time the summary's step time
    assert d["summary"]["step_time_ms_median"] == approx(0.1)
    assert d["summary"]["kernels_per_step_median"] == approx(1.0)
    assert [s0["kernel_count"], s1["kernel_count"]] == [1, 1]
    # window: first step start (0) -> last step end (1115000)
    assert d["capture"]["window"]["start_ns"] == T0
    assert d["capture"]["window"]["end_ns"] == T0 + 1_115_000
    dv = device(d, 0)
    assert dv["busy_pct"] == approx(1_100_000 / 1_115_000 * 100)
    # only gap [0,15000): 10 us of nothing (short window) + the 5 us launch call -> launch 15 us
    assert_causes(dv["idle_ms_by_cause"], causes(launch=0.015))
    # time-busy: kernel union inside the step / duration
    assert s0["time_busy_pct"] == approx(1_000_000 / 1_015_000 * 100)
    assert s1["time_busy_pct"] == approx(100.0)
    # idle before first op: step 0 idle [0,15000); step 1 begins at its op
    assert s0["idle_before_first_op_ms"] == approx(0.015)
    assert s1["idle_before_first_op_ms"] == approx(0.0)
    assert_breakdown(s0, {"compute": 1.0, "idle_launch": 0.015})
    # step 1 [1015000,1115000): k1
    assert_breakdown(s1, {"compute": 0.1})


# ------------------------------------------------------------------------------------------
# Idle gaps: one scenario with sync (call + budget), input, launch (host part, queue part,
# other-API time in a short window) and tail gaps. Notation per gap: GPU idle from g0, the next
# op starts at g1, launched by the call [a, b); x = max(g0, min(b, g1)); queue part [x, g1),
# host part [g0, x). Every host window here is short (a - g0 < 1 ms), so uncovered time and
# other-CUDA-call time are `launch`.
# ------------------------------------------------------------------------------------------

def causes_capture(variant: str = "2026") -> Capture:
    cap = Capture(variant=variant)
    t = cap.process(pid=100).thread()
    with t.range("ProfilerStep#0"):             # push at 0
        t.cpu(us=20)                            # 20000
        t.launch("kA", us=100)                  # API [20000,25000] GPU [25000,125000]
        # gap [0,25000): x = g1 = 25000; host part [0,20000) nothing (short, a-g0 = 20 us) -> launch
        #   20, [20000,25000) launch call -> launch 5: launch 25 us
        t.item()                                # DtoH 4 B: API [25000,31000], GPU [125000,126000]
        #                                         sync_stream [31000, 126000+2000=128000]
        t.cpu(us=50)                            # 178000
        t.launch("kB", us=100)                  # API [178000,183000] GPU [183000,283000]
        # gap [126000,183000): x = g1 = 183000. [126000,128000) inside cudaStreamSynchronize (order
        #   5) -> sync 2. T was in that blocking call at g0: B = 128000-31000 = 97000 (the pinned
        #   async copy before it is not blocking), budget = min(B, a-g0 = 178000-126000 = 52000)
        #   -> [126000,178000) sync (includes the 2 us above): sync 52; [178000,183000) launch 5
        with t.range(DL):
            t.os_call("poll", us=300)           # [183000,483000]
        t.launch("kC", us=100)                  # API [483000,488000] GPU [488000,588000]
        # gap [283000,488000): DataLoader range (order 2) + poll cover [283000,483000) -> input 200;
        #   launch call [483000,488000) -> launch 5
        t.cpu(us=95)                            # 583000
        t.launch("kD", us=100, api_us=25)       # API [583000,608000] GPU 583000+15000+2000=600000
        #                                         -> [600000,700000]
        # gap [588000,600000): b = 608000 > g1 -> x = max(588000, 600000) = g1, empty queue part;
        #   host part [588000,600000) inside the (25 us, not long) launch call -> launch 12 us
        t.cpu(us=92)                            # 700000
        for _ in range(10):
            t.wait_event(20, 21)                # 10 x (2+2 us) of API rows, [700000,740000), no GPU op
        t.cpu(us=10)                            # 750000
        t.launch("kE", us=100)                  # API [750000,755000] GPU [755000,855000]
        # gap [700000,755000): cudaEventRecord/cudaStreamWaitEvent are neither blocking syncs nor
        #   ordinary launches -> order 9 `api`, which is `launch` in a short window (a-g0 = 50 us):
        #   40; [740000,750000) nothing -> launch 10; launch call -> launch 5: launch 55 us
        t.cpu(us=200)                           # 955000
        t.launch("kF", us=100)                  # API [955000,960000] GPU [960000,1060000]
        # gap [855000,960000): nothing on T for 100 us (short window: a-g0 = 100 us) + 5 us call
        #   -> launch 105 us
        t.cpu(us=150)                           # 1110000
    # pop at 1110000 > last op end 1060000: gap [1060000,1110000) -> tail 50 us
    return cap


# window = [0, 1110000]; busy = 6 kernels x 100 us + 1 us copy = 601000; idle 509000 =
# launch (25 + 5 + 5 + 12 + 55 + 105 = 207) + sync 52 + input 200 + tail 50
CAUSES_W = 1_110_000
CAUSES_EXPECTED = causes(sync=0.052, input=0.200, launch=0.025 + 0.005 + 0.005 + 0.012 + 0.055 + 0.105,
                         tail=0.050)


def test_idle_gap_causes(tmp_path):
    d = run(causes_capture(), tmp_path)
    dv = device(d, 0)
    assert_causes(dv["idle_ms_by_cause"], CAUSES_EXPECTED)
    assert_causes(d["metrics"]["idle_gaps"]["idle_ms_by_cause"], CAUSES_EXPECTED)
    assert d["metrics"]["idle_gaps"]["count"] == 7
    assert dv["busy_pct"] == approx(601_000 / CAUSES_W * 100)          # 54.1441
    assert dv["compute_pct"] == approx(600_000 / CAUSES_W * 100)       # 54.0541
    assert dv["copy_only_pct"] == approx(1_000 / CAUSES_W * 100)       # 0.0901
    assert dv["idle_pct"] == approx(509_000 / CAUSES_W * 100)          # 45.8559
    assert_device_identities(dv)
    # host wait = (sync + input) / window = (52000 + 200000) / 1110000
    assert d["metrics"]["host_wait_pct"] == approx(252_000 / CAUSES_W * 100)


def test_idle_gap_causes_step_view(tmp_path):
    d = run(causes_capture(), tmp_path)
    (s,) = primary_steps(d)
    assert s["duration_ms"] == approx(1.11)
    assert s["kernel_count"] == 6
    assert s["time_busy_pct"] == approx(600_000 / CAUSES_W * 100)
    assert s["idle_before_first_op_ms"] == approx(0.025)
    # only blocking call: cudaStreamSynchronize [31000,128000]; the 10 cudaStreamWaitEvent never count
    assert s["host_sync_ms"] == approx(0.097)
    assert s["scalar_reads"] == 1
    assert_breakdown(s, {"compute": 0.6, "copy": 0.001, "idle_sync": 0.052, "idle_input": 0.200,
                         "idle_launch": 0.207, "idle_tail": 0.050})
    sync = d["metrics"]["sync"]
    assert [c["api"] for c in sync["sync_calls"]] == ["cudaStreamSynchronize"]
    assert sync["sync_calls"][0]["count"] == 1
    assert sync["sync_calls"][0]["total_ms"] == approx(0.097)
    assert sync["sync_calls"][0]["max_ms"] == approx(0.097)
    (th,) = sync["host_sync_ms_by_thread"]
    assert th["host_sync_ms"] == approx(0.097)
    assert th["share_of_window_pct"] == approx(97_000 / CAUSES_W * 100)
    assert sync["scalar_read_count"] == 1
    # launch API times 5,5,5,25,5,5 us -> median 5
    assert d["metrics"]["launch"]["launch_api_us_median"] == approx(5.0)


def test_idle_gap_dependency_on_other_device_event(tmp_path):
    # A device-side wait (cudaStreamWaitEvent) on work of a busy stream. On one device a busy
    # other stream keeps the device busy, so no idle gap can come from it; the gap appears when
    # the event was recorded on a stream of *another* device. The builder's wait_event only
    # chains streams of one device, so the cross-device edge is set on the stream model directly
    # (the API rows are still written by wait_event).
    cap = Capture(gpu_names={0: "GPU0", 1: "GPU1"})
    p = cap.process(pid=100)
    t = p.thread()
    with t.range("step_0"):                     # push at 0
        t.cpu(us=10)                            # 10000
        t.launch("k0", us=50)                   # dev0: API [10000,15000] GPU [15000,65000]
        t.launch("x", us=300, device=1, stream=9)  # dev1: API [15000,20000] GPU [20000,320000]
        t.wait_event(7, 7)                      # API rows [20000,24000]
        s07 = p.stream(0, 7)
        s07.free_at = max(s07.free_at, p.stream(1, 9).free_at)   # wait for x: 320000
        t.launch("e", us=100)                   # dev0: API [24000,29000] GPU max(29000,320000)
        #                                         -> [320000,420000]
    # pop at 29000; step end = 420000 = window end
    d = run(cap, tmp_path)
    W = 420_000
    d0, d1 = device(d, 0), device(d, 1)
    # dev0 gaps: [0,15000): k0 call [10000,15000) -> x = g1; host part: 10 us nothing (short
    #            window) + 5 us launch call -> launch 15;
    #            [65000,320000): e's call [24000,29000) returned before g0 -> x = max(65000,
    #            min(29000, 320000)) = 65000; queue part [65000,320000) = 255 us > 20 us -> dependency
    assert_causes(d0["idle_ms_by_cause"], causes(launch=0.015, dependency=0.255))
    # dev1 gaps: [0,20000): x's call [15000,20000) -> x = g1; host part [0,10000) nothing,
    #            [10000,15000) k0's launch call (order 8), [15000,20000) x's call; short window
    #            (a - g0 = 15 us) -> launch 20;  [320000,420000): tail 100
    assert_causes(d1["idle_ms_by_cause"], causes(launch=0.020, tail=0.100))
    assert d0["busy_pct"] == approx(150_000 / W * 100)   # 35.7143
    assert d1["busy_pct"] == approx(300_000 / W * 100)   # 71.4286
    # 4 operations, 0.45 ms of GPU time: not enough GPU work to judge
    assert_not_judgeable(d)
    (s,) = primary_steps(d)
    assert s["device"] == "0"                   # 2 of the step's 3 ops ran on dev0
    assert s["end_ns"] == T0 + W
    assert_breakdown(s, {"compute": 0.15, "idle_launch": 0.015, "idle_dependency": 0.255})


# ------------------------------------------------------------------------------------------
# Host sync: pageable async copies block, cudaStreamWaitEvent does not; copies by kind
# ------------------------------------------------------------------------------------------

def pageable_capture() -> Capture:
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):                                  # push at 0
        t.cpu(us=20)                                         # 20000
        t.memcpy("HtoD", 30_000, pageable=True)              # dur 30000/3 = 10000; GPU [25600,35600]
        #                                                      API [20000, 35600+2000=37600] (blocking)
        t.memcpy("HtoD", 120_000, pageable=False)            # dur 120000/12 = 10000; API [37600,43600]
        #                                                      GPU max(43200,35600) -> [43200,53200]
        t.wait_event(8, 7)                                   # [43600,47600]; stream 8 free at 53200
        t.launch("k", us=50, stream=8)                       # API [47600,52600] GPU [53200,103200]
        t.sync_device()                                      # [52600, 103200+2000=105200]
    # pop at 105200 = window end
    return cap


def test_pageable_async_copy_is_blocking_and_stream_wait_is_not(tmp_path):
    d = run(pageable_capture(), tmp_path)
    W = 105_200
    (s,) = primary_steps(d)
    # blocking: pageable cudaMemcpyAsync [20000,37600] (17600) + cudaDeviceSynchronize
    # [52600,105200] (52600) = 70200; not: pinned cudaMemcpyAsync, cudaEventRecord, cudaStreamWaitEvent
    assert s["host_sync_ms"] == approx(0.0702)
    sync = d["metrics"]["sync"]
    calls = {c["api"]: c for c in sync["sync_calls"]}
    assert set(calls) == {"cudaMemcpyAsync", "cudaDeviceSynchronize"}
    assert calls["cudaMemcpyAsync"]["count"] == 1
    assert calls["cudaMemcpyAsync"]["total_ms"] == approx(0.0176)
    assert calls["cudaDeviceSynchronize"]["total_ms"] == approx(0.0526)
    (th,) = sync["host_sync_ms_by_thread"]
    assert th["host_sync_ms"] == approx(0.0702)
    assert sync["scalar_read_count"] == 0
    dv = device(d, 0)
    # busy: copies [25600,35600], [43200,53200] + kernel [53200,103200] = 70000; copy-only 20000
    assert dv["busy_pct"] == approx(70_000 / W * 100)
    assert dv["compute_pct"] == approx(50_000 / W * 100)
    assert dv["copy_only_pct"] == approx(20_000 / W * 100)
    assert_device_identities(dv)
    # gaps: [0,25600): the pageable copy's call [20000,37600) has b > g1 -> x = g1 = 25600, all host
    #   part. [0,20000) nothing, short window -> launch 20; [20000,25600) is inside the pageable
    #   cudaMemcpyAsync, a blocking sync call (order 5 wins over order 8) -> sync 5.6.
    # [35600,43200): pinned copy call [37600,43600) -> x = g1 = 43200. [35600,37600) still inside the
    #   pageable call -> sync 2 (budget: B = 17600, a - g0 = 2000 -> min 2000, the same 2 us);
    #   [37600,43200) ordinary async-copy call -> launch 5.6.
    # [103200,105200): tail 2.
    # sync 5.6 + 2 = 7.6 us; launch 20 + 5.6 = 25.6 us
    assert_causes(dv["idle_ms_by_cause"], causes(launch=0.0256, sync=0.0076, tail=0.002))
    assert_breakdown(s, {"compute": 0.05, "copy": 0.02, "idle_launch": 0.0256, "idle_sync": 0.0076,
                         "idle_tail": 0.002})


def test_copies_by_kind_and_host_memory(tmp_path):
    d = run(pageable_capture(), tmp_path)
    rows = {(c["kind"], c["host_memory"]): c for c in d["metrics"]["copies"]}
    # the 30,000-byte pageable copy is under 64 KiB: its own group (glossary, "Copies")
    assert set(rows) == {("HtoD", "pageable, small"), ("HtoD", "pinned")}
    pg, pn = rows[("HtoD", "pageable, small")], rows[("HtoD", "pinned")]
    assert (pg["count"], pg["bytes"]) == (1, 30_000)
    assert pg["time_ms"] == approx(0.01)
    assert pg["gbps"] == approx(30_000 / 10_000)      # bytes / ns = GB/s = 3.0
    assert (pn["count"], pn["bytes"]) == (1, 120_000)
    assert pn["time_ms"] == approx(0.01)
    assert pn["gbps"] == approx(120_000 / 10_000)     # 12.0


# ------------------------------------------------------------------------------------------
# Scalar reads
# ------------------------------------------------------------------------------------------

def test_scalar_reads(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):                            # push at 0
        t.cpu(us=10)
        t.launch("k", us=20)                           # API [10000,15000] GPU [15000,35000]
        t.item()                                       # 4 B DtoH API [15000,21000] GPU [35000,36000];
        #                                                sync [21000, 38000]        -> scalar read
        t.memcpy("DtoH", 1 << 20)                      # 1 MiB: dur int(1048576/12)=87381; API [38000,44000]
        #                                                GPU [43600,130981]
        t.sync_stream()                                # [44000,132981]            -> too big, not scalar
        t.memcpy("DtoH", 16, asynchronous=False)       # GPU [138581,139581], API [132981,141581] blocking
        #                                                                            -> scalar (<= 16 B)
        t.memcpy("DtoH", 17, asynchronous=False)       # GPU [147181,148181], API [141581,150181] -> 17 B: no
        t.memcpy("DtoH", 8)                            # API [150181,156181] GPU [155781,156781]
        t.launch("k2", us=10)                          # next CUDA call is a launch -> 8 B copy is no scalar
        #                                                API [156181,161181] GPU [161181,171181]
        t.sync_stream()                                # [161181,173181]
    d = run(cap, tmp_path)
    (s,) = primary_steps(d)
    assert s["scalar_reads"] == 2
    assert d["metrics"]["sync"]["scalar_read_count"] == 2
    # host sync union: [21000,38000] 17000 + [44000,150181] 106181 + [161181,173181] 12000 = 135181
    assert s["host_sync_ms"] == approx(0.135181)
    calls = {c["api"]: c for c in d["metrics"]["sync"]["sync_calls"]}
    assert calls["cudaStreamSynchronize"]["count"] == 3
    assert calls["cudaStreamSynchronize"]["total_ms"] == approx(0.017 + 0.088981 + 0.012)
    assert calls["cudaStreamSynchronize"]["max_ms"] == approx(0.088981)
    assert calls["cudaMemcpy"]["count"] == 2
    assert calls["cudaMemcpy"]["total_ms"] == approx(0.0172)
    assert "cudaMemcpyAsync" not in calls            # pinned async copies never block
    (row,) = d["metrics"]["copies"]
    assert (row["kind"], row["host_memory"], row["count"]) == ("DtoH", "pinned", 5)
    assert row["bytes"] == 4 + (1 << 20) + 16 + 17 + 8
    assert row["time_ms"] == approx(0.091381)        # 1000 + 87381 + 3 x 1000 ns
    assert row["gbps"] == approx(1_048_621 / 91_381, 1e-4)


# ------------------------------------------------------------------------------------------
# Kernel statistics
# ------------------------------------------------------------------------------------------

SMALL = "void ns::small_kernel<float>(float*)"
MID_F = "void ns::mid_kernel<float>(float*)"
MID_H = "void ns::mid_kernel<half>(half*)"
BIG = "void ns::big_kernel<float>(float*)"


def kernel_stats_capture() -> Capture:
    cap = Capture()
    t = cap.process(pid=100).thread()
    t.launch("void warmup_kernel(int)", us=50)   # GPU [5000,55000]: before the window -> excluded
    t.cpu(us=95)                                 # 100000
    with t.range("step_0"):
        for name, us in ((SMALL, 5), (SMALL, 8), (MID_F, 12), (MID_H, 20), (BIG, 100)):
            t.launch(name, us=us)
    return cap


def test_kernel_stats_quantiles_and_under_10us(tmp_path):
    d = run(kernel_stats_capture(), tmp_path)
    k = d["metrics"]["kernels"]
    # durations 5, 8, 12, 20, 100 us (the warm-up kernel starts before the window)
    assert k["count"] == 5
    assert k["total_ms"] == approx(0.145)
    assert k["mean_us"] == approx(145 / 5)                 # 29
    assert k["median_us"] == approx(12.0)
    # p95: position (5-1)*0.95 = 3.8 -> 20 + 0.8*(100-20) = 84
    assert k["p95_us"] == approx(84.0)
    assert k["under_10us_pct"] == approx(40.0)             # 5 and 8 us: 2 of 5
    assert k["nccl_count"] == 0


def test_kernel_stats_per_name_and_share(tmp_path):
    d = run(kernel_stats_capture(), tmp_path)
    k = d["metrics"]["kernels"]
    short = {r["name"]: r for r in k["by_short_name"]}
    assert [r["name"] for r in k["by_short_name"]] == ["big_kernel", "mid_kernel", "small_kernel"]
    # small_kernel: 5, 8 -> median 6.5, p95 = 5 + 0.95*3 = 7.85, share 13/145
    assert short["small_kernel"]["count"] == 2
    assert short["small_kernel"]["median_us"] == approx(6.5)
    assert short["small_kernel"]["p95_us"] == approx(7.85)
    assert short["small_kernel"]["mean_us"] == approx(6.5)
    assert short["small_kernel"]["under_10us_pct"] == approx(100.0)
    assert short["small_kernel"]["share_of_kernel_time_pct"] == approx(13 / 145 * 100)
    # mid_kernel (float 12 + half 20 merged by short name): median 16, p95 12 + 0.95*8 = 19.6
    assert short["mid_kernel"]["count"] == 2
    assert short["mid_kernel"]["median_us"] == approx(16.0)
    assert short["mid_kernel"]["p95_us"] == approx(19.6)
    assert short["mid_kernel"]["share_of_kernel_time_pct"] == approx(32 / 145 * 100)
    assert short["big_kernel"]["share_of_kernel_time_pct"] == approx(100 / 145 * 100)
    # by demangled name the two mid_kernel instantiations are separate
    full = {r["name"]: r for r in k["by_name"]}
    assert [r["name"] for r in k["by_name"]] == [BIG, MID_H, SMALL, MID_F]
    assert full[MID_F]["share_of_kernel_time_pct"] == approx(12 / 145 * 100)
    assert full[MID_H]["share_of_kernel_time_pct"] == approx(20 / 145 * 100)
    assert full[MID_H]["count"] == 1
    assert sum(r["share_of_kernel_time_pct"] for r in k["by_name"]) == approx(100.0, 5e-4)


# ------------------------------------------------------------------------------------------
# Launch path
# ------------------------------------------------------------------------------------------

def test_launch_api_time_and_queue_delay_floor(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    t.launch("k1", us=100, api_us=20)   # API [0,20000]      GPU 0+12000+2000=14000 -> [14000,114000]; q=-6 -> 0
    t.launch("k2", us=10, api_us=10)    # API [20000,30000]  GPU max(28000,114000) -> [114000,124000]; q=84 us
    t.cpu(us=200)                       # 230000
    t.launch("k3", us=10, api_us=20)    # API [230000,250000] GPU 244000 -> [244000,254000]; q=-6 -> 0
    t.launch("k4", us=10, api_us=20)    # API [250000,270000] GPU max(264000,254000)=264000; q=-6 -> 0
    t.launch("k5", us=10, api_us=5)     # API [270000,275000] GPU max(275000,274000)=275000; q=0
    d = run(cap, tmp_path)
    L = d["metrics"]["launch"]
    assert L["launch_count"] == 5
    # API times 5,10,20,20,20 -> median 20, p95 20
    assert L["launch_api_us_median"] == approx(20.0)
    assert L["launch_api_us_p95"] == approx(20.0)
    # floored queue delays 0,0,0,0,84 -> median 0 (unfloored it would be -6), p95 = 0 + 0.8*84 = 67.2
    assert L["queue_delay_us_median"] == approx(0.0)
    assert L["queue_delay_us_p95"] == approx(67.2)
    # 4 of 5 kernels started within 10 us of the call returning
    assert L["queue_delay_under_10us_pct"] == approx(80.0)


# ------------------------------------------------------------------------------------------
# GPU metrics per step
# ------------------------------------------------------------------------------------------

def test_gpu_metrics_mean_per_step(tmp_path):
    # 10 kHz -> period 100000 ns; sample at t covers (t-100000, t]; samples at 100000, 200000, ...
    cap = Capture(gpu_metrics_hz=10_000)
    t = cap.process(pid=100).thread()
    t.cpu(us=50)                                                   # 50000
    with t.range("step_0"):                                        # [50000,350000]
        t.cpu(us=45)                                               # 95000
        t.launch("k", us=200, sm_active=0.5, tensor_active=0.4)    # GPU [100000,300000]
        t.cpu(us=250)                                              # 350000
    t.cpu(us=100)                                                  # 450000
    with t.range("step_1"):                                        # [450000,650000]
        t.cpu(us=45)
        t.launch("k", us=100, sm_active=0.9)                       # GPU [500000,600000]
        t.cpu(us=150)                                              # 650000
    d = run(cap, tmp_path)
    s0, s1 = primary_steps(d)
    # step 0 ends where step 1 starts: [50000,450000); samples at 100000 (0), 200000 (50),
    # 300000 (50), 400000 (0): SM Active mean 100/4 = 25; SM Issue = 0.6*SM -> 0,30,30,0 -> 15;
    # Tensor 0,40,40,0 -> 20; DRAM read 0.3*SM -> 0,15,15,0 -> 7.5
    assert s0["sm_active_pct"] == approx(25.0)
    assert s0["sm_issue_pct"] == approx(15.0)
    assert s0["tensor_active_pct"] == approx(20.0)
    assert s0["dram_read_pct"] == approx(7.5)
    # step 1 samples at 500000 (0), 600000 (90): mean 45; issue 0,54 -> 27; dram 0,27 -> 13.5
    assert s1["sm_active_pct"] == approx(45.0)
    assert s1["sm_issue_pct"] == approx(27.0)
    assert s1["tensor_active_pct"] == approx(0.0)
    assert s1["dram_read_pct"] == approx(13.5)
    # next to time-busy: 200000/400000 and 100000/200000
    assert s0["time_busy_pct"] == approx(50.0)
    assert s1["time_busy_pct"] == approx(50.0)


def test_gpu_metrics_null_without_samples(tmp_path):
    d = run(_one_range("step_0"), tmp_path)
    (s,) = primary_steps(d)
    assert s["sm_active_pct"] is None
    assert s["tensor_active_pct"] is None


# ------------------------------------------------------------------------------------------
# Capture quality
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["2026", "2024", "2022"])
def test_profiler_overhead_and_diagnostics(variant, tmp_path):
    cap = Capture(variant=variant)
    t = cap.process(pid=100).thread()
    with t.range("step_0"):                     # [0,200000] = window
        t.cpu(us=10)
        t.launch("k", us=100)                   # GPU [15000,115000]
        t.cpu(us=185)                           # 200000
    cap.profiler_overhead(T0 + 50_000, T0 + 80_000)
    cap.profiler_overhead(T0 + 70_000, T0 + 100_000)     # overlaps the first: union [50000,100000]
    cap.profiler_overhead(T0 + 190_000, T0 + 250_000)    # only [190000,200000) inside the window
    cap.profiler_overhead(T0 + 300_000, T0 + 400_000)    # outside the window
    cap.diagnostic("warn A", severity=2)
    cap.diagnostic("warn A", severity=2)
    cap.diagnostic("error B", severity=3)
    cap.diagnostic("info C", severity=1)
    d = run(cap, tmp_path)
    # (50000 + 10000) / 200000 = 30 %
    assert d["capture"]["profiler_overhead_pct"] == approx(30.0)
    diags = {x["text"]: x for x in d["capture"]["diagnostics"]}
    assert set(diags) == {"warn A", "error B"}
    assert diags["warn A"]["count"] == 2
    assert diags["warn A"]["severity"] == "warning"
    assert diags["error B"]["severity"] == "error"
    tr = d["capture"]["traced"]
    assert tr["cuda_kernels"] is True and tr["nvtx"] is True
    assert tr["cuda_memcpy"] is False and tr["osrt"] is False   # no rows written -> no table


# ------------------------------------------------------------------------------------------
# Schema variants give identical answers
# ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def causes_ref(tmp_path_factory):
    return run(causes_capture("2026"), tmp_path_factory.mktemp("ref"), name="ref.sqlite")


@pytest.mark.parametrize("variant", ["2024", "2022"])
def test_schema_variants_identical(variant, tmp_path, causes_ref):
    d = run(causes_capture(variant), tmp_path, name=f"c{variant}.sqlite")
    ref = causes_ref
    assert d["summary"] == ref["summary"]
    assert d["devices"] == ref["devices"]
    assert [s["breakdown_ms"] for s in d["steps"]] == [s["breakdown_ms"] for s in ref["steps"]]
    # and the hand-computed values
    assert d["summary"]["step_count"] == 1
    assert d["summary"]["kernel_count"] == 6
    assert device(d, 0)["busy_pct"] == approx(601_000 / CAUSES_W * 100)
    # 7 operations, 0.601 ms of GPU time: not enough GPU work to judge
    assert_not_judgeable(d)
    assert d["summary"]["step_time_ms_median"] == approx(1.11)
    assert d["summary"]["kernels_per_step_median"] == approx(6.0)
    assert_causes(device(d, 0)["idle_ms_by_cause"], CAUSES_EXPECTED)


@pytest.mark.parametrize("variant", ["2024", "2022"])
def test_schema_variants_pageable_copies(variant, tmp_path):
    cap = pageable_capture()
    cap.variant = variant
    d = run(cap, tmp_path, name=f"p{variant}.sqlite")
    kinds = sorted((c["kind"], c["host_memory"], c["count"]) for c in d["metrics"]["copies"])
    assert kinds == [("HtoD", "pageable, small", 1), ("HtoD", "pinned", 1)]
    (s,) = primary_steps(d)
    assert s["host_sync_ms"] == approx(0.0702)


# ------------------------------------------------------------------------------------------
# Identities: processes, devices, correlation ids
# ------------------------------------------------------------------------------------------

def test_correlation_ids_matched_within_process_only(tmp_path):
    cap = Capture(gpu_names={0: "GPU0", 1: "GPU1"})
    t1 = cap.process(pid=100, device=0).thread()
    t2 = cap.process(pid=200, device=1).thread()
    t1.launch("a", us=100, api_us=5)    # corr 1 of pid 100: API [0,5000]     GPU [5000,105000] on dev0
    t2.cpu(us=50)                       # 50000
    t2.launch("b", us=100, api_us=30)   # corr 1 of pid 200: API [50000,80000] GPU 50000+18000+2000=70000
    #                                     -> [70000,170000] on dev1
    d = run(cap, tmp_path)
    L = d["metrics"]["launch"]
    # each kernel matched to its own process's call: API times 5 and 30 -> median 17.5;
    # queue delays 5000-5000 = 0 and 70000-80000 -> floored 0
    assert L["launch_count"] == 2
    assert L["launch_api_us_median"] == approx(17.5)
    assert L["queue_delay_us_median"] == approx(0.0)
    # no markers: window [5000,170000]
    assert d["capture"]["window"]["start_ns"] == T0 + 5_000
    assert d["capture"]["window"]["end_ns"] == T0 + 170_000
    # dev1 gap [5000,70000): b's call (pid 200) [50000,80000) -> x = max(5000, min(80000, 70000)) =
    # 70000: all host part on pid 200's thread: [5000,50000) nothing, short window -> launch 45;
    # [50000,70000) launch call -> launch 20: launch 65.
    # (matching pid 100's call [0,5000) would give x = 5000 and a 65 us queue part -> dependency)
    assert_causes(device(d, 1)["idle_ms_by_cause"], causes(launch=0.065))
    # dev0: after a ends (105000) nothing follows before the window end -> tail
    assert_causes(device(d, 0)["idle_ms_by_cause"], causes(tail=0.065))


def test_processes_sharing_a_gpu_share_the_device(tmp_path):
    cap = Capture()
    t1 = cap.process(pid=100, device=0).thread()
    t2 = cap.process(pid=200, device=0).thread()
    t1.launch("a", us=100)              # [5000,105000]
    t2.cpu(us=50)
    t2.launch("b", us=100)              # API [50000,55000] GPU [55000,155000] (its own stream 7)
    d = run(cap, tmp_path)
    assert len(d["devices"]) == 1
    # window [5000,155000] = 150000; union = 150000 -> 100 % (a sum would be 133 %)
    assert device(d, 0)["busy_pct"] == approx(100.0)
    assert device(d, 0)["kernel_count"] == 2


def test_step_count_is_max_over_step_threads(tmp_path):
    cap = Capture(gpu_names={0: "GPU0", 1: "GPU1"})
    t1 = cap.process(pid=100, device=0).thread()
    t2 = cap.process(pid=200, device=1).thread()
    for i in range(3):                  # pid 100: steps of 100000 ns
        with t1.range(f"step_{i}"):
            t1.cpu(us=10)
            t1.launch("k", us=20)       # API [10000,15000] GPU [15000,35000] (relative to the step)
            t1.cpu(us=85)               # 15000 + 85000 = 100000
    for i in range(2):                  # pid 200: steps of 200000 ns
        with t2.range(f"step_{i}"):
            t2.cpu(us=10)
            t2.launch("k", us=20)
            t2.cpu(us=185)              # 15000 + 185000 = 200000
    d = run(cap, tmp_path)
    assert d["summary"]["step_count"] == 3
    steps = primary_steps(d)
    assert len(steps) == 5                           # both processes' step threads are primary
    # job step times, per index the slower process: index 0 max(0.1, 0.2) = 0.2, index 1 0.2,
    # index 2 0.1 (pid 100 only); lower median of (0.1, 0.2, 0.2) = 0.2
    assert d["summary"]["step_time_ms_median"] == approx(0.2)
    assert d["summary"]["kernels_per_step_median"] == approx(1.0)
    # window: first primary step start 0 -> last primary step end 400000
    assert d["capture"]["window"]["end_ns"] == T0 + 400_000


# ------------------------------------------------------------------------------------------
# More idle-gap rules: the sync window of +-10 us, the launching thread, input variants,
# precedence, unattributed
# ------------------------------------------------------------------------------------------

def test_sync_cause_tolerance_10us(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):
        t.cpu(us=10)
        t.launch("k1", us=50)           # API [10000,15000] GPU [15000,65000]
        t.cpu(us=55)                    # 70000
        t.sync_stream()                 # [70000,73000]: starts 5 us after g0=65000
        t.cpu(us=100)                   # 173000
        t.launch("k2", us=50)           # API [173000,178000] GPU [178000,228000]
        # gap [65000,178000), x = g1: the sync call covers [70000,73000) -> sync 3 (order 5); T was
        # in a blocking sync within 10 us of g0 -> budget min(B = 3000, a-g0 = 108000) = 3000 ->
        # first 3 us of the host part [65000,68000) -> sync 3. Rest: [68000,70000) + [73000,173000)
        # nothing (short window, a-g0 = 108 us) + [173000,178000) launch call -> launch 107.
        t.cpu(us=65)                    # 243000
        t.sync_stream()                 # [243000,246000]: 15 us after g0=228000 -> too late
        t.cpu(us=100)                   # 346000
        t.launch("k3", us=50)           # API [346000,351000] GPU [351000,401000]
        # gap [228000,351000): the sync call itself [243000,246000) -> sync 3; no budget (not in a
        # sync within 10 us of g0); the other 120 us (nothing / launch call, short window) -> launch
    d = run(cap, tmp_path)
    # plus the leading gap [0,15000) -> launch 15 us; step end 401000 (last op) -> no tail
    # sync 3 + 3 + 3 = 9 us (the budget adds 3 us only to the gap whose sync was within 10 us)
    assert_causes(device(d, 0)["idle_ms_by_cause"], causes(sync=0.009, launch=0.015 + 0.107 + 0.120))


def test_sync_cause_needs_the_launching_thread_in_sync(tmp_path):
    cap = Capture()
    p = cap.process(pid=100)
    m = p.thread()
    w = p.thread(tid=101)
    with m.range("step_0"):
        m.cpu(us=10)
        m.launch("k1", us=50)           # API [10000,15000] GPU [15000,65000]
        w.at(T0 + 20_000)
        w.sync_stream()                 # worker: [20000, 65000+2000=67000] (in sync at g0)
        m.cpu(us=135)                   # 150000
        m.launch("k2", us=50)           # API [150000,155000] GPU [155000,205000]
    # gap [65000,155000): launched by the main thread, which runs untraced CPU code (only its own
    # calls count; the worker's sync is ignored): [65000,150000) nothing, short window (a - g0 =
    # 85 us) -> launch 85, launch call 5 -> launch 90. (Counting the worker's sync would give a
    # sync budget of min(47000, 85000) = 47 us of sync.) Leading gap [0,15000) -> launch 15.
    d = run(cap, tmp_path)
    assert_causes(device(d, 0)["idle_ms_by_cause"], causes(launch=0.015 + 0.090))
    (s,) = primary_steps(d)
    assert s["host_sync_ms"] == approx(0.0)          # worker sync is not the step thread's
    by_tid = {x["tid"]: x for x in d["metrics"]["sync"]["host_sync_ms_by_thread"]}
    assert by_tid[101]["host_sync_ms"] == approx(0.047)
    assert by_tid.get(100, {"host_sync_ms": 0.0})["host_sync_ms"] == approx(0.0)


def test_input_cause_variants_and_precedence(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):
        t.cpu(us=10)
        t.launch("k1", us=50)           # API [10000,15000] GPU [15000,65000]
        t.cpu(us=50)                    # 65000
        t.os_call("futex", us=100)      # [65000,165000]
        t.launch("k2", us=50)           # API [165000,170000] GPU [170000,220000]
        # gap [65000,170000): futex (OS wait, order 6) covers [65000,165000) -> input 100;
        #   launch call [165000,170000) -> launch 5
        t.cpu(us=50)                    # 220000
        with t.range(DL):
            t.cpu(us=100)               # DataLoader range [220000,320000], no OS call (collate in Python)
        t.launch("k3", us=50)           # API [320000,325000] GPU [325000,375000]
        # gap [220000,325000): DataLoader range (order 2) covers [220000,320000) -> input 100; launch 5
        t.cpu(us=50)                    # 375000
        t.os_call("poll", us=40)        # [375000,415000]
        t.cpu(us=60)                    # 475000
        t.launch("k4", us=50)           # API [475000,480000] GPU [480000,530000]
        # gap [375000,480000): split, not all-or-nothing: poll [375000,415000) -> input 40;
        #   [415000,475000) nothing, short window (a-g0 = 100 us) -> launch 60; launch call -> launch 5
        t.item()                        # DtoH API [480000,486000] GPU [530000,531000]; sync [486000,533000]
        t.os_call("poll", us=300)       # [533000,833000]
        t.launch("k5", us=50)           # API [833000,838000] GPU [838000,888000]
        # gap [531000,838000): [531000,533000) inside cudaStreamSynchronize (order 5) -> sync 2; the
        #   sync budget min(B = 47000, a-g0 = 302000) would cover [531000,578000), but poll (OS
        #   wait, order 6) precedes the budget (order 7) -> [533000,833000) input 300; launch call 5
    d = run(cap, tmp_path)
    # plus leading gap [0,15000) -> launch 15
    assert_causes(device(d, 0)["idle_ms_by_cause"],
                  causes(input=0.100 + 0.100 + 0.040 + 0.300, sync=0.002,
                         launch=0.015 + 0.005 + 0.005 + 0.065 + 0.005))


def test_sync_takes_precedence_over_launch(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):
        t.cpu(us=10)
        t.launch("k1", us=50)           # API [10000,15000] GPU [15000,65000]
        t.sync_stream()                 # [15000,67000]
        for _ in range(10):
            t.wait_event(20, 21)        # API [67000,107000)
        t.launch("k2", us=50)           # API [107000,112000] GPU [112000,162000]
    # gap [65000,112000), x = g1: [65000,67000) in the sync call (order 5) -> sync; in a blocking
    # sync at g0: budget min(B = 67000-15000 = 52000, a-g0 = 107000-65000 = 42000) = 42000 ->
    # [65000,107000) sync: the sync budget (order 7) precedes the other CUDA calls (order 9,
    # `launch` in a short window) -> sync 42; the launch call [107000,112000) -> launch 5.
    # Leading gap [0,15000) -> launch 15.
    d = run(cap, tmp_path)
    assert_causes(device(d, 0)["idle_ms_by_cause"], causes(sync=0.042, launch=0.015 + 0.005))


def test_unattributed_when_launching_call_missing(tmp_path):
    import sqlite3

    cap = Capture()
    t = cap.process(pid=100).thread()
    t.launch("k1", us=50)               # corr 1: API [0,5000] GPU [5000,55000]
    t.cpu(us=100)                       # 105000
    t.launch("k2", us=50)               # corr 2: API [105000,110000] GPU [110000,160000]
    path = cap.write(tmp_path / "u.sqlite")
    con = sqlite3.connect(path)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = 2")
    con.commit()
    con.close()
    d = analyze(load_trace(path, cache=False), step_pattern=None).to_dict()
    # gap [55000,110000) ends with k2 whose launching call is unknown: the device's launching
    # thread is read instead (issue 46): the last op before the gap on device 0 with a known
    # launching call is k1, launched by t. Nothing covers [55000,110000) on t (the
    # deleted call left no row), and such a gap is never a dispatch window -> host 55 us. (Only a
    # device with no known launching call at all keeps unattributed idle: test_judgement3_gaps.)
    assert_causes(device(d, 0)["idle_ms_by_cause"], causes(host=0.055))
    # only kernels with a known launching call enter the launch path
    assert d["metrics"]["launch"]["launch_count"] == 1
    assert d["metrics"]["kernels"]["count"] == 2


# ------------------------------------------------------------------------------------------
# Copy-only, memsets, old NCCL names, devices without work
# ------------------------------------------------------------------------------------------

def test_copy_only_memset_and_window_without_markers(tmp_path):
    cap = Capture(gpu_names={0: "GPU0", 1: "GPU1"})      # device 1 has no work at all
    t = cap.process(pid=100).thread()
    t.memcpy("HtoD", 120_000)           # API [0,6000] GPU [5600,15600] (120000/12 = 10000 ns)
    t.launch("k", us=10)                # API [6000,11000] GPU max(11000,15600) -> [15600,25600]
    t.memset(us=5)                      # API [11000,15000] GPU max(15400,25600) -> [25600,30600]
    t.memcpy("DtoD", 1_000_000)         # API [15000,21000] GPU max(20600,30600) -> [30600,32600] (1e6/500)
    d = run(cap, tmp_path)
    # window: first GPU op (the copy at 5600) -> last (32600) = 27000
    assert d["capture"]["window"]["start_ns"] == T0 + 5_600
    assert d["capture"]["window"]["end_ns"] == T0 + 32_600
    dv = device(d, 0)
    assert dv["busy_pct"] == approx(100.0)
    assert dv["compute_pct"] == approx(10_000 / 27_000 * 100)
    assert dv["copy_only_pct"] == approx(17_000 / 27_000 * 100)   # copies 10000 + memset 5000 + 2000
    assert_device_identities(dv)
    # 4 operations, 0.027 ms of GPU time: not enough GPU work to judge -> summary value null
    assert_not_judgeable(d)
    # the per-GPU means are over devices *with GPU work in the window*: only device 0
    assert d["metrics"]["values"]["device_count"] == 1
    rows = {c["kind"]: c for c in d["metrics"]["copies"]}
    assert set(rows) == {"HtoD", "DtoD"}
    assert rows["DtoD"]["bytes"] == 1_000_000
    assert rows["DtoD"]["time_ms"] == approx(0.002)
    assert rows["DtoD"]["gbps"] == approx(500.0)


def test_pre_2_19_nccl_kernel_names(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    t.launch("gemm_kernel", us=100)                                     # [5000,105000]
    t.launch("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", us=200, stream=13)
    #                                                                     API [5000,10000] GPU [10000,210000]
    d = run(cap, tmp_path)
    # window [5000,210000] = 205000; union 205000; exposed = 205000 - 100000 = 105000
    dv = device(d, 0)
    assert dv["comm_ms"] == approx(0.2)
    assert dv["exposed_comm_ms"] == approx(0.105)
    assert dv["compute_pct"] == approx(100_000 / 205_000 * 100)
    assert dv["exposed_comm_pct"] == approx(105_000 / 205_000 * 100)
    assert d["metrics"]["kernels"]["nccl_count"] == 1
    assert d["metrics"]["communication"]["overlapped_pct"] == approx(95 / 200 * 100)


def test_scalar_read_followed_by_device_sync_and_pageable(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):
        t.cpu(us=10)
        t.launch("k", us=20)                        # GPU [15000,35000]
        t.memcpy("DtoH", 4)                         # API [15000,21000] GPU [35000,36000]
        t.sync_device()                             # next CUDA call is blocking -> scalar read
        t.memcpy("DtoH", 8, pageable=True)          # pageable async: the call itself blocks -> scalar read
    d = run(cap, tmp_path)
    (s,) = primary_steps(d)
    assert s["scalar_reads"] == 2
    kinds = sorted((c["kind"], c["host_memory"]) for c in d["metrics"]["copies"])
    assert kinds == [("DtoH", "pageable, small"), ("DtoH", "pinned")]


def test_launch_path_only_kernels_in_window(tmp_path):
    d = run(kernel_stats_capture(), tmp_path)
    # window [100000,250000]; kernels k1..k5 calls end 105000..125000 every 5 us, starts
    # 105000, 110000, 118000, 130000, 150000 -> queue 0, 0, 3, 10, 25 us (warm-up kernel excluded)
    L = d["metrics"]["launch"]
    assert L["launch_count"] == 5
    assert L["queue_delay_us_median"] == approx(3.0)
    assert L["queue_delay_us_p95"] == approx(10 + 0.8 * 15)   # 22
    # busy only inside the window: [105000,250000] of [100000,250000]
    assert device(d, 0)["busy_pct"] == approx(145 / 150 * 100)


# ------------------------------------------------------------------------------------------
# Library NVTX domains, boundaries, top-50, other processes, hosts, driver API names
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("domain,is_step", [
    ("NCCL", False), ("cuDNN", False), ("cuBLAS", False), ("CUB", False), ("NVSHMEM", False),
    ("TensorRT", False), ("MyTrainer", True),
])
def test_library_domains_never_mark_steps(domain, is_step, tmp_path):
    d = run(_one_range("step_1", domain=domain), tmp_path)
    assert d["capture"]["has_step_markers"] is is_step
    assert (d["summary"]["step_count"] or 0) == (1 if is_step else 0)


def test_under_10us_is_strictly_shorter(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    t.launch("a", us=10)                # 10000 ns: not shorter than 10 us
    t.launch("b", us=9.999)             # 9999 ns
    t.launch("c", us=30)
    t.launch("d", us=10)
    d = run(cap, tmp_path)
    k = d["metrics"]["kernels"]
    assert k["under_10us_pct"] == approx(25.0)          # 1 of 4
    # sorted 9.999, 10, 10, 30: median 10, p95 at 2.85 -> 10 + 0.85*20 = 27, mean 59.999/4
    assert k["median_us"] == approx(10.0)
    assert k["p95_us"] == approx(27.0)
    assert k["mean_us"] == approx(59.999 / 4)


def test_by_name_top_50_share_of_all_kernels(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    for i in range(51):
        t.launch(f"kern_{i:02d}", us=10 + i)           # 10 .. 60 us, one each
    d = run(cap, tmp_path)
    k = d["metrics"]["kernels"]
    total_us = sum(range(10, 61))                        # 51 * 35 = 1785
    assert k["count"] == 51
    assert k["total_ms"] == approx(total_us / 1000)
    for key in ("by_name", "by_short_name"):
        rows = k[key]
        assert len(rows) == 50                           # kern_00 (10 us, the smallest) dropped
        assert rows[0]["name"] == "kern_50"
        assert rows[0]["share_of_kernel_time_pct"] == approx(60 / total_us * 100)
        assert "kern_00" not in {r["name"] for r in rows}
        # shares are of *all* kernels, so the listed 50 add up to (1785 - 10) / 1785
        assert sum(r["share_of_kernel_time_pct"] for r in rows) == approx(1775 / total_us * 100, 5e-3)


def test_other_process_work_is_not_the_steps(tmp_path):
    cap = Capture()
    t1 = cap.process(pid=100).thread()
    t2 = cap.process(pid=200).thread()               # same GPU 0, no markers
    with t1.range("step_0"):                         # [0,100000]
        t1.cpu(us=10)
        t1.launch("k", us=20)                        # API [10000,15000] GPU [15000,35000]
        t1.cpu(us=85)                                # 100000
    t2.cpu(us=50)
    t2.launch("other", us=100)                       # pid 200: API [50000,55000] GPU [55000,155000]
    d = run(cap, tmp_path)
    (s,) = primary_steps(d)
    # the op of pid 200 is not a GPU operation of pid 100's step: no count, no step extension
    assert s["kernel_count"] == 1
    assert s["end_ns"] == T0 + 100_000
    assert d["capture"]["window"]["end_ns"] == T0 + 100_000
    # but the device is shared: busy = [15000,35000] + [55000,100000) = 65000 of 100000
    dv = device(d, 0)
    assert dv["busy_pct"] == approx(65.0)
    # gaps [0,15000): 10 us nothing + 5 us launch call on t1, short window -> launch 15;
    # [35000,55000): launched by pid 200's thread, call [50000,55000): 15 us nothing on that thread
    # (short window) + 5 us launch call -> launch 20
    assert_causes(dv["idle_ms_by_cause"], causes(launch=0.015 + 0.020))
    assert_breakdown(s, {"compute": 0.065, "idle_launch": 0.035})


def test_same_pid_on_two_hosts_are_two_processes_and_devices(tmp_path):
    cap = Capture()
    a = cap.process(pid=100, hw=0).thread()
    b = cap.process(pid=100, hw=1).thread()          # another node, also its GPU 0
    a.launch("k", us=100, api_us=5)                  # corr 1: [5000,105000]
    b.cpu(us=20)
    b.launch("k", us=100, api_us=20)                 # corr 1 on host 1: API [20000,40000] GPU 34000 -> [34000,134000]
    d = run(cap, tmp_path)
    assert len(d["devices"]) == 2
    assert sorted(x["kernel_count"] for x in d["devices"]) == [1, 1]
    assert d["capture"]["process_count"] == 2
    # correlation ids repeat across the two processes: API times 5 and 20 -> median 12.5
    assert d["metrics"]["launch"]["launch_api_us_median"] == approx(12.5)


def _rename_strings(path: Path, mapping: dict[str, str]) -> None:
    import sqlite3

    con = sqlite3.connect(path)
    for old, new in mapping.items():
        con.execute("UPDATE StringIds SET value = ? WHERE value = ?", (new, old))
    con.commit()
    con.close()


def test_driver_api_blocking_calls(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):
        t.cpu(us=10)                                  # 10000
        t.memcpy("DtoH", 1 << 20, asynchronous=False)  # dur 87381; GPU [15600,102981]; API [10000,104981]
        t.memcpy("HtoD", 1 << 20)                      # pinned async: API [104981,110981] GPU [110581,197962]
        t.sync_device()                                # [110981, 197962+2000=199962]
        t.cpu(us=10)
    path = cap.write(tmp_path / "drv.sqlite")
    _rename_strings(path, {"cudaMemcpy_v3020": "cuMemcpyDtoH_v2",
                           "cudaMemcpyAsync_v3020": "cuMemcpyHtoDAsync_v2",
                           "cudaDeviceSynchronize_v3020": "cuCtxSynchronize"})
    d = analyze(load_trace(path, cache=False), step_pattern=None).to_dict()
    (s,) = primary_steps(d)
    # blocking: cuMemcpyDtoH (94981) + cuCtxSynchronize (88981) = 183962 ns; the pinned
    # cuMemcpyHtoDAsync is not blocking
    assert s["host_sync_ms"] == approx(0.183962)
    calls = d["metrics"]["sync"]["sync_calls"]
    assert sum(c["count"] for c in calls) == 2
    assert sum(c["total_ms"] for c in calls) == approx(0.183962, 2e-4)


def test_host_sync_clipped_to_window(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    t.launch("k", us=100)                         # [5000,105000]
    t.sync_stream()                               # [5000,107000]
    t.cpu(us=50)                                  # 157000
    t.launch("k2", us=150)                        # API [157000,162000] GPU [162000,312000]
    t.start_end_range("step_0", T0 + 50_000, T0 + 200_000)
    d = run(cap, tmp_path)
    # the step holds k2's 150 of 250 us of GPU work (a marker that frames it); its GPU work runs
    # to 312000, so the window (the step) is [50000,312000) = 262000 ns
    # "union of its blocking sync calls inside the window": [50000,107000] = 57000 ns
    (s,) = primary_steps(d)
    assert s["host_sync_ms"] == approx(0.057)
    (th,) = d["metrics"]["sync"]["host_sync_ms_by_thread"]
    assert th["host_sync_ms"] == approx(0.057)
    assert th["share_of_window_pct"] == approx(57 / 262 * 100)


def _gpu_metrics_capture() -> Capture:
    cap = Capture(gpu_metrics_hz=10_000, gpu_names={0: "GPU0", 1: "GPU1"})
    t = cap.process(pid=100, device=1).thread()      # the training process runs on GPU 1
    t.cpu(us=50)
    with t.range("step_0"):                          # [50000,350000]
        t.cpu(us=45)
        t.launch("k", us=200, sm_active=0.5)         # GPU1 [100000,300000]
        t.cpu(us=250)
    o = cap.process(pid=200, device=0).thread()      # someone else on GPU 0, SM fully active
    o.cpu(us=95)
    o.launch("busy", us=200, sm_active=1.0)          # GPU0 [100000,300000]
    return cap


@pytest.mark.parametrize("variant", ["2026", "2024", "2022"])
def test_gpu_metrics_from_step_device(variant, tmp_path):
    cap = _gpu_metrics_capture()
    cap.variant = variant
    d = run(cap, tmp_path)
    (s,) = primary_steps(d)
    assert s["device"] == "1"
    # GPU1 samples at 100000/200000/300000: 0, 50, 50 -> 33.3333 (GPU0 would give 66.6667)
    assert s["sm_active_pct"] == approx(100 / 3)
    assert s["sm_issue_pct"] == approx(20.0)


def test_gpu_metrics_matched_by_name_and_low_byte_device(tmp_path):
    import sqlite3

    path = _gpu_metrics_capture().write(tmp_path / "gm.sqlite")
    con = sqlite3.connect(path)
    for table in ("TARGET_INFO_GPU_METRICS", "GPU_METRICS"):
        # renumber the metrics (names unchanged) and set high bits of typeId (low byte = device)
        con.execute(f"UPDATE {table} SET metricId = 10 + 3 - metricId, typeId = typeId + 0x500")
    con.commit()
    con.close()
    d = analyze(load_trace(path, cache=False), step_pattern=None).to_dict()
    (s,) = primary_steps(d)
    assert s["sm_active_pct"] == approx(100 / 3)
    assert s["sm_issue_pct"] == approx(20.0)
    assert s["dram_read_pct"] == approx(10.0)
    assert s["tensor_active_pct"] == approx(0.0)


# ------------------------------------------------------------------------------------------
# More step/op assignment and busy-split cases
# ------------------------------------------------------------------------------------------

def test_idle_before_first_op_counts_only_idle_time(tmp_path):
    cap = Capture()
    t1 = cap.process(pid=100).thread()
    t2 = cap.process(pid=200).thread()               # shares GPU 0
    with t1.range("step_0"):                         # push at 0
        t1.cpu(us=35)
        t1.launch("k", us=10)                        # API [35000,40000] GPU [40000,50000]
    t2.launch("o", us=15)                            # pid 200: API [0,5000] GPU [5000,20000]
    d = run(cap, tmp_path)
    (s,) = primary_steps(d)
    # [0,40000) minus the other process's busy [5000,20000) = 25000 ns idle
    assert s["idle_before_first_op_ms"] == approx(0.025)
    assert s["end_ns"] == T0 + 50_000
    assert device(d, 0)["busy_pct"] == approx(25_000 / 50_000 * 100)


def test_copy_only_excludes_copies_under_any_kernel(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    t.launch("gemm_kernel", us=100)                  # [5000,105000]
    t.nccl("AllReduce", us=200, api_us=8)            # API [5000,13000] GPU [11800,211800]
    t.memcpy("HtoD", 1_200_000, stream=20)           # API [13000,19000] GPU [18600,118600] (under kernels)
    t.cpu(us=231)                                    # 250000
    t.memcpy("HtoD", 120_000, stream=20)             # API [250000,256000] GPU [255600,265600] (alone)
    d = run(cap, tmp_path)
    W = 265_600 - 5_000                              # 260600
    dv = device(d, 0)
    # kernels union [5000,211800] = 206800; compute 100000; exposed 106800; copy-only 10000
    assert dv["busy_pct"] == approx(216_800 / W * 100)
    assert dv["compute_pct"] == approx(100_000 / W * 100)
    assert dv["exposed_comm_pct"] == approx(106_800 / W * 100)
    assert dv["copy_only_pct"] == approx(10_000 / W * 100)
    assert_device_identities(dv)
    # gap [211800,255600): copy call [250000,256000) -> x = g1 = 255600; [211800,250000) nothing,
    # short window (a - g0 = 38.2 us) -> launch 38.2; [250000,255600) async-copy call -> launch 5.6
    assert_causes(dv["idle_ms_by_cause"], causes(launch=0.0438))


def test_op_without_launching_call_assigned_by_gpu_start(tmp_path):
    import sqlite3

    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):                          # [0,50000]
        t.cpu(us=10)
        t.launch("long", us=50)                      # corr 1: API [10000,15000] GPU [15000,65000]
        t.launch("q", us=20)                         # corr 2: API [15000,20000] GPU [65000,85000]
        t.cpu(us=30)                                 # 50000
    with t.range("step_1"):                          # [50000,105000]
        t.cpu(us=10)
        t.launch("r", us=10)                         # corr 3: API [60000,65000] GPU [85000,95000]
        t.cpu(us=40)                                 # 105000
    path = cap.write(tmp_path / "noapi.sqlite")
    con = sqlite3.connect(path)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = 2")
    con.commit()
    con.close()
    d = analyze(load_trace(path, cache=False), step_pattern=None).to_dict()
    s0, s1 = primary_steps(d)
    # q has no known call: its GPU start 65000 falls in step_1 -> step_1 owns it
    assert [s0["kernel_count"], s1["kernel_count"]] == [1, 2]
    # step 1 begins at the later of its range start (50000) and (the earlier of) the end of step
    # 0's GPU work ("long", 65000: not q, which is step 1's) and its own first op (q at 65000)
    assert s0["end_ns"] == s1["start_ns"] == T0 + 65_000
    assert s0["duration_ms"] == s0["step_time_ms"] == approx(0.065)
    assert s1["end_ns"] == T0 + 105_000


def test_short_name_column_is_used(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    t.launch("void foo<int>(int)", us=10, short_name="bar_short")
    d = run(cap, tmp_path)
    k = d["metrics"]["kernels"]
    assert [r["name"] for r in k["by_short_name"]] == ["bar_short"]
    assert [r["name"] for r in k["by_name"]] == ["void foo<int>(int)"]


def test_copy_gbps_is_total_bytes_over_total_time(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    t.memcpy("HtoD", 120_000)                        # 12 GB/s -> 10000 ns
    t.memcpy("HtoD", 120_000, gbps=4.0)              # 4 GB/s -> 30000 ns
    d = run(cap, tmp_path)
    (row,) = d["metrics"]["copies"]
    assert row["count"] == 2 and row["bytes"] == 240_000
    assert row["time_ms"] == approx(0.04)
    assert row["gbps"] == approx(240_000 / 40_000)   # 6.0 (a mean of rates would be 8.0)


def test_scalar_read_next_call_is_per_thread(tmp_path):
    cap = Capture()
    p = cap.process(pid=100)
    m = p.thread()
    w = p.thread(tid=101)
    with m.range("step_0"):
        m.cpu(us=10)
        m.launch("k", us=20)                         # GPU [15000,35000]
        m.memcpy("DtoH", 4)                          # API [15000,21000] GPU [35000,36000]
        w.at(T0 + 22_000)
        w.launch("wk", us=5, stream=9)               # another thread's call at 22000, in between
        m.cpu(us=10)                                 # 31000
        m.sync_stream()                              # main's next CUDA call: blocking -> scalar read
    d = run(cap, tmp_path)
    (s,) = primary_steps(d)
    assert s["scalar_reads"] == 1
    assert d["metrics"]["sync"]["scalar_read_count"] == 1


def test_host_wait_pct_is_mean_over_devices(tmp_path):
    cap = Capture(gpu_names={0: "GPU0", 1: "GPU1"})
    t1 = cap.process(pid=100, device=0).thread()
    t2 = cap.process(pid=200, device=1).thread()
    with t1.range("step_0"):
        t1.cpu(us=10)
        t1.launch("k", us=50)                        # GPU0 [15000,65000]
        t1.item()                                    # copy [65000,66000]; sync [21000,68000]
        t1.cpu(us=100)                               # 168000
        t1.launch("k2", us=50)                       # API [168000,173000] GPU0 [173000,223000]
    # step end 223000 = window end
    t2.cpu(us=20)
    t2.launch("k", us=30)                            # API [20000,25000] GPU1 [25000,55000]
    t2.os_call("futex", us=100)                      # [25000,125000]
    t2.launch("k2", us=50)                           # API [125000,130000] GPU1 [130000,180000]
    d = run(cap, tmp_path)
    W = 223_000
    # GPU0: [0,15000) launch 15 (10 us nothing, short window + 5 us call);
    #       [66000,173000): [66000,68000) in cudaStreamSynchronize; budget min(B = 68000-21000 =
    #       47000, a-g0 = 168000-66000 = 102000) = 47000 -> [66000,113000) sync 47;
    #       [113000,168000) nothing, short window -> launch 55; launch call -> launch 5
    assert_causes(device(d, 0)["idle_ms_by_cause"], causes(launch=0.015 + 0.055 + 0.005, sync=0.047))
    # GPU1: [0,25000) launch 25 (20 us nothing + 5 us call, on pid 200's thread);
    #       [55000,130000): futex covers [55000,125000) -> input 70, launch call -> launch 5;
    #       [180000,223000) tail 43
    assert_causes(device(d, 1)["idle_ms_by_cause"], causes(launch=0.025 + 0.005, input=0.070, tail=0.043))
    # host wait = mean over devices of (sync + input) / W = mean(47000/W, 70000/W) * 100
    assert d["metrics"]["host_wait_pct"] == approx((47_000 + 70_000) / 2 / W * 100)


# ------------------------------------------------------------------------------------------
# Identities that must hold on any capture (bundled small scenarios)
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,kwargs", [
    ("ddp_nccl", {"steps": 2, "overlapped": True}),
    ("ddp_nccl", {"steps": 2, "overlapped": False}),
    ("sync_storm", {"steps": 2, "items_per_step": 4}),
    ("dataloader_starvation", {"steps": 2, "wait_ms": 1.0}),
    ("pageable_h2d", {"steps": 2, "nbytes": 1 << 20}),
])
def test_identities_on_scenarios(name, kwargs, tmp_path):
    from nsysdoc.testing.scenarios import SCENARIOS

    d = run(SCENARIOS[name](**kwargs), tmp_path)
    window_ms = d["capture"]["window"]["duration_ms"]
    for dv in d["devices"]:
        assert_device_identities(dv)
        # every idle nanosecond belongs to exactly one gap cause
        assert sum(dv["idle_ms_by_cause"].values()) == approx(dv["idle_pct"] / 100 * window_ms, 2e-3)
        # exposed communication never exceeds communication
        assert dv["exposed_comm_ms"] <= dv["comm_ms"] + 1e-4
    for s in primary_steps(d):
        assert sum(s["breakdown_ms"].values()) == approx(s["duration_ms"], 1e-3)


# ------------------------------------------------------------------------------------------
# New definitions: the split of a gap into idle classes (precedence table, sync budget, short
# windows), set-up and allocation classes, positional step cuts, per-GPU window numbers.
# All gaps: GPU idle from g0, next op starts at g1, launched by the call [a, b);
# x = max(g0, min(b, g1)); queue part [x, g1), host part [g0, x).
# ------------------------------------------------------------------------------------------

def gap_split(d: dict, start_rel_ns: int) -> dict:
    """The gap of metrics.idle_gaps.longest starting at T0 + start_rel_ns (cause, split_ms, ...)."""
    (g,) = [g for g in d["metrics"]["idle_gaps"]["longest"] if g["start_ns"] == T0 + start_rel_ns]
    return g


def test_sync_then_cpu_work_charges_the_sync_only_its_blocked_idle(tmp_path):
    # The glossary's "Sync then CPU work" example on the builder.
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):                     # push at 0
        t.launch("k0", us=193)                  # API [0,5000) GPU [5000,198000]
        t.sync_stream()                         # [5000, 198000+2000=200000): B = 195000
        t.cpu(us=5000)                          # Python needing the result: 5,200,000
        t.launch("k1", us=100)                  # API [5200000,5205000) GPU [5205000,5305000]
    # pop at 5,205,000; step end = window end = 5,305,000
    d = analyze_path(cap.write(tmp_path / "budget.sqlite"))
    # leading gap [0,5000): host part inside k0's launch call -> launch 5 us
    # gap [198000,5205000): x = g1. [198000,200000) inside the sync call -> sync 2; the sync
    #   returned at r = 200000 and the host reached the launch at a = 5200000: a - r = 5 ms > 1 ms,
    #   not straight back to launching -> no refill (issue 46; before, the sync budget charged
    #   min(B, a - g0) = 195 us, and the whole-gap rule before it all 5007 us). a - g0 = 5.002 ms
    #   >= 1 ms: a long window, so [200000,5200000) with nothing on T -> host 5000 us; launch call
    #   -> launch 5 us.
    dv = device(d, 0)
    assert_causes(dv["idle_ms_by_cause"], causes(sync=0.002, host=5.0, launch=0.005 + 0.005))
    g = gap_split(d, 198_000)
    assert g["duration_ms"] == approx(5.007)
    assert g["cause"] == "host"                 # largest class of the gap
    split = {c: g["split_ms"].get(c, 0.0) for c in CAUSES}
    assert split == {c: approx(v) for c, v in causes(sync=0.002, host=5.0, launch=0.005).items()}
    (s,) = primary_steps(d)
    assert_breakdown(s, {"compute": 0.293, "idle_sync": 0.002, "idle_host": 5.0, "idle_launch": 0.010})


def long_first_launch_capture() -> Capture:
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):                     # push at 0
        t.launch("k0", us=10)                   # API [0,5000) GPU [5000,15000]
        t.cpu(us=20)                            # 25000
        t.launch("load_kernel", us=1000, api_us=2000)
        # module loading on first launch: API [25000,2025000); GPU 25000 + 0.6*2000000 + 2000 =
        # 1227000 -> [1227000,2227000] (it starts while the call is still running)
        for _ in range(3):                      # typical launches, queued behind load_kernel:
            t.launch("k", us=100)               # API [2025000..2040000) GPU [2227000,2527000]
    # launch calls 5, 2000, 5, 5, 5 us -> typical (median) 5 us; long = max(1 ms, 20 x 5 us) = 1 ms
    # window [0, 2527000]
    return cap


def test_long_first_launch_is_setup_typical_launch_is_not(tmp_path):
    d = analyze_path(long_first_launch_capture().write(tmp_path / "setup.sqlite"))
    # leading gap [0,5000): launch 5.
    # gap [15000,1227000): b = 2025000 > g1 -> x = g1, no queue part. [15000,25000) nothing, short
    #   window (a - g0 = 10 us) -> launch 10; [25000,1227000) inside a launch call lasting 2 ms >=
    #   1 ms (order 3) -> setup 1202 us. The three 5 us launches never start a gap.
    dv = device(d, 0)
    assert_causes(dv["idle_ms_by_cause"], causes(launch=0.005 + 0.010, setup=1.202))
    g = gap_split(d, 15_000)
    assert g["cause"] == "setup"
    # metrics.setup is over the GPU span [5000,2527000]; the gap lies inside it
    st = d["metrics"]["setup"]
    assert st["setup_ms"] == approx(1.202)
    # the long launch ended a gap with set-up time -> one event of 2 ms
    (ev,) = st["events"]
    assert (ev["count"], ev["max_ms"], ev["total_ms"]) == (1, approx(2.0), approx(2.0))


def test_setup_pct_is_of_the_gpu_span_not_the_step_window(tmp_path):
    d = analyze_path(long_first_launch_capture().write(tmp_path / "setup_span.sqlite"))
    # first GPU op k0 starts at 5000 (the step starts at 0), last op ends at 2527000
    assert d["capture"]["span"]["start_ns"] == T0 + 5_000
    assert d["capture"]["span"]["end_ns"] == T0 + 2_527_000
    assert d["metrics"]["setup"]["setup_pct_of_span"] == approx(1_202_000 / 2_522_000 * 100)


def test_malloc_and_free_in_a_gap_are_alloc(tmp_path):
    # The glossary's "Allocation churn" example on the builder.
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):                     # push at 0
        t.launch("k0", us=10)                   # API [0,5000) GPU [5000,15000]
        t.cpu(us=10)                            # 15000 = g0
        t.free(us=300)                          # cudaFree [15000,315000)
        t.malloc(us=200)                        # cudaMalloc [315000,515000)
        t.launch("k1", us=10)                   # API [515000,520000) GPU [520000,530000]
    d = analyze_path(cap.write(tmp_path / "alloc.sqlite"))
    # leading gap [0,5000): launch 5. Gap [15000,520000): x = g1; cudaFree + cudaMalloc cover
    # [15000,515000) (order 4; a short window relabels only `api`/`host` time) -> alloc 500;
    # launch call [515000,520000) -> launch 5.
    dv = device(d, 0)
    assert_causes(dv["idle_ms_by_cause"], causes(alloc=0.5, launch=0.005 + 0.005))
    assert gap_split(d, 15_000)["cause"] == "alloc"
    (s,) = primary_steps(d)
    assert_breakdown(s, {"compute": 0.02, "idle_alloc": 0.5, "idle_launch": 0.01})
    # metrics.alloc_calls / values: 2 allocation calls in the window, 300 + 200 us of API time
    v = d["metrics"]["values"]
    assert v["alloc_call_count"] == 2
    assert v["alloc_api_ms"] == approx(0.5)
    assert v["idle_alloc_ms"] == approx(0.5)


def test_compile_nvtx_range_is_setup_compiled_function_is_not(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):                     # push at 0
        t.launch("k0", us=10)                   # API [0,5000) GPU [5000,15000]
        t.cpu(us=10)                            # 15000 = g0
        with t.range("compileFusion"):          # [15000,1515000): a compile range (order 1)
            t.cpu(us=1500)
        t.launch("fused", us=10)                # API [1515000,1520000) GPU [1520000,1530000]
        t.cpu(us=10)                            # 1530000 = g0
        with t.range("CompiledFunction"):       # [1530000,3030000): "Compiled..." is excluded
            t.cpu(us=1500)
        t.launch("k2", us=10)                   # API [3030000,3035000) GPU [3035000,3045000]
    d = analyze_path(cap.write(tmp_path / "compile.sqlite"))
    # leading gap [0,5000): launch 5.
    # gap [15000,1520000): compileFusion covers [15000,1515000) -> setup 1500; call -> launch 5.
    # gap [1530000,3035000): CompiledFunction is neither a compile nor a DataLoader range; nothing
    #   else on T and a - g0 = 1.5 ms >= 1 ms (long window) -> host 1500; call -> launch 5.
    dv = device(d, 0)
    assert_causes(dv["idle_ms_by_cause"], causes(setup=1.5, host=1.5, launch=0.015))
    assert gap_split(d, 15_000)["cause"] == "setup"
    assert gap_split(d, 1_530_000)["cause"] == "host"
    # one-time set-up over the span [5000,3045000]: the compile range, grouped by its text
    st = d["metrics"]["setup"]
    assert st["setup_ms"] == approx(1.5)
    (ev,) = st["events"]
    assert (ev["count"], ev["total_ms"]) == (1, approx(1.5))


def test_long_host_window_is_host_short_one_is_launch(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    q = "cudaEventQuery_v3020"                  # an "other" CUDA call (order 9)
    with t.range("step_0"):                     # push at 0
        t.launch("k0", us=10)                   # API [0,5000) GPU [5000,15000]
        t.cpu(us=10)                            # 15000 = g0
        t.api(q, us=200)                        # [15000,215000)
        t.cpu(us=1000)                          # 1215000
        t.launch("k1", us=10)                   # API [1215000,1220000) GPU [1220000,1230000]
        # gap A [15000,1220000): a - g0 = 1200 us >= 1 ms (long): api 200, host 1000, launch 5
        t.cpu(us=10)                            # 1230000 = g0
        t.api(q, us=200)                        # [1230000,1430000)
        t.cpu(us=600)                           # 2030000
        t.launch("k2", us=10)                   # API [2030000,2035000) GPU [2035000,2045000]
        # gap B [1230000,2035000): a - g0 = 800 us < 1 ms (short): the other call and the
        #   uncovered time are launch: 200 + 600 + 5 = launch 805
        t.cpu(us=1010)                          # 3045000
        t.launch("k3", us=10)                   # API [3045000,3050000) GPU [3050000,3060000]
        # gap C [2045000,3050000): a - g0 = 1000 us exactly: not "less than 1 ms" -> long: host 1000,
        #   launch 5
    d = analyze_path(cap.write(tmp_path / "hostwin.sqlite"))
    # leading gap [0,5000): launch 5. Idle 5 + 1205 + 805 + 1005 = 3020 us; busy 40 us; window 3060 us.
    dv = device(d, 0)
    assert_causes(dv["idle_ms_by_cause"], causes(api=0.2, host=1.0 + 1.0, launch=0.005 + 0.005 + 0.805 + 0.005))
    assert gap_split(d, 15_000)["cause"] == "host"
    assert gap_split(d, 1_230_000)["cause"] == "launch"
    assert gap_split(d, 2_045_000)["cause"] == "host"
    v = d["metrics"]["values"]
    # gaps with host time (host windows >= 1 ms): A (host 1.0 of its 1.205 ms) and C (host 1.0 of
    # 1.005 ms); the statistics are of the host time in each gap
    assert v["host_gap_count"] == 2
    assert v["host_gap_ms_max"] == approx(1.0)
    assert v["host_gap_ms_median"] == approx(1.0)
    assert v["launch_gap_count"] == 2


def test_gap_cut_by_step_boundary_split_positionally(tmp_path):
    cap = Capture()
    t = cap.process(pid=100).thread()
    with t.range("step_0"):                     # [0,300000)
        t.launch("k0", us=100)                  # API [0,5000) GPU [5000,105000]
        t.cpu(us=295)                           # 300000
    with t.range("step_1"):                     # push at 300000
        with t.range(DL):
            t.os_call("poll", us=1000)          # DataLoader + poll [300000,1300000)
        t.launch("k1", us=100)                  # API [1300000,1305000) GPU [1305000,1405000]
    # step_0 end = max(range end 300000, k0 end 105000) = 300000; step_1 end = 1405000 = window end
    d = analyze_path(cap.write(tmp_path / "cut.sqlite"))
    # gap [105000,1305000): a - g0 = 1195 us >= 1 ms (long window). [105000,300000) nothing on T ->
    #   host 195; [300000,1300000) DataLoader range -> input 1000; [1300000,1305000) launch 5.
    #   The gap's cause is input, but step_0 holds only its host part.
    s0, s1 = primary_steps(d)
    assert s0["end_ns"] == T0 + 300_000
    # step_0 [0,300000): leading gap [0,5000) launch 5 + k0 100 + host 195 = 300
    assert_breakdown(s0, {"compute": 0.1, "idle_launch": 0.005, "idle_host": 0.195})
    # step_1 [300000,1405000): input 1000 + launch 5 + k1 100 = 1105
    assert_breakdown(s1, {"compute": 0.1, "idle_input": 1.0, "idle_launch": 0.005})
    assert s1["idle_before_first_op_ms"] == approx(1.005)
    assert gap_split(d, 105_000)["cause"] == "input"
    assert_causes(device(d, 0)["idle_ms_by_cause"], causes(launch=0.010, host=0.195, input=1.0))


def test_two_gpus_each_losing_x_ms_lose_x_per_window(tmp_path):
    # Two ranks, one GPU each, identical timelines: each waits 2 ms for input.
    cap = Capture(gpu_names={0: "GPU0", 1: "GPU1"})
    for pid, dev in ((100, 0), (200, 1)):
        t = cap.process(pid=pid, device=dev).thread()
        with t.range("step_0"):                 # push at 0
            t.launch("k0", us=100)              # API [0,5000) GPU [5000,105000]
            t.os_call("futex", us=2100)         # [5000,2105000)
            t.launch("k1", us=100)              # API [2105000,2110000) GPU [2110000,2210000]
    # window [0,2210000] (both steps primary, same times). Per device: leading gap [0,5000) launch 5;
    # gap [105000,2110000): futex (order 6) covers [105000,2105000) -> input 2000; call -> launch 5.
    W = 2_210_000
    path = cap.write(tmp_path / "two_gpus.sqlite")
    d = analyze_path(path)
    for dev in (0, 1):
        assert_causes(device(d, dev)["idle_ms_by_cause"], causes(input=2.0, launch=0.010))
    # window numbers are per GPU: mean over the 2 devices = 2 ms, not 2 + 2 = 4 ms
    assert_causes(d["metrics"]["idle_gaps"]["idle_ms_by_cause"], causes(input=2.0, launch=0.010))
    v = d["metrics"]["values"]
    assert v["device_count"] == 2
    assert v["idle_input_ms"] == approx(2.0)
    assert v["idle_input_pct"] == approx(2_000_000 / W * 100)
    assert v["idle_input_ms_per_step"] == approx(2.0)     # median over the 2 primary steps
    assert d["metrics"]["host_wait_pct"] == approx(2_000_000 / W * 100)
    # the data-starvation finding's impact (impact_ms: idle_input_ms) is one GPU's wall-clock time
    dx = diagnose_path(path)
    (f,) = [f for f in dx["findings"] if f.get("id", f.get("rule")) == "data-starvation"]
    assert f["impact_ms"] == approx(2.0, 1e-3)


# ------------------------------------------------------------------------------------------
# Under-filled GPU (metrics.underfilled)
# ------------------------------------------------------------------------------------------
def test_underfilled_glossary_example(tmp_path):
    """The glossary's example: one 1x1x1 grid of one thread running 1,040 ms on a 28-SM GPU; and
    its occupancy example, 256 threads x 64 registers on an A100, here on a grid of 54 blocks."""
    cap = Capture(sm_count=28, compute_capability=(8, 6))
    t = cap.process(pid=100).thread()
    t.launch("serial(float*)", us=1_040_000, grid=1, block=1)
    d = run(cap, tmp_path)
    uf = d["metrics"]["underfilled"]
    # no markers, one kernel: window = the kernel, 1,040 ms; SM fill 1/28 = 3.5714%
    assert uf["sm_count"] == 28 and uf["devices"] == 1
    assert uf["kernel_ms"] == approx(1040.0)
    assert uf["recoverable_ms"] == approx(1040 * 27 / 28)          # 1,002.857 ms
    assert uf["sm_fill_pct"] == approx(100 / 28)
    (row,) = uf["kernels"]
    assert (row["blocks"], row["threads_per_block"], row["count"]) == (1, 1, 1)
    assert row["sm_fill_pct"] == approx(100 / 28) and row["share_of_window_pct"] == approx(2700 / 28)
    v = d["metrics"]["values"]
    assert v["underfilled_recoverable_pct"] == approx(2700 / 28) and v["underfilled_kernel_pct"] == approx(100.0)

    cap = Capture(sm_count=108, compute_capability=(8, 0))
    t = cap.process(pid=100).thread()
    t.launch("half(float*)", us=1_000, grid=54, block=256, registers=64)
    (row,) = run(cap, tmp_path, "a100.sqlite")["metrics"]["underfilled"]["kernels"]
    # 8 warps per block: warps allow 8 blocks, registers (2,048 per warp, 8 warps per sub-partition,
    # 32 warps) 4, shared memory (the 1 KB reserve) 164, cap 32 -> 4 x 8 / 64 = 50%; fill 54/108
    assert row["theoretical_occupancy_pct"] == approx(50.0) and row["sm_fill_pct"] == approx(50.0)
    assert row["recoverable_ms"] == approx(0.5) and row["low_occupancy"] is False
