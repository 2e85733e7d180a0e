"""Scenarios of issue 47 about hardware counters per kernel (GPU metrics samples inside kernel
executions). Same conventions as :mod:`nsysdoc.testing.scenarios` (defaults chosen so that tests
compute every number by hand); ``COUNTER_SCENARIOS`` maps names to functions. They are not in
``scenarios.SCENARIOS`` (no golden output of their own)."""
from __future__ import annotations

from typing import Callable

from .builder import Capture
from .scenarios import ELEMENTWISE, GEMM

SHORT = "short_reduce_kernel"


def gemm_and_elementwise_counters(steps: int = 3, gemm_us: float = 1000.0, elementwise_us: float = 500.0,
                                  short_us: float = 150.0, hz: int = 10_000) -> Capture:
    """Per step (``ProfilerStep#i``): a bf16 tensor-core GEMM of ``gemm_us`` (SM Active 90%, SM Issue
    70%, Tensor Active 80%, DRAM read 20% + write 5%), an elementwise kernel of ``elementwise_us``
    (SM Active 95%, SM Issue 20%, DRAM read 60% + write 25%) and a ``short_reduce_kernel`` of
    ``short_us`` (shorter than two sample periods), back to back on one stream, then
    ``loss.item()``; GPU metrics sampled at ``hz`` (one sample every 100 us by default)."""
    cap = Capture(gpu_metrics_hz=hz)
    t = cap.process(pid=4700).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            g = t.launch(GEMM, gemm_us, sm_active=0.9, tensor_active=0.8)
            g.sm_issue, g.dram_read, g.dram_write = 0.7, 0.2, 0.05
            e = t.launch(ELEMENTWISE, elementwise_us, sm_active=0.95)
            e.sm_issue, e.dram_read, e.dram_write = 0.2, 0.6, 0.25
            s = t.launch(SHORT, short_us, sm_active=0.5)
            s.sm_issue, s.dram_read, s.dram_write = 0.1, 0.1, 0.0
            t.item()
    return cap


def concurrent_kernels_counters(us: float = 1000.0, hz: int = 10_000) -> Capture:
    """``kernel_a`` on stream 7 and ``kernel_b`` on stream 8, each ``us`` long and launched 5 us
    apart, so that they run side by side: each alone would issue at 30% of peak (DRAM read 20% and
    10%); the samples, taken of the whole GPU, read their sum (SM Issue 60%, DRAM read 30%)."""
    cap = Capture(gpu_metrics_hz=hz)
    t = cap.process(pid=4710).thread()
    a = t.launch("kernel_a", us, stream=7)
    a.sm_issue, a.dram_read = 0.3, 0.2
    b = t.launch("kernel_b", us, stream=8)
    b.sm_issue, b.dram_read = 0.3, 0.1
    t.sync_device()
    return cap


def operator_counters(steps: int = 3, hz: int = 10_000) -> Capture:
    """Per step an ``aten::mm`` operator launching the GEMM of
    :func:`gemm_and_elementwise_counters` (1000 us) and an ``aten::add`` launching its elementwise
    kernel (500 us), as ``nsys --pytorch=autograd-nvtx`` records them, then ``loss.item()``."""
    cap = Capture(gpu_metrics_hz=hz)
    t = cap.process(pid=4720).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            with t.op("aten::mm", seq=2 * i):
                g = t.launch(GEMM, 1000.0, sm_active=0.9, tensor_active=0.8)
                g.sm_issue, g.dram_read, g.dram_write = 0.7, 0.2, 0.05
            with t.op("aten::add", seq=2 * i + 1):
                e = t.launch(ELEMENTWISE, 500.0, sm_active=0.95)
                e.sm_issue, e.dram_read, e.dram_write = 0.2, 0.6, 0.25
            t.item()
    return cap


COUNTER_SCENARIOS: dict[str, Callable[..., Capture]] = {
    f.__name__: f for f in (gemm_and_elementwise_counters, concurrent_kernels_counters, operator_counters)
}

__all__ = ["COUNTER_SCENARIOS", "gemm_and_elementwise_counters", "concurrent_kernels_counters", "operator_counters",
           "SHORT"]
