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

#: The selections a rule's ``where:`` can name: what is weighed, and by what (docs/rules.md). The
#: engine adds each one's time per site (nsysdoc.engine.attribute).
SELECTORS = {
    "gpu_ops": "every GPU operation in the window, by its duration",
    "kernels": "every kernel in the window, by its duration",
    "tiny_kernels": "kernels shorter than 10 us in the window, by their duration",
    "top_kernel": "the kernel with the most GPU time (by full name), by its duration",
    "nccl_kernels": "NCCL kernels in the window, by their duration",
    "fp32_kernels": "FP32 GEMM/convolution kernels in the window, by their duration",
    "copies": "memory copies in the window, by their duration",
    "pageable_copies": "host<->device copies from or to pageable memory, by their duration",
    "dtoh_copies": "device-to-host copies larger than a scalar, by their duration",
    "launch_gaps": "GPU idle time of class launch, at the launch of the operation that ends each gap",
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
_CALL_FIELDS = re.compile(r",\s*(?:seq|op_id)\s*=\s*\d+|,\s*(?:sizes|input_op_ids)\s*=.*$", re.DOTALL)
_SEQ = re.compile(r",\s*seq\s*=\s*(\d+)")
#: autograd backward nodes: "MulBackward0", "torch::autograd::AccumulateGrad" is not one
_BACKWARD = re.compile(r"Backward\d*$")
_EVALUATE = "autograd::engine::evaluate_function: "


def op_name(text: str) -> str:
    """An operator's name: the range text without PyTorch's per-call fields (seq, op_id, sizes,
    input_op_ids)."""
    if ", " not in text and "," not in text:
        return text.strip()
    return _CALL_FIELDS.sub("", text).strip()


def seq_of(text: str) -> int:
    """The autograd sequence number in a range text (``seq = N``), or -1."""
    m = _SEQ.search(text)
    return int(m.group(1)) if m else -1


def is_backward(name: str) -> bool:
    """An autograd backward node (``MulBackward0``) or its ``evaluate_function`` wrapper."""
    return bool(_BACKWARD.search(name)) or name.startswith(_EVALUATE)


def backward_node(name: str) -> str:
    """``autograd::engine::evaluate_function: MulBackward0`` -> ``MulBackward0``."""
    return name[len(_EVALUATE):] if name.startswith(_EVALUATE) else name


#: NVTX texts that are operators (PyTorch ops and autograd nodes) rather than regions a user named
_OP_LIKE = re.compile(r"::|Backward\d*$|,\s*(?:seq|op_id)\s*=\s*\d+")


def is_op_like(text: str) -> bool:
    """An NVTX range text that is a PyTorch operator (``aten::mm``, ``MulBackward0``, any range
    with emit_nvtx's ``seq =`` / ``op_id =`` fields) rather than a region a user named
    (``forward``, ``train step``). Used to find the module of an Nsight Systems launch: the
    innermost enclosing range that is not operator-like."""
    return bool(_OP_LIKE.search(text))


# Python frames, as Kineto names them: "torch/nn/modules/module.py(1743): _call_impl",
# "train.py(184): <module>", "<built-in method conv2d of type object at 0x...>", "nn.Module: Linear_0"
_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\):\s*(?P<func>.*)$")
_LIBRARY_PARTS = ("site-packages/", "dist-packages/", "/lib/python", "/usr/lib/", "<frozen", "<string>",
                  "importlib/", "/python3.", "\\lib\\", "threading.py", "runpy.py", "contextlib.py", "functools.py")
_LIBRARY_PREFIXES = ("torch/", "torch\\", "<built-in", "<method", "<frozen", "nn.Module:", "numpy/", "apex/",
                     "triton/", "transformers/", "accelerate/", "deepspeed/", "torchvision/", "lightning/",
                     "pytorch_lightning/", "fairscale/", "megatron/core/", "typing.py", "abc.py", "enum.py",
                     "logging/", "asyncio/", "concurrent/", "multiprocessing/", "selectors.py", "queue.py")


def frame_label(name: str) -> str | None:
    """``"train.py(184): <module>"`` -> ``"train.py:184 in <module>"``; None when the name is not
    a file-and-line frame."""
    m = _FRAME.match(name.strip())
    if not m:
        return None
    return f"{m.group('file')}:{m.group('line')} in {m.group('func').strip()}"


def is_user_frame(name: str) -> bool:
    """A Python frame of the user's code: a file-and-line frame outside torch, other libraries the
    profiler reports relative to site-packages, and the standard library."""
    n = name.strip()
    if not _FRAME.match(n):
        return False
    f = n.replace("\\", "/")
    if f.startswith(_LIBRARY_PREFIXES):
        return False
    return not any(p in f for p in _LIBRARY_PARTS)


def is_module_frame(name: str) -> bool:
    """A Kineto ``nn.Module: Linear_3`` frame (``with_stack=True``)."""
    return name.startswith("nn.Module: ")


def call_stack_frames(stack: str) -> list[str]:
    """Frames of a 2021-format ``Call stack`` argument (``"a.py(611): f;b.py(312): g"``), outermost
    first (the argument lists them innermost first)."""
    parts = [p.strip() for p in stack.split(";") if p.strip()]
    return parts[::-1]


# ---------------------------------------------------------------------------------------------
# nesting
# ---------------------------------------------------------------------------------------------
class Forest:
    """Host ranges of one family, nested per thread.

    Built from aligned arrays (``thread`` index, ``start``/``end`` ns, ``name`` code); ranges of
    zero or negative length are dropped (they contain no time). ``order`` maps a forest index to
    the input index; ``parent`` is the enclosing range (-1 at the root), ``depth`` its level.
    Children that end after their parent are clipped to the parent's end (whole-microsecond
    Kineto times: a child may end 1 us after its parent).

    Queries (:meth:`innermost`) use one boundary list per thread: each range start makes that
    range the innermost, each range end its parent; at equal times ends come before starts, deeper
    ends before shallower ones, shallower starts before deeper ones.
    """

    def __init__(self, thread, start, end, name) -> None:
        thread = np.asarray(thread, dtype=np.int64)
        start = np.asarray(start, dtype=np.int64)
        end = np.asarray(end, dtype=np.int64)
        keep = np.flatnonzero(end >= start)
        n = len(keep)
        idx = np.arange(n)
        th, s, e = thread[keep], start[keep], end[keep]
        order = np.lexsort((idx, -e, s, th)) if n else idx
        self.order = keep[order]
        self.thread = th[order]
        self.start = s[order]
        self.end = e[order].copy()
        self.name = np.asarray(name)[self.order] if n else np.zeros(0, np.int64)
        self.depth = np.zeros(n, dtype=np.int64)
        self.parent = np.full(n, -1, dtype=np.int64)
        self.threads = np.unique(self.thread) if n else np.zeros(0, np.int64)
        self._seg = {}
        self._ev_seg = {}
        if n:
            self._nest()
            self._events()
            self._points()

    def __len__(self) -> int:
        return len(self.start)

    def _nest(self) -> None:
        """Depth and parent of the ranges with a length (zero-length ones: :meth:`_points`)."""
        allpos = np.flatnonzero(self.end > self.start)
        th = self.thread[allpos]
        depth = np.zeros(len(allpos), dtype=np.int64)
        if len(allpos):
            bounds = np.flatnonzero(np.diff(th)) + 1
            seg_lo = np.concatenate([[0], bounds])
            seg_hi = np.concatenate([bounds, [len(th)]])
            for lo, hi in zip(seg_lo.tolist(), seg_hi.tolist()):
                s, e = self.start[allpos[lo:hi]], self.end[allpos[lo:hi]]
                # ranges open at a range's start: those before it in order, less those already
                # ended (a range after it in order starts at or after it, so it cannot have ended)
                depth[lo:hi] = np.arange(hi - lo) - np.searchsorted(np.sort(e), s, side="right")
        depth = np.maximum(depth, 0)
        self.depth[allpos] = depth
        # parent: the last range before it, one level up (same thread)
        maxd = int(depth.max()) if len(depth) else 0
        pos = np.arange(len(allpos))
        prev = pos[depth == 0]
        for d in range(1, maxd + 1):
            cur = pos[depth == d]
            if not len(cur):
                break
            k = np.searchsorted(prev, cur) - 1
            ok = k >= 0
            par = np.where(ok, prev[np.maximum(k, 0)], -1)
            ok &= par >= 0
            ok[ok] &= th[par[ok]] == th[cur[ok]]
            c, p = allpos[cur[ok]], allpos[par[ok]]
            self.parent[c] = p
            # a child never outlives its parent (whole-us ties)
            self.end[c] = np.minimum(self.end[c], self.end[p])
            prev = cur

    def _points(self) -> None:
        """Zero-length ranges: inside the innermost range holding their time."""
        z = np.flatnonzero(self.end == self.start)
        if not len(z):
            return
        par = self.innermost(self.thread[z], self.start[z])
        self.parent[z] = par
        self.depth[z] = np.where(par >= 0, self.depth[np.maximum(par, 0)] + 1, 0)

    def _events(self) -> None:
        # zero-length ranges hold no time: they are counted, never found by a query
        pos = np.flatnonzero(self.end > self.start)
        n = len(pos)
        if n == 0:
            self.ev_t = self.ev_label = np.zeros(0, np.int64)
            self._ev_seg = {}
            return
        # time, kind (0 end, 1 start), tie order, label
        t = np.concatenate([self.end[pos], self.start[pos]])
        kind = np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64)])
        tie = np.concatenate([-self.depth[pos], self.depth[pos]])
        label = np.concatenate([self.parent[pos], pos])
        th = np.concatenate([self.thread[pos], self.thread[pos]])
        order = np.lexsort((tie, kind, t, th))
        self.ev_t = t[order]
        self.ev_label = label[order]
        ev_th = th[order]
        b = np.flatnonzero(np.diff(ev_th)) + 1
        lo = np.concatenate([[0], b])
        hi = np.concatenate([b, [len(ev_th)]])
        self._ev_seg = {int(ev_th[a]): (int(a), int(z)) for a, z in zip(lo, hi)}

    def innermost(self, thread, t) -> np.ndarray:
        """Forest index of the innermost range containing time ``t`` on ``thread`` (-1 if none)."""
        thread = np.asarray(thread, dtype=np.int64)
        t = np.asarray(t, dtype=np.int64)
        out = np.full(len(t), -1, dtype=np.int64)
        if not self._ev_seg or not len(t):
            return out
        if len(self._ev_seg) == 1:
            (th0, (a, z)), = self._ev_seg.items()
            m = np.flatnonzero(thread == th0)
            groups = [(m, a, z)] if len(m) else []
        else:
            groups = []
            order = np.argsort(thread, kind="stable")
            ts = thread[order]
            cut = np.flatnonzero(np.diff(ts)) + 1
            for g in np.split(order, cut):
                seg = self._ev_seg.get(int(thread[g[0]]))
                if seg is not None:
                    groups.append((g, seg[0], seg[1]))
        for g, a, z in groups:
            k = np.searchsorted(self.ev_t[a:z], t[g], side="right") - 1
            ok = k >= 0
            out[g[ok]] = self.ev_label[a:z][k[ok]]
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
        has = self.parent >= 0
        if has.any():
            np.add.at(child, self.parent[has], dur[has])
        return np.maximum(dur - child, 0)

    def nested_in_same_name(self) -> np.ndarray:
        """Whether a range has an ancestor of the same name (its time is already in that one's)."""
        out = np.zeros(len(self.start), dtype=bool)
        pos = np.arange(len(self.start))
        for a in self.ancestors(self.parent):
            ok = a >= 0
            out[ok] |= self.name[a[ok]] == self.name[pos[ok]]
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
