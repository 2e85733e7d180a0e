"""The page's memory section (issue 47): GPU memory over time per device, as inline SVG, and the
operators that allocated the most (``metrics.memory``; glossary "Memory"). Numbers only: every
point is computed here, the template prints them; trace text (operator names, frames) stays
plain ``str`` for the autoescaping templates."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..fmt import fmt_bytes, fmt_num, is_num
from .context import Cell, Column, Table, Tick, _f
from .glossary import anchor

CHART_W, CHART_H = 960, 220
LEFT, RIGHT, TOP, BOTTOM = 70, 10, 12, 30
#: step boundaries drawn at most (more steps: every k-th)
MAX_STEP_LINES = 120
TOP_OPS_SHOWN = 10


@dataclass
class MemoryChart:
    """Allocated (band of each span's lowest and highest level) and reserved memory of one GPU."""

    title: str = _f("Which device, its peaks and its memory.")
    width: int = _f("SVG viewBox width.")
    height: int = _f("SVG viewBox height.")
    plot_left: int = _f("x of the plot area's left edge.")
    plot_right: int = _f("x of the plot area's right edge.")
    plot_bottom: int = _f("y of the plot area's bottom edge (the x axis).")
    band: list[str] = _f("SVG polygon points ('x,y' each: printed one at a time, every printed string being "
                         "capped): each span's highest allocated level, then back along the lowest.")
    allocated: list[str] = _f("SVG polyline points: each span's highest allocated level.")
    reserved: list[str] = _f("SVG polyline points of the reserved level (empty when the trace does not record it).")
    steps: list[str] = _f("x of each step boundary drawn.")
    yticks: list[Tick] = _f("Y axis ticks (bytes, in binary units).")
    aria: str = _f("Text alternative of the chart.")


@dataclass
class MemoryView:
    """The memory section."""

    present: bool = _f("Whether the capture has GPU memory events.")
    reason: str = _f("Why there is no chart (the switch that records memory).")
    note: str = _f("How the levels were measured (absolute totals or sums since the capture's start).")
    charts: list[MemoryChart] = _f("One chart per GPU.")
    table: Table = _f("The operators that allocated the most GPU memory.")


def _nice(v: float) -> float:
    """A tick step of about 4 ticks up to ``v`` bytes: 1, 2 or 5 x 10^k of the binary unit that
    suits ``v`` (GiB, MiB, KiB), so the labels read 2.0 GiB, 4.0 GiB, not 1.9 GiB."""
    from .charts import nice_step  # (charts imports the context this module does too)

    unit = next((u for u in (1 << 30, 1 << 20, 1 << 10) if v >= u), 1)
    return nice_step(v / unit, 4) * unit


def _chart(d: dict, step_starts: list[int]) -> MemoryChart | None:
    tl = d.get("timeline") or {}
    ts, lo, hi = tl.get("t_ns") or [], tl.get("allocated_min") or [], tl.get("allocated_max") or []
    rs = tl.get("reserved_max") or []
    if len(ts) < 2 or len(lo) != len(ts) or len(hi) != len(ts):
        return None
    t0, t1 = ts[0], ts[-1] + (ts[-1] - ts[-2])
    top = max([*hi, *(rs or [0]), 1])
    bottom = min([*lo, 0])
    span = max(top - bottom, 1)
    pw, ph = CHART_W - LEFT - RIGHT, CHART_H - TOP - BOTTOM
    x = lambda t: LEFT + (t - t0) / max(t1 - t0, 1) * pw  # noqa: E731
    y = lambda v: TOP + ph - (v - bottom) / span * ph  # noqa: E731
    step_x = (t1 - t0) / len(ts)
    upper = [p for t, v in zip(ts, hi) for p in (f"{x(t):.1f},{y(v):.1f}", f"{x(t + step_x):.1f},{y(v):.1f}")]
    lower = [p for t, v in zip(ts, lo) for p in (f"{x(t):.1f},{y(v):.1f}", f"{x(t + step_x):.1f},{y(v):.1f}")][::-1]
    reserved = [p for t, v in zip(ts, rs) for p in (f"{x(t):.1f},{y(v):.1f}", f"{x(t + step_x):.1f},{y(v):.1f}")] \
        if rs else []
    inside = [s for s in step_starts if t0 <= s <= t1]
    every = max(1, -(-len(inside) // MAX_STEP_LINES))
    ticks = []
    st = _nice(span)
    v = 0.0 if bottom >= 0 else -st * math.ceil(-bottom / st)  # (levels below the capture's start)
    while v <= top + 1e-9:
        if v >= bottom:
            ticks.append(Tick(pos=f"{y(v):.1f}", label=fmt_bytes(v) if v > 0 else ("0" if v == 0 else "−" + fmt_bytes(-v))))
        v += st
    dev = d.get("device")
    cap = d.get("device_memory_bytes")
    res = d.get("peak_reserved_bytes")
    title = (f"GPU {dev}: peak allocated {fmt_bytes(d.get('peak_allocated_bytes'))}"
             + (f", peak reserved {fmt_bytes(res)}" if is_num(res) else "")
             + (f", of {fmt_bytes(cap)}" if is_num(cap) else ""))
    aria = (f"Memory over time on GPU {dev}: allocated up to {fmt_bytes(d.get('peak_allocated_bytes'))}"
            + (f", reserved up to {fmt_bytes(res)}" if is_num(res) else "") + "; vertical lines mark step starts.")
    return MemoryChart(title=title, width=CHART_W, height=CHART_H, plot_left=LEFT, plot_right=CHART_W - RIGHT,
                       plot_bottom=TOP + ph, band=upper + lower, allocated=upper,
                       reserved=reserved, steps=[f"{x(s):.1f}" for s in inside[::every]], yticks=ticks, aria=aria)


def memory_table(mm: dict) -> Table:
    rows = []
    for r in (mm.get("top_ops") or [])[:TOP_OPS_SHOWN]:
        op, mod, fr = (str(r.get(k) or "") for k in ("op", "module", "frame"))
        rows.append([Cell(op[:100], op, title=op if len(op) > 100 else ""),
                     Cell(fmt_bytes(r.get("allocated_bytes")), r.get("allocated_bytes"), True),
                     Cell(fmt_num(r.get("allocations"), 0), r.get("allocations"), True),
                     Cell(mod[:60], mod), Cell(fr[:80], fr)])
    inside, total = mm.get("op_allocated_bytes"), mm.get("allocated_bytes")
    note = ("Bytes allocated on the GPU inside each operator (the innermost operator open at the allocation, "
            "as the Where attribution finds it), over the whole capture; frees are not counted."
            + (f" {fmt_bytes(inside)} of {fmt_bytes(total)} allocated was inside an operator." if is_num(total) else ""))
    return Table(id="memory-ops", title="Operators that allocated the most GPU memory", columns=[
        Column("Operator", False, "", anchor("Top allocating operators")), Column("Allocated", True),
        Column("Allocations", True), Column("Module"), Column("Frame", False, "user Python line")],
        rows=rows, note=note, empty="No allocation inside an operator range (or no operator ranges in this capture).")


def memory_view(result: dict) -> MemoryView:
    mm = (result.get("metrics") or {}).get("memory") or {}
    devs = mm.get("devices") or []
    table = memory_table(mm)
    if not devs:
        return MemoryView(present=False, reason=str(mm.get("missing") or "GPU memory was not recorded."),
                          note="", charts=[], table=table)
    starts = sorted(int(s["start_ns"]) for s in result.get("steps") or []
                    if s.get("primary") and is_num(s.get("start_ns")))
    charts = [c for c in (_chart(d, starts) for d in devs) if c is not None]
    note = ("Allocated memory is the trace's own running total." if mm.get("baseline") == "absolute" else
            "Allocated memory is the sum of the allocations and frees since the capture began: memory allocated "
            "before it is not seen (the levels are a lower bound), and reserved memory is not recorded.")
    # the dashed line only where a chart draws one (a capture-start baseline records no reserved level)
    dashed = " the dashed line is reserved memory." if any(c.reserved for c in charts) else ""
    return MemoryView(present=True, reason="", note=note + " The band spans each moment's lowest and highest level"
                      + (";" + dashed if dashed else "."), charts=charts, table=table)


__all__ = ["MemoryChart", "MemoryView", "memory_table", "memory_view"]
