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


def conv_kernel_share_pct_of(names, total_ms, is_nccl=None) -> float | None:
    """:func:`conv_kernel_share_pct` over every kernel name (columns of the whole per-name table, not
    its top 50): convolution kernels' summed time ÷ the compute kernels' (communication left out) ×
    100; None without compute kernel time. Each name is classified once."""
    conv = total = 0.0
    nccl = [False] * len(names) if is_nccl is None else list(is_nccl)
    for nm, ms, nc in zip(list(names), list(total_ms), nccl):
        if nc:
            continue
        ms = float(ms or 0.0)
        total += ms
        if is_conv_kernel(str(nm or "")):
            conv += ms
    return conv / total * 100 if total > 0 else None


def conv_kernel_share_pct(by_name: list[dict] | None) -> float | None:
    """Summed time of the convolution kernels ÷ summed time of the compute kernels (NCCL and other
    communication kernels left out) × 100, over the rows of a per-name kernel table given (the
    fallback when the whole table is not at hand: over ``metrics.kernels.by_name``'s top 50 names
    both sums miss the other names, so the share may be too high or too low; the assembly uses
    :func:`conv_kernel_share_pct_of` over every name); None without kernels."""
    rows = [r for r in by_name or [] if not r.get("is_nccl")]
    total = sum(float(r.get("total_ms") or 0.0) for r in rows)
    if total <= 0:
        return None
    conv = sum(float(r.get("total_ms") or 0.0) for r in rows if is_conv_kernel(str(r.get("name") or "")))
    return conv / total * 100
