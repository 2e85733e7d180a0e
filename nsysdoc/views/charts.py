"""Chart geometry for the report: stacked step bars and the one-step timeline, as inline SVG.

Why hand-drawn SVG instead of a charting library: the page has two charts (a stacked bar chart and a
timeline); drawing them server-side makes them visible without JavaScript, keeps the file small
(plotly 6.5.0's plotly.min.js alone is 4,838,098 bytes) and keeps the page working from ``file://``
for years. The templates only print the numbers computed here.
"""
from __future__ import annotations

import math

from ..metrics.gpu import CAUSE_LABELS, CAUSES
from ..metrics.timeline import MAX_STREAM_LANES, pick_step, step_timeline
from .context import (Bar, BarSegment, LegendItem, StepChart, TimelineLabel, TimelineRect, TimelineRow,
                      TimelineView, Tick, fmt_dur_ns, fmt_ms, fmt_num, fmt_s, is_num)
from .glossary import anchor

# --- step charts ---------------------------------------------------------------------------------
CHART_W, CHART_H = 960, 250
LEFT, RIGHT, TOP, BOTTOM = 58, 10, 12, 30
MAX_BARS = 240
MAX_CHARTS = 8


def nice_step(span: float, target: int = 5) -> float:
    """A 1/2/5 × 10^k step giving about ``target`` ticks over ``span``."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _fmt_tick(v: float) -> str:
    return f"{v:g}" if abs(v) >= 0.01 or v == 0 else f"{v:.2g}"


def step_charts(primary: list[dict], categories: list[tuple[str, str]], median_id, worst_id) -> list[StepChart]:
    groups: dict[tuple, list[dict]] = {}
    for s in primary:
        if s.get("breakdown_ms"):
            groups.setdefault((s.get("pid"), s.get("global_tid")), []).append(s)
    out = []
    labels = dict(categories)
    for (pid, gtid), steps in list(groups.items())[:MAX_CHARTS]:
        steps.sort(key=lambda s: s.get("index", 0))
        n_steps = len(steps)
        note = ""
        if n_steps > MAX_BARS:  # mean breakdown of consecutive buckets of steps
            per = math.ceil(n_steps / MAX_BARS)
            buckets = [steps[i:i + per] for i in range(0, n_steps, per)]
            note = f"{n_steps} steps: each bar is the mean of {per} consecutive steps."
        else:
            buckets = [[s] for s in steps]
        bars_data = []
        for b in buckets:
            if len(b) == 1:  # a bar per step (the usual case): sum() of one value is 0 + it
                bm = b[0]["breakdown_ms"]
                bd = {k: (0 + (bm.get(k) or 0)) / 1 for k, _ in categories}
            else:
                bd = {k: sum((s["breakdown_ms"].get(k) or 0) for s in b) / len(b) for k, _ in categories}
            dur = sum((s.get("duration_ms") or 0) for s in b) / len(b)
            first, last = b[0], b[-1]
            name = str(first.get("name")) if len(b) == 1 else f"steps {first.get('index')}–{last.get('index')} (mean)"
            mark = ""
            if len(b) == 1:
                mark = "median" if first["step"] == median_id else "worst" if first["step"] == worst_id else ""
            bars_data.append((name, str(first.get("index")), bd, dur, mark))
        ymax_raw = max([d for _, _, _, d, _ in bars_data] + [1e-9])
        step = nice_step(ymax_raw, 4)
        ymax = step * math.ceil(ymax_raw / step)
        n = len(bars_data)
        width = int(min(CHART_W, LEFT + RIGHT + max(n, 6) * 64))  # few steps: a narrower chart
        pw, ph = width - LEFT - RIGHT, CHART_H - TOP - BOTTOM
        slot = min(pw / n, 64.0)
        bw = max(slot * 0.78, 0.6)
        every = max(1, math.ceil(n / 24))
        bars = []
        for i, (name, idx, bd, dur, mark) in enumerate(bars_data):
            x = LEFT + i * slot + (slot - bw) / 2
            y = TOP + ph
            segs = []
            for k, lab in categories:
                v = bd.get(k) or 0
                if v <= 0:
                    continue
                h = v / ymax * ph
                y -= h
                share = f" ({v / dur * 100:.1f}% of the step)" if dur else ""
                segs.append(BarSegment(y=f"{y:.2f}", h=f"{h:.2f}", cls=f"c-{k}",
                                       title=f"{name} · {labels.get(k, k)}: {fmt_ms(v)}{share}"))
            title = f"{name} — {fmt_ms(dur)}" + (f" ({mark} step)" if mark else "")
            bars.append(Bar(x=f"{x:.2f}", w=f"{bw:.2f}", cx=f"{x + bw / 2:.2f}", top=f"{y:.2f}",
                            label=idx if i % every == 0 else "", title=title,
                            segments=segs, mark=mark))
        ticks = []
        v = 0.0
        while v <= ymax + 1e-9:
            ticks.append(Tick(pos=f"{TOP + ph - v / ymax * ph:.2f}", label=_fmt_tick(v)))
            v += step
        title = f"pid {pid}: {n_steps} steps, duration in ms"
        aria = (f"Stacked bars of the step breakdown for pid {pid}: {n_steps} steps, up to {fmt_ms(ymax_raw)} each; "
                "the table below has the same numbers.")
        out.append(StepChart(title=title, width=width, height=CHART_H, plot_left=LEFT, plot_bottom=TOP + ph,
                             bars=bars, yticks=ticks, note=note, aria=aria))
    return out


# --- timeline ------------------------------------------------------------------------------------
UNITS = 10_000          # viewBox width of the plot
LABEL_W = 260
HEADER_H, LANE_H, GAP_LANE_H, PAD = 20, 14, 10, 3
KIND_LABELS = {"kernel": "kernel", "nccl": "NCCL kernel", "memcpy": "memcpy", "memset": "memset",
               "mixed": "merged, mixed kinds", "nvtx": "NVTX range", "api": "CUDA API call",
               "sync": "blocking sync call", "os_wait": "OS wait (poll, futex, read …)"}
KIND_ANCHORS = {"nccl": anchor("Communication"), "sync": anchor("Blocking sync call")}
HOST_LANE_LABELS = {"api": "CUDA API", "sync": "sync calls", "os_wait": "OS waits"}


def _trunc(s: str, n: int) -> str:
    return s if len(s) <= n else s[: max(1, n - 1)] + "…"


def _dur(ns: int) -> str:
    if 1_000 <= ns < 10_000:
        return f"{ns / 1e3:.2f} µs"
    return fmt_dur_ns(ns)


def time_ticks(duration_ms: float) -> list[Tick]:
    step = nice_step(duration_ms, 8)
    out, v = [], 0.0
    while v <= duration_ms * (1 + 1e-9):
        out.append(Tick(pos=f"{v / duration_ms * 100:.3f}%" if duration_ms else "0%", label=f"+{_fmt_tick(v)} ms"))
        v = round(v + step, 12)
    return out


def timeline_view(page, *, worst: bool = False) -> TimelineView | None:
    """The static timeline of the median (or worst) step, or the middle of the capture, from the
    page data (:class:`nsysdoc.pagedata.PageData`: its steps and captured windows)."""
    tl = step_timeline(page, worst=worst)
    if tl is None:
        return None
    w0, w1 = tl["start_ns"], tl["end_ns"]
    span = max(w1 - w0, 1)
    # a PyTorch Profiler trace's host ranges are CPU operators and annotations, not NVTX (docs/kineto.md)
    kineto = page.source_tool == "pytorch-profiler"
    kind_labels = {**KIND_LABELS, "nvtx": "CPU op / annotation range"} if kineto else KIND_LABELS
    rows: list[TimelineRow] = []
    rects: list[TimelineRect] = []
    labels: list[TimelineLabel] = []
    kinds_seen: set[str] = set()
    causes_seen: set[str] = set()
    notes: list[str] = []
    y = 0

    def x_of(t: int) -> float:
        return (t - w0) / span * UNITS

    def add_spans(spans, ytop, h, cls_prefix="k-", nvtx=False):
        for sp in spans:
            x = x_of(sp["start_ns"])
            w = x_of(sp["end_ns"]) - x
            kind = sp["kind"]
            kinds_seen.add(kind)
            d = sp["end_ns"] - sp["start_ns"]
            off = (sp["start_ns"] - w0) / 1e6
            merged = sp["count"] > 1
            name = _trunc(str(sp["name"]), 90)
            cls = f"{cls_prefix}{kind}"
            if merged:  # merged spans: opacity by the share of the span their operations cover
                share = sp.get("busy_ns", d) / d if d else 1.0
                cls += f" m d{min(4, int(share * 4) + 1)}"
                title = f"{name} · {_dur(d)} at +{off:.3f} ms · {share * 100:.0f}% busy"
            else:
                title = f"{name} — {_dur(d)} at +{off:.3f} ms"
            rects.append(TimelineRect(x=f"{x:.1f}", w=f"{w:.2f}" if w < 10 else f"{w:.1f}", y=ytop, h=h,
                                      cls=cls, title=title))
            if nvtx and w >= 400:
                chars = int(w / UNITS * 1000 / 6.6) - 1
                if chars >= 3:
                    labels.append(TimelineLabel(x=f"{x / 100 + 0.15:.3f}%", y=ytop + h - 3,
                                                text=_trunc(str(sp["name"]), chars)))

    step = tl.get("step")
    for dev in tl["devices"]:
        head = f"GPU {dev['label']}" + (f" · {dev['name']}" if dev["name"] else "")
        if dev["hidden_lanes"]:
            notes.append(f"GPU {dev['label']}: {dev['hidden_lanes']} less busy streams not shown "
                         f"(at most {MAX_STREAM_LANES} per device).")
        rows.append(TimelineRow(y=y, h=HEADER_H, label=_trunc(head, 38), sub="", kind="device", title=head))
        y += HEADER_H
        for lane in dev["lanes"]:
            sub = f"{lane['total']:,} ops" + (f" → {len(lane['spans']):,} spans" if len(lane["spans"]) < lane["total"] else "")
            sub = sub.replace(" 1 spans", " 1 span")
            rows.append(TimelineRow(y=y, h=LANE_H, label=_trunc(lane["label"], 24), sub=sub, kind="stream",
                                    title=lane["label"]))
            add_spans(lane["spans"], y, LANE_H)
            y += LANE_H + PAD
        gsub = f"{dev['gap_count']:,}" + (f" → {len(dev['gaps']):,}" if len(dev["gaps"]) < dev["gap_count"] else "")
        rows.append(TimelineRow(y=y, h=GAP_LANE_H, label="idle gaps", sub=gsub, kind="gaps"))
        for g in dev["gaps"]:
            x = x_of(g["start_ns"])
            w = x_of(g["end_ns"]) - x
            d = g["end_ns"] - g["start_ns"]
            cause = g["cause"]
            causes_seen.add(cause)
            label = CAUSE_LABELS.get(cause, "several causes")
            off = (g["start_ns"] - w0) / 1e6
            cls = f"c-idle_{cause}"
            if g.get("count", 1) > 1:
                share = g.get("busy_ns", d) / d if d else 1.0
                cls += f" m d{min(4, int(share * 4) + 1)}"
                title = f"{g['count']} idle gaps ({label}) · {_dur(d)} at +{off:.3f} ms · {share * 100:.0f}% idle"
            else:
                title = f"idle {_dur(d)} — {label} at +{off:.3f} ms"
                split = g.get("split_ns") or {}
                if len(split) > 1:
                    title += " (" + ", ".join(f"{c} {_dur(v)}" for c, v in split.items()) + ")"
            rects.append(TimelineRect(x=f"{x:.1f}", w=f"{w:.2f}" if w < 10 else f"{w:.1f}", y=y, h=GAP_LANE_H,
                                      cls=cls, title=title))
        y += GAP_LANE_H + PAD + 4
    for th in tl["host"]:
        is_step = step is not None and th["global_tid"] == step["global_tid"]
        head = f"{'step thread' if is_step else 'thread'} {th['pid']}/{th['tid']}" + \
            (f" · {th['name']}" if th["name"] else "")
        rows.append(TimelineRow(y=y, h=HEADER_H, label=_trunc(head, 38), sub="", kind="thread", title=head))
        y += HEADER_H
        for lane in th["lanes"]:
            label = lane["label"] if lane["kind"] == "nvtx" else HOST_LANE_LABELS.get(lane["kind"], lane["kind"])
            if lane["total"] == 0:
                sub = "none"
            else:
                sub = f"{lane['total']:,}" + (f" → {len(lane['spans']):,}" if len(lane["spans"]) < lane["total"] else "")
            rows.append(TimelineRow(y=y, h=LANE_H, label=label, sub=sub, kind="host"))
            add_spans(lane["spans"], y, LANE_H, nvtx=lane["kind"] == "nvtx")
            y += LANE_H + PAD
        if th["hidden_nvtx_levels"]:
            notes.append(f"Thread {th['pid']}/{th['tid']}: {th['hidden_nvtx_levels']} deeper "
                         f"{'operator/annotation' if kineto else 'NVTX'} nesting levels not shown.")
        y += 4
    height = max(y, 1)
    if tl["merged"]:
        notes.append(f"Lanes with more than {tl['limits']['max_spans_per_lane']:,} spans are cut at their widest holes "
                     "first; the runs between cuts are drawn as one span each, paler the less of it is busy (its "
                     "tooltip says how many operations and how busy). Zooming does not split them.")
    dur_ms = span / 1e6
    if step is not None:
        kind = "Worst" if worst else "Median"
        heading = (f"{kind} step: {step['name']} — step time {fmt_ms(step['step_time_ns'] / 1e6)} "
                   f"(pid {step['pid']}, thread {step['tid']})")
        other = pick_step(page.steps.table, worst=not worst)
        if other is not None and other["step"] != step["step"]:
            notes.append(f"The {'median' if worst else 'worst'} step is {other['name']} "
                         f"({fmt_ms(other['step_time_ns'] / 1e6)}); "
                         + ("a report made without --worst-step shows it here." if worst else
                            "nsysdoc report --worst-step shows it here."))
    else:
        n_ops = sum(ln["total"] for d in tl["devices"] for ln in d["lanes"])
        heading = (f"Middle of the capture (no step markers): {fmt_num(n_ops, 0)} GPU operations, {fmt_ms(dur_ms)}")
    legend = [LegendItem(cls=f"k-{k}", label=kind_labels[k], anchor=KIND_ANCHORS.get(k, ""))
              for k in KIND_LABELS if k in kinds_seen]
    legend += [LegendItem(cls=f"c-idle_{c}", label=f"idle — {CAUSE_LABELS[c]}", anchor=anchor("Idle gap"))
               for c in CAUSES if c in causes_seen]
    if "mixed" in causes_seen:
        legend.append(LegendItem(cls="c-idle_mixed", label="idle — merged gaps of several causes",
                                 anchor=anchor("Idle gap")))
    # seconds as the capture's viewer shows them: a PyTorch Profiler trace's from its start (report.build.viewer_guide)
    origin = page.viewer_origin_ns or 0
    return TimelineView(heading=heading, choice=tl["choice"], start_ns=w0, end_ns=w1, start_s=fmt_s(w0 - origin),
                        end_s=fmt_s(w1 - origin), duration=fmt_ms(dur_ms), width_units=UNITS, height=height,
                        label_width=LABEL_W, rows=rows, rects=rects, labels=labels, ticks=time_ticks(dur_ms),
                        legend=legend, notes=notes, span_count=len(rects))


__all__ = ["step_charts", "timeline_view", "time_ticks", "nice_step", "is_num"]
