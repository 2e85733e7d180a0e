"""Untrusted text as the pages show it: bidi controls and invisible characters written out, long
texts cut, and the same for every string of data embedded as JSON. Imports nothing else of the
views, so every renderer (the page, the timeline's data) can use it."""
from __future__ import annotations

import re

#: Bidirectional controls and invisible characters: a kernel name or NVTX text holding U+202E
#: could make a report read differently from what it says, so they are shown as ``<U+202E>``.
_INVISIBLE = re.compile("[\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069"
                        "\u3164\ufeff\ufff9-\ufffb]")
#: The longest single text a page shows (a hostile 1 MB kernel name is cut, with the count).
MAX_DISPLAY_CHARS = 2000


def visible(text: str) -> str:
    """``text`` with bidi controls and invisible characters written out as ``<U+XXXX>``."""
    if text.isascii():  # every character of _INVISIBLE is above U+00AC (a page prints ~30 k texts)
        return text
    return _INVISIBLE.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


def shorten(text: str, limit: int = MAX_DISPLAY_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit:,} more characters]"


#: values embedded as they are (exact types)
_AS_IS = frozenset((int, float, bool, type(None)))


def _json_strings(obj):
    """Strings in data embedded as JSON: visible and capped like text."""
    t = type(obj)  # exact types first: the embedded data holds ~100 k numbers, dicts and lists
    if t in _AS_IS:
        return obj
    if t is str and len(obj) <= MAX_DISPLAY_CHARS and obj.isascii():  # visible and short already
        return obj
    # a number inside a dict or list is kept without a call (issue 50's HTML cost: the timeline's
    # span columns are long lists of ints)
    if t is dict:
        return {k: v if type(v) in _AS_IS else _json_strings(v) for k, v in obj.items()}
    if t is list:
        return [v if type(v) in _AS_IS else _json_strings(v) for v in obj]
    if isinstance(obj, str):
        return shorten(visible(obj))
    if isinstance(obj, dict):
        return {k: _json_strings(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_strings(v) for v in obj]
    return obj
