"""The ``capture`` section: what was recorded, the analysis window, whether there is enough GPU
work to judge (thresholds in :mod:`nsysdoc.metrics.window`), steps and what the capture lacks."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..metrics import capture as capture_m
from ..metrics import capture_checks as checks_m
from ..trace import schema as S
from ..metrics.window import MIN_GPU_BUSY_MS, MIN_GPU_OPS, MIN_WINDOW_MS
from .numbers import _mean, _num
from .sections import _active, _framing, _setup_ms

if TYPE_CHECKING:  # pragma: no cover
    from .inputs import Inputs


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


def _capture(a: Inputs, judgeable: bool, why_not: str | None, extent: tuple[int, int] | None) -> dict:
    t = a.trace
    w0, w1 = a.steps.window_start_ns, a.steps.window_end_ns
    notes = []
    if not t.has_gpu_activity:
        notes.append("no GPU activity: the capture has no kernel, memcpy or memset rows")
    inferred = _steps_inferred(a.steps)
    aside = _set_aside(a.steps)
    if aside:
        notes.append(aside["description"])
    low = getattr(a.steps, "low_share", None)
    if low:
        notes.append(f"the step markers matching --step-marker hold only {low['gpu_work_pct']:.1f}% of the GPU work "
                     "launched from the first to the last of them; they are used as given")
    if a.steps.source is None:
        why = "; ".join(f"process {r['pid']}: {r['reason']}" if r.get("pid") is not None else r["reason"]
                        for r in a.steps.not_inferred or [])
        notes.append("no step markers found (NVTX ranges matching the step pattern)" +
                     (" and no steps inferred from the repeating GPU work (" + why + ")" if why else "") +
                     "; the analysis window is the steady-state part of the GPU span (first to last GPU operation), "
                     "and costs are given in the window, not per step")
    elif inferred:
        notes.append("no step markers found (NVTX ranges matching the step pattern): " + inferred["description"])
    elif a.steps.found_by == "name":
        names = sorted({S.fold_nvtx_text(str(x)) for x in np.asarray(a.steps.primary["name"], dtype=object)})
        notes.append("no range matches the step pattern; the steps are the repeating ranges named like steps: " +
                     ", ".join(repr(n) for n in names[:3]) + (" …" if len(names) > 3 else "") +
                     " (--step-marker REGEX chooses others)")
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
    kind = "steps" if a.steps.source == "markers" else ("steady-state" if a.excluded else "gpu-span")
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
        "has_step_markers": a.steps.source == "markers",
        # where the steps come from: "markers", "inferred" (from the repeating GPU work) or None
        "step_source": a.steps.source,
        "steps_inferred": inferred,
        # step markers set aside because they hold too little of the GPU work, else null
        "steps_set_aside": aside,
        # how marked steps were found: "pattern" (the step pattern) or "name" (step-like ranges)
        "steps_found_by": a.steps.found_by if a.steps.source == "markers" else None,
        # without steps: why none were inferred, per process
        "steps_not_inferred": list(a.steps.not_inferred or []) if a.steps.source is None else [],
        "step_pattern": a.step_pattern,
        "gpu_activity": t.has_gpu_activity,
        "profiler_overhead_pct": _num(capture_m.overhead_pct(t.overhead, w0, w1)),
        "diagnostics": capture_m.diagnostics_table(t.diagnostics),
        "nsys_notes": capture_m.nsys_notes(t.diagnostics),
        "process_messages": t.process_messages,
        "warnings": notes,
        "device_count": int(len(t.devices)),
        "process_count": int(len(t.processes)),
        **_capture_checks(a, extent),
    }


def _set_aside(steps) -> dict | None:
    """``capture.steps_set_aside``: the step markers not used because the GPU work launched inside
    them is under half of the capture's (``nsysdoc.engine.plan.MARKER_MIN_GPU_SHARE``)."""
    x = getattr(steps, "set_aside", None)
    if not x:
        return None
    names = ", ".join(repr(n) for n in x["names"])
    return {**x, "description": (
        f"the {x['count']:,} step marker(s) ({names}) cover {x['duration_ms']:,.3f} ms and hold only "
        f"{x['gpu_work_pct']:.1f}% of the GPU work launched from the first to the last of them, so they do not "
        "frame the GPU work and were set aside: the capture is read as one without step markers "
        "(--step-marker REGEX uses them anyway)")}


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
        where = "" if len(info["processes"]) == 1 else (
            f"in process {ps[0]['pid']}, " if len(ps) == 1 else f"in each of processes {', '.join(str(p['pid']) for p in ps)}, ")
        if ps[0].get("one_step"):
            parts.append(f"{where}the GPU work does not repeat in smaller units, but it runs forward, backward "
                         f"and optimizer kernels once ({period:,} operations on the launching thread): the capture "
                         "holds one training step")
            continue
        unit = ("" if unit_kind == "training step" else
                "; it runs no optimizer or backward kernel, so it may be one model layer or block rather than a "
                "whole training step")
        steps = "/".join(f"{p['steps']:,}" for p in ps)
        cold = (" (a first, cold unit more than 3x as long as the others is left out)"
                if any(p.get("cold_first_unit") for p in ps) else "")
        match = min(p["match_pct"] for p in ps)
        gap = float(np.median([p["anchor_gap_ms"] for p in ps]))
        cover = min(p["ops_covered_pct"] for p in ps)
        parts.append(f"{where}the GPU work launched by the main thread repeats every {period:,} operations "
                     f"({match:.0f}% of positions match one period later); {steps} steps were inferred, each "
                     f"starting at a launch of {anchor[:80]} (of the operations launched once per unit, the "
                     f"one after the longest host pause: median {gap:,.2f} ms), "
                     f"covering {cover:.0f}%{' or more' if len(ps) > 1 else ''} of that thread's GPU operations"
                     f"{cold}{unit}")
    return {**info, "description": "steps were inferred from the repeating GPU work: " + "; ".join(parts) +
            ". Mark steps with NVTX ranges (ProfilerStep#N) to time them exactly."}


def _capture_checks(a: Inputs, extent: tuple[int, int] | None) -> dict:
    """``capture.unrecorded_gpu_work`` and ``capture.host_outside_window``: what the capture can
    support (:mod:`nsysdoc.metrics.capture_checks`; glossary "What the capture can support")."""
    from ..engine.data import GPU_KINDS, blocking_of

    t = a.trace
    w0, w1 = a.steps.window_start_ns, a.steps.window_end_ns
    out: dict = {"unrecorded_gpu_work": [], "host_outside_window": None}
    rt = t.store.get("runtime")
    if w0 is None or w1 is None or rt is None or not len(rt):
        return out

    def ops_starting(lo, hi) -> dict:
        parts = [tab.rows_starting_in(lo, hi, ["start_ns", "end_ns", "proc"])
                 for _, name in GPU_KINDS if (tab := t.store.get(name)) is not None and len(tab)]
        return {c: np.concatenate([p[c] for p in parts]).astype(np.int64) if parts else np.zeros(0, np.int64)
                for c in ("start_ns", "end_ns", "proc")}

    # blocking calls that start in the window and outlast the recorded GPU work of their process:
    # the candidates (blocking, longer than the minimum) kept block by block, so that a capture of
    # millions of calls never holds the window's whole runtime table at once
    pageable = np.asarray(t.derived.get("pageable_async_api", np.zeros(0, np.int64)))
    cols = ["start_ns", "end_ns", "api_kind", "name_id", "pos", "proc"]
    parts = []
    for i in rt.blocks_where(start_lo=w0, start_hi=w1):
        d = rt.read_block(i, cols)
        st, en = d["start_ns"].astype(np.int64), d["end_ns"].astype(np.int64)
        m = (st >= w0) & (st < w1) & (en - st > checks_m.UNRECORDED_MIN_NS)
        if m.any():
            d = {k: np.asarray(v)[m] for k, v in d.items()}
            keep = blocking_of(d, pageable)
            if keep.any():
                parts.append({k: v[keep] for k, v in d.items()})
    rows = {k: np.concatenate([p[k] for p in parts]) for k in cols} if parts else None
    if rows is not None and len(rows["start_ns"]):
        s, e = rows["start_ns"].astype(np.int64), rows["end_ns"].astype(np.int64)
        cand = np.arange(len(s))
        if len(cand):
            # the GPU operations up to the last candidate's end that are still running when the
            # window opens (one launched just before it may be what a call in it waits for),
            # block by block (a table of millions of operations is never held whole)
            last = None
            hi = int(e[cand].max())
            cp = rows["proc"][cand]
            for _, name in GPU_KINDS:
                tab = t.store.get(name)
                if tab is None or not len(tab):
                    continue
                for i in tab.blocks_where(start_hi=hi, end_gt=w0):
                    d = tab.read_block(i, ["start_ns", "end_ns", "proc"])
                    m = (d["end_ns"] > w0) & (d["start_ns"] < hi)
                    last = checks_m.last_op_end_before(e[cand], cp, np.asarray(d["start_ns"])[m],
                                                       np.asarray(d["end_ns"])[m], np.asarray(d["proc"])[m], last)
            if last is None:
                last = np.full(len(cand), checks_m.NO_OP, np.int64)
            hit = checks_m.unrecorded_after_blocking(s[cand], e[cand], cp, last_op_end=last)
            pick = cand[hit["index"]]
            order = np.argsort(-hit["uncovered_ns"], kind="stable")
            names = t.strings.lookup(np.asarray(rows["name_id"][pick], dtype=np.int64)) if len(pick) else []
            pids = np.asarray(t.processes["pid"])
            for k in order:
                i = pick[k]
                out["unrecorded_gpu_work"].append({
                    "call": S.strip_api_suffix(str(names[k])), "start_ns": int(s[i]), "end_ns": int(e[i]),
                    "duration_ms": _num((e[i] - s[i]) / 1e6), "covered_ms": _num(hit["covered_ns"][k] / 1e6),
                    "uncovered_ms": _num(hit["uncovered_ns"][k] / 1e6),
                    "pid": int(pids[rows["proc"][i]]) if 0 <= rows["proc"][i] < len(pids) else None})
    # host phases with no CUDA work outside the window, from the first CUDA call (an nsys capture
    # starts with the process, a PyTorch Profiler trace when the profiler did)
    if extent is not None:
        from .sections import _first_start

        c0, c1 = extent
        first_call = _first_start(rt)
        if first_call is not None:
            spans = [(first_call, w0), (w1, c1)]
            bs, be = [], []
            for lo, hi in spans:
                if hi <= lo:
                    continue
                r = rt.rows_overlapping(lo, hi, ["start_ns", "end_ns"])
                o = ops_starting(lo, hi)
                bs += [r["start_ns"].astype(np.int64), o["start_ns"]]
                be += [r["end_ns"].astype(np.int64), o["end_ns"]]
            res = a.engine
            if res is not None:
                _, rs, re_ = res.plan.setup_ranges
                bs.append(np.asarray(rs, np.int64))
                be.append(np.asarray(re_, np.int64))
            phases = checks_m.host_phases_outside_window(
                first_call, c1, w0, w1, np.concatenate(bs) if bs else np.zeros(0, np.int64),
                np.concatenate(be) if be else np.zeros(0, np.int64))
            total = sum(p["end_ns"] - p["start_ns"] for p in phases)
            cap_ns = c1 - c0
            out["host_outside_window"] = {
                "ms": _num(total / 1e6), "pct": _num(total / cap_ns * 100) if cap_ns > 0 else None,
                "before_ms": _num(sum(p["end_ns"] - p["start_ns"] for p in phases if p["where"] == "before the window") / 1e6),
                "after_ms": _num(sum(p["end_ns"] - p["start_ns"] for p in phases if p["where"] == "after the window") / 1e6),
                "phases": [{**p, "duration_ms": _num((p["end_ns"] - p["start_ns"]) / 1e6)}
                           for p in sorted(phases, key=lambda p: p["start_ns"] - p["end_ns"])[:10]]}
    return out
