"""The planning passes: what the slices need to know before the first one runs.

One pass over the NVTX table: step markers (outermost ranges whose whole text matches the step
pattern, library domains excluded), DataLoader ranges and compile/autotune/warm-up ranges. One
pass over the GPU tables' time and launch columns: step ends (a primary step lasts until the GPU
work launched in it ends), each step's device (most operations, then most GPU time) and its first
operation, the GPU span, per-device first start and last end, the first launch of each kernel
(which long launch calls are set-up work), a histogram of operation starts. Then the slice
boundaries and the timeline windows (median and worst step, or the operations around the middle
of the window) are fixed.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..metrics import intervals as iv
from ..metrics.ops import KIND_KERNEL
from ..metrics.steps import Steps, StepBuilder, assign_ops_to_steps, outermost_ranges
from ..metrics.timeline import NO_STEP_OPS, pick_step
from ..trace import schema as S
from .data import GPU_KINDS, NEG, POS, in_sorted

#: Rows (GPU operations, CUDA API calls and OS runtime calls) per slice: bounds a slice's memory
#: (about 0.2-0.3 KB per row while it runs). ``NSYSDOC_SLICE_ROWS`` overrides it (tests use a
#: few rows to check that slicing never changes a number).
SLICE_ROWS = 1_000_000
#: Bins of the start-time histogram the slice boundaries are cut from.
HIST_BINS = 1 << 15


def slice_rows() -> int:
    raw = os.environ.get("NSYSDOC_SLICE_ROWS", "")
    try:
        return max(1, int(raw)) if raw.strip() else SLICE_ROWS
    except ValueError:
        return SLICE_ROWS


@dataclass
class Plan:
    """What the planning passes found (see the module docstring)."""

    ndev: int
    steps: Steps
    #: per step: its device (-1: no GPU operation), and its first operation's start on it
    step_dev: np.ndarray
    step_first: np.ndarray
    span: tuple[int | None, int | None]
    #: per device: first start of its operations, last end of its non-empty ones, and their count
    dev_min_start: np.ndarray
    dev_max_end: np.ndarray
    dev_ops: np.ndarray
    op_count: int
    #: DataLoader ranges and set-up ranges (thread, start, end) for painting host time
    loader_ranges: tuple
    setup_ranges: tuple
    #: set-up ranges with their folded text (set-up events)
    setup_texts: np.ndarray
    #: compile/autotune ranges of the launching thread (autotuning candidates), or None
    tuning: iv.Union | None
    #: runtime rows (global positions, sorted) of kernel launches that are set-up work
    setup_launch: np.ndarray
    #: interior slice boundaries (sorted); slices are (-inf, b0), [b0, b1), ..., [bk, +inf)
    bounds: np.ndarray
    hist_edges: np.ndarray
    hist_counts: np.ndarray
    #: timeline windows to capture while the slices run: name -> (start, end, host global_tid, step)
    timelines: dict = field(default_factory=dict)

    @property
    def window(self) -> tuple[int | None, int | None]:
        return self.steps.window_start_ns, self.steps.window_end_ns

    def slices(self) -> list[tuple[int, int]]:
        edges = [NEG, *self.bounds.tolist(), POS]
        return list(zip(edges[:-1], edges[1:]))


def _nvtx_scan(trace, pattern) -> dict:
    """Step-marker rows, DataLoader ranges and set-up ranges, from one pass over the NVTX blocks."""
    t = trace.store.get("nvtx")
    doms = trace.nvtx_domains
    lib = np.array([str(d).lower() in S.LIBRARY_NVTX_DOMAINS for d in doms], dtype=bool) if len(doms) \
        else np.zeros(1, dtype=bool)
    steps, loader, setup, tune = [], [], [], []
    cols = ["start_ns", "end_ns", "event_type", "global_tid", "thread", "domain", "text"]
    for blk in (t.iter_blocks(cols) if t is not None else ()):
        s, e = blk["start_ns"], blk["end_ns"]
        is_range = np.isin(blk["event_type"], S.NVTX_RANGE_TYPES) & (e >= s)
        if not is_range.any():
            continue
        enc = blk["text"].dictionary_encode()
        idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        vals = enc.dictionary.to_pylist()
        m_step = np.array([pattern.fullmatch(v.strip()) is not None for v in vals], dtype=bool)
        m_dl = np.array([S.DATALOADER_NVTX.search(v) is not None for v in vals], dtype=bool)
        m_set = np.array([S.SETUP_NVTX.search(v) is not None for v in vals], dtype=bool)
        dom = blk["domain"]
        lib_row = lib[dom] if len(doms) else np.zeros(len(s), dtype=bool)
        sel = np.flatnonzero(is_range & ~lib_row & m_step[idx])
        if len(sel):
            steps.append(pd.DataFrame({"global_tid": blk["global_tid"][sel].astype(np.int64),
                                       "name": np.array([vals[i] for i in idx[sel]], dtype=object),
                                       "start_ns": s[sel], "range_end_ns": e[sel]}))
        sel = np.flatnonzero(is_range & m_dl[idx])
        if len(sel):
            loader.append((blk["thread"][sel], s[sel], e[sel]))
        sel = np.flatnonzero(is_range & m_set[idx])
        if len(sel):
            tune.append((blk["thread"][sel], s[sel], e[sel]))
        sel = np.flatnonzero(is_range & m_set[idx] & ~m_dl[idx])
        if len(sel):
            setup.append((blk["thread"][sel], s[sel], e[sel],
                          np.array([S.fold_nvtx_text(vals[i]) for i in idx[sel]], dtype=object)))
    cat = lambda parts, k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, np.int64)  # noqa: E731
    ranges = pd.concat(steps, ignore_index=True) if steps else pd.DataFrame(
        {"global_tid": np.zeros(0, np.int64), "name": np.zeros(0, object), "start_ns": np.zeros(0, np.int64),
         "range_end_ns": np.zeros(0, np.int64)})
    tuning = None
    if tune:
        tuning = iv.union(cat(tune, 0), cat(tune, 1), cat(tune, 2))
    return {"ranges": outermost_ranges(ranges),
            "loader": tuple(cat(loader, i) for i in range(3)),
            "setup": tuple(cat(setup, i) for i in range(3)),
            "setup_texts": np.concatenate([p[3] for p in setup]) if setup else np.zeros(0, dtype=object),
            "tuning": tuning}


def _hist_range(trace) -> tuple[int, int]:
    lo, hi = POS, NEG
    for name in ("kernels", "memcpy", "memset", "runtime", "osrt"):
        t = trace.store.get(name)
        if t is None or not t.blocks:
            continue
        lo = min(lo, min(b.start_min for b in t.blocks))
        hi = max(hi, max(b.start_max for b in t.blocks))
    if lo > hi:
        return 0, 1
    return lo, hi + 1


def make_plan(trace, pattern) -> Plan:
    nv = _nvtx_scan(trace, pattern)
    ndev = len(trace.devices)
    builder = StepBuilder(nv["ranges"], trace.processes["global_pid"].to_numpy(np.int64))
    nsteps = len(builder.df) if builder.has else 0
    st_n = np.zeros((nsteps, max(ndev, 1)), dtype=np.int64)
    st_d = np.zeros((nsteps, max(ndev, 1)), dtype=np.int64)
    st_f = np.full((nsteps, max(ndev, 1)), POS, dtype=np.int64)
    dev_min = np.full(max(ndev, 1), POS, dtype=np.int64)
    dev_max = np.full(max(ndev, 1), NEG, dtype=np.int64)
    dev_n = np.zeros(max(ndev, 1), dtype=np.int64)
    h_lo, h_hi = _hist_range(trace)
    edges = np.unique(np.linspace(h_lo, h_hi, HIST_BINS + 1).astype(np.int64))
    counts = np.zeros(len(edges) - 1, dtype=np.int64)
    cand = np.asarray(trace.derived.get("launch_candidates", np.zeros(0, np.int64)), dtype=np.int64)
    nstr = int(trace.strings.ids.max()) + 2 if len(trace.strings) else 1
    nproc = max(len(trace.processes), 1)
    first_launch = np.full(nproc * nstr, POS, dtype=np.int64) if len(cand) else None
    cand_keys: set[int] = set()
    cand_with_kernels = np.zeros(len(cand), dtype=bool)
    n_ops = 0
    lo_all, hi_all = POS, NEG
    for kind, name in GPU_KINDS:
        t = trace.store.get(name)
        if t is None or not len(t):
            continue
        cols = ["start_ns", "end_ns", "device", "proc", "api", "api_start_ns"] + (["name_id"] if kind == KIND_KERNEL else [])
        for b in t.iter_blocks(cols):
            s, e = b["start_ns"], b["end_ns"]
            n_ops += len(s)
            lo_all, hi_all = min(lo_all, int(s.min())), max(hi_all, int(e.max()))
            dev, proc = b["device"].astype(np.int64), b["proc"]
            np.minimum.at(dev_min, dev, s)
            ne = e > s  # the last end of a device's non-empty operations: where it last went idle
            np.maximum.at(dev_max, dev[ne], e[ne])
            dev_n += np.bincount(dev, minlength=len(dev_n))[:len(dev_n)]
            pos = np.searchsorted(edges, s, side="right") - 1
            counts += np.bincount(np.clip(pos, 0, len(counts) - 1), minlength=len(counts))
            has_api = b["api"] >= 0
            when = np.where(has_api, b["api_start_ns"], s)
            if builder.has:
                builder.add_ops(proc, when, e)
                k = assign_ops_to_steps(builder.steps, proc, when)
                ok = np.flatnonzero(k >= 0)
                if len(ok):
                    kk, dd = k[ok], dev[ok]
                    np.add.at(st_n, (kk, dd), 1)
                    np.add.at(st_d, (kk, dd), (e - s)[ok])
                    np.minimum.at(st_f, (kk, dd), s[ok])
            if kind == KIND_KERNEL and first_launch is not None:
                ka = np.flatnonzero(has_api)
                key = proc[ka].astype(np.int64) * nstr + np.clip(b["name_id"][ka], 0, nstr - 1)
                np.minimum.at(first_launch, key, b["api_start_ns"][ka])
                mine = in_sorted(cand, b["api"][ka].astype(np.int64))
                if mine.any():
                    cand_keys.update(np.unique(key[mine]).tolist())
                    cand_with_kernels[np.searchsorted(cand, b["api"][ka][mine])] = True
    steps = builder.finish(lo_all if n_ops else None, hi_all if n_ops else None)
    span = (lo_all, hi_all) if n_ops else (None, None)
    # each step's device: most operations; ties: most GPU time, then the lower device index
    step_dev = np.full(nsteps, -1, dtype=np.int64)
    step_first = np.full(nsteps, -1, dtype=np.int64)
    if nsteps and ndev:
        any_op = st_n.sum(axis=1) > 0
        best = np.lexsort((np.arange(st_n.shape[1])[None, :].repeat(nsteps, 0), -st_d, -st_n), axis=1)[:, 0] \
            if st_n.shape[1] > 1 else np.zeros(nsteps, dtype=np.int64)
        step_dev = np.where(any_op, best, -1)
        step_first = np.where(any_op, st_f[np.arange(nsteps), np.maximum(step_dev, 0)], -1)
    setup_launch = _setup_launches(trace, cand, cand_with_kernels, cand_keys, first_launch, nstr)
    plan = Plan(ndev=ndev, steps=steps, step_dev=step_dev, step_first=step_first, span=span,
                dev_min_start=dev_min[:ndev], dev_max_end=dev_max[:ndev], dev_ops=dev_n[:ndev], op_count=n_ops,
                loader_ranges=nv["loader"], setup_ranges=nv["setup"], setup_texts=nv["setup_texts"],
                tuning=nv["tuning"], setup_launch=setup_launch, bounds=np.zeros(0, np.int64),
                hist_edges=edges, hist_counts=counts)
    plan.bounds = _bounds(trace, edges, counts)
    plan.timelines = timeline_windows(trace, plan, *plan.window)
    return plan


def _setup_launches(trace, cand: np.ndarray, with_kernels: np.ndarray, keys: set[int], first: np.ndarray | None,
                    nstr: int) -> np.ndarray:
    """Launch calls that are set-up work (``nsysdoc.metrics.host.setup_launch_mask``): candidates
    (kernel launches of 1 ms or more) that launched no known kernel, or that are the first launch
    (earliest call start; ties: the kernel row first in the table) of one of their kernels."""
    if not len(cand):
        return np.zeros(0, np.int64)
    out = set(cand[~with_kernels].tolist())
    if keys and first is not None:
        klist = np.array(sorted(keys), dtype=np.int64)
        best_row = np.full(len(klist), POS, dtype=np.int64)
        best_api = np.full(len(klist), -1, dtype=np.int64)
        t = trace.store["kernels"]
        for b in t.iter_blocks(["proc", "name_id", "api", "api_start_ns", "pos"]):
            ka = np.flatnonzero(b["api"] >= 0)
            key = b["proc"][ka].astype(np.int64) * nstr + np.clip(b["name_id"][ka], 0, nstr - 1)
            rel = in_sorted(klist, key)
            if not rel.any():
                continue
            ka, key = ka[rel], key[rel]
            at_min = b["api_start_ns"][ka] == first[key]
            ka, key = ka[at_min], key[at_min]
            j = np.searchsorted(klist, key)
            rows = b["pos"][ka]
            for jj, r, a in zip(j.tolist(), rows.tolist(), b["api"][ka].tolist()):
                if r < best_row[jj]:
                    best_row[jj], best_api[jj] = r, a
        firsts = best_api[best_api >= 0]
        out |= set(firsts[in_sorted(cand, firsts)].tolist())
    return np.array(sorted(out), dtype=np.int64)


def _bounds(trace, edges: np.ndarray, gpu_counts: np.ndarray) -> np.ndarray:
    """Interior slice boundaries: bin edges where the running count of rows (GPU operations
    exactly; CUDA API and OS runtime rows spread evenly over their blocks) crosses a multiple of
    the slice size."""
    target = slice_rows()
    w = gpu_counts.astype(np.float64).copy()
    for name in ("runtime", "osrt"):
        t = trace.store.get(name)
        if t is None:
            continue
        for b in t.blocks:
            a = max(0, int(np.searchsorted(edges, b.start_min, side="right")) - 1)
            z = max(a, min(len(w) - 1, int(np.searchsorted(edges, b.start_max, side="right")) - 1))
            w[a:z + 1] += b.n / (z - a + 1)
    total = w.sum()
    if total <= target:
        return np.zeros(0, np.int64)
    cum = np.cumsum(w)
    k = np.floor(cum / target).astype(np.int64)
    cut = np.flatnonzero(k[1:] > k[:-1]) + 1  # bin i starts a new slice
    return np.unique(edges[cut]).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# timeline windows
# ---------------------------------------------------------------------------------------------
def timeline_windows(trace, plan: Plan, w0, w1) -> dict:
    """The windows the report's timeline may show: the median and worst step, or without step
    markers the :data:`NO_STEP_OPS` operations around the middle of ``[w0, w1)``."""
    out: dict = {}
    if w0 is None or w1 is None or w1 <= w0:
        return out
    if plan.steps.has_markers:
        for name, worst in (("median", False), ("worst", True)):
            st = pick_step(plan.steps.table, worst=worst)
            if st is not None:
                out[name] = (st["start_ns"], max(st["end_ns"], st["start_ns"] + 1), st["global_tid"], st)
        return out
    a, b = middle_window(trace, plan, w0, w1)
    out["middle"] = (a, b, None, None)
    return out


def _starts_between(trace, lo: int, hi: int) -> np.ndarray:
    parts = []
    for _kind, name in GPU_KINDS:
        t = trace.store.get(name)
        if t is not None and len(t):
            parts.append(t.rows_starting_in(lo, hi, ["start_ns"])["start_ns"])
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def _count_in(trace, plan: Plan, lo: int, hi: int) -> tuple[int, np.ndarray]:
    """Operations starting in ``[lo, hi)``: the count, and the histogram counts clipped to it."""
    e, c = plan.hist_edges, plan.hist_counts.copy()
    a = int(np.searchsorted(e, lo, side="right")) - 1
    z = int(np.searchsorted(e, hi, side="right")) - 1
    c[:max(a, 0)] = 0
    c[min(len(c), z + 1):] = 0
    # the bins cut by lo and hi: exact counts
    for i in {a, z}:
        if 0 <= i < len(c):
            lo_i, hi_i = max(int(e[i]), lo), min(int(e[i + 1]), hi)
            c[i] = len(_starts_between(trace, lo_i, hi_i)) if hi_i > lo_i else 0
    return int(c.sum()), c


def _rank_values(trace, plan: Plan, counts: np.ndarray, ranks: list[int], lo: int, hi: int) -> list[int]:
    """The operation starts of the given ranks (0-based, sorted order) among those in ``[lo, hi)``."""
    cum = np.cumsum(counts)
    e = plan.hist_edges
    out = []
    for r in ranks:
        i = int(np.searchsorted(cum, r, side="right"))
        before = int(cum[i - 1]) if i > 0 else 0
        vals = _starts_between(trace, max(int(e[i]), lo), min(int(e[i + 1]), hi))
        out.append(int(vals[r - before]))
    return out


def middle_window(trace, plan: Plan, w0: int, w1: int) -> tuple[int, int]:
    """``nsysdoc.metrics.timeline.default_window`` without holding the operation starts: exact
    ranks from the start histogram and reads of the one or two bins holding them."""
    n, counts = _count_in(trace, plan, w0, w1)
    if n <= NO_STEP_OPS:
        return int(w0), int(w1)
    mid = n // 2
    lo = max(0, mid - NO_STEP_OPS // 2)
    hi = min(n - 1, lo + NO_STEP_OPS)
    a, b = _rank_values(trace, plan, counts, [lo, hi], w0, w1)
    if b <= a:  # many operations starting at one instant
        b = _max_end_starting_in(trace, w0, w1)
    return a, b


def _max_end_starting_in(trace, lo: int, hi: int) -> int:
    best = NEG
    for _kind, name in GPU_KINDS:
        t = trace.store.get(name)
        if t is None:
            continue
        for i in t.blocks_where(start_lo=lo, start_hi=hi):
            d = t.read_block(i, ["start_ns", "end_ns"])
            m = (d["start_ns"] >= lo) & (d["start_ns"] < hi)
            if m.any():
                best = max(best, int(d["end_ns"][m].max()))
    return best


__all__ = ["Plan", "make_plan", "middle_window", "slice_rows", "timeline_windows"]
