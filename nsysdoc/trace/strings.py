"""The string table of a capture (nsys ``StringIds``; the names a Kineto trace repeats) and the
per-string lookups built on it. Below the model and the table layouts, which both name it."""
from __future__ import annotations

import numpy as np


class StringTable:
    """``StringIds`` as arrays; lookups are vectorised."""

    def __init__(self, ids: np.ndarray, values: np.ndarray) -> None:
        order = np.argsort(ids, kind="stable")
        self.ids = np.asarray(ids, dtype=np.int64)[order]
        self.values = np.asarray(values, dtype=object)[order]

    def __len__(self) -> int:
        return len(self.ids)

    def lookup(self, ids) -> np.ndarray:
        """Strings for ``ids`` (``""`` for unknown ids)."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(self.ids) == 0:
            return np.full(ids.shape, "", dtype=object)
        pos = np.clip(np.searchsorted(self.ids, ids), 0, len(self.ids) - 1)
        found = self.ids[pos] == ids
        out = self.values[pos].copy()
        out[~found] = ""
        return out

    def get(self, i: int) -> str:
        """The string of one id (``""`` for an unknown id): a direct index when the ids are
        0..n-1, else one binary search (a report asks it once per row it shows; ``lookup`` on a
        one-element array cost 25 us a call)."""
        n = len(self.ids)
        if not n:
            return ""
        i = int(i)
        dense = self.__dict__.get("_dense")
        if dense is None:
            dense = self._dense = bool(self.ids[0] == 0 and (np.diff(self.ids) == 1).all())
        if dense:
            return str(self.values[i]) if 0 <= i < n else ""
        p = int(np.searchsorted(self.ids, i)) if -(1 << 63) <= i < (1 << 63) else n
        return str(self.values[p]) if p < n and int(self.ids[p]) == i else ""

    def flags(self, predicate) -> "IdMap":
        """A vectorised boolean test over string ids, computed once per distinct string, and only
        for the strings asked about (a PyTorch trace's table holds a string per operator call,
        ``aten::mm, seq = 12``, that no kernel-name test is ever asked about)."""
        return IdMap(self.ids, np.zeros(len(self.ids), dtype=bool), False,
                     fn=lambda v: bool(predicate(v)), strings=self.values)

    def codes(self, fn) -> "IdMap":
        """A vectorised small-integer code per string id (``fn(value) -> int``), 0 for unknown ids;
        computed once per distinct string asked about."""
        return IdMap(self.ids, np.zeros(len(self.ids), dtype=np.int16), 0, fn=lambda v: int(fn(v)), strings=self.values)


class IdMap:
    """Maps string ids to precomputed values; direct indexing when ids are dense (the usual case)."""

    def __init__(self, ids: np.ndarray, values: np.ndarray, missing, fn=None, strings=None) -> None:
        self.ids = ids
        self.values = values
        self.missing = missing
        self.dense = len(ids) > 0 and ids[0] == 0 and ids[-1] == len(ids) - 1
        # lazy: ``values[i] = fn(strings[i])``, filled on first lookup of each id
        self._fn, self._strings = fn, strings
        self._known = np.zeros(len(ids), dtype=bool) if fn is not None else None
        self._all_known = fn is None

    def _fill(self, ids: np.ndarray) -> None:
        if self._all_known:
            return
        if self.dense:
            pos = ids[(ids >= 0) & (ids < len(self.ids))]
        else:
            pos = np.clip(np.searchsorted(self.ids, ids), 0, len(self.ids) - 1)
            pos = pos[self.ids[pos] == ids]
        # the positions not known yet, without sorting every id asked (a slice asks millions)
        todo = np.zeros(len(self.ids), dtype=bool)
        todo[pos] = True
        todo &= ~self._known
        pos = np.flatnonzero(todo)
        if len(pos):
            fn, strings, values = self._fn, self._strings, self.values
            for p in pos.tolist():
                values[p] = fn(strings[p])
            self._known[pos] = True
            self._all_known = bool(self._known.all())

    def __call__(self, ids) -> np.ndarray:
        ids = np.asarray(ids)
        if len(self.ids) == 0:
            return np.full(ids.shape, self.missing, dtype=self.values.dtype)
        if self._known is not None:
            self._fill(ids.ravel().astype(np.int64, copy=False))
        if self.dense:
            ok = (ids >= 0) & (ids < len(self.ids))
            out = self.values[np.where(ok, ids, 0)]
            if not ok.all():
                out[~ok] = self.missing
            return out
        pos = np.clip(np.searchsorted(self.ids, ids), 0, len(self.ids) - 1)
        out = self.values[pos]
        bad = self.ids[pos] != ids
        if bad.any():
            out[bad] = self.missing
        return out
