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

The engine computes it from what the time slices record (``nsysdoc.engine.run._steady``); this
module holds the thresholds, and those of a window with enough GPU work to judge.
"""
from __future__ import annotations

SETUP_GAP_MIN_NS = 1_000_000
SETUP_GAP_MIN_PCT = 1.0
IDLE_EDGE_MIN_PCT = 25.0
IDLE_EDGE_MAX_WORK_PCT = 5.0
STEADY_MAX_SETUP_PCT = 5.0

#: Least GPU work in the window for a judgement: this many GPU operations, or this much GPU busy
#: time (mean over devices with work), in a window at least ``MIN_WINDOW_MS`` long. Read by the
#: engine (is a steady-state window worth keeping?) and by the report's capture section.
MIN_GPU_OPS = 50
MIN_GPU_BUSY_MS = 50.0
MIN_WINDOW_MS = 1.0


