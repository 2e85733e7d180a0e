"""Training steps from NVTX markers, and the analysis window.

Definitions (also in ``docs/glossary.md``):

* A **step marker** is an NVTX push/pop or start/end range whose *whole* text matches the step
  pattern, case-insensitively, and whose domain is not a library's (NCCL, cuDNN, ...). A marker
  nested inside another marker on the same thread is ignored (the outermost counts).
* Steps belong to the thread that opened the range. In each process the thread with the most
  steps is the **step thread**; GPU work of that process is assigned to its steps.
* A GPU operation belongs to a step when the API call that launched it starts inside the step's
  NVTX range (any thread of the same process).
* Steps **partition** their thread's timeline: a step ends where the next step on the same thread
  starts (GPU work launched in it that runs later counts in the next step's time: no GPU time
  belongs to two steps); the thread's last step ends at the later of its range end and the end of
  the last GPU operation launched in any step of the thread.
* **Step time** = step end − step start (= start of the next step − start of this one, except
  for a thread's last step). The step breakdown splits exactly this interval.
* **Job step time** of a step index: the longest step time of that index over the processes'
  primary steps (a data-parallel step ends when its slowest rank does); the summary's step time,
  the diff and the job view use it (:func:`job_step_times`).
* **Analysis window**: from the first step start to the last step end over all step threads;
  without step markers, from the first GPU operation start to the last GPU operation end.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from ..trace import schema as S
from ..trace.columns import Columns


def compile_step_pattern(pattern: str | None):
    """The step marker as a case-insensitive RE2 pattern (linear time: :mod:`nsysdoc.safe_regex`)."""
    from .. import safe_regex

    text = pattern or S.DEFAULT_STEP_PATTERN
    try:
        return safe_regex.compile(text, ignore_case=True)
    except safe_regex.PatternError as exc:
        raise UsageError(f"--step-marker {text[:60]!r}: not a valid regular expression ({exc})") from None


def outermost_ranges(df: Columns) -> Columns:
    """Matching ranges (``global_tid, name, start_ns, range_end_ns``) without those nested in an
    earlier range of the same thread, ordered by thread, start and (longest first) end."""
    if len(df) == 0:
        return df
    tid = np.asarray(df["global_tid"], dtype=np.int64)
    s = np.asarray(df["start_ns"], dtype=np.int64)
    e = np.asarray(df["range_end_ns"], dtype=np.int64)
    order = np.lexsort((-e, s, tid))  # stable: by thread, start, then the longer range first
    df = df.take(order)
    tid, s, e = tid[order], s[order], e[order]
    # drop ranges nested in an earlier range of the same thread (running max of ends per thread)
    keep = np.ones(len(df), dtype=bool)
    run_end = np.iinfo(np.int64).min
    prev_tid = None
    tl, sl, el = tid.tolist(), s.tolist(), e.tolist()
    for i in range(len(tl)):  # step markers are few (thousands at most)
        if tl[i] != prev_tid:
            prev_tid, run_end = tl[i], np.iinfo(np.int64).min
        if sl[i] < run_end and el[i] <= run_end:
            keep[i] = False
        else:
            run_end = max(run_end, el[i])
    return df.take(keep)


@dataclass
class Steps:
    """Per-step table plus the analysis window. ``table`` columns:

    ``step`` (0-based over all step threads), ``global_tid``, ``pid``, ``tid``, ``proc`` (-1 if the
    process did no CUDA work), ``primary`` (on its process's step thread), ``index`` (0-based on
    its thread), ``name``, ``start_ns``, ``range_end_ns``, ``end_ns``, ``step_time_ns``.
    """

    table: Columns
    window_start_ns: int | None
    window_end_ns: int | None
    #: steps exist (from markers, or inferred from the repeating GPU work: see ``source``)
    has_markers: bool
    #: "markers", "inferred" (:mod:`nsysdoc.metrics.step_inference`) or None (no steps)
    source: str | None = None
    #: what inferred steps were inferred from (``capture.steps_inferred``), else None
    inferred: dict | None = None
    #: how marked steps were found: "pattern" (the step pattern) or "name" (step-like ranges)
    found_by: str | None = None
    #: step markers set aside for holding too little of the GPU work (``capture.steps_set_aside``)
    set_aside: dict | None = None
    #: without steps: why no steps were inferred, per process (``{"pid", "reason"}``)
    not_inferred: list | None = None
    #: ``--step-marker`` markers used as given although they hold little of the GPU work
    low_share: dict | None = None

    @property
    def primary(self) -> Columns:
        return self.table.take(np.asarray(self.table["primary"], dtype=bool))

    @property
    def window_ns(self) -> int:
        if self.window_start_ns is None or self.window_end_ns is None:
            return 0
        return max(0, self.window_end_ns - self.window_start_ns)


_EMPTY_STEPS = (("step", "int64"), ("global_tid", "int64"), ("pid", "int64"), ("tid", "int64"), ("proc", "int64"),
                ("primary", bool), ("index", "int64"), ("name", object), ("start_ns", "int64"),
                ("range_end_ns", "int64"), ("end_ns", "int64"), ("step_time_ns", "int64"), ("launch_start_ns", "int64"))
_STEP_COLUMNS = tuple(c for c, _ in _EMPTY_STEPS)


class StepBuilder:
    """Steps from their NVTX ranges, fed with GPU operations chunk by chunk (the analysis streams
    them): ``process_keys`` is the sorted ``global_pid`` column of the processes table; ``add_ops``
    takes each operation's launch time (API start, or its GPU start when the API row is unknown)
    and extends each primary step to the end of the GPU work launched inside it; :attr:`steps` (ids, starts, range ends) is usable for :func:`assign_ops_to_steps` at once."""

    def __init__(self, ranges: Columns, process_keys: np.ndarray) -> None:
        self.has = len(ranges) > 0
        if not self.has:
            self.df = None
            return
        gtid = np.asarray(ranges["global_tid"], dtype=np.int64)
        start = np.asarray(ranges["start_ns"], dtype=np.int64)
        order = np.lexsort((start, gtid))  # stable: by thread, then start
        gtid, start = gtid[order], start[order]
        pkey = gtid & S.PROCESS_MASK
        pos = np.clip(np.searchsorted(process_keys, pkey), 0, max(len(process_keys) - 1, 0))
        found = (process_keys[pos] == pkey) if len(process_keys) else np.zeros(len(gtid), bool)
        # each process's step thread: the one with most steps (ties: the smallest global_tid)
        threads, first, inverse, count = np.unique(gtid, return_index=True, return_inverse=True, return_counts=True)
        tkey = threads & S.PROCESS_MASK
        by = np.lexsort((threads, -count, tkey))
        lead = np.concatenate(([True], tkey[by][1:] != tkey[by][:-1])) if len(by) else np.zeros(0, bool)
        owner = np.zeros(len(threads), dtype=bool)
        owner[by[lead]] = True
        n = len(gtid)
        df = Columns({"global_tid": gtid, "name": np.asarray(ranges["name"], dtype=object)[order],
                      "start_ns": start,
                      "range_end_ns": np.asarray(ranges["range_end_ns"], dtype=np.int64)[order],
                      "pid": S.decode_pid(gtid), "tid": S.decode_tid(gtid),
                      "proc": np.where(found, pos, -1).astype(np.int64),
                      "primary": owner[inverse],
                      "index": np.arange(n, dtype=np.int64) - first[inverse],
                      "step": np.arange(n, dtype=np.int64)})
        self.df = df
        self.end = df["range_end_ns"].copy()
        #: each step's first GPU operation's start (POS: none seen)
        self.first = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        self.by_proc = {}
        self._axis = None
        prim = df["primary"]
        proc = df["proc"]
        for p in np.unique(proc[prim & (proc >= 0)]).tolist():
            rows = np.flatnonzero(prim & (proc == p))
            self.by_proc[int(p)] = (rows, df["start_ns"][rows], df["range_end_ns"][rows])
        # before any extension: ids, starts and range ends (all assign_ops_to_steps needs)
        self.steps = Steps(df.assign(end_ns=self.end.copy(), step_time_ns=np.zeros(n, np.int64)), None, None, True)

    def add_ops(self, op_proc: np.ndarray, op_when_ns: np.ndarray, op_end_ns: np.ndarray,
                op_start_ns: np.ndarray | None = None) -> np.ndarray:
        """Extend the steps by these operations (and note each step's first GPU start, given
        ``op_start_ns``); returns each one's step id, ``-1`` if launched outside every primary
        step (what :func:`assign_ops_to_steps` gives)."""
        out = np.full(len(op_proc), -1, dtype=np.int64)
        if not self.has:
            return out
        out = self._add_ops(op_proc, op_when_ns, op_end_ns, out)
        if op_start_ns is not None:
            got = np.flatnonzero(out >= 0)
            if len(got):
                np.minimum.at(self.first, out[got], np.asarray(op_start_ns, dtype=np.int64)[got])
        return out

    def _add_ops(self, op_proc, op_when_ns, op_end_ns, out):
        if self._axis is None and self.by_proc:  # the primary steps of every process, by (process, start)
            procs = sorted(self.by_proc)
            parts = [self.by_proc[p] for p in procs]
            self._axis = (np.concatenate([np.full(len(r), p, dtype=np.int64) for p, (r, _, _) in zip(procs, parts)]),
                          *(np.concatenate([x[i] for x in parts]) for i in range(3)))
        found = _search_steps(self._axis[0], self._axis[2], self._axis[3], op_proc, op_when_ns) \
            if self._axis is not None else None
        if found is not None:
            inside, k = found
            step = self._axis[1][k]  # step ids are row numbers
            np.maximum.at(self.end, step, np.asarray(op_end_ns)[inside])
            out[inside] = step
            return out
        for proc, (rows, s, r_end) in self.by_proc.items():
            sel = np.flatnonzero(op_proc == proc)
            if not len(sel):
                continue
            when, oend = op_when_ns[sel], op_end_ns[sel]
            k = np.searchsorted(s, when, side="right") - 1
            inside = (k >= 0) & (when < r_end[np.maximum(k, 0)])  # half-open, like every interval
            step = rows[k[inside]]  # step ids are row numbers
            np.maximum.at(self.end, step, oend[inside])
            out[sel[inside]] = step
        return out

    def finish(self, op_start_min: int | None, op_end_max: int | None) -> Steps:
        if not self.has:
            empty = Columns({c: np.zeros(0, dtype=t) for c, t in _EMPTY_STEPS})
            return Steps(empty, op_start_min, op_end_max, False)
        df = self.df
        launch = df["start_ns"]
        gtid = df["global_tid"]
        n = len(gtid)
        same = np.append(gtid[1:] == gtid[:-1], False)
        first = np.flatnonzero(np.concatenate(([True], gtid[1:] != gtid[:-1])))
        seg = np.repeat(np.arange(len(first)), np.diff(np.append(first, n)))
        # a step starts at the later of its range start and (the earlier of) the end of the GPU
        # work launched in the thread's earlier steps and its own first GPU operation: when the
        # host runs ahead, a step's time begins where the GPU reaches it (the earlier bound keeps
        # one long operation on a side stream from swallowing the steps it overlaps)
        prev_end = _shifted_cummax(self.end, first, n)
        gpu0 = np.where(self.first < np.iinfo(np.int64).max, np.minimum(prev_end, self.first), np.iinfo(np.int64).min)
        begin = np.maximum(launch, gpu0)
        begin = _segment_cummax(begin, first, n)
        # steps partition their thread's timeline: a step lasts until the next one begins (its GPU
        # work running later belongs to that step's time, never to two steps); the last one until
        # its range ends or the GPU work launched in any step of its thread does, whichever is
        # later (a short last step after steps whose work is still queued)
        thread_end = np.maximum.reduceat(self.end, first) if n else self.end
        nxt = np.append(begin[1:], -1)
        end = np.where(same, nxt, np.maximum(thread_end[seg], begin))
        table = df.assign(launch_start_ns=launch, start_ns=begin, end_ns=end, step_time_ns=end - begin)
        prim = table["primary"]
        w0, w1 = int(begin[prim].min()), int(end[prim].max())
        return Steps(table.select(_STEP_COLUMNS), w0, w1, True)


def _shifted_cummax(x: np.ndarray, first: np.ndarray, n: int) -> np.ndarray:
    """Per segment (starting at the indices ``first``), the running maximum of ``x`` over the
    earlier elements of the segment (the minimum int64 for each segment's first)."""
    out = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    bounds = np.append(first, n)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # threads: few
        if b - a > 1:
            out[a + 1:b] = np.maximum.accumulate(x[a:b - 1])
    return out


def _segment_cummax(x: np.ndarray, first: np.ndarray, n: int) -> np.ndarray:
    out = x.copy()
    bounds = np.append(first, n)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        out[a:b] = np.maximum.accumulate(x[a:b])
    return out


def _search_steps(p_s: np.ndarray, s: np.ndarray, r_end: np.ndarray, op_proc: np.ndarray,
                  op_when_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Steps sorted by (process ``p_s``, start ``s``), range ends ``r_end``: the operations
    launched inside one (``[start, range end)`` of the latest step of their process starting at
    or before the launch) and that step's position, or None when the packed axis would overflow.
    Every process's steps sit on one axis (process p's times shifted by p * span): one binary
    search for all operations instead of a mask, a gather and a search per process."""
    when = np.asarray(op_when_ns, dtype=np.int64)
    if len(when) == 0 or len(s) == 0 or int(p_s[0]) < 0:
        return None
    base = min(int(s.min()), int(when.min()))
    span = max(int(s.max()), int(when.max())) - base + 1
    if (int(p_s[-1]) + 2) * span >= (1 << 62):
        return None
    op_p = np.asarray(op_proc, dtype=np.int64)
    k = np.searchsorted(p_s * span + (s - base), op_p * span + (when - base), side="right") - 1
    kc = np.maximum(k, 0)
    inside = np.flatnonzero((k >= 0) & (p_s[kc] == op_p) & (when < r_end[kc]))
    return inside, k[inside]


def assign_ops_to_steps(steps: Steps, op_proc: np.ndarray, op_when_ns: np.ndarray) -> np.ndarray:
    """Step id (``steps.table["step"]``) of each operation, ``-1`` if launched outside every step."""
    out = np.full(len(op_proc), -1, dtype=np.int64)
    prim = steps.primary
    proc = np.asarray(prim["proc"], dtype=np.int64)
    # operations count from a step's launch start (an inferred step's time may start later: at the
    # first GPU operation, nsysdoc.engine.plan._inside_span)
    start_col = "launch_start_ns" if "launch_start_ns" in prim else "start_ns"
    if len(op_proc) and (proc >= 0).any():
        ok = np.flatnonzero(proc >= 0)
        s = np.asarray(prim[start_col], dtype=np.int64)[ok]
        order = np.lexsort((s, proc[ok]))  # by process, then start (stable)
        found = _search_steps(proc[ok][order], s[order],
                              np.asarray(prim["range_end_ns"], dtype=np.int64)[ok][order], op_proc, op_when_ns)
        if found is not None:
            inside, k = found
            out[inside] = np.asarray(prim["step"], dtype=np.int64)[ok][order][k]
            return out
    for p in np.unique(proc[proc >= 0]).tolist():
        st = prim.take(proc == p)
        sel = np.flatnonzero(op_proc == p)
        s = np.asarray(st[start_col], dtype=np.int64)
        r_end = np.asarray(st["range_end_ns"], dtype=np.int64)
        k = np.searchsorted(s, op_when_ns[sel], side="right") - 1
        inside = (k >= 0) & (op_when_ns[sel] < r_end[np.maximum(k, 0)])
        out[sel[inside]] = np.asarray(st["step"])[k[inside]]
    return out


def job_indices(table: Columns, inferred: bool) -> np.ndarray:
    """Each step's job index: the step index the processes share, so that a job step is one
    iteration on every rank. Marked steps: their index on their thread. Inferred steps (numbered
    from 0 in each process, so two processes' step k may be different iterations): the index of
    the reference process's step (the one with the most primary steps, then the lowest pid) whose
    start is nearest, within half its median step time; -1 for a step with no partner, or a
    partner already taken (left out of the job step times)."""
    idx = np.asarray(table["index"], dtype=np.int64).copy()
    if not inferred or not len(table):
        return idx
    prim = np.asarray(table["primary"], dtype=bool)
    pid = np.asarray(table["pid"], dtype=np.int64)
    start = np.asarray(table["start_ns"], dtype=np.int64)
    st = np.asarray(table["step_time_ns"], dtype=np.int64)
    pids, counts = np.unique(pid[prim], return_counts=True)
    if len(pids) < 2:
        return idx
    ref = int(pids[np.lexsort((pids, -counts))[0]])
    r = np.flatnonzero(prim & (pid == ref))
    r = r[np.argsort(start[r], kind="stable")]
    tol = float(np.median(st[r])) / 2
    for p in pids.tolist():
        if p == ref:
            continue
        rows = np.flatnonzero(prim & (pid == p))
        rows = rows[np.argsort(start[rows], kind="stable")]
        k = np.clip(np.searchsorted(start[r], start[rows]), 0, len(r) - 1)
        k0 = np.clip(k - 1, 0, len(r) - 1)
        near = np.where(np.abs(start[r][k0] - start[rows]) < np.abs(start[r][k] - start[rows]), k0, k)
        taken: set = set()
        for row, j in zip(rows.tolist(), near.tolist()):
            ok = abs(int(start[r][j]) - int(start[row])) <= tol and j not in taken
            idx[row] = int(idx[r][j]) if ok else -1
            if ok:
                taken.add(j)
    return idx


def job_step_times(index, step_time) -> np.ndarray:
    """Job step times (ms or ns, as given) of primary steps, in index order: for each step index
    (0-based on its thread: one per process), the longest of the processes' steps with that index;
    one process: its own step times. ``None`` or non-positive times are left out."""
    by_index: dict = {}
    for i, t in zip(index, step_time):
        if t is None or not t > 0 or i is None or i < 0:
            continue
        by_index[i] = max(by_index.get(i, 0.0), float(t))
    return np.array([by_index[k] for k in sorted(by_index)], dtype=float)


def pick_steps(table: Columns) -> tuple[int | None, int | None]:
    """``(median, worst)`` step ids among the primary steps, by job step time (each step index's
    longest step over the processes, :func:`job_step_times`): the **median step** is the slowest
    process's step of the index with the lower-median job step time (indices sorted by job step
    time, then index; of an even count, the lower middle one); the **worst step** the slowest
    process's step of the index with the longest job step time (ties: the earlier index). Ties
    between processes go to the smaller step id. With one process these are its steps sorted by
    step time. Every section, finding, time range and the summary's step time use these two."""
    if table is None or len(table) == 0:
        return None, None
    prim = np.asarray(table["primary"], dtype=bool)
    if not prim.any():
        return None, None
    st = np.asarray(table["step_time_ns"], dtype=np.int64)[prim]
    ids = np.asarray(table["step"], dtype=np.int64)[prim]
    idx = np.asarray(table["job_index"] if "job_index" in table else table["index"], dtype=np.int64)[prim]
    if (idx < 0).any():  # steps with no partner on the other processes are no job step
        keep = idx >= 0
        if not keep.any():
            keep[:] = True
        st, ids, idx = st[keep], ids[keep], idx[keep]
    # each index's slowest step (ties: the smaller step id): sort by index, -time, id; take firsts
    order = np.lexsort((ids, -st, idx))
    first = np.concatenate(([True], idx[order][1:] != idx[order][:-1]))
    lead = order[first]  # one step per index, the one that sets the job step time
    by = lead[np.lexsort((idx[lead], st[lead]))]  # by job step time, then index
    median = int(ids[by[(len(by) - 1) // 2]])
    worst_t = st[lead].max()
    cand = lead[st[lead] == worst_t]
    worst = int(ids[cand[np.argmin(idx[cand])]])
    return median, worst
