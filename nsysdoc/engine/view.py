"""The data of one timeline window, as :mod:`nsysdoc.metrics.timeline` reads it: the GPU
operations and idle gaps the slices captured (gaps with their class split clipped to the window),
and the host rows of the window read from the store."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..metrics.ops import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET
from ..trace.columns import Columns
from .data import Ops, blocking_of, osrt_rows, rows_overlapping_text, runtime_rows


@dataclass
class CapturedGaps:
    """Idle gaps overlapping a window (sorted by device, then time), with the class split of the
    part of each inside the window; ``split`` answers only for that window."""

    device: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    cause: np.ndarray
    amounts_window: np.ndarray
    window: tuple

    def __len__(self) -> int:
        return len(self.start_ns)

    def split(self, idx, lo, hi, dtype=np.int64) -> np.ndarray:
        if (int(lo), int(hi)) != self.window:
            raise ValueError("captured gaps split only for their window")
        return self.amounts_window[np.asarray(idx, dtype=np.int64)].astype(dtype)


def window_view(analysis, name: str):
    res = analysis.engine
    if res is None or name not in res.captures:
        return None
    cap = res.captures[name]
    trace = analysis.trace
    a, b = cap.start, cap.end
    ops = Ops.concat(cap.ops) if cap.ops else None
    frames = {}
    if ops is not None and len(ops):
        order = np.lexsort((ops.row, ops.kind))  # per kind in table order
        ops = ops.take(order)
        row = np.zeros(len(ops), dtype=np.int64)
        for kind, key in ((KIND_KERNEL, "kernels"), (KIND_MEMCPY, "memcpy"), (KIND_MEMSET, "memset")):
            m = np.flatnonzero(ops.kind == kind)
            row[m] = np.arange(len(m))
            frames[key] = Columns({"short_id": ops.short_id[m], "name_id": ops.name_id[m], "copy_kind": ops.copy_kind[m],
                                        "bytes": ops.nbytes[m], "host_kind": ops.host_kind[m],
                                        "stream": ops.stream[m]})
        ops.row = row
    else:
        ops = Ops.concat([_empty_ops(trace)])
        for key in ("kernels", "memcpy", "memset"):
            frames[key] = Columns({"short_id": [], "name_id": [], "copy_kind": [], "bytes": [], "host_kind": [],
                                   "stream": []})
    if cap.gaps:
        g = [np.concatenate([x[i] for x in cap.gaps]) for i in range(5)]
        order = np.lexsort((g[1], g[0]))
        gaps = CapturedGaps(g[0][order], g[1][order], g[2][order], g[3][order], g[4][order], (int(a), int(b)))
    else:
        z = np.zeros(0, np.int64)
        gaps = CapturedGaps(z, z, z, z, np.zeros((0, 10), np.int64), (int(a), int(b)))
    rt = runtime_rows(trace, a, b)
    keep = (rt["start_ns"] < b) & (rt["end_ns"] > a)
    rt = {k: v[keep] for k, v in rt.items()}
    blocking = blocking_of(rt, np.asarray(trace.derived.get("pageable_async_api", np.zeros(0, np.int64))))
    os_ = osrt_rows(trace, a, b)
    nv = trace.store.get("nvtx")
    if nv is not None:
        d = rows_overlapping_text(nv, a, b, ["start_ns", "end_ns", "event_type", "global_tid", "text", "domain", "thread"])
        nvtx = Columns({"start_ns": d["start_ns"].astype(np.int64), "end_ns": d["end_ns"].astype(np.int64),
                             "event_type": d["event_type"].astype(np.int64), "global_tid": d["global_tid"],
                             "text": d["text"],
                             "domain": trace.nvtx_domains[d["domain"]] if len(d["domain"]) else np.zeros(0, object),
                             "thread": d["thread"]})
    else:
        nvtx = Columns({"start_ns": [], "end_ns": [], "event_type": [], "global_tid": [], "text": [],
                             "domain": [], "thread": []})
    mini = SimpleNamespace(
        kernels=frames["kernels"], memcpy=frames["memcpy"], memset=frames["memset"],
        runtime=Columns({"start_ns": rt["start_ns"], "end_ns": rt["end_ns"], "thread": rt["thread"],
                              "name_id": rt["name_id"]}),
        osrt=Columns({"start_ns": os_["start_ns"], "end_ns": os_["end_ns"], "thread": os_["thread"],
                           "is_wait": np.asarray(os_["is_wait"], dtype=bool), "name_id": os_["name_id"]}),
        nvtx=nvtx, devices=trace.devices, streams=trace.streams, processes=trace.processes, threads=trace.threads,
        strings=trace.strings)
    return SimpleNamespace(trace=mini, ops=ops, gaps=gaps, blocking=blocking, steps=analysis.steps,
                           window=(int(a), int(b)), host_tid=res.plan.timelines.get(name, (0, 0, None))[2]
                           if name in res.plan.timelines else None)


def _empty_ops(trace) -> Ops:
    from .data import read_ops

    return read_ops(trace, 1, 0, lambda x: np.zeros(len(x), dtype=bool))
