"""The interactive timeline's data: every operation of the median and worst step (or, without
step markers, of the middle of the capture), and of a window around each finding range they do
not hold (:func:`_range_windows`), all captured with the page data (:class:`nsysdoc.pagedata.PageData`,
:func:`nsysdoc.analysis.page_data`: nothing runs here), embedded once in the page as compact JSON
that ``static/report.js`` draws on a canvas with zoom, pan and level-of-detail merging.

Size (docs/report.md, "Timeline"): the windows share a budget of
:data:`~nsysdoc.metrics.timeline.DETAIL_MAX_SPANS` spans; a window holding more is merged at its
widest holes like the static drawing (merged spans carry their count). The JSON is then
measured, and the budget lowered (in proportion, at least halved when far over) until it is at most
:data:`~nsysdoc.metrics.timeline.DETAIL_MAX_BYTES` bytes: the data cannot grow with the capture.

Format (all times are integer ns; a span's start is stored as the difference to the previous
span's start in its lane): ``{"kinds", "kindLabels", "causes", "causeLabels", "names",
"windows": [{"id", "title", "dur", "t0s", "lanes": [...]}], "ranges": [...], "spans", "budget"}``.
A lane is a header ``{"h": text}`` or ``{"label", "title", "gap"?, "s", "d", "n"?, "k"?, "c"?, "b"?,
"x"?}`` (:func:`nsysdoc.metrics.timeline.span_columns`; ``x``: the idle-class split of a gap,
``{index: [[cause index, ns], ...]}``).
"""
from __future__ import annotations

import json

from ..metrics import timeline as tlm
from ..metrics.gpu import CAUSE_LABELS, CAUSES
from .context import fmt_ms, fmt_s
from .text import _json_strings

KINDS = ("kernel", "nccl", "memcpy", "memset", "nvtx", "api", "sync", "os_wait", "mixed")
GAP_CAUSES = tuple(CAUSES) + ("mixed",)
#: (window name, heading prefix) in the order the window buttons are shown
WINDOWS = (("median", "Median step"), ("worst", "Worst step"), ("middle", "Middle of the capture"))


def _windows(page) -> list[tuple[str, str, object, int, int, int | None, dict | None]]:
    """(id, prefix, rows, start, end, host thread, step) of each of the engine's step (or middle)
    windows the page data holds (:class:`nsysdoc.pagedata.PageData`)."""
    out = []
    seen_steps = set()
    for name, prefix in WINDOWS:
        w = page.windows.get(name)
        if w is None or w.data is None:
            continue
        if w.step is not None:
            if w.step["step"] in seen_steps:  # the median step is also the worst
                continue
            seen_steps.add(w.step["step"])
        out.append((name, prefix, w.data, w.start_ns, w.end_ns, w.host_tid, w.step))
    return out


def _range_windows(page, findings, origin: int) -> list:
    """Windows of their own for the finding ranges no step window holds whole
    (:func:`nsysdoc.metrics.timeline.range_windows`), captured with the page data
    (:func:`nsysdoc.analysis.page_data`, from the same ranges in the same order); a range whose
    window holds too many operations gets a note instead of a link."""
    flat = [r for f in findings for r in f.time_ranges]
    rank_of = [f.rank for f in findings for _ in f.time_ranges]
    out = []
    for name, w in page.windows.items():
        idx = [i for i in (w.ranges or ()) if i < len(flat)]
        if w.ranges is None or not idx:
            continue
        if w.data is None:
            for i in idx:
                flat[i].timeline_note = (f"more than {tlm.RANGE_MAX_OPS:,} operations around it: too many for this "
                                         f"page; export it with -f perfetto --range {flat[i].start_s}:{flat[i].end_s}")
            continue
        ranks = sorted({rank_of[i] for i in idx})
        prefix = (f"Around finding{'s' if len(ranks) > 1 else ''} {', '.join(str(x) for x in ranks)} "
                  f"at {fmt_s(int(min(flat[i].start_ns for i in idx)) - origin)}")
        out.append((name, prefix, w.data, w.start_ns, w.end_ns, None, None))
    return out


def _whole_window(page) -> list:
    """The whole analysis window as one more window (an overview to zoom into), when the page
    data holds it (at most ``WHOLE_WINDOW_MAX_OPS`` GPU operations, and no other window holds it)."""
    w = page.windows.get("window")
    if w is None or w.data is None:
        return []
    return [("window", "Whole analysis window", w.data, w.start_ns, w.end_ns, None, None)]


def _lanes(tl: dict, names: tlm.NameTable, kineto: bool) -> list[dict]:
    from .charts import HOST_LANE_LABELS

    w0 = tl["start_ns"]
    step = tl.get("step")
    lanes: list[dict] = []
    for dev in tl["devices"]:
        head = f"GPU {dev['label']}" + (f" · {dev['name']}" if dev["name"] else "")
        lanes.append({"h": head})
        for ln in dev["lanes"]:
            cols = tlm.span_columns(ln["spans"], w0, names, KINDS)
            lanes.append({"label": ln["label"], "title": f"{head} · {ln['label']} · {ln['total']:,} operations",
                          **cols})
        gaps = dev["gaps"]
        cols = tlm.span_columns(gaps, w0, names, GAP_CAUSES, kind_key="cause")
        del cols["n"]
        split = {}
        for i, g in enumerate(gaps):
            sp = g.get("split_ns") or {}
            if len(sp) > 1:
                split[str(i)] = [[GAP_CAUSES.index(c), int(v)] for c, v in sp.items()]
        if split:
            cols["x"] = split
        lanes.append({"label": "idle gaps", "title": f"{head} · idle gaps, coloured by their main idle class",
                      "gap": 1, **cols})
    for th in tl["host"]:
        is_step = step is not None and th["global_tid"] == step["global_tid"]
        head = f"{'step thread' if is_step else 'thread'} {th['pid']}/{th['tid']}" + \
            (f" · {th['name']}" if th["name"] else "")
        lanes.append({"h": head})
        for ln in th["lanes"]:
            label = ln["label"] if ln["kind"] == "nvtx" else HOST_LANE_LABELS.get(ln["kind"], ln["kind"])
            cols = tlm.span_columns(ln["spans"], w0, names, KINDS)
            lanes.append({"label": label, "title": f"{head} · {label} · {ln['total']:,} calls/ranges", **cols})
    return lanes


def _build(wins, budget: int, kineto: bool, origin: int, sizes: list[int] | None = None) -> dict:
    names = tlm.NameTable()
    windows = []
    # windows share the budget by need (a small window keeps every span; ``sizes``: estimates)
    per = tlm.fill_cap(sizes, budget) if sizes else max(budget // max(len(wins), 1), tlm.MIN_SPANS_PER_LANE)
    for name, prefix, view, a, b, gtid, step in wins:
        tl = tlm.detail_window(view, a, b, host_tid=gtid, budget=per)
        tl["step"] = step
        title = prefix
        if step is not None:
            title += f": {step['name']} — {fmt_ms(step['step_time_ns'] / 1e6)}"
        else:
            title += f" — {fmt_ms((b - a) / 1e6)}"
        windows.append({"id": name, "title": title, "dur": b - a, "t0": a, "t0s": fmt_s(a - origin),
                        "lanes": _lanes(tl, names, kineto)})
    kind_labels = [{"nvtx": "CPU op / annotation range"}.get(k, "") if kineto else "" for k in KINDS]
    from .charts import KIND_LABELS

    return {"kinds": list(KINDS), "kindLabels": [kl or KIND_LABELS.get(k, k) for k, kl in zip(KINDS, kind_labels)],
            "causes": list(GAP_CAUSES), "causeLabels": [CAUSE_LABELS.get(c, "several idle classes") for c in GAP_CAUSES],
            "names": names.values, "windows": windows, "ranges": [], "budget": per,
            "spans": sum(len(ln.get("s", ())) for w in windows for ln in w["lanes"])}


def embed(data: dict) -> str:
    """The JSON exactly as the page embeds it: compact, strings made visible and capped like all
    page text, and ``<``, ``>``, ``&``, ``'`` escaped so it can never close its ``<script>``."""
    raw = json.dumps(_json_strings(data), separators=(",", ":"), ensure_ascii=False)
    return raw.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("'", "\\u0027")


def _map_ranges(data: dict, findings) -> None:
    """Each finding range overlapping a window: ``data["ranges"]`` entry and ``TimeRange.timeline``."""
    ranges = []
    for f in findings:
        for j, r in enumerate(f.time_ranges):
            best = None
            for w in data["windows"]:
                a, b = w["t0"], w["t0"] + w["dur"]
                lo, hi = max(a, r.start_ns), min(b, r.end_ns)
                if hi > lo or (r.start_ns == r.end_ns and a <= r.start_ns < b):
                    inside = r.start_ns >= a and r.end_ns <= b
                    # a window that holds it whole, one with every operation (not the overview) first
                    rank = (inside, w["id"] != "window")
                    if best is None or rank > best[4]:
                        best = (w, lo, max(hi, lo + 1), inside, rank)
            if best is None:
                r.timeline = ""  # its note, if any, says why (_range_windows)
                continue
            w, lo, hi, inside, _rank = best
            rid = f"{f.anchor}-r{j}"
            r.timeline = rid
            r.timeline_note = "" if inside else f"the part in the {w['title'].split(':')[0].lower()}"
            ranges.append({"id": rid, "w": w["id"], "s": lo - w["t0"], "e": hi - w["t0"],
                           "label": f"{f.rank}. {f.title}" + (f" — {r.label}" if r.label else ""),
                           "f": f.anchor})  # issue 49: a link highlights every range of its finding
    data["ranges"] = ranges


def timeline_data(page, findings, *, worst: bool = False, max_bytes: int | None = None) -> tuple[dict, str] | None:
    """The data (module doc) and its embedded JSON text (:func:`embed`, at most
    ``DETAIL_MAX_BYTES`` bytes) of the windows ``page`` holds (:class:`nsysdoc.pagedata.PageData`:
    nothing is captured here); on each ``findings[i].time_ranges[j]``, ``timeline`` is set to
    the id of its range on the timeline (``""`` when no window of the timeline overlaps it).
    ``None`` when nothing was captured."""
    if page is None:
        return None
    origin = page.viewer_origin_ns or 0
    wins = _windows(page)
    wins += _range_windows(page, findings, origin)
    wins += _whole_window(page)
    if not wins:
        return None
    # spans a window needs, roughly: its operations, as many gaps, host rows
    sizes = [3 * page.windows[w[0]].n_ops + tlm.MIN_SPANS_PER_LANE for w in wins]
    if worst:  # the window shown first
        wins.sort(key=lambda w: w[0] != "worst")
    kineto = page.source_tool == "pytorch-profiler"
    budget = tlm.DETAIL_MAX_SPANS
    cap = tlm.DETAIL_MAX_BYTES if max_bytes is None else max(min(max_bytes, tlm.DETAIL_MAX_BYTES), tlm.DETAIL_MIN_BYTES)
    while True:
        data = _build(wins, budget, kineto, origin, sizes)
        _map_ranges(data, findings)
        text = embed({**data, "windows": [{k: v for k, v in w.items() if k != "t0"} for w in data["windows"]]})
        size = len(text.encode())
        if size <= cap or budget <= tlm.MIN_SPANS_PER_LANE:
            break
        # bytes grow about linearly with spans: aim just under the cap (at most halving at a time)
        budget = max(min(int(budget * cap / size * 0.9), budget // 2 if size > 4 * cap
                         else budget - 1), tlm.MIN_SPANS_PER_LANE)
    for w in data["windows"]:
        del w["t0"]  # absolute times can exceed a double's exact integers; t0s says it in seconds
    data["bytes"] = size
    return data, text


__all__ = ["timeline_data", "embed", "KINDS", "GAP_CAUSES"]
