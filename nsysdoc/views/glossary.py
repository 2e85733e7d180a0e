"""The glossary shipped inside the package, rendered to HTML for the report's last section.

``nsysdoc/views/glossary.md`` is a byte-for-byte copy of ``docs/glossary.md`` (a test fails when
they drift), read with :mod:`importlib.resources` so an installed wheel works offline. The
markdown is rendered by a small renderer for the subset the glossary uses (headings, paragraphs,
``-`` lists with indented continuation lines, pipe tables, inline code, ``**bold**``, ``*em*``,
``[text](url)`` rendered as its text only: the page links nowhere). Everything is HTML-escaped.

Each bold term gets an anchor ``glossary-<slug>`` (first occurrence), so numbers elsewhere in the
page link to their definition; :func:`definition` extracts a term's definition as plain text for
tooltips.
"""
from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files

from markupsafe import Markup, escape

ANCHOR_PREFIX = "glossary-"


@lru_cache(maxsize=1)
def glossary_source() -> str:
    """The in-package copy of ``docs/glossary.md``."""
    return (files("nsysdoc.views") / "glossary.md").read_text(encoding="utf-8")


_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def slug(text: str) -> str:
    s = _NOT_SLUG.sub("-", text.lower()).strip("-")
    return s or "term"


def anchor(term: str) -> str:
    """The HTML id of a glossary term or heading."""
    return ANCHOR_PREFIX + slug(term)


_CODE = re.compile(r"(`+)(.+?)\1")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_EM = re.compile(r"(?<![\*\w])\*(?!\s)([^*]+?)(?<!\s)\*(?![\*\w])")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
# the block patterns, compiled once: the page parses the 100 kB glossary on every run (issue 50's
# HTML cost: re.match(pattern, line) looked each one up in re's cache for every line)
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_ITEM = re.compile(r"^[-*]\s+")
_RULE_CELL = re.compile(r":?-+:?")
_BLOCK_START = re.compile(r"^(#{1,6}\s|[-*]\s|\s*\|)")
_TAG = re.compile(r"<[^>]+>")
_CODE_MARK = re.compile(r"\x00\d+\x00")
_CODE_REF = re.compile(r"\x00(\d+)\x00")
_MARKS = re.compile(r"[`*]")


def _inline(text: str, used: set[str]) -> str:
    """Inline markdown -> escaped HTML."""
    codes: list[str] = []

    def keep_code(m: re.Match) -> str:
        codes.append(f"<code>{escape(m.group(2).strip())}</code>")
        return f"\x00{len(codes) - 1}\x00"

    text = _CODE.sub(keep_code, text)
    html = str(escape(text))
    html = _LINK.sub(lambda m: m.group(1), html)

    def bold(m: re.Match) -> str:
        inner = m.group(1)
        plain = _CODE_MARK.sub("", _TAG.sub("", inner))
        a = anchor(plain)
        if a in used or not plain.strip():
            return f"<strong>{inner}</strong>"
        used.add(a)
        return f'<strong class="term" id="{a}">{inner}</strong>'

    html = _BOLD.sub(bold, html)
    html = _EM.sub(r"<em>\1</em>", html)
    return _CODE_REF.sub(lambda m: codes[int(m.group(1))], html)


def _split_row(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    cells, cur, in_code = [], "", False
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "`":
            in_code = not in_code
        if ch == "\\" and i + 1 < len(line) and line[i + 1] == "|":
            cur += "|"
            i += 2
            continue
        if ch == "|" and not in_code:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
        i += 1
    cells.append(cur.strip())
    return cells


def render_markdown_subset(text: str, *, heading_offset: int = 1, used: set[str] | None = None) -> Markup:
    """Render the glossary's markdown subset to HTML (escaped; no outgoing links).

    ``heading_offset`` shifts heading levels (``#`` -> ``h2`` with the default 1).
    """
    used = set() if used is None else used
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        m = _HEADING.match(line)
        if m:
            level = min(6, len(m.group(1)) + heading_offset)
            title = m.group(2).strip()
            a = anchor(_MARKS.sub("", title))
            attr = ""
            if a not in used:
                used.add(a)
                attr = f' id="{a}"'
            out.append(f"<h{level}{attr}>{_inline(title, used)}</h{level}>")
            i += 1
            continue
        if line.lstrip().startswith("|"):
            rows = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(lines[i])
                i += 1
            cells = [_split_row(r) for r in rows]
            head, body = cells[0], [c for c in cells[1:] if not all(_RULE_CELL.fullmatch(x or "-") for x in c)]
            out.append("<table class=\"glossary-table\"><thead><tr>" +
                       "".join(f"<th>{_inline(c, used)}</th>" for c in head) + "</tr></thead><tbody>" +
                       "".join("<tr>" + "".join(f"<td>{_inline(c, used)}</td>" for c in r) + "</tr>" for r in body) +
                       "</tbody></table>")
            continue
        if _ITEM.match(line):
            items: list[str] = []
            while i < len(lines) and (_ITEM.match(lines[i]) or (lines[i].startswith("  ") and items)):
                if _ITEM.match(lines[i]):
                    items.append(_ITEM.sub("", lines[i]))
                else:
                    items[-1] += " " + lines[i].strip()
                i += 1
            out.append("<ul>" + "".join(f"<li>{_inline(it, used)}</li>" for it in items) + "</ul>")
            continue
        para = []
        while i < len(lines) and lines[i].strip() and not _BLOCK_START.match(lines[i]):
            para.append(lines[i].strip())
            i += 1
        out.append(f"<p>{_inline(' '.join(para), used)}</p>")
    return Markup("\n".join(out))


def _plain(md: str) -> str:
    md = _LINK.sub(lambda m: m.group(1), md)
    md = re.sub(r"\*\*(.+?)\*\*", r"\1", md)
    md = re.sub(r"(?<![\*\w])\*([^*]+?)\*", r"\1", md)
    md = _CODE.sub(lambda m: m.group(2), md)
    return re.sub(r"\s+", " ", md).strip()


@lru_cache(maxsize=4)
def _blocks(text: str) -> tuple[str, ...]:
    """Paragraphs and list items, continuation lines joined (parsed once per text: the page and
    the terminal summary look up about ten definitions)."""
    blocks: list[str] = []
    cur: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#") or line.lstrip().startswith("|"):
            if cur:
                blocks.append(" ".join(cur))
                cur = []
            continue
        if _ITEM.match(line):
            if cur:
                blocks.append(" ".join(cur))
            cur = [_ITEM.sub("", line)]
        else:
            cur.append(line.strip())
    if cur:
        blocks.append(" ".join(cur))
    return tuple(blocks)


def definition(term: str, text: str | None = None) -> str:
    """Plain-text definition of a bold glossary term: from ``**term**`` to the next bold term that
    starts a sentence, or the end of its paragraph / list item. Empty when the term is absent."""
    text = glossary_source() if text is None else text
    needle = f"**{term}**"
    for block in _blocks(text):
        pos = block.find(needle)
        if pos < 0:
            continue
        rest = block[pos:]
        nxt = re.search(r"(?<=[.:;])\s+\*\*(?!or\*\*)", rest[len(needle):])
        if nxt:
            rest = rest[:len(needle) + nxt.start()]
        return _plain(rest)
    return ""


@lru_cache(maxsize=1)
def glossary_html() -> Markup:
    """The whole glossary as HTML (its top heading dropped: the page has its own)."""
    src = glossary_source()
    lines = src.splitlines()
    if lines and lines[0].startswith("# "):
        src = "\n".join(lines[1:])
    return render_markdown_subset(src, heading_offset=1)


def glossary_html_kept(folder=None) -> Markup:
    """:func:`glossary_html`, kept in ``folder`` (the private folder of the compiled templates,
    :func:`nsysdoc.cache.templates_dir`; None: rendered now) under the hash of the glossary and of
    this renderer's source, so it is rendered once per glossary text, not on every page (issue 50:
    ~15 ms a page). A file that cannot be read or written costs speed only."""
    if folder is None:
        return glossary_html()
    import hashlib
    from pathlib import Path

    try:
        key = hashlib.sha256(glossary_source().encode("utf-8") + b"\0" + Path(__file__).read_bytes()).hexdigest()[:32]
    except OSError:
        return glossary_html()
    path = Path(folder) / f"glossary-{key}.html"
    try:
        return Markup(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        pass
    html = glossary_html()
    from ..errors import OutputError, UsageError
    from ..outputs import write_text_atomic  # (a random temporary name, no link followed)

    try:
        write_text_atomic(path, str(html), "the kept glossary", follow_links=False)
    except (OutputError, UsageError, OSError):
        pass
    return html


def glossary_sections_html(*titles: str) -> Markup:
    """The glossary's ``## `` sections whose heading starts with one of ``titles``, as HTML."""
    parts, keep = [], False
    for line in glossary_source().splitlines():
        if line.startswith("## "):
            keep = any(line[3:].startswith(t) for t in titles)
        elif line.startswith("# "):
            keep = False
        if keep:
            parts.append(line)
    return render_markdown_subset("\n".join(parts), heading_offset=1)
