"""The rows of the Perfetto export, read from a capture and its analysis: the views format them.

``nsysdoc report -f perfetto`` (:mod:`nsysdoc.views.perfetto`) writes every GPU operation, idle
gap, CUDA API call and NVTX range of a selection as Chrome-trace JSON. The views render and never
import the readers or the engine (issue 51); the reading is here, one floor down:

* :meth:`ExportSource.slices` replays the engine's slices from the run's context (the operations
  each slice owns, the gaps it classifies, with their classes), so memory stays that of one slice;
* the per-slice columns the events' args need: correlation ids (:meth:`ExportSource.correlations`),
  the Where attribution of each launch (:meth:`ExportSource.sites`, :meth:`ExportSource.site_name`)
  and the operator ranges the flows start from (:meth:`ExportSource.operator_forest`);
* the host rows of an interval: CUDA API calls with their blocking flag
  (:meth:`ExportSource.api_calls`) and NVTX ranges with their text (:meth:`ExportSource.nvtx_ranges`);
* the tracks' tables (devices, streams, processes, threads: :class:`TrackTables`), names from the
  string table, and the export schema's codes in words (:func:`host_ids`, :func:`launch_fields`,
  :func:`copy_kind_label`, :func:`mem_kind_label`, :func:`api_name`).

It stands on the assembly floor (``tools/import_graph.py``): above the engine and the readers it
reads, below the views that format it. ``analysis`` is an :class:`nsysdoc.analysis.Analysis` whose
trace and engine state are at hand (``Report._rows()``); it is read through its attributes only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.data import GPU_KINDS, NEG, POS, RT_COLS, blocking_of, read_ops
from ..engine.slices import SliceState, _view, next_carry, op_sites, phase_a
from ..trace import schema as S
from ..trace.store import to_text


def time_origin_ns(analysis) -> int:
    """0 on the capture's timeline: an nsys export's own 0; for a PyTorch Profiler trace, the
    instant trace viewers show as 0 (the page prints seconds from there too)."""
    o = getattr(analysis.trace, "viewer_origin_ns", None)
    return int(o) if isinstance(o, (int, np.integer)) else 0


def host_ids(gtid: int) -> tuple[int, int, int]:
    """(global process id, OS pid, OS tid) of a global thread id."""
    return int(gtid) & S.PROCESS_MASK, int(S.decode_pid(gtid)), int(S.decode_tid(gtid))


def launch_fields(keys: np.ndarray, code: int) -> list[tuple[str, int]]:
    """The launch configuration of launch code ``code`` (a row of ``keys``, the trace's
    ``launch_keys``) as (arg label, value) pairs, those known (>= 0) only; [] for a code outside."""
    if not 0 <= code < len(keys):
        return []
    f = S.unpack_launch(keys[code:code + 1])
    return [(label, int(f[key][0])) for key, label in
            (("blocks", "grid"), ("threads", "block"), ("regs", "registers per thread"), ("smem", "shared memory"))
            if int(f[key][0]) >= 0]


def copy_kind_label(code: int, missing: str) -> str:
    return S.COPY_KIND_LABELS.get(code, missing)


def mem_kind_label(code: int, missing: str) -> str:
    return S.MEM_KIND_LABELS.get(code, missing)


def api_name(name: str) -> str:
    """A CUDA API call's name without its version suffix (``cudaLaunchKernel_v7000``)."""
    return S.strip_api_suffix(name)


@dataclass
class TrackTables:
    """What the export's tracks are named after: devices, streams, processes and threads."""

    dev_label: list
    dev_name: list
    stream_id: np.ndarray
    stream_proc: np.ndarray
    stream_dev: np.ndarray
    proc_pid: np.ndarray
    proc_names: dict
    thread_gtid: np.ndarray
    thread_name: dict


def track_tables(tr) -> TrackTables:
    dev = tr.devices
    st = tr.streams
    pr = tr.processes
    th = tr.threads
    thread_gtid = np.asarray(th["global_tid"], dtype=np.int64) if len(th) else np.zeros(0, np.int64)
    return TrackTables(
        dev_label=[str(x) for x in np.asarray(dev["label"])] if len(dev) else [],
        dev_name=[str(x or "") for x in np.asarray(dev["name"])] if len(dev) else [],
        stream_id=np.asarray(st["stream_id"], dtype=np.int64) if len(st) else np.zeros(0, np.int64),
        stream_proc=np.asarray(st["proc"], dtype=np.int64) if len(st) else np.zeros(0, np.int64),
        stream_dev=np.asarray(st["device"], dtype=np.int64) if len(st) else np.zeros(0, np.int64),
        proc_pid=np.asarray(pr["pid"], dtype=np.int64) if len(pr) else np.zeros(0, np.int64),
        proc_names={int(g): str(n or "") for g, n in zip(np.asarray(pr["global_pid"], dtype=np.int64),
                                                        np.asarray(pr["name"]))} if len(pr) else {},
        thread_gtid=thread_gtid,
        thread_name={int(g): str(n or "") for g, n in zip(thread_gtid, np.asarray(th["name"]))}
        if len(th) and "name" in th else {})


def _gtids(thread: np.ndarray, thread_gtid: np.ndarray) -> np.ndarray:
    """Global thread ids of thread indices (-1 or no threads: 0)."""
    th = np.asarray(thread, dtype=np.int64)
    return np.where(th >= 0, thread_gtid[np.clip(th, 0, max(len(thread_gtid) - 1, 0))]
                    if len(thread_gtid) else 0, 0)


class ExportSource:
    """One analysis' rows for the export (see the module doc)."""

    def __init__(self, analysis) -> None:
        self.a = analysis
        self.tr = analysis.trace
        self.origin_ns = time_origin_ns(analysis)
        self.tracks = track_tables(self.tr)
        self.launch_keys = np.asarray(self.tr.derived.get("launch_keys", np.zeros(0, np.int64)), dtype=np.int64)
        self.nvtx_domains = self.tr.nvtx_domains

    def result(self) -> dict:
        return self.a.to_dict() or {}

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Texts of string ids (the capture's string table)."""
        return self.tr.strings.lookup(ids)

    # -- the engine's slices -------------------------------------------------------------------
    def slices(self, lo: int, hi: int):
        """Each engine slice's state (operations it owns, gaps it classifies) in time order, replayed
        from the run's context, for a selection spanning ``[lo, hi)``: slices wholly before it only
        pass their carry on (their operations are read, nothing is classified); after it, slices run
        until every device has been busy past its end (no gap overlapping it is still open)."""
        res = self.a.engine
        if res is None:
            return
        ctx = res.ctx
        spans = res.plan.slices()
        carry = ctx.first_carry()
        for i, (c0, c1) in enumerate(spans):
            last = i == len(spans) - 1
            if c0 >= hi and (not len(carry.last_end) or int(carry.last_end.min()) >= hi or not ctx.active):
                return
            if c1 <= lo and not last:
                ops = read_ops(ctx.trace, c0, c1, ctx.nccl)
                carried = carry.ops if carry.ops is not None and len(carry.ops) else None
                st = SliceState(c0=c0, c1=c1, last=last, ops=ops, carried=carried, act=None, gaps=None, host=None,
                                rt=None, blocking=None, osrt=None, lo_dev=None)
                carry = next_carry(ctx, st, carry)
                continue
            st = phase_a(ctx, c0, c1, carry.copy(), last)
            yield st
            carry = next_carry(ctx, st, carry)

    def correlations(self, ops, idx: np.ndarray, state) -> np.ndarray:
        """The correlation id of operations ``idx`` of a slice (0: unknown), read from their tables
        for the slice's span (the rows the slice owns) and matched by position."""
        out = np.zeros(len(idx), dtype=np.int64)
        if state is None:
            return out
        kind = ops.kind[idx]
        for kd, name in GPU_KINDS:
            m = np.flatnonzero(kind == kd)
            t = self.tr.store.get(name) if len(m) else None
            if t is None or not len(t):
                continue
            d = t.rows_starting_in(None if state.c0 <= NEG else state.c0, None if state.c1 >= POS else state.c1,
                                   ["pos", "correlation_id"])
            pos = np.asarray(d["pos"], dtype=np.int64)
            if not len(pos):
                continue
            o = np.argsort(pos, kind="stable")
            pos, cor = pos[o], np.asarray(d["correlation_id"], dtype=np.int64)[o]
            r = ops.row[idx[m]].astype(np.int64)
            j = np.minimum(np.searchsorted(pos, r), len(pos) - 1)
            ok = pos[j] == r
            out[m[ok]] = cor[j[ok]]
        return out

    def sites(self, state):
        """(site rows, innermost operator range) of a slice's operations as the engine attributed
        them (site rows: operator, module, frame, backward node, forward operator codes, -1: none;
        :func:`nsysdoc.engine.slices.op_sites`); None without ranges."""
        res = getattr(self.a, "engine", None)
        ctx = getattr(res, "ctx", None)
        if state is None or ctx is None or getattr(ctx.plan, "attr", None) is None or not len(state.ops):
            return None
        return op_sites(ctx, state)

    def site_name(self, code: int) -> str | None:
        """The name a site code stands for; None for -1 (none) or a code outside."""
        names = self.a.engine.ctx.plan.attr.names
        return str(names[code]) if 0 <= code < len(names) else None

    def operator_forest(self, state):
        """The operator ranges a slice's sites index (``start``, ``end``, ``thread`` columns)."""
        view = _view(self.a.engine.ctx, state)
        return getattr(view, "attr", view).ops

    # -- host rows -----------------------------------------------------------------------------
    def api_calls(self, lo: int, hi: int, before: bool, written) -> dict | None:
        """CUDA API calls starting in ``[lo, hi)`` (with ``before``: starting before ``lo``, still
        running at it, and not in ``written(start)``, the rows already exported): ``start``, ``end``
        (never before the start), ``gtid`` (0: unknown thread), ``name_id``, ``sync`` (1: a
        blocking call); None when there are none."""
        t = self.tr.store.get("runtime")
        if t is None or not len(t):
            return None
        d = t.rows_overlapping(lo, lo, RT_COLS) if before else t.rows_starting_in(lo, hi, RT_COLS)
        if before and len(d["start_ns"]):
            keep = (d["start_ns"] < lo) & ~written(d["start_ns"], lo)
            d = {k: v[keep] for k, v in d.items()}
        if not len(d["start_ns"]):
            return None
        blocking = blocking_of(d, np.asarray(self.tr.derived.get("pageable_async_api", np.zeros(0, np.int64))))
        gt = _gtids(d["thread"], self.tracks.thread_gtid)
        s = d["start_ns"].astype(np.int64)
        e = np.maximum(d["end_ns"].astype(np.int64), s)
        nid = np.asarray(d["name_id"], dtype=np.int64)
        del d
        return {"start": s, "end": e, "gtid": gt, "name_id": nid,
                "sync": np.asarray(blocking, dtype=bool).astype(np.int64)}

    def nvtx_ranges(self, lo: int, hi: int, before: bool, written) -> dict | None:
        """NVTX push/pop and start/end ranges starting in ``[lo, hi)`` (``before``: as for
        :meth:`api_calls`): ``text`` (str, or None), ``domain`` (index into ``nvtx_domains``),
        ``gtid``, ``start``, ``end``; None when there are none."""
        nv = self.tr.store.get("nvtx")
        if nv is None or not len(nv):
            return None
        cols = ["start_ns", "end_ns", "event_type", "global_tid", "text", "domain"]
        d = nv.rows_overlapping(lo, lo, cols) if before else nv.rows_starting_in(lo, hi, cols)
        s = np.asarray(d["start_ns"], dtype=np.int64)
        e = np.asarray(d["end_ns"], dtype=np.int64)
        m = np.isin(np.asarray(d["event_type"]), S.NVTX_RANGE_TYPES) & (e >= s)
        if before:
            m &= (s < lo) & ~written(s, lo)
        idx = np.flatnonzero(m)
        if not len(idx):
            return None
        return {"text": to_text(d["text"])[idx] if len(d["text"]) else np.zeros(0, object),
                "domain": np.asarray(d["domain"], dtype=np.int64)[idx],
                "gtid": np.asarray(d["global_tid"], dtype=np.int64)[idx], "start": s[idx], "end": e[idx]}
