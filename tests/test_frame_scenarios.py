"""Issue 44, "the frame": the window, the steps and the headline on the situations users reported
(``nsysdoc/testing/frame_scenarios.py``).

Every expected number is computed by hand from the scenario code, the builder's timing model
(``docs/testing.md``, ``nsysdoc/testing/builder.py``) and ``docs/glossary.md`` ("Steps and the
analysis window", "Step breakdown", "Severity and impact", "Verdict", "Capture quality"); never
from the tool. Times are in µs after the capture start T0 = 1e9 ns unless marked otherwise.

Builder timing model used throughout:

* ``launch_each(t, (name, us))``: 10 µs of Python, then ``cudaLaunchKernel`` of 5 µs; the kernel
  starts at max(call start + 0.6·5 + 2 = call start + 5, stream free). So a launch costs the host
  15 µs and a kernel of 15 µs or more keeps the GPU ahead of the host once it is behind.
* ``launch(name, us)`` alone: the call [a, a+5), kernel at max(a + 5, stream free).
* ``memcpy(api_us=6)`` at a: call [a, a+6) (blocking ones until copy end + 2); GPU at
  max(a + 3.6 + 2 = a + 5.6, stream free), lasting max(1000 ns, int(bytes / GB/s)) with 12 GB/s
  pinned, 3 GB/s pageable.
* ``item()``: 4-byte pinned DtoH copy (call 6 µs, 1 µs on the GPU) + ``cudaStreamSynchronize``
  (3 µs, or until the stream is free + 2 µs).
* ``nccl`` (api 8 µs), ``wait_event`` (2 + 2 µs on the host; the waiting stream waits on the GPU).
"""
from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from nsysdoc.testing import frame_scenarios as F  # noqa: E402
from tests.conftest import diagnose_path  # noqa: E402

T0 = 1_000_000_000
US = 1_000
A = 6e-5  # JSON numbers are rounded to 4 decimals: half a unit in the last place plus float slack
SEV = {"critical": 2, "warning": 1, "info": 0}


def approx(x: float, tol: float = A):
    return pytest.approx(x, abs=tol)


# ----------------------------------------------------------------------------------------------
# one report per (scenario, arguments, form), written once per module
# ----------------------------------------------------------------------------------------------

class _Reports:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.cache: dict = {}

    def path(self, name: str, form: str = "sqlite", **kw) -> Path:
        key = ("path", name, form, tuple(sorted(kw.items())))
        if key not in self.cache:
            cap = F.FRAME_SCENARIOS[name](**kw)
            stem = f"{name}_{len(self.cache)}"
            if form == "kineto":
                self.cache[key] = cap.write_kineto(self.tmp / f"{stem}.pt.trace.json.gz",
                                                   distributed={"backend": "nccl", "rank": 0, "world_size": 2})
            else:
                self.cache[key] = cap.write(self.tmp / f"{stem}.sqlite")
        return self.cache[key]

    def get(self, name: str, form: str = "sqlite", **kw) -> dict:
        key = ("report", name, form, tuple(sorted(kw.items())))
        if key not in self.cache:
            self.cache[key] = diagnose_path(self.path(name, form, **kw))
        return self.cache[key]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> _Reports:
    return _Reports(tmp_path_factory.mktemp("frame"))


def primary(r: dict) -> list[dict]:
    return [s for s in r["steps"] if s["primary"]]


def finding(r: dict, rule: str) -> dict | None:
    found = [f for f in r["findings"] if f["rule"] == rule]
    assert len(found) <= 1, rule
    return found[0] if found else None


def severities_in_order(r: dict) -> None:
    ranks = [SEV[f["severity"]] for f in r["findings"]]
    assert ranks == sorted(ranks, reverse=True), [(f["rule"], f["severity"]) for f in r["findings"]]


def cli_report(path: Path, *args: str) -> str:
    from typer.testing import CliRunner

    from nsysdoc.cli import app

    res = CliRunner().invoke(app, ["report", str(path), *args])
    assert res.exit_code == 0, res.output
    return res.output


# ----------------------------------------------------------------------------------------------
# 1. One training step without markers is one step, not 11 layer "steps" and a 12th
# ----------------------------------------------------------------------------------------------
# one_step_with_layers(layers=12): the host starts with 10 µs of Python, so the first launch call
# starts at T0+10 and its kernel at T0+15. Kernels, in µs:
#   embedding 50 + 12 x (GEMM 300 + softmax 60 + GEMM 300 + layer norm 40) + loss 30
#   + 12 x (layer-norm bwd 40 + dgrad 300 + wgrad 300 + softmax bwd 60) + 4 x AdamW 100
#   = 50 + 8,400 + 30 + 8,400 + 400 = 17,280 µs, 1 + 48 + 1 + 48 + 4 = 102 kernels.
# Every kernel lasts >= 30 µs > the host's 15 µs per launch, so after T0+15 the GPU never waits:
# the GPU work ends at T0 + 15 + 17,280 = T0+17,295.
# Inference by hand: the layer period 4 agrees on 44 forward + 44 backward of 98 positions (89.8%)
# but no token marks an iteration (no H2D copy, the AdamW launches are adjacent, every host pause is
# 10 µs), so the units start at the softmax launches of the 12 forward layers: 11 units of 60 µs
# of launches and a 12th from the last forward layer to the end of the GPU work (~17 ms, > 3x the
# median unit): they do not tile the GPU work. Backward kernels (from launch 50) and then AdamW
# kernels (launches 98-101, all in the last 40% of 102) -> one training step, from the first
# launch call to the end of the GPU work. Inferred steps do not frame the window (it stays the GPU
# span, [T0+15, T0+17,295)) and a step's time starts no earlier than the first GPU operation:
# [T0+15, T0+17,295) = 17.280 ms, its operations still counted from the launch call at T0+10.
ONE_STEP_START = T0 + 15 * US
ONE_STEP_END = T0 + 17_295 * US
ONE_STEP_MS = 17.280
ONE_STEP_COMPUTE_MS = 17.280


@pytest.mark.parametrize("nvtx", [True, False], ids=["phase-ranges", "no-nvtx"])
def test_one_training_step_is_one_step(reports, nvtx):
    r = reports.get("one_step_with_layers", nvtx=nvtx)
    cap = r["capture"]
    assert cap["step_source"] == "inferred"
    # "forward pass", "backward pass", "optimizer step" are no step markers, nor step-like ranges
    # ("optimizer" is an excluded word, "pass" is no step word, and none repeats)
    assert cap["steps_found_by"] is None and cap["steps_set_aside"] is None
    inf = cap["steps_inferred"]
    assert inf["method"] == "one training step"
    (proc,) = inf["processes"]
    assert proc["pid"] == 6000 and proc["steps"] == 1
    assert proc.get("one_step", inf.get("one_step")) is True
    assert proc["unit"] == "training step"
    assert cap["steps_not_inferred"] == []

    assert r["summary"]["step_count"] == 1
    assert r["summary"]["kernel_count"] == 102
    assert r["summary"]["kernels_per_step_median"] == 102
    assert r["summary"]["step_time_ms_median"] == approx(ONE_STEP_MS)
    (step,) = primary(r)
    assert (step["start_ns"], step["end_ns"]) == (ONE_STEP_START, ONE_STEP_END)
    assert step["step_time_ms"] == step["duration_ms"] == approx(ONE_STEP_MS)
    assert step["kernel_count"] == 102
    assert step["breakdown_ms"]["compute"] == approx(ONE_STEP_COMPUTE_MS)
    # the step's time starts at its first kernel: no idle in it
    assert step["breakdown_ms"]["idle_launch"] == approx(0.0)

    w = cap["window"]
    assert w["kind"] == "gpu-span"
    assert (w["start_ns"], w["end_ns"]) == (ONE_STEP_START, ONE_STEP_END)
    assert w["duration_ms"] == approx(ONE_STEP_MS)
    assert cap["span"]["duration_ms"] == approx(ONE_STEP_COMPUTE_MS)   # [T0+15, T0+17,295)

    # busy 17.280 / 17.280 = 100%: nothing reaches warning, the run is compute-bound
    assert r["summary"]["gpu_busy_pct"] == approx(ONE_STEP_COMPUTE_MS / ONE_STEP_MS * 100, 1e-3)
    assert (r["verdict"]["status"], r["verdict"]["headline"]) == ("bound", "compute-bound")
    assert not [f for f in r["findings"] if f["severity"] != "info"]


# ddp_one_step_two_ranks: per rank the same 17,280 µs of compute, and after the backward
# (stream 7 free at T0 + 15 + 50 + 8,400 + 30 + 8,400 = T0+16,895) an all-reduce of 2,000 µs on
# stream 13 that the AdamW kernels wait for: the GPU work ends at T0 + 15 + 17,280 + 2,000 =
# T0+19,295. One step per process, its time from the first GPU operation: [T0+15, T0+19,295) =
# 19.280 ms; job step time 19.280 ms. Exposed communication per GPU: the all-reduce runs alone,
# 2.0 ms = 2 / 19.28 = 10.373% of the window (the GPU span) -> nccl-exposed fires (>= 10%), warning
# (3-15%), impact 2.0 ms, per step the mean of the breakdown's exposed_comm over the 2 primary
# steps = 2.0 ms; >= 5% -> the main bottleneck.
DDP_END = T0 + 19_295 * US
DDP_MS = 19.280


def test_ddp_one_step_on_two_ranks_is_one_step_each(reports):
    r = reports.get("ddp_one_step_two_ranks")
    cap = r["capture"]
    assert cap["step_source"] == "inferred"
    inf = cap["steps_inferred"]
    assert inf["method"] == "one training step"
    procs = sorted(inf["processes"], key=lambda p: p["pid"])
    assert [p["pid"] for p in procs] == [6100, 6101]
    assert all(p["steps"] == 1 and p.get("one_step", inf.get("one_step")) is True for p in procs)
    assert r["summary"]["step_count"] == 1
    steps = primary(r)
    assert sorted(s["pid"] for s in steps) == [6100, 6101]
    for s in steps:
        assert (s["start_ns"], s["end_ns"]) == (ONE_STEP_START, DDP_END)
        assert s["step_time_ms"] == approx(DDP_MS)
        assert s["breakdown_ms"]["exposed_comm"] == approx(2.0)
    assert r["summary"]["step_time_ms_median"] == approx(DDP_MS)
    w = cap["window"]
    assert w["kind"] == "gpu-span" and (w["start_ns"], w["end_ns"]) == (ONE_STEP_START, DDP_END)

    f = finding(r, "nccl-exposed")
    assert f is not None and f["severity"] == "warning"
    assert f["impact_ms"] == approx(2.0)
    assert f["impact_pct"] == approx(2.0 / DDP_MS * 100, 1e-3)
    # one step: the cost per step is the cost in the window
    assert f["impact_ms_per_step"] == approx(f["impact_ms"])
    v = r["verdict"]
    assert (v["status"], v["headline"]) == ("bottleneck", "nccl-exposed")
    assert v["impact_ms_per_step"] == approx(2.0)
    severities_in_order(r)


# ----------------------------------------------------------------------------------------------
# 2. A markerless loop (input wait, one H2D copy, 80 kernels): one step per iteration
# ----------------------------------------------------------------------------------------------
# Iteration i starts its copy call at c_i (after the poll of W µs): copy call [c_i, c_i+6), copy on
# the GPU [c_i+5.6, c_i+505.6) (6e6 B / 12 GB/s = 500 µs); kernel k launched at c_i + 16 + 15k,
# ready 5 µs later, but the stream is busy until c_i+505.6 and every kernel lasts >= 15 µs, so the
# 80 kernels (20 x (40 + 15 + 20 + 15) = 1,800 µs) run back to back: the GPU is busy
# [c_i+5.6, c_i+2,305.6). The host's last launch call ends at c_i + 6 + 80 x 15 = c_i+1,206, then
# polls W: c_{i+1} = c_i + 1,206 + W (c_0 = T0 + W).
# Inferred: period 81 (1 copy + 80 kernels; the H2D copy is the iteration anchor, after the W
# host pause, 4x the 10 µs median pause or more); the 4-kernel layer period has no iteration
# anchor. Units from copy call to copy call: W + 1,206 µs; the last from c_last to the end of its
# GPU work: 2,305.6 µs. Step breakdown of a non-last step: launch 5.6 (the copy call before the
# copy starts), copy-only 500, compute 1,800, input W - 1,099.6 (the GPU idles from c_i+2,305.6 to
# c_{i+1} while the host is in poll; a long window, so the 5.6 µs in the next copy call are launch).
# Inferred steps leave the window the GPU span, [c_0+5.6, end of the last GPU work), and the first
# step's time starts at the first GPU operation (c_0+5.6, its copy), 5.6 µs after its launch call:
# it is 5.6 µs shorter and has no launch idle.

def _loop_expect(iterations: int, wait_ms: float) -> dict:
    W = wait_ms * 1000
    step = W + 1206                       # µs, all but the first and the last
    last = 2305.6
    window_ms = ((iterations - 1) * step + last - 5.6) / 1000
    input_per_gap = W - 1099.6            # c_{i+1} - (c_i + 2,305.6) = 1,206 + W - 2,305.6
    input_ms = (iterations - 1) * input_per_gap / 1000
    return dict(W=W, step_ms=step / 1000, last_ms=last / 1000, window_ms=window_ms,
                copy_call=T0 + int(W * US), start=T0 + int(W * US) + int(5.6 * US),
                input_gap_ms=input_per_gap / 1000, input_ms=input_ms, input_per_step=input_ms / iterations,
                input_pct=input_ms / window_ms * 100, mean_ms=window_ms / iterations)


@pytest.mark.parametrize("iterations,wait_ms", [(20, 5.0), (12, 3.0)])
def test_markerless_loop_gets_one_step_per_iteration(reports, iterations, wait_ms):
    e = _loop_expect(iterations, wait_ms)
    r = reports.get("markerless_loop_input_wait_h2d", iterations=iterations, wait_ms=wait_ms)
    cap = r["capture"]
    assert cap["step_source"] == "inferred" and cap["steps_set_aside"] is None
    (proc,) = cap["steps_inferred"]["processes"]
    assert proc["pid"] == 6200
    assert proc["period_ops"] == 81            # 1 H2D copy + 80 kernels, not the 4-kernel layer
    assert proc["steps"] == iterations         # not 20 x iterations units of 4 kernels
    assert proc["anchor"] == "memcpy HtoD"
    assert proc["anchor_gap_ms"] == approx(wait_ms)   # last launch call's end -> copy call's start
    assert proc["match_pct"] == approx(100.0)
    assert proc["ops_covered_pct"] == approx(100.0)
    assert proc["unit"] == "repeating unit"    # no optimizer or backward kernel in it
    assert not proc.get("one_step")

    s = r["summary"]
    assert s["step_count"] == iterations
    assert s["kernels_per_step_median"] == 80
    # median of (iterations - 1) x step and one shorter last step: the step time
    assert s["step_time_ms_median"] == approx(e["step_ms"])
    assert s["step_time_ms_mean"] == approx(e["mean_ms"])
    w = cap["window"]
    assert w["kind"] == "gpu-span"
    assert w["start_ns"] == e["start"]
    assert w["duration_ms"] == approx(e["window_ms"])

    steps = primary(r)
    assert len(steps) == iterations
    for i, st in enumerate(steps):
        assert st["start_ns"] == (e["start"] if i == 0 else e["copy_call"] + round(i * e["step_ms"] * 1e6))
        b = st["breakdown_ms"]
        assert b["compute"] == approx(1.8) and b["copy"] == approx(0.5)
        assert b["idle_launch"] == approx(0.0 if i == 0 else 0.0056)
        if i == 0:
            assert st["step_time_ms"] == approx(e["step_ms"] - 0.0056)
            assert b["idle_input"] == approx(e["input_gap_ms"])
        elif i < iterations - 1:
            assert st["step_time_ms"] == approx(e["step_ms"])
            assert b["idle_input"] == approx(e["input_gap_ms"])
        else:
            assert st["step_time_ms"] == approx(e["last_ms"])
            assert b["idle_input"] == approx(0.0)

    f = finding(r, "data-starvation")
    assert f is not None
    assert f["impact_ms"] == approx(e["input_ms"])
    assert f["impact_ms_per_step"] == approx(e["input_per_step"])
    assert f["impact_pct"] == approx(e["input_pct"], 1e-3)
    assert f["severity"] == "critical"         # 61.6% / 50.3% of the window
    assert f["impact_ms_per_step"] <= s["step_time_ms_mean"]
    v = r["verdict"]
    assert (v["status"], v["headline"]) == ("bottleneck", "data-starvation")

    # the diff of the run with itself shows the same step time, and its breakdown bars (the mean
    # over the primary steps of each part, one process) add up to the mean step
    from nsysdoc.compare import compare

    d = compare(r, r)
    assert d["per"] == "step"
    assert d["step_time_ms_median"]["base"] == approx(e["step_ms"])
    assert d["step_time_ms_median"]["base_steps"] == iterations
    bars = sum(p["base_ms_per_step"] for p in d["breakdown"])
    assert bars == approx(e["mean_ms"], A * 14)   # up to 13 parts, each rounded to 4 decimals


# ----------------------------------------------------------------------------------------------
# 3. Step markers that cover nothing: a GPU-only Kineto capture of DDP backward
# ----------------------------------------------------------------------------------------------
# ProfilerStep#0 = [T0, T0+36): 36 µs, no GPU operation starts in it (there are no launching calls,
# so GPU start times are used) -> 0% of the GPU work inside the markers (< 50%): set aside.
# GPU: the first launch call at T0+36 puts the first GEMM at T0+41; 8 buckets x 6 GEMMs of 1 ms back
# to back on stream 7: bucket b's GEMMs [41 + 6,000b, 41 + 6,000(b+1)); its all-reduce (stream 13)
# [41 + 6,000(b+1), 841 + 6,000(b+1)) overlaps bucket b+1's GEMMs, except the last:
# [48,041, 48,841). Span [T0+41, T0+48,841) = 48.8 ms, busy throughout: compute 48.0 ms (98.361%),
# exposed communication 0.8 ms (1.639%; < 10%: nccl-exposed quiet), 56 kernels.
# FP32 GEMMs: 48 ms, 48 / (48 + 6.4) = 88% of kernel time (>= 10%) -> fp32-gemm, impact
# 48 x (1 - 1/2) = 24.0 ms = 49.18% of the window: critical, the main bottleneck. No steps: no
# per-step cost.
GPU_ONLY_START, GPU_ONLY_END = T0 + 41 * US, T0 + 48_841 * US


@pytest.mark.parametrize("form", ["kineto", "sqlite"])
def test_markers_covering_no_gpu_work_are_set_aside(reports, form):
    r = reports.get("gpu_only_kineto_ddp_backward", form)
    cap = r["capture"]
    assert r["summary"]["kernel_count"] == 56
    v = r["verdict"]
    assert v["status"] != "no-gpu" and v["headline"] != "no-gpu-activity"
    assert finding(r, "no-gpu-activity") is None

    aside = cap["steps_set_aside"]
    assert aside is not None
    assert aside["count"] == 1
    assert aside["names"] in (["ProfilerStep#0"], ["ProfilerStep#N"])   # raw or digits folded
    assert aside["found_by"] == "pattern"
    assert aside["duration_ms"] == approx(0.036)
    assert aside["gpu_work_pct"] == approx(0.0)
    assert cap["step_source"] is None and cap["steps_found_by"] is None
    assert r["summary"]["step_count"] == 0 and primary(r) == []
    # read as a capture without markers: no steps, so why none were inferred is said per process
    assert cap["steps_not_inferred"], "no steps, yet capture.steps_not_inferred gives no reason"
    cq = finding(r, "capture-quality")
    assert cq is not None and "set aside" in cq["message"]

    w = cap["window"]
    assert w["kind"] == "gpu-span"
    assert (w["start_ns"], w["end_ns"]) == (cap["span"]["start_ns"], cap["span"]["end_ns"])
    assert (w["start_ns"], w["end_ns"]) == (GPU_ONLY_START, GPU_ONLY_END)
    assert w["duration_ms"] == approx(48.8)
    (dev,) = r["devices"]
    assert dev["compute_pct"] == approx(48.0 / 48.8 * 100, 1e-3)
    assert dev["exposed_comm_pct"] == approx(0.8 / 48.8 * 100, 1e-3)

    f = finding(r, "fp32-gemm")
    assert f is not None and f["severity"] == "critical"
    assert f["impact_ms"] == approx(24.0)
    assert f["impact_ms_per_step"] is None
    assert (v["status"], v["headline"]) == ("bottleneck", "fp32-gemm")
    assert r["findings"][0]["rule"] == "fp32-gemm"


# ----------------------------------------------------------------------------------------------
# 4. Phases that are not the steady state: a pageable upload in init_model before the first kernel
# ----------------------------------------------------------------------------------------------
# 680 MiB = 713,031,680 B at 3 GB/s: int(713,031,680 / 3) = 237,677,226 ns per copy; each
# synchronous call lasts 5,600 + 237,677,226 + 2,000 = 237,684,826 ns, so init_model ends at
# L = T0 + 20 x 237,684,826 = T0 + 4,753,696,520 ns. The first SGEMM call at L puts its kernel at
# L + 5,000; 30 SGEMMs of 20 ms back to back end at L + 600,005,000.
# Set-up phase: the copies from the span start (T0+5.6 µs) to the first kernel (4.75 s >= 5% of the
# span) and init_model (ends 4.75 s into the span) -> the window starts at the later end, the
# first kernel: [L + 5,000, L + 600,005,000) = 600 ms, steady-state, 100% busy, no copy in it.
# fp32-gemm: 600 ms of SGEMM -> impact 300 ms = 50% (critical); pageable-memcpy: no pageable copy
# time in the window (< 1 ms) -> quiet; dominant-kernel: one kernel, 100% of kernel time, no
# steps -> a warning without an impact.
INIT_L = T0 + 4_753_696_520


def test_init_model_upload_is_left_out_and_the_loop_is_judged(reports):
    r = reports.get("init_model_upload_then_benchmark_loop")
    cap = r["capture"]
    w = cap["window"]
    assert w["kind"] == "steady-state"
    assert (w["start_ns"], w["end_ns"]) == (INIT_L + 5_000, INIT_L + 600_005_000)
    assert w["duration_ms"] == approx(600.0)
    assert cap["span"]["start_ns"] == T0 + 5_600
    (x,) = cap["excluded"]
    assert x["kind"] in ("copies before the first kernel", "set-up phase")
    assert (x["start_ns"], x["end_ns"]) == (T0 + 5_600, INIT_L + 5_000)
    assert x["duration_ms"] == approx((INIT_L + 5_000 - T0 - 5_600) / 1e6)
    assert r["summary"]["gpu_busy_pct"] == approx(100.0)
    assert cap["step_source"] is None and r["summary"]["step_count"] == 0

    assert finding(r, "pageable-memcpy") is None
    f = finding(r, "fp32-gemm")
    assert f is not None and f["severity"] == "critical" and f["impact_ms"] == approx(300.0)
    assert r["findings"][0]["rule"] == "fp32-gemm"
    v = r["verdict"]
    assert v["headline"] in ("fp32-gemm", "compute-bound")
    assert (v["status"], v["headline"]) == ("bottleneck", "fp32-gemm")
    severities_in_order(r)


# ----------------------------------------------------------------------------------------------
# 5. "Warm-up Step N" ranges are ordinary steps, never set-up
# ----------------------------------------------------------------------------------------------
# Step i = range [h_i, h_i + 3,180): 3,000 µs of Python, 12 GEMM launches of 15 µs each; kernel 0
# starts at h_i+3,015 (the previous step's GPU work ended at h_i+1,635) and 12 x 150 µs run back
# to back until h_i+4,815, i.e. 1,635 µs into the next step. h_i = T0 + 3,180 i.
# Steps partition the thread. A step begins at the later of its range start and (the earlier of)
# the end of the GPU work of the earlier steps and its own first kernel: step i >= 1 begins at
# min(h_i+1,635, h_i+3,015) = h_i+1,635, where the GPU finishes step i-1. Step 0 = [T0, h_1+1,635)
# = 4.815 ms; steps 1-4 = 3.18 ms (the last ends at its range end or the thread's GPU end,
# h_4+4,815). Window [T0, T0+17,535).
# Breakdown: step 0: host 3,010 (Python before the first launch, a window of >= 1 ms), launch 5,
# compute 1,800 (its own kernels); steps 1-4: host 1,375 (h_i+1,635 -> h_i+3,010), launch 5,
# compute 1,800. The Python runs inside "Warm-up Step N": if the range counted as a warm-up range
# that time would be set-up; it is never set-up.
# host-bound: 3,010 + 4 x 1,375 = 8,510 µs = 48.53% of 17.535 ms (critical); per step 8.51 / 5.
WARMUP_TIMES = [4.815, 3.18, 3.18, 3.18, 3.18]
WARMUP_BREAKDOWN = [(1.8, 3.010), (1.8, 1.375), (1.8, 1.375), (1.8, 1.375), (1.8, 1.375)]


def test_warm_up_step_ranges_are_steps_not_set_up(reports):
    r = reports.get("warmup_step_ranges")
    cap = r["capture"]
    assert cap["step_source"] == "markers"
    assert cap["steps_found_by"] == "name"
    assert cap["steps_set_aside"] is None
    steps = primary(r)
    assert [s["name"] for s in steps] == [f"Warm-up Step {i}" for i in range(1, 6)]
    assert r["summary"]["step_count"] == 5
    assert [s["step_time_ms"] for s in steps] == [approx(x) for x in WARMUP_TIMES]
    for i, s in enumerate(steps):
        assert s["start_ns"] == T0 + (i * 3_180 + (1_635 if i else 0)) * US
        if i < 4:
            assert s["end_ns"] == steps[i + 1]["start_ns"]     # no overlap into the next step
        b = s["breakdown_ms"]
        assert b["idle_setup"] == approx(0.0)
        assert (b["compute"], b["idle_host"]) == (approx(WARMUP_BREAKDOWN[i][0]), approx(WARMUP_BREAKDOWN[i][1]))
        assert b["idle_launch"] == approx(0.005)
    assert r["summary"]["step_time_ms_median"] == approx(3.18)
    assert r["summary"]["step_time_ms_mean"] == approx(17.535 / 5)
    w = cap["window"]
    assert w["kind"] == "steps" and (w["start_ns"], w["end_ns"]) == (T0, T0 + 17_535 * US)
    assert cap["excluded"] == []

    # nothing here is one-time set-up
    assert r["metrics"]["setup"]["setup_ms"] == approx(0.0)
    assert not [e for e in r["metrics"]["setup"]["events"] if "warm" in e["name"].lower()]
    assert finding(r, "one-time-setup") is None
    assert r["metrics"]["values"]["idle_setup_ms"] == approx(0.0)

    f = finding(r, "host-bound")
    assert f is not None and f["severity"] == "critical"
    assert f["impact_ms"] == approx(8.51)
    assert f["impact_ms_per_step"] == approx(8.51 / 5)
    assert (r["verdict"]["status"], r["verdict"]["headline"]) == ("bottleneck", "host-bound")


# ----------------------------------------------------------------------------------------------
# 6. Set-up is not headlined over the steady state
# ----------------------------------------------------------------------------------------------
# context_creation_then_compute_bound: cudaMalloc [T0, T0+84 ms) creates the context,
# cuModuleLoadData [T0+84 ms, T0+114 ms); launch i at a_i = T0 + 114 ms + 10,000 i µs puts a
# 9,770 µs GEMM at a_i + 5. Span [a_0 + 5, a_289 + 9,775) = 289 x 10,000 + 9,770 = 2,899,770 µs; no
# steps (one kernel repeated), no set-up phase or warm-up -> window = span (gpu-span).
# Busy 290 x 9.77 / 2,899.77 = 97.7077%; the 230 µs gaps are short host windows (launch).
# one-time-setup: set-up before the first GPU operation = context creation 84 + module load 30 =
# 114 ms, none in the span: 114 / (2,899.77 + 114) = 3.7826% -> a warning, under 5%: never the main
# bottleneck. dominant-kernel: one kernel, no steps -> warning (no impact). -> compute-bound.
CC_WINDOW_MS = 2_899.77
CC_SETUP_PCT = 114.0 / (CC_WINDOW_MS + 114.0) * 100


def test_set_up_under_5_percent_is_not_the_headline_of_a_compute_bound_run(reports):
    r = reports.get("context_creation_then_compute_bound")
    cap = r["capture"]
    w = cap["window"]
    assert w["kind"] == "gpu-span"
    assert (w["start_ns"], w["end_ns"]) == (T0 + 114_005 * US, T0 + 3_013_775 * US)
    assert w["duration_ms"] == approx(CC_WINDOW_MS)
    busy = 290 * 9.77 / CC_WINDOW_MS * 100
    assert r["summary"]["gpu_busy_pct"] == approx(busy, 1e-3)
    fr = cap["framing"]
    assert fr["context_ms"] == approx(84.0) and str(fr["context_call"]).startswith("cudaMalloc")
    assert fr["setup_before_ms"] == approx(114.0)

    f = finding(r, "one-time-setup")
    assert f is not None
    assert f["severity"] == "warning"
    assert f["impact_ms"] == approx(114.0)
    assert f["impact_pct"] == approx(CC_SETUP_PCT, 1e-3)
    assert f["impact_ms_per_step"] is None
    assert r["findings"][0]["rule"] != "one-time-setup"
    # within warnings: the steady-state finding first, then the framing one
    warn = [x["rule"] for x in r["findings"] if x["severity"] == "warning"]
    assert warn == ["dominant-kernel", "one-time-setup"]
    severities_in_order(r)

    v = r["verdict"]
    assert (v["status"], v["headline"]) == ("bound", "compute-bound")
    assert v["sentence"].startswith(f"Compute-bound: GPU busy {busy:.1f}%, compute {busy:.1f}% of the window")
    assert "set-up" in v["detail"]       # the smaller findings are named in the detail


# context_creation_then_input_starved: cudaMalloc 300 ms + cuModuleLoadData 100 ms, then 10 steps
# from h_0 = T0 + 400 ms: poll [h, h+6,000); 10 GEMMs of 400 µs from h+6,015 to h+10,015; item():
# copy [h+10,015, h+10,016), sync until h+10,018 = the range end -> 10.018 ms per step, window
# 100.18 ms. Input idle 6.0 ms per step (the poll; before it the GPU is idle since the previous
# step's copy): 60.0 ms = 59.89% -> data-starvation critical, 6.0 ms per step.
# Set-up: 400 ms before the first GPU operation; span [h_0+6,015, h_9+10,016) = 94.163 ms:
# 400 / 494.163 = 80.9% -> one-time-setup at its cap, warning, 400 ms: more ms, less severe.
def test_a_critical_finding_is_listed_before_a_larger_set_up_warning(reports, tmp_path):
    r = reports.get("context_creation_then_input_starved")
    assert r["capture"]["window"]["duration_ms"] == approx(100.18)
    assert r["summary"]["step_time_ms_median"] == approx(10.018)
    ds, su = finding(r, "data-starvation"), finding(r, "one-time-setup")
    assert ds["severity"] == "critical" and ds["impact_ms"] == approx(60.0)
    assert ds["impact_ms_per_step"] == approx(6.0)
    assert ds["impact_pct"] == approx(60.0 / 100.18 * 100, 1e-3)
    assert su["severity"] == "warning" and su["impact_ms"] == approx(400.0)
    assert su["impact_pct"] == approx(400.0 / (94.163 + 400.0) * 100, 1e-3)
    assert [f["rule"] for f in r["findings"]][:2] == ["data-starvation", "one-time-setup"]
    severities_in_order(r)
    v = r["verdict"]
    assert (v["status"], v["headline"]) == ("bottleneck", "data-starvation")

    path = reports.path("context_creation_then_input_starved")
    # terminal: "1. [CRITICAL] ..." above "2. [WARNING] ..."
    out = cli_report(path, "-o", str(tmp_path / "page.html"))
    listed = re.findall(r"^\s*(\d+)\. \[(CRITICAL|WARNING|INFO)\]", out, flags=re.M)
    assert listed[:2] == [("1", "CRITICAL"), ("2", "WARNING")], out
    # Markdown: the findings table in the same order
    md = cli_report(path, "-f", "md", "-o", "-")
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*(critical|warning|info)\s*\|", md, flags=re.M)
    assert rows[:2] == [("1", "critical"), ("2", "warning")], md
    # the page: the finding cards in the same order, and the note says how they are ranked
    html = (tmp_path / "page.html").read_text(encoding="utf-8")
    cards = re.findall(r'class="finding sev-(critical|warning|info)" id="finding-(\d+)"', html)
    assert cards[:2] == [("critical", "1"), ("warning", "2")]
    section = html[html.index('id="findings"'):]
    note = re.search(r'<p class="note">(.*?)</p>', section, flags=re.S)
    assert note is None or "severity" in note.group(1), \
        f"the page says its findings are {note.group(1)!r}, but they are ranked by severity first"


# ----------------------------------------------------------------------------------------------
# 7. One step time for one capture: report, verdict, page, Markdown and diff say the same
# ----------------------------------------------------------------------------------------------
# Per rank and step: poll w, 8 GEMMs of 500 µs from h+w+15 to h+w+4,015, item(): copy
# [h+w+4,015, h+w+4,016), sync until h+w+4,018 = the range end: step time w + 4.018 ms.
# Rank 0 (w = 3 ms): 7.018 x 5. Rank 1 (w = 2, 9, 9, 10, 2): 6.018, 13.018, 13.018, 14.018, 6.018.
# Job step times (the longer of the two per index): 7.018, 13.018, 13.018, 14.018, 7.018.
# Sorted by job step time, then index: 0, 4, 1, 2, 3 -> median index 1 (13.018, rank 1's step),
# worst index 3 (14.018, rank 1). Mean of the job step times: 54.09 / 5 = 10.818.
# (The median over all 10 primary steps would be 7.018, each rank's own median 7.018 / 13.018.)
# Window [T0, T0 + 52.09 ms] (rank 1 ends last). Input idle per GPU: device 0 15 ms, device 1
# 32 ms -> mean 23.5 ms (45.11%); per step: the breakdown's idle_input summed over the 10 primary
# steps / 10 = 47 / 10 = 4.7 ms; 4.7 x (10 steps / 2 processes) = 23.5 <= 23.5.
def test_one_step_time_for_a_capture_of_two_ranks(reports, tmp_path):
    from nsysdoc.compare import compare

    r = reports.get("two_ranks_unequal_input_waits")
    times = {(s["pid"], s["index"]): s["step_time_ms"] for s in primary(r)}
    assert [times[(6700, i)] for i in range(5)] == [approx(7.018)] * 5
    assert [times[(6701, i)] for i in range(5)] == [approx(x) for x in (6.018, 13.018, 13.018, 14.018, 6.018)]
    s = r["summary"]
    assert s["step_count"] == 5
    assert s["step_time_ms_median"] == approx(13.018)
    assert s["step_time_ms_mean"] == approx(10.818)
    picks = r["metrics"]["step_picks"]
    by_id = {st["step"]: st for st in r["steps"]}
    med, worst = by_id[picks["median_step"]], by_id[picks["worst_step"]]
    assert (med["pid"], med["index"]) == (6701, 1)
    assert (worst["pid"], worst["index"]) == (6701, 3)
    w = r["capture"]["window"]
    assert (w["start_ns"], w["end_ns"]) == (T0, T0 + 52_090 * US)

    f = finding(r, "data-starvation")
    assert f["impact_ms"] == approx(23.5) and f["impact_ms_per_step"] == approx(4.7)
    assert f["impact_pct"] == approx(23.5 / 52.09 * 100, 1e-3)
    assert f["impact_ms_per_step"] * 5 <= f["impact_ms"] + 1e-3

    # the same step time everywhere it is shown
    path = reports.path("two_ranks_unequal_input_waits")
    out = cli_report(path, "-o", str(tmp_path / "p.html"))
    assert "Step time 13.0 ms" in out
    md = cli_report(path, "-f", "md", "-o", "-")
    header = md[md.index("| GPU busy | Step time"):].splitlines()
    assert header[2].split("|")[2].strip() == "13.0 ms"
    html = (tmp_path / "p.html").read_text(encoding="utf-8")
    m = re.search(r'id="metric-step_time_ms_median".*?<dd class="value">([^<]*)</dd>', html, flags=re.S)
    assert m and m.group(1).strip() == "13.0 ms"
    d = compare(r, r)
    assert d["step_time_ms_median"]["base"] == approx(13.018)
    assert d["step_time_ms_median"]["base_steps"] == 5


# ----------------------------------------------------------------------------------------------
# 8. Costs per step are never larger than a step
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["warmup_step_ranges", "markerless_loop_input_wait_h2d",
                                  "two_ranks_unequal_input_waits", "ddp_one_step_two_ranks",
                                  "context_creation_then_input_starved"])
def test_cost_per_step_fits_in_a_step(reports, name):
    r = reports.get(name)
    steps = primary(r)
    mean = statistics.fmean(s["step_time_ms"] for s in steps)
    per_proc = len(steps) / len({s["pid"] for s in steps})
    costed = [f for f in r["findings"] if isinstance(f.get("impact_ms_per_step"), (int, float))]
    assert costed, "every scenario here has a finding with a cost per step"
    for f in costed:
        assert f["impact_ms_per_step"] <= mean + 1e-4, (f["rule"], f["impact_ms_per_step"], mean)
        assert f["impact_ms_per_step"] * per_proc <= f["impact_ms"] + 1e-4 * per_proc, f["rule"]
    # and the verdict says it beside the same step time as the summary
    by_id = {st["step"]: st for st in r["steps"]}
    med = by_id[r["metrics"]["step_picks"]["median_step"]]
    assert r["summary"]["step_time_ms_median"] == approx(med["step_time_ms"])
