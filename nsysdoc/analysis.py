"""Compute every metric of a capture and assemble the JSON contract.

``analyze(trace)`` is the library entry point behind ``nsysdoc report``; it returns an
:class:`Analysis` whose ``to_dict()`` is the documented JSON (``docs/json.md``). The numbers come
from :mod:`nsysdoc.engine`, which reads the capture in time slices (memory does not grow with the
capture's length); this module turns its totals into the report's tables and values. The
timeline windows (median and worst step, or the middle of the capture) are kept for renderers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import __version__
from .metrics import capture as capture_m
from .metrics import framing as framing_m
from .metrics import gpu as gpu_m
from .metrics import host as host_m
from .metrics.copies import copy_table_from
from .metrics.gpu_metrics import METRICS as GPU_METRIC_NAMES
from .metrics.gpu_metrics import window_means
from .metrics.kernels import is_fp32_gemm, kernel_summary, kernel_tables, uses_tensor_cores
from .metrics.nvtx import nvtx_summary_blocks
from .metrics.steps import Steps, compile_step_pattern, pick_steps
from .trace import Trace
from .trace import schema as S
from .trace.columns import Columns
from .trace.store import release_memory
from .rules.policy import HOST_JUDGE_MIN_WINDOW_MS

TOP_N = 50
#: Bytes of freed slice pieces after which :func:`_consume` returns memory to the system.
_TRIM_BYTES = 64 << 20
#: Version of the JSON contract (docs/json.md): ``nsysdoc diff`` refuses reports of another one.
CONTRACT = 3
#: Kernel names kept in ``metrics.kernels.names`` (every name up to this many, for ``nsysdoc diff``).
ALL_NAMES_MAX = 5000


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


def _isnan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _num_list(values) -> list:
    """:func:`_num` over a float array, as a list: the same rounding (Python's ``round``, 4 decimals),
    NaN/inf -> None, without a numpy scalar per value."""
    arr = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(arr).tolist()
    return [round(x, 4) if ok else None for x, ok in zip(arr.tolist(), finite)]


def _records(table: Columns) -> list[dict]:
    return [{k: _num(v) for k, v in row.items()} for row in table.records()]


def _median(values) -> float | None:
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    return float(np.median(values)) if len(values) else None


@dataclass
class Analysis:
    trace: Trace
    step_pattern: str
    steps: Steps
    #: GPU span (first to last GPU operation) and the parts of it left out of the analysis window
    span: tuple[int | None, int | None] = (None, None)
    excluded: list[dict] = field(default_factory=list)
    result: dict = field(default_factory=dict)
    #: the engine's run (totals and timeline captures), for renderers
    engine: object = None

    def to_dict(self) -> dict:
        return self.result

    def window_view(self, name: str):
        """The captured data of timeline window ``name`` ("median", "worst" or "middle"), as the
        object :func:`nsysdoc.metrics.timeline.window_timeline` reads, or None."""
        from .engine.view import window_view

        return window_view(self, name)


def analyze(trace: Trace, step_pattern: str | None = None) -> Analysis:
    from .engine.plan import make_plan
    from .engine.run import run

    pattern = compile_step_pattern(step_pattern)
    plan = make_plan(trace, pattern)
    res = run(trace, plan)
    a = Analysis(trace, pattern.pattern, plan.steps, span=plan.span, excluded=res.excluded, engine=res)
    a.result = _assemble(a, res)
    return a


def _consume(parts: list, dtype) -> np.ndarray:
    """One array from the slices' pieces, emptying the list as it goes (the pieces and the whole
    are never both held), in the pieces' dtype when they all share one, else int64."""
    if not parts:
        return np.zeros(0, dtype)
    dt = parts[0].dtype if all(p.dtype == parts[0].dtype for p in parts) else np.dtype(np.int64)
    out = np.empty(sum(len(p) for p in parts), dtype=dt)
    pos = freed = 0
    parts.reverse()  # pop from the end: O(1) each
    while parts:
        p = parts.pop()
        out[pos:pos + len(p)] = p
        pos += len(p)
        freed += p.nbytes
        del p
        if freed >= _TRIM_BYTES:  # the pieces sit in glibc's heap: give their pages back as we go
            release_memory()
            freed = 0
    if out.nbytes >= _TRIM_BYTES:
        release_memory()
    return out


def _kernel_metrics(trace: Trace, res) -> dict:
    """Kernel statistics of the kernels that start in the window (the compact per-kernel arrays
    the slices kept): overall, by name and by short name, FP32 GEMM and tensor-core time."""
    win = res.window
    dur = _consume(win.k_dur, np.uint32)
    nccl = _consume(win.k_nccl, bool)
    short = _consume(win.k_short, np.uint16)
    name = _consume(win.k_name, np.uint16)
    tune = _consume(win.k_tune, bool)
    name_ids, short_ids = res.ctx.name_ids, res.ctx.short_ids
    # FP32 GEMM/conv time and tensor-core time, by name (classified once per distinct name);
    # autotuning candidates (launched inside compile/autotune ranges) do not count
    # one table per name kind: the short-name table serves both the top list and every name
    by_short, by_name_all = kernel_tables(name, short, dur, trace.strings, nccl, name_ids, short_ids,
                                          short_limit=ALL_NAMES_MAX)
    del short
    by_name = by_name_all.head(TOP_N).drop(["code", "total_ns"])
    fp32_ms = tc_ms = 0.0
    fp32_names: list[str] = []
    if len(dur):
        # per-name totals indexed by name code (the by-name table's exact group sums), without
        # autotuning candidates
        codes = np.asarray(by_name_all["code"])
        totals = np.zeros(int(codes.max()) + 1, dtype=np.float64)
        totals[codes] = np.asarray(by_name_all["total_ns"])
        if tune.any():
            totals -= np.bincount(name[tune], weights=dur[tune].astype(np.float64), minlength=len(totals))
        used = np.flatnonzero(totals)
        for code, nm in zip(used, trace.strings.lookup(name_ids[used])):
            if is_fp32_gemm(nm):
                fp32_ms += totals[code] / 1e6
                fp32_names.append(nm)
            elif uses_tensor_cores(nm):
                tc_ms += totals[code] / 1e6
    del name, tune
    nccl_count = int(nccl.sum())
    return {
        # last: its quantiles reorder the durations in place (no copy of them)
        **{key: _num(v) for key, v in kernel_summary(dur, in_place=True).items()},
        "nccl_count": nccl_count,
        "fp32_gemm_ms": _num(fp32_ms),
        "fp32_gemm_names": fp32_names[:20],
        "tensor_core_ms": _num(tc_ms),
        "by_short_name": _records(by_short.head(TOP_N)),
        "by_name": _records(by_name),
        # every short name (up to ALL_NAMES_MAX), so that two runs can be matched kernel by kernel
        "names": [{"name": r["name"], "count": r["count"], "total_ms": r["total_ms"]} for r in
                  _records(by_short.select(["name", "count", "total_ms"]))],
    }


def _launch(win) -> dict:
    """API time and queue delay of the kernel launches in the window (definitions:
    ``nsysdoc.metrics.host``)."""
    api_ns = _consume(win.l_api, np.uint32)
    n = len(api_ns)
    api_med, api_p95 = host_m.quantiles(api_ns, in_place=True)
    del api_ns
    queue_ns = _consume(win.l_queue, np.uint32)
    q_under_10us = float((queue_ns < 10_000).mean() * 100) if n else None
    q_med, q_p95 = host_m.quantiles(queue_ns, in_place=True)
    del queue_ns
    out = {
        "launch_count": n,
        "launch_api_us_median": None if api_med is None else api_med / 1e3,
        "launch_api_us_p95": None if api_p95 is None else api_p95 / 1e3,
        "queue_delay_us_median": None if q_med is None else q_med / 1e3,
        "queue_delay_us_p95": None if q_p95 is None else q_p95 / 1e3,
        "queue_delay_under_10us_pct": q_under_10us,
    }
    return {k: _num(v) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------
def _assemble(a: Analysis, res) -> dict:
    t = a.trace
    steps = a.steps
    w0, w1 = steps.window_start_ns, steps.window_end_ns
    window_ns = steps.window_ns
    devices = _devices(a, res, window_ns)
    step_rows = _steps(a, res)
    primary = [r for r in step_rows if r["primary"]]
    threads_steps = np.unique([r["global_tid"] for r in primary], return_counts=True)[1] if primary \
        else np.zeros(0, np.int64)
    busy_vals = [d["busy_pct"] for d in devices if d["busy_pct"] is not None and d["kernel_count"] + d["copy_count"] > 0]
    # the launch arrays go before the kernel arrays are gathered: never both held
    launch = _launch(res.window)
    kernel_metrics = _kernel_metrics(t, res)
    judgeable, why_not = _judgeable(devices, window_ns / 1e6 if window_ns else None)
    extent = _capture_extent(t, a.span[0])
    summary = {
        # a busy share of a window with a handful of GPU operations says nothing: null, with the reason
        # a busy share of a window with a handful of GPU operations says nothing, unless the window
        # is long: then it says how little the GPU did (host-side judgement, rules.policy)
        "gpu_busy_pct": _num(float(np.mean(busy_vals)) if busy_vals and (
            judgeable or (window_ns or 0) / 1e6 >= HOST_JUDGE_MIN_WINDOW_MS) else None),
        "step_count": int(threads_steps.max()) if len(threads_steps) else 0,
        "step_time_ms_median": _num(_median([r["step_time_ms"] for r in primary])),
        "kernel_count": kernel_metrics["count"],
        "kernels_per_step_median": _num(_median([r["kernel_count"] for r in primary])),
    }
    nv = t.store.get("nvtx")
    metrics = {
        "kernels": kernel_metrics,
        "launch": launch,
        "sync": _sync_metrics(a, res, primary),
        "copies": _records(copy_table_from(res.window.copies)),
        "idle_gaps": _gap_metrics(a, res, devices),
        "alloc_calls": _records(host_m.calls_table_from(res.window.alloc_calls, t.strings)) if w0 is not None else [],
        "setup": _setup_metrics(a, res, devices, extent),
        "communication": _comm_metrics(devices),
        "host_wait_pct": _host_wait(devices, window_ns),
        "gpu_metrics": {"present": bool(len(t.gpu_metrics))},
        "step_picks": dict(zip(("median_step", "worst_step"), pick_steps(a.steps.table))),
        "nvtx": nvtx_summary_blocks(nv.iter_blocks(["start_ns", "end_ns", "event_type", "domain", "text"])
                                    if nv is not None else (), t.nvtx_domains, w0, w1),
    }
    metrics["operators"], metrics["where"] = _attribution(a, res, devices, kernel_metrics)
    metrics["underfilled"] = _underfilled(a, res, devices, window_ns)
    quality = _capture(a, judgeable, why_not, extent)
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
    return result


def _rounded(x):
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return _num(x)


def _attribution(a: Analysis, res, devices: list[dict], kernel_metrics: dict) -> tuple[dict, dict]:
    """The operator view (whole capture) and, per ``where:`` selector, the sites of its time in the
    window (``nsysdoc.engine.attribute``), with what the capture lacks to say more."""
    from .engine import attribute as att

    attr = res.plan.attr
    t = a.trace
    ops = att.operator_view(attr, t.strings)
    ops["missing"] = att.missing_data(t, attr)
    ndev = len(_active(devices)) or 1
    top = (kernel_metrics.get("by_name") or [None])[0]
    where = {sel: att.where_table(attr, res.window.where, sel, ndev, t.strings,
                                  kernel_name=top["name"] if top else None)
             for sel in att.SELECTORS}
    return _rounded(ops), _rounded(where)


def _breakdown(idle_span_ns, busy, kern, compute, idle) -> dict[str, np.ndarray]:
    """Exclusive split of a range from its totals (sums to the range's length): compute, exposed
    communication, copies (no kernel running), then idle split by idle class (sums to the range: idle no gap holds counts as unattributed, which cannot happen inside the
    window)."""
    out = {"compute_ns": compute, "exposed_comm_ns": kern - compute, "copy_ns": busy - kern}
    idle_total = idle_span_ns - busy
    assigned = np.zeros_like(idle_total)
    for i, cause in enumerate(gpu_m.CAUSES):
        out[f"idle_{cause}_ns"] = idle[:, i]
        assigned = assigned + idle[:, i]
    out["idle_unattributed_ns"] = out["idle_unattributed_ns"] + (idle_total - assigned)
    return out


def _devices(a: Analysis, res, window_ns: int) -> list[dict]:
    t = a.trace
    win = res.window
    out = []
    ndev = len(t.devices)
    if not res.ctx.active or not window_ns:
        for r in t.devices.records(["device", "label", "name"]):
            d = r["device"]
            out.append({"device": int(d), "label": r["label"], "name": r["name"], "busy_pct": None,
                        "kernel_count": int(win.kernel_count[d]) if d < len(win.kernel_count) else 0,
                        "copy_count": int(win.copy_count[d]) if d < len(win.copy_count) else 0})
        return out
    bd = _breakdown(np.full(ndev, window_ns, dtype=np.int64), win.busy, win.kern, win.compute, win.idle)
    busy, comm = win.busy, win.comm
    cc = np.asarray(t.devices["compute_capability"]) if "compute_capability" in t.devices else [None] * ndev
    for d in range(ndev):
        row = t.devices.row(d)
        pct = lambda v: _num(v / window_ns * 100)  # noqa: E731
        out.append({
            "device": d, "label": row["label"], "name": row["name"],
            "compute_capability": _num(cc[d]) if cc[d] is not None and not _isnan(cc[d]) else None,
            "busy_pct": pct(busy[d]),
            "compute_pct": pct(bd["compute_ns"][d]),
            "comm_pct": pct(comm[d]),
            "exposed_comm_pct": pct(bd["exposed_comm_ns"][d]),
            "copy_only_pct": pct(bd["copy_ns"][d]),
            "idle_pct": pct(window_ns - busy[d]),
            "busy_ms": _num(busy[d] / 1e6),
            "compute_ms": _num(bd["compute_ns"][d] / 1e6),
            "copy_only_ms": _num(bd["copy_ns"][d] / 1e6),
            "idle_ms_by_cause": {c: _num(bd[f"idle_{c}_ns"][d] / 1e6) for c in gpu_m.CAUSES},
            "comm_ms": _num(comm[d] / 1e6),
            "exposed_comm_ms": _num(bd["exposed_comm_ns"][d] / 1e6),
            "kernel_count": int(win.kernel_count[d]),
            "copy_count": int(win.copy_count[d]),
            "gap_count": int(win.gap_count[d]),
        })
    return out


def _steps(a: Analysis, res) -> list[dict]:
    st = a.steps.table
    if len(st) == 0:
        return []
    plan, glob = res.plan, res.glob
    nsteps = len(st)
    kcount = glob.step_kernels
    scalar = glob.step_scalar
    dev = plan.step_dev
    first_start = plan.step_first
    s = np.asarray(st["start_ns"], dtype=np.int64)
    e = np.asarray(st["end_ns"], dtype=np.int64)
    active = res.ctx.active
    ok = (dev >= 0) & active
    bd = None
    gm = {m: np.full(nsteps, np.nan) for m in GPU_METRIC_NAMES}
    time_busy = np.full(nsteps, np.nan)
    idle_before = np.full(nsteps, np.nan)
    sync_ms = np.full(nsteps, np.nan)
    if active and ok.any():
        idx = np.flatnonzero(ok)
        bd = _breakdown(np.maximum(e[idx], s[idx]) - s[idx], glob.step_busy[idx], glob.step_kern[idx],
                        glob.step_compute[idx], glob.step_idle[idx])
        span = np.maximum(e[idx] - s[idx], 1)
        time_busy[idx] = glob.step_kern[idx] / span * 100
        fs = np.maximum(first_start[idx], s[idx])
        idle_before[idx] = ((fs - s[idx]) - glob.step_before_busy[idx]) / 1e6
        dev_ids = np.asarray(a.trace.devices["device_id"])[dev[idx]]
        means = window_means(a.trace.gpu_metrics, dev_ids, s[idx], e[idx])
        for m in GPU_METRIC_NAMES:
            gm[m][idx] = means[m]
    if active and len(st):
        okt = res.ctx.step_thread >= 0
        sync_ms[okt] = glob.step_sync[okt] / 1e6
    # columns first (one conversion per column), then one dict per step: O(steps), no numpy
    # scalar per value
    bd_pos = {int(i): j for j, i in enumerate(np.flatnonzero(ok))} if bd is not None else {}
    bd_cols = {k[:-3]: _num_list(v / 1e6) for k, v in bd.items()} if bd is not None else {}
    labels = np.asarray(a.trace.devices["label"])
    start_ns, end_ns = s, e
    cols = {
        "step": st["step"].tolist(), "pid": st["pid"].tolist(), "tid": st["tid"].tolist(),
        "global_tid": st["global_tid"].tolist(), "primary": st["primary"].astype(bool).tolist(),
        "index": st["index"].tolist(), "name": st["name"].tolist(),
        "start_ns": start_ns.tolist(), "range_end_ns": st["range_end_ns"].tolist(), "end_ns": end_ns.tolist(),
        "step_time_ms": _num_list(np.asarray(st["step_time_ns"]) / 1e6),
        "duration_ms": _num_list((end_ns - start_ns) / 1e6),
        "device": [labels[d] if d >= 0 else None for d in dev.tolist()],
        "kernel_count": kcount.tolist(),
        "time_busy_pct": _num_list(time_busy),
        "idle_before_first_op_ms": _num_list(idle_before),
        "host_sync_ms": _num_list(sync_ms),
        "scalar_reads": scalar.tolist(),
        **{m: _num_list(gm[m]) for m in GPU_METRIC_NAMES},
    }
    keys = list(cols)
    rows = []
    for i, values in enumerate(zip(*cols.values())):
        row = dict(zip(keys, values))
        j = bd_pos.get(i)
        row["breakdown_ms"] = None if j is None else {k: v[j] for k, v in bd_cols.items()}
        rows.append(row)
    return rows


def _sync_metrics(a: Analysis, res, primary: list[dict]) -> dict:
    t = a.trace
    w0, w1 = a.steps.window_start_ns, a.steps.window_end_ns
    out = {"host_sync_ms_by_thread": [], "sync_calls": [], "scalar_read_count": int(res.glob.scalar_reads),
           "scalar_reads_per_step_median": _num(_median([r["scalar_reads"] for r in primary])),
           "host_sync_ms_per_step_median": _num(_median([r["host_sync_ms"] if r["host_sync_ms"] is not None else np.nan for r in primary]))}
    if not res.ctx.active or w0 is None:
        return out
    keys = res.ctx.thread_keys
    n = len(keys)
    per = res.window.sync_by_thread if res.window.sync_by_thread is not None else np.zeros(n, dtype=np.int64)
    rows = [(int(keys[i]), int(per[i])) for i in np.argsort(-per) if per[i] > 0][:20]
    out["host_sync_ms_by_thread"] = [{"pid": int(S.decode_pid(g)), "tid": int(S.decode_tid(g)),
                                      "host_sync_ms": _num(v / 1e6),
                                      "share_of_window_pct": _num(v / max(w1 - w0, 1) * 100)} for g, v in rows]
    out["sync_calls"] = _records(host_m.calls_table_from(res.window.sync_calls, t.strings))
    return out


def _active(devices: list[dict]) -> list[dict]:
    """Devices with GPU work in the window: the ones per-window numbers average over."""
    return [d for d in devices if d.get("busy_pct") is not None and d["kernel_count"] + d["copy_count"] > 0]


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _gap_metrics(a: Analysis, res, devices: list[dict]) -> dict:
    if not res.ctx.active:
        return {"count": 0, "idle_ms_by_cause": {}, "longest": [], "count_by_cause": {}}
    win = res.window
    active = _active(devices)
    by = {c: _num(_mean([d["idle_ms_by_cause"][c] for d in active])) for c in gpu_m.CAUSES} if active else {}
    labels = np.asarray(a.trace.devices["label"])
    longest = []
    for dur, dev, s0, s1, cause, split, thread in win.longest:
        longest.append({
            "device": labels[dev], "start_ns": int(s0), "end_ns": int(s1),
            "duration_ms": _num(dur / 1e6), "cause": gpu_m.CAUSES[cause],
            "split_ms": {c: _num(split[j] / 1e6) for j, c in enumerate(gpu_m.CAUSES) if split[j]},
            "pid": int(S.decode_pid(thread)) if thread else None,
            "tid": int(S.decode_tid(thread)) if thread else None})
    return {"count": int(win.gaps_n), "idle_ms_by_cause": by, "longest": longest,
            "count_by_cause": {c: int(win.gaps_by_cause[j]) for j, c in enumerate(gpu_m.CAUSES)}}


def _setup_metrics(a: Analysis, res, devices: list[dict], extent: tuple[int, int] | None) -> dict:
    """One-time set-up over the GPU span: idle time of class setup (mean over devices with GPU
    work) and the set-up work behind it."""
    s0, s1 = a.span
    if not res.ctx.active or s0 is None or s1 is None or s1 <= s0:
        return {"setup_ms": None, "setup_pct_of_span": None, "events": []}
    ms = _setup_ms(a, res, s0, s1, span=True)
    # the events behind it, and behind the set-up before the first GPU operation
    lo = min(extent[0], s0) if extent else s0
    return {"setup_ms": _num(ms), "setup_pct_of_span": _num(ms / ((s1 - s0) / 1e6) * 100),
            "events": _records(_setup_events(a, res, lo, s1, gpu_start=s0))}


def _setup_events(a: Analysis, res, lo: int, hi: int, gpu_start: int | None = None) -> Columns:
    """``host.setup_events`` from the set-up calls the slices kept and the plan's set-up ranges; a
    long launch call counts when its operation ended a GPU-idle gap, or when it came before the
    first GPU operation (``gpu_start``: the GPU was idle then)."""
    glob, plan, strings = res.glob, res.plan, a.trace.strings
    parts = []
    if glob.setup_calls:
        c = {k: np.concatenate([p[k] for p in glob.setup_calls]) for k in glob.setup_calls[0]}
        sel = (c["start_ns"] < hi) & (c["end_ns"] > lo)
        rows = np.unique(np.concatenate(glob.idle_launch_rows)) if glob.idle_launch_rows else np.zeros(0, np.int64)
        is_launch = c["api_kind"] == S.API_LAUNCH
        ok = np.isin(c["pos"], rows)
        if gpu_start is not None:
            ok |= c["start_ns"] < gpu_start
        sel &= ~is_launch | ok
        if sel.any():
            names = [S.strip_api_suffix(x) for x in strings.lookup(c["name_id"][sel])]
            parts.append(host_m.setup_parts(names, c["api_kind"][sel], c["start_ns"][sel], c["end_ns"][sel], lo, hi,
                                            nvtx=False))
    th, s, e = plan.setup_ranges
    if len(s):
        sel = (s < hi) & (e > lo)
        if sel.any():
            parts.append(host_m.setup_parts(plan.setup_texts[sel], None, s[sel], e[sel], lo, hi, nvtx=True))
    return host_m.setup_table(parts)


def _comm_metrics(devices: list[dict]) -> dict:
    """Mean over the devices with GPU work (wall-clock time of one GPU, never a sum over GPUs)."""
    active = _active(devices)
    comm = _mean([d.get("comm_ms") or 0 for d in active]) or 0.0
    exposed = _mean([d.get("exposed_comm_ms") or 0 for d in active]) or 0.0
    return {"comm_ms": _num(comm), "exposed_comm_ms": _num(exposed),
            "overlapped_pct": _num((comm - exposed) / comm * 100) if comm else None}


def _host_wait(devices: list[dict], window_ns: int) -> float | None:
    """Mean over devices with GPU work in the window of the window share spent idle while the host
    waited (sync or input) — the same devices ``gpu_busy_pct`` averages over."""
    vals = [((d["idle_ms_by_cause"]["sync"] or 0) + (d["idle_ms_by_cause"]["input"] or 0)) * 1e6 / window_ns * 100
            for d in _active(devices) if d.get("idle_ms_by_cause") and window_ns]
    return _num(float(np.mean(vals))) if vals else None


#: Least GPU work in the window for a judgement: this many GPU operations, or this much GPU busy
#: time (mean over devices with work), in a window at least ``MIN_WINDOW_MS`` long.
MIN_GPU_OPS = 50
MIN_GPU_BUSY_MS = 50.0
MIN_WINDOW_MS = 1.0


def _judgeable(devices: list[dict], window_ms: float | None) -> tuple[bool, str | None]:
    active = _active(devices)
    kernels = sum(d["kernel_count"] for d in devices)
    copies = sum(d["copy_count"] for d in devices)
    if copies and not kernels:
        # copies alone say nothing about why a program is slow: its kernels were not captured
        # (or it has none), so nothing is judged from them
        return False, f"no kernel was captured, only {copies:,} copy/memset operation(s)"
    if not active or not window_ms:
        if kernels + copies:
            return False, (f"too little GPU work to judge: {kernels} kernel(s) and {copies} copy/memset "
                           f"operation(s) in a window of {_fmt_ms(window_ms or 0)}")
        return False, "no GPU activity in the window"
    ops = sum(d["kernel_count"] + d["copy_count"] for d in active)
    busy = _mean([d.get("busy_ms") or 0 for d in active]) or 0.0
    if window_ms < MIN_WINDOW_MS or (ops < MIN_GPU_OPS and busy < MIN_GPU_BUSY_MS):
        kernels = sum(d["kernel_count"] for d in active)
        copies = sum(d["copy_count"] for d in active)
        return False, (f"too little GPU work to judge: {kernels} kernel(s) and {copies} copy/memset operation(s), "
                       f"{_fmt_ms(busy)} of GPU time in a {_fmt_ms(window_ms)} window (a judgement needs at least "
                       f"{MIN_GPU_OPS} GPU operations or {MIN_GPU_BUSY_MS:.0f} ms of GPU time)")
    return True, None


def _fmt_ms(v: float) -> str:
    if v < 0.01:
        return f"{v * 1000:.1f} µs"
    return f"{v:,.2f} ms" if v < 100 else f"{v:,.0f} ms"


def _span_dict(lo, hi) -> dict:
    return {"start_ns": lo, "end_ns": hi, "duration_ms": _num((hi - lo) / 1e6) if lo is not None and hi is not None else None}


def _capture(a: Analysis, judgeable: bool, why_not: str | None, extent: tuple[int, int] | None) -> dict:
    t = a.trace
    w0, w1 = a.steps.window_start_ns, a.steps.window_end_ns
    notes = []
    if not t.has_gpu_activity:
        notes.append("no GPU activity: the capture has no kernel, memcpy or memset rows")
    inferred = _steps_inferred(a.steps)
    if not a.steps.has_markers:
        notes.append("no step markers found (NVTX ranges matching the step pattern); the analysis window is the "
                     "steady-state part of the GPU span (first to last GPU operation), and per-step numbers are absent")
    elif inferred:
        notes.append("no step markers found (NVTX ranges matching the step pattern): " + inferred["description"])
    for kind, label in (("cuda_api", "CUDA API"), ("nvtx", "NVTX"), ("osrt", "OS runtime")):
        if kind in t.not_recorded:
            notes.append(f"{t.not_recorded[kind]} not recorded: the {t.source_label} does not record them")
        elif not t.traced[kind]:
            notes.append(f"{label} not traced (no {label} table in the export)")
    if not judgeable and t.has_gpu_activity and why_not:
        notes.append(why_not)
    for d in t.dropped_rows:
        if d["reason"].startswith("no timestamps"):
            continue  # CUPTI writes such rows in normal captures; counted in dropped_rows only
        notes.append(f"{d['rows']:,} row(s) of {d['table']} ignored: {d['reason']}")
    kind = "steps" if a.steps.has_markers and not inferred else ("steady-state" if a.excluded else "gpu-span")
    excluded = []
    for x in a.excluded:
        item = {**x, "duration_ms": _num((x["end_ns"] - x["start_ns"]) / 1e6)}
        if x["kind"] == "warm-up" and a.engine.ctx.active:
            item["setup_ms"] = _num(_setup_ms(a, a.engine, x["start_ns"], x["end_ns"]))
        excluded.append(item)
    return {
        "duration_ms": _num(t.duration_ns / 1e6) if t.duration_ns else None,
        "framing": _framing(a, extent),
        "session_start_utc_ns": t.session_start_utc_ns,
        "dropped_rows": [dict(d) for d in t.dropped_rows],
        "traced": t.traced,
        # what the tool that made the trace cannot record at all (the PyTorch Profiler: OS runtime
        # calls, GPU metrics ...); [] for nsys, where every trace type can be switched on
        "not_recorded": [{"kind": k, "what": w, "why": f"not recorded by the {t.source_label}"}
                         for k, w in t.not_recorded.items()],
        "distributed": dict(t.distributed) if t.distributed else None,
        "window": {**_span_dict(w0, w1), "kind": kind},
        "span": _span_dict(*a.span),
        "excluded": excluded,
        "enough_gpu_work": judgeable,
        "not_judgeable_reason": None if judgeable else why_not,
        "has_step_markers": a.steps.has_markers and not inferred,
        # where the steps come from: "markers", "inferred" (from the repeating GPU work) or None
        "step_source": a.steps.source if a.steps.has_markers else None,
        "steps_inferred": inferred,
        "step_pattern": a.step_pattern,
        "gpu_activity": t.has_gpu_activity,
        "profiler_overhead_pct": _num(capture_m.overhead_pct(t.overhead, w0, w1)),
        "diagnostics": capture_m.diagnostics_table(t.diagnostics),
        "nsys_notes": capture_m.nsys_notes(t.diagnostics),
        "process_messages": t.process_messages,
        "warnings": notes,
        "device_count": int(len(t.devices)),
        "process_count": int(len(t.processes)),
    }


def _steps_inferred(steps) -> dict | None:
    """``capture.steps_inferred``: what the steps were inferred from, per process, and one
    sentence that says it (``nsysdoc.metrics.step_inference``); None for marked or no steps."""
    info = getattr(steps, "inferred", None)
    if not info:
        return None
    groups: dict = {}
    for p in info["processes"]:  # processes running the same loop are said once
        groups.setdefault((p["period_ops"], p["anchor"], p["unit"]), []).append(p)
    parts = []
    for (period, anchor, unit_kind), ps in groups.items():
        unit = ("" if unit_kind == "training step" else
                "; it runs no optimizer or backward kernel, so it may be one model layer or block rather than a "
                "whole training step")
        where = "" if len(info["processes"]) == 1 else (
            f"in process {ps[0]['pid']}, " if len(ps) == 1 else f"in each of processes {', '.join(str(p['pid']) for p in ps)}, ")
        steps = "/".join(f"{p['steps']:,}" for p in ps)
        match = min(p["match_pct"] for p in ps)
        gap = float(np.median([p["anchor_gap_ms"] for p in ps]))
        cover = min(p["ops_covered_pct"] for p in ps)
        parts.append(f"{where}the GPU work launched by the main thread repeats every {period:,} operations "
                     f"({match:.0f}% of positions match one period later); {steps} steps were inferred, each "
                     f"starting at a launch of {anchor[:80]} (of the operations launched once per unit, the "
                     f"one after the longest host pause: median {gap:,.2f} ms), "
                     f"covering {cover:.0f}%{' or more' if len(ps) > 1 else ''} of that thread's GPU operations{unit}")
    return {**info, "description": "steps were inferred from the repeating GPU work: " + "; ".join(parts) +
            ". Mark steps with NVTX ranges (ProfilerStep#N) to time them exactly."}


def _first_start(tab) -> int | None:
    """The earliest start of a stored event table's rows (from its blocks), or None when empty."""
    if tab is None or not len(tab) or not tab.blocks:
        return None
    return int(min(b.start_min for b in tab.blocks))


def _capture_extent(t: Trace, first_gpu: int | None) -> tuple[int, int] | None:
    """``(start, end)`` of the capture: nsys times count from the session start (0), up to the last
    recorded event. When the events lie elsewhere (absolute timestamps, a PyTorch Profiler trace)
    or the file was cut out of a longer capture (CUDA calls are traced, yet none comes before the
    first GPU operation, which some call must have launched), the capture starts at its first
    event instead: nothing is known about the time before it."""
    lo = hi = None
    for name in ("kernels", "memcpy", "memset", "runtime", "nvtx", "osrt", "sync"):
        tab = t.store.get(name)
        if tab is None or not len(tab) or not tab.blocks:
            continue
        b0 = min(b.start_min for b in tab.blocks)
        b1 = max(b.end_max for b in tab.blocks)
        lo = b0 if lo is None else min(lo, b0)
        hi = b1 if hi is None else max(hi, b1)
    if lo is None:
        return None
    rt_first = _first_start(t.store.get("runtime"))
    cut = t.traced.get("cuda_api") and first_gpu is not None and (rt_first is None or rt_first > first_gpu)
    start = 0 if t.source_tool == "nsys" and 0 <= lo <= (t.duration_ns or 0) and not cut else lo
    return int(start), int(hi)


def _framing(a: Analysis, extent: tuple[int, int] | None) -> dict | None:
    """Where the window sits in the capture (:mod:`nsysdoc.metrics.framing`)."""
    t, res = a.trace, a.engine
    if extent is None:
        return None
    c0, c1 = extent
    s0 = a.span[0]
    w0, w1 = a.steps.window_start_ns, a.steps.window_end_ns
    # what comes before the window: before its start, and before the first GPU operation
    first_gpu = min(x for x in (s0, w0, c1) if x is not None)
    ctx_ms = ctx_name = None
    setup_ms = 0.0
    rt = t.store.get("runtime")
    if rt is not None and len(rt):
        rows = rt.rows_starting_in(c0, first_gpu, ["start_ns", "end_ns", "name_id", "api_kind"])
        if len(rows["start_ns"]):
            st_, en = rows["start_ns"].astype(np.int64), rows["end_ns"].astype(np.int64)
            kind = rows["api_kind"]
            is_launch = kind == S.API_LAUNCH
            ci = framing_m.context_call(st_, en, is_launch, first_gpu)
            is_setup = (kind == S.API_SETUP) | (is_launch & (en - st_ >= gpu_m.SETUP_LAUNCH_MIN_NS))
            if ci is not None:
                is_setup[ci] = True
                ctx_ms = (int(en[ci]) - int(st_[ci])) / 1e6
                ctx_name = S.strip_api_suffix(str(t.strings.lookup(np.asarray([rows["name_id"][ci]]))[0]))
            _, rs, re_ = res.plan.setup_ranges if res is not None else ((), np.zeros(0), np.zeros(0))
            setup_ms = framing_m.setup_before_ns(st_, en, is_setup, np.asarray(rs, np.int64),
                                                 np.asarray(re_, np.int64), int(st_.min()), first_gpu) / 1e6
    busy_cap = busy_win = None
    if res is not None and res.ctx.active and getattr(res.glob, "busy_span", None) is not None:
        plan = res.plan
        devs = np.flatnonzero(plan.dev_ops > 0) if len(plan.dev_ops) else []
        if len(devs):
            busy_cap = float(res.glob.busy_span[devs].mean()) / 1e6
            if res.window.busy is not None:
                busy_win = float(np.asarray(res.window.busy)[devs].mean()) / 1e6
    # process start-up ends at the first CUDA call, wherever the window starts; it is known only
    # when the capture started with the process (nsys): a PyTorch Profiler trace starts when the
    # profiler did
    first_call = _first_start(rt) if t.source_tool == "nsys" else None
    out = framing_m.framing(c0, c1, w0, w1, first_call, ctx_ms, ctx_name, setup_ms, busy_cap, busy_win, s0)
    return {k: _num(v) for k, v in out.items()}


def _setup_ms(a: Analysis, res, lo: int, hi: int, span: bool = False) -> float:
    """Idle time of class ``setup`` in ``[lo, hi)``, mean over the devices with GPU work there."""
    plan = res.plan
    devs = np.flatnonzero((plan.dev_ops > 0) & (plan.dev_min_start < hi)) if len(plan.dev_ops) else []
    if len(devs) == 0:
        return 0.0
    if span:
        per = res.glob.setup_idle[devs]
    else:
        per = np.zeros(len(plan.dev_ops), dtype=np.int64)
        for d, x0, x1 in res.glob.setup_pieces:
            a0, a1 = max(x0, lo), min(x1, hi)
            if a1 > a0:
                per[d] += a1 - a0
        per = per[devs]
    return float(per.mean()) / 1e6


# ---------------------------------------------------------------------------------------------
def _values(a: Analysis, r: dict) -> dict:
    """The flat metric namespace that rule conditions and messages use (``docs/glossary.md``,
    "Rule values"). Every value is a number, bool, string or null. Times of the window are
    wall-clock per device: the mean over the devices with GPU work, never a sum over GPUs."""
    t = a.trace
    m, summ, cap = r["metrics"], r["summary"], r["capture"]
    window_ms = cap["window"]["duration_ms"]
    primary = [s for s in r["steps"] if s["primary"]]
    active = _active(r["devices"])
    ndev = len(active)
    mean = lambda key: _num(_mean([d.get(key) for d in active])) if ndev else None  # noqa: E731
    pct_of_window = lambda ms: _num(ms / window_ms * 100) if ms is not None and window_ms else None  # noqa: E731
    tiny = (round(m["kernels"]["under_10us_pct"] * m["kernels"]["count"] / 100)
            if m["kernels"]["under_10us_pct"] is not None else 0)
    v: dict = {
        "window_ms": window_ms,
        "window_kind": cap["window"]["kind"],
        "device_count": ndev,
        "has_step_markers": cap["has_step_markers"],
        "has_steps": cap["step_source"] is not None,
        "steps_inferred": cap["step_source"] == "inferred",
        "step_count": summ["step_count"],
        "step_time_ms_median": summ["step_time_ms_median"],
        "gpu_busy_pct": summ["gpu_busy_pct"],
        "gpu_activity": cap["gpu_activity"],
        "enough_gpu_work": cap["enough_gpu_work"],
        "gpu_op_count": sum(d["kernel_count"] + d["copy_count"] for d in active),
        "host_wait_pct": m["host_wait_pct"],
        "kernel_count": summ["kernel_count"],
        "kernels_per_step_median": summ["kernels_per_step_median"],
        "kernel_mean_us": m["kernels"]["mean_us"],
        "kernel_median_us": m["kernels"]["median_us"],
        "kernel_under_10us_pct": m["kernels"]["under_10us_pct"],
        "tiny_kernel_count": tiny,
        "tiny_kernels_per_gpu": _num(tiny / max(ndev, 1)),
        "nvtx_traced": t.traced["nvtx"], "osrt_traced": t.traced["osrt"], "cuda_api_traced": t.traced["cuda_api"],
        # rules whose evidence differs without OS runtime calls (e.g. a PyTorch Profiler trace) say so
        "os_wait_note": None if t.traced["osrt"] else (
            "OS runtime calls were not recorded in this capture, so input waits are seen only inside "
            "DataLoader ranges and any other wait counts as host time"),
        "gpu_metrics_present": bool(len(t.gpu_metrics)),
        "profiler_overhead_pct": cap["profiler_overhead_pct"],
        "diagnostic_warning_count": sum(d["count"] for d in cap["diagnostics"] if d["severity"] == "warning"),
        "diagnostic_error_count": sum(d["count"] for d in cap["diagnostics"] if d["severity"] == "error"),
        "lost_event_notes": sum(n["count"] for n in cap["nsys_notes"] if n["kind"] == "lost-events"),
        "cuda_trace_notes": sum(n["count"] for n in cap["nsys_notes"] if n["kind"] != "lost-events"),
        "launch_call_count": _kernel_launch_calls(t),
        "module_load_count": _kernel_launch_calls(t, _MODULE_LOADS),
        # the window split (mean over devices): busy = compute + exposed communication + copy-only
        "busy_ms": mean("busy_ms"),
        "compute_ms": mean("compute_ms"),
        "compute_pct": mean("compute_pct"),
        "copy_only_ms": mean("copy_only_ms"),
        "copy_only_pct": mean("copy_only_pct"),
        "copy_only_ms_per_step": _num(_step_mean(primary, "copy")),
    }
    # idle time by class, per device (mean over devices), as a share of the window and per step
    for c in gpu_m.CAUSES:
        ms = _mean([d["idle_ms_by_cause"][c] for d in active]) if ndev else None
        v[f"idle_{c}_ms"] = _num(ms)
        v[f"idle_{c}_pct"] = pct_of_window(ms)
        v[f"idle_{c}_ms_per_step"] = _num(_step_mean(primary, f"idle_{c}"))
    v["idle_pct"] = mean("idle_pct")
    # allocation churn is repetition: the share of the primary steps with GPU idle time in
    # allocation calls (null without steps)
    bds = [s["breakdown_ms"] for s in primary if s.get("breakdown_ms")]
    v["alloc_steps_pct"] = _num(sum(1 for b in bds if (b.get("idle_alloc") or 0) > 0) / len(bds) * 100) \
        if bds else None
    v.update(_gap_shape_values(a, m["kernels"]["median_us"]))
    per_step = lambda key: _median([s[key] if s[key] is not None else np.nan for s in primary])  # noqa: E731
    v["idle_before_first_op_ms_median"] = _num(per_step("idle_before_first_op_ms"))
    v["step_start_idle_pct_median"] = _num(_median([
        s["idle_before_first_op_ms"] / s["step_time_ms"] * 100 for s in primary
        if s["idle_before_first_op_ms"] is not None and s["step_time_ms"]]))
    v["host_sync_ms_per_step_median"] = m["sync"]["host_sync_ms_per_step_median"]
    v["scalar_reads_per_step_median"] = m["sync"]["scalar_reads_per_step_median"]
    v["scalar_read_count"] = m["sync"]["scalar_read_count"]
    v["sync_call_count"] = sum(x["count"] for x in m["sync"]["sync_calls"])
    v["host_sync_ms_max_thread"] = max((x["host_sync_ms"] for x in m["sync"]["host_sync_ms_by_thread"]), default=0.0)
    # allocation calls in the window (every thread)
    v["alloc_call_count"] = sum(x["count"] for x in m["alloc_calls"])
    v["alloc_api_ms"] = _num(sum(x["total_ms"] for x in m["alloc_calls"]))
    # one-time set-up over the whole GPU span (the window may exclude the warm-up)
    setup = m["setup"]
    v["span_ms"] = cap["span"]["duration_ms"]
    # plus the set-up before the first GPU operation (context creation, module loading, first
    # launches, compilation): the GPU is idle then too, and it is the same one-time cost
    fr = cap.get("framing") or {}
    before = fr.get("setup_before_ms") or 0.0
    v["setup_before_ms"] = _num(before)
    v["setup_span_ms"] = setup["setup_ms"]
    v["setup_ms"] = _num((setup["setup_ms"] or 0) + before) if setup["setup_ms"] is not None or before else None
    base = (v["span_ms"] or 0) + before
    v["setup_pct"] = _num(v["setup_ms"] / base * 100) if v["setup_ms"] is not None and base else None
    v["capture_ms"] = fr.get("capture_ms")
    v["busy_capture_pct"] = fr.get("busy_capture_pct")
    v["outside_window_pct"] = fr.get("outside_window_pct")
    v["warmup_ms"] = sum(x["duration_ms"] or 0 for x in cap["excluded"] if x["kind"] == "warm-up")
    top_setup = (setup["events"] or [None])[0]
    v["top_setup_name"] = top_setup["name"] if top_setup else None
    v["top_setup_ms"] = top_setup["total_ms"] if top_setup else None
    # communication (mean over devices)
    comm = m["communication"]
    v["comm_ms"], v["exposed_comm_ms"] = comm["comm_ms"], comm["exposed_comm_ms"]
    v["comm_overlapped_pct"] = comm["overlapped_pct"]
    v["exposed_comm_pct"] = mean("exposed_comm_pct")
    v["exposed_comm_ms_per_step"] = _num(_step_mean(primary, "exposed_comm"))
    # copies (summed over devices in the table; per device here)
    copies = m["copies"]
    n = max(ndev, 1)
    c_ms, c_b = sum(c["time_ms"] for c in copies), sum(c["bytes"] for c in copies)
    v["copy_count"] = sum(c["count"] for c in copies)
    v["copy_ms"] = _num(c_ms / n)
    v["copy_bytes"] = int(c_b / n)
    v["copy_gbps"] = _num(c_b / (c_ms * 1e6)) if c_ms else None
    top_copy = max(copies, key=lambda c: c["time_ms"], default=None)
    v["top_copy_kind"] = top_copy["kind"] if top_copy else None
    v["top_copy_host_memory"] = (top_copy["host_memory"] or None) if top_copy else None
    v["top_copy_ms"] = _num(top_copy["time_ms"] / n) if top_copy else None
    v["top_copy_bytes"] = int(top_copy["bytes"] / n) if top_copy else 0
    v["top_copy_gib"] = _num(v["top_copy_bytes"] / 2**30)
    v["top_copy_count"] = int(top_copy["count"] / n) if top_copy else 0
    v["top_copy_gbps"] = top_copy["gbps"] if top_copy else None
    pageable = [c for c in copies if c["host_memory"] == "pageable"]
    # pinned host copies of at least 64 KiB on average: small copies are latency-bound and say
    # nothing about the bandwidth pinned memory reaches
    pinned = [c for c in copies if c["host_memory"] == "pinned" and c["kind"] in ("HtoD", "DtoH")
              and c["count"] and c["bytes"] / c["count"] >= 64 * 1024]
    p_ms, p_b = sum(c["time_ms"] for c in pageable), sum(c["bytes"] for c in pageable)
    v["pageable_copy_count"] = sum(c["count"] for c in pageable)
    # wall-clock copy time per GPU (copies overlapping each other or running past the window count
    # once, clipped): what pinned memory could shorten
    v["pageable_copy_ms"] = _num(_wall_ms_per_gpu(a, a.engine.window.pageable_wall, ndev)) \
        if pageable else 0.0
    v["pageable_copy_bytes"] = int(p_b / n)
    v["pageable_copy_gib"] = _num(p_b / n / 2**30)
    v["pageable_gbps"] = _num(p_b / (p_ms * 1e6)) if p_ms else None
    q_ms, q_b = sum(c["time_ms"] for c in pinned), sum(c["bytes"] for c in pinned)
    v["pinned_gbps"] = _num(q_b / (q_ms * 1e6)) if q_ms else None
    # what pinned copies would reach: measured in this capture, else typical of the GPU's PCIe
    # generation (glossary: "pinned bandwidth reference")
    ccs_all = [d.get("compute_capability") for d in active if d.get("compute_capability")]
    v["pinned_gbps_typical"] = _pinned_typical_gbps(min(ccs_all) if ccs_all else None)
    ref = v["pinned_gbps"] or v["pinned_gbps_typical"]
    v["pinned_gbps_reference"] = ref
    v["pinned_gbps_measured"] = v["pinned_gbps"] is not None
    v["pageable_saving_ms"] = _num(max(0.0, (v["pageable_copy_ms"] or 0) - v["pageable_copy_bytes"] / (ref * 1e6))) \
        if pageable else 0.0
    v.update(_dtoh_values(a, primary, ndev))
    b = v["dtoh_bytes_per_step_median"]
    v["dtoh_mib_per_step_median"] = _num(b / 2**20) if b is not None else None
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
    fp32_total = m["kernels"]["fp32_gemm_ms"] or 0
    v["fp32_gemm_ms"] = _num(_wall_ms_per_gpu(a, a.engine.window.fp32_wall, ndev)) if fp32_total else 0.0
    v["fp32_gemm_share_pct"] = _num(fp32_total / ktotal * 100) if ktotal else None
    ccs = [d.get("compute_capability") for d in active if d.get("compute_capability")]
    v["compute_capability"] = min(ccs) if ccs else None
    v["tf32_capable"] = (min(ccs) >= 8.0) if ccs else None
    # what nvidia-smi would say vs the truth
    v["time_busy_pct_median"] = _num(per_step("time_busy_pct")) if primary else None
    for g in GPU_METRIC_NAMES:
        v[f"{g[:-4]}_pct_median"] = _num(per_step(g)) if primary else None
    v.update(_underfilled_values(a, m["underfilled"], primary, window_ms))
    return v


def _pinned_typical_gbps(cc: float | None) -> float:
    """Host<->device bandwidth pinned copies typically reach on a GPU of compute capability ``cc``
    (its usual PCIe link, x16): 9.x (Hopper, PCIe 5.0) 50 GB/s, 8.x (Ampere/Ada, PCIe 4.0) 24 GB/s,
    older or unknown (PCIe 3.0) 12 GB/s."""
    if cc is None:
        return 12.0
    return 50.0 if cc >= 9.0 else 24.0 if cc >= 8.0 else 12.0


def _wall_ms_per_gpu(a: Analysis, total_ns, ndev: int) -> float:
    """Wall-clock time per GPU of a selection of GPU operations that start in the window: the union
    of their intervals clipped to the window on each device (concurrent or overlapping operations
    count once; the slices add up its parts), as the mean over the ``ndev`` devices with GPU work."""
    if not a.engine.ctx.active:
        return 0.0
    return float(np.asarray(total_ns).sum()) / max(ndev, 1) / 1e6


def _kernel_launch_calls(t: Trace, pattern=S.KERNEL_LAUNCH_APIS) -> int:
    """Kernel and graph launch calls (or calls matching ``pattern``) in the whole capture (any thread)."""
    counts = np.asarray(t.derived.get("runtime_name_counts", np.zeros(0, np.int64)))
    if not len(counts) or not t.count("runtime"):
        return 0
    flags = t.strings.flags(lambda v: pattern.match(S.strip_api_suffix(v)) is not None)
    return int(counts[flags(np.arange(len(counts)))].sum())


#: Module and library loading calls: the program loaded GPU code.
_MODULE_LOADS = __import__("re").compile(r"^(cuModuleLoad\w*|cuLibraryLoad\w*)$")


def _step_mean(primary: list[dict], part: str) -> float | None:
    """Mean over the primary steps that have a breakdown of one part of it (ms): a cost per step
    that a single large stall does not hide, as a median would."""
    vals = [s["breakdown_ms"].get(part) for s in primary if s.get("breakdown_ms")]
    vals = [v for v in vals if v is not None]
    return float(np.mean(vals)) if vals else None


def _gap_shape_values(a: Analysis, kernel_median_us) -> dict:
    """How the idle time of the larger classes is spread: many short gaps (per-launch overhead)
    or a few long ones (host phases). Gaps inside the window, each counted for its largest class."""
    out = {"launch_gap_count": 0, "launch_gap_us_mean": None, "launch_gap_us_median": None,
           "launch_gap_to_kernel_ratio": None, "host_gap_count": 0, "host_gap_ms_max": None,
           "host_gap_ms_median": None}
    res = a.engine
    win = res.window
    if not res.ctx.active or not win.gaps_n:
        return out
    lg = np.concatenate(win.launch_gaps).astype(np.int64) if win.launch_gaps else np.zeros(0, np.int64)
    if len(lg):
        out.update(launch_gap_count=int(len(lg)), launch_gap_us_mean=_num(lg.mean() / 1e3),
                   launch_gap_us_median=_num(float(np.median(lg)) / 1e3))
        if kernel_median_us:
            out["launch_gap_to_kernel_ratio"] = _num(lg.mean() / 1e3 / kernel_median_us)
    # host phases: every gap with host CPU time (a host window of 1 ms or more), by that time
    hg = np.concatenate(win.host_gaps).astype(np.int64) if win.host_gaps else np.zeros(0, np.int64)
    if len(hg):
        out.update(host_gap_count=int(len(hg)), host_gap_ms_max=_num(hg.max() / 1e6),
                   host_gap_ms_median=_num(float(np.median(hg)) / 1e6))
    return out


def _dtoh_values(a: Analysis, primary: list[dict], ndev: int) -> dict:
    """Device-to-host copies that are not scalar reads (> 16 bytes): bytes, and the copy time with
    no kernel running (a copy hidden under compute costs nothing), in the window (per GPU: the mean
    over the ``ndev`` devices with GPU work) and per step."""
    t = a.trace
    res = a.engine
    w0 = a.steps.window_start_ns
    out = {"dtoh_bytes": 0, "dtoh_ms": None, "dtoh_count": 0, "dtoh_bytes_per_step_median": None,
           "dtoh_ms_per_step_median": None, "dtoh_ms_per_step": None}
    if w0 is None or t.count("memcpy") == 0 or not res.ctx.active:
        return out
    win = res.window
    n = max(ndev, 1)
    out.update(dtoh_bytes=int(win.dtoh_bytes / n), dtoh_count=int(win.dtoh_count),
               dtoh_ms=_num(_wall_ms_per_gpu(a, win.dtoh_wall, ndev)))
    if primary:
        ids = [s["step"] for s in primary]
        b = [int(res.glob.step_dtoh_bytes[i]) for i in ids]
        d = [float(res.glob.step_dtoh_exposed[i]) / 1e6 for i in ids]
        out["dtoh_bytes_per_step_median"] = _num(_median(b))
        out["dtoh_ms_per_step_median"] = _num(_median(d))
        out["dtoh_ms_per_step"] = _num(float(np.mean(d)))
    return out


# ---------------------------------------------------------------------------------------------
def _underfilled(a: Analysis, res, devices: list[dict], window_ns) -> dict:
    """Kernels that cannot fill the GPU, in the window (definitions: ``nsysdoc.metrics.occupancy``):
    times per GPU, the mean over the devices with GPU work whose SM count is known; per kernel
    name and launch configuration, the rows of the evidence table (most idle-SM time first)."""
    from .engine.fill import decode_group

    fc = res.ctx.fill
    sm = fc.table.sm_count
    known = [d["device"] for d in _active(devices) if d["device"] < len(sm) and sm[d["device"]] > 0]
    out = {"sm_count": int(sm[known].min()) if known else None, "devices": len(known), "kernel_ms": None,
           "recoverable_ms": None, "sm_fill_pct": None, "low_occupancy_ms": None, "sm_active_pct": None, "count": None,
           "kernels": []}
    if not known or not res.ctx.active or not window_ns:
        return out
    win = res.window
    n = len(known)
    out["kernel_ms"] = _num(float(win.uf_wall[known].sum()) / n / 1e6)
    out["recoverable_ms"] = _num(float(win.uf_idle[known].sum()) / n / 1e6)
    wall = float(win.uf_wall[known].sum())
    # the SMs in use while under-filled kernels run (time-weighted; every running kernel counts)
    out["sm_fill_pct"] = _num((1 - float(win.uf_idle[known].sum()) / wall) * 100) if wall > 0 else None
    out["low_occupancy_ms"] = _num(float(win.lowocc_wall[known].sum()) / n / 1e6)
    samples = int(win.uf_smact_n[known].sum())
    out["sm_active_pct"] = _num(float(win.uf_smact[known].sum()) / samples) if samples else None
    rows: dict = {}
    keep = set(known)
    for key, (cnt, t_ns, r_ns) in win.uf_groups.items():
        name, code, d = decode_group(key, fc.ncodes, res.ctx.ndev)
        if d not in keep:
            continue
        k = (name, code, int(sm[d]))
        acc = rows.setdefault(k, [0, 0.0, 0.0, d])
        acc[0] += cnt
        acc[1] += t_ns
        acc[2] += r_ns
    f = fc.table.fields
    table = []
    names = a.trace.strings.lookup(res.ctx.name_ids[np.array([k[0] for k in rows], dtype=np.int64)]) if rows else []
    for (name, code, s_), (cnt, t_ns, r_ns, d), nm in zip(rows, rows.values(), names):
        blocks, occ = int(f["blocks"][code]), fc.table.occupancy_pct[d, code]
        table.append({
            "name": nm, "blocks": blocks if blocks > 0 else None,
            "threads_per_block": int(f["threads"][code]) if f["threads"][code] > 0 else None,
            "registers_per_thread": int(f["regs"][code]) if f["regs"][code] >= 0 else None,
            "shared_memory_bytes": int(f["smem"][code]) if f["smem"][code] >= 0 else None,
            "sm_count": s_, "sm_fill_pct": _num(min(1.0, blocks / s_) * 100) if blocks > 0 else None,
            "theoretical_occupancy_pct": _num(occ) if occ == occ else None,
            "est_achieved_occupancy_pct": int(fc.est[code]) if code < len(fc.est) and fc.est[code] >= 0 else None,
            "low_occupancy": bool(fc.table.low_occupancy[d, code]),
            "count": int(cnt), "time_ms": _num(t_ns / n / 1e6), "recoverable_ms": _num(r_ns / n / 1e6),
            "share_of_window_pct": _num(r_ns / n / window_ns * 100),
        })
    # most idle-SM time first, then longest; ties: name, then blocks
    table.sort(key=lambda r: (-(r["recoverable_ms"] or 0), -(r["time_ms"] or 0), r["name"], r["blocks"] or 0))
    out["count"] = sum(r["count"] for r in table if r["blocks"] is not None and r["blocks"] < r["sm_count"])
    out["kernels"] = table[:TOP_N]
    return out


#: SM Active (GPU metrics) and the SM fill the launch configurations predict agree within this many
#: percentage points
FILL_AGREE_POINTS = 15.0


def _underfilled_values(a: Analysis, uf: dict, primary: list[dict], window_ms) -> dict:
    """The under-filled kernel values of ``metrics.values`` (``docs/glossary.md``)."""
    pct = lambda ms: _num(ms / window_ms * 100) if ms is not None and window_ms else None  # noqa: E731
    kernel_ms, rec_ms = uf["kernel_ms"], uf["recoverable_ms"]
    fill = uf["sm_fill_pct"]
    rows = [r for r in uf["kernels"] if (r["sm_fill_pct"] or 100) < 100]
    v = {"sm_count": uf["sm_count"],
         "underfilled_kernel_ms": kernel_ms, "underfilled_kernel_pct": pct(kernel_ms),
         "underfilled_recoverable_ms": rec_ms, "underfilled_recoverable_pct": pct(rec_ms),
         "underfilled_kernel_count": uf["count"],
         "underfilled_sm_fill_pct": fill,
         "underfilled_sm_active_pct": uf["sm_active_pct"],
         "low_occupancy_kernel_ms": uf["low_occupancy_ms"], "low_occupancy_kernel_pct": pct(uf["low_occupancy_ms"])}
    # per step: idle-SM time on the step's device, mean over the primary steps on a known GPU
    res = a.engine
    sm = res.ctx.fill.table.sm_count
    per = [float(res.glob.step_uf[s["step"]]) / 1e6 for s in primary
           if 0 <= res.plan.step_dev[s["step"]] < len(sm) and sm[res.plan.step_dev[s["step"]]] > 0]
    # null without under-filled kernel time (a finding on low occupancy alone has no cost per step)
    v["underfilled_ms_per_step"] = _num(float(np.mean(per))) if per and kernel_ms else None
    top = rows[0] if rows else None
    for k, col in (("name", "name"), ("blocks", "blocks"), ("threads", "threads_per_block"), ("count", "count"),
                   ("ms", "time_ms"), ("recoverable_ms", "recoverable_ms"), ("sm_fill_pct", "sm_fill_pct"),
                   ("occupancy_pct", "theoretical_occupancy_pct"),
                   ("est_occupancy_pct", "est_achieved_occupancy_pct")):
        v[f"top_underfilled_{k}"] = top[col] if top else None
    note = None
    measured = uf["sm_active_pct"]
    if measured is not None and fill is not None:
        if abs(measured - fill) <= FILL_AGREE_POINTS:
            note = (f"GPU metrics agree: SM Active averaged {measured:.1f}% while these kernels ran, close to the "
                    f"{fill:.1f}% of SMs their grids keep busy.")
        else:
            note = (f"GPU metrics disagree: SM Active averaged {measured:.1f}% while these kernels ran, against the "
                    f"{fill:.1f}% of SMs their grids keep busy"
                    + (" (work the capture does not show, or samples coarser than these kernels, kept more SMs "
                       "busy)." if measured > fill else " (not every SM with a block resident was active)."))
    v["underfilled_gpu_metrics_note"] = note
    lo = uf["low_occupancy_ms"]
    if lo:
        from .metrics.occupancy import MIN_RESIDENT_WARPS
        from .rules.text import duration

        v["low_occupancy_note"] = (f"Kernels whose launch configuration keeps fewer than {MIN_RESIDENT_WARPS} warps "
                                   f"resident per SM (too few for its warp schedulers) ran for {duration(lo * 1e6)} per "
                                   f"GPU ({v['low_occupancy_kernel_pct']:.1f}% of the window)."
                                   + ("" if (v.get("underfilled_recoverable_ms") or 0) > 0 else
                                      " The launch configuration alone gives no measurable cost for that: Nsight "
                                      "Compute's occupancy section says whether more resident warps would help."))
    else:
        v["low_occupancy_note"] = None
    return v
