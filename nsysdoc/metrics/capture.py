"""Capture quality: what was traced, profiler warnings and overhead.

Definitions (``docs/glossary.md``): **profiler overhead share** = union of ``PROFILER_OVERHEAD``
intervals (all threads merged) inside the analysis window, over the window length.
**Diagnostics** = ``DIAGNOSTIC_EVENT`` rows of severity warning or error, grouped by text.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from . import intervals as iv

if TYPE_CHECKING:
    from ..trace.columns import Columns


def overhead_pct(overhead: Columns, w0: int | None, w1: int | None) -> float | None:
    if w0 is None or w1 is None or w1 <= w0:
        return None
    if len(overhead) == 0:
        return 0.0
    u = iv.union(np.zeros(len(overhead), dtype=np.int64), np.asarray(overhead["start_ns"], dtype=np.int64),
                 np.asarray(overhead["end_ns"], dtype=np.int64), lo=w0, hi=w1)
    return float(u.total_by_key(1)[0] / (w1 - w0) * 100)


def diagnostics_table(diagnostics: Columns) -> list[dict]:
    if len(diagnostics) == 0:
        return []
    counts: dict[tuple, int] = {}
    for sev, text in zip(np.asarray(diagnostics["severity"]).tolist(), np.asarray(diagnostics["text"]).tolist()):
        if sev in ("warning", "error"):
            counts[(sev, text)] = counts.get((sev, text), 0) + 1
    # by severity, then most frequent first; ties in (severity, text) order, as a sorted group-by
    # followed by a sort on both keys gives them (pandas' sort of several keys is stable)
    rows = sorted(counts.items(), key=lambda kv: kv[0])
    rows.sort(key=lambda kv: (kv[0][0], -kv[1]))
    return [{"severity": sev, "text": str(text)[:500], "count": int(n)} for (sev, text), n in rows]


#: nsys messages (any severity) that change what the capture can be trusted for, by kind. Matched
#: on nsys's own wording; the report quotes the message rather than paraphrasing it.
NSYS_NOTES = (
    ("lost-events", re.compile(r"not all \w+ events might have been collected|events might be missing|"
                               r"\bdropped\b|\blost\b|buffer overflow", re.IGNORECASE)),
    ("cuda-not-started", re.compile(r"CUDA profiling might have not been started correctly", re.IGNORECASE)),
    ("no-cuda", re.compile(r"No CUDA events collected", re.IGNORECASE)),
    ("driver-unsupported", re.compile(r"driver version .* is not supported", re.IGNORECASE)),
)


def nsys_notes(diagnostics: Columns) -> list[dict]:
    """``DIAGNOSTIC_EVENT`` rows (any severity) whose text is one of :data:`NSYS_NOTES`, grouped by
    text: ``kind``, ``severity``, ``text`` (nsys's words), ``count``."""
    if len(diagnostics) == 0:
        return []
    rows: dict[tuple, dict] = {}
    for sev, text in zip(np.asarray(diagnostics["severity"]), np.asarray(diagnostics["text"])):
        text = str(text)
        for kind, pat in NSYS_NOTES:
            if pat.search(text):
                key = (kind, text)
                if key not in rows:
                    rows[key] = {"kind": kind, "severity": str(sev), "text": text.strip()[:300], "count": 0}
                rows[key]["count"] += 1
                break
    return sorted(rows.values(), key=lambda r: [k for k, _ in NSYS_NOTES].index(r["kind"]))
