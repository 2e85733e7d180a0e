"""The job view over per-rank summaries: ranks table, clock offsets, straggler, roll-up, verdict.

Pure functions over the summaries of :mod:`nsysdoc.jobs.summary` (definitions in the glossary's
"Multi-rank jobs" section and ``docs/job.md``):

* **Join time** of a rank in a collective: its NCCL kernel's start on the reference clock (the
  kernel starts when the rank reaches the collective and spins until the others arrive). **Wait**
  of a rank in a collective = the last join − its join.
* **Straggler**: the rank that joins last in at least ``STRAGGLER_LATE_PCT`` % of the matched
  collectives, when the others' mean wait caused by it is at least ``STRAGGLER_WAIT_PCT`` % of the
  median job step (with steps) or of the window (without): a rank that is last by noise is not one.
  ``wait_ms_per_step`` = the other ranks' mean of their summed waits in the collectives where the
  straggler was last ÷ the number of steps (median over ranks). **Cause** = the step breakdown part
  (communication excluded: waiting shows there on the others) where the straggler exceeds the
  median of the other ranks the most, per step.
* **Roll-up**: a finding firing on k of N ranks is one row with the rank list, its highest
  severity and the median of its impact over those k ranks.
* **Severity** of the straggler: the rules' policy (``nsysdoc.rules.policy.by_impact``) of its
  ``wait_pct_of_step``: warning from 3% (where a straggler is named), critical from 15%.
* **Job verdict** (:func:`job_verdict`, the one sentence every view shows): the straggler first,
  then the most costly finding at warning or above on at least half the ranks (its median
  ``impact_pct``; for exposed NCCL, minus the straggler's wait, which it contains), then, when the
  ranks hold one step each, that the per-step numbers rest on it. ``straggler``, else
  ``communication`` (exposed NCCL) or ``shared`` (another finding), else ``balanced``.
"""
from __future__ import annotations

import numpy as np

from ..version import __version__
from ..compare import BREAKDOWN_LABELS
from ..rules.policy import WARNING_PCT, by_impact
from .align import _step_of, aligned, clock_offsets, match_collectives, nearest

JOB_CONTRACT = 1
STRAGGLER_LATE_PCT = 50.0
#: a straggler is named from the policy's warning share (its severity is ``by_impact`` of its cost),
#: so a named straggler is always at warning or critical
STRAGGLER_WAIT_PCT = WARNING_PCT
MIN_COLLECTIVES = 3
#: session starts (on the aligned wall clock) farther apart than this are not one job's captures
MAX_SESSION_SPREAD_S = 3600.0
from ..severity import SEVERITY_RANK  # noqa: E402
COMM_RULES = ("nccl-exposed",)
#: how a straggler's cause reads in a sentence ("it is late because of ...")
CAUSE_PHRASES = {
    "compute": "more compute", "copy": "more copies", "idle_sync": "host synchronisation",
    "idle_input": "waiting for input data", "idle_alloc": "memory allocation", "idle_setup": "one-time set-up",
    "idle_launch": "launch overhead", "idle_api": "other CUDA API calls", "idle_host": "host CPU work",
    "idle_dependency": "GPU-side dependencies", "idle_tail": "idle time after its last GPU operation",
    "idle_unattributed": "unattributed idle time",
}


def _num(x, digits: int = 4):
    if x is None:
        return None
    x = float(x)
    return round(x, digits) if np.isfinite(x) else None


def _median(xs):
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else None


def steps_per_rank(ok: list[dict]) -> float | None:
    """The median over the ranks with steps of their step count: what per-step waits are divided by."""
    return _median([len(s["steps"]) for s in ok if s.get("steps")])


def _straggler(ok: list[dict], m: dict, job_step_ms: float | None, window_ms: float | None,
               steps_n: float | None) -> tuple[dict | None, dict]:
    J = m["join_ns"]
    C, R = J.shape
    stats = {"matched_collectives": int(C), "last_count": [0] * R, "wait_ms_total": [0.0] * R}
    if C == 0:
        return None, stats
    last = np.argmax(J, axis=1)
    wait = J.max(axis=1, keepdims=True) - J  # (C, R) ns
    counts = np.bincount(last, minlength=R)
    stats["last_count"] = [int(c) for c in counts]
    stats["wait_ms_total"] = [float(w) / 1e6 for w in wait.sum(axis=0)]
    top = int(np.argmax(counts))
    late_pct = counts[top] / C * 100
    others = [r for r in range(R) if r != top]
    rows = last == top
    caused_ms = float(wait[rows][:, others].sum() / 1e6 / max(len(others), 1)) if others else 0.0
    per_coll = caused_ms / int(counts[top])
    per_step = caused_ms / steps_n if steps_n else None
    per_s = caused_ms / (window_ms / 1000) if window_ms else None
    few = C < MIN_COLLECTIVES
    if per_step is not None and job_step_ms:
        basis, ref = "step", per_step / job_step_ms * 100
    elif few and C >= 2:
        # a short capture with 2 collectives and no steps: the window says little (it holds set-up
        # and tails); the interval between the collectives stands for the step
        interval_ms = float(np.mean(np.diff(J.max(axis=1)))) / 1e6
        basis, ref = "collective interval", (per_coll / interval_ms * 100 if interval_ms > 0 else None)
    else:
        basis, ref = "window", (per_s / 10 if per_s is not None else None)  # ms per s -> % of the window
    stats["straggler_candidate"] = {"rank": ok[top]["rank"], "late_pct": _num(late_pct, 2),
                                    "wait_ms_per_step": _num(per_step), "wait_ms_per_collective": _num(per_coll),
                                    "wait_pct": _num(ref, 2), "basis": basis}
    # with 3 or more collectives, last in at least half of them; with 2, last in both; 1 says nothing
    late_enough = late_pct >= STRAGGLER_LATE_PCT if not few else (C >= 2 and counts[top] == C)
    if not late_enough or ref is None or ref < STRAGGLER_WAIT_PCT:
        return None, stats
    cause, excess = None, None
    mine = ok[top].get("breakdown_ms_per_step")
    if mine:
        best = None
        for part in BREAKDOWN_LABELS:
            if part == "exposed_comm":
                continue
            med = _median([(s.get("breakdown_ms_per_step") or {}).get(part) for i, s in enumerate(ok) if i != top])
            d = (mine.get(part) or 0) - (med or 0)
            if best is None or d > best[1]:
                best = (part, d)
        if best and best[1] > 0:
            cause, excess = best
    else:  # no steps: the device split, % of the window -> ms per second
        shares = {"compute": "compute_pct", "copy": "copy_only_pct"}
        best = None
        for part in BREAKDOWN_LABELS:
            if part == "exposed_comm":
                continue
            key = shares.get(part)

            def val(s, part=part, key=key):
                return s.get(key) if key else (s.get("idle_pct_by_cause") or {}).get(part.replace("idle_", ""))
            med = _median([val(s) for i, s in enumerate(ok) if i != top])
            d = ((val(ok[top]) or 0) - (med or 0)) * 10  # % of window -> ms per second
            if best is None or d > best[1]:
                best = (part, d)
        if best and best[1] > 0:
            cause, excess = best
    return {"rank": ok[top]["rank"], "severity": by_impact(ref),
            "late_pct": _num(late_pct, 2), "last_count": int(counts[top]),
            "matched_collectives": int(C), "wait_ms_per_step": _num(per_step), "wait_ms_per_s": _num(per_s),
            "wait_ms_per_collective": _num(per_coll), "wait_pct_of_step": _num(ref), "basis": basis,
            "cause": cause, "cause_label": BREAKDOWN_LABELS.get(cause) if cause else None,
            "cause_excess_ms_per_step": _num(excess) if mine else None,
            "cause_excess_ms_per_s": None if mine else _num(excess)}, stats


def _rollup(ok: list[dict]) -> list[dict]:
    by: dict[str, dict] = {}
    shared = ok and all(s.get("shared_capture") for s in ok)
    for s in ok:
        for f in s.get("findings") or []:
            g = by.setdefault(f["rule"], {"rule": f["rule"], "title": f.get("title"), "severity": f.get("severity"),
                                          "ranks": [], "impacts": [], "pcts": []})
            g["ranks"].append(s["rank"])
            if SEVERITY_RANK.get(f.get("severity"), -1) > SEVERITY_RANK.get(g["severity"], -1):
                g["severity"] = f.get("severity")
            g["impacts"].append(f.get("impact_ms_per_step"))
            g["pcts"].append(f.get("impact_pct"))
    out = []
    for g in by.values():
        out.append({"rule": g["rule"], "title": g["title"], "severity": g["severity"],
                    "ranks": sorted(g["ranks"]), "rank_count": len(g["ranks"]),
                    "impact_ms_per_step_median": _num(_median(g["impacts"])),
                    "impact_pct_median": _num(_median(g["pcts"]), 2),
                    "scope": "capture" if shared else "rank"})
    out.sort(key=lambda f: (-SEVERITY_RANK.get(f["severity"], -1), -f["rank_count"],
                            -(f["impact_pct_median"] or 0), f["rule"]))
    return out


#: the shared bottleneck's lead, alone or after a straggler
SHARED_LEADS = {
    ("communication", False): "Limited by communication itself, not by a late rank",
    ("communication", True): "Beyond the wait for rank {rank}, communication is exposed too",
    ("shared", False): "{who} limited by the same thing",
    ("shared", True): "{who} also limited by the same thing",
}
ONE_STEP_NOTE = ("Only 1 step per rank was captured: per-step numbers rest on that one step; capture at least "
                 "3–5 steps after warm-up.")


def job_verdict(straggler: dict | None, findings: list[dict], job_step_ms: float | None, n_ranks: int,
                steps_n: float | None = None) -> dict:
    """The job verdict, the one every view shows (terminal, Markdown, page, ``Job.verdict``, JSON).

    * A straggler (always at warning or critical: it is named from ``WARNING_PCT`` of the step)
      comes first: who, how long the others wait per step and its share, why it is late.
    * The most costly finding at warning or above on at least half of the ranks follows (exposed
      NCCL counts only its part beyond the straggler's wait, which it contains; when that part is
      below ``WARNING_PCT`` it is the wait, which ``detail`` says, and the next finding follows).
    * ``steps_n`` (median steps per rank) of 1 adds that every per-step number rests on one step.

    ``status``: ``straggler``, else ``communication`` (exposed NCCL) or ``shared`` (another
    finding), else ``balanced``; ``headline``: ``straggler``, the leading rule id or ``balanced``;
    ``severity`` of what leads; ``rank`` of the straggler, ``rule`` of the shared finding."""
    s = straggler

    def cost(f):  # exposed communication is partly the straggler's wait: only the rest is its own
        pct = f["impact_pct_median"] or 0
        if s and f["rule"] in COMM_RULES:
            pct -= s["wait_pct_of_step"] or 0
        return pct
    serious = [f for f in findings if SEVERITY_RANK.get(f["severity"], -1) >= 1 and f["rank_count"] * 2 >= n_ranks
               and not (s and f["rule"] in COMM_RULES and cost(f) < WARNING_PCT)]
    top = max(serious, key=lambda f: (cost(f), f["rank_count"])) if serious else None
    parts, detail = [], ""
    out: dict = {"status": "balanced", "headline": "balanced", "severity": None}
    if s:
        if s["wait_ms_per_step"] is not None and job_step_ms:
            per = f"{s['wait_ms_per_step']:.2f} ms per step ({s['wait_pct_of_step']:.1f}% of the {job_step_ms:.2f} ms step)"
        elif s.get("wait_ms_per_s") is not None:
            per = f"{s['wait_ms_per_s']:.1f} ms per second"
        else:
            per = f"{s['wait_ms_per_collective']:.2f} ms each time it is last"
        why = ""
        if s["cause"]:
            amount = s["cause_excess_ms_per_step"] if s["cause_excess_ms_per_step"] is not None else s["cause_excess_ms_per_s"]
            unit = "ms per step" if s["cause_excess_ms_per_step"] is not None else "ms per second"
            why = (f" It is late because of {CAUSE_PHRASES.get(s['cause'], s['cause_label'])}: {amount:.2f} {unit} "
                   f"more than the median of the other ranks.")
        lead = "Limited by a straggler" if s["severity"] == "critical" else "A straggler"
        parts.append(f"{lead}: rank {s['rank']} joins last in {s['late_pct']:.0f}% of {s['matched_collectives']} "
                     f"matched collectives, and the other ranks wait {per} for it.{why}{what_if_sentence(s)}")
        out.update(status="straggler", headline="straggler", severity=s["severity"], rank=s["rank"])
        wait = s["wait_ms_per_step"]
        comm = next((f for f in findings if f["rule"] in COMM_RULES), None)
        said = ""
        if comm and comm["impact_ms_per_step_median"] is not None:
            how = ("is mostly this wait" if wait is None or wait * 2 >= comm["impact_ms_per_step_median"] else
                   f"includes this wait ({wait:.2f} ms per step)")
            said = (f"The exposed communication the other ranks report ({comm['rule']}, median "
                    f"{comm['impact_ms_per_step_median']:.2f} ms per step) {how}")
        # the straggler leads the sentence even when the shared finding costs more: then fixing it
        # first is not the larger gain, and the detail says so (in ms per step when both have it)
        own = top["impact_ms_per_step_median"] if top is not None else None
        if own is not None and wait is not None:
            own -= wait if top["rule"] in COMM_RULES else 0
            more, than = own > wait, f"{own:.2f} ms against {wait:.2f} ms"
        else:
            more = top is not None and cost(top) > (s["wait_pct_of_step"] or 0)
            than = f"{cost(top):.1f}% against {s['wait_pct_of_step'] or 0:.1f}%" if top is not None else ""
        if more:
            detail = (f"{said}. " if said else "") + f"The {top['rule']} finding costs more per step than that wait ({than})."
        elif said:
            detail = f"{said}: fix rank {s['rank']} first."
    if top is not None:
        f = top
        status = "communication" if f["rule"] in COMM_RULES else "shared"
        who = "Every rank is" if f["rank_count"] >= n_ranks else f"{f['rank_count']} of {n_ranks} ranks are"
        lead = SHARED_LEADS[(status, s is not None)].format(who=who, rank=s["rank"] if s else None)
        imp = f", median {f['impact_ms_per_step_median']:.2f} ms per step" if f["impact_ms_per_step_median"] is not None else ""
        if imp and s and status == "communication":
            imp += ", the wait included"
        parts.append(f"{lead}: {f['title'] or f['rule']} ({f['severity']}, on {f['rank_count']} of {n_ranks} "
                     f"ranks{imp}).")
        out["rule"] = f["rule"]
        if not s:
            out.update(status=status, headline=f["rule"], severity=f["severity"])
    if not parts:
        parts.append("No straggler and no bottleneck shared by most ranks at warning or above.")
    if steps_n == 1:
        parts.append(ONE_STEP_NOTE)
    whole = steps_n is not None and float(steps_n).is_integer()
    out.update(sentence=" ".join(parts), detail=detail, steps_per_rank=int(steps_n) if whole else _num(steps_n, 1))
    return out


def what_if_sentence(s: dict) -> str:
    """" At the other ranks' median speed …" (issue 48): what the straggler's what-if buys, or ""."""
    w = s.get("what_if") or {}
    if w.get("basis") == "step" and w.get("step_ms_before") is not None:
        return (f" At the other ranks' median speed before each collective, rank {s['rank']} would take the "
                f"median job step from {w['step_ms_before']:.2f} to {w['step_ms_after']:.2f} ms.")
    if w.get("basis") == "window" and w.get("saved_ms_per_s") is not None:
        return (f" At the other ranks' median speed before each collective, rank {s['rank']} would save "
                f"{w['saved_ms_per_s']:.1f} ms per second between the first and last matched collectives.")
    return ""


def comparability(ok: list[dict], clock: dict, one_clock: bool) -> list[str]:
    """Can these captures be one job? Raises InputError when they cannot: session starts more than
    an hour apart on the aligned wall clock, or different GPU models with no collective kernel that
    every rank runs. Returns warnings for what is only doubtful (docs/job.md, "One job?")."""
    from ..errors import InputError

    if one_clock or len(ok) < 2:
        return []
    names = {s["rank"]: s for s in ok}
    if clock.get("use_utc"):
        starts = {s["rank"]: int(s["session_start_utc_ns"]) - clock["offsets_ns"][i] for i, s in enumerate(ok)}
        first, last = min(starts, key=starts.get), max(starts, key=starts.get)
        spread = (starts[last] - starts[first]) / 1e9
        if spread > MAX_SESSION_SPREAD_S:
            raise InputError(
                f"these captures are not one job: rank {last}'s session ({_base(names[last])}) started "
                f"{_duration(spread)} after rank {first}'s ({_base(names[first])})",
                hint="pass the per-rank captures of one run (one folder per run)")
    shared = clock.get("method") in ("collective ends",)
    models = {s["rank"]: tuple(s.get("gpu_models") or ()) for s in ok}
    kinds = {m for m in models.values() if m}
    if not shared and len(kinds) > 1:
        by = {}
        for r, m in models.items():
            if m:
                by.setdefault(m, r)
        ex = "; ".join(f"rank {r}: {', '.join(m)}" for m, r in list(by.items())[:3])
        raise InputError(f"these captures are not one job: different GPU models ({ex}) and no collective kernel "
                         f"that every rank runs", hint="pass the per-rank captures of one run (one folder per run)")
    if len(kinds) > 1:
        return [f"the ranks run on different GPU models ({'; '.join(', '.join(k) for k in sorted(kinds)[:3])}): "
                f"compare their times with care"]
    return []


def _duration(s: float) -> str:
    return f"{s / 86400:.1f} days" if s >= 2 * 86400 else f"{s / 3600:.1f} hours"


def _base(s: dict) -> str:
    from pathlib import Path

    return Path(str(s.get("file"))).name


def analyze_job(summaries: list[dict], rank_source: str, one_clock: bool) -> dict:
    """The job result (``docs/job.md``) from rank summaries that carry their ``rank``."""
    ok = sorted([s for s in summaries if s.get("ok")], key=lambda s: s["rank"])
    failed = [{"rank": s.get("rank"), "file": s.get("file"), "error": s.get("error")} for s in summaries
              if not s.get("ok")]
    warnings = [f"rank {f['rank']} ({f['file']}) could not be read: {f['error']}" for f in failed]
    clock = clock_offsets(ok, one_clock)
    warnings += clock["warnings"]
    warnings += comparability(ok, clock, one_clock)
    matched = match_collectives(ok, clock) if clock["method"] in ("collective ends", "same capture") and len(ok) > 1 \
        else {"join_ns": np.zeros((0, len(ok)), dtype=np.int64), "local_start_ns": np.zeros((0, len(ok)), dtype=np.int64),
              "name_of": []}
    inferred = [s["rank"] for s in ok if s.get("step_source") == "inferred" and s.get("steps")]
    if inferred:
        how = ("matched with the reference rank's steps by their start on the aligned clock"
               if _match_inferred_steps(ok, clock) else
               "matched by order (step k with step k), which assumes the captures start at the same iteration")
        warnings.append(f"the steps of rank(s) {', '.join(map(str, inferred[:10]))}{' …' if len(inferred) > 10 else ''} "
                        f"were inferred from their repeating GPU work (no step markers): step times are estimates, "
                        f"{how}")
    job_steps = _job_step_times(ok)
    job_step_ms = float(np.median(job_steps)) if len(job_steps) else None
    window_ms = _median([s.get("window_ms") for s in ok])
    steps_n = steps_per_rank(ok)
    straggler, stats = _straggler(ok, matched, job_step_ms, window_ms, steps_n)
    _add_what_if(ok, matched, clock, straggler, stats.get("straggler_candidate"))
    if len(ok) > 1 and stats["matched_collectives"] == 0 and clock["method"] != "session start":
        warnings.append("no collective matched on every rank: no straggler can be named")
    findings = _rollup(ok)
    heat = _heatmap(ok, matched)
    ranks = []
    for i, s in enumerate(ok):
        w = stats["wait_ms_total"][i] if stats["wait_ms_total"] else 0.0
        ranks.append({
            "rank": s["rank"], "file": s["file"], "pids": s.get("pids"), "devices": s.get("devices"),
            "gpu_models": s.get("gpu_models"), "ok": True,
            "error": None, "steps": len(s.get("steps") or []), "step_source": s.get("step_source"),
            "step_time_ms_median": s.get("step_time_ms_median"),
            "gpu_busy_pct": s.get("gpu_busy_pct"), "compute_pct": s.get("compute_pct"),
            "exposed_comm_pct": s.get("exposed_comm_pct"), "copy_only_pct": s.get("copy_only_pct"),
            "idle_pct_by_cause": s.get("idle_pct_by_cause"), "breakdown_ms_per_step": s.get("breakdown_ms_per_step"),
            "timestamps": s.get("timestamps"),
            "clock_offset_ms": _num(clock["offsets_ns"][i] / 1e6),
            "clock_mad_us": clock["mad_us"][i],
            "last_count": stats["last_count"][i] if stats["last_count"] else 0,
            "wait_ms_per_step": _num(w / len(s["steps"])) if s.get("steps") and stats["matched_collectives"] else None,
            "findings": [f["rule"] for f in s.get("findings") or []],
            "verdict": (s.get("verdict") or {}).get("headline"),
            "kernel_count": s.get("kernel_count"),
            "report": s.get("report"),
        })
    for f in failed:
        ranks.append({"rank": f["rank"], "file": f["file"], "ok": False, "error": f["error"]})
    ranks.sort(key=lambda r: (r["rank"] is None, r["rank"]))
    return {
        "nsysdoc_version": __version__, "kind": "job", "contract": JOB_CONTRACT,
        "rank_source": rank_source, "rank_count": len(ok), "failed_count": len(failed),
        "ranks": ranks,
        "clock": {"method": clock["method"], "reference_rank": ok[0]["rank"] if ok else None,
                  "collective": clock["name"], "session_start_used": clock["use_utc"],
                  "timestamps": _timestamps(ok)},
        "step_time_ms_median": _num(job_step_ms), "job_steps": int(len(job_steps)),
        "collectives": {"matched": stats["matched_collectives"], "names": sorted(set(matched["name_of"]))},
        "straggler": straggler,
        "straggler_candidate": stats.get("straggler_candidate"),
        "findings": findings,
        "verdict": job_verdict(straggler, findings, job_step_ms, len(ok), steps_n),
        "heatmap": heat,
        "warnings": warnings,
    }


def _add_what_if(ok: list[dict], matched: dict, clock: dict, straggler: dict | None, candidate: dict | None) -> None:
    """``what_if`` (issue 48, :mod:`nsysdoc.jobs.what_if`) on the straggler and on the candidate."""
    from .what_if import straggler_what_if

    for s in (straggler, candidate):
        if s is not None:
            who = next((i for i, x in enumerate(ok) if x["rank"] == s["rank"]), None)
            s["what_if"] = straggler_what_if(ok, matched, clock, who) if who is not None else None


def _timestamps(ok: list[dict]) -> str | None:
    """How the ranks' files counted their times: "session", "absolute" or "mixed" (each rank is
    put on the wall clock by its own kind: the loader rebases absolute times on the session start)."""
    kinds = {s.get("timestamps") for s in ok if s.get("timestamps")}
    return None if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"


def _match_inferred_steps(ok: list[dict], clock: dict) -> bool:
    """Give each inferred step of a rank the index of the reference rank's step (``ok[0]``) whose
    start is nearest on the aligned clock, when within half the reference's median step time;
    steps with no such partner get index None (left out of the per-step views). Inferred steps
    are numbered from 0 in each capture, so two ranks' step k may be different iterations. Returns
    False (indices unchanged) when the reference has no steps or the ranks share no clock."""
    if len(ok) < 2 or not ok[0].get("steps") or clock.get("method") == "none":
        return False
    use_utc = bool(clock.get("use_utc"))
    ref_base = int(ok[0].get("session_start_utc_ns") or 0) if use_utc else 0
    ref = ok[0]["steps"]
    ref_start = aligned(ok[0], [st["start_ns"] for st in ref], clock["offsets_ns"][0], ref_base, use_utc)
    ref_index = np.array([st["index"] for st in ref])
    order = np.argsort(ref_start, kind="stable")
    ref_start, ref_index = ref_start[order], ref_index[order]
    tol = float(np.median([st["step_time_ms"] for st in ref])) * 1e6 / 2
    for i, s in enumerate(ok[1:], start=1):
        steps = s.get("steps") or []
        if s.get("step_source") != "inferred" or not steps:
            continue
        t = aligned(s, [st["start_ns"] for st in steps], clock["offsets_ns"][i], ref_base, use_utc)
        pick = nearest(ref_start, t)
        near = np.abs(ref_start[pick] - t) <= tol
        taken: set = set()
        for st, k, ok_ in zip(steps, ref_index[pick].tolist(), near.tolist()):
            st["index"] = int(k) if ok_ and k not in taken else None
            if st["index"] is not None:
                taken.add(st["index"])
    return True


def _job_step_times(ok: list[dict]) -> np.ndarray:
    """Per step index, the longest rank's step (a synchronous step ends with its slowest rank)."""
    by: dict[int, float] = {}
    for s in ok:
        for st in s.get("steps") or []:
            if st["index"] is not None:
                by[st["index"]] = max(by.get(st["index"], 0.0), float(st["step_time_ms"]))
    return np.array([by[k] for k in sorted(by)], dtype=float)


def _heatmap(ok: list[dict], m: dict) -> dict:
    """Rank x step matrices: step time and wait in collectives (ms), None where a rank lacks the step."""
    index = sorted({st["index"] for s in ok for st in s.get("steps") or [] if st["index"] is not None})
    pos = {k: i for i, k in enumerate(index)}
    st_ms = [[None] * len(index) for _ in ok]
    wait = [[None] * len(index) for _ in ok]
    J, L = m["join_ns"], m["local_start_ns"]
    W = (J.max(axis=1, keepdims=True) - J) if len(J) else J
    for r, s in enumerate(ok):
        steps = s.get("steps") or []
        for st in steps:
            if st["index"] is None:
                continue
            st_ms[r][pos[st["index"]]] = st["step_time_ms"]
            wait[r][pos[st["index"]]] = 0.0 if len(J) else None
        if len(J) and steps:
            where = _step_of(steps, L[:, r])
            for c in np.flatnonzero(where >= 0):
                if steps[where[c]]["index"] is None:
                    continue
                k = pos[steps[where[c]]["index"]]
                wait[r][k] = (wait[r][k] or 0.0) + float(W[c, r]) / 1e6
    rnd = lambda v: None if v is None else round(v, 4)  # noqa: E731
    return {"ranks": [s["rank"] for s in ok], "steps": index,
            "step_time_ms": [[rnd(v) for v in row] for row in st_ms],
            "wait_ms": [[rnd(v) for v in row] for row in wait]}
