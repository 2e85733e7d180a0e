"""Hardware counters sampled by nsys (``--gpu-metrics-devices``) next to time-busy.

Definitions (``docs/glossary.md``): **time-busy %** of a step = union of kernel intervals on the
step's device inside the step, over the step length — what nvidia-smi's "utilisation" approximates
(a kernel was running). **SM Active / SM Issue / Tensor Active / DRAM read %** of a step = mean of
the device's samples whose timestamp falls inside the step (nsys reports each as a percentage of
peak over the sample period). Absent (null) when the capture has no GPU metrics.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

METRICS = ("sm_active_pct", "sm_issue_pct", "tensor_active_pct", "dram_read_pct")


def window_means(gpu_metrics: pd.DataFrame, device_id: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> dict[str, np.ndarray]:
    """Mean of each metric over samples in ``[lo, hi)`` of ``device_id`` (NaN when none)."""
    n = len(lo)
    out = {m: np.full(n, np.nan) for m in METRICS}
    if len(gpu_metrics) == 0 or n == 0:
        return out
    for m in METRICS:
        sub = gpu_metrics[gpu_metrics["metric"] == m]
        if len(sub) == 0:
            continue
        for dev in np.unique(device_id):
            s = sub[sub["device_id"] == dev].sort_values("timestamp_ns")
            if len(s) == 0:
                continue
            ts = s["timestamp_ns"].to_numpy(np.int64)
            cum = np.concatenate(([0.0], np.cumsum(s["value"].to_numpy(np.float64))))
            sel = np.flatnonzero(device_id == dev)
            a = np.searchsorted(ts, lo[sel], side="left")
            b = np.searchsorted(ts, hi[sel], side="left")
            cnt = b - a
            with np.errstate(invalid="ignore", divide="ignore"):
                out[m][sel] = np.where(cnt > 0, (cum[b] - cum[a]) / np.maximum(cnt, 1), np.nan)
    return out
