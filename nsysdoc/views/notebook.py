"""Compact notebook displays (issue 49): what ``Report``/``Diff``/``Job._repr_html_`` show.

A few KB of HTML from the result dict: the verdict, the findings with severity, impact and
Where (the first rows), and the key numbers, with a hint how to get the full page
(``to_html()``; a ``file://`` link when a page was written). The full self-contained page is
~0.5-3 MB: embedding it in every display made notebooks heavy and slow. Every string from a
trace (kernel, operator, module, file names) is escaped here.
"""
from __future__ import annotations

import html
from pathlib import Path

#: findings listed (the rest are counted)
MAX_FINDINGS = 8
#: Where sites per finding
MAX_SITES = 2
#: characters of a name (a C++ kernel signature, an operator, a frame) before it is cut
MAX_NAME = 90
#: characters of the hover text (the full name, up to this; the JSON has it whole)
MAX_TITLE = 400

_STYLE = ("font-family:system-ui,-apple-system,Segoe UI,sans-serif;font-size:13px;line-height:1.4;"
          "max-width:980px")
_CELL = "padding:2px 8px;text-align:left;vertical-align:top;border-bottom:1px solid #eee"
_NUM = _CELL.replace("text-align:left", "text-align:right") + ";white-space:nowrap"
_SEV = {"critical": "#b3261e", "warning": "#a05a00", "info": "#555"}


def _e(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _cut(x, n: int = MAX_NAME) -> str:
    s = " ".join(str(x).split()) if x is not None else ""
    return s if len(s) <= n else s[: n - 1] + "…"


def _num(x, fmt: str, unit: str = "") -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or x != x:
        return "—"
    return f"{x:{fmt}}{unit}"


def _site(s: dict) -> str:
    parts = [p for p in (s.get("op"), s.get("module"), s.get("frame")) if p]
    if not parts:
        return ""
    share = s.get("share_pct")
    tail = f" ({share:.0f}%)" if isinstance(share, (int, float)) and not isinstance(share, bool) else ""
    full = " · ".join(str(p) for p in parts)
    return f'<span title="{_e(_cut(full, MAX_TITLE))}">{_e(_cut(full))}</span>{_e(tail)}'


def _where(f: dict) -> str:
    sites = [x for x in (_site(s) for s in (f.get("where") or [])[:MAX_SITES] if isinstance(s, dict)) if x]
    return "<br>".join(sites) or "—"


def _severity(sev) -> str:
    color = _SEV.get(str(sev), "#555")
    return f'<span style="color:{color};font-weight:600">{_e(sev or "—")}</span>'


def _numbers(pairs: list[tuple[str, str]]) -> str:
    return "<div>" + " · ".join(f"{_e(k)} <b>{_e(v)}</b>" for k, v in pairs) + "</div>"


def _more(n_all: int, n_shown: int, what: str) -> str:
    return f'<div style="color:#666">and {n_all - n_shown} more {_e(what)}</div>' if n_all > n_shown else ""


def _hint(call: str, page_path: str | None) -> str:
    link = ""
    if page_path:
        try:
            uri = Path(page_path).resolve().as_uri()
            link = f' · <a href="{_e(uri)}" target="_blank" rel="noopener">open the written page</a>'
        except (OSError, ValueError):
            link = ""
    return (f'<div style="color:#666;margin-top:6px">The full page: <code>{_e(call)}</code> (write it to an '
            f'.html file and open it in a browser){link}</div>')


def _wrap(title: str, body: str) -> str:
    return (f'<div class="nsysdoc-summary" style="{_STYLE}"><div style="color:#666">{_e(title)}</div>'
            f"{body}</div>")


def _findings_table(result: dict, columns) -> str:
    """The findings of a report or a job as one table (issue 51: the two summaries each wrote
    their own): severity, the finding (title and rule), then ``columns`` (header, cell style, the
    cell's HTML of a finding); the first :data:`MAX_FINDINGS`, the rest counted; "" without any."""
    findings = [f for f in result.get("findings") or [] if isinstance(f, dict)]
    if not findings:
        return ""
    rows = "".join(
        f'<tr><td style="{_CELL}">{_severity(f.get("severity"))}</td>'
        f'<td style="{_CELL}">{_e(f.get("title"))} <span style="color:#888">{_e(f.get("rule"))}</span></td>'
        + "".join(f'<td style="{style}">{cell(f)}</td>' for _, style, cell in columns) + "</tr>"
        for f in findings[:MAX_FINDINGS])
    heads = "".join(f'<th style="{style}">{head}</th>' for head, style, _ in columns)
    return (f'<table style="border-collapse:collapse;margin-top:6px"><thead><tr>'
            f'<th style="{_CELL}">severity</th><th style="{_CELL}">finding</th>{heads}'
            f'</tr></thead><tbody>{rows}</tbody></table>' + _more(len(findings), MAX_FINDINGS, "findings"))


def report_summary_html(result: dict, page_path: str | None = None) -> str:
    """A report's compact display: verdict, key numbers, the first findings with Where."""
    verdict = result.get("verdict") or {}
    s = result.get("summary") or {}
    src = Path(str((result.get("source") or {}).get("path") or "")).name
    numbers = _numbers([
        ("median step", _num(s.get("step_time_ms_median"), ",.2f", " ms")),
        ("steps", _num(s.get("step_count"), ",d")),
        ("GPU busy", _num(s.get("gpu_busy_pct"), ".1f", "%")),
        ("kernels", _num(s.get("kernel_count"), ",d")),
    ])
    table = _findings_table(result, (
        ("impact per step", _NUM, lambda f: _num(f.get("impact_ms_per_step"), ",.2f", " ms")),
        ("of the step", _NUM, lambda f: _num(f.get("impact_pct"), ".1f", "%")),
        ("Where", _CELL, _where)))
    head = f'<div style="font-size:15px;margin:4px 0"><b>{_e(verdict.get("sentence") or "No verdict.")}</b></div>'
    return _wrap(f"nsysdoc report: {src}", head + numbers + (table or "<div>No findings.</div>")
                 + _hint("report.to_html()", page_path))


def job_summary_html(result: dict, page_path: str | None = None) -> str:
    """A job's compact display: verdict, ranks, the straggler, the rolled-up findings."""
    verdict = result.get("verdict") or {}
    numbers = _numbers([
        ("ranks", _num(result.get("rank_count"), ",d")),
        ("failed", _num(result.get("failed_count"), ",d")),
        ("median step", _num(result.get("step_time_ms_median"), ",.2f", " ms")),
    ])
    st = result.get("straggler")
    straggler = ""
    if isinstance(st, dict):
        straggler = (f'<div>Straggler: rank <b>{_e(st.get("rank"))}</b> · others wait '
                     f'{_num(st.get("wait_ms_per_step"), ",.2f", " ms")} per step</div>')
    table = _findings_table(result, (
        ("ranks", _NUM, lambda f: f'{_e(f.get("rank_count"))} of {_e(result.get("rank_count"))}'),
        ("median impact per step", _NUM, lambda f: _num(f.get("impact_ms_per_step_median"), ",.2f", " ms"))))
    warnings = [w for w in result.get("warnings") or [] if isinstance(w, str)]
    warn = "".join(f'<div style="color:#a05a00">{_e(_cut(w, 300))}</div>' for w in warnings[:3]) + \
        _more(len(warnings), 3, "warnings")
    head = f'<div style="font-size:15px;margin:4px 0"><b>{_e(verdict.get("sentence") or "No verdict.")}</b></div>'
    return _wrap("nsysdoc job", head + numbers + straggler + table + warn + _hint("job.to_html()", page_path))


def diff_summary_html(result: dict) -> str:
    """A diff's compact display: headline, sentence, the kernels that moved most."""
    kernels = [k for k in result.get("kernels") or [] if isinstance(k, dict)]
    rows = "".join(
        f'<tr><td style="{_CELL}"><span title="{_e(_cut(k.get("name"), MAX_TITLE))}">{_e(_cut(k.get("name"), 70))}</span></td>'
        f'<td style="{_CELL}">{_e(k.get("status"))}</td>'
        f'<td style="{_NUM}">{_num(k.get("base_ms_per_step"), ",.3f")}</td>'
        f'<td style="{_NUM}">{_num(k.get("candidate_ms_per_step"), ",.3f")}</td>'
        f'<td style="{_NUM}">{_num(k.get("delta_ms_per_step"), "+,.3f")}</td></tr>' for k in kernels[:5])
    unit = _e(result.get("per") or "step")
    table = ("" if not kernels else
             f'<table style="border-collapse:collapse;margin-top:6px"><thead><tr>'
             f'<th style="{_CELL}">kernel</th><th style="{_CELL}">status</th>'
             f'<th style="{_NUM}">base ms per {unit}</th><th style="{_NUM}">candidate</th>'
             f'<th style="{_NUM}">change</th></tr></thead><tbody>{rows}</tbody></table>'
             + _more(len(kernels), 5, "kernels"))
    head = (f'<div style="font-size:15px;margin:4px 0"><b>{_e(result.get("headline"))}</b></div>'
            f'<div>{_e(result.get("sentence"))}</div>')
    return _wrap("nsysdoc diff", head + table + _hint("diff.to_html()", None))
