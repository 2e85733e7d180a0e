"""The in-memory trace: canonical tables with unit-suffixed columns, independent of nsys version.

Every event table is a pandas DataFrame backed by numpy arrays. Times are integer nanoseconds on
the capture's timeline (``*_ns``). Identities:

* ``global_pid`` / ``global_tid``: nsys serialized ids (hw, vm, pid, tid bits), kept as int64 keys;
  ``pid`` / ``tid`` are the decoded OS ids.
* ``device`` (in GPU tables): an index into ``Trace.devices`` — one physical GPU, i.e. one
  (host, deviceId) pair, shared by every process that used it.
* ``proc``: an index into ``Trace.processes`` (for joining API calls to GPU work, whose
  correlation ids are only unique within a process).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd


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
        return str(self.lookup(np.array([i]))[0])

    def flags(self, predicate) -> "IdFlags":
        """A vectorised boolean test over string ids, computed once per distinct string."""
        mask = np.fromiter((bool(predicate(v)) for v in self.values), dtype=bool, count=len(self.values))
        return IdFlags(self.ids, mask)


class IdFlags:
    def __init__(self, ids: np.ndarray, mask: np.ndarray) -> None:
        self.ids = ids
        self.mask = mask

    def __call__(self, ids) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        if len(self.ids) == 0:
            return np.zeros(ids.shape, dtype=bool)
        pos = np.clip(np.searchsorted(self.ids, ids), 0, len(self.ids) - 1)
        return (self.ids[pos] == ids) & self.mask[pos]


@dataclass
class Trace:
    """A loaded capture. Build it with :func:`nsysdoc.trace.load_trace`."""

    path: str
    nsys_version: str | None
    schema_version: str | None
    tables: frozenset[str]
    traced: dict[str, bool]
    strings: StringTable
    kernels: pd.DataFrame
    memcpy: pd.DataFrame
    memset: pd.DataFrame
    runtime: pd.DataFrame
    sync: pd.DataFrame
    osrt: pd.DataFrame
    nvtx: pd.DataFrame
    devices: pd.DataFrame
    processes: pd.DataFrame
    threads: pd.DataFrame
    gpu_metrics: pd.DataFrame
    diagnostics: pd.DataFrame
    overhead: pd.DataFrame
    duration_ns: int | None = None
    process_messages: list[str] = field(default_factory=list)
    load_seconds: float = 0.0
    from_cache: bool = False

    @property
    def has_gpu_activity(self) -> bool:
        return len(self.kernels) + len(self.memcpy) + len(self.memset) > 0
