"""Scenarios of issue 47, item 1: the memory view (``profile_memory=True``, ``--cuda-memory-usage``).

Each returns a :class:`~nsysdoc.testing.Capture` of a situation users reported; tests compute the
expected numbers by hand from the arguments and ``docs/glossary.md`` ("Memory"). Memory events are
written by :meth:`~nsysdoc.testing.builder.Thread.alloc_event` (both formats from one scenario;
the builder's reserved total is the highest allocated total so far).

* ``memory_leak_per_step``: every step allocates ``churn_mib`` of activations inside ``aten::mm``
  and frees them, and keeps ``leak_mib`` inside ``aten::cat`` (a list of losses that still hold
  their graph): the level at each step's end rises by ``leak_mib``;
* ``memory_churn_no_growth``: the same without the leak (quiet);
* ``memory_near_capacity``: ``weights_gib`` allocated once in ``aten::empty`` before the steps
  (an 80 GiB GPU, as the builder writes it), then the same churn.
"""
from __future__ import annotations

import contextlib
from typing import Callable

from .builder import Capture
from .kernel_names import ELEMENTWISE, GEMM

MIB = 1 << 20
GIB = 1 << 30


def _step(t, i: int, churn_mib: float, leak_mib: float, frame: bool) -> None:
    where = t.frame("train.py", 42, "train_step") if frame else contextlib.nullcontext()
    with t.range(f"ProfilerStep#{i}"), where:
        with t.op("aten::mm"):
            t.alloc_event(int(churn_mib * MIB))
            t.launch(GEMM, 1000)
        with t.op("aten::relu"):
            t.launch(ELEMENTWISE, 100)
        if leak_mib:
            with t.op("aten::cat"):
                t.alloc_event(int(leak_mib * MIB))
                t.launch(ELEMENTWISE, 50)
        with t.op("aten::mm"):
            t.alloc_event(-int(churn_mib * MIB))  # the activations freed after backward
        t.item()


def memory_leak_per_step(steps: int = 4, churn_mib: float = 64, leak_mib: float = 8, frame: bool = True,
                         leak_from: int = 0, base_mib: float = 0) -> Capture:
    """Steps ``ProfilerStep#i``: ``aten::mm`` allocates ``churn_mib`` and launches a 1 ms GEMM,
    ``aten::relu`` a 100 us kernel, ``aten::cat`` keeps ``leak_mib`` (a 50 us kernel; only in steps
    ``leak_from`` on), then the ``churn_mib`` are freed (in an ``aten::mm`` range); ``item()`` ends
    the step. With ``frame``, each step's work is inside the Python frame ``train.py(42):
    train_step``. ``base_mib``: allocated once in ``aten::empty`` before the steps (the weights)."""
    cap = Capture()
    t = cap.process(pid=4710).thread()
    if base_mib:
        with t.op("aten::empty"):
            t.alloc_event(int(base_mib * MIB))
            t.launch(ELEMENTWISE, 100)
    for i in range(steps):
        _step(t, i, churn_mib, leak_mib if i >= leak_from else 0, frame)
    return cap


def memory_churn_no_growth(steps: int = 4, churn_mib: float = 64) -> Capture:
    """:func:`memory_leak_per_step` without the leak: every step frees what it allocates."""
    return memory_leak_per_step(steps=steps, churn_mib=churn_mib, leak_mib=0)


def memory_near_capacity(steps: int = 4, weights_gib: float = 75, churn_mib: float = 512) -> Capture:
    """``weights_gib`` allocated once in ``aten::empty`` before the steps, then steps of
    :func:`memory_churn_no_growth` with ``churn_mib`` of activations each."""
    cap = Capture()
    t = cap.process(pid=4720).thread()

    with t.op("aten::empty"):
        t.alloc_event(int(weights_gib * GIB))
        t.launch(ELEMENTWISE, 100)
    for i in range(steps):
        _step(t, i, churn_mib, 0, False)
    return cap


MEMORY_SCENARIOS: dict[str, Callable[..., Capture]] = {
    f.__name__: f for f in (memory_leak_per_step, memory_churn_no_growth, memory_near_capacity)
}
