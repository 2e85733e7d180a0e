"""Issue 49: the exposed-NCCL finding points at the stretches where communication runs alone on the
GPU (``metrics.exposed_comm``, ``time_ranges: exposed_comm``), not at the whole slowest step.

Expected numbers are computed by hand (times in ns; T0 = 1e9 ns, the builder's capture start)."""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.metrics.exposed import exposed_comm_intervals_ns, longest_first  # noqa: E402
from tests.conftest import SHARED_TRACES, diagnose_path, needs_shared  # noqa: E402
from tests.test_real_trace_labels import _clip, _union  # noqa: E402 - the labels' interval sweep

T0 = 1_000_000_000


def test_exposed_intervals_by_hand():
    """Device 0: NCCL [0, 100) and [150, 200), compute [20, 40) and [60, 160): exposed
    [0, 20), [40, 60) and [160, 200). Device 1: NCCL [0, 10) and [10, 30) (touching: one stretch
    [0, 30)), compute [29, 40) -> [0, 29). A compute kernel alone (device 2) exposes nothing.
    Clipped to [5, 190): device 0 [5, 20), [40, 60), [160, 190); device 1 [5, 29)."""
    dev = [0, 0, 0, 0, 1, 1, 1, 2]
    s = [0, 150, 20, 60, 0, 10, 29, 0]
    e = [100, 200, 40, 160, 10, 30, 40, 50]
    comm = [True, True, False, False, True, True, False, False]
    k, a, b = exposed_comm_intervals_ns(dev, s, e, comm, 0, 1000)
    assert list(zip(k.tolist(), a.tolist(), b.tolist())) == [(0, 0, 20), (0, 40, 60), (0, 160, 200), (1, 0, 29)]
    k, a, b = exposed_comm_intervals_ns(dev, s, e, comm, 5, 190)
    assert list(zip(k.tolist(), a.tolist(), b.tolist())) == [(0, 5, 20), (0, 40, 60), (0, 160, 190), (1, 5, 29)]
    # merged when closer than 21 ns: device 0's [0, 20) and [40, 60) are 20 apart -> [0, 60)
    k, a, b = exposed_comm_intervals_ns(dev, s, e, comm, 0, 1000, merge_gap_ns=21)
    assert list(zip(k.tolist(), a.tolist(), b.tolist())) == [(0, 0, 60), (0, 160, 200), (1, 0, 29)]
    # 20 apart is not closer than 20: kept apart
    k, a, b = exposed_comm_intervals_ns(dev, s, e, comm, 0, 1000, merge_gap_ns=20)
    assert len(a) == 4
    # lengths 20, 20, 40, 29: the two longest are [160, 200) then [0, 29)
    k, a, b = exposed_comm_intervals_ns(dev, s, e, comm, 0, 1000)
    assert longest_first(a, b, 2).tolist() == [2, 3]
    # nothing: no kernel, no communication kernel, an empty range
    assert all(len(x) == 0 for x in exposed_comm_intervals_ns([], [], [], [], 0, 10))
    assert all(len(x) == 0 for x in exposed_comm_intervals_ns([0], [0], [10], [False], 0, 10))
    assert all(len(x) == 0 for x in exposed_comm_intervals_ns([0], [0], [10], [True], 20, 30))


@pytest.fixture(scope="module")
def partly(tmp_path_factory):
    from nsysdoc.testing.scenarios import nccl_partly_overlapped

    d = tmp_path_factory.mktemp("nccl49")
    return diagnose_path(nccl_partly_overlapped().write(d / "nccl_partly_overlapped.sqlite"))


def test_partly_overlapped_allreduce_stretches_by_hand(partly):
    """Steps start at T0 + 1, 3, 5, 8, 10 ms and last 2, 2, 3, 2 ms and ~1 ms: the slowest is
    step 2 (a = T0 + 5 ms), the median (lower middle of 1, 2, 2, 2, 3 ms by time then index) step 1
    (a = T0 + 3 ms). Per step (scenario docstring): GEMM [a+5000, a+305000), all-reduce
    [a+11800, a+911800), fill [a+418000, a+468000): the all-reduce is alone during
    [a+305000, a+418000) (0.113 ms) and [a+468000, a+911800) (0.4438 ms), 0.5568 ms in all."""
    ex = partly["metrics"]["exposed_comm"]
    assert set(ex) == {"worst_step", "median_step"}
    for kind, step, a in (("worst_step", 2, T0 + 5_000_000), ("median_step", 1, T0 + 3_000_000)):
        r = ex[kind]
        assert r["step"] == step and r["device"] == "0"
        assert r["exposed_ms"] == pytest.approx(0.5568, abs=1e-4) and r["stretch_count"] == 2
        assert [(x["start_ns"], x["end_ns"], x["device"]) for x in r["stretches"]] == [
            (a + 305_000, a + 418_000, "0"), (a + 468_000, a + 911_800, "0")]
        assert [x["duration_ms"] for x in r["stretches"]] == pytest.approx([0.113, 0.4438], abs=1e-4)
    f = next(f for f in partly["findings"] if f["rule"] == "nccl-exposed")
    a = T0 + 5_000_000
    assert [(r["start_ns"], r["end_ns"], r["device"]) for r in f["time_ranges"]] == [
        (a + 305_000, a + 418_000, "0"), (a + 468_000, a + 911_800, "0")]


def test_allreduce_without_step_markers_uses_the_window(tmp_path):
    """No NVTX steps: one thread at host time T0 launches a 300 us GEMM (API [T0, T0+5000), GPU
    [T0+5000, T0+305000)), a 900 us all-reduce on stream 13 (API [T0+5000, T0+13000), GPU from
    T0+5000+4800+2000 = T0+11800 to T0+911800), 400 us of CPU work, then a 50 us fill (API
    [T0+413000, T0+418000), GPU [T0+418000, T0+468000)). The window is the GPU span
    [T0+5000, T0+911800); the all-reduce is alone during [T0+305000, T0+418000) and
    [T0+468000, T0+911800), on every device of the window (device null)."""
    from nsysdoc.testing.builder import Capture
    from nsysdoc.testing.scenarios import FILL, GEMM

    cap = Capture(gpu_names={0: "NVIDIA A100-SXM4-80GB"})
    t = cap.process(pid=5100, device=0).thread()
    t.launch(GEMM, 300)
    t.nccl("AllReduce", 900, stream=13)
    t.cpu(400)
    t.launch(FILL, 50)
    t.sync_stream(13)
    r = diagnose_path(cap.write(tmp_path / "allreduce_no_steps.sqlite"))
    ex = r["metrics"]["exposed_comm"]
    assert set(ex) == {"window"} and ex["window"]["step"] is None and ex["window"]["device"] is None
    assert (ex["window"]["start_ns"], ex["window"]["end_ns"]) == (T0 + 5_000, T0 + 911_800)
    assert ex["window"]["exposed_ms"] == pytest.approx(0.5568, abs=1e-4)
    want = [(T0 + 305_000, T0 + 418_000), (T0 + 468_000, T0 + 911_800)]
    assert [(x["start_ns"], x["end_ns"]) for x in ex["window"]["stretches"]] == want
    f = next(f for f in r["findings"] if f["rule"] == "nccl-exposed")
    assert [(x["start_ns"], x["end_ns"]) for x in f["time_ranges"]] == want


def test_exposed_comm_time_ranges_fall_back_to_the_slowest_step():
    """A result without ``metrics.exposed_comm`` (an older JSON): the slowest step, as before."""
    from nsysdoc.rules.evaluate import _time_ranges

    rule = type("R", (), {"time_ranges": "exposed_comm", "evidence": None})()
    result = {"capture": {"window": {"start_ns": 0, "end_ns": 10}}, "metrics": {"step_picks": {"worst_step": 1}}}
    steps = [{"step": 0, "name": "ProfilerStep#0", "start_ns": 0, "end_ns": 4, "step_time_ms": 4e-6, "device": "0"},
             {"step": 1, "name": "ProfilerStep#1", "start_ns": 4, "end_ns": 10, "step_time_ms": 6e-6, "device": "0"}]
    out = _time_ranges(rule, result, {"steps": steps, "gaps": []})
    assert [(r["start_ns"], r["end_ns"]) for r in out] == [(4, 10)]
    result["metrics"]["exposed_comm"] = {"worst_step": {"step": 1, "stretches": [
        {"device": "0", "start_ns": 6, "end_ns": 7}, {"device": "0", "start_ns": 5, "end_ns": 6}]}}
    out = _time_ranges(rule, result, {"steps": steps, "gaps": []})
    assert [(r["start_ns"], r["end_ns"]) for r in out] == [(5, 6), (6, 7)]


HTA = "kineto/hta_a100_rank3of8.pt.trace.json.gz"


@needs_shared(HTA)
def test_hta_rank3_worst_step_exposed_time_matches_the_trace():
    """HTA's A100 rank 3 (nccl-exposed critical): the slowest step's exposed stretches add up to
    the exposed time computed straight from the trace's JSON: on device 3 inside the longest
    ProfilerStep annotation, the union of NCCL kernels minus the union of the other kernels.
    Times in the trace are µs; the tool's are ns from the first event's ``ts``."""
    r = diagnose_path(SHARED_TRACES / HTA)
    ex = r["metrics"]["exposed_comm"]["worst_step"]
    with gzip.open(SHARED_TRACES / HTA) as fh:
        ev = json.load(fh)["traceEvents"]
    origin_us = min(e["ts"] for e in ev if "ts" in e)
    step = max((e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["dur"])
    lo, hi = step["ts"], step["ts"] + step["dur"]
    assert ex["start_ns"] == round((lo - origin_us) * 1000) and ex["end_ns"] == round((hi - origin_us) * 1000)
    ks = [e for e in ev if e.get("cat") == "kernel" and e.get("args", {}).get("device") == 3]

    def union(ivs):  # merged, inside the step
        return _union(_clip(list(ivs), lo, hi))

    comm = union((e["ts"], e["ts"] + e["dur"]) for e in ks if "nccl" in e["name"].lower())
    comp = union((e["ts"], e["ts"] + e["dur"]) for e in ks if "nccl" not in e["name"].lower())
    exposed_us = sum((e - s) - sum(max(0, min(e, b) - max(s, a)) for a, b in comp) for s, e in comm)
    assert exposed_us > 1000  # several ms: the case the finding is about
    assert ex["exposed_ms"] == pytest.approx(exposed_us / 1000, abs=0.1)
    kept = ex["stretches"]
    assert len(kept) == min(50, ex["stretch_count"])
    assert sum(x["duration_ms"] for x in kept) <= ex["exposed_ms"] + 1e-6
    # every kept stretch is communication with no compute (up to the < 1 µs merged gaps)
    for x in kept:
        s, e = x["start_ns"] / 1000 + origin_us, x["end_ns"] / 1000 + origin_us
        assert any(a <= s + 1e-3 and e <= b + 1e-3 for a, b in comm), x
        assert sum(max(0, min(e, b) - max(s, a)) for a, b in comp) < 1, x
    f = next(f for f in r["findings"] if f["rule"] == "nccl-exposed")
    assert f["severity"] == "critical"
    longest = sorted(kept, key=lambda x: -(x["end_ns"] - x["start_ns"]))[:8]
    assert sorted((t["start_ns"], t["end_ns"]) for t in f["time_ranges"]) == \
        sorted((x["start_ns"], x["end_ns"]) for x in longest)
    assert np.all([lo <= t["start_ns"] / 1000 + origin_us <= hi for t in f["time_ranges"]])
