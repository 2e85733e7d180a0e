"""Compute every metric of a capture and assemble the JSON contract.

``analyze(trace)`` is the library entry point behind ``nsysdoc report``; it returns an
:class:`Analysis` whose ``to_dict()`` is the documented JSON (``docs/json.md``). Heavy arrays stay
on the object for renderers (timeline) and rules; the dict holds plain numbers and short tables.
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import __version__
from .metrics import capture as capture_m
from .metrics import gpu as gpu_m
from .metrics import host as host_m
from .metrics import intervals as iv
from .metrics.copies import copy_table
from .metrics.gpu_metrics import METRICS as GPU_METRIC_NAMES
from .metrics.gpu_metrics import window_means
from .metrics.kernels import kernel_summary, kernels_by_name
from .metrics.ops import KIND_KERNEL, KIND_MEMCPY, GpuOps, build_gpu_ops
from .metrics.steps import Steps, assign_ops_to_steps, build_steps, compile_step_pattern, step_ranges
from .trace import Trace
from .trace import schema as S

TOP_N = 50


def _num(x):
    """Plain JSON number: floats rounded to 4 decimals, NaN/inf -> None."""
    if x is None:
        return None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if math.isnan(x) or math.isinf(x):
            return None
        return round(x, 4)
    return x


def _records(df: pd.DataFrame) -> list[dict]:
    return [{k: _num(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def _median(values) -> float | None:
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    return float(np.median(values)) if len(values) else None


@dataclass
class Analysis:
    trace: Trace
    step_pattern: str
    steps: Steps
    ops: GpuOps
    op_step: np.ndarray
    activity: gpu_m.Activity | None
    gaps: gpu_m.Gaps | None
    host: gpu_m.HostUnions | None
    blocking: np.ndarray
    scalar_reads: np.ndarray
    result: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return self.result


def analyze(trace: Trace, step_pattern: str | None = None) -> Analysis:
    pattern = compile_step_pattern(step_pattern)
    strings = trace.strings
    kernels, memcpy, memset, runtime = trace.kernels, trace.memcpy, trace.memset, trace.runtime
    nccl_flag = strings.flags(lambda v: S.NCCL_KERNEL.match(v) is not None)
    kernel_is_nccl = nccl_flag(kernels["short_id"].to_numpy()) | nccl_flag(kernels["name_id"].to_numpy()) \
        if len(kernels) else np.zeros(0, dtype=bool)
    ops = build_gpu_ops(kernels, memcpy, memset, runtime, kernel_is_nccl, trace.threads["global_tid"].to_numpy())
    when = np.where(ops.api_start_ns >= 0, ops.api_start_ns, ops.start_ns)
    ranges = step_ranges(trace.nvtx, pattern)
    steps = build_steps(ranges, trace.processes["global_pid"].to_numpy(np.int64), ops.proc, when,
                        ops.start_ns, ops.end_ns)
    op_step = assign_ops_to_steps(steps, ops.proc, when) if steps.has_markers else np.full(len(ops), -1)
    del when
    w0, w1 = steps.window_start_ns, steps.window_end_ns
    ndev = len(trace.devices)
    # Kernel statistics do not depend on the interval work below: compute them on a second core
    # (numpy releases the GIL in sorts and reductions).
    with ThreadPoolExecutor(max_workers=1) as pool:
        kfut = pool.submit(_kernel_metrics, trace, kernel_is_nccl, w0, w1)
        lfut = pool.submit(host_m.launch_path, ops, _in_window(ops.start_ns, w0, w1))
        blocking = host_m.blocking_api_mask(runtime, memcpy, ops)
        scalar = host_m.scalar_read_mask(runtime, memcpy, ops, blocking)
        activity = gaps = host = None
        if w0 is not None and w1 is not None and w1 > w0 and ndev:
            activity = gpu_m.device_activity(ops, ndev, w0, w1)
            host = host_m.host_unions(runtime, trace.osrt, trace.nvtx, blocking, trace.threads["global_tid"].to_numpy())
            gaps = gpu_m.classify_gaps(ops, activity, host, w0, w1)
        a = Analysis(trace, pattern.pattern, steps, ops, op_step, activity, gaps, host, blocking, scalar)
        kernel_metrics, launch = kfut.result(), lfut.result()
    a.result = _assemble(a, kernel_metrics, launch)
    return a


def _in_window(start_ns: np.ndarray, w0: int | None, w1: int | None) -> np.ndarray:
    if w0 is None or w1 is None:
        return np.zeros(len(start_ns), dtype=bool)
    return (start_ns >= w0) & (start_ns < w1)


def _kernel_metrics(trace: Trace, is_nccl: np.ndarray, w0: int | None, w1: int | None) -> dict:
    k = trace.kernels
    start = k["start_ns"].to_numpy(np.int64)
    sel = _in_window(start, w0, w1)
    every = bool(sel.all())
    dur = k["end_ns"].to_numpy(np.int64) - start
    if not every:
        dur, nccl = dur[sel], is_nccl[sel]
    else:
        nccl = is_nccl
    short = k["short_id"].to_numpy()
    name = k["name_id"].to_numpy()
    if not every:
        short, name = short[sel], name[sel]
    return {
        **{key: _num(v) for key, v in kernel_summary(dur).items()},
        "nccl_count": int(nccl.sum()),
        "by_short_name": _records(kernels_by_name(short, dur, trace.strings, nccl, limit=TOP_N)),
        "by_name": _records(kernels_by_name(name, dur, trace.strings, nccl, limit=TOP_N)),
    }


# ---------------------------------------------------------------------------------------------
def _assemble(a: Analysis, kernel_metrics: dict, launch: dict) -> dict:
    t = a.trace
    steps, ops = a.steps, a.ops
    w0, w1 = steps.window_start_ns, steps.window_end_ns
    window_ns = steps.window_ns
    in_win = _in_window(ops.start_ns, w0, w1)

    devices = _devices(a, window_ns)
    step_rows = _steps(a)
    primary = [r for r in step_rows if r["primary"]]
    threads_steps = pd.Series([r["global_tid"] for r in primary]).value_counts() if primary else pd.Series(dtype=int)
    busy_vals = [d["busy_pct"] for d in devices if d["busy_pct"] is not None and d["kernel_count"] + d["copy_count"] > 0]

    mem_in = np.zeros(len(t.memcpy), dtype=bool)
    mrows = ops.row[in_win & (ops.kind == KIND_MEMCPY)]
    mem_in[mrows] = True

    summary = {
        "gpu_busy_pct": _num(float(np.mean(busy_vals)) if busy_vals else None),
        "step_count": int(threads_steps.max()) if len(threads_steps) else 0,
        "step_time_ms_median": _num(_median([r["step_time_ms"] for r in primary])),
        "kernel_count": kernel_metrics["count"],
        "kernels_per_step_median": _num(_median([r["kernel_count"] for r in primary])),
    }
    metrics = {
        "kernels": kernel_metrics,
        "launch": {k: _num(v) for k, v in launch.items()},
        "sync": _sync_metrics(a, primary),
        "copies": _records(copy_table(t.memcpy, mem_in)),
        "idle_gaps": _gap_metrics(a),
        "communication": _comm_metrics(devices),
        "host_wait_pct": _host_wait(devices, window_ns),
        "gpu_metrics": {"present": bool(len(t.gpu_metrics))},
    }
    quality = _capture(a)
    return {
        "nsysdoc_version": __version__,
        "source": {"path": t.path, "nsys_version": t.nsys_version, "schema_version": t.schema_version},
        "capture": quality,
        "summary": summary,
        "devices": devices,
        "steps": step_rows,
        "metrics": metrics,
        "findings": [],
    }


def _devices(a: Analysis, window_ns: int) -> list[dict]:
    t, ops = a.trace, a.ops
    out = []
    ndev = len(t.devices)
    if a.activity is None:
        for r in t.devices.itertuples():
            out.append({"device": int(r.device), "label": r.label, "name": r.name, "busy_pct": None,
                        "kernel_count": int(((ops.device == r.device) & (ops.kind == KIND_KERNEL)).sum()),
                        "copy_count": int(((ops.device == r.device) & (ops.kind != KIND_KERNEL)).sum())})
        return out
    w0, w1 = a.steps.window_start_ns, a.steps.window_end_ns
    devs = np.arange(ndev)
    bd = gpu_m.breakdown_ns(a.activity, a.gaps.unions(), devs, np.full(ndev, w0), np.full(ndev, w1))
    busy = a.activity.busy.total_by_key(ndev)
    comm = a.activity.comm.total_by_key(ndev)
    in_win = (ops.start_ns >= w0) & (ops.start_ns < w1)
    for d in range(ndev):
        row = t.devices.iloc[d]
        pct = lambda v: _num(v / window_ns * 100) if window_ns else None  # noqa: E731
        out.append({
            "device": d, "label": row["label"], "name": row["name"],
            "busy_pct": pct(busy[d]),
            "compute_pct": pct(bd["compute_ns"][d]),
            "comm_pct": pct(comm[d]),
            "exposed_comm_pct": pct(bd["exposed_comm_ns"][d]),
            "copy_only_pct": pct(bd["copy_ns"][d]),
            "idle_pct": pct(window_ns - busy[d]),
            "idle_ms_by_cause": {c: _num(bd[f"idle_{c}_ns"][d] / 1e6) for c in gpu_m.CAUSES},
            "comm_ms": _num(comm[d] / 1e6),
            "exposed_comm_ms": _num(bd["exposed_comm_ns"][d] / 1e6),
            "kernel_count": int((in_win & (ops.device == d) & (ops.kind == KIND_KERNEL)).sum()),
            "copy_count": int((in_win & (ops.device == d) & (ops.kind != KIND_KERNEL)).sum()),
            "gap_count": int((a.gaps.device == d).sum()),
        })
    return out


def _steps(a: Analysis) -> list[dict]:
    st = a.steps.table
    if len(st) == 0:
        return []
    ops = a.ops
    nsteps = len(st)
    sid = a.op_step
    has = sid >= 0
    is_k = ops.kind == KIND_KERNEL
    kcount = np.bincount(sid[has & is_k], minlength=nsteps)
    scalar = np.bincount(sid[has & a.scalar_reads], minlength=nsteps)
    # the step's device: the one running most of its GPU operations
    dev = np.full(nsteps, -1, dtype=np.int64)
    first_start = np.full(nsteps, -1, dtype=np.int64)
    if has.any():
        df = pd.DataFrame({"step": sid[has], "device": ops.device[has], "start": ops.start_ns[has]})
        top = df.groupby(["step", "device"]).size().reset_index(name="n").sort_values(["step", "n"], ascending=[True, False])
        top = top.drop_duplicates("step")
        dev[top["step"].to_numpy()] = top["device"].to_numpy()
        df = df[df["device"].to_numpy() == dev[df["step"].to_numpy()]]
        first = df.groupby("step")["start"].min()
        first_start[first.index.to_numpy()] = first.to_numpy()
    s = st["start_ns"].to_numpy(np.int64)
    e = st["end_ns"].to_numpy(np.int64)
    ok = (dev >= 0) & (a.activity is not None)
    rows = []
    bd = None
    gm = {m: np.full(nsteps, np.nan) for m in GPU_METRIC_NAMES}
    time_busy = np.full(nsteps, np.nan)
    idle_before = np.full(nsteps, np.nan)
    sync_ms = np.full(nsteps, np.nan)
    if a.activity is not None and ok.any():
        idx = np.flatnonzero(ok)
        bd = gpu_m.breakdown_ns(a.activity, a.gaps.unions(), dev[idx], s[idx], e[idx])
        span = np.maximum(e[idx] - s[idx], 1)
        time_busy[idx] = a.activity.kernels.covered(dev[idx], s[idx], e[idx]) / span * 100
        fs = np.maximum(first_start[idx], s[idx])
        idle_before[idx] = ((fs - s[idx]) - a.activity.busy.covered(dev[idx], s[idx], fs)) / 1e6
        dev_ids = a.trace.devices["device_id"].to_numpy()[dev[idx]]
        means = window_means(a.trace.gpu_metrics, dev_ids, s[idx], e[idx])
        for m in GPU_METRIC_NAMES:
            gm[m][idx] = means[m]
    if a.host is not None and len(st):
        ti = a.host.index(st["global_tid"].to_numpy(np.int64))
        okt = ti >= 0
        sync_ms[okt] = a.host.sync.covered(ti[okt], s[okt], e[okt]) / 1e6
    bd_pos = {int(i): j for j, i in enumerate(np.flatnonzero(ok))} if bd is not None else {}
    labels = a.trace.devices["label"].to_numpy()
    for i, r in enumerate(st.itertuples()):
        row = {
            "step": int(r.step), "pid": int(r.pid), "tid": int(r.tid), "global_tid": int(r.global_tid),
            "primary": bool(r.primary), "index": int(r.index), "name": r.name,
            "start_ns": int(r.start_ns), "range_end_ns": int(r.range_end_ns), "end_ns": int(r.end_ns),
            "step_time_ms": _num(r.step_time_ns / 1e6), "duration_ms": _num((r.end_ns - r.start_ns) / 1e6),
            "device": labels[dev[i]] if dev[i] >= 0 else None,
            "kernel_count": int(kcount[i]),
            "time_busy_pct": _num(time_busy[i]),
            "idle_before_first_op_ms": _num(idle_before[i]),
            "host_sync_ms": _num(sync_ms[i]),
            "scalar_reads": int(scalar[i]),
            **{m: _num(gm[m][i]) for m in GPU_METRIC_NAMES},
        }
        if i in bd_pos:
            j = bd_pos[i]
            row["breakdown_ms"] = {k[:-3]: _num(v[j] / 1e6) for k, v in bd.items()}
        else:
            row["breakdown_ms"] = None
        rows.append(row)
    return rows


def _sync_metrics(a: Analysis, primary: list[dict]) -> dict:
    t = a.trace
    w0, w1 = a.steps.window_start_ns, a.steps.window_end_ns
    out = {"host_sync_ms_by_thread": [], "sync_calls": [], "scalar_read_count": int(a.scalar_reads.sum()),
           "scalar_reads_per_step_median": _num(_median([r["scalar_reads"] for r in primary])),
           "host_sync_ms_per_step_median": _num(_median([r["host_sync_ms"] if r["host_sync_ms"] is not None else np.nan for r in primary]))}
    if a.host is None or w0 is None:
        return out
    n = len(a.host.thread_keys)
    per = a.host.sync.covered(np.arange(n), np.full(n, w0), np.full(n, w1))
    rows = [(int(a.host.thread_keys[i]), int(per[i])) for i in np.argsort(-per) if per[i] > 0][:20]
    out["host_sync_ms_by_thread"] = [{"pid": int(S.decode_pid(g)), "tid": int(S.decode_tid(g)),
                                      "host_sync_ms": _num(v / 1e6),
                                      "share_of_window_pct": _num(v / max(w1 - w0, 1) * 100)} for g, v in rows]
    out["sync_calls"] = _records(host_m.sync_calls_table(t.runtime, a.blocking, t.strings, w0, w1))
    return out


def _gap_metrics(a: Analysis) -> dict:
    if a.gaps is None:
        return {"count": 0, "idle_ms_by_cause": {}, "longest": []}
    g = a.gaps
    dur = g.end_ns - g.start_ns
    by = {c: _num(dur[g.cause == i].sum() / 1e6) for i, c in enumerate(gpu_m.CAUSES)}
    labels = a.trace.devices["label"].to_numpy()
    top = np.argsort(-dur, kind="stable")[:20]
    longest = [{"device": labels[g.device[i]], "start_ns": int(g.start_ns[i]), "end_ns": int(g.end_ns[i]),
                "duration_ms": _num(dur[i] / 1e6), "cause": gpu_m.CAUSES[g.cause[i]],
                "pid": int(S.decode_pid(g.thread[i])) if g.thread[i] else None,
                "tid": int(S.decode_tid(g.thread[i])) if g.thread[i] else None} for i in top]
    return {"count": int(len(g)), "idle_ms_by_cause": by, "longest": longest,
            "count_by_cause": {c: int((g.cause == i).sum()) for i, c in enumerate(gpu_m.CAUSES)}}


def _comm_metrics(devices: list[dict]) -> dict:
    comm = sum((d.get("comm_ms") or 0) for d in devices)
    exposed = sum((d.get("exposed_comm_ms") or 0) for d in devices)
    return {"comm_ms": _num(comm), "exposed_comm_ms": _num(exposed),
            "overlapped_pct": _num((comm - exposed) / comm * 100) if comm else None}


def _host_wait(devices: list[dict], window_ns: int) -> float | None:
    """Mean over devices of the window share spent idle while the host waited (sync or input)."""
    vals = [((d["idle_ms_by_cause"]["sync"] or 0) + (d["idle_ms_by_cause"]["input"] or 0)) * 1e6 / window_ns * 100
            for d in devices if d.get("idle_ms_by_cause") and window_ns]
    return _num(float(np.mean(vals))) if vals else None


def _capture(a: Analysis) -> dict:
    t = a.trace
    w0, w1 = a.steps.window_start_ns, a.steps.window_end_ns
    notes = []
    if not t.has_gpu_activity:
        notes.append("no GPU activity: the capture has no kernel, memcpy or memset rows")
    if not a.steps.has_markers:
        notes.append("no step markers found (NVTX ranges matching the step pattern); "
                      "the analysis window is first to last GPU operation, and per-step numbers are absent")
    for kind, label in (("cuda_api", "CUDA API"), ("nvtx", "NVTX"), ("osrt", "OS runtime")):
        if not t.traced[kind]:
            notes.append(f"{label} not traced (no {label} table in the export)")
    return {
        "duration_ms": _num(t.duration_ns / 1e6) if t.duration_ns else None,
        "traced": t.traced,
        "window": {"start_ns": w0, "end_ns": w1, "duration_ms": _num((w1 - w0) / 1e6) if w0 is not None else None},
        "has_step_markers": a.steps.has_markers,
        "step_pattern": a.step_pattern,
        "gpu_activity": t.has_gpu_activity,
        "profiler_overhead_pct": _num(capture_m.overhead_pct(t.overhead, w0, w1)),
        "diagnostics": capture_m.diagnostics_table(t.diagnostics),
        "process_messages": t.process_messages,
        "warnings": notes,
        "device_count": int(len(t.devices)),
        "process_count": int(len(t.processes)),
    }
