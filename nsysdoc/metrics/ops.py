"""GPU operations (kernels, copies, memsets) as one table, joined to the API calls that launched them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET = 0, 1, 2


# the join by correlation id is the readers' too: it lives in trace/
from ..trace.correlation import correlation_key, match_api  # noqa: E402,F401 - re-exported


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


