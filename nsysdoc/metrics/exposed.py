"""Exposed communication as intervals (issue 49): where, per device, communication kernels run and
no compute kernel runs, the same set whose length ``metrics.gpu`` sums as the exposed total
(the union of kernels minus the union of compute kernels = communication minus compute).

Pure and vectorised: one sort of the interval edges per call, prefix sums for the coverage counts,
no Python loop over intervals. Times are integer nanoseconds, intervals half-open ``[start, end)``.
"""
from __future__ import annotations

import numpy as np

_EMPTY = np.zeros(0, dtype=np.int64)


def exposed_comm_intervals_ns(device, start_ns, end_ns, is_comm, lo_ns: int, hi_ns: int,
                              merge_gap_ns: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(device, start_ns, end_ns)`` of the stretches inside ``[lo_ns, hi_ns)`` where at least one
    communication kernel (``is_comm``) runs on a device and no other kernel (compute) runs on it,
    sorted by (device, start). Stretches of one device closer than ``merge_gap_ns`` are merged into
    one (the merged stretch then includes the short gaps; ``0`` merges only touching stretches).

    ``device``/``start_ns``/``end_ns``/``is_comm`` describe kernels (any order, overlaps allowed,
    empty intervals ignored); pass kernels only (copies are neither compute nor communication)."""
    dev = np.asarray(device, dtype=np.int64)
    s = np.clip(np.asarray(start_ns, dtype=np.int64), lo_ns, hi_ns)
    e = np.clip(np.asarray(end_ns, dtype=np.int64), lo_ns, hi_ns)
    comm = np.asarray(is_comm, dtype=bool)
    keep = e > s
    dev, s, e, comm = dev[keep], s[keep], e[keep], comm[keep]
    if not comm.any():
        return _EMPTY, _EMPTY, _EMPTY
    n = len(s)
    # edges: +1 at a start, -1 at an end, counted apart for communication and compute kernels
    k = np.concatenate([dev, dev])
    t = np.concatenate([s, e])
    sign = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
    c_comm = np.where(np.concatenate([comm, comm]), sign, 0)
    c_comp = np.where(np.concatenate([~comm, ~comm]), sign, 0)
    order = np.lexsort((t, k))
    k, t, c_comm, c_comp = k[order], t[order], np.cumsum(c_comm[order]), np.cumsum(c_comp[order])
    # counts after edge i hold on [t[i], t[i+1]) when edge i+1 is on the same device (a device's
    # counts return to 0 after its last edge, so the running sums need no reset between devices)
    same = k[:-1] == k[1:]
    on = same & (t[1:] > t[:-1]) & (c_comm[:-1] > 0) & (c_comp[:-1] == 0)
    ks, ss, es = k[:-1][on], t[:-1][on], t[1:][on]
    if not len(ss):
        return _EMPTY, _EMPTY, _EMPTY
    # join pieces of one device that touch (or are closer than merge_gap_ns)
    new = np.ones(len(ss), dtype=bool)
    new[1:] = (ks[1:] != ks[:-1]) | (ss[1:] - es[:-1] >= max(int(merge_gap_ns), 1))
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(ss)) - 1
    return ks[first], ss[first], es[last]


def longest_first(start_ns, end_ns, limit: int) -> np.ndarray:
    """Indices of the ``limit`` longest stretches, longest first (ties: earlier first)."""
    s = np.asarray(start_ns, dtype=np.int64)
    d = np.asarray(end_ns, dtype=np.int64) - s
    return np.lexsort((s, -d))[:max(int(limit), 0)]
