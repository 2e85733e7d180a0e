"""``metrics.critical_path`` (issue 48, milestone 1): each step's critical path from the trace's
host calls and GPU operations (:mod:`nsysdoc.metrics.critical_path` defines the graph and the path;
``docs/json.md`` the fields)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..metrics import critical_path as cp_m
from ..metrics.kernels import is_communication_kernel
from ..metrics.ops import correlation_key
from ..trace import schema as S
from .numbers import _num

from ..metrics import what_if as wi_m
from ..metrics.kernels import is_fp32_gemm, top_compute_kernel

if TYPE_CHECKING:  # pragma: no cover
    from .inputs import Inputs

#: steps whose path is computed at most: beyond it the median and worst steps and steps evenly
#: spread over the rest (``sampled``)
MAX_STEPS = 16  # (64 cost 0.5-0.9 s on 2 M-kernel captures: the walk is per node on the path)
#: the window without steps is walked only when it holds at most this many calls and operations;
#: with steps, fewer steps are computed (never fewer than the median and worst) when the computed
#: steps would hold more than this many in all (by the capture's mean per step)
MAX_WINDOW_EVENTS = 2_000_000
#: with steps, the computed steps hold about this many calls and operations in all (by the capture's
#: mean per step; never fewer than the median and worst steps): the walk is per node on the path,
#: ~2 us a node, and 8 steps of 100 k events cost 1.6 s on a 400 k-launch Kineto trace
STEP_EVENTS_BUDGET = 250_000
#: the what-ifs (one replay per rule, issue 48) are computed when the median step (or the window
#: without steps) holds at most this many calls and operations: a 1 M-kernel window without steps
#: cost 1.1 s of a 6 s report in replays (issue 50); beyond it ``missing`` says so
WHAT_IF_EVENTS_BUDGET = 500_000
#: calls and operations read before a step's start (their arrivals are cut at the start, but they
#: are the predecessors of the step's first nodes): the step's own length, at most this
MAX_LOOKBACK_NS = 200_000_000
#: items in ``top``
TOP = 15
#: blocking calls, by the loader's API kind
_SYNC_KINDS = (S.API_SYNC, S.API_SYNC_COPY, S.API_SYNC_MEMSET)
_LAUNCH_KINDS = (S.API_LAUNCH, S.API_ASYNC_COPY)


def _read(t, t0: int, t1: int, proc: int | None, comm_ids: dict) -> dict | None:
    """The calls and operations of process ``proc`` (None: all) overlapping ``[t0, t1)``."""
    rt = t.store.get("runtime")
    c = {"start_ns": [], "end_ns": [], "thread": [], "kind": [], "key": [], "proc": []}
    if rt is not None and len(rt):
        d = rt.rows_overlapping(t0, t1, ["start_ns", "end_ns", "correlation_id", "api_kind", "proc", "thread"])
        m = np.ones(len(d["start_ns"]), dtype=bool) if proc is None else np.asarray(d["proc"]) == proc
        ak = np.asarray(d["api_kind"], np.int64)[m]
        kind = np.where(np.isin(ak, _SYNC_KINDS), cp_m.CALL_SYNC,
                        np.where(np.isin(ak, _LAUNCH_KINDS), cp_m.CALL_LAUNCH, cp_m.CALL_OTHER))
        c = {"start_ns": np.asarray(d["start_ns"], np.int64)[m], "end_ns": np.asarray(d["end_ns"], np.int64)[m],
             "thread": np.asarray(d["thread"], np.int64)[m], "kind": kind, "proc": np.asarray(d["proc"], np.int64)[m],
             "key": np.where(np.asarray(d["correlation_id"], np.int64)[m] > 0,
                             correlation_key(np.asarray(d["proc"])[m], np.asarray(d["correlation_id"])[m]), 0)}
    o = {"start_ns": [], "end_ns": [], "stream": [], "seg": [], "name": [], "key": [], "proc": [], "stream_id": [],
         "bytes": [], "pageable": [], "blocking": [], "to_host": []}
    for tab_name, seg in (("kernels", cp_m.KERNEL), ("memcpy", cp_m.COPY), ("memset", cp_m.COPY)):
        tab = t.store.get(tab_name)
        if tab is None or not len(tab):
            continue
        cols = ["start_ns", "end_ns", "stream", "correlation_id", "proc", "stream_id"] + (
            ["name_id"] if seg == cp_m.KERNEL else []) + (["bytes", "copy_kind", "host_kind"] if tab_name == "memcpy" else [])
        d = tab.rows_overlapping(t0, t1, cols)
        m = np.ones(len(d["start_ns"]), dtype=bool) if proc is None else np.asarray(d["proc"]) == proc
        if not m.any():
            continue
        n = int(m.sum())
        o["start_ns"].append(np.asarray(d["start_ns"], np.int64)[m])
        o["end_ns"].append(np.asarray(d["end_ns"], np.int64)[m])
        o["stream"].append(np.asarray(d["stream"], np.int64)[m])
        o["proc"].append(np.asarray(d["proc"], np.int64)[m])
        o["stream_id"].append(np.asarray(d["stream_id"], np.int64)[m])  # the CUDA stream id (names only)
        if tab_name == "memcpy":  # host<->device copies from pageable memory (pageable-memcpy's what-if)
            o["bytes"].append(np.asarray(d["bytes"], np.int64)[m])
            o["pageable"].append((np.asarray(d["host_kind"], np.int64)[m] == S.MEM_PAGEABLE)
                                 & np.isin(np.asarray(d["copy_kind"], np.int64)[m], (S.COPY_HTOD, S.COPY_DTOH)))
            o["blocking"].append(host_blocking_copies(np.asarray(d["copy_kind"], np.int64)[m],
                                                      np.asarray(d["host_kind"], np.int64)[m]))
            o["to_host"].append(np.asarray(d["copy_kind"], np.int64)[m] == S.COPY_DTOH)
        else:
            o["bytes"].append(np.zeros(n, np.int64))
            o["pageable"].append(np.zeros(n, bool))
            o["blocking"].append(np.zeros(n, bool))
            o["to_host"].append(np.zeros(n, bool))
        corr = np.asarray(d["correlation_id"], np.int64)[m]
        o["key"].append(np.where(corr > 0, correlation_key(np.asarray(d["proc"])[m], corr), 0))
        if seg == cp_m.KERNEL:
            ids = np.asarray(d["name_id"], np.int64)[m]
            o["name"].append(ids)
            uniq = np.unique(ids)
            new = [u for u in uniq.tolist() if u not in comm_ids]
            for u, x in zip(new, t.strings.lookup(np.asarray(new, np.int64)) if new else []):
                comm_ids[u] = is_communication_kernel(str(x), S.NCCL_KERNEL.search(str(x)) is not None)
            comm = np.array([comm_ids[u] for u in uniq.tolist()], dtype=bool)
            o["seg"].append(np.where(comm[np.searchsorted(uniq, ids)], cp_m.COMM, cp_m.KERNEL))
        else:
            # copies and memsets are named by their table: codes -1 (memcpy) and -2 (memset)
            o["name"].append(np.full(n, -1 if tab_name == "memcpy" else -2, np.int64))
            o["seg"].append(np.full(n, seg, np.int64))
    flags = ("pageable", "blocking", "to_host")
    o = {k: (np.concatenate(v) if v else np.zeros(0, bool if k in flags else np.int64)) for k, v in o.items()}
    return {"calls": c, "ops": o}


#: ``ENUM_CUDA_MEMCPY_OPER`` host-to-host
_COPY_HTOH = 9


def host_blocking_copies(copy_kind: np.ndarray, host_kind: np.ndarray) -> np.ndarray:
    """Copies whose ``cudaMemcpy*Async`` call blocks the host until the copy ends (CUDA runtime API,
    "API synchronization behavior"): device to pageable host memory, host to host, and pageable
    host to device (the driver stages it through a pinned buffer and may synchronize with the
    stream). Whether the call really waited is read on the capture (:func:`cp_m.build_graph`: the
    copy ended inside the call)."""
    ck, hk = np.asarray(copy_kind, np.int64), np.asarray(host_kind, np.int64)
    return (ck == _COPY_HTOH) | ((hk == S.MEM_PAGEABLE) & np.isin(ck, (S.COPY_HTOD, S.COPY_DTOH)))


def step_path(t, t0: int, t1: int, proc: int | None, comm_ids: dict | None = None):
    """The critical path of ``[t0, t1)`` for process ``proc`` (None: all): ``(graph, path)``.
    ``comm_ids`` caches which kernel name ids are communication kernels."""
    look = min(max(t1 - t0, 0), MAX_LOOKBACK_NS)
    d = _read(t, t0 - look, t1, proc, {} if comm_ids is None else comm_ids)
    c, o = d["calls"], d["ops"]
    g = cp_m.build_graph(c["start_ns"], c["end_ns"], c["thread"], c["kind"], c["key"], o["start_ns"], o["end_ns"],
                         o["stream"], o["seg"], o["name"], o["key"], c_proc=c["proc"],
                         o_proc=o["proc"], o_blocking=o["blocking"])
    g.o_stream_id, g.o_bytes, g.o_pageable = o["stream_id"], o["bytes"], o["pageable"]
    g.o_to_host = o["to_host"]  # device-to-host copies (pageable-memcpy's what-if keeps their wait)
    return g, cp_m.critical_path(g, t0, t1)


def _selected(rows: list[dict], median: int | None, worst: int | None, most: int = MAX_STEPS) -> tuple[list[dict], bool]:
    """The step rows whose path is computed: all of them up to ``most``, else the median and
    worst steps and steps evenly spread over the rest."""
    if len(rows) <= most:
        return rows, False
    keep = {int(i) for i in np.linspace(0, len(rows) - 1, max(most - 2, 0)).round().astype(int)} if most > 2 else set()
    keep |= {i for i, r in enumerate(rows) if r["step"] in (median, worst)}
    return [rows[i] for i in sorted(keep)], True


def _launch_ops(a: Inputs, res, g, on: np.ndarray) -> np.ndarray | None:
    """The operator (code into ``res.plan.attr.names``, -1 for none) open on the launching thread
    when each operation ``on`` was launched: the innermost operator range at the launch call's start
    (``metrics.where``'s attribution); None without operator ranges."""
    from .memory import memory_sites

    attr = getattr(getattr(res, "plan", None), "attr", None) if res is not None else None
    keys = np.asarray(getattr(getattr(res, "ctx", None), "thread_keys", np.zeros(0, np.int64)), dtype=np.int64)
    if attr is None or not len(keys) or not len(on):
        return None
    call = g.op_call[on]
    ok = call >= 0
    if not ok.any() or not len(g.c_thread):  # no operation's launching call was recorded
        return np.full(len(on), -1, np.int64)
    gtids = np.asarray(a.trace.threads["global_tid"], dtype=np.int64)
    th = g.c_thread[np.maximum(call, 0)]
    gtid = np.where(ok & (th >= 0) & (th < len(gtids)), gtids[np.clip(th, 0, max(len(gtids) - 1, 0))], -1) \
        if len(gtids) else np.full(len(on), -1, np.int64)
    pos = np.clip(np.searchsorted(keys, gtid), 0, len(keys) - 1)
    thread = np.where((gtid >= 0) & (keys[pos] == gtid), pos, -1)
    sites = memory_sites(attr, res.plan.bounds, thread, g.c_start[np.maximum(call, 0)])
    return None if sites is None else np.where(thread >= 0, sites[:, 0], -1)


def critical_path_metrics(a: Inputs, step_rows: list[dict], picks: tuple, res=None, kernels=None,
                          copies: list | None = None, devices: list | None = None) -> dict:
    """``metrics.critical_path``: ``steps`` (each computed step's length and segments), ``top``
    (kernels and copies by time on the path, per computed step), ``median_step`` (the median step's
    row, when computed), ``sampled``, ``missing`` (what the graph could not use).

    ``kernels`` (the kernel statistics, read by the what-ifs only) may be a function returning
    them: :func:`nsysdoc.assembly.assemble` passes its kernel thread's ``result`` so that the step
    graphs are walked while that thread runs (issue 50)."""
    t = a.trace
    out = {"steps": [], "top": [], "median_step": None, "sampled": False, "steps_total": 0, "missing": []}
    if not t.has_gpu_activity:
        out["missing"].append("no GPU operations in the capture")
        return out
    out["missing"].append("cross-stream waits found by timing: the capture does not pair cudaStreamWaitEvent "
                          "with the cudaEventRecord it waits on")
    if t.count("runtime") == 0:
        out["missing"].append("no CUDA API calls recorded: no launch, host-order or sync edges")
    procs = np.asarray(a.steps.table["proc"], np.int64) if len(a.steps.table) else np.zeros(0, np.int64)
    by_step = {int(s): int(p) for s, p in zip(np.asarray(a.steps.table["step"]).tolist(), procs.tolist())} \
        if len(procs) else {}
    rows = [r for r in step_rows if r.get("primary") and r.get("end_ns") is not None and r["end_ns"] > r["start_ns"]]
    spans = []
    if rows:
        out["steps_total"] = len(rows)
        n = t.count("runtime") + t.count("kernels") + t.count("memcpy") + t.count("memset")
        most = int(min(MAX_STEPS, max(2, STEP_EVENTS_BUDGET // max(n // len(rows), 1))))
        chosen, out["sampled"] = _selected(rows, *picks, most=most)
        spans = [(r["step"], int(r["start_ns"]), int(r["end_ns"]), by_step.get(int(r["step"]), -1)) for r in chosen]
    elif a.steps.window_start_ns is not None and a.steps.window_end_ns is not None:
        w0, w1 = int(a.steps.window_start_ns), int(a.steps.window_end_ns)
        n = t.count("runtime") + t.count("kernels") + t.count("memcpy") + t.count("memset")
        if n > MAX_WINDOW_EVENTS:
            out["missing"].append(f"the window without steps holds {n} calls and operations (more than "
                                  f"{MAX_WINDOW_EVENTS}): no path computed")
            return out
        out["steps_total"] = 1
        spans = [(None, w0, w1, None)]
    name_ns: dict[int, int] = {}
    name_seg: dict[int, int] = {}
    #: (name code, operator code) -> ns on the path: each kernel's operator is the one that
    #: launched most of its path time
    name_op_ns: dict[tuple[int, int], int] = {}
    comm_ids: dict[int, bool] = {}
    median_graph = None
    for step, t0, t1, proc in spans:
        g, p = step_path(t, t0, t1, proc if proc is None or proc >= 0 else None, comm_ids)
        if (step is not None and step == picks[0]) or len(spans) == 1:
            median_graph = (g, t0, t1)
            median_path = p
        row = {"step": step, "start_ns": t0, "length_ms": _num(p.length_ns / 1e6),
               "segments_ms": {k: _num(v / 1e6) for k, v in zip(cp_m.SEGMENTS, p.segments_ns.tolist())}}
        if p.truncated:
            row["truncated"] = True
        out["steps"].append(row)
        on = np.flatnonzero(p.op_ns)
        if len(on):
            codes = g.o_name[on]
            uniq, inv = np.unique(codes, return_inverse=True)
            sums = np.bincount(inv, weights=p.op_ns[on])
            for u, s_ns, j in zip(uniq.tolist(), sums.tolist(), [on[np.argmax(inv == k)] for k in range(len(uniq))]):
                name_ns[u] = name_ns.get(u, 0) + int(s_ns)
                name_seg[u] = int(g.o_seg[j])
            ops = _launch_ops(a, res, g, on)
            if ops is not None:
                for (u, o), v in zip(zip(codes.tolist(), ops.tolist()), p.op_ns[on].tolist()):
                    if o >= 0:
                        name_op_ns[(u, o)] = name_op_ns.get((u, o), 0) + int(v)
        if step is not None and step == picks[0]:
            out["median_step"] = row
    if not spans:
        return out
    ns = len(spans)
    top = sorted(name_ns.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
    names = t.strings.lookup(np.asarray([max(k, 0) for k, _ in top], np.int64)) if top else []
    op_of: dict[int, tuple[int, int]] = {}
    for (u, o), v in name_op_ns.items():
        if u not in op_of or (v, -o) > (op_of[u][1], -op_of[u][0]):
            op_of[u] = (o, v)
    op_names = getattr(getattr(getattr(res, "plan", None), "attr", None), "names", None)
    for (code, tot), nm in zip(top, names):
        kind = cp_m.SEGMENTS[name_seg[code]]
        label = str(nm) if code >= 0 else ("memcpy" if code == -1 else "memset")
        op = str(op_names[op_of[code][0]]) if code in op_of and op_names is not None else None
        out["top"].append({"name": label, "kind": kind, "op": op, "ms_per_step": _num(tot / ns / 1e6)})
    if out["median_step"] is None and len(out["steps"]) == 1:
        out["median_step"] = out["steps"][0]
    if median_graph is not None and out["median_step"] is not None \
            and len(median_graph[0].c_start) + len(median_graph[0].o_start) > WHAT_IF_EVENTS_BUDGET:
        n_med = len(median_graph[0].c_start) + len(median_graph[0].o_start)
        where = "the median step" if len(spans) > 1 or spans[0][0] is not None else "the window without steps"
        out["missing"].append(f"what-if not computed: {where} holds {n_med} calls and operations (more than "
                              f"{WHAT_IF_EVENTS_BUDGET})")
    elif median_graph is not None and out["median_step"] is not None:
        if callable(kernels):  # outside the try: the kernel thread's own error is not a replay's
            kernels = kernels()
        try:
            out["what_if"] = what_if_metrics(t, out, *median_graph, kernels,  # issue 48, milestone 2
                                             pinned_gbps=pinned_reference_gbps(copies, devices))
            out["dependency"] = dependency_metrics(t, median_graph[0], median_path, *median_graph[1:])
        except (ValueError, IndexError, OverflowError, FloatingPointError, MemoryError) as exc:
            # a capture the replay cannot handle loses its what-ifs, not the report
            out.pop("what_if", None)
            out.pop("dependency", None)
            out["missing"].append(f"what-if not computed: {type(exc).__name__}")
    return out


# --- what-if per finding (issue 48, milestone 2) -------------------------------------------------

def _what_if_row(before_ns: int, after_ns: int, change: wi_m.Change) -> dict:
    return {"step_ms_before": _num(before_ns / 1e6), "step_ms_after": _num(after_ns / 1e6),
            "saved_ms_per_step": _num((before_ns - after_ns) / 1e6), "change": change.text}


def rule_changes(t, g, t0: int, kernels: dict | None, r: "wi_m.Replay | None" = None) -> dict:
    """The graph change each rule's fix makes (``docs/glossary.md``, "What-if"), by rule id; rules
    whose fix touches nothing in this step are left out."""
    out = {"launch-bound": wi_m.launch_floor(g, t0), "host-sync": wi_m.syncs_removed(g, t0),
           "data-starvation": wi_m.input_wait_removed(g, t0)}
    if (g.o_seg == cp_m.COMM).any():
        out["nccl-exposed"] = wi_m.comm_hidden(g)
    names = {}
    codes = np.unique(g.o_name[g.o_name >= 0])
    if len(codes):
        names = dict(zip(codes.tolist(), (str(x) for x in t.strings.lookup(codes.astype(np.int64)))))
    top = top_compute_kernel((kernels or {}).get("by_name"))
    if top is not None and names:
        mask = np.isin(g.o_name, [c for c, n in names.items() if n == top.get("name")])
        if mask.any():
            out["dominant-kernel"] = wi_m.ops_faster(
                g, mask, wi_m.DOMINANT_SPEEDUP, f"the top kernel {wi_m.DOMINANT_SPEEDUP:g}x faster, as a tuned, fused "
                f"or tensor-core version might be")
    fp32 = [c for c, n in names.items() if is_fp32_gemm(n)]
    if fp32:
        out["fp32-gemm"] = wi_m.ops_faster(
            g, np.isin(g.o_name, fp32), wi_m.TF32_SPEEDUP,
            f"the FP32 GEMM/conv kernels {wi_m.TF32_SPEEDUP:g}x faster with TF32 tensor cores")
    if r is not None and (r.producer >= 0).any():
        out["gpu-dependency"] = wi_m.waits_removed(g)
    for rid, ch in out.items():
        ch.rules = [rid]
    return {k: v for k, v in out.items() if not v.empty()}


def pinned_reference_gbps(copies: list | None, devices: list | None) -> float:
    """The bandwidth pinned copies reach (glossary "pinned bandwidth reference", as the
    pageable-memcpy rule's values): measured on this capture's pinned HtoD/DtoH copies of 64 KiB or
    more on average, else typical of the GPU's PCIe generation."""
    from .values import _pinned_typical_gbps

    pinned = [c for c in copies or [] if c.get("host_memory") == "pinned" and c.get("kind") in ("HtoD", "DtoH")
              and c.get("count") and (c.get("bytes") or 0) / c["count"] >= 64 * 1024]
    ms, b = sum(c.get("time_ms") or 0 for c in pinned), sum(c.get("bytes") or 0 for c in pinned)
    if ms > 0 and b > 0:
        return b / (ms * 1e6)
    ccs = [d.get("compute_capability") for d in devices or [] if d.get("compute_capability")]
    return _pinned_typical_gbps(min(ccs) if ccs else None)


def what_if_metrics(t, cp: dict, g, t0: int, t1: int, kernels: dict | None = None,
                    pinned_gbps: float | None = None) -> dict:
    """``metrics.critical_path.what_if``: per rule id, the median step's time before and after the
    rule's fix (``what_if {step_ms_before, step_ms_after, saved_ms_per_step, change}``)."""
    r = wi_m.prepare(g, t0, t1)
    changes = rule_changes(t, g, t0, kernels, r)
    pg = getattr(g, "o_pageable", None)
    if pinned_gbps and pg is not None and len(pg) == len(g.o_start) and pg.any():
        ch = wi_m.pinned_copies(g, pg, g.o_bytes, pinned_gbps, getattr(g, "o_to_host", None))
        if not ch.empty():
            ch.rules = ["pageable-memcpy"]
            changes["pageable-memcpy"] = ch
    before = t1 - t0
    out = {rid: _what_if_row(before, wi_m.step_ns_after(r, ch), ch) for rid, ch in changes.items()}
    wi_m.remember(cp, lambda rule_ids: _what_if_all(r, changes, rule_ids))
    return out


def what_if_all(result: dict, rule_ids: list[str]) -> dict | None:
    """The combined what-if of ``rule_ids`` on ``result`` (its graph while kept: :func:`_what_if_all`)."""
    cp = (result.get("metrics") or {}).get("critical_path")
    return wi_m.combined(cp, rule_ids) if isinstance(cp, dict) else None


def _what_if_all(r: "wi_m.Replay", changes: dict, rule_ids: list[str]) -> dict | None:
    """The fixes of the findings ``rule_ids`` together, replayed as one change on the median step's
    graph (never a sum of their savings): ``{rules, step_ms_before, step_ms_after, saved_ms_per_step,
    change}``; None when fewer than two of them have a what-if. The rules call it after they ran,
    through :func:`nsysdoc.metrics.what_if.combined` (the graph is gone in a saved report)."""
    chosen = [changes[rid] for rid in dict.fromkeys(rule_ids) if rid in changes]
    if len(chosen) < 2:
        return None
    ch = wi_m.combine(chosen, "; ".join(c.text for c in chosen))
    row = _what_if_row(r.t1 - r.t0, wi_m.step_ns_after(r, ch), ch)
    return {"rules": [c.rules[0] for c in chosen], **row}


#: waits listed in ``metrics.critical_path.dependency.waits``
DEPENDENCY_TOP = 5


def dependency_metrics(t, g, p, t0: int, t1: int) -> dict | None:
    """``metrics.critical_path.dependency`` (glossary "GPU-side dependency on the path"): on the
    median step, the GPU operations whose last arrival was an operation on another stream (a
    cross-stream wait), grouped by what they waited on — ``waits`` (``stream``, ``waited_on_stream``,
    ``producer``, ``kind``, ``count``, ``wait_ms``: from the later of the stream's previous operation's
    end and the launch call's return to the start, ``on_path_ms``: of it, waits of operations on the
    critical path), and ``path_instead_ms``: what the critical path ran, by segment, during the
    waits of operations off it. None without such waits."""
    nc = len(g.c_start)
    arr, nxt, lab = cp_m.bindings(g, t0)
    if not len(g.o_start):
        return None
    onode = nxt[nc:]
    prod = (onode >= nc) & ((onode - nc) != g.op_prev) & (g.o_start >= t0) & (g.o_start < t1)
    j = np.flatnonzero(prod)
    if not len(j):
        return None
    k = onode[j] - nc
    ready = np.where(g.op_prev[j] >= 0, g.o_end[np.maximum(g.op_prev[j], 0)], t0)
    if nc:
        ready = np.maximum(ready, np.where(g.op_call[j] >= 0, g.c_end[np.maximum(g.op_call[j], 0)], t0))
    ready = np.maximum(ready, t0)
    wait = np.maximum(g.o_start[j] - ready, 0)
    on = p.op_ns[j] > 0
    keys: dict = {}
    for a_, b_, nm, sg, w_, o_ in zip(g.o_stream[j].tolist(), g.o_stream[k].tolist(), g.o_name[k].tolist(),
                                      g.o_seg[k].tolist(), wait.tolist(), on.tolist()):
        e = keys.setdefault((a_, b_, nm, sg), [0, 0, 0])
        e[0] += 1
        e[1] += w_
        e[2] += w_ if o_ else 0
    top = sorted(keys.items(), key=lambda kv: (-kv[1][1], kv[0]))[:DEPENDENCY_TOP]
    codes = [kk[2] for kk, _ in top]
    names = t.strings.lookup(np.asarray([max(c, 0) for c in codes], np.int64)) if codes else []
    sid = getattr(g, "o_stream_id", None)
    if sid is not None and len(sid) == len(g.o_start):  # CUDA stream ids for the codes
        first = {}
        for code, real in zip(g.o_stream.tolist(), sid.tolist()):
            first.setdefault(code, real)
        top = [((first.get(a_, a_), first.get(b_, b_), nm, sg), v) for (a_, b_, nm, sg), v in top]
    waits = [{"stream": a_, "waited_on_stream": b_,
              "producer": str(n) if nm >= 0 else ("memcpy" if nm == -1 else "memset"),
              "kind": cp_m.SEGMENTS[sg], "count": v[0], "wait_ms": _num(v[1] / 1e6), "on_path_ms": _num(v[2] / 1e6)}
             for ((a_, b_, nm, sg), v), n in zip(top, names)]
    # the path's pieces during the waits of operations off the path (a union of intervals)
    off = ~on & (wait > 0)
    instead = {sname: 0.0 for sname in cp_m.SEGMENTS}
    if off.any():
        lo, hi = g.o_start[j][off] - wait[off], g.o_start[j][off]
        o = np.argsort(lo, kind="stable")
        lo, hi = lo[o], np.maximum.accumulate(hi[o])
        newrun = np.r_[True, lo[1:] > hi[:-1]]
        ulo, uhi = lo[newrun], np.r_[hi[np.flatnonzero(newrun)[1:] - 1], hi[-1]]
        cum = np.r_[0, np.cumsum(uhi - ulo)]

        def covered(x):  # measure of the union up to x
            i = np.searchsorted(ulo, x, side="right") - 1
            ic = np.maximum(i, 0)
            return np.where(i >= 0, cum[ic] + np.minimum(x, uhi[ic]) - ulo[ic], 0)

        pcs = p.pieces
        if pcs:
            arrp = np.asarray([(q[2], q[3], q[4]) for q in pcs], np.int64)
            ov = covered(arrp[:, 1]) - covered(arrp[:, 0])
            for sg, v in zip(arrp[:, 2].tolist(), ov.tolist()):
                instead[cp_m.SEGMENTS[sg]] += v / 1e6
    return {"waits": waits, "path_instead_ms": {kk: _num(v) for kk, v in instead.items()}}
