"""``metrics.values``: the flat numbers the rules read (docs/rules), computed from the sections
already assembled."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..metrics import alloc as alloc_m
from ..metrics import capture_checks as checks_m
from ..metrics import gpu as gpu_m
from ..metrics import kernels as kernels_m
from ..metrics.gpu_metrics import METRICS as GPU_METRIC_NAMES
from ..trace import Trace
from ..trace import schema as S
from .numbers import _mean, _median, _num
from .sections import FILL_AGREE_POINTS, _active
from .memory import memory_values

if TYPE_CHECKING:  # pragma: no cover
    from .inputs import Inputs


# ---------------------------------------------------------------------------------------------
def _values(a: Inputs, r: dict) -> dict:
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
    v.update(_dependency_values(m["idle_gaps"].get("dependency_waits") or []))
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
    # churn or growth: allocations that repeat after frees (nsysdoc.metrics.alloc); when none
    # repeats, the GPU idle in allocation calls is the allocator growing: one-time set-up
    alloc = _alloc_values(a)
    repeat_starts = alloc.pop("_repeat_starts_ns", None)
    v.update(alloc)
    v["alloc_growth_ms"] = _alloc_growth_ms(v["idle_alloc_ms"], v["alloc_repeat_count"], primary, repeat_starts,
                                            len(active))
    # one-time set-up over the whole GPU span (the window may exclude the warm-up)
    setup = m["setup"]
    v["span_ms"] = cap["span"]["duration_ms"]
    # plus the set-up before the first GPU operation (context creation, module loading, first
    # launches, compilation): the GPU is idle then too, and it is the same one-time cost
    fr = cap.get("framing") or {}
    before = fr.get("setup_before_ms") or 0.0
    v["setup_before_ms"] = _num(before)
    v["setup_span_ms"] = setup["setup_ms"]
    # and the allocator's growth (GPU idle in allocation calls when no allocation repeats)
    growth = v["alloc_growth_ms"] or 0.0
    v["setup_ms"] = _num((setup["setup_ms"] or 0) + before + growth) \
        if setup["setup_ms"] is not None or before or growth else None
    base = (v["span_ms"] or 0) + before
    v["setup_pct"] = _num(v["setup_ms"] / base * 100) if v["setup_ms"] is not None and base else None
    v["capture_ms"] = fr.get("capture_ms")
    v["busy_capture_pct"] = fr.get("busy_capture_pct")
    v["outside_window_pct"] = fr.get("outside_window_pct")
    # what the capture can support (nsysdoc.metrics.capture_checks; glossary "What the capture can support")
    unrec = cap.get("unrecorded_gpu_work") or []
    v["unrecorded_call_count"] = len(unrec)
    v["unrecorded_call_name"] = unrec[0]["call"] if unrec else None
    v["unrecorded_call_ms"] = unrec[0]["duration_ms"] if unrec else None
    v["unrecorded_covered_ms"] = unrec[0]["covered_ms"] if unrec else None
    v["unrecorded_gpu_ms"] = _num(sum(x["uncovered_ms"] or 0 for x in unrec)) if unrec else None
    # the program's part of the capture: from its first CUDA call (or GPU operation) on, as
    # host-outside-window counts it; process start-up before it (interpreter, imports, data
    # loading before CUDA) is no measure of how much GPU work the program does
    program_ms = (v["capture_ms"] - (fr.get("startup_ms") or 0.0)) if v["capture_ms"] else None
    v["program_ms"] = _num(program_ms) if program_ms and program_ms > 0 else None
    v["gpu_work_sliver"] = checks_m.gpu_work_sliver(v["busy_ms"], v["program_ms"]) if v["gpu_activity"] else False
    v["busy_capture_share_pct"] = (_num(v["busy_ms"] / v["program_ms"] * 100)
                                   if v["busy_ms"] is not None and v["program_ms"] else None)
    hw = cap.get("host_outside_window") or {}
    v["host_outside_window_ms"] = hw.get("ms")
    v["host_outside_window_pct"] = hw.get("pct")
    v["host_outside_before_ms"] = hw.get("before_ms")
    v["host_outside_after_ms"] = hw.get("after_ms")
    v["host_outside_phase_count"] = len(hw.get("phases") or []) if hw else None
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
    # kernels: top compute kernel (communication kernels wait on other ranks: never "the" kernel)
    # and FP32 GEMMs
    top = kernels_m.top_compute_kernel(m["kernels"]["by_name"])
    v["top_kernel_name"] = top["name"] if top else None
    v["top_kernel_share_pct"] = top["share_of_kernel_time_pct"] if top else None
    v["top_kernel_count"] = top["count"] if top else 0
    v["top_kernel_total_ms"] = top["total_ms"] if top else None
    v["top_kernel_mean_us"] = top["mean_us"] if top else None
    # its summed duration per GPU over the window (a kernel of 2% of the window sets no time)
    v["top_kernel_window_pct"] = _num(min(100.0, top["total_ms"] / max(ndev, 1) / window_ms * 100)) \
        if top and window_ms else None
    short_top = kernels_m.top_compute_kernel(m["kernels"]["by_short_name"])
    v["top_kernel_short_name"] = short_top["name"] if short_top else None
    steps_n = summ["step_count"] or 0
    v["top_kernel_calls_per_step"] = _num(top["count"] / steps_n) if top and steps_n else None
    stm = summ["step_time_ms_median"]
    # the median launch (a mean over a few long launches could exceed the median step: "one launch
    # lasts 114% of a step" would be false where every launch fits in its step)
    v["top_kernel_instance_share_pct"] = _num(top["median_us"] / 10 / stm) if top and stm else None
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
    v.update(memory_values(m.get("memory")))  # issue 47
    v.update(_kernel_counter_values(m["kernels"]))
    v.update(_zero_grad_values(t, cap["window"], len(primary), ndev, window_ms))
    return v


def _kernel_counter_values(km: dict) -> dict:
    """The hardware-counter values of ``metrics.values`` (issue 47; glossary, "Hardware counters
    per kernel"): the top compute kernel's class and counters as a sentence, and the kernels whose
    counters read latency-bound (by kernel time), for the dominant-kernel and pseudo-busy rules."""
    from ..metrics.gpu_metrics import CLASS_MEANING
    from ..rules.text import duration

    rows = km.get("by_name") or []
    cs = km.get("counters") or {}
    top = kernels_m.top_compute_kernel(rows)
    v: dict = {"top_kernel_bound": None, "top_kernel_bound_note": None, "latency_bound_kernel_count": 0,
               "latency_bound_kernel_ms": None, "latency_bound_note": None, "unclassified_kernel_pct": None}
    if not cs.get("present"):
        return v
    total = sum(r["total_ms"] or 0 for r in rows)
    unknown = sum(r["total_ms"] or 0 for r in rows if r.get("bound") == "unknown")
    v["unclassified_kernel_pct"] = _num(unknown / total * 100) if total else None
    if top and top.get("bound") and top["bound"] != "unknown":
        v["top_kernel_bound"] = top["bound"]
        parts = [f"SM Issue {top['sm_issue_pct']:.0f}%" if top.get("sm_issue_pct") is not None else None,
                 f"Tensor Active {top['tensor_active_pct']:.0f}%" if top.get("tensor_active_pct") is not None else None,
                 f"DRAM bandwidth {top['dram_bandwidth_pct']:.0f}%" if top.get("dram_bandwidth_pct") is not None else None]
        v["top_kernel_bound_note"] = (f"GPU metrics inside its launches ({', '.join(p for p in parts if p)} of peak, "
                                      f"{top['counter_samples']:,} samples) read it as {top['bound']}: "
                                      f"{CLASS_MEANING[top['bound']]}.")
    elif top:
        period = cs.get("sample_period_us")
        v["top_kernel_bound_note"] = (f"GPU metrics cannot classify it: fewer than {cs['min_samples']} samples fall "
                                      f"whole inside its launches" + (f" (one every {period:g} us)" if period else "")
                                      + "; a higher nsys --gpu-metrics-frequency would resolve it.")
    lat = [r for r in rows if r.get("bound") == "latency-bound" and not r.get("is_nccl")]
    v["latency_bound_kernel_count"] = len(lat)
    if lat:
        ms = sum(r["total_ms"] or 0 for r in lat)
        v["latency_bound_kernel_ms"] = _num(ms)
        shown = "; ".join(f"{r['name'][:80]} ({duration(r['total_ms'] * 1e6)}, SM Issue {r['sm_issue_pct']:.0f}%)"
                          for r in lat[:3] if r.get("sm_issue_pct") is not None)
        v["latency_bound_note"] = (f"Kernels whose GPU metrics read latency-bound (SM Issue and DRAM bandwidth "
                                   f"under 60% of peak inside their launches): {shown}"
                                   + (f" and {len(lat) - 3} more" if len(lat) > 3 else "") + ".")
    elif v["unclassified_kernel_pct"]:
        period = cs.get("sample_period_us")
        v["latency_bound_note"] = (f"{v['unclassified_kernel_pct']:.0f}% of kernel time is in kernels too short for "
                                   f"the GPU metrics samples" + (f" (one every {period:g} us)" if period else "")
                                   + " to classify them.")
    return v


def _alloc_growth_ms(idle_alloc_ms, repeat_count: int, primary: list[dict], repeat_starts_ns,
                     ndev: int) -> float | None:
    """GPU idle (ms per GPU) in allocation calls that is the allocator growing, not churn: all of
    it when no allocation repeats; with steps, what the primary steps holding no repeat (and the
    window outside the steps) hold, i.e. the window's allocation idle minus the steps that hold a
    repeat (a step holds one when a repeat starts inside it, on any thread: a conservative match);
    without steps and with repeats, none (glossary "Allocation repeats")."""
    if not idle_alloc_ms or idle_alloc_ms <= 0:
        return None
    if not repeat_count:
        return idle_alloc_ms
    if not primary or repeat_starts_ns is None or not ndev:
        return None
    t = np.asarray(repeat_starts_ns, np.int64)
    churn = 0.0
    for s in primary:
        bd = s.get("breakdown_ms") or {}
        lo, hi = s.get("start_ns"), s.get("end_ns")
        if lo is None or hi is None:
            continue
        if np.searchsorted(t, int(hi), side="left") > np.searchsorted(t, int(lo), side="left"):
            churn += bd.get("idle_alloc") or 0.0
    growth = idle_alloc_ms - churn / ndev
    return _num(growth) if growth > 1e-9 else None


def _alloc_values(a: Inputs) -> dict:
    """Allocation repeats (``nsysdoc.metrics.alloc``, ``docs/glossary.md``): the allocation calls
    of the threads that launch GPU work, the first calls of an operator around them, the primary
    steps; counts in the analysis window."""
    out = {"alloc_count": 0, "alloc_release_count": 0, "alloc_repeat_count": 0, "alloc_growth_count": 0,
           "alloc_first_call_count": 0, "alloc_repeat_steps": None, "alloc_repeat_steps_pct": None}
    res = a.engine
    w0, w1 = a.steps.window_start_ns, a.steps.window_end_ns
    glob = res.glob
    if w0 is None or w1 is None or not glob.alloc_rows:
        return out
    rows = {k: np.concatenate([p[k] for p in glob.alloc_rows]) for k in glob.alloc_rows[0]}
    launchers = np.unique(np.concatenate(glob.launch_threads)) if glob.launch_threads else np.zeros(0, np.int64)
    keep = np.isin(rows["thread"], launchers) & (rows["thread"] >= 0)
    rows = {k: v[keep] for k, v in rows.items()}
    if not len(rows["thread"]):
        return out
    release = a.trace.strings.flags(lambda n: alloc_m.is_release(n))(rows["name_id"])
    first = _in_first_calls(res.plan, rows)
    ctx = res.ctx
    prim = ctx.step_primary if len(ctx.step_primary) else np.zeros(0, bool)
    got = alloc_m.alloc_repeats(rows["thread"], rows["start_ns"], release, first, w0, w1,
                                ctx.step_start[prim], ctx.step_end[prim], ctx.step_thread[prim])
    out["_repeat_starts_ns"] = got.repeat_starts_ns
    out.update(alloc_count=got.alloc_count, alloc_release_count=got.release_count,
               alloc_repeat_count=got.repeat_count, alloc_growth_count=got.growth_count,
               alloc_first_call_count=got.first_call_count, alloc_repeat_steps=got.repeat_steps,
               alloc_repeat_steps_pct=_num(got.repeat_steps_pct))
    return out


def _in_first_calls(plan, rows: dict) -> np.ndarray:
    """Per allocation call, whether it lies inside its thread's first call of the innermost
    operator around it, an operator called more than once in the capture (the plan's attributor;
    all False without operator ranges)."""
    n = len(rows["thread"])
    out = np.zeros(n, dtype=bool)
    attr = plan.attr
    if attr is None or getattr(attr, "source", None) is None or not n:
        return out
    th, s, e = rows["thread"], rows["start_ns"], rows["end_ns"]
    got = attr.first_calls(th, s, e, 0.0)
    if got is None or not len(got[0]):
        return out
    c_th, c_s, c_e, names = (np.asarray(x, np.int64) for x in got)
    # a first call of an operator that is called again: a range of a name of its own (a step
    # marker, ProfilerStep#N) is no operator's first call
    calls = np.asarray(attr.op_totals()["calls"])
    again = (names < len(calls)) & (calls[np.minimum(names, max(len(calls) - 1, 0))] >= 2) if len(calls) else \
        np.zeros(len(names), bool)
    c_th, c_s, c_e = c_th[again], c_s[again], c_e[again]
    # inside any of them on the thread: the latest end among the ranges starting at or before
    for t_ in np.unique(c_th).tolist():
        m = c_th == t_
        order = np.argsort(c_s[m], kind="stable")
        starts, reach = c_s[m][order], np.maximum.accumulate(c_e[m][order])
        q = np.flatnonzero(th == t_)
        k = np.searchsorted(starts, s[q], side="right") - 1
        out[q] = (k >= 0) & (reach[np.maximum(k, 0)] > s[q])
    return out


def _dependency_values(rows: list[dict]) -> dict:
    """What the GPU waited on in the gap with the most GPU-side dependency time (``metrics.idle_gaps
    .dependency_waits``): a sentence for the gpu-dependency rule, and how long before it ran the
    waiting operation had been launched (ms)."""
    if not rows:
        return {"dependency_waited_on": None, "dependency_launched_ms_before": None}
    r = rows[0]
    from ..rules.text import duration

    what = f"{r['waiting_op']} on stream {r['stream']} of GPU {r['device']}"
    if r.get("launch_api"):
        what += f", launched by {r['launch_api']} {duration(r['launched_ms_before'] * 1e6)} before it ran"
    if r.get("host_call") and r["host_call"] == r.get("launch_api") and not r.get("host_call_us_before"):
        what += " (a node of a CUDA graph: it waits on the graph's dependencies)" \
            if "GraphLaunch" in r["host_call"] else f" (the {r['host_call']} itself makes a stream wait)"
    elif r.get("host_call"):
        what += f" (after a {r['host_call']} on the same thread)"
    if r.get("producer"):
        what += (f", waited for {r['producer']} on stream {r['producer_stream']} of GPU {r['producer_device']}, "
                 f"which ended when the wait did")
    else:
        what += (", waited on nothing the capture recorded on another GPU (a host callback, another process or "
                 "rank, or work not recorded)")
    return {"dependency_waited_on": what, "dependency_launched_ms_before": r.get("launched_ms_before")}


def _pinned_typical_gbps(cc: float | None) -> float:
    """Host<->device bandwidth pinned copies typically reach on a GPU of compute capability ``cc``
    (its usual PCIe link, x16): 9.x (Hopper, PCIe 5.0) 50 GB/s, 8.x (Ampere/Ada, PCIe 4.0) 24 GB/s,
    older or unknown (PCIe 3.0) 12 GB/s."""
    if cc is None:
        return 12.0
    return 50.0 if cc >= 9.0 else 24.0 if cc >= 8.0 else 12.0


def _wall_ms_per_gpu(a: Inputs, total_ns, ndev: int) -> float:
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
    called = np.flatnonzero(counts)  # the names of calls (tested lazily: not every string)
    return int(counts[called][flags(called)].sum())


#: Module and library loading calls: the program loaded GPU code.
_MODULE_LOADS = __import__("re").compile(r"^(cuModuleLoad\w*|cuLibraryLoad\w*)$")


def _step_mean(primary: list[dict], part: str) -> float | None:
    """Mean over the primary steps that have a breakdown of one part of it (ms): a cost per step
    that a single large stall does not hide, as a median would."""
    vals = [s["breakdown_ms"].get(part) for s in primary if s.get("breakdown_ms")]
    vals = [v for v in vals if v is not None]
    return float(np.mean(vals)) if vals else None


def _gap_shape_values(a: Inputs, kernel_median_us) -> dict:
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


def _dtoh_values(a: Inputs, primary: list[dict], ndev: int) -> dict:
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


def _underfilled_values(a: Inputs, uf: dict, primary: list[dict], window_ms) -> dict:
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
        from ..metrics.occupancy import MIN_RESIDENT_WARPS
        from ..rules.text import duration

        v["low_occupancy_note"] = (f"Kernels whose launch configuration keeps fewer than {MIN_RESIDENT_WARPS} warps "
                                   f"resident per SM (too few for its warp schedulers) ran for {duration(lo * 1e6)} per "
                                   f"GPU ({v['low_occupancy_kernel_pct']:.1f}% of the window)."
                                   + ("" if (v.get("underfilled_recoverable_ms") or 0) > 0 else
                                      " The launch configuration alone gives no measurable cost for that: Nsight "
                                      "Compute's occupancy section says whether more resident warps would help."))
    else:
        v["low_occupancy_note"] = None
    return v


# ---------------------------------------------------------------------------------------------
# gradient zeroing repeated within one optimizer step (issue 47; nsysdoc.metrics.optimizer)
# ---------------------------------------------------------------------------------------------
def _zero_grad_values(t: Trace, window: dict, steps: int, ndev: int, window_ms) -> dict:
    """``zero_grad`` calls per optimizer step from the ``Optimizer.zero_grad#…`` and
    ``Optimizer.step#…`` ranges (Kineto user annotations, NVTX ranges in nsys), and the GPU
    operations launched inside the extra calls (docs/glossary.md, "Gradient zeroing"). The range
    texts are tested once per text group; the GPU tables are read only when a call is extra."""
    from ..metrics import optimizer as opt_m

    out = {"zero_grad_calls": 0, "optimizer_step_calls": 0, "zero_grad_per_step_max": None,
           "zero_grad_extra_calls": 0, "zero_grad_extra_gpu_ops": 0, "zero_grad_extra_gpu_ms": 0.0,
           "zero_grad_extra_gpu_pct": 0.0, "zero_grad_extra_gpu_ms_per_step": 0.0 if steps else None,
           "zero_grad_optimizer": None}
    nv = t.store.get("nvtx")
    gtexts = t.nvtx_groups
    if nv is None or not len(nv) or not len(gtexts):
        return out
    g_zero = np.array([opt_m.is_zero_grad(x) for x in gtexts], dtype=bool)
    g_step = np.array([opt_m.is_optimizer_step(x) for x in gtexts], dtype=bool)
    if not g_zero.any() or not g_step.any():
        return out
    parts: dict = {"z": [], "s": []}
    for blk in nv.iter_blocks(["start_ns", "end_ns", "event_type", "thread", "text_group"]):
        grp = blk["text_group"].astype(np.int64)
        ok = np.isin(blk["event_type"], S.NVTX_RANGE_TYPES) & (blk["end_ns"] >= blk["start_ns"]) & (grp >= 0)
        gz = np.zeros(len(grp), dtype=bool)
        gs = np.zeros(len(grp), dtype=bool)
        gz[ok], gs[ok] = g_zero[grp[ok]], g_step[grp[ok]]
        for key, m in (("z", gz & ok), ("s", gs & ok)):
            if m.any():
                parts[key].append((blk["thread"][m].astype(np.int64), blk["start_ns"][m].astype(np.int64),
                                   blk["end_ns"][m].astype(np.int64), grp[m]))
    if not parts["z"] or not parts["s"]:
        return out
    zt, zs, ze, zg = (np.concatenate([p[i] for p in parts["z"]]) for i in range(4))
    st, ss = (np.concatenate([p[i] for p in parts["s"]]) for i in range(2))
    got = opt_m.zero_grad_repeats(zt, zs, st, ss, zg_name=zg)  # per optimizer (its range's text group)
    name = gtexts[int(zg[0])].strip().partition("#")[2].split(".")[0] or None
    out.update(zero_grad_calls=got.zero_grad_calls, optimizer_step_calls=got.step_calls,
               zero_grad_per_step_max=got.per_step_max, zero_grad_extra_calls=int(got.extra.sum()),
               zero_grad_optimizer=name)
    if not got.extra.any():
        return out
    w0, w1 = window.get("start_ns"), window.get("end_ns")
    if w0 is None or w1 is None:
        return out
    xt, xs, xe = zt[got.extra], zs[got.extra], ze[got.extra]
    ops, ns = 0, 0
    for table in ("kernels", "memset", "memcpy"):
        tab = t.store.get(table)
        if tab is None or not len(tab):
            continue
        for blk in tab.iter_blocks(["start_ns", "end_ns", "api_thread", "api_start_ns"]):
            inside = opt_m.launched_inside(xt, xs, xe, blk["api_thread"], blk["api_start_ns"]) & \
                (blk["api_thread"] >= 0)
            # the window's operations only, as the time is the window's (an instant one inside it)
            s_, e_ = blk["start_ns"], blk["end_ns"]
            inside &= (s_ < int(w1)) & ((e_ > int(w0)) | ((e_ <= s_) & (s_ >= int(w0))))
            if inside.any():
                ops += int(inside.sum())
                ns += opt_m.clipped_ns(blk["start_ns"][inside], blk["end_ns"][inside], int(w0), int(w1))
    ms = ns / 1e6 / max(ndev, 1)
    out.update(zero_grad_extra_gpu_ops=ops, zero_grad_extra_gpu_ms=_num(ms),
               zero_grad_extra_gpu_pct=_num(ms / window_ms * 100) if window_ms else None,
               zero_grad_extra_gpu_ms_per_step=_num(ms / steps) if steps else None)
    return out
