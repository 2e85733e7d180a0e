"""The report result (the JSON contract, docs/json.md) assembled from the engine's run.

:func:`assemble` takes the trace, the engine's run (which holds its plan) and the step pattern
and returns the result
and the whole tables it shows only the top of (it imports nothing above it: ``nsysdoc.analysis``
calls it); it lays out the sections; the numbers are computed in :mod:`.sections`,
:mod:`.capture` and :mod:`.values`, the JSON number rules in :mod:`.numbers`. The layout of the
result changes only with :data:`CONTRACT`."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..version import __version__
from ..metrics import host as host_m
from ..metrics.copies import copy_table_from
from ..engine.run import nvtx_summary
from ..trace.allocator import release_between_phases
from ..metrics.steps import job_step_times, pick_steps
from ..rules.policy import HOST_JUDGE_MIN_WINDOW_MS
from .capture import _capture, _judgeable
from .numbers import _median, _num, _records
from .sections import _operators_by_shape
from .sections import (_attribution, _capture_extent, _comm_metrics, _devices, _gap_metrics, _host_wait,
                       _kernel_metrics, _launch, _setup_metrics, _steps, _sync_metrics, _underfilled)
from .values import _values
from .memory import memory_metrics
from .critical_path import critical_path_metrics
from .exposed import exposed_comm_metrics
from .inputs import Inputs


#: Version of the JSON contract (docs/json.md): ``nsysdoc diff`` refuses reports of another one.
#: 4 (issues 44, 46): steps partition their thread's timeline (``steps[].start_ns``/``duration_ms``
#: and the summary's step times, the job step), ``steps[].host_sync_ms`` is a union over the
#: launching threads, and the idle classes sync/host/unattributed were redefined; keys only added.
CONTRACT = 4


def assemble(trace, run, step_pattern: str) -> tuple[dict, dict]:
    """The report result of the engine's ``run`` (of its ``plan``) over ``trace`` (findings empty:
    the rules fill them), and the whole tables it shows only the top of (``kernels``: every kernel
    name of the window, ``nsysdoc.metrics.kernels.kernel_tables``). The run is read through
    ``a.engine`` only (issue 51)."""
    a = Inputs(trace=trace, engine=run, step_pattern=step_pattern)
    res = a.engine
    t = a.trace
    steps = a.steps
    w0, w1 = steps.window_start_ns, steps.window_end_ns
    window_ns = steps.window_ns
    # the kernel statistics (exact medians and p95 per name: the longest part here, mostly sorts
    # and selections that release the GIL) on a thread of their own while the other sections are
    # computed (20 M steps-ops, warm: 2.6 -> 1.9 s; the launch arrays and the kernel arrays are
    # then held at once, 18 bytes a kernel, inside the run's own peak)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsysdoc-kernels") as pool:
        kernels_ahead = pool.submit(_kernel_metrics, t, res, a.tables)
        devices = _devices(a, window_ns)
        step_rows = _steps(a)
        primary = [r for r in step_rows if r["primary"]]
        launch = _launch(res.window)
        judgeable, why_not = _judgeable(devices, window_ns / 1e6 if window_ns else None)
        extent = _capture_extent(t, a.span[0])
        sync = _sync_metrics(a, primary)
        copies = _records(copy_table_from(res.window.copies))
        idle_gaps = _gap_metrics(a, devices)
        alloc = _records(host_m.calls_table_from(res.window.alloc_calls, t.strings)) if w0 is not None else []
        setup = _setup_metrics(a, devices, extent)
        nvtx = nvtx_summary(res, w0, w1)
        # issue 50 (warm fixed costs): the sections that do not read the kernel statistics are
        # computed here too, before waiting on their thread (the wait was 0.12 s of a 1.5 s warm
        # run at 2 M kernels); each reads the run and the rows above, never another's output, and
        # they enter the result in the same key order as before
        picks = pick_steps(a.steps.table)
        quality = _capture(a, judgeable, why_not, extent)
        underfilled = _underfilled(a, devices, window_ns)
        memory = memory_metrics(a, step_rows)  # issue 47
        exposed = exposed_comm_metrics(a, step_rows, picks)  # issue 49
        # the critical path reads the kernel statistics only for its what-ifs, at its end: it is
        # given the thread's result to wait on there, not before its step graphs are walked
        # critical_path_metrics still takes the run beside ``a`` (assembly/critical_path.py: another part of issue 51 edits it)
        critical = critical_path_metrics(a, step_rows, picks, res, kernels=kernels_ahead.result, copies=copies,
                                         devices=devices)  # issue 48
        kernel_metrics = kernels_ahead.result()
    picked_time = next((r["step_time_ms"] for r in primary if r["step"] == picks[0]), None)
    job_times = job_step_times([r["job_index"] for r in primary], [r["step_time_ms"] for r in primary])
    threads_steps = np.unique([r["global_tid"] for r in primary], return_counts=True)[1] if primary \
        else np.zeros(0, np.int64)
    busy_vals = [d["busy_pct"] for d in devices if d["busy_pct"] is not None and d["kernel_count"] + d["copy_count"] > 0]
    summary = {
        # a busy share of a window with a handful of GPU operations says nothing, unless the window
        # is long: then it says how little the GPU did (host-side judgement, rules.policy)
        "gpu_busy_pct": _num(float(np.mean(busy_vals)) if busy_vals and (
            judgeable or (window_ns or 0) / 1e6 >= HOST_JUDGE_MIN_WINDOW_MS) else None),
        "step_count": int(threads_steps.max()) if len(threads_steps) else 0,
        # one step time everywhere (report, verdict, diff, job): the job step time, per step
        # index the slowest process's (one process: its own)
        "step_time_ms_median": _num(picked_time),
        "step_time_ms_mean": _num(float(np.mean(job_times))) if len(job_times) else None,
        "kernel_count": kernel_metrics["count"],
        "kernels_per_step_median": _num(_median([r["kernel_count"] for r in primary])),
    }
    metrics = {
        "kernels": kernel_metrics,
        "launch": launch,
        "sync": sync,
        "copies": copies,
        "idle_gaps": idle_gaps,
        "alloc_calls": alloc,
        "setup": setup,
        "communication": _comm_metrics(devices),
        "host_wait_pct": _host_wait(devices, window_ns),
        "gpu_metrics": {"present": bool(len(t.gpu_metrics))},
        "step_picks": dict(zip(("median_step", "worst_step"), picks)),
        "nvtx": nvtx,
    }
    metrics["operators"], metrics["where"] = _attribution(a, devices, kernel_metrics)
    # issue 47: operators by input shape, and the values of rules dynamic-shapes and cudnn-benchmark
    release_between_phases()  # (the operator view's temporaries: issue 50)
    metrics["operators_by_shape"], shape_values = _operators_by_shape(a, kernel_metrics)
    metrics["underfilled"] = underfilled
    metrics["memory"] = memory
    metrics["critical_path"] = critical
    metrics["exposed_comm"] = exposed
    result = {
        "nsysdoc_version": __version__,
        "contract": CONTRACT,
        "source": {"path": t.path, "tool": t.source_tool, "nsys_version": t.nsys_version,
                   "schema_version": t.schema_version},
        "capture": quality,
        "summary": summary,
        "devices": devices,
        "steps": step_rows,
        "metrics": metrics,
        "findings": [],
    }
    metrics["values"] = _values(a, result)
    metrics["values"].update(shape_values)
    return result, a.tables


__all__ = ["CONTRACT", "Inputs", "assemble"]
