"""Per-rank summaries: the small records that travel between processes or machines.

:func:`summarize_file` is what a worker runs (a local process or a Dask worker): it loads one
capture, runs the same engine as ``nsysdoc report`` (analysis + rules) and returns, for each rank
the capture holds, a plain-JSON dict (``docs/job.md``): step times and breakdowns, the device
split, findings, the verdict, the session start, and the rank's NCCL kernels (start and end per
collective name). Nothing else leaves the worker, so the parent's memory does not grow with the
size of the captures.

A capture is one rank, or, when it is the job's only input and holds several processes with GPU
work, one rank per such process (``split_processes``).
"""
from __future__ import annotations

import traceback
from pathlib import Path

import numpy as np

from ..errors import NsysdocError

#: NCCL kernels kept per rank (clock alignment and straggler matching use them; more is noise)
MAX_COLLECTIVES = 200_000
BREAKDOWN_PARTS = ("compute", "exposed_comm", "copy", "idle_sync", "idle_input", "idle_alloc", "idle_setup",
                   "idle_launch", "idle_api", "idle_host", "idle_dependency", "idle_tail", "idle_unattributed")


def _num(x, digits: int = 4):
    if x is None:
        return None
    x = float(x)
    return round(x, digits) if np.isfinite(x) else None


def _whole(x) -> int | None:
    """A rank a trace records, when it is a whole number (not text, a fraction or true/false)."""
    return int(x) if isinstance(x, (int, np.integer)) and not isinstance(x, bool) and abs(int(x)) < 1 << 62 else None


def _brief_findings(result: dict) -> list[dict]:
    return [{"rule": f.get("rule"), "title": f.get("title"), "severity": f.get("severity"),
             "impact_ms_per_step": f.get("impact_ms_per_step"), "impact_pct": f.get("impact_pct")}
            for f in result.get("findings") or []]


def _rank_steps(result: dict, pids: set[int]) -> list[dict]:
    """The rank's primary steps, one per step index (the longest when several processes)."""
    by_index: dict[int, dict] = {}
    for s in result.get("steps") or []:
        if not s.get("primary") or s.get("pid") not in pids or s.get("step_time_ms") is None:
            continue
        row = {"index": int(s["index"]), "start_ns": int(s["start_ns"]), "end_ns": int(s["end_ns"]),
               "step_time_ms": s["step_time_ms"], "breakdown_ms": s.get("breakdown_ms")}
        old = by_index.get(row["index"])
        if old is None or row["step_time_ms"] > old["step_time_ms"]:
            by_index[row["index"]] = row
    return [by_index[k] for k in sorted(by_index)]


def _device_split(result: dict, labels: set[str]) -> dict:
    """Mean over the rank's devices with GPU work of the window split (percent of the window)."""
    devs = [d for d in result.get("devices") or [] if str(d.get("label")) in labels and d.get("busy_pct") is not None]
    window_ms = ((result.get("capture") or {}).get("window") or {}).get("duration_ms") or 0
    if not devs or not window_ms:
        return {"gpu_busy_pct": None, "compute_pct": None, "exposed_comm_pct": None, "copy_only_pct": None,
                "idle_pct_by_cause": {}}
    n = len(devs)
    causes: dict[str, float] = {}
    for d in devs:
        for c, v in (d.get("idle_ms_by_cause") or {}).items():
            causes[c] = causes.get(c, 0.0) + (v or 0) / window_ms * 100 / n
    return {"gpu_busy_pct": _num(sum(d["busy_pct"] for d in devs) / n),
            "compute_pct": _num(sum(d.get("compute_pct") or 0 for d in devs) / n),
            "exposed_comm_pct": _num(sum(d.get("exposed_comm_pct") or 0 for d in devs) / n),
            "copy_only_pct": _num(sum(d.get("copy_only_pct") or 0 for d in devs) / n),
            "idle_pct_by_cause": {c: _num(v) for c, v in causes.items()}}


def _collectives(trace, procs: np.ndarray) -> dict[str, dict[str, list[int]]]:
    """The rank's NCCL kernels by short name: start and end times (ns, the capture's timeline)."""
    from ..trace import schema as S

    k = trace.kernels
    if len(k) == 0:
        return {}
    flag = trace.strings.flags(lambda v: S.NCCL_KERNEL.match(v) is not None)
    short = np.asarray(k["short_id"])
    mask = (flag(short) | flag(np.asarray(k["name_id"]))) & np.isin(np.asarray(k["proc"]), procs)
    if not mask.any():
        return {}
    idx = np.flatnonzero(mask)[:MAX_COLLECTIVES]
    start, end = np.asarray(k["start_ns"])[idx], np.asarray(k["end_ns"])[idx]
    names = trace.strings.lookup(short[idx])
    out: dict[str, dict[str, list[int]]] = {}
    order = np.lexsort((start, names.astype(str)))
    for i in order:
        g = out.setdefault(str(names[i]), {"start_ns": [], "end_ns": []})
        g["start_ns"].append(int(start[i]))
        g["end_ns"].append(int(end[i]))
    return out


def summarize_trace(trace, result: dict, file: str, split_processes: bool = False) -> list[dict]:
    """Rank summaries of one analysed capture (``result`` = the report result with findings)."""
    procs = trace.processes
    k = trace.kernels
    gpu_procs = sorted(set(np.unique(np.asarray(k["proc"])).tolist())) if len(k) else []
    for df in (trace.memcpy, trace.memset):
        if len(df):
            gpu_procs = sorted(set(gpu_procs) | set(np.unique(np.asarray(df["proc"])).tolist()))
    groups = [[p] for p in gpu_procs] if split_processes and len(gpu_procs) > 1 else [gpu_procs]
    out = []
    for group in groups:
        pids = {int(np.asarray(procs["pid"])[p]) for p in group if 0 <= p < len(procs)}
        dev_idx = set()
        for df in (k, trace.memcpy, trace.memset):
            if len(df):
                dev_idx |= set(np.unique(np.asarray(df["device"])[np.isin(np.asarray(df["proc"]), group)]).tolist())
        labels = {str(np.asarray(trace.devices["label"])[d]) for d in dev_idx if 0 <= d < len(trace.devices)}
        models = sorted({str(np.asarray(trace.devices["name"])[d]) for d in dev_idx
                         if 0 <= d < len(trace.devices) and "name" in trace.devices.columns} - {""})
        steps = _rank_steps(result, pids)
        times = [s["step_time_ms"] for s in steps]
        rows = [s["breakdown_ms"] for s in steps if s.get("breakdown_ms")]
        breakdown = {p: _num(float(np.mean([r.get(p) or 0 for r in rows]))) for p in BREAKDOWN_PARTS} if rows else None
        names = [str(np.asarray(procs["name"])[p]) for p in group if 0 <= p < len(procs)]
        out.append({
            "file": file, "ok": True, "error": None,
            "pids": sorted(pids), "process_name": names[0] if names else None,
            "devices": sorted(labels),
            "gpu_models": models,
            "shared_capture": len(groups) > 1,
            "session_start_utc_ns": trace.session_start_utc_ns,
            # how the file counted its times ("session" | "absolute"); the loader put both on the
            # session timeline, so wall = session_start_utc_ns + t either way
            "timestamps": getattr(trace, "clock", "session"),
            # the rank a PyTorch Profiler trace records (distributedInfo); None for nsys captures
            "distributed_rank": _whole((trace.distributed or {}).get("rank")) if len(groups) == 1 else None,
            "window_ms": ((result.get("capture") or {}).get("window") or {}).get("duration_ms"),
            "steps": steps,
            # "markers", "inferred" (from the repeating GPU work) or None
            "step_source": (result.get("capture") or {}).get("step_source"),
            "step_time_ms_median": _num(float(np.median(times))) if times else None,
            "breakdown_ms_per_step": breakdown,
            **_device_split(result, labels),
            "findings": _brief_findings(result),
            "verdict": {k: (result.get("verdict") or {}).get(k) for k in ("status", "headline", "sentence")},
            "kernel_count": int(np.isin(np.asarray(k["proc"]), group).sum()) if len(k) else 0,
            "collectives": _collectives(trace, np.array(group, dtype=np.int64)),
        })
    return out


def summarize_file(path: str, options: dict | None = None) -> list[dict]:
    """Worker entry point: load, analyse, apply the rules, summarise. Never raises: a capture
    that cannot be read is one failed record (``ok: false`` and a one-line ``error``).

    ``options``: ``step_marker``, ``rule_dirs`` (paths), ``config`` (path or None), ``no_cache``,
    ``cache_dir``, ``nsys``, ``split_processes``, ``rank_reports_dir`` (write each capture's HTML
    report there; its path comes back as ``report``)."""
    o = dict(options or {})
    try:
        from ..options import ReportOptions
        from ..pipeline import diagnose, load_ruleset

        ruleset = load_ruleset(o.get("rule_dirs") or [], o.get("config"), no_config=True)
        analysis = diagnose(path, ruleset, ReportOptions.from_job_fields(o))
        trace, result = analysis.trace, analysis.to_dict()
        recs = summarize_trace(trace, result, str(path), split_processes=bool(o.get("split_processes")))
        if o.get("rank_reports_dir"):
            from ..views import render_html

            from .ranks import rank_report_path

            target = rank_report_path(o["rank_reports_dir"], str(path))
            from ..outputs import write_text_atomic

            write_text_atomic(target, render_html(analysis))  # temp file + rename: never half a page
            for rec in recs:
                rec["report"] = str(target)
        return recs
    except NsysdocError as exc:
        return [{"file": str(path), "ok": False, "error": exc.message}]
    except Exception as exc:  # one rank's bug must not stop the job; the message says where
        last = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        where = f" at {Path(last.filename).name}:{last.lineno}" if last else ""
        return [{"file": str(path), "ok": False,
                 "error": f"internal error: {type(exc).__name__}: {str(exc)[:200]}{where} (please report this)"}]
