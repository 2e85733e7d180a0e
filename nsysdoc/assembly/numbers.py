"""JSON numbers for the report result: rounding (4 decimals, NaN/inf as null), records, medians,
and the merge of the slices' array pieces (:func:`_consume`)."""
from __future__ import annotations

import math

import numpy as np

from ..trace.columns import Columns
from ..trace.store import release_memory


#: Bytes of freed slice pieces after which :func:`_consume` returns memory to the system.
_TRIM_BYTES = 64 << 20


def _num(x):
    """Plain JSON number: floats rounded to 4 decimals, NaN/inf -> None."""
    if x is None:
        return None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        if math.isnan(x) or math.isinf(x):
            return None
        return round(x, 4)
    return x


def _isnan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _num_list(values) -> list:
    """:func:`_num` over a float array, as a list: the same rounding (Python's ``round``, 4 decimals),
    NaN/inf -> None, without a numpy scalar per value."""
    arr = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(arr).tolist()
    return [round(x, 4) if ok else None for x, ok in zip(arr.tolist(), finite)]


def _records(table: Columns) -> list[dict]:
    return [{k: _num(v) for k, v in row.items()} for row in table.records()]


def _median(values) -> float | None:
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    return float(np.median(values)) if len(values) else None


def _rounded(x):
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return _num(x)


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _consume(parts: list, dtype) -> np.ndarray:
    """One array from the slices' pieces, emptying the list as it goes (the pieces and the whole
    are never both held), in the pieces' dtype when they all share one, else int64."""
    if not parts:
        return np.zeros(0, dtype)
    dt = parts[0].dtype if all(p.dtype == parts[0].dtype for p in parts) else np.dtype(np.int64)
    out = np.empty(sum(len(p) for p in parts), dtype=dt)
    pos = freed = 0
    parts.reverse()  # pop from the end: O(1) each
    while parts:
        p = parts.pop()
        out[pos:pos + len(p)] = p
        pos += len(p)
        freed += p.nbytes
        del p
        if freed >= _TRIM_BYTES:  # the pieces sit in glibc's heap: give their pages back as we go
            release_memory()
            freed = 0
    if out.nbytes >= _TRIM_BYTES:
        release_memory()
    return out
