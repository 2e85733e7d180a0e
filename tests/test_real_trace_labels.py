"""Expert labels for the real Nsight Systems exports in ../shared/traces.

Written from the raw rows, independently of nsysdoc's implementation: for every file, what a GPU
performance engineer concludes, encoded as the verdict headline(s) an expert accepts, the rules that
must (and must not) fire and at which severity, and a few numbers that are robust to how the tool
classifies gaps. Each label carries the SQL that shows it and the numbers that SQL returned.

Method (all read-only, ``file:PATH?mode=ro&immutable=1``): the window is first to last GPU operation
(no file has step markers); busy time is the per-device union of kernel/memcpy/memset intervals
(never a sum); an idle gap is attributed by looking at the thread that launched the op ending the
gap (RUNTIME row joined on correlationId within the process, ``globalTid & ~0xFFFFFF = globalPid``)
and at which API call covers the gap on that thread; multi-GPU losses are the mean over devices.

| trace | expert conclusion |
|---|---|
| blackwell_three_api_calls | Nothing to diagnose: 3 driver calls, no GPU op; nsys 2025.1.3 says it does not support driver 13.3 and CUPTI events may be missing. |
| failed_capture_injection_error | Not a capture: the injection library failed to load (symbol lookup error), 6 tables and no events -> EmptyCaptureError. |
| fastvideo_h100x2_sp2_slice | Transfer-bound: each H100 spends 920.9 of 969.4 ms in 223 pinned H2D copies (25.5 GB, FSDP CPU-offloaded T5 encoder weights); kernels cover 2.3%. |
| fastvideo_torchrun_h100x2_after | Launch-bound: GPUs 80/85% busy; ~15% of the window is ~700-850 short gaps per GPU where the host runs Python between launches; ~5.6% exposed NCCL. |
| fastvideo_torchrun_h100x2_before | Mostly compute-bound (90% busy, flash-attention half of kernel time); ~7% short host launch gaps and ~4% exposed NCCL send/recv, nothing critical. |
| mmagic_vsr_a100_forward | Cold start: one 899.7 ms cudaLaunchKernel (lazy module load/JIT) plus 10 more 1-13 ms first launches = 82% of the window; GPU ran 4.1 ms of kernels. |
| nvfuser_matmul_h100 | One-time setup: nvFuser NVRTC compile 343 of 532 ms plus cuBLAS(Lt) library loading; 19 kernels / 0.4 ms of GPU work, too little to judge steady state. |
| nvfuser_pytest_h200 | Host-bound test harness: 2.28 s (72%) of CPU work with no CUDA call (1.63 s on ~3.9 cores, then 0.6 s) plus 0.83 s (26%) nvFuser compilation. |
| pytorch_tiny_rtx3080_wsl | Too little work: 2 kernels (4.1 us) and a 4-byte copy; both launches take ~17.5 ms (first launch, WSL software trace). |
| tensorrt_nvtx_only_titanrtx | No GPU activity: 22k NVTX events and no CUDA table at all (CUDA tracing was off). |
| unet_trainer_no_kernels_rtx4060 | Nothing to judge: one 1.5 us memset in a 0.88 s capture (context creation and setup only, no kernel). |
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from . import conftest as _conftest

SHARED_TRACES: Path = _conftest.SHARED_TRACES


def _diagnose_fallback(path) -> dict:
    """Same as tests.conftest.diagnose_path: load -> analyze -> built-in rules, no project config."""
    from nsysdoc.analysis import analyze
    from nsysdoc.rules import apply_rules, load_rules
    from nsysdoc.trace import load_trace

    return apply_rules(analyze(load_trace(path, cache=False)).to_dict(), load_rules())


diagnose_path: Callable[..., dict] = getattr(_conftest, "diagnose_path", None) or _diagnose_fallback

pytestmark = pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason=f"no real traces at {SHARED_TRACES}")

SEVERITIES = ("info", "warning", "critical")
RANK = {s: i for i, s in enumerate(SEVERITIES)}
BOUND_HEADLINES = {"compute-bound", "communication-bound", "transfer-bound", "gpu-idle"}
STATUS_OF_HEADLINE = {"capture-quality": {"too-little-work"}, "no-gpu-activity": {"no-gpu"}}
ANY = "any"            # must_not_fire: the rule must not appear at all
WARN = "warning"       # must_not_fire: the rule must not appear at warning or critical
CRIT = "critical"      # must_not_fire: the rule must not appear at critical


@dataclass
class Label:
    conclusion: str
    headlines: set[str] = field(default_factory=set)
    must_fire: dict[str, set[str]] = field(default_factory=dict)
    must_not_fire: dict[str, str] = field(default_factory=dict)
    #: (rule, low, high): the largest impact_pct among that rule's findings, when it is reported
    impact_pct: list[tuple[str, float, float]] = field(default_factory=list)
    #: summary.gpu_busy_pct range, or None = must be null (too little GPU work / no GPU)
    gpu_busy_pct: tuple[float, float] | None | str = "unchecked"
    no_critical: bool = False
    #: name of the nsysdoc.errors exception diagnose_path must raise (file not diagnosable)
    raises: str | None = None
    extra: Callable[[dict], None] | None = None


def _findings(result, rule):
    return [f for f in result.get("findings", []) if f.get("rule") == rule]


def _text(result) -> str:
    return repr(result)


# --------------------------------------------------------------------------------------------
# Extra checks that do not fit the table
# --------------------------------------------------------------------------------------------

def _blackwell_extra(result):
    # DIAGNOSTIC_EVENT: "Installed CUDA driver version (13.3) is not supported by this build of Nsight
    # Systems..." and "Some CUPTI events might be missing": the report must carry it, since it is the
    # likeliest reason a GEMM benchmark shows no kernel at all.
    assert "not supported by this build of Nsight Systems" in _text(result)


def _pytest_h200_extra(result):
    # The host phases (1.63 s + 0.60 s of CPU with no CUDA call and no compile range) must be reported
    # as a critical host-side cost; the first of them ends in a 394 MB pageable H2D copy, so an
    # input-preparation ("data-starvation") reading of that gap is also acceptable.
    host = [f for f in result["findings"] if f["rule"] in ("host-bound", "data-starvation")]
    assert host, "the 2.28 s of host CPU phases are not reported"
    if result["verdict"]["status"] != "too-little-work":  # else every finding but capture-quality is info
        assert max(RANK[f["severity"]] for f in host) == RANK["critical"], host
    total = sum(f.get("impact_pct") or 0 for f in host)
    assert 45 <= total <= 80, f"host-side share {total} % (expert: 51-72 % of the window)"


def _unet_extra(result):
    # A 1.5 us memset is no base for a utilisation number (the old report said 100 % busy).
    assert result["summary"].get("gpu_busy_pct") is None


# --------------------------------------------------------------------------------------------
# The labels
# --------------------------------------------------------------------------------------------

BOTTLENECK_RULES = ("transfer-bound", "allocation-churn", "one-time-setup", "host-bound", "launch-bound",
                    "host-sync", "data-starvation", "nccl-exposed", "pageable-memcpy", "d2h-transfer",
                    "tiny-kernels", "fp32-gemm", "dominant-kernel", "pseudo-busy")

LABELS: dict[str, Label] = {}

# blackwell_three_api_calls -------------------------------------------------------------------
# SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id=r.nameId
#   -> cuCtxSetCurrent, cuStreamCreate, cuInit   (3 rows; no KERNEL/MEMCPY/MEMSET table exists)
# SELECT d.text FROM DIAGNOSTIC_EVENT d WHERE severity=2
#   -> "Installed CUDA driver version (13.3) is not supported by this build of Nsight Systems. CUDA trace
#       will be collected using libraries for driver version 12.9", "Not all CUDA events might have been
#       collected.", "No NVTX events collected..."; info: "CUPTI buffers: 49 of 50. Some CUPTI events
#       might be missing".
# ANALYSIS_DETAILS.duration = 10,005 ms. No GPU op at all -> no-gpu; nothing else may fire.
LABELS["blackwell_three_api_calls"] = Label(
    conclusion="no GPU activity recorded; nsys does not support the installed driver 13.3",
    headlines={"no-gpu-activity"},
    must_fire={"no-gpu-activity": set(SEVERITIES)},
    must_not_fire={r: ANY for r in BOTTLENECK_RULES},
    gpu_busy_pct=None,
    extra=_blackwell_extra,
)

# failed_capture_injection_error --------------------------------------------------------------
# SELECT name FROM sqlite_master WHERE type='table'
#   -> StringIds, ProcessStreams, TARGET_INFO_SYSTEM_ENV, TARGET_INFO_SESSION_START_TIME, ThreadNames,
#      TARGET_INFO_GPU   (no CUPTI_*, no NVTX_EVENTS, no OSRT_API, no META_DATA_* table)
# ProcessStreams holds the child's stderr: "symbol lookup error: ...libToolsInjectionProxy64.so:
# undefined symbol: __libc_dlclose". Nothing was traced: the loader refuses it as an empty capture.
LABELS["failed_capture_injection_error"] = Label(
    conclusion="failed capture (injection library did not load); not diagnosable",
    raises="EmptyCaptureError",
)

# fastvideo_h100x2_sp2_slice -------------------------------------------------------------------
# SELECT deviceId, copyKind, srcKind, dstKind, count(*), sum(bytes), sum("end"-start)/1e6
#   FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1,2,3,4
#   -> dev0 HtoD pinned->device (1,1,2): 223 copies, 25,475,252,224 B, 920.87 ms
#      dev1 HtoD pinned->device (1,1,2): 223 copies, 25,475,252,224 B, 920.76 ms
#      DtoD (8,2,2): 225 copies, 29.7 GB, 19.6 ms per device; pageable HtoD (1,0,2): 2 copies, 1,568 B;
#      DtoH (2,2,1): 2 copies, 9 B.
# Window (first..last GPU op): 969.45 ms.  Per-device unions (Python sweep over the rows of
#   SELECT deviceId, start, "end" FROM CUPTI_ACTIVITY_KIND_{KERNEL,MEMCPY,MEMSET} WHERE start > 0):
#      dev0 kernels 22.39 ms (2.31 %), copies 940.49 ms, all ops 962.89 ms (99.3 %),
#           copy-only (copies minus kernels/memsets) 940.49 ms = 97.0 %; idle 6.56 ms
#      dev1 kernels 22.44 ms (2.32 %), copies 940.35 ms, all ops 962.81 ms (99.3 %), copy-only 97.0 %
# NVTX: FSDP::pre_forward/post_forward (encoder.block.N.layer.M) -> FSDP with CPU offload streaming the
# T5 encoder's weights over PCIe (27.7 GB/s). GPU idle gaps >= 0.3 ms: two per device (1.3 ms total),
# so no host-side rule can cost anything: host-sync (8 cudaStreamSynchronize, 856.9 ms of host
# blocking, 0.3 ms of GPU idle after them), one-time-setup (cudaLaunchKernelExC up to 110.2 ms, but
# the GPU is busy copying during it: launch queue back-pressure, not JIT), launch-bound, host-bound.
# FP32 cuBLAS (sm80_xmma_gemm_f32f32..._ffma) is 86.5 % of kernel time but kernels are 2.3 % of the
# window -> fp32-gemm is real but info. No NCCL kernel, no cudaMalloc/cudaFree call.
LABELS["fastvideo_h100x2_sp2_slice"] = Label(
    conclusion="transfer-bound: ~97% of the window is pinned HtoD weight streaming; kernels 2.3%",
    headlines={"transfer-bound"},
    must_fire={"transfer-bound": {"warning", "critical"}, "fp32-gemm": {"info"}},
    must_not_fire={
        "host-sync": WARN, "launch-bound": WARN, "host-bound": WARN, "one-time-setup": WARN,
        "data-starvation": WARN, "pageable-memcpy": WARN, "d2h-transfer": WARN, "tiny-kernels": WARN,
        "dominant-kernel": WARN, "fp32-gemm": WARN, "allocation-churn": ANY, "nccl-exposed": ANY,
        "no-gpu-activity": ANY,
    },
    impact_pct=[("transfer-bound", 80, 100)],
    gpu_busy_pct=(95, 100),
)

# fastvideo_torchrun_h100x2_after --------------------------------------------------------------
# Window 299.27 ms. Unions: dev0 all ops 240.11 ms (80.2 %), kernels 237.47 ms; dev1 254.00 ms
# (84.9 %), kernels 251.36 ms. Idle 59.16 / 45.27 ms.
# Idle gaps attributed via the launching thread (RUNTIME joined on correlationId):
#   dev0: host late with no CUDA call covering the gap: 852 gaps, 47.9 ms (16.0 %), median 36.9 us,
#         p90 85 us; host inside cudaLaunchKernel/cuLaunchKernelEx 1.9 ms; inside a 5.7 ms
#         cudaMemsetAsync 6.7 ms; GPU-side (launched before the gap began) 2.5 ms.
#   dev1: no-call 717 gaps, 37.7 ms (12.6 %), median 35.0 us; in launch calls 2.9 ms.
#   -> ~15 % (mean over devices) of short gaps between ordinary launches: launch-bound (Python/FSDP
#      hooks/ATen dispatch between kernels), borderline warning/critical.
# SELECT k.deviceId, count(*), sum(k."end"-k.start)/1e6 FROM CUPTI_ACTIVITY_KIND_KERNEL k
#   JOIN StringIds s ON s.id=k.shortName WHERE s.value LIKE 'nccl%' GROUP BY 1
#   -> dev0 31 / 9.99 ms, dev1 31 / 23.75 ms; none overlaps a compute kernel -> exposed comm mean
#      16.9 ms = 5.6 % of the window (a sum over GPUs would be 11.3 %).
# SELECT count(*), sum(dur), max(dur) ... 'cudaStreamSynchronize%' -> 30, 289.8 ms, 15.3 ms: the host
#   is blocked half the time, but the GPU idle right after the syncs is 1.4 / 2.5 ms (0.5 / 0.85 %).
# Pageable HtoD: 16 copies of 8 B per device; no DtoH; no cudaMalloc/cudaFree calls; no FFMA GEMM
# (GEMMs are cuBLASLt nvjet_tst_*, attention is flash_fwd bf16 = 49 % of kernel time).
# Lead's note: nccl-exposed reports from 10% of the window (so that well-overlapped DDP with its
# last-bucket tail stays quiet); the 5.6% here may or may not be reported, never above warning.
LABELS["fastvideo_torchrun_h100x2_after"] = Label(
    conclusion="launch-bound: ~15% of the window in short host gaps between launches; ~5.6% exposed NCCL",
    headlines={"launch-bound"},
    must_fire={"launch-bound": {"warning", "critical"}},
    must_not_fire={
        "transfer-bound": WARN, "host-sync": WARN, "pageable-memcpy": WARN, "one-time-setup": WARN,
        "data-starvation": WARN, "fp32-gemm": WARN, "host-bound": CRIT, "allocation-churn": ANY,
        "d2h-transfer": ANY, "no-gpu-activity": ANY,
    },
    impact_pct=[("launch-bound", 5, 25), ("nccl-exposed", 3, 9)],
    gpu_busy_pct=(75, 90),
)

# fastvideo_torchrun_h100x2_before -------------------------------------------------------------
# Window 299.88 ms. Unions: dev0 all ops 273.82 ms (91.3 %), kernels 270.86 ms (90.3 %), copies
# 2.84 ms; dev1 267.28 ms (89.1 %), kernels 264.32 ms. Idle 26.06 / 32.60 ms.
# flash_fwd_kernel = 50.9 % of summed kernel time (272.3 of 535.2 ms), nvjet GEMMs ~11 %.
# Idle attribution: dev0 no-call host gaps 194, 18.8 ms (6.3 %), median 35 us, one of 4.5 ms;
#   in launch calls 2.7 ms; GPU-side 3.9 ms. dev1 no-call 311 gaps, 25.4 ms (8.5 %), median 27 us;
#   in launch calls 2.3 ms.  -> ~7.4 % (mean) of short launch gaps: warning at most.
# NCCL (same SQL as _after): dev0 33 / 17.17 ms, dev1 33 / 8.23 ms, none overlapped by compute ->
#   exposed mean 12.7 ms = 4.2 % (sum over GPUs would be 8.5 %).
# cudaStreamSynchronize: 33 calls, 324.5 ms of host blocking (max 12.6 ms, inside aten::to of 8-byte
#   pageable tensors), GPU idle right after them 0.19 / 1.62 ms (0.06 / 0.54 %) -> host-sync is info.
# 17 pageable HtoD copies of 8 B per device; no DtoH; no cudaMalloc/cudaFree; no FFMA GEMM.
# Lead's note: nccl-exposed reports from 5% of the window (mean over GPUs); 4.2% here may or may not
# be reported, but never above warning.
LABELS["fastvideo_torchrun_h100x2_before"] = Label(
    conclusion="mostly compute-bound (90% busy); ~7% short launch gaps and ~4% exposed NCCL, nothing critical",
    headlines={"compute-bound", "launch-bound", "nccl-exposed"},
    must_fire={},
    must_not_fire={
        "transfer-bound": WARN, "host-sync": WARN, "pageable-memcpy": WARN, "one-time-setup": WARN,
        "data-starvation": WARN, "host-bound": WARN, "fp32-gemm": WARN, "allocation-churn": ANY,
        "d2h-transfer": ANY, "no-gpu-activity": ANY,
    },
    impact_pct=[("launch-bound", 0, 15), ("nccl-exposed", 2, 7)],
    gpu_busy_pct=(85, 95),
    no_critical=True,
)

# mmagic_vsr_a100_forward ----------------------------------------------------------------------
# SELECT count(*), max("end"-start)/1e6 FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s
#   ON s.id=r.nameId WHERE s.value LIKE 'cudaLaunchKernel_v%'        -> 322 calls, max 899.675 ms
#   (median of all 328 launch calls 6.49 us, p90 12.8 us)
# ... AND r."end"-r.start > 1000000 (all cudaLaunchKernel*)           -> 11 calls, 959.9 ms
#   (first launches of elementwise, flip_filter, nchwToNhwc, splitKreduce... with
#    cuModuleGetLoadingMode present = CUDA lazy loading: module load / PTX JIT on first launch)
# Window 1170.60 ms; GPU union 5.64 ms (0.48 %); SELECT count(*), sum(dur) FROM KERNEL -> 328, 4.14 ms.
# Idle time covered on the launching thread by: long cudaLaunchKernel 959.8 ms (82.0 %), no CUDA
#   call 177.0 ms (15.1 %; 145.6 ms of it in gaps >= 1 ms, 12.4 %), cudaFree 12.9 + cudaMalloc 5.0 +
#   cudaHostAlloc 0.9 ms (1.6 %). The biggest no-call stretch (98 ms in a 128 ms gap) and the
#   900 ms launch both sit inside the first torch.nn.functional.conv2d NVTX range (1052.9 ms):
#   cuDNN initialisation (OSRT: 37.8 ms of ioctl on the main thread), i.e. also setup.
# cudaStreamSynchronize: 10 calls, 0.25 ms in total. Pageable HtoD: 10 copies, 18.6 MB, 1.49 ms.
# FP32 SIMT GEMMs (ampere_sgemm_*, cutlass simt sgemm) 0.5 ms. This is one cold forward pass: the
# window is dominated by one-time setup (warning: it does not recur); profile after warm-up.
LABELS["mmagic_vsr_a100_forward"] = Label(
    conclusion="cold start: first-launch module loading/JIT (one 899.7 ms launch) is 82% of the window",
    headlines={"one-time-setup"},
    must_fire={"one-time-setup": {"warning"}},
    must_not_fire={
        "launch-bound": WARN, "host-sync": WARN, "allocation-churn": WARN, "pageable-memcpy": WARN,
        "fp32-gemm": WARN, "dominant-kernel": WARN, "tiny-kernels": WARN, "transfer-bound": WARN,
        "d2h-transfer": ANY, "nccl-exposed": ANY, "host-bound": CRIT, "no-gpu-activity": ANY,
    },
    impact_pct=[("one-time-setup", 70, 100)],
    gpu_busy_pct=(0, 2),
)

# nvfuser_matmul_h100 --------------------------------------------------------------------------
# SELECT n.text, count(*), sum(n."end"-n.start)/1e6 FROM NVTX_EVENTS n WHERE n.text IN
#   ('KernelExecutor::compileFusion','executor_utils::NVRTC') GROUP BY 1
#   -> compileFusion 1 / 343.5 ms, NVRTC 1 / 311.3 ms; union of all /compile|nvrtc/i ranges clipped
#      to the window: 343.47 of 531.99 ms (64.6 %).
# SELECT s.value, count(*), sum(dur) ... LIKE 'cuLibraryLoad%' OR LIKE 'cuModuleLoad%'
#   -> cuLibraryLoadData 15 / 23.3 ms, cuModuleLoadDataEx 1 / 0.1 ms
# SELECT count(*), sum("end"-start) FROM CUPTI_ACTIVITY_KIND_KERNEL -> 19 kernels, 0.40 ms (union
#   0.41 ms with the 1 memset + 1 memcpy = 0.08 % busy).
# Idle: compile ranges 343.4 ms, first launches > 1 ms 57.2 ms (7 launches of 2.2-12.5 ms), module
#   loading 23.4 ms -> setup 423.9 ms (79.7 %); the remaining 104 ms of no-call host time is the
#   128 ms gap before the first cuBLAS (nvjet) kernel that holds cuModuleGetLoadingMode, a 1.25 ms
#   cudaFree and the 15 cuLibraryLoadData calls: cuBLASLt initialisation, also setup -> host-bound
#   must not be critical. Too little GPU work to judge steady state either way.
LABELS["nvfuser_matmul_h100"] = Label(
    conclusion="one-time setup: nvFuser NVRTC compile 343/532 ms + cuBLASLt loading; 0.4 ms of GPU work",
    headlines={"one-time-setup", "capture-quality"},
    must_fire={"one-time-setup": {"info", "warning"}},
    must_not_fire={
        "launch-bound": WARN, "host-sync": WARN, "allocation-churn": WARN, "pageable-memcpy": ANY,
        "transfer-bound": WARN, "tiny-kernels": WARN, "fp32-gemm": WARN, "dominant-kernel": WARN,
        "data-starvation": WARN, "nccl-exposed": ANY, "host-bound": CRIT, "no-gpu-activity": ANY,
    },
    impact_pct=[("one-time-setup", 60, 100)],
    gpu_busy_pct=(0, 1),  # or null when judged too little work (accepted in the test)
)

# nvfuser_pytest_h200 --------------------------------------------------------------------------
# Window 3190.34 ms; GPU union 31.56 ms (1.0 %): 18 kernels 10.17 ms, 3 memcpy 21.39 ms, 3 memset.
# Compile ranges (n.text LIKE compile/NVRTC, 9 threads, nested: compileFusionParallel sums 1795.0 ms
#   over 10 ranges, NVRTC 951.4 ms over 6): their union in the window = 834.21 ms (26.1 %).
#   + long first launches 22.5 ms + cuLibraryLoadData 13 / 13.3 ms -> setup 870.0 ms (27.3 %).
# GPU-idle time on the main thread with no CUDA call and no compile range: 2283.6 ms (71.6 %):
#   a 1628.9 ms gap (main thread on CPU 100 % per SCHED_EVENTS, the process on ~3.9 cores) ending
#   in a 394,002,432 B pageable HtoD cudaMemcpyAsync (21.4 ms), then 597 ms of pure CPU before the
#   cuBLAS init that precedes the first NVTX range (+2324.8 ms).
# SELECT count(*), sum(bytes), sum(dur) FROM MEMCPY WHERE srcKind=0 OR dstKind=0 -> 2, 394,002,434 B,
#   21.36 ms: real but it costs < 1 % of the window (GPU idle around it anyway) -> not a warning.
# Launch median 42 us; cudaMalloc/cudaFree inside idle 4.2 ms (0.1 %).
# Lead's note (disagreement kept on record): 24 GPU operations and 31.6 ms of GPU time are below the
# tool's floor for a judgement (50 operations or 50 ms of GPU time), so the verdict may also be
# "too little GPU work to judge" (capture-quality) with every other finding at info; the host-side
# share must still be reported (see _pytest_h200_extra).
LABELS["nvfuser_pytest_h200"] = Label(
    conclusion="host-bound test harness: 72% CPU work with no CUDA call, 26% nvFuser compilation",
    headlines={"host-bound", "data-starvation", "capture-quality"},
    must_fire={"one-time-setup": {"info", "warning"}},
    must_not_fire={
        "launch-bound": WARN, "host-sync": WARN, "allocation-churn": WARN, "pageable-memcpy": WARN,
        "transfer-bound": WARN, "tiny-kernels": WARN, "fp32-gemm": WARN, "dominant-kernel": WARN,
        "nccl-exposed": ANY, "no-gpu-activity": ANY,
    },
    impact_pct=[("one-time-setup", 20, 50)],
    gpu_busy_pct=(0, 2),
    extra=_pytest_h200_extra,
)

# pytorch_tiny_rtx3080_wsl ---------------------------------------------------------------------
# SELECT start, "end"-start, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL -> 2 rows: 1,440 ns, 2,689 ns
# SELECT s.value, r."end"-r.start ... LIKE 'cudaLaunch%' -> 17,436,399 ns and 17,764,006 ns
# MEMCPY: 1 DtoH copy of 4 bytes. Window 22.45 ms (kernel 1 start .. copy end), GPU busy 5.8 us.
# DIAGNOSTIC_EVENT: "CUDA hardware tracing is not supported on this system. A legacy (software
# instrumented) trace was collected instead." (WSL2). Three GPU ops: too little to judge anything;
# the 17 ms launches are first-launch costs, not launch overhead.
LABELS["pytorch_tiny_rtx3080_wsl"] = Label(
    conclusion="too little work: 2 kernels (4 us), each first launch ~17.5 ms under WSL",
    headlines={"capture-quality"},
    must_fire={"capture-quality": {"warning"}},
    must_not_fire={"no-gpu-activity": ANY, "nccl-exposed": ANY, "transfer-bound": WARN,
                   "launch-bound": WARN, "host-bound": WARN},
    gpu_busy_pct=None,
)

# tensorrt_nvtx_only_titanrtx ------------------------------------------------------------------
# SELECT count(*) FROM sqlite_master WHERE name LIKE 'CUPTI%' -> 0
# SELECT count(*) FROM NVTX_EVENTS -> 21,998 (nsys 2022.4.2, EXPORT_META_DATA table, CUDA not traced)
LABELS["tensorrt_nvtx_only_titanrtx"] = Label(
    conclusion="no GPU activity: NVTX only, CUDA was not traced",
    headlines={"no-gpu-activity"},
    must_fire={"no-gpu-activity": set(SEVERITIES)},
    must_not_fire={r: ANY for r in BOTTLENECK_RULES},
    gpu_busy_pct=None,
)

# unet_trainer_no_kernels_rtx4060 --------------------------------------------------------------
# SELECT start, "end", "end"-start, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET -> (554351169, 554352641,
#   1472, 4608): the only GPU op; no KERNEL or MEMCPY table.
# SELECT duration FROM ANALYSIS_DETAILS -> 880,010,422 ns; META_DATA_CAPTURE RUN_DURATION_MS = '881'
#   (a 0.88 s capture, not 880 s).
# RUNTIME: 23 calls, cudaFree 118.6 ms (context creation), 16 cudaStreamCreateWithFlags, cudaMalloc,
#   the memset, cudaHostAlloc 1.6 ms: setup only. A 1.5 us window cannot be judged (the old report
#   said 100 % busy); either "too little work" or "no kernels" is acceptable.
LABELS["unet_trainer_no_kernels_rtx4060"] = Label(
    conclusion="nothing to judge: one 1.5 us memset in a 0.88 s capture",
    headlines={"capture-quality", "no-gpu-activity"},
    must_not_fire={r: WARN for r in BOTTLENECK_RULES},
    gpu_busy_pct=None,
    extra=_unet_extra,
)


# --------------------------------------------------------------------------------------------
# The test
# --------------------------------------------------------------------------------------------

def _check_contract_consistency(result):
    v = result.get("verdict")
    assert isinstance(v, dict), "result has no verdict"
    status, headline = v.get("status"), v.get("headline")
    assert status in ("bottleneck", "bound", "too-little-work", "no-gpu"), v
    findings = result.get("findings", [])
    for f in findings:
        assert f.get("severity") in SEVERITIES, f
        pct = f.get("impact_pct")
        # wall-clock share of one window (mean over devices), never a sum over GPUs
        assert pct is None or -1e-6 <= pct <= 100 + 1e-6, (f["rule"], pct)
    if status == "bottleneck":
        assert v.get("rule") == headline, v
        assert any(f["rule"] == headline and f["severity"] in ("warning", "critical") for f in findings), v
    elif status == "bound":
        assert headline in BOUND_HEADLINES, v
        costly = [(f["rule"], f["severity"]) for f in findings if f["severity"] in ("warning", "critical")
                  and f["rule"] in BOTTLENECK_RULES and (f.get("impact_ms") or 0) > 0]
        assert not costly, f"status 'bound' although costly findings at warning+: {costly}"
    elif status == "too-little-work":
        assert headline == "capture-quality", v
        assert result["summary"].get("gpu_busy_pct") is None
        above = [(f["rule"], f["severity"]) for f in findings
                 if f["rule"] not in ("capture-quality", "no-gpu-activity") and f["severity"] != "info"]
        assert not above, f"too little GPU work, yet findings above info: {above}"
        assert any(f["rule"] == "capture-quality" and f["severity"] == "warning" for f in findings)
    else:
        assert headline == "no-gpu-activity", v


def _check_label(result, label: Label):
    v = result["verdict"]
    assert v["headline"] in label.headlines, (
        f"headline {v['headline']!r} (status {v['status']}), expert accepts {sorted(label.headlines)}: "
        f"{label.conclusion}")
    for h, statuses in STATUS_OF_HEADLINE.items():
        if v["headline"] == h:
            assert v["status"] in statuses, v

    fired: dict[str, list[str]] = {}
    for f in result.get("findings", []):
        fired.setdefault(f["rule"], []).append(f["severity"])

    for rule, allowed in label.must_fire.items():
        assert rule in fired, f"{rule} must fire ({label.conclusion}); fired: {fired}"
        assert any(s in allowed for s in fired[rule]), f"{rule} at {fired[rule]}, expert: {sorted(allowed)}"

    for rule, level in label.must_not_fire.items():
        if rule not in fired:
            continue
        if level == ANY:
            pytest.fail(f"{rule} must not fire here (fired at {fired[rule]}): {label.conclusion}")
        worst = max(RANK[s] for s in fired[rule])
        assert worst < RANK[level], f"{rule} fired at {fired[rule]}; must stay below {level}: {label.conclusion}"

    if label.no_critical:
        crit = [r for r, sev in fired.items() if "critical" in sev]
        assert not crit, f"nothing is critical here, yet {crit}: {label.conclusion}"

    for rule, lo, hi in label.impact_pct:
        pcts = [f.get("impact_pct") for f in result.get("findings", []) if f["rule"] == rule
                and f.get("impact_pct") is not None]
        if pcts:
            assert lo <= max(pcts) <= hi, f"{rule} impact_pct {max(pcts)}, expert range [{lo}, {hi}]"

    busy = result["summary"].get("gpu_busy_pct")
    if label.gpu_busy_pct is None:
        assert busy is None, f"gpu_busy_pct {busy} on a capture that cannot be judged"
    elif label.gpu_busy_pct != "unchecked":
        lo, hi = label.gpu_busy_pct
        if not (busy is None and v["status"] == "too-little-work"):
            assert busy is not None and lo <= busy <= hi, f"gpu_busy_pct {busy}, expert range [{lo}, {hi}]"

    if label.extra is not None:
        label.extra(result)


@pytest.mark.parametrize("stem", sorted(LABELS), ids=sorted(LABELS))
def test_real_trace_matches_expert_label(stem):
    path = SHARED_TRACES / f"{stem}.sqlite"
    if not path.exists():
        pytest.skip(f"{path} absent")
    label = LABELS[stem]
    if label.raises:
        import nsysdoc.errors

        with pytest.raises(getattr(nsysdoc.errors, label.raises)) as err:
            diagnose_path(path)
        assert "\n" not in str(err.value.message if hasattr(err.value, "message") else err.value)
        return
    result = diagnose_path(path)
    _check_contract_consistency(result)
    _check_label(result, label)
