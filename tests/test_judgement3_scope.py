"""What the capture can support (issue 46, items 5, 6, 7 and the unexplained-idle note).

Expected numbers are computed by hand from the scenario code (``nsysdoc/testing/scenarios.py``),
the builder's timing model (header of ``tests/test_judgement_scenarios.py``) and the definitions
of ``docs/glossary.md`` ("What the capture can support"); never from the tool. Times in ms are
relative to the capture start (0); the builder's threads start at T0 = 1,000 ms.

Builder facts used here: ``launch(us)`` at host time a: API [a, a+5 µs), kernel at
max(a + 5 µs, stream free); ``memcpy(asynchronous=False)`` of n bytes at a: GPU copy from a + 5.6 µs
lasting n / 12 ns (pinned), the call returns 2 µs after the copy ends; ``api(name, us)`` is a CUDA
call of that length; the capture ends at the last recorded event.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.metrics import capture_checks as cc  # noqa: E402
from nsysdoc.rules.evaluate import _support_problems  # noqa: E402
from nsysdoc.rules.policy import by_impact  # noqa: E402
from tests.conftest import diagnose_path  # noqa: E402

MS = 1_000_000
from tests.test_judgement_scenarios import approx, finding  # noqa: E402 - one copy of the helpers


# ----------------------------------------------------------------------------------------------
# Item 5: a blocking call that outlasts the recorded GPU work
# ----------------------------------------------------------------------------------------------
def _unrec(call_start, call_end, op_start, op_end, op_proc=None, call_proc=(0,)):
    op_proc = np.zeros(len(op_start), np.int64) if op_proc is None else np.array(op_proc)
    return cc.unrecorded_after_blocking(np.array(call_start), np.array(call_end), np.array(call_proc),
                                        np.array(op_start), np.array(op_end), op_proc)


def test_unrecorded_rocm_example():
    """The ROCm trace of the issue: a 29 ms hipStreamSynchronize, recorded kernels cover its first 1 ms."""
    r = _unrec([0], [29 * MS], [-5 * MS], [1 * MS])
    assert list(r["index"]) == [0]
    assert list(r["covered_ns"]) == [1 * MS] and list(r["uncovered_ns"]) == [28 * MS]


@pytest.mark.parametrize("op_end_ns, flagged", [
    # call [0, 1.5 ms): uncovered = 1.5 - op end; share of 1.5 ms is >= 50% in all three
    (500_000, False),   # uncovered exactly 1.000 ms: not more than 1 ms
    (499_999, True),    # 1.000001 ms
])
def test_unrecorded_one_ms_boundary(op_end_ns, flagged):
    assert bool(len(_unrec([0], [1_500_000], [0], [op_end_ns])["index"])) is flagged


@pytest.mark.parametrize("op_end_ns, flagged", [
    # call [0, 10 ms): uncovered = 10 - op end ms (always > 1 ms here)
    (5 * MS, False),      # exactly 50% of the call
    (5 * MS - 1, True),   # 50.00001%
])
def test_unrecorded_half_boundary(op_end_ns, flagged):
    assert bool(len(_unrec([0], [10 * MS], [0], [op_end_ns])["index"])) is flagged


def test_unrecorded_only_own_process_and_ops_started_before_the_return():
    # another process's op covering the call does not count; an op starting at the call's end does
    # not either (it did not start before the call returned); the own op ends at 1 ms: 9 ms uncovered
    r = _unrec([0], [10 * MS], [0, 0, 10 * MS], [1 * MS, 10 * MS, 11 * MS], op_proc=(0, 1, 0))
    assert list(r["uncovered_ns"]) == [9 * MS]
    # no recorded GPU operation of its process before the call: not judged (context creation)
    assert len(_unrec([0], [10 * MS], [20 * MS], [21 * MS])["index"]) == 0
    # a long kernel that started before the call and runs to its end covers it (running maximum)
    assert len(_unrec([5 * MS], [10 * MS], [0, 1 * MS], [10 * MS, 2 * MS])["index"]) == 0


# sync_outlasts_recorded_work (defaults): 60 launches, each after 10 µs of CPU: launch i at host
# T0 + 10 + 15 i µs, kernel from T0 + 15 µs back to back (500 µs each, the GPU is slower than the
# host): the last ends at T0 + 15 µs + 30,000 µs = T0 + 30.015 ms. Host after the launches:
# T0 + 60 x 15 µs = T0 + 0.9 ms; + 28,115 µs of CPU = T0 + 29.015 ms; the 29,000 µs
# cudaStreamSynchronize lasts [T0 + 29.015, T0 + 58.015) ms: covered 30.015 - 29.015 = 1.0 ms,
# uncovered 58.015 - 30.015 = 28.0 ms > 1 ms and > 14.5 ms. Window = GPU span, 30.0 ms, 100% busy.
def test_sync_outlasts_recorded_work_is_incomplete_not_compute_bound(build):
    r = diagnose_path(build("sync_outlasts_recorded_work"))
    (u,) = r["capture"]["unrecorded_gpu_work"]
    assert u["call"] == "cudaStreamSynchronize" and u["pid"] == 4700
    assert (u["start_ns"], u["end_ns"]) == (1_029_015_000, 1_058_015_000)
    assert u["duration_ms"] == approx(29.0) and u["covered_ms"] == approx(1.0) and u["uncovered_ms"] == approx(28.0)
    assert r["summary"]["gpu_busy_pct"] == approx(100.0)
    q = finding(r, "capture-quality")
    assert q["severity"] == "warning"
    assert "GPU work not recorded: cudaStreamSynchronize lasts 29.0 ms, recorded GPU work covers only its first " \
           "1.00 ms" in q["message"]
    v = r["verdict"]
    assert (v["status"], v["headline"]) == ("too-little-work", "capture-quality")
    assert v["sentence"].startswith("The capture is incomplete: GPU work was not recorded (cudaStreamSynchronize "
                                    "lasts 29.0 ms, recorded GPU work covers only its first 1.00 ms)")
    assert "Compute-bound" in v["detail"]  # what the window alone would suggest, said as such


def test_sync_within_recorded_work_stays_compute_bound(build):
    # the same with a 1,900 µs sync: [29.015, 30.915) ms, uncovered 30.915 - 30.015 = 0.9 ms <= 1 ms
    r = diagnose_path(build("sync_outlasts_recorded_work", sync_us=1_900.0))
    assert r["capture"]["unrecorded_gpu_work"] == []
    assert (r["verdict"]["status"], r["verdict"]["headline"]) == ("bound", "compute-bound")
    q = finding(r, "capture-quality")
    assert q is None or "GPU work not recorded" not in q["message"]


# ----------------------------------------------------------------------------------------------
# Item 6: a sliver of GPU work
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("busy_ms, capture_ms, sliver", [
    (0.999, 10.0, True),      # under 1 ms
    (1.0, 10.0, False),       # 1 ms, 10% of the capture
    (1.0, 1000.0, False),     # exactly 0.1% of the capture: not under it
    (1.0, 1000.1, True),      # 0.09999%
    (None, 1000.0, False),    # no GPU work known: said by other findings
])
def test_sliver_boundaries(busy_ms, capture_ms, sliver):
    assert cc.gpu_work_sliver(busy_ms, capture_ms) is sliver


# sliver_of_gpu_work_in_long_program (defaults): a 400 ms cudaFree (context creation), then 62
# launches of a 2.5 µs kernel, each after 75 µs of Python: 62 x 2.5 µs = 0.155 ms of GPU work
# (< 1 ms: a sliver), 62 operations (>= 50: enough to judge without this rule). Window = GPU
# span: first kernel at T0 + 400 ms + 75 µs + 5 µs, each next one 80 µs later, the last ends
# 61 x 80 + 2.5 µs later: 4.8825 ms; idle 4.8825 - 0.155 = 4.7275 ms, all launch gaps = 96.83%
# of the window: launch-bound would be critical (>= 15%); capped at info.
def test_sliver_caps_launch_bound_at_info(build):
    r = diagnose_path(build("sliver_of_gpu_work_in_long_program"))
    v = r["metrics"]["values"]
    assert v["busy_ms"] == approx(0.155) and v["gpu_work_sliver"] is True and v["enough_gpu_work"] is True
    assert r["capture"]["window"]["duration_ms"] == approx(4.8825)
    lb = finding(r, "launch-bound")
    assert lb["impact_ms"] == approx(4.7275)
    assert by_impact(lb["impact_pct"]) == "critical" and lb["severity"] == "info"
    flagged = {f["rule"] for f in r["findings"] if f["severity"] != "info"}
    assert flagged <= {"one-time-setup", "capture-quality"}
    assert "the window holds only 155.0 us of GPU work" in finding(r, "capture-quality")["message"]


def test_more_gpu_work_keeps_launch_bound_critical(build):
    # 62 x 50 µs = 3.1 ms of GPU work in a capture of about 1,000 + 400 + 62 x 80 µs + 100 ms ~ 1,505 ms
    # (launches 80 µs apart, each kernel 50 µs: 30 µs launch gaps): 0.21% >= 0.1% and >= 1 ms: no
    # sliver; launch idle 61 x 30 µs = 1.83 ms of a 61 x 80 + 50 = 4.93 ms window = 37% >= 15%: critical
    r = diagnose_path(build("sliver_of_gpu_work_in_long_program", kernel_us=50.0))
    v = r["metrics"]["values"]
    assert v["busy_ms"] == approx(3.1) and v["gpu_work_sliver"] is False
    assert finding(r, "launch-bound")["severity"] == "critical"


# ----------------------------------------------------------------------------------------------
# Item 7: the program's own host time outside the window
# ----------------------------------------------------------------------------------------------
# vector_add_host_init_and_verify (defaults): cudaMalloc 50 ms + 2 x 0.2 ms from T0 = 1,000 ms to
# 1,050.4 ms; 3,000 ms of init to 4,050.4 ms; HtoD #1 call at a0 = 4,050.4 ms, copy [a0 + 5.6 µs,
# a0 + 1,005.6 µs) (12e6 B / 12 B/ns = 1 ms), returns at a0 + 1,007.6 µs; HtoD #2 the same 1,007.6 µs
# later; the kernel launch at a'' = a0 + 2,015.2 µs, kernel [a'' + 5, a'' + 505) µs; DtoH launched at
# a'' + 5 µs runs [a'' + 505, a'' + 1,505) µs, returns at a'' + 1,507 µs = 4,053.9222 ms; 2,000 ms of
# verification; 3 x 0.3 ms cudaFree: the capture ends at 6,054.8222 ms.
# Host phases after the first CUDA call: [1,050.4, 4,050.4) = 3,000 ms before the window and
# [4,053.9222, 6,053.9222) = 2,000 ms after it: 5,000 ms = 82.5788% of 6,054.8222 ms.
VA_CAPTURE_MS = 6_054.8222
VA_HOST_MS = 5_000.0


def test_vector_add_host_phases_are_the_headline(build):
    r = diagnose_path(build("vector_add_host_init_and_verify"))
    hw = r["capture"]["host_outside_window"]
    assert r["capture"]["framing"]["capture_ms"] == approx(VA_CAPTURE_MS)
    assert hw["ms"] == approx(VA_HOST_MS) and hw["before_ms"] == approx(3000.0) and hw["after_ms"] == approx(2000.0)
    assert hw["pct"] == approx(VA_HOST_MS / VA_CAPTURE_MS * 100)  # 82.5788
    assert [(p["where"], p["start_ns"], p["end_ns"]) for p in hw["phases"]] == [
        ("before the window", 1_050_400_000, 4_050_400_000), ("after the window", 4_053_922_200, 6_053_922_200)]
    f = finding(r, "host-outside-window")
    assert f["impact_ms"] == approx(VA_HOST_MS) and f["impact_pct"] == approx(82.5788)
    assert f["impact_of"] == "capture" and f["impact_ms_per_step"] is None
    assert f["severity"] == "critical"  # 82.6% >= 15%, kept although the GPU work is a sliver (3.5 ms, 0.06%)
    assert "5.00 s (82.6% of the 6.05 s capture)" in f["message"]
    assert r["metrics"]["values"]["gpu_work_sliver"] is True
    v = r["verdict"]
    assert (v["status"], v["headline"]) == ("bottleneck", "host-outside-window")


@pytest.mark.parametrize("gap_ns, kept", [(999_999, False), (1_000_000, True)])
def test_host_phase_one_ms_boundary(gap_ns, kept):
    # first call at 0, window [10, 20) ms, capture end 20 ms; calls cover [0, 10 ms - gap)
    phases = cc.host_phases_outside_window(0, 20 * MS, 10 * MS, 20 * MS, np.array([0]), np.array([10 * MS - gap_ns]))
    assert (len(phases) == 1) is kept


def test_host_phases_leave_out_process_start_up_and_busy_intervals():
    # capture start-up before the first call (at 5 ms) is not counted; a set-up range [6, 8) ms and a
    # GPU operation [12, 13) ms count as busy: window [20, 30) ms, capture end 40 ms
    phases = cc.host_phases_outside_window(5 * MS, 40 * MS, 20 * MS, 30 * MS,
                                           np.array([5 * MS, 6 * MS, 12 * MS]), np.array([6 * MS, 8 * MS, 13 * MS]))
    assert [(p["start_ns"] // MS, p["end_ns"] // MS) for p in phases] == [(8, 12), (13, 20), (30, 40)]


# ----------------------------------------------------------------------------------------------
# Item 1 (second half): idle no launching call explains
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pct, noted", [(10.0, False), (10.01, True)])
def test_unexplained_idle_note_boundary(pct, noted):
    v = {"idle_unattributed_pct": pct, "idle_unattributed_ms": pct * 3.0}  # a 300 ms window
    notes = [n for n in _support_problems(v, kineto=False) if "no recorded launching call" in n]
    assert bool(notes) is noted
    if noted:
        assert notes[0].startswith("30.0 ms (10.0% of the window) of GPU idle ends in operations with no recorded "
                                   "launching call (unified-memory migrations, driver or graph work)")
        assert "--trace=cuda" in notes[0] and "--cuda-um-gpu-page-faults=true" in notes[0]


# ----------------------------------------------------------------------------------------------
# Every idle class above 10% of the window has a finding or a capture-quality note
# ----------------------------------------------------------------------------------------------
#: the rules that speak of each idle class (gpu-dependency: the rule of issue 46's dependency part)
IDLE_CLASS_RULES = {
    "sync": {"host-sync"}, "input": {"data-starvation"}, "alloc": {"allocation-churn", "one-time-setup"},
    "setup": {"one-time-setup"}, "launch": {"launch-bound", "tiny-kernels"}, "api": {"driver-stall"},
    "host": {"host-bound"}, "dependency": {"gpu-dependency"}, "tail": set(), "unattributed": set(),
}
#: what a capture-quality note says of a class no rule speaks of
IDLE_CLASS_NOTES = {"unattributed": "no recorded launching call", "tail": "after the last GPU operation"}
IDLE_CLASS_MIN_PCT = 10.0


def unexplained_idle_classes(result: dict) -> list[str]:
    """Idle classes above 10% of the window with neither a finding of a rule that speaks of them nor
    a capture-quality note that names them."""
    v = result["metrics"]["values"]
    fired = {f["rule"] for f in result["findings"]}
    q = next((f["message"] for f in result["findings"] if f["rule"] == "capture-quality"), "")
    out = []
    for c, rules in IDLE_CLASS_RULES.items():
        pct = v.get(f"idle_{c}_pct")
        if not isinstance(pct, (int, float)) or pct <= IDLE_CLASS_MIN_PCT:
            continue
        if rules & fired or (c in IDLE_CLASS_NOTES and IDLE_CLASS_NOTES[c] in q):
            continue
        out.append(f"{c} {pct:.1f}%")
    return out


def test_idle_class_check_catches_a_class_without_finding():
    r = {"metrics": {"values": {"idle_dependency_pct": 54.3, "idle_unattributed_pct": 12.0, "idle_host_pct": 11.0}},
         "findings": [{"rule": "host-bound", "message": ""},
                      {"rule": "capture-quality", "message": "... no recorded launching call ..."}]}
    assert unexplained_idle_classes(r) == ["dependency 54.3%"]


def _scenario_names() -> list[str]:
    from nsysdoc.testing.scenarios import SCENARIOS

    return sorted(SCENARIOS)


@pytest.mark.parametrize("name", _scenario_names())
def test_every_large_idle_class_is_spoken_of_in_scenarios(build, name):
    assert unexplained_idle_classes(diagnose_path(build(name))) == []


from tests.conftest import SHARED_TRACES as SHARED, needs_shared  # noqa: E402  (issue 49)

SHARED_FILES = sorted([*SHARED.glob("*.sqlite"), *SHARED.glob("kineto/*.pt.trace.json.gz")]) if SHARED.is_dir() else []


@needs_shared()
@pytest.mark.parametrize("path", SHARED_FILES, ids=[p.name for p in SHARED_FILES])
def test_every_large_idle_class_is_spoken_of_in_shared_traces(path):
    from nsysdoc.errors import NsysdocError

    try:
        r = diagnose_path(path)
    except NsysdocError:  # a file that cannot be diagnosed (its label says so)
        pytest.skip("not diagnosable")
    assert unexplained_idle_classes(r) == []


@pytest.mark.parametrize("pct, noted", [(10.0, False), (10.01, True)])
def test_tail_idle_note_boundary(pct, noted):
    v = {"idle_tail_pct": pct, "idle_tail_ms": pct * 3.0}  # a 300 ms window
    notes = [n for n in _support_problems(v, kineto=False) if "after the last GPU operation" in n]
    assert bool(notes) is noted


# ---- review of issue 46: start-up is no measure of the GPU work; work launched before the window

def _late_first_launch():
    """120 s of imports and data preparation before the first CUDA call, then 5 steps
    (``train_step_N`` ranges) of 300 x (40 us of Python, a 6 us launch of a 4 us kernel) and
    ``loss.item()``."""
    from nsysdoc.testing.builder import Capture
    from nsysdoc.testing.scenarios import ELEMENTWISE

    cap = Capture()
    t = cap.process(pid=4200).thread()
    t.cpu(us=120e6)
    for i in range(5):
        with t.range(f"train_step_{i}"):
            for _ in range(300):
                t.cpu(us=40)
                t.launch(ELEMENTWISE, 4.0, api_us=6)
            t.item()
    return cap


def test_start_up_before_the_first_cuda_call_does_not_make_a_sliver(tmp_path):
    """GPU work: 1,500 kernels x 4 us = 6 ms (> 1 ms). Against the whole capture (~120,070 ms) it is
    0.005% (a "sliver", which capped launch-bound at info); the program's part of the capture starts
    at the first CUDA call: 5 x 300 x (40 + 6) us = 69 ms of launching plus the item() copies, so the
    6 ms are about 8.7%, far above 0.1%: launch-bound stays critical."""
    r = diagnose_path(_late_first_launch().write(tmp_path / "late.sqlite"))
    v = r["metrics"]["values"]
    assert v["capture_ms"] > 120_000
    assert 60 < v["program_ms"] < 80
    assert v["busy_capture_share_pct"] == pytest.approx(6.0 / v["program_ms"] * 100, rel=0.05)
    assert v["gpu_work_sliver"] is False
    assert {f["rule"]: f["severity"] for f in r["findings"]}["launch-bound"] == "critical"
    assert "Smaller findings" not in (r["verdict"].get("detail") or "")


def test_gpu_work_launched_before_the_window_is_recorded_work(tmp_path):
    """A 20 ms GEMM on stream 9 is launched 0.1 ms before ProfilerStep#0; the first step's
    cudaDeviceSynchronize waits for it. The GEMM runs [5 us, 20.005 ms): it covers the sync up to
    its end, so nothing is unrecorded (the check read only operations starting in the window, and
    said "GPU work not recorded")."""
    from nsysdoc.testing.builder import Capture
    from nsysdoc.testing.scenarios import ELEMENTWISE, GEMM

    cap = Capture()
    t = cap.process(pid=4300).thread()
    t.launch(GEMM, 20000, stream=9)
    t.cpu(us=100)
    for i in range(6):
        with t.range(f"ProfilerStep#{i}"):
            for _ in range(20):
                t.launch(ELEMENTWISE, 200, stream=7)
            t.sync_device()
    r = diagnose_path(cap.write(tmp_path / "pre.sqlite"))
    assert r["capture"]["unrecorded_gpu_work"] == []
    assert r["verdict"]["headline"] != "capture-quality"


def test_unexplained_idle_without_cuda_api_tracing_says_so():
    """With no CUDA API call recorded the idle is unexplained because nothing was traced, not
    because the operations were unified-memory migrations or graph work."""
    v = {"idle_unattributed_pct": 80.2, "idle_unattributed_ms": 32.4, "cuda_api_traced": False}
    (note,) = [n for n in _support_problems(v, kineto=False) if "GPU idle" in n]
    assert note.startswith("32.4 ms (80.2% of the window) of GPU idle cannot be explained: no CUDA API call was "
                           "recorded")
    assert "unified-memory" not in note
