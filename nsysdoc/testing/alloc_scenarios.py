"""Scenarios of issue 46 item 3: allocator growth is set-up, allocation churn is repetition.

Each function returns a :class:`~nsysdoc.testing.Capture` of a situation users reported (not the
tool's output); tests compute the expected numbers by hand from the arguments, the builder's
timing model (``docs/testing.md``, header of ``tests/test_judgement_scenarios.py``) and
``docs/glossary.md`` ("allocation repeats"):

* ``allocator_growth_first_step``: the caching allocator grows in the first step (a
  ``cudaMalloc`` before each layer's kernel, no ``cudaFree``), the later steps reuse its blocks;
* ``cublas_workspace_first_call``: a forward loop whose first ``aten::addmm`` creates the cuBLAS
  handle and its workspace, the allocator releasing cached blocks and allocating again on the way;
* the churn they must not be confused with is ``scenarios.allocator_churn`` (``cudaFree`` and
  ``cudaMalloc`` after every kernel of every step).
"""
from __future__ import annotations

from typing import Callable

from .builder import Capture
from .scenarios import ELEMENTWISE, GEMM


def allocator_growth_first_step(steps: int = 4, layers: int = 20, kernel_us: float = 100.0,
                                malloc_us: float = 200.0, markers: bool = True) -> Capture:
    """A cold first step: before each of ``layers`` kernels the caching allocator asks the driver
    for a new block (``cudaMalloc`` of ``malloc_us``, the GPU idle meanwhile); the later steps
    launch the same kernels from the blocks it keeps. No ``cudaFree`` anywhere: growth, not churn.
    With ``markers`` each step is an NVTX range ``ProfilerStep#i`` ending in ``item()``; without,
    the same calls with no ranges (a cold forward with no step markers)."""
    cap = Capture()
    t = cap.process(pid=4610).thread()
    for i in range(steps):
        rng = t.range(f"ProfilerStep#{i}") if markers else None
        if rng is not None:
            rng.__enter__()
        for _ in range(layers):
            if i == 0:
                t.malloc(us=malloc_us)
            t.launch(ELEMENTWISE, kernel_us)
        t.item()
        if rng is not None:
            rng.__exit__(None, None, None)
    return cap


def cublas_workspace_first_call(iters: int = 20, embed_us: float = 100.0, gemm_us: float = 500.0,
                                weights_malloc_us: float = 200.0, free_us: float = 300.0,
                                malloc_us: float = 200.0, retries: int = 3, every_call: bool = False) -> Capture:
    """A forward loop without step markers: the weights are allocated once (``cudaMalloc``), then
    each iteration runs ``aten::embedding`` (a ``embed_us`` kernel) and ``aten::addmm`` (a
    ``gemm_us`` GEMM). The first ``aten::addmm`` creates the cuBLAS handle and its workspace: the
    caching allocator, short of a block that size, releases cached blocks and allocates again
    (``cudaFree`` of ``free_us`` then ``cudaMalloc`` of ``malloc_us``, ``retries`` times) while the
    GPU has only the first embedding kernel. Later calls reuse the workspace: nothing repeats.
    ``every_call``: the control - every ``aten::addmm`` frees and allocates again (churn)."""
    cap = Capture()
    t = cap.process(pid=4620).thread()
    t.malloc(us=weights_malloc_us)
    for i in range(iters):
        with t.op("aten::embedding"):
            t.launch(ELEMENTWISE, embed_us)
        with t.op("aten::addmm"):
            if i == 0 or every_call:
                for _ in range(retries):
                    t.free(us=free_us)
                    t.malloc(us=malloc_us)
            t.launch(GEMM, gemm_us)
    t.item()
    return cap


ALLOC_SCENARIOS: dict[str, Callable[..., Capture]] = {
    f.__name__: f for f in (allocator_growth_first_step, cublas_workspace_first_call)
}
