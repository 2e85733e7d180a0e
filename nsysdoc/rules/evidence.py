"""What a finding points at: its evidence table, its ``where`` rows and its time ranges.

Why a module of its own: a rule that fires names rows of the result to show (``evidence:``, from
the tables :func:`tables` builds), the sites of its time (``where:``, from ``metrics.where`` and,
for launch gaps, the operators whose CPU dispatch is slower than their GPU work) and stretches of
the timeline (``time_ranges:``); picking them is apart from deciding whether the rule fires and
how much it costs (:mod:`nsysdoc.rules.evaluate`). Moved out of ``nsysdoc/rules/evaluate.py``
(issue 51); re-exported there.
"""
from __future__ import annotations

from .spec import Rule
from .values import IDLE_CAUSES


def tables(result: dict) -> dict[str, list[dict]]:
    """Evidence tables (rows of the result) by name; see ``values.TABLE_COLUMNS``."""
    from ..metrics.kernels import is_fp32_gemm, uses_tensor_cores

    m = result["metrics"]
    steps = []
    for s in result["steps"]:
        if not s["primary"]:
            continue
        row = dict(s)
        bd = s.get("breakdown_ms") or {}
        for k in [f"idle_{c}" for c in IDLE_CAUSES] + ["exposed_comm", "compute", "copy"]:
            row[f"{k}_ms"] = bd.get(k)
        steps.append(row)

    def kern(rows):
        return [{**r, "fp32_gemm": is_fp32_gemm(r["name"]), "tensor_cores": uses_tensor_cores(r["name"])} for r in rows]

    gaps = []
    for g in m["idle_gaps"]["longest"]:
        row = dict(g)
        for c, v in (g.get("split_ms") or {}).items():
            row[f"{c}_ms"] = v
        gaps.append(row)
    return {
        "steps": steps,
        "devices": result["devices"],
        "alloc_calls": m.get("alloc_calls") or [],
        "setup_events": (m.get("setup") or {}).get("events") or [],
        "kernels": kern(m["kernels"]["by_short_name"]),
        "kernels_by_name": kern(m["kernels"]["by_name"]),
        "copies": m["copies"],
        "sync_calls": m["sync"]["sync_calls"],
        "sync_threads": m["sync"]["host_sync_ms_by_thread"],
        "gaps": gaps,
        "dependency_waits": m["idle_gaps"].get("dependency_waits") or [],
        "underfilled_kernels": (m.get("underfilled") or {}).get("kernels") or [],
        "host_outside_phases": [{**p, "name": f"host phase {p['where']}"} for p in
                                ((result["capture"].get("host_outside_window") or {}).get("phases") or [])],
        **_memory_tables(m),  # issue 47
    }


def _memory_tables(m: dict) -> dict:
    from ..metrics.memory import memory_tables  # (pure; rules never import assembly)

    return memory_tables(m.get("memory"))


def _where(rule: Rule, result: dict) -> tuple[list[dict], str | None]:
    """The finding's ``where`` (sites of its time, most first) and, when the list is empty or
    could say more, what the capture lacks and the switch that adds it."""
    if not rule.where:
        return [], None
    metrics = result["metrics"]
    if "operators" not in metrics:  # a result without attribution (contract 2, synthetic metrics)
        return [], None
    rows = list((metrics.get("where") or {}).get(rule.where) or [])
    ops = metrics.get("operators") or {}
    missing = ops.get("missing") or []
    note = None
    if missing:
        parts = [f"{m['what']}: {m['switch']}" for m in missing]
        lead = "Not in this capture, so the list above cannot say more — " if rows else \
            "This capture cannot say where this time comes from — "
        note = lead + "; ".join(parts) + "."
    elif not rows:
        note = "No operator, module or frame encloses this time in the capture."
    if rule.where in DISPATCH_WHERE:
        extra = dispatch_rows(ops.get("rows") or [])
        if extra and not rows and not missing:
            note = None  # the operators listed say where, though no site holds the gaps
        rows += extra
    return rows, note


#: ``where:`` selections whose findings also name the operators whose CPU dispatch is slower than
#: their GPU work (issue 47, the article's second table, ``sort_by="cpu_time_total"``)
DISPATCH_WHERE = frozenset({"launch_gaps"})
#: how those rows say why they are there (``via``), and how many at most
VIA_DISPATCH = "CPU dispatch slower than the GPU"
DISPATCH_MAX = 3


def dispatch_rows(op_rows: list) -> list[dict]:
    """Where rows for the operators whose CPU time per call, less its waits in blocking CUDA
    calls, exceeds the GPU time they launched per call (``cpu_exceeds_gpu`` in
    ``metrics.operators.rows``), the most host time in excess first: ``excess_ms`` = (CPU − wait −
    GPU per call) × outer calls = ``cpu_ms − cpu_wait_ms − gpu_ms``, whole capture (ties: the
    name); ``count`` is the outer calls (not inside a call of the same name: what the per-call
    times divide by; ``calls`` when a row lacks them). ``share_pct`` and ``ms`` are None: this is
    host time, not the selection's."""
    num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)  # noqa: E731
    cand = [r for r in op_rows if isinstance(r, dict) and r.get("cpu_exceeds_gpu") is True
            and num(r.get("cpu_ms")) and num(r.get("gpu_ms"))]
    excess = lambda r: r["cpu_ms"] - (r.get("cpu_wait_ms") if num(r.get("cpu_wait_ms")) else 0.0) - r["gpu_ms"]  # noqa: E731
    cand.sort(key=lambda r: (-excess(r), str(r.get("name"))))

    def wait_per_call(r):
        w, c, cu = r.get("cpu_wait_ms"), r.get("cpu_ms"), r.get("cpu_us_per_call")
        return round(w / c * cu, 4) if num(w) and num(c) and c and num(cu) else None

    return [{"op": r.get("name"), "module": r.get("module"), "frame": r.get("frame"), "backward_op": None,
             "forward_op": None, "via": VIA_DISPATCH, "share_pct": None, "ms": None,
             "count": r.get("outer_calls") if num(r.get("outer_calls")) else r.get("calls"),
             "cpu_us_per_call": r.get("cpu_us_per_call"), "gpu_us_per_call": r.get("gpu_us_per_call"),
             "cpu_wait_us_per_call": wait_per_call(r), "excess_ms": round(excess(r), 4)} for r in cand[:DISPATCH_MAX]]


def _evidence(rule: Rule, tabs: dict, env: dict) -> dict | None:
    ev = rule.evidence
    if not ev:
        return None
    rows = tabs.get(ev["table"], [])
    if rule.evidence_where is not None:
        rows = [r for r in rows if rule.evidence_where.evaluate({**env, **r})]
    if ev.get("sort"):
        key = ev["sort"]
        rows = sorted(rows, key=lambda r: (r.get(key) is None, r.get(key) if r.get(key) is not None else 0),
                      reverse=ev.get("descending", True))
        if ev.get("descending", True):  # keep nulls last
            rows = [r for r in rows if r.get(key) is not None] + [r for r in rows if r.get(key) is None]
    rows = rows[: ev.get("limit", 10)]
    cols = ev["columns"]
    return {"title": ev.get("title", rule.title), "columns": cols, "rows": [[r.get(c) for c in cols] for r in rows]}


#: issue 49: the exposed-communication stretches a finding points at (the longest, in time order)
EXPOSED_RANGES_MAX = 8


def _exposed_comm_ranges(result: dict) -> list[dict]:
    """The longest stretches of ``metrics.exposed_comm`` of the slowest step (or the window), in
    time order; ``[]`` when none is known."""
    ex = (result.get("metrics") or {}).get("exposed_comm") or {}
    r = ex.get("worst_step") or ex.get("window") or {}
    st = [x for x in r.get("stretches") or [] if x.get("end_ns") is not None and x["end_ns"] > x["start_ns"]]
    st = sorted(st, key=lambda x: (-(x["end_ns"] - x["start_ns"]), x["start_ns"]))[:EXPOSED_RANGES_MAX]
    where = f"slowest step {r.get('name') or r['step']}" if r.get("step") is not None else "window"
    return [{"label": f"communication alone on the GPU ({where})", "start_ns": x["start_ns"], "end_ns": x["end_ns"],
             "device": x.get("device")} for x in sorted(st, key=lambda x: (x["start_ns"], str(x.get("device"))))]


def _time_ranges(rule: Rule, result: dict, tabs: dict) -> list[dict]:
    kind, _, arg = rule.time_ranges.partition(":")
    w = result["capture"]["window"]
    if kind == "exposed_comm":
        out = _exposed_comm_ranges(result)
        if out:
            return out
        kind = "worst_step"  # no stretch known (an older JSON): the slowest step, as before
    if kind == "window" or (kind in ("worst_step", "median_step") and not tabs["steps"]):
        if w.get("start_ns") is None:
            return []
        return [{"label": "analysis window", "start_ns": w["start_ns"], "end_ns": w["end_ns"], "device": None}]
    if kind in ("worst_step", "median_step"):
        picks = result["metrics"].get("step_picks") or {}
        want = picks.get(kind)
        s = next((x for x in tabs["steps"] if x["step"] == want), None)
        if s is None:  # a result without picks (older JSON): the same rule
            by = sorted(tabs["steps"], key=lambda x: (x["step_time_ms"] or 0, x["step"]))
            s = by[(len(by) - 1) // 2] if kind == "median_step" else \
                min((x for x in by if x["step_time_ms"] == by[-1]["step_time_ms"]), key=lambda x: x["step"])
        return [{"label": f"{'slowest' if kind == 'worst_step' else 'median'} step {s['name']}",
                 "start_ns": s["start_ns"], "end_ns": s["end_ns"], "device": s.get("device")}]
    if kind == "gaps":
        gaps = [g for g in tabs["gaps"] if not arg or g["cause"] == arg][:3]
        return [{"label": f"{g['duration_ms']:.3f} ms idle ({g['cause']})", "start_ns": g["start_ns"],
                 "end_ns": g["end_ns"], "device": g["device"]} for g in gaps]
    if kind == "setup":
        out = [{"label": f"warm-up left out of the window ({x['duration_ms']:,.1f} ms)", "start_ns": x["start_ns"],
                "end_ns": x["end_ns"], "device": None}
               for x in result["capture"].get("excluded") or [] if x["kind"] == "warm-up"]
        gaps = sorted((g for g in tabs["gaps"] if (g.get("setup_ms") or 0) > 0), key=lambda g: -g["setup_ms"])
        out += [{"label": f"{g['setup_ms']:.3f} ms of set-up in a {g['duration_ms']:.3f} ms gap", "start_ns": g["start_ns"],
                 "end_ns": g["end_ns"], "device": g["device"]} for g in gaps[:3 - len(out)]]
        return out
    if kind == "evidence" and rule.evidence:
        rows = [r for r in tabs.get(rule.evidence["table"], []) if r.get("start_ns") is not None][:3]
        return [{"label": str(r.get("name") or r.get("cause") or "range"), "start_ns": r["start_ns"],
                 "end_ns": r["end_ns"], "device": r.get("device")} for r in rows]
    return []
