"""The data of one window's timeline (one training step by default), small enough for a web page.

Pure functions over the data of one window (``Analysis.window_view``: the operations, idle gaps
and host rows the analysis captured for it); no I/O. What they return
(plain dicts, ints in ns on the export's timeline, as the Nsight Systems GUI shows them):

* per device, one **lane per stream** — a stream is (process, device, context, stream id) — with
  its kernel, NCCL, memcpy and memset intervals, and the device's **idle gaps** with the cause
  each got in ``analysis.gaps`` (``docs/glossary.md``, "Idle gaps and their causes"), merged like
  spans beyond the cap (a merged run of gaps of different causes has cause ``"mixed"``; its
  ``busy_ns`` is the idle time it holds);
* per host thread (the step thread first), lanes of **NVTX ranges** (one lane per nesting level),
  **CUDA API calls**, **blocking sync calls** (as ``Analysis.blocking`` defines them) and
  **OS waits** (``OSRT`` calls that mean "waiting": poll, futex, read ...).

Caps (so a capture with a million kernels still gives a small page): at most
:data:`MAX_SPANS_PER_LANE` spans per lane (fewer when there are many lanes: the whole timeline gets
:data:`MAX_SPANS_TOTAL`, at least :data:`MIN_SPANS_PER_LANE` a lane). Beyond that, runs of neighbouring spans are **merged**
(the lane is cut at its widest holes first, see :func:`coalesce`) into spans whose ``count`` says
how many operations they stand for and whose name is ``"N operations"`` unless they all share one
name — no time is dropped: the merged spans cover every original span. At most :data:`MAX_STREAM_LANES`
streams per device (the busiest ones), :data:`MAX_DEVICES` devices, :data:`MAX_HOST_THREADS`
host threads and :data:`MAX_NVTX_LEVELS` NVTX nesting levels are kept; the rest is counted in
``hidden_*`` fields. A span is kept if it overlaps the window; its times are clipped to it.
Every span dict is ``{start_ns, end_ns, kind, name, count, busy_ns}`` (``busy_ns`` < the span's
length only for merged spans: the time their operations actually cover).

Which window: :func:`pick_step` chooses the primary step with the median step time (the lower
median for an even count) or, with ``worst=True``, the longest step time. Without step markers,
``nsysdoc.engine.plan.middle_window`` takes the :data:`NO_STEP_OPS` GPU operations around the
middle of the analysis window (the whole window when it holds no more than that).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..trace import schema as S
from ..trace.columns import factorize
from .gpu import CAUSES
from .steps import pick_steps
from .ops import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET

#: Spans kept per lane; beyond it spans are merged (a lane ~1000 px wide cannot show more).
MAX_SPANS_PER_LANE = 1000
#: Budget of spans for the whole drawing: with many lanes each lane gets less (down to
#: MIN_SPANS_PER_LANE). This drawing is the page's fallback when scripts do not run (the interactive
#: timeline reads :func:`detail_data`), so it stays around half a megabyte at most.
MAX_SPANS_TOTAL = 4000
MIN_SPANS_PER_LANE = 200
#: The interactive timeline (:func:`detail_data`): spans of every window it holds together, and
#: per lane; below them every operation is its own span (zooming in shows single kernels).
DETAIL_MAX_SPANS = 200_000
#: Hard cap of the interactive timeline's data (bytes of its JSON): above it the span budget is
#: halved until the data fits, so the page stays under 5 MB whatever the capture's size.
DETAIL_MAX_BYTES = 3_500_000
#: The whole page's budget: when the rest of a page is large (the table and chart of 100,000
#: steps), the timeline's data is cut further, to what is left under this (at least
#: DETAIL_MIN_BYTES).
PAGE_MAX_BYTES = 4_900_000
DETAIL_MIN_BYTES = 300_000
#: Finding ranges outside the step windows get windows of their own: at most this many (in the
#: findings' order, overlapping ones merged), each padded on both sides by RANGE_PAD_SHARE of its
#: length (at least RANGE_PAD_MIN_NS) so the operations around it show, and dropped (no link, a
#: note saying so) when it holds more than RANGE_MAX_OPS operations.
RANGE_WINDOWS_MAX = 12
RANGE_PAD_SHARE = 0.25
RANGE_PAD_MIN_NS = 100_000
RANGE_MAX_OPS = 200_000
#: The whole analysis window is one more window (an overview) when it holds at most this many GPU
#: operations.
WHOLE_WINDOW_MAX_OPS = 50_000
#: Span names in the interactive timeline's data are cut to this many characters.
DETAIL_NAME_CHARS = 300
#: Stream lanes per device (busiest first).
MAX_STREAM_LANES = 12
#: Devices shown (those with the most GPU time in the window).
MAX_DEVICES = 8
#: Host threads shown: the step thread, then other threads that launched GPU work in the window.
MAX_HOST_THREADS = 3
#: NVTX nesting levels shown per thread (outermost first).
MAX_NVTX_LEVELS = 6
#: Without step markers: the number of GPU operations the default window is sized to hold.
NO_STEP_OPS = 2000

SPAN_KINDS = ("kernel", "nccl", "memcpy", "memset", "nvtx", "api", "sync", "os_wait")

_KB = 1024


def _fmt_bytes(n: int) -> str:
    if n < _KB:
        return f"{n} B"
    if n < _KB * _KB:
        return f"{n / _KB:.1f} KiB"
    if n < _KB ** 3:
        return f"{n / _KB / _KB:.1f} MiB"
    return f"{n / _KB ** 3:.2f} GiB"


# ---------------------------------------------------------------------------------------------
# choosing the window
# ---------------------------------------------------------------------------------------------
def pick_step(steps_table, *, worst: bool = False) -> dict | None:
    """The primary step with the median step time (lower median), or the longest with ``worst``.

    Ties are broken by the earlier step. Returns ``None`` without primary steps. The dict has
    ``step, index, name, pid, tid, global_tid, start_ns, end_ns, step_time_ns``.
    """
    if steps_table is None or len(steps_table) == 0:
        return None
    median, worst_id = pick_steps(steps_table)
    if median is None:
        return None
    i = int(np.flatnonzero(np.asarray(steps_table["step"]) == (worst_id if worst else median))[0])
    r = {k: np.asarray(steps_table[k])[i] for k in ("step", "index", "name", "pid", "tid", "global_tid", "start_ns",
                                                     "end_ns", "step_time_ns")}
    return {"step": int(r["step"]), "index": int(r["index"]), "name": str(r["name"]), "pid": int(r["pid"]),
            "tid": int(r["tid"]), "global_tid": int(r["global_tid"]), "start_ns": int(r["start_ns"]),
            "end_ns": int(r["end_ns"]), "step_time_ns": int(r["step_time_ns"])}


# ---------------------------------------------------------------------------------------------
# merging
# ---------------------------------------------------------------------------------------------
def coalesce(start: np.ndarray, end: np.ndarray, name: np.ndarray, kind: np.ndarray, *, window_ns: int,
             cap: int = MAX_SPANS_PER_LANE) -> dict[str, np.ndarray]:
    """Sort spans by start; when there are more than ``cap``, merge runs of neighbours into ``cap``
    groups, cutting at the ``cap - 1`` **widest holes** between them (the idle holes are what a
    timeline is read for). When there are fewer holes than cuts (back-to-back spans), or holes of
    equal width, the remaining cuts are spread evenly over the lane.

    Returns arrays ``start, end, name, kind, count, busy`` (``busy``: length of the union of the
    group's spans, ns; ``name``/``kind`` of the first span of a group;
    ``same_name``/``same_kind`` tell whether every span of the group shares it). ``window_ns`` is
    accepted for callers that size caps by the window; the split depends on the spans only.
    """
    start = np.asarray(start, dtype=np.int64)
    end = np.maximum(np.asarray(end, dtype=np.int64), start)
    name = np.asarray(name, dtype=np.int64)
    kind = np.asarray(kind, dtype=np.int64)
    order = np.argsort(start, kind="stable")
    start, end, name, kind = start[order], end[order], name[order], kind[order]
    n = len(start)
    ones = np.ones(n, dtype=np.int64)
    if n <= cap:
        return {"start": start, "end": end, "name": name, "kind": kind, "count": ones, "busy": end - start,
                "same_name": np.ones(n, bool), "same_kind": np.ones(n, bool)}
    reach = np.maximum.accumulate(end)
    # each span's contribution to the union of the spans before it (overlaps count once)
    prev = np.concatenate(([start[0]], reach[:-1]))
    own = np.maximum(end - np.maximum(start, prev), 0)
    hole = start[1:] - reach[:-1]          # > 0: an empty stretch before span i + 1
    # cut at the widest holes first; the rest of the budget (back-to-back spans, equal holes) goes
    # to boundaries spread evenly by a low-discrepancy order, so long busy runs still show detail
    k = max(cap - 1, 0)
    idx = np.arange(len(hole))
    spread = (idx * 0.6180339887498949) % 1.0
    cut = np.sort(np.lexsort((spread, -np.maximum(hole, 0)))[:k])
    b = np.concatenate(([0], cut + 1)).astype(np.int64)
    g_end = np.maximum.reduceat(end, b)
    count = np.diff(np.append(b, n))
    same_name = np.minimum.reduceat(name, b) == np.maximum.reduceat(name, b)
    same_kind = np.minimum.reduceat(kind, b) == np.maximum.reduceat(kind, b)
    return {"start": start[b], "end": g_end, "name": name[b], "kind": kind[b], "count": count,
            "busy": np.add.reduceat(own, b), "same_name": same_name, "same_kind": same_kind}


def _spans(start, end, name_idx, kind_idx, names: list[str], kinds: tuple[str, ...], w0: int, w1: int,
           cap: int = MAX_SPANS_PER_LANE) -> tuple[list[dict], int]:
    """Clip to the window, coalesce, and build span dicts. Returns (spans, original count)."""
    start = np.maximum(np.asarray(start, dtype=np.int64), w0)
    end = np.minimum(np.asarray(end, dtype=np.int64), w1)
    total = len(start)
    c = coalesce(start, end, name_idx, kind_idx, window_ns=w1 - w0, cap=cap)
    out = []
    for s, e, nm, kd, cnt, busy, sn, sk in zip(c["start"].tolist(), c["end"].tolist(), c["name"].tolist(),
                                              c["kind"].tolist(), c["count"].tolist(), c["busy"].tolist(),
                                              c["same_name"].tolist(), c["same_kind"].tolist()):
        label = names[nm] if (cnt == 1 or sn) else f"{cnt} operations"
        if cnt > 1 and sn:
            label = f"{label} ×{cnt}"
        out.append({"start_ns": s, "end_ns": e, "kind": kinds[kd] if (cnt == 1 or sk) else "mixed",
                    "name": label, "count": cnt, "busy_ns": min(int(busy), e - s)})
    return out, total


class _Names:
    """Deduplicated span labels (lanes refer to them by index while merging)."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._pos: dict[str, int] = {}

    def add_many(self, labels) -> np.ndarray:
        out = np.empty(len(labels), dtype=np.int64)
        for i, v in enumerate(labels):
            j = self._pos.get(v)
            if j is None:
                j = self._pos[v] = len(self.values)
                self.values.append(v)
            out[i] = j
        return out


# ---------------------------------------------------------------------------------------------
# GPU side
# ---------------------------------------------------------------------------------------------
def _op_labels(trace, ops, idx: np.ndarray, names: _Names) -> np.ndarray:
    """Name index per op: kernel display name (glossary: "Kernel names"); ``memcpy HtoD 24.0 MiB
    (pageable)``; ``memset 1.0 MiB``."""
    from .kernels import display_name

    kind = ops.kind[idx]
    rows = ops.row[idx]
    out = np.zeros(len(idx), dtype=np.int64)
    k = kind == KIND_KERNEL
    if k.any():
        sid = np.asarray(trace.kernels["short_id"])[rows[k]].astype(np.int64)
        nid = np.asarray(trace.kernels["name_id"])[rows[k]].astype(np.int64)
        uniq, inv = np.unique(np.stack([sid, nid]), axis=1, return_inverse=True)
        labels = [display_name(str(s), str(n)) or "(unnamed kernel)"
                  for s, n in zip(trace.strings.lookup(uniq[0]), trace.strings.lookup(uniq[1]))]
        out[k] = names.add_many(labels)[np.asarray(inv).reshape(-1)]
    m = kind == KIND_MEMCPY
    if m.any():
        mc = trace.memcpy
        r = rows[m]
        ck = np.asarray(mc["copy_kind"])[r]
        nb = np.asarray(mc["bytes"])[r]
        hk = np.asarray(mc["host_kind"])[r] if "host_kind" in mc else np.full(len(r), -1)
        labels = []
        for c, b, h in zip(ck.tolist(), nb.tolist(), hk.tolist()):
            mem = S.MEM_KIND_LABELS.get(h, "") if h >= 0 else ""
            labels.append(f"memcpy {S.COPY_KIND_LABELS.get(c, 'other')} {_fmt_bytes(int(b))}" + (f" ({mem})" if mem else ""))
        out[m] = names.add_many(labels)
    z = kind == KIND_MEMSET
    if z.any():
        nb = np.asarray(trace.memset["bytes"])[rows[z]]
        out[z] = names.add_many([f"memset {_fmt_bytes(int(b))}" for b in nb.tolist()])
    return out


def _op_stream(trace, ops, idx: np.ndarray) -> np.ndarray:
    """Dense stream index (``Trace.streams``) of each op, -1 when the tables lack it."""
    out = np.full(len(idx), -1, dtype=np.int64)
    for kind, df in ((KIND_KERNEL, trace.kernels), (KIND_MEMCPY, trace.memcpy), (KIND_MEMSET, trace.memset)):
        sel = ops.kind[idx] == kind
        if sel.any() and "stream" in df:
            out[sel] = np.asarray(df["stream"])[ops.row[idx][sel]]
    return out


def _gpu_devices(analysis, w0: int, w1: int, names: _Names, cap: int = MAX_SPANS_PER_LANE) -> list[dict]:
    trace, ops = analysis.trace, analysis.ops
    if len(ops) == 0:
        return []
    sel = np.flatnonzero((ops.start_ns < w1) & (ops.end_ns > w0))
    devs = trace.devices
    streams = trace.streams
    procs = trace.processes
    kinds = ("kernel", "nccl", "memcpy", "memset")
    op_kind = np.where(ops.kind[sel] == KIND_KERNEL, np.where(ops.is_nccl[sel], 1, 0),
                       np.where(ops.kind[sel] == KIND_MEMCPY, 2, 3)).astype(np.int64)
    labels = _op_labels(trace, ops, sel, names)
    stream = _op_stream(trace, ops, sel)
    dev = ops.device[sel].astype(np.int64)
    s = np.maximum(ops.start_ns[sel], w0)
    e = np.minimum(ops.end_ns[sel], w1)
    dur = e - s
    # devices with GPU work in the window or gaps in it, busiest first (ties: device order)
    gaps = analysis.gaps
    gap_dev = np.zeros(0, dtype=np.int64)
    if gaps is not None and len(gaps):
        gsel = (gaps.start_ns < w1) & (gaps.end_ns > w0)
        gap_dev = gaps.device[gsel]
    candidates = np.union1d(np.unique(dev), np.unique(gap_dev)).astype(np.int64)
    busy = np.array([int(dur[dev == d].sum()) for d in candidates], dtype=np.int64)
    order = np.lexsort((candidates, -busy))
    shown = candidates[order][:MAX_DEVICES]
    out = []
    for d in sorted(shown.tolist()):
        on = dev == d
        lanes = []
        st_ids = np.unique(stream[on])
        lane_busy = [(int(dur[on & (stream == sid)].sum()), int(sid)) for sid in st_ids]
        lane_busy.sort(key=lambda t: (-t[0], t[1]))
        kept = sorted((sid for _, sid in lane_busy[:MAX_STREAM_LANES]),
                      key=lambda sid: (int(np.asarray(streams["stream_id"])[sid]) if 0 <= sid < len(streams) else 1 << 40, sid))
        pids_on_dev = set()
        for sid in kept:
            if 0 <= sid < len(streams):
                pids_on_dev.add(int(np.asarray(streams["proc"])[sid]))
        for sid in kept:
            m = on & (stream == sid)
            spans, total = _spans(ops.start_ns[sel][m], ops.end_ns[sel][m], labels[m], op_kind[m], names.values,
                                  kinds, w0, w1, cap)
            if 0 <= sid < len(streams):
                stream_id, proc = int(np.asarray(streams["stream_id"])[sid]), int(np.asarray(streams["proc"])[sid])
                pid = int(np.asarray(procs["pid"])[proc]) if 0 <= proc < len(procs) else None
            else:
                stream_id, pid = None, None
            label = f"stream {stream_id}" if stream_id is not None else "stream ?"
            if len(pids_on_dev) > 1 and pid is not None:
                label += f" · pid {pid}"
            lanes.append({"stream": stream_id, "pid": pid, "label": label, "total": total,
                          "busy_ns": int(dur[m].sum()), "spans": spans})
        gap_rows: list[dict] = []
        gap_total = 0
        if gaps is not None and len(gaps):
            gm = np.flatnonzero((gaps.device == d) & (gaps.start_ns < w1) & (gaps.end_ns > w0))
            gap_total = len(gm)
            g0 = np.maximum(gaps.start_ns[gm], w0)
            c = coalesce(g0, np.minimum(gaps.end_ns[gm], w1),
                         np.zeros(len(gm), np.int64), gaps.cause[gm].astype(np.int64), window_ns=w1 - w0, cap=cap)
            single = [i for i, n in enumerate(c["count"].tolist()) if n == 1]
            # the idle-class split of gaps drawn on their own (clipped to the window), for tooltips
            pos = np.searchsorted(g0, np.asarray(c["start"])[single]) if single else np.zeros(0, np.int64)
            amounts = gaps.split(gm[pos], w0, w1) if single else None
            split_of = {i: {CAUSES[j]: int(v) for j, v in enumerate(amounts[k]) if v} for k, i in enumerate(single)}
            for i, (a, b, cause, cnt, busy, same) in enumerate(zip(
                    c["start"].tolist(), c["end"].tolist(), c["kind"].tolist(), c["count"].tolist(),
                    c["busy"].tolist(), c["same_kind"].tolist())):
                gap_rows.append({"start_ns": a, "end_ns": b, "cause": CAUSES[cause] if same else "mixed",
                                 "count": cnt, "busy_ns": min(int(busy), b - a), "split_ns": split_of.get(i)})
        r = {"label": np.asarray(devs["label"])[d], "name": np.asarray(devs["name"])[d]}
        out.append({"device": int(d), "label": str(r["label"]), "name": str(r["name"] or ""), "lanes": lanes,
                    "hidden_lanes": max(0, len(st_ids) - len(kept)), "gaps": gap_rows,
                    "gap_count": gap_total})
    return out


# ---------------------------------------------------------------------------------------------
# host side
# ---------------------------------------------------------------------------------------------
def _nvtx_levels(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nesting level of each range (greedy: the lowest level whose last range ended)."""
    order = np.lexsort((-end, start))
    level = np.zeros(len(start), dtype=np.int64)
    ends: list[int] = []
    for i in order.tolist():
        s = int(start[i])
        placed = False
        for lv in range(len(ends)):
            if ends[lv] <= s:
                ends[lv] = int(end[i])
                level[i] = lv
                placed = True
                break
        if not placed:
            ends.append(int(end[i]))
            level[i] = len(ends) - 1
    return level


def _host_thread(analysis, gtid: int, w0: int, w1: int, names: _Names, cap: int = MAX_SPANS_PER_LANE) -> dict:
    trace = analysis.trace
    threads = trace.threads
    pos = np.searchsorted(np.asarray(threads["global_tid"], dtype=np.int64), gtid)
    t_idx = int(pos) if pos < len(threads) and int(np.asarray(threads["global_tid"])[pos]) == gtid else -1
    lanes: list[dict] = []
    hidden_levels = 0
    # NVTX ranges
    nv = trace.nvtx
    if len(nv):
        m = ((np.asarray(nv["global_tid"], dtype=np.int64) == gtid) & np.isin(np.asarray(nv["event_type"]), S.NVTX_RANGE_TYPES)
             & (np.asarray(nv["start_ns"], dtype=np.int64) < w1) & (np.asarray(nv["end_ns"], dtype=np.int64) > w0)
             & (np.asarray(nv["end_ns"], dtype=np.int64) >= np.asarray(nv["start_ns"], dtype=np.int64)))
        idx = np.flatnonzero(m)
        if len(idx):
            s = np.asarray(nv["start_ns"], dtype=np.int64)[idx]
            e = np.asarray(nv["end_ns"], dtype=np.int64)[idx]
            texts = ["" if not isinstance(t, str) else t for t in np.asarray(nv["text"])[idx].tolist()]
            lab = names.add_many([t or "(unnamed range)" for t in texts])
            lv = _nvtx_levels(s, e)
            nlev = int(lv.max()) + 1
            hidden_levels = max(0, nlev - MAX_NVTX_LEVELS)
            for level in range(min(nlev, MAX_NVTX_LEVELS)):
                sel = lv == level
                spans, total = _spans(s[sel], e[sel], lab[sel], np.zeros(sel.sum(), np.int64), names.values,
                                      ("nvtx",), w0, w1, cap)
                lanes.append({"kind": "nvtx", "label": "NVTX" if level == 0 else f"NVTX {level + 1}", "level": level,
                              "total": total, "spans": spans})
    # CUDA API calls and blocking sync calls
    rt = trace.runtime
    if t_idx >= 0 and len(rt):
        rs = np.asarray(rt["start_ns"], dtype=np.int64)
        re_ = np.asarray(rt["end_ns"], dtype=np.int64)
        m = (np.asarray(rt["thread"]) == t_idx) & (rs < w1) & (re_ > w0)
        blocking = np.asarray(analysis.blocking, dtype=bool)
        if len(blocking) != len(rt):
            blocking = np.zeros(len(rt), dtype=bool)
        for kind, label, mask in (("api", "CUDA API", m & ~blocking), ("sync", "sync calls", m & blocking)):
            idx = np.flatnonzero(mask)
            nid = np.asarray(rt["name_id"])[idx]
            uniq, inv = np.unique(nid, return_inverse=True)
            lab = names.add_many([S.strip_api_suffix(str(v)) or "(CUDA API)" for v in trace.strings.lookup(uniq)])[inv] \
                if len(idx) else np.zeros(0, np.int64)
            spans, total = _spans(rs[idx], re_[idx], lab, np.zeros(len(idx), np.int64), names.values, (kind,), w0, w1,
                                  cap)
            lanes.append({"kind": kind, "label": label, "level": 0, "total": total, "spans": spans})
    # OS waits
    os_ = trace.osrt
    if t_idx >= 0 and len(os_):
        s_all = np.asarray(os_["start_ns"], dtype=np.int64)
        e_all = np.asarray(os_["end_ns"], dtype=np.int64)
        m = (np.asarray(os_["thread"]) == t_idx) & np.asarray(os_["is_wait"], dtype=bool) & (s_all < w1) & (e_all > w0)
        idx = np.flatnonzero(m)
        nid = np.asarray(os_["name_id"])[idx]
        uniq, inv = np.unique(nid, return_inverse=True)
        lab = names.add_many([str(v) or "(OS call)" for v in trace.strings.lookup(uniq)])[inv] if len(idx) \
            else np.zeros(0, np.int64)
        spans, total = _spans(s_all[idx], e_all[idx], lab, np.zeros(len(idx), np.int64), names.values, ("os_wait",),
                              w0, w1, cap)
        lanes.append({"kind": "os_wait", "label": "OS waits", "level": 0, "total": total, "spans": spans})
    name = str(np.asarray(threads["name"])[t_idx]) if t_idx >= 0 and "name" in threads else ""
    return {"global_tid": int(gtid), "pid": int(S.decode_pid(gtid)), "tid": int(S.decode_tid(gtid)), "name": name,
            "lanes": lanes, "hidden_nvtx_levels": hidden_levels}


def _host_threads(analysis, first_gtid: int | None, w0: int, w1: int) -> list[int]:
    """The step thread first, then threads that launched the most GPU operations in the window."""
    ops = analysis.ops
    out: list[int] = []
    if first_gtid:
        out.append(int(first_gtid))
    if len(ops):
        sel = np.flatnonzero((ops.start_ns < w1) & (ops.end_ns > w0) & (ops.api >= 0))
        if len(sel):
            g = ops.api_tid(sel)
            g = g[g != 0]
            if len(g):
                vals, counts = np.unique(g, return_counts=True)
                for v in vals[np.lexsort((vals, -counts))].tolist():
                    if v not in out:
                        out.append(int(v))
    # other step threads (one per process) active in the window
    st = analysis.steps.table
    if len(st):
        sel = np.asarray(st["primary"], dtype=bool) & (np.asarray(st["start_ns"], dtype=np.int64) < w1) \
            & (np.asarray(st["end_ns"], dtype=np.int64) > w0)
        for v in factorize(np.asarray(st["global_tid"], dtype=np.int64)[sel])[1].tolist():  # first appearance
            if int(v) not in out:
                out.append(int(v))
    return out[:MAX_HOST_THREADS]


# ---------------------------------------------------------------------------------------------
# public
# ---------------------------------------------------------------------------------------------
def lane_cap(n_lanes: int, total: int = MAX_SPANS_TOTAL, per_lane: int = MAX_SPANS_PER_LANE) -> int:
    """Spans allowed per lane when the timeline has ``n_lanes`` lanes and ``total`` spans in all."""
    return int(min(per_lane, max(MIN_SPANS_PER_LANE, total // max(n_lanes, 1))))


def _gpu_lane_count(analysis, w0: int, w1: int) -> int:
    """Stream lanes (capped per device) plus one idle-gap lane per device, over shown devices."""
    ops = analysis.ops
    if len(ops) == 0:
        return 0
    sel = np.flatnonzero((ops.start_ns < w1) & (ops.end_ns > w0))
    if len(sel) == 0:
        return 0
    dev = ops.device[sel].astype(np.int64)
    stream = _op_stream(analysis.trace, ops, sel)
    pairs = np.unique(dev * (1 << 32) + (stream + 1))
    _, per_dev = np.unique(pairs >> 32, return_counts=True)
    lanes = np.sort(np.minimum(per_dev, MAX_STREAM_LANES))[::-1][:MAX_DEVICES]  # an upper bound
    return int(lanes.sum() + len(lanes))

def fill_cap(sizes, total: int) -> int:
    """The largest per-lane cap such that the lanes of ``sizes`` spans keep at most ``total``
    spans in all (small lanes keep all theirs; at least :data:`MIN_SPANS_PER_LANE`)."""
    sizes = sorted(int(x) for x in sizes)
    left, n = int(total), len(sizes)
    for i, x in enumerate(sizes):
        share = left // max(n - i, 1)
        if x > share:
            return max(share, MIN_SPANS_PER_LANE)
        left -= x
    return max(sizes[-1] if sizes else 0, MIN_SPANS_PER_LANE)


def _lane_sizes(analysis, w0: int, w1: int, threads: list[int]) -> list[int]:
    """Upper bounds of the span count of each lane of the window (a thread's NVTX levels and its
    CUDA API and sync lanes counted as one lane each: a bound, cheap to get)."""
    out: list[int] = []
    ops = analysis.ops
    if len(ops):
        sel = np.flatnonzero((ops.start_ns < w1) & (ops.end_ns > w0))
        if len(sel):
            key = ops.device[sel].astype(np.int64) * (1 << 32) + (_op_stream(analysis.trace, ops, sel) + 1)
            out += np.unique(key, return_counts=True)[1].tolist()
    gaps = analysis.gaps
    if gaps is not None and len(gaps):
        gsel = (gaps.start_ns < w1) & (gaps.end_ns > w0)
        out += np.unique(gaps.device[gsel], return_counts=True)[1].tolist()
    trace = analysis.trace
    tids = np.asarray(trace.threads["global_tid"], dtype=np.int64)
    for g in threads:
        pos = int(np.searchsorted(tids, g))
        t_idx = pos if pos < len(tids) and int(tids[pos]) == g else -1
        nv = trace.nvtx
        if len(nv):
            out.append(int(((np.asarray(nv["global_tid"], dtype=np.int64) == g)
                            & (np.asarray(nv["start_ns"], dtype=np.int64) < w1)
                            & (np.asarray(nv["end_ns"], dtype=np.int64) > w0)).sum()))
        for tab in (trace.runtime, trace.osrt):
            if t_idx >= 0 and len(tab):
                out.append(int(((np.asarray(tab["thread"]) == t_idx) & (np.asarray(tab["start_ns"], dtype=np.int64) < w1)
                                & (np.asarray(tab["end_ns"], dtype=np.int64) > w0)).sum()))
    return out


def window_timeline(analysis, start_ns: int, end_ns: int, *, host_tid: int | None = None,
                    total_spans: int = MAX_SPANS_TOTAL, per_lane: int | None = MAX_SPANS_PER_LANE) -> dict[str, Any]:
    """Timeline of ``[start_ns, end_ns)``: device lanes, idle gaps, host lanes (see module doc).

    ``host_tid`` (a ``global_tid``) is listed first among host threads. ``total_spans`` and
    ``per_lane`` size the caps (:func:`lane_cap`); with ``per_lane=None`` the lanes share
    ``total_spans`` by need (:func:`fill_cap`, for :func:`detail_window`).
    """
    w0, w1 = int(start_ns), int(end_ns)
    if w1 <= w0:
        w1 = w0 + 1
    names = _Names()
    threads = _host_threads(analysis, host_tid, w0, w1)
    if per_lane is None:  # the interactive timeline: lanes share the budget by need
        cap = fill_cap(_lane_sizes(analysis, w0, w1, threads), total_spans)
    else:
        cap = lane_cap(_gpu_lane_count(analysis, w0, w1) + 5 * len(threads), total_spans, per_lane)
    devices = _gpu_devices(analysis, w0, w1, names, cap)
    hosts = [_host_thread(analysis, g, w0, w1, names, cap) for g in threads]
    merged = any(sp["count"] > 1 for d in devices for ln in d["lanes"] for sp in ln["spans"]) or \
        any(sp["count"] > 1 for h in hosts for ln in h["lanes"] for sp in ln["spans"])
    return {
        "start_ns": w0, "end_ns": w1, "duration_ms": (w1 - w0) / 1e6,
        "devices": devices, "host": hosts,
        "merged": bool(merged),
        "limits": {"max_spans_per_lane": cap, "max_stream_lanes": MAX_STREAM_LANES,
                   "max_devices": MAX_DEVICES, "max_host_threads": MAX_HOST_THREADS,
                   "max_nvtx_levels": MAX_NVTX_LEVELS},
    }


def step_timeline(analysis, *, worst: bool = False) -> dict[str, Any] | None:
    """Timeline of the median step (or the worst with ``worst=True``); without step markers, of
    :data:`NO_STEP_OPS` operations around the middle of the analysis window. ``None`` when the
    capture has no analysis window (no GPU work and no steps).

    Adds ``choice`` (``"median step"``, ``"worst step"`` or ``"middle of the capture"``) and ``step``
    (the :func:`pick_step` dict, or ``None``).
    """
    steps = analysis.steps
    w0, w1 = steps.window_start_ns, steps.window_end_ns
    if w0 is None or w1 is None or w1 <= w0:
        return None
    step = pick_step(steps.table, worst=worst) if steps.has_markers else None
    if step is not None:
        view = analysis.window_view("worst" if worst else "median")
        if view is None:
            return None
        tl = window_timeline(view, step["start_ns"], max(step["end_ns"], step["start_ns"] + 1),
                             host_tid=step["global_tid"])
        tl["choice"] = "worst step" if worst else "median step"
    else:
        view = analysis.window_view("middle")
        if view is None:
            return None
        a, b = view.window
        tl = window_timeline(view, a, b)
        tl["choice"] = "middle of the capture"
    tl["step"] = step
    return tl


# ---------------------------------------------------------------------------------------------
# the interactive timeline's data
# ---------------------------------------------------------------------------------------------
class NameTable:
    """Strings shared by the windows of :func:`detail_data` (spans refer to them by index)."""

    def __init__(self) -> None:
        self.values: list[str] = []
        self._pos: dict[str, int] = {}

    def index(self, v: str) -> int:
        j = self._pos.get(v)
        if j is None:
            j = self._pos[v] = len(self.values)
            self.values.append(v if len(v) <= DETAIL_NAME_CHARS else v[:DETAIL_NAME_CHARS - 1] + "…")
        return j


def span_columns(spans: list[dict], w0: int, names: NameTable, kinds: tuple[str, ...], *,
                 kind_key: str = "kind") -> dict:
    """Spans (as :func:`window_timeline` gives them, sorted by start) as compact columns:
    ``s`` start offsets from ``w0`` in ns, each as the difference to the previous span's
    (the first from ``w0``); ``d`` durations (ns); ``n`` name indexes into ``names``; ``k`` kind
    indexes into ``kinds`` (left out when all spans share the kind ``kind``); for merged spans
    ``c`` counts and ``b`` busy ns (left out when no span is merged)."""
    starts = [sp["start_ns"] - w0 for sp in spans]
    s = [b - a for a, b in zip([0] + starts[:-1], starts)]
    out: dict = {"s": s, "d": [sp["end_ns"] - sp["start_ns"] for sp in spans],
                 "n": [names.index(str(sp.get("name", ""))) for sp in spans]}
    ks = [kinds.index(sp[kind_key]) if sp[kind_key] in kinds else len(kinds) - 1 for sp in spans]
    if len(set(ks)) > 1:
        out["k"] = ks
    out["kind"] = kinds[ks[0]] if ks else kinds[0]
    if any(sp.get("count", 1) > 1 for sp in spans):
        out["c"] = [int(sp.get("count", 1)) for sp in spans]
        out["b"] = [int(sp.get("busy_ns", sp["end_ns"] - sp["start_ns"])) for sp in spans]
    return out


def detail_window(view, start_ns: int, end_ns: int, *, host_tid: int | None, budget: int) -> dict[str, Any]:
    """:func:`window_timeline` with a span budget of ``budget`` (every operation its own span when
    the window holds fewer; lanes are merged at their widest holes beyond that)."""
    return window_timeline(view, start_ns, end_ns, host_tid=host_tid, total_spans=budget, per_lane=None)


def range_windows(ranges: list[tuple[int, int]], covered: list[tuple[int, int]],
                  max_windows: int = RANGE_WINDOWS_MAX) -> list[tuple[int, int, list[int]]]:
    """Windows for the time ranges (ns, in findings' order) that no ``covered`` window holds
    whole: each padded by ``max(RANGE_PAD_SHARE * length, RANGE_PAD_MIN_NS)`` on both sides,
    overlapping ones merged; the first ``max_windows`` windows (by their first range), each with
    the indexes of the ranges it holds."""
    wins: list[list] = []
    for i, (s, e) in enumerate(ranges):
        if any(a <= s and e <= b for a, b in covered):
            continue
        pad = max(int((e - s) * RANGE_PAD_SHARE), RANGE_PAD_MIN_NS)
        lo, hi = s - pad, max(e, s + 1) + pad
        for w in wins:
            if lo < w[1] and hi > w[0]:
                w[0], w[1] = min(w[0], lo), max(w[1], hi)
                w[2].append(i)
                break
        else:
            if len(wins) < max_windows:
                wins.append([lo, hi, [i]])
    # merging may have made windows overlap each other: merge until none does
    merged = True
    while merged:
        merged = False
        for x in range(len(wins)):
            for y in range(x + 1, len(wins)):
                if wins[x][0] < wins[y][1] and wins[y][0] < wins[x][1]:
                    wins[x] = [min(wins[x][0], wins[y][0]), max(wins[x][1], wins[y][1]), wins[x][2] + wins[y][2]]
                    del wins[y]
                    merged = True
                    break
            if merged:
                break
    return [(int(a), int(b), sorted(idx)) for a, b, idx in wins]
