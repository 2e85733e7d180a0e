"""What ``nsysdoc report -f perfetto`` exports: the analysis window, or ``--range START_S:END_S``
or ``--steps median,worst,N,N-M`` (docs/perfetto.md, "What is selected"), as a
:class:`Selection` of disjoint ``[lo, hi)`` intervals on the capture's timeline.

Split from ``views/perfetto.py`` (issue 51): choosing the time is apart from writing the events;
the command line checks the options with :func:`check_export_options` before any capture is
read, and :func:`selection_for` resolves them against an analysis' steps and window.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from ..assembly.perfetto_rows import time_origin_ns


@dataclass
class Selection:
    """Disjoint, sorted ``[lo, hi)`` intervals (ns on the capture's timeline) and what chose them."""

    intervals: list
    kind: str                  # "window", "range" or "steps"
    #: the analysis window itself: operations at its end count as the analysis counts them
    window: bool = False

    def ops_mask(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        m = np.zeros(len(start), dtype=bool)
        for lo, hi in self.intervals:
            m |= (start >= lo) & (start < hi)
            if self.window:  # nsysdoc.engine.slices.in_window
                m |= (start == hi) & (end == hi) if hi > lo else (start == lo)
        return m

    @property
    def lo(self) -> int:
        return self.intervals[0][0]

    @property
    def hi(self) -> int:
        return self.intervals[-1][1]


def parse_range(text: str, origin_ns: int = 0) -> tuple[int, int]:
    """``START_S:END_S`` (seconds on the capture's timeline, as the page prints them; either side
    may be empty: the capture's start or end) as ns ``(lo, hi)``."""
    parts = str(text).split(":")
    if len(parts) != 2:
        raise UsageError(f"--range {text!r}: expected START_S:END_S (seconds, e.g. 1.25:1.40)")
    vals = []
    for p, dflt in zip(parts, (-(1 << 62), 1 << 62)):
        p = p.strip().rstrip("s").strip()
        if not p:
            vals.append(dflt)
            continue
        try:
            v = float(p)
        except ValueError:
            raise UsageError(f"--range {text!r}: {p!r} is not a number of seconds") from None
        if not np.isfinite(v) or abs(v) > 1e9:
            raise UsageError(f"--range {text!r}: {p!r} is not a usable number of seconds")
        vals.append(int(round(v * 1e9)) + origin_ns)
    if vals[1] <= vals[0]:
        raise UsageError(f"--range {text!r}: the end must be after the start")
    return vals[0], vals[1]


def parse_steps(spec: str, steps_table) -> list[tuple[int, int]]:
    """``--steps``: comma-separated ``median``, ``worst``, step numbers ``N`` or ``N-M`` (the
    ``step`` column of the JSON report's ``steps``, 0-based) -> the steps' ``[start, end)``."""
    from ..metrics.steps import pick_steps

    n = len(steps_table) if steps_table is not None else 0
    if n == 0:
        raise UsageError(f"--steps {spec!r}: this capture has no steps", hint="use --range START_S:END_S instead")
    ids = np.asarray(steps_table["step"], dtype=np.int64)
    want: list[int] = []
    for tok in str(spec).split(","):
        tok = tok.strip().lower()
        if tok in ("median", "worst"):
            med, worst = pick_steps(steps_table)
            pick = med if tok == "median" else worst
            if pick is None:
                raise UsageError(f"--steps {spec!r}: no primary steps to pick the {tok} one from")
            want.append(int(pick))
            continue
        m = re.fullmatch(r"(\d{1,9})(?:-(\d{1,9}))?", tok)
        if not m:
            raise UsageError(f"--steps {spec!r}: {tok!r} is not median, worst, N or N-M")
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        if b < a:
            raise UsageError(f"--steps {spec!r}: {tok!r} ends before it starts")
        sel = ids[(ids >= a) & (ids <= b)]
        if not len(sel):
            raise UsageError(f"--steps {spec!r}: no step {tok} (steps are {int(ids.min())}-{int(ids.max())})")
        want.extend(sel.tolist())
    rows = np.flatnonzero(np.isin(ids, want))
    s = np.asarray(steps_table["start_ns"], dtype=np.int64)[rows]
    e = np.asarray(steps_table["end_ns"], dtype=np.int64)[rows]
    return [(int(a), int(max(b, a + 1))) for a, b in zip(s, e)]


_STEP_TOKEN = re.compile(r"median|worst|\d{1,9}(?:-\d{1,9})?")


def check_export_options(fmt: str, time_range: str | None, steps: str | None) -> None:
    """``--range`` / ``--steps`` before any capture is read: only with ``-f perfetto``, not both,
    well formed. Raises UsageError."""
    if fmt != "perfetto":
        raise UsageError("--range and --steps choose what -f perfetto exports", hint="add -f perfetto")
    if time_range is not None and steps is not None:
        raise UsageError("--range and --steps exclude each other: pick one")
    if time_range is not None:
        parse_range(time_range)
    if steps is not None:
        for tok in str(steps).split(","):
            if not _STEP_TOKEN.fullmatch(tok.strip().lower()):
                raise UsageError(f"--steps {steps!r}: {tok.strip()!r} is not median, worst, N or N-M")


def merge_intervals(iv: list) -> list:
    out: list = []
    for lo, hi in sorted(iv):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def selection_for(analysis, time_range: str | None = None, steps: str | None = None) -> Selection:
    """The analysis window, or ``--range`` / ``--steps`` (not both). Raises UsageError."""
    if time_range is not None and steps is not None:
        raise UsageError("--range and --steps exclude each other: pick one")
    if time_range is not None:
        lo, hi = parse_range(time_range, time_origin_ns(analysis))
        return Selection([(lo, hi)], "range")
    if steps is not None:
        st = analysis.steps
        return Selection(merge_intervals(parse_steps(steps, st.table if st.has_markers else None)), "steps")
    w0, w1 = analysis.steps.window_start_ns, analysis.steps.window_end_ns
    if w0 is None or w1 is None:
        return Selection([], "window", window=True)
    return Selection([(int(w0), int(w1))], "window", window=True)
