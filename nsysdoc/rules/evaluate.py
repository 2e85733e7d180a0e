"""Turn metrics into findings with the rules (and, re-exported from the modules below, load them:
built-in catalogue, team folders, project config).

Loading is :mod:`nsysdoc.rules.config` (the project configuration) and :mod:`nsysdoc.rules.ruleset`
(the rule sets); this module runs the rules over a result: requirements, conditions, impacts (in
the window and per step), severity, the finding's fields, the ranking and the verdict. What the
rules quote beyond the metrics is :mod:`nsysdoc.rules.extras`, what a finding points at
(evidence, where, time ranges) :mod:`nsysdoc.rules.evidence` (issue 51: one concern per module).
The names callers import from here are re-exported.
"""
from __future__ import annotations

import math

from ..severity import WORST_FIRST
from . import policy, text
from .expr import ExprError
from .spec import Rule
# re-exported: the CLI, the pipeline, rules/docs, testing/rule_cases and the tests import these from here
from .config import (CONFIG_NAMES, CONFIG_SCHEMA, Config, Discovery, _distrust, _kind,  # noqa: F401
                     _private_group, _project_rule_dir, _pyproject_is_ours, _regular, _trusted_uid, _uid,
                     _writable_by_others, discover_config, find_config, ignored_warning, load_config)
from .evidence import (DISPATCH_MAX, DISPATCH_WHERE, EXPOSED_RANGES_MAX, VIA_DISPATCH,  # noqa: F401
                       _evidence, _exposed_comm_ranges, _memory_tables, _time_ranges, _where,
                       dispatch_rows, tables)
from .extras import (_FIX_TEXTS, SLIVER_TEXT, TOOL_WORDING, UNEXPLAINED_IDLE_MIN_PCT,  # noqa: F401
                     _capture_fix, _extras, _launch_ratio_note, _no_steps_text, _not_recorded,
                     _pageable_cost_note, _step_candidates, _support_problems, _tool)
from .ruleset import (RuleSet, _distinct_dirs, builtin_rules_dir, check_inside,  # noqa: F401
                      default_ruleset, load_dir, load_rules)

REQUIREMENT_REASONS = {
    "kernels": ("kernel_count", "needs CUDA kernel rows; the capture has none"),
    "gpu_activity": ("gpu_activity", "needs GPU activity (kernels, copies); the capture has none"),
    "cuda_api": ("cuda_api_traced", "needs CUDA API calls (nsys --trace=cuda); none were traced"),
    "nvtx": ("nvtx_traced", "needs NVTX ranges (nsys --trace=nvtx); none were traced"),
    "osrt": ("osrt_traced", "needs OS runtime calls (nsys --trace=osrt); none were traced"),
    "steps": ("has_steps", "needs training steps (NVTX ranges such as ProfilerStep#N, or GPU work that repeats); "
                           "none found"),
    "gpu_metrics": ("gpu_metrics_present", "needs GPU metrics (nsys --gpu-metrics-devices=all); none captured"),
    "memcpy": ("_memcpy_traced", "needs CUDA memcpy rows; the capture has none"),
    "sm_count": ("sm_count", "needs the GPU's SM count (smCount in TARGET_INFO_GPU, numSms in a PyTorch Profiler "
                             "trace's deviceProperties); the capture does not record it"),
    "memory": ("memory_recorded", "needs GPU memory events (torch.profiler profile_memory=True, nsys "
                                  "--cuda-memory-usage=true); the capture has none that could be read"),
}


def _requirement_reason(req: str, result: dict) -> str:
    """Why a rule needing ``req`` is skipped: the tool cannot record it, or it was not traced."""
    n = _not_recorded(result).get(req)  # requirement names are ``traced`` keys where they overlap
    return f"needs {n['what']}; {n['why']}" if n else REQUIREMENT_REASONS[req][1]


def _format(template: str, env: dict) -> str:
    """Fill a message template (``nsysdoc.rules.text``: ``{name:spec}``, ``:time``, ``:bytes``,
    optional ``[[ ... ]]`` parts)."""
    return text.render(template, env)


def _num(x):
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, (int, float)):
        return None if isinstance(x, float) and (math.isnan(x) or math.isinf(x)) else round(float(x), 4)
    return None


def evaluate(rs: RuleSet, result: dict) -> tuple[list[dict], list[dict]]:
    """Findings (ranked by impact) and one status per rule."""
    values = dict(result["metrics"]["values"])
    values.update(_extras(result))
    tabs = tables(result)
    findings, statuses = [], []
    window = result["capture"]["window"]
    for rule in rs.rules:
        status = {"rule": rule.id, "source": rule.source, "replaces_builtin": rule.replaces_builtin}
        if rule.id in rs.disabled:
            statuses.append({**status, "status": "disabled", "reason": "disabled in the project config"})
            continue
        missing = [_requirement_reason(r, result) for r in rule.requires if not values.get(REQUIREMENT_REASONS[r][0])]
        if missing:
            statuses.append({**status, "status": "skipped", "reason": "; ".join(missing)})
            continue
        params = {n: p.default for n, p in rule.params.items()}
        params.update(rs.param_values.get(rule.id, {}))
        env = {**values, **params}
        absent = sorted(n for n in rule.when.names - rule.when.guarded if env.get(n) is None)
        if absent:  # never "passed" on missing data: say what is missing
            statuses.append({**status, "status": "skipped",
                             "reason": "metric(s) not available in this capture: " + ", ".join(absent)})
            continue
        try:
            finding = _evaluate_rule(rule, rs, env, values, tabs, result, window)
        except (ExprError, ArithmeticError, TypeError, ValueError, KeyError, RecursionError, MemoryError) as exc:
            # one broken team rule must not take the report down: it is reported, the rest run
            reason = exc.args[0] if isinstance(exc, ExprError) and exc.args else f"{type(exc).__name__}: {exc}"
            statuses.append({**status, "status": "broken", "reason": f"{rule.path}: {str(reason)[:200]}"})
            continue
        if finding is None:
            statuses.append({**status, "status": "passed", "reason": None})
            continue
        findings.append(finding)
        statuses.append({**status, "status": "fired", "reason": None})
    from .verdict import rank_findings, steady_state_judgeable

    # the one order of the findings list (JSON, page, Markdown, terminal), which the verdict follows
    return rank_findings(findings, steady_state_judgeable(result)), statuses


#: A cost per step is given only when the steps hold at least this share of the cost in the window.
PER_STEP_MIN_SHARE = 0.5


def _steps_share(result: dict) -> float:
    """The share of the window the primary steps cover: per process, the sum of its primary steps'
    durations; their mean over the processes with steps, over the window, at most 1."""
    win = ((result.get("capture") or {}).get("window") or {}).get("duration_ms") or 0
    by: dict = {}
    for s in result.get("steps") or []:
        if s.get("primary") and isinstance(s.get("duration_ms"), (int, float)):
            by[s.get("pid")] = by.get(s.get("pid"), 0.0) + s["duration_ms"]
    if not by or not win:
        return 1.0
    return min(1.0, sum(by.values()) / len(by) / win)


def _evaluate_rule(rule: Rule, rs: RuleSet, env: dict, values: dict, tabs: dict, result: dict, window: dict) -> dict | None:
    """The rule's finding, or None when its condition does not hold. Raises on a broken rule."""
    if not rule.when.evaluate(env):
        return None
    impact = _num(rule.impact_ms.evaluate(env)) if rule.impact_ms else None
    steps_n = values.get("step_count") or 0
    if rule.impact_ms_per_step is not None:
        per_step = _num(rule.impact_ms_per_step.evaluate(env))
    elif "impact_ms_per_step" in rule.raw:  # explicitly null: the cost does not recur per step
        per_step = None
    else:
        # the cost in the window spread evenly over it: the steps' share of it, per step (a
        # window longer than its primary steps -- a trimmed one, a process without steps -- does
        # not put its whole cost in the steps)
        per_step = _num(impact * _steps_share(result) / steps_n) if impact is not None and steps_n else None
    if per_step is not None and impact is not None and steps_n and per_step * steps_n > impact:
        # never more per step than the cost in the window allows (several processes with unequal
        # step counts, or a process without steps beside them)
        per_step = _num(impact / steps_n)
    if per_step is not None and impact and steps_n and per_step * steps_n < PER_STEP_MIN_SHARE * impact:
        # the cost lies mostly outside the steps (before the first, between or after them): a
        # cost per step would say it is small when it is not; it is given in the window
        per_step = None
    win = window.get("duration_ms")
    if rule.impact_pct is not None:
        impact_pct = _num(rule.impact_pct.evaluate(env))
    else:  # impacts are wall-clock time of one GPU (values average over devices)
        impact_pct = _num(impact / win * 100) if impact is not None and win else None
    judgeable = bool(values.get("enough_gpu_work", True)) or rule.scope == "capture" or (
        rule.scope == "host" and bool(values.get("kernel_count")) and (win or 0) >= policy.HOST_JUDGE_MIN_WINDOW_MS)
    severity = _severity(rule, env, rs.forced_severity.get(rule.id), impact_pct, judgeable)
    if values.get("gpu_work_sliver") and not rs.forced_severity.get(rule.id) and not _sliver_exempt(rule):
        severity = "info"  # a sliver of GPU work: nothing but set-up and the capture's own problems is judged
    finding = {
        "rule": rule.id, "severity": severity, "category": rule.category, "title": rule.title,
        "message": _format(rule.message, env).strip(),
        "impact_ms": impact, "impact_ms_per_step": per_step,
        "impact_pct": impact_pct,
        "impact_of": str(rule.raw.get("impact_of") or "analysis window"),
        # "framing": about the capture's framing (one-time set-up), not the steady state
        "phase": rule.phase,
        "evidence": _evidence(rule, tabs, env),
        "verify": _format(rule.verify, env).strip(), "fix": _format(rule.fix, env).strip(),
        "references": list(rule.references),
        "time_ranges": _time_ranges(rule, result, tabs),
        "source": rule.source, "replaces_builtin": rule.replaces_builtin,
    }
    finding["where"], finding["where_note"] = _where(rule, result)
    # issue 48: the median step's time before and after this rule's fix, replayed on its graph
    what_if = (((result.get("metrics") or {}).get("critical_path") or {}).get("what_if") or {}).get(rule.id)
    finding["what_if"] = dict(what_if) if isinstance(what_if, dict) else None
    if rule.id == "gpu-dependency":  # issue 48: what the GPU waited on, from the graph
        dep = ((result.get("metrics") or {}).get("critical_path") or {}).get("dependency")
        finding["dependency"] = dep if isinstance(dep, dict) else None
    return finding


def _sliver_exempt(rule: Rule) -> bool:
    """Rules that keep their severity when the window holds a sliver of GPU work (glossary "What the
    capture can support"): the capture's own problems, set-up (framing) and rules measured over
    the whole capture (``scope: capture``)."""
    return rule.category == "capture" or rule.phase == "framing" or rule.scope == "capture"


def _severity(rule: Rule, env: dict, forced: str | None, impact_pct: float | None, judgeable: bool) -> str:
    """The project config's forced severity, else the rule's: ``by-impact`` (the policy in
    :mod:`nsysdoc.rules.policy`, capped at info when there is too little GPU work to judge), a fixed
    severity, or the first band that holds; then capped at the rule's ``max_severity``."""
    if forced:
        return forced
    if rule.severity == "by-impact":
        sev = policy.by_impact(impact_pct)
        if not judgeable:
            sev = "info"
    elif isinstance(rule.severity, str):
        sev = rule.severity
    else:
        sev = "info"
        for level in WORST_FIRST:
            e = rule.severity.get(level)
            if e is not None and e.evaluate(env):
                sev = level
                break
    return policy.cap(sev, rule.max_severity)


def apply_rules(result: dict, rs: RuleSet) -> dict:
    """Fill ``result["findings"]`` and ``result["rules"]``; returns the result."""
    from .verdict import verdict

    findings, statuses = evaluate(rs, result)
    result["findings"] = findings
    _what_if_all(result, findings)
    result["rules"] = statuses
    result["verdict"] = verdict(result)
    return result


def _what_if_all(result: dict, findings: list[dict]) -> None:
    """Issue 48: ``metrics.critical_path.what_if_all``, the fixes of the findings at warning or above
    that have a what-if, replayed together on the median step's graph (not a sum)."""
    cp = (result.get("metrics") or {}).get("critical_path")
    if not isinstance(cp, dict) or not cp.get("what_if"):
        return
    from ..metrics.what_if import combined

    ids = [f["rule"] for f in findings if f.get("what_if") and f.get("severity") in ("warning", "critical")
           and (f["what_if"].get("saved_ms_per_step") or 0) > 0]
    both = combined(cp, ids)
    if both is not None:
        cp["what_if_all"] = both


__all__ = ["RuleSet", "Config", "load_rules", "load_config", "find_config", "evaluate", "apply_rules",
           "builtin_rules_dir", "tables", "default_ruleset"]
