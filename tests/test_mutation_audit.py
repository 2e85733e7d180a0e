"""Tests for two mutations that the whole suite once let through.

1. ``nsysdoc/trace/kineto.py``: a Kineto trace without ``baseTimeNanoseconds`` has absolute
   timestamps (ns since the UNIX epoch, as PyTorch < 2.0 wrote them) when its anchor (the
   profiler span's start, else its first event) is >= 10**18 ns. Moving that threshold to 10**19
   made the real traces' ``capture.session_start_utc_ns`` null and every window value an epoch
   time, with no test failing.
2. ``nsysdoc/metrics/framing.py``: ``host_before_ms`` ("other host work before the window") must
   subtract the set-up before the first GPU operation; without ``- setup_before_ms`` start-up +
   set-up + host-before exceed the stretch before the window, with no test failing.

Every expected number below is derived by hand from the scenario description or from the raw
trace file, with the arithmetic in a comment; none is copied from the tool's output.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from nsysdoc.metrics.framing import framing
from nsysdoc.testing import Capture

from .conftest import SHARED_TRACES, diagnose_path
from .conftest import needs_shared, skip_without_shared  # issue 49

approx = pytest.approx

KINETO_DIR: Path = SHARED_TRACES / "kineto"
#: The builder's defaults, restated so the arithmetic below reads on its own.
START_NS = 1_000_000_000  # Capture.start_ns: each thread's clock starts here
#: A wall clock with sub-microsecond digits (…123_456_789), so that the old form's truncation to
#: whole microseconds shows in the expected session start.
UTC_NS = 1_764_000_000_123_456_789


# =============================================================================================
# 1. Kineto: absolute (epoch) timestamps vs. a baseTimeNanoseconds timeline
# =============================================================================================

def three_steps(utc_epoch_ns: int = UTC_NS) -> Capture:
    """One thread: a 50 us cudaStreamCreate at the capture start, 2 ms of Python, then three
    ProfilerStep ranges of [100 us Python, a 900 us kernel, cudaStreamSynchronize].

    Builder times (ns), S = START_NS = 1_000_000_000:
    - cudaStreamCreate: S .. S + 50_000 (the first event of the trace, so the profiler span starts
      at S: write_kineto starts its span at the earliest call / GPU op / range start)
    - cpu 2 ms: the thread is at S + 2_050_000 when step 0 opens
    - per step starting at T: cpu 100 us -> T + 100_000; cudaLaunchKernel (api_us 5) T + 100_000 ..
      T + 105_000; kernel at max(T + 100_000 + 0.6*5_000 + 2_000, stream free) = T + 105_000, runs
      900 us -> T + 1_005_000; cudaStreamSynchronize from T + 105_000, blocking until the stream is
      free + 2 us = T + 1_007_000; the range closes there: every step lasts 1_007_000 ns
    - steps at S + 2_050_000, S + 3_057_000, S + 4_064_000; the last ends at S + 5_071_000 (its
      range end, later than its kernel's end S + 5_069_000)
    """
    cap = Capture(utc_epoch_ns=utc_epoch_ns)
    assert cap.start_ns == START_NS  # the arithmetic above depends on it
    t = cap.process(pid=4242).thread()
    t.api("cudaStreamCreate", us=50)
    t.cpu(us=2_000)
    for i in range(3):
        with t.range(f"ProfilerStep#{i}"):
            t.cpu(us=100)
            t.launch("gemm_kernel", us=900)
            t.sync_stream()
    return cap


#: builder-time window of three_steps(): first step start -> last step end (see its docstring)
WINDOW_START_BUILDER = START_NS + 2_050_000  # = 1_002_050_000
WINDOW_END_BUILDER = START_NS + 5_071_000  # = 1_005_071_000
STEP_STARTS_BUILDER = [START_NS + 2_050_000, START_NS + 3_057_000, START_NS + 4_064_000]


def _report(cap: Capture, path: Path, form: str) -> dict:
    return diagnose_path(cap.write_kineto(path, form=form))


def test_old_form_epoch_microseconds_give_session_start_and_relative_window(tmp_path):
    """Old form (PyTorch 1.8-1.12): ``ts`` = integer microseconds since the epoch, truncated:
    ts(ns) = (utc_epoch_ns + ns) // 1000; no baseTimeNanoseconds. The anchor is the profiler span's
    start read back in ns, and it is >= 10**18, so times are absolute: session start = anchor,
    and every time is shifted by it."""
    r = _report(three_steps(), tmp_path / "old.pt.trace.json", "old")
    c = r["capture"]
    # span start ts = (1_764_000_000_123_456_789 + 1_000_000_000) // 1000
    #               = 1_764_000_001_123_456_789 // 1000 = 1_764_000_001_123_456 us
    # anchor = that x 1000 = 1_764_000_001_123_456_000 ns (the 789 ns below a microsecond are lost)
    expected_session = (UTC_NS + START_NS) // 1000 * 1000
    assert expected_session == 1_764_000_001_123_456_000
    assert 10 ** 18 <= expected_session < 10 ** 19  # the band the threshold mutation mis-reads
    assert c["session_start_utc_ns"] == expected_session
    # every builder time is S + a whole number of microseconds k, so (UTC + S + k) // 1000 =
    # (UTC + S) // 1000 + k / 1000: after the shift a time is k = builder time - S exactly.
    # window start: S + 2_050_000 - S = 2_050_000 ns; end: S + 5_071_000 - S = 5_071_000 ns
    w = c["window"]
    assert w["kind"] == "steps"
    assert w["start_ns"] == WINDOW_START_BUILDER - START_NS == 2_050_000
    assert w["end_ns"] == WINDOW_END_BUILDER - START_NS == 5_071_000
    assert w["start_ns"] < 10 ** 12  # session-relative (seconds), never an epoch value (~1.7e18)
    # the steps are relative too: 2_050_000, 3_057_000, 4_064_000
    assert [s["start_ns"] for s in r["steps"]] == [x - START_NS for x in STEP_STARTS_BUILDER]
    # the GPU span starts at the first kernel: step 0 start + 105_000 = 2_155_000 ns
    assert c["span"]["start_ns"] == 2_050_000 + 105_000


def test_new_form_base_time_nanoseconds_is_the_session_start(tmp_path):
    """New form (PyTorch >= 2.0): ``baseTimeNanoseconds`` = utc_epoch_ns, and ``ts`` = builder ns /
    1000 with 3 decimals, relative to it. The session start is that base, exactly (nanoseconds
    kept), and times stay on the trace's own timeline (ts x 1000 = builder ns)."""
    r = _report(three_steps(), tmp_path / "new.pt.trace.json", "new")
    c = r["capture"]
    # baseTimeNanoseconds = utc_epoch_ns = 1_764_000_000_123_456_789 (no truncation)
    assert c["session_start_utc_ns"] == UTC_NS
    # window start: ts "1002050.000" us x 1000 = 1_002_050_000 ns (1.002 s from the base, not epoch)
    w = c["window"]
    assert w["kind"] == "steps"
    assert w["start_ns"] == WINDOW_START_BUILDER == 1_002_050_000
    assert w["end_ns"] == WINDOW_END_BUILDER == 1_005_071_000
    assert w["start_ns"] < 10 ** 12
    assert [s["start_ns"] for s in r["steps"]] == STEP_STARTS_BUILDER


def test_absolute_threshold_is_ten_to_the_eighteen_ns(tmp_path):
    """The boundary itself, on old-form traces: an anchor of exactly 10**18 ns (2001-09-09) is
    absolute; one microsecond earlier it is not, and the times are then kept as written."""
    # utc = 10**18 - S: span start ts = (10**18 - S + S) // 1000 = 10**15 us -> anchor 10**18 ns
    at = _report(three_steps(utc_epoch_ns=10 ** 18 - START_NS), tmp_path / "at.pt.trace.json", "old")
    assert at["capture"]["session_start_utc_ns"] == 10 ** 18
    assert at["capture"]["window"]["start_ns"] == 2_050_000  # as in the old-form test above
    # utc = 10**18 - S - 1000: anchor = 10**18 - 1000 ns < 10**18: not absolute, no session start,
    # and the window start stays on the written clock: anchor + 2_050_000 = 10**18 + 2_049_000
    below = _report(three_steps(utc_epoch_ns=10 ** 18 - START_NS - 1000), tmp_path / "below.pt.trace.json", "old")
    assert below["capture"]["session_start_utc_ns"] is None
    assert below["capture"]["window"]["start_ns"] == 10 ** 18 - 1000 + 2_050_000


# ---- the real PyTorch Profiler traces in ../shared/traces/kineto ----------------------------

REAL_KINETO = ["hta_a100_rank3of8", "kineto_resnet50_v100_oldformat"]
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}


def _raw_expectations(path: Path) -> dict:
    """Read the trace with gzip + json (not nsysdoc) and derive, by the documented rules:

    - absolute? no ``baseTimeNanoseconds`` and the anchor (earliest ``PyTorch Profiler (N)`` span
      start, ts us x 1000) is >= 10**18 ns -> session start = anchor;
    - the window (step markers): first ProfilerStep start -> the last step's end, the later of its
      range end and the end of the GPU operations whose launching call (same ``correlation``)
      starts inside it, all relative to the anchor;
    - the GPU span: first GPU operation start -> last GPU operation end, relative.
    """
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    ev = doc["traceEvents"]
    spans = [e for e in ev if e.get("cat") == "Trace" and str(e.get("name", "")).startswith("PyTorch Profiler")]
    anchor_us = min(e["ts"] for e in spans)
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    s_last, e_last = steps[-1]
    corr = {e["args"]["correlation"] for e in ev if e.get("cat") in RUNTIME_CATS and s_last <= e["ts"] < e_last}
    gpu = [e for e in ev if e.get("cat") in GPU_CATS]
    last_gpu_end = max((e["ts"] + e["dur"] for e in gpu if e["args"].get("correlation") in corr), default=e_last)
    # the first step begins at its range start; a later one where the GPU reaches it: max(its range
    # start, min(the end of the GPU work of the earlier steps, its own first GPU operation))
    gpu_by_corr = {}
    for e in gpu:
        gpu_by_corr.setdefault(e["args"].get("correlation"), []).append((e["ts"], e["ts"] + e["dur"]))
    calls = [(e["ts"], e["args"]["correlation"]) for e in ev if e.get("cat") in RUNTIME_CATS]
    starts, done_until = [], None
    for s, end in steps:
        ops = [op for ts, c in calls if s <= ts < end for op in gpu_by_corr.get(c, ())]
        first = min((a for a, _ in ops), default=None)
        reach = [x for x in (done_until, first) if x is not None]
        starts.append(s if not starts or not reach else max(s, min(reach), starts[-1]))
        done_until = max([b for _, b in ops] + ([done_until] if done_until is not None else []), default=None)
    return {"base": doc.get("baseTimeNanoseconds"), "anchor_ns": anchor_us * 1000,
            "step_starts_ns": [(s - anchor_us) * 1000 for s in starts],
            "window": ((steps[0][0] - anchor_us) * 1000, (max(e_last, last_gpu_end) - anchor_us) * 1000),
            "span": ((min(e["ts"] for e in gpu) - anchor_us) * 1000,
                     (max(e["ts"] + e["dur"] for e in gpu) - anchor_us) * 1000)}


@pytest.fixture(scope="module", params=[pytest.param(n, id=n, marks=needs_shared().marks) for n in REAL_KINETO])
def real_kineto(request):
    """(raw expectations, report) of one real trace; each trace is reported once per module."""
    path = KINETO_DIR / f"{request.param}.pt.trace.json.gz"
    skip_without_shared(f"kineto/{request.param}.pt.trace.json.gz")
    return request.param, _raw_expectations(path), diagnose_path(path)


def test_real_kineto_session_start_from_the_raw_file(real_kineto):
    """Hand values (from the files' fields; neither file has baseTimeNanoseconds):
    - hta_a100_rank3of8: span ``PyTorch Profiler (0)`` ts 1661203462584767 us
      -> anchor 1_661_203_462_584_767_000 ns (2022-08-22), >= 10**18 -> session start
    - kineto_resnet50_v100_oldformat: span ts 1623142623460016 us
      -> anchor 1_623_142_623_460_016_000 ns (2021-06-08), >= 10**18 -> session start
    """
    name, raw, r = real_kineto
    hand = {"hta_a100_rank3of8": 1_661_203_462_584_767_000,
            "kineto_resnet50_v100_oldformat": 1_623_142_623_460_016_000}[name]
    assert raw["base"] is None
    assert raw["anchor_ns"] == hand  # the file is the one the hand values were read from
    assert 10 ** 18 <= hand < 10 ** 19
    assert r["capture"]["session_start_utc_ns"] == hand


def test_real_kineto_window_and_steps_are_relative(real_kineto):
    """Hand values (relative to the anchor, ns):
    - hta_a100_rank3of8: first ProfilerStep#1009 ts 1661203462598772 -> (…598772 - …584767) us =
      14_005 us = 14_005_000 ns; last step ProfilerStep#1014 ts 1661203462982823 + dur 81120 =
      …063943 us -> 479_176 us; its GPU work ends by 479_152 us -> window end 479_176_000 ns.
      GPU span: first GPU op 14_558_000 ns, last end 479_152_000 ns.
    - kineto_resnet50_v100_oldformat: ProfilerStep#5 ts 1623142623460172 -> 156 us = 156_000 ns;
      last step ProfilerStep#10 ts …624345228 + dur 164261 = …624509489 -> 1_049_473 us, but its
      last GPU op ends at 1_065_709 us -> window end 1_065_709_000 ns. GPU span 69_232_000 ..
      1_065_709_000 ns.
    """
    name, raw, r = real_kineto
    hand = {"hta_a100_rank3of8": ((14_005_000, 479_176_000), (14_558_000, 479_152_000)),
            "kineto_resnet50_v100_oldformat": ((156_000, 1_065_709_000), (69_232_000, 1_065_709_000))}[name]
    assert (raw["window"], raw["span"]) == hand  # the raw rules give the hand values
    c = r["capture"]
    assert c["window"]["kind"] == "steps"
    assert (c["window"]["start_ns"], c["window"]["end_ns"]) == hand[0]
    assert (c["span"]["start_ns"], c["span"]["end_ns"]) == hand[1]
    assert c["window"]["start_ns"] < 10 ** 12 and c["window"]["end_ns"] < 10 ** 12  # not epoch times
    assert [s["start_ns"] for s in r["steps"]] == raw["step_starts_ns"]


# =============================================================================================
# 2. Framing: set-up before the window is not "other host work"
# =============================================================================================

def test_framing_unit_all_parts_nonzero():
    """Capture 0 .. 100 ms; first CUDA call at 20 ms; GPU span from 50 ms; window 60 .. 90 ms;
    15 ms of set-up before the first GPU operation; GPU busy 36 ms over the capture, 30 ms in the
    window.

    - before = 60 - 0 = 60 ms; after = 100 - 90 = 10 ms; window 30 ms
    - startup = min(first call - start, first GPU - start) = min(20, min(50, 60)) = 20 ms
    - GPU work outside the window = 36 - 30 = 6 ms; the window starts 60 - 50 = 10 ms after the
      span, so GPU work before the window = min(6, 10) = 6 ms
    - host before = 60 - 20 - 15 - 6 = 19 ms; 20 + 15 + 19 + 6 = 60 = before
    - outside = (60 + 10) / 100 x 100 = 70 %; busy over the capture = 36 / 100 x 100 = 36 %
    """
    ms = 1_000_000
    out = framing(capture_start=0, capture_end=100 * ms, window_start=60 * ms, window_end=90 * ms,
                  first_call_ns=20 * ms, context_ms=4.0, context_name="cudaMalloc", setup_before_ms=15.0,
                  busy_capture_ms=36.0, busy_window_ms=30.0, span_start=50 * ms)
    assert out["capture_ms"] == approx(100.0)
    assert out["window_ms"] == approx(30.0)
    assert out["before_window_ms"] == approx(60.0)
    assert out["after_window_ms"] == approx(10.0)
    assert out["startup_ms"] == approx(20.0)
    assert out["context_ms"] == 4.0 and out["context_call"] == "cudaMalloc"
    assert out["setup_before_ms"] == approx(15.0)
    assert out["gpu_outside_window_ms"] == approx(6.0)
    assert out["host_before_ms"] == approx(19.0)
    assert out["outside_window_pct"] == approx(70.0)
    assert out["busy_capture_pct"] == approx(36.0)
    gpu_before = 6.0  # by hand, above
    assert out["startup_ms"] + out["setup_before_ms"] + out["host_before_ms"] + gpu_before == \
        approx(out["before_window_ms"])


def test_framing_unit_window_at_the_gpu_span():
    """The common case (window = GPU span, so no GPU work before it): capture 0 .. 10 s, first call
    at 3 s, window 7 .. 9 s, 2.5 s of set-up.
    before = 7,000 ms; startup = min(3,000, 7,000) = 3,000; GPU before = 0 (window at the span
    start); host before = 7,000 - 3,000 - 2,500 - 0 = 1,500 ms; sum 3,000 + 2,500 + 1,500 = 7,000."""
    s = 1_000_000_000
    out = framing(0, 10 * s, 7 * s, 9 * s, 3 * s, 2_500.0, "cudaFree", 2_500.0, 2_000.0, 2_000.0, 7 * s)
    assert out["before_window_ms"] == approx(7_000.0)
    assert out["startup_ms"] == approx(3_000.0)
    assert out["gpu_outside_window_ms"] == approx(0.0)
    assert out["host_before_ms"] == approx(1_500.0)
    assert out["startup_ms"] + out["setup_before_ms"] + out["host_before_ms"] == approx(out["before_window_ms"])


def startup_setup_then_host_work() -> Capture:
    """A program, capture starting at 0 (ms):

    - 0 .. 500: Python start-up, no CUDA call                       (process start-up, 500)
    - 500 .. 600: cudaMalloc 100 ms, creating the context            (context creation, set-up)
    - 600 .. 630: cuModuleLoadData 30 ms                             (set-up call)
    - 630 .. 635: cudaStreamCreate 5 ms                              (set-up call)
    - 635 .. 835: 200 ms of untraced host work                       (other host work)
    - 835 .. 835.5: cudaMalloc 0.5 ms (< 1 ms: not context creation; an allocation, not set-up)
    - 835.5: cudaLaunchKernel, 5 us; kernel at 835.5 + 0.6 x 0.005 + 0.002 = 835.505 ms, 20 ms long
      -> 855.505 ms (the window: the GPU span, one kernel, no step markers)
    - then 120 ms of host work -> 955.505, and a 1 us cudaDeviceSynchronize -> 955.506 (capture end)
    """
    cap = Capture(start_ns=0)
    t = cap.process().thread()
    t.cpu(us=500_000)
    t.malloc(us=100_000)
    t.api("cuModuleLoadData", us=30_000)
    t.api("cudaStreamCreate", us=5_000)
    t.cpu(us=200_000)
    t.malloc(us=500)
    t.launch("solver_kernel", us=20_000, api_us=5)
    t.cpu(us=120_000)
    t.api("cudaDeviceSynchronize", us=1)
    return cap


def test_framing_end_to_end_setup_is_not_host_work(tmp_path):
    """Hand numbers for startup_setup_then_host_work() (ms):

    - capture: 0 (an nsys export's session start) .. 955.506 -> 955.506
    - window = GPU span 835.505 .. 855.505 -> 20; before = 835.505; after = 955.506 - 855.505 = 100.001
    - startup: 0 -> first CUDA call = 500
    - context: the first call of >= 1 ms before the first GPU op, not a launch: cudaMalloc, 100
    - set-up before the first GPU op: union of cudaMalloc 500..600, cuModuleLoadData 600..630,
      cudaStreamCreate 630..635 = 135 (the 0.5 ms cudaMalloc and the 5 us launch are not set-up)
    - GPU work before the window: 0 (the window starts at the span start)
    - other host work before = 835.505 - 500 - 135 - 0 = 200.505
      (= 200 of host work + 0.5 cudaMalloc + 0.005 from the launch call's start to the kernel's)
    - busy over the capture = 20 / 955.506 x 100 = 2.0931 %
    """
    r = diagnose_path(startup_setup_then_host_work().write(tmp_path / "framing.sqlite"))
    fr = r["capture"]["framing"]
    assert r["capture"]["window"]["kind"] == "gpu-span"
    assert fr["capture_ms"] == approx(955.506, abs=1e-6)
    assert fr["window_ms"] == approx(20.0, abs=1e-6)
    assert fr["before_window_ms"] == approx(835.505, abs=1e-6)
    assert fr["after_window_ms"] == approx(100.001, abs=1e-6)
    assert fr["startup_ms"] == approx(500.0, abs=1e-6)
    assert fr["context_ms"] == approx(100.0, abs=1e-6) and fr["context_call"] == "cudaMalloc"
    assert fr["setup_before_ms"] == approx(135.0, abs=1e-6)
    assert fr["gpu_outside_window_ms"] == approx(0.0, abs=1e-6)
    assert fr["host_before_ms"] == approx(200.505, abs=1e-6)
    assert fr["busy_capture_pct"] == approx(20.0 / 955.506 * 100, abs=1e-3)
    gpu_before = 0.0  # by hand, above
    assert fr["startup_ms"] + fr["setup_before_ms"] + fr["host_before_ms"] + gpu_before == \
        approx(fr["before_window_ms"], abs=1e-6)


def warmup_kernel_then_steps() -> Capture:
    """GPU work before the window too (capture starting at 0, ms):

    - 0 .. 300: Python start-up                                     (process start-up, 300)
    - 300 .. 350: cudaMalloc 50 ms, creating the context             (set-up)
    - 350 .. 360: cuModuleLoadData 10 ms                             (set-up)
    - 360 .. 360.005: cudaLaunchKernel; warm-up kernel at 360 + 0.003 + 0.002 = 360.005, 10 ms long
      -> 370.005 (the first GPU operation: the GPU span starts here)
    - cudaStreamSynchronize from 360.005, blocking until 370.005 + 0.002 = 370.007
    - 370.007 .. 410.007: 40 ms of untraced host work
    - ProfilerStep#0 at 410.007: launch 410.007 .. 410.012, kernel 410.012 .. 415.012 (5 ms), sync
      until 415.014, range end 415.014
    - ProfilerStep#1 at 415.014: kernel 415.019 .. 420.019, sync until 420.021, range end 420.021
    - a 1 us cudaDeviceSynchronize -> 420.022 (capture end)
    """
    cap = Capture(start_ns=0)
    t = cap.process().thread()
    t.cpu(us=300_000)
    t.malloc(us=50_000)
    t.api("cuModuleLoadData", us=10_000)
    t.launch("warmup_kernel", us=10_000, api_us=5)
    t.sync_stream()
    t.cpu(us=40_000)
    for i in range(2):
        with t.range(f"ProfilerStep#{i}"):
            t.launch("step_kernel", us=5_000, api_us=5)
            t.sync_stream()
    t.api("cudaDeviceSynchronize", us=1)
    return cap


def test_framing_end_to_end_with_gpu_work_before_the_window(tmp_path):
    """Hand numbers for warmup_kernel_then_steps() (ms):

    - window = steps 410.007 .. 420.021 -> 10.014; capture 0 .. 420.022; before = 410.007;
      after = 420.022 - 420.021 = 0.001
    - startup = min(first call 300, first GPU op 360.005) = 300
    - set-up before the first GPU op (360.005): cudaMalloc 300..350 + cuModuleLoadData 350..360 = 60
      (context: the cudaMalloc, 50)
    - GPU busy over the capture 10 + 5 + 5 = 20, over the window 5 + 5 = 10 -> outside 10; the
      window starts 410.007 - 360.005 = 50.002 after the span, so GPU work before it = min(10,
      50.002) = 10
    - other host work before = 410.007 - 300 - 60 - 10 = 40.007
      (= launch call to kernel 0.005 + sync return 0.002 + 40 of host work)
    """
    r = diagnose_path(warmup_kernel_then_steps().write(tmp_path / "warmup.sqlite"))
    fr = r["capture"]["framing"]
    assert r["capture"]["window"]["kind"] == "steps"
    assert fr["capture_ms"] == approx(420.022, abs=1e-6)
    assert fr["window_ms"] == approx(10.014, abs=1e-6)
    assert fr["before_window_ms"] == approx(410.007, abs=1e-6)
    assert fr["after_window_ms"] == approx(0.001, abs=1e-6)
    assert fr["startup_ms"] == approx(300.0, abs=1e-6)
    assert fr["context_ms"] == approx(50.0, abs=1e-6) and fr["context_call"] == "cudaMalloc"
    assert fr["setup_before_ms"] == approx(60.0, abs=1e-6)
    assert fr["gpu_outside_window_ms"] == approx(10.0, abs=1e-6)
    assert fr["host_before_ms"] == approx(40.007, abs=1e-6)
    gpu_before = 10.0  # by hand, above
    assert fr["startup_ms"] + fr["setup_before_ms"] + fr["host_before_ms"] + gpu_before == \
        approx(fr["before_window_ms"], abs=1e-6)
