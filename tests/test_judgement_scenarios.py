"""The tool's judgement on named scenarios of ``nsysdoc/testing/scenarios.py``.

Every expected number is computed by hand from the scenario code, the builder's timing model
(``nsysdoc/testing/builder.py``) and the definitions of ``docs/glossary.md``; never from the tool.
Times below are in ns relative to the capture start T0 = 1e9 ns unless marked "ms".

Builder timing model used throughout:

* ``launch(us, api_us=5)`` at host time ``a``: API ``[a, a+5000)``; kernel starts at
  ``max(a + 0.6*api_us*1000 + 2000, stream free)`` = ``max(a + 5000, free)`` for api_us=5.
* ``memcpy(api_us=6)`` at ``a``: API ``[a, a+6000)`` (blocking: until copy end + 2000); GPU starts at
  ``max(a + 3600 + 2000, free)`` = ``max(a + 5600, free)``; lasts ``max(1000, int(nbytes / gbps))``
  (gbps 12 for pinned HtoD/DtoH).
* ``sync_stream(api_us=3)`` at ``a``: API ``[a, max(a + 3000, stream free + 2000))``.
* ``item()`` = 4-byte pinned async DtoH copy (1000 ns on the GPU) + ``sync_stream``.
* ``wait_event``: cudaEventRecord 2 µs + cudaStreamWaitEvent 2 µs on the host (device-side wait).
* ``cpu(us)`` advances the host clock; ``api(name, us)`` is a CUDA call of that length.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.rules.policy import by_impact  # noqa: E402
from tests.conftest import diagnose_path  # noqa: E402

T0 = 1_000_000_000
A = 6e-5  # JSON rounds to 4 decimals: half a unit in the last place plus float slack


def approx(x: float, tol: float = A):
    return pytest.approx(x, abs=tol)


def finding(result: dict, rule: str) -> dict | None:
    found = [f for f in result["findings"] if f["rule"] == rule]
    assert len(found) <= 1, rule
    return found[0] if found else None


def fired(result: dict) -> set[str]:
    return {f["rule"] for f in result["findings"]}


def primary_steps(result: dict) -> list[dict]:
    return [s for s in result["steps"] if s.get("primary", True)]


def only_device(result: dict) -> dict:
    (dev,) = result["devices"]
    return dev


# ----------------------------------------------------------------------------------------------
# 1. weight_streaming (defaults: 4 layers of 120e6 bytes at 12 GB/s + a 1000 µs GEMM each)
# ----------------------------------------------------------------------------------------------
# Step starting at s (stream 7 free):
#   copy L0: API [s, s+6000), GPU [s+5600, s+10,005,600)  (120e6 / 12 = 10,000,000 ns)
#   GEMM 0 : API [s+6000, s+11000), GPU waits for the copy: [s+10,005,600, s+11,005,600)
#   copy L1: GPU [s+11,005,600, s+21,005,600); GEMM 1 [s+21,005,600, s+22,005,600)
#   copy L2: [.. 22,005,600, 32,005,600); GEMM 2 [32,005,600, 33,005,600)
#   copy L3: [.. 33,005,600, 43,005,600); GEMM 3 [43,005,600, 44,005,600)
#   host after 4 layers = s + 4*(6000+5000) = s+44,000
#   item(): DtoH API [s+44,000, s+50,000), GPU [s+44,005,600, s+44,006,600) (1000 ns)
#           cudaStreamSynchronize [s+50,000, s+44,006,600+2000 = s+44,008,600)
#   NVTX range [s, s+44,008,600): period P = 44,008,600 ns; step end = range end (GPU ends earlier).
# Next step's first copy at s+P+5600 (stream free at s+44,006,600 < that).
WS_STEPS = 4
WS_P = 44_008_600
WS_WINDOW_MS = WS_STEPS * WS_P / 1e6                    # 176.0344 ms
WS_COPY_ONLY_STEP_MS = (4 * 10_000_000 + 1_000) / 1e6   # 40.001 ms: no kernel runs during any copy
WS_COMPUTE_STEP_MS = 4 * 1_000_000 / 1e6                # 4.0 ms
WS_COPY_ONLY_MS = WS_STEPS * WS_COPY_ONLY_STEP_MS        # 160.004 ms per GPU (one GPU)
WS_COMPUTE_MS = WS_STEPS * WS_COMPUTE_STEP_MS            # 16.0 ms
WS_COPY_ONLY_PCT = WS_COPY_ONLY_MS / WS_WINDOW_MS * 100  # 90.89 %


def test_weight_streaming_is_transfer_bound(build):
    r = diagnose_path(build("weight_streaming", steps=WS_STEPS))
    w = r["capture"]["window"]
    assert w["kind"] == "steps"
    assert (w["start_ns"], w["end_ns"]) == (T0, T0 + WS_STEPS * WS_P)
    assert w["duration_ms"] == approx(WS_WINDOW_MS)

    # per device (one GPU) and per step
    dev = only_device(r)
    assert dev["copy_only_pct"] == approx(WS_COPY_ONLY_PCT)
    assert dev["compute_pct"] == approx(WS_COMPUTE_MS / WS_WINDOW_MS * 100)
    v = r["metrics"]["values"]
    assert v["copy_only_ms"] == approx(WS_COPY_ONLY_MS)
    assert v["compute_ms"] == approx(WS_COMPUTE_MS)
    steps = primary_steps(r)
    assert len(steps) == WS_STEPS
    for s in steps:
        assert s["duration_ms"] == approx(WS_P / 1e6)
        assert s["breakdown_ms"]["copy"] == approx(WS_COPY_ONLY_STEP_MS)
        assert s["breakdown_ms"]["compute"] == approx(WS_COMPUTE_STEP_MS)

    # copy_only_pct 90.9 >= 20 and copy-only 160.004 ms > compute 16 ms: fires.
    f = finding(r, "transfer-bound")
    assert f is not None
    assert f["impact_ms"] == approx(WS_COPY_ONLY_MS)
    # no per-step expression in the rule: impact / step_count = 160.004 / 4 = 40.001 ms
    assert f["impact_ms_per_step"] == approx(WS_COPY_ONLY_MS / WS_STEPS)
    assert f["impact_pct"] == approx(WS_COPY_ONLY_PCT)
    assert f["severity"] == by_impact(WS_COPY_ONLY_PCT) == "critical"

    vd = r["verdict"]
    assert (vd["status"], vd["headline"], vd["rule"]) == ("bottleneck", "transfer-bound", "transfer-bound")
    assert vd["impact_ms"] == approx(WS_COPY_ONLY_MS)
    assert "copies with no kernel running 90.9%" in vd["detail"]


# ----------------------------------------------------------------------------------------------
# 2. allocator_churn (defaults: 20 iterations of 100 µs kernel, cudaFree 300 µs, cudaMalloc 200 µs)
# ----------------------------------------------------------------------------------------------
# Iteration k of a step starting at s (period 505,000 = 5000 launch + 300,000 free + 200,000 malloc):
#   launch API [s+505,000k, +5000), kernel [s+5000+505,000k, s+105,000+505,000k)
#   cudaFree  [s+5000+505,000k, s+305,000+505,000k)
#   cudaMalloc[s+305,000+505,000k, s+505,000+505,000k)
# Gap after kernel k (k < 19): [s+105,000+505,000k, s+510,000+505,000k) = 405,000 ns; the next
#   launch call ends exactly at g1, so the queue part is empty. Host part: cudaFree covers 200,000,
#   cudaMalloc 200,000 (order 4: alloc), the launch call 5,000 (order 8: launch).
# Gap after kernel 19 (ends s+9,700,000) to the item() DtoH at s+10,105,600 (API
#   [s+10,100,000, s+10,106,000)): free 200,000 + malloc 200,000 alloc, copy call 5,600 launch.
# item(): DtoH GPU [s+10,105,600, s+10,106,600); sync [s+10,106,000, s+10,109,000) (3 µs min).
# Range [s, s+10,109,000): P = 10,109,000. In-step after the DtoH: [.., s+10,109,000) = 2,400 ns in
#   the sync call (sync), except the last step where no op follows before the window end (tail).
# Next step's first gap part [s', s'+5000) is its launch call (launch).
AC_STEPS, AC_ITERS = 4, 20
AC_P = 10_109_000
AC_WINDOW_MS = AC_STEPS * AC_P / 1e6                     # 40.436 ms
AC_ALLOC_GAP_MS = 0.4                                    # 300 - 100 µs of cudaFree + 200 µs cudaMalloc
AC_ALLOC_STEP_MS = AC_ITERS * AC_ALLOC_GAP_MS            # 8.0 ms
AC_ALLOC_MS = AC_STEPS * AC_ALLOC_STEP_MS                # 32.0 ms
# launch: per step 5000 (first launch) + 19*5000 + 5600 (copy call) = 105,600 ns
AC_LAUNCH_STEP_MS = (5_000 + 19 * 5_000 + 5_600) / 1e6   # 0.1056 ms
AC_LAUNCH_MS = AC_STEPS * AC_LAUNCH_STEP_MS              # 0.4224 ms -> 1.04% of the window < 10%


def test_allocator_churn_is_allocation_not_launch(build):
    r = diagnose_path(build("allocator_churn", steps=AC_STEPS))
    assert r["capture"]["window"]["duration_ms"] == approx(AC_WINDOW_MS)

    # per gap: every one of the 20 longest gaps is an alloc gap of 405.0 or 405.6 µs with 400 µs alloc
    longest = r["metrics"]["idle_gaps"]["longest"]
    assert len(longest) == 20
    for g in longest:
        assert g["cause"] == "alloc"
        assert g["duration_ms"] in (approx(0.405), approx(0.4056))
        assert g["split_ms"]["alloc"] == approx(AC_ALLOC_GAP_MS)
        assert g["split_ms"]["launch"] == approx(g["duration_ms"] - AC_ALLOC_GAP_MS)
    # 4 gaps of 405.6 µs (before each DtoH) are the longest, then 16 of 405.0 µs
    assert sorted(round(g["duration_ms"], 4) for g in longest) == [0.405] * 16 + [0.4056] * 4

    # per step
    steps = primary_steps(r)
    assert len(steps) == AC_STEPS
    for i, s in enumerate(steps):
        b = s["breakdown_ms"]
        assert s["duration_ms"] == approx(AC_P / 1e6)
        assert b["idle_alloc"] == approx(AC_ALLOC_STEP_MS)
        assert b["compute"] == approx(AC_ITERS * 0.1)      # 20 x 100 µs
        assert b["copy"] == approx(0.001)                  # the 4-byte DtoH
        assert b["idle_launch"] == approx(AC_LAUNCH_STEP_MS)
        last = i == AC_STEPS - 1
        assert b["idle_sync"] == approx(0.0 if last else 0.0024)
        assert b["idle_tail"] == approx(0.0024 if last else 0.0)

    v = r["metrics"]["values"]
    assert only_device(r)["idle_ms_by_cause"]["alloc"] == approx(AC_ALLOC_MS)
    assert v["idle_alloc_ms"] == approx(AC_ALLOC_MS)
    assert v["idle_alloc_ms_per_step"] == approx(AC_ALLOC_STEP_MS)
    assert v["idle_launch_ms"] == approx(AC_LAUNCH_MS)

    f = finding(r, "allocation-churn")
    assert f is not None
    assert f["impact_ms"] == approx(AC_ALLOC_MS)
    assert f["impact_ms_per_step"] == approx(AC_ALLOC_MS / AC_STEPS)   # 8.0 ms
    pct = AC_ALLOC_MS / AC_WINDOW_MS * 100                             # 79.1 %
    assert f["impact_pct"] == approx(pct)
    assert f["severity"] == by_impact(pct) == "critical"
    assert "launch-bound" not in fired(r)
    assert r["verdict"]["headline"] == "allocation-churn"


# ----------------------------------------------------------------------------------------------
# 3. jit_warmup_then_steady (defaults: module load 50 ms, first launch 300 ms, 400 x 500 µs)
# ----------------------------------------------------------------------------------------------
# warm-up kernel: API [0, 5000), GPU [5000, 25,000)
# cuModuleLoadData [5000, 50,005,000)
# first GEMM launch: API [50,005,000, 350,005,000) (300 ms); its kernel starts at
#   50,005,000 + 0.6*300,000,000 + 2000 = 230,007,000 and ends 230,507,000.
# 400 GEMMs: API k at 350,005,000 + 5000k; kernel 0 at 350,010,000, then back to back (the host is
#   far ahead): last ends 350,010,000 + 400*500,000 = 550,010,000. cudaDeviceSynchronize after.
# GPU span [5000, 550,010,000): 550.005 ms, midpoint 275,007,500.
# Gap A [25,000, 230,007,000): launching call ends after g1 -> queue part empty; host part:
#   [25,000, 50,005,000) cuModuleLoadData (order 3: setup) 49,980,000
#   [50,005,000, 230,007,000) launch call >= 1 ms (order 3: setup) 180,002,000  -> 229.982 ms setup
# Gap B [230,507,000, 350,010,000): host part [230,507,000, 350,005,000) still inside the 300 ms
#   launch call (order 3: setup) 119,498,000; [350,005,000, 350,010,000) ordinary launch 5,000.
# setup over the span = 229.982 + 119.498 = 349.48 ms. Both gaps start in the first half and hold
# >= max(1 ms, 1% of span = 5.5 ms) of setup -> warm-up = [5000, 350,010,000) (350.005 ms); what
# follows has no idle at all (0 setup < 5%) -> steady-state window [350,010,000, 550,010,000): 200 ms,
# 400 kernels (>= 50 operations: enough to judge), 100% compute.
JIT_SPAN_MS = 550.005
JIT_SETUP_MS = 229.982 + 119.498                          # 349.48 ms
JIT_SETUP_PCT = JIT_SETUP_MS / JIT_SPAN_MS * 100          # 63.54 % of the span


def test_jit_warmup_left_out_then_compute_bound(build):
    r = diagnose_path(build("jit_warmup_then_steady"))
    cap = r["capture"]
    assert cap["span"]["start_ns"] == T0 + 5_000
    assert cap["span"]["end_ns"] == T0 + 550_010_000
    w = cap["window"]
    assert w["kind"] == "steady-state"
    assert (w["start_ns"], w["end_ns"]) == (T0 + 350_010_000, T0 + 550_010_000)
    assert w["duration_ms"] == approx(200.0)
    assert cap["enough_gpu_work"] is True
    (ex,) = cap["excluded"]
    assert ex["kind"] == "warm-up"
    assert (ex["start_ns"], ex["end_ns"]) == (T0 + 5_000, T0 + 350_010_000)
    assert ex["duration_ms"] == approx(350.005)

    setup = r["metrics"]["setup"]
    assert setup["setup_ms"] == approx(JIT_SETUP_MS)
    assert setup["setup_pct_of_span"] == approx(JIT_SETUP_PCT)
    v = r["metrics"]["values"]
    assert v["warmup_ms"] == approx(350.005)
    assert v["span_ms"] == approx(JIT_SPAN_MS)

    # the steady window is all compute
    dev = only_device(r)
    assert dev["compute_pct"] == approx(100.0)
    assert dev["idle_pct"] == approx(0.0)

    f = finding(r, "one-time-setup")
    assert f is not None
    assert f["impact_ms"] == approx(JIT_SETUP_MS)
    assert f["impact_pct"] == approx(JIT_SETUP_PCT)        # share of the span, not of the window
    assert f["impact_of"] == "GPU span and the set-up before it"
    assert "of the GPU span and the set-up before it)" in r["verdict"]["detail"]
    assert f["impact_ms_per_step"] is None
    # 63.5 % would be critical; one-time-setup is capped at warning
    assert by_impact(JIT_SETUP_PCT) == "critical"
    assert f["severity"] == "warning"
    assert "launch-bound" not in fired(r)
    assert "host-bound" not in fired(r)

    vd = r["verdict"]
    # the set-up is framing: the window left it out and the steady state (all compute, a dominant
    # kernel at warning) is judged: the headline is what bounds the steady state; the detail says
    # what the set-up costs and that it does not recur (issue 44)
    assert finding(r, "dominant-kernel")["severity"] == "warning"
    assert (vd["status"], vd["headline"]) == ("bound", "compute-bound")
    assert vd["sentence"].startswith("Compute-bound: GPU busy 100.0%, compute 100.0% of the window.")
    assert "One-time set-up outside the steady state (one-time-setup: 349.5 ms, 63.5% of the GPU span" in vd["detail"]
    assert "it does not recur in a longer run" in vd["detail"]


# ----------------------------------------------------------------------------------------------
# 4. host_work_between_steps (defaults: 10 steps, 8 ms CPU, 8 x 250 µs GEMMs, no sync)
# ----------------------------------------------------------------------------------------------
# Step starting at s: cpu to s+8,000,000; launch k API [s+8,000,000+5000k, +5000); kernel 0 at
#   s+8,005,000, then back to back: last ends s+8,005,000 + 8*250,000 = s+10,005,000.
#   Host after launches s+8,040,000 = range end = next step start (P = 8,040,000).
#   Steps partition the thread's timeline; step i >= 1 begins at the later of its range start
#   and (the earlier of) the end of step i-1's GPU work, s_i+1,965,000, and its own first kernel,
#   s_i+8,005,000: at s_i+1,965,000. Step 0 = [0, s_1+1,965,000) = 10.005 ms: host 8.0, launch
#   0.005, compute 2.0; steps 1-9 = 8.04 ms (the last to its GPU end s_9+10,005,000): host 6.035
#   (from s_i+1.965 to its first launch at s_i+8.0), launch 0.005, compute 2.0 (its own kernels).
# Window [0, s_9 + 10,005,000) = 72,360,000 + 10,005,000 = 82,365,000 ns.
# Gap before step 0's first kernel [0, 8,005,000): [0, 8,000,000) nothing on the thread and
#   a - g0 = 8 ms >= 1 ms -> host 8.0 ms; launch call 5,000 -> launch.
# Gap between step i's GPU end s_i+10,005,000 and step i+1's first kernel s_i+16,045,000:
#   host part up to the launch call at s_i+16,040,000: 6,035,000 nothing -> host; launch 5,000.
# Window host idle = 8.0 + 9 * 6.035 = 62.315 ms; launch = 10 * 0.005 = 0.05 ms; no sync in gaps
# (the final cudaDeviceSynchronize at 80,400,000 lies where the GPU is busy until the window end).
# Step breakdown (the step's [start, end) on its device): step 0 idle_host 8.0; step i >= 1 starts
# while step i-1's kernels still run (until s_i + 1,965,000) -> idle_host 6.035 ms.
HW_STEPS = 10
HW_WINDOW_MS = 82.365
HW_HOST_MS = 8.0 + 9 * 6.035                              # 62.315 ms
HW_HOST_PCT = HW_HOST_MS / HW_WINDOW_MS * 100             # 75.66 %


def test_host_work_between_steps_is_host_bound(build):
    r = diagnose_path(build("host_work_between_steps"))
    w = r["capture"]["window"]
    assert (w["start_ns"], w["end_ns"]) == (T0, T0 + 82_365_000)

    steps = primary_steps(r)
    assert len(steps) == HW_STEPS
    expected_host = [8.0] + [6.035] * 9
    for i, (s, host) in enumerate(zip(steps, expected_host)):
        b = s["breakdown_ms"]
        assert s["duration_ms"] == s["step_time_ms"] == approx(10.005 if i == 0 else 8.04)
        assert b["compute"] == approx(2.0)
        assert b["idle_host"] == approx(host)
        assert b["idle_launch"] == approx(0.005)
        assert b["idle_sync"] == approx(0.0)
    assert r["metrics"]["values"]["idle_host_ms_per_step"] == approx((8.0 + 9 * 6.035) / 10)   # mean of the above
    assert r["metrics"]["values"]["idle_host_ms"] == approx(HW_HOST_MS)
    assert r["metrics"]["values"]["idle_launch_ms"] == approx(0.05)

    f = finding(r, "host-bound")
    assert f is not None
    assert f["impact_ms"] == approx(HW_HOST_MS)
    # per step: the mean of the steps' idle_host (8.0 once, 6.035 nine times) = 62.315 / 10
    assert f["impact_ms_per_step"] == approx(HW_HOST_MS / HW_STEPS)
    assert f["impact_pct"] == approx(HW_HOST_PCT)
    assert f["severity"] == by_impact(HW_HOST_PCT) == "critical"
    assert "launch-bound" not in fired(r)
    assert "host-sync" not in fired(r)
    assert r["verdict"]["headline"] == "host-bound"


# ----------------------------------------------------------------------------------------------
# 5. sync_then_dependent_cpu_work (defaults: 8 steps, 6 x 500 µs, 2.9 ms CPU, item(), 5 ms CPU)
# ----------------------------------------------------------------------------------------------
# Step starting at s: launches API [s+5000k, +5000), kernels back to back [s+5000, s+3,005,000).
#   Host s+30,000 -> cpu 2.9 ms -> s+2,930,000: DtoH API [s+2,930,000, s+2,936,000), GPU waits for
#   the stream: [s+3,005,000, s+3,006,000). cudaStreamSynchronize [s+2,936,000, s+3,008,000):
#   B = 72,000 ns. cpu 5 ms -> range end s+8,008,000 = P. Next first kernel at s+8,013,000.
# Gap [g0 = s+3,006,000, g1 = s+8,013,000), launch call [s+8,008,000, s+8,013,000) (queue empty):
#   [s+3,006,000, s+3,008,000) in the sync call (order 5)                       sync   2,000
#   sync refill (issue 46): the sync returned at r = s+3,008,000 and the next launching call is
#   a = s+8,008,000: a - r = 5,000,000 > SYNC_REFILL_MAX_NS (1 ms): the host did not go straight
#   back to launching, so no refill; the 5 ms of Python is host work    (before: min(B, a - g0) =
#   72,000 of sync)
#   [s+3,008,000, s+8,008,000) nothing, long window (5.002 ms)                    host 5,000,000
#   [s+8,008,000, s+8,013,000) the launch call, in the next step                  launch 5,000
# The last step: no operation follows before the window end -> its 5.002 ms after the DtoH is tail.
ST_STEPS = 8
ST_P = 8_008_000
ST_WINDOW_MS = ST_STEPS * ST_P / 1e6                    # 64.064 ms
ST_SYNC_STEP_MS = 0.002                                 # the idle while the host is blocked
ST_HOST_STEP_MS = 5.0
ST_SYNC_MS = (ST_STEPS - 1) * ST_SYNC_STEP_MS           # 0.014 ms -> 0.02% < 5%: host-sync quiet
ST_HOST_MS = (ST_STEPS - 1) * ST_HOST_STEP_MS           # 35.0 ms
ST_HOST_PCT = ST_HOST_MS / ST_WINDOW_MS * 100           # 54.63 %


def test_sync_then_dependent_cpu_work_charges_only_blocked_time(build):
    r = diagnose_path(build("sync_then_dependent_cpu_work"))
    assert r["capture"]["window"]["duration_ms"] == approx(ST_WINDOW_MS)
    steps = primary_steps(r)
    assert len(steps) == ST_STEPS
    for i, s in enumerate(steps):
        b = s["breakdown_ms"]
        last = i == ST_STEPS - 1
        assert s["duration_ms"] == approx(ST_P / 1e6)
        assert b["compute"] == approx(3.0)
        assert b["copy"] == approx(0.001)
        assert b["idle_launch"] == approx(0.005)
        assert b["idle_sync"] == approx(0.0 if last else ST_SYNC_STEP_MS)
        assert b["idle_host"] == approx(0.0 if last else ST_HOST_STEP_MS)
        assert b["idle_tail"] == approx(5.002 if last else 0.0)
    v = r["metrics"]["values"]
    assert v["idle_sync_ms"] == approx(ST_SYNC_MS)
    assert v["idle_host_ms"] == approx(ST_HOST_MS)
    assert v["idle_sync_ms_per_step"] == approx(7 * ST_SYNC_STEP_MS / 8)   # mean of 7 x 0.002 and 0
    assert v["idle_sync_pct"] == approx(ST_SYNC_MS / ST_WINDOW_MS * 100)

    assert "host-sync" not in fired(r)
    f = finding(r, "host-bound")
    assert f is not None
    assert f["impact_ms"] == approx(ST_HOST_MS)
    # per step: mean of 7 x 5.0 and the last step's 0 (its idle is tail) = 4.375 ms
    assert f["impact_ms_per_step"] == approx(ST_HOST_MS / ST_STEPS)
    assert f["impact_pct"] == approx(ST_HOST_PCT)
    assert f["severity"] == by_impact(ST_HOST_PCT) == "critical"


# ----------------------------------------------------------------------------------------------
# 6. ddp_nccl, overlapped=False, ranks=2, steps=3 (allreduce 6000 µs)
# ----------------------------------------------------------------------------------------------
# Each rank has its own process, thread clock, streams and GPU: both timelines are identical.
# Step starting at s: HtoD 4 MiB pinned: API [s, s+6000), GPU [s+5600, s+355,125) (4,194,304/12 ->
#   349,525 ns). Forward + backward: 2 x 4 x (2500 + 2 x 40) µs = 20,640 µs back to back (the host
#   launches every 20 µs): compute [s+355,125, s+20,995,125). Host: s+6000 + 24 x 20,000 = s+486,000.
#   wait_event(13, 7) [s+486,000, s+490,000); NCCL API [s+490,000, s+498,000), kernel on stream 13
#   waits for stream 7: [s+20,995,125, s+26,995,125) with nothing on stream 7 -> 6.0 ms exposed.
#   wait_event(7, 13), ADAM [s+26,995,125, s+27,295,125), DtoH [s+27,295,125, s+27,296,125),
#   cudaStreamSynchronize until s+27,298,125 = range end: P = 27,298,125.
# Window [0, 3P) = 81.894375 ms on both GPUs. Exposed comm per GPU 3 x 6 = 18 ms (mean over the two
# GPUs, never 36); per step 6.0 ms; step_count 3 -> impact / step_count = 6.0 ms.
DDP_STEPS = 3
DDP_P = 27_298_125
DDP_WINDOW_MS = DDP_STEPS * DDP_P / 1e6                 # 81.894375 ms
DDP_EXPOSED_STEP_MS = 6.0
DDP_EXPOSED_MS = DDP_STEPS * DDP_EXPOSED_STEP_MS         # 18.0 ms per GPU
DDP_EXPOSED_PCT = DDP_EXPOSED_MS / DDP_WINDOW_MS * 100   # 21.98 %


def test_ddp_exposed_nccl_is_per_gpu(build):
    r = diagnose_path(build("ddp_nccl", steps=DDP_STEPS, overlapped=False, ranks=2))
    w = r["capture"]["window"]
    assert (w["start_ns"], w["end_ns"]) == (T0, T0 + DDP_STEPS * DDP_P)
    assert len(r["devices"]) == 2
    for dev in r["devices"]:
        assert dev["comm_ms"] == approx(DDP_EXPOSED_MS)
        assert dev["exposed_comm_ms"] == approx(DDP_EXPOSED_MS)
        assert dev["exposed_comm_pct"] == approx(DDP_EXPOSED_PCT)
    assert r["summary"]["step_count"] == DDP_STEPS
    steps = primary_steps(r)
    assert len(steps) == 2 * DDP_STEPS                   # 3 per rank
    for s in steps:
        b = s["breakdown_ms"]
        assert s["duration_ms"] == approx(DDP_P / 1e6)
        assert b["exposed_comm"] == approx(DDP_EXPOSED_STEP_MS)
        assert b["compute"] == approx(20.64 + 0.3)       # forward + backward + Adam
        assert b["copy"] == approx(0.349525 + 0.001)     # HtoD + DtoH
    v = r["metrics"]["values"]
    assert v["exposed_comm_ms"] == approx(DDP_EXPOSED_MS)
    assert v["exposed_comm_ms_per_step"] == approx(DDP_EXPOSED_STEP_MS)

    f = finding(r, "nccl-exposed")
    assert f is not None
    assert f["impact_ms"] == approx(DDP_EXPOSED_MS)
    assert f["impact_ms_per_step"] == approx(DDP_EXPOSED_STEP_MS)     # not 12
    assert f["impact_pct"] == approx(DDP_EXPOSED_PCT)
    assert f["severity"] == by_impact(DDP_EXPOSED_PCT) == "critical"

    vd = r["verdict"]
    assert (vd["status"], vd["headline"]) == ("bottleneck", "nccl-exposed")
    median_step = sorted(s["breakdown_ms"]["exposed_comm"] for s in steps)[len(steps) // 2]
    assert vd["impact_ms_per_step"] == approx(median_step)
    assert vd["impact_ms_per_step"] == approx(DDP_EXPOSED_STEP_MS)
    assert vd["impact_ms"] == approx(DDP_EXPOSED_MS)


# ----------------------------------------------------------------------------------------------
# healthy_training: big back-to-back kernels, one loss.item() per step -> nothing to report
# ----------------------------------------------------------------------------------------------
def test_healthy_training_has_no_findings(build):
    r = diagnose_path(build("healthy_training"))
    assert r["findings"] == []
    vd = r["verdict"]
    assert (vd["status"], vd["headline"]) == ("bound", "compute-bound")
    assert vd["sentence"].startswith("Compute-bound")
