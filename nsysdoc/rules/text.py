"""Rule message templates: ``{name}``, ``{name:spec}`` and optional ``[[ ... ]]`` segments.

* ``{name:.1f}`` and the other Python format specs;
* ``{name:time}``: a duration whose unit is in its name (``_ns``, ``_us``, ``_ms``, ``_s``),
  written with the unit that suits its size (``223.6 ms``, never ``223608.6 us``);
* ``{name:bytes}``: a byte count in binary units (``1.5 GiB``, ``24.0 MiB``);
* ``{name:count}``: a count or a count per step, mean or median: an integer when whole
  (``1,500``), else one decimal below 100 (``5.7``) and none from 100 on (``1,501``);
* ``[[ ... ]]``: an optional part, left out when a value in it is missing (a rule never prints
  ``n/a`` inside a sentence that way; a missing value outside such a part prints ``n/a``).
"""
from __future__ import annotations

import math
import re
import string

CUSTOM_SPECS = ("time", "bytes", "count")
OPTIONAL = re.compile(r"\[\[(.*?)\]\]", re.DOTALL)
_UNIT_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_UNIT_IN_NAME = re.compile(r"_(ns|us|ms|s)(?=_|$)")


def _unit(name: str) -> str | None:
    """The time unit a value's name carries (``idle_sync_ms`` and ``dtoh_ms_per_step_median``: ms)."""
    m = _UNIT_IN_NAME.search(name)
    return m.group(1) if m else None


def fields(template: str) -> list[tuple[str, str]]:
    """(name, spec) of every ``{...}`` field, optional segments included."""
    out = []
    for _, name, spec, conv in string.Formatter().parse(template.replace("[[", "").replace("]]", "")):
        if name is None:
            continue
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or conv:
            raise ValueError(f"field {{{name}}} is not a plain name (no attributes, indexes or conversions)")
        out.append((name, spec or ""))
    return out


#: Python's format-spec mini-language; width (group 1) and precision (group 2) are capped so that
#: a rule message can never ask for a gigabyte of padding or digits.
_SPEC = re.compile(r"^(?:.?[<>=^])?[+\- ]?z?#?0?(\d*)[,_]?(?:\.(\d+))?[bcdeEfFgGnosxX%]?$", re.S)
MAX_WIDTH = 200
MAX_PRECISION = 30


def check_spec(name: str, spec: str, is_text: bool) -> str | None:
    """Why ``{name:spec}`` cannot format this value, or None."""
    if spec == "time":
        if is_text or _unit(name) is None:
            return f"format spec 'time' needs a duration whose name carries _ns, _us, _ms or _s, not {{{name}}}"
        return None
    if spec in ("bytes", "count"):
        return f"format spec '{spec}' needs a number" if is_text else None
    m = _SPEC.match(spec)
    if not m:
        return f"format spec {spec[:20]!r} is not a Python format spec (e.g. .1f, ,.0f, >8)"
    if len(m.group(1) or "") > 3 or int(m.group(1) or 0) > MAX_WIDTH or len(m.group(2) or "") > 2 \
            or int(m.group(2) or 0) > MAX_PRECISION:
        return f"format spec {spec[:20]!r}: width is capped at {MAX_WIDTH} and precision at {MAX_PRECISION}"
    try:
        format("text" if is_text else 1.5, spec)
    except (ValueError, TypeError):
        return f"format spec {spec!r} does not fit {{{name}}}, which is {'text' if is_text else 'a number'}"
    return None


def duration(ns: float) -> str:
    """A duration in the unit that suits it."""
    a = abs(ns)
    if a < 1_000:
        return f"{ns:.0f} ns"
    if a < 1_000_000:
        return f"{ns / 1e3:.1f} us"
    if a < 1_000_000_000:
        v = ns / 1e6
        return f"{v:.2f} ms" if abs(v) < 10 else f"{v:,.1f} ms"
    return f"{ns / 1e9:,.2f} s"


def size(n: float) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= div:
            return f"{n / div:,.1f} {unit}"
    return f"{int(n)} B"


def count(n: float) -> str:
    """A count, or a count per step (a mean or median): ``1,500``, ``5.7``, ``1,501``."""
    r = round(n)
    if abs(n - r) < 1e-9 or abs(n) >= 100:
        return f"{r:,}"
    return f"{n:.1f}"


def _missing(val) -> bool:
    return val is None or (isinstance(val, float) and math.isnan(val))


def _one(name: str, spec: str, val) -> str:
    if _missing(val):
        return "n/a"
    if spec == "time" and isinstance(val, (int, float)) and not isinstance(val, bool):
        return duration(val * _UNIT_NS[_unit(name) or "ns"])
    if spec == "bytes" and isinstance(val, (int, float)) and not isinstance(val, bool):
        return size(val)
    if spec == "count" and isinstance(val, (int, float)) and not isinstance(val, bool):
        return count(val)
    try:
        out = format(val, spec or "")
    except (ValueError, TypeError):
        return str(val)
    return _not_up_to_100(val, spec, out)


_FIXED = re.compile(r"^,?\.(\d+)f$")


def _not_up_to_100(val, spec: str, out: str) -> str:
    """A number just under 100 never prints as 100 (``{x:.0f}%`` of 99.7 reads "100%": "1,800 of
    1,803 kernels: 100% are shorter than 10 us"): it is cut, not rounded, to the precision asked."""
    m = _FIXED.match(spec or "")
    if not m or isinstance(val, bool) or not isinstance(val, (int, float)) or not 99 <= val < 100:
        return out
    p = int(m.group(1))
    if float(out.replace(",", "")) < 100:
        return out
    return format(math.floor(val * 10 ** p) / 10 ** p, spec)


def render(template: str, env: dict) -> str:
    """Fill the template (see the module docstring)."""
    def optional(m: re.Match) -> str:
        part = m.group(1)
        if any(_missing(env.get(n)) for n, _ in fields(part)):
            return ""
        return part

    text = OPTIONAL.sub(optional, template)
    out = []
    for literal, name, spec, _ in string.Formatter().parse(text):
        out.append(literal)
        if name is not None:
            out.append(_one(name, spec or "", env.get(name)))
    # tidy the seams a left-out optional part leaves: double spaces, a space before . or ,
    joined = re.sub(r"[ \t]{2,}", " ", "".join(out))
    return re.sub(r" +([.,;])(?=\s|$)", r"\1", joined)
