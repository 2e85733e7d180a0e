"""What the capture can support (issue 46): checks that say when a judgement would rest on GPU work
that was not recorded, on a sliver of GPU work, or would miss the program's own host time
outside the analysis window. Pure functions over arrays of ns; definitions in ``docs/glossary.md``
("What the capture can support").

* **GPU work not recorded**: a blocking CUDA/HIP call (a synchronize, a synchronous copy: the
  blocking classification of :mod:`nsysdoc.metrics.host`) that returns more than
  ``UNRECORDED_MIN_NS`` *and* more than ``UNRECORDED_MIN_SHARE`` of its duration after the end of the
  last recorded GPU operation of its process that started before the call returned. The host
  was blocked on something the capture does not hold (GPU work not recorded, or work the GPU ran
  untraced). Calls with no recorded GPU operation of their process before them are not judged
  (the first call of a context may create it).
* **A sliver of GPU work**: the window holds under ``SLIVER_MAX_GPU_MS`` of GPU work (busy time,
  mean over devices), or that work is under ``SLIVER_MAX_CAPTURE_PCT`` % of the capture.
* **Host phases outside the window**: stretches of at least ``HOST_PHASE_MIN_NS`` with no CUDA call
  on any thread and no set-up range, between the first CUDA call and the window start, and
  between the window end and the capture end. Process start-up before the first CUDA call
  (interpreter start, imports, a slice cut from a longer run) is not counted: the framing line
  says it, and it is not the program's work around its GPU work.
"""
from __future__ import annotations

import numpy as np

from . import intervals as iv

UNRECORDED_MIN_NS = 1_000_000
UNRECORDED_MIN_SHARE = 0.5
SLIVER_MAX_GPU_MS = 1.0
SLIVER_MAX_CAPTURE_PCT = 0.1
HOST_PHASE_MIN_NS = 1_000_000
#: host phases outside the window from this share of the capture make a finding (host-outside-window)
HOST_OUTSIDE_MIN_PCT = 50.0


#: no GPU operation of the process started before the call returned
NO_OP = np.iinfo(np.int64).min


def last_op_end_before(call_end: np.ndarray, call_proc: np.ndarray, op_start: np.ndarray, op_end: np.ndarray,
                       op_proc: np.ndarray, last: np.ndarray | None = None) -> np.ndarray:
    """Per call, the latest end (ns) of the GPU operations of its process that started before the
    call returned (``NO_OP`` when none), folded into ``last`` when given: the operations may come
    in parts (blocks of a table), the answer is the maximum over the parts."""
    ce = np.asarray(call_end, np.int64)
    cp = np.asarray(call_proc, np.int64)
    os_, oe, op = (np.asarray(x, np.int64) for x in (op_start, op_end, op_proc))
    out = np.full(len(ce), NO_OP, np.int64) if last is None else np.asarray(last, np.int64).copy()
    for p in np.unique(cp):
        sel = op == p
        if not sel.any():
            continue
        order = np.argsort(os_[sel], kind="stable")
        starts = os_[sel][order]
        ends = np.maximum.accumulate(oe[sel][order])
        ci = np.flatnonzero(cp == p)
        k = np.searchsorted(starts, ce[ci], side="left") - 1  # ops that started before the call returned
        ok = k >= 0
        out[ci[ok]] = np.maximum(out[ci[ok]], ends[k[ok]])
    return out


def unrecorded_after_blocking(call_start: np.ndarray, call_end: np.ndarray, call_proc: np.ndarray,
                              op_start: np.ndarray | None = None, op_end: np.ndarray | None = None,
                              op_proc: np.ndarray | None = None,
                              min_ns: int = UNRECORDED_MIN_NS, min_share: float = UNRECORDED_MIN_SHARE,
                              last_op_end: np.ndarray | None = None) -> dict:
    """Blocking calls that outlast the recorded GPU work of their process (module docstring); the
    operations' arrays, or ``last_op_end`` (:func:`last_op_end_before` over them) when already
    folded.

    Returns aligned arrays over the flagged calls: ``index`` (into the call arrays), ``covered_ns``
    (from the call's start to the end of the last recorded GPU operation, at least 0) and
    ``uncovered_ns`` (from there, or the call's start, to the call's end)."""
    cs = np.asarray(call_start, np.int64)
    ce = np.asarray(call_end, np.int64)
    last = last_op_end if last_op_end is not None else \
        last_op_end_before(ce, call_proc, op_start, op_end, op_proc)
    last = np.asarray(last, np.int64)
    known = last != NO_OP
    edge = np.maximum(cs, np.where(known, last, cs))
    uncovered = np.where(known, np.maximum(ce - edge, 0), 0)
    dur = ce - cs
    flag = known & (uncovered > min_ns) & (uncovered > min_share * dur)
    idx = np.flatnonzero(flag)
    return {"index": idx, "covered_ns": (edge - cs)[idx], "uncovered_ns": uncovered[idx]}


def gpu_work_sliver(busy_window_ms: float | None, capture_ms: float | None) -> bool:
    """Whether the window's GPU work is a sliver: under ``SLIVER_MAX_GPU_MS`` ms, or under
    ``SLIVER_MAX_CAPTURE_PCT`` % of the capture. False when the GPU work is unknown (no GPU
    activity is said by other findings)."""
    if busy_window_ms is None:
        return False
    if busy_window_ms < SLIVER_MAX_GPU_MS:
        return True
    return bool(capture_ms) and busy_window_ms / capture_ms * 100 < SLIVER_MAX_CAPTURE_PCT


def host_phases_outside_window(first_call_ns: int | None, capture_end_ns: int, window_start_ns: int | None,
                               window_end_ns: int | None, busy_start: np.ndarray, busy_end: np.ndarray,
                               min_ns: int = HOST_PHASE_MIN_NS) -> list[dict]:
    """Host phases with no CUDA work outside the window (module docstring): each
    ``{"where": "before the window" | "after the window", "start_ns", "end_ns"}``, in time order.
    ``busy_*`` are the intervals that are not such host work: CUDA calls of any thread and set-up
    ranges (compilation, JIT), in any order."""
    if first_call_ns is None or window_start_ns is None or window_end_ns is None:
        return []
    bs = np.asarray(busy_start, np.int64)
    be = np.asarray(busy_end, np.int64)
    out = []
    for where, lo, hi in (("before the window", int(first_call_ns), int(window_start_ns)),
                          ("after the window", int(window_end_ns), int(capture_end_ns))):
        if hi - lo < min_ns:
            continue
        if len(bs):
            u = iv.union(np.zeros(len(bs), np.int64), bs, be, lo=lo, hi=hi)
            us, ue = np.asarray(u.starts, np.int64), np.asarray(u.ends, np.int64)
        else:
            us = ue = np.zeros(0, np.int64)
        # the holes between the busy intervals inside [lo, hi)
        hs = np.concatenate([[lo], ue])
        he = np.concatenate([us, [hi]])
        keep = (he - hs) >= min_ns
        out += [{"where": where, "start_ns": int(s), "end_ns": int(e)} for s, e in zip(hs[keep], he[keep])]
    return out
