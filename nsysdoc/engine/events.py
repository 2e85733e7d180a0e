"""Per-event rows of the analysis window (issue 49): every GPU operation and every idle gap, in
chunks of numpy columns, for ``Report.iter_gpu_ops`` / ``Report.iter_gaps`` (docs/api.md).

Nothing here is kept after the run: the slices run again from the carries the run saved
(:func:`nsysdoc.engine.run.capture_windows` does the same), one at a time, so memory stays that of
one slice plus one chunk whatever the capture's length. Each row is the one the report counted:

* GPU operations: those the analysis window holds (:func:`nsysdoc.engine.data.in_window`), each
  from the slice it starts in, so once; sorted by start (then device, stream, kernels before
  copies before memsets). Operator, module and frame are the Where attribution's site of the
  launch (:meth:`nsysdoc.engine.attribute.Attributor.sites_and_ranges`, as the findings' Where
  tables count them); the step is :func:`nsysdoc.metrics.steps.assign_ops_to_steps` of the launch.
* Gaps: those overlapping the window, each from the slice its end falls in, clipped to the
  window, with the cause and split of ``metrics.idle_gaps.longest`` (:func:`nsysdoc.engine.
  slices._gap_totals`); sorted by (clipped) end, then device.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..metrics import gpu as gpu_m
from ..metrics.ops import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET
from ..metrics.steps import assign_ops_to_steps
from ..trace import schema as S
from .data import GPU_KINDS, NEG, POS, in_window

#: rows per chunk unless asked otherwise
CHUNK_ROWS = 1_000_000
KIND_NAMES = {KIND_KERNEL: "kernel", KIND_MEMCPY: "memcpy", KIND_MEMSET: "memset"}

#: columns of a GPU-operation chunk (numpy arrays; object arrays hold str or None)
GPU_OP_FIELDS = ("start_ns", "end_ns", "device", "stream", "name", "kind", "correlation", "operator", "module",
                 "step", "frame", "device_id", "pid")
#: columns of a gap chunk
GAP_FIELDS = ("device", "start_ns", "end_ns", "cause", "thread", "split_ns")


def _slices(res) -> Iterator:
    """Each slice of the run again (:func:`nsysdoc.engine.slices.phase_a` from its saved carry)."""
    from .slices import phase_a

    spans, carries = res.spans, res.carries
    for i, (c0, c1) in enumerate(spans):
        yield phase_a(res.ctx, c0, c1, carries[i].copy(), i == len(spans) - 1)


def _rechunk(parts: Iterator[dict], chunk_rows: int) -> Iterator[dict]:
    """``parts`` (dicts of aligned arrays, any lengths) as chunks of exactly ``chunk_rows`` rows,
    the last one shorter; no empty chunk."""
    buf: list[dict] = []
    n = 0
    for p in parts:
        m = len(next(iter(p.values())))
        at = 0
        while at < m:
            take = min(chunk_rows - n, m - at)
            buf.append({k: v[at:at + take] for k, v in p.items()})
            n += take
            at += take
            if n == chunk_rows:
                yield _join(buf)
                buf, n = [], 0
    if n:
        yield _join(buf)


def _join(buf: list[dict]) -> dict:
    if len(buf) == 1:
        return {k: v.copy() for k, v in buf[0].items()}
    return {k: np.concatenate([b[k] for b in buf]) for k in buf[0]}


def _engine_window(analysis) -> tuple[object, int, int] | None:
    """The report run's engine result and its analysis window ``(res, w0, w1)``; None when the run
    kept no slices or has no active window (then there is no row to give)."""
    res = getattr(analysis, "engine", None)
    if res is None or not getattr(res, "spans", None):
        return None
    w0, w1 = res.window_range
    if w0 is None or w1 is None or not res.ctx.active:
        return None
    return res, int(w0), int(w1)


def _lut(values, missing=None) -> np.ndarray:
    """``values`` as an object array with one more entry, ``missing``, at index -1."""
    out = np.empty(len(values) + 1, dtype=object)
    out[:len(values)] = list(values)
    out[-1] = missing
    return out


def _extra_columns(trace, c0: int, c1: int) -> dict[str, np.ndarray]:
    """Correlation id, stream id, device id and row of the GPU operations starting in
    ``[c0, c1)``, in :func:`nsysdoc.engine.data.read_ops`' order (kernels, copies, memsets, each
    in table order), with each one's kind."""
    cols = {"correlation_id": [], "stream_id": [], "device_id": [], "pos": [], "kind": []}
    for kind, name in GPU_KINDS:
        t = trace.store.get(name)
        if t is None or not len(t):
            continue
        d = t.rows_starting_in(None if c0 <= NEG else c0, None if c1 >= POS else c1,
                               ["correlation_id", "stream_id", "device_id", "pos"])
        n = len(d["pos"])
        for c in ("correlation_id", "stream_id", "device_id", "pos"):
            cols[c].append(np.asarray(d[c], dtype=np.int64))
        cols["kind"].append(np.full(n, kind, dtype=np.int8))
    return {c: np.concatenate(v) if v else np.zeros(0, np.int64) for c, v in cols.items()}


def gpu_op_parts(analysis) -> Iterator[dict]:
    """Each slice's GPU operations of the analysis window, as a dict of :data:`GPU_OP_FIELDS`."""
    got = _engine_window(analysis)
    if got is None:
        return
    res, w0, w1 = got
    trace = res.ctx.trace
    plan = res.ctx.plan
    attr = plan.attr
    labels = _lut(np.asarray(trace.devices["label"], dtype=object))
    dev_ids = np.append(np.asarray(trace.devices["device_id"], dtype=np.int64), -1)
    procs = np.asarray(trace.processes["pid"], dtype=np.int64) if len(trace.processes) else np.zeros(0, np.int64)
    steps = plan.steps
    has_steps = steps is not None and len(steps.table) and np.asarray(steps.table["primary"], dtype=bool).any()
    from .slices import op_sites

    for st in _slices(res):
        ops = st.ops
        if not len(ops):
            continue
        keep = np.flatnonzero(ops.owned & in_window(ops.start_ns, ops.end_ns, w0, w1))
        if not len(keep):
            continue
        extra = _extra_columns(trace, st.c0, st.c1)
        if len(extra["pos"]) != len(ops) or not (np.array_equal(extra["pos"], ops.row)
                                                 and np.array_equal(extra["kind"], ops.kind)):
            # not read_ops' order (cannot happen today): match by (kind, row)
            key_e = extra["kind"].astype(np.int64) * (1 << 40) + extra["pos"]
            key_o = ops.kind.astype(np.int64) * (1 << 40) + ops.row
            order = np.argsort(key_e, kind="stable")
            at = order[np.clip(np.searchsorted(key_e[order], key_o), 0, max(len(order) - 1, 0))]
            extra = {k: v[at] for k, v in extra.items()}
        k = keep
        kind = ops.kind[k]
        name = np.empty(len(k), dtype=object)
        is_k = kind == KIND_KERNEL
        if is_k.any():
            name[is_k] = trace.strings.lookup(ops.name_id[k][is_k])
        mc = kind == KIND_MEMCPY
        if mc.any():
            name[mc] = [f"Memcpy {S.COPY_KIND_LABELS.get(int(c), 'Unknown')}" for c in ops.copy_kind[k][mc].tolist()]
        name[kind == KIND_MEMSET] = "Memset"
        op = mod = frame = np.full(len(k), None, dtype=object)
        if attr is not None:
            sites = op_sites(res.ctx, st)[0]
            names = _lut(list(attr.names))
            rows = np.asarray(sites)[k]
            op, mod, frame = (names[np.where(rows[:, j] >= 0, rows[:, j], -1)] for j in (0, 1, 2))
        when = np.where(ops.api[k] >= 0, ops.api_start_ns[k], ops.start_ns[k])
        step = assign_ops_to_steps(steps, ops.proc[k].astype(np.int64), when) if has_steps \
            else np.full(len(k), -1, dtype=np.int64)
        corr = extra["correlation_id"][k]
        proc = ops.proc[k].astype(np.int64)
        part = {
            "start_ns": ops.start_ns[k].astype(np.int64), "end_ns": ops.end_ns[k].astype(np.int64),
            "device": labels[np.where(ops.device[k] >= 0, ops.device[k], -1)],
            "stream": extra["stream_id"][k], "name": name,
            "kind": np.array([KIND_NAMES[int(x)] for x in kind.tolist()], dtype=object) if len(k) else
            np.zeros(0, dtype=object),
            "correlation": corr, "operator": op, "module": mod, "step": step, "frame": frame,
            "device_id": dev_ids[np.where(ops.device[k] >= 0, ops.device[k], -1)],
            "pid": np.where((proc >= 0) & (proc < len(procs)), procs[np.clip(proc, 0, max(len(procs) - 1, 0))]
                            if len(procs) else -1, -1),
        }
        order = np.lexsort((kind, part["stream"], part["device_id"], part["start_ns"]))
        yield {c: part[c][order] for c in GPU_OP_FIELDS}


def gap_parts(analysis) -> Iterator[dict]:
    """Each slice's idle gaps overlapping the analysis window, as a dict of :data:`GAP_FIELDS`
    (``split_ns``: an ``(n, len(CAUSES))`` array, ns per idle class inside the window)."""
    got = _engine_window(analysis)
    if got is None:
        return
    res, w0, w1 = got
    for st in _slices(res):
        g = st.gaps
        if g is None or not len(g):
            continue
        sel = np.flatnonzero((g.start_ns < w1) & (g.end_ns > w0))
        if not len(sel):
            continue
        # as _gap_totals: clipped to the window, the cause of a cut gap from its part inside
        s0, s1 = np.maximum(g.start_ns[sel], w0), np.minimum(g.end_ns[sel], w1)
        split = g.split(sel, w0, w1).astype(np.int64)
        cause = g.cause[sel].astype(np.int64)
        cut = np.flatnonzero((g.start_ns[sel] < w0) | (g.end_ns[sel] > w1))
        if len(cut):
            cause[cut] = np.argmax(split[cut], axis=1)
        dev = g.device[sel].astype(np.int64)
        order = np.lexsort((dev, s1))
        yield {"device": dev[order], "start_ns": s0[order].astype(np.int64), "end_ns": s1[order].astype(np.int64),
               "cause": cause[order], "thread": np.asarray(g.thread[sel], dtype=np.int64)[order],
               "split_ns": split[order]}


def gpu_op_chunks(analysis, chunk_rows: int = CHUNK_ROWS) -> Iterator[dict]:
    return _rechunk(gpu_op_parts(analysis), chunk_rows)


def gap_chunks(analysis, chunk_rows: int = CHUNK_ROWS) -> Iterator[dict]:
    return _rechunk(gap_parts(analysis), chunk_rows)


CAUSES = gpu_m.CAUSES
