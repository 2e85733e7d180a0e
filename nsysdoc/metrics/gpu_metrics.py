"""Hardware counters sampled by nsys (``--gpu-metrics-devices``) next to time-busy.

Definitions (``docs/glossary.md``): **time-busy %** of a step = union of kernel intervals on the
step's device inside the step, over the step length — what nvidia-smi's "utilisation" approximates
(a kernel was running). **SM Active / SM Issue / Tensor Active / DRAM read %** of a step = mean of
the device's samples whose timestamp falls inside the step (nsys reports each as a percentage of
peak over the sample period). Absent (null) when the capture has no GPU metrics.
"""
from __future__ import annotations

import numpy as np

METRICS = ("sm_active_pct", "sm_issue_pct", "tensor_active_pct", "dram_read_pct")


def window_means(gpu_metrics, device_id: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> dict[str, np.ndarray]:
    """Mean of each metric over samples in ``[lo, hi)`` of ``device_id`` (NaN when none)."""
    n = len(lo)
    out = {m: np.full(n, np.nan) for m in METRICS}
    if len(gpu_metrics) == 0 or n == 0:
        return out
    metric = np.asarray(gpu_metrics["metric"])
    g_dev = np.asarray(gpu_metrics["device_id"], dtype=np.int64)
    g_ts = np.asarray(gpu_metrics["timestamp_ns"], dtype=np.int64)
    g_val = np.asarray(gpu_metrics["value"], dtype=np.float64)
    finite = np.isfinite(g_val)  # an Inf or NaN sample would poison every window its sum spans
    for m in METRICS:
        is_m = (metric == m) & finite
        if not is_m.any():
            continue
        for dev in np.unique(device_id):
            rows = np.flatnonzero(is_m & (g_dev == dev))
            if len(rows) == 0:
                continue
            rows = rows[np.argsort(g_ts[rows], kind="stable")]
            ts = g_ts[rows]
            cum = np.concatenate(([0.0], np.cumsum(g_val[rows])))
            sel = np.flatnonzero(device_id == dev)
            a = np.searchsorted(ts, lo[sel], side="left")
            b = np.searchsorted(ts, hi[sel], side="left")
            cnt = b - a
            with np.errstate(invalid="ignore", divide="ignore"):
                out[m][sel] = np.where(cnt > 0, (cum[b] - cum[a]) / np.maximum(cnt, 1), np.nan)
    return out


# --- counters per kernel (issue 47) ---------------------------------------------------------------
# Definitions (``docs/glossary.md``, "Hardware counters per kernel"):
#
# * A sample at timestamp ``t`` covers ``(t - P, t]``, ``P`` the device's sampling period (the median
#   step between its samples of that metric). It is **inside** a kernel execution ``[s, e]`` when the
#   whole period it covers lies in the execution: ``s <= t - P`` and ``t <= e``. A kernel shorter than
#   one period therefore holds no sample (a sample straddling it also counts idle time or other
#   kernels, which would make every short kernel look latency-bound).
# * Concurrent kernels (other streams): a sample inside several executions counts for each of them;
#   its value is then the device's combined activity, not that kernel's alone.
# * The counters of a kernel name are the means over every sample inside any of its executions
#   (``counter_samples`` samples); with fewer than :data:`MIN_KERNEL_SAMPLES` they are null and the
#   class is "unknown".

#: metrics averaged per kernel (DRAM Write is added to DRAM Read when the capture has it)
KERNEL_METRICS = ("sm_active_pct", "sm_issue_pct", "tensor_active_pct", "dram_read_pct", "dram_write_pct")
#: fewer samples than this inside a kernel name's executions: its counters are null, class "unknown"
MIN_KERNEL_SAMPLES = 5
#: Nsight Compute's Speed Of Light rule: compute (here SM Issue or Tensor Active) or memory (DRAM
#: bandwidth) throughput at 60% of peak or more is bound by that unit; both below 60% of peak is
#: read as latency-bound (the work cannot keep either unit busy)
BOUND_PCT = 60.0
#: a GEMM/convolution kernel whose Tensor Active stays below this runs its math on the CUDA cores
TENSOR_IDLE_PCT = 10.0
#: the classes, in the order the glossary lists them
CLASSES = ("memory-bound", "compute-bound", "latency-bound", "tensor cores idle", "unknown")


def sample_period_ns(ts: np.ndarray) -> int:
    """Sampling period of sorted sample timestamps: the median positive step (0 with fewer than two)."""
    d = np.diff(np.asarray(ts, dtype=np.int64))
    d = d[d > 0]
    return int(np.median(d)) if len(d) else 0


class DeviceCounters:
    """One device's samples per metric: sorted timestamps, cumulative sums of the values (one more
    than the samples, from 0) and the period; :meth:`sums` gives, per kernel execution, the sum and
    count of the samples inside it (two binary searches per execution and metric, no loop)."""

    def __init__(self) -> None:
        self.metrics: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}

    def add(self, metric: str, ts: np.ndarray, val: np.ndarray) -> None:
        ts = np.asarray(ts, dtype=np.int64)
        val = np.asarray(val, dtype=np.float64)
        finite = np.isfinite(val)  # (the reader drops them; one here would poison every later sum)
        if not finite.all():
            ts, val = ts[finite], val[finite]
        if len(ts) > 1 and (np.diff(ts) < 0).any():  # nsys writes them in time order: no sort then
            order = np.argsort(ts, kind="stable")
            ts, val = ts[order], val[order]
        # metrics sampled at the same moments (nsys samples every metric together) share one
        # timestamp array, so that :func:`kernel_counter_sums` searches it once for all of them
        for other, _, _ in self.metrics.values():
            if len(other) == len(ts) and np.array_equal(other, ts):
                ts = other
                break
        cum = np.concatenate(([0.0], np.cumsum(val)))
        self.metrics[metric] = (ts, cum, sample_period_ns(ts))

    def bounds(self, metric: str, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Index range ``[a, b)`` of the samples of ``metric`` inside each execution (None when
        the metric was not sampled or its period is unknown)."""
        got = self.metrics.get(metric)
        if got is None or got[2] <= 0:
            return None
        ts, _, period = got
        a = np.searchsorted(ts, np.asarray(start, dtype=np.int64) + period, side="left")
        b = np.searchsorted(ts, np.asarray(end, dtype=np.int64), side="right")
        return a, np.maximum(a, b)

    def sums(self, metric: str, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(sum of values, number of samples) inside each execution ``[start, end]``."""
        ab = self.bounds(metric, start, end)
        if ab is None:
            return np.zeros(len(start)), np.zeros(len(start), dtype=np.int64)
        a, b = ab
        cum = self.metrics[metric][1]
        return cum[b] - cum[a], (b - a).astype(np.int64)


def device_counters(gpu_metrics, raw_ids) -> dict[int, DeviceCounters]:
    """Per device index (position in ``raw_ids``, the devices' raw ids as GPU metrics name them):
    its samples of :data:`KERNEL_METRICS`. A raw id held by several devices (several hosts) is
    ambiguous and left out, as the under-filled reading does."""
    out: dict[int, DeviceCounters] = {}
    if gpu_metrics is None or len(gpu_metrics) == 0:
        return out
    raw = np.asarray(raw_ids, dtype=np.int64)
    metric = np.asarray(gpu_metrics["metric"])
    g_dev = np.asarray(gpu_metrics["device_id"], dtype=np.int64)
    g_ts = np.asarray(gpu_metrics["timestamp_ns"], dtype=np.int64)
    g_val = np.asarray(gpu_metrics["value"], dtype=np.float64)
    # one comparison of the (shared-string) metric column per metric, then integer masks
    code = np.full(len(metric), -1, dtype=np.int8)
    for j, m in enumerate(KERNEL_METRICS):
        code[metric == m] = j
    for d in range(len(raw)):
        if int((raw == raw[d]).sum()) != 1:
            continue
        on = np.flatnonzero(g_dev == raw[d])
        if not len(on):
            continue
        dc = DeviceCounters()
        c_on = code[on]
        for j, m in enumerate(KERNEL_METRICS):
            rows = on[c_on == j]
            if len(rows):
                dc.add(m, g_ts[rows], g_val[rows])
        if dc.metrics:
            out[d] = dc
    return out


def execution_bounds(counters: dict[int, DeviceCounters], device: np.ndarray, start: np.ndarray,
                     end: np.ndarray) -> dict:
    """Per device index: (the executions on it, sorted indices; per timestamp array, usually one
    shared by every metric: the index range ``[a, b)`` of the samples inside each of them). One
    pair of binary searches per execution and timestamp array, shared by every metric and by every
    grouping of the executions (:func:`group_sums`). ``device`` < 0: left out."""
    out: dict = {}
    if not counters or not len(start):
        return out
    device = np.asarray(device, dtype=np.int64)
    for d, dc in counters.items():
        sel = np.flatnonzero(device == d)
        if not len(sel):
            continue
        groups: dict[int, tuple | None] = {}
        for m in KERNEL_METRICS:
            if m in dc.metrics and id(dc.metrics[m][0]) not in groups:
                groups[id(dc.metrics[m][0])] = dc.bounds(m, start[sel], end[sel])
        out[d] = (sel, groups)
    return out


def group_sums(counters: dict[int, DeviceCounters], bounds: dict, device: np.ndarray, rows: np.ndarray,
               code: np.ndarray, ncodes: int) -> np.ndarray | None:
    """The samples inside the executions ``rows`` (indices into those given to
    :func:`execution_bounds`, of devices ``device``) added per ``code``: an ``(ncodes, 2 *
    len(KERNEL_METRICS))`` array, for each metric the sum of the samples, then their numbers (None
    without counters)."""
    if not bounds or not len(rows):
        return None
    nm = len(KERNEL_METRICS)
    out = np.zeros((ncodes, 2 * nm))
    rows = np.asarray(rows, dtype=np.int64)
    code = np.asarray(code, dtype=np.int64)
    dev = np.asarray(device, dtype=np.int64)[rows]
    for d, (sel, groups) in bounds.items():
        on = np.flatnonzero(dev == d)
        if not len(on):
            continue
        idx = np.searchsorted(sel, rows[on])
        c_on = code[on]
        dc = counters[d]
        done: dict[int, tuple] = {}
        for j, m in enumerate(KERNEL_METRICS):
            if m not in dc.metrics:
                continue
            ts, cum, _ = dc.metrics[m]
            ab = groups.get(id(ts))
            if ab is None:
                continue
            if id(ts) not in done:
                a, b = ab[0][idx], ab[1][idx]
                inside = np.flatnonzero(b > a)
                a, b, c = a[inside], b[inside], c_on[inside]
                done[id(ts)] = (a, b, c, np.bincount(c, weights=b - a, minlength=ncodes)[:ncodes])
            a, b, c, n = done[id(ts)]
            if not len(a):
                continue
            out[:, j] += np.bincount(c, weights=cum[b] - cum[a], minlength=ncodes)[:ncodes]
            out[:, nm + j] += n
    return out


def kernel_counter_sums(counters: dict[int, DeviceCounters], device: np.ndarray, start: np.ndarray,
                        end: np.ndarray, code: np.ndarray, ncodes: int) -> np.ndarray | None:
    """Per name code: for each of :data:`KERNEL_METRICS` the sum of the samples inside its
    executions, then the number of those samples: an ``(ncodes, 2 * len(KERNEL_METRICS))`` array
    (None without counters). ``device`` are device indexes, ``code`` dense name codes."""
    bounds = execution_bounds(counters, device, start, end)
    return group_sums(counters, bounds, device, np.arange(len(start)), code, ncodes)


def kernel_counter_means(sums: np.ndarray | None, codes: np.ndarray) -> dict[str, np.ndarray]:
    """For the name codes ``codes``: ``sm_active_pct``, ``sm_issue_pct``, ``tensor_active_pct``,
    ``dram_bandwidth_pct`` (DRAM Read + DRAM Write where written, at most 100) and
    ``counter_samples`` (the SM Active samples inside, else the most samples of any metric); the
    means are NaN below :data:`MIN_KERNEL_SAMPLES` samples or when the metric was not sampled."""
    codes = np.asarray(codes, dtype=np.int64)
    n = len(codes)
    nm = len(KERNEL_METRICS)
    nan = lambda: np.full(n, np.nan)  # noqa: E731
    out = {"sm_active_pct": nan(), "sm_issue_pct": nan(), "tensor_active_pct": nan(), "dram_bandwidth_pct": nan(),
           "counter_samples": np.zeros(n, dtype=np.int64)}
    if sums is None or not n:
        return out
    ok = (codes >= 0) & (codes < len(sums))
    rows = np.zeros((n, 2 * nm))
    rows[ok] = sums[codes[ok]]
    cnt = rows[:, nm:]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(cnt >= MIN_KERNEL_SAMPLES, rows[:, :nm] / np.maximum(cnt, 1), np.nan)
    idx = {m: j for j, m in enumerate(KERNEL_METRICS)}
    for m in ("sm_active_pct", "sm_issue_pct", "tensor_active_pct"):
        out[m] = mean[:, idx[m]]
    rd, wr = mean[:, idx["dram_read_pct"]], mean[:, idx["dram_write_pct"]]
    out["dram_bandwidth_pct"] = np.minimum(100.0, np.where(np.isnan(wr), rd, rd + wr))
    sm_n = cnt[:, idx["sm_active_pct"]]
    out["counter_samples"] = np.where(sm_n > 0, sm_n, cnt.max(axis=1)).astype(np.int64)
    # the gate is the name's, not each metric's: below MIN_KERNEL_SAMPLES samples every counter is
    # null (a metric with more samples than SM Active must not alone decide the class)
    few = out["counter_samples"] < MIN_KERNEL_SAMPLES
    for m in ("sm_active_pct", "sm_issue_pct", "tensor_active_pct", "dram_bandwidth_pct"):
        out[m] = np.where(few, np.nan, out[m])
    return out


def kernel_class(sm_issue_pct, tensor_active_pct, dram_bandwidth_pct, gemm: bool) -> str:
    """The class of one kernel name from its counter means (glossary, "Hardware counters per
    kernel"), in this order:

    1. "unknown": SM Issue and DRAM bandwidth both unmeasured (too few samples);
    2. "tensor cores idle": a GEMM/convolution (``gemm``) whose Tensor Active is below
       :data:`TENSOR_IDLE_PCT`: its math runs on the CUDA cores;
    3. "memory-bound": DRAM bandwidth at least :data:`BOUND_PCT` and at least the compute
       throughput (the larger of SM Issue and Tensor Active);
    4. "compute-bound": compute throughput at least :data:`BOUND_PCT`;
    5. "latency-bound": both below :data:`BOUND_PCT`.

    A metric the capture lacks (NaN) counts as 0 when the other is measured."""
    def val(x) -> float | None:
        return None if x is None or x != x else float(x)

    issue, tensor, dram = val(sm_issue_pct), val(tensor_active_pct), val(dram_bandwidth_pct)
    if issue is None and dram is None:
        return "unknown"
    if gemm and tensor is not None and tensor < TENSOR_IDLE_PCT:
        return "tensor cores idle"
    compute = max(issue or 0.0, tensor or 0.0)
    mem = dram or 0.0
    if mem >= BOUND_PCT and mem >= compute:
        return "memory-bound"
    if compute >= BOUND_PCT:
        return "compute-bound"
    return "latency-bound"


#: what each class means for the fix (the dominant-kernel finding and the kernels table's readers)
CLASS_MEANING = {
    "memory-bound": "it moves data at 60% or more of the DRAM bandwidth: read and write less (fuse it with its "
                    "neighbours, lower precision, better layouts); faster math will not help",
    "compute-bound": "its SMs issue instructions, or its tensor cores run, at 60% or more of their peak: it is "
                     "near what the hardware does; only less work (a better algorithm) or faster math (tensor "
                     "cores, lower precision) helps",
    "latency-bound": "neither its SMs nor its memory reach 60% of peak: it waits (too few blocks or warps, "
                     "dependent instructions, synchronisation); more parallel work per launch is the fix",
    "tensor cores idle": "a matrix multiply or convolution whose tensor cores are idle: its math runs on the "
                         "CUDA cores; TF32, bf16 or fp16 (autocast) and tensor-core friendly shapes would move it "
                         "onto them",
}
