"""Training steps from NVTX markers, and the analysis window.

Definitions (also in ``docs/glossary.md``):

* A **step marker** is an NVTX push/pop or start/end range whose *whole* text matches the step
  pattern, case-insensitively, and whose domain is not a library's (NCCL, cuDNN, ...). A marker
  nested inside another marker on the same thread is ignored (the outermost counts).
* Steps belong to the thread that opened the range. In each process the thread with the most
  steps is the **step thread**; GPU work of that process is assigned to its steps.
* A GPU operation belongs to a step when the API call that launched it starts inside the step's
  NVTX range (any thread of the same process).
* **Step end** = the later of the range end and the end of the last GPU operation of the step.
* **Step time** = start of the next step on the same thread − start of this step; for the last
  step of a thread, step end − step start.
* **Analysis window**: from the first step start to the last step end over all step threads;
  without step markers, from the first GPU operation start to the last GPU operation end.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import UsageError
from ..trace import schema as S


def compile_step_pattern(pattern: str | None):
    """The step marker as a case-insensitive RE2 pattern (linear time: :mod:`nsysdoc.safe_regex`)."""
    from .. import safe_regex

    text = pattern or S.DEFAULT_STEP_PATTERN
    try:
        return safe_regex.compile(text, ignore_case=True)
    except safe_regex.PatternError as exc:
        raise UsageError(f"invalid --step-marker regular expression {text[:60]!r}: {exc}") from None


def outermost_ranges(df: pd.DataFrame) -> pd.DataFrame:
    """Matching ranges (``global_tid, name, start_ns, range_end_ns``) without those nested in an
    earlier range of the same thread."""
    if len(df) == 0:
        return df
    df = df.sort_values(["global_tid", "start_ns", "range_end_ns"], ascending=[True, True, False], kind="stable")
    # drop ranges nested in an earlier range of the same thread (running max of ends per thread)
    tid = df["global_tid"].to_numpy()
    e = df["range_end_ns"].to_numpy()
    s = df["start_ns"].to_numpy()
    keep = np.ones(len(df), dtype=bool)
    run_end = np.iinfo(np.int64).min
    prev_tid = None
    for i in range(len(df)):  # step markers are few (thousands at most)
        if tid[i] != prev_tid:
            prev_tid, run_end = tid[i], np.iinfo(np.int64).min
        if s[i] < run_end and e[i] <= run_end:
            keep[i] = False
        else:
            run_end = max(run_end, e[i])
    return df[keep].reset_index(drop=True)


@dataclass
class Steps:
    """Per-step table plus the analysis window. ``table`` columns:

    ``step`` (0-based over all step threads), ``global_tid``, ``pid``, ``tid``, ``proc`` (-1 if the
    process did no CUDA work), ``primary`` (on its process's step thread), ``index`` (0-based on
    its thread), ``name``, ``start_ns``, ``range_end_ns``, ``end_ns``, ``step_time_ns``.
    """

    table: pd.DataFrame
    window_start_ns: int | None
    window_end_ns: int | None
    has_markers: bool

    @property
    def primary(self) -> pd.DataFrame:
        return self.table[self.table["primary"]]

    @property
    def window_ns(self) -> int:
        if self.window_start_ns is None or self.window_end_ns is None:
            return 0
        return max(0, self.window_end_ns - self.window_start_ns)


_EMPTY_STEPS = (("step", "int64"), ("global_tid", "int64"), ("pid", "int64"), ("tid", "int64"), ("proc", "int64"),
                ("primary", bool), ("index", "int64"), ("name", object), ("start_ns", "int64"),
                ("range_end_ns", "int64"), ("end_ns", "int64"), ("step_time_ns", "int64"))


class StepBuilder:
    """Steps from their NVTX ranges, fed with GPU operations chunk by chunk (the analysis streams
    them): ``process_keys`` is the sorted ``global_pid`` column of the processes table; ``add_ops``
    takes each operation's launch time (API start, or its GPU start when the API row is unknown)
    and extends each primary step to the end of the GPU work launched inside it; :attr:`steps` (ids, starts, range ends) is usable for :func:`assign_ops_to_steps` at once."""

    def __init__(self, ranges: pd.DataFrame, process_keys: np.ndarray) -> None:
        self.has = len(ranges) > 0
        if not self.has:
            self.df = None
            return
        df = ranges.copy()
        gtid = df["global_tid"].to_numpy(np.int64)
        df["pid"] = S.decode_pid(gtid)
        df["tid"] = S.decode_tid(gtid)
        pkey = gtid & S.PROCESS_MASK
        pos = np.clip(np.searchsorted(process_keys, pkey), 0, max(len(process_keys) - 1, 0))
        found = (len(process_keys) > 0) & (process_keys[pos] == pkey) if len(process_keys) else np.zeros(len(df), bool)
        df["proc"] = np.where(found, pos, -1)
        df["_pkey"] = pkey
        counts = df.groupby(["_pkey", "global_tid"]).size().rename("n").reset_index()
        counts = counts.sort_values(["_pkey", "n", "global_tid"], ascending=[True, False, True])
        owners = set(counts.drop_duplicates("_pkey")["global_tid"])
        df["primary"] = df["global_tid"].isin(owners)
        df = df.sort_values(["global_tid", "start_ns"], kind="stable").reset_index(drop=True)
        df["index"] = df.groupby("global_tid").cumcount()
        df["step"] = np.arange(len(df))
        self.df = df
        self.end = df["range_end_ns"].to_numpy(np.int64).copy()
        self.by_proc = {}
        prim = df["primary"].to_numpy()
        for proc in np.unique(df.loc[df["primary"] & (df["proc"] >= 0), "proc"]):
            rows = np.flatnonzero(prim & (df["proc"].to_numpy() == proc))
            self.by_proc[int(proc)] = (rows, df["start_ns"].to_numpy(np.int64)[rows],
                                       df["range_end_ns"].to_numpy(np.int64)[rows])
        # before any extension: ids, starts and range ends (all assign_ops_to_steps needs)
        self.steps = Steps(df.assign(end_ns=self.end, step_time_ns=0), None, None, True)

    def add_ops(self, op_proc: np.ndarray, op_when_ns: np.ndarray, op_end_ns: np.ndarray) -> np.ndarray:
        """Extend the steps by these operations; returns each one's step id, ``-1`` if launched
        outside every primary step (what :func:`assign_ops_to_steps` gives)."""
        out = np.full(len(op_proc), -1, dtype=np.int64)
        if not self.has:
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
            empty = pd.DataFrame({c: pd.Series(dtype=t) for c, t in _EMPTY_STEPS})
            return Steps(empty, op_start_min, op_end_max, False)
        df = self.df
        df["end_ns"] = self.end
        end = self.end
        start = df["start_ns"].to_numpy(np.int64)
        nxt = np.append(start[1:], -1)
        same = np.append(df["global_tid"].to_numpy()[1:] == df["global_tid"].to_numpy()[:-1], False)
        df["step_time_ns"] = np.where(same, nxt - start, end - start)
        prim = df[df["primary"]]
        w0, w1 = int(prim["start_ns"].min()), int(prim["end_ns"].max())
        cols = ["step", "global_tid", "pid", "tid", "proc", "primary", "index", "name", "start_ns", "range_end_ns",
                "end_ns", "step_time_ns"]
        return Steps(df[cols], w0, w1, True)


def assign_ops_to_steps(steps: Steps, op_proc: np.ndarray, op_when_ns: np.ndarray) -> np.ndarray:
    """Step id (``steps.table.step``) of each operation, ``-1`` if launched outside every step."""
    out = np.full(len(op_proc), -1, dtype=np.int64)
    prim = steps.primary
    for proc in np.unique(prim.loc[prim["proc"] >= 0, "proc"]):
        st = prim[prim["proc"] == proc]
        sel = np.flatnonzero(op_proc == proc)
        s = st["start_ns"].to_numpy(np.int64)
        r_end = st["range_end_ns"].to_numpy(np.int64)
        k = np.searchsorted(s, op_when_ns[sel], side="right") - 1
        inside = (k >= 0) & (op_when_ns[sel] < r_end[np.maximum(k, 0)])
        out[sel[inside]] = st["step"].to_numpy()[k[inside]]
    return out


def pick_steps(table: pd.DataFrame) -> tuple[int | None, int | None]:
    """``(median, worst)`` step ids among the primary steps: the **median step** has the lower-median
    step time (steps sorted by step time, then step id; of an even count, the lower middle one);
    the **worst step** has the longest step time (ties: the earlier step). Every section, finding
    and time range uses these two."""
    if table is None or len(table) == 0:
        return None, None
    prim = table[table["primary"].to_numpy(bool)]
    if len(prim) == 0:
        return None, None
    st = prim["step_time_ns"].to_numpy(np.int64)
    ids = prim["step"].to_numpy(np.int64)
    order = np.lexsort((ids, st))  # by step time, then step id
    median = int(ids[order[(len(order) - 1) // 2]])
    top = st.max()
    worst = int(ids[st == top].min())
    return median, worst
