"""GPU memory over time (issue 47, item 1): peaks, growth per step, what allocated it.

Definitions (``docs/glossary.md``, "Memory"):

* The **events** are the trace's memory table (:data:`nsysdoc.trace.tables.FRAME_COLUMNS`
  ``memory``) rows on a GPU (``device_type`` 1): PyTorch's ``[memory]`` events
  (``profile_memory=True``: each block the caching allocator hands out or takes back, with the
  device's running ``Total Allocated``/``Total Reserved`` since PyTorch 1.10) or nsys's
  ``CUDA_GPU_MEMORY_USAGE_EVENTS`` (``--cuda-memory-usage=true``: each CUDA allocation and
  release, no running totals).
* **Allocated** (bytes, per device, after each event): the trace's own running total when every
  event of the device carries one (``baseline: "absolute"``); otherwise the sum of the signed
  ``bytes`` since the capture began (``baseline: "capture_start"``): memory allocated before the
  capture is not seen, so the numbers are relative to the capture's start (a lower bound of
  what the device held, never more). **Reserved**: the trace's running total when every event
  carries one, else unknown (None), never estimated.
* The **level before the first event** is 0 with ``capture_start``, and the first event's total
  less its bytes with ``absolute``; the level at a time t is the total after the last event before
  t (that level when none).
* **Peak** allocated: the highest level over the capture (events and the level before the first);
  ``peak_at_ns``: the first event reaching it (None when it is the level before the first event).
* **Growth per step**: the level at the end of each primary step (the step thread with the most
  primary steps), first and last: ``(last - first) / (n - 1)`` over the n >= 2 steps; ``rising``
  counts the steps whose end level is above the previous step's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: ``memory.device_type`` of GPU memory (PyTorch's ``c10::DeviceType::CUDA``; nsys device kinds)
DEVICE_CUDA = 1
#: buckets of the memory-over-time chart (each keeps its lowest and highest level: no peak lost)
TIMELINE_BUCKETS = 240


@dataclass
class DeviceMemory:
    """One device's events in time order, with the levels after each."""

    device_id: int
    time_ns: np.ndarray
    bytes: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray | None
    #: "absolute" (the trace's running totals) or "capture_start" (sums of bytes since the capture began)
    baseline: str
    #: the allocated level before the first event
    before_first: int

    def level_at(self, t: np.ndarray) -> np.ndarray:
        """Allocated level at each time: after the last event strictly before it."""
        i = np.searchsorted(self.time_ns, np.asarray(t, dtype=np.int64), side="left") - 1
        return np.where(i >= 0, self.allocated[np.maximum(i, 0)], self.before_first) if len(self.allocated) \
            else np.full(len(np.atleast_1d(t)), self.before_first, dtype=np.int64)


def device_series(time_ns, device_type, device_id, nbytes, total_allocated, total_reserved) -> list[DeviceMemory]:
    """Each GPU's events (``device_type`` 1, device id >= 0) in time order (ties: table order),
    with its running levels (module docstring)."""
    t = np.asarray(time_ns, dtype=np.int64)
    dt = np.asarray(device_type, dtype=np.int64)
    dev = np.asarray(device_id, dtype=np.int64)
    b = np.asarray(nbytes, dtype=np.int64)
    ta = np.asarray(total_allocated, dtype=np.int64)
    tr = np.asarray(total_reserved, dtype=np.int64)
    gpu = (dt == DEVICE_CUDA) & (dev >= 0)
    out = []
    for d in np.unique(dev[gpu]).tolist():
        idx = np.flatnonzero(gpu & (dev == d))
        idx = idx[np.argsort(t[idx], kind="stable")]
        bb = b[idx]
        if (ta[idx] >= 0).all():
            alloc, baseline = ta[idx].copy(), "absolute"
            before = int(alloc[0] - bb[0])
        else:
            alloc, baseline = np.cumsum(bb), "capture_start"
            before = 0
        resv = tr[idx].copy() if baseline == "absolute" and (tr[idx] >= 0).all() else None
        out.append(DeviceMemory(int(d), t[idx], bb, alloc, resv, baseline, before))
    return out


def peak(s: DeviceMemory) -> tuple[int, int | None]:
    """(peak allocated bytes over the capture, time of the first event reaching it or None)."""
    if not len(s.allocated):
        return s.before_first, None
    i = int(np.argmax(s.allocated))
    top = int(s.allocated[i])
    if s.before_first > top:
        return s.before_first, None
    return top, int(s.time_ns[i])


def window_peak(s: DeviceMemory, w0: int, w1: int) -> int:
    """Highest allocated level in ``[w0, w1)``: the level at ``w0`` and every event inside."""
    at0 = int(s.level_at(np.array([w0]))[0])
    inside = (s.time_ns >= w0) & (s.time_ns < w1)
    return max(at0, int(s.allocated[inside].max())) if inside.any() else at0


def step_growth(s: DeviceMemory, step_end_ns: np.ndarray) -> dict:
    """Levels at the steps' ends (sorted), growth per step and rising steps (module docstring)."""
    ends = np.sort(np.asarray(step_end_ns, dtype=np.int64))
    levels = s.level_at(ends) if len(ends) else np.zeros(0, np.int64)
    n = len(levels)
    if n < 2:
        return {"levels": levels, "growth": None, "rising": None, "steps": n}
    return {"levels": levels, "growth": float(levels[-1] - levels[0]) / (n - 1),
            "rising": int((np.diff(levels) > 0).sum()), "steps": n}


def timeline(s: DeviceMemory, t0: int, t1: int, buckets: int = TIMELINE_BUCKETS) -> dict:
    """The chart's points: ``buckets`` equal spans of ``[t0, t1]``, each with its lowest and
    highest allocated level (the level carried into the span counts) and highest reserved one.
    Spans with no event carry the level on."""
    if t1 <= t0 or not len(s.time_ns):
        return {"t_ns": [], "allocated_min": [], "allocated_max": [], "reserved_max": []}
    edges = np.linspace(t0, t1, buckets + 1).astype(np.int64)
    carried = s.level_at(edges[:-1])
    lo, hi = carried.astype(np.int64).copy(), carried.astype(np.int64).copy()
    pos = np.clip(np.searchsorted(edges, s.time_ns, side="right") - 1, 0, buckets - 1)
    inside = (s.time_ns >= t0) & (s.time_ns <= t1)
    np.minimum.at(lo, pos[inside], s.allocated[inside])
    np.maximum.at(hi, pos[inside], s.allocated[inside])
    rmax = None
    if s.reserved is not None:
        i = np.searchsorted(s.time_ns, edges[:-1], side="left") - 1
        rmax = np.where(i >= 0, s.reserved[np.maximum(i, 0)], 0).astype(np.int64)
        np.maximum.at(rmax, pos[inside], s.reserved[inside])
    return {"t_ns": edges[:-1].tolist(), "allocated_min": lo.tolist(), "allocated_max": hi.tolist(),
            "reserved_max": rmax.tolist() if rmax is not None else None}


def top_allocators(op: np.ndarray, module: np.ndarray, frame: np.ndarray, nbytes: np.ndarray,
                   limit: int = 10) -> list[tuple[int, int, int, int, int]]:
    """``(op, module, frame, bytes, allocations)`` of the allocations (``nbytes`` > 0) grouped by
    operator (code < 0: outside every operator, left out), most bytes first (ties: the lower
    code), at most ``limit``; ``module`` and ``frame`` are those of the operator's (module,
    frame) pair that allocated the most bytes (ties: the lower codes)."""
    op, module, frame, b = (np.asarray(x, dtype=np.int64) for x in (op, module, frame, nbytes))
    keep = (b > 0) & (op >= 0)
    if not keep.any():
        return []
    op, module, frame, b = op[keep], module[keep], frame[keep], b[keep]
    ops, inv = np.unique(op, return_inverse=True)
    tot = np.bincount(inv, weights=b.astype(np.float64)).astype(np.int64)
    cnt = np.bincount(inv)
    order = np.lexsort((ops, -tot))[:limit]
    out = []
    for i in order.tolist():
        m = inv == i
        key = np.stack([module[m], frame[m]], axis=1)
        uniq, kinv = np.unique(key, axis=0, return_inverse=True)
        kt = np.bincount(kinv.reshape(-1), weights=b[m].astype(np.float64))
        j = int(np.lexsort((uniq[:, 1], uniq[:, 0], -kt))[0])
        out.append((int(ops[i]), int(uniq[j, 0]), int(uniq[j, 1]), int(tot[i]), int(cnt[i])))
    return out


def memory_tables(mm: dict) -> dict:
    """Evidence tables of the memory rules from ``metrics.memory`` (the JSON): ``memory_devices`` and
    ``memory_top_ops`` (MiB, GiB; 4 decimals). Pure: the rules engine builds them from the result."""
    mib, gib = float(1 << 20), float(1 << 30)
    r4 = lambda x: round(float(x), 4)  # noqa: E731
    devs = [{"device": d["device"], "peak_allocated_mib": r4(d["peak_allocated_bytes"] / mib),
             "peak_reserved_mib": r4(d["peak_reserved_bytes"] / mib) if d.get("peak_reserved_bytes") is not None
             else None,
             "device_memory_gib": r4(d["device_memory_bytes"] / gib) if d.get("device_memory_bytes") else None,
             "growth_mib_per_step": r4(d["growth_bytes_per_step"] / mib) if d.get("growth_bytes_per_step") is not None
             else None,
             "rising_steps": d.get("rising_steps"), "growth_steps": d.get("growth_steps")}
            for d in (mm or {}).get("devices") or []]
    ops = [{"op": r["op"], "module": r["module"], "frame": r["frame"], "allocated_mib": r4(r["allocated_bytes"] / mib),
            "allocations": r["allocations"]} for r in (mm or {}).get("top_ops") or []]
    return {"memory_devices": devs, "memory_top_ops": ops}


__all__ = ["DEVICE_CUDA", "DeviceMemory", "device_series", "memory_tables", "peak", "step_growth", "timeline",
           "top_allocators", "window_peak"]
