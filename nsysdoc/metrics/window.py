"""The analysis window of a capture without step markers: its steady-state part.

Definitions (``docs/glossary.md``, "Steps and the analysis window"):

* **GPU span**: first GPU operation start → last GPU operation end (all devices).
* **Warm-up**: from the span start to the end of the last *significant set-up gap* that starts in
  the first half of the span. A set-up gap is an idle gap (any device) with at least
  ``max(SETUP_GAP_MIN_NS, SETUP_GAP_MIN_PCT % of the span)`` of idle time in class ``setup``
  (module loading, first-launch JIT, compilation, autotuning, warm-up ranges).
* **Idle head / idle tail**: a stretch with no GPU operation on any device, at least
  ``IDLE_EDGE_MIN_PCT`` % of the remaining span long, with less than ``IDLE_EDGE_MAX_WORK_PCT`` % of
  the GPU busy time before it (head) or after it (tail): the window starts after it / ends before it.
* **Steady-state window**: the span without the warm-up and the idle head and tail — kept only when
  it is steady: its own set-up idle time is under ``STEADY_MAX_SETUP_PCT`` % of it (else set-up
  runs through the capture and there is no steady state: the window stays the whole span) and it
  holds enough GPU work to judge (checked by the caller). Rules and per-window numbers use it; the
  one-time-setup rule looks at the whole span.
"""
from __future__ import annotations

import numpy as np

from . import intervals as iv
from .gpu import CAUSE_SETUP, Activity, Gaps

SETUP_GAP_MIN_NS = 1_000_000
SETUP_GAP_MIN_PCT = 1.0
IDLE_EDGE_MIN_PCT = 25.0
IDLE_EDGE_MAX_WORK_PCT = 5.0
STEADY_MAX_SETUP_PCT = 5.0


def steady_window(act: Activity, gaps: Gaps, w0: int, w1: int) -> tuple[int, int, list[dict]]:
    """``(start, end, excluded)`` of the steady-state window inside the GPU span ``[w0, w1)``;
    ``excluded`` lists the parts left out: ``{"kind", "start_ns", "end_ns"}``."""
    excluded: list[dict] = []
    span = w1 - w0
    if span <= 0 or gaps is None or len(gaps) == 0:
        return w0, w1, excluded
    t0, t1 = w0, w1
    setup = gaps.amounts[:, CAUSE_SETUP]
    significant = setup >= max(SETUP_GAP_MIN_NS, SETUP_GAP_MIN_PCT / 100 * span)
    early = significant & (gaps.start_ns < w0 + span // 2)
    if early.any():
        end = int(gaps.end_ns[early].max())
        devs = np.arange(act.ndev)
        left = gaps.amounts_in(devs, np.full(act.ndev, end), np.full(act.ndev, w1))[:, CAUSE_SETUP]
        busy_devs = act.busy.covered(devs, np.full(act.ndev, end), np.full(act.ndev, w1)) > 0
        steady = end < w1 and (not busy_devs.any() or
                               left[busy_devs].mean() < STEADY_MAX_SETUP_PCT / 100 * (w1 - end))
        if steady:
            excluded.append({"kind": "warm-up", "start_ns": w0, "end_ns": end})
            t0 = end
    # stretches with no GPU work on any device
    if act.ndev == 1:  # already one merged union: just clip it
        keep = (act.busy.ends > t0) & (act.busy.starts < t1)
        s_, e_ = np.maximum(act.busy.starts[keep], t0), np.minimum(act.busy.ends[keep], t1)
        busy = iv.union(np.zeros(len(s_), np.int64), s_, e_) if len(s_) < 2 else \
            iv.Union(np.zeros(len(s_), np.int64), s_, e_, int(s_.min()), int(e_.max()) - int(s_.min()) + 1)
    else:
        busy = iv.union(np.zeros(len(act.busy), np.int64), act.busy.starts, act.busy.ends, lo=t0, hi=t1)
    if len(busy) >= 2:
        gs, ge = busy.ends[:-1], busy.starts[1:]
        lens = busy.lengths
        before = np.cumsum(lens)[:-1]
        total = float(lens.sum())
        rest = t1 - t0
        long_ = (ge - gs) >= IDLE_EDGE_MIN_PCT / 100 * rest
        head = np.flatnonzero(long_ & (before <= IDLE_EDGE_MAX_WORK_PCT / 100 * total))
        tail = np.flatnonzero(long_ & (total - before <= IDLE_EDGE_MAX_WORK_PCT / 100 * total))
        if len(head):
            k = head[-1]
            excluded.append({"kind": "idle head", "start_ns": t0, "end_ns": int(ge[k])})
            t0 = int(ge[k])
        if len(tail):
            k = tail[0]
            if gs[k] > t0:
                excluded.append({"kind": "idle tail", "start_ns": int(gs[k]), "end_ns": t1})
                t1 = int(gs[k])
    return t0, t1, excluded
