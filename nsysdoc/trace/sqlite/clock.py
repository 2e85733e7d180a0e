"""Clocks of an export: the session's duration and start, and which clock its timestamps count on.

Why a module of its own (issue 51): ``nsys export`` writes times from 0 at the session start by
default but on the UTC wall clock with ``--ts-normalize=true``; every table the reader loads is put
back on the session timeline by one shift (:func:`timestamp_clock`, :func:`_shift_times`), and
the job view aligns ranks by the session's wall-clock start (:func:`_session_start`).
"""
from __future__ import annotations

import numpy as np

from .. import schema as S
from ..open import PROBE_SECONDS, ExportFile
from ..tables import BAD, TIME_LIMIT_NS
from .chunks import _query


def _session_duration(exp: ExportFile) -> int | None:
    if exp.has("ANALYSIS_DETAILS") and "duration" in exp.columns("ANALYSIS_DETAILS"):
        rows = _query(exp, 'SELECT duration FROM "ANALYSIS_DETAILS" LIMIT 1', budget=PROBE_SECONDS)
        if rows and isinstance(rows[0][0], int) and not isinstance(rows[0][0], bool) and 0 < rows[0][0] < TIME_LIMIT_NS:
            return int(rows[0][0])
    return None


def _session_start(exp: ExportFile) -> int | None:
    """``TARGET_INFO_SESSION_START_TIME.utcEpochNs``: the UTC wall clock (ns) at session start."""
    if exp.has("TARGET_INFO_SESSION_START_TIME") and "utcEpochNs" in exp.columns("TARGET_INFO_SESSION_START_TIME"):
        rows = _query(exp, 'SELECT utcEpochNs FROM "TARGET_INFO_SESSION_START_TIME" LIMIT 1', budget=PROBE_SECONDS)
        if rows and type(rows[0][0]) is int and 0 < rows[0][0] < TIME_LIMIT_NS:
            return int(rows[0][0])
    return None


#: An event time at or beyond this (3 * 10^17 ns: 1979) is on the UNIX epoch, not on the session's
#: timeline (which counts from 0 at the session start: days are 10^14 ns)
ABSOLUTE_MIN_NS = 3 * 10 ** 17
#: tables sampled to tell the clock of an export's timestamps (their first rows)
_CLOCK_TABLES = (S.RUNTIME, S.KERNEL, S.MEMCPY, S.MEMSET, S.OSRT, S.NVTX)


def timestamp_clock(exp: ExportFile, session_start: int | None) -> tuple[str, int]:
    """How the export's timestamps count: ``("session", 0)`` from the session start (nsys's
    default), or ``("absolute", shift)`` on the UTC wall clock, as ``nsys export
    --ts-normalize=true`` writes them. ``shift`` is what the loader subtracts to put them back on
    the session timeline: ``utcEpochNs``, or without it the earliest time sampled.

    Told from the first rows of the event tables: their median is absolute when it lies nearer
    ``utcEpochNs`` than 0 (without ``utcEpochNs``: at or beyond :data:`ABSOLUTE_MIN_NS`)."""
    sample: list[int] = []
    for table in _CLOCK_TABLES:
        if exp.has(table) and "start" in exp.columns(table):
            rows = _query(exp, f'SELECT start FROM "{table}" WHERE typeof(start) = \'integer\' AND start != 0 LIMIT 3',
                          budget=PROBE_SECONDS)
            sample += [int(r[0]) for r in rows if abs(r[0]) < TIME_LIMIT_NS]
    if not sample:
        return "session", 0
    med = int(np.median(sample))
    if session_start:
        return ("absolute", session_start) if abs(med - session_start) < abs(med) else ("session", 0)
    return ("absolute", min(sample)) if med >= ABSOLUTE_MIN_NS else ("session", 0)


def _shift_times(d: dict[str, np.ndarray], shift: int, cols=("start_ns", "end_ns")) -> dict[str, np.ndarray]:
    """``d`` with ``shift`` subtracted from its time columns (NULLs, read as BAD, stay BAD)."""
    if shift:
        for c in cols:
            if c in d:
                v = d[c]
                d[c] = np.where(v != BAD, v - shift, BAD)
    return d
