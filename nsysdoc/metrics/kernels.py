"""Kernel statistics, overall and per name.

Definitions (``docs/glossary.md``): a kernel's **duration** is end − start on the GPU. Statistics
cover kernels that start inside the analysis window. **Share of kernel time** of a name = its
summed duration over the summed duration of all kernels (a share of kernel time, not of wall
time — concurrent kernels are both counted). Median and p95 are exact, linear interpolation.
**Share under 10 µs** = fraction of kernels (by count) shorter than 10 µs.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

TINY_KERNEL_NS = 10_000

#: GEMM / convolution kernels (cuBLAS, cuDNN, CUTLASS, PyTorch, Triton matmuls).
GEMM_LIKE = re.compile(r"gemm|conv|matmul|dgrad|wgrad|fprop|cutlass|cublas|xmma", re.IGNORECASE)
#: Reduced-precision or tensor-core instruction markers (bf16/fp16/tf32/int8/fp8 types, HMMA/IMMA/WGMMA
#: instructions, CUTLASS "tensorop", tensor-core tile shapes, flash attention).
REDUCED_OR_TC = re.compile(r"tensorop|hmma|imma|wgmma|(?<![a-z])mma|bf16|bfloat16|fp16|f16|float16|h16|half|tf32|"
                           r"i8|s8|int8|fp8|e4m3|e5m2|16816|1688|884|flash", re.IGNORECASE)
#: Architecture-tuned cuBLAS/cuDNN kernel families that are tensor-core kernels unless marked FFMA.
TC_FAMILY = re.compile(r"xmma|sm80_|sm86_|sm89_|sm90_|sm100_", re.IGNORECASE)
#: FP32 SIMT math, definite: FFMA instructions, SGEMM, SIMT CUTLASS kernels, FP32 cuDNN kernels.
FP32_STRONG = re.compile(r"ffma|sgemm|simt|scudnn", re.IGNORECASE)
#: FP32 hints that only count when no tensor-core family marker is present.
FP32_WEAK = re.compile(r"f32|fp32|float", re.IGNORECASE)


def is_fp32_gemm(name: str) -> bool:
    """GEMM/conv kernel running FP32 math without tensor cores (name heuristic, see glossary).

    ``sm80_xmma_gemm_f32f32_..._ffma_...`` is FP32 (FFMA) although it is an "xmma" kernel;
    ``sm80_xmma_gemm_tf32f32_...`` and ``..._bf16...`` are not.
    """
    if not GEMM_LIKE.search(name) or REDUCED_OR_TC.search(name):
        return False
    return bool(FP32_STRONG.search(name) or (FP32_WEAK.search(name) and not TC_FAMILY.search(name)))


def uses_tensor_cores(name: str) -> bool:
    if FP32_STRONG.search(name) and not REDUCED_OR_TC.search(name):
        return False
    return bool(REDUCED_OR_TC.search(name) or TC_FAMILY.search(name))


def _group_stats(group: np.ndarray, dur: np.ndarray) -> pd.DataFrame:
    """Exact per-group count/sum/mean/median/p95 with one sort of (group, duration)."""
    if len(dur) == 0:
        return pd.DataFrame({"group": [], "count": [], "total_ns": [], "mean_ns": [], "median_ns": [], "p95_ns": [],
                             "tiny": []})
    dur = np.clip(dur, 0, (1 << 40) - 1)
    if len(group) and group.min() >= 0 and group.max() < (1 << 23):
        packed = group.astype(np.int64)
        packed <<= 40
        packed |= dur
        packed.sort()  # one in-place int64 sort orders by (group, duration)
        g = packed >> 40
        packed &= (1 << 40) - 1
        d = packed
    else:
        order = np.lexsort((dur, group))
        g, d = group[order], dur[order]
    bounds = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
    counts = np.diff(np.append(bounds, len(g)))
    totals = np.add.reduceat(d, bounds)

    def q(p):
        pos = (counts - 1) * p
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, counts - 1)
        frac = pos - lo
        return d[bounds + lo] * (1 - frac) + d[bounds + hi] * frac

    tiny = np.add.reduceat((d < TINY_KERNEL_NS).astype(np.int64), bounds)
    return pd.DataFrame({"group": g[bounds], "count": counts, "total_ns": totals,
                         "mean_ns": totals / counts, "median_ns": q(0.5), "p95_ns": q(0.95), "tiny": tiny})


def kernel_summary(dur_ns: np.ndarray) -> dict:
    n = len(dur_ns)
    if n == 0:
        return {"count": 0, "total_ms": 0.0, "mean_us": None, "median_us": None, "p95_us": None,
                "under_10us_pct": None}
    med, p95 = np.quantile(dur_ns, [0.5, 0.95])
    return {
        "count": int(n),
        "total_ms": float(dur_ns.sum() / 1e6),
        "mean_us": float(dur_ns.mean() / 1e3),
        "median_us": float(med / 1e3),
        "p95_us": float(p95 / 1e3),
        "under_10us_pct": float((dur_ns < TINY_KERNEL_NS).mean() * 100),
    }


def kernels_by_name(name_id: np.ndarray, dur_ns: np.ndarray, names, is_nccl: np.ndarray | None = None,
                    limit: int | None = None) -> pd.DataFrame:
    """Per-name table sorted by total time: name, count, total_ms, mean_us, median_us, p95_us,
    share_of_kernel_time_pct, under_10us_pct, is_nccl."""
    st = _group_stats(np.asarray(name_id, dtype=np.int64), np.asarray(dur_ns, dtype=np.int64))
    if len(st) == 0:
        return pd.DataFrame({c: [] for c in ("name", "count", "total_ms", "mean_us", "median_us", "p95_us",
                                             "share_of_kernel_time_pct", "under_10us_pct", "is_nccl")})
    total = float(st["total_ns"].sum())
    df = pd.DataFrame({
        "name": names.lookup(st["group"].to_numpy()),
        "count": st["count"].astype(np.int64),
        "total_ms": st["total_ns"] / 1e6,
        "mean_us": st["mean_ns"] / 1e3,
        "median_us": st["median_ns"] / 1e3,
        "p95_us": st["p95_ns"] / 1e3,
        "share_of_kernel_time_pct": st["total_ns"] / total * 100 if total else 0.0,
        "under_10us_pct": st["tiny"].to_numpy() / st["count"].to_numpy() * 100,
    })
    if is_nccl is not None:
        nccl_ids = set(np.unique(np.asarray(name_id)[np.asarray(is_nccl)]).tolist())
        df["is_nccl"] = [g in nccl_ids for g in st["group"]]
    df = df.sort_values(["total_ms", "count"], ascending=[False, False], kind="stable").reset_index(drop=True)
    return df.head(limit) if limit else df
