"""Scenario pairs of issue 48, milestone 2 (what-if per finding): each function builds the capture
with a cause (``fixed=False``) or the same capture, same parameters, with the cause removed
(``fixed=True``), so a test can check that the what-if computed on the first predicts the second's
median step (``tests/test_what_if.py``). Same conventions as :mod:`nsysdoc.testing.scenarios`;
``WHAT_IF_PAIRS`` maps each name to ``(function, rule id whose what-if it checks)``. They are not in
``scenarios.SCENARIOS`` (no golden output of their own). Every step is NVTX ``step i`` and ends with a
synchronize, so each step's work is its own."""
from __future__ import annotations

from typing import Callable

from .builder import Capture
from .scenarios import ADAM, ELEMENTWISE, GEMM, SGEMM

#: the TF32 version of :data:`SGEMM` (tensor cores), twice as fast in :func:`fp32_gemms_then_tf32`
TF32_GEMM = "ampere_tf32_s1688gemm_tf32_128x128_16x4_nn"
#: the long kernel of :func:`one_kernel_dominates_the_step`
BIG = "void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, float const*, float const*, bool, int, int)"


def python_between_tiny_kernels(fixed: bool = False, steps: int = 4, kernels: int = 50, kernel_us: float = 4.0,
                                python_us: float = 40.0) -> Capture:
    """launch-bound: ``kernels`` times ``python_us`` of Python then a 5 us launch of a ``kernel_us``
    kernel, then a stream synchronize. Fixed (the launch floor of the what-if: no host time between
    launches, 2 us launch calls, as with CUDA Graphs): no Python, ``api_us=2``."""
    cap = Capture()
    t = cap.process(pid=6710, name="launch_loop").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            for _ in range(kernels):
                if not fixed:
                    t.cpu(us=python_us)
                t.launch(ELEMENTWISE, kernel_us, api_us=2.0 if fixed else 5.0)
            t.sync_stream(7)
    return cap


def item_after_every_gemm(fixed: bool = False, steps: int = 4, iters: int = 20, gemm_us: float = 200.0,
                          python_us: float = 150.0) -> Capture:
    """host-sync: ``iters`` times a GEMM, an elementwise kernel (30 us), ``.item()`` (the host waits
    for the GPU) and ``python_us`` of Python; a stream synchronize ends the step. Fixed: no
    ``.item()``: the host queues ahead and the GPU runs back to back."""
    cap = Capture()
    t = cap.process(pid=6720, name="item_loop").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            for _ in range(iters):
                t.launch(GEMM, gemm_us, tensor_active=0.6)
                t.launch(ELEMENTWISE, 30)
                if not fixed:
                    t.item()
                t.cpu(us=python_us)
            t.sync_stream(7)
    return cap


def waiting_for_the_next_batch(fixed: bool = False, steps: int = 4, wait_ms: float = 30.0, gemms: int = 6,
                               gemm_us: float = 2000.0) -> Capture:
    """data-starvation: each step starts with the main thread blocked ``wait_ms`` in the DataLoader
    (poll, futex), then the batch's copy, ``gemms`` GEMMs and ``.item()``. Fixed: the batch is ready
    (no wait)."""
    cap = Capture()
    t = cap.process(pid=6730, name="starved").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            if not fixed:
                with t.range("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"):
                    t.os_call("poll", us=wait_ms * 1000 * 0.75)
                    t.os_call("futex", us=wait_ms * 1000 * 0.25)
            t.memcpy("HtoD", 8 << 20)
            for _ in range(gemms):
                t.cpu(us=15)
                t.launch(GEMM, gemm_us, tensor_active=0.6)
            t.item()
            t.sync_stream(7)
    return cap


def all_reduce_after_the_whole_backward(fixed: bool = False, steps: int = 4, gemm_us: float = 500.0,
                                        nccl_us: float = 400.0, adam_us: float = 200.0) -> Capture:
    """nccl-exposed: two backward GEMMs (two gradient buckets) on stream 7; the all-reduce on stream
    13 waits on the whole backward and the optimizer on the all-reduce: nothing hides it. Fixed: the
    all-reduce waits only on the first bucket's GEMM and runs under the second (as DDP's bucketing
    does); same kernels, same durations."""
    cap = Capture()
    t = cap.process(pid=6740, name="ddp_bucket").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            t.launch(GEMM, gemm_us, stream=7)
            if fixed:
                t.wait_event(waiting_stream=13, on_stream=7)
                t.nccl("AllReduce", nccl_us, stream=13)
                t.launch(GEMM, gemm_us, stream=7)
            else:
                t.launch(GEMM, gemm_us, stream=7)
                t.wait_event(waiting_stream=13, on_stream=7)
                t.nccl("AllReduce", nccl_us, stream=13)
            t.wait_event(waiting_stream=7, on_stream=13)
            t.launch(ADAM, adam_us, stream=7)
            t.sync_stream(7)
    return cap


def one_kernel_dominates_the_step(fixed: bool = False, steps: int = 4, big_us: float = 6000.0, gemms: int = 4,
                                  gemm_us: float = 300.0) -> Capture:
    """dominant-kernel: one ``big_us`` convolution, then ``gemms`` GEMMs and a synchronize. Fixed:
    the convolution twice as fast (the what-if's k = 2)."""
    cap = Capture()
    t = cap.process(pid=6750, name="dominant").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            t.cpu(us=20)
            t.launch(BIG, big_us / 2 if fixed else big_us)
            for _ in range(gemms):
                t.cpu(us=20)
                t.launch(GEMM, gemm_us, tensor_active=0.6)
            t.sync_stream(7)
    return cap


def fp32_gemms_then_tf32(fixed: bool = False, steps: int = 4, gemms: int = 6, gemm_us: float = 800.0,
                         small_us: float = 50.0) -> Capture:
    """fp32-gemm: ``gemms`` FP32 SIMT GEMMs (``volta_sgemm``) with an elementwise kernel after each,
    then a synchronize. Fixed: TF32 allowed: the same GEMMs as tensor-core kernels, twice as fast
    (the rule's ``tf32_speedup``)."""
    cap = Capture()
    t = cap.process(pid=6760, name="fp32").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            for _ in range(gemms):
                t.cpu(us=15)
                if fixed:
                    t.launch(TF32_GEMM, gemm_us / 2, tensor_active=0.6)
                else:
                    t.launch(SGEMM, gemm_us)
                t.launch(ELEMENTWISE, small_us)
            t.sync_stream(7)
    return cap


def compute_waits_on_a_copy_stream(fixed: bool = False, steps: int = 4, nbytes: int = 12_000_000,
                                   gemm_us: float = 300.0) -> Capture:
    """gpu-dependency: an input copy on stream 9 (1 ms) and a GEMM on stream 7 that waits on it
    (``cudaStreamWaitEvent``), then a device synchronize. Fixed: the GEMM does not wait (its input was
    copied ahead): it runs under the copy."""
    cap = Capture()
    t = cap.process(pid=6770, name="copy_wait").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            t.memcpy("HtoD", nbytes, asynchronous=True, stream=9)
            if not fixed:
                t.wait_event(waiting_stream=7, on_stream=9)
            else:
                t.api("cudaEventRecord_v3020", 2.0)
                t.api("cudaStreamWaitEvent_v3020", 2.0)
            t.launch(GEMM, gemm_us, stream=7)
            t.sync_device()
    return cap


def batch_copied_from_pageable_memory(fixed: bool = False, steps: int = 4, nbytes: int = 64 << 20, gemms: int = 4,
                                      gemm_us: float = 3000.0) -> Capture:
    """pageable-memcpy: each step copies its batch (``nbytes``) with ``cudaMemcpyAsync`` from pageable
    memory (3 GB/s; the call blocks until the copy ends), runs ``gemms`` GEMMs and copies 1 MiB of
    results back from pinned memory (12 GB/s: the capture's measured pinned bandwidth), then
    ``.item()``. Fixed: the batch in pinned memory (12 GB/s, the call returns at once)."""
    cap = Capture()
    t = cap.process(pid=6780, name="pageable").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            t.memcpy("HtoD", nbytes, pageable=not fixed)
            for _ in range(gemms):
                t.cpu(us=15)
                t.launch(GEMM, gemm_us, tensor_active=0.6)
            t.memcpy("DtoH", 1 << 20)
            t.item()
    return cap


def tolist_after_comm_held_compute(fixed: bool = False, steps: int = 4, comm_us: float = 3000.0,
                                   gemm_us: float = 500.0, python_us: float = 200.0, later: int = 4,
                                   later_us: float = 1000.0) -> Capture:
    """nccl-exposed through a host-blocking copy (issue 48; the HTA trace's shape): each step starts
    an all-to-all (``SendRecv``, ``comm_us``) on stream 13; a GEMM on stream 7 waits on it
    (``cudaStreamWaitEvent``) and ``.tolist()`` of its result copies 4 KiB to pageable host memory
    (``cudaMemcpyAsync`` device to pageable: the call returns when the copy has ended), then
    ``python_us`` of Python, ``later`` GEMMs of ``later_us`` and a device synchronize. Fixed: the
    all-to-all is pipelined (as for the next batch): the first GEMM no longer waits on it, and it is
    launched after the Python, under the later GEMMs; same kernels, same durations."""
    cap = Capture()
    t = cap.process(pid=6790, name="comm_tolist").thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            if not fixed:
                t.nccl("SendRecv", comm_us, stream=13)
                t.wait_event(waiting_stream=7, on_stream=13)
            t.launch(GEMM, gemm_us, stream=7, tensor_active=0.6)
            t.memcpy("DtoH", 4096, pageable=True, stream=7)
            t.cpu(us=python_us)
            if fixed:
                t.nccl("SendRecv", comm_us, stream=13)
            for _ in range(later):
                t.launch(GEMM, later_us, stream=7, tensor_active=0.6)
            t.sync_device()
    return cap


#: name -> (scenario function, the rule whose what-if its pair checks)
WHAT_IF_PAIRS: dict[str, tuple[Callable[..., Capture], str]] = {
    "python_between_tiny_kernels": (python_between_tiny_kernels, "launch-bound"),
    "item_after_every_gemm": (item_after_every_gemm, "host-sync"),
    "waiting_for_the_next_batch": (waiting_for_the_next_batch, "data-starvation"),
    "all_reduce_after_the_whole_backward": (all_reduce_after_the_whole_backward, "nccl-exposed"),
    "one_kernel_dominates_the_step": (one_kernel_dominates_the_step, "dominant-kernel"),
    "fp32_gemms_then_tf32": (fp32_gemms_then_tf32, "fp32-gemm"),
    "compute_waits_on_a_copy_stream": (compute_waits_on_a_copy_stream, "gpu-dependency"),
    "batch_copied_from_pageable_memory": (batch_copied_from_pageable_memory, "pageable-memcpy"),
    "tolist_after_comm_held_compute": (tolist_after_comm_held_compute, "nccl-exposed"),
}

__all__ = ["WHAT_IF_PAIRS", "TF32_GEMM", "BIG", *WHAT_IF_PAIRS]
