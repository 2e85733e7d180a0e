"""Attribution in the engine: which operator, module and Python frame each GPU operation, idle gap
and CUDA call comes from (definitions: :mod:`nsysdoc.metrics.attribution`, ``docs/glossary.md``).

:func:`build` makes an :class:`Attributor` from the host ranges the plan's NVTX pass collected
(``None`` when the capture has none: attribution then costs nothing). The slices ask it for the
*site* of each launch or gap — a row of codes ``(operator, module, frame, backward node, forward
operator)`` into :attr:`Attributor.names`, -1 where there is none — and add time per site:

* over the whole capture, every GPU operation (the operator view: :meth:`Attributor.add_ops`);
* per analysis window, the selections the rules' ``where:`` names (:data:`SELECTORS`).
"""
from __future__ import annotations

import heapq

import numpy as np

from ..metrics import attribution as A
from ..metrics.attribution import SELECTORS  # noqa: F401 - the engine's selections
from ..metrics.attribution import site_index, site_rows  # noqa: F401 - used by the slices
from ..trace import schema as S

NONE = -1
#: GPU-operation labels for the operator view's top kernel: kernels use their name id; copies and
#: memsets these negative codes
_COPY_LABEL0 = -100


#: Levels of nesting up to which a forest nests, sums and walks up one numpy pass per level (the
#: quickest for the few levels real ranges have); deeper forests (hostile or broken exports: 120 k
#: ranges inside each other, or 100 k sharing one end) take one pass over their ranges instead,
#: linear or n log n (the per-level passes were quadratic: 49 s for 120 k nested ranges)
DEEP_LEVELS = 128


class Forest(A.Forest):
    """:class:`nsysdoc.metrics.attribution.Forest` (same answers) in linear or ``n log n`` time
    however deep its ranges nest: beyond :data:`DEEP_LEVELS` levels, parents come from one sort
    of the ranges by level, the laminar checks are vectorised over every level at once, walking up
    to the innermost range switches to a max-tree search (the last range at or before the
    candidate that ends after the time: its nearest enclosing one, for nested ranges), and the
    per-range passes (depth, same-name ancestor, subtree sums, backward nodes, frames) run once over
    the ranges in forest order, where a range's parent always comes before it."""

    # ---- nesting -------------------------------------------------------------------------------
    def _nest(self) -> None:
        n = len(self.start)
        pos = np.arange(n)
        lo = np.empty(n, dtype=np.int64)
        for a, z in self._seg.values():
            lo[a:z] = a
        par = self._tree.last_above(pos, self.start)
        par[par < lo] = -1
        self.parent = par
        depth = np.full(n, -1, dtype=np.int64)
        depth[par < 0] = 0
        todo = np.flatnonzero(par >= 0)
        levels = 0
        while len(todo) and levels < DEEP_LEVELS:
            known = depth[par[todo]] >= 0
            depth[todo[known]] = depth[par[todo[known]]] + 1
            todo = todo[~known]
            levels += 1
        if len(todo):  # deep: parents come earlier in forest order, so one pass in order
            d = depth.tolist()
            pl = par.tolist()
            for i in todo.tolist():
                d[i] = d[pl[i]] + 1
            depth = np.asarray(d, dtype=np.int64)
        self.depth = depth

    def _nest_laminar(self) -> bool:  # noqa: C901 - metrics.attribution.Forest's, levels vectorised when deep
        pos, every, th, s, e, depth = self._laminar_depths()
        if depth is None:
            return False
        m = len(pos)
        parent = np.full(m, -1, dtype=np.int64)
        dmax = int(depth.max()) if m else 0
        if dmax <= DEEP_LEVELS:
            prev = np.flatnonzero(depth == 0)
            levels = [prev]
            for d in range(1, dmax + 1 if m else 0):
                cur = np.flatnonzero(depth == d)
                if not len(cur):
                    break
                k = np.searchsorted(prev, cur) - 1
                if (k < 0).any():
                    return False
                parent[cur] = prev[k]
                levels.append(cur)
                prev = cur
            ch = np.concatenate(levels[1:]) if len(levels) > 1 else np.zeros(0, np.int64)
        else:
            # every level at once: ranges ordered by level, then position; a range's parent is the
            # last one of the level above before it; levels stop at the first empty one
            order = np.argsort(depth, kind="stable")
            dl = depth[order]
            present = np.zeros(dmax + 2, dtype=bool)
            present[depth] = True
            cut = int(np.flatnonzero(~present[1:])[0]) + 1
            key = dl * (m + 1) + order
            ch = order[(dl >= 1) & (dl < cut)]
            k = np.searchsorted(key, (depth[ch] - 1) * (m + 1) + ch) - 1
            if (k < 0).any() or (dl[np.maximum(k, 0)] != depth[ch] - 1).any():
                return False
            parent[ch] = order[k]
            levels = None
        has = parent >= 0
        if len(ch):
            pp = parent[ch]
            if ((th[pp] != th[ch]) | (e[ch] > e[pp]) | (s[ch] < s[pp])).any():
                return False
        # ranges of one depth on one thread do not overlap
        if levels is not None:
            for lv in levels:
                if len(lv) > 1 and ((s[lv[1:]] < e[lv[:-1]]) & (th[lv[1:]] == th[lv[:-1]])).any():
                    return False
        elif m > 1:
            a, b = order[:-1], order[1:]
            same = (dl[1:] == dl[:-1]) & (dl[1:] < cut)
            if (same & (s[b] < e[a]) & (th[b] == th[a])).any():
                return False
        self._set_nesting(pos, every, parent, depth, has)
        return True

    # ---- walking up ----------------------------------------------------------------------------
    def _walk_up(self, cand: np.ndarray, t: np.ndarray) -> np.ndarray:
        """From each candidate range (-1: none), itself or its nearest ancestor that ends after
        ``t`` (-1 if none): one vectorised step per level for :data:`DEEP_LEVELS` levels, then, for
        the queries still walking, the last range at or before their candidate on its thread that
        ends after ``t`` (the same range for nested ranges: every range before a candidate that
        holds its start encloses it, and ends only grow walking up)."""
        out = np.full(len(cand), -1, dtype=np.int64)
        live = np.flatnonzero(cand >= 0)
        cur, tq = cand[live], t[live]
        end, parent = self.end, self.parent
        steps = 0
        while len(live):
            if steps == DEEP_LEVELS:
                got = self._ends_tree().last_above(cur + 1, tq)
                starts = self._seg_starts()
                lo = starts[np.searchsorted(starts, cur, side="right") - 1]
                out[live] = np.where(got >= lo, got, -1)
                break
            inside = end[cur] > tq
            out[live[inside]] = cur[inside]
            up = parent[cur[~inside]]
            keep = up >= 0
            live, cur, tq = live[~inside][keep], up[keep], tq[~inside][keep]
            steps += 1
        return out

    def _ends_tree(self):
        tree = getattr(self, "_deep_tree", None)
        if tree is None:
            tree = self._deep_tree = A._MaxTree(self.end)
        return tree

    def _seg_starts(self) -> np.ndarray:
        got = getattr(self, "_starts", None)
        if got is None:
            got = self._starts = np.array(sorted(a for a, _z in self._seg.values()), dtype=np.int64)
        return got

    # ---- per-range passes ------------------------------------------------------------------------
    def deep(self) -> bool:
        """Whether the ranges nest more than :data:`DEEP_LEVELS` levels (the passes below then go
        once over the ranges instead of once per level)."""
        return len(self.depth) > 0 and int(self.depth.max()) > DEEP_LEVELS

    def nested_in_same_name(self) -> np.ndarray:
        if not self.deep():
            return super().nested_in_same_name()
        # forest order is a preorder of the ranges' tree (a range's parent is on the path of the
        # range before it): one walk with the path as a stack and a count of each name on it
        n = len(self.start)
        par = self.parent.tolist()
        name = np.asarray(self.name, dtype=np.int64)
        codes, inv = np.unique(name, return_inverse=True)
        nm = inv.reshape(-1).tolist()
        on_path = [0] * len(codes)
        out = [False] * n
        stack: list[int] = []
        for i in range(n):
            p = par[i]
            while stack and stack[-1] != p:
                on_path[nm[stack.pop()]] -= 1
            if p >= 0 and not stack:  # not a preorder after all: the per-level passes
                return super().nested_in_same_name()
            out[i] = on_path[nm[i]] > 0
            on_path[nm[i]] += 1
            stack.append(i)
        return np.asarray(out, dtype=bool)

    def subtree_sum(self, values: np.ndarray) -> np.ndarray:
        if not self.deep():
            return super().subtree_sum(values)
        tot = np.asarray(values, dtype=np.int64).tolist()
        par = self.parent.tolist()
        for i in range(len(tot) - 1, -1, -1):  # children after their parent: one pass backwards
            p = par[i]
            if p >= 0:
                tot[p] += tot[i]
        return np.asarray(tot, dtype=np.int64)

    def inherit(self, values: np.ndarray, own: np.ndarray) -> np.ndarray:
        """``values`` where ``own``, else the value of the nearest ancestor that has its own (-1
        where none does): one pass in forest order."""
        out = np.where(own, values, -1).astype(np.int64)
        if not self.deep():
            for d in range(1, int(self.depth.max()) + 1 if len(self.depth) else 0):
                c = np.flatnonzero((self.depth == d) & (out < 0) & (self.parent >= 0))
                if len(c):
                    out[c] = out[self.parent[c]]
            return out
        o = out.tolist()
        par = self.parent.tolist()
        for i in range(len(o)):
            if o[i] < 0 and par[i] >= 0:
                o[i] = o[par[i]]
        return np.asarray(o, dtype=np.int64)


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
        at = lambda key: x[key][r] if x[key] is not None else none()  # noqa: E731
        mod = x["mod"][self.mods.innermost(th, tq)] if x["mod"] is not None else none()
        fr = x["frame"][self.frames.innermost(th, tq)] if x["frame"] is not None else none()
        for col, key in ((fr, "op_frame"), (mod, "fwd_mod"), (fr, "fwd_frame")):
            if x[key] is not None:
                m = np.flatnonzero(col < 0)
                col[m] = x[key][r[m]]
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
        """Per-range code arrays, each with one more entry (NONE) at index -1; None for one that
        is NONE everywhere."""
        x = getattr(self, "_x", None)
        if x is None:
            ext = lambda a: np.append(np.asarray(a, dtype=np.int64), NONE) if (np.asarray(a) >= 0).any() \
                else None  # noqa: E731
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


def site_counts(distinct: np.ndarray, inv: np.ndarray, weight) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct row: the ``weight`` (ns, float sums of integers) and the count of the entries of
    ``inv`` that point at it, for :meth:`SiteSums.add`."""
    weight = np.asarray(weight, dtype=np.float64)
    return distinct, np.bincount(inv, weights=weight, minlength=len(distinct)), np.bincount(inv, minlength=len(distinct))


class SiteSums:
    """Time (ns) and count per site row, ``{site tuple: [ns, count]}`` when read, kept as chunks
    of (distinct rows, ns, count) arrays and folded into that dict once, when first read (a
    chunk per slice and selector: building and merging a dict per slice cost a Python step per
    site, 9% of a 2 M steps-ops report). Exact: the times are integers, summed as float64 far
    below 2**53 and as Python ints in the dict. Reading it (``items``, ``get``, iteration,
    ``len``) folds; adding after that folds again."""

    __slots__ = ("chunks", "_dict")

    #: chunks kept before they are folded into one (bounds memory over many slices)
    COMPACT_CHUNKS = 64
    #: site rows from which a fold hands its freed memory back to the system at once
    TRIM_ROWS = 1 << 20

    def __init__(self) -> None:
        self.chunks: list = []
        self._dict: dict | None = None

    def add(self, distinct: np.ndarray, ns: np.ndarray, cnt: np.ndarray) -> None:
        """Add each distinct row's time (ns, float sums of integers) and count (rows counted 0 are
        left out)."""
        cnt = np.asarray(cnt)
        used = np.flatnonzero(cnt)
        if not len(used):
            return
        distinct, ns, cnt = np.asarray(distinct), np.asarray(ns), cnt
        if len(used) < len(cnt):
            distinct, ns, cnt = distinct[used], ns[used], cnt[used]
        self._extend([(distinct.astype(np.int64, copy=False), ns.astype(np.float64, copy=False),
                       cnt.astype(np.int64, copy=False))])

    def merge(self, other: "SiteSums") -> None:
        if other.chunks:
            self._extend(other.chunks)

    def _extend(self, chunks: list) -> None:
        self.chunks.extend(chunks)
        self._dict = None
        if len(self.chunks) > self.COMPACT_CHUNKS:
            self.chunks = [self._folded_arrays()]

    def _folded_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if len(self.chunks) == 1:
            return self.chunks[0]
        rows = np.concatenate([c[0] for c in self.chunks])
        distinct, inv = site_index(rows)
        ns = np.bincount(inv, weights=np.concatenate([c[1] for c in self.chunks]), minlength=len(distinct))
        cnt = np.bincount(inv, weights=np.concatenate([c[2] for c in self.chunks]).astype(np.float64),
                          minlength=len(distinct)).astype(np.int64)
        return distinct, ns, cnt

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The folded ``(distinct rows (k, m), ns, count)``, rows in lexicographic order, times as
        exact int64: what :meth:`fold` holds, without a Python tuple and list per site (2 M
        distinct sites made 0.5 GB of dict and 1 s of Python each time one was folded)."""
        if not self.chunks:
            return np.zeros((0, 0), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        big = len(self.chunks) > 1 and sum(len(c[1]) for c in self.chunks) > self.TRIM_ROWS
        distinct, ns, cnt = self._folded_arrays()
        self.chunks = [(distinct, ns, cnt)]
        if big:  # the chunks and the fold's sort keys: hand the pages back (2 M sites: 0.3 GB)
            from ..trace.store import _malloc_trim

            _malloc_trim()
        return distinct, ns.astype(np.int64), cnt

    def fold(self) -> dict:
        """``{site tuple: [ns, count]}`` (cached until the next add)."""
        if self._dict is None:
            out: dict = {}
            if self.chunks:
                distinct, ns, cnt = self._folded_arrays()
                self.chunks = [(distinct, ns, cnt)]
                for row, a, c in zip(distinct.tolist(), ns.tolist(), cnt.tolist()):
                    out[tuple(row)] = [int(a), int(c)]
            self._dict = out
        return self._dict

    def __bool__(self) -> bool:
        return bool(self.chunks)

    def __len__(self) -> int:
        return len(self.fold())

    def __iter__(self):
        return iter(self.fold())

    def __contains__(self, key) -> bool:
        return key in self.fold()

    def items(self):
        return self.fold().items()

    def values(self):
        return self.fold().values()

    def get(self, key, default=None):
        return self.fold().get(key, default)


def accumulate(acc: SiteSums, distinct: np.ndarray, inv: np.ndarray, weight) -> None:
    """Add ``weight`` (ns) and a count of 1 per entry of ``inv`` to ``acc[tuple(distinct[i])]``."""
    if not len(inv):
        return
    acc.add(*site_counts(distinct, inv, weight))


def _add(acc: dict, key: tuple, ns: int, count: int) -> None:
    cur = acc.get(key)
    if cur is None:
        acc[key] = [ns, count]
    else:
        cur[0] += ns
        cur[1] += count


def add_sites(acc: SiteSums, rows: np.ndarray, weight) -> None:
    """Add ``weight`` (ns) and a count of 1 per row to ``acc[tuple(row)] = [ns, count]``."""
    distinct, inv = site_index(rows)
    accumulate(acc, distinct, inv, weight)


def merge_sites(a: dict, b: dict) -> None:
    """Add each selector's :class:`SiteSums` of ``b`` to ``a``'s."""
    for sel, d in b.items():
        a.setdefault(sel, SiteSums()).merge(d)


def gpu_labels(kind: np.ndarray, name_id: np.ndarray, copy_kind: np.ndarray) -> np.ndarray:
    """The operator view's label of each GPU operation: a kernel's name id, else a negative code
    for "Memcpy <kind>" or "Memset"."""
    from ..metrics.ops import KIND_KERNEL, KIND_MEMCPY

    out = np.where(kind == KIND_KERNEL, name_id.astype(np.int64), _COPY_LABEL0 - 1)
    m = kind == KIND_MEMCPY
    out[m] = _COPY_LABEL0 - 2 - np.maximum(copy_kind[m].astype(np.int64), 0)
    return out


def label_text(code: int, strings) -> str:
    if code >= 0:
        return strings.get(code)
    if code == -1:
        return "(unnamed kernel)"
    if code == _COPY_LABEL0 - 1:
        return "Memset"
    k = _COPY_LABEL0 - 2 - code
    return f"Memcpy {S.COPY_KIND_LABELS.get(k, 'Unknown')}"


# ---------------------------------------------------------------------------------------------


def group_fact(text: str) -> tuple[str, bool, int]:
    """A text group's operator name, whether it is operator-like and its pyprof kind (1: a
    source-line marker, a frame)."""
    v = A.op_name(text)
    lk = A.is_op_like(v)
    kind = 0
    # pyprof texts: an operator "mod.op", or a source-line marker (a frame, kind 1)
    pp = A.pyprof(v) if v.startswith("{'") else None
    if pp is not None:
        v = pp[1]
        if pp[0] == "op":
            lk = True
        else:
            kind = 1
    return v, lk, kind


def stack_frame_label(text: str) -> str | None:
    """The frame of a range text's own call stack (``", stack = "``, a 2021 Kineto trace), or None."""
    return A.frame_label(text.split(", stack = ", 1)[1]) if ", stack = " in text else None


def _group_facts(gtexts: list[str], used: np.ndarray, code) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per text group (:mod:`nsysdoc.trace.nvtx_text`) of ``used``: its operator name's code,
    whether it is operator-like and its pyprof kind (:func:`group_fact`); computed once per group,
    in group order."""
    g = len(gtexts)
    name = np.full(g, NONE, dtype=np.int64)
    like = np.zeros(g, dtype=bool)
    kind = np.zeros(g, dtype=np.int8)
    for c in used.tolist():
        v, like[c], kind[c] = group_fact(gtexts[c])
        name[c] = code(v)
    return name, like, kind


def build(trace, rows: list, collector=None, bounds=None) -> Attributor | None:
    """The attributor from the plan's collected host ranges: ``rows`` is a list of blocks
    ``(thread, start_ns, end_ns, text group, seq, call flags, domain index, domain names, {row:
    stack text})`` of push/pop ranges that are not step markers (:func:`nsysdoc.engine.plan._nvtx_scan`);
    and the capture's backtraced CUDA calls (:func:`nsysdoc.trace.stacks.cuda_call_frames`). None
    when nothing can attribute."""
    from ..trace.nvtx_text import FLAG_DECORATED
    from ..trace.stacks import cuda_call_frames

    calls = cuda_call_frames(trace)
    if collector is not None:  # the ranges are read slice by slice (engine.attribute_sliced)
        return collector.finish(bounds, calls)
    rows = [r for r in rows if len(r[0])]
    if not rows and calls is None:
        return None
    kineto = trace.source_tool == "pytorch-profiler"
    names = Names()
    code = names.code
    gtexts = trace.nvtx_groups
    seen = np.zeros(len(gtexts), dtype=bool)
    for r in rows:
        seen[r[3]] = True
    used = np.flatnonzero(seen)
    g_name, g_like, g_kind = _group_facts(gtexts, used, code)

    # per row: global name code, sequence number, operator-like, domain name
    th, st, en, nm, sq, ol, dm, sf, kd = [], [], [], [], [], [], [], [], []
    for thread, start, end, grp, seq, flags, dom, dom_names, stacks in rows:
        own = np.full(len(grp), NONE, dtype=np.int64)
        for i, text in stacks.items():  # the op's own Python frame (2021 Kineto "Call stack")
            lab = stack_frame_label(text)
            if lab is not None:
                own[i] = code(lab)
        sf.append(own)
        kd.append(g_kind[grp])
        th.append(np.asarray(thread, np.int64))
        st.append(np.asarray(start, np.int64))
        en.append(np.asarray(end, np.int64))
        nm.append(g_name[grp])
        sq.append(np.asarray(seq, np.int64))
        ol.append(g_like[grp] | ((flags & FLAG_DECORATED) != 0))
        if kineto:  # only the profiler's families are told apart by domain
            dm.append(np.array(dom_names, dtype=object)[np.asarray(dom, np.int64)] if len(dom)
                      else np.zeros(0, object))
    rows.clear()
    z = np.zeros(0, np.int64)
    # the parts have their dtype already: no second copy of millions of rows
    cat = lambda parts, dt: np.concatenate(parts).astype(dt, copy=False) if parts else np.zeros(0, dt)  # noqa: E731
    thread, start, end, name, seq = (cat(th, np.int64), cat(st, np.int64), cat(en, np.int64), cat(nm, np.int64),
                                     cat(sq, np.int64))
    op_like = cat(ol, bool)
    op_frame = cat(sf, np.int64)
    marker = cat(kd, np.int8) == 1
    dom = np.concatenate(dm) if dm else np.zeros(0, object)
    nn = len(names)
    empty_name = np.array([not x for x in names], dtype=bool) if nn else np.zeros(0, bool)
    if kineto:
        is_cpu_op = dom == "cpu_op"
        is_py = dom == "python_function"
        nnmod = np.array([A.is_module_frame(x) for x in names], dtype=bool) if nn else np.zeros(0, bool)
        user = np.array([A.is_user_frame(x) for x in names], dtype=bool) if nn else np.zeros(0, bool)
        frame_code = np.full(nn, NONE, np.int64)
        for c in np.flatnonzero(user).tolist():
            frame_code[c] = code(A.frame_label(names[c]))
        fam_op = is_cpu_op
        fam_mod = (is_py & nnmod[name]) | (~is_cpu_op & ~is_py)
        fam_fr = is_py & ~nnmod[name] & user[name]
        fr_names = frame_code[name[fam_fr]] if fam_fr.any() else z
    else:
        fam_op = (~empty_name[name] & ~marker) if nn else np.zeros(len(name), bool)
        fam_mod = fam_op & ~op_like
        fam_fr = marker & ~empty_name[name] if nn else np.zeros(len(name), bool)
        fr_names = name[fam_fr]
    if not (fam_op.any() or fam_mod.any() or fam_fr.any()) and calls is None:
        return None
    ops = Forest(thread[fam_op], start[fam_op], end[fam_op], name[fam_op])
    mods = Forest(thread[fam_mod], start[fam_mod], end[fam_mod], name[fam_mod])
    frames = Forest(thread[fam_fr], start[fam_fr], end[fam_fr], fr_names)
    tg = np.asarray(trace.threads["global_tid"], dtype=np.int64)
    thread_pid = tg >> S.PID_SHIFT
    source = ("kineto" if kineto else "nvtx") if len(ops) else None
    attr = Attributor(source, names, ops, mods, frames, seq[fam_op], thread_pid, op_frame[fam_op])
    # coded after the backward nodes' names, as the sliced attributor codes it
    main_of, via_code = main_threads_of(tg, names)
    attr.main_of, attr.via_code = main_of, via_code
    if calls is not None:
        set_call_frames_of(attr, trace, calls)
    return attr


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


# ---------------------------------------------------------------------------------------------
# tables for the report
# ---------------------------------------------------------------------------------------------
#: Rows of the operator view kept in the JSON; entries of a finding's ``where``
ROWS_MAX = 500
WHERE_MAX = 5
NO_OPERATOR = "(no operator)"


def _best(acc, key_col: int, val_col: int, keys: list[int] | None = None) -> dict[int, int]:
    """For each value of site column ``key_col`` (of ``keys`` only, when given), the value of
    ``val_col`` with the most time (ties: the lower code); -1 values are skipped."""
    if isinstance(acc, SiteSums):
        distinct, ns, _cnt = acc.arrays()
        if not len(ns):
            return {}
        keep = distinct[:, val_col] >= 0
        if keys is not None:
            keep &= np.isin(distinct[:, key_col], np.asarray(keys, dtype=np.int64))
        pairs, inv = site_index(distinct[keep][:, [key_col, val_col]])
        if not len(pairs):
            return {}
        tot = _sums(inv, ns[keep], len(pairs))
        # per key: the most time first, then the lower code (pairs are in (key, value) order)
        o = np.lexsort((pairs[:, 1], -tot, pairs[:, 0]))
        first = np.ones(len(o), dtype=bool)
        first[1:] = pairs[o[1:], 0] != pairs[o[:-1], 0]
        o = o[first]
        return dict(zip(pairs[o, 0].tolist(), pairs[o, 1].tolist()))
    tot: dict = {}
    for k, (ns, _c) in acc.items():
        v = k[val_col]
        if v < 0:
            continue
        kk = (k[key_col], v)
        tot[kk] = tot.get(kk, 0) + ns
    best: dict = {}
    for (a, v), ns in tot.items():
        cur = best.get(a)
        if cur is None or ns > cur[1] or (ns == cur[1] and v < cur[0]):
            best[a] = (v, ns)
    return {a: v for a, (v, _ns) in best.items()}


def _sums(inv: np.ndarray, ns: np.ndarray, k: int) -> np.ndarray:
    """Sums of integer nanoseconds per group, exact (float sums of integers below 2**53, else
    int64 adds)."""
    if not len(ns) or float(np.abs(ns).sum(dtype=np.float64)) < 2.0 ** 53:
        return np.bincount(inv, weights=ns.astype(np.float64), minlength=k).astype(np.int64)
    out = np.zeros(k, dtype=np.int64)
    np.add.at(out, inv, ns)
    return out


def _first_rows(value: np.ndarray, name_of, limit: int) -> list[int]:
    """The first ``limit`` row indices of ``value`` ordered by ``(-value, name_of(row))``, as a
    stable sort of every row would give them, reading the names of only the rows that can be
    among them: those above the ``limit``-th largest value and, of those equal to it, the ones
    whose names are smallest (equal names all kept, for the sort to order them by index)."""
    rows = np.arange(len(value), dtype=np.int64)
    if len(rows) > limit:
        thr = np.partition(value, len(value) - limit)[len(value) - limit]
        above, tied = rows[value > thr], rows[value == thr]
        need = limit - len(above)
        if need < len(tied):
            names = [name_of(r) for r in tied.tolist()]
            cutoff = heapq.nsmallest(need, names)[-1]
            tied = tied[np.fromiter((x <= cutoff for x in names), dtype=bool, count=len(names))]
        rows = np.sort(np.concatenate([above, tied]))
    v = value[rows].tolist()
    order = sorted(range(len(rows)), key=lambda i: (-v[i], name_of(int(rows[i]))))
    return [int(rows[i]) for i in order[:limit]]


def operator_view(attr: Attributor | None, strings) -> dict:
    """``metrics.operators``: per operator name, calls, GPU and CPU time, GPU operations, top
    kernel, module and frame; then the same GPU time grouped by module and by frame. Rows are
    chosen from arrays (a capture with millions of distinct operator names builds the 500 rows
    shown, not one dict per name)."""
    out = {"source": None, "rows": [], "row_count": 0, "modules": [], "frames": [],
           "gpu_ms": None, "attributed_pct": None}
    if attr is None or attr.source is None:
        return out
    names = attr.names
    tot = attr.op_totals()
    calls, self_gpu, gpu, cpu, self_cpu, kernels = (tot[k] for k in ("calls", "self_gpu", "gpu", "cpu", "self_cpu",
                                                                      "kernels"))
    outer = tot.get("outer_calls")
    op_codes = np.flatnonzero(calls > 0)
    # the rows shown: the first ROWS_MAX by (-self GPU ms, name), "(no operator)" after the
    # operators in input order (the stable sort of every row gave them so)
    sg = np.asarray(self_gpu, dtype=np.float64)[op_codes] / 1e6
    none_row = len(op_codes)
    name_of = lambda i: names[int(op_codes[i])] if i < none_row else NO_OPERATOR  # noqa: E731
    value = np.append(sg, attr.none_gpu_ns / 1e6) if attr.none_ops else sg
    chosen = _first_rows(value, name_of, ROWS_MAX)
    chosen += _cpu_rows(np.asarray(cpu, dtype=np.float64)[op_codes] / 1e6, name_of, chosen)
    ops_shown = [int(op_codes[i]) if i < none_row else NONE for i in chosen]
    mod = _best(attr.sites_all, 0, 1, ops_shown)
    frame = _best(attr.sites_all, 0, 2, ops_shown)
    top = _top_labels(attr.pairs, set(ops_shown), strings)
    rows = []
    for c in ops_shown:
        t = top.get(c)
        if c == NONE:
            rows.append({"name": NO_OPERATOR, "calls": 0, "self_gpu_ms": attr.none_gpu_ns / 1e6,
                         "gpu_ms": attr.none_gpu_ns / 1e6, "self_cpu_ms": None, "cpu_ms": None,
                         "kernels": attr.none_ops, "top_kernel": label_text(t[0], strings) if t else None,
                         "module": names[mod[NONE]] if NONE in mod else None,
                         "frame": names[frame[NONE]] if NONE in frame else None,
                         "cpu_us_per_call": None, "gpu_us_per_call": None, "cpu_exceeds_gpu": False,
                         "outer_calls": None})
            continue
        rows.append({"name": names[c], "calls": int(calls[c]), "self_gpu_ms": self_gpu[c] / 1e6,
                     "gpu_ms": gpu[c] / 1e6, "self_cpu_ms": self_cpu[c] / 1e6, "cpu_ms": cpu[c] / 1e6,
                     "kernels": int(kernels[c]), "top_kernel": label_text(t[0], strings) if t else None,
                     "module": names[mod[c]] if c in mod else None,
                     "frame": names[frame[c]] if c in frame else None,
                     **_per_call(cpu[c], gpu[c], outer[c] if outer is not None else calls[c]),
                     # the calls not inside a call of the same name: what the per-call times divide by
                     "outer_calls": int(outer[c] if outer is not None else calls[c])})
    out.update(source=attr.source, rows=rows, row_count=len(op_codes) + (1 if attr.none_ops else 0),
               gpu_ms=attr.total_gpu_ns / 1e6,
               attributed_pct=(attr.total_gpu_ns - attr.none_gpu_ns) / attr.total_gpu_ns * 100
               if attr.total_gpu_ns else None)
    for col, key in ((1, "modules"), (2, "frames")):
        out[key] = _grouped_rows(attr.sites_all, col, names)
    return out


def _cpu_rows(cpu_ms: np.ndarray, name_of, chosen: list[int]) -> list[int]:
    """Rows among the first ROWS_MAX by ``(-CPU ms, name)`` that ``chosen`` (the first by self GPU
    time) lacks, in that order: with them the JSON holds the true top rows by either time, so a
    CPU-heavy operator with little GPU time is never cut (issue 47, the CPU-side table)."""
    if not len(cpu_ms):
        return []
    have = set(chosen)
    return [i for i in _first_rows(cpu_ms, name_of, ROWS_MAX) if i not in have]


def _per_call(cpu_ns, gpu_ns, outer_calls) -> dict:
    """An operator row's per-call times (µs; calls not inside a call of the same name, as its CPU
    and GPU totals count them) and whether the CPU dispatch is slower than the GPU work: it
    launched GPU work, and its inclusive CPU time per call exceeds the summed durations of the GPU
    operations it launched, children included, per call (docs/glossary.md, "Operators")."""
    n = int(outer_calls)
    if n <= 0:
        return {"cpu_us_per_call": None, "gpu_us_per_call": None, "cpu_exceeds_gpu": False}
    c, g = float(cpu_ns) / 1e3 / n, float(gpu_ns) / 1e3 / n
    return {"cpu_us_per_call": c, "gpu_us_per_call": g, "cpu_exceeds_gpu": bool(g > 0 and c > g)}


def _top_labels(pairs, ops: set, strings) -> dict:
    """Per operator code of ``ops``: (its GPU label with the most time, that time); ties: the
    label whose text sorts first, then the lower code."""
    top: dict = {}
    if isinstance(pairs, SiteSums):
        distinct, ns, _cnt = pairs.arrays()
        if not len(ns) or not ops:
            return top
        m = np.flatnonzero(np.isin(distinct[:, 0], np.fromiter(ops, dtype=np.int64, count=len(ops))))
        items = zip(distinct[m, 0].tolist(), distinct[m, 1].tolist(), ns[m].tolist())
    else:
        items = ((op, label, ns) for (op, label), (ns, _c) in pairs.items() if op in ops)
    for op, label, ns in items:
        cur = top.get(op)
        if cur is None or ns > cur[1] or (ns == cur[1] and label_text(label, strings) < label_text(cur[0], strings)):
            top[op] = (label, ns)
    return top


def _grouped_rows(sites, col: int, names) -> list[dict]:
    """The operator view's ``modules`` (``col`` 1) or ``frames`` (2): GPU time and operations per
    value of that site column, with its operator of most time (ties: the lower code); the first
    ROWS_MAX by (no name last, -time, name), none when no value has a name."""
    if isinstance(sites, SiteSums):
        distinct, ns, cnt = sites.arrays()
    else:
        items = list(sites.items())
        distinct = np.array([k for k, _v in items], dtype=np.int64).reshape(len(items), -1)
        ns = np.array([v[0] for _k, v in items], dtype=np.int64)
        cnt = np.array([v[1] for _k, v in items], dtype=np.int64)
    if not len(ns):
        return []
    v = distinct[:, col]
    vmin, vmax = int(v.min()), int(v.max())
    if vmax - vmin <= max(1 << 22, 4 * len(v)):  # codes are names: a count per code, no sort
        key = v - vmin
        hit = np.bincount(key, minlength=vmax - vmin + 1) > 0
        vals = np.flatnonzero(hit) + vmin
        inv = (np.cumsum(hit) - 1)[key]
    else:
        vals, inv = np.unique(v, return_inverse=True)
        inv = inv.reshape(-1)
    v_ns, v_cnt = _sums(inv, ns, len(vals)), _sums(inv, cnt, len(vals))
    if not (vals >= 0).any():
        return []
    ms = v_ns / 1e6
    named = np.flatnonzero(vals >= 0)
    chosen = _first_rows(ms[named], lambda i: names[int(vals[named[i]])], ROWS_MAX)
    shown = [int(named[i]) for i in chosen]
    if len(shown) < ROWS_MAX and (vals < 0).any():
        shown.append(int(np.flatnonzero(vals < 0)[0]))  # no name: after every named row
    # the operator of most time per value shown (ties: the lower operator code)
    m = np.isin(inv, np.asarray(shown, dtype=np.int64))
    pairs, pinv = site_index(np.stack([v[m], distinct[m, 0]], axis=1))
    p_ns = _sums(pinv, ns[m], len(pairs))
    o = np.lexsort((pairs[:, 1], -p_ns, pairs[:, 0]))
    first = np.ones(len(o), dtype=bool)
    first[1:] = pairs[o[1:], 0] != pairs[o[:-1], 0]
    top_op = dict(zip(pairs[o[first], 0].tolist(), pairs[o[first], 1].tolist()))
    out = []
    for i in shown:
        val = int(vals[i])
        b = top_op[val]
        out.append({"name": names[val] if val >= 0 else None, "gpu_ms": int(v_ns[i]) / 1e6, "gpu_ops": int(v_cnt[i]),
                    "top_op": names[b] if b >= 0 else NO_OPERATOR})
    return out


def where_table(attr: Attributor | None, where: dict, selector: str, ndev: int, strings=None,
                kernel_name: str | None = None) -> list[dict]:
    """A finding's ``where``: the sites of a selector's time, most first, with their share of it
    and their time per GPU (ms; the mean over the ``ndev`` devices with GPU work)."""
    if attr is None or attr.source is None and not len(attr.frames) and not len(attr.mods) and not attr._calls:
        return []
    got = where.get("by_kernel" if selector == "top_kernel" else selector)
    if isinstance(got, SiteSums):
        return _where_rows(attr, got, selector, ndev, strings, kernel_name)
    if selector == "top_kernel":
        acc: dict = {}
        by = where.get("by_kernel", {})
        if kernel_name is not None and strings is not None and by:
            # the name ids with that name, each looked up once (there are many more sites x names)
            ids = {k[5] for k in by}
            match = {i for i in ids if strings.get(i) == kernel_name}
            for k, v in by.items():
                if k[5] in match:
                    _add(acc, k[:5], v[0], v[1])
    else:
        acc = where.get(selector, {})
    total = sum(v[0] for v in acc.values())
    if not total:
        return []
    rows = sorted(acc.items(), key=lambda kv: (-kv[1][0], kv[0]))[:WHERE_MAX]
    return [_where_row(attr, k, ns, c, total, ndev) for k, (ns, c) in rows]


#: How a where row's operator was found when not by the launching thread's own innermost operator
#: range (docs/glossary.md, "Operators and where")
VIA_SEQUENCE = "sequence"
VIA_RANGE = "enclosing range"


def _where_row(attr, k, ns: int, count: int, total: int, ndev: int) -> dict:
    """One where row from its site codes: ``via`` is ``"sequence"`` when the work ran in an
    autograd backward node whose forward operator was found by its sequence number, ``"enclosing
    range"`` when the launching thread had no operator range and the main thread's ranges open at
    the launch name it (:meth:`Attributor.sites_and_ranges`), else None."""
    names = attr.names
    nm = lambda c: names[c] if c >= 0 else None  # noqa: E731
    enclosing = k[3] >= 0 and k[3] == getattr(attr, "via_code", NONE)
    via = VIA_RANGE if enclosing else VIA_SEQUENCE if k[3] >= 0 and k[4] >= 0 else None
    return {"op": nm(k[0]) if k[0] >= 0 else NO_OPERATOR, "module": nm(k[1]), "frame": nm(k[2]),
            "backward_op": None if enclosing else nm(k[3]), "forward_op": None if enclosing else nm(k[4]),
            "via": via, "share_pct": ns / total * 100, "ms": ns / 1e6 / max(ndev, 1), "count": count}


def _where_rows(attr: Attributor, acc: SiteSums, selector: str, ndev: int, strings, kernel_name) -> list[dict]:
    """:func:`where_table` from a selector's arrays: the WHERE_MAX sites of most time (ties: the
    lower site row), picked with one sort of the arrays, not a dict per site."""
    distinct, ns, cnt = acc.arrays()
    if selector == "top_kernel":
        if kernel_name is None or strings is None or not len(ns):
            return []
        ids = np.unique(distinct[:, 5])
        match = [i for i in ids.tolist() if strings.get(i) == kernel_name]
        m = np.isin(distinct[:, 5], np.asarray(match, dtype=np.int64))
        if not m.any():
            return []
        distinct, inv = site_index(distinct[m][:, :5])
        ns, cnt = _sums(inv, ns[m], len(distinct)), _sums(inv, cnt[m], len(distinct))
    total = int(ns.sum()) if len(ns) else 0
    if not total:
        return []
    cand = np.arange(len(ns))
    if len(ns) > WHERE_MAX:  # only the sites with at least the WHERE_MAX-th most time are sorted
        cand = np.flatnonzero(ns >= np.partition(ns, len(ns) - WHERE_MAX)[len(ns) - WHERE_MAX])
    d = distinct[cand]
    o = cand[np.lexsort(tuple(d[:, j] for j in range(d.shape[1] - 1, -1, -1)) + (-ns[cand],))[:WHERE_MAX]]
    return [_where_row(attr, k, n_, c, total, ndev)
            for k, n_, c in zip(distinct[o].tolist(), ns[o].tolist(), cnt[o].tolist())]


#: What adds attribution data a capture lacks: (what is missing, the switch, where it is documented).
#: Versions and syntax: docs/capture.md, "Where: operators and stacks".
HINTS = {
    "nvtx_ops": ("operator ranges (which operator or code region launched each kernel)",
                 "for PyTorch, nsysdoc capture --where (nsys profile --pytorch=autograd-nvtx, nsys 2024 or newer) or "
                 "torch.autograd.profiler.emit_nvtx(); elsewhere, NVTX ranges (nvtxRangePush/Pop) around your code"),
    "nsys_stacks": ("Python lines (the call stack of each CUDA call)",
                    "profile the same steps with torch.profiler.profile(with_stack=True) and report on that trace; "
                    "nsys --python-backtrace=cuda stacks show in the Nsight Systems GUI but their Python frames are "
                    "not in the SQLite export nsysdoc reads"),
    "kineto_stack": ("Python lines and nn.Module names",
                     "torch.profiler.profile(with_stack=True)"),
    "kineto_modules": ("regions that group operators (model parts)",
                       "torch.profiler.record_function('name') around model parts, or with_stack=True for nn.Module names"),
}


def missing_data(trace, attr: Attributor | None) -> list[dict]:
    """What this capture lacks for attribution, and the switch that adds it."""
    keys = []
    if trace.source_tool == "pytorch-profiler":
        if attr is None or not (len(attr.frames) or (attr.op_frame >= 0).any()):
            keys.append("kineto_stack")
        if attr is None or not len(attr.mods):
            keys.append("kineto_modules")
    else:
        if attr is None or attr.source is None:
            keys.append("nvtx_ops")
        if attr is None or not (attr._calls or len(attr.frames)):  # no frame of the program's own code
            keys.append("nsys_stacks")
    return [{"key": k, "what": HINTS[k][0], "switch": HINTS[k][1]} for k in keys]
