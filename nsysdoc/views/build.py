"""Build the :class:`~nsysdoc.views.context.ReportContext` from an ``Analysis``.

The verdict, headline numbers and finding ranking only need the JSON result (``docs/json.md``), so
the markdown and terminal summaries share them; the step chart, timeline and NVTX table also read
the analysis' arrays.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
import shlex
from importlib.resources import files
from urllib.parse import quote, urlsplit

from markupsafe import Markup

from ..version import __version__
from ..metrics.gpu import CAUSE_LABELS, CAUSES
from ..metrics.kernels import is_fp32_gemm, uses_tensor_cores
from ..rules.verdict import rank_findings as _rank
from ..rules.verdict import what_if_text
from ..rules.verdict import verdict as verdict_of
from . import charts, columns
from .context import (Cell, Column, Evidence, FindingView, WhereRow, Headline, LegendItem, ReportContext, RuleStatus,
                      StepsView, Table, TimeRange, Verdict, CaptureView, ViewerGuide, fmt_bytes, fmt_ms, fmt_num, fmt_pct,
                      fmt_dur_ns, fmt_s, fmt_us, is_num, source_name)
from .glossary import anchor, definition, glossary_html
from .tldata import timeline_data
from .memory import memory_view  # issue 47
from ..assembly.written import MAX_STEP_RECORDS, capped_result  # noqa: F401 - views render the result as written

from ..severity import SEVERITY_RANK  # noqa: E402

#: Breakdown categories (``steps[].breakdown_ms`` keys) in stacking order, with labels.
BREAKDOWN = [("compute", "compute"), ("exposed_comm", "exposed communication"), ("copy", "copies only")] + \
    [(f"idle_{c}", f"idle — {CAUSE_LABELS[c]}") for c in CAUSES]
#: Short column headers for the step table (the full label is the tooltip).
SHORT_LABELS = {"exposed_comm": "exposed comm", "copy": "copies", "idle_sync": "idle: sync", "idle_input": "idle: input",
                "idle_launch": "idle: launch", "idle_host": "idle: host", "idle_dependency": "idle: dependency",
                "idle_alloc": "idle: alloc", "idle_setup": "idle: setup", "idle_api": "idle: other API",
                "idle_tail": "idle: tail", "idle_unattributed": "idle: unattributed"}
BREAKDOWN_ANCHORS = {"compute": anchor("Compute"), "exposed_comm": anchor("Exposed communication"),
                     "copy": anchor("Copy-only"), **{f"idle_{c}": anchor("Idle gap") for c in CAUSES}}

#: The four headline numbers the field articles look at: key, label, glossary terms, where.
HEADLINES = [
    ("gpu_busy_pct", "GPU busy", ("GPU busy",), "summary"),
    ("step_time_ms_median", "Step time", ("Step time",), "summary"),
    ("host_wait_pct", "Host wait", ("Host wait",), "metrics"),
    ("kernels_per_step_median", "Kernels per step", ("Kernels per step", "GPU operation of a step"), "summary"),
]

def _timeline_spans(host_kinds: str) -> str:
    """The page's definition of the timeline's spans; ``host_kinds``: what its host lanes draw."""
    return (f"The timeline draws each kernel, copy, memset, {host_kinds} "
            "overlapping the window, clipped to it. Zoomed out, neighbours "
            "closer than a pixel are drawn as one block (its tooltip says how many operations and their busy time); "
            "zoomed in, every operation is drawn on its own ('operations drawn one by one' above the timeline counts "
            "them). Only when the steps hold more than the page's budget (about 200,000 spans, 3.5 MB of data) are "
            "neighbours merged in the data itself, at the lane's widest holes; merged spans cover exactly the time of "
            "the spans they stand for, plus the small holes between them. Without scripts, a static drawing with at "
            "most 1,000 spans a lane is shown.")


#: Numbers only the page shows (not in the JSON): defined here and in docs/report.md.
REPORT_TERMS = [
    ("Tensor cores (kernel table)",
     "A name heuristic, not a measurement, shared with the fp32-gemm rule: 'yes' for GEMM, convolution "
     "and attention kernels whose own name (template arguments aside) shows tensor-core math (tensorop, "
     "hmma/imma/wgmma/mma, nvjet, flash, MMA tile shapes, or a bf16/fp16/tf32/fp8 precision) and no "
     "FFMA/SIMT marker; 'no — FP32 GEMM' for GEMM/convolution kernels doing FP32 math on CUDA cores (ffma, "
     "sgemm, simt, scudnn); 'no' for other FP32 kernels; '—' when the name says neither. Helpers such as "
     "gemv, im2col, split-K reduction and layout transforms are never GEMMs (see the glossary, "
     "fp32_gemm_ms). Confirm with the Tensor Active GPU metric or Nsight Compute."),
    ("NVTX range totals",
     "NVTX push/pop and start/end ranges overlapping the analysis window, grouped by domain and text: "
     "count, total (sum of the ranges' durations clipped to the window — nested ranges count at every "
     "level, and ranges on several threads add up, so totals can exceed the window), mean and max."),
    ("Timeline spans", _timeline_spans("NVTX range, CUDA API call, blocking sync call and OS wait")),
]


#: the same terms for a PyTorch Profiler trace, whose host ranges are CPU operators and annotations
#: (docs/kineto.md), plus the trace-viewer seconds the page shows instead of the nsys GUI's
KINETO_REPORT_TERMS = [
    REPORT_TERMS[0],
    ("Host range totals",
     "CPU operators (cpu_op), user annotations (record_function, ProfilerStep#N) and Python functions "
     "(python_function) overlapping the analysis window, grouped by kind and text: count, total (sum of the "
     "ranges' durations clipped to the window — nested ranges count at every level, and ranges on several "
     "threads add up, so totals can exceed the window), mean and max."),
    ("Timeline spans", _timeline_spans("CPU operator or annotation range, CUDA API call and blocking sync call")),
    ("Trace-viewer time",
     "Times of a PyTorch Profiler trace are shown in seconds from the trace's start — the start of the "
     "profiler's own span (PyTorch Profiler (0)), else the first event — which is where ui.perfetto.dev, "
     "chrome://tracing and TensorBoard's trace view put 0: (t − start) ÷ 10^9, with ns precision. The JSON keeps "
     "the trace's own times (start_ns, end_ns)."),
]


def is_kineto(result: dict) -> bool:
    """Whether the result comes from a PyTorch Profiler (Kineto) trace (``source.tool``)."""
    return (result.get("source") or {}).get("tool") == "pytorch-profiler"


# ---------------------------------------------------------------------------------------------
# shared with markdown / terminal: verdict, headline numbers, ranking
# ---------------------------------------------------------------------------------------------
def rank_findings(findings: list[dict], result: dict | None = None) -> list[dict]:
    """The findings order (:func:`nsysdoc.rules.verdict.rank_findings`): severity, then steady
    state before framing when ``result``'s window can be judged, then cost."""
    from ..rules.verdict import steady_state_judgeable

    return _rank(findings, steady_state_judgeable(result or {}))


def impact_text(f: dict, window_ms=None) -> str:
    if is_num(f.get("impact_ms")) and f["impact_ms"] < 0.0005:
        return "no measurable cost"
    parts = []
    if is_num(f.get("impact_ms_per_step")):
        parts.append(f"{fmt_ms(f['impact_ms_per_step'])} per step")
    basis = str(f.get("impact_of") or "analysis window")
    if basis == "analysis window":
        basis = "window"
    if is_num(f.get("impact_ms")):
        parts.append(f"{fmt_ms(f['impact_ms'])} in the {basis}")
    if is_num(f.get("impact_pct")):
        parts.append(f"{fmt_pct(f['impact_pct'])} of the {basis}")
    return " · ".join(parts)


def _no_steps_note(capture: dict) -> str:
    """Why a capture has no per-step numbers, in a few words."""
    if capture.get("steps_set_aside"):
        return "step markers set aside: they hold too little GPU work"
    if capture.get("steps_not_inferred"):
        return "no step markers, and no steps could be inferred"
    return "no step markers"


def headline(result: dict) -> list[Headline]:
    summary = result.get("summary") or {}
    metrics = result.get("metrics") or {}
    capture = result.get("capture") or {}
    # the devices gpu_busy_pct and host_wait_pct average over: those with GPU work in the window
    devices = [d for d in result.get("devices") or [] if d.get("busy_pct") is not None
               and (d.get("kernel_count") or 0) + (d.get("copy_count") or 0) > 0]
    primary = [s for s in result.get("steps") or [] if s.get("primary")]
    too_little = capture.get("enough_gpu_work") is False and capture.get("gpu_activity", True)
    out = []
    for key, label, terms, where in HEADLINES:
        raw = (summary if where == "summary" else metrics).get(key)
        if too_little and key == "host_wait_pct" and summary.get("gpu_busy_pct") is None:
            raw = None  # a share of a short window with a handful of GPU operations says nothing
        note = ""
        if key == "gpu_busy_pct":
            value = fmt_pct(raw) if is_num(raw) else "—"
            note = (f"mean over {len(devices)} devices" if len(devices) > 1 else "of the analysis window") \
                if is_num(raw) else ("too little GPU work to judge" if too_little else "no GPU activity in the capture")
        elif key == "step_time_ms_median":
            value = fmt_ms(raw) if is_num(raw) else "—"
            inferred = " inferred from the repeating GPU work" if capture.get("step_source") == "inferred" else ""
            procs = len({s.get("pid") for s in primary})
            # the job steps: one per job index (the slowest process's step of each)
            jobs = len({s.get("job_index", s.get("index")) for s in primary
                        if s.get("job_index", s.get("index")) is not None and s.get("job_index", 0) >= 0})
            over = f"{jobs} job step{'s' if jobs != 1 else ''} of {procs} processes (the slowest per step)" \
                if procs > 1 else f"{len(primary)} step{'s' if len(primary) != 1 else ''}"
            note = (f"median over {over}{inferred}" if len(primary) > 1 else f"{over}{inferred}") if is_num(raw) \
                else _no_steps_note(capture)
        elif key == "host_wait_pct":
            value = fmt_pct(raw) if is_num(raw) else "—"
            note = "GPU idle while the host waited on a sync or input" if is_num(raw) else \
                ("too little GPU work to judge" if too_little else "no analysis window")
        else:
            value = fmt_num(raw, 0) if is_num(raw) else "—"
            note = "median over steps" if is_num(raw) else (_no_steps_note(capture) if not capture.get("step_source")
                                                            else "no GPU work in steps")
        text = " ".join(definition(t) for t in terms).strip()
        out.append(Headline(key=key, label=label, value=value, raw=raw if is_num(raw) else None, note=note,
                            definition=text, anchor=anchor(terms[0])))
    return out


def _median_breakdown(result: dict) -> tuple[dict | None, dict | None]:
    """The median primary step (``metrics.step_picks``) and its breakdown."""
    rows = [s for s in result.get("steps") or [] if s.get("primary") and s.get("breakdown_ms")
            and is_num(s.get("step_time_ms"))]
    if not rows:
        return None, None
    want = ((result.get("metrics") or {}).get("step_picks") or {}).get("median_step")
    for s in rows:
        if s["step"] == want:
            return s, s["breakdown_ms"]
    rows.sort(key=lambda s: (s["step_time_ms"], s.get("step", 0)))
    s = rows[(len(rows) - 1) // 2]
    return s, s["breakdown_ms"]


def numbers_show(result: dict) -> str:
    """One sentence on what the numbers show (used when there is no finding, and as detail)."""
    summary = result.get("summary") or {}
    capture = result.get("capture") or {}
    if not capture.get("gpu_activity", True) or not (summary.get("kernel_count") or
                                                     any((d.get("copy_count") or 0) for d in result.get("devices") or [])):
        return "The capture has no GPU activity (no kernel, memcpy or memset rows), so there is nothing to break down."
    busy = summary.get("gpu_busy_pct")
    step, bd = _median_breakdown(result)
    labels = dict(BREAKDOWN)
    if bd:
        dur = step.get("duration_ms") or sum(v or 0 for v in bd.values()) or 1
        others = [(k, v or 0) for k, v in bd.items() if k != "compute"]
        k, v = max(others, key=lambda kv: kv[1]) if others else ("", 0)
        s = (f"GPU busy {fmt_pct(busy)} of the window; " if is_num(busy) else "") + \
            (f"in the median step ({fmt_ms(dur)}), "
             f"compute takes {fmt_ms(bd.get('compute'))} ({fmt_pct((bd.get('compute') or 0) / dur * 100, 0)})")
        s = s[:1].upper() + s[1:]
        if v > 0:
            s += f" and the largest other part is {labels.get(k, k)}: {fmt_ms(v)} ({fmt_pct(v / dur * 100, 0)})."
        else:
            s += "; nothing else takes time."
        return s
    idle = (result.get("metrics") or {}).get("idle_gaps", {}).get("idle_ms_by_cause") or {}
    window = (capture.get("window") or {}).get("duration_ms")
    if idle and any(v for v in idle.values()):
        c, v = max(idle.items(), key=lambda kv: kv[1] or 0)
        lead = f"GPU busy {fmt_pct(busy)} of the {fmt_ms(window)} window" if is_num(busy) else \
            f"In the {fmt_ms(window)} window"
        return (lead + " (no per-step numbers: no step markers); "
                f"the largest idle class is {CAUSE_LABELS.get(c, c)}: {fmt_ms(v)}"
                + (" per GPU." if len(result.get("devices") or []) > 1 else "."))
    if not is_num(busy):
        return f"Too little GPU work in the {fmt_ms(window)} analysis window to give a busy share."
    return f"GPU busy {fmt_pct(busy)} of the {fmt_ms(window)} analysis window."


def verdict(result: dict) -> Verdict:
    """The verdict the rules engine wrote (``result["verdict"]``, see nsysdoc.rules.verdict); for a
    result without it (older JSON, or findings injected by hand) it is derived the same way."""
    detail_numbers = numbers_show(result)
    if "rules" not in result and not result.get("verdict") and not result.get("findings"):
        if not (result.get("capture") or {}).get("gpu_activity", True):
            return Verdict(sentence="Nothing to diagnose: the capture has no GPU activity.", status="no-gpu",
                           detail=detail_numbers, headline="no-gpu-activity")
        return Verdict(sentence="No findings: the rules engine did not run on this result.", status="no-rules",
                       detail=detail_numbers)
    v = result.get("verdict") if isinstance(result.get("verdict"), dict) else verdict_of(result)
    detail = str(v.get("detail") or "") or detail_numbers
    return Verdict(sentence=str(v.get("sentence") or ""), status=str(v.get("status") or ""), detail=detail,
                   framing=str(v.get("framing") or ""),
                   top_rule=str(v.get("rule") or ""), severity=str(v.get("severity") or ""),
                   headline=str(v.get("headline") or ""))


# ---------------------------------------------------------------------------------------------
# findings
# ---------------------------------------------------------------------------------------------
def _evidence(ev) -> Evidence | None:
    if not isinstance(ev, dict):
        return None
    names = [str(c) for c in ev.get("columns") or []]
    rows = [list(r) if isinstance(r, (list, tuple)) else [r] for r in ev.get("rows") or []]
    width = max([len(names)] + [len(r) for r in rows]) if (names or rows) else 0
    names += [""] * (width - len(names))
    numeric = [bool(rows) and all(is_num(r[i]) for r in rows if i < len(r)) for i in range(width)]
    cells = [[columns.short_cell(names[i], r[i]) if i < len(r) else ("", "") for i in range(width)] for r in rows]
    return Evidence(title=str(ev.get("title") or "Evidence"), columns=[columns.header(n) for n in names],
                    rows=[[c[0] for c in row] for row in cells], numeric=numeric,
                    titles=[[c[1] for c in row] for row in cells])


#: where a PyTorch Profiler trace is opened to find a range (the page names them in this order)
TRACE_VIEWERS = "ui.perfetto.dev or chrome://tracing (or TensorBoard's trace view, torch-tb-profiler)"


def viewer_guide(result: dict, origin_ns=None) -> ViewerGuide:
    """How to find the page's time ranges: in the Nsight Systems GUI (an nsys export: the export's
    own times), or in a trace viewer (a PyTorch Profiler trace: seconds from ``origin_ns``, the
    instant Perfetto, chrome://tracing and TensorBoard show as 0, ``Trace.viewer_origin_ns``)."""
    if (result.get("source") or {}).get("tool") != "pytorch-profiler":
        return ViewerGuide()
    return ViewerGuide(
        heading="Find in the trace viewer (Perfetto, chrome://tracing, TensorBoard)",
        how=(f"Open the trace file in {TRACE_VIEWERS} and go to these times: seconds from the trace's start, "
             "as those viewers show them."),
        timeline_hint=(f"in seconds from the trace's start — open the trace in {TRACE_VIEWERS} and go to these "
                       "times to see the same range"),
        gaps_note=("Start/end in seconds from the trace's start, as ui.perfetto.dev, chrome://tracing and "
                   "TensorBoard's trace view show them."),
        origin_ns=int(origin_ns) if is_num(origin_ns) else 0)


def _time_ranges(ranges, origin_ns: int = 0) -> list[TimeRange]:
    out = []
    for r in ranges or []:
        if not isinstance(r, dict) or not is_num(r.get("start_ns")) or not is_num(r.get("end_ns")):
            continue
        s, e = int(r["start_ns"]), int(r["end_ns"])
        out.append(TimeRange(label=str(r.get("label") or ""), start_ns=s, end_ns=e, start_s=fmt_s(s - origin_ns),
                             end_s=fmt_s(e - origin_ns), duration=fmt_dur_ns(e - s), device=str(r.get("device") or "")))
    return out


def _has_steps(result: dict) -> bool:
    """Whether the result's what-ifs are of a median step (else of the window without steps)."""
    return bool((result.get("summary") or {}).get("step_count"))


def finding_views(result: dict, origin_ns: int = 0) -> list[FindingView]:
    out = []
    for i, f in enumerate(rank_findings(result.get("findings") or [], result), 1):
        sev = str(f.get("severity") or "info")
        out.append(FindingView(
            rank=i, anchor=f"finding-{i}", rule=str(f.get("rule") or ""),
            severity=sev if sev in SEVERITY_RANK else "info", category=str(f.get("category") or ""),
            title=str(f.get("title") or f.get("rule") or "Finding"), message=str(f.get("message") or ""),
            impact=impact_text(f), impact_ms=f.get("impact_ms") if is_num(f.get("impact_ms")) else None,
            impact_ms_per_step=f.get("impact_ms_per_step") if is_num(f.get("impact_ms_per_step")) else None,
            impact_pct=f.get("impact_pct") if is_num(f.get("impact_pct")) else None,
            evidence=_evidence(f.get("evidence")), verify=str(f.get("verify") or ""), fix=str(f.get("fix") or ""),
            references=[str(r) for r in f.get("references") or []], time_ranges=_time_ranges(f.get("time_ranges"), origin_ns),
            source=str(f.get("source") or "builtin"), replaces_builtin=bool(f.get("replaces_builtin")),
            where=where_rows(f.get("where")), where_note=str(f.get("where_note") or ""),
            what_if=what_if_text(f, steps=_has_steps(result)).strip(),
        ))
    return out


def backward_text(w: dict) -> str:
    """'backward of aten::linear (AddmmBackward0)' for a site inside an autograd backward node;
    for work launched by a thread with no operator range of its own (autograd's), the note that
    the main thread's range open at the launch names it (``via: "enclosing range"``)."""
    b, fw = w.get("backward_op"), w.get("forward_op")
    if w.get("via") == "CPU dispatch slower than the GPU":
        return dispatch_text(w)
    if w.get("via") == "enclosing range":
        return "launched by another thread (autograd's) while this range was open on the main thread"
    if not b:
        return ""
    return f"backward of {fw} ({b})" if fw else f"backward ({b})"


def _per_outer_call(r: dict) -> str:
    """The per-call cells' tooltip when the operator is nested in itself: the per-call times are per
    outer call (issue 47 review; glossary "Operators", ``outer_calls``)."""
    o, c = r.get("outer_calls"), r.get("calls")
    if is_num(o) and is_num(c) and o != c:
        return f"per call not inside a call of the same name: {fmt_num(o, 0)} of the {fmt_num(c, 0)} calls"
    return ""


def dispatch_text(w: dict) -> str:
    """'CPU dispatch slower than the GPU: 45 µs of CPU per call vs 5 µs of GPU work' for a where row
    of an operator whose CPU time per call exceeds its GPU time (issue 47; rules.evaluate.dispatch_rows)."""
    c, g = w.get("cpu_us_per_call"), w.get("gpu_us_per_call")
    if not (is_num(c) and is_num(g)):
        return "CPU dispatch slower than the GPU"
    extra = f", {fmt_ms(w['excess_ms'])} of CPU time beyond its GPU work in the capture" \
        if is_num(w.get("excess_ms")) else ""
    wait = w.get("cpu_wait_us_per_call")
    waited = f" ({fmt_num(wait, 1)} µs of it waiting in blocking CUDA calls)" if is_num(wait) and wait > 0 else ""
    return (f"CPU dispatch slower than the GPU: {fmt_num(c, 1)} µs of CPU per call{waited} vs {fmt_num(g, 1)} µs "
            f"of GPU work{extra}")


def where_rows(rows) -> list[WhereRow]:
    out = []
    for w in rows or []:
        if not isinstance(w, dict):
            continue
        out.append(WhereRow(op=str(w.get("op") or "(no operator)"), module=str(w.get("module") or ""),
                            frame=str(w.get("frame") or ""), backward=backward_text(w),
                            share=_pct(w.get("share_pct")), ms=fmt_ms(w.get("ms")) if is_num(w.get("ms")) else "—",
                            count=fmt_num(w.get("count"), 0) if is_num(w.get("count")) else ""))
    return out


OPERATORS_SHOWN = 25


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
        rows.append([Cell(_trunc(name, 80), name, title=name if len(name) > 80 else ""),
                     Cell(fmt_num(r.get("calls"), 0), r.get("calls"), True),
                     Cell(fmt_num(r.get("self_gpu_ms"), 3), r.get("self_gpu_ms"), True),
                     Cell(fmt_num(r.get("gpu_ms"), 3), r.get("gpu_ms"), True),
                     Cell(fmt_num(r.get("self_cpu_ms"), 3) if is_num(r.get("self_cpu_ms")) else "—", r.get("self_cpu_ms"), True),
                     Cell(fmt_num(r.get("cpu_ms"), 3) if is_num(r.get("cpu_ms")) else "—", r.get("cpu_ms"), True),
                     Cell(fmt_num(r.get("kernels"), 0), r.get("kernels"), True),
                     Cell(_trunc(top, 60), top, title=top if len(top) > 60 else ""),
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
        rows.append([Cell(_trunc(name, 80), name, title=name if len(name) > 80 else ""),
                     Cell(_trunc(dims, 80), dims, title=dims if len(dims) > 80 else ""),
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


def rule_statuses(result: dict) -> tuple[bool, dict[str, int], list[RuleStatus]]:
    rules = result.get("rules")
    if not isinstance(rules, list):
        return False, {}, []
    counts: dict[str, int] = {}
    skipped = []
    for r in rules:
        st = str(r.get("status") or "")
        counts[st] = counts.get(st, 0) + 1
        if st in ("skipped", "broken"):  # rules that did not run, with why (broken ones first)
            skipped.append(RuleStatus(rule=str(r.get("rule") or ""), status=st, reason=str(r.get("reason") or ""),
                                      source=str(r.get("source") or "builtin")))
    skipped.sort(key=lambda s: s.status != "broken")
    return True, counts, skipped


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


def _pct(v, digits: int = 1) -> str:
    """A percentage cell under a header that already says (%)."""
    return f"{v:.{digits}f}" if is_num(v) else "—"


def _trunc(s: str, n: int = 120) -> str:
    s = str(s)
    return s if len(s) <= n else s[: n - 1] + "…"


def kernel_table(result: dict) -> Table:
    k = (result.get("metrics") or {}).get("kernels") or {}
    rows = []
    for r in k.get("by_short_name") or []:
        name = str(r.get("name") or "")
        tc, cls = tensor_core_label(name)
        rows.append([Cell(_trunc(name), name, title=name if len(name) > 120 else ""),
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
        rows.append([Cell(_trunc(name), name, title=name if len(name) > 120 else ""),
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


# ---------------------------------------------------------------------------------------------
# capture
# ---------------------------------------------------------------------------------------------
TRACED_LABELS = {"cuda_api": "CUDA API", "cuda_kernels": "CUDA kernels", "cuda_memcpy": "CUDA memcpy",
                 "cuda_memset": "CUDA memset", "cuda_sync": "CUDA synchronization", "nvtx": "NVTX", "osrt": "OS runtime",
                 "gpu_metrics": "GPU metrics", "cpu_sampling": "CPU sampling", "cudnn": "cuDNN", "cublas": "cuBLAS",
                 "mpi": "MPI", "cuda_graphs": "CUDA graphs (node trace)"}


#: ``source.tool`` -> the tool's name on the page
TOOL_LABELS = {"nsys": "Nsight Systems", "pytorch-profiler": "PyTorch Profiler"}

#: how to profile again with torch.profiler (a PyTorch Profiler trace's "Capture again"; README, docs/kineto.md)
TORCH_PROFILER_SNIPPET = """\
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
             schedule=schedule(wait=1, warmup=2, active=5),
             on_trace_ready=tensorboard_trace_handler("log/run")) as prof:
    for batch in loader:
        train_step(batch)
        prof.step()  # marks ProfilerStep#N
# then: nsysdoc report log/run/"""


def _kineto_recapture(result: dict) -> tuple[list[str], list[str]]:
    """(what cannot be diagnosed, advice) for a PyTorch Profiler trace, in torch.profiler's terms."""
    capture = result.get("capture") or {}
    traced = capture.get("traced") or {}
    missing, advice = [], []
    if not traced.get("cuda_api"):
        missing.append("CUDA API calls were not recorded: gaps cannot be attributed to their launching call "
                       "(host sync, launch overhead and input waits are unknown). Profile with "
                       "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA].")
    if not (traced.get("cuda_kernels") or traced.get("cuda_memcpy") or traced.get("cuda_memset")):
        missing.append("No GPU activity was recorded: add ProfilerActivity.CUDA to the profiler's activities and "
                       "check that the profiled steps ran CUDA work (the schedule's active steps).")
    if not traced.get("nvtx"):
        missing.append("No CPU operators or annotations were recorded: add ProfilerActivity.CPU to the activities "
                       "(it records operators, record_function ranges and ProfilerStep#N).")
    if not capture.get("has_step_markers"):
        advice.append("No training-step markers were found. Call prof.step() once per iteration inside "
                      "torch.profiler.profile (it writes ProfilerStep#N), or wrap each iteration in "
                      "torch.profiler.record_function(f\"train_step_{i}\"). If your steps are already marked with "
                      "another name, pass --step-marker REGEX.")
    advice.append("Python lines and nn.Module names: with_stack=True (and with_modules=True); input shapes: "
                  "record_shapes=True; allocations: profile_memory=True. Each adds overhead.")
    return missing, advice



def recapture_commands(result: dict) -> tuple[str, str, list[str], list[str]]:
    """(nsysdoc capture command, nsys profile command, what cannot be diagnosed, advice)."""
    capture = result.get("capture") or {}
    traced = capture.get("traced") or {}
    missing, advice = [], []
    need_metrics = not traced.get("gpu_metrics")
    if not traced.get("cuda_api"):
        missing.append("CUDA API calls were not traced: gaps cannot be attributed to their launching call "
                       "(host sync, launch overhead and input waits are unknown). Trace cuda.")
    if not (traced.get("cuda_kernels") or traced.get("cuda_memcpy") or traced.get("cuda_memset")):
        missing.append("No GPU activity was recorded: check that the program ran CUDA work inside the capture "
                       "(and, in containers, the profiling permissions).")
    if not traced.get("nvtx"):
        missing.append("NVTX was not traced (or nothing was annotated): no step markers and no DataLoader ranges.")
    if not traced.get("osrt"):
        missing.append("OS runtime calls were not traced: waits for input (poll, futex, read) cannot be told "
                       "apart from Python work on the host. Trace osrt.")
    if need_metrics:
        missing.append("No GPU metrics: SM active, SM issue and tensor-core activity per step "
                       "(what nvidia-smi would say vs the truth) are unavailable. Add --gpu-metrics-devices=all "
                       "(needs profiling permissions; Turing or newer).")
    if not capture.get("has_step_markers"):
        advice.append(("No training-step markers were found; the steps shown were inferred from the repeating GPU "
                       "work (see Capture). " if capture.get("step_source") == "inferred" else
                       "No training-step markers were found. ") + "Wrap each iteration in an NVTX range, e.g. "
                      "torch.cuda.nvtx.range_push(f\"train_step_{i}\") … torch.cuda.nvtx.range_pop(), or run under "
                      "torch.profiler.profile (it emits ProfilerStep#N). If your steps are already marked with "
                      "another name, pass --step-marker REGEX.")
    if capture.get("diagnostics"):
        advice.append("nsys reported warnings or errors while capturing (below): numbers may be incomplete.")
    try:
        from ..nsys import CaptureOptions, build_profile_argv

        argv = build_profile_argv("nsys", CaptureOptions(output_name="nsysdoc-train",
                                                         gpu_metrics_devices="all" if need_metrics else None),
                                  ["python", "train.py"])
        nsys_cmd = shlex.join(argv)
    except Exception:  # the command builder is another module's: never fail the report on it
        nsys_cmd = "nsys profile --trace=cuda,nvtx,osrt --sample=none" + \
            (" --gpu-metrics-devices=all" if need_metrics else "") + " --output=nsysdoc-train python train.py"
    ns_cmd = "nsysdoc capture" + (" --gpu-metrics-devices all" if need_metrics else "") + " -- python train.py"
    return ns_cmd, nsys_cmd, missing, advice


WINDOW_KINDS = {"steps": "first to last training step", "gpu-span": "first to last GPU operation",
                "steady-state": "the steady-state part of the GPU span"}


def _span_facts(cap: dict, origin: int = 0) -> list[tuple[str, str]]:
    """The GPU span and what the window leaves out of it (no step markers), as facts."""
    span = cap.get("span") or {}
    out = []
    if span.get("start_ns") is not None:
        out.append(("GPU span", f"{fmt_s(span['start_ns'] - origin)} → {fmt_s(span['end_ns'] - origin)} "
                                f"({fmt_ms(span.get('duration_ms'))})"))
    for x in cap.get("excluded") or []:
        what = {"warm-up": "left out: warm-up", "idle head": "left out: idle start",
                "idle tail": "left out: idle end"}.get(x.get("kind"), f"left out: {x.get('kind')}")
        x0, x1 = x.get("start_ns"), x.get("end_ns")
        text = (f"{fmt_s(x0 - origin if is_num(x0) else None)} → {fmt_s(x1 - origin if is_num(x1) else None)} "
                f"({fmt_ms(x.get('duration_ms'))})")
        if is_num(x.get("setup_ms")):
            text += f", {fmt_ms(x['setup_ms'])} of one-time set-up with the GPU idle"
        out.append((what, text))
    if cap.get("enough_gpu_work") is False and cap.get("not_judgeable_reason"):
        out.append(("judgement", str(cap["not_judgeable_reason"])))
    return out


def capture_view(result: dict, viewer: ViewerGuide | None = None) -> CaptureView:
    src = result.get("source") or {}
    cap = result.get("capture") or {}
    win = cap.get("window") or {}
    tool = str(src.get("tool") or "nsys")
    made_by = [("made by", "Nsight Systems")] if tool == "nsys" else \
        [("made by", f"{TOOL_LABELS.get(tool, tool)} (trace schemaVersion {src.get('schema_version') or 'unknown'})")]
    kineto = tool == "pytorch-profiler"
    if kineto:
        made_by = [("made by", f"PyTorch Profiler (Kineto) trace, schemaVersion {src.get('schema_version') or 'unknown'}"),
                   ("times", "seconds from the trace's start, as ui.perfetto.dev, chrome://tracing and TensorBoard's "
                             "trace view show them")]
    origin = (viewer or ViewerGuide()).origin_ns if kineto else 0
    facts = [("capture file", str(src.get("path") or "")), *made_by,
             *([("nsys version", str(src.get("nsys_version") or "unknown")),
                ("export schema version", str(src.get("schema_version") or "unknown"))] if tool == "nsys" else []),
             ("capture duration", fmt_ms(cap.get("duration_ms"))),
             ("analysis window", (f"{fmt_s(win['start_ns'] - origin)} → {fmt_s(win['end_ns'] - origin)} "
                                  f"({fmt_ms(win.get('duration_ms'))}, {WINDOW_KINDS.get(win.get('kind'), win.get('kind') or '')})")
              if win.get("start_ns") is not None and win.get("end_ns") is not None else "none"),
             *_span_facts(cap, origin),
             ("step markers", "found" if cap.get("has_step_markers") else
              "none found; steps inferred from the repeating GPU work" if cap.get("step_source") == "inferred"
              else "none found"),
             ("step pattern", str(cap.get("step_pattern") or "")),
             ("devices", str(cap.get("device_count"))), ("processes", str(cap.get("process_count"))),
             ("profiler overhead", fmt_pct(cap.get("profiler_overhead_pct"), 2) + " of the window")]
    labels = {**TRACED_LABELS, "nvtx": "CPU operators and annotations (record_function)"} if kineto else TRACED_LABELS
    traced = [(labels.get(k, k), bool(v)) for k, v in (cap.get("traced") or {}).items()]
    diag_rows = [[Cell(str(d.get("severity")), d.get("severity"), cls=f"sev-{d.get('severity')}"),
                  Cell(str(d.get("text")), d.get("text")), Cell(fmt_num(d.get("count"), 0), d.get("count"), True)]
                 for d in cap.get("diagnostics") or []]
    ns_cmd, nsys_cmd, missing, advice = recapture_commands(result)
    overhead = ("Profiling adds overhead: field reports measure step times 10–20% longer under "
                "nsys --trace=cuda,nvtx,osrt than without it. Read the absolute times here as relative ones, and "
                "re-measure the step time without the profiler after a fix. nsys's own recorded overhead "
                f"(PROFILER_OVERHEAD) covers {fmt_pct(cap.get('profiler_overhead_pct'), 2)} of this window.")
    if kineto:
        missing, advice = _kineto_recapture(result)
        overhead = ("Profiling adds overhead: the PyTorch Profiler's CUDA activity tracing and operator recording "
                    "lengthen step times, more so with record_shapes, with_stack and profile_memory. Read the absolute "
                    "times here as relative ones, and re-measure the step time without the profiler after a fix. "
                    f"The profiler's own recorded overhead covers {fmt_pct(cap.get('profiler_overhead_pct'), 2)} of "
                    "this window.")
    return CaptureView(
        facts=facts, traced=traced,
        diagnostics=Table(id="diagnostics", title="Profiler diagnostics" if kineto else "nsys diagnostics",
                          columns=[Column("Severity"), Column("Message"), Column("Count", True)], rows=diag_rows,
                          empty=("The trace holds no profiler warnings or errors." if kineto
                                 else "nsys recorded no warnings or errors.")),
        process_messages=[str(m) for m in cap.get("process_messages") or []],
        warnings=[str(w) for w in cap.get("warnings") or []], missing=missing, nsysdoc_command=ns_cmd,
        tool=TOOL_LABELS.get(tool, tool),
        not_recorded=[str(n.get("what")) for n in cap.get("not_recorded") or [] if isinstance(n, dict)],
        nsys_command=nsys_cmd, advice=advice, overhead=overhead,
        profiler_snippet=TORCH_PROFILER_SNIPPET if kineto else "")


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------
#: the only hosts an ``https:`` link of a page may point to (NVIDIA's and PyTorch's documentation)
LINK_HOSTS = ("docs.nvidia.com", "developer.nvidia.com", "pytorch.org", "docs.pytorch.org")


def path_href(path: str) -> str:
    """A link to a file, relative to the page (or absolute), for an ``href``: percent-encoded
    (``quote``, only ``/`` and unreserved characters kept), so no part of a file name — ``:``
    (``javascript:…``, ``data:…``), ``#``, ``?``, ``%``, quotes, ``<`` — can make it a scheme, a
    fragment or a query; never ``//`` first (a link to another host)."""
    q = quote(str(path), safe="/")
    return "/" + q.lstrip("/") if q.startswith("//") else q


def anchor_href(name: str) -> str:
    """``#name``, percent-encoded: a link inside the page."""
    return "#" + quote(str(name), safe="")


def safe_href(url: str) -> str | None:
    """An ``href`` for ``url`` when its scheme and host are allowed, percent-encoded; else None
    (show it as text). Allowed: ``#anchors`` and ``https:`` links to :data:`LINK_HOSTS` (and
    their subdomains). Files are linked with :func:`path_href`, which never yields a scheme."""
    text = str(url)
    if text.startswith("#"):
        return anchor_href(text[1:])
    try:
        parts = urlsplit(text)
        host = (parts.hostname or "").lower()
    except ValueError:
        return None
    if parts.scheme.lower() != "https" or parts.username or parts.password or parts.port is not None:
        return None
    if not any(host == h or host.endswith("." + h) for h in LINK_HOSTS):
        return None
    out = f"https://{host}{quote(parts.path, safe='/') or '/'}"
    if parts.query:
        out += "?" + quote(parts.query, safe="=&")
    if parts.fragment:
        out += "#" + quote(parts.fragment, safe="")
    return out


def _static(name: str) -> str:
    return (files("nsysdoc.views") / "static" / name).read_text(encoding="utf-8")


def csp_for(js: str) -> str:
    """Nothing may load; only the inlined script (matched by its hash) may run."""
    digest = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode()
    return (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
            "base-uri 'none'; form-action 'none'")


def build_context(result: dict, page, *, worst_step: bool = False) -> ReportContext:
    """The page's context from the result and its page data (:class:`nsysdoc.pagedata.PageData`,
    or None: no timeline); nothing else is read."""
    src = result.get("source") or {}
    ran, counts, skipped = rule_statuses(result)
    tl = charts.timeline_view(page, worst=worst_step) if page is not None else None
    if tl is None:
        reason = "No analysis window (no GPU activity and no step markers): nothing to draw."
    else:
        reason = ""
    js = _static("report.js")
    viewer = viewer_guide(result, getattr(page, "viewer_origin_ns", None))
    findings = finding_views(result, viewer.origin_ns)
    tl_data = timeline_data(page, findings, worst=worst_step) if tl is not None else None
    tl_json = Markup(tl_data[1]) if tl_data is not None else None  # already escaped for a <script>
    return ReportContext(
        title=f"nsysdoc — {source_name(src.get('path'))}",
        source_name=source_name(src.get("path")), source_path=str(src.get("path") or ""),
        nsysdoc_version=str(result.get("nsysdoc_version") or __version__),
        verdict=verdict(result), headline=headline(result), findings=findings,
        rules_ran=ran, rule_counts=counts, skipped_rules=skipped,
        steps=steps_view(result, worst_step),
        timeline=tl, timeline_reason=reason,
        tables=[*operator_tables(result), *operator_shape_tables(result), kernel_table(result), *kernel_counter_tables(result), copies_table(result), *sync_tables(result), launch_table(result),
                nvtx_table(result), device_table(result), gaps_table(result, viewer)],
        capture=capture_view(result, viewer),
        glossary_html=glossary_html(),
        report_terms=[(anchor(t), t, d) for t, d in (KINETO_REPORT_TERMS if is_kineto(result) else REPORT_TERMS)],
        css=Markup(_static("report.css")), js=Markup(js), csp=csp_for(js),
        result=capped_result(result), viewer=viewer, timeline_data=tl_json,
        memory=memory_view(result),  # issue 47
    )
