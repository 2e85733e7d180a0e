"""What the GPU waited on in GPU-side dependency idle (``docs/glossary.md``, "GPU-side dependency").

A gap's **dependency** time (:func:`nsysdoc.metrics.gpu.classify_found_gaps`) is the queue part of
an idle gap whose next operation had been submitted more than ``LAUNCH_LATENCY_NS`` before it
ran: the device had its next work and waited on something else. During an idle gap no operation
runs on the device, so what it waited on lies outside it:

* the **producer**: an operation on another device (any stream) that ended inside the gap, at
  most ``PRODUCER_TOLERANCE_NS`` after the gap end, the latest such end (a cross-device event,
  a peer copy, a collective on another GPU); none when nothing recorded ended then (a host
  callback, another process or rank, or work the capture did not record);
* the **host call** behind the wait: the last event, stream-wait, graph-launch or host-function
  call on the launching thread at most ``HOST_CALL_LOOKBACK_NS`` before the waiting operation's
  launching call began (the launching call itself when it is one: a CUDA graph's launch).

Pure functions over arrays; times in ns.
"""
from __future__ import annotations

import re

import numpy as np

from .gpu import LAUNCH_LATENCY_NS

#: a producer may end this long after the gap end (the waiting operation's own start latency)
PRODUCER_TOLERANCE_NS = LAUNCH_LATENCY_NS
#: how far before the waiting operation's launching call a wait/record/graph call is looked for
HOST_CALL_LOOKBACK_NS = 10_000_000
#: CUDA/HIP calls that make a stream wait on other work (or launch a graph with internal
#: dependencies), by name without the ``_vNNNN`` suffix
WAIT_CALLS = re.compile(r"^(?:cu|cuda|hip)(?:StreamWaitEvent\w*|EventRecord\w*|GraphLaunch\w*|LaunchHostFunc\w*|"
                        r"StreamWaitValue\w*|StreamAddCallback\w*)$")


def is_wait_call(name: str) -> bool:
    """A call that makes a stream wait on other work (``cudaStreamWaitEvent``, ``cudaEventRecord``,
    ``cudaGraphLaunch``, ``cudaLaunchHostFunc``, ``cuStreamWaitValue32`` ...)."""
    return WAIT_CALLS.match(name) is not None


def producer(device: int, g0: int, g1: int, o_device: np.ndarray, o_end: np.ndarray) -> int:
    """Index of the operation on another device than ``device`` whose end lies in
    ``(g0, g1 + PRODUCER_TOLERANCE_NS]`` and is the latest such end (first in array order among
    equal ends); -1 when there is none."""
    o_device = np.asarray(o_device, dtype=np.int64)
    o_end = np.asarray(o_end, dtype=np.int64)
    cand = np.flatnonzero((o_device != device) & (o_end > g0) & (o_end <= g1 + PRODUCER_TOLERANCE_NS))
    if not len(cand):
        return -1
    return int(cand[np.argmax(o_end[cand])])


def host_call(launch_start: int, c_start: np.ndarray, c_is_wait: np.ndarray) -> int:
    """Index of the last wait/record/graph call (``c_is_wait``) of the launching thread that
    started in ``[launch_start - HOST_CALL_LOOKBACK_NS, launch_start]``; -1 when there is none."""
    c_start = np.asarray(c_start, dtype=np.int64)
    ok = np.flatnonzero(np.asarray(c_is_wait, dtype=bool) & (c_start <= launch_start)
                        & (c_start >= launch_start - HOST_CALL_LOOKBACK_NS))
    if not len(ok):
        return -1
    return int(ok[np.argmax(c_start[ok])])  # the latest start (the first among ties)
