"""Named scenarios: small, deterministic captures that reproduce one situation each.

Each function returns a :class:`~nsysdoc.testing.Capture` (call ``.write(path)``). Parameters
have defaults so the numbers in tests can be computed by hand from the arguments. ``SCENARIOS``
maps names to functions (used by ``fixtures/build.py``, rule cases and the bundled sample).
"""
from __future__ import annotations

import contextlib
from typing import Callable

from .builder import MS, US, Capture, Thread

from .kernel_names import ELEMENTWISE, GEMM  # noqa: F401 (one spelling; memory_scenarios uses them too)
SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float *, const float *, int)"
ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4>>(int, volatile int *, at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4>)"
SGEMM = "volta_sgemm_128x64_nn"


def compute_block(t: Thread, *, gemms: int = 4, gemm_us: float = 800.0, small: int = 8, small_us: float = 20.0,
                  py_us: float = 15.0, device: int | None = None) -> None:
    """Forward/backward-like work: GEMMs with a few elementwise kernels between them."""
    for _ in range(gemms):
        t.cpu(us=py_us)
        t.launch(GEMM, gemm_us, device=device, tensor_active=0.6, sm_active=0.9)
        for _ in range(small // max(gemms, 1)):
            t.cpu(us=py_us)
            t.launch(ELEMENTWISE, small_us, device=device, sm_active=0.5)


def launch_each(t: Thread, *kernels: tuple[str, float], py_us: float = 10.0) -> None:
    """Launch each ``(name, us)`` kernel after ``py_us`` of host work."""
    for name, us in kernels:
        t.cpu(us=py_us)
        t.launch(name, us)


def healthy_training(steps: int = 6) -> Capture:
    """Big back-to-back kernels, the CPU runs ahead, one ``loss.item()`` per step at its end."""
    cap = Capture(gpu_metrics_hz=10_000)
    t = cap.process(pid=4100).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            with t.range("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"):
                t.os_call("poll", us=20)
            t.memcpy("HtoD", 4 << 20, pageable=False)
            compute_block(t, gemms=8, gemm_us=1500, small=16, small_us=40, py_us=10)
            t.launch(ADAM, 300)
            t.item()
    return cap


def launch_bound_small_kernels(steps: int = 5, kernels: int = 300, kernel_us: float = 4.0,
                               python_us: float = 40.0) -> Capture:
    """Eager-mode flood of tiny kernels: each 4 µs kernel waits ~40 µs for the next launch."""
    cap = Capture()
    t = cap.process(pid=4200).thread()
    for i in range(steps):
        with t.range(f"train_step_{i}"):
            for _ in range(kernels):
                t.cpu(us=python_us)
                t.launch(ELEMENTWISE, kernel_us, api_us=6)
            t.item()
    return cap


def dataloader_starvation(steps: int = 6, wait_ms: float = 40.0) -> Capture:
    """Every step starts with the main thread blocked in the DataLoader (poll/futex)."""
    cap = Capture(gpu_metrics_hz=1_000)
    t = cap.process(pid=4300).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            with t.range("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"):
                t.os_call("poll", us=wait_ms * 1000 * 0.75)
                t.os_call("futex", us=wait_ms * 1000 * 0.25)
            t.memcpy("HtoD", 8 << 20, pageable=False)
            compute_block(t, gemms=6, gemm_us=2000, small=12, small_us=30)
            t.item()
    return cap


def sync_storm(steps: int = 5, items_per_step: int = 40) -> Capture:
    """Scattered ``.item()`` calls: each drains the queue, then Python runs with the GPU idle."""
    cap = Capture()
    t = cap.process(pid=4400).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            for _ in range(items_per_step):
                t.launch(GEMM, 200, tensor_active=0.6)
                t.launch(ELEMENTWISE, 30)
                t.item()
                t.cpu(us=150)
    return cap


def pageable_h2d(steps: int = 4, nbytes: int = 64 << 20) -> Capture:
    """Input batches copied from pageable host memory with ``cudaMemcpyAsync``."""
    cap = Capture()
    t = cap.process(pid=4500).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            t.memcpy("HtoD", nbytes, pageable=True)
            compute_block(t, gemms=4, gemm_us=3000, small=8, small_us=40)
            t.item()
    return cap


def ddp_nccl(steps: int = 4, overlapped: bool = False, ranks: int = 2, allreduce_us: float = 6000.0) -> Capture:
    """DDP on ``ranks`` GPUs (one process each). Gradient all-reduce either after backward on the
    compute stream's tail (exposed) or on a side stream while backward still runs (overlapped)."""
    cap = Capture(gpu_names={d: "NVIDIA A100-SXM4-80GB" for d in range(ranks)})
    threads = [cap.process(pid=5000 + r, device=r).thread() for r in range(ranks)]
    for i in range(steps):
        for r, t in enumerate(threads):
            with t.range(f"ProfilerStep#{i}"):
                t.memcpy("HtoD", 4 << 20)
                compute_block(t, gemms=4, gemm_us=2500, small=8, small_us=40)  # forward
                if overlapped:
                    for _ in range(4):  # backward buckets: all-reduce each bucket as soon as it is ready
                        t.launch(GEMM, 2500, tensor_active=0.6)
                        t.wait_event(13, 7)
                        t.nccl("AllReduce", allreduce_us / 4, stream=13)
                    t.wait_event(7, 13)
                    t.launch(ADAM, 300)
                else:
                    compute_block(t, gemms=4, gemm_us=2500, small=8, small_us=40)  # backward
                    t.wait_event(13, 7)
                    t.nccl("AllReduce", allreduce_us, stream=13)
                    t.wait_event(7, 13)
                    t.launch(ADAM, 300)
                t.item()
    return cap


def dominant_kernel(steps: int = 4) -> Capture:
    """One slow FP32 GEMM takes most of the GPU time."""
    cap = Capture()
    t = cap.process(pid=4600).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            t.launch(SGEMM, 20_000)
            compute_block(t, gemms=2, gemm_us=500, small=8, small_us=20)
            t.item()
    return cap


def one_kernel_76pct_no_steps(solver_us: float = 7600.0) -> Capture:
    """A program without steps (no markers, no repeating work): four set-up kernels of 600 us
    (``prep_a``..``prep_d``), then one ``solver_kernel`` of ``solver_us`` (7.6 ms: 76% of 10 ms
    of kernel time)."""
    cap = Capture()
    t = cap.process(pid=4610).thread()
    for name in ("prep_a", "prep_b", "prep_c", "prep_d"):
        t.launch(name, 600)
    t.launch("solver_kernel", solver_us)
    t.sync_device()
    return cap


def one_kernel_92pct(steps: int = 3, big_us: float = 9200.0) -> Capture:
    """Per step one ``big_kernel`` of ``big_us`` (9.2 ms) and eight elementwise kernels of 100 us,
    then ``loss.item()``: 92% of kernel time."""
    cap = Capture()
    t = cap.process(pid=4620).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            t.launch("big_kernel", big_us)
            for _ in range(8):
                t.launch(ELEMENTWISE, 100)
            t.item()
    return cap


def dominant_kernel_uneven_steps(launches: tuple[int, ...] = (2, 2, 1), big_us: float = 4000.0) -> Capture:
    """Per step ``launches[i]`` launches of a 4 ms ``big_kernel`` and eight elementwise kernels of
    100 us, then ``loss.item()``: 5 launches over 3 steps (1.67 per step)."""
    cap = Capture()
    t = cap.process(pid=4630).thread()
    for i, n in enumerate(launches):
        with t.range(f"ProfilerStep#{i}"):
            for _ in range(n):
                t.launch("big_kernel", big_us)
            for _ in range(8):
                t.launch(ELEMENTWISE, 100)
            t.item()
    return cap


def nccl_kernel_dominates(steps: int = 3, allreduce_us: float = 8000.0) -> Capture:
    """Per step a 2 ms GEMM and four 100 us elementwise kernels, then an NCCL all-reduce of
    ``allreduce_us`` (8 ms) on the communication stream that the compute stream waits for: the
    all-reduce is the kernel with the most time (76.9% of kernel time), the GEMM the top compute
    kernel (19.2%)."""
    cap = Capture()
    t = cap.process(pid=4640).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            t.launch(GEMM, 2000, tensor_active=0.6)
            for _ in range(4):
                t.launch(ELEMENTWISE, 100)
            t.wait_event(13, 7)
            t.nccl("AllReduce", allreduce_us, stream=13)
            t.wait_event(7, 13)
            t.item()
    return cap


def tiny_kernel_flood_559() -> Capture:
    """An inference-like program without steps: 162 kernels of 200 us (27 each of six layer
    kernels), then 279 elementwise kernels of 4 us and 118 of 9.3 us. 559 kernels, 397 (71.0%)
    under 10 us, median 9.3 us (the 280th), launched 5 us apart so the GPU runs them back to back."""
    cap = Capture()
    t = cap.process(pid=4650).thread()
    for layer in range(6):
        for _ in range(27):
            t.launch(f"layer{layer}_kernel", 200)
    for _ in range(279):
        t.launch(ELEMENTWISE, 4)
    for _ in range(118):
        t.launch("void scale_bias_kernel<float>(float*, int)", 9.3)
    t.sync_device()
    return cap


def no_step_markers(launches: int = 200) -> Capture:
    """A training loop profiled without NVTX step ranges."""
    cap = Capture()
    t = cap.process(pid=4700).thread()
    for _ in range(launches // 10):
        compute_block(t, gemms=2, gemm_us=300, small=8, small_us=10)
        t.item()
    return cap


def irregular_work(launches: int = 200, seed: int = 0) -> Capture:
    """GPU work that does not repeat, without NVTX step ranges: ``launches`` kernels drawn from 8
    names with durations of 10-300 us (``random.Random(seed)``), a ``loss.item()`` after every 10
    launches. No step markers, and no period to infer steps from: nothing is per step."""
    import random

    rng = random.Random(seed)
    names = [GEMM, ELEMENTWISE, SOFTMAX, ADAM, SGEMM] + [f"irregular_kernel_{i}" for i in range(3)]
    cap = Capture()
    t = cap.process(pid=4750).thread()
    for i in range(launches):
        t.cpu(us=rng.uniform(5, 40))
        t.launch(names[rng.randrange(len(names))], rng.uniform(10, 300))
        if i % 10 == 9:
            t.item()
    return cap


def seed_case_augmentation(steps: int = 8, kernels: int = 120, python_augment_us: float = 450.0) -> Capture:
    """Seed article case 1: 3–10 µs kernels, periodic 400–500 µs holes while Python augments data."""
    cap = Capture()
    t = cap.process(pid=4800).thread()
    for i in range(steps):
        with t.range(f"iteration {i}"):
            for k in range(kernels):
                if k % 20 == 0:
                    t.cpu(us=python_augment_us - 50 + (k // 20) * 20)  # random crop/rotate in Python
                t.cpu(us=2)
                t.launch(ELEMENTWISE, 3 + (k % 8), api_us=4)
            t.item()
    return cap


def seed_case_large_model(steps: int = 4, input_wait_ms: float = 800.0, logits_mb: int = 512,
                          items: int = 24, python_after_item_ms: float = 4.0) -> Capture:
    """Seed article case 2: 0.8 s input wait per step, full logits pulled to the CPU every step,
    and scattered ``.item()`` syncs each followed by Python bookkeeping."""
    cap = Capture()
    t = cap.process(pid=4900).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            with t.range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"):
                t.os_call("read", us=input_wait_ms * 1000 * 0.3)
                t.cpu(us=input_wait_ms * 1000 * 0.1)  # collate_fn in Python
                t.os_call("futex", us=input_wait_ms * 1000 * 0.6)
            t.memcpy("HtoD", 32 << 20)
            for j in range(items):
                compute_block(t, gemms=4, gemm_us=5_000, small=8, small_us=40)
                t.item()
                t.cpu(us=python_after_item_ms * 1000)  # logging / metric bookkeeping with the GPU drained
            t.memcpy("DtoH", logits_mb << 20, asynchronous=False)
    return cap


def pseudo_busy(steps: int = 4, kernels: int = 400) -> Capture:
    """Time-busy looks high (kernels back to back) but SM activity is low: tiny, underfilled kernels."""
    cap = Capture(gpu_metrics_hz=20_000)
    t = cap.process(pid=5100).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            for _ in range(kernels):
                t.launch(ELEMENTWISE, 12, api_us=3, sm_active=0.12)
            t.item()
    return cap


def weight_streaming(steps: int = 4, layers: int = 4, layer_bytes: int = 120_000_000, layer_kernel_us: float = 1000.0,
                     gbps: float = 12.0) -> Capture:
    """Transfer-bound: each layer's weights are copied host→device (pinned) right before its kernel
    on the same stream, as CPU offloading does without prefetch. A copy takes ``layer_bytes / gbps``
    ns (10 ms by default), its kernel 1 ms: the GPU mostly copies."""
    cap = Capture()
    t = cap.process(pid=5200).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            for _ in range(layers):
                t.memcpy("HtoD", layer_bytes, pageable=False, gbps=gbps)
                t.launch(GEMM, layer_kernel_us, tensor_active=0.6)
            t.item()
    return cap


def allocator_churn(steps: int = 4, iters: int = 20, kernel_us: float = 100.0, free_us: float = 300.0,
                    malloc_us: float = 200.0) -> Capture:
    """The loop frees and re-allocates a device buffer after each kernel (no caching allocator):
    ``cudaFree`` then ``cudaMalloc`` run while the GPU has nothing queued."""
    cap = Capture()
    t = cap.process(pid=5300).thread()
    for i in range(steps):
        with t.range(f"step {i}"):
            for _ in range(iters):
                t.launch(ELEMENTWISE, kernel_us)
                t.free(us=free_us)
                t.malloc(us=malloc_us)
            t.item()
    return cap


def jit_warmup_then_steady(module_load_ms: float = 50.0, first_launch_ms: float = 300.0, kernels: int = 400,
                           kernel_us: float = 500.0) -> Capture:
    """No NVTX: start-up loads a module (``cuModuleLoadData``), the first launch JIT-compiles for
    ``first_launch_ms``, then a steady, healthy stream of 500 µs kernels with the CPU far ahead."""
    cap = Capture()
    t = cap.process(pid=5400).thread()
    t.launch(ELEMENTWISE, 20)                  # context warm-up kernel
    t.api("cuModuleLoadData", us=module_load_ms * 1000)
    t.launch(GEMM, kernel_us, api_us=first_launch_ms * 1000)  # first launch: lazy loading / JIT
    for _ in range(kernels):
        t.launch(GEMM, kernel_us)
    t.sync_device()
    return cap


def host_work_between_steps(steps: int = 10, cpu_ms: float = 8.0, kernels: int = 8, kernel_us: float = 250.0) -> Capture:
    """Each step runs ``cpu_ms`` of Python with no CUDA call (pre-processing, logging) before it
    launches ``kernels`` kernels; no sync: the GPU finishes its 2 ms and waits for the host."""
    cap = Capture()
    t = cap.process(pid=5500).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            t.cpu(us=cpu_ms * 1000)
            for _ in range(kernels):
                t.launch(GEMM, kernel_us)
    t.sync_device()
    return cap


def sync_then_dependent_cpu_work(steps: int = 8, kernels: int = 6, kernel_us: float = 500.0,
                                 cpu_before_sync_us: float = 2900.0, cpu_after_sync_us: float = 5000.0) -> Capture:
    """The host overlaps its own work with 3 ms of GPU work, then reads a result (``.item()``): the
    sync blocks only ~0.1 ms, and the 5 ms of Python after it need the value (early stopping,
    dynamic control flow). The sync is not what costs the 5 ms."""
    cap = Capture()
    t = cap.process(pid=5600).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            for _ in range(kernels):
                t.launch(GEMM, kernel_us)
            t.cpu(us=cpu_before_sync_us)
            t.item()
            t.cpu(us=cpu_after_sync_us)
    return cap


def steady_training(steps: int = 20, gemm_us: float = 1500.0, jitter_pct: float = 0.0, seed: int = 0,
                    extra_kernel_us: float = 0.0, step_markers: bool = True, order_seed: int | None = None) -> Capture:
    """A GPU-bound loop for before/after diffs: per step an 8 MiB pinned copy, 8 GEMMs of
    ``gemm_us`` with 16 elementwise kernels of 40 µs, an optimizer kernel of 300 µs and one
    ``loss.item()``. ``jitter_pct`` scales every step's GEMMs by a factor drawn uniformly from
    ``1 ± jitter_pct/100`` (``random.Random(seed)``: deterministic run-to-run noise);
    ``extra_kernel_us`` adds one softmax kernel per step (a new kernel); without ``step_markers``
    the loop has no NVTX step ranges. ``order_seed`` shuffles the order of each step's 8 GEMMs and
    16 elementwise kernels (``random.Random(order_seed)``; the same kernels, the same time): the
    launch sequence then has no period, so no steps can be inferred either."""
    import random

    rng = random.Random(seed)
    order = random.Random(order_seed) if order_seed is not None else None
    cap = Capture()
    t = cap.process(pid=4700).thread()
    for i in range(steps):
        scale = 1 + rng.uniform(-jitter_pct, jitter_pct) / 100
        with (t.range(f"ProfilerStep#{i}") if step_markers else contextlib.nullcontext()):
            t.memcpy("HtoD", 8 << 20, pageable=False)
            if order is None:
                compute_block(t, gemms=8, gemm_us=gemm_us * scale, small=16, small_us=40, py_us=10)
            else:
                kinds = [GEMM] * 8 + [ELEMENTWISE] * 16
                order.shuffle(kinds)
                for name in kinds:
                    t.cpu(us=10)
                    if name == GEMM:
                        t.launch(GEMM, gemm_us * scale, tensor_active=0.6, sm_active=0.9)
                    else:
                        t.launch(ELEMENTWISE, 40, sm_active=0.5)
            if extra_kernel_us:
                t.cpu(us=10)
                t.launch(SOFTMAX, extra_kernel_us)
            t.launch(ADAM, 300)
            t.item()
    return cap


GEMM_DGRAD = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_dgrad_kernel__5x_cublas"
GEMM_WGRAD = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tt_n_tilesize128x128x64_wgrad_kernel__5x_cublas"


def layered_training(steps: int = 8, layers: int = 6, gemm_us: float = 400.0, input_ms: float = 3.0,
                     step_markers: bool = False) -> Capture:
    """A model of ``layers`` identical layers trained without NVTX step ranges (by default): per
    step the host waits ``input_ms`` for its batch, copies 4 MiB (pinned), runs per layer a GEMM
    and 2 elementwise kernels forward, then per layer a dgrad and a wgrad GEMM backward, the
    optimizer (one fused Adam kernel) and ``loss.item()``. The layers repeat inside a step, but
    the whole step is the unit that repeats: ``7 * layers + 3`` GPU operations (the item() copy
    included)."""
    cap = Capture()
    t = cap.process(pid=5100).thread()
    for i in range(steps):
        with (t.range(f"ProfilerStep#{i}") if step_markers else contextlib.nullcontext()):
            t.os_call("poll", us=input_ms * 1000)
            t.memcpy("HtoD", 4 << 20, pageable=False)
            for _ in range(layers):
                launch_each(t, (GEMM, gemm_us), (ELEMENTWISE, 20), (ELEMENTWISE, 20))
            for _ in range(layers):
                launch_each(t, (GEMM_DGRAD, gemm_us), (GEMM_WGRAD, gemm_us), (ELEMENTWISE, 20), (ELEMENTWISE, 20))
            t.launch(ADAM, 200)
            t.item()
    return cap


def forward_layers_slice(layers: int = 12, gemm_us: float = 900.0, host_us: float = 1500.0) -> Capture:
    """A slice of one inference pass: ``layers`` identical transformer-like blocks (an H2D copy of
    a small tensor, a GEMM, 2 elementwise kernels, then ``host_us`` of Python), no optimizer, no
    backward, no NVTX: the repeating unit is a layer, not a training step."""
    cap = Capture()
    t = cap.process(pid=5200).thread()
    for _ in range(layers):
        t.cpu(us=host_us)
        t.memcpy("HtoD", 4096, pageable=False)
        launch_each(t, (GEMM, gemm_us), (ELEMENTWISE, 30), (SOFTMAX, 30))
    return cap


def sample_training() -> Capture:
    """The bundled sample: a 1-GPU training loop that starves on its DataLoader, copies the batch
    from pageable memory, and reads the loss with ``.item()`` every step."""
    cap = Capture(gpu_metrics_hz=2_000)
    t = cap.process(pid=31337, name="python train.py").thread()
    for i in range(12):
        with t.range(f"ProfilerStep#{i}"):
            with t.range("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"):
                t.os_call("poll", us=9_000 + (i % 3) * 1_500)
                t.os_call("futex", us=2_000)
            t.memcpy("HtoD", 24 << 20, pageable=True)
            with t.range("forward"):
                compute_block(t, gemms=12, gemm_us=450, small=96, small_us=6, py_us=12)
                t.launch(SOFTMAX, 60)
            with t.range("backward"):
                compute_block(t, gemms=24, gemm_us=420, small=120, small_us=5, py_us=10)
            with t.range("optimizer.step"):
                for _ in range(40):
                    t.cpu(us=8)
                    t.launch(ADAM, 4, api_us=5)
            t.item()
            t.cpu(us=300)  # logging
    return cap


def ddp_job(ranks: int = 8, steps: int = 8, slow_rank: int | None = 5, input_ms: float = 2.0,
            slow_input_ms: float = 12.0, ranks_per_node: int = 4, node_skew_ms: float = 37.5,
            allreduce_us: float = 3000.0, jitter_us: float = 0.0, seed: int = 0, one_capture: bool = False,
            session_stagger_ms: float = 0.25) -> list[Capture]:
    """One synchronous data-parallel job, played on a shared true timeline: per step each rank waits
    ``input_ms`` in its DataLoader (``slow_input_ms`` on ``slow_rank``; plus a uniform 0..``jitter_us``
    µs, seeded), copies a 4 MiB batch, runs 8 GEMMs of 1.5 ms and 8 elementwise kernels of 40 µs,
    then joins an all-reduce that ends ``allreduce_us`` after the *last* rank joins (so every
    other rank's NCCL kernel spins while it waits), then the optimizer and ``.item()``.

    Per-rank captures (default): rank r's session starts ``r * session_stagger_ms`` after rank 0's
    (the first step still starts at the same true time on every rank), and ranks of the second and
    later nodes (``ranks_per_node`` per node) record a wall clock ``node_skew_ms`` ahead per node in
    ``utcEpochNs``: clock offsets of 0 and +37.5 ms by default. ``one_capture``: one capture holding
    ``ranks`` processes on ``ranks`` GPUs (one clock). Returns the captures (one, or one per rank)."""
    import random

    rng = random.Random(seed)
    stagger = int(round(session_stagger_ms * MS))
    threads, true0, caps = [], [], []
    if one_capture:
        cap = Capture(gpu_names={d: "NVIDIA H100 80GB HBM3" for d in range(ranks)})
        caps.append(cap)
        for r in range(ranks):
            threads.append(cap.process(pid=6000 + r, device=r).thread())
            true0.append(0)
    else:
        base = Capture().utc_epoch_ns
        for r in range(ranks):
            skew = int(round((r // ranks_per_node) * node_skew_ms * MS))
            cap = Capture(utc_epoch_ns=base + r * stagger + skew)
            caps.append(cap)
            t = cap.process(pid=7000 + r, device=0).thread()
            t.at(cap.start_ns + (ranks - 1 - r) * stagger)  # every rank's first step at the same true time
            threads.append(t)
            true0.append(r * stagger)
    for i in range(steps):
        joined = []
        for r, t in enumerate(threads):
            t.push(f"ProfilerStep#{i}")
            with t.range("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"):
                wait_ms = (slow_input_ms if r == slow_rank else input_ms) + rng.uniform(0, jitter_us) / 1000
                t.os_call("poll", us=wait_ms * 1000)
            t.memcpy("HtoD", 4 << 20, pageable=False)
            compute_block(t, gemms=8, gemm_us=1500, small=8, small_us=40)
            t.wait_event(13, 7)
            joined.append(t.nccl("AllReduce", allreduce_us, stream=13))
        last = max(true0[r] + op.start for r, op in enumerate(joined))
        for r, (t, op) in enumerate(zip(threads, joined)):
            op.end = last + int(round(allreduce_us * US)) - true0[r]
            t.process.stream(t.process.default_device, 13).free_at = op.end
        for t in threads:
            t.wait_event(7, 13)
            t.launch(ADAM, 300)
            t.item()
            t.pop()
    return caps


def three_node_job_two_allreduces(absolute_timestamps: bool = True, slow_rank: int | None = 4,
                                  slow_ms: float = 10.0, ranks_per_node: int = 3,
                                  node_offsets_ms: tuple[float, ...] = (0.0, 0.6, 1.1),
                                  rank_offsets_us: tuple[float, ...] = (0, 20, -30, 10, -40, 35, -15, 25, 40),
                                  allreduces: int = 2, gemms: int = 20, gemm_us: float = 2000.0,
                                  allreduce_us: float = 3000.0, session_stagger_ms: float = 3.1) -> list[Capture]:
    """A short capture of a 9-rank, 3-node NCCL job, one export per rank, as ``nsys export
    --ts-normalize=true`` writes it (``absolute_timestamps``; else session-relative): no step
    markers, only ``allreduces`` all-reduces. Every rank runs ``gemms`` GEMMs of ``gemm_us`` then
    joins an all-reduce that ends ``allreduce_us`` after the last rank joins, then the optimizer and
    ``.item()``; ``slow_rank`` first spends ``slow_ms`` more on the host (untraced Python), so it
    joins every all-reduce ``slow_ms`` after the others.

    Clocks: rank r's clock is ahead of the true time by ``node_offsets_ms[r // ranks_per_node]`` +
    ``rank_offsets_us[r]``: its clock offset to rank 0 is the difference of the two ranks' errors.
    The instances of an all-reduce end together up to a per-rank 0–9 µs (``r * 7 % 10``), as NCCL
    kernels do. Rank r's session starts ``r * session_stagger_ms`` after rank 0's (true time), and
    its ``utcEpochNs`` is that start read on its own clock."""
    ranks = len(rank_offsets_us)
    stagger = int(round(session_stagger_ms * MS))
    base = Capture().utc_epoch_ns
    caps, threads, starts = [], [], []
    for r in range(ranks):
        err = int(round(node_offsets_ms[r // ranks_per_node] * MS + rank_offsets_us[r] * US))
        cap = Capture(utc_epoch_ns=base + r * stagger + err, absolute_timestamps=absolute_timestamps)
        caps.append(cap)
        t = cap.process(pid=9100 + r, device=0).thread()
        t.at(cap.start_ns + (ranks - 1 - r) * stagger)  # the work starts at one true time on every rank
        threads.append(t)
        starts.append(r * stagger)  # session start on the true timeline
    for _ in range(allreduces):
        joined = []
        for r, t in enumerate(threads):
            if r == slow_rank:
                t.cpu(us=slow_ms * 1000)
            compute_block(t, gemms=gemms, gemm_us=gemm_us, small=gemms, small_us=40)
            t.wait_event(13, 7)
            joined.append(t.nccl("AllReduce", allreduce_us, stream=13))
        last = max(starts[r] + op.start for r, op in enumerate(joined))
        for r, (t, op) in enumerate(zip(threads, joined)):
            op.end = last + int(round(allreduce_us * US)) + (r * 7 % 10) * US - starts[r]
            t.process.stream(t.process.default_device, 13).free_at = op.end
        for t in threads:
            t.wait_event(7, 13)
            t.launch(ADAM, 300)
            t.item()
    return caps


def unrelated_captures(hours_apart: float = 0.0, gpus: tuple[str, str] = ("NVIDIA H100 80GB HBM3",
                                                                          "NVIDIA GeForce RTX 3080")) -> list[Capture]:
    """Two captures that are not one job: a training run on ``gpus[0]`` and a kernel loop on
    ``gpus[1]`` (no NCCL in either), the second session starting ``hours_apart`` after the first."""
    a = healthy_training(steps=3)
    a.gpu_names = {0: gpus[0]}
    b = no_step_markers(launches=50)
    b.gpu_names = {0: gpus[1]}
    b.utc_epoch_ns = a.utc_epoch_ns + int(round(hours_apart * 3600 * 1e9))
    return [a, b]


def operators_forward_backward(steps: int = 2, cuda_backtrace: bool = False) -> Capture:
    """A PyTorch step recorded with operators, a record_function region, nn.Module and Python frames:
    on the main thread ``forward`` > ``train.py:40`` > ``Linear_0`` > ``model.py:12`` > ``aten::linear``
    (seq 7) > ``aten::addmm`` (seq 7) launching a 300 us GEMM, then ``aten::relu`` (seq 8, 20 us);
    a 50 us kernel launched under the step marker only (no operator); on the autograd thread
    ``autograd::engine::evaluate_function: AddmmBackward0`` > ``AddmmBackward0`` (seq 7) >
    ``aten::mm`` launching a 400 us GEMM. Numbers in tests/test_attribution.py are computed by hand
    from these durations."""
    cap = Capture(cuda_backtrace=cuda_backtrace)
    p = cap.process()
    main = p.thread()
    bwd = p.thread(tid=4243, name="autograd")
    for i in range(steps):
        with main.range(f"ProfilerStep#{i}"):
            with main.range("forward"):
                with main.frame("train.py", 40, "<module>"), main.module("Linear_0"), \
                        main.frame("model.py", 12, "forward"):
                    with main.op("aten::linear", seq=7 + 10 * i):
                        main.cpu(us=10)
                        with main.op("aten::addmm", seq=7 + 10 * i):
                            main.launch("gemm_kernel", us=300)
                        main.cpu(us=5)
                    with main.op("aten::relu", seq=8 + 10 * i):
                        main.launch("relu_kernel", us=20)
            main.launch("orphan_kernel", us=50)
            main.cpu(us=100)
            bwd.at(main.now_ns)
            with bwd.op("autograd::engine::evaluate_function: AddmmBackward0", seq=7 + 10 * i, backward=True), \
                    bwd.op("AddmmBackward0", seq=7 + 10 * i, backward=True), bwd.op("aten::mm"):
                bwd.launch("gemm_bwd_kernel", us=400)
            main.at(bwd.now_ns)
            main.sync_device()
            main.cpu(us=200)
    return cap


def where_tiny_kernels_and_item(steps: int = 3) -> Capture:
    """Per step, from ``train.py:55`` 400 ``aten::add_`` kernels of 4 us and from ``train.py:56``
    200 ``aten::mul`` kernels of 2 us (optimizer-like floods of tiny kernels), a 3 ms GEMM in
    ``aten::mm``, then ``loss.item()`` at ``train.py:60`` (``aten::item`` >
    ``aten::_local_scalar_dense``), which blocks until the GEMM ends, and 800 us of Python."""
    cap = Capture(cuda_backtrace=True)
    main = cap.process().thread()
    for i in range(steps):
        with main.range(f"ProfilerStep#{i}"):
            with main.frame("train.py", 50, "<module>"), main.op("aten::mm"):
                main.launch("gemm_kernel", us=3000)
            with main.frame("train.py", 55, "<module>"):
                for _ in range(400):
                    with main.op("aten::add_"):
                        main.launch("add_kernel", us=4, api_us=3)
            with main.frame("train.py", 56, "<module>"):
                for _ in range(200):
                    with main.op("aten::mul"):
                        main.launch("mul_kernel", us=2, api_us=3)
            with main.frame("train.py", 60, "<module>"), main.op("aten::item"), main.op("aten::_local_scalar_dense"):
                main.item()
            main.cpu(us=800)
    return cap


def native_app_backtraces(steps: int = 4) -> Capture:
    """A C++ CUDA program captured with ``--cudabacktrace=all``: per iteration ``Solver::step()``
    of ``my_solver`` launches a 2 ms stencil kernel and ``Solver::residual()`` a 1 ms reduction,
    then ``main`` calls ``cudaDeviceSynchronize`` and spends 300 us on the CPU. No NVTX."""
    cap = Capture(cuda_backtrace=True)
    t = cap.process(name="my_solver").thread()
    with t.native("main", "/opt/app/bin/my_solver"):
        for _ in range(steps):
            with t.native("Solver::step()", "/opt/app/bin/my_solver"):
                t.launch("stencil_kernel", us=2000)
            with t.native("Solver::residual()", "/opt/app/lib/libsolver.so"):
                t.launch("reduce_kernel", us=1000)
            t.sync_device()
            t.cpu(us=300)
    return cap


#: Three CUTLASS GEMMs nsys names ``Kernel`` (the generic short name of ``cutlass::Kernel<...>``).
CUTLASS_GEMMS = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>"
    "(cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4::Params)",
    "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>"
    "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8::Params)",
    "void cutlass::Kernel<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(cutlass_80_simt_sgemm_64x64_8x5_tn_align1::Params)",
)


def cutlass_gemm_family(steps: int = 4, gemm_us: tuple[float, ...] = (900.0, 600.0, 300.0),
                        calls: tuple[int, ...] = (2, 1, 3), small_us: float = 50.0) -> Capture:
    """A model built on CUTLASS: per step, GEMM i of :data:`CUTLASS_GEMMS` runs ``calls[i]`` times
    for ``gemm_us[i]`` µs (all with nsys short name ``Kernel``), then one elementwise kernel and a
    ``loss.item()``."""
    cap = Capture()
    t = cap.process(pid=4600).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            for name, us, n in zip(CUTLASS_GEMMS, gemm_us, calls):
                for _ in range(n):
                    t.cpu(us=20)
                    t.launch(name, us, short_name="Kernel", tensor_active=0.5)
            t.launch(ELEMENTWISE, small_us)
            t.item()
    return cap


def event_wait_on_other_gpu(steps: int = 6, producer_us: float = 20_000.0, local_us: float = 1_000.0,
                            consumer_us: float = 2_000.0) -> Capture:
    """One thread feeds two GPUs. Each step it launches a long producer kernel on GPU 1 (stream 9)
    and a short kernel on GPU 0 (stream 7), then makes GPU 0's stream wait for the producer
    (cudaEventRecord + cudaStreamWaitEvent, a device-side wait), launches the consumer on GPU 0 at
    once (both inside an NVTX range ``consume_from_gpu1``) and reads a scalar from it
    (``loss.item()``). GPU 0 sits idle from the end of its short
    kernel until the producer on GPU 1 ends although its next kernel was launched long before:
    GPU-side dependency idle. (On one GPU the producer would keep the device busy: an idle GPU that
    waits on another stream's work waits on something outside it.)"""
    cap = Capture(gpu_names={0: "NVIDIA A100-SXM4-80GB", 1: "NVIDIA A100-SXM4-80GB"})
    t = cap.process(pid=4600, device=0).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            t.launch("producer_kernel", producer_us, stream=9, device=1)
            t.launch("local_kernel", local_us, stream=7, device=0)
            with t.range("consume_from_gpu1"):
                t.wait_event(7, 9, device=0, on_device=1)
                t.launch("consumer_kernel", consumer_us, stream=7, device=0)
            t.item(stream=7, device=0)
    return cap


def sync_outlasts_recorded_work(kernels: int = 60, kernel_us: float = 500.0, cpu_before_sync_us: float = 28_115.0,
                                sync_us: float = 29_000.0) -> Capture:
    """An incomplete capture (issue 46, item 5): ``kernels`` kernels run back to back, then a
    ``cudaStreamSynchronize`` lasts ``sync_us`` although the recorded kernels end 1 ms into it:
    the host waited on GPU work the capture does not hold."""
    cap = Capture()
    t = cap.process(pid=4700).thread()
    for _ in range(kernels):
        t.cpu(us=10)
        t.launch(GEMM, kernel_us)
    t.cpu(us=cpu_before_sync_us)
    t.api("cudaStreamSynchronize_v3020", us=sync_us)
    return cap


def sliver_of_gpu_work_in_long_program(kernels: int = 62, kernel_us: float = 2.5, python_us: float = 75.0,
                                       context_ms: float = 400.0, host_after_ms: float = 100.0) -> Capture:
    """A sliver of GPU work (issue 46, item 6): ``kernels`` tiny kernels (62 x 2.5 us = 0.155 ms)
    with per-launch Python between them, in a ~505 ms program that creates its context first
    (``context_ms``) and then runs ``host_after_ms`` of host code with no CUDA call."""
    cap = Capture()
    t = cap.process(pid=4800).thread()
    t.api("cudaFree_v3020", us=context_ms * 1000)
    for _ in range(kernels):
        t.cpu(us=python_us)
        t.launch(ELEMENTWISE, kernel_us)
    t.sync_device()
    t.cpu(us=host_after_ms * 1000)
    t.api("cudaFree_v3020", us=50)
    return cap


def vector_add_host_init_and_verify(init_ms: float = 3000.0, verify_ms: float = 2000.0, nbytes: int = 12_000_000,
                                    kernel_us: float = 500.0) -> Capture:
    """A vector-add program (issue 46, item 7): context creation (a 50 ms cudaMalloc) and two more
    allocations, ``init_ms`` of host initialisation with no CUDA call, two synchronous HtoD copies,
    the kernel, a synchronous DtoH copy, ``verify_ms`` of host verification, three cudaFree."""
    cap = Capture()
    t = cap.process(pid=4900, name="vector_add").thread()
    t.malloc(us=50_000)
    t.malloc(us=200)
    t.malloc(us=200)
    t.cpu(us=init_ms * 1000)
    t.memcpy("HtoD", nbytes, asynchronous=False)
    t.memcpy("HtoD", nbytes, asynchronous=False)
    t.launch("vectorAdd(const float *, const float *, float *, int)", kernel_us)
    t.memcpy("DtoH", nbytes, asynchronous=False)
    t.cpu(us=verify_ms * 1000)
    for _ in range(3):
        t.free(us=300)
    return cap


SCENARIOS: dict[str, Callable[..., Capture]] = {
    f.__name__: f for f in (
        healthy_training, launch_bound_small_kernels, dataloader_starvation, sync_storm, pageable_h2d,
        ddp_nccl, dominant_kernel, no_step_markers, irregular_work, seed_case_augmentation, seed_case_large_model,
        pseudo_busy, sample_training, weight_streaming, allocator_churn, jit_warmup_then_steady,
        host_work_between_steps, sync_then_dependent_cpu_work, steady_training, operators_forward_backward,
        where_tiny_kernels_and_item, native_app_backtraces, cutlass_gemm_family, event_wait_on_other_gpu,
        # issue 46, item 8
        one_kernel_76pct_no_steps, one_kernel_92pct, dominant_kernel_uneven_steps, nccl_kernel_dominates,
        tiny_kernel_flood_559,
        # issue 46, items 5, 6, 7
        sync_outlasts_recorded_work, sliver_of_gpu_work_in_long_program, vector_add_host_init_and_verify,
    )
}

# issue 47: the memory view's scenarios (rule cases name them)
from .memory_scenarios import MEMORY_SCENARIOS  # noqa: E402

SCENARIOS.update(MEMORY_SCENARIOS)

# ---------------------------------------------------------------------------------------------
# issue 47, items 3 and 5: the CPU-side operator view and gradient zeroing per optimizer step
# ---------------------------------------------------------------------------------------------
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char *, 1>>(int, at::native::FillFunctor<float>, at::detail::Array<char *, 1>)"


def launch_bound_dispatch_heavy_ops(steps: int = 3, calls: int = 200, python_us: float = 40.0,
                                    kernel_us: float = 4.0, gemm_us: float = 3000.0, item_op: bool = False) -> Capture:
    """An eager loop whose ``aten::add_`` costs more CPU per call than its kernel runs: per step
    (``ProfilerStep#i``) one ``aten::mm`` launching a ``gemm_us`` GEMM (CPU 1 + 5 + 1 = 7 µs per
    call, far below its GPU time), with ``item_op`` an ``aten::item`` right after it (a 4-byte
    copy and a stream sync that waits for the GEMM), then ``calls`` ``aten::add_``, each
    ``python_us`` of dispatch then a ``kernel_us`` kernel (CPU 1 + ``python_us`` + 5 + 1 µs per
    call), then ``item()``."""
    cap = Capture()
    t = cap.process(pid=4710).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            with t.op("aten::mm"):
                t.launch(GEMM, gemm_us)
            if item_op:
                with t.op("aten::item"):
                    t.item()
            for _ in range(calls):
                with t.op("aten::add_"):
                    t.cpu(us=python_us)
                    t.launch(ELEMENTWISE, kernel_us)
            t.item()
    return cap


def zero_grad_every_micro_batch(steps: int = 3, micro: int = 4, every: bool = True, fill_us: float = 20.0,
                                set_to_none: bool = False, gemm_us: float = 1000.0) -> Capture:
    """Gradient accumulation over ``micro`` micro-batches per optimizer step (``ProfilerStep#i``):
    ``Optimizer.zero_grad#SGD.zero_grad`` before every micro-batch (``every``) or before the first
    only, each launching one ``fill_us`` fill kernel (none with ``set_to_none``); each micro-batch
    a ``gemm_us`` GEMM; then ``Optimizer.step#SGD.step`` launching a 100 µs kernel, and ``item()``."""
    cap = Capture()
    t = cap.process(pid=4720).thread()
    for i in range(steps):
        with t.range(f"ProfilerStep#{i}"):
            for m in range(micro):
                if every or m == 0:
                    with t.range("Optimizer.zero_grad#SGD.zero_grad"):
                        t.cpu(us=10)
                        if not set_to_none:
                            t.launch(FILL, fill_us)
                t.launch(GEMM, gemm_us)
            with t.range("Optimizer.step#SGD.step"):
                t.launch(ELEMENTWISE, 100)
            t.item()
    return cap


SCENARIOS.update({f.__name__: f for f in (launch_bound_dispatch_heavy_ops, zero_grad_every_micro_batch)})

# issue 47: operators' input shapes across steps (nsysdoc/testing/shape_scenarios.py)
from .shape_scenarios import SHAPE_SCENARIOS  # noqa: E402

SCENARIOS.update(SHAPE_SCENARIOS)


def nccl_partly_overlapped(starts_ms=(1, 3, 5, 8, 10)) -> Capture:
    """Issue 49: one GPU whose all-reduce is partly hidden behind compute. Step ``i`` (an NVTX
    ``ProfilerStep#i``) starts at ``T0 + starts_ms[i]`` ms, so step 2 (5 -> 8 ms) is the slowest.
    In every step, at host time ``a``: a 300 us GEMM on stream 7 (``[a+5, a+305)`` us), a 900 us
    all-reduce on stream 13 (``[a+11.8, a+911.8)``), 400 us of CPU work, a 50 us fill kernel on
    stream 7 (``[a+418, a+468)``), stream 7 waits for stream 13, a 100 us Adam kernel
    (``[a+911.8, a+1011.8)``), a stream sync. The all-reduce runs alone on the GPU during
    ``[a+305, a+418)`` and ``[a+468, a+911.8)`` us: two exposed stretches per step."""
    cap = Capture(gpu_names={0: "NVIDIA A100-SXM4-80GB"})
    t = cap.process(pid=5100, device=0).thread()
    for i, ms in enumerate(starts_ms):
        t.at(cap.start_ns + int(ms * 1_000_000))
        with t.range(f"ProfilerStep#{i}"):
            t.launch(GEMM, 300)
            t.nccl("AllReduce", 900, stream=13)
            t.cpu(400)
            t.launch(FILL, 50)
            t.wait_event(7, 13)
            t.launch(ADAM, 100)
            t.sync_stream(7)
    return cap


SCENARIOS["nccl_partly_overlapped"] = nccl_partly_overlapped
