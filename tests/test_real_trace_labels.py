"""Expert labels for the real captures in ../shared/traces (Nsight Systems exports and, in kineto/,
PyTorch Profiler traces).

Written from the raw rows, independently of nsysdoc's implementation: for every file, what a GPU
performance engineer concludes, encoded as the verdict headline(s) an expert accepts, the rules that
must (and must not) fire and at which severity, and the expert's numbers with a stated tolerance.
Each label carries the SQL that shows it and the numbers that SQL returned. No label is relaxed by
the tool's own thresholds: where the tool's policy (a floor of GPU work, a rule's minimum share)
disagrees with what the rows show, the label follows the rows.

Method (all read-only, ``file:PATH?mode=ro&immutable=1``): the window is first to last GPU operation
(no nsys file has step markers; the Kineto traces have six ProfilerStep#N ranges each); busy time is
the per-device union of kernel/memcpy/memset intervals (never a sum); an idle gap is attributed by
looking at the thread that launched the op ending the gap (RUNTIME row joined on correlationId
within the process, ``globalTid & ~0xFFFFFF = globalPid``) and at which API call covers the gap on
that thread; multi-GPU losses are the mean over devices.

Besides the labels, every real capture's per-device numbers (busy %, communication, exposed
communication) are recomputed here from the raw rows with plain SQL/JSON and Python
(:func:`independent_devices`) and compared with the report's ``devices[]`` within
:data:`PCT_TOL` percentage points; and two mutation tests plant a bug in the engine (busy time as a
sum of durations, overlapped NCCL time counted as exposed) and require these checks to catch it.

| trace | expert conclusion |
|---|---|
| blackwell_three_api_calls | Nothing to diagnose: 3 driver calls, no GPU op; nsys 2025.1.3 says it does not support driver 13.3 and CUPTI events may be missing. |
| failed_capture_injection_error | Not a capture: the injection library failed to load (symbol lookup error), 6 tables and no events -> EmptyCaptureError. |
| fastvideo_h100x2_sp2_slice | Transfer-bound: each H100 spends 920.9 of 969.4 ms in 223 pinned H2D copies (25.5 GB, FSDP CPU-offloaded T5 encoder weights); kernels cover 2.3%. |
| fastvideo_torchrun_h100x2_after | Launch-bound: GPUs 80/85% busy; 14.7% of the window is short gaps per GPU where the host runs Python between launches; 5.6% exposed NCCL. |
| fastvideo_torchrun_h100x2_before | Mostly compute-bound (90% busy, flash-attention half of kernel time); 8.1% short host launch gaps and 4.2% exposed NCCL send/recv, nothing critical. |
| mmagic_vsr_a100_forward | Cold start: one 899.7 ms cudaLaunchKernel (lazy module load/JIT) plus 10 more 1-13 ms first launches, and cuDNN/cuBLAS library loading inside the first conv2d: 92% of the window; GPU ran 4.1 ms of kernels. |
| nvfuser_matmul_h100 | One-time setup: nvFuser NVRTC compile 343 of 532 ms plus cuBLAS(Lt) library loading; 19 kernels / 0.4 ms of GPU work, too little to judge steady state. |
| nvfuser_pytest_h200 | Host-bound test harness: 2.24 s (70.3%) of CPU work with no CUDA call (1.63 s on ~3.9 cores, then 0.6 s) plus 0.91 s (28.5%) nvFuser compilation and cuBLAS start-up. |
| pytorch_tiny_rtx3080_wsl | Too little work: 2 kernels (4.1 us) and a 4-byte copy; both launches take ~17.5 ms (first launch, WSL software trace). |
| tensorrt_nvtx_only_titanrtx | No GPU activity: 22k NVTX events and no CUDA table at all (CUDA tracing was off). |
| unet_trainer_no_kernels_rtx4060 | Nothing to judge: one 1.5 us memset in a 0.88 s capture (context creation and setup only, no kernel). |
| kineto/hta_a100_rank3of8 | Communication-bound: 87.9 of 465.2 ms (18.9%) is NCCL with no compute running; 46% of NCCL overlapped; GPU 83.5% busy. |
| kineto/kineto_resnet50_v100_oldformat | Input-bound: the single-process DataLoader (num_workers=0) keeps the GPU idle ~60 ms of each ~176 ms step (33.4% of the window). |
"""
from __future__ import annotations

import gzip
import json
import re
import sqlite3
import urllib.parse
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

pytestmark = _conftest.needs_shared().marks  # issue 49: the real marker and the one skip message

SEVERITIES = ("info", "warning", "critical")
RANK = {s: i for i, s in enumerate(SEVERITIES)}
BOUND_HEADLINES = {"compute-bound", "communication-bound", "transfer-bound", "gpu-idle"}
STATUS_OF_HEADLINE = {"capture-quality": {"too-little-work"}, "no-gpu-activity": {"no-gpu"}}
ANY = "any"            # must_not_fire: the rule must not appear at all
WARN = "warning"       # must_not_fire: the rule must not appear at warning or critical
CRIT = "critical"      # must_not_fire: the rule must not appear at critical

#: tolerance of the per-device numbers recomputed from the rows (percentage points of the window);
#: the JSON rounds to 4 decimals, so anything above rounding is a different number
PCT_TOL = 0.05
#: the same for per-device times (ms)
MS_TOL = 0.05


@dataclass(frozen=True)
class Around:
    """The expert's number and the tolerance the label grants (both in the unit of the check)."""

    expert: float
    tol: float

    @property
    def lo(self) -> float:
        return self.expert - self.tol

    @property
    def hi(self) -> float:
        return self.expert + self.tol

    def __contains__(self, x) -> bool:
        return x is not None and self.lo - 1e-9 <= x <= self.hi + 1e-9

    def __str__(self) -> str:
        return f"{self.expert:g} ± {self.tol:g}"


def around(x: float, tol: float) -> Around:
    """``x ± tol``: the expert's number from the rows and the stated tolerance."""
    return Around(float(x), float(tol))


@dataclass
class Label:
    conclusion: str
    headlines: set[str] = field(default_factory=set)
    must_fire: dict[str, set[str]] = field(default_factory=dict)
    must_not_fire: dict[str, str] = field(default_factory=dict)
    #: rule -> expert impact_pct ± tolerance (the largest impact_pct among that rule's findings);
    #: the rule MUST be reported, with an impact_pct in the range
    impact_pct: dict[str, Around] = field(default_factory=dict)
    #: the same for rules the expert does not require (below the rule's documented reporting floor,
    #: as the lead decided), checked only when the rule is reported
    impact_pct_if_reported: dict[str, Around] = field(default_factory=dict)
    #: summary.gpu_busy_pct (mean over devices), None = must be null (too little GPU work / no GPU),
    #: "unchecked"; with ``busy_null_ok`` null is accepted when the verdict is too-little-work
    gpu_busy_pct: Around | None | str = "unchecked"
    busy_null_ok: bool = False
    no_critical: bool = False
    #: name of the nsysdoc.errors exception diagnose_path must raise (file not diagnosable)
    raises: str | None = None
    extra: Callable[[dict, "Checks"], None] | None = None
    #: file name relative to SHARED_TRACES (default: <stem>.sqlite)
    file: str | None = None


class Checks:
    """Soft assertions: every failing check is recorded (so one wrong number does not hide the
    next), then :meth:`done` fails with all of them."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.failures: list[str] = []

    def check(self, ok, message: str) -> bool:
        if not ok:
            self.failures.append(message)
        return bool(ok)

    def done(self) -> None:
        if self.failures:
            pytest.fail(f"{self.where}: {len(self.failures)} label check(s) failed:\n  - "
                        + "\n  - ".join(self.failures), pytrace=False)


def _findings(result, rule):
    return [f for f in result.get("findings", []) if f.get("rule") == rule]


def _text(result) -> str:
    return repr(result)


# --------------------------------------------------------------------------------------------
# Independent per-device numbers from the raw rows (no nsysdoc code)
# --------------------------------------------------------------------------------------------

def _ro(path) -> sqlite3.Connection:
    uri = f"file:{urllib.parse.quote(str(Path(path).resolve()))}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


def _union(intervals) -> list[list[float]]:
    """Sort and sweep: disjoint merged intervals (touching ones merge)."""
    out: list[list[float]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _clip(intervals, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


def _length(u) -> float:
    return sum(e - s for s, e in u)


NCCL_NAME = re.compile(r"^(?:void\s+)?nccl")


def _device_numbers(ops, lo, hi) -> dict[str, dict]:
    """ops: (device label, kind 'kernel'|'copy', start, end, is_nccl), times in ns. Per device:
    busy = |union of all ops in the window|, comm = |union of NCCL kernels|, compute = |union of the
    other kernels|, exposed = |compute ∪ comm| - |compute| (NCCL time with no compute running)."""
    w = hi - lo
    out = {}
    for dev in sorted({o[0] for o in ops}):
        mine = [o for o in ops if o[0] == dev]
        busy = _length(_union(_clip([(o[2], o[3]) for o in mine], lo, hi)))
        ks = [o for o in mine if o[1] == "kernel"]
        comp = _clip([(o[2], o[3]) for o in ks if not o[4]], lo, hi)
        comm = _clip([(o[2], o[3]) for o in ks if o[4]], lo, hi)
        c_len, m_len = _length(_union(comp)), _length(_union(comm))
        exposed = _length(_union(comp + comm)) - c_len
        out[dev] = {"busy_pct": busy / w * 100, "busy_ms": busy / 1e6, "comm_ms": m_len / 1e6,
                    "exposed_comm_ms": exposed / 1e6, "exposed_comm_pct": exposed / w * 100,
                    "compute_ms": c_len / 1e6, "sum_of_durations_pct": sum(e - s for s, e in _clip(
                        [(o[2], o[3]) for o in mine], lo, hi)) / w * 100}
    return out


def _nsys_truth(path) -> dict | None:
    con = _ro(path)
    try:
        tabs = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        ops = []
        if "CUPTI_ACTIVITY_KIND_KERNEL" in tabs:
            ops += [(str(d), "kernel", s, e, bool(NCCL_NAME.match(n or ""))) for d, s, e, n in con.execute(
                'SELECT k.deviceId, k.start, k."end", s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k '
                'JOIN StringIds s ON s.id = k.shortName WHERE k.start > 0')]
        for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            if t in tabs:
                ops += [(str(d), "copy", s, e, False) for d, s, e in con.execute(
                    f'SELECT deviceId, start, "end" FROM {t} WHERE start > 0')]
    finally:
        con.close()
    if not ops:
        return None
    lo, hi = min(o[2] for o in ops), max(o[3] for o in ops)   # no step markers: first..last GPU op
    return {"window": (lo, hi), "window_exact": True, "devices": _device_numbers(ops, lo, hi)}


def _kineto_truth(path) -> dict | None:
    """Kineto: times in µs (converted to ns here); the window is the ProfilerStep#N ranges, from the
    first step's start to the later of the last step's end and the end of the GPU work launched
    inside it (the step ends when its GPU work does)."""
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X" and "ts" in e and "dur" in e]
    steps = sorted((e for e in xs if re.fullmatch(r"ProfilerStep#\d+", str(e.get("name", "")))), key=lambda e: e["ts"])
    gpu_cats = {"kernel": "kernel", "gpu_memcpy": "copy", "gpu_memset": "copy", "memcpy": "copy", "memset": "copy"}
    ops, launch_of = [], {}
    for e in xs:
        kind = gpu_cats.get(str(e.get("cat", "")).lower())
        if kind:
            a = e.get("args", {})
            ops.append((str(a.get("device", e.get("pid"))), kind, e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000,
                        kind == "kernel" and bool(NCCL_NAME.match(e.get("name", ""))), a.get("correlation")))
        elif str(e.get("cat", "")).lower() in ("cuda_runtime", "runtime", "cuda_driver"):
            cid = e.get("args", {}).get("correlation")
            if cid is not None:
                launch_of[cid] = e["ts"] * 1000
    if not ops or not steps:
        return None
    last = steps[-1]
    l0, l1 = last["ts"] * 1000, (last["ts"] + last["dur"]) * 1000
    tail = [o[3] for o in ops if o[5] in launch_of and l0 <= launch_of[o[5]] < l1]
    lo, hi = steps[0]["ts"] * 1000, max([l1] + tail)
    return {"window": (lo, hi), "window_exact": False,
            "devices": _device_numbers([o[:5] for o in ops], lo, hi)}


_TRUTH: dict[str, dict | None] = {}


def independent_devices(path) -> dict | None:
    """{'window': (lo, hi) ns, 'devices': {label: numbers}} from the raw rows, or None without GPU ops."""
    key = str(path)
    if key not in _TRUTH:
        _TRUTH[key] = _kineto_truth(path) if str(path).endswith(".json.gz") else _nsys_truth(path)
    return _TRUTH[key]


def check_device_numbers(result: dict, path, chk: Checks) -> None:
    """The report's devices[] (and their means) against :func:`independent_devices`."""
    truth = independent_devices(path)
    devs = {d["label"]: d for d in result.get("devices", [])}
    if truth is None:
        chk.check(all(d.get("busy_pct") in (None, 0) for d in devs.values()),
                  f"no GPU operation in the rows, yet devices[] report busy time: {list(devs.values())}")
        return
    lo, hi = truth["window"]
    w = result["capture"]["window"]
    wlen = hi - lo
    if truth["window_exact"]:
        chk.check((w.get("start_ns"), w.get("end_ns")) == (lo, hi),
                  f"window {w.get('start_ns')}..{w.get('end_ns')}, expert: first..last GPU op {lo}..{hi}")
    else:
        chk.check(w.get("duration_ms") is not None and abs(w["duration_ms"] - wlen / 1e6) <= 0.002,
                  f"window {w.get('duration_ms')} ms, expert: ProfilerStep ranges {wlen / 1e6:.3f} ms")
    chk.check(set(devs) == set(truth["devices"]),
              f"devices {sorted(devs)}, rows have GPU ops on {sorted(truth['devices'])}")
    for label, t in truth["devices"].items():
        d = devs.get(label)
        if d is None:
            continue
        for key, tol in (("busy_pct", PCT_TOL), ("exposed_comm_pct", PCT_TOL), ("busy_ms", MS_TOL),
                         ("comm_ms", MS_TOL), ("exposed_comm_ms", MS_TOL)):
            got = d.get(key)
            hint = f"; a sum of durations would give {t['sum_of_durations_pct']:.4f} %" if key == "busy_pct" else ""
            chk.check(got is not None and abs(got - t[key]) <= tol,
                      f"device {label} {key} = {got}, rows say {t[key]:.4f} (± {tol}{hint})")
        chk.check(d.get("busy_pct") is not None and 0 <= d["busy_pct"] <= 100 + 1e-6,
                  f"device {label} busy_pct {d.get('busy_pct')} is not a share of the window")
    n = len(truth["devices"])
    mean = lambda k: sum(t[k] for t in truth["devices"].values()) / n  # noqa: E731
    busy = result["summary"].get("gpu_busy_pct")
    if busy is not None:
        chk.check(abs(busy - mean("busy_pct")) <= PCT_TOL,
                  f"summary.gpu_busy_pct {busy}, rows say {mean('busy_pct'):.4f} (mean over devices)")
    comm = result.get("metrics", {}).get("communication") or {}
    for key in ("comm_ms", "exposed_comm_ms"):
        got = comm.get(key)
        chk.check(got is not None and abs(got - mean(key)) <= MS_TOL,
                  f"metrics.communication.{key} {got}, rows say {mean(key):.4f} (mean over devices, never a sum)")
    got = result.get("metrics", {}).get("values", {}).get("exposed_comm_pct")
    chk.check(got is not None and abs(got - mean("exposed_comm_pct")) <= PCT_TOL,
              f"values.exposed_comm_pct {got}, rows say {mean('exposed_comm_pct'):.4f}")


# --------------------------------------------------------------------------------------------
# Extra checks that do not fit the table
# --------------------------------------------------------------------------------------------

def _blackwell_extra(result, chk: Checks):
    # DIAGNOSTIC_EVENT: "Installed CUDA driver version (13.3) is not supported by this build of Nsight
    # Systems..." and "Some CUPTI events might be missing": the report must carry it, since it is the
    # likeliest reason a GEMM benchmark shows no kernel at all.
    chk.check("not supported by this build of Nsight Systems" in _text(result),
              "nsys's 'driver not supported' diagnostic is not in the report")


def _unet_extra(result, chk: Checks):
    # A 1.5 us memset is no base for a utilisation number (the old report said 100 % busy).
    chk.check(result["summary"].get("gpu_busy_pct") is None,
              f"summary.gpu_busy_pct {result['summary'].get('gpu_busy_pct')} from one 1.5 us memset")


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
# Expert numbers (per-device unions, Python sweep): copy-only dev0 940.505 ms (97.0145 %), dev1
# 940.366 ms (97.0002 %), mean 940.436 ms = 97.007 % of 969.448 ms -> transfer-bound 97.0 ± 0.5;
# busy dev0 99.3236 %, dev1 99.3154 %, mean 99.320 %.
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
    impact_pct={"transfer-bound": around(97.01, 0.5)},
    gpu_busy_pct=around(99.32, 0.1),
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
#   Host phases (host windows >= 1 ms with no CUDA call): dev0 4.82 ms, dev1 1.51 ms, mean 1.06 %
#   -> host-bound is info at most.
# SELECT k.deviceId, count(*), sum(k."end"-k.start)/1e6 FROM CUPTI_ACTIVITY_KIND_KERNEL k
#   JOIN StringIds s ON s.id=k.shortName WHERE s.value LIKE 'nccl%' GROUP BY 1
#   -> dev0 31 / 9.99 ms, dev1 31 / 23.75 ms; none overlaps a compute kernel -> exposed comm mean
#      16.9 ms = 5.6 % of the window (a sum over GPUs would be 11.3 %).
# SELECT count(*), sum(dur), max(dur) ... 'cudaStreamSynchronize%' -> 30, 289.8 ms, 15.3 ms: the host
#   is blocked half the time, but the GPU idle right after the syncs is 1.4 / 2.5 ms (0.5 / 0.85 %).
# Pageable HtoD: 16 copies of 8 B per device; no DtoH; no cudaMalloc/cudaFree calls; no FFMA GEMM
# (GEMMs are cuBLASLt nvjet_tst_*, attention is flash_fwd bf16 = 49 % of kernel time).
# Expert launch number, recomputed with the glossary's gap attribution (an independent Python
# implementation over the rows: op ending each gap -> launching call on its thread; host part in a
# short window (< 1 ms to the launching call) and the <= 20 us queue part are "launch"): dev0
# 53.18 ms (17.77 %), dev1 41.41 ms (13.84 %), mean 47.29 ms = 15.80 % -> launch-bound 15.8 ± 1.0
# (the no-call gaps alone are 14.3 %, with the in-launch-call time 15.1 %).
# Issue 28 (item 4): a launch call that blocks for milliseconds while the GPU is idle is driver
# work, not per-launch overhead: dev0's 6.7 ms inside the 5.7 ms cudaMemsetAsync (2.24 % of the
# window, 1.12 % of the mean) leave the launch number -> 15.80 - 1.12 = 14.68 % -> 14.68 ± 1.0.
# Exposed NCCL: dev0 9.989 ms (3.338 %), dev1 23.753 ms (7.937 %), mean 5.637 %.
# Busy: dev0 80.2308 %, dev1 84.8727 %, mean 82.552 %.
# Lead's note: nccl-exposed reports from 10% of the window (so that well-overlapped DDP with its
# last-bucket tail stays quiet); the 5.6% here may or may not be reported, never above warning.
LABELS["fastvideo_torchrun_h100x2_after"] = Label(
    conclusion="launch-bound: ~15% of the window in short host gaps between launches; ~5.6% exposed NCCL",
    headlines={"launch-bound"},
    must_fire={"launch-bound": {"warning", "critical"}},
    must_not_fire={
        "transfer-bound": WARN, "host-sync": WARN, "pageable-memcpy": WARN, "one-time-setup": WARN,
        "data-starvation": WARN, "fp32-gemm": WARN, "host-bound": WARN, "allocation-churn": ANY,
        "d2h-transfer": ANY, "no-gpu-activity": ANY, "nccl-exposed": CRIT,
    },
    impact_pct={"launch-bound": around(14.68, 1.0)},
    impact_pct_if_reported={"nccl-exposed": around(5.64, 0.5)},
    gpu_busy_pct=around(82.55, 0.1),
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
# Expert launch number (same independent gap attribution as _after): dev0 20.41 ms (6.81 %), dev1
# 27.89 ms (9.30 %), mean 24.15 ms = 8.05 % -> launch-bound 8.05 ± 1.0 when reported (the rule
# reports from 10 %; the lead accepts either); host (>= 1 ms windows) 1.1 %.
# Exposed NCCL: dev0 17.173 ms (5.727 %), dev1 8.229 ms (2.744 %), mean 4.235 %.
# Busy: dev0 91.3100 % (a sum of durations would give 91.3142 %), dev1 89.1285 %, mean 90.219 %.
# Lead's note: nccl-exposed reports from 10% of the window (mean over GPUs); 4.2% here may or may not
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
    impact_pct_if_reported={"launch-bound": around(8.05, 1.0), "nccl-exposed": around(4.24, 0.5)},
    gpu_busy_pct=around(90.22, 0.1),
    no_critical=True,
)

# mmagic_vsr_a100_forward ----------------------------------------------------------------------
# SELECT count(*), max("end"-start)/1e6 FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s
#   ON s.id=r.nameId WHERE s.value LIKE 'cudaLaunchKernel_v%'        -> 322 calls, max 899.675 ms
#   (median of all 328 launch calls 6.49 us, p90 12.8 us)
# ... AND r."end"-r.start > 1000000 (all cudaLaunchKernel*)           -> 11 calls, 959.9 ms, each the
#   first launch of its (demangled) kernel: elementwise, flip_filter, nchwToNhwc, splitKreduce...
#   with cuModuleGetLoadingMode present = CUDA lazy loading: module load / PTX JIT on first launch
# Window 1170.60 ms; GPU union 5.64 ms (0.48 %); SELECT count(*), sum(dur) FROM KERNEL -> 328, 4.14 ms.
# Idle time covered on the launching thread (one thread launched all 375 ops) by: long first
#   launches 959.78 ms (81.99 %), set-up calls (cudaStreamCreateWithFlags x16, cuGetProcAddress
#   x1532, cuInit x4) 2.98 ms, allocation calls 21.67 ms (1.85 %; 16.67 ms of it inside the first
#   conv2d range), no CUDA call 176.97 ms (15.12 %).
# The first torch.nn.functional.conv2d NVTX range (pyprof dict text; +27.9 ms, 1052.86 ms long)
#   holds 116.66 ms (9.97 %) of that no-call idle time, in 7 stretches >= 1 ms: +27.9 (1.5 ms),
#   +29.7 (10.0), +43.5 (8.2), +63.1 (7.4), +73.1 (52.8), +129.0 (28.1), +173.9 (6.4). It is cuDNN
#   and cuBLAS set-up, not host work:
#   SELECT p.start, p."end"-p.start, s.value FROM PROFILER_OVERHEAD p JOIN StringIds s ON
#     s.id=p.nameId WHERE s.value LIKE 'dlopen(%' -> on the main thread, at the start of these
#     stretches: dlopen(libcudnn_ops_infer.so.8) +28.2 ms, dlopen(libcublasLt.so.12) +43.1,
#     dlopen(libcublas.so.12) +62.6, dlopen(libcudnn_ops_infer.so.8) + dlopen(libcudnn_cnn_infer.so.8)
#     +73.1 (7.6 ms of nsys overhead), libcudnn_cnn_infer again +128.4, libcublas/libcublasLt +173.9;
#   OSRT_API on the main thread inside those stretches: 213 ioctl calls, 43.40 ms (driver work
#     outside any traced CUDA call: the libraries' own statically linked runtime), nothing else;
#   RUNTIME inside the range: cuGetProcAddress x1532 (from +1.5 ms), cuInit x4, cuModuleGetLoadingMode
#     x4, cudaStreamCreateWithFlags x16, cudaHostAlloc: library handle creation;
#   the kernels run inside it are cuDNN's: flip_filter, fft2d_r2c_32x32, fft2d_c2r_32x32 (FFT conv).
# The glossary's host class (gaps whose host window is >= 1 ms, no CUDA call) totals 143.83 ms
#   (12.3 %): 116.01 ms inside the first conv2d range (the set-up above) and 27.82 ms (2.38 %)
#   outside it (11.6 ms of it in torch.randn on the CPU) -> host-bound is below 3 %: info at most.
# Expert set-up = idle in first launches and set-up calls + no-call idle inside the first conv2d:
#   1079.43 ms = 92.21 % of the span, plus the 16.67 ms of allocation calls inside the range: the
#   cudaFree/cudaMalloc calls cuDNN and cuBLAS make while setting up in the first convolution are
#   set-up, not churn (issue 28, item 5) -> 1096.10 ms = 93.64 % -> one-time-setup 93.6 ± 2.0.
# cudaStreamSynchronize: 10 calls, 0.25 ms in total. Pageable HtoD: 10 copies, 18.6 MB, 1.49 ms.
# FP32 SIMT GEMMs (ampere_sgemm_*, cutlass simt sgemm) 0.5 ms. This is one cold forward pass: the
# window is dominated by one-time setup (warning: it does not recur); profile after warm-up.
LABELS["mmagic_vsr_a100_forward"] = Label(
    conclusion="cold start: first-launch module loading/JIT (one 899.7 ms launch) and cuDNN/cuBLAS "
               "library loading inside the first conv2d are 92% of the window",
    headlines={"one-time-setup"},
    must_fire={"one-time-setup": {"warning"}},
    must_not_fire={
        "launch-bound": WARN, "host-sync": WARN, "allocation-churn": WARN, "pageable-memcpy": WARN,
        "fp32-gemm": WARN, "dominant-kernel": WARN, "tiny-kernels": WARN, "transfer-bound": WARN,
        "d2h-transfer": ANY, "nccl-exposed": ANY, "host-bound": WARN, "no-gpu-activity": ANY,
    },
    impact_pct={"one-time-setup": around(93.6, 2.0)},
    gpu_busy_pct=around(0.48, 0.05),
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
#   loading 23.4 ms -> setup 424.07 ms (79.71 %, independent gap attribution); the remaining
#   103.59 ms (19.47 %) of no-call host time is the 128.5 ms gap before the first cuBLAS (nvjet)
#   kernel, in which the thread calls cuGetProcAddress x838 (from +0.16 ms), cuInit x3,
#   cuModuleGetLoadingMode x2, a 1.25 ms cudaFree (+29.4), cudaGetDriverEntryPoint (+54.2) and
#   cuLibraryLoadData x15 (23.3 ms, from +63.5): cuBLASLt initialisation, also setup -> host-bound
#   must not be critical. No NVTX range or dlopen record (PROFILER_OVERHEAD has none here) covers
#   those 103.6 ms: the rows show a library initialising (cuInit, 838 entry-point lookups, 15
#   library loads) but cannot split its CPU work from the program's between the calls. The
#   expert's one-time-setup number is therefore a stated range: from the calls and compile ranges
#   alone (79.7 %) to the whole gap counted as library start-up (424.07 + 103.59 = 527.66 ms =
#   99.2 %): 89.45 ± 9.75.
#   Too little GPU work to judge steady state either way (0.4 ms of kernels).
LABELS["nvfuser_matmul_h100"] = Label(
    conclusion="one-time setup: nvFuser NVRTC compile 343/532 ms + cuBLASLt loading; 0.4 ms of GPU work",
    headlines={"one-time-setup", "capture-quality"},
    must_fire={"one-time-setup": {"info", "warning"}},
    must_not_fire={
        "launch-bound": WARN, "host-sync": WARN, "allocation-churn": WARN, "pageable-memcpy": ANY,
        "transfer-bound": WARN, "tiny-kernels": WARN, "fp32-gemm": WARN, "dominant-kernel": WARN,
        "data-starvation": WARN, "nccl-exposed": ANY, "host-bound": CRIT, "no-gpu-activity": ANY,
    },
    impact_pct={"one-time-setup": around(89.45, 9.75)},
    gpu_busy_pct=around(0.076, 0.01),
    busy_null_ok=True,  # 0.4 ms of GPU work: "too little work to judge" is the expert's reading too
)

# nvfuser_pytest_h200 --------------------------------------------------------------------------
# Window 3190.34 ms; GPU union 31.56 ms (0.99 %): 18 kernels 10.17 ms, 3 memcpy 21.39 ms, 3 memset.
# Compile ranges (n.text LIKE compile/NVRTC, 9 threads, nested: compileFusionParallel sums 1795.0 ms
#   over 10 ranges, NVRTC 951.4 ms over 6): their union in the window = 834.21 ms (26.1 %).
#   + long first launches 22.5 ms + cuLibraryLoadData 13 / 13.3 ms -> setup 870.0 ms (27.3 %);
#   the independent gap attribution gives 870.17 ms = 27.28 % -> one-time-setup 27.3 ± 1.0.
# GPU-idle time on the launching (main) thread with no CUDA call and no compile range, recomputed:
#   idle (window minus the union of the 24 ops, 23 gaps) minus the union of the main thread's
#   RUNTIME rows minus the union of compile/NVRTC NVTX ranges = 2283.618 ms = 71.579 % of
#   3190.338 ms (the same with compile ranges of the main thread only): a 1628.39 ms stretch
#   (main thread on CPU 100 % per SCHED_EVENTS, the process on ~3.9 cores) ending in a
#   394,002,432 B pageable HtoD cudaMemcpyAsync (21.4 ms), then 596.83 ms of pure CPU before the
#   cuBLAS init that precedes the first NVTX range (+2324.8 ms); the rest in 5 short stretches.
#   Counting only host windows >= 1 ms (the glossary's host class): 2281.18 ms = 71.50 %.
#   -> host-bound 71.6 ± 1.0, critical (>= 15 % of the window: the by-impact policy).
# The last 54.81 ms of the 651.9 ms gap before the first cuBLAS kernel (from +8114.17 ms, the
#   first of 838 cuGetProcAddress, to the memset at +8168.98) are cuBLAS initialising itself
#   (cuInit x4, cuGetProcAddress x838, cudaGetDriverEntryPoint, cuLibraryLoadData x13): its
#   39.58 ms with no CUDA call are the library's set-up, as in nvfuser_matmul and mmagic
#   (SELECT over RUNTIME in [8114.17, 8168.98] ms on tid 50556: calls cover 15.23 ms).
#   -> host 2283.62 - 39.58 = 2244.04 ms = 70.34 % -> host-bound 70.3 ± 1.0;
#      set-up 870.17 + 39.58 = 909.75 ms = 28.52 % -> one-time-setup 28.5 ± 1.0.
# No OS runtime trace and no DataLoader range: nothing shows an input wait -> data-starvation no.
# SELECT count(*), sum(bytes), sum(dur) FROM MEMCPY WHERE srcKind=0 OR dstKind=0 -> 2, 394,002,434 B,
#   21.36 ms: real but it costs < 1 % of the window (GPU idle around it anyway) -> not a warning.
# Launch median 42 us; cudaMalloc/cudaFree inside idle 4.2 ms (0.1 %).
# The expert's reading is host-bound, reported at critical: 24 GPU operations and 31.6 ms of GPU time
# are below the tool's floor for a judgement (50 operations or 50 ms of GPU time), but 3.19 s of
# window with 2.28 s of host work between them is plenty to judge that the GPU waits for the host.
LABELS["nvfuser_pytest_h200"] = Label(
    conclusion="host-bound test harness: 70.3% CPU work with no CUDA call, 28.5% nvFuser compilation and "
               "cuBLAS start-up",
    headlines={"host-bound"},
    must_fire={"host-bound": {"critical"}, "one-time-setup": {"warning"}},
    must_not_fire={
        "launch-bound": WARN, "host-sync": WARN, "allocation-churn": WARN, "pageable-memcpy": WARN,
        "transfer-bound": WARN, "tiny-kernels": WARN, "fp32-gemm": WARN, "dominant-kernel": WARN,
        "data-starvation": WARN, "nccl-exposed": ANY, "no-gpu-activity": ANY,
    },
    impact_pct={"host-bound": around(70.3, 1.0), "one-time-setup": around(28.5, 1.0)},
    gpu_busy_pct=around(0.99, 0.05),
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

# kineto/hta_a100_rank3of8 (PyTorch Profiler, rank 3 of 8 A100s) -------------------------------
# Python over the gzip'd JSON (times in us): window = ProfilerStep#1009 start .. ProfilerStep#1014
#   end = 465.171 ms (6 steps of 75.5-81.1 ms); GPU ops (cat kernel/gpu_memcpy/gpu_memset) all on
#   device 3, 4 streams: union 388.59 ms = 83.536 % (a sum of durations would be 107.82 % of the
#   window: kernels overlap across streams, so the union matters here).
#   NCCL kernels (name starts with nccl: ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t 130.7 ms,
#   ncclKernel_AllReduce_RING_LL_Sum_float 32.9 ms): union 163.535 ms; NCCL time with no non-NCCL
#   kernel running = |compute ∪ comm| - |compute| = 87.921 ms = 18.901 % of the window; 75.6 ms
#   (46 %) overlapped -> nccl-exposed 18.9 ± 0.5, critical.
#   DataLoader ranges cover 0.42 ms of GPU idle (0.09 %); idle before each step's first op 0-0.55 ms.
LABELS["kineto/hta_a100_rank3of8"] = Label(
    file="kineto/hta_a100_rank3of8.pt.trace.json.gz",
    conclusion="communication-bound: 18.9% of the window is NCCL with no compute running",
    headlines={"nccl-exposed"},
    must_fire={"nccl-exposed": {"critical"}},
    must_not_fire={"data-starvation": WARN, "transfer-bound": WARN, "one-time-setup": WARN,
                   "no-gpu-activity": ANY, "allocation-churn": WARN, "host-sync": WARN},
    impact_pct={"nccl-exposed": around(18.90, 0.5)},
    gpu_busy_pct=around(83.54, 0.1),
)

# kineto/kineto_resnet50_v100_oldformat (TensorBoard plugin sample "resnet50_num_workers_0") ----
# Window = ProfilerStep#5 start .. the end of the GPU work launched in ProfilerStep#10 = 1065.553 ms
#   (the last step's range ends 16.2 ms before its GPU work does). One device, one stream.
#   GPU idle inside "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" ranges: 355.57 ms
#   = 33.37 % of the window (62.6-73.4 ms of DataLoader per ~176 ms step, num_workers=0: loading
#   and the GPU never overlap) -> data-starvation 33.4 ± 1.0, critical.
#   FP32 cuDNN convolutions (dgrad_engine<float>, wgrad_alg0_engine<float>, implicit_convolve_sgemm,
#   volta_scudnn_*) on a V100 (sm 7.0, no TF32): real, reported from 10 % of kernel time.
#   12 pageable HtoD copies (110 MiB, 11.5 ms): the input batches.
LABELS["kineto/kineto_resnet50_v100_oldformat"] = Label(
    file="kineto/kineto_resnet50_v100_oldformat.pt.trace.json.gz",
    conclusion="input-bound: single-process DataLoader keeps the GPU idle 33% of the window",
    headlines={"data-starvation"},
    must_fire={"data-starvation": {"critical"}, "fp32-gemm": {"warning", "critical"}},
    must_not_fire={"nccl-exposed": ANY, "transfer-bound": WARN, "one-time-setup": WARN,
                   "no-gpu-activity": ANY, "host-bound": WARN},
    impact_pct={"data-starvation": around(33.4, 1.0)},
)



# --------------------------------------------------------------------------------------------
# Issue 47: the profiler workflow (memory, input shapes, CPU-side operators, optimizer habits).
# What an expert reads from the raw JSON / SQL, independently of nsysdoc:
#   * no shared nsys export has CUDA_GPU_MEMORY_USAGE_EVENTS, GPU_METRICS or `sizes =` in an NVTX
#     text (sqlite3: `select name from sqlite_master`, `... where text like '%sizes%'` -> none), so
#     memory, input shapes and counters are missing and each says which nsys switch records it;
#     none of the five issue-47 rules can fire there.
#   * hta_a100_rank3of8: no [memory] event (missing names profile_memory=True). 24 operator names
#     have another set of Input Dims in every ProfilerStep (sparse-feature lengths of a
#     recommendation model: fbgemm permute/lookup, aten::copy_ of the batch) - inherent to the
#     data, steps 75.5-81.1 ms: nothing to fix, dynamic-shapes must stay below warning.
#     Optimizer.zero_grad#Adagrad.zero_grad x6, Optimizer.step#FusedAdam.step x6, one per step:
#     zero-grad-repeated quiet. aten::linear, 606 outermost calls: 60.62 us CPU per call vs 42.07 us
#     of GPU work it launched per call (kernels by correlation of the cuda_runtime calls inside it).
#   * kineto_resnet50_v100_oldformat: 8,220 CUDA [memory] events (old format: Bytes only), running
#     sum peaks at 2,791,636,480 B (relative to the capture start), 8.2% of the V100's
#     34,084,028,416 B; the level is back to 0 after every step: no growth, not near capacity.
#     Convolution kernels (dgrad/wgrad/winograd/implicit_convolve/scudnn, batch-norm left out) are
#     59.0% of kernel time and every cudnn_convolution call has the same Input Dims in all six
#     steps: cudnn.benchmark is worth suggesting (info). One zero_grad per SGD step: quiet.
ISSUE47_RULES = ("memory-growth", "memory-near-capacity", "dynamic-shapes", "cudnn-benchmark", "zero-grad-repeated")


def _kineto_events(label_file: str) -> list:
    with gzip.open(SHARED_TRACES / label_file, "rt") as fh:
        return json.load(fh)["traceEvents"]


def _shape_changing_ops(ev, cat) -> set:
    """Operator names whose set of Input Dims differs between ProfilerStep ranges (by start time)."""
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if str(e.get("name", "")).startswith("ProfilerStep#"))
    per: dict = {}
    for e in ev:
        if e.get("cat") != cat or e.get("ph") != "X":
            continue
        for i, (a, b) in enumerate(steps):
            if a <= e["ts"] < b:
                per.setdefault(e["name"], {}).setdefault(i, set()).add(json.dumps(e["args"].get("Input Dims")))
                break
    return {n for n, m in per.items() if len({frozenset(v) for v in m.values()}) > 1}


def _hta_profiler_extra(result, chk: Checks):
    ev = _kineto_events("kineto/hta_a100_rank3of8.pt.trace.json.gz")
    v = result["metrics"]["values"]
    changing = _shape_changing_ops(ev, "cpu_op")
    chk.check(len(changing) == 24, f"expert: 24 operators change shapes between steps, rows say {len(changing)}")
    chk.check(v.get("shape_changing_op_count") == len(changing),
              f"shape_changing_op_count {v.get('shape_changing_op_count')} != {len(changing)} from the JSON")
    zg = sum(1 for e in ev if str(e.get("name", "")).startswith("Optimizer.zero_grad#"))
    chk.check(v.get("zero_grad_calls") == zg == 6 and v.get("zero_grad_extra_calls") == 0,
              f"zero_grad: {zg} ranges, tool {v.get('zero_grad_calls')} calls, {v.get('zero_grad_extra_calls')} extra")
    mem = result["metrics"]["memory"]
    chk.check("profile_memory=True" in (mem.get("missing") or ""), f"memory missing: {mem.get('missing')!r}")
    lb = [w for f in _findings(result, "launch-bound") for w in f.get("where") or []
          if w.get("via") == "CPU dispatch slower than the GPU" and w.get("op") == "aten::linear"]
    if chk.check(lb, "launch-bound's Where should name aten::linear as CPU dispatch slower than the GPU"):
        chk.check(lb[0]["count"] == 606 and lb[0]["cpu_us_per_call"] in around(60.62, 0.05)
                  and lb[0]["gpu_us_per_call"] in around(42.07, 0.05), f"aten::linear dispatch row {lb[0]}")
    # issue 47 review: aten::sum runs inside aten::sum; 1332 calls of which 702 not inside another
    # one on their thread (from the JSON below). The Where row counts the 702 its per-call values are
    # per, and (CPU - wait - GPU per call) x count is its excess_ms (9.423 ms)
    sums = sorted((e["pid"], e["tid"], e["ts"], -e["dur"]) for e in ev
                  if e.get("cat") == "cpu_op" and e.get("ph") == "X" and e.get("name") == "aten::sum")
    outer, open_end = 0, {}
    for pid, tid, ts, mdur in sums:
        if ts >= open_end.get((pid, tid), float("-inf")):
            outer += 1
            open_end[(pid, tid)] = ts - mdur
    chk.check((len(sums), outer) == (1332, 702), f"aten::sum calls/outer from the JSON: {len(sums)}, {outer}")
    rows = [r for r in result["metrics"]["operators"]["rows"] if r.get("name") == "aten::sum"]
    chk.check(rows and rows[0].get("calls") == 1332 and rows[0].get("outer_calls") == outer,
              f"aten::sum row {rows[:1]}")
    sw = [w for f in _findings(result, "launch-bound") for w in f.get("where") or []
          if w.get("via") == "CPU dispatch slower than the GPU" and w.get("op") == "aten::sum"]
    if chk.check(sw, "launch-bound's Where should name aten::sum"):
        w = sw[0]
        per = w["cpu_us_per_call"] - (w.get("cpu_wait_us_per_call") or 0) - w["gpu_us_per_call"]
        chk.check(w["count"] == outer and w["excess_ms"] in around(9.423, 0.002)
                  and per * w["count"] / 1000 in around(w["excess_ms"], 0.002), f"aten::sum dispatch row {w}")


def _resnet_profiler_extra(result, chk: Checks):
    import re as _re

    ev = _kineto_events("kineto/kineto_resnet50_v100_oldformat.pt.trace.json.gz")
    level, peak = 0, 0
    for e in sorted((e for e in ev if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1),
                    key=lambda e: e["ts"]):
        level += e["args"]["Bytes"]
        peak = max(peak, level)
    devs = result["metrics"]["memory"]["devices"]
    chk.check(len(devs) == 1 and devs[0]["peak_allocated_bytes"] == peak == 2_791_636_480
              and devs[0]["baseline"] == "capture_start" and devs[0]["peak_reserved_bytes"] is None,
              f"memory: expert peak {peak} relative to the capture start, reserved unknown; tool {devs}")
    chk.check(devs and devs[0]["device_memory_bytes"] == 34_084_028_416, "V100 32 GB device memory")
    kern = [e for e in ev if e.get("cat") == "Kernel"]
    conv = _re.compile(r"convolve|dgrad|wgrad|scudnn|conv2d|winograd|fprop")
    share = sum(e["dur"] for e in kern if conv.search(e["name"]) and "bn_" not in e["name"]) \
        / sum(e["dur"] for e in kern) * 100
    chk.check(share in around(59.0, 0.5), f"expert convolution share {share:.1f}%")
    chk.check(result["metrics"]["values"].get("conv_kernel_share_pct") in around(share, 1.5),
              f"conv_kernel_share_pct {result['metrics']['values'].get('conv_kernel_share_pct')} vs {share:.1f}")
    chk.check(not {n for n in _shape_changing_ops(ev, "Operator") if "conv" in n},
              "expert: convolution input shapes are fixed across the six steps")


# kineto/hta_a100_rank3of8, issue 48: the median step's critical path -----------------------------
# Python over the gzip'd JSON (times in us from the step's start; _hta_median_step_facts below):
#   the median of the six ProfilerStep ranges (sorted by dur, the lower middle) is #1012, 76.727 us
#   long (nsysdoc's step runs to #1013's start: 76.770 ms).
#   * The main thread spends 11.882 ms in 10 cudaMemcpyAsync calls whose copy (same correlation) is
#     "Memcpy DtoH (Device -> Pageable)"; every call returns 8-12 us after its copy ended: a copy to
#     pageable memory blocks the host until the copy ends (CUDA runtime API, API synchronization
#     behavior), and each copy queues on stream 20 behind the work the host waits for.
#   * SendRecv A [8401, 19850] on stream 21: stream 7's next kernel (CatArrayBatchedCopy, launched
#     at 10819) starts at 19851, 1 us after A ends, 8.93 ms after stream 7's previous op; stream 7
#     then runs its backlog (launched by 14.2 ms) back to back until stream 20's work and the first
#     pageable copy (call [23104, 24018], copy ends 24009).
#   * SendRecv B [25391, 27247]: a stream-20 kernel starts at 27250 (launched 1.72 ms before); the
#     pageable copy after it ends 27301, its call [25569, 27308] returns 7 us later.
#   * SendRecv C [27948, 30451] + [30453, 30471] (same stream): a stream-20 kernel starts at 30472
#     (launched 2.13 ms before); the copy ends 30482, its call [28355, 30491] returns.
#   So the host waits, through its pageable copies, for the three SendRecvs, and everything after
#   (the rest of the forward, the backward thread it hands off to, the optimizer) follows the host:
#   communication on the median step's critical path = 11.449 + 1.856 + 2.503 + 0.018 = 15.826 ms
#   (the backward's SendRecv and AllReduces run while the backward thread is still launching: off
#   the path). Hiding B and C returns the host >= 1.72 + 2.13 = 3.85 ms earlier, and with it the
#   rest of the step: nccl-exposed's what-if saves at least 3.8 ms and never more than its impact
#   (14.65 ms per step). Hiding A alone buys little: the main thread issues 239 cudaLaunchKernel
#   during A (at most 0.36 ms apart), launching the forward while A runs; with launch-bound's fix
#   too, the saving of both is more than the sum of each.
def _hta_median_step_facts(ev) -> dict:
    steps = sorted((e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["dur"])
    med = steps[(len(steps) - 1) // 2]
    t0, t1 = med["ts"], med["ts"] + med["dur"]
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("ph") == "X"]
    rt = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "cuda_runtime" and "correlation" in e["args"]}
    d2h = [(rt[g["args"]["correlation"]], g) for g in gpu
           if g["name"] == "Memcpy DtoH (Device -> Pageable)" and t0 <= g["ts"] < t1]
    sr = sorted((g for g in gpu if g["name"].startswith("ncclKernel_SendRecv") and t0 <= g["ts"] < t1),
                key=lambda g: g["ts"])
    released = []  # per SendRecv: ops on other streams starting within 3 us of its end, how long launched before
    for s in sr:
        end = s["ts"] + s["dur"]
        rel = [g for g in gpu if g["args"]["stream"] != s["args"]["stream"] and end <= g["ts"] <= end + 3]
        released.append([(g["args"]["stream"], g["ts"] - (rt[g["args"]["correlation"]]["ts"]
                                                          + rt[g["args"]["correlation"]]["dur"])) for g in rel])
    launches = sorted(e["ts"] for e in ev if e.get("cat") == "cuda_runtime" and e["name"] == "cudaLaunchKernel"
                      and sr and sr[0]["ts"] <= e["ts"] < sr[0]["ts"] + sr[0]["dur"])
    return {"name": med["name"], "dur_us": med["dur"], "d2h_calls": len(d2h),
            "d2h_blocked_us": sum(c["dur"] for c, _ in d2h),
            "d2h_return_after_copy_us": [c["ts"] + c["dur"] - g["ts"] - g["dur"] for c, g in d2h],
            "sendrecv": [(s["ts"] - t0, s["dur"]) for s in sr], "released": released,
            "launches_during_first": len(launches),
            "max_launch_gap_us": max((b - a for a, b in zip(launches, launches[1:])), default=None)}


def _hta_critical_path_extra(result, chk: Checks):
    f = _hta_median_step_facts(_kineto_events("kineto/hta_a100_rank3of8.pt.trace.json.gz"))
    chk.check((f["name"], f["dur_us"]) == ("ProfilerStep#1012", 76727), f"median step {f['name']} {f['dur_us']}")
    chk.check(f["d2h_calls"] == 10 and f["d2h_blocked_us"] == 11882
              and all(0 <= x <= 20 for x in f["d2h_return_after_copy_us"]),
              f"pageable DtoH calls block until their copy ends: {f}")
    sr = dict(f["sendrecv"][:4])
    chk.check(sr == {8401: 11449, 25391: 1856, 27948: 2503, 30453: 18},
              f"the step's first SendRecvs from the JSON: {f['sendrecv'][:4]}")
    rel = dict(zip([s for s, _ in f["sendrecv"]], f["released"]))
    chk.check(any(st == 7 and held >= 8_000 for st, held in rel.get(8401, []))
              and any(st == 20 and held >= 1_700 for st, held in rel.get(25391, []))
              and any(st == 20 and held >= 2_100 for st, held in rel.get(30453, [])),
              f"work held by the SendRecvs (stream, us since its launch returned): {rel}")
    chk.check(f["launches_during_first"] == 239 and f["max_launch_gap_us"] <= 360,
              f"main thread launching during the first SendRecv: {f['launches_during_first']}")
    cp = result["metrics"].get("critical_path") or {}
    med = cp.get("median_step") or {}
    chk.check(med.get("length_ms") in around(76.77, 0.01), f"median step length {med.get('length_ms')}")
    comm = (med.get("segments_ms") or {}).get("comm")
    chk.check(comm in around(15.826, 0.1), f"communication on the median step's path: expert 15.826 ms, tool {comm}")
    chk.check(not any(s.get("truncated") for s in cp.get("steps") or []), "a step's path walk was truncated")
    wi = (cp.get("what_if") or {}).get("nccl-exposed") or {}
    impact = next((x.get("impact_ms_per_step") for x in _findings(result, "nccl-exposed")), None)
    chk.check(wi.get("saved_ms_per_step") is not None and 3.8 <= wi["saved_ms_per_step"] <= (impact or 0) + 1e-6,
              f"nccl-exposed what-if {wi} must save 3.8 ms .. its impact {impact}")
    both = cp.get("what_if_all") or {}
    lb = ((cp.get("what_if") or {}).get("launch-bound") or {}).get("saved_ms_per_step") or 0
    chk.check(set(both.get("rules") or []) >= {"nccl-exposed", "launch-bound"}
              and both.get("saved_ms_per_step", 0) > lb + (wi.get("saved_ms_per_step") or 0),
              f"nccl-exposed with launch-bound {both} must save more than the sum of each")
    sentence = (result.get("verdict") or {}).get("sentence") or ""
    chk.check("would not shorten" not in sentence and "from 76.8 ms to" in sentence, f"verdict: {sentence}")


def _hta_extras(result, chk: Checks):
    _hta_profiler_extra(result, chk)
    _hta_critical_path_extra(result, chk)


LABELS["kineto/hta_a100_rank3of8"].must_not_fire.update(
    {"dynamic-shapes": WARN, "zero-grad-repeated": ANY, "cudnn-benchmark": ANY, "memory-growth": ANY,
     "memory-near-capacity": ANY})
LABELS["kineto/hta_a100_rank3of8"].extra = _hta_extras
LABELS["kineto/kineto_resnet50_v100_oldformat"].must_fire["cudnn-benchmark"] = {"info"}
LABELS["kineto/kineto_resnet50_v100_oldformat"].must_not_fire.update(
    {"dynamic-shapes": ANY, "zero-grad-repeated": ANY, "memory-growth": ANY, "memory-near-capacity": ANY})
LABELS["kineto/kineto_resnet50_v100_oldformat"].extra = _resnet_profiler_extra
for _stem, _label in LABELS.items():
    if not _label.file:  # the nsys exports: nothing of issue 47 was recorded
        for _rule in ISSUE47_RULES:
            _label.must_not_fire.setdefault(_rule, ANY)


def _check_profiler_missing(result, path, chk: Checks):
    """Issue 47: what a capture did not record names the switch that records it, per format."""
    mem = result["metrics"].get("memory") or {}
    if not mem.get("devices"):
        want = "--cuda-memory-usage=true" if str(path).endswith(".sqlite") else "profile_memory=True"
        chk.check(want in (mem.get("missing") or ""), f"memory missing should name {want}: {mem.get('missing')!r}")
    counters = (result["metrics"].get("kernels") or {}).get("counters") or {}
    if not counters.get("present"):
        chk.check("--gpu-metrics-devices" in (counters.get("missing") or ""),
                  f"counters missing should name --gpu-metrics-devices: {counters.get('missing')!r}")


# --------------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------------

def _check_contract_consistency(result, chk: Checks):
    v = result.get("verdict")
    if not chk.check(isinstance(v, dict), "result has no verdict"):
        return
    status, headline = v.get("status"), v.get("headline")
    chk.check(status in ("bottleneck", "bound", "too-little-work", "no-gpu"), f"verdict status {status!r}")
    findings = result.get("findings", [])
    for f in findings:
        chk.check(f.get("severity") in SEVERITIES, f"{f.get('rule')}: severity {f.get('severity')!r}")
        pct = f.get("impact_pct")
        # wall-clock share of one window (mean over devices), never a sum over GPUs
        chk.check(pct is None or -1e-6 <= pct <= 100 + 1e-6, f"{f['rule']}: impact_pct {pct} outside 0-100")
    if status == "bottleneck":
        chk.check(v.get("rule") == headline, f"verdict rule {v.get('rule')!r} != headline {headline!r}")
        chk.check(any(f["rule"] == headline and f["severity"] in ("warning", "critical") for f in findings),
                  f"headline {headline!r} has no finding at warning or critical")
    elif status == "bound":
        chk.check(headline in BOUND_HEADLINES, f"status 'bound' with headline {headline!r}")
        costly = [(f["rule"], f["severity"]) for f in findings if f["severity"] in ("warning", "critical")
                  and f["rule"] in BOTTLENECK_RULES and (f.get("impact_ms") or 0) > 0]
        chk.check(not costly, f"status 'bound' although costly findings at warning+: {costly}")
    elif status == "too-little-work":
        chk.check(headline == "capture-quality", f"too-little-work with headline {headline!r}")
        chk.check(result["summary"].get("gpu_busy_pct") is None, "too-little-work, yet a gpu_busy_pct")
        above = [(f["rule"], f["severity"]) for f in findings
                 if f["rule"] not in ("capture-quality", "no-gpu-activity") and f["severity"] != "info"]
        chk.check(not above, f"too little GPU work, yet findings above info: {above}")
        chk.check(any(f["rule"] == "capture-quality" and f["severity"] == "warning" for f in findings),
                  "too-little-work without a capture-quality warning")
    else:
        chk.check(headline == "no-gpu-activity", f"status no-gpu with headline {headline!r}")


def _check_label(result, label: Label, chk: Checks):
    v = result["verdict"]
    chk.check(v["headline"] in label.headlines,
              f"headline {v['headline']!r} (status {v['status']}), expert accepts {sorted(label.headlines)}: "
              f"{label.conclusion}")
    for h, statuses in STATUS_OF_HEADLINE.items():
        if v["headline"] == h:
            chk.check(v["status"] in statuses, f"headline {h!r} with status {v['status']!r}")

    fired: dict[str, list[str]] = {}
    for f in result.get("findings", []):
        fired.setdefault(f["rule"], []).append(f["severity"])

    for rule, allowed in label.must_fire.items():
        if chk.check(rule in fired, f"{rule} must fire at {sorted(allowed)} ({label.conclusion}); fired: {fired}"):
            chk.check(any(s in allowed for s in fired[rule]),
                      f"{rule} at {fired[rule]}, expert: {sorted(allowed)} ({label.conclusion})")

    for rule, level in label.must_not_fire.items():
        if rule not in fired:
            continue
        if level == ANY:
            chk.check(False, f"{rule} must not fire here (fired at {fired[rule]}): {label.conclusion}")
            continue
        worst = max(RANK[s] for s in fired[rule])
        chk.check(worst < RANK[level], f"{rule} fired at {fired[rule]}; must stay below {level}: {label.conclusion}")

    if label.no_critical:
        crit = [r for r, sev in fired.items() if "critical" in sev]
        chk.check(not crit, f"nothing is critical here, yet {crit}: {label.conclusion}")

    for rules, required in ((label.impact_pct, True), (label.impact_pct_if_reported, False)):
        for rule, rng in rules.items():
            found = _findings(result, rule)
            if not found:
                chk.check(not required, f"{rule} is absent; the expert expects impact_pct {rng} % "
                                        f"({label.conclusion})")
                continue
            pcts = [f.get("impact_pct") for f in found if f.get("impact_pct") is not None]
            if not chk.check(pcts, f"{rule} reported without an impact_pct; expert: {rng} %"):
                continue
            chk.check(max(pcts) in rng, f"{rule} impact_pct {max(pcts)}, expert {rng} % ({label.conclusion})")

    busy = result["summary"].get("gpu_busy_pct")
    if label.gpu_busy_pct is None:
        chk.check(busy is None, f"gpu_busy_pct {busy} on a capture that cannot be judged")
    elif isinstance(label.gpu_busy_pct, Around):
        if not (busy is None and label.busy_null_ok and v["status"] == "too-little-work"):
            chk.check(busy in label.gpu_busy_pct, f"gpu_busy_pct {busy}, expert {label.gpu_busy_pct} %")

    if label.extra is not None:
        label.extra(result, chk)


def label_path(stem: str) -> Path:
    return SHARED_TRACES / (LABELS[stem].file or f"{stem}.sqlite")


def label_failures(stem: str, result: dict | None = None) -> list[str]:
    """Every failing label check of one real capture (contract, label, numbers from the rows)."""
    path = label_path(stem)
    label = LABELS[stem]
    chk = Checks(stem)
    if result is None:
        result = diagnose_path(path)
    _check_contract_consistency(result, chk)
    _check_label(result, label, chk)
    check_device_numbers(result, path, chk)
    _check_profiler_missing(result, path, chk)
    return chk.failures


STEMS = sorted(LABELS)


@pytest.mark.parametrize("stem", STEMS, ids=STEMS)
def test_real_trace_matches_expert_label(stem):
    path = label_path(stem)
    if not path.exists():
        pytest.skip(_conftest.SHARED_SKIP)
    label = LABELS[stem]
    if label.raises:
        import nsysdoc.errors

        with pytest.raises(getattr(nsysdoc.errors, label.raises)) as err:
            diagnose_path(path)
        assert "\n" not in str(err.value.message if hasattr(err.value, "message") else err.value)
        return
    chk = Checks(stem)
    chk.failures = label_failures(stem)
    chk.done()


@pytest.mark.parametrize("stem", STEMS, ids=STEMS)
def test_real_trace_device_numbers_match_rows(stem):
    """busy %, communication and exposed communication per device, recomputed from the rows."""
    path = label_path(stem)
    if not path.exists():
        pytest.skip(_conftest.SHARED_SKIP)
    if LABELS[stem].raises:
        pytest.skip("not diagnosable")
    chk = Checks(stem)
    check_device_numbers(diagnose_path(path), path, chk)
    chk.done()


def test_every_shared_trace_has_a_label():
    """A capture added to ../shared/traces gets an expert label before it counts as covered."""
    files = sorted(str(p.relative_to(SHARED_TRACES)) for p in SHARED_TRACES.rglob("*")
                   if p.name.endswith((".sqlite", ".json.gz", ".json")) and p.is_file())
    labelled = {LABELS[s].file or f"{s}.sqlite" for s in LABELS}
    assert not [f for f in files if f not in labelled], f"unlabelled captures: {[f for f in files if f not in labelled]}"


# --------------------------------------------------------------------------------------------
# Mutation tests: a planted bug in the engine must make a real-trace check fail
# --------------------------------------------------------------------------------------------

def _ordered_pseudo_union(keys, starts, ends, lo, hi):
    """An ``intervals.Union`` holding the raw intervals, NOT merged: its ``covered()`` then sums
    durations (overlapping time counts once per interval), which is the planted bug."""
    import numpy as np
    from nsysdoc.metrics import intervals as iv

    keys = np.asarray(keys, dtype=np.int64)
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if lo is not None:
        s = np.maximum(s, lo)
    if hi is not None:
        e = np.minimum(e, hi)
    keep = e > s
    keys, s, e = keys[keep], s[keep], e[keep]
    if len(s) == 0:
        return iv.union([], [], [])
    order = np.lexsort((s, keys))
    keys, s, e = keys[order], s[order], e[order]
    tmin = int(s.min())
    return iv.Union(keys, s, e, tmin, int(e.max()) - tmin + 1)


def _patch_extend_activity(monkeypatch, mutate) -> list[int]:
    """Wrap the function the engine calls for every slice's device unions
    (``nsysdoc.metrics.gpu.extend_activity``, called from ``nsysdoc.engine.slices.phase_a`` as
    ``gpu_m.extend_activity``); fail loudly if that path is gone."""
    import inspect

    from nsysdoc.engine import slices
    from nsysdoc.metrics import gpu as gpu_m

    assert hasattr(gpu_m, "extend_activity"), "patch target nsysdoc.metrics.gpu.extend_activity is gone: " \
        "update the mutation tests to where the engine now builds the per-device unions"
    assert "gpu_m.extend_activity(" in inspect.getsource(slices.phase_a), \
        "nsysdoc.engine.slices.phase_a no longer calls gpu_m.extend_activity: update the mutation tests"
    for name in ("busy", "kernels", "compute", "comm"):
        assert name in gpu_m.Activity.__dataclass_fields__, f"gpu.Activity has no {name!r} union any more"
    orig = gpu_m.extend_activity
    calls = [0]

    def patched(own, own_ops, extra, w0, w1):
        calls[0] += 1
        return mutate(orig(own, own_ops, extra, w0, w1), own_ops, extra, w0, w1)

    monkeypatch.setattr(gpu_m, "extend_activity", patched)
    return calls


def _raw(own_ops, extra, mask_fn):
    import numpy as np

    parts = [p for p in (own_ops, extra) if p is not None and len(p)]
    keys = np.concatenate([p.device[mask_fn(p)] for p in parts]) if parts else np.zeros(0, np.int64)
    s = np.concatenate([p.start_ns[mask_fn(p)] for p in parts]) if parts else np.zeros(0, np.int64)
    e = np.concatenate([p.end_ns[mask_fn(p)] for p in parts]) if parts else np.zeros(0, np.int64)
    return keys, s, e


def _busy_as_sum(act, own_ops, extra, w0, w1):
    import dataclasses

    import numpy as np

    keys, s, e = _raw(own_ops, extra, lambda p: np.ones(len(p), dtype=bool))
    return dataclasses.replace(act, busy=_ordered_pseudo_union(keys, s, e, w0, w1))


def _overlapped_comm_as_exposed(act, own_ops, extra, w0, w1):
    """kernels := compute pieces + comm pieces without merging, so kernels - compute = all of comm:
    NCCL time under compute counts as exposed."""
    import dataclasses

    import numpy as np

    if len(act.comm) == 0:
        return act
    keys = np.concatenate([act.compute.keys, act.comm.keys])
    s = np.concatenate([act.compute.starts, act.comm.starts])
    e = np.concatenate([act.compute.ends, act.comm.ends])
    return dataclasses.replace(act, kernels=_ordered_pseudo_union(keys, s, e, None, None))


def _mutation_catches(monkeypatch, mutate, stems):
    present = [s for s in stems if label_path(s).exists()]
    if not present:
        pytest.skip(_conftest.SHARED_SKIP)
    baseline = {s: set(label_failures(s)) for s in present}
    calls = _patch_extend_activity(monkeypatch, mutate)
    caught = {}
    for s in present:
        new = [m for m in label_failures(s) if m not in baseline[s]]
        if new:
            caught[s] = new
    assert calls[0] > 0, "the patched nsysdoc.metrics.gpu.extend_activity was never called: the engine " \
                         "builds its unions elsewhere now; move the patch there"
    return caught


def test_mutation_busy_as_sum_of_durations_is_caught(monkeypatch):
    """Busy time computed as a sum of durations instead of a union must fail a real-trace check.
    The HTA trace (4 streams, kernels overlapping) is the one where it matters: 107.96 % vs 83.54 %."""
    caught = _mutation_catches(monkeypatch, _busy_as_sum,
                               ["kineto/hta_a100_rank3of8", "fastvideo_torchrun_h100x2_before",
                                "mmagic_vsr_a100_forward"])
    assert caught, "busy as a sum of durations went unnoticed by every real-trace label check"


def test_mutation_overlapped_nccl_counted_as_exposed_is_caught(monkeypatch):
    """Exposed communication that counts NCCL time overlapped by compute must fail a real-trace
    check (HTA: 163.5 ms of NCCL, 87.9 ms exposed)."""
    caught = _mutation_catches(monkeypatch, _overlapped_comm_as_exposed,
                               ["kineto/hta_a100_rank3of8", "fastvideo_torchrun_h100x2_before",
                                "fastvideo_torchrun_h100x2_after"])
    assert caught, "overlapped NCCL counted as exposed went unnoticed by every real-trace label check"
