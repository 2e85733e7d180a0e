"""Range forests that stay fast however deep their ranges nest, for the attributor.

Why a module of its own: :class:`nsysdoc.metrics.attribution.Forest` defines the answers (innermost
range, ancestors, subtree sums) with one numpy pass per nesting level, which is quadratic on the
hostile or broken exports whose ranges nest tens of thousands deep. The engine's :class:`Forest`
gives the same answers in linear or ``n log n`` time; it is a data structure, apart from what the
attributor does with it (:mod:`nsysdoc.engine.attributor`). Moved out of
``nsysdoc/engine/attribute.py`` (issue 51: one concern per module); re-exported there.
"""
from __future__ import annotations

import numpy as np

from ..metrics import attribution as A


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
    @staticmethod
    def _depths(par: np.ndarray) -> np.ndarray:
        """:meth:`metrics.attribution.Forest._depths` (its parents from the same max-tree search,
        :meth:`_nest`), level by level for :data:`DEEP_LEVELS` levels, then one pass in forest
        order, where a range's parent always comes before it."""
        depth = np.full(len(par), -1, dtype=np.int64)
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
        return depth

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
