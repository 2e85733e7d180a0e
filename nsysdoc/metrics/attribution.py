"""Where GPU work comes from: host ranges that enclose a launch, and names for them.

Pure functions over numpy arrays (no trace, no store). Definitions (``docs/glossary.md``,
"Operators and where"):

* A **range family** is a set of host ranges nested per thread: operators (Kineto ``cpu_op``, or
  NVTX push/pop ranges of an Nsight Systems export), modules (``record_function`` regions and
  ``nn.Module`` frames), user Python frames. Each family is a :class:`Forest`.
* The **innermost** range of a family at ``(thread, t)`` is, among the ranges of that thread with
  ``start <= t < end``, the one that starts last; ties: the shorter one, then the later one in
  input order. For properly nested ranges this is the deepest one.
* A **launch** is attributed at its start time on its thread.
"""
from __future__ import annotations

import re

import numpy as np

from ..trace.nvtx_text import seq_of  # noqa: F401 - the rule lives with the loader's text facts

#: The selections a rule's ``where:`` can name: what is weighed, and by what (docs/rules.md). The
#: engine adds each one's time per site (nsysdoc.engine.attribute).
SELECTORS = {
    "gpu_ops": "every GPU operation in the window, by its duration",
    "kernels": "every kernel in the window, by its duration",
    "tiny_kernels": "kernels shorter than 10 us in the window, by their duration",
    "top_kernel": "the kernel with the most GPU time (by full name), by its duration",
    "nccl_kernels": "NCCL kernels in the window, by their duration",
    "fp32_kernels": "FP32 GEMM/convolution kernels in the window, by their duration",
    "underfilled_kernels": "kernels with fewer blocks than the GPU has SMs in the window, by their duration",
    "copies": "memory copies in the window, by their duration",
    "copy_ops": "memory copies and memsets in the window (what copy-only time counts), by their duration",
    "pageable_copies": "host<->device copies from or to pageable memory, by their duration",
    "dtoh_copies": "device-to-host copies larger than a scalar, by their duration",
    "launch_gaps": "GPU idle time of class launch, at the launch of the operation that ends each gap",
    "dependency_gaps": "GPU idle time of class dependency, at the launch of the operation that waited (ends each gap)",
    "host_gaps": "GPU idle time of class host, at the middle of each gap on the launching thread",
    "input_gaps": "GPU idle time of class input (waiting for data), at the middle of each gap on the launching thread",
    "sync_gaps": "GPU idle time of class sync, at the start of each gap on the launching thread (inside the blocking call)",
    "sync_calls": "blocking CUDA calls (synchronize, synchronous copies) in the window, by their duration",
    "alloc_calls": "CUDA allocation calls (cudaMalloc, cudaFree...) in the window, by their duration",
}

# ---------------------------------------------------------------------------------------------
# names
# ---------------------------------------------------------------------------------------------
#: PyTorch's per-call fields in emit_nvtx / --pytorch=autograd-nvtx range texts
#: ("aten::addmm, seq = 2, op_id = 5, sizes = [[1, 2]], input_op_ids = [(1, 0)]").
_CALL_FIELDS = re.compile(r",\s*(?:seq|op_id)\s*=\s*\d+|,\s*(?:sizes|input_op_ids|stack)\s*=.*$", re.DOTALL)
#: autograd backward nodes: "MulBackward0" (older PyTorch: "MulBackward"), a name ending in
#: "Backward" + digits right after a letter, digit or "_"; "torch::autograd::AccumulateGrad" is not
#: one, nor a user's range named "Backward" or "loss Backward" (issue 46: the range autograd's
#: thread works inside)
_BACKWARD = re.compile(r"(?<=\w)Backward\d*$")
_EVALUATE = "autograd::engine::evaluate_function: "


def op_name(text: str) -> str:
    """An operator's name: the range text without PyTorch's per-call fields (seq, op_id, sizes,
    input_op_ids)."""
    if ", " not in text and "," not in text:
        return text.strip()
    return _CALL_FIELDS.sub("", text).strip()


def is_backward(name: str) -> bool:
    """An autograd backward node (``MulBackward0``) or its ``evaluate_function`` wrapper."""
    return bool(_BACKWARD.search(name)) or name.startswith(_EVALUATE)


def backward_node(name: str) -> str:
    """``autograd::engine::evaluate_function: MulBackward0`` -> ``MulBackward0``."""
    return name[len(_EVALUATE):] if name.startswith(_EVALUATE) else name


#: NVTX texts that are operators (PyTorch ops and autograd nodes) rather than regions a user named
_OP_LIKE = re.compile(r"::|(?<=\w)Backward\d*$|,\s*(?:seq|op_id)\s*=\s*\d+|"
                      r"^(?:nccl|cublas|cublasLt|cudnn|cufft|cusparse|cusolver|cuda|cu)[A-Z]\w*$")


def is_op_like(text: str) -> bool:
    """An NVTX range text that is a PyTorch operator (``aten::mm``, ``MulBackward0``, any range
    with emit_nvtx's ``seq =`` / ``op_id =`` fields) or a library call (``ncclGroupEnd``,
    ``cublasSgemm``: library ranges whose domain has no name in a sliced export) rather than a region a user named
    (``forward``, ``train step``). Used to find the module of an Nsight Systems launch: the
    innermost enclosing range that is not operator-like."""
    return bool(_OP_LIKE.search(text))


# the user's-frame rule is the Kineto reader's too: it lives in trace/
from ..trace.python_frames import _FRAME, is_user_frame  # noqa: E402,F401 - re-exported


def frame_label(name: str) -> str | None:
    """``"train.py(184): <module>"`` -> ``"train.py:184 in <module>"``; None when the name is not
    a file-and-line frame."""
    m = _FRAME.match(name.strip())
    if not m:
        return None
    return f"{m.group('file')}:{m.group('line')} in {m.group('func').strip()}"


_PYPROF_OP = re.compile(r"^\{'mod': '([^']*)', 'op': '([^']*)'")
_PYPROF_MARK = re.compile(r"^\{'traceMarker': \[")
_PYPROF_LINE = re.compile(r"'([^']+):(\d+)'")


def pyprof(text: str) -> tuple[str, str] | None:
    """NVTX texts of NVIDIA's pyprof (``pyprof.nvtx.init()``): ``("op", "torch.nn.functional.conv2d")``
    for ``{'mod': 'torch.nn.functional', 'op': 'conv2d', 'args': [...]}``, ``("frame",
    "model.py:148")`` for ``{'traceMarker': ['model.py:148', '.../site-packages/...'], ...}`` (its
    first entry outside libraries), else None."""
    if not text.startswith("{'"):
        return None
    m = _PYPROF_OP.match(text)
    if m:
        return "op", f"{m.group(1)}.{m.group(2)}" if m.group(1) else m.group(2)
    if _PYPROF_MARK.match(text):
        for f, line in _PYPROF_LINE.findall(text):
            if is_user_frame(f"{f}({line}): "):
                return "frame", f"{f}:{line}"
        return "frame", ""
    return None


def is_module_frame(name: str) -> bool:
    """A Kineto ``nn.Module: Linear_3`` frame (``with_stack=True``)."""
    return name.startswith("nn.Module: ")


#: The backward-node column's text of a site attributed through another thread's enclosing range
#: (:func:`main_threads`): the where table shows it as ``via: "enclosing range"``, never as a node
VIA_ENCLOSING = "(launched on another thread)"


def main_threads(global_tid) -> np.ndarray:
    """Per thread (index into ``global_tid``, serialized ``<hw:8><vm:8><pid:24><tid:24>``): the
    index of its process's main thread, the one whose tid equals the pid (Python's main thread,
    where ``loss.backward()`` is called and the user's ranges are), or -1 for the main thread
    itself and for a thread whose process has no such thread. Work launched by another thread
    (autograd's engine thread) outside every operator range of its own is attributed to the
    ranges the main thread has open at the launch (``docs/glossary.md``, "Operators and where");
    never across processes: the process key is every bit above the tid."""
    g = np.asarray(global_tid, dtype=np.int64)
    out = np.full(len(g), -1, dtype=np.int64)
    if not len(g):
        return out
    proc = g >> 24
    main = np.flatnonzero((g & 0xFFFFFF) == ((g >> 24) & 0xFFFFFF))
    if not len(main):
        return out
    # one main thread per process key (the first, if a table repeats it)
    pk, first = np.unique(proc[main], return_index=True)
    main = main[first]
    pos = np.clip(np.searchsorted(pk, proc), 0, len(pk) - 1)
    hit = pk[pos] == proc
    out[hit] = main[pos[hit]]
    out[out == np.arange(len(g))] = -1
    return out


# ---------------------------------------------------------------------------------------------
# grouping rows of codes
# ---------------------------------------------------------------------------------------------
def site_rows(*cols) -> np.ndarray:
    """Columns as one ``(n, k)`` int64 array in column-major order: :func:`site_index` reads it a
    column at a time (a row-major array's columns are strided: 2-3x slower)."""
    n = len(cols[0]) if cols else 0
    out = np.empty((n, len(cols)), dtype=np.int64, order="F")
    for k, c in enumerate(cols):
        out[:, k] = c
    return out


def site_index(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``rows`` (n, k), in lexicographic order, and each row's index into
    them. Each column is a digit (its value less the column's minimum) of one integer key; when
    the keys are few (codes are names: there are few), a count per key gives the grouping, else a
    sort (the key factorised when it would overflow)."""
    rows = np.asarray(rows, dtype=np.int64)
    n = len(rows)
    if n == 0:
        return rows[:0], np.zeros(0, dtype=np.int64)
    lo, hi = rows.min(axis=0), rows.max(axis=0)
    bases = [int(b) - int(a) + 1 for a, b in zip(lo.tolist(), hi.tolist())]
    total = 1
    for b in bases:
        total *= b
    if total <= max(4 * n, 1 << 16):
        w = np.ones(len(bases), dtype=np.int64)
        for c in range(len(bases) - 2, -1, -1):
            w[c] = w[c + 1] * bases[c + 1]
        key = rows @ w - int(lo @ w)  # one pass over the rows (a column at a time is strided)
        uk = np.flatnonzero(np.bincount(key, minlength=total))
        rank = np.zeros(total, dtype=np.int64)
        rank[uk] = np.arange(len(uk))
        distinct = (uk[:, None] // w) % np.array(bases, dtype=np.int64) + lo
        return distinct, rank[key]
    r = rows - lo
    key = r[:, 0].copy()
    for c in range(1, r.shape[1]):
        base = bases[c]
        if int(key.max()) >= (1 << 62) // max(base, 1):
            key = np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
        key = key * base + r[:, c]
    _u, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return rows[first], np.asarray(inv, dtype=np.int64).reshape(-1)


# ---------------------------------------------------------------------------------------------
# nesting
# ---------------------------------------------------------------------------------------------
class Forest:
    """Host ranges of one family on their threads.

    Built from aligned arrays (``thread`` index, ``start``/``end`` ns, ``name`` code); ranges that
    end before they start are dropped; ranges of zero length are kept (they count as calls) but
    hold no time. Forest order is by thread, start, then longest first, then input order;
    ``order`` maps a forest index to the input index.

    :meth:`innermost` is exactly the definition above: the last range in forest order among those
    of the thread with ``start <= t < end``. A range's ``parent`` is the innermost range at its
    start among those before it (so ranges that overlap without nesting still find the range that
    holds their start); ``depth`` counts the parents above it. When the ranges nest properly (the
    usual case) both come from counting and one walk up the parents per level; otherwise from one
    primitive, "the last range before position p whose end is after t", answered for many queries
    at once with a max-tree over the ends (``O(log n)`` numpy passes).
    """

    def __init__(self, thread, start, end, name) -> None:
        thread = np.asarray(thread, dtype=np.int64)
        start = np.asarray(start, dtype=np.int64)
        end = np.asarray(end, dtype=np.int64)
        ok = end >= start
        if ok.all():  # the usual case: no copies
            keep, th, s, e = None, thread, start, end
            n = len(s)
        else:
            keep = np.flatnonzero(ok)
            n = len(keep)
            th, s, e = thread[keep], start[keep], end[keep]
        del ok
        order = _forest_order(th, s, e) if n else np.arange(n)
        self.order = order if keep is None else keep[order]
        self.thread = th[order]
        self.start = s[order]
        self.end = e[order]
        self.name = np.asarray(name)[self.order] if n else np.zeros(0, np.int64)
        # set by the nesting passes below (which allocate them), or empty
        self.depth = np.zeros(0, dtype=np.int64)
        self.parent = np.full(0, -1, dtype=np.int64)
        self._seg: dict[int, tuple[int, int]] = {}
        if n:
            self._seg = {int(self.thread[a]): (a, z) for a, z in _runs(self.thread)}
            self._events_ok = self._nest_laminar()
            if not self._events_ok:
                self._tree = _MaxTree(self.end)
                self._nest()

    def __len__(self) -> int:
        return len(self.start)

    def _nest(self) -> None:
        """The general path: each range's parent (the last range of its thread before it that
        ends after its start, found in the max-tree), then its depth (:meth:`_depths`)."""
        n = len(self.start)
        pos = np.arange(n)
        lo = np.empty(n, dtype=np.int64)
        for a, z in self._seg.values():
            lo[a:z] = a
        par = self._tree.last_above(pos, self.start)
        par[par < lo] = -1
        self.parent = par
        self.depth = self._depths(par)

    @staticmethod
    def _depths(par: np.ndarray) -> np.ndarray:
        """Depth of each range from its parent: parents come earlier in forest order, so resolve
        level by level."""
        depth = np.full(len(par), -1, dtype=np.int64)
        depth[par < 0] = 0
        todo = np.flatnonzero(par >= 0)
        while len(todo):
            known = depth[par[todo]] >= 0
            depth[todo[known]] = depth[par[todo[known]]] + 1
            todo = todo[~known]
        return depth

    def _nest_laminar(self) -> bool:
        """The fast path, for ranges that nest properly (push/pop ranges, profiler ops): depth by
        counting the ranges open at each start, parent as the last range one level up, checked
        to be laminar (:meth:`innermost` then walks up from the last range starting before the
        query). False when the ranges do not nest, for the general path."""
        pos, every, th, s, e, depth = self._laminar_depths()
        if depth is None:
            return False
        m = len(pos)
        parent = np.full(m, -1, dtype=np.int64)
        prev = np.flatnonzero(depth == 0)
        levels = [prev]
        for d in range(1, int(depth.max()) + 1 if m else 0):
            cur = np.flatnonzero(depth == d)
            if not len(cur):
                break
            k = np.searchsorted(prev, cur) - 1
            if (k < 0).any():
                return False
            parent[cur] = prev[k]
            levels.append(cur)
            prev = cur
        has = parent >= 0
        ch = np.concatenate(levels[1:]) if len(levels) > 1 else np.zeros(0, np.int64)  # every range with a parent
        if len(ch):
            pp = parent[ch]
            # laminar: inside the parent, on the same thread
            if ((th[pp] != th[ch]) | (e[ch] > e[pp]) | (s[ch] < s[pp])).any():
                return False
        # ranges of one depth on one thread do not overlap: in order, each starts after the
        # previous one ends (with every range inside its parent, this is "siblings do not
        # overlap": two ranges of a depth under different parents lie in disjoint parents)
        for lv in levels:
            if len(lv) > 1 and ((s[lv[1:]] < e[lv[:-1]]) & (th[lv[1:]] == th[lv[:-1]])).any():
                return False
        self._set_nesting(pos, every, parent, depth, has)
        return True

    def _laminar_depths(self):
        """The positive-length ranges (``pos``; ``every``: all of them, so views not copies), their
        thread, start, end, and depth by counting the ranges open at each start; depth None when
        the ranges cannot nest (a range ends before one that started after it opened...)."""
        pos = np.flatnonzero(self.end > self.start)
        every = len(pos) == len(self.start)
        if every:  # no zero-length range: views, not copies
            th, s, e = self.thread, self.start, self.end
            segs = sorted(self._seg.values())
        else:
            th, s, e = self.thread[pos], self.start[pos], self.end[pos]
            segs = _runs(th)
        m = len(pos)
        depth = np.empty(m, dtype=np.int64)
        if m:
            for lo, hi in segs:
                # the ends are nearly sorted in start order: timsort ("stable") is 3-4x quicker here
                ends = np.sort(e[lo:hi], kind="stable")
                depth[lo:hi] = np.arange(hi - lo) - np.searchsorted(ends, s[lo:hi], side="right")
        if m and depth.min() < 0:
            return pos, every, th, s, e, None
        return pos, every, th, s, e, depth

    def _set_nesting(self, pos: np.ndarray, every: bool, parent: np.ndarray, depth: np.ndarray,
                     has: np.ndarray) -> None:
        """Store the laminar path's answer (parent and depth of the positive-length ranges
        ``pos``), then place the zero-length ranges."""
        if every:  # positions are forest indices already
            self.parent = parent
            self.depth = depth
        else:
            n = len(self.start)
            self.parent = np.full(n, -1, dtype=np.int64)
            self.parent[pos] = np.where(has, pos[np.maximum(parent, 0)], -1)
            self.depth = np.zeros(n, dtype=np.int64)
            self.depth[pos] = depth
        self._events_ok = True
        # zero-length ranges: inside the innermost range holding their time, found by walking up
        # from the last range of positive length before them in forest order (every range of the
        # thread that starts at or before theirs; ties put the longer ones first)
        z = np.flatnonzero(self.end == self.start)
        if len(z):
            n = len(self.start)
            last_pos = np.full(n, -1, dtype=np.int64)
            last_pos[pos] = pos
            np.maximum.accumulate(last_pos, out=last_pos)
            c = last_pos[z]
            c = np.where((c >= 0) & (self.thread[np.maximum(c, 0)] == self.thread[z]), c, -1)
            par = self._walk_up(c, self.start[z])
            self.parent[z] = par
            self.depth[z] = np.where(par >= 0, self.depth[np.maximum(par, 0)] + 1, 0)

    def innermost(self, thread, t) -> np.ndarray:
        """Forest index of the innermost range containing time ``t`` on ``thread`` (-1 if none)."""
        thread = np.asarray(thread, dtype=np.int64)
        t = np.asarray(t, dtype=np.int64)
        out = np.full(len(t), -1, dtype=np.int64)
        if not self._seg or not len(t):
            return out
        if getattr(self, "_events_ok", False):
            # nested ranges: the ranges holding t are the ancestors of the last range that starts
            # at or before t; the innermost is the first of them, walking up, that ends after t
            for g, a, z in self._groups(thread, self._seg):
                c = a + np.searchsorted(self.start[a:z], t[g], side="right") - 1
                out[g] = self._walk_up(np.where(c >= a, c, -1), t[g])
            return out
        lo = np.full(len(t), -1, dtype=np.int64)
        p = np.zeros(len(t), dtype=np.int64)
        for g, a, z in self._groups(thread, self._seg):
            if not len(g):
                continue
            lo[g] = a
            p[g] = a + np.searchsorted(self.start[a:z], t[g], side="right")
        q = np.flatnonzero(lo >= 0)
        if len(q):
            got = self._tree.last_above(p[q], t[q])
            got[got < lo[q]] = -1
            out[q] = got
        return out

    def _walk_up(self, cand: np.ndarray, t: np.ndarray) -> np.ndarray:
        """From each candidate range (-1: none), itself or its nearest ancestor that ends after
        ``t`` (-1 if none): one vectorised step per level."""
        out = np.full(len(cand), -1, dtype=np.int64)
        live = np.flatnonzero(cand >= 0)
        cur, tq = cand[live], t[live]
        end, parent = self.end, self.parent
        while len(live):
            inside = end[cur] > tq
            out[live[inside]] = cur[inside]
            up = parent[cur[~inside]]
            keep = up >= 0
            live, cur, tq = live[~inside][keep], up[keep], tq[~inside][keep]
        return out

    @staticmethod
    def _groups(thread: np.ndarray, segs: dict) -> list:
        """Queries grouped by thread, with the thread's ``(lo, hi)`` in ``segs``."""
        if not len(thread) or not segs:
            return []
        if len(segs) == 1:
            (th0, (a, z)), = segs.items()
            g = np.flatnonzero(thread == th0)
            return [(g, a, z)] if len(g) else []
        out = []
        order = np.argsort(thread, kind="stable")
        cut = np.flatnonzero(np.diff(thread[order])) + 1
        for g in np.split(order, cut):
            seg = segs.get(int(thread[g[0]]))
            if seg is not None:
                out.append((g, seg[0], seg[1]))
        return out

    def ancestors(self, idx: np.ndarray, max_depth: int | None = None):
        """Yield arrays ``a_k`` (k = 0, 1, ...): ``idx`` itself, then its parent, grandparent...
        (-1 past the root), until every chain has ended."""
        cur = np.asarray(idx, dtype=np.int64)
        k = 0
        while (cur >= 0).any():
            yield cur
            k += 1
            if max_depth is not None and k > max_depth:
                break
            nxt = np.full(len(cur), -1, dtype=np.int64)
            ok = cur >= 0
            nxt[ok] = self.parent[cur[ok]]
            cur = nxt

    def self_time(self) -> np.ndarray:
        """Each range's duration less its children's (ns, at least 0)."""
        dur = self.end - self.start
        child = np.zeros(len(dur), dtype=np.int64)
        has = np.flatnonzero(self.parent >= 0)
        if len(has):
            # float sums of integer nanoseconds are exact below 2**53 (104 days)
            child = np.bincount(self.parent[has], weights=dur[has].astype(np.float64),
                                minlength=len(dur)).astype(np.int64)
        return np.maximum(dur - child, 0)

    def nested_in_same_name(self) -> np.ndarray:
        """Whether a range has an ancestor of the same name (its time is already in that one's)."""
        n = len(self.start)
        out = np.zeros(n, dtype=bool)
        if not n:
            return out
        # gathers with index -1 land on a last entry: a name no range has, and no parent
        name = np.asarray(self.name, dtype=np.int64)
        ext_name = np.append(name, int(name.min()) - 1)
        ext_parent = np.append(self.parent, -1)
        a = self.parent
        while (a >= 0).any():
            out |= ext_name[a] == name
            a = ext_parent[a]
        return out

    def subtree_sum(self, values: np.ndarray) -> np.ndarray:
        """Each range's value plus its descendants' (bottom-up over the levels)."""
        tot = np.asarray(values, dtype=np.int64).copy()
        if not len(tot):
            return tot
        for d in range(int(self.depth.max()), 0, -1):
            cur = np.flatnonzero((self.depth == d) & (self.parent >= 0))
            if len(cur):
                np.add.at(tot, self.parent[cur], tot[cur])
        return tot


def _runs(th: np.ndarray) -> list[tuple[int, int]]:
    """The ``[lo, hi)`` runs of equal values of a sorted thread column, in order."""
    if not len(th):
        return []
    b = np.flatnonzero(np.diff(th)) + 1
    return list(zip(np.concatenate([[0], b]).tolist(), np.concatenate([b, [len(th)]]).tolist()))


def _forest_order(th: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Forest order (thread, start, longest first, then input order): ``np.lexsort((-e, s, th))``.
    Ranges arrive in a few runs of start order, threads interleaved: a stable sort of the starts
    (timsort merges the runs), a stable radix sort of the thread index (int16), and a local sort
    of the few runs of equal (thread, start) give it 4x quicker than the lexsort."""
    if not (-2**15 <= int(th.min()) and int(th.max()) < 2**15):
        return np.lexsort((-e, s, th))
    o = np.argsort(s, kind="stable")
    o = o[np.argsort(th[o].astype(np.int16), kind="stable")]
    t2, s2 = th[o], s[o]
    same = t2[1:] == t2[:-1]
    ds = s2[1:] - s2[:-1]
    tie = np.flatnonzero(same & (ds == 0))
    if len(tie):
        # runs of equal (thread, start): longest first, stable
        tied = same & (ds == 0)  # positions j and j + 1 tie
        at = np.unique(np.concatenate([tie, tie + 1]))
        first = np.ones(len(at), dtype=bool)
        first[1:] = ~tied[at[1:] - 1]
        sub = np.lexsort((-e[o[at]], np.cumsum(first)))
        o[at] = o[at][sub]
    return o


class _MaxTree:
    """Maximum of ``values`` over aligned power-of-two blocks, for "the last position before p
    whose value is greater than t" (vectorised over queries: one numpy pass per tree level)."""

    def __init__(self, values: np.ndarray) -> None:
        v = np.asarray(values, dtype=np.int64)
        self.n = len(v)
        self.levels = [v]
        while len(self.levels[-1]) > 1:
            cur = self.levels[-1]
            if len(cur) % 2:
                cur = np.append(cur, np.iinfo(np.int64).min)
            self.levels.append(np.maximum(cur[0::2], cur[1::2]))

    def last_above(self, p: np.ndarray, t: np.ndarray) -> np.ndarray:
        """For each query, the largest ``j < p`` with ``values[j] > t``, or -1."""
        p = np.asarray(p, dtype=np.int64).copy()
        t = np.asarray(t, dtype=np.int64)
        m = len(p)
        out = np.full(m, -1, dtype=np.int64)
        if m == 0 or self.n == 0:
            return out
        # 1. walk the blocks that tile [0, p) from the right (block of size 2^k ending at cur, for
        #    each set bit k of cur, lowest first) until one holds a value above t
        cur = np.minimum(p, self.n)
        node = np.full(m, -1, dtype=np.int64)
        level = np.zeros(m, dtype=np.int64)
        active = cur > 0
        k = 0
        while active.any() and k < len(self.levels):
            a = np.flatnonzero(active & ((cur >> k) & 1 == 1))
            if len(a):
                nd = (cur[a] >> k) - 1
                hit = self.levels[k][nd] > t[a]
                h = a[hit]
                node[h] = nd[hit]
                level[h] = k
                active[h] = False
                cur[a[~hit]] -= 1 << k
            active &= cur > 0
            k += 1
        # 2. descend from each found block to its last leaf above t (right child first)
        f = np.flatnonzero(node >= 0)
        nd, lv, tq = node[f], level[f], t[f]
        while len(f):
            down = lv > 0
            if not down.any():
                break
            d = np.flatnonzero(down)
            right = nd[d] * 2 + 1
            lvl = lv[d] - 1
            # the right child may be past the end of its level (odd lengths): then go left
            vals = np.full(len(d), np.iinfo(np.int64).min, dtype=np.int64)
            for L in np.unique(lvl).tolist():
                mm = np.flatnonzero(lvl == L)
                arr = self.levels[L]
                ok = right[mm] < len(arr)
                vals[mm[ok]] = arr[right[mm[ok]]]
            go_right = vals > tq[d]
            nd[d] = np.where(go_right, right, right - 1)
            lv[d] = lvl
        out[f] = nd
        return out
