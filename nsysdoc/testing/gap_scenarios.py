"""Scenarios of issue 46 (Judgement III) about idle gaps: gaps ended by an operation nobody
launched, and a synchronous copy followed by long host work. Same conventions as
:mod:`nsysdoc.testing.scenarios` (defaults chosen so that tests compute every number by hand);
``GAP_SCENARIOS`` maps names to functions. They are not in ``scenarios.SCENARIOS`` (no golden
output of their own)."""
from __future__ import annotations

from typing import Callable

from .builder import MS, US, Capture

KMEANS_ASSIGN = "assign_clusters_kernel(float const*, float const*, int*, int, int)"
SAXPY = "saxpy(int, float, float const*, float*)"


def unified_memory_migrations_host_bound(iterations: int = 5, kernel_us: float = 2000.0, cpu_ms: float = 20.0,
                                         migrations: int = 10, migration_us: float = 50.0,
                                         first_migration_ms: float = 0.5, migration_every_ms: float = 1.5) -> Capture:
    """A unified-memory clustering program: per iteration (NVTX ``iteration i``) the main thread
    launches one kernel, waits for it (``cudaDeviceSynchronize``), then runs ``cpu_ms`` of CPU code
    with no CUDA call that touches managed memory: each CPU page fault migrates pages back
    (``migrations`` device-to-host unified-memory copies of ``migration_us``, the first
    ``first_migration_ms`` after the sync returns, then every ``migration_every_ms``). No API
    call launched the migrations (their correlation ids have no runtime row), so every gap they
    end has no known launching call; the expert reading is host-bound. One closing kernel after
    the loop ends the last iteration's last gap with a known launch."""
    cap = Capture()
    p = cap.process(pid=5800, name="kmeans_um")
    t = p.thread()
    for i in range(iterations):
        with t.range(f"iteration {i}"):
            t.launch(KMEANS_ASSIGN, kernel_us)
            t.sync_device()
            back = t.now_ns
            for k in range(migrations):
                p.unlaunched_copy(back + int((first_migration_ms + k * migration_every_ms) * MS), migration_us,
                                  kind="UVM DtoH", nbytes=64 << 10)
            t.cpu(us=cpu_ms * 1000)
    t.launch(KMEANS_ASSIGN, kernel_us)
    t.sync_device()
    return cap


def sync_copy_then_mpi_host_work(iterations: int = 5, nbytes: int = 262_144_000, kernel_us: float = 1000.0,
                                 host_ms: float = 170.0) -> Capture:
    """An MPI+CUDA saxpy: per iteration (NVTX ``iteration i``) a synchronous ``cudaMemcpy`` of
    ``nbytes`` host→device (pinned, 12 GB/s), the saxpy kernel, a synchronous copy of the result
    back, then ``host_ms`` of MPI and CPU code with no CUDA call (plain host time: no OS wait
    either). The copy back blocks the host while the GPU copies; the GPU then stays idle for the
    whole host phase, which the sync does not cause."""
    cap = Capture()
    t = cap.process(pid=5900, name="mpi_saxpy").thread()
    for i in range(iterations):
        with t.range(f"iteration {i}"):
            t.memcpy("HtoD", nbytes, asynchronous=False)
            t.launch(SAXPY, kernel_us)
            t.memcpy("DtoH", nbytes, asynchronous=False)
            t.cpu(us=host_ms * 1000)
    return cap


GAP_SCENARIOS: dict[str, Callable[..., Capture]] = {
    f.__name__: f for f in (unified_memory_migrations_host_bound, sync_copy_then_mpi_host_work)
}

__all__ = ["GAP_SCENARIOS", "unified_memory_migrations_host_bound", "sync_copy_then_mpi_host_work", "US"]
