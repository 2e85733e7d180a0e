"""The join of GPU rows to the API calls that launched them: nsys and Kineto both number a launch
and its GPU work with one correlation id, unique within a process. The readers join while loading
(set-up launches, first launches), the metrics afterwards; it lives here, below both."""
from __future__ import annotations

import numpy as np


def correlation_key(proc: np.ndarray, correlation_id: np.ndarray) -> np.ndarray:
    """Join key for API rows and GPU rows: correlation ids are unique only within a process."""
    return (np.asarray(proc, dtype=np.int64) << 40) | (np.asarray(correlation_id, dtype=np.int64) & ((1 << 40) - 1))


def match_api(api_proc, api_corr, api_valid, op_proc, op_corr) -> np.ndarray:
    """Index of the API row for each GPU row (``-1`` when none).

    Correlation ids are dense small integers per process, so the join is a direct-address table
    (scatter API rows, gather GPU rows: linear time); sparse ids fall back to sort + searchsorted.
    When several API rows share a key the last one wins (nsys writes one launch per id).
    """
    out = np.full(len(op_corr), -1, dtype=np.int64)
    api_corr = np.asarray(api_corr)
    idx = np.flatnonzero(api_valid & (api_corr > 0))
    if len(idx) == 0 or len(op_corr) == 0:
        return out
    ac = api_corr[idx].astype(np.int64)
    ap = np.asarray(api_proc)[idx]
    nproc = int(max(ap.max(), np.max(op_proc))) + 1
    span = int(ac.max()) + 1
    if nproc * span <= 4 * (len(idx) + len(op_corr)) + 1024:
        table = np.full(nproc * span, -1, dtype=np.int64)
        ac += ap.astype(np.int64) * span  # in place: the table slot of each API row
        table[ac] = idx
        del ac, ap, idx
        corr = np.asarray(op_corr)
        # a correlation id beyond the process's largest API id has no API row in *this* process;
        # without this check its slot would fall into the next process's block
        ok = (corr > 0) & (corr < span)
        slot = np.asarray(op_proc)[ok].astype(np.int64) * span + corr[ok]
        out[ok] = table[slot]
        return out
    op_corr = np.asarray(op_corr, dtype=np.int64)
    op_proc = np.asarray(op_proc, dtype=np.int64)
    keys = correlation_key(ap, ac)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    ok = op_corr > 0
    qk = correlation_key(op_proc[ok], op_corr[ok])
    pos = np.searchsorted(sk, qk, side="right") - 1  # last row of equal keys, as the table path
    hit = (pos >= 0) & (sk[np.maximum(pos, 0)] == qk)
    res = np.full(len(qk), -1, dtype=np.int64)
    res[hit] = idx[order[pos[hit]]]
    out[ok] = res
    return out
