"""Exact cross-stream edges from CUDA events (issue 48, milestone 2): which GPU operation a stream
waited on, read from the event records instead of found by timing.

``cudaEventRecord(e, S)`` at host time ``t_r`` marks the work launched to stream ``S`` before
``t_r``: the event completes when the last of it ends. ``cudaStreamWaitEvent(W, e)`` at host time
``t_w`` makes the work launched to stream ``W`` after ``t_w`` wait for the most recent record of
``e`` before ``t_w``. So the **producer** of a wait is the last operation launched to the record's
stream before the record call, and its **consumer** is the first operation launched to the waiting
stream after the wait call (later ones follow it in stream order).

Sources (``docs/glossary.md``, "Critical path"; ``../shared/reference/attribution-sources.md``):

* nsys: ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`` rows of ``syncType`` STREAM_WAIT_EVENT (the waiting
  ``streamId``, ``eventId``, the wait call's ``correlationId``) paired by ``eventId`` with
  ``CUPTI_ACTIVITY_KIND_CUDA_EVENT`` rows (the record's ``streamId`` and its call's
  ``correlationId``): :func:`pair_records` does the pairing by event id and time;
* Kineto: ``cuda_sync`` events carry the waiting ``stream``, ``wait_on_stream`` and
  ``wait_on_cuda_event_record_corr_id`` (the record call's correlation id): already paired.

Pure functions on arrays, times in ns; the readers supply the columns and
:func:`nsysdoc.metrics.critical_path.build_graph` takes the result (``event_producer``).
"""
from __future__ import annotations

import numpy as np


def pair_records(w_event, w_time, r_event, r_time) -> np.ndarray:
    """For each wait (event id, call time), the index of the record of the same event that was
    called last at or before it; -1 when none (the record is outside the capture)."""
    w_event, w_time = np.asarray(w_event, np.int64), np.asarray(w_time, np.int64)
    r_event, r_time = np.asarray(r_event, np.int64), np.asarray(r_time, np.int64)
    out = np.full(len(w_event), -1, dtype=np.int64)
    if not len(r_event) or not len(w_event):
        return out
    order = np.lexsort((r_time, r_event))
    ev, tm = r_event[order], r_time[order]
    # the last record with (event, time) <= (w_event, w_time): search on the event first
    lo = np.searchsorted(ev, w_event, side="left")
    hi = np.searchsorted(ev, w_event, side="right")
    for i in np.flatnonzero(hi > lo).tolist():
        k = int(np.searchsorted(tm[lo[i]:hi[i]], w_time[i], side="right")) - 1
        if k >= 0:
            out[i] = int(order[lo[i] + k])
    return out


def _last_launched_before(o_stream, o_launch, stream: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per (stream, t): the operation of that stream launched last strictly before ``t``; -1 none."""
    return _launched(o_stream, o_launch, stream, t, before=True)


def _first_launched_after(o_stream, o_launch, stream: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per (stream, t): the operation of that stream launched first strictly after ``t``; -1 none."""
    return _launched(o_stream, o_launch, stream, t, before=False)


def _launched(o_stream, o_launch, stream, t, before: bool) -> np.ndarray:
    o_stream, o_launch = np.asarray(o_stream, np.int64), np.asarray(o_launch, np.int64)
    stream, t = np.asarray(stream, np.int64), np.asarray(t, np.int64)
    out = np.full(len(stream), -1, dtype=np.int64)
    known = np.flatnonzero(o_launch >= 0)  # operations whose launch call is in the capture
    if not len(known) or not len(stream):
        return out
    order = known[np.lexsort((o_launch[known], o_stream[known]))]
    st, lt = o_stream[order], o_launch[order]
    lo = np.searchsorted(st, stream, side="left")
    hi = np.searchsorted(st, stream, side="right")
    for i in np.flatnonzero(hi > lo).tolist():
        seg = lt[lo[i]:hi[i]]
        if before:
            k = int(np.searchsorted(seg, t[i], side="left")) - 1
            ok = k >= 0
        else:
            k = int(np.searchsorted(seg, t[i], side="right"))
            ok = k < len(seg)
        if ok:
            out[i] = int(order[lo[i] + k])
    return out


def event_producers(w_stream, w_time, r_stream, r_time, o_stream, o_launch, o_end) -> np.ndarray:
    """The exact cross-stream producer of each operation: an array as long as the operations, with
    the index of the operation it waited on (module doc) or -1.

    ``w_stream``/``w_time``: each wait's waiting stream and call time; ``r_stream``/``r_time``: its
    record's stream and call time (a wait whose record is unknown has ``r_time`` < 0);
    ``o_stream``/``o_launch``/``o_end``: each operation's stream, its launch call's start (-1
    unknown) and its end. Streams are ids unique in the capture (one process's device and stream).
    When several waits land on one operation, the producer that ended last wins (the walk takes
    the last arrival)."""
    o_stream = np.asarray(o_stream, np.int64)
    o_launch = np.asarray(o_launch, np.int64)
    o_end = np.asarray(o_end, np.int64)
    out = np.full(len(o_stream), -1, dtype=np.int64)
    w_stream, w_time = np.asarray(w_stream, np.int64), np.asarray(w_time, np.int64)
    r_stream, r_time = np.asarray(r_stream, np.int64), np.asarray(r_time, np.int64)
    if not len(w_stream) or not len(o_stream):
        return out
    known = r_time >= 0
    prod = np.where(known, _last_launched_before(o_stream, o_launch, r_stream, np.where(known, r_time, 0)), -1)
    cons = _first_launched_after(o_stream, o_launch, w_stream, w_time)
    for c, p in zip(cons.tolist(), prod.tolist()):
        if c < 0 or p < 0 or o_stream[p] == o_stream[c]:
            continue
        if out[c] < 0 or o_end[p] > o_end[out[c]]:
            out[c] = p
    return out
