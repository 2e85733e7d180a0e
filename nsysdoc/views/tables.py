"""The page's tables of the result: operators (and by module, Python line, input shape), the
steps with their breakdown, kernels (and their counters), copies, syncs, launches, NVTX ranges,
devices and idle gaps.

Split from ``views/build.py`` (issue 51): each function turns one part of the JSON result
(``docs/json.md``) into a :class:`~nsysdoc.views.context.Table` of formatted cells with the raw
value kept for sorting; none reads anything but the result.
"""
from __future__ import annotations

import json
import re

from ..metrics.gpu import CAUSE_LABELS
from ..metrics.kernels import is_fp32_gemm, uses_tensor_cores
from . import charts
from .context import (Cell, Column, LegendItem, StepsView, Table, ViewerGuide, fmt_bytes, fmt_ms, fmt_num, fmt_pct,
                      fmt_s, fmt_us, is_num)
from .glossary import anchor
from .summary import BREAKDOWN, BREAKDOWN_ANCHORS, SHORT_LABELS, _pct, _per_outer_call, _trunc, is_kineto

OPERATORS_SHOWN = 25


def _cut_cell(text: str, n: int = 120) -> Cell:
    """A text's cell cut to ``n`` characters (:func:`_trunc`), with the whole text as its title
    when cut."""
    return Cell(_trunc(text, n), text, title=text if len(text) > n else "")


def operator_rows_shown(rows: list) -> list[dict]:
    """The operator rows the page shows (issue 47, the CPU-side table): the first OPERATORS_SHOWN
    of the JSON's (by self GPU time) and the OPERATORS_SHOWN of most CPU total time (ties: the
    name), in the JSON's order, so that sorting the table by either time shows its true top."""
    rows = [r for r in rows if isinstance(r, dict)]
    by_cpu = sorted((r for r in rows if is_num(r.get("cpu_ms"))),
                    key=lambda r: (-r["cpu_ms"], str(r.get("name") or "")))[:OPERATORS_SHOWN]
    keep = {id(r) for r in rows[:OPERATORS_SHOWN]} | {id(r) for r in by_cpu}
    return [r for r in rows if id(r) in keep]


def operator_tables(result: dict) -> list[Table]:
    """The operator view (like torch.profiler's key_averages() by GPU time) and the same time by
    module and by Python frame."""
    ops = (result.get("metrics") or {}).get("operators") or {}
    src = ops.get("source")
    missing = ops.get("missing") or []
    lack = " ".join(f"Not in this capture: {m.get('what')} ({m.get('switch')})." for m in missing if isinstance(m, dict))
    rows = []
    for r in operator_rows_shown(ops.get("rows") or []):
        name = str(r.get("name") or "")
        top = str(r.get("top_kernel") or "")
        rows.append([_cut_cell(name, 80),
                     Cell(fmt_num(r.get("calls"), 0), r.get("calls"), True),
                     Cell(fmt_num(r.get("self_gpu_ms"), 3), r.get("self_gpu_ms"), True),
                     Cell(fmt_num(r.get("gpu_ms"), 3), r.get("gpu_ms"), True),
                     Cell(fmt_num(r.get("self_cpu_ms"), 3) if is_num(r.get("self_cpu_ms")) else "—", r.get("self_cpu_ms"), True),
                     Cell(fmt_num(r.get("cpu_ms"), 3) if is_num(r.get("cpu_ms")) else "—", r.get("cpu_ms"), True),
                     Cell(fmt_num(r.get("kernels"), 0), r.get("kernels"), True),
                     _cut_cell(top, 60),
                     Cell(_trunc(str(r.get("module") or ""), 60), r.get("module") or ""),
                     Cell(_trunc(str(r.get("frame") or ""), 80), r.get("frame") or ""),
                     Cell(fmt_num(r.get("cpu_us_per_call"), 1) if is_num(r.get("cpu_us_per_call")) else "—",
                          r.get("cpu_us_per_call"), True, title=_per_outer_call(r)),
                     Cell(fmt_num(r.get("gpu_us_per_call"), 1) if is_num(r.get("gpu_us_per_call")) else "—",
                          r.get("gpu_us_per_call"), True, title=_per_outer_call(r))])
    what = {"kineto": "PyTorch Profiler cpu_op events", "nvtx": "NVTX push/pop ranges on the launching thread"}
    n = ops.get("row_count") or 0
    note = (f"Operators are {what.get(src, src)}; GPU times are summed durations of the GPU operations they launched "
            f"over the whole capture (as key_averages() reports device time), not unions. "
            f"{fmt_pct(ops.get('attributed_pct'))} of {fmt_ms(ops.get('gpu_ms'))} of GPU time has an enclosing operator. "
            f"{len(rows)} of {n}: the top {OPERATORS_SHOWN} by self GPU time and the top {OPERATORS_SHOWN} by CPU total, "
            f"ordered by self GPU time (click a header to sort by CPU time); the top 500 by each in the JSON. "
            f"{lack}") if src else \
        (f"No operator ranges in this capture. {lack}" if lack else "No operator ranges in this capture.")
    main = Table(id="operators", title="Operators (by self GPU time)", columns=[
        Column("Operator", False, "", anchor("Operators (metrics.operators)")), Column("Calls", True),
        Column("Self GPU (ms)", True, "GPU operations whose innermost enclosing operator is this one"),
        Column("GPU total (ms)", True, "GPU operations with this operator at any enclosing level"),
        Column("Self CPU (ms)", True, "range time less its child operators"), Column("CPU total (ms)", True),
        Column("GPU ops", True, "kernels, copies and memsets it launched directly"), Column("Top kernel"),
        Column("Module", False, "module or record_function region with most of its GPU time"),
        Column("Frame", False, "user Python line with most of its GPU time"),
        Column("CPU / call (µs)", True, "CPU total ÷ calls not inside a call of the same name"),
        Column("GPU / call (µs)", True, "GPU total ÷ the same calls")],
        rows=rows, note=note, empty="No operator ranges in this capture." + (f" {lack}" if lack else ""))
    out = [main]
    for key, title, label in (("modules", "GPU time by module / record_function region", "Module"),
                              ("frames", "GPU time by Python line", "Frame")):
        grp = [g for g in ops.get(key) or [] if isinstance(g, dict)]
        if not grp:
            continue
        trows = [[Cell(_trunc(str(g.get("name") or "(none)"), 100), g.get("name") or ""),
                  Cell(fmt_num(g.get("gpu_ms"), 3), g.get("gpu_ms"), True),
                  Cell(fmt_num(g.get("gpu_ops"), 0), g.get("gpu_ops"), True),
                  Cell(_trunc(str(g.get("top_op") or ""), 80), g.get("top_op") or "")] for g in grp[:OPERATORS_SHOWN]]
        out.append(Table(id=f"operators-{key}", title=title, columns=[
            Column(label, False, "", anchor("Operators (metrics.operators)")), Column("GPU (ms)", True),
            Column("GPU ops", True), Column("Top operator")], rows=trows,
            note="Summed durations of the GPU operations whose innermost enclosing " + label.lower() +
                 " it is, over the whole capture ('(none)': no enclosing one)."))
    return out


def operator_shape_tables(result: dict) -> list[Table]:
    """The operator view per (operator, input shapes), like key_averages(group_by_input_shape=True)
    (issue 47); no table when no operator range carries shapes."""
    ops = (result.get("metrics") or {}).get("operators_by_shape") or {}
    if not ops.get("source") or not ops.get("rows"):
        return []
    rows = []
    for r in (ops.get("rows") or [])[:OPERATORS_SHOWN]:
        name = str(r.get("name") or "")
        dims = r.get("input_dims")
        dims = "(not recorded)" if dims is None else json.dumps(dims)
        rows.append([_cut_cell(name, 80),
                     _cut_cell(dims, 80),
                     Cell(fmt_num(r.get("calls"), 0), r.get("calls"), True),
                     Cell(fmt_num(r.get("self_gpu_ms"), 3), r.get("self_gpu_ms"), True),
                     Cell(fmt_num(r.get("gpu_ms"), 3), r.get("gpu_ms"), True),
                     Cell(fmt_num(r.get("self_cpu_ms"), 3) if is_num(r.get("self_cpu_ms")) else "—", r.get("self_cpu_ms"), True),
                     Cell(fmt_num(r.get("cpu_ms"), 3) if is_num(r.get("cpu_ms")) else "—", r.get("cpu_ms"), True),
                     Cell(fmt_num(r.get("kernels"), 0), r.get("kernels"), True)])
    n = ops.get("row_count") or 0
    note = (f"One row per operator and input shapes (record_shapes), as key_averages(group_by_input_shape=True) "
            f"groups them; times as in the operator view, so an operator's rows add up to its row there. "
            f"Top {len(rows)} of {n} by self GPU time; all (up to 500) in the JSON.")
    return [Table(id="operators-by-shape", title="Operators by input shape (by self GPU time)", columns=[
        Column("Operator", False, "", anchor("Operators by input shape (metrics.operators_by_shape)")),
        Column("Input shapes", False, "one list of dimensions per input; [] for a non-tensor input"),
        Column("Calls", True),
        Column("Self GPU (ms)", True, "GPU operations whose innermost enclosing operator is this call"),
        Column("GPU total (ms)", True, "GPU operations with this call at any enclosing level"),
        Column("Self CPU (ms)", True, "range time less its child operators"), Column("CPU total (ms)", True),
        Column("GPU ops", True, "kernels, copies and memsets it launched directly")],
        rows=rows, note=note, empty="No operator ranges with input shapes in this capture.")]


# ---------------------------------------------------------------------------------------------
# step breakdown
# ---------------------------------------------------------------------------------------------
STEP_TABLE_MAX = 200


def steps_view(result: dict, worst_step: bool) -> StepsView:
    legend = [LegendItem(cls=f"c-{k}", label=lab, anchor=BREAKDOWN_ANCHORS.get(k, "")) for k, lab in BREAKDOWN]
    primary = [s for s in result.get("steps") or [] if s.get("primary")]
    with_bd = [s for s in primary if s.get("breakdown_ms")]
    capture = result.get("capture") or {}
    if not primary:
        reason = (f"No step markers: no {'CPU operator or annotation' if is_kineto(result) else 'NVTX'} range "
                  "matched the step pattern, so there is no per-step breakdown "
                  "(see Capture for how to add markers)." if not capture.get("has_step_markers")
                  else "No primary steps.")
    elif not with_bd:
        reason = "The steps ran no GPU work, so they have no breakdown."
    else:
        reason = ""
    nonzero = {k for s in with_bd for k, v in (s["breakdown_ms"] or {}).items() if v}
    cats = [(k, lab) for k, lab in BREAKDOWN if k in nonzero or k == "compute"]
    zero = [lab for k, lab in BREAKDOWN if k not in nonzero and k != "compute"]
    median_id, worst_id = _marked_steps(primary, result)
    cols = [Column("Step"), Column("PID", True), Column("Step time (ms)", True, "start of the next step − start of this one",
                                                        anchor("Step time")),
            Column("Duration (ms)", True, "step end − step start", anchor("Step duration")),
            Column("Kernels", True, "kernels launched in the step", anchor("Kernels per step")),
            Column("Time-busy (%)", True, "union of kernels ÷ step duration", anchor("Time-busy %")),
            Column("Host sync (ms)", True, "union of blocking sync calls in the step", anchor("Host sync time"))]
    cols += [Column(SHORT_LABELS.get(k, lab), True, f"{lab} (breakdown_ms.{k}, ms)", BREAKDOWN_ANCHORS.get(k, ""))
             for k, lab in cats]
    shown = primary
    note = "Breakdown columns in ms; each row's breakdown sums to the step duration."
    if len(primary) > STEP_TABLE_MAX:
        slow = sorted(primary, key=lambda s: -(s.get("step_time_ms") or 0))[:STEP_TABLE_MAX - 1]
        keep = {s["step"] for s in slow} | {median_id}
        shown = [s for s in primary if s["step"] in keep]
        note += (f" {len(shown)} of {len(primary)} steps shown, {len(primary) - len(shown):,} more not shown: "
                 "the slowest and the median step.")
    rows = []
    for s in shown:
        bd = s.get("breakdown_ms") or {}
        mark = "median" if s["step"] == median_id else "worst" if s["step"] == worst_id else ""
        name = str(s.get("name") or s.get("step"))
        row = [Cell(name + (f" ({mark})" if mark else ""), s.get("step"), cls=f"nowrap mark-{mark}" if mark else "nowrap"),
               Cell(str(s.get("pid")), s.get("pid"), True),
               Cell(fmt_num(s.get("step_time_ms"), 2), s.get("step_time_ms"), True),
               Cell(fmt_num(s.get("duration_ms"), 2), s.get("duration_ms"), True),
               Cell(fmt_num(s.get("kernel_count"), 0), s.get("kernel_count"), True),
               Cell(_pct(s.get("time_busy_pct")), s.get("time_busy_pct"), True),
               Cell(fmt_num(s.get("host_sync_ms"), 2), s.get("host_sync_ms"), True)]
        dur = s.get("duration_ms") or 0
        for k, _ in cats:
            v = bd.get(k)
            title = f"{fmt_pct(v / dur * 100)} of the step" if is_num(v) and dur else ""
            row.append(Cell(fmt_num(v, 2) if is_num(v) else "—", v, True, title=title))
        rows.append(row)
    table = Table(id="steps-table", title="Steps", columns=cols, rows=rows, note=note,
                  empty=reason or "No steps.")
    chart_list = charts.step_charts(primary, BREAKDOWN, median_id, worst_id) if with_bd else []
    return StepsView(present=bool(with_bd), reason=reason, legend=[it for it in legend if it.cls[2:] in dict(cats)],
                     charts=chart_list, table=table, zero_categories=zero)


def _marked_steps(primary: list[dict], result: dict | None = None) -> tuple[int | None, int | None]:
    picks = ((result or {}).get("metrics") or {}).get("step_picks") or {}
    if picks.get("median_step") is not None:
        return picks["median_step"], picks.get("worst_step")
    rows = [s for s in primary if is_num(s.get("step_time_ms"))]
    if not rows:
        return None, None
    by = sorted(rows, key=lambda s: (s["step_time_ms"], s["step"]))
    median = by[(len(by) - 1) // 2]["step"]
    top = max(s["step_time_ms"] for s in rows)
    worst = min(s["step"] for s in rows if s["step_time_ms"] == top)
    return median, worst


# ---------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------
#: FP32 math markers for kernels that are not GEMMs (whole tokens: "f32" but not "bf16f32").
FP32_NAME = re.compile(r"sgemm|ffma|(?<![a-z0-9])f32(?![a-z0-9])|fp32|(?<![a-z])simt", re.IGNORECASE)


def tensor_core_label(name: str) -> tuple[str, str]:
    """(label, css class) of the tensor-core name heuristic; "yes" and "FP32 GEMM" are the ones the
    fp32-gemm rule uses (``nsysdoc.metrics.kernels``, defined in the glossary)."""
    if uses_tensor_cores(name):
        return "yes", "tc-yes"
    if is_fp32_gemm(name):
        return "no — FP32 GEMM", "tc-fp32"
    if FP32_NAME.search(name):
        return "no", "tc-no"
    return "—", ""


def kernel_table(result: dict) -> Table:
    k = (result.get("metrics") or {}).get("kernels") or {}
    rows = []
    for r in k.get("by_short_name") or []:
        name = str(r.get("name") or "")
        tc, cls = tensor_core_label(name)
        rows.append([_cut_cell(name),
                     Cell(fmt_num(r.get("count"), 0), r.get("count"), True),
                     Cell(fmt_num(r.get("total_ms"), 2), r.get("total_ms"), True),
                     Cell(fmt_num(r.get("mean_us"), 1), r.get("mean_us"), True),
                     Cell(fmt_num(r.get("median_us"), 1), r.get("median_us"), True),
                     Cell(fmt_num(r.get("p95_us"), 1), r.get("p95_us"), True),
                     Cell(_pct(r.get("share_of_kernel_time_pct")), r.get("share_of_kernel_time_pct"), True),
                     Cell(_pct(r.get("under_10us_pct"), 0), r.get("under_10us_pct"), True),
                     Cell(tc, tc, cls=cls),
                     Cell("yes" if r.get("is_nccl") else "", 1 if r.get("is_nccl") else 0)])
    note = (f"{fmt_num(k.get('count'), 0)} kernels in the window, {fmt_ms(k.get('total_ms'))} of kernel time; "
            f"median {fmt_us(k.get('median_us'))}, p95 {fmt_us(k.get('p95_us'))}, "
            f"{fmt_pct(k.get('under_10us_pct'))} shorter than 10 µs. Top {len(rows)} names by total time "
            + ("(the kernel's own function name, without namespace, template and argument lists; "
               if is_kineto(result) else "(nsys shortName; ") +
            "generic ones such as Kernel are named from the demangled name, glossary). "
            "'Tensor cores' is a name heuristic (glossary, end of page).")
    return Table(id="kernels", title="Top kernels", columns=[
        Column("Kernel"), Column("Count", True), Column("Total (ms)", True), Column("Mean (µs)", True),
        Column("Median (µs)", True), Column("p95 (µs)", True),
        Column("Share (%)", True, "share of kernel time (not of wall time)", anchor("Kernels (metrics.kernels)")),
        Column("Under 10 µs (%)", True, "share of this name's kernels shorter than 10 µs"),
        Column("Tensor cores", False, "name heuristic", anchor("Tensor cores (kernel table)")),
        Column("NCCL")], rows=rows, note=note, empty="No kernels in the analysis window.")


def kernel_counter_tables(result: dict) -> list[Table]:
    """Hardware counters per kernel (issue 47): the by-name rows with their GPU metrics means and
    class; no table when the capture has no GPU metrics (``metrics.kernels.counters.missing``)."""
    k = (result.get("metrics") or {}).get("kernels") or {}
    cs = k.get("counters") or {}
    if not cs.get("present"):
        return []
    rows = []
    for r in k.get("by_name") or []:
        name = str(r.get("name") or "")
        bound = str(r.get("bound") or "unknown")
        rows.append([_cut_cell(name),
                     Cell(fmt_num(r.get("total_ms"), 2), r.get("total_ms"), True),
                     Cell(_pct(r.get("sm_active_pct"), 0), r.get("sm_active_pct"), True),
                     Cell(_pct(r.get("sm_issue_pct"), 0), r.get("sm_issue_pct"), True),
                     Cell(_pct(r.get("tensor_active_pct"), 0), r.get("tensor_active_pct"), True),
                     Cell(_pct(r.get("dram_bandwidth_pct"), 0), r.get("dram_bandwidth_pct"), True),
                     Cell(fmt_num(r.get("counter_samples"), 0), r.get("counter_samples"), True),
                     Cell(bound, bound, cls="warn" if bound in ("latency-bound", "tensor cores idle") else "")])
    period = cs.get("sample_period_us")
    note = ("Means of the GPU metrics samples whose whole period lies inside the kernel's executions"
            + (f" (one sample every {fmt_num(period, 0)} µs)" if is_num(period) else "")
            + f"; under {cs.get('min_samples')} samples the counters are blank and the class unknown. "
              "Memory-bound: DRAM at 60% of peak or more; compute-bound: SM Issue or Tensor Active at 60% or more; "
              "latency-bound: both under 60%; tensor cores idle: a GEMM/convolution under 10% Tensor Active (glossary).")
    return [Table(id="kernel-counters", title="Hardware counters per kernel", columns=[
        Column("Kernel"), Column("Total (ms)", True),
        Column("SM Active (%)", True, "mean of the samples inside", anchor("Hardware counters per kernel (metrics.kernels.by_name, metrics.kernels.counters)")),
        Column("SM Issue (%)", True, "mean of the samples inside"),
        Column("Tensor Active (%)", True, "mean of the samples inside"),
        Column("DRAM (%)", True, "DRAM read + write bandwidth, % of peak"),
        Column("Samples", True, "samples inside the kernel's executions"),
        Column("Class", False, "memory-, compute-, latency-bound, tensor cores idle or unknown",
               anchor("Hardware counters per kernel (metrics.kernels.by_name, metrics.kernels.counters)"))], rows=rows, note=note,
        empty="No kernels in the analysis window.")]


def copies_table(result: dict) -> Table:
    rows = []
    for r in (result.get("metrics") or {}).get("copies") or []:
        hm = r.get("host_memory") or ""
        rows.append([Cell(str(r.get("kind")), r.get("kind")),
                     Cell(hm or "—", hm, cls="warn" if hm == "pageable" else ""),
                     Cell(fmt_num(r.get("count"), 0), r.get("count"), True),
                     Cell(fmt_bytes(r.get("bytes")), r.get("bytes"), True),
                     Cell(fmt_num(r.get("time_ms"), 2), r.get("time_ms"), True),
                     Cell(fmt_num(r.get("gbps"), 2), r.get("gbps"), True)])
    return Table(id="copies", title="Copies by kind and host memory", columns=[
        Column("Direction"), Column("Host memory", False, "nsys ENUM_CUDA_MEM_KIND: 0 = pageable, 1 = pinned",
                                    anchor("Copies (metrics.copies)")),
        Column("Count", True), Column("Size", True), Column("Time (ms)", True, "summed copy durations"),
        Column("Bandwidth (GB/s)", True, "bytes ÷ summed duration (10^9 B/s)")], rows=rows,
        note="Pageable host memory makes cudaMemcpyAsync synchronous and slow; pin it (pin_memory=True).",
        empty="No memory copies in the analysis window.")


def sync_tables(result: dict) -> list[Table]:
    sync = (result.get("metrics") or {}).get("sync") or {}
    calls = [[Cell(str(r.get("api")), r.get("api")), Cell(fmt_num(r.get("count"), 0), r.get("count"), True),
              Cell(fmt_num(r.get("total_ms"), 2), r.get("total_ms"), True),
              Cell(fmt_num(r.get("max_ms"), 2), r.get("max_ms"), True)] for r in sync.get("sync_calls") or []]
    threads = [[Cell(str(r.get("pid")), r.get("pid"), True), Cell(str(r.get("tid")), r.get("tid"), True),
                Cell(fmt_num(r.get("host_sync_ms"), 2), r.get("host_sync_ms"), True),
                Cell(_pct(r.get("share_of_window_pct")), r.get("share_of_window_pct"), True)]
               for r in sync.get("host_sync_ms_by_thread") or []]
    note = (f"Scalar reads (.item()-like): {fmt_num(sync.get('scalar_read_count'), 0)} in the window, median "
            f"{fmt_num(sync.get('scalar_reads_per_step_median'), 1)} per step; host sync per step (median): "
            f"{fmt_ms(sync.get('host_sync_ms_per_step_median'))}.")
    return [
        Table(id="sync-calls", title="Blocking sync calls", columns=[
            Column("API", False, "blocking calls as the glossary defines them", anchor("Blocking sync call")),
            Column("Count", True), Column("Total (ms)", True, "their parts inside the window"), Column("Longest (ms)", True)],
            rows=calls, note=note, empty="No blocking sync calls in the analysis window."),
        Table(id="sync-threads", title="Host sync time per thread", columns=[
            Column("PID", True), Column("TID", True),
            Column("Host sync (ms)", True, "union of the thread's blocking calls in the window", anchor("Host sync time")),
            Column("Share of window (%)", True, "per thread; never summed over threads")], rows=threads,
            empty="No thread made blocking sync calls in the analysis window."),
    ]


def launch_table(result: dict) -> Table:
    la = (result.get("metrics") or {}).get("launch") or {}
    items = [("kernel launches with a known call", fmt_num(la.get("launch_count"), 0)),
             ("launch API time, median", fmt_us(la.get("launch_api_us_median"))),
             ("launch API time, p95", fmt_us(la.get("launch_api_us_p95"))),
             ("queue delay, median", fmt_us(la.get("queue_delay_us_median"))),
             ("queue delay, p95", fmt_us(la.get("queue_delay_us_p95"))),
             ("launches with queue delay < 10 µs", fmt_pct(la.get("queue_delay_under_10us_pct")))]
    return Table(id="launch", title="Launch path", columns=[Column("", False, "", anchor("Launch path (metrics.launch)")),
                                                             Column("Value", True)],
                 rows=[[Cell(k, k), Cell(v, v, True)] for k, v in items],
                 note="A long queue delay is good: the CPU runs ahead of the GPU. Mostly < 10 µs means the GPU "
                      "waits for launches.")


def nvtx_table(result: dict) -> Table:
    kineto = is_kineto(result)
    rows = []
    for r in ((result.get("metrics") or {}).get("nvtx") or [])[:25]:
        text = r["text"] or "(no text)"
        rows.append([Cell(_trunc(text), text, title=text[:1000] if len(text) > 120 else ""),
                     Cell(r["domain"] or ("record_function" if kineto else "—"), r["domain"]),
                     Cell(fmt_num(r["count"], 0), r["count"], True),
                     Cell(fmt_num(r["total_ms"], 2), r["total_ms"], True),
                     Cell(fmt_num(r["mean_ms"], 3), r["mean_ms"], True),
                     Cell(fmt_num(r["max_ms"], 3), r["max_ms"], True)])
    return Table(id="nvtx", title=("CPU operators and user annotations (record_function), top by total time"
                                   if kineto else "NVTX ranges (top by total time)"), columns=[
        Column("Operator / annotation" if kineto else "Range"), Column("Kind" if kineto else "Domain"),
        Column("Count", True),
        Column("Total (ms)", True, "sum of durations clipped to the window (inclusive of nested ranges)",
               anchor("Host range totals" if kineto else "NVTX range totals")),
        Column("Mean (ms)", True), Column("Longest (ms)", True)], rows=rows,
        note="Inclusive times: nested ranges count at every level, ranges on several threads add up. "
             "Texts are folded: numbers shown as N and PyTorch's seq/op_id/sizes fields dropped, so each step "
             "marker shape and each aten op is one row." + (" Kind: cpu_op (an operator), python_function, or "
                                                             "record_function (a user annotation)." if kineto else ""),
        empty=("No CPU operators or annotations in the analysis window (ProfilerActivity.CPU off, or none recorded)."
               if kineto else "No NVTX ranges in the analysis window (NVTX not traced, or none recorded)."))


def device_table(result: dict) -> Table:
    rows = []
    for d in result.get("devices") or []:
        idle = d.get("idle_ms_by_cause") or {}
        top = max(idle.items(), key=lambda kv: kv[1] or 0) if idle else None
        top_txt = f"{CAUSE_LABELS.get(top[0], top[0])} ({fmt_ms(top[1])})" if top and top[1] else "—"
        rows.append([Cell(str(d.get("label")), d.get("device")), Cell(str(d.get("name") or "—"), d.get("name")),
                     Cell(_pct(d.get("busy_pct")), d.get("busy_pct"), True),
                     Cell(_pct(d.get("compute_pct")), d.get("compute_pct"), True),
                     Cell(_pct(d.get("comm_pct")), d.get("comm_pct"), True),
                     Cell(_pct(d.get("exposed_comm_pct")), d.get("exposed_comm_pct"), True),
                     Cell(_pct(d.get("copy_only_pct")), d.get("copy_only_pct"), True),
                     Cell(_pct(d.get("idle_pct")), d.get("idle_pct"), True),
                     Cell(fmt_num(d.get("kernel_count"), 0), d.get("kernel_count"), True),
                     Cell(fmt_num(d.get("copy_count"), 0), d.get("copy_count"), True),
                     Cell(fmt_num(d.get("gap_count"), 0), d.get("gap_count"), True),
                     Cell(top_txt, top[1] if top else None)])
    return Table(id="devices", title="Per device", columns=[
        Column("Device"), Column("GPU"), Column("Busy (%)", True, "union of GPU work ÷ window", anchor("GPU busy")),
        Column("Compute (%)", True, "", anchor("Compute")), Column("Comm (%)", True, "", anchor("Communication")),
        Column("Exposed comm (%)", True, "", anchor("Exposed communication")),
        Column("Copies only (%)", True, "", anchor("Copy-only")), Column("Idle (%)", True, "", anchor("Idle")),
        Column("Kernels", True), Column("Copies", True), Column("Idle gaps", True, "", anchor("Idle gap")),
        Column("Largest idle class")], rows=rows, note="Shares of the analysis window.",
        empty="No GPU devices in the capture.")


def gaps_table(result: dict, viewer: ViewerGuide | None = None) -> Table:
    gaps = (result.get("metrics") or {}).get("idle_gaps") or {}
    viewer = viewer or ViewerGuide()
    rows = []
    for g in gaps.get("longest") or []:
        who = f"{g.get('pid')}/{g.get('tid')}" if g.get("pid") is not None else "—"
        rows.append([Cell(str(g.get("device")), g.get("device")),
                     Cell(fmt_s(g["start_ns"] - viewer.origin_ns) if is_num(g.get("start_ns")) else fmt_s(None),
                          g.get("start_ns"), True),
                     Cell(fmt_s(g["end_ns"] - viewer.origin_ns) if is_num(g.get("end_ns")) else fmt_s(None),
                          g.get("end_ns"), True),
                     Cell(fmt_num(g.get("duration_ms"), 3), g.get("duration_ms"), True),
                     Cell(CAUSE_LABELS.get(g.get("cause"), str(g.get("cause"))), g.get("cause"),
                          cls=f"cause c-idle_{g.get('cause')}"),
                     Cell(who, who)])
    by = gaps.get("idle_ms_by_cause") or {}
    parts = [f"{CAUSE_LABELS.get(c, c)} {fmt_ms(v)}" for c, v in by.items() if v]
    note = (f"{fmt_num(gaps.get('count'), 0)} idle gaps; idle time by cause (all devices): "
            + ("; ".join(parts) if parts else "none") + ". " + viewer.gaps_note)
    return Table(id="idle-gaps", title="Longest idle gaps", columns=[
        Column("Device"), Column("Start (s)", True), Column("End (s)", True), Column("Duration (ms)", True),
        Column("Largest class", False, "", anchor("Idle gap")), Column("Launching PID/TID")], rows=rows, note=note,
        empty="No idle gaps in the analysis window.")


