"""Run the per-rank summaries: in this process, on a local process pool, or on a Dask cluster.

Only :func:`nsysdoc.job.summary.summarize_file`'s small results come back; each worker reads its
rank's capture from storage it can see (on Dask, the paths must be valid on the workers).
``progress(done, total, record)`` is called as each capture finishes, in completion order.
"""
from __future__ import annotations

import os
from typing import Callable

from ..errors import InputError
from .summary import summarize_file

Progress = Callable[[int, int, list], None]
DASK_HINT = "install the extra: pip install 'nsysdoc[dask]'"


def _default_jobs(n: int) -> int:
    return max(1, min(n, os.cpu_count() or 1))


def run_local(files: list[str], options: dict, jobs: int | None = None,
              progress: Progress | None = None) -> list[list[dict]]:
    """Summaries per file, in the order of ``files``. ``jobs`` = 1 runs in this process."""
    jobs = _default_jobs(len(files)) if jobs is None else max(1, jobs)
    out: list[list[dict] | None] = [None] * len(files)
    if jobs == 1 or len(files) == 1:
        for i, f in enumerate(files):
            out[i] = summarize_file(f, options)
            if progress:
                progress(i + 1, len(files), out[i])
        return out  # type: ignore[return-value]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn: workers start clean (no inherited threads or open SQLite handles), on every platform.
    # Workers ignore Ctrl-C (the terminal sends it to the whole process group): the parent stops
    # them, so an interrupted job ends at once, without a traceback from each worker.
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(files)), mp_context=multiprocessing.get_context("spawn"),
                               initializer=_ignore_sigint)
    try:
        futs = {pool.submit(summarize_file, f, options): i for i, f in enumerate(files)}
        for done, fut in enumerate(as_completed(futs), 1):
            i = futs[fut]
            try:
                out[i] = fut.result()
            except Exception as exc:  # the worker process died (killed, out of memory)
                out[i] = [{"file": files[i], "ok": False, "error": f"worker failed: {type(exc).__name__}: {exc}"}]
            if progress:
                progress(done, len(files), out[i])
    except BaseException:  # Ctrl-C, or the caller's progress callback failed: stop, do not wait
        terminate_pool(pool)
        raise
    pool.shutdown(wait=True)
    return out  # type: ignore[return-value]


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def terminate_pool(pool) -> None:
    """Cancel what has not started and terminate the worker processes (not waiting for them)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    try:
        pool.shutdown(wait=False, cancel_futures=True)
    except Exception:
        pass
    for p in procs:
        try:
            p.terminate()
        except Exception:
            pass
    for p in procs:
        try:
            p.join(0.5)
            if p.is_alive():
                p.kill()
        except Exception:
            pass


def run_dask(files: list[str], options: dict, address: str, progress: Progress | None = None) -> list[list[dict]]:
    """The same on an existing Dask cluster (``tcp://scheduler:8786``)."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise InputError("--dask needs dask.distributed, which is not installed", hint=DASK_HINT)
    try:
        client = Client(address, timeout="20s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"cannot connect to the Dask scheduler at {address}: {exc}")
    out: list[list[dict] | None] = [None] * len(files)
    try:
        futs = [client.submit(summarize_file, f, options, key=f"nsysdoc-rank-{i}-{abs(hash(f))}", pure=False)
                for i, f in enumerate(files)]
        index = {fut.key: i for i, fut in enumerate(futs)}
        for done, fut in enumerate(as_completed(futs), 1):
            i = index[fut.key]
            try:
                out[i] = fut.result()
            except Exception as exc:  # the task failed on the worker (e.g. nsysdoc missing there)
                out[i] = [{"file": files[i], "ok": False,
                           "error": f"Dask task failed: {type(exc).__name__}: {str(exc)[:200]}"}]
            if progress:
                progress(done, len(files), out[i])
    finally:
        client.close()
    return out  # type: ignore[return-value]
