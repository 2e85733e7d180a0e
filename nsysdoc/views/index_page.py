"""The ``index.html`` of a folder report (``nsysdoc report a.sqlite b.sqlite -o out/``): one row
per input with its verdict, its worst finding severity and a relative link to its page, or the
one-line error of an input that failed. Same safety as the report page: Jinja autoescaping (every
file name and message is trace- or user-controlled), a Content-Security-Policy that lets nothing
load and runs no script, the stylesheet inlined. Pure: returns a string."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from markupsafe import Markup

from ..version import __version__
from .assets import _static, path_href

from ..severity import SEVERITY_RANK as _SEVERITY_RANK  # noqa: E402

#: no script at all: nothing to allow but the inlined style
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{ csp }}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="nsysdoc {{ nsysdoc_version }}">
<meta name="referrer" content="no-referrer">
<title>nsysdoc — {{ rows|length }} report{{ '' if rows|length == 1 else 's' }}</title>
<style>{{ css }}
td.sev-critical { color: var(--crit); font-weight: 600; } td.sev-warning { color: var(--warn); font-weight: 600; }
td.failed { color: var(--crit); }
td.file, td.file a { overflow-wrap: break-word; word-break: normal; }
</style>
</head>
<body>
<header class="page-head">
<h1>nsysdoc: {{ rows|length }} input{{ '' if rows|length == 1 else 's' }}{% if failed %} <span class="src">({{ failed }} failed)</span>{% endif %}</h1>
</header>
<main>
<section id="reports" aria-labelledby="reports-title">
<h2 id="reports-title">Reports</h2>
<table class="data" data-testid="index">
<thead><tr><th>Input</th><th>Verdict</th><th>Worst severity</th><th>Report</th></tr></thead>
<tbody>
{%- for r in rows %}
<tr>
<td class="src file">{{ r.input|wrap_points }}</td>
{%- if r.error %}
<td class="failed" colspan="2">failed: {{ r.error }}</td><td></td>
{%- else %}
<td class="file">{{ r.verdict|wrap_points }}</td>
<td class="sev-{{ r.severity }}">{{ r.severity }}</td>
<td class="file"><a href="{{ r.link }}">{{ r.link_text|wrap_points }}</a></td>
{%- endif %}
</tr>
{%- endfor %}
</tbody>
</table>
<p class="note">Worst severity: the highest severity among an input's findings (critical, warning, info), or none.</p>
</section>
</main>
</body>
</html>
"""


@dataclass
class IndexRow:
    input: str
    verdict: str = ""
    severity: str = "none"
    link: str = ""
    link_text: str = ""
    error: str = ""


def index_row(path: str, result: dict | None, page: Path | None, folder: Path, error: str | None = None) -> IndexRow:
    """One row: an input and its result (or its error), its page linked relative to ``folder``."""
    if error is not None or result is None:
        return IndexRow(input=str(path), error=str(error or "no report"))
    v = result.get("verdict") or {}
    sevs = [f.get("severity") for f in result.get("findings") or [] if f.get("severity") in _SEVERITY_RANK]
    worst = max(sevs, key=_SEVERITY_RANK.get) if sevs else "none"
    rel = ""
    if page is not None:
        rel = Path(os.path.relpath(Path(page).resolve(), Path(folder).resolve())).as_posix()
    # a file name may hold ':', '#', '?' or '%': quoted, the link still names the file, never a scheme
    return IndexRow(input=str(path), verdict=str(v.get("sentence") or v.get("status") or ""), severity=worst,
                    link=path_href(rel), link_text=Path(rel).name)


#: issue 49: where a file name may wrap (after these), never inside a name part ("…sqlit e")
WRAP_AFTER = "/\\_-."


def wrap_points(text) -> Markup:
    """``text`` escaped, with ``<wbr>`` after each path separator, ``_``, ``-`` and ``.``, so that a
    long file name wraps between its parts (with ``overflow-wrap: break-word`` only a part longer
    than the column breaks inside)."""
    out = []
    for ch in str(text):
        out.append(str(Markup.escape(ch)))
        if ch in WRAP_AFTER:
            out.append("<wbr>")
    return Markup("".join(out))


def render_index_html(rows: list[IndexRow]) -> str:
    from .render import environment

    env = environment().overlay()
    env.filters["wrap_points"] = wrap_points
    return env.from_string(_TEMPLATE).render(rows=rows, failed=sum(1 for r in rows if r.error), csp=CSP,
                                             css=Markup(_static("report.css")), nsysdoc_version=__version__)
