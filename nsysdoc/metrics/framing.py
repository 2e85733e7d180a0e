"""Framing: where the analysis window sits in the capture, and what it leaves out.

The analysis window is the part of the capture the diagnosis measures (the steps, or the GPU
span: first to last GPU operation). A capture is usually longer: the program starts, creates its
CUDA context, loads libraries and compiles kernels before its first GPU operation, and may run
host work after its last. Definitions (``docs/glossary.md``, "Framing"), all in ms:

* **capture**: ``[capture_start, capture_end)``, the whole recorded session;
* **before the window** / **after the window**: the capture's time before the window start and
  after the window end;
* **process start-up**: from the capture start to the first CUDA API call of any thread (Python
  imports, argument parsing, building the model on the CPU); 0 when no CUDA call was recorded;
* **context creation**: the first CUDA call of 1 ms or more before the first GPU operation that
  is not a kernel launch (CUDA creates its context lazily inside the first call that needs one:
  ``cudaMalloc``, ``cudaFree(0)``, ``cudaSetDevice``...);
* **set-up before the first GPU operation**: the union of the intervals of context creation,
  set-up CUDA calls (module and library loading, stream creation...), kernel launch calls of 1 ms
  or more (first launches load their module: CUDA lazy loading) and compile/JIT/autotune NVTX
  ranges, between the first CUDA call and the first GPU operation; its length includes context
  creation;
* **other host work before the window**: before-the-window time that is neither process start-up,
  set-up, nor GPU work (mean over devices) before the window;
* **busy over the capture**: per device, the union of its GPU operations over the whole capture
  divided by the capture's length (mean over devices with GPU work), beside busy over the window.
"""
from __future__ import annotations

import numpy as np

from . import intervals as iv

#: A call this long (ns) or longer can be context creation or a first launch's module loading.
LONG_CALL_NS = 1_000_000


def setup_before_ns(call_start: np.ndarray, call_end: np.ndarray, is_setup: np.ndarray,
                    range_start: np.ndarray, range_end: np.ndarray, lo: int, hi: int) -> int:
    """Length of the union of set-up intervals (calls flagged ``is_setup`` and set-up ranges)
    clipped to ``[lo, hi)``; threads do not matter: this is time the program spent setting up
    before it gave the GPU any work."""
    s = np.concatenate([np.asarray(call_start)[is_setup], np.asarray(range_start)]).astype(np.int64)
    e = np.concatenate([np.asarray(call_end)[is_setup], np.asarray(range_end)]).astype(np.int64)
    if hi <= lo or len(s) == 0:
        return 0
    u = iv.union(np.zeros(len(s), np.int64), s, e, lo=lo, hi=hi)
    return int(u.lengths.sum()) if len(u) else 0


def context_call(call_start: np.ndarray, call_end: np.ndarray, is_launch: np.ndarray, before_ns: int):
    """Index of the context-creating call: the first call of ``LONG_CALL_NS`` or more that starts
    before ``before_ns`` and is not a kernel launch, or None."""
    dur = np.asarray(call_end) - np.asarray(call_start)
    ok = np.flatnonzero((dur >= LONG_CALL_NS) & ~np.asarray(is_launch, bool) & (np.asarray(call_start) < before_ns))
    if not len(ok):
        return None
    return int(ok[np.argmin(np.asarray(call_start)[ok])])


def framing(capture_start: int, capture_end: int, window_start: int | None, window_end: int | None,
            first_call_ns: int | None, context_ms: float | None, context_name: str | None,
            setup_before_ms: float, busy_capture_ms: float | None, busy_window_ms: float | None,
            span_start: int | None) -> dict:
    """The framing numbers (module docstring), as a JSON-ready dict of ms values."""
    ms = lambda ns: ns / 1e6  # noqa: E731
    cap_ms = ms(capture_end - capture_start)
    out = {"capture_ms": cap_ms, "window_ms": None, "before_window_ms": None, "after_window_ms": None,
           "startup_ms": None, "context_ms": context_ms, "context_call": context_name,
           "setup_before_ms": setup_before_ms, "gpu_outside_window_ms": None, "host_before_ms": None,
           "busy_capture_pct": (busy_capture_ms / cap_ms * 100) if busy_capture_ms is not None and cap_ms > 0 else None,
           "outside_window_pct": None}
    if window_start is None or window_end is None:
        return out
    before = ms(max(window_start - capture_start, 0))
    after = ms(max(capture_end - window_end, 0))
    out.update(window_ms=ms(window_end - window_start), before_window_ms=before, after_window_ms=after,
               outside_window_pct=(before + after) / cap_ms * 100 if cap_ms > 0 else None)
    first = min(span_start, window_start) if span_start is not None else window_start
    if first_call_ns is not None:
        out["startup_ms"] = ms(min(max(first_call_ns - capture_start, 0), max(first - capture_start, 0)))
    if busy_capture_ms is not None and busy_window_ms is not None:
        out["gpu_outside_window_ms"] = max(busy_capture_ms - busy_window_ms, 0.0)
    # host time before the window that is neither start-up, set-up nor GPU work; GPU work before
    # the window is only possible when the window starts after the first GPU operation
    gpu_before = 0.0
    if out["gpu_outside_window_ms"] and span_start is not None and window_start > span_start:
        gpu_before = min(out["gpu_outside_window_ms"], ms(window_start - span_start))
    out["host_before_ms"] = max(before - (out["startup_ms"] or 0) - setup_before_ms - gpu_before, 0.0)
    return out
