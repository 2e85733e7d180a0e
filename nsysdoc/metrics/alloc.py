"""Allocation churn versus allocator growth (issue 46, item 3).

Definitions (``docs/glossary.md``, "allocation repeats"):

* The allocation calls are the CUDA/HIP API calls of ``nsysdoc.trace.schema.ALLOC_APIS`` made by
  the threads that launch GPU work. Each is a **release** (:data:`RELEASE_APIS`: ``cudaFree``,
  ``cuMemFree``, ``cuMemRelease``, ``cudaHostUnregister``, a pool trimmed or destroyed...) or an
  **allocation** (every other one: ``cudaMalloc``, ``cudaHostAlloc``, ``cuMemCreate``...).
* An allocation **repeats** when, on its thread, the allocation or release call just before it
  is a release and an allocation came before that release: alloc → free → alloc. Consecutive
  allocations count once (a growth of the virtual-memory API is ``cuMemCreate`` + ``cuMemMap``
  + ``cuMemSetAccess``: one repeat when a release comes before it), and a release before the
  thread's first allocation (``cudaFree(0)`` creating the context) starts nothing.
* An allocation inside its thread's **first call of an operator** (the innermost operator range
  around it, when the capture has operator ranges) never repeats: a library creating its handle
  or sizing its workspace on the first ``aten::addmm`` is set-up, whatever it frees on the way.
* Everything else is **growth**: the caching allocator reserving memory as the program first
  needs it, a library's first-call workspace, buffers allocated once.

Churn is repetition: with steps, repeats in at least half the steps after the first
(:func:`alloc_repeats` ``repeat_steps_pct``); without steps, at least
``rules/allocation-churn.yaml`` ``min_repeats`` repeats in the window.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

#: Allocation calls that release memory (runtime and driver, CUDA and HIP); the other calls of
#: ``schema.ALLOC_APIS`` allocate (or map, register, reserve).
RELEASE_APIS = re.compile(
    r"^(cudaFree\w*|cudaHostUnregister|cudaMemPool(Destroy|Trim\w*)|cuMemFree\w*|cuMemHostUnregister|cuMemRelease|"
    r"cuMemUnmap|cuMemAddressFree|cuMemPool(Destroy|Trim\w*))(_ptsz)?$|"
    r"^(hipFree\w*|hipHostFree|hipHostUnregister|hipMemPool(Destroy|Trim\w*)|hipMemRelease|hipMemUnmap|"
    r"hipMemAddressFree)(_spt)?$"
)


def is_release(name: str) -> bool:
    """Whether an allocation API call (name with or without its ``_vNNNN`` suffix) releases memory."""
    return RELEASE_APIS.match(re.sub(r"_v\d+$", "", name)) is not None


@dataclass
class AllocRepeats:
    """What the allocation calls of the launching threads did in the analysis window."""

    #: allocation calls in the window (releases not counted)
    alloc_count: int
    #: release calls in the window
    release_count: int
    #: allocations in the window that repeat (alloc → free → alloc on their thread)
    repeat_count: int
    #: allocations in the window that do not repeat: growth
    growth_count: int
    #: allocations in the window inside their thread's first call of an operator (part of growth)
    first_call_count: int
    #: primary steps after the first one (None without steps)
    later_steps: int | None
    #: of those, the steps with at least one repeat starting in them
    repeat_steps: int | None
    #: start times (ns, sorted) of the repeats in the window: which steps hold churn
    repeat_starts_ns: np.ndarray | None = None

    @property
    def repeat_steps_pct(self) -> float | None:
        """Share of the steps after the first with a repeat (None with fewer than two steps)."""
        if not self.later_steps:
            return None
        return self.repeat_steps / self.later_steps * 100


def repeats(thread: np.ndarray, start_ns: np.ndarray, release: np.ndarray) -> np.ndarray:
    """Per call, whether it is an allocation that repeats: on its thread (calls in time order)
    the call just before it is a release, and an allocation came before that release."""
    n = len(start_ns)
    out = np.zeros(n, dtype=bool)
    if not n:
        return out
    thread = np.asarray(thread, np.int64)
    release = np.asarray(release, bool)
    order = np.lexsort((np.asarray(start_ns, np.int64), thread))
    th, rel = thread[order], release[order]
    new_thread = np.ones(n, dtype=bool)
    new_thread[1:] = th[1:] != th[:-1]
    # an allocation seen earlier on the thread (before this call)
    alloc = (~rel).astype(np.int64)
    seen = np.cumsum(alloc) - alloc
    firsts = np.flatnonzero(new_thread)
    base = np.repeat(seen[firsts], np.diff(np.append(firsts, n)))
    before = (seen - base) > 0
    prev_release = np.zeros(n, dtype=bool)
    prev_release[1:] = rel[:-1] & ~new_thread[1:]
    # the release just before must itself follow an allocation on the thread
    out[order] = ~rel & prev_release & before
    return out


def alloc_repeats(thread: np.ndarray, start_ns: np.ndarray, release: np.ndarray, first_call: np.ndarray,
                  w0: int, w1: int, step_start: np.ndarray | None = None,
                  step_end: np.ndarray | None = None, step_key: np.ndarray | None = None) -> AllocRepeats:
    """The allocation calls ``(thread, start_ns, release)`` of the launching threads over the
    capture (earlier calls give the history: a free before the window makes the window's first
    allocation a repeat), ``first_call``: inside their thread's first call of an operator.
    Counts are of calls starting in ``[w0, w1)``; steps are the primary steps ``[start, end)``
    (None or empty: no steps), ``step_key`` the thread each belongs to: the first step of each
    thread is where growth happens, the steps after it are where churn would show."""
    start_ns = np.asarray(start_ns, np.int64)
    release = np.asarray(release, bool)
    first_call = np.asarray(first_call, bool) if first_call is not None else np.zeros(len(start_ns), bool)
    rep = repeats(thread, start_ns, release) & ~first_call
    inw = (start_ns >= w0) & (start_ns < w1)
    alloc = inw & ~release
    later = repeat_steps = None
    if step_start is not None and len(step_start):
        ss = np.asarray(step_start, np.int64)
        se = np.asarray(step_end, np.int64)
        key = np.zeros(len(ss), np.int64) if step_key is None else np.asarray(step_key, np.int64)
        order = np.lexsort((ss, key))
        first = np.ones(len(ss), dtype=bool)
        first[1:] = key[order][1:] != key[order][:-1]
        keep = np.sort(order[~first])
        later = len(keep)
        if later > 0:
            t = np.sort(start_ns[rep])
            inside = np.searchsorted(t, se[keep], side="left") - np.searchsorted(t, ss[keep], side="left")
            repeat_steps = int((inside > 0).sum())
    return AllocRepeats(alloc_count=int(alloc.sum()), release_count=int((inw & release).sum()),
                        repeat_count=int((rep & inw).sum()), growth_count=int((alloc & ~rep).sum()),
                        first_call_count=int((alloc & first_call).sum()), later_steps=later,
                        repeat_steps=repeat_steps, repeat_starts_ns=np.sort(start_ns[rep & inw]))


__all__ = ["RELEASE_APIS", "AllocRepeats", "alloc_repeats", "is_release", "repeats"]
