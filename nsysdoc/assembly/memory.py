"""``metrics.memory`` (issue 47, item 1): the memory view from the trace's memory table
(:mod:`nsysdoc.metrics.memory` defines the numbers; ``docs/json.md`` the fields)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..metrics import memory as mem_m
from ..metrics.memory import memory_tables  # re-exported (pure: the rules use it)

if TYPE_CHECKING:  # pragma: no cover
    from .inputs import Inputs

#: operators listed in ``metrics.memory.top_ops``
TOP_OPS = 10
#: the switch that records memory, by the tool that made the trace
MEMORY_SWITCH = {
    "pytorch-profiler": "torch.profiler.profile(profile_memory=True) (with ProfilerActivity.CUDA)",
    "nsys": "nsys profile --cuda-memory-usage=true",
}
SOURCES = {"pytorch-profiler": "pytorch-profiler [memory] events", "nsys": "CUDA_GPU_MEMORY_USAGE_EVENTS"}


def step_ends(step_rows: list[dict]) -> np.ndarray:
    """End times of the primary steps of the step thread with the most of them (ties: the lower
    global tid)."""
    prim = [r for r in step_rows if r.get("primary") and r.get("end_ns") is not None]
    if not prim:
        return np.zeros(0, np.int64)
    tids, counts = np.unique([int(r["global_tid"]) for r in prim], return_counts=True)
    tid = int(tids[np.argmax(counts)])
    return np.sort(np.array([int(r["end_ns"]) for r in prim if int(r["global_tid"]) == tid], dtype=np.int64))


def memory_sites(attr, bounds, thread: np.ndarray, t: np.ndarray) -> np.ndarray | None:
    """The Where attribution's site codes ``(n, 5)`` (operator, module, frame, ...) of each
    ``(thread, t)``: the innermost operator range open at ``t`` on the thread; None without
    operator ranges. A sliced attributor (captures of many ranges) is asked a slice at a time."""
    if attr is None or getattr(attr, "source", None) is None:
        return None
    if hasattr(attr, "sites"):
        return attr.sites(thread, t)
    out = np.full((len(t), 5), -1, dtype=np.int64)
    ok = thread >= 0
    if not ok.any():
        return out
    edges = np.asarray(getattr(attr, "bounds", np.zeros(0, np.int64)), dtype=np.int64)
    part = np.searchsorted(edges, t, side="right")
    for p in np.unique(part[ok]).tolist():
        m = np.flatnonzero(ok & (part == p))
        local = attr.local(int(t[m].min()) - 1, int(t[m].max()) + 1)[0]
        out[m] = local.sites(thread[m], t[m])
    return out


def _series(trace) -> list[mem_m.DeviceMemory]:
    m = trace.memory
    if not len(m):
        return []
    return mem_m.device_series(m["timestamp_ns"], m["device_type"], m["device_id"], m["bytes"],
                               m["total_allocated_bytes"], m["total_reserved_bytes"])


def _top_ops(a: Inputs, res) -> tuple[list[dict], int, int]:
    """(top allocating operators, bytes allocated inside an operator, bytes allocated in all) of
    the GPU allocations over the capture."""
    t = a.trace
    m = t.memory
    if not len(m):
        return [], 0, 0
    gpu = (np.asarray(m["device_type"]) == mem_m.DEVICE_CUDA) & (np.asarray(m["device_id"]) >= 0)
    nb = np.asarray(m["bytes"], dtype=np.int64)
    sel = np.flatnonzero(gpu & (nb > 0))
    total = int(nb[sel].sum()) if len(sel) else 0
    keys = np.asarray(getattr(res.ctx, "thread_keys", np.zeros(0, np.int64)), dtype=np.int64)
    if not len(sel) or not len(keys):
        return [], 0, total
    gtid = np.asarray(m["global_tid"], dtype=np.int64)[sel]
    pos = np.clip(np.searchsorted(keys, gtid), 0, len(keys) - 1)
    thread = np.where(keys[pos] == gtid, pos, -1)
    tt = np.asarray(m["timestamp_ns"], dtype=np.int64)[sel]
    attr = res.plan.attr
    sites = memory_sites(attr, res.plan.bounds, thread, tt)
    if sites is None:
        return [], 0, total
    names = attr.names
    nm = lambda c: names[c] if c >= 0 else None  # noqa: E731
    inside = int(nb[sel][sites[:, 0] >= 0].sum())
    rows = [{"op": nm(o), "module": nm(mo), "frame": nm(fr), "allocated_bytes": b, "allocations": n}
            for o, mo, fr, b, n in mem_m.top_allocators(sites[:, 0], sites[:, 1], sites[:, 2], nb[sel], TOP_OPS)]
    return rows, inside, total


#: the dropped-rows tables of memory events (Kineto ``[memory]``; nsys CUDA_GPU_MEMORY_USAGE_EVENTS)
MEMORY_TABLES = ("[memory]", "CUDA_GPU_MEMORY_USAGE_EVENTS")


def memory_metrics(a: Inputs, step_rows: list[dict]) -> dict:
    """``metrics.memory`` (``docs/json.md``)."""
    res = a.engine  # the run, read once through the assembly's inputs (issue 51)
    t = a.trace
    series = _series(t)
    tool = t.source_tool
    out: dict = {"source": None, "baseline": None, "devices": [], "top_ops": [], "op_allocated_bytes": None,
                 "allocated_bytes": None, "missing": None}
    if not series:
        switch = MEMORY_SWITCH.get(tool, MEMORY_SWITCH["nsys"])
        dropped = [d for d in (getattr(t, "dropped_rows", None) or []) if d.get("table") in MEMORY_TABLES]
        unread = sum(int(d.get("rows") or 0) for d in dropped)
        why = "; ".join(sorted({str(d.get("reason")) for d in dropped}))
        out["missing"] = (f"GPU memory events were recorded but none could be read: {unread:,} dropped ({why})"
                          if unread else f"GPU memory was not recorded: capture with {switch}")
        return out
    out["source"] = SOURCES.get(tool, tool)
    out["baseline"] = "absolute" if all(s.baseline == "absolute" for s in series) else "capture_start"
    w0, w1 = a.steps.window_start_ns, a.steps.window_end_ns
    ends = step_ends(step_rows)
    cap = dict(zip(np.asarray(t.device_memory["device_id"]).tolist(), np.asarray(t.device_memory["total_bytes"]).tolist()))
    t0 = min(int(s.time_ns[0]) for s in series)
    t1 = max(int(s.time_ns[-1]) for s in series)
    if w0 is not None and w1 is not None:
        t0, t1 = min(t0, int(w0)), max(t1, int(w1))
    for s in series:
        top, at = mem_m.peak(s)
        g = mem_m.step_growth(s, ends)
        row = {"device": s.device_id, "baseline": s.baseline, "events": int(len(s.time_ns)),
               "peak_allocated_bytes": top,
               "peak_reserved_bytes": int(s.reserved.max()) if s.reserved is not None and len(s.reserved) else None,
               "peak_at_ns": at,
               "window_peak_allocated_bytes": mem_m.window_peak(s, int(w0), int(w1)) if w0 is not None else None,
               "allocated_at_start_bytes": int(s.level_at(np.array([w0]))[0]) if w0 is not None else None,
               "allocated_at_end_bytes": int(s.level_at(np.array([w1]))[0]) if w1 is not None else None,
               "growth_bytes_per_step": g["growth"],
               "growth_steps": g["steps"], "rising_steps": g["rising"],
               "step_end_allocated_bytes": [int(x) for x in g["levels"]],
               "device_memory_bytes": cap.get(s.device_id),
               "timeline": mem_m.timeline(s, t0, t1)}
        out["devices"].append(row)
    out["top_ops"], inside, total = _top_ops(a, res)
    out["op_allocated_bytes"], out["allocated_bytes"] = inside, total
    return out


MIB = 1 << 20
GIB = 1 << 30

#: the rule values of the memory view (``nsysdoc.rules.values``; docs/glossary.md, "Rule values")
MEMORY_VALUE_NAMES = (
    "memory_recorded", "memory_baseline", "memory_lower_bound", "memory_peak_allocated_gib",
    "memory_growth_device", "memory_growth_mib_per_step", "memory_growth_total_mib", "memory_growth_steps",
    "memory_rising_steps", "memory_growth_peak_pct", "memory_growth_level_gib", "memory_device_gib",
    "memory_steps_to_full", "memory_full_device", "memory_full_peak_kind", "memory_full_peak_gib",
    "memory_full_device_gib", "memory_full_pct", "memory_top_op", "memory_top_op_gib",
)
MEMORY_STRING_VALUES = frozenset({"memory_baseline", "memory_full_peak_kind", "memory_top_op"})


def memory_values(mm: dict) -> dict:
    """The rule values of ``metrics.memory`` (``mm``): the device that grows the most per step,
    and the device whose peak comes closest to its memory (reserved when known, else allocated).
    ``memory_steps_to_full``: steps until the growing device's memory is full at that rate, from
    its level at the last step's end (an upper bound when the levels are relative to the
    capture's start: memory held before it would fill the device sooner)."""
    v: dict = {k: None for k in MEMORY_VALUE_NAMES}
    devs = (mm or {}).get("devices") or []
    v["memory_recorded"] = bool(devs)
    if not devs:
        return v
    v["memory_baseline"] = mm.get("baseline")
    v["memory_lower_bound"] = mm.get("baseline") == "capture_start"
    v["memory_peak_allocated_gib"] = _r(max(d["peak_allocated_bytes"] for d in devs) / GIB)
    grow = [d for d in devs if d.get("growth_bytes_per_step") is not None]
    if grow:
        g = max(grow, key=lambda d: (d["growth_bytes_per_step"], -d["device"]))
        per = g["growth_bytes_per_step"]
        levels = g.get("step_end_allocated_bytes") or []
        v.update(memory_growth_device=g["device"], memory_growth_mib_per_step=_r(per / MIB),
                 memory_growth_total_mib=_r((levels[-1] - levels[0]) / MIB) if levels else None,
                 memory_growth_steps=g.get("growth_steps"), memory_rising_steps=g.get("rising_steps"),
                 memory_growth_level_gib=_r(levels[-1] / GIB) if levels else None)
        if g["peak_allocated_bytes"] > 0 and levels:
            v["memory_growth_peak_pct"] = _r((levels[-1] - levels[0]) / g["peak_allocated_bytes"] * 100)
        cap = g.get("device_memory_bytes")
        if cap:
            v["memory_device_gib"] = _r(cap / GIB)
            if per > 0 and levels:
                v["memory_steps_to_full"] = max(0, int((cap - levels[-1]) // per))
    full = []
    for d in devs:
        cap = d.get("device_memory_bytes")
        if not cap:
            continue
        kind, top = ("reserved", d["peak_reserved_bytes"]) if d.get("peak_reserved_bytes") is not None \
            else ("allocated", d["peak_allocated_bytes"])
        full.append((top / cap * 100, -d["device"], kind, top, cap))
    if full:
        pct, neg, kind, top, cap = max(full)
        v.update(memory_full_device=-neg, memory_full_peak_kind=kind, memory_full_peak_gib=_r(top / GIB),
                 memory_full_device_gib=_r(cap / GIB), memory_full_pct=_r(pct))
    tops = mm.get("top_ops") or []
    if tops:
        v.update(memory_top_op=tops[0]["op"], memory_top_op_gib=_r(tops[0]["allocated_bytes"] / GIB))
    return v


def _r(x: float) -> float:
    return round(float(x), 4)




__all__ = ["MEMORY_STRING_VALUES", "MEMORY_VALUE_NAMES", "memory_metrics", "memory_sites", "memory_tables",
           "memory_values", "step_ends"]
