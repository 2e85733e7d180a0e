"""The planning passes: what the slices need to know before the first one runs.

One pass over the NVTX table: step markers (outermost ranges whose whole text matches the step
pattern, library domains excluded), DataLoader ranges and compile/autotune/warm-up ranges. With
step markers, one pass over the GPU tables' time and launch columns: step ends (a primary step
lasts until the GPU work launched in it ends), each step's device (most operations, then most GPU
time) and its first operation. Without them nothing more is read: the GPU span comes from the
blocks' bounds. Then the slice boundaries (from the blocks' row counts and bounds) and the
timeline windows (median and worst step, or the operations around the middle of the window, found
by exact rank selection over the blocks) are fixed. Which launch calls are set-up work was found
while loading (``trace.derived["setup_launch"]``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..metrics import intervals as iv
from ..metrics.steps import Steps, StepBuilder, job_indices, outermost_ranges
from ..metrics.timeline import NO_STEP_OPS, pick_step
from ..trace import schema as S
from ..trace.columns import Columns
from ..trace.tables import unique_ints
from ..trace.nvtx_text import FLAG_DECORATED, FLAG_STACK
from ..trace.rows import SLICE_ROWS, env_rows, slice_rows  # the readers size their blocks by a slice
from .attribute import build as build_attributor
from .attribute_sliced import Collector, use_sliced
from .data import GPU_KINDS, NEG, POS
from .infer import infer_steps

#: Slices a capture is cut into at least, and their smallest size (rows), unless
#: ``NSYSDOC_SLICE_ROWS`` is set: with 4 slices of 1 M rows (a 2 M-kernel capture) the first
#: slice's reading is not overlapped and the second core waits on the last; 8 of 0.5 M measured
#: 5-15% quicker warm and 0.1-0.17 GB smaller (2026-12-05, steps-ops, steps, launch-bound shapes).
SLICES_MIN = 8
MIN_SLICE_ROWS = 250_000
#: Bins of the start-time histogram the slice boundaries are cut from.
HIST_BINS = 1 << 15


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
    #: (filled by the slices)
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
    #: timeline windows to capture while the slices run: name -> (start, end, host global_tid, step)
    timelines: dict = field(default_factory=dict)
    #: operator / module / frame attribution (:mod:`nsysdoc.engine.attribute`), None without ranges
    attr: object = None
    #: set-up phase ranges (start, end, folded text: ``schema.PHASE_NVTX``) and the first kernel's
    #: start, for the steady-state window's phase framing
    phase_ranges: tuple = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, dtype=object))
    #: ranges around the measured loop (start, end, folded text: ``schema.LOOP_NVTX``)
    loop_ranges: tuple = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, dtype=object))
    first_kernel_ns: int | None = None
    #: thread indices (into ``trace.threads``) of the calls that launched GPU operations, found with
    #: the step markers' devices (empty without markers): a step's host sync is the time one of
    #: them, or a step thread, was blocked in a sync
    launch_threads: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def window(self) -> tuple[int | None, int | None]:
        return self.steps.window_start_ns, self.steps.window_end_ns

    def slices(self) -> list[tuple[int, int]]:
        edges = [NEG, *self.bounds.tolist(), POS]
        return list(zip(edges[:-1], edges[1:]))


def _nvtx_scan(trace, pattern, auto: bool = True) -> dict:
    """Step-marker rows, DataLoader ranges and set-up ranges, from one pass over the NVTX blocks.
    The text tests run once per text group (:mod:`nsysdoc.trace.nvtx_text`: texts that differ
    only in PyTorch's per-call fields, which hold no DataLoader or set-up word; a step marker is
    matched on the text before them): with --pytorch=autograd-nvtx every range's text is
    distinct, millions of them, and none is read here."""
    t = trace.store.get("nvtx")
    doms = trace.nvtx_domains
    lib = np.array([str(d).lower() in S.LIBRARY_NVTX_DOMAINS for d in doms], dtype=bool) if len(doms) \
        else np.zeros(1, dtype=bool)
    # the PyTorch Profiler's operators and Python frames (domains "cpu_op", "python_function") are
    # no user annotation: never a step-like, set-up phase or loop range
    ops_dom = np.array([str(d) in S.KINETO_OP_DOMAINS for d in doms], dtype=bool) if len(doms) \
        else np.zeros(1, dtype=bool)
    gtexts = trace.nvtx_groups
    g_step = np.array([pattern.fullmatch(v.strip()) is not None for v in gtexts], dtype=bool)
    # step-like ranges the pattern does not match ("Warm-up Step 3", "train_step"): steps when
    # nothing matches the default pattern (make_plan); never set-up, whatever their text says
    g_auto = np.array([S.is_step_like(v) for v in gtexts], dtype=bool) & ~g_step if auto else \
        np.zeros(len(gtexts), dtype=bool)
    g_dl = np.array([S.DATALOADER_NVTX.search(v) is not None for v in gtexts], dtype=bool)
    g_set = np.array([S.SETUP_NVTX.search(v) is not None for v in gtexts], dtype=bool)
    g_phase = np.array([S.PHASE_NVTX.search(v) is not None and "::" not in v for v in gtexts], dtype=bool) \
        & ~g_step & ~g_auto
    g_loop = np.array([S.LOOP_NVTX.search(v) is not None and "::" not in v for v in gtexts], dtype=bool) \
        & ~g_step & ~g_auto & ~g_phase
    folded_of: dict = {}

    def fold(g: int) -> str:  # once per text group
        if g not in folded_of:
            folded_of[g] = S.fold_nvtx_text(gtexts[g])
        return folded_of[g]
    steps, auto_steps, loader, setup, tune, host, phase, loop = [], [], [], [], [], [], [], []
    dom_names = [str(d) for d in doms] if len(doms) else [""]
    # many ranges: attribution reads them per slice; this pass keeps only what is global
    collector = Collector(trace, g_step, lib, len(doms) > 0) if t is not None and use_sliced(trace) else None
    cols = ["start_ns", "end_ns", "event_type", "thread", "global_tid", "domain", "text_group", "call_flags", "seq"]
    if collector is None:  # the whole-capture attributor keeps each range's row (engine.shapes)
        cols.append("pos")
    for bi, blk in enumerate(t.iter_blocks(cols, ahead=True) if t is not None else ()):
        s, e = blk["start_ns"], blk["end_ns"]
        is_range = np.isin(blk["event_type"], S.NVTX_RANGE_TYPES) & (e >= s)
        if not is_range.any():
            continue
        grp = blk["text_group"].astype(np.int64)
        flags = blk["call_flags"]
        decorated = (flags & FLAG_DECORATED) != 0
        m_step, m_dl, m_auto = g_step[grp], g_dl[grp], g_auto[grp]
        m_set = g_set[grp] & ~m_step & ~m_auto
        dom = blk["domain"]
        lib_row = lib[dom] if len(doms) else np.zeros(len(s), dtype=bool)
        user_row = ~lib_row & ~(ops_dom[dom] if len(doms) else np.zeros(len(s), dtype=bool))

        block_text: list = []

        def texts(rows, bi=bi, block_text=block_text):
            # the rows' own texts (a decorated text is more than its group's): few rows, the
            # block's text column read once
            if not block_text:
                block_text.append(t.read_block(bi, ["text"])["text"])
            return block_text[0].take(rows).to_pylist()

        sel = np.flatnonzero(is_range & ~lib_row & m_step)
        if len(sel):
            # a step marker's name: its group text (a text with per-call fields: stripped)
            steps.append({"global_tid": blk["global_tid"][sel].astype(np.int64),
                          "name": np.array([gtexts[g].strip() if d else gtexts[g]
                                            for g, d in zip(grp[sel].tolist(), decorated[sel].tolist())], dtype=object),
                          "start_ns": s[sel].astype(np.int64), "range_end_ns": e[sel].astype(np.int64)})
        sel = np.flatnonzero(is_range & user_row & m_auto)
        if len(sel):
            auto_steps.append({"global_tid": blk["global_tid"][sel].astype(np.int64),
                               "name": np.array([gtexts[g].strip() for g in grp[sel].tolist()], dtype=object),
                               "start_ns": s[sel].astype(np.int64), "range_end_ns": e[sel].astype(np.int64)})
        # host ranges for attribution: push/pop ranges (nested per thread) that are not step markers
        # (library domains -- NCCL, cuDNN, cuBLAS... -- are neither operators nor modules)
        sel = np.flatnonzero(is_range & np.isin(blk["event_type"], S.NVTX_PUSHPOP_TYPES) & ~m_step & ~lib_row)
        if len(sel):
            st_rows = np.flatnonzero((flags[sel] & FLAG_STACK) != 0)
            stacks = dict(zip(st_rows.tolist(), texts(sel[st_rows]))) if len(st_rows) else {}
            if collector is not None:
                collector.add(blk["thread"][sel], s[sel], e[sel], grp[sel], blk["seq"][sel], flags[sel], stacks)
            else:
                host.append((blk["thread"][sel], s[sel], e[sel], grp[sel], blk["seq"][sel], flags[sel],
                         np.minimum(dom[sel], len(dom_names) - 1) if len(doms) else np.zeros(len(sel), np.int64),
                         dom_names, stacks, blk["pos"][sel]))
        sel = np.flatnonzero(is_range & m_dl)
        if len(sel):
            loader.append((blk["thread"][sel], s[sel], e[sel]))
        sel = np.flatnonzero(is_range & user_row & g_phase[grp])
        if len(sel):
            phase.append((s[sel].astype(np.int64), e[sel].astype(np.int64),
                          np.array([fold(g) for g in grp[sel].tolist()], dtype=object)))
        sel = np.flatnonzero(is_range & user_row & g_loop[grp])
        if len(sel):
            loop.append((s[sel].astype(np.int64), e[sel].astype(np.int64),
                         np.array([fold(g) for g in grp[sel].tolist()], dtype=object)))
        sel = np.flatnonzero(is_range & m_set)
        if len(sel):
            tune.append((blk["thread"][sel], s[sel], e[sel]))
        sel = np.flatnonzero(is_range & m_set & ~m_dl)
        if len(sel):
            folded = [S.fold_nvtx_text(gtexts[g]) for g in grp[sel].tolist()]
            own = np.flatnonzero(decorated[sel])
            for i, v in zip(own.tolist(), texts(sel[own]) if len(own) else ()):
                folded[i] = S.fold_nvtx_text(v)
            setup.append((blk["thread"][sel], s[sel], e[sel], np.array(folded, dtype=object)))
    cat = lambda parts, k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, np.int64)  # noqa: E731
    empty = {"global_tid": np.zeros(0, np.int64), "name": np.zeros(0, object), "start_ns": np.zeros(0, np.int64),
             "range_end_ns": np.zeros(0, np.int64)}
    ranges = Columns({k: np.concatenate([p[k] for p in steps]) for k in steps[0]}) if steps else Columns(empty)
    auto_ranges = Columns({k: np.concatenate([p[k] for p in auto_steps]) for k in auto_steps[0]}) if auto_steps \
        else Columns(empty)
    tuning = None
    if tune:
        tuning = iv.union(cat(tune, 0), cat(tune, 1), cat(tune, 2))
    return {"ranges": outermost_ranges(ranges), "auto_ranges": auto_ranges,
            "loader": tuple(cat(loader, i) for i in range(3)),
            "setup": tuple(cat(setup, i) for i in range(3)),
            "setup_texts": np.concatenate([p[3] for p in setup]) if setup else np.zeros(0, dtype=object),
            "tuning": tuning, "host": host, "collector": collector,
            "phase": _once(cat(phase, 0), cat(phase, 1),
                           np.concatenate([p[2] for p in phase]) if phase else np.zeros(0, dtype=object)),
            "loop": _once(cat(loop, 0), cat(loop, 1),
                          np.concatenate([p[2] for p in loop]) if loop else np.zeros(0, dtype=object))}


def _once(start: np.ndarray, end: np.ndarray, text: np.ndarray) -> tuple:
    """The ranges whose (folded) name occurs once: a phase or a loop around the run happens once;
    a name that recurs is per iteration (prepare_inputs, train_forward_backward)."""
    if not len(text):
        return start, end, text
    names, inv, count = np.unique(text.astype(str), return_inverse=True, return_counts=True)
    keep = count[inv] == 1
    return start[keep], end[keep], text[keep]


def _gpu_tables(trace) -> list:
    out = []
    for _kind, name in GPU_KINDS:
        t = trace.store.get(name)
        if t is not None and len(t):
            t.offsets  # noqa: B018 - builds the block stat arrays
            out.append(t)
    return out


def _step_devices(builder: StepBuilder, tables: list, ndev: int, nsteps: int, nproc: int = 0,
                  launchers: list | None = None) -> tuple:
    """One pass over the GPU tables: the steps are extended to the end of the GPU work launched in
    them, and each step's device (most operations, then most GPU time; a step that launched
    nothing: its process's device) and first operation's start. Returns ``(step_dev, step_first,
    held, span, total)`` as ``(summed time ns, operation count)`` pairs: ``held`` the GPU work
    launched inside the primary steps, ``span`` the GPU work of each marked process launched from
    its first step's start to its last step's range end, ``total`` all GPU work. With a list
    ``launchers``, the thread indices of the launching calls are appended to it (per block)."""
    step_dev = np.full(nsteps, -1, dtype=np.int64)
    step_first = np.full(nsteps, -1, dtype=np.int64)
    # step markers: steps last until the GPU work launched in them ends, and each has a device
    st_n = np.zeros((nsteps, max(ndev, 1)), dtype=np.int64)
    st_d = np.zeros((nsteps, max(ndev, 1)), dtype=np.int64)
    st_f = np.full((nsteps, max(ndev, 1)), POS, dtype=np.int64)
    span_ns = span_n = total_ns = total_n = 0
    # each marked process's span of steps (first start, last range end), by process index
    npr = max(nproc, max(builder.by_proc, default=-1) + 1, 1)
    lo = np.full(npr, POS, dtype=np.int64)
    hi = np.full(npr, NEG, dtype=np.int64)
    for p, (_rows, ss, ee) in builder.by_proc.items():
        lo[p], hi[p] = int(ss.min()), int(ee.max())
    proc_dev = np.zeros((npr, max(ndev, 1)), dtype=np.int64)
    for t in tables:
        cols = ["start_ns", "end_ns", "device", "proc", "api", "api_start_ns"]
        for b in t.iter_blocks(cols + (["api_thread"] if launchers is not None else []), ahead=True):
            s, e = b["start_ns"], b["end_ns"]
            if launchers is not None and len(s):
                # thread indices (-1: unknown): shifted to ids >= 0, marked, not sorted
                launchers.append(unique_ints(np.asarray(b["api_thread"], dtype=np.int64) + 1) - 1
                                 if int(b["api_thread"].min()) >= -1 else np.unique(np.asarray(b["api_thread"], dtype=np.int64)))
            dev, proc = b["device"].astype(np.int64), b["proc"].astype(np.int64)
            when = np.where(b["api"] >= 0, b["api_start_ns"], s)
            k = builder.add_ops(proc, when, e, s)
            dur = e - s
            total_ns += int(dur.sum())
            total_n += len(s)
            pc = np.clip(proc, 0, npr - 1)
            inside = (proc >= 0) & (proc < npr) & (when >= lo[pc]) & (when < hi[pc])
            span_ns += int(dur[inside].sum())
            span_n += int(inside.sum())
            okp = (proc >= 0) & (proc < npr)
            if ndev and okp.any():
                cells = proc[okp] * proc_dev.shape[1] + np.clip(dev[okp], 0, proc_dev.shape[1] - 1)
                proc_dev.reshape(-1)[:] += np.bincount(cells, minlength=proc_dev.size)[:proc_dev.size]
            ok = np.flatnonzero(k >= 0)
            if len(ok):
                # one flat index into the (step, device) tables: ufunc.at with a pair of index
                # arrays is 6x slower than with one
                cell = k[ok] * st_n.shape[1] + dev[ok]
                np.add.at(st_n.reshape(-1), cell, 1)
                np.add.at(st_d.reshape(-1), cell, dur[ok])
                np.minimum.at(st_f.reshape(-1), cell, s[ok])
    if ndev:
        # each step's device: most operations; ties: most GPU time, then the lower device index
        any_op = st_n.sum(axis=1) > 0
        best = np.lexsort((np.arange(st_n.shape[1])[None, :].repeat(nsteps, 0), -st_d, -st_n), axis=1)[:, 0] \
            if st_n.shape[1] > 1 else np.zeros(nsteps, dtype=np.int64)
        step_dev = np.where(any_op, best, -1)
        step_first = np.where(any_op, st_f[np.arange(nsteps), np.maximum(step_dev, 0)], -1)
        # a primary step that launched nothing is still a step of its process: its time is read
        # on the process's device (all idle), so every primary step has a breakdown
        if builder.has:
            sp = np.asarray(builder.df["proc"], dtype=np.int64)
            prim = np.asarray(builder.df["primary"], dtype=bool)
            has_dev = (sp >= 0) & (sp < npr)
            pdev = np.where(has_dev, proc_dev[np.clip(sp, 0, npr - 1)].argmax(axis=1), -1)
            pany = np.where(has_dev, proc_dev[np.clip(sp, 0, npr - 1)].sum(axis=1) > 0, False)
            fill = ~any_op & prim & pany
            step_dev = np.where(fill, pdev, step_dev)
    return step_dev, step_first, (int(st_d.sum()), int(st_n.sum())), (span_ns, span_n), (total_ns, total_n)


#: Step markers are trusted only when the GPU work launched inside them is at least this share of
#: GPU work of the processes that have them (summed operation time; operation count when every operation is empty).
MARKER_MIN_GPU_SHARE = 0.5
#: Step threads tried before markers are set aside: when a thread's markers hold too little of the
#: GPU work, the next thread with markers (in each process, the one with the most) is tried.
MARKER_THREAD_TRIES = 3


def _markers(nv: dict) -> tuple[Columns, str]:
    """The step ranges to use and how they were found: the ranges matching the step pattern
    ("pattern"), else step-like ranges that repeat on their thread ("name": glossary "Step-like
    ranges"): per thread, of the names (numbers folded) seen twice or more, the one whose ranges
    last longest in all, its outermost ranges; else none."""
    if len(nv["ranges"]):
        return nv["ranges"], "pattern"
    auto = nv.get("auto_ranges")
    if auto is None or not len(auto):
        return nv["ranges"], "pattern"
    gtid = np.asarray(auto["global_tid"], dtype=np.int64)
    names = np.array([S.fold_nvtx_text(str(x)) for x in np.asarray(auto["name"], dtype=object)], dtype=object)
    dur = np.asarray(auto["range_end_ns"], dtype=np.int64) - np.asarray(auto["start_ns"], dtype=np.int64)
    keep = np.zeros(len(gtid), dtype=bool)
    for th in np.unique(gtid).tolist():
        on = gtid == th
        fam, inv, count = np.unique(names[on].astype(str), return_inverse=True, return_counts=True)
        total = np.bincount(inv, weights=dur[on].astype(np.float64))
        total[count < 2] = -1  # a step repeats
        if total.max() < 0:
            continue
        best = int(np.argmax(total))
        idx = np.flatnonzero(on)
        keep[idx[inv == best]] = True
    return outermost_ranges(auto.take(keep)), "name"


def _share(held: tuple, span: tuple, total: tuple) -> float | None:
    """The share of the marked processes' GPU work launched from their first step's start to their
    last step's end that the steps hold (time; count when every operation is empty); 0 when there is
    GPU work but none there; None without GPU work."""
    if span[0] > 0:
        return held[0] / span[0]
    if span[1] > 0:
        return held[1] / span[1]
    return 0.0 if total[1] > 0 else None


def make_plan(trace, pattern) -> Plan:
    nv = _nvtx_scan(trace, pattern, auto=pattern.pattern == S.DEFAULT_STEP_PATTERN)
    ndev = len(trace.devices)
    pkeys = np.asarray(trace.processes["global_pid"], dtype=np.int64)
    marker_ranges, found_by = _markers(nv)
    explicit = pattern.pattern != S.DEFAULT_STEP_PATTERN
    tables = _gpu_tables(trace)
    n_ops = sum(len(t) for t in tables)
    lo_all = min((int(t._smin.min()) for t in tables), default=None)
    hi_all = max((int(t._emax.max()) for t in tables), default=None)
    dev_min = np.full(max(ndev, 1), POS, dtype=np.int64)
    dev_max = np.full(max(ndev, 1), NEG, dtype=np.int64)
    dev_n = np.zeros(max(ndev, 1), dtype=np.int64)
    nproc = len(trace.processes)
    set_aside = low_share = None
    candidates = marker_ranges
    for _attempt in range(MARKER_THREAD_TRIES):
        builder = StepBuilder(candidates, pkeys)
        if not builder.has:
            break
        nsteps = len(builder.df)
        launchers: list = []
        step_dev, step_first, held, span, total = _step_devices(builder, tables, ndev, nsteps, nproc, launchers)
        share = _share(held, span, total)
        if share is None or share >= MARKER_MIN_GPU_SHARE:
            break
        prim = np.asarray(builder.df["primary"], dtype=bool)
        info = {"count": int(prim.sum()), "found_by": found_by, "gpu_work_pct": round(share * 100, 1),
                "names": sorted({S.fold_nvtx_text(str(x)) for x in np.asarray(builder.df["name"], dtype=object)[prim]})[:3],
                "duration_ms": round(float(np.sum(np.asarray(builder.df["range_end_ns"])[prim]
                                                  - np.asarray(builder.df["start_ns"])[prim])) / 1e6, 4)}
        if explicit:
            # the user's --step-marker is used as given: the low share is said, not acted on
            low_share = info
            break
        set_aside = set_aside or info
        # markers that hold too little of the GPU work frame nothing: another thread's may
        # (a worker thread's ranges outnumbering the main thread's); else set aside
        threads = np.unique(np.asarray(builder.df["global_tid"], dtype=np.int64)[prim])
        rest = ~np.isin(np.asarray(candidates["global_tid"], dtype=np.int64), threads)
        candidates = candidates.take(rest)
        builder = StepBuilder(candidates.take(np.zeros(len(candidates), dtype=bool)), pkeys)
        if not len(candidates):
            break
    else:
        builder = StepBuilder(candidates.take(np.zeros(len(candidates), dtype=bool)), pkeys)
    if builder.has:
        set_aside = None  # another thread's markers frame the work
    else:
        nsteps = 0
        step_dev = np.full(0, -1, dtype=np.int64)
        step_first = np.full(0, -1, dtype=np.int64)
    inferred = not_inferred = None
    if not builder.has and tables:
        # no step markers: steps from the repeating GPU work, when it repeats in units that tile
        # it (engine/infer.py); else why not
        ranges, inferred = infer_steps(trace, tables)
        if ranges is None:
            inferred, not_inferred = None, inferred
        else:
            builder = StepBuilder(outermost_ranges(ranges), pkeys)
            nsteps = len(builder.df) if builder.has else 0
            step_dev, step_first, *_shares = _step_devices(builder, tables, ndev, nsteps, nproc)
    steps = builder.finish(lo_all, hi_all)
    steps.source = "markers" if steps.has_markers and inferred is None else ("inferred" if inferred else None)
    steps.inferred = inferred
    steps.found_by = found_by if steps.source == "markers" else None
    steps.set_aside = set_aside
    steps.low_share = low_share if steps.source == "markers" else None
    steps.not_inferred = (not_inferred or {}).get("rejected") or None
    if inferred:
        # inferred steps are an estimate laid over the capture: the window stays the one without
        # markers (the GPU span, trimmed to its steady state by the run; steps outside it are then
        # not counted), so no window number moves
        steps.window_start_ns, steps.window_end_ns = lo_all, hi_all
        _inside_span(steps, lo_all, hi_all)
    if len(steps.table):
        steps.table = steps.table.assign(job_index=job_indices(steps.table, steps.source == "inferred"))
    span = (lo_all, hi_all) if n_ops else (None, None)
    plan = Plan(ndev=ndev, steps=steps, step_dev=step_dev, step_first=step_first, span=span,
                dev_min_start=dev_min[:ndev], dev_max_end=dev_max[:ndev], dev_ops=dev_n[:ndev], op_count=n_ops,
                loader_ranges=nv["loader"], setup_ranges=nv["setup"], setup_texts=nv["setup_texts"],
                tuning=nv["tuning"],
                setup_launch=np.asarray(trace.derived.get("setup_launch", np.zeros(0, np.int64)), dtype=np.int64),
                bounds=_bounds(trace))
    plan.phase_ranges = nv["phase"]
    plan.loop_ranges = nv["loop"]
    if steps.source == "markers" and builder.has and launchers:
        lt = np.unique(np.concatenate(launchers))
        plan.launch_threads = lt[lt >= 0]
    kt = next((t for t in tables if t.name == "kernels"), None)
    plan.first_kernel_ns = int(kt._smin.min()) if kt is not None and len(kt) else None
    plan.timelines = timeline_windows(trace, plan, *plan.window)
    # its blocks are freed as it reads them
    plan.attr = build_attributor(trace, nv.pop("host"), nv.pop("collector"), plan.bounds)
    _first_call_setup(trace, plan)
    return plan


def _inside_span(steps: Steps, lo: int | None, hi: int | None = None) -> None:
    """An inferred step's time starts no earlier than the first GPU operation (the window without
    markers starts there; a first unit's launch call comes a few microseconds before): its
    ``start_ns`` is moved there, while its operations still count from its launch call
    (``launch_start_ns``, read by :func:`nsysdoc.metrics.steps.assign_ops_to_steps`)."""
    st = steps.table
    if lo is None or not len(st):
        return
    s0 = np.asarray(st["start_ns"], dtype=np.int64)
    s1 = np.maximum(s0, lo)
    e0 = np.asarray(st["end_ns"], dtype=np.int64)
    # and ends no later than the last GPU operation (a synchronous call's return comes after it)
    e1 = np.maximum(np.minimum(e0, hi), s1) if hi is not None else np.maximum(e0, s1)
    if (s1 != s0).any() or (e1 != e0).any():
        steps.table = st.assign(start_ns=s1, end_ns=e1, step_time_ns=e1 - s1)


#: An operator's first call is set-up when set-up launches cover at least this share of it.
FIRST_CALL_SETUP_SHARE = 0.5


def _first_call_setup(trace, plan: Plan) -> None:
    """The first call of an operator that is mostly set-up launches (lazy module loading, JIT) is
    set-up as a whole: the library it calls initialises itself (cuDNN's first convolution runs
    host code between its driver calls), so its host time with no CUDA call is set-up too, not the
    program's host work. Added to ``plan.setup_ranges`` as "first call of NAME". Only the
    innermost operator range around a set-up launch counts, only on its thread's first call of
    that operator, and only when the set-up launches inside cover ``FIRST_CALL_SETUP_SHARE`` of it."""
    attr, pos = plan.attr, plan.setup_launch
    rt = trace.store.get("runtime")
    if attr is None or attr.source is None or not len(pos) or rt is None or rt.bucketed:
        return
    rows = rt.gather(pos, ["start_ns", "end_ns", "thread"])
    th, s, e = rows["thread"].astype(np.int64), rows["start_ns"].astype(np.int64), rows["end_ns"].astype(np.int64)
    got = attr.first_calls(th, s, e, FIRST_CALL_SETUP_SHARE)
    if got is None or not len(got[0]):
        return
    c_th, c_s, c_e, c_name = got
    texts = np.array([f"first call of {attr.names[int(n)]} (loads its kernels)" for n in c_name], dtype=object)
    t0, s0, e0 = plan.setup_ranges
    plan.setup_ranges = (np.concatenate([np.asarray(t0, np.int64), np.asarray(c_th, np.int64)]),
                         np.concatenate([np.asarray(s0, np.int64), c_s]),
                         np.concatenate([np.asarray(e0, np.int64), c_e]))
    plan.setup_texts = np.concatenate([plan.setup_texts, texts])


def _bounds(trace) -> np.ndarray:
    """Interior slice boundaries: where the running count of rows (GPU operations, CUDA API and
    OS runtime calls, each block's rows spread evenly over its start range) crosses half a share,
    then every share after it (a share: at most the slice size; the first and last slices are
    half a share). Boundaries only balance work: any choice gives the same numbers."""
    chosen = env_rows("NSYSDOC_SLICE_ROWS", 0)  # 0: not set
    target = chosen or SLICE_ROWS
    stats = []
    for name in ("kernels", "memcpy", "memset", "runtime", "osrt"):
        t = trace.store.get(name)
        if t is not None and t.blocks:
            t.offsets  # noqa: B018
            stats.append((t._smin, t._smax, np.array([b.n for b in t.blocks], dtype=np.float64)))
    if not stats:
        return np.zeros(0, np.int64)
    smin = np.concatenate([x[0] for x in stats])
    smax = np.concatenate([x[1] for x in stats])
    n = np.concatenate([x[2] for x in stats])
    if not chosen:
        # at least SLICES_MIN slices (of MIN_SLICE_ROWS rows at least): the next slice is read on
        # the second core while one runs, and the first one is read alone
        target = min(target, max(int(np.ceil(n.sum() / SLICES_MIN)), MIN_SLICE_ROWS))
    if n.sum() <= target:
        return np.zeros(0, np.int64)
    edges = np.unique(np.linspace(int(smin.min()), int(smax.max()) + 1, HIST_BINS + 1).astype(np.int64))
    w = np.zeros(len(edges) - 1)
    a = np.clip(np.searchsorted(edges, smin, side="right") - 1, 0, len(w) - 1)
    z = np.clip(np.searchsorted(edges, smax, side="right") - 1, 0, len(w) - 1)
    width = (z - a + 1).astype(np.float64)
    # spread each block's rows evenly over its bins: a difference array, then a running sum
    d = np.zeros(len(w) + 1)
    np.add.at(d, a, n / width)
    np.add.at(d, z + 1, -n / width)
    w = np.cumsum(d)[:-1]
    cum = np.cumsum(w)
    # m slices of at most ``target`` rows would do; the first and the last get half a slice each
    # (m + 1 equal shares, cut at the half-shares): the first is prepared with no slice to overlap
    # it and the last runs with the second core idle, so those two are the ones made short
    # (2 M steps-ops, warm: 4-7% quicker, 40 MB smaller, 2026-12-05)
    m = int(np.ceil(cum[-1] / target))
    share = cum[-1] / (m + 1)
    k = np.floor(cum / share + 0.5).astype(np.int64)
    cut = np.flatnonzero(k[1:] > k[:-1]) + 1  # bin i starts a new slice
    return np.unique(edges[cut]).astype(np.int64)


def count_starts(trace, lo: int, hi: int) -> int:
    """Operations with ``lo <= start < hi`` (blocks inside by their row count; the few blocks
    across ``lo`` or ``hi`` read)."""
    n = 0
    for t in _gpu_tables(trace):
        inside = (t._smin >= lo) & (t._smax < hi)
        n += int(sum(t.blocks[i].n for i in np.flatnonzero(inside)))
        part = np.flatnonzero(~inside & (t._smax >= lo) & (t._smin < hi))
        for i in part.tolist():
            st = t.read_block(i, ["start_ns"])["start_ns"]
            n += int(((st >= lo) & (st < hi)).sum())
    return n


def select_starts(trace, ranks: list[int], lo: int, hi: int) -> list[int]:
    """The operation starts of the given ranks (0-based, in sorted order) among those in
    ``[lo, hi)``: a binary search over the block edges with exact counts, then one sort of the
    starts between two neighbouring edges. Reads a few blocks, never a table."""
    tables = _gpu_tables(trace)
    edges = np.unique(np.concatenate([np.concatenate([t._smin, t._smax + 1]) for t in tables] + [[lo, hi]]))
    edges = edges[(edges >= lo) & (edges <= hi)]
    counts: dict[int, int] = {}

    def below(e: int) -> int:
        if e not in counts:
            counts[e] = count_starts(trace, lo, e)
        return counts[e]

    out = []
    for r in ranks:
        i, j = 0, len(edges) - 1  # below(edges[i]) <= r < below(edges[j])
        while j - i > 1:
            m = (i + j) // 2
            if below(int(edges[m])) <= r:
                i = m
            else:
                j = m
        a, b = int(edges[i]), int(edges[j])
        vals = []
        for t in tables:
            vals.append(t.rows_starting_in(a, b, ["start_ns"])["start_ns"])
        vals = np.sort(np.concatenate(vals))
        out.append(int(vals[r - below(a)]))
    return out


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


def middle_window(trace, plan: Plan, w0: int, w1: int) -> tuple[int, int]:
    """Without steps: the window spanning ``NO_STEP_OPS`` GPU operations around the middle of
    ``[w0, w1)`` (``nsysdoc.metrics.timeline``), without holding the operation starts: exact ranks
    selected over the blocks."""
    n = count_starts(trace, w0, w1)
    if n <= NO_STEP_OPS:
        return int(w0), int(w1)
    mid = n // 2
    lo = max(0, mid - NO_STEP_OPS // 2)
    hi = min(n - 1, lo + NO_STEP_OPS)
    a, b = select_starts(trace, [lo, hi], w0, w1)
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
