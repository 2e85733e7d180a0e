"""GPU operations (kernels, copies, memsets) as one table, joined to the API calls that launched them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET = 0, 1, 2


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


@dataclass
class GpuOps:
    """All GPU operations (kernels, then memcpy, then memset rows, in table order). Arrays are
    aligned; times in ns.

    ``api`` is the row of the launching call in the runtime table (``-1`` if unknown); other API
    attributes are looked up through it on demand (see :meth:`api_value`) to keep memory low.
    """

    start_ns: np.ndarray
    end_ns: np.ndarray
    device: np.ndarray
    kind: np.ndarray          # KIND_KERNEL / KIND_MEMCPY / KIND_MEMSET
    is_nccl: np.ndarray       # communication kernel
    proc: np.ndarray
    stream_id: np.ndarray
    row: np.ndarray           # row in its source table (kernels / memcpy / memset)
    api: np.ndarray           # row in runtime of the launching API call, -1 if unknown
    api_start_ns: np.ndarray  # -1 if unknown
    runtime_end_ns: np.ndarray
    runtime_thread: np.ndarray
    thread_gtid: np.ndarray   # global_tid of each thread index

    def __len__(self) -> int:
        return len(self.start_ns)

    def api_value(self, column: np.ndarray, idx=None, missing=-1) -> np.ndarray:
        """``column[api]`` for ops ``idx`` (all when None), ``missing`` where the API is unknown."""
        api = self.api if idx is None else self.api[idx]
        if len(column) == 0:
            return np.full(len(api), missing, dtype=np.int64)
        out = column[np.maximum(api, 0)]
        return np.where(api >= 0, out, missing)

    def api_end_ns(self, idx=None) -> np.ndarray:
        return self.api_value(self.runtime_end_ns, idx)

    def api_tid(self, idx=None) -> np.ndarray:
        """Launching thread's global_tid (0 if unknown)."""
        thread = self.api_value(self.runtime_thread, idx, -1)
        if len(self.thread_gtid) == 0:
            return np.zeros(len(thread), dtype=np.int64)
        return np.where(thread >= 0, self.thread_gtid[np.maximum(thread, 0)], 0)


