"""Render a job result (``nsysdoc.jobs.run_job``): one self-contained HTML page, a Markdown
summary, a terminal summary. Pure; untrusted text (file names, rule titles) escaped as in the
report page."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from markupsafe import Markup

from ..version import __version__
from ..compare import BREAKDOWN_LABELS
from ..fmt import fmt_ms, fmt_num, fmt_pct, is_num, source_name
from ..jobs.analysis import STRAGGLER_WAIT_PCT
from .assets import _static, csp_for, path_href
from .context import Cell, Column, LegendItem, Table
from .glossary import anchor, glossary_sections_html
from .render import _ascii, _clean, _md, environment

HEAT_MAX_STEPS = 200
#: what a straggler's share (``wait_pct_of_step``) is a share of, by its ``basis``
BASIS_WORDS = {"step": "step", "window": "window", "collective interval": "interval between collectives"}


def rank_list(ranks: list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0–2, 5, 7–8"``."""
    out, run = [], []
    for r in sorted(ranks):
        if run and r == run[-1] + 1:
            run.append(r)
            continue
        if run:
            out.append(f"{run[0]}–{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [r]
    if run:
        out.append(f"{run[0]}–{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def _top_idle(r: dict) -> str:
    idle = r.get("idle_pct_by_cause") or {}
    if not idle:
        return "—"
    c, v = max(idle.items(), key=lambda kv: kv[1] or 0)
    return f"{c} {fmt_pct(v)}" if v else "—"


def ranks_table(job: dict, page_dir: str | None) -> Table:
    rows = []
    strag = (job.get("straggler") or {}).get("rank")
    for r in job["ranks"]:
        name = source_name(r.get("file"))
        if not r.get("ok"):
            rows.append([Cell(str(r.get("rank")), r.get("rank"), True), Cell(name, name), Cell("failed", "failed", cls="warn"),
                         Cell(str(r.get("error") or ""), r.get("error"))] + [Cell("—")] * 9)
            continue
        link = ""
        if r.get("report"):
            link = os.path.relpath(r["report"], page_dir) if page_dir else r["report"]
        rows.append([
            Cell(str(r["rank"]), r["rank"], True, cls="warn" if r["rank"] == strag else ""),
            Cell(name, name, cls="nowrap", title=f"report: {link}" if link else ""),
            Cell(", ".join(r.get("devices") or []) or "—", None),
            Cell(fmt_num(r.get("steps"), 0), r.get("steps"), True),
            Cell(fmt_ms(r.get("step_time_ms_median"), 2), r.get("step_time_ms_median"), True),
            Cell(fmt_pct(r.get("gpu_busy_pct")), r.get("gpu_busy_pct"), True),
            Cell(fmt_pct(r.get("compute_pct")), r.get("compute_pct"), True),
            Cell(fmt_pct(r.get("exposed_comm_pct")), r.get("exposed_comm_pct"), True),
            Cell(_top_idle(r), None),
            Cell(fmt_num(r.get("clock_offset_ms"), 3), r.get("clock_offset_ms"), True),
            Cell(fmt_num(r.get("last_count"), 0), r.get("last_count"), True),
            Cell(fmt_num(r.get("wait_ms_per_step"), 2), r.get("wait_ms_per_step"), True),
            Cell(", ".join(r.get("findings") or []) or "—", None),
        ])
    return Table(id="ranks", title="Ranks", columns=[
        Column("Rank", True), Column("Capture"),
        Column("Device ids", False, "the CUDA device ids of the GPUs the rank used (host-prefixed across hosts)"),
        Column("Steps", True),
        Column("Median step", True, "median of the rank's step times", anchor("Job step time")),
        Column("GPU busy", True), Column("Compute", True), Column("Exposed comm.", True), Column("Largest idle cause"),
        Column("Clock offset (ms)", True, "its clock minus the reference rank's", anchor("Clock offset")),
        Column("Last to join", True, "matched collectives it joined last", anchor("Join time")),
        Column("Wait per step (ms)", True, "its waits in matched collectives ÷ its steps", anchor("Join time")),
        Column("Findings")], rows=rows,
        note="Percentages are of each rank's analysis window, mean over its GPUs. The straggler's rank is highlighted.",
        empty="No ranks.")


def findings_table(job: dict) -> Table:
    rows = []
    for f in job.get("findings") or []:
        rows.append([Cell(str(f.get("title") or f["rule"]), f.get("title"), title=f["rule"]),
                     Cell(str(f.get("severity")), f.get("severity"), cls=f"sev-{f.get('severity')}"),
                     Cell(f"{f['rank_count']} of {job['rank_count']}", f["rank_count"], True),
                     Cell(rank_list(f["ranks"]), None),
                     Cell(fmt_ms(f.get("impact_ms_per_step_median"), 2) if is_num(f.get("impact_ms_per_step_median")) else "—",
                          f.get("impact_ms_per_step_median"), True),
                     Cell(fmt_pct(f.get("impact_pct_median")) if is_num(f.get("impact_pct_median")) else "—",
                          f.get("impact_pct_median"), True)])
    scope = "capture" if any(f.get("scope") == "capture" for f in job.get("findings") or []) else "rank"
    return Table(id="job-findings", title="Findings, rolled up over ranks", columns=[
        Column("Finding"), Column("Severity"), Column("Ranks", True), Column("Which"),
        Column("Median impact per step", True, "median over the ranks where it fired", anchor("Rolled-up finding")),
        Column("Median share", True)], rows=rows,
        note=("A capture holding several ranks (processes) has one set of findings, counted for each of its "
              "ranks; its report has the evidence and fixes." if scope == "capture" else
              "Each rank's report has the evidence and fixes."), empty="No rule fired on any rank.")


@dataclass
class HeatCell:
    x: int
    y: int
    fill: str
    title: str


@dataclass
class Heat:
    title: str
    unit: str
    width: int
    height: int
    cells: list[HeatCell] = field(default_factory=list)
    ylabels: list[tuple[int, str]] = field(default_factory=list)
    xlabels: list[tuple[int, str]] = field(default_factory=list)
    low: str = ""
    high: str = ""
    cw: int = 10
    ch: int = 10


def _shade(v: float, lo: float, hi: float) -> str:
    """Light yellow (lo) to dark red (hi)."""
    t = 0.0 if hi <= lo else min(max((v - lo) / (hi - lo), 0.0), 1.0)
    a, b = (255, 245, 200), (170, 20, 30)
    return "#%02x%02x%02x" % tuple(int(round(a[i] + (b[i] - a[i]) * t)) for i in range(3))


def heatmaps(job: dict) -> list[Heat]:
    h = job.get("heatmap") or {}
    ranks, steps = h.get("ranks") or [], (h.get("steps") or [])[:HEAT_MAX_STEPS]
    if not ranks or not steps:
        return []
    cw = max(6, min(28, 900 // len(steps)))
    ch = max(8, min(22, 420 // len(ranks)))
    left, top = 60, 8
    out = []
    for key, title in (("step_time_ms", "Step time by rank and step"), ("wait_ms", "Wait in collectives by rank and step")):
        grid = [row[:len(steps)] for row in h.get(key) or []]
        vals = [v for row in grid for v in row if v is not None]
        if not vals:
            continue
        lo, hi = (min(vals), max(vals)) if key == "step_time_ms" else (0.0, max(vals))
        heat = Heat(title=title, unit="ms", width=left + cw * len(steps) + 10, height=top + ch * len(ranks) + 24,
                    low=f"{fmt_num(lo, 2)} ms", high=f"{fmt_num(hi, 2)} ms", cw=cw, ch=ch)
        for y, (rank, row) in enumerate(zip(ranks, grid)):
            heat.ylabels.append((top + y * ch + ch // 2, f"rank {rank}"))
            for x, v in enumerate(row):
                if v is None:
                    continue
                heat.cells.append(HeatCell(left + x * cw, top + y * ch, _shade(v, lo, hi),
                                           f"rank {rank}, step {steps[x]}: {fmt_num(v, 3)} ms"))
        every = max(1, len(steps) // 12)
        heat.xlabels = [(left + x * cw + cw // 2, str(s)) for x, s in enumerate(steps) if x % every == 0]
        out.append(heat)
    return out


def breakdown_bars(job: dict) -> tuple[list[dict], list[LegendItem], int, str]:
    ok = [r for r in job["ranks"] if r.get("ok") and r.get("breakdown_ms_per_step")]
    if not ok:
        return [], [], 0, ""
    parts = [p for p in BREAKDOWN_LABELS if any((r["breakdown_ms_per_step"].get(p) or 0) > 0 for r in ok)]
    total = max(sum(r["breakdown_ms_per_step"].get(p) or 0 for p in parts) for r in ok) or 1
    scale = 800 / total
    bars = []
    for i, r in enumerate(ok):
        x, segs = 80.0, []
        for p in parts:
            v = r["breakdown_ms_per_step"].get(p) or 0
            if v <= 0:
                continue
            segs.append({"x": round(x, 2), "w": round(v * scale, 2), "cls": f"c-{p}",
                         "title": f"rank {r['rank']}, {BREAKDOWN_LABELS[p]}: {fmt_num(v, 3)} ms per step"})
            x += v * scale
        bars.append({"label": f"rank {r['rank']}", "y": 6 + i * 22, "segments": segs})
    return bars, [LegendItem(f"c-{p}", BREAKDOWN_LABELS[p]) for p in parts], 12 + len(ok) * 22, f"{fmt_num(total, 2)} ms"


def report_href(report: str, page_dir: str | None) -> str:
    """The ``href`` of a rank's report: relative to the page when its folder is known, always
    percent-encoded (a rank file named ``javascript:alert(1);rank0.sqlite`` links to
    ``javascript%3Aalert%281%29%3Brank0.nsysdoc.html``, a file, never a script)."""
    return path_href(os.path.relpath(report, page_dir) if page_dir else str(report))


def render_job_html(job: dict, page_path: str | None = None) -> str:
    js = _static("report.js")
    bars, legend, bars_h, bars_max = breakdown_bars(job)
    page_dir = str(Path(page_path).resolve().parent) if page_path else None
    ctx = dict(job=job, title=f"nsysdoc job — {job['rank_count']} ranks", ranks=ranks_table(job, page_dir),
               findings=findings_table(job), heat=heatmaps(job), bars=bars, legend=legend, bars_h=bars_h,
               bars_max=bars_max, reports=[(r["rank"], report_href(r["report"], page_dir))
                                           for r in job["ranks"] if r.get("report")],
               straggler_pct=STRAGGLER_WAIT_PCT, basis_words=BASIS_WORDS,
               glossary_html=glossary_sections_html("Multi-rank jobs", "Step breakdown"),
               nsysdoc_version=str(job.get("nsysdoc_version") or __version__),
               css=Markup(_static("report.css")), js=Markup(js), csp=csp_for(js))
    return environment().get_template("job.html.j2").render(**ctx)


def render_job_markdown(job: dict) -> str:
    v = job["verdict"]
    lines = [f"### nsysdoc job: {job['rank_count']} ranks", "", f"**{_md(v['sentence'])}**", ""]
    if v.get("detail"):
        lines += [_md(v["detail"]), ""]
    for w in job.get("warnings") or []:
        lines.append(f"> {_md(w)}")
    if job.get("warnings"):
        lines.append("")
    lines += ["| rank | median step | GPU busy | exposed comm. | clock offset (ms) | last to join | wait per step (ms) |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in job["ranks"]:
        if not r.get("ok"):
            lines.append(f"| {r.get('rank')} | failed: {_md(r.get('error'))} | | | | | |")
            continue
        lines.append(f"| {r['rank']} | {_md(fmt_ms(r.get('step_time_ms_median'), 2))} | {fmt_pct(r.get('gpu_busy_pct'))} | "
                     f"{fmt_pct(r.get('exposed_comm_pct'))} | {fmt_num(r.get('clock_offset_ms'), 3)} | "
                     f"{fmt_num(r.get('last_count'), 0)} | {fmt_num(r.get('wait_ms_per_step'), 2)} |")
    lines.append("")
    if job.get("findings"):
        lines += ["| finding | severity | ranks | median impact per step |", "|---|---|---|---:|"]
        for f in job["findings"][:10]:
            imp = fmt_ms(f.get("impact_ms_per_step_median"), 2) if is_num(f.get("impact_ms_per_step_median")) else "—"
            lines.append(f"| {_md(f.get('title') or f['rule'])} | {_md(f.get('severity'))} | "
                         f"{_md(rank_list(f['ranks']))} ({f['rank_count']}) | {_md(imp)} |")
        lines.append("")
    lines.append(f"nsysdoc {_md(job.get('nsysdoc_version'))}; definitions: docs/job.md.")
    return "\n".join(lines).rstrip() + "\n"


def job_terminal_summary(job: dict, path: str | None = None) -> str:
    v = job["verdict"]
    out = [f"nsysdoc job: {job['rank_count']} ranks ({job['failed_count']} failed)", f"Verdict: {_clean(v['sentence'])}"]
    if v.get("detail"):
        out.append(f"  {_clean(v['detail'])}")
    for w in job.get("warnings") or []:
        out.append(f"  note: {_clean(w)}")
    if path is not None:
        out.append(f"Job page: {_clean(path)}")
    return _ascii("\n".join(out)) + "\n"


__all__ = ["render_job_html", "render_job_markdown", "job_terminal_summary", "rank_list"]
