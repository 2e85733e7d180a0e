"""The attributor: the site (operator, module, frame, backward node, forward operator) of each
launch, idle gap or CUDA call, from the capture's host ranges.

Why a module of its own: :class:`Attributor` holds the three range families (operators, modules,
frames), maps autograd backward nodes to their forward operators by sequence number
(:class:`FwdMap`, :func:`backward_ranges`), answers the slices' queries
(:meth:`Attributor.sites_and_ranges`) and keeps the whole-capture accumulators of the operator
view. Building it from the plan's NVTX rows stays in :mod:`nsysdoc.engine.attribute` (the entry
point); the sliced variant is :mod:`nsysdoc.engine.attribute_sliced`. Moved out of
``nsysdoc/engine/attribute.py`` (issue 51); re-exported there.
"""
from __future__ import annotations

import numpy as np

from ..metrics import attribution as A
from ..metrics.attribution import site_index, site_rows
from .attribute_forest import Forest
from .attribute_sites import SiteSums, accumulate, add_sites

NONE = -1


class Names(list):
    """The attributor's strings (operators, modules, frames) and their codes, each string once."""

    def __init__(self) -> None:
        super().__init__()
        self._index: dict[str, int] = {}

    def code(self, name: str) -> int:
        c = self._index.get(name)
        if c is None:
            c = self._index[name] = len(self)
            self.append(name)
        return c

    def extend_codes(self, names: list[str]) -> None:
        """:meth:`code` of each name, in order, at once (millions of distinct operator names)."""
        new = [x for x in dict.fromkeys(names) if x not in self._index]
        self._index.update(zip(new, range(len(self), len(self) + len(new))))
        self.extend(new)

    def index_of(self, name: str) -> int:
        return self._index[name]


def _take(a: np.ndarray, i: np.ndarray) -> np.ndarray:
    """``a[i]``, NONE where ``i`` is -1 (no range); ``a`` is not empty."""
    out = a[i]
    neg = i < 0
    if neg.any():
        out[neg] = NONE
    return out


class Attributor:
    """The capture's range families and the whole-capture operator accumulators."""

    def __init__(self, source: str, names: Names, ops: A.Forest, mods: A.Forest, frames: A.Forest,
                 op_raw_seq: np.ndarray, thread_pid: np.ndarray, op_raw_frame: np.ndarray | None = None,
                 fwd_map: "FwdMap | None" = None, accumulators: bool = True,
                 is_bwd_name: np.ndarray | None = None, keep_bw_range: bool = False,
                 main_of: np.ndarray | None = None, via_code: int = NONE) -> None:
        self.source = source
        #: per thread index, its process's main thread (-1: none, or itself), and the name code of
        #: :data:`~nsysdoc.metrics.attribution.VIA_ENCLOSING`: a launch outside every operator range
        #: of its thread takes the ranges the main thread has open (:meth:`sites_and_ranges`)
        self.main_of = main_of if main_of is not None and via_code >= 0 and (np.asarray(main_of) >= 0).any() \
            else None
        self.via_code = via_code
        self.names = names
        self.ops, self.mods, self.frames = ops, mods, frames
        n = len(ops)
        # an operator's own Python frame (2021 Kineto traces), else its nearest enclosing one's
        self.op_frame = np.full(n, NONE, dtype=np.int64)
        if n and op_raw_frame is not None and len(op_raw_frame) and (np.asarray(op_raw_frame) >= 0).any():
            raw = np.asarray(op_raw_frame, dtype=np.int64)[ops.order]
            if isinstance(ops, Forest):
                self.op_frame = ops.inherit(raw, raw >= 0)
            else:
                self.op_frame = raw.copy()
                for d in range(1, int(ops.depth.max()) + 1):
                    c = np.flatnonzero((ops.depth == d) & (self.op_frame < 0) & (ops.parent >= 0))
                    if len(c):
                        self.op_frame[c] = self.op_frame[ops.parent[c]]
        # backward node (itself or nearest enclosing autograd node) and the forward operator with
        # the same sequence number in the same process, with that operator's module and frame
        # which names are backward nodes: given by a caller that builds many attributors over the
        # same names (engine.attribute_sliced: one per slice), else found here
        if is_bwd_name is None:
            is_bwd_name = np.array([A.is_backward(x) for x in names], dtype=bool) if names else np.zeros(0, bool)
        self.bwd = np.full(n, NONE, dtype=np.int64)
        bw_range = backward_ranges(ops, is_bwd_name)  # each range's backward node range (-1: none)
        #: the same, kept when asked (engine.attribute_sliced.SlicedAttributor.find_forward)
        self.bw_range = bw_range if keep_bw_range else None
        if n:
            codes = np.full(len(names), NONE, dtype=np.int64)
            for c in np.unique(ops.name[bw_range[bw_range >= 0]]).tolist():
                codes[c] = names.code(A.backward_node(names[c]))
            has = bw_range >= 0
            self.bwd[has] = codes[ops.name[bw_range[has]]]
        self.fwd = np.full(n, NONE, dtype=np.int64)
        self.fwd_mod = np.full(n, NONE, dtype=np.int64)
        self.fwd_frame = np.full(n, NONE, dtype=np.int64)
        seq = np.asarray(op_raw_seq, dtype=np.int64)[ops.order] if n else np.zeros(0, np.int64)
        if fwd_map is not None:
            # the forward operators found over the whole capture (engine.attribute_sliced)
            need = np.flatnonzero((bw_range >= 0) & (seq[np.maximum(bw_range, 0)] >= 0)) if n else bw_range[:0]
            if len(need):
                pid = thread_pid[ops.thread[bw_range[need]]] if len(thread_pid) else np.zeros(len(need), np.int64)
                f, m, fr = fwd_map.lookup(pid, seq[bw_range[need]])
                self.fwd[need], self.fwd_mod[need], self.fwd_frame[need] = f, m, fr
        elif n and (seq >= 0).any() and (self.bwd >= 0).any():
            pid = thread_pid[ops.thread] if len(thread_pid) else np.zeros(n, np.int64)
            fwd_ok = (seq >= 0) & ~is_bwd_name[ops.name] & (bw_range < 0)
            cand = np.flatnonzero(fwd_ok)
            # the first (outermost) forward range of each (process, seq): forest order is by thread
            # and start, so sort by (pid, seq, start)
            o = np.lexsort((ops.start[cand], seq[cand], pid[cand]))
            cand = cand[o]
            key_c = np.stack([pid[cand], seq[cand]], axis=1)
            first = np.ones(len(cand), dtype=bool)
            first[1:] = (key_c[1:] != key_c[:-1]).any(axis=1)
            cand = cand[first]
            br = bw_range
            need = np.flatnonzero((br >= 0) & (seq[np.maximum(br, 0)] >= 0))
            if len(need) and len(cand):
                bseq, bpid = seq[br[need]], pid[br[need]]
                kp, ks = pid[cand], seq[cand]
                o2 = np.lexsort((ks, kp))
                kp, ks, cand = kp[o2], ks[o2], cand[o2]
                # search (pid, seq) pairs: pid-major via a combined rank
                pos = _pair_search(kp, ks, bpid, bseq)
                ok = pos >= 0
                fr = cand[pos[ok]]
                tgt = need[ok]
                self.fwd[tgt] = ops.name[fr]
                m = self.mods.innermost(ops.thread[fr], ops.start[fr])
                f = self.frames.innermost(ops.thread[fr], ops.start[fr])
                self.fwd_mod[tgt] = _name_at(self.mods, m)
                ff = _name_at(self.frames, f)
                self.fwd_frame[tgt] = np.where(ff >= 0, ff, self.op_frame[fr])
        # a column that is NONE for every range (no autograd nodes, no Python frames: most
        # captures) is one shared read-only value, not n int64 (issue 50: 4.8 MB each at 600 k
        # operators); they are only read after this
        for k in ("op_frame", "bwd", "fwd", "fwd_mod", "fwd_frame"):
            if n and (getattr(self, k) == NONE).all():
                setattr(self, k, np.broadcast_to(np.int64(NONE), (n,)))
        #: frames of backtraced CUDA calls: thread index -> (sorted call starts, frame codes)
        self._calls: dict = {}
        # whole-capture accumulators (the operator view)
        # (a slice's forest in engine.attribute_sliced adds per name instead: none)
        self.self_gpu_ns = np.zeros(n if accumulators else 0, dtype=np.int64)
        self.self_ops = np.zeros(n if accumulators else 0, dtype=np.int64)
        self.none_gpu_ns = 0
        self.none_ops = 0
        self.sites_all = SiteSums()
        self.pairs = SiteSums()
        self.total_gpu_ns = 0

    # ---- sites ------------------------------------------------------------------------------
    def sites(self, thread, t, valid=None, enclosing: bool = False) -> np.ndarray:
        """Site rows ``(n, 5)`` for queries at ``(thread, t)``; rows where ``valid`` is False, or
        the thread is unknown (-1), are all -1."""
        return self.sites_and_ranges(thread, t, valid, enclosing)[0]

    def sites_and_ranges(self, thread, t, valid=None, enclosing: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`sites`, and the innermost operator range of each query (forest index, -1).

        ``enclosing`` (launches of GPU work): a query on a thread with no operator range of its own
        holding ``t`` (autograd's engine thread, under user NVTX ranges only) is answered on its
        process's main thread (:func:`~nsysdoc.metrics.attribution.main_threads`) when that
        thread has an operator or module range holding ``t``: its operator, module and frame, and
        the backward-node column set to the ``VIA_ENCLOSING`` code (``via: "enclosing range"``)."""
        thread = np.asarray(thread, dtype=np.int64)
        t = np.asarray(t, dtype=np.int64)
        n = len(t)
        ok = thread >= 0
        if valid is not None:
            ok &= np.asarray(valid, dtype=bool)
        q = np.flatnonzero(ok)
        if not len(q):
            return np.full((n, 5), NONE, dtype=np.int64), np.full(n, NONE, dtype=np.int64)
        every = len(q) == n
        th, tq = (thread, t) if every else (thread[q], t[q])
        x = self._lookups()
        # per-range codes with a last entry for "no range": a gather with index -1 gives NONE; a
        # family or code no range has is None (every answer NONE: no gather)
        r = self.ops.innermost(th, tq)
        th_call, via = th, None  # (the CUDA call's own stack stays the launching thread's)
        if enclosing and self.main_of is not None:
            # launches outside every operator range of their thread, on a thread with a main thread
            m = np.flatnonzero(r < 0)
            if len(m):
                mt = self.main_of[th[m]]
                m, mt = m[mt >= 0], mt[mt >= 0]
            if len(m):
                r2 = self.ops.innermost(mt, tq[m])
                held = r2 >= 0
                if len(self.mods):
                    held |= self.mods.innermost(mt, tq[m]) >= 0
                m, mt, r2 = m[held], mt[held], r2[held]
                if len(m):
                    th = th.copy()
                    th[m] = mt
                    r[m] = r2
                    via = m
        none = lambda: np.full(len(q), NONE, np.int64)  # noqa: E731
        at = lambda key: _take(x[key], r) if x[key] is not None else none()  # noqa: E731
        mod = _take(x["mod"], self.mods.innermost(th, tq)) if x["mod"] is not None else none()
        fr = _take(x["frame"], self.frames.innermost(th, tq)) if x["frame"] is not None else none()
        for col, key in ((fr, "op_frame"), (mod, "fwd_mod"), (fr, "fwd_frame")):
            if x[key] is not None:
                m = np.flatnonzero(col < 0)
                col[m] = _take(x[key], r[m])
        if self._calls and (fr < 0).any():
            m = np.flatnonzero(fr < 0)
            fr[m] = self._call_frame(th_call[m], tq[m])
        bwd = at("bwd")
        if via is not None:
            bwd[via] = self.via_code
        cols = (at("name"), mod, fr, bwd, at("fwd"))
        if every:
            return site_rows(*cols), r
        out = np.full((n, 5), NONE, dtype=np.int64, order="F")
        ranges = np.full(n, NONE, dtype=np.int64)
        ranges[q] = r
        for k, c in enumerate(cols):
            out[q, k] = c
        return out, ranges

    def _lookups(self) -> dict:
        """Per-range code arrays (int64, read with :func:`_take`: index -1 gives NONE); None for
        one that is NONE everywhere. The attributor's own arrays, not copies (issue 50: three
        capture-long copies, 14 MB at 400 k launches)."""
        x = getattr(self, "_x", None)
        if x is None:
            ext = lambda a: np.asarray(a, dtype=np.int64) if (np.asarray(a) >= 0).any() else None  # noqa: E731
            x = self._x = {"name": ext(self.ops.name), "bwd": ext(self.bwd), "fwd": ext(self.fwd),
                           "op_frame": ext(self.op_frame), "fwd_mod": ext(self.fwd_mod),
                           "fwd_frame": ext(self.fwd_frame), "mod": ext(self.mods.name),
                           "frame": ext(self.frames.name)}
        return x

    def set_call_frames(self, thread, start, end, codes) -> None:
        """Frames of backtraced CUDA calls (native stacks): a query at ``(thread, t)`` takes the
        frame of the call on that thread that starts at ``t`` or is running at ``t``."""
        thread = np.asarray(thread, dtype=np.int64)
        start = np.asarray(start, dtype=np.int64)
        end = np.asarray(end, dtype=np.int64)
        codes = np.asarray(codes, dtype=np.int64)
        for t in np.unique(thread).tolist():
            m = np.flatnonzero(thread == t)
            o = np.argsort(start[m], kind="stable")
            self._calls[int(t)] = (start[m][o], end[m][o], codes[m][o])

    def _call_frame(self, thread, t) -> np.ndarray:
        out = np.full(len(t), NONE, dtype=np.int64)
        for th in np.unique(thread).tolist():
            got = self._calls.get(int(th))
            if got is None:
                continue
            m = np.flatnonzero(thread == th)
            st, en, cd = got
            pos = np.searchsorted(st, t[m], side="right") - 1
            ok = pos >= 0
            p = np.maximum(pos, 0)
            hit = ok & ((st[p] == t[m]) | (en[p] > t[m]))
            out[m[hit]] = cd[p[hit]]
        return out

    # ---- whole capture ----------------------------------------------------------------------
    def add_ops(self, op_range: np.ndarray, sites: np.ndarray, dur: np.ndarray, label: np.ndarray,
                index: tuple | None = None) -> None:
        """Add owned GPU operations (their innermost operator range, site rows, durations and
        labels) to the operator view."""
        dur = np.asarray(dur, dtype=np.int64)
        has = op_range >= 0
        if has.any():
            r = op_range[has]
            # added in place (float sums of integer ns are exact below 2**53): no int copy of an
            # array as long as the capture's operator ranges, per slice
            np.add(self.self_gpu_ns, np.bincount(r, weights=dur[has], minlength=len(self.self_gpu_ns)),
                   out=self.self_gpu_ns, casting="unsafe")
            self.self_ops += np.bincount(r, minlength=len(self.self_ops))
        add_common(self, has, sites, dur, label, index)

    # ---- slices (engine.attribute_sliced holds only a slice's ranges; this holds them all) ----
    def for_slice(self, c0: int, c1: int, t_lo: int, t_hi: int) -> "Attributor":
        """The attributor a slice asks (this one: it holds every range)."""
        return self

    def count_ranges(self) -> None:
        """A slice's ranges counted in the operator view (here: from the whole forest at the end)."""

    def op_totals(self) -> dict:
        """Per name code: calls, self GPU, GPU, CPU and self CPU time (ns), GPU operations."""
        ops, nn = self.ops, len(self.names)
        name = ops.name
        dur = ops.end - ops.start
        nested = ops.nested_in_same_name()
        sub = ops.subtree_sum(self.self_gpu_ns)
        return {"calls": np.bincount(name, minlength=nn),
                "self_gpu": np.bincount(name, weights=self.self_gpu_ns, minlength=nn),
                "gpu": np.bincount(name[~nested], weights=sub[~nested], minlength=nn),
                "cpu": np.bincount(name[~nested], weights=dur[~nested], minlength=nn),
                "self_cpu": np.bincount(name, weights=ops.self_time(), minlength=nn),
                "kernels": np.bincount(name, weights=self.self_ops, minlength=nn),
                # calls not inside a call of the same name: the divisor of the per-call times (issue 47)
                "outer_calls": np.bincount(name[~nested], minlength=nn)}

    def first_calls(self, th: np.ndarray, s: np.ndarray, e: np.ndarray, share: float) -> tuple:
        """Operator ranges that are a thread's first call of their operator and that the CUDA
        calls ``(th, s, e)`` cover at least ``share`` of: (thread, start, end, name code) arrays."""
        ops = self.ops
        r = ops.innermost(th, s)
        ok = r >= 0
        if not ok.any():
            return None
        r, dur = r[ok], (e - s)[ok]
        cand = np.unique(r)
        covered = np.bincount(np.searchsorted(cand, r), weights=dur, minlength=len(cand))
        length = ops.end[cand] - ops.start[cand]
        cand = cand[covered >= share * np.maximum(length, 1)]
        if not len(cand):
            return None
        # the thread's first call of the operator: no earlier range with its name on its thread (the
        # earliest start per (thread, name) among the ranges with a candidate's name, vectorised: an
        # operator can have millions of calls)
        same = np.flatnonzero(np.isin(ops.name, np.unique(ops.name[cand])))
        first = first_starts(ops.thread[same], ops.name[same], ops.start[same])
        keep = ops.start[cand] <= first_start_of(first, ops.thread[cand], ops.name[cand])
        cand = cand[keep]
        return ops.thread[cand], ops.start[cand], ops.end[cand], ops.name[cand]


def _min_per_key(key: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uk, inv = np.unique(key, return_inverse=True)
    first = np.full(len(uk), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, inv, np.asarray(value, np.int64))
    return uk, first


def first_starts(thread, name, start) -> tuple[np.ndarray, np.ndarray]:
    """The earliest start per (thread, name): sorted keys and their starts."""
    return _min_per_key((np.asarray(thread, np.int64) << 32) | (np.asarray(name, np.int64) & 0xFFFFFFFF), start)


def first_start_of(first: tuple, thread, name) -> np.ndarray:
    uk, st = first
    ck = (np.asarray(thread, np.int64) << 32) | (np.asarray(name, np.int64) & 0xFFFFFFFF)
    pos = np.minimum(np.searchsorted(uk, ck), max(len(uk) - 1, 0))
    return np.where(uk[pos] == ck, st[pos], np.iinfo(np.int64).max) if len(uk) else \
        np.full(len(ck), np.iinfo(np.int64).max, np.int64)


def merge_first_starts(a: tuple | None, b: tuple) -> tuple:
    """Two :func:`first_starts` results as one."""
    if a is None:
        return b
    return _min_per_key(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def add_common(attr, has: np.ndarray, sites: np.ndarray, dur: np.ndarray, label: np.ndarray, index) -> None:
    """The part of :meth:`Attributor.add_ops` that does not depend on the ranges: totals, time per
    site and per (operator, GPU label)."""
    attr.total_gpu_ns += int(dur.sum())
    attr.none_gpu_ns += int(dur[~has].sum())
    attr.none_ops += int((~has).sum())
    distinct, inv = index if index is not None else site_index(sites)
    accumulate(attr.sites_all, distinct, inv, dur)
    add_sites(attr.pairs, site_rows(sites[:, 0], label), dur)


def backward_ranges(ops: A.Forest, is_bwd_name: np.ndarray) -> np.ndarray:
    """Each range's backward node: itself or its nearest ancestor with a backward name (-1: none)."""
    n = len(ops)
    bw_range = np.full(n, -1, dtype=np.int64)
    if n and is_bwd_name.any() and is_bwd_name[ops.name].any():  # (no backward node: no walk)
        if isinstance(ops, Forest) and ops.deep():
            own = is_bwd_name[ops.name]
            return ops.inherit(np.arange(n, dtype=np.int64), own)
        for a in ops.ancestors(np.arange(n)):
            ok = (a >= 0) & (bw_range < 0)
            hit = ok.copy()
            hit[ok] = is_bwd_name[ops.name[a[ok]]]
            bw_range[hit] = a[hit]
    return bw_range


class FwdMap:
    """Backward nodes' ``(process, seq)`` keys, sorted pid-major, and the forward operator of each
    (its name, module and frame codes; -1 where none was found)."""

    def __init__(self, pid: np.ndarray, seq: np.ndarray) -> None:
        self.pid, self.seq = pid, seq
        self.name = np.full(len(pid), NONE, dtype=np.int64)
        self.mod = np.full(len(pid), NONE, dtype=np.int64)
        self.frame = np.full(len(pid), NONE, dtype=np.int64)
        self.found = np.zeros(len(pid), dtype=bool)

    def index(self, pid, seq) -> np.ndarray:
        return _pair_search(self.pid, self.seq, np.asarray(pid, np.int64), np.asarray(seq, np.int64))

    def lookup(self, pid, seq) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = self.index(pid, seq)
        ok = pos >= 0
        p = np.maximum(pos, 0)
        pad = lambda a: np.where(ok, a[p], NONE) if len(a) else np.full(len(pos), NONE, np.int64)  # noqa: E731
        return pad(self.name), pad(self.mod), pad(self.frame)


def _name_at(forest: A.Forest, idx: np.ndarray) -> np.ndarray:
    """Name codes of forest ranges ``idx`` (-1 where ``idx`` is -1)."""
    out = np.full(len(idx), NONE, dtype=np.int64)
    ok = idx >= 0
    if ok.any():
        out[ok] = forest.name[idx[ok]]
    return out


def _pair_search(kp, ks, qp, qs) -> np.ndarray:
    """Position of each query pair ``(qp, qs)`` in the pairs ``(kp, ks)`` sorted pid-major, or -1."""
    out = np.full(len(qp), -1, dtype=np.int64)
    if not len(kp):
        return out
    up, start = np.unique(kp, return_index=True)
    stop = np.append(start[1:], len(kp))
    for p, a, z in zip(up.tolist(), start.tolist(), stop.tolist()):
        m = np.flatnonzero(qp == p)
        if not len(m):
            continue
        seg = ks[a:z]
        pos = np.clip(np.searchsorted(seg, qs[m]), 0, len(seg) - 1)
        hit = seg[pos] == qs[m]
        out[m[hit]] = a + pos[hit]
    return out


def main_threads_of(tg: np.ndarray, names: Names) -> tuple[np.ndarray | None, int]:
    """Each thread's main thread (:func:`~nsysdoc.metrics.attribution.main_threads`) and the code
    of :data:`~nsysdoc.metrics.attribution.VIA_ENCLOSING` (coded last, once the ranges' names are:
    the same code sliced or not); (None, NONE) when no thread has a main thread to defer to."""
    main_of = A.main_threads(tg)
    if not (main_of >= 0).any():
        return None, NONE
    return main_of, names.code(A.VIA_ENCLOSING)


def set_call_frames_of(attr, trace, calls: dict) -> None:
    """The backtraced CUDA calls' frames (:func:`nsysdoc.trace.stacks.cuda_call_frames`), coded."""
    tg = np.asarray(trace.threads["global_tid"], dtype=np.int64)
    th_i = np.searchsorted(tg, calls["global_tid"])
    ok = (th_i < len(tg)) & (tg[np.minimum(th_i, len(tg) - 1)] == calls["global_tid"]) if len(tg) else \
        np.zeros(len(th_i), bool)
    attr.set_call_frames(th_i[ok], calls["start_ns"][ok], calls["end_ns"][ok],
                         [attr.names.code(f) for f in calls["frame"][ok].tolist()])
