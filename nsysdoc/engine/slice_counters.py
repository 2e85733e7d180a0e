"""Hardware counters per kernel name and per operator, slice by slice (issue 47): the GPU metrics
samples inside each owned kernel's execution, found once per slice and summed by kernel name
(:func:`nsysdoc.engine.slice_window.window_totals`) and by innermost operator range
(:func:`nsysdoc.engine.slice_global.global_totals`). Split out of :mod:`nsysdoc.engine.slices`
(issue 51): both halves of phase B read the same per-slice bounds (the context's samples per
device are gathered with the context, in :mod:`nsysdoc.engine.slice_state`)."""
from __future__ import annotations

import numpy as np

from ..metrics.ops import KIND_KERNEL
from .slice_state import Context


def _slice_counters(ctx: "Context", ops, cache: dict):
    """(device of each operation of the slice, -1 unless an owned kernel; the index ranges of the
    samples inside them: ``metrics.gpu_metrics.execution_bounds``), found once per slice for the
    kernel and the operator sums."""
    got = cache.get("counters", False)
    if got is False:
        from ..metrics.gpu_metrics import execution_bounds

        dev = np.where((ops.kind == KIND_KERNEL) & ops.owned, ops.device.astype(np.int64), -1)
        got = cache["counters"] = (dev, execution_bounds(ctx.counters, dev, ops.start_ns, ops.end_ns))
    return got


def _kernel_counter_sums(ctx: "Context", ops, kin: np.ndarray, cache: dict | None = None):
    """Per kernel name code, the sums and counts of the samples inside the executions of the
    window's kernels ``kin`` of the slice (``metrics.gpu_metrics.group_sums``)."""
    from ..metrics.gpu_metrics import group_sums

    rows = np.arange(len(ops))[kin]
    dev, bounds = _slice_counters(ctx, ops, {} if cache is None else cache)
    return group_sums(ctx.counters, bounds, dev, rows, ctx.name_code(ops.name_id[rows]), max(len(ctx.name_ids), 1))


def _operator_counter_sums(ctx: "Context", view, ops, rng: np.ndarray, tot, cache: dict) -> None:
    """Adds to ``tot.op_counters``, per operator name code, the sums and counts of the samples inside
    the slice's kernels whose innermost operator range is ``rng`` (the self attribution of the
    operator view's ``self_gpu_ms``)."""
    from ..metrics.gpu_metrics import group_sums

    k = np.flatnonzero(ops.owned & (ops.kind == KIND_KERNEL) & (np.asarray(rng) >= 0))
    if not len(k):
        return
    code = np.asarray(getattr(view, "attr", view).ops.name, dtype=np.int64)[np.asarray(rng)[k]]
    n = max(len(ctx.plan.attr.names), int(code.max()) + 1)
    dev, bounds = _slice_counters(ctx, ops, cache)
    part = group_sums(ctx.counters, bounds, dev, k, code, n)
    if part is None:
        return
    have = tot.op_counters
    if have is None:
        tot.op_counters = part
        return
    if len(have) < len(part):  # operator names met since (the sliced attributor adds them as it goes)
        have = np.vstack([have, np.zeros((len(part) - len(have), have.shape[1]))])
    have[:len(part)] += part
    tot.op_counters = have
