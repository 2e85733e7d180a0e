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
