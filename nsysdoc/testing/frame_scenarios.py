"""Scenarios of issue 44, "the frame": the window, the steps and the headline.

Each function returns a :class:`~nsysdoc.testing.Capture` describing what a program did; they are
fixtures written from the situations users reported (not from the tool's output), so tests can
compute the expected window, steps and verdict by hand from the arguments, the builder's timing
model (``docs/testing.md``) and ``docs/glossary.md``:

* ``one_step_with_layers``: one training step (forward, backward, AdamW) without markers;
* ``ddp_one_step_two_ranks``: the same on 2 ranks with an all-reduce;
* ``markerless_loop_input_wait_h2d``: a loop without markers (input wait, H2D copy, 80 kernels);
* ``gpu_only_kineto_ddp_backward``: kernels without CUDA runtime events and a ``ProfilerStep#0``
  that covers none of them (meant to be written with ``write_kineto``);
* ``init_model_upload_then_benchmark_loop``: pageable weight upload in ``init_model`` before any
  kernel, then a loop of FP32 SGEMMs;
* ``warmup_step_ranges``: five ordinary steps named ``Warm-up Step N``;
* ``context_creation_then_compute_bound``: a long first ``cudaMalloc`` and module load, then a
  long run 97.7% busy in one kernel;
* ``context_creation_then_input_starved``: the same set-up, then marked steps that wait for input
  (a critical finding inside the window, set-up larger in milliseconds);
* ``two_ranks_unequal_input_waits``: 2 processes whose steps differ (one step time for the capture).

Times in the docstrings are in µs from the capture start ``T0`` (``Capture.start_ns``).
"""
from __future__ import annotations

import contextlib
from typing import Callable

from .builder import Capture, Thread
from .scenarios import GEMM, GEMM_DGRAD, GEMM_WGRAD, ELEMENTWISE, SGEMM, launch_each

#: forward kernels of a transformer-like layer (short names without an anonymous namespace)
EMBEDDING = ("void at::native::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2, true>"
             "(at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<float, unsigned int>, "
             "at::cuda::detail::TensorInfo<long, unsigned int>, int, int, unsigned int, unsigned int, long)")
SOFTMAX_FWD = ("void at::native::cunn_SoftMaxForward<4, float, float, float, at::native::SoftMaxForwardEpilogue>"
               "(float *, const float *, int)")
LAYERNORM_FWD = ("void at::native::vectorized_layer_norm_kernel<float, float>"
                 "(int, float, const float *, const float *, const float *, float *, float *, float *)")
LOSS_FWD = ("void at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>"
            "(float *, float *, const float *, const long *, const float *, bool, long, long, long)")
#: backward kernels (names say backward / _grad; the GEMMs say dgrad / wgrad)
SOFTMAX_BWD = ("void at::native::cunn_SoftMaxBackward<4, float, float, float, at::native::SoftMaxBackwardEpilogue>"
               "(float *, const float *, const float *, int)")
LAYERNORM_BWD = ("void at::native::layer_norm_grad_input_kernel<float, float>"
                 "(const float *, const float *, const float *, const float *, const float *, float *, int)")
#: the AdamW optimizer (torch.optim.AdamW(foreach=True)): multi_tensor_apply_kernel launches
ADAMW = ("void at::native::multi_tensor_apply_kernel<at::native::TensorListMetadata<4>, "
         "at::native::FusedAdamWMathFunctor<float>>(int, at::native::TensorListMetadata<4>, "
         "at::native::FusedAdamWMathFunctor<float>)")
#: FP32 SIMT GEMMs of a linear layer's backward (dgrad NN, wgrad NT), as cuBLAS names them
SGEMM_NN = SGEMM                     # "volta_sgemm_128x64_nn"
SGEMM_NT = "volta_sgemm_128x64_nt"

#: scenarios whose situation is a PyTorch Profiler trace: tests also write them with ``write_kineto``
KINETO_SCENARIOS = ("gpu_only_kineto_ddp_backward",)


def _maybe(t: Thread, text: str, on: bool):
    return t.range(text) if on else contextlib.nullcontext()


def _one_training_step(t: Thread, *, layers: int, gemm_us: float, softmax_us: float, norm_us: float,
                       embed_us: float, loss_us: float, adamw_launches: int, adamw_us: float, nvtx: bool,
                       allreduce_us: float | None = None) -> None:
    """Forward, backward (and an all-reduce on stream 13 when ``allreduce_us``), AdamW, then a
    ``cudaDeviceSynchronize``; every launch after 10 µs of Python (:func:`launch_each`)."""
    with _maybe(t, "forward pass", nvtx):
        launch_each(t, (EMBEDDING, embed_us))
        for _ in range(layers):
            launch_each(t, (GEMM, gemm_us), (SOFTMAX_FWD, softmax_us), (GEMM, gemm_us), (LAYERNORM_FWD, norm_us))
        launch_each(t, (LOSS_FWD, loss_us))
    with _maybe(t, "backward pass", nvtx):
        for _ in range(layers):
            launch_each(t, (LAYERNORM_BWD, norm_us), (GEMM_DGRAD, gemm_us), (GEMM_WGRAD, gemm_us),
                        (SOFTMAX_BWD, softmax_us))
        if allreduce_us is not None:
            t.wait_event(13, 7)                      # the gradients are ready
            t.nccl("AllReduce", allreduce_us, stream=13)
            t.wait_event(7, 13)                      # the optimizer waits for the reduced gradients
    with _maybe(t, "optimizer step", nvtx):
        for _ in range(adamw_launches):
            launch_each(t, (ADAMW, adamw_us))
    t.sync_device()


def one_step_with_layers(layers: int = 12, gemm_us: float = 300.0, softmax_us: float = 60.0, norm_us: float = 40.0,
                         embed_us: float = 50.0, loss_us: float = 30.0, adamw_launches: int = 4,
                         adamw_us: float = 100.0, nvtx: bool = True) -> Capture:
    """A capture of exactly one training step of a ``layers``-layer transformer-like model, no step
    markers. The host launches each kernel after 10 µs of Python (``launch_each``) and runs far
    ahead of the GPU: an embedding lookup (``embed_us``); per layer forward a GEMM, a softmax, a
    GEMM and a layer norm; the loss (``loss_us``); per layer backward a layer-norm backward, a
    dgrad GEMM, a wgrad GEMM and a softmax backward; then ``adamw_launches`` AdamW
    ``multi_tensor_apply_kernel`` launches and ``cudaDeviceSynchronize``. With ``nvtx`` the three
    phases sit in NVTX ranges "forward pass", "backward pass" and "optimizer step" (not step
    markers: they do not match the step pattern and are not named like steps). Forward and backward
    layers are 4 kernels each, so the layer repeats through the whole step; nothing repeats per
    step."""
    cap = Capture()
    t = cap.process(pid=6000).thread()
    _one_training_step(t, layers=layers, gemm_us=gemm_us, softmax_us=softmax_us, norm_us=norm_us,
                       embed_us=embed_us, loss_us=loss_us, adamw_launches=adamw_launches, adamw_us=adamw_us,
                       nvtx=nvtx)
    return cap


def ddp_one_step_two_ranks(layers: int = 12, gemm_us: float = 300.0, softmax_us: float = 60.0,
                           norm_us: float = 40.0, embed_us: float = 50.0, loss_us: float = 30.0,
                           adamw_launches: int = 4, adamw_us: float = 100.0, allreduce_us: float = 2000.0,
                           nvtx: bool = True) -> Capture:
    """One DDP training step on 2 GPUs captured in one file (processes 6100 and 6101 on devices 0
    and 1, both starting at ``T0``): each rank runs the step of :func:`one_step_with_layers`, and
    after the backward its gradients are all-reduced (``ncclDevKernel_AllReduce`` of
    ``allreduce_us`` on stream 13, after ``cudaStreamWaitEvent`` on the compute stream); the
    optimizer waits for the all-reduce (``cudaStreamWaitEvent``). The ranks do not wait for each
    other (same script, same timing)."""
    cap = Capture(gpu_names={0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H100 80GB HBM3"})
    for rank in range(2):
        t = cap.process(pid=6100 + rank, device=rank).thread()
        _one_training_step(t, layers=layers, gemm_us=gemm_us, softmax_us=softmax_us, norm_us=norm_us,
                           embed_us=embed_us, loss_us=loss_us, adamw_launches=adamw_launches, adamw_us=adamw_us,
                           nvtx=nvtx, allreduce_us=allreduce_us)
    return cap


def markerless_loop_input_wait_h2d(iterations: int = 20, wait_ms: float = 5.0, kernels: int = 80,
                                   copy_bytes: int = 6_000_000) -> Capture:
    """A training loop profiled without step markers. Each iteration the main thread waits
    ``wait_ms`` for its batch (``poll``), copies it to the GPU (one pinned ``cudaMemcpyAsync`` of
    ``copy_bytes``: 500 µs at the builder's 12 GB/s), then launches ``kernels`` kernels (10 µs of
    Python before each) that repeat a 4-kernel layer: a GEMM of 40 µs, an elementwise kernel of
    15 µs, a softmax of 20 µs, an elementwise kernel of 15 µs. No sync: the GPU finishes the
    iteration's 2.3 ms of work during the next input wait."""
    cap = Capture()
    t = cap.process(pid=6200).thread()
    layer = ((GEMM, 40.0), (ELEMENTWISE, 15.0), (SOFTMAX_FWD, 20.0), (ELEMENTWISE, 15.0))
    for _ in range(iterations):
        t.os_call("poll", us=wait_ms * 1000)
        t.memcpy("HtoD", copy_bytes, pageable=False)
        for k in range(kernels):
            launch_each(t, layer[k % 4])
    return cap


def gpu_only_kineto_ddp_backward(buckets: int = 8, gemms_per_bucket: int = 6, gemm_us: float = 1000.0,
                                 allreduce_us: float = 800.0, marker_us: float = 36.0) -> Capture:
    """A PyTorch Profiler capture of DDP backward recorded with GPU activity only (no CUDA runtime
    events, as ``activities=[ProfilerActivity.CUDA]`` or a trace whose CPU side was lost gives):
    ``ProfilerStep#0`` lasts ``marker_us`` (36 µs) at the start of the trace and covers no GPU work;
    the backward that follows runs ``buckets`` gradient buckets, each ``gemms_per_bucket`` FP32 SIMT
    GEMMs of ``gemm_us`` (``volta_sgemm_128x64_nn``/``_nt``, alternating) on stream 7, then an NCCL
    all-reduce of ``allreduce_us`` on stream 13 that starts when the bucket's GEMMs end (it overlaps
    the next bucket's GEMMs; the last one runs alone). The CUDA runtime rows (and the stream-wait
    records) the builder played are dropped, so the GPU rows have no launching call. Write it with
    ``write_kineto`` (the situation reported); ``write`` gives the same GPU-only capture as an nsys
    export."""
    cap = Capture()
    t = cap.process(pid=7100).thread()
    with t.range("ProfilerStep#0"):
        t.cpu(us=marker_us)
    for _ in range(buckets):
        for g in range(gemms_per_bucket):
            t.launch(SGEMM_NN if g % 2 == 0 else SGEMM_NT, gemm_us)
        t.wait_event(13, 7)
        t.nccl("AllReduce", allreduce_us, stream=13)
    cap._runtime.clear()   # no cuda_runtime events: kernels only
    cap._sync.clear()
    return cap


def init_model_upload_then_benchmark_loop(copies: int = 20, copy_mib: int = 680, gemms: int = 30,
                                          gemm_us: float = 20_000.0) -> Capture:
    """A benchmark script: in the NVTX range ``init_model`` it uploads its weights with ``copies``
    synchronous ``cudaMemcpy`` calls of ``copy_mib`` MiB from pageable memory (3 GB/s in the
    builder) before any kernel ran; then, in the NVTX range ``benchmark_loop``, it launches
    ``gemms`` FP32 SGEMMs (``volta_sgemm_128x64_nn``) of ``gemm_us`` back to back (5 µs launch
    calls, no Python between them) and ends with ``cudaDeviceSynchronize``."""
    cap = Capture()
    t = cap.process(pid=6300).thread()
    with t.range("init_model"):
        for _ in range(copies):
            t.memcpy("HtoD", copy_mib << 20, asynchronous=False, pageable=True)
    with t.range("benchmark_loop"):
        for _ in range(gemms):
            t.launch(SGEMM, gemm_us)
        t.sync_device()
    return cap


def warmup_step_ranges(steps: int = 5, cpu_ms: float = 3.0, kernels: int = 12, kernel_us: float = 150.0) -> Capture:
    """A loop whose only step ranges are named ``Warm-up Step 1`` … ``Warm-up Step 5`` (the script
    calls its first iterations warm-up, but they are ordinary training steps; nothing follows
    them — the capture ends after them, so these are all the steps there are). Each step runs
    ``cpu_ms`` of Python with no CUDA call, then launches ``kernels`` GEMMs of ``kernel_us`` (10 µs
    of Python before each); no sync, so a step's GPU work (1.8 ms) runs on after the next step's
    range has started. After the last step, ``cudaDeviceSynchronize`` (outside any range)."""
    cap = Capture()
    t = cap.process(pid=6500).thread()
    for i in range(1, steps + 1):
        with t.range(f"Warm-up Step {i}"):
            t.cpu(us=cpu_ms * 1000)
            for _ in range(kernels):
                launch_each(t, (GEMM, kernel_us))
    t.sync_device()
    return cap


def context_creation_then_compute_bound(malloc_ms: float = 84.0, module_load_ms: float = 30.0,
                                        iterations: int = 290, kernel_us: float = 9_770.0,
                                        python_us: float = 9_995.0) -> Capture:
    """A long-running job: its first CUDA call, a ``cudaMalloc`` of ``malloc_ms``, creates the
    context; a ``cuModuleLoadData`` of ``module_load_ms`` follows; then ``iterations`` times it
    launches one 9.77 ms GEMM (5 µs launch call) and runs ``python_us`` of Python, so a launch
    comes every 10 ms and the GPU idles 230 µs between kernels (97.7% busy over 2.9 s). No NVTX;
    ``cudaDeviceSynchronize`` at the end."""
    cap = Capture()
    t = cap.process(pid=6400).thread()
    t.malloc(us=malloc_ms * 1000)
    t.api("cuModuleLoadData", us=module_load_ms * 1000)
    for _ in range(iterations):
        t.launch(GEMM, kernel_us)
        t.cpu(us=python_us)
    t.sync_device()
    return cap


def context_creation_then_input_starved(malloc_ms: float = 300.0, module_load_ms: float = 100.0, steps: int = 10,
                                        wait_ms: float = 6.0, kernels: int = 10, kernel_us: float = 400.0) -> Capture:
    """Set-up before the first kernel that is larger (in ms) than anything in the loop: a
    ``cudaMalloc`` of ``malloc_ms`` creates the context, a ``cuModuleLoadData`` of
    ``module_load_ms`` follows; then ``steps`` marked steps (``ProfilerStep#N``), each waiting
    ``wait_ms`` for input (``poll``), launching ``kernels`` GEMMs of ``kernel_us`` (10 µs of Python
    before each) and reading the loss (``.item()``)."""
    cap = Capture()
    t = cap.process(pid=6600).thread()
    t.malloc(us=malloc_ms * 1000)
    t.api("cuModuleLoadData", us=module_load_ms * 1000)
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            t.os_call("poll", us=wait_ms * 1000)
            for _ in range(kernels):
                launch_each(t, (GEMM, kernel_us))
            t.item()
    return cap


def two_ranks_unequal_input_waits(rank0_wait_ms: float = 3.0,
                                  rank1_wait_ms: tuple[float, ...] = (2.0, 9.0, 9.0, 10.0, 2.0),
                                  gemms: int = 8, gemm_us: float = 500.0) -> Capture:
    """Two processes in one capture (pids 6700 and 6701 on devices 0 and 1, no collective), each
    running ``len(rank1_wait_ms)`` marked steps (``ProfilerStep#N``) that start at ``T0``: per
    step the host waits for input (``poll``: ``rank0_wait_ms`` on rank 0, ``rank1_wait_ms[i]`` on
    rank 1), launches ``gemms`` GEMMs of ``gemm_us`` (10 µs of Python before each) and reads the
    loss (``.item()``). The ranks' step times differ step by step."""
    cap = Capture(gpu_names={0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H100 80GB HBM3"})
    waits = [[rank0_wait_ms] * len(rank1_wait_ms), list(rank1_wait_ms)]
    for rank in range(2):
        t = cap.process(pid=6700 + rank, device=rank).thread()
        for i, w in enumerate(waits[rank]):
            with t.range(f"ProfilerStep#{i}"):
                t.os_call("poll", us=w * 1000)
                for _ in range(gemms):
                    launch_each(t, (GEMM, gemm_us))
                t.item()
    return cap


FRAME_SCENARIOS: dict[str, Callable[..., Capture]] = {
    f.__name__: f for f in (
        one_step_with_layers, ddp_one_step_two_ranks, markerless_loop_input_wait_h2d, gpu_only_kineto_ddp_backward,
        init_model_upload_then_benchmark_loop, warmup_step_ranges, context_creation_then_compute_bound,
        context_creation_then_input_starved, two_ranks_unequal_input_waits,
    )
}
