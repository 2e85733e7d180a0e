"""``metrics.exposed_comm`` (issue 49): the exposed-communication stretches of the slowest and the
median step (or of the window, without steps), which the exposed-NCCL finding's time ranges point
at (``time_ranges: exposed_comm``) instead of the whole slowest step."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..metrics.exposed import exposed_comm_intervals_ns, longest_first
from .numbers import _num

if TYPE_CHECKING:  # pragma: no cover
    from .inputs import Inputs

#: stretches kept per range (the longest), and the gap under which two stretches are one
EXPOSED_STRETCHES_MAX = 50
EXPOSED_MERGE_NS = 1_000
#: without steps the window's kernels are read at once: above this many, no stretches
WINDOW_KERNELS_MAX = 5_000_000


def _range(t, nccl, labels, kind: str, step, t0: int, t1: int, dev: int | None, name=None) -> dict:
    tab = t.store.get("kernels")
    d = tab.rows_overlapping(t0, t1, ["start_ns", "end_ns", "device", "name_id", "short_id"])
    k, s, e = (np.asarray(d[c], np.int64) for c in ("device", "start_ns", "end_ns"))
    comm = np.asarray(nccl(np.asarray(d["short_id"])) | nccl(np.asarray(d["name_id"])), bool)
    if dev is not None:
        m = k == dev
        k, s, e, comm = k[m], s[m], e[m], comm[m]
    _, es, ee = exposed_comm_intervals_ns(k, s, e, comm, t0, t1)
    mk, ms, me = exposed_comm_intervals_ns(k, s, e, comm, t0, t1, merge_gap_ns=EXPOSED_MERGE_NS)
    keep = np.sort(longest_first(ms, me, EXPOSED_STRETCHES_MAX))  # the longest, in (device, start) order
    return {"range": kind, "step": step, "name": name, "start_ns": int(t0), "end_ns": int(t1),
            "device": None if dev is None else str(labels[dev]),
            "exposed_ms": _num(float((ee - es).sum()) / 1e6), "stretch_count": len(ms),
            "stretches": [{"device": str(labels[a]) if 0 <= a < len(labels) else None,
                           "start_ns": b, "end_ns": c, "duration_ms": _num((c - b) / 1e6)}
                          for a, b, c in zip(mk[keep].tolist(), ms[keep].tolist(), me[keep].tolist())]}


def exposed_comm_metrics(a: Inputs, step_rows: list[dict], picks: tuple) -> dict:
    """``{"worst_step": {...}, "median_step": {...}}`` with steps, ``{"window": {...}}`` without,
    ``{}`` when the capture has no communication kernel (docs/json.md)."""
    res = a.engine  # the run, read once through the assembly's inputs (issue 51)
    t = a.trace
    tab = t.store.get("kernels")
    ctx = getattr(res, "ctx", None)
    if tab is None or not len(tab) or ctx is None:
        return {}
    labels = [str(x) for x in np.asarray(t.devices["label"]).tolist()]
    out: dict = {}
    primary = {r["step"]: r for r in step_rows if r.get("primary")}
    if primary:
        for kind, pick in (("worst_step", picks[1]), ("median_step", picks[0])):
            r = primary.get(pick)
            if r is None or r.get("end_ns") is None or r["end_ns"] <= r["start_ns"]:
                continue
            dev = labels.index(str(r["device"])) if r.get("device") is not None and str(r["device"]) in labels \
                else None
            out[kind] = _range(t, ctx.nccl, labels, kind, r["step"], int(r["start_ns"]), int(r["end_ns"]), dev,
                               r.get("name"))
    elif a.steps.window_start_ns is not None and a.steps.window_end_ns is not None \
            and t.count("kernels") <= WINDOW_KERNELS_MAX:
        out["window"] = _range(t, ctx.nccl, labels, "window", None, int(a.steps.window_start_ns),
                               int(a.steps.window_end_ns), None)
    if not any(v["stretch_count"] for v in out.values()):
        return {}
    return out
