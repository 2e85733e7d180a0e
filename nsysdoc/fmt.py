"""Number formatting shared by the report, the terminal summary and the verdict sentence.

Units follow the glossary: durations in ms (µs below 1 ms where it reads better), percentages with
one decimal, bytes in binary units (KiB/MiB/GiB), timestamps in seconds with ns precision.
"""
from __future__ import annotations

import math
from pathlib import PurePath


# ---------------------------------------------------------------------------------------------
def is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and not (isinstance(x, float) and
                                                                            (math.isnan(x) or math.isinf(x)))


def fmt_num(x, digits: int = 1) -> str:
    if not is_num(x):
        return "—" if x is None else str(x)
    if isinstance(x, int) or float(x).is_integer() and abs(x) >= 1000:
        return f"{int(x):,}"
    return f"{x:,.{digits}f}"


def fmt_ms(x, digits: int | None = None) -> str:
    if not is_num(x):
        return "n/a"
    if digits is None:
        digits = 3 if abs(x) < 0.1 else 2 if abs(x) < 10 else 1 if abs(x) < 1000 else 0
    return f"{x:,.{digits}f} ms"


def fmt_pct(x, digits: int = 1) -> str:
    return f"{x:.{digits}f}%" if is_num(x) else "n/a"


def fmt_us(x) -> str:
    if not is_num(x):
        return "n/a"
    return f"{x:,.1f} µs" if abs(x) < 1000 else f"{x / 1000:,.2f} ms"


def fmt_bytes(n) -> str:
    if not is_num(n):
        return "n/a"
    n = float(n)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:,.1f} {unit}"
    return f"{int(n)} B"


def fmt_dur_ns(ns) -> str:
    """A duration given in ns, in the unit that suits it."""
    if not is_num(ns):
        return "n/a"
    if abs(ns) < 1_000:
        return f"{int(ns)} ns"
    if abs(ns) < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    return fmt_ms(ns / 1e6)


def fmt_s(ns) -> str:
    """Seconds with ns precision (as typed into the Nsight Systems GUI)."""
    if not is_num(ns):
        return "n/a"
    ns = int(ns)
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1_000_000_000}.{ns % 1_000_000_000:09d} s"


def fmt_value(v) -> str:
    """An evidence cell: numbers compact, None as a dash, anything else as text."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10_000 else str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return "—"
        if v.is_integer() and abs(v) < 1e15:
            return f"{int(v):,}" if abs(v) >= 10_000 else str(int(v))
        return f"{v:,.4g}" if abs(v) < 1e-3 or abs(v) >= 1e6 else f"{round(v, 3):,}"
    return str(v)


def source_name(path: str | None) -> str:
    if not path:
        return "(unknown capture)"
    return PurePath(str(path)).name or str(path)
