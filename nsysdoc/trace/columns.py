"""Small tables as named numpy columns of one length.

The analysis reads and builds small tables (devices, streams, threads, per-name statistics,
steps) as plain numpy columns, so that a report does not import pandas (0.3 s of every run on
the machines we measure: a quarter of a cached report of 2 M kernels). :meth:`Columns.to_pandas`
gives a DataFrame for the tools and tests that want one.
"""
from __future__ import annotations

import numpy as np


def as_column(values) -> np.ndarray:
    """``values`` as a numpy column, typed as a DataFrame column built from them would be: text
    stays Python objects (not fixed-width), numbers with missing values (None) are floats with
    NaN, a list of only None stays objects."""
    if isinstance(values, np.ndarray):
        arr = values
    else:
        arr = np.asarray(values)
        if arr.dtype == object and arr.ndim == 1:
            nums = [v for v in arr.tolist() if v is not None]
            if nums and len(nums) < len(arr) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                     for v in nums):
                arr = np.array([np.nan if v is None else v for v in arr.tolist()], dtype=np.float64)
    if arr.dtype.kind in "US":
        arr = arr.astype(object)
    return arr


class Columns:
    """Named 1-D numpy columns of equal length, in insertion order."""

    __slots__ = ("_cols", "_n")

    def __init__(self, cols: dict | None = None, n: int | None = None) -> None:
        self._cols: dict[str, np.ndarray] = {}
        self._n = int(n) if n is not None else None
        for k, v in (cols or {}).items():
            self[k] = v
        if self._n is None:
            self._n = 0

    # ---- mapping -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n

    def __getitem__(self, key: str) -> np.ndarray:
        return self._cols[key]

    def __setitem__(self, key: str, values) -> None:
        arr = as_column(values)
        if arr.ndim == 0:  # one value for every row
            arr = as_column(np.full(self._n or 0, values))
        if arr.ndim != 1:
            raise ValueError(f"column {key!r} is not one-dimensional")
        if self._n is None:
            self._n = len(arr)
        elif len(arr) != self._n:
            raise ValueError(f"column {key!r} has {len(arr)} values, the table {self._n} rows")
        self._cols[key] = arr

    def __contains__(self, key) -> bool:
        return key in self._cols

    def get(self, key: str, default=None):
        return self._cols.get(key, default)

    @property
    def columns(self) -> list[str]:
        return list(self._cols)

    def __repr__(self) -> str:
        return f"Columns({self._n} rows: {', '.join(self._cols)})"

    # ---- derived tables ------------------------------------------------------------------------
    def take(self, rows) -> "Columns":
        """The rows ``rows`` (indices or a boolean mask), every column."""
        rows = np.asarray(rows)
        n = int(rows.sum()) if rows.dtype == bool else len(rows)
        return Columns({k: v[rows] for k, v in self._cols.items()}, n=n)

    def head(self, n: int) -> "Columns":
        n = max(0, min(int(n), self._n))
        return Columns({k: v[:n] for k, v in self._cols.items()}, n=n)

    def select(self, names) -> "Columns":
        return Columns({k: self._cols[k] for k in names}, n=self._n)

    def assign(self, **cols) -> "Columns":
        out = Columns(dict(self._cols), n=self._n)
        for k, v in cols.items():
            out[k] = v
        return out

    def drop(self, names) -> "Columns":
        names = set(names)
        return Columns({k: v for k, v in self._cols.items() if k not in names}, n=self._n)

    # ---- Python values -------------------------------------------------------------------------
    def row(self, i: int) -> dict:
        """Row ``i`` as Python values."""
        return {k: v[i].item() if v.dtype != object else v[i] for k, v in self._cols.items()}

    def records(self, names=None) -> list[dict]:
        """Every row as a dict of Python values (numbers as int/float/bool, text as str)."""
        names = list(self._cols) if names is None else list(names)
        if not names:
            return [{} for _ in range(self._n)]
        lists = [self._cols[k].tolist() for k in names]
        return [dict(zip(names, vals)) for vals in zip(*lists)]

    def to_pandas(self):
        from ..lazy_pandas import pandas as _pandas
        pd = _pandas()

        return pd.DataFrame(dict(self._cols), copy=False)

    @classmethod
    def from_pandas(cls, df) -> "Columns":
        return cls({str(k): df[k].to_numpy() for k in df.columns}, n=len(df))


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)`` of an integer array, uniques in order of first appearance (what
    ``pandas.factorize`` gives), in linear time for the usual cases: small non-negative ids (a
    table of first positions), or few distinct values (a search per row against those found in a
    sample: a chunk's processes, threads or streams); otherwise one sort."""
    values = np.asarray(values)
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int64), values[:0].copy()
    lo, hi = int(values.min()), int(values.max())
    if lo >= 0 and hi < max(1 << 16, 4 * n):
        return _first_order(values.astype(np.intp, copy=False), hi + 1, values)
    step = max(1, n // 4096)
    cand = np.unique(values[::step])
    if len(cand) <= 256:
        pos = np.minimum(np.searchsorted(cand, values), len(cand) - 1)
        if (cand[pos] == values).all():
            return _first_order(pos, len(cand), values)
    uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[order] = np.arange(len(uniq), dtype=np.int64)
    return rank[inverse.reshape(-1)], uniq[order]


def _first_order(pos: np.ndarray, k: int, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`factorize` of ``values`` given ``pos``, a code in ``[0, k)`` per value that is equal
    exactly for equal values."""
    n = len(pos)
    first = np.full(k, n, dtype=np.int64)
    first[pos[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)  # the last write (first row) wins
    seen = np.flatnonzero(first < n)
    order = seen[np.argsort(first[seen], kind="stable")]
    rank = np.full(k, -1, dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    return rank[pos], values[first[order]]


def factorize_objects(values) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)`` of hashable Python values (text), uniques in order of first appearance
    as ``pandas.factorize`` gives them for values without missing ones (None and NaN are values
    here, not -1 codes): a dict of the distinct values, then one lookup per value."""
    vals = np.asarray(values, dtype=object).tolist()
    if not vals:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object)
    uniq = list(dict.fromkeys(vals))
    code = {v: i for i, v in enumerate(uniq)}
    out = np.empty(len(uniq), dtype=object)
    out[:] = uniq
    return np.fromiter(map(code.__getitem__, vals), dtype=np.int64, count=len(vals)), out
