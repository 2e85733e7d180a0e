"""Id codes and the launch correlation, built chunk by chunk while an export streams in.

Why a module of its own (issue 51): processes, devices, streams and threads are known only once
every row has been read, so rows are stored with first-seen codes (:class:`_Codes`,
:class:`_TupleCodes`) mapped to final indices later (``Store.remaps``); the launch join (which
runtime row launched each GPU row, by process and correlation id) is a direct-address table per
process (:class:`_CorrIndex`); the per-runtime-row arrays the join needs are filled in place
(:class:`_Grow`), never as a list of pieces plus their concatenation.
"""
from __future__ import annotations

import numpy as np

from ..columns import factorize


class _Codes:
    """First-seen codes of int64 keys, assigned incrementally chunk by chunk (a chunk's keys are
    few: processes, devices, streams, threads)."""

    def __init__(self) -> None:
        self.index: dict[int, int] = {}
        self.keys: list[int] = []

    def __call__(self, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.int64)
        if len(keys) and (keys == keys[0]).all():  # the usual chunk: one process, device or thread
            k = int(keys[0])
            c = self.index.get(k)
            if c is None:
                c = self.index[k] = len(self.keys)
                self.keys.append(k)
            return np.full(len(keys), c, dtype=np.int32)
        codes, uniq = factorize(keys)
        lut = np.empty(len(uniq), dtype=np.int32)
        for j, k in enumerate(np.asarray(uniq).tolist()):
            c = self.index.get(k)
            if c is None:
                c = self.index[k] = len(self.keys)
                self.keys.append(k)
            lut[j] = c
        return lut[codes] if len(codes) else np.zeros(0, dtype=np.int32)

    def add(self, keys) -> None:
        self(np.asarray(list(keys), dtype=np.int64))

    def remap(self) -> tuple[np.ndarray, np.ndarray]:
        """``(sorted keys, code -> index in the sorted keys)``."""
        keys = np.asarray(self.keys, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        remap = np.empty(len(keys), dtype=np.int32)
        remap[order] = np.arange(len(keys), dtype=np.int32)
        return keys[order], remap


class _TupleCodes:
    """First-seen codes of rows of several int columns (a stream: process, device, context, id)."""

    def __init__(self) -> None:
        self.index: dict[tuple, int] = {}
        self.rows: list[tuple] = []

    def __call__(self, *cols: np.ndarray) -> np.ndarray:
        n = len(cols[0])
        if n == 0:
            return np.zeros(0, dtype=np.int32)
        cols = [np.asarray(c, dtype=np.int64) for c in cols]
        # one int64 key when every column fits 16 bits (codes, context and stream ids do), else a
        # nested factorisation: either way codes follow the first appearance of the whole tuple
        if len(cols) <= 4 and all(int(c.min()) >= 0 and int(c.max()) < (1 << 15) for c in cols):
            key = np.zeros(n, dtype=np.int64)
            for c in cols:
                key = (key << 16) | c
            code, _ = factorize(key)
        else:
            code = np.zeros(n, dtype=np.int64)
            for c in cols:
                cc, _ = factorize(c)
                code, _ = factorize((code << 32) | cc.astype(np.int64))
        nu = int(code.max()) + 1
        first = np.empty(nu, dtype=np.int64)
        first[code[::-1]] = np.arange(n - 1, -1, -1)
        lut = np.empty(nu, dtype=np.int32)
        vals = [np.asarray(c)[first].tolist() for c in cols]
        for j, row in enumerate(zip(*vals)):
            c = self.index.get(row)
            if c is None:
                c = self.index[row] = len(self.rows)
                self.rows.append(row)
            lut[j] = c
        return lut[code]


class _Grow:
    """A column filled chunk by chunk into one array reserved for the expected row count (no
    list of pieces and no final concatenation: the two would both be held at the end). Codes that
    outgrow the dtype widen it once."""

    def __init__(self, dtype) -> None:
        self.a = np.zeros(0, dtype)
        self.n = 0

    def reserve(self, n: int) -> None:
        if n > len(self.a):
            grown = np.empty(n, self.a.dtype)
            grown[:self.n] = self.a[:self.n]
            self.a = grown

    def add(self, v: np.ndarray) -> None:
        if self.a.dtype.kind == "i" and len(v) and int(v.max()) > np.iinfo(self.a.dtype).max:
            self.a = self.a.astype(np.int32 if int(v.max()) <= np.iinfo(np.int32).max else np.int64)
        if self.n + len(v) > len(self.a):
            self.reserve(max(self.n + len(v), 2 * len(self.a)))
        self.a[self.n:self.n + len(v)] = v
        self.n += len(v)

    def done(self) -> np.ndarray:
        """The filled part (copied when rows were dropped, so the reserve is not kept)."""
        a, self.a = self.a, np.zeros(0, self.a.dtype)
        return a[:self.n] if self.n == len(a) else a[:self.n].copy()


class _CorrIndex:
    """Runtime row position per (process code, correlation id): the launch join. A dense table per
    process (correlation ids are small consecutive integers); a process whose ids are too sparse
    for one keeps sorted (id, position) pairs. When several rows share an id the last one wins
    (nsys writes one launch per id)."""

    def __init__(self) -> None:
        self.dense: dict[int, np.ndarray] = {}
        self.rows: dict[int, int] = {}
        self.sparse: dict[int, list] = {}
        self._sorted: dict[int, tuple] = {}

    def add(self, proc: np.ndarray, corr: np.ndarray, pos: np.ndarray) -> None:
        if not len(pos):
            return
        procs = [int(proc[0])] if (proc == proc[0]).all() else np.unique(proc).tolist()
        for p in procs:
            sel = proc == p if len(procs) > 1 else slice(None)
            c = corr[sel].astype(np.int64)
            q = pos[sel].astype(np.int64)
            self.rows[p] = self.rows.get(p, 0) + len(c)
            if p not in self.sparse:
                mx = int(c.max())
                if mx + 1 > 8 * self.rows[p] + (1 << 22):
                    old = self.dense.pop(p, None)
                    self.sparse[p] = []
                    if old is not None:
                        have = np.flatnonzero(old >= 0)
                        self.sparse[p].append((have, old[have].astype(np.int64)))
                else:
                    arr = self.dense.get(p)
                    if arr is None or len(arr) <= mx:
                        grown = np.full(max(mx + 1, 2 * (len(arr) if arr is not None else 0)), -1, dtype=np.int32)
                        if arr is not None:
                            grown[:len(arr)] = arr
                        arr = self.dense[p] = grown
                    arr[c] = q
                    continue
            self.sparse[p].append((c, q))
            self._sorted.pop(p, None)

    def lookup(self, proc: np.ndarray, corr: np.ndarray) -> np.ndarray:
        out = np.full(len(corr), -1, dtype=np.int64)
        if not len(corr):
            return out
        corr = corr.astype(np.int64)
        procs = [int(proc[0])] if (proc == proc[0]).all() else np.unique(proc).tolist()
        for p in procs:
            sel = np.flatnonzero(proc == p) if len(procs) > 1 else np.arange(len(corr))
            c = corr[sel]
            arr = self.dense.get(p)
            if arr is not None:
                ok = (c > 0) & (c < len(arr))
                out[sel[ok]] = arr[c[ok]]
            elif p in self.sparse:
                if p not in self._sorted:
                    ks = np.concatenate([a for a, _ in self.sparse[p]])
                    vs = np.concatenate([b for _, b in self.sparse[p]])
                    order = np.argsort(ks, kind="stable")
                    self._sorted[p] = (ks[order], vs[order])
                ks, vs = self._sorted[p]
                ok = c > 0
                i = np.searchsorted(ks, c[ok], side="right") - 1  # last row of equal ids
                hit = (i >= 0) & (ks[np.maximum(i, 0)] == c[ok])
                res = np.full(int(ok.sum()), -1, dtype=np.int64)
                res[hit] = vs[i[hit]]
                out[sel[ok]] = res
        return out
