"""Inferred steps for a capture without step markers: the passes over the GPU tables that feed
:mod:`nsysdoc.metrics.step_inference` (definitions there and in the glossary).

Pass 1 counts each process's GPU operations per launching thread (the launch thread: most
operations). Pass 2 reads the launch thread's operations in launch order (tokens, launch call
start and end), at most ``SAMPLE_OPS`` of them from the start of the capture, to find the period
and the anchor. Pass 3 reads every operation once more and keeps only what the step ranges need:
the anchors' launch times, and per stretch between anchors the launch thread's operation count and
last launch end. Memory: the sample plus O(steps).
"""
from __future__ import annotations

import numpy as np

from ..metrics import step_inference as si
from ..trace import schema as S
from ..trace.columns import Columns

_TOKEN_COLS = {"kernels": "short_id", "memcpy": "copy_kind", "memset": None}
_KIND_CODE = {"kernels": 0, "memcpy": 1, "memset": 2}


def _tokens(name: str, blk: dict) -> np.ndarray:
    col = _TOKEN_COLS[name]
    code = _KIND_CODE[name]
    if col is None:
        return np.full(len(blk["proc"]), code, dtype=np.int64)
    return np.asarray(blk[col], dtype=np.int64) * 4 + code


def _cols(name: str) -> list[str]:
    col = _TOKEN_COLS[name]
    return ["proc", "api_thread", "api_start_ns", "api_end_ns"] + ([col] if col else [])


def infer_steps(trace, tables: list) -> tuple[Columns | None, dict | None]:
    """Step ranges (``global_tid, name, start_ns, range_end_ns``, one launch thread per process)
    and what they were inferred from; ``(None, info)`` when no process's GPU work repeats in units
    that tile it (``info["rejected"]`` says why, per process), ``(None, None)`` without GPU work."""
    if not tables:
        return None, None
    # pass 1: operations per (process, launching thread)
    counts: dict[tuple[int, int], int] = {}
    per_proc: dict[int, int] = {}
    for t in tables:
        for b in t.iter_blocks(["proc", "api_thread"]):
            th = np.asarray(b["api_thread"], dtype=np.int64)
            pr = np.asarray(b["proc"], dtype=np.int64)
            pr = pr[pr >= 0]
            if len(pr):
                pc = np.bincount(pr)
                for k in np.flatnonzero(pc).tolist():
                    per_proc[k] = per_proc.get(k, 0) + int(pc[k])
            ok = th >= 0
            if not ok.any():
                continue
            key = np.asarray(b["proc"], dtype=np.int64)[ok] * (1 << 32) + th[ok]
            u, c = np.unique(key, return_counts=True)
            for k, n in zip(u.tolist(), c.tolist()):
                key2 = (k >> 32, k & 0xFFFFFFFF)
                counts[key2] = counts.get(key2, 0) + n
    lead: dict[int, tuple[int, int]] = {}
    for (proc, th), n in sorted(counts.items()):
        if n >= si.MIN_PERIOD_OPS * si.MIN_REPEATS and (proc not in lead or n > lead[proc][1]):
            lead[proc] = (th, n)
    names = trace.strings
    pids = np.asarray(trace.processes["pid"])
    pid_of = lambda p: int(pids[p]) if 0 <= p < len(pids) else None  # noqa: E731
    rejected: list[dict] = []
    for p, n in sorted(per_proc.items()):
        if p in lead:
            continue
        launched = sum(c for (q, _th), c in counts.items() if q == p)
        why = ("its GPU operations have no launching call in the capture (CUDA API calls not recorded), so "
               "there is no launch order to find a repeating unit in" if not launched else
               f"too few GPU operations ({max(c for (q, _th), c in counts.items() if q == p):,} at most from "
               f"one thread) to repeat {si.MIN_REPEATS} times")
        rejected.append({"pid": pid_of(p), "reason": why})
    if not lead:
        return None, ({"method": "kernel sequence period", "processes": [], "rejected": rejected} if rejected else None)
    # pass 2: the launch threads' operations (the first SAMPLE_OPS in launch order when there are
    # more: once twice that many are held, the earliest SAMPLE_OPS are kept and later launches are
    # skipped, so memory stays bounded whatever the capture's length)
    parts: dict[int, list] = {p: [] for p in lead}
    held = {p: 0 for p in lead}
    cutoff = {p: None for p in lead}
    for t in tables:
        for b in t.iter_blocks(_cols(t.name)):
            proc = np.asarray(b["proc"], dtype=np.int64)
            th = np.asarray(b["api_thread"], dtype=np.int64)
            start = np.asarray(b["api_start_ns"], np.int64)
            tok = _tokens(t.name, b)
            for p, (thread, _n) in lead.items():
                keep = (proc == p) & (th == thread)
                if cutoff[p] is not None:
                    keep &= start <= cutoff[p]
                sel = np.flatnonzero(keep)
                if not len(sel):
                    continue
                parts[p].append((tok[sel], start[sel], np.asarray(b["api_end_ns"], np.int64)[sel]))
                held[p] += len(sel)
                if held[p] > 2 * si.SAMPLE_OPS:
                    parts[p] = [_earliest(parts[p], si.SAMPLE_OPS)]
                    held[p] = si.SAMPLE_OPS
                    cutoff[p] = int(parts[p][0][1][-1])
    found: dict[int, dict] = {}
    for p, chunks in parts.items():
        tok, s, e = _earliest(chunks, si.SAMPLE_OPS)
        del chunks
        # copies and memsets before the first kernel (an upload of weights or inputs) are no part
        # of the repeating work
        k0 = int(np.argmax((tok & 3) == 0)) if ((tok & 3) == 0).any() else 0
        tok, s, e = tok[k0:], s[k0:], e[k0:]
        gap = np.concatenate(([0], s[1:] - e[:-1]))
        got = si.find_period(tok)
        small = len(tok) <= si.ONE_STEP_MAX_OPS
        # the token kinds: for a repeating sequence, or one short enough to be one training step
        kinds = _token_kinds(names, tok) if got is not None or small else \
            {"one_step": False, "iteration_tokens": np.zeros(0, np.int64)}
        f = {"thread": lead[p][0], "ops": lead[p][1], "one_step": kinds["one_step"],
             "first_launch_ns": int(s[0]) if len(s) else None}
        if got is not None or small:
            # a period that holds an iteration's input copy, optimizer or host pause, even when no
            # smaller one repeats (a layer of fewer than MIN_PERIOD_OPS operations)
            groups = si.repeated_groups(tok)
            got = si.iteration_period(tok, gap, got, kinds["iteration_tokens"], groups) \
                if len(tok) >= si.MIN_PERIOD_OPS * si.MIN_REPEATS else got
        if got is not None:
            period, agree = got
            anchor = si.iteration_anchor(tok, gap, period, kinds["iteration_tokens"], groups) or \
                si.pick_anchor(tok, gap, period, groups)
            if anchor is not None:
                first = int(np.flatnonzero(tok == anchor[0])[0])
                f.update(period=period, agreement=agree, anchor=anchor[0], anchor_gap_ns=anchor[1],
                         unit_tokens=np.unique(tok[first:first + period]))
        if "anchor" in f or f["one_step"]:
            found[p] = f
        else:
            rejected.append({"pid": pid_of(p), "reason": "its GPU work does not repeat"})
    parts.clear()
    if not found:
        return None, ({"method": "kernel sequence period", "processes": [], "rejected": rejected} if rejected else None)
    first_kernel = _first_kernel_ns(tables)
    # pass 3: the anchors' launches ...
    anchors: dict[int, list] = {p: [] for p in found if "anchor" in found[p]}
    for t in tables:
        if not anchors:
            break
        for b in t.iter_blocks(_cols(t.name)):
            proc = np.asarray(b["proc"], dtype=np.int64)
            th = np.asarray(b["api_thread"], dtype=np.int64)
            tok = _tokens(t.name, b)
            for p in anchors:
                f = found[p]
                sel = np.flatnonzero((proc == p) & (th == f["thread"]) & (tok == f["anchor"]))
                if len(sel):
                    anchors[p].append(np.asarray(b["api_start_ns"], np.int64)[sel])
    for p, f in found.items():
        f["anchor_ns"] = np.unique(np.concatenate(anchors[p])) if anchors.get(p) else np.zeros(0, np.int64)
    # ... then per stretch between anchors the launch thread's operations and last launch end, and
    # the GPU work of every thread of the process launched in it (time, last end), and the
    # process's GPU time from its first kernel on
    n_of = {p: len(f["anchor_ns"]) for p, f in found.items()}
    ops_in = {p: np.zeros(n, np.int64) for p, n in n_of.items()}
    end_in = {p: np.full(n, -1, np.int64) for p, n in n_of.items()}
    gpu_in = {p: np.zeros(n, np.int64) for p, n in n_of.items()}
    gpu_end = {p: np.full(n, -1, np.int64) for p, n in n_of.items()}
    gpu_total = {p: 0 for p in found}
    last_launch = {p: -1 for p in found}
    gpu_last = {p: -1 for p in found}
    for t in tables:
        for b in t.iter_blocks(_cols(t.name) + ["start_ns", "end_ns", "api"]):
            proc = np.asarray(b["proc"], dtype=np.int64)
            th = np.asarray(b["api_thread"], dtype=np.int64)
            g0 = np.asarray(b["start_ns"], np.int64)
            g1 = np.asarray(b["end_ns"], np.int64)
            when_all = np.where(np.asarray(b["api"]) >= 0, np.asarray(b["api_start_ns"], np.int64), g0)
            for p, f in found.items():
                mine = np.flatnonzero(proc == p)
                if not len(mine):
                    continue
                dur = g1[mine] - g0[mine]
                counted = g0[mine] >= first_kernel if first_kernel is not None else np.ones(len(mine), bool)
                gpu_total[p] += int(dur[counted].sum())
                gpu_last[p] = max(gpu_last[p], int(g1[mine].max()))
                lt = mine[th[mine] == f["thread"]]
                if len(lt):
                    last_launch[p] = max(last_launch[p], int(np.asarray(b["api_end_ns"], np.int64)[lt].max()))
                if not n_of[p]:
                    continue
                k_all = np.searchsorted(f["anchor_ns"], when_all[mine], side="right") - 1
                ok = (k_all >= 0) & counted
                np.add.at(gpu_in[p], k_all[ok], dur[ok])
                np.maximum.at(gpu_end[p], k_all[k_all >= 0], g1[mine][k_all >= 0])
                sel = mine[th[mine] == f["thread"]]
                if not len(sel):
                    continue
                s = np.asarray(b["api_start_ns"], np.int64)[sel]
                e = np.asarray(b["api_end_ns"], np.int64)[sel]
                k = np.searchsorted(f["anchor_ns"], s, side="right") - 1
                inside = k >= 0
                np.add.at(ops_in[p], k[inside], 1)
                np.maximum.at(end_in[p], k[inside], e[inside])
    thread_gtid = np.asarray(trace.threads["global_tid"], dtype=np.int64)
    gtids, starts, ends, info = [], [], [], []
    for p, f in found.items():
        gtid = int(thread_gtid[f["thread"]]) if 0 <= f["thread"] < len(thread_gtid) else 0
        why = None
        a = f["anchor_ns"]
        if "anchor" in f and len(a) >= si.MIN_REPEATS:
            s, e = si.step_ranges(a, ops_in[p], end_in[p])
            n = len(s)
            # each unit's length: to the next one's start; the last, to its GPU work's end
            unit = np.append(s[1:] - s[:-1], max(int(e[-1]), int(gpu_end[p][n - 1])) - int(s[-1])) if n else s
            lo = 0
            if n > si.MIN_REPEATS and unit[0] > si.MAX_UNIT_RATIO * float(np.median(unit[1:])):
                lo = 1  # a cold first iteration (JIT, autotuning): not a unit of the steady state
            covered = int(gpu_in[p][lo:n].sum())
            ok, why = si.tiles(unit[lo:], covered, gpu_total[p], ops_in[p][lo:n]) if n - lo >= si.MIN_REPEATS else \
                (False, f"only {n - lo} repeating unit(s)")
            if ok and ops_in[p][lo:n].sum() < si.MIN_COVERAGE * f["ops"]:
                ok, why = False, (f"the repeating units hold {ops_in[p][lo:n].sum() / f['ops'] * 100:.0f}% of the "
                                  f"launching thread's GPU operations (at least {si.MIN_COVERAGE * 100:.0f}% needed)")
            if ok:
                gtids.append(np.full(n - lo, gtid, np.int64))
                starts.append(s[lo:])
                ends.append(e[lo:])
                unit_names = [_token_name(names, int(x)) for x in f["unit_tokens"]]
                info.append({"pid": pid_of(p), "steps": int(n - lo), "period_ops": int(f["period"]),
                             "match_pct": round(f["agreement"] * 100, 1), "anchor": _token_name(names, f["anchor"]),
                             "anchor_gap_ms": round(f["anchor_gap_ns"] / 1e6, 3), "unit": si.unit_kind(unit_names),
                             "ops_covered_pct": round(float(ops_in[p][lo:n].sum()) / f["ops"] * 100, 1),
                             "gpu_covered_pct": round(covered / gpu_total[p] * 100, 1) if gpu_total[p] else None,
                             "cold_first_unit": bool(lo)})
                continue
        elif "anchor" in f:
            why = f"only {len(a)} repeating unit(s)"
        if f["one_step"] and f["first_launch_ns"] is not None:
            # no repeating unit tiles the work, but it is forward, backward and optimizer once: one step
            gtids.append(np.array([gtid], np.int64))
            starts.append(np.array([f["first_launch_ns"]], np.int64))
            ends.append(np.array([max(last_launch[p], f["first_launch_ns"])], np.int64))
            info.append({"pid": pid_of(p), "steps": 1, "period_ops": int(f["ops"]), "match_pct": None,
                         "anchor": None, "anchor_gap_ms": None, "unit": "training step", "ops_covered_pct": 100.0,
                         "gpu_covered_pct": 100.0, "cold_first_unit": False, "one_step": True})
            continue
        rejected.append({"pid": pid_of(p), "reason": why or "its GPU work does not repeat"})
    if not starts:
        return None, {"method": "kernel sequence period", "processes": [], "rejected": rejected}
    names_ = np.concatenate([np.array([f"inferred #{i}" for i in range(len(x))], dtype=object) for x in starts])
    ranges = Columns({"global_tid": np.concatenate(gtids), "name": names_,
                      "start_ns": np.concatenate(starts), "range_end_ns": np.concatenate(ends)})
    method = "one training step" if all(x.get("one_step") for x in info) else "kernel sequence period"
    return ranges, {"method": method, "processes": info, "rejected": rejected}


def _token_kinds(strings, tok: np.ndarray) -> dict:
    """The tokens that mark an iteration (host-to-device copies, optimizer kernels), and whether
    the sequence is one training step (:func:`nsysdoc.metrics.step_inference.one_step`). Names are
    looked up once per distinct token; per-position arrays only when an optimizer kernel exists."""
    u = np.unique(tok)
    kind, code = u & 3, u >> 2
    h2d = u[(kind == 1) & (code == S.COPY_HTOD)]
    kern = u[kind == 0]
    names = [_token_name(strings, int(x)) for x in kern.tolist()]
    opt = kern[np.array([si.OPTIMIZER_KERNEL.search(n) is not None for n in names], dtype=bool)] if len(kern) \
        else kern
    one = False
    if len(opt):
        bwd = kern[np.array([si.BACKWARD_KERNEL.search(n) is not None for n in names], dtype=bool)]
        one = si.one_step(np.isin(tok, opt), np.isin(tok, bwd))
    return {"one_step": one, "iteration_tokens": np.concatenate([opt, h2d])}


def _first_kernel_ns(tables: list) -> int | None:
    for t in tables:
        if t.name == "kernels" and len(t):
            return int(t._smin.min())
    return None


def _earliest(chunks: list, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``n`` earliest launches (by launch start) of ``(tokens, starts, ends)`` chunks, sorted."""
    tok = np.concatenate([c[0] for c in chunks])
    s = np.concatenate([c[1] for c in chunks])
    e = np.concatenate([c[2] for c in chunks])
    order = np.argsort(s, kind="stable")[:n]
    return tok[order], s[order], e[order]


def _token_name(strings, token: int) -> str:
    kind, code = token & 3, token >> 2
    if kind == 0:
        return str(strings.lookup(np.array([code]))[0]) or f"kernel #{code}"
    if kind == 1:
        return f"memcpy {S.COPY_KIND_LABELS.get(code, code)}"
    return "memset"
