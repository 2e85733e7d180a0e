"""CPU dispatch of an operator vs the GPU work it launched (issue 47: the article's second table,
``key_averages()`` sorted by ``cpu_time_total``). An operator's inclusive CPU time holds its own
dispatch and, when it synchronises (``.item()``, a blocking copy), the time the host waited for
the GPU: that wait is the GPU being slow, not the dispatch. Pure functions; times in ns.
Definitions: docs/glossary.md, "Operators" (CPU-side rows and per-call times)."""
from __future__ import annotations

import numpy as np


def union_per_thread(thread, start, end) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The union of ``[start, end)`` ranges on each thread: disjoint (thread, start, end) runs,
    sorted by thread then start (ranges of one name nest or follow one another; an inner call of
    the name adds nothing, as ``cpu_ms`` leaves it out)."""
    th = np.asarray(thread, dtype=np.int64)
    s = np.asarray(start, dtype=np.int64)
    e = np.asarray(end, dtype=np.int64)
    if not len(th):
        z = np.zeros(0, np.int64)
        return z, z, z
    o = np.lexsort((s, th))
    th, s, e = th[o], s[o], e[o]
    # a new run where the thread changes or the range starts after every earlier end on its thread
    reach = np.empty(len(e), dtype=np.int64)
    new = np.ones(len(th), dtype=bool)
    new[1:] = th[1:] != th[:-1]
    grp = np.cumsum(new) - 1  # running max of ends within each thread
    for g in np.unique(grp).tolist():  # few threads
        m = grp == g
        reach[m] = np.maximum.accumulate(e[m])
    new[1:] |= s[1:] >= reach[:-1]
    first = np.flatnonzero(new)
    return th[first], s[first], np.maximum.reduceat(e, first)


def overlap_ns(run_thread, run_start, run_end, call_thread, call_start, call_end) -> int:
    """Summed overlap (ns) of the calls with the disjoint runs on the same thread (each call's
    time inside the runs)."""
    rt = np.asarray(run_thread, dtype=np.int64)
    rs, re_ = np.asarray(run_start, dtype=np.int64), np.asarray(run_end, dtype=np.int64)
    ct = np.asarray(call_thread, dtype=np.int64)
    cs, ce = np.asarray(call_start, dtype=np.int64), np.asarray(call_end, dtype=np.int64)
    total = 0
    for th in np.intersect1d(np.unique(rt), np.unique(ct)).tolist():
        m = rt == th
        s, e = rs[m], re_[m]  # disjoint, sorted
        q = ct == th
        a, b = cs[q], ce[q]
        # prefix sums of run lengths: overlap of [a, b) with the runs = covered(b) - covered(a)
        cum = np.concatenate([[0], np.cumsum(e - s)])

        def covered(t):
            k = np.searchsorted(s, t, side="right")  # runs starting at or before t
            inside = np.where(k > 0, np.minimum(t, e[np.maximum(k - 1, 0)]) - s[np.maximum(k - 1, 0)], 0)
            return cum[np.maximum(k - 1, 0)] * (k > 0) + np.maximum(inside, 0)

        total += int((covered(b) - covered(a)).sum())
    return total
