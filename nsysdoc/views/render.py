"""Render a diagnosis: one self-contained HTML page, a markdown summary, a terminal summary.

Pure: every function returns a string; nothing is printed or written (``nsysdoc/cli.py`` does
that). Templates and static files are package data read with :mod:`importlib.resources`.

* :func:`render_html` — the report page (``docs/report.md``): Jinja2 with autoescaping and
  ``StrictUndefined``; CSS/JS inlined; a Content-Security-Policy that lets nothing load and only
  the inlined script run; the JSON result embedded as ``application/json``.
* :func:`render_markdown` — verdict, headline numbers, findings table; link-free (PR comments, CI
  logs). Untrusted text is escaped for markdown.
* :func:`terminal_summary` — plain text, no colour codes, control characters removed.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import TYPE_CHECKING
from importlib.resources import files

import markupsafe

from ..metrics import timeline as tlm
from ..outputs import terminal_text

if TYPE_CHECKING:
    import jinja2

from .build import backward_text, build_context, capped_result, headline, rank_findings, rule_statuses, verdict, what_if_text  # noqa: F401
from .context import fmt_ms, fmt_num, fmt_pct, fmt_s, is_num, source_name
from .text import MAX_DISPLAY_CHARS, _json_strings, shorten, visible  # noqa: F401


def _load_template(name: str):
    path = files("nsysdoc.views") / "templates" / name
    if not path.is_file():
        return None
    return path.read_text(encoding="utf-8"), None, lambda: True


def _json_default(o):
    try:
        import numpy as np

        if isinstance(o, np.integer):
            return int(o)
        if isinstance(o, np.floating):
            return None if np.isnan(o) else float(o)
        if isinstance(o, np.bool_):
            return bool(o)
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    return str(o)


@lru_cache(maxsize=4)
def environment(bytecode_dir: str | None = None) -> "jinja2.Environment":
    """The report's Jinja environment: autoescape on for every template, undefined names fail.
    Jinja is imported here, not at module load: JSON output and the terminal summary never need it.
    With ``bytecode_dir`` (a private folder: :func:`nsysdoc.cache.templates_dir`) compiled templates
    are kept there (compiling them costs ~0.1 s per page; Jinja recompiles when a template's
    source or the Python version changes)."""
    import jinja2

    class _Bytecode(jinja2.FileSystemBytecodeCache):
        """Never fatal: a damaged file is a miss (Jinja recompiles), a failed write costs speed."""

        def load_bytecode(self, bucket) -> None:
            try:
                super().load_bytecode(bucket)
            except Exception:
                bucket.reset()

        def dump_bytecode(self, bucket) -> None:
            try:
                super().dump_bytecode(bucket)
            except OSError:
                pass

    bcc = _Bytecode(bytecode_dir) if bytecode_dir else None
    env = jinja2.Environment(loader=jinja2.FunctionLoader(_load_template), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=False, lstrip_blocks=False,
                             keep_trailing_newline=True, finalize=_display, bytecode_cache=bcc)
    # |tojson escapes <, >, &, ' as \u003c ... so embedded JSON can never close its <script>
    env.policies["json.dumps_kwargs"] = {"sort_keys": False, "default": _json_default, "ensure_ascii": False}
    env.policies["json.dumps_function"] = _dumps
    env.filters["step_bars"] = step_bars
    env.filters["table_rows"] = table_rows
    return env


def _printed(value) -> str:
    """What ``{{ value }}`` prints in a template of :func:`environment` (finalize, then autoescape);
    a short ASCII text without a character to escape (the numbers of a chart) as it is."""
    if type(value) is str and len(value) <= MAX_DISPLAY_CHARS and value.isascii() and not (
            "&" in value or "<" in value or ">" in value or "'" in value or '"' in value):
        return value
    return str(markupsafe.escape(_display(value)))


def step_bars(c) -> "markupsafe.Markup":
    """``{{ c|step_bars }}``: the bars of a step chart (:class:`~nsysdoc.views.context.StepChart`)
    as SVG, one ``<g>`` and a newline per bar. The template wrote them with a loop per bar and per
    segment (issue 50: ~7,000 values on a capture of 2,000 steps, the slowest part of the page to
    render); each value is printed as ``{{ }}`` prints it (:func:`_printed`), the same bytes."""
    p = _printed
    tick_y = p(c.plot_bottom + 14)
    out = []
    for b in c.bars:
        x, w, parts = p(b.x), p(b.w), []
        parts.append(f'<g class="bar{" mark-" + p(b.mark) if b.mark else ""}"><title>{p(b.title)}</title>')
        for s in b.segments:
            parts.append(f'<rect x="{x}" y="{p(s.y)}" width="{w}" height="{p(s.h)}" class="{p(s.cls)}">'
                         f'<title>{p(s.title)}</title></rect>')
        if b.mark:  # |float - 3, as the template computed it
            parts.append(f'<text class="mark" x="{p(b.cx)}" y="{p(_as_float(b.top) - 3)}">{p(b.mark)}</text>')
        if b.label:
            parts.append(f'<text class="xtick" x="{p(b.cx)}" y="{tick_y}">{p(b.label)}</text>')
        parts.append("</g>\n")
        out.append("".join(parts))
    return markupsafe.Markup("".join(out))


def table_rows(t) -> "markupsafe.Markup":
    """``{{ t|table_rows }}``: the body rows of a table (:class:`~nsysdoc.views.context.Table`),
    one ``<tr>`` and a newline per row, as the ``data_table`` macro wrote them with a loop per row
    and per cell (issue 50: the steps table's ~2,600 cells); each value printed as ``{{ }}``
    prints it (:func:`_printed`), the same bytes."""
    p = _printed
    out = []
    for row in t.rows:
        parts = ["<tr>"]
        for cell in row:
            td = "<td"
            if cell.numeric or cell.cls:
                td += f' class="{"num" if cell.numeric else ""}{" " + p(cell.cls) if cell.cls else ""}"'
            if cell.sort is not None:
                td += f' data-sort="{p(cell.sort)}"'
            if cell.title:
                td += f' title="{p(cell.title)}"'
            parts.append(f"{td}>{p(cell.text)}</td>")
        parts.append("</tr>\n")
        out.append("".join(parts))
    return markupsafe.Markup("".join(out))


def _as_float(value) -> float:
    """Jinja's ``|float``: 0.0 for what is no number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def page_inputs(subject, page=None) -> tuple[dict, object]:
    """The result and the page data (:class:`nsysdoc.pagedata.PageData`) a page is made of:
    ``subject`` is a result dict (its page data ``page``, or None: no timeline) or an object with
    ``to_dict()`` and ``page_data()`` (an ``nsysdoc.analysis.Analysis``: its page data, captured
    on the first call). The views read nothing else."""
    if isinstance(subject, dict):
        return subject, page
    if page is None and hasattr(subject, "page_data"):
        page = subject.page_data()
    return subject.to_dict(), page


def render_html(analysis, *, worst_step: bool = False, bytecode_dir=None, page=None) -> str:
    """The HTML report of a result and its page data (:func:`page_inputs`: an
    :class:`~nsysdoc.analysis.Analysis`, or the result dict and ``page``; findings from
    ``result["findings"]``). ``worst_step`` shows the slowest step's timeline instead of the
    median one; ``bytecode_dir``: see :func:`environment` (the rendered glossary is kept there too)."""
    result, page = page_inputs(analysis, page)
    ctx = build_context(result, page, worst_step=worst_step, glossary_dir=bytecode_dir)
    env = environment(str(bytecode_dir) if bytecode_dir is not None else None)
    html = env.get_template("report.html.j2").render(**ctx.__dict__)
    size = len(html.encode())
    if size > tlm.PAGE_MAX_BYTES and ctx.timeline_data is not None:
        # the rest of the page is large (100,000 steps): the timeline's data gets what is left
        from .tldata import timeline_data

        data_bytes = len(str(ctx.timeline_data).encode())
        again = timeline_data(page, ctx.findings, worst=worst_step,
                              max_bytes=data_bytes - (size - tlm.PAGE_MAX_BYTES))
        ctx.timeline_data = markupsafe.Markup(again[1]) if again is not None else None
        html = env.get_template("report.html.j2").render(**ctx.__dict__)
    return html


# ---------------------------------------------------------------------------------------------
# markdown
# ---------------------------------------------------------------------------------------------
def _display(value):
    """Jinja ``finalize``: every plain string a template prints is made visible and capped
    (Markup, i.e. our own HTML and |tojson output, is handled where it is made)."""
    if type(value) is str:  # ~30 k a page (issue 50's HTML cost): most are short ASCII, left as they are
        return value if len(value) <= MAX_DISPLAY_CHARS and value.isascii() else shorten(visible(value))
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return shorten(visible(value))
    return value


def _dumps(obj, **kwargs) -> str:
    return json.dumps(_json_strings(obj), **kwargs)
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|#!~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def _clean(text) -> str:
    """One line of untrusted text: escape sequences and control characters removed by the one
    terminal sanitiser (:func:`nsysdoc.outputs.terminal_text`: an OSC 52 string goes whole, not
    just its ESC), newlines folded."""
    return shorten(visible(re.sub(r"\s+", " ", terminal_text(text)).strip()))


def _md(text) -> str:
    """Untrusted text as literal markdown: specials backslash-escaped (no HTML, no links, no
    emphasis, safe inside table cells); URLs lose their '://' so nothing autolinks."""
    s = _MD_SPECIAL.sub(r"\\\1", _clean(text))
    return re.sub(r"(?i)\b([a-z][a-z0-9+.-]*):(?=//)", r"\1\\:", s).replace("www.", "www\\.")


def _code(text) -> str:
    """Untrusted text as a markdown code span: shown literally (no escapes inside a span), with
    backticks replaced and table pipes escaped."""
    return "`" + _clean(text).replace("`", "'").replace("|", "\\|") + "`"


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


_DISPATCH = "CPU dispatch slower than the GPU"


def _dispatch_md(w: dict) -> str:
    c, g = w.get("cpu_us_per_call"), w.get("gpu_us_per_call")
    wait = w.get("cpu_wait_us_per_call")
    waited = f", {fmt_num(wait, 1)} µs of it waiting" if is_num(wait) and wait > 0 else ""
    per = f" ({fmt_num(c, 1)} µs of CPU{waited} vs {fmt_num(g, 1)} µs of GPU per call)" if is_num(c) and is_num(g) else ""
    return _code(w.get("op") or "(no operator)") + per


def _where_md(w: dict) -> str:
    parts = [_code(w.get("op") or "(no operator)")]
    if w.get("backward_op") or w.get("via") == "enclosing range":
        parts.append(_md(backward_text(w)))
    if w.get("module"):
        parts.append(f"in {_md(w['module'])}")
    if w.get("frame"):
        parts.append(f"at {_code(w['frame'])}")
    share = fmt_pct(w.get("share_pct")) if is_num(w.get("share_pct")) else "—"
    ms = fmt_ms(w.get("ms")) if is_num(w.get("ms")) else "—"
    return " ".join(parts) + f" ({share}, {ms}/GPU)"


def _viewer_origin(page, r: dict) -> int | None:
    """Where trace viewers put 0 (``Trace.viewer_origin_ns``) for a PyTorch Profiler trace whose
    page data is at hand; None for nsys, or when only a result dict was given (its origin is unknown)."""
    if (r.get("source") or {}).get("tool") != "pytorch-profiler":
        return None
    origin = getattr(page, "viewer_origin_ns", None)
    return int(origin) if is_num(origin) else None


def _viewer_range(f: dict, origin: int) -> str | None:
    """'0.398056000 s -> 0.479176000 s (label)': a finding's first time range in trace-viewer seconds."""
    for t in f.get("time_ranges") or []:
        if isinstance(t, dict) and is_num(t.get("start_ns")) and is_num(t.get("end_ns")):
            label = f" ({_clean(t['label'])})" if t.get("label") else ""
            return f"{fmt_s(int(t['start_ns']) - origin)} → {fmt_s(int(t['end_ns']) - origin)}{label}"
    return None


#: where a PyTorch Profiler trace is opened to find a range (report.build.TRACE_VIEWERS)
_VIEWERS_MD = "ui.perfetto.dev or chrome://tracing (or TensorBoard's trace view)"


def render_markdown(analysis, *, max_findings: int = 10, max_operators: int = 10, page=None) -> str:
    """Markdown summary: verdict, headline numbers, top findings, skipped rules. Link-free.

    Accepts an ``Analysis`` or its result dict (and its page data ``page``: :func:`page_inputs`)."""
    r, page = page_inputs(analysis, page)
    v = verdict(r)
    src = r.get("source") or {}
    cap = r.get("capture") or {}
    origin = _viewer_origin(page, r)
    lines = [f"### nsysdoc: {_md(source_name(src.get('path')))}", "",
             f"**Verdict:** {_md(v.sentence)}", "", _md(v.detail), ""]
    if v.framing:
        lines += [_md(v.framing), ""]
    hs = headline(r)
    lines += ["| " + " | ".join(_md(h.label) for h in hs) + " |",
              "|" + "|".join("---:" for _ in hs) + "|",
              "| " + " | ".join(_md(h.value) for h in hs) + " |",
              "| " + " | ".join(_md(h.note) for h in hs) + " |", ""]
    findings = rank_findings(r.get("findings") or [], r)
    if findings:
        lines += [f"**Findings** ({len(findings)}, by severity, then cost):", "",
                  "| # | severity | finding | per step | in window | share |", "|---:|---|---|---:|---:|---:|"]
        for i, f in enumerate(findings[:max_findings], 1):
            if _no_cost(f):  # a finding whose cost rounds to nothing says so, not "0.000 ms"
                lines.append(f"| {i} | {_md(f.get('severity'))} | {_md(f.get('title') or f.get('rule'))} | "
                             "no measurable cost | | |")
                continue
            lines.append(f"| {i} | {_md(f.get('severity'))} | {_md(f.get('title') or f.get('rule'))} | "
                         f"{_md(fmt_ms(f.get('impact_ms_per_step')) if is_num(f.get('impact_ms_per_step')) else '—')} | "
                         f"{_md(fmt_ms(f.get('impact_ms')) if is_num(f.get('impact_ms')) else '—')} | "
                         f"{_md(fmt_pct(f.get('impact_pct')) if is_num(f.get('impact_pct')) else '—')} |")
        if len(findings) > max_findings:
            lines.append(f"| | | and {len(findings) - max_findings} more in the HTML report | | | |")
        lines.append("")
        # the PR-comment format: what each finding means and what to do about it
        for i, f in enumerate(findings[:max_findings], 1):
            lines += [f"**{i}. {_md(f.get('title') or f.get('rule'))}** ({_md(f.get('severity'))}, "
                      f"`{_md(f.get('rule'))}`)", "", _md(f.get("message") or ""), ""]
            where = [w for w in f.get("where") or [] if isinstance(w, dict) and w.get("via") != _DISPATCH][:3]
            if where:
                lines += ["- *Where:* " + "; ".join(_where_md(w) for w in where)]
            slow = [w for w in f.get("where") or [] if isinstance(w, dict) and w.get("via") == _DISPATCH]
            if slow:  # issue 47: operators whose CPU time per call exceeds their GPU time
                lines += [f"- *{_DISPATCH}:* " + "; ".join(_dispatch_md(w) for w in slow)]
            if f.get("where_note"):
                lines += [f"- *Where (capture):* {_md(f['where_note'])}"]
            wi = what_if_text(f, steps=bool((r.get("summary") or {}).get("step_count"))).strip()
            if wi:  # issue 48: the fix replayed on the dependency graph
                lines += [f"- *What-if:* {_md(wi)}"]
            if f.get("verify"):
                lines += [f"- *How to verify:* {_md(f['verify'])}"]
            if f.get("fix"):
                lines += [f"- *What to try:* {_md(f['fix'])}"]
            span = _viewer_range(f, origin) if origin is not None else None
            if span:
                lines += [f"- *Where to look:* open the trace in {_md(_VIEWERS_MD)} and go to {_md(span)} "
                          "(seconds from the trace's start)"]
            lines.append("")
    ops = (r.get("metrics") or {}).get("operators") or {}
    op_rows = [x for x in ops.get("rows") or [] if isinstance(x, dict)][:max_operators]
    if op_rows:
        lines += [f"**Operators** (top {len(op_rows)} by self GPU time, whole capture):", "",
                  "| operator | calls | self GPU (ms) | GPU total (ms) | GPU ops | top kernel | module | frame |",
                  "|---|---:|---:|---:|---:|---|---|---|"]
        for x in op_rows:
            lines.append(f"| {_md(_cut(str(x.get('name') or ''), 80))} | {_md(fmt_num(x.get('calls'), 0))} | "
                         f"{_md(fmt_num(x.get('self_gpu_ms'), 3))} | {_md(fmt_num(x.get('gpu_ms'), 3))} | "
                         f"{_md(fmt_num(x.get('kernels'), 0))} | {_md(_cut(str(x.get('top_kernel') or ''), 60))} | "
                         f"{_md(x.get('module') or '')} | {_md(x.get('frame') or '')} |")
        lines.append("")
    ran, counts, skipped = rule_statuses(r)
    if ran and skipped:
        lines.append("Rules that did not run: " + "; ".join(
            f"{_md(s.rule)}{' (broken rule)' if s.status == 'broken' else ''} ({_md(s.reason)})" for s in skipped) + ".")
        lines.append("")
    win = (cap.get("window") or {}).get("duration_ms")
    made_by = (f"PyTorch Profiler (Kineto) trace (schemaVersion {_md(src.get('schema_version') or 'unknown')})"
               if src.get("tool") == "pytorch-profiler" else f"nsys {_md(src.get('nsys_version') or 'unknown')}")
    facts = [made_by, f"{cap.get('device_count', 0)} device(s)",
             f"{(r.get('summary') or {}).get('step_count', 0)} steps" if cap.get("has_step_markers") else
             f"no step markers ({(r.get('summary') or {}).get('step_count', 0)} steps inferred from the repeating GPU work)"
             if cap.get("step_source") == "inferred" else "no step markers",
             f"analysis window {_md(fmt_ms(win))}" if is_num(win) else "no analysis window (no GPU activity)"]
    lines.append("Capture: " + ", ".join(facts) + ".")
    for w in cap.get("warnings") or []:
        lines.append(f"- {_md(w)}")
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------
# terminal
# ---------------------------------------------------------------------------------------------
def _ascii(text: str) -> str:
    return text.replace("—", "-").replace("–", "-").replace("·", "|").replace("→", "->").replace("µs", "us")


def _no_cost(f: dict) -> bool:
    """A finding whose measured cost rounds to nothing (printed it would read "0.000 ms")."""
    return is_num(f.get("impact_ms")) and f["impact_ms"] < 0.0005


def terminal_summary(analysis, html_path=None, *, max_findings: int = 5, page=None) -> str:
    """A few plain-text lines for the terminal: verdict, headline numbers, top findings (severity,
    title, impact), the report path. No colour codes; untrusted text has control characters removed.

    Accepts an ``Analysis`` or its result dict (and its page data ``page``: :func:`page_inputs`)."""
    r, page = page_inputs(analysis, page)
    v = verdict(r)
    src = r.get("source") or {}
    origin = _viewer_origin(page, r)
    out = [f"nsysdoc: {_clean(source_name(src.get('path')))}", f"Verdict: {_clean(v.sentence)}"]
    if v.detail:
        out.append(f"  {_clean(v.detail)}")
    if v.framing:
        out.append(f"  {_clean(v.framing)}")
    hs = headline(r)
    out.append("  " + " | ".join(f"{h.label} {h.value}" + ("" if h.raw is not None else f" ({h.note})")
                                 + (" (inferred steps)" if h.key == "step_time_ms_median" and h.raw is not None
                                    and "inferred" in h.note else "") for h in hs))
    findings = rank_findings(r.get("findings") or [], r)
    if findings:
        out.append(f"Findings ({len(findings)}):")
        for i, f in enumerate(findings[:max_findings], 1):
            imp = ""
            if _no_cost(f):
                imp = " - no measurable cost"
            elif is_num(f.get("impact_ms_per_step")):
                imp = f" - {fmt_ms(f['impact_ms_per_step'])}/step"
            elif is_num(f.get("impact_ms")):
                imp = f" - {fmt_ms(f['impact_ms'])}"
            out.append(f"  {i}. [{_clean(f.get('severity') or 'info').upper()}] {_clean(f.get('title') or f.get('rule'))}{imp}")
        if len(findings) > max_findings:
            out.append(f"  ... and {len(findings) - max_findings} more")
        span = _viewer_range(findings[0], origin) if origin is not None else None
        if span:
            out.append(f"  Where to look (finding 1): open the trace in {_VIEWERS_MD} and go to {span}")
    ran, counts, skipped = rule_statuses(r)
    if ran and skipped:
        names = ", ".join(_clean(s.rule) for s in skipped[:6])
        more = f" and {len(skipped) - 6} more" if len(skipped) > 6 else ""
        broken = sum(1 for s in skipped if s.status == "broken")
        what = f"{broken} broken, {len(skipped) - broken} skipped" if broken else "skipped"
        out.append(f"  ({len(skipped)} rule(s) did not run ({what}): {names}{more})")
    if html_path is not None:
        out.append(f"Report: {_clean(html_path)}")
    return _ascii("\n".join(out)) + "\n"


__all__ = ["render_html", "render_markdown", "terminal_summary", "environment"]
