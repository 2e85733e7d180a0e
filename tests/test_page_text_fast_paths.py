"""Issue 50's HTML cost: the page's two text passes keep short ASCII strings (and numbers inside
lists and dicts) without a call. These tests pin that the shortcuts change nothing: every string a
template prints (Jinja's ``finalize``, ``views.render._display``) and every string of the embedded
JSON (``views.text._json_strings``) is still made visible (bidi controls and invisible characters
written out) and capped at ``MAX_DISPLAY_CHARS`` (2,000) characters.

Expected values by hand: ``visible`` writes U+202E as ``<U+202E>``; ``shorten`` keeps the first
2,000 characters and adds ``... [N more characters]`` for the N beyond.
"""
from __future__ import annotations

from markupsafe import Markup

from nsysdoc.views.render import _display
from nsysdoc.views.text import MAX_DISPLAY_CHARS, _json_strings

LONG_ASCII = "k" * 2003                       # 3 characters over the cap
CUT = "k" * 2000 + "... [3 more characters]"
BIDI = "loss\u202e"                           # short, non-ASCII, with a bidi control
SHOWN = "loss<U+202E>"


def test_the_cap_is_2000_characters():
    assert MAX_DISPLAY_CHARS == 2000


def test_display_keeps_short_ascii_and_still_cuts_and_shows_the_rest():
    assert _display("aten::mm") == "aten::mm"
    assert _display("k" * 2000) == "k" * 2000          # exactly at the cap: kept
    assert _display(LONG_ASCII) == CUT                 # ASCII but long: cut
    assert _display(BIDI) == SHOWN                     # short but not ASCII: written out
    assert _display("12 µs") == "12 µs"                # non-ASCII without invisible characters: kept
    m = Markup("<b>\u202e</b>")                        # our own HTML: never touched
    assert _display(m) is m
    assert _display(3.5) == 3.5 and _display(None) is None


def test_embedded_json_keeps_numbers_and_short_ascii_and_still_shows_and_cuts_nested_strings():
    data = {"s": [0, 5, 7], "names": ["mm", BIDI, LONG_ASCII], "x": {"1": [[2, 30]]}, "ok": True,
            "none": None, "f": 0.25, "deep": {"t": (BIDI,)}, "title": BIDI, "label": "step 3"}
    out = _json_strings(data)
    assert out == {"s": [0, 5, 7], "names": ["mm", SHOWN, CUT], "x": {"1": [[2, 30]]}, "ok": True,
                   "none": None, "f": 0.25, "deep": {"t": [SHOWN]}, "title": SHOWN, "label": "step 3"}
    assert _json_strings(LONG_ASCII) == CUT and _json_strings(BIDI) == SHOWN


# the loops the step_bars and table_rows filters replaced (issue 50), kept here verbatim: the
# filters must print the very bytes these print, through the same environment
_OLD_BARS = ('{% for b in c.bars %}<g class="bar{% if b.mark %} mark-{{ b.mark }}{% endif %}"><title>{{ b.title }}</title>'
             '{% for s in b.segments %}<rect x="{{ b.x }}" y="{{ s.y }}" width="{{ b.w }}" height="{{ s.h }}" '
             'class="{{ s.cls }}"><title>{{ s.title }}</title></rect>{% endfor %}{% if b.mark %}<text class="mark" '
             'x="{{ b.cx }}" y="{{ b.top|float - 3 }}">{{ b.mark }}</text>{% endif %}{% if b.label %}<text class="xtick" '
             'x="{{ b.cx }}" y="{{ c.plot_bottom + 14 }}">{{ b.label }}</text>{% endif %}</g>\n{% endfor -%}')
_OLD_ROWS = ('{% for row in t.rows %}<tr>{% for cell in row %}<td{% if cell.numeric or cell.cls %} class="{% if '
             'cell.numeric %}num{% endif %}{% if cell.cls %} {{ cell.cls }}{% endif %}"{% endif %}{% if cell.sort is '
             'not none %} data-sort="{{ cell.sort }}"{% endif %}{% if cell.title %} title="{{ cell.title }}"{% endif %}>'
             '{{ cell.text }}</td>{% endfor %}</tr>\n{% endfor %}')
HOSTILE = ['a"b', "x'y", "<script>&amp;", BIDI, LONG_ASCII, "é" * 2001, "", "1.25", "p · q"]


def test_step_bars_and_table_rows_print_what_the_template_loops_printed():
    from nsysdoc.views.context import Bar, BarSegment, Cell, StepChart, Table
    from nsysdoc.views.render import environment

    env = environment()
    bars = [Bar(x=v, w="3.5", cx=v, top=top, label=label, title=v, mark=mark,
                segments=[BarSegment(y=v, h="1.00", cls=v, title=v), BarSegment(y="2", h=v, cls="c-x", title=BIDI)])
            for v in HOSTILE for top, label, mark in (("69.12", "0", "median"), ("bad", "", ""), ("7", v, v))]
    chart = StepChart(title="t", width=960, height=250, plot_left=58, plot_bottom=208, bars=bars, yticks=[],
                      note="", aria="")
    assert env.from_string("{{ c|step_bars }}").render(c=chart) == env.from_string(_OLD_BARS).render(c=chart)
    rows = [[Cell(v, sort, numeric, cls, title) for sort in (None, 0, 1.5, v, float("nan"))
             for numeric in (False, True) for cls in ("", v) for title in ("", v)] for v in HOSTILE]
    table = Table(id="t", title="t", columns=[], rows=rows)
    got = env.from_string("{{ t|table_rows }}").render(t=table)
    assert got == env.from_string(_OLD_ROWS).render(t=table)
    assert "&#34;" in got and "&lt;U+202E&gt;" in got and "... [3 more characters]" in got


def test_the_glossary_is_rendered_once_per_text_and_kept(tmp_path, monkeypatch):
    """Issue 50: the page's glossary (~15 ms to render) is kept beside the compiled templates,
    under the hash of the glossary text and of its renderer: the same bytes, rendered once."""
    from nsysdoc.views import glossary as G

    fresh = G.glossary_html()
    assert G.glossary_html_kept(None) == fresh
    assert G.glossary_html_kept(tmp_path) == fresh                  # rendered, then written
    kept = list(tmp_path.glob("glossary-*.html"))
    assert len(kept) == 1 and kept[0].read_bytes() == str(fresh).encode("utf-8")
    monkeypatch.setattr(G, "glossary_html", lambda: 1 / 0)         # never rendered again
    got = G.glossary_html_kept(tmp_path)
    assert got == fresh and isinstance(got, Markup)
    monkeypatch.undo()
    monkeypatch.setattr(G, "glossary_source", lambda: "# Glossary\n\n**Other** text.")
    monkeypatch.setattr(G, "glossary_html", lambda: Markup("<p>other</p>"))
    assert G.glossary_html_kept(tmp_path) == "<p>other</p>"          # another text: another file
    assert len(list(tmp_path.glob("glossary-*.html"))) == 2
    assert G.glossary_html_kept(tmp_path / "missing" / "folder") == "<p>other</p>"  # unwritable: no file, no error
