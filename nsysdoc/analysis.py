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
from .metrics.copies import copy_table
from .metrics.gpu_metrics import METRICS as GPU_METRIC_NAMES
from .metrics.gpu_metrics import window_means
from .metrics.kernels import is_fp32_gemm, kernel_summary, kernels_by_name, uses_tensor_cores
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
    """Operations that start inside ``[w0, w1)``, plus those starting exactly at ``w1`` when the
    window is empty (a capture whose only GPU work is one zero-length kernel)."""
    if w0 is None or w1 is None:
        return np.zeros(len(start_ns), dtype=bool)
    if w1 == w0:
        return start_ns == w0
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
    # FP32 GEMM/conv time and tensor-core time, by name (classified once per distinct name)
    fp32_ms = tc_ms = 0.0
    fp32_names: list[str] = []
    if len(dur):
        totals = np.bincount(name, weights=dur)
        used = np.flatnonzero(totals)
        for nid, nm in zip(used, trace.strings.lookup(used)):
            if is_fp32_gemm(nm):
                fp32_ms += totals[nid] / 1e6
                fp32_names.append(nm)
            elif uses_tensor_cores(nm):
                tc_ms += totals[nid] / 1e6
    return {
        **{key: _num(v) for key, v in kernel_summary(dur).items()},
        "nccl_count": int(nccl.sum()),
        "fp32_gemm_ms": _num(fp32_ms),
        "fp32_gemm_names": fp32_names[:20],
        "tensor_core_ms": _num(tc_ms),
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
    result = {
        "nsysdoc_version": __version__,
        "source": {"path": t.path, "nsys_version": t.nsys_version, "schema_version": t.schema_version},
        "capture": quality,
        "summary": summary,
        "devices": devices,
        "steps": step_rows,
        "metrics": metrics,
        "findings": [],
    }
    metrics["values"] = _values(a, result)
    return result


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
    """Mean over devices with GPU work in the window of the window share spent idle while the host
    waited (sync or input) — the same devices ``gpu_busy_pct`` averages over."""
    vals = [((d["idle_ms_by_cause"]["sync"] or 0) + (d["idle_ms_by_cause"]["input"] or 0)) * 1e6 / window_ns * 100
            for d in devices if d.get("idle_ms_by_cause") and window_ns and d["kernel_count"] + d["copy_count"] > 0]
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


# ---------------------------------------------------------------------------------------------
def _values(a: Analysis, r: dict) -> dict:
    """The flat metric namespace that rule conditions and messages use (``docs/glossary.md``,
    "Rule values"). Every value is a number, bool, string or null."""
    t = a.trace
    m, summ, cap = r["metrics"], r["summary"], r["capture"]
    window_ms = cap["window"]["duration_ms"]
    primary = [s for s in r["steps"] if s["primary"]]
    active = [d for d in r["devices"] if d.get("busy_pct") is not None and d["kernel_count"] + d["copy_count"] > 0]
    ndev = len(active)
    v: dict = {
        "window_ms": window_ms,
        "device_count": ndev,
        "has_step_markers": cap["has_step_markers"],
        "step_count": summ["step_count"],
        "step_time_ms_median": summ["step_time_ms_median"],
        "gpu_busy_pct": summ["gpu_busy_pct"],
        "gpu_activity": cap["gpu_activity"],
        "host_wait_pct": m["host_wait_pct"],
        "kernel_count": summ["kernel_count"],
        "kernels_per_step_median": summ["kernels_per_step_median"],
        "kernel_mean_us": m["kernels"]["mean_us"],
        "kernel_median_us": m["kernels"]["median_us"],
        "kernel_under_10us_pct": m["kernels"]["under_10us_pct"],
        "tiny_kernel_count": (round(m["kernels"]["under_10us_pct"] * m["kernels"]["count"] / 100)
                              if m["kernels"]["under_10us_pct"] is not None else 0),
        "nvtx_traced": t.traced["nvtx"], "osrt_traced": t.traced["osrt"], "cuda_api_traced": t.traced["cuda_api"],
        "gpu_metrics_present": bool(len(t.gpu_metrics)),
        "profiler_overhead_pct": cap["profiler_overhead_pct"],
        "diagnostic_warning_count": sum(d["count"] for d in cap["diagnostics"] if d["severity"] == "warning"),
        "diagnostic_error_count": sum(d["count"] for d in cap["diagnostics"] if d["severity"] == "error"),
    }
    # idle time by cause, summed over devices, and as a share of device-time in the window
    denom = (window_ms or 0) * ndev
    by = {c: sum((d["idle_ms_by_cause"][c] or 0) for d in active) for c in gpu_m.CAUSES} if ndev else {}
    for c in gpu_m.CAUSES:
        v[f"idle_{c}_ms"] = _num(by.get(c)) if ndev else None
        v[f"idle_{c}_pct"] = _num(by[c] / denom * 100) if ndev and denom else None
    v["idle_pct"] = _num(float(np.mean([d["idle_pct"] for d in active]))) if ndev else None
    late = (by.get("launch", 0) + by.get("host", 0)) if ndev else None
    v["late_launch_idle_ms"] = _num(late)
    v["late_launch_idle_pct"] = _num(late / denom * 100) if ndev and denom else None
    late_med = late_mean = None
    if a.gaps is not None and len(a.gaps):
        sel = np.isin(a.gaps.cause, (gpu_m.CAUSE_LAUNCH, gpu_m.CAUSE_HOST))
        if sel.any():
            dur = (a.gaps.end_ns - a.gaps.start_ns)[sel]
            late_med, late_mean = float(np.median(dur)) / 1e3, float(dur.mean()) / 1e3
    v["late_gap_us_median"] = _num(late_med)
    v["late_gap_us_mean"] = _num(late_mean)
    kmed = m["kernels"]["median_us"]
    # mean, not median gap: a few long holes among many short ones are where the time goes
    v["late_gap_to_kernel_ratio"] = _num(late_mean / kmed) if late_mean is not None and kmed else None
    per_step = lambda key: _median([s[key] if s[key] is not None else np.nan for s in primary])  # noqa: E731
    v["idle_before_first_op_ms_median"] = _num(per_step("idle_before_first_op_ms"))
    v["step_start_idle_pct_median"] = _num(_median([
        s["idle_before_first_op_ms"] / s["step_time_ms"] * 100 for s in primary
        if s["idle_before_first_op_ms"] is not None and s["step_time_ms"]]))
    v["host_sync_ms_per_step_median"] = m["sync"]["host_sync_ms_per_step_median"]
    v["scalar_reads_per_step_median"] = m["sync"]["scalar_reads_per_step_median"]
    v["scalar_read_count"] = m["sync"]["scalar_read_count"]
    v["sync_call_count"] = sum(x["count"] for x in m["sync"]["sync_calls"])
    # communication
    comm = m["communication"]
    v["comm_ms"], v["exposed_comm_ms"] = comm["comm_ms"], comm["exposed_comm_ms"]
    v["comm_overlapped_pct"] = comm["overlapped_pct"]
    v["exposed_comm_pct"] = _num(float(np.mean([d["exposed_comm_pct"] for d in active]))) if ndev else None
    v["exposed_comm_ms_per_step"] = _num(_median([(s["breakdown_ms"] or {}).get("exposed_comm", np.nan)
                                                   for s in primary])) if primary else None
    # copies
    copies = m["copies"]
    pageable = [c for c in copies if c["host_memory"] == "pageable"]
    # pinned host copies of at least 64 KiB on average: small copies are latency-bound and say
    # nothing about the bandwidth pinned memory reaches
    pinned = [c for c in copies if c["host_memory"] == "pinned" and c["kind"] in ("HtoD", "DtoH")
              and c["count"] and c["bytes"] / c["count"] >= 64 * 1024]
    v["pageable_copy_count"] = sum(c["count"] for c in pageable)
    v["pageable_copy_ms"] = _num(sum(c["time_ms"] for c in pageable))
    v["pageable_copy_bytes"] = sum(c["bytes"] for c in pageable)
    p_ms, p_b = sum(c["time_ms"] for c in pageable), sum(c["bytes"] for c in pageable)
    v["pageable_gbps"] = _num(p_b / (p_ms * 1e6)) if p_ms else None
    q_ms, q_b = sum(c["time_ms"] for c in pinned), sum(c["bytes"] for c in pinned)
    v["pinned_gbps"] = _num(q_b / (q_ms * 1e6)) if q_ms else None
    v.update(_dtoh_values(a, primary))
    # kernels: top kernel and FP32 GEMMs
    top = (m["kernels"]["by_name"] or [None])[0]
    v["top_kernel_name"] = top["name"] if top else None
    v["top_kernel_share_pct"] = top["share_of_kernel_time_pct"] if top else None
    v["top_kernel_count"] = top["count"] if top else 0
    v["top_kernel_total_ms"] = top["total_ms"] if top else None
    v["top_kernel_mean_us"] = top["mean_us"] if top else None
    short_top = (m["kernels"]["by_short_name"] or [None])[0]
    v["top_kernel_short_name"] = short_top["name"] if short_top else None
    steps_n = summ["step_count"] or 0
    v["top_kernel_calls_per_step"] = _num(top["count"] / steps_n) if top and steps_n else None
    stm = summ["step_time_ms_median"]
    v["top_kernel_instance_share_pct"] = _num(top["mean_us"] / 10 / stm) if top and stm else None
    ktotal = m["kernels"]["total_ms"] or 0
    v["fp32_gemm_ms"] = m["kernels"]["fp32_gemm_ms"]
    v["fp32_gemm_share_pct"] = _num(m["kernels"]["fp32_gemm_ms"] / ktotal * 100) if ktotal else None
    # what nvidia-smi would say vs the truth
    v["time_busy_pct_median"] = _num(per_step("time_busy_pct")) if primary else None
    for g in GPU_METRIC_NAMES:
        v[f"{g[:-4]}_pct_median"] = _num(per_step(g)) if primary else None
    return v


def _dtoh_values(a: Analysis, primary: list[dict]) -> dict:
    """Device-to-host copies that are not scalar reads (> 16 bytes), in the window and per step."""
    t, ops = a.trace, a.ops
    w0, w1 = a.steps.window_start_ns, a.steps.window_end_ns
    out = {"dtoh_bytes": 0, "dtoh_ms": None, "dtoh_count": 0, "dtoh_bytes_per_step_median": None,
           "dtoh_ms_per_step_median": None}
    if w0 is None or len(t.memcpy) == 0:
        return out
    m = np.flatnonzero((ops.kind == KIND_MEMCPY) & _in_window(ops.start_ns, w0, w1))
    rows = ops.row[m]
    kind = t.memcpy["copy_kind"].to_numpy()[rows]
    nbytes = t.memcpy["bytes"].to_numpy()[rows]
    sel = (kind == S.COPY_DTOH) & (nbytes > host_m.SCALAR_READ_MAX_BYTES)
    m, nbytes = m[sel], nbytes[sel]
    dur = ops.end_ns[m] - ops.start_ns[m]
    out.update(dtoh_bytes=int(nbytes.sum()), dtoh_ms=_num(dur.sum() / 1e6), dtoh_count=int(len(m)))
    if primary:
        ids = [s["step"] for s in primary]
        step = a.op_step[m]
        b = [int(nbytes[step == i].sum()) for i in ids]
        d = [float(dur[step == i].sum()) / 1e6 for i in ids]
        out["dtoh_bytes_per_step_median"] = _num(_median(b))
        out["dtoh_ms_per_step_median"] = _num(_median(d))
    return out
