"""Time and count per attribution site: the accumulators the slices fill and the tables read.

Why a module of its own: a *site* is a row of codes ``(operator, module, frame, backward node,
forward operator)`` (:func:`nsysdoc.metrics.attribution.site_rows`); the slices add GPU time per
site for the operator view and per ``where:`` selector, and the report's tables read the sums.
How the sums are kept (chunks of arrays folded once, exact integer nanoseconds) is one concern,
apart from how a site is found (:mod:`nsysdoc.engine.attributor`) and from the tables
(:mod:`nsysdoc.engine.attribute_operators`, :mod:`nsysdoc.engine.attribute_where`). Moved out of
``nsysdoc/engine/attribute.py`` (issue 51); re-exported there.
"""
from __future__ import annotations

import numpy as np

from ..metrics.attribution import site_index


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


def _sums(inv: np.ndarray, ns: np.ndarray, k: int) -> np.ndarray:
    """Sums of integer nanoseconds per group, exact (float sums of integers below 2**53, else
    int64 adds)."""
    if not len(ns) or float(np.abs(ns).sum(dtype=np.float64)) < 2.0 ** 53:
        return np.bincount(inv, weights=ns.astype(np.float64), minlength=k).astype(np.int64)
    out = np.zeros(k, dtype=np.int64)
    np.add.at(out, inv, ns)
    return out
