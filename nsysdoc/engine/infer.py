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
    and what they were inferred from, or ``(None, None)`` when no process's GPU work repeats."""
    if not tables:
        return None, None
    # pass 1: operations per (process, launching thread)
    counts: dict[tuple[int, int], int] = {}
    for t in tables:
        for b in t.iter_blocks(["proc", "api_thread"]):
            th = np.asarray(b["api_thread"], dtype=np.int64)
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
    if not lead:
        return None, None
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
        got = si.find_period(tok)
        if got is None:
            continue
        period, agree = got
        gap = np.concatenate(([0], s[1:] - e[:-1]))
        anchor = si.pick_anchor(tok, gap, period)
        if anchor is None:
            continue
        first = int(np.flatnonzero(tok == anchor[0])[0])
        found[p] = {"thread": lead[p][0], "ops": lead[p][1], "period": period, "agreement": agree,
                    "anchor": anchor[0], "anchor_gap_ns": anchor[1],
                    "unit_tokens": np.unique(tok[first:first + period])}
    parts.clear()
    if not found:
        return None, None
    # pass 3: the anchors' launches, and per stretch between anchors the operations and last launch end
    anchors: dict[int, list] = {p: [] for p in found}
    for t in tables:
        for b in t.iter_blocks(_cols(t.name)):
            proc = np.asarray(b["proc"], dtype=np.int64)
            th = np.asarray(b["api_thread"], dtype=np.int64)
            tok = _tokens(t.name, b)
            for p, f in found.items():
                sel = np.flatnonzero((proc == p) & (th == f["thread"]) & (tok == f["anchor"]))
                if len(sel):
                    anchors[p].append(np.asarray(b["api_start_ns"], np.int64)[sel])
    for p, f in found.items():
        f["anchor_ns"] = np.unique(np.concatenate(anchors[p])) if anchors[p] else np.zeros(0, np.int64)
    n_of = {p: len(f["anchor_ns"]) for p, f in found.items()}
    ops_in = {p: np.zeros(n, np.int64) for p, n in n_of.items()}
    end_in = {p: np.full(n, -1, np.int64) for p, n in n_of.items()}
    for t in tables:
        for b in t.iter_blocks(_cols(t.name)):
            proc = np.asarray(b["proc"], dtype=np.int64)
            th = np.asarray(b["api_thread"], dtype=np.int64)
            for p, f in found.items():
                sel = np.flatnonzero((proc == p) & (th == f["thread"]))
                if not len(sel) or not n_of[p]:
                    continue
                s = np.asarray(b["api_start_ns"], np.int64)[sel]
                e = np.asarray(b["api_end_ns"], np.int64)[sel]
                k = np.searchsorted(f["anchor_ns"], s, side="right") - 1
                inside = k >= 0
                np.add.at(ops_in[p], k[inside], 1)
                np.maximum.at(end_in[p], k[inside], e[inside])
    thread_gtid = np.asarray(trace.threads["global_tid"], dtype=np.int64)
    names = trace.strings
    gtids, starts, ends, info = [], [], [], []
    for p, f in found.items():
        a = f["anchor_ns"]
        if len(a) < si.MIN_REPEATS:
            continue
        s, e = si.step_ranges(a, ops_in[p], end_in[p])
        if len(s) < si.MIN_REPEATS or ops_in[p][: len(s)].sum() < si.MIN_COVERAGE * f["ops"]:
            continue
        gtid = int(thread_gtid[f["thread"]]) if 0 <= f["thread"] < len(thread_gtid) else 0
        gtids.append(np.full(len(s), gtid, np.int64))
        starts.append(s)
        ends.append(e)
        unit = [_token_name(names, int(x)) for x in f["unit_tokens"]]
        info.append({"pid": int(np.asarray(trace.processes["pid"])[p]) if 0 <= p < len(trace.processes) else None,
                     "steps": int(len(s)), "period_ops": int(f["period"]),
                     "match_pct": round(f["agreement"] * 100, 1), "anchor": _token_name(names, f["anchor"]),
                     "anchor_gap_ms": round(f["anchor_gap_ns"] / 1e6, 3), "unit": si.unit_kind(unit),
                     "ops_covered_pct": round(float(ops_in[p][: len(s)].sum()) / f["ops"] * 100, 1)})
    if not starts:
        return None, None
    n = sum(len(s) for s in starts)
    names_ = np.concatenate([np.array([f"inferred #{i}" for i in range(len(x))], dtype=object) for x in starts])
    ranges = Columns({"global_tid": np.concatenate(gtids), "name": names_,
                      "start_ns": np.concatenate(starts), "range_end_ns": np.concatenate(ends)})
    return ranges, {"method": "kernel sequence period", "processes": info}


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
        from ..trace import schema as S

        return f"memcpy {S.COPY_KIND_LABELS.get(code, code)}"
    return "memset"
