"""The verdict: one headline for the whole capture, from the findings and the window split.

``result["verdict"]`` (``docs/json.md``):

* ``no-gpu``: no GPU activity, or no kernel and too little GPU work (headline ``no-gpu-activity``);
* ``too-little-work``: too little GPU work in the window to judge (headline ``capture-quality``);
  the sentence says so and the detail names what the capture does show; also when GPU work was
  not recorded (``capture.unrecorded_gpu_work``: a blocking call outlasts the recorded GPU work)
  and no finding is the main bottleneck: no bound rests on such a window;
* ``bottleneck``: the main finding (:func:`main_finding`; glossary "How the verdict is chosen"):
  the first of the findings order — severity, then steady state before framing, then cost — at
  warning or critical that costs at least ``MAIN_MIN_PCT`` % of what it is measured over; one-time
  set-up only when nothing in the steady state reaches warning, and then the sentence asks for a
  capture after warm-up;
* ``bound``: no such finding; the headline names what bounds the run — the largest part of the
  window split (mean over devices): ``compute-bound``, ``communication-bound`` (exposed
  communication), ``transfer-bound`` (copy-only time) or ``gpu-idle`` (idle, with its largest class).
"""
from __future__ import annotations

from ..fmt import fmt_ms, fmt_pct, is_num

from ..severity import SEVERITY_RANK  # noqa: E402

IDLE_LABELS = {
    "sync": "the host blocked in syncs",
    "input": "the host waiting for input",
    "alloc": "memory allocation and release",
    "setup": "one-time set-up (module loading, JIT, compilation)",
    "launch": "per-launch overhead between kernels",
    "api": "other CUDA API calls (and launch calls of 1 ms or more)",
    "host": "host CPU work with no CUDA call",
    "dependency": "GPU-side dependencies",
    "tail": "after the last GPU operation",
    "unattributed": "no known launching call or launching thread",
}


#: Issue 47: findings about memory, not time (no impact: never the main bottleneck, and no steady-state
#: warning that would keep one-time set-up from the headline; docs/glossary.md, "Memory")
NOT_TIME_RULES = frozenset({"memory-growth", "memory-near-capacity"})

#: A finding that costs less than this share of what it is measured over is never the main bottleneck.
MAIN_MIN_PCT = 5.0


def is_framing(f: dict) -> bool:
    """A finding about the capture's framing (one-time set-up, process start before the first GPU
    operation: ``phase: framing`` in its rule), not about the steady state."""
    return f.get("phase") == "framing"


def steady_state_judgeable(result: dict) -> bool:
    """Whether the window shows a steady state to judge: enough GPU work
    (``capture.enough_gpu_work``) in at least ``BOUND_MIN_GPU_OPS`` GPU operations (one long kernel
    is no steady state). Framing findings come after the steady state's only then."""
    cap = result.get("capture") or {}
    ops = ((result.get("metrics") or {}).get("values") or {}).get("gpu_op_count")
    return cap.get("enough_gpu_work") is not False and not (is_num(ops) and ops < BOUND_MIN_GPU_OPS)


def ranking_cost_ms(f: dict):
    """Issue 48: the cost a finding is ranked by inside its severity (glossary "Findings order"):
    with a what-if, what its fix saves, in the window's terms — ``impact_ms`` times
    ``what_if.saved_ms_per_step / impact_ms_per_step`` (the per-step saving over the steps the impact
    is spread over); without one, or without a per-step impact, ``impact_ms``. The severity itself
    still follows the impact."""
    imp = f.get("impact_ms")
    wi = f.get("what_if") or {}
    saved, per = wi.get("saved_ms_per_step"), f.get("impact_ms_per_step")
    if is_num(imp) and is_num(saved) and is_num(per) and per > 0:
        return imp * max(saved, 0) / per
    return imp


def rank_findings(findings: list[dict], judgeable: bool = True) -> list[dict]:
    """The one order of the findings list (JSON, page, Markdown, terminal), which the verdict
    follows: by severity (critical, warning, info), then — when the window holds enough GPU work to
    judge its steady state (``judgeable``) — steady-state findings before framing ones (one-time
    set-up), then the largest cost first (:func:`ranking_cost_ms`: the what-if's saving where the
    finding has one, else ``impact_ms``), unknown cost last, then input order."""
    def key(item):
        i, f = item
        imp = ranking_cost_ms(f)
        framing = judgeable and is_framing(f)
        return (-SEVERITY_RANK.get(f.get("severity"), -1), 1 if framing else 0, 0 if is_num(imp) else 1,
                -(imp if is_num(imp) else 0), i)
    return [f for _, f in sorted(enumerate(findings or []), key=key)]


def main_finding(findings: list[dict], judgeable: bool = True) -> dict | None:
    """The main bottleneck (glossary "How the verdict is chosen"): the first finding of the
    findings order at warning or critical that costs something and at least ``MAIN_MIN_PCT`` % of
    what it is measured over; a framing finding (set-up) only when no steady-state finding
    reaches warning (or the steady state cannot be judged). None: the run is "bound" by the
    largest part of its window split."""
    ranked = rank_findings(findings, judgeable)
    costly = [f for f in ranked if is_num(f.get("impact_ms")) and f["impact_ms"] > 0
              and f.get("severity") in ("warning", "critical")]
    # a steady-state finding at warning or above, with a cost or not (a dominant kernel); the
    # capture's own problems (capture-quality, no-gpu-activity) are not the steady state
    steady_warn = any(not is_framing(f) and f.get("category") != "capture"
                      and f.get("severity") in ("warning", "critical") for f in ranked
                      if f.get("rule") not in NOT_TIME_RULES)
    for f in costly:
        if judgeable and is_framing(f) and steady_warn:
            continue
        if is_num(f.get("impact_pct")) and f["impact_pct"] < MAIN_MIN_PCT:
            continue
        return f
    return None


def _cost(f: dict, window_ms, summary: dict | None = None) -> str:
    if is_num(f.get("impact_ms_per_step")):
        med = (summary or {}).get("step_time_ms_median")
        mean = (summary or {}).get("step_time_ms_mean")
        text = f"It costs about {fmt_ms(f['impact_ms_per_step'])} per step"
        if is_num(med) and is_num(mean) and f["impact_ms_per_step"] > med:
            # a mean over steps of unequal length: said beside the steps' mean, not the median alone
            text += f" on average (steps last {fmt_ms(mean)} on average, {fmt_ms(med)} at the median)"
        if is_num(f.get("impact_pct")):
            text += f" ({fmt_pct(f['impact_pct'])} of the analysis window)"
        return text + "."
    if is_num(f.get("impact_ms")):
        text = f"It costs about {fmt_ms(f['impact_ms'])}"
        if (f.get("impact_of") or "analysis window") != "analysis window" and is_num(f.get("impact_pct")):
            return text + f", {fmt_pct(f['impact_pct'])} of the {f['impact_of']}."
        if is_num(window_ms):
            text += f" of the {fmt_ms(window_ms)} analysis window"
            if is_num(f.get("impact_pct")):
                text += f" ({fmt_pct(f['impact_pct'])})"
        return text + "."
    return ""


def what_if_text(f: dict, steps: bool = True) -> str:
    """Issue 48: what fixing finding ``f`` would do to the median step (``steps``; else to the
    analysis window, which the what-if replays when the capture has no steps), from its ``what_if``
    (glossary "What-if"); "" without one."""
    wi = f.get("what_if") or {}
    a, b, saved = wi.get("step_ms_before"), wi.get("step_ms_after"), wi.get("saved_ms_per_step")
    if not (is_num(a) and is_num(b) and is_num(saved)):
        return ""
    what, that = ("the median step", "that step") if steps else ("the analysis window", "it")
    graph = "the median step's" if steps else "the window's"
    if saved <= 0:
        return (f" Replayed on {graph} dependency graph, fixing it alone would not shorten {that} "
                f"({fmt_ms(a)}; {wi.get('change')}): the cause is not on its critical path.")
    return f" Fixing it would take {what} from {fmt_ms(a)} to {fmt_ms(b)} ({wi.get('change')})."


def window_split(result: dict) -> dict:
    """Mean over devices with GPU work of the window split (% of the window): compute, exposed
    communication, copy-only and idle by class."""
    devs = [d for d in result.get("devices") or [] if d.get("busy_pct") is not None
            and (d.get("kernel_count") or 0) + (d.get("copy_count") or 0) > 0]
    if not devs:
        return {}
    n = len(devs)
    out = {k: sum(d.get(f"{k}_pct") or 0 for d in devs) / n for k in ("busy", "compute", "exposed_comm", "copy_only",
                                                                        "idle")}
    window = (result.get("capture") or {}).get("window", {}).get("duration_ms") or 0
    idle = {}
    for d in devs:
        for c, v in (d.get("idle_ms_by_cause") or {}).items():
            idle[c] = idle.get(c, 0) + (v or 0) / n
    out["idle_by_class"] = {c: v / window * 100 for c, v in idle.items()} if window else {}
    return out


def _top_kernels(result: dict, k: int = 3) -> str:
    rows = ((result.get("metrics") or {}).get("kernels") or {}).get("by_short_name") or []
    def short(name: str) -> str:
        name = str(name)
        return name if len(name) <= 60 else name[:57] + "..."
    parts = [f"{short(r['name'])} ({r['share_of_kernel_time_pct']:.0f}% of kernel time)" for r in rows[:k]
             if is_num(r.get("share_of_kernel_time_pct"))]
    return ", ".join(parts)


def bound(result: dict) -> tuple[str, str]:
    """(headline, sentence) naming what bounds the run, from the window split."""
    s = window_split(result)
    if not s:
        return "gpu-idle", "No GPU activity in the analysis window."
    parts = {"compute-bound": s["compute"], "communication-bound": s["exposed_comm"],
             "transfer-bound": s["copy_only"], "gpu-idle": s["idle"]}
    head = max(parts, key=parts.get)
    busy = f"GPU busy {fmt_pct(s['busy'])}"
    if head == "compute-bound":
        top = _top_kernels(result)
        if s["compute"] >= 50:
            text = f"Compute-bound: {busy}, compute {fmt_pct(s['compute'])} of the window."
        else:  # the largest part, but not most of the window
            idle = s.get("idle_by_class") or {}
            c = max(idle, key=idle.get) if idle else None
            text = (f"No single bound: compute is the largest part ({fmt_pct(s['compute'])} of the window), "
                    f"{busy}; idle {fmt_pct(s['idle'])}" + (f", mostly {IDLE_LABELS.get(c, c)}" if c else "") + ".")
        if top:
            text += f" Top kernels: {top}."
    elif head == "communication-bound":
        text = (f"Communication-bound: {busy}; communication with no compute running takes "
                f"{fmt_pct(s['exposed_comm'])} of the window, compute {fmt_pct(s['compute'])}.")
    elif head == "transfer-bound":
        text = (f"Transfer-bound: {busy}, but memory copies with no kernel running take {fmt_pct(s['copy_only'])} "
                f"of the window and compute {fmt_pct(s['compute'])}.")
    else:
        idle = s.get("idle_by_class") or {}
        c = max(idle, key=idle.get) if idle else None
        text = f"The GPU is mostly idle: {busy}, idle {fmt_pct(s['idle'])} of the window"
        text += f", most of it {IDLE_LABELS.get(c, c)} ({fmt_pct(idle[c])})." if c and idle[c] > 0 else "."
    return head, text


def split_text(result: dict) -> str:
    """The window split as plain facts (no "-bound" claim): the detail line under a bottleneck."""
    s = window_split(result)
    if not s:
        return ""
    idle = s.get("idle_by_class") or {}
    c = max(idle, key=idle.get) if idle else None
    text = (f"In the window (mean over GPUs): compute {fmt_pct(s['compute'])}, exposed communication "
            f"{fmt_pct(s['exposed_comm'])}, copies with no kernel running {fmt_pct(s['copy_only'])}, "
            f"GPU idle {fmt_pct(s['idle'])}")
    if c and idle[c] >= 0.05:
        text += f" (largest idle class: {IDLE_LABELS.get(c, c)}, {fmt_pct(idle[c])})"
    return text + "."


#: Outside-the-window time (share of the capture) from which the verdict says what was left out.
FRAMING_MIN_PCT = 10.0


def framing_text(result: dict) -> str:
    """What the window leaves out of the capture, with times (``capture.framing``); "" when the
    window covers nearly all of it."""
    fr = (result.get("capture") or {}).get("framing") or {}
    cap_ms, win_ms = fr.get("capture_ms"), fr.get("window_ms")
    if not is_num(cap_ms) or not is_num(win_ms) or not is_num(fr.get("outside_window_pct")):
        return ""
    if fr["outside_window_pct"] < FRAMING_MIN_PCT:
        return ""
    cap = result.get("capture") or {}
    kind = (cap.get("window") or {}).get("kind")
    steps = "the inferred steps" if cap.get("step_source") == "inferred" else "the training steps"
    what = {"steps": steps, "steady-state": "the steady-state part of the GPU work"}.get(
        kind, "first to last GPU operation")
    parts = []
    small = 0.01 * cap_ms  # parts under 1% of the capture are not worth a word
    phase = next((x for x in cap.get("excluded") or [] if x.get("kind") in (
        "set-up phase", "copies before the first kernel", "before the loop range")), None)
    if is_num(fr.get("startup_ms")) and fr["startup_ms"] >= small:
        parts.append(f"{fmt_ms(fr['startup_ms'])} of process start-up before the first CUDA call")
    if is_num(fr.get("setup_before_ms")) and fr["setup_before_ms"] >= small:
        text = f"{fmt_ms(fr['setup_before_ms'])} of set-up before the first GPU operation"
        if is_num(fr.get("context_ms")) and fr.get("context_call"):
            text += f" (CUDA context creation in {fr['context_call']}: {fmt_ms(fr['context_ms'])})"
        parts.append(text)
    if is_num(fr.get("host_before_ms")) and fr["host_before_ms"] >= small:
        parts.append(f"{fmt_ms(fr['host_before_ms'])} of other host work before the window")
    if phase is not None and is_num(phase.get("duration_ms")):
        text = str(phase.get("text") or "")[:60]
        parts.append(f"{fmt_ms(phase['duration_ms'])} " + {
            "set-up phase": f"of the set-up phase '{text}' before the first kernel",
            "before the loop range": f"before the range '{text}' around the measured loop",
        }.get(phase["kind"], "of copies before the first kernel (data or weights uploaded)"))
    gpu_out = fr.get("gpu_outside_window_ms")
    if is_num(gpu_out) and gpu_out >= small:
        parts.append(f"{fmt_ms(gpu_out)} of GPU work outside the window" + (" (in that phase and after)"
                                                                            if phase is not None else ""))
    if is_num(fr.get("after_window_ms")) and fr["after_window_ms"] >= small:
        parts.append(f"{fmt_ms(fr['after_window_ms'])} after the window (trailing host work and tear-down)")
    text = (f"The capture lasts {fmt_ms(cap_ms)}; the analysis window ({what}) covers {fmt_ms(win_ms)} of it "
            f"({fmt_pct(win_ms / cap_ms * 100 if cap_ms else None)}).")
    if parts:
        text += " Left out: " + "; ".join(parts) + "."
    if is_num(fr.get("busy_capture_pct")):
        busy = (result.get("summary") or {}).get("gpu_busy_pct")
        text += f" Over the whole capture the GPU was busy {fmt_pct(fr['busy_capture_pct'])}"
        text += f" (over the window: {fmt_pct(busy)})." if is_num(busy) else "."
    return text


#: Fewer GPU operations than this in the window (a handful) never make a run "compute-bound".
BOUND_MIN_GPU_OPS = 10


def verdict(result: dict) -> dict:
    """The verdict of a result with findings (see the module docstring)."""
    cap = result.get("capture") or {}
    judgeable = steady_state_judgeable(result)
    findings = rank_findings(result.get("findings") or [], judgeable)
    summary = result.get("summary") or {}
    window_ms = (cap.get("window") or {}).get("duration_ms")
    base = {"rule": None, "severity": None, "impact_ms": None, "impact_ms_per_step": None, "impact_pct": None}
    framing = framing_text(result)
    if not cap.get("gpu_activity", True) or (not summary.get("kernel_count") and cap.get("enough_gpu_work") is False):
        ops = ((result.get("metrics") or {}).get("values") or {}).get("gpu_op_count") or 0
        why = "the capture has no GPU activity" if not cap.get("gpu_activity", True) else \
            (f"no kernel was captured, only {ops:,} copy/memset operation(s)" if ops else "no GPU kernel ran in the capture")
        f = next((x for x in findings if x.get("rule") == "no-gpu-activity"), None)
        # the detail does not repeat the findings below (no-gpu-activity, capture-quality)
        return {**base, "status": "no-gpu", "headline": "no-gpu-activity", "rule": f and f["rule"],
                "severity": f and f["severity"], "sentence": f"Nothing to diagnose: {why}.",
                "detail": "The capture-quality finding below says what the capture lacks and how to record it.",
                "framing": framing}
    costly = [f for f in findings if is_num(f.get("impact_ms")) and f["impact_ms"] > 0
              and f.get("severity") in ("warning", "critical")]
    main = main_finding(findings, judgeable)
    little = cap.get("enough_gpu_work") is False
    if little and not main:
        reason = cap.get("not_judgeable_reason") or "too little GPU work to judge"
        shown = [x for x in findings if x.get("rule") not in ("capture-quality",) and is_num(x.get("impact_ms"))]
        detail = f"What the capture shows: {shown[0]['message']}" if shown else ""
        q = next((x for x in findings if x.get("rule") == "capture-quality"), None)
        return {**base, "status": "too-little-work", "headline": "capture-quality", "rule": q and q["rule"],
                "severity": q and q["severity"], "sentence": reason[:1].upper() + reason[1:] + ".", "detail": detail,
                "framing": framing}
    if main:
        f = main
        title = (f.get("title") or f.get("rule") or "a finding").rstrip(".")
        sentence = f"Main bottleneck: {title}. {_cost(f, window_ms, summary)}".strip()
        sentence += what_if_text(f, steps=bool(summary.get("step_count")))
        if is_framing(f):
            sentence += " Capture a longer run after warm-up to see the steady state."
        detail = split_text(result)
        if little:  # host-side time can be judged; the GPU's own work cannot
            reason = cap.get("not_judgeable_reason") or "too little GPU work to judge"
            detail = f"The GPU itself cannot be judged: {reason}."
        return {"status": "bottleneck", "headline": str(f.get("rule")), "rule": f.get("rule"),
                "severity": f.get("severity"), "impact_ms": f.get("impact_ms"),
                "impact_ms_per_step": f.get("impact_ms_per_step"), "impact_pct": f.get("impact_pct"),
                "sentence": sentence, "detail": detail, "framing": framing}
    head, bound_text = bound(result)
    unrec = cap.get("unrecorded_gpu_work") or []
    if unrec:  # GPU work was not recorded: no bound rests on the window's busy time
        q = next((x for x in findings if x.get("rule") == "capture-quality"), None)
        u = unrec[0]
        return {**base, "status": "too-little-work", "headline": "capture-quality", "rule": q and q["rule"],
                "severity": q and q["severity"],
                "sentence": f"The capture is incomplete: GPU work was not recorded ({u.get('call')} lasts "
                            f"{fmt_ms(u.get('duration_ms'))}, recorded GPU work covers only its first "
                            f"{fmt_ms(u.get('covered_ms'))}), so the window's busy time cannot say what bounds the run.",
                "detail": f"Without the missing GPU work the window would read: {bound_text}", "framing": framing}
    ops = ((result.get("metrics") or {}).get("values") or {}).get("gpu_op_count")
    if head == "compute-bound" and is_num(ops) and ops < BOUND_MIN_GPU_OPS:
        fr = cap.get("framing") or {}
        busy_cap = fr.get("busy_capture_pct")
        n = int(ops)
        if is_num(busy_cap) and busy_cap < 50:
            head = "gpu-idle"
            bound_text = (f"The GPU is idle most of the capture: busy {fmt_pct(busy_cap)} of "
                          f"{fmt_ms(fr.get('capture_ms'))}. The window holds only {n} GPU operation(s), "
                          f"too few to call the run compute-bound.")
        else:
            q = next((x for x in findings if x.get("rule") == "capture-quality"), None)
            return {**base, "status": "too-little-work", "headline": "capture-quality", "rule": q and q["rule"],
                    "severity": q and q["severity"],
                    "sentence": f"Too few GPU operations to judge: {n} in the window, too few to call the run "
                                f"compute-bound or to find a pattern.", "detail": bound_text, "framing": framing}
    small = [f for f in findings if is_num(f.get("impact_ms")) and f["impact_ms"] > 0 and not is_framing(f)]
    framing_costs = [f for f in costly if is_framing(f)]
    parts = []
    sliver = bool(((result.get("metrics") or {}).get("values") or {}).get("gpu_work_sliver"))
    # on a sliver of GPU work findings are kept at info whatever their share: not "smaller"
    capped = [f for f in small if sliver and is_num(f.get("impact_pct")) and f["impact_pct"] >= MAIN_MIN_PCT]
    small = [f for f in small if f not in capped]
    if capped:
        parts.append("Kept at info because the window holds a sliver of GPU work: " + ", ".join(
            f"{f.get('rule')} ({fmt_pct(f.get('impact_pct'))})" for f in capped[:4]) + ".")
    if small:
        parts.append(f"Smaller findings (under {MAIN_MIN_PCT:.0f}% of the window each): " + ", ".join(
            f"{f.get('rule')} ({fmt_pct(f.get('impact_pct'))})" for f in small[:4]) + ".")
    for f in framing_costs[:1]:
        parts.append(f"One-time set-up outside the steady state ({f.get('rule')}: {fmt_ms(f.get('impact_ms'))}, "
                     f"{fmt_pct(f.get('impact_pct'))} of the {f.get('impact_of') or 'analysis window'}) is not the "
                     "bottleneck: it does not recur in a longer run.")
    detail = " ".join(parts)
    return {**base, "status": "bound", "headline": head, "sentence": bound_text, "detail": detail,
            "framing": framing}
