"""The numbers of each section of the report result, from the engine's run (``nsysdoc.engine``):
kernels, launches, devices, steps, sync, idle gaps, set-up, communication, operators and where,
under-filled kernels, and the capture's framing. Each function returns a plain-JSON piece;
:mod:`nsysdoc.assembly` lays them out."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..metrics import framing as framing_m
from ..metrics import gpu as gpu_m
from ..metrics import host as host_m
from ..metrics.gpu_metrics import METRICS as GPU_METRIC_NAMES
from ..metrics.gpu_metrics import window_means
from ..metrics import kernels as kernels_m
from ..metrics.kernels import is_fp32_gemm, kernel_summary, kernel_tables, uses_tensor_cores
from ..trace import Trace
from ..trace import schema as S
from ..trace.columns import Columns
from .numbers import _consume, _isnan, _mean, _median, _num, _num_list, _records, _rounded

if TYPE_CHECKING:  # pragma: no cover
    from .inputs import Inputs


TOP_N = 50


#: Kernel names kept in ``metrics.kernels.names`` (every name up to this many, for ``nsysdoc diff``).
ALL_NAMES_MAX = 5000


def _kernel_metrics(trace: Trace, res, tables: dict | None = None) -> dict:
    """Kernel statistics of the kernels that start in the window (the compact per-kernel arrays
    the slices kept): overall, by name and by short name, FP32 GEMM and tensor-core time.
    ``tables["kernels"]`` receives the whole by-name table (the result keeps its top ``TOP_N``)."""
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
    _add_kernel_counters(by_name_all, res)
    by_name = by_name_all.head(TOP_N).drop(["code", "total_ns"])
    if tables is not None:
        tables["kernels"] = by_name_all.drop(["code", "total_ns"])
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
        "counters": _kernel_counters_summary(trace, res, by_name_all),
    }


def _add_kernel_counters(by_name: Columns, res) -> None:
    """Hardware counters per kernel name (issue 47; ``nsysdoc.metrics.gpu_metrics``): the by-name
    table gains ``sm_active_pct``, ``sm_issue_pct``, ``tensor_active_pct``, ``dram_bandwidth_pct``,
    ``counter_samples`` and ``bound`` (null/NaN and "unknown" without enough samples)."""
    from ..metrics.gpu_metrics import kernel_class, kernel_counter_means
    from ..metrics.kernels import gemm_precision

    codes = np.asarray(by_name["code"], dtype=np.int64) if len(by_name) else np.zeros(0, np.int64)
    means = kernel_counter_means(getattr(res.window, "k_counters", None), codes)
    for k, v in means.items():
        by_name[k] = v
    names = list(by_name["name"]) if len(by_name) else []
    bound = np.full(len(codes), "unknown", dtype=object)
    measured = ~(np.isnan(means["sm_issue_pct"]) & np.isnan(means["dram_bandwidth_pct"]))
    for i in np.flatnonzero(measured).tolist():  # names with enough samples, never per kernel
        bound[i] = kernel_class(means["sm_issue_pct"][i], means["tensor_active_pct"][i],
                                means["dram_bandwidth_pct"][i],
                                gemm_precision(str(names[i])) not in (None, "fp64", "complex"))
    by_name["bound"] = bound


def _add_operator_counters(view: dict, attr, res) -> None:
    """Hardware counters per operator (issue 47): each row of ``metrics.operators.rows`` gains the
    means of the GPU metrics samples inside the kernels it launched itself (its innermost range,
    as ``self_gpu_ms`` counts them), ``counter_samples`` and ``bound`` (the class, a GEMM/conv
    judged from its top kernel); null and "unknown" without GPU metrics, on "(no operator)" and
    under 5 samples."""
    from ..metrics.gpu_metrics import kernel_class, kernel_counter_means
    from ..metrics.kernels import gemm_precision

    rows = view.get("rows") or []
    if not rows:
        return
    sums = getattr(res.glob, "op_counters", None) if getattr(res.ctx, "counters", None) else None
    codes = np.full(len(rows), -1, dtype=np.int64)
    if sums is not None and attr is not None:
        for i, r in enumerate(rows):
            try:
                codes[i] = attr.names.index_of(r["name"])
            except (KeyError, AttributeError):
                pass
    means = kernel_counter_means(sums, codes)
    for i, r in enumerate(rows):  # the rows shown (at most 500), never per kernel
        for k, v in means.items():
            r[k] = _num(v[i]) if k != "counter_samples" else int(v[i])
        measured = r["sm_issue_pct"] is not None or r["dram_bandwidth_pct"] is not None
        r["bound"] = kernel_class(r["sm_issue_pct"], r["tensor_active_pct"], r["dram_bandwidth_pct"],
                                  gemm_precision(str(r.get("top_kernel") or "")) not in (None, "fp64", "complex")) \
            if measured else "unknown"


def _kernel_counters_summary(trace: Trace, res, by_name: Columns) -> dict:
    """``metrics.kernels.counters``: whether GPU metrics were sampled, their period, the sample
    count under which a kernel's counters are null, the kernel time per class, and what to switch
    on when nothing was sampled."""
    from ..metrics.gpu_metrics import CLASSES, MIN_KERNEL_SAMPLES

    counters = getattr(res.ctx, "counters", None) or {}
    periods = [p for dc in counters.values() for (_, _, p) in dc.metrics.values() if p > 0]
    out = {"present": bool(counters), "sample_period_us": _num(float(np.median(periods)) / 1e3) if periods else None,
           "min_samples": MIN_KERNEL_SAMPLES, "kernel_ms_by_class": None, "missing": None}
    if counters and len(by_name) and "bound" in by_name:
        bound = np.asarray(by_name["bound"], dtype=object)
        ms = np.asarray(by_name["total_ms"], dtype=np.float64)
        out["kernel_ms_by_class"] = {c: _num(float(ms[bound == c].sum())) for c in CLASSES}
    if not counters:
        out["missing"] = ("no GPU metrics: record them with nsys profile --gpu-metrics-devices=all (Nsight Systems "
                          "only; a PyTorch Profiler trace has none)" if trace.source_tool == "nsys" else
                          "no GPU metrics: a PyTorch Profiler trace has none; capture the run with nsys profile "
                          "--gpu-metrics-devices=all")
    return out


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


def _attribution(a: Inputs, devices: list[dict], kernel_metrics: dict) -> tuple[dict, dict]:
    """The operator view (whole capture) and, per ``where:`` selector, the sites of its time in the
    window (``nsysdoc.engine.attribute``), with what the capture lacks to say more."""
    from ..engine import attribute as att

    res = a.engine  # the run, read once through the assembly's inputs (issue 51)
    attr = res.plan.attr
    t = a.trace
    ops = att.operator_view(attr, t.strings)
    _dispatch_waits(t, ops.get("rows") or [])  # issue 47: CPU dispatch vs GPU, waits left out
    ops["missing"] = att.missing_data(t, attr)
    _add_operator_counters(ops, attr, res)
    for r in ops.get("rows") or []:  # issue 47 review: the newest field last (JSON key order)
        if "outer_calls" in r:
            r["outer_calls"] = r.pop("outer_calls")
    ndev = len(_active(devices)) or 1
    top = kernels_m.top_compute_kernel(kernel_metrics.get("by_name"))  # the rules' top_kernel
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


def _devices(a: Inputs, window_ns: int) -> list[dict]:
    res = a.engine  # the run, read once through the assembly's inputs (issue 51)
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


def _steps(a: Inputs) -> list[dict]:
    res = a.engine  # the run, read once through the assembly's inputs (issue 51)
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
        "index": st["index"].tolist(),
        "job_index": (st["job_index"] if "job_index" in st else st["index"]).tolist(), "name": st["name"].tolist(),
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


def _sync_metrics(a: Inputs, primary: list[dict]) -> dict:
    res = a.engine  # the run, read once through the assembly's inputs (issue 51)
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


def _gap_metrics(a: Inputs, devices: list[dict]) -> dict:
    res = a.engine  # the run, read once through the assembly's inputs (issue 51)
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
            "count_by_cause": {c: int(win.gaps_by_cause[j]) for j, c in enumerate(gpu_m.CAUSES)},
            "dependency_waits": _dependency_waits(a, win.dep_longest)}


#: dependency gaps described (the largest by dependency time in the window)
DEPENDENCY_ROWS = 10


def _dependency_waits(a: Inputs, cands: list) -> list[dict]:
    """The gaps with the most GPU-side dependency time, and what the GPU waited on in each
    (:mod:`nsysdoc.metrics.dependency`): the stream and operation that waited, its launching call
    and how long before it ran, the operation on another GPU that ended when the wait did, and the
    event/stream-wait/graph call on the launching thread behind it."""
    from ..metrics import dependency as dep_m
    from ..metrics.ops import KIND_KERNEL, KIND_MEMCPY

    if not cands:
        return []
    t = a.trace
    labels = np.asarray(t.devices["label"])
    streams = np.asarray(t.streams["stream_id"]) if len(t.streams) else np.zeros(0, np.int64)
    rt = t.store.get("runtime")
    rows = []
    for (dep_ns, dev, g0, g1, stream, kind, _row, name_id, op_start, api, a0, a1, gtid) in cands[:DEPENDENCY_ROWS]:
        if kind == KIND_KERNEL and name_id >= 0:
            op = str(t.strings.lookup(np.asarray([name_id]))[0])
        else:
            op = "memcpy" if kind == KIND_MEMCPY else "memset"
        sid = int(streams[stream]) if 0 <= stream < len(streams) else None
        row = {"device": labels[dev], "start_ns": int(g0), "end_ns": int(g1), "duration_ms": _num((g1 - g0) / 1e6),
               "dependency_ms": _num(dep_ns / 1e6), "stream": sid, "waiting_op": op, "op_start_ns": int(op_start),
               "launch_api": None, "launched_ms_before": None,
               "pid": int(S.decode_pid(gtid)) if gtid else None, "tid": int(S.decode_tid(gtid)) if gtid else None,
               "producer": None, "producer_device": None, "producer_stream": None, "producer_end_ns": None,
               "host_call": None, "host_call_us_before": None}
        # the operation on another GPU that ended when the wait ended
        parts = {"device": [], "stream_id": [], "end_ns": [], "name": []}
        for tab_name in ("kernels", "memcpy", "memset"):
            tab = t.store.get(tab_name)
            if tab is None or not len(tab):
                continue
            cols = ["device", "stream_id", "end_ns"] + (["name_id"] if tab_name == "kernels" else [])
            d = tab.rows_overlapping(int(g0), int(g1) + dep_m.PRODUCER_TOLERANCE_NS, cols)
            if not len(d["end_ns"]):
                continue
            parts["device"].append(np.asarray(d["device"], np.int64))
            parts["stream_id"].append(np.asarray(d["stream_id"], np.int64))
            parts["end_ns"].append(np.asarray(d["end_ns"], np.int64))
            parts["name"].append(t.strings.lookup(np.asarray(d["name_id"])) if tab_name == "kernels"
                                 else np.full(len(d["end_ns"]), tab_name, dtype=object))
        if parts["end_ns"]:
            o_dev, o_end = np.concatenate(parts["device"]), np.concatenate(parts["end_ns"])
            p = dep_m.producer(int(dev), int(g0), int(g1), o_dev, o_end)
            if p >= 0:
                row.update(producer=str(np.concatenate(parts["name"])[p]), producer_device=labels[int(o_dev[p])],
                           producer_stream=int(np.concatenate(parts["stream_id"])[p]), producer_end_ns=int(o_end[p]))
        # the launching call, and the wait/record/graph call behind it on the same thread
        if api >= 0 and rt is not None and len(rt) and not rt.bucketed:
            me = rt.gather(np.asarray([api]), ["name_id", "thread"])
            row["launch_api"] = S.strip_api_suffix(str(t.strings.lookup(np.asarray(me["name_id"]))[0]))
            row["launched_ms_before"] = _num(max(op_start - a1, 0) / 1e6)
            near = rt.rows_overlapping(int(a0) - dep_m.HOST_CALL_LOOKBACK_NS, int(a0) + 1,
                                       ["start_ns", "name_id", "thread"], touching=True)
            mine = np.flatnonzero(np.asarray(near["thread"]) == int(me["thread"][0]))
            if len(mine):
                names = [S.strip_api_suffix(str(x)) for x in t.strings.lookup(np.asarray(near["name_id"])[mine])]
                starts = np.asarray(near["start_ns"], np.int64)[mine]
                h = dep_m.host_call(int(a0), starts, [dep_m.is_wait_call(x) for x in names])
                if h >= 0:
                    row.update(host_call=names[h], host_call_us_before=_num((int(a0) - int(starts[h])) / 1e3))
        rows.append(row)
    return rows


def _setup_metrics(a: Inputs, devices: list[dict], extent: tuple[int, int] | None) -> dict:
    """One-time set-up over the GPU span: idle time of class setup (mean over devices with GPU
    work) and the set-up work behind it."""
    res = a.engine  # the run, read once through the assembly's inputs (issue 51)
    s0, s1 = a.span
    if not res.ctx.active or s0 is None or s1 is None or s1 <= s0:
        return {"setup_ms": None, "setup_pct_of_span": None, "events": []}
    ms = _setup_ms(a, res, s0, s1, span=True)
    # the events behind it, and behind the set-up before the first GPU operation
    lo = min(extent[0], s0) if extent else s0
    return {"setup_ms": _num(ms), "setup_pct_of_span": _num(ms / ((s1 - s0) / 1e6) * 100),
            "events": _records(_setup_events(a, res, lo, s1, gpu_start=s0))}


def _setup_events(a: Inputs, res, lo: int, hi: int, gpu_start: int | None = None) -> Columns:
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


def _framing(a: Inputs, extent: tuple[int, int] | None) -> dict | None:
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


def _setup_ms(a: Inputs, res, lo: int, hi: int, span: bool = False) -> float:
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
def _underfilled(a: Inputs, devices: list[dict], window_ns) -> dict:
    """Kernels that cannot fill the GPU, in the window (definitions: ``nsysdoc.metrics.occupancy``):
    times per GPU, the mean over the devices with GPU work whose SM count is known; per kernel
    name and launch configuration, the rows of the evidence table (most idle-SM time first)."""
    from ..engine.fill import decode_group

    res = a.engine  # the run, read once through the assembly's inputs (issue 51)
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


# ---------------------------------------------------------------------------------------------
# issue 47: an operator's CPU dispatch vs its GPU work (nsysdoc.metrics.dispatch)
# ---------------------------------------------------------------------------------------------
def _dispatch_waits(t, rows: list[dict]) -> None:
    """For the operator rows whose CPU time per call exceeds their GPU time, the time their ranges
    spent inside CUDA calls that block the host (``cpu_wait_ms``, whole capture; the calls
    ``nsysdoc.metrics.host`` counts as blocking): the host waiting for
    the GPU (``.item()``, a blocking copy) is no dispatch. ``cpu_exceeds_gpu`` is then whether the
    CPU time less that wait still exceeds the GPU time (the same per call: both divide by the
    same calls; docs/glossary.md, "Operators"). The ranges are read by name (the operator's NVTX / ``cpu_op`` rows, text groups
    tested once), the calls from the runtime table."""
    from ..metrics import attribution as A
    from ..metrics import dispatch as dispatch_m

    for r in rows:
        r["cpu_wait_ms"] = 0.0 if r.get("cpu_us_per_call") is not None else None
    cand = {r["name"]: r for r in rows if r.get("cpu_exceeds_gpu")}
    nv, rt = t.store.get("nvtx"), t.store.get("runtime")
    if not cand or nv is None or rt is None or not len(nv) or not len(rt):
        return
    from ..engine.data import blocking_of

    # the calls that block the host (nsysdoc.metrics.host): sync kinds, and async copies from
    # pageable memory (a .item() into pageable memory waits inside cudaMemcpyAsync)
    pageable = np.asarray(t.derived.get("pageable_async_api", np.zeros(0, np.int64)), dtype=np.int64)
    calls = {"thread": [], "start_ns": [], "end_ns": []}
    for blk in rt.iter_blocks(["start_ns", "end_ns", "thread", "api_kind", "pos"]):
        m = blocking_of(blk, pageable) & (blk["thread"] >= 0)
        if m.any():
            for k in calls:
                calls[k].append(np.asarray(blk[k][m], dtype=np.int64))
    if not calls["thread"]:
        return
    ct, cs, ce = (np.concatenate(calls[k]) for k in ("thread", "start_ns", "end_ns"))
    names = list(cand)
    g_of = np.array([names.index(n) if n in cand else -1
                     for n in (A.op_name(x) if isinstance(x, str) else "" for x in t.nvtx_groups)], dtype=np.int64)
    parts: list = []
    for blk in nv.iter_blocks(["start_ns", "end_ns", "event_type", "thread", "text_group"]):
        grp = blk["text_group"].astype(np.int64)
        ok = np.isin(blk["event_type"], S.NVTX_RANGE_TYPES) & (blk["end_ns"] >= blk["start_ns"]) & (grp >= 0)
        which = np.full(len(grp), -1, dtype=np.int64)
        which[ok] = g_of[grp[ok]]
        m = which >= 0
        if m.any():
            parts.append((which[m], blk["thread"][m].astype(np.int64), blk["start_ns"][m].astype(np.int64),
                          blk["end_ns"][m].astype(np.int64)))
    if not parts:
        return
    which, th, s, e = (np.concatenate([p[i] for p in parts]) for i in range(4))
    o = np.argsort(which, kind="stable")  # one sort, then each name's rows are a slice
    which, th, s, e = which[o], th[o], s[o], e[o]
    bounds = np.searchsorted(which, np.arange(len(names) + 1))
    for i, n in enumerate(names):
        r = cand[n]
        m = slice(int(bounds[i]), int(bounds[i + 1]))
        wait_ns = dispatch_m.overlap_ns(*dispatch_m.union_per_thread(th[m], s[m], e[m]), ct, cs, ce)
        r["cpu_wait_ms"] = wait_ns / 1e6
        r["cpu_exceeds_gpu"] = bool(r["cpu_ms"] - r["cpu_wait_ms"] > r["gpu_ms"])


def _operators_by_shape(a: Inputs, kernel_metrics: dict) -> tuple[dict, dict]:
    """``metrics.operators_by_shape`` (issue 47) and the rule values it gives: input shapes that
    change between steps (rule dynamic-shapes) and fixed convolution shapes with the convolution
    kernels' share (rule cudnn-benchmark); ``nsysdoc.engine.shapes``."""
    from ..engine import shapes as shapes_e
    from ..metrics.convolution import conv_kernel_share_pct

    res = a.engine  # the run, read once through the assembly's inputs (issue 51)
    attr = res.plan.attr
    t = a.trace
    sliced = getattr(attr, "shape_totals", None)  # an nsys export's: read while the plan was built
    rows = sliced.rows if sliced is not None else shapes_e.shaped_rows(t) if attr is not None else None
    shapes = shapes_e.range_shapes(t, attr, rows)
    table = shapes_e.operators_by_shape(t, attr, shapes)
    gpu_ms: dict = {}
    for r in table["rows"]:
        gpu_ms[r["name"]] = gpu_ms.get(r["name"], 0.0) + (r["self_gpu_ms"] or 0.0)
    values = shapes_e.shape_changes(t, rows, a.steps.table, gpu_ms)
    window_ms = (a.steps.window_ns or 0) / 1e6
    if values["shape_change_ms"] is not None and window_ms:
        values["shape_change_pct"] = values["shape_change_ms"] / window_ms * 100
    # over every kernel name (the whole per-name table the analysis keeps), not the JSON's top 50
    whole = (getattr(a, "tables", None) or {}).get("kernels")
    if whole is not None and "name" in whole.columns and "total_ms" in whole.columns:
        from ..metrics.convolution import conv_kernel_share_pct_of

        values["conv_kernel_share_pct"] = conv_kernel_share_pct_of(
            whole["name"], whole["total_ms"], whole["is_nccl"] if "is_nccl" in whole.columns else None)
    else:
        values["conv_kernel_share_pct"] = conv_kernel_share_pct(kernel_metrics.get("by_name"))
    values["operator_shapes_recorded"] = rows is not None
    return _rounded(table), {k: (_num(v) if isinstance(v, float) else v) for k, v in values.items()}
