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
    for m in METRICS:
        is_m = metric == m
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
