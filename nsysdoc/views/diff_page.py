"""Render a diff (``nsysdoc.compare.compare``): one self-contained HTML page, a Markdown PR comment,
a terminal summary.

Pure: every function takes the diff dict (the JSON of ``nsysdoc diff --format json``) and returns
a string. Same safety as the report page: Jinja2 autoescaping, no network, a Content-Security-
Policy that lets only the inlined script run, untrusted text (kernel names, NVTX text, paths)
escaped for HTML or Markdown and stripped of control characters for the terminal.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from markupsafe import Markup

from ..version import __version__
from ..compare import BREAKDOWN_LABELS, MS_UNIT
from ..fmt import fmt_bytes, fmt_ms, fmt_num, fmt_pct, is_num, source_name
from .assets import _static, csp_for
from .context import Cell, Column, LegendItem, Table
from .glossary import anchor, glossary_sections_html
from .render import _ascii, _clean, _md, environment

TOP_MOVERS = 25
MD_MOVERS = 5


# ---------------------------------------------------------------------------------------------
# shared wording
# ---------------------------------------------------------------------------------------------
def _name(side: dict) -> str:
    return source_name(side.get("input") or side.get("path"))


def _unit_word(diff: dict) -> str:
    """What one unit is, in a column header: step, second of work, or second of window."""
    return {"step": "step", "work": "second of work"}.get(diff.get("per"), "second of window")


def _ms_unit(diff: dict) -> str:
    return MS_UNIT.get(diff.get("per"), MS_UNIT["second"])


#: a change is coloured when it is at least this share of its reference (the base's total)
COLOUR_MIN_SHARE = 0.01


def _ref_total(diff: dict) -> float:
    """The base's time per unit (sum of its breakdown): the reference for time changes."""
    return sum(r.get("base_ms_per_step") or 0 for r in diff.get("breakdown") or [])


def _cls(diff: dict, x, ref: float) -> str:
    """Colour a change red (more time) or green (less) only when the verdict is significant
    (faster/slower), the numbers are per step or per second of work (per second of window, less
    kernel time can mean less work done), and the change is at least 1% of ``ref``."""
    if diff.get("verdict") not in ("faster", "slower") or diff.get("per") not in ("step", "work"):
        return ""
    return _delta_cls(x, COLOUR_MIN_SHARE * abs(ref or 0))


def _delta(x, unit: str = "ms", digits: int | None = None) -> str:
    if not is_num(x):
        return "—"
    if unit == "ms":
        text = fmt_ms(abs(x), digits)
    elif unit == "bytes":
        text = fmt_bytes(abs(x))
    else:
        text = f"{fmt_num(abs(x), 2 if digits is None else digits)}{unit}"
    return ("+" if x > 0 else "−" if x < 0 else "±") + text


def _delta_cls(x, tolerance: float = 0.0) -> str:
    """More time per unit is worse."""
    if not is_num(x) or abs(x) <= tolerance:
        return ""
    return "worse" if x > 0 else "better"


@dataclass
class Fact:
    label: str
    base: str
    candidate: str
    change: str = ""
    cls: str = ""
    help: str = ""


@dataclass
class BarSeg:
    x: float
    w: float
    cls: str
    title: str


@dataclass
class Bar:
    label: str
    y: float
    total: str
    segments: list[BarSeg] = field(default_factory=list)


def _change(st: dict) -> str:
    """A step-time change with its 95% interval when it has one."""
    c, ci = st.get("change_pct"), st.get("ci95_pct")
    if not is_num(c):
        return "—"
    return f"{c:+.1f}% (95% interval {ci[0]:+.1f}% to {ci[1]:+.1f}%)" if ci else f"{c:+.1f}%"


def facts(diff: dict) -> list[Fact]:
    """The headline numbers side by side."""
    a, b, med = diff["base"], diff["candidate"], diff["step_time_ms_median"]
    st = diff.get("step_time_ms") or dict(med, statistic="median")  # diffs saved before step_time_ms: the median
    u = _unit_word(diff)
    out = []
    if diff["per"] == "step" or (st.get("base") is not None):
        mean = st.get("statistic") == "mean"
        out.append(Fact("Mean step time" if mean else "Median step time", fmt_ms(st.get("base"), 2),
                        fmt_ms(st.get("candidate"), 2), _change(st),
                        _delta_cls(st.get("change_pct")) if diff.get("verdict") in ("faster", "slower") else "",
                        ("Mean job step time (total ÷ steps: the idle inside every step counts), the verdict's "
                         "measure when steps are not marked on both sides" if mean else "Median job step time") +
                        ("; identical runs: no interval." if diff.get("verdict") == "identical" else
                         "; the interval is a bootstrap over both sides' steps.")))
        if mean and med.get("base") is not None:
            out.append(Fact("Median step time", fmt_ms(med.get("base"), 2), fmt_ms(med.get("candidate"), 2),
                            _change(med), help="For reference, not the verdict's measure: with inferred steps "
                            "a unit can be a layer, and the median of the units ignores idle that sits in a few."))
    wr = diff.get("work_rate")
    if wr:
        c = wr.get("time_per_work_change_pct")
        out.append(Fact("Time for the same work", "1.000 s",
                        f"{1 + c / 100:.3f} s" if is_num(c) else "n/a", f"{c:+.1f}%" if is_num(c) else "—",
                        _delta_cls(c) if wr.get("significant") and diff.get("verdict") in ("faster", "slower") else "",
                        "The time the candidate takes for the work the base does in one second, from the launch "
                        f"rates of {wr.get('kernels_compared')} kernels both runs share."))
    out.append(Fact("Steps", fmt_num(a.get("steps"), 0), fmt_num(b.get("steps"), 0)))
    comp = diff.get("comparability") or {}
    src = comp.get("step_source") or {}
    words = {"markers": "marked", "inferred": "inferred", None: "none"}
    if src:
        out.append(Fact("Steps found by", words.get(src.get("base"), str(src.get("base"))),
                        words.get(src.get("candidate"), str(src.get("candidate"))),
                        help="marked: step markers (NVTX ranges, ProfilerStep); inferred: found without markers (the report says how)."))
    kps = comp.get("kernels_per_step") or {}
    if is_num(kps.get("base")) or is_num(kps.get("candidate")):
        out.append(Fact("Kernels per step per GPU", fmt_num(kps.get("base"), 1), fmt_num(kps.get("candidate"), 1)))
    gm = comp.get("gpu_models") or {}
    if gm:
        out.append(Fact("GPU model", ", ".join(gm.get("base") or ["not recorded"]),
                        ", ".join(gm.get("candidate") or ["not recorded"])))
    sh = comp.get("shared_kernel_time_pct") or {}
    if is_num(sh.get("base")) or is_num(sh.get("candidate")):
        out.append(Fact("Kernel time in shared kernels", fmt_pct(sh.get("base")), fmt_pct(sh.get("candidate")),
                        help="Share of each run's kernel time in kernel names the other run also launches."))
    out.append(Fact("Analysis window", fmt_ms(a.get("window_ms")), fmt_ms(b.get("window_ms"))))
    out.append(Fact("GPUs", fmt_num(a.get("device_count"), 0), fmt_num(b.get("device_count"), 0)))
    gb, gc = a.get("gpu_busy_pct"), b.get("gpu_busy_pct")
    out.append(Fact("GPU busy", fmt_pct(gb), fmt_pct(gc),
                    f"{gc - gb:+.1f} points" if is_num(gb) and is_num(gc) else "—"))
    for key, label in (("sync_calls_per_step", f"Host sync calls per {u} per GPU"),
                       ("launches_per_step", f"Launches per {u} per GPU")):
        x = diff.get(key) or {}
        xa, xb = x.get("base"), x.get("candidate")
        out.append(Fact(label, fmt_num(xa, 1), fmt_num(xb, 1),
                        _delta(xb - xa, "", 1) if is_num(xa) and is_num(xb) else "—",
                        _cls(diff, (xb - xa) if is_num(xa) and is_num(xb) else None, xa if is_num(xa) else 0)))
    ps = diff.get("pageable_share_pct") or {}
    if ps.get("base") is not None or ps.get("candidate") is not None:
        out.append(Fact("Pageable share of host copies", fmt_pct(ps.get("base")), fmt_pct(ps.get("candidate"))))
    out.append(Fact("Report verdict", str(a.get("verdict") or "—"), str(b.get("verdict") or "—")))
    ver = comp.get("version") or {}
    out.append(Fact("Profiler", str(ver.get("base") or a.get("nsys_version") or "—"),
                    str(ver.get("candidate") or b.get("nsys_version") or "—")))
    return out


# ---------------------------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------------------------
CHART_W, LABEL_W, BAR_H, GAP = 980, 150, 30, 14


def breakdown_bars(diff: dict) -> tuple[list[Bar], list[LegendItem], int]:
    """Two stacked bars (base, candidate) of the breakdown, on one scale, parts in a fixed order."""
    rows = {r["part"]: r for r in diff.get("breakdown") or []}
    order = [k for k in BREAKDOWN_LABELS if k in rows]
    totals = [sum(rows[k][f"{s}_ms_per_step"] or 0 for k in order) for s in ("base", "candidate")]
    scale = (CHART_W - LABEL_W - 20) / max(max(totals), 1e-9)
    unit = _ms_unit(diff)
    bars = []
    for i, (side, total) in enumerate(zip(("base", "candidate"), totals)):
        bar = Bar(label=side, y=10 + i * (BAR_H + GAP), total=f"{fmt_num(total, 2)} {unit}")
        x = float(LABEL_W)
        for k in order:
            v = rows[k][f"{side}_ms_per_step"] or 0
            if v <= 0:
                continue
            w = v * scale
            bar.segments.append(BarSeg(round(x, 2), round(w, 2), f"c-{k}",
                                       f"{BREAKDOWN_LABELS[k]}: {fmt_num(v, 3)} {unit}"))
            x += w
        bars.append(bar)
    legend = [LegendItem(f"c-{k}", BREAKDOWN_LABELS[k]) for k in order]
    return bars, legend, 10 + 2 * (BAR_H + GAP)


def breakdown_table(diff: dict) -> Table:
    unit = _ms_unit(diff)
    rows = []
    for r in diff.get("breakdown") or []:
        d = r["delta_ms_per_step"]
        rows.append([Cell(r["label"], r["label"], cls=f"cause c-{r['part']}"),
                     Cell(fmt_num(r["base_ms_per_step"], 3), r["base_ms_per_step"], True),
                     Cell(fmt_num(r["candidate_ms_per_step"], 3), r["candidate_ms_per_step"], True),
                     Cell(_delta(d, "", 3), d, True, cls=_cls(diff, d, _ref_total(diff)))])
    return Table(id="breakdown-table", title="Where the time went, side by side", columns=[
        Column("Part"), Column(f"Base ({unit})", True), Column(f"Candidate ({unit})", True),
        Column(f"Change ({unit})", True, "candidate − base", anchor("Breakdown change"))], rows=rows,
        note="Sorted by the size of the change. Units: " + diff.get("unit", "") + ".",
        empty="No breakdown on either side.")


def movers_table(diff: dict, key: str, title: str, what: str) -> Table:
    unit = _ms_unit(diff)
    cunit = f"per {_unit_word(diff)}"
    all_rows = diff.get(key) or []
    moving = [r for r in all_rows if abs(r.get("delta_ms_per_step") or 0) >= 0.0005 or r["status"] != "matched"]
    rows = []
    for r in moving[:TOP_MOVERS]:
        d = r["delta_ms_per_step"]
        name = r["name"] or "(no text)"
        rows.append([Cell(name if len(name) <= 120 else name[:119] + "…", name, title=name[:1000] if len(name) > 120 else ""),
                     Cell(r["status"], r["status"], cls=f"st-{r['status']}"),
                     Cell(fmt_num(r["base_ms_per_step"], 3), r["base_ms_per_step"], True),
                     Cell(fmt_num(r["candidate_ms_per_step"], 3), r["candidate_ms_per_step"], True),
                     Cell(_delta(d, "", 3), d, True, cls=_cls(diff, d, _ref_total(diff))),
                     Cell(f"{fmt_num(r['base_count_per_step'], 1)} → {fmt_num(r['candidate_count_per_step'], 1)}",
                          r["candidate_count_per_step"], True),
                     Cell(f"{fmt_num(r['base_mean_us'], 1)} → {fmt_num(r['candidate_mean_us'], 1)}",
                          r["candidate_mean_us"], True)])
    new = sum(r["status"] == "new" for r in all_rows)
    gone = sum(r["status"] == "vanished" for r in all_rows)
    note = (f"{len(moving)} of {len(all_rows)} {what} changed" + (f" ({new} new, {gone} vanished)" if new or gone else "")
            + (f"; the {TOP_MOVERS} largest changes shown" if len(moving) > TOP_MOVERS else "")
            + ". Units: " + diff.get("unit", "") + ".")
    return Table(id=f"{key}-movers", title=title, columns=[
        Column("Name"), Column("Status"), Column(f"Base ({unit})", True), Column(f"Candidate ({unit})", True),
        Column(f"Change ({unit})", True, "candidate − base", anchor("Kernel and NVTX movers")),
        Column(f"Count {cunit}", True), Column("Mean (µs)", True)], rows=rows, note=note,
        empty=f"No {what} changed.")


def copies_table(diff: dict) -> Table:
    unit = f"per {_unit_word(diff)}"
    rows = []
    for r in diff.get("copies") or []:
        d = (r["candidate_ms_per_step"] or 0) - (r["base_ms_per_step"] or 0)
        rows.append([Cell(r["kind"], r["kind"]),
                     Cell(fmt_bytes(r["base_bytes_per_step"]), r["base_bytes_per_step"], True),
                     Cell(fmt_bytes(r["candidate_bytes_per_step"]), r["candidate_bytes_per_step"], True),
                     Cell(fmt_num(r["base_ms_per_step"], 3), r["base_ms_per_step"], True),
                     Cell(fmt_num(r["candidate_ms_per_step"], 3), r["candidate_ms_per_step"], True),
                     Cell(_delta(d, "", 3), d, True, cls=_cls(diff, d, _ref_total(diff))),
                     Cell(f"{fmt_num(r['base_gbps'], 1)} → {fmt_num(r['candidate_gbps'], 1)}", r["candidate_gbps"], True)])
    return Table(id="copies-diff", title="Copies by direction and host memory", columns=[
        Column("Kind"), Column(f"Base bytes {unit}", True), Column(f"Candidate bytes {unit}", True),
        Column(f"Base (ms {unit})", True), Column(f"Candidate (ms {unit})", True), Column(f"Change (ms {unit})", True),
        Column("GB/s", True)], rows=rows, note="Units: " + diff.get("unit", "") + ".",
        empty="No copies on either side.")


def findings_view(diff: dict) -> dict:
    f = diff.get("findings") or {}
    return {"resolved": f.get("resolved") or [], "new": f.get("new") or [], "changed": f.get("changed") or []}


def render_diff_html(diff: dict) -> str:
    bars, legend, height = breakdown_bars(diff)
    js = _static("report.js")
    a, b = diff["base"], diff["candidate"]
    ctx = dict(
        title=f"nsysdoc diff — {_name(a)} → {_name(b)}", base_name=_name(a), candidate_name=_name(b),
        base_path=str(a.get("input") or a.get("path") or ""), candidate_path=str(b.get("input") or b.get("path") or ""),
        diff=diff, facts=facts(diff), bars=bars, legend=legend, chart_w=CHART_W, chart_h=height, label_w=LABEL_W,
        bar_h=BAR_H, unit_word=_unit_word(diff),
        tables=[breakdown_table(diff)],
        movers=[movers_table(diff, "kernels", "Kernels: largest changes", "kernels"),
                movers_table(diff, "nvtx", "NVTX ranges: largest changes", "NVTX ranges")],
        copies=copies_table(diff), findings=findings_view(diff),
        glossary_html=glossary_sections_html("Before/after diff", "Step breakdown"),
        nsysdoc_version=str(diff.get("nsysdoc_version") or __version__),
        css=Markup(_static("report.css")), js=Markup(js), csp=csp_for(js))
    return environment().get_template("diff.html.j2").render(**ctx)


# ---------------------------------------------------------------------------------------------
# Markdown (a PR comment) and terminal
# ---------------------------------------------------------------------------------------------
def render_diff_markdown(diff: dict) -> str:
    """A short PR comment: verdict, the numbers side by side, the largest moves, findings. Link-free."""
    a, b = diff["base"], diff["candidate"]
    unit = _ms_unit(diff)
    icon = {"faster": "✅", "slower": "❌", "identical": "🟰", "inconclusive": "❔"}.get(diff["verdict"], "➖")
    lines = [f"### nsysdoc diff: {_md(_name(a))} → {_md(_name(b))}", "",
             f"{icon} **{_md(diff.get('headline') or diff['verdict'])}**", "",
             f"{_md(diff['sentence'])} "
             f"*({_md(diff['strength']) + ' evidence' if diff.get('comparable', True) else 'no verdict'})*", ""]
    for w in diff.get("warnings") or []:
        lines.append(f"> {_md(w)}")
    if diff.get("warnings"):
        lines.append("")
    lines += ["| | base | candidate | change |", "|---|---:|---:|---:|"]
    for f in facts(diff):
        lines.append(f"| {_md(f.label)} | {_md(f.base)} | {_md(f.candidate)} | {_md(f.change or '')} |")
    lines.append("")
    moved = [r for r in diff.get("breakdown") or [] if abs(r.get("delta_ms_per_step") or 0) >= 0.0005]
    if moved:
        lines += [f"**Where the time went** ({_md(unit)}, per GPU):", "", "| part | base | candidate | change |",
                  "|---|---:|---:|---:|"]
        for r in moved:
            lines.append(f"| {_md(r['label'])} | {fmt_num(r['base_ms_per_step'], 3)} | "
                         f"{fmt_num(r['candidate_ms_per_step'], 3)} | {_md(_delta(r['delta_ms_per_step'], '', 3))} |")
        lines.append("")
    kern = [r for r in diff.get("kernels") or [] if abs(r.get("delta_ms_per_step") or 0) >= 0.0005
            or r["status"] != "matched"][:MD_MOVERS]
    if kern:
        lines += [f"**Kernels that moved most** ({_md(unit)}, per GPU):", "", "| kernel | status | base | candidate | change |",
                  "|---|---|---:|---:|---:|"]
        for r in kern:
            name = r["name"] if len(r["name"]) <= 80 else r["name"][:79] + "…"
            lines.append(f"| {_md(name)} | {_md(r['status'])} | {fmt_num(r['base_ms_per_step'], 3)} | "
                         f"{fmt_num(r['candidate_ms_per_step'], 3)} | {_md(_delta(r['delta_ms_per_step'], '', 3))} |")
        lines.append("")
    f = findings_view(diff)
    for key, label in (("resolved", "Resolved"), ("new", "New")):
        if f[key]:
            lines.append(f"**{label} findings:** " + "; ".join(
                f"{_md(x.get('title') or x['rule'])} ({_md(x.get('severity'))})" for x in f[key]) + ".")
    if f["changed"]:
        lines.append("**Changed findings:** " + "; ".join(
            f"{_md(x.get('title') or x['rule'])}: {_md(x.get('base_severity'))} → {_md(x.get('candidate_severity'))}, "
            f"{fmt_pct(x.get('base_impact_pct'))} → {fmt_pct(x.get('candidate_impact_pct'))} of the window"
            for x in f["changed"]) + ".")
    if any(f.values()):
        lines.append("")
    lines.append(f"nsysdoc {_md(diff.get('nsysdoc_version'))}; definitions: docs/diff.md.")
    return "\n".join(lines).rstrip() + "\n"


def diff_terminal_summary(diff: dict, path: str | None = None) -> str:
    a, b = diff["base"], diff["candidate"]
    out = [_clean(diff.get("headline") or diff["verdict"]),
           f"nsysdoc diff: {_clean(_name(a))} -> {_clean(_name(b))}", f"Verdict: {_clean(diff['sentence'])}"]
    for w in diff.get("warnings") or []:
        out.append(f"  note: {_clean(w)}")
    f = findings_view(diff)
    for key in ("resolved", "new"):
        if f[key]:
            out.append(f"  {key} findings: " + ", ".join(_clean(x["rule"]) for x in f[key]))
    if path is not None:
        out.append(f"Diff: {_clean(path)}")
    return _ascii("\n".join(out)) + "\n"


__all__ = ["render_diff_html", "render_diff_markdown", "diff_terminal_summary"]
