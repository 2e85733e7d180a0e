"""Convolution kernels by name (issue 47, rule ``cudnn-benchmark``; glossary "Convolution kernel
share").

A name heuristic, as ``fp32_gemm`` is: a convolution kernel's name says ``conv``, its algorithm
(``implicit_convolve_sgemm``, ``implicit_gemm``, ``winograd``, cuDNN's FFT ``fft2d_r2c``/``c2r``),
that it is Volta's or Turing's ``scudnn`` kernel, its forward pass (``fprop``), or a gradient pass
(``dgrad``, ``wgrad``) of cuDNN (``cudnn`` in the name); cuBLAS's kernels (``cublas`` in the name:
a linear layer's ``..._dgrad_kernel__5x_cublas`` GEMMs) and cuDNN's batch-norm kernels
(``cudnn::bn_...``) are not convolutions.
"""
from __future__ import annotations

import re

_CONV = re.compile(r"conv|fprop|winograd|scudnn|implicit_?gemm|fft2d_[cr]2[cr]|cudnn.*[dw]grad|[dw]grad.*cudnn",
                   re.IGNORECASE)
_NOT_CONV = re.compile(r"cublas|cudnn::bn_|batch_?norm", re.IGNORECASE)


def is_conv_kernel(name: str) -> bool:
    """Whether a kernel name reads as a convolution (module docstring)."""
    return bool(_CONV.search(name)) and not _NOT_CONV.search(name)


def conv_kernel_share_pct(by_name: list[dict] | None) -> float | None:
    """Summed time of the convolution kernels ÷ summed time of the compute kernels (NCCL and other
    communication kernels left out) × 100, over the per-name kernel table (``metrics.kernels.by_name``:
    the 50 names with the most time, so a lower bound when more names exist); None without kernels."""
    rows = [r for r in by_name or [] if not r.get("is_nccl")]
    total = sum(float(r.get("total_ms") or 0.0) for r in rows)
    if total <= 0:
        return None
    conv = sum(float(r.get("total_ms") or 0.0) for r in rows if is_conv_kernel(str(r.get("name") or "")))
    return conv / total * 100
