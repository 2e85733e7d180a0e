"""Scenarios of issue 48 (critical path): one situation each whose critical path a test computes by
hand from the builder's timing model (``tests/test_critical_path.py``). Same conventions as
:mod:`nsysdoc.testing.scenarios`; ``CP_SCENARIOS`` maps names to functions. They are not in
``scenarios.SCENARIOS`` (no golden output of their own). Every step is the same, NVTX ``step i``,
and ends with a stream or device synchronize, so each step's work is its own."""
from __future__ import annotations

from typing import Callable

from .builder import Capture
from .scenarios import ADAM, ELEMENTWISE, GEMM

#: the side-stream kernel of :func:`long_kernel_off_path`
SIDE = "void side_stream_statistics_kernel<float>(float const*, float*, int)"


def copy_stream_feeds_compute(steps: int = 3, nbytes: int = 12_000_000, gemm_us: float = 300.0) -> Capture:
    """An input copy on its own stream (9) feeds the compute stream (7): ``cudaMemcpyAsync`` of
    ``nbytes`` (pinned, 12 GB/s: 1 ms), ``cudaEventRecord`` + ``cudaStreamWaitEvent`` (stream 7 waits
    on the copy), one GEMM, ``cudaStreamSynchronize``. The GEMM waits on the copy: the path runs
    through the copy, then the GEMM."""
    cap = Capture()
    t = cap.process(pid=6100, name="copy_stream").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            t.memcpy("HtoD", nbytes, asynchronous=True, stream=9)
            t.wait_event(waiting_stream=7, on_stream=9)
            t.launch(GEMM, gemm_us, stream=7)
            t.sync_stream(7)
    return cap


def launch_bound_loop(steps: int = 3, kernels: int = 50, kernel_us: float = 4.0, python_us: float = 40.0) -> Capture:
    """Each step: ``kernels`` times ``python_us`` of Python then a ``kernel_us`` kernel, then a
    stream synchronize. The GPU waits on every launch: the path is host time and launch calls."""
    cap = Capture()
    t = cap.process(pid=6200, name="launch_loop").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            for _ in range(kernels):
                t.cpu(us=python_us)
                t.launch(ELEMENTWISE, kernel_us)
            t.sync_stream(7)
    return cap


def input_wait_at_step_start(steps: int = 3, input_ms: float = 5.0, gemms: int = 3, gemm_us: float = 500.0) -> Capture:
    """Each step starts with ``input_ms`` of host time with no CUDA call (waiting for the next batch),
    then ``gemms`` GEMMs launched back to back and a stream synchronize: the path starts with
    ``cpu``, then the GEMMs."""
    cap = Capture()
    t = cap.process(pid=6300, name="input_wait").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            t.cpu(us=input_ms * 1000)
            for _ in range(gemms):
                t.launch(GEMM, gemm_us)
            t.sync_stream(7)
    return cap


def nccl_exposed(steps: int = 3, gemm_us: float = 500.0, nccl_us: float = 800.0, adam_us: float = 200.0) -> Capture:
    """The gradients' all-reduce waits on the backward GEMM and the optimizer waits on the
    all-reduce (events both ways), with no compute to hide it: the all-reduce is on the path."""
    cap = Capture()
    t = cap.process(pid=6400, name="nccl_exposed").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            t.launch(GEMM, gemm_us, stream=7)
            t.wait_event(waiting_stream=13, on_stream=7)
            t.nccl("AllReduce", nccl_us, stream=13)
            t.wait_event(waiting_stream=7, on_stream=13)
            t.launch(ADAM, adam_us, stream=7)
            t.sync_stream(7)
    return cap


def nccl_overlapped(steps: int = 3, gemm_us: float = 500.0, nccl_us: float = 400.0, more_backward_us: float = 1000.0,
                    adam_us: float = 200.0) -> Capture:
    """As :func:`nccl_exposed`, but more backward compute (``more_backward_us``, independent of the
    all-reduce) runs on stream 7 while the all-reduce runs: the all-reduce ends first and is off
    the path."""
    cap = Capture()
    t = cap.process(pid=6500, name="nccl_overlapped").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            t.launch(GEMM, gemm_us, stream=7)
            t.wait_event(waiting_stream=13, on_stream=7)
            t.nccl("AllReduce", nccl_us, stream=13)
            t.launch(GEMM, more_backward_us, stream=7)
            t.wait_event(waiting_stream=7, on_stream=13)
            t.launch(ADAM, adam_us, stream=7)
            t.sync_stream(7)
    return cap


def long_kernel_off_path(steps: int = 3, side_us: float = 2000.0, gemms: int = 4, gemm_us: float = 1000.0) -> Capture:
    """A long kernel (``side_us``) on a side stream (9) next to ``gemms`` GEMMs on the main stream
    (7) that take longer in all, then ``cudaDeviceSynchronize``: the longest kernel is not on the
    path."""
    cap = Capture()
    t = cap.process(pid=6600, name="side_stream").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            t.launch(SIDE, side_us, stream=9)
            for _ in range(gemms):
                t.launch(GEMM, gemm_us, stream=7)
            t.sync_device()
    return cap


CP_SCENARIOS: dict[str, Callable[..., Capture]] = {
    f.__name__: f for f in (copy_stream_feeds_compute, launch_bound_loop, input_wait_at_step_start, nccl_exposed,
                            nccl_overlapped, long_kernel_off_path)
}

__all__ = ["CP_SCENARIOS", *CP_SCENARIOS]
