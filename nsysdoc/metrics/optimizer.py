"""Gradient zeroing repeated within one optimizer step (issue 47; the first seed article, section
6.4: ``optimizer.zero_grad()`` called on every micro-batch of gradient accumulation launches many
pointless kernels). Pure functions over arrays of ranges and GPU operations; times in ns.

PyTorch's optimizers wrap ``zero_grad`` and ``step`` in ``record_function`` ranges named
``Optimizer.zero_grad#<Class>.zero_grad`` and ``Optimizer.step#<Class>.step``: a PyTorch Profiler
trace holds them as ``user_annotation`` events, an nsys capture as NVTX ranges (with
``--pytorch=autograd-nvtx`` or ``emit_nvtx``). Definitions: docs/glossary.md, "Gradient zeroing".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

#: the record_function names of an optimizer's ``zero_grad`` and ``step`` (the class after '#')
ZERO_GRAD_RE = re.compile(r"^Optimizer\.zero_grad#")
STEP_RE = re.compile(r"^Optimizer\.step#")


def is_zero_grad(text: str) -> bool:
    return isinstance(text, str) and ZERO_GRAD_RE.match(text.strip()) is not None


def is_optimizer_step(text: str) -> bool:
    return isinstance(text, str) and STEP_RE.match(text.strip()) is not None


@dataclass(frozen=True)
class ZeroGradRepeats:
    """``zero_grad`` calls per optimizer step on each thread with an optimizer step."""

    #: zero_grad ranges on a thread with at least one optimizer step range, and those step ranges
    zero_grad_calls: int
    step_calls: int
    #: the most zero_grad calls between two consecutive step starts (also before the first and
    #: after the last step the capture holds); None when no thread has both
    per_step_max: int | None
    #: per zero_grad range given: True when it is not the last of its interval (an extra call)
    extra: np.ndarray


def zero_grad_repeats(zg_thread, zg_start, st_thread, st_start, zg_name=None) -> ZeroGradRepeats:
    """Count each thread's zero_grad ranges between consecutive optimizer step starts.

    A zero_grad belongs to interval k of its thread: the count of that thread's step ranges that
    start at or before it. In an interval with n calls of one name (``zg_name``: a code per
    range, e.g. its text; two optimizers each zero their own gradients once per step) the last
    one is needed (it clears the gradients the next step would otherwise add to) and the n − 1
    before it are **extra**. Threads
    with no step range count nothing (no step to measure against: inference, or a capture of
    part of a step). Intervals cut by the capture's edges can only hold fewer calls than the
    whole interval, never more."""
    zt = np.asarray(zg_thread, dtype=np.int64)
    zs = np.asarray(zg_start, dtype=np.int64)
    zn = np.zeros(len(zt), dtype=np.int64) if zg_name is None else np.asarray(zg_name, dtype=np.int64)
    stt = np.asarray(st_thread, dtype=np.int64)
    sts = np.asarray(st_start, dtype=np.int64)
    extra = np.zeros(len(zt), dtype=bool)
    counted, best = 0, None
    for th in np.unique(stt).tolist():
        z = np.flatnonzero(zt == th)
        if not len(z):
            best = max(best or 0, 0)
            continue
        steps = np.sort(sts[stt == th])
        k = np.searchsorted(steps, zs[z], side="right")
        o = np.lexsort((zs[z], zn[z], k))  # by interval, name, then start
        z, k = z[o], k[o]
        new = np.ones(len(z), dtype=bool)  # first of its (interval, name) group
        new[1:] = (k[1:] != k[:-1]) | (zn[z[1:]] != zn[z[:-1]])
        last = np.ones(len(z), dtype=bool)
        last[:-1] = new[1:]
        extra[z[~last]] = True
        counted += len(z)
        group = np.cumsum(new) - 1
        best = max(best or 0, int(np.bincount(group).max()))
    return ZeroGradRepeats(zero_grad_calls=counted, step_calls=int(len(stt)), per_step_max=best, extra=extra)


def launched_inside(r_thread, r_start, r_end, op_thread, op_api_start) -> np.ndarray:
    """Per GPU operation: whether its launch call starts inside one of the ranges on the same
    thread (``r_start <= api start < r_end``). The ranges of one thread must not overlap (a
    thread's zero_grad calls follow one another)."""
    ot = np.asarray(op_thread, dtype=np.int64)
    oa = np.asarray(op_api_start, dtype=np.int64)
    out = np.zeros(len(ot), dtype=bool)
    rt = np.asarray(r_thread, dtype=np.int64)
    rs, re_ = np.asarray(r_start, dtype=np.int64), np.asarray(r_end, dtype=np.int64)
    for th in np.unique(rt).tolist():
        m = rt == th
        o = np.argsort(rs[m], kind="stable")
        s, e = rs[m][o], re_[m][o]
        q = np.flatnonzero(ot == th)
        if not len(q):
            continue
        k = np.searchsorted(s, oa[q], side="right") - 1
        out[q] = (k >= 0) & (oa[q] < e[np.maximum(k, 0)])
    return out


def clipped_ns(start, end, w0: int, w1: int) -> int:
    """Summed durations of ``[start, end)`` clipped to the window ``[w0, w1)`` (ns)."""
    s = np.maximum(np.asarray(start, dtype=np.int64), w0)
    e = np.minimum(np.asarray(end, dtype=np.int64), w1)
    return int(np.maximum(e - s, 0).sum())
