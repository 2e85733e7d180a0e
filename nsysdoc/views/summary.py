"""What the result says, in the page's words: the verdict, the four headline numbers, the
findings in their order with their evidence, time ranges and Where rows, and the rules' statuses.

Split from ``views/build.py`` (issue 51) because the Markdown and terminal summaries
(:mod:`nsysdoc.views.render`) share these with the page: they read the JSON result only
(``docs/json.md``), never page data, so they stand apart from the tables and the page's assembly.
"""
from __future__ import annotations

from ..metrics.gpu import CAUSE_LABELS, CAUSES
from ..rules.verdict import rank_findings as _rank
from ..rules.verdict import what_if_text
from ..rules.verdict import verdict as verdict_of
from ..severity import SEVERITY_RANK
from . import columns
from .context import (Evidence, FindingView, Headline, RuleStatus, TimeRange, Verdict, ViewerGuide, WhereRow, fmt_dur_ns,
                      fmt_ms, fmt_num, fmt_pct, fmt_s, is_num)
from .glossary import anchor, definition

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



def _pct(v, digits: int = 1) -> str:
    """A percentage cell under a header that already says (%)."""
    return f"{v:.{digits}f}" if is_num(v) else "—"


def _trunc(s: str, n: int = 120) -> str:
    s = str(s)
    return s if len(s) <= n else s[: n - 1] + "…"



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
