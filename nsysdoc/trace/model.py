"""The in-memory trace: canonical tables with unit-suffixed columns, independent of nsys version.

The big event tables are blocks of numpy columns (:mod:`nsysdoc.trace.store`), the small ones
:class:`~nsysdoc.trace.columns.Columns` (named numpy columns); either becomes a pandas DataFrame on
request (:meth:`Trace.frame`, :meth:`Columns.to_pandas`). Times are integer nanoseconds on
the capture's timeline (``*_ns``). Identities:

* ``global_pid`` / ``global_tid``: nsys serialized ids (hw, vm, pid, tid bits), kept as int64 keys;
  ``pid`` / ``tid`` are the decoded OS ids.
* ``device`` (in GPU tables): an index into ``Trace.devices`` — one physical GPU, i.e. one
  (host, deviceId) pair, shared by every process that used it.
* ``proc``: an index into ``Trace.processes`` (for joining API calls to GPU work, whose
  correlation ids are only unique within a process).
* ``stream`` (in GPU tables): an index into ``Trace.streams``; a stream is (process, device,
  context, stream id).
* ``thread`` (in host tables): an index into ``Trace.threads`` (sorted ``global_tid``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .columns import Columns

if TYPE_CHECKING:
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


#: ``Trace.source_tool`` values and their names for people.
SOURCE_TOOLS = {"nsys": "Nsight Systems", "pytorch-profiler": "PyTorch Profiler"}


#: The big event tables: held in :attr:`Trace.store` (blocks, read by time range), and as whole
#: DataFrames only on demand (:meth:`Trace.frame`: tests, small captures, the one-off tools).
EVENT_FRAMES = ("kernels", "memcpy", "memset", "runtime", "sync", "osrt", "nvtx")


def empty_memory_frame(name: str) -> Columns:
    """An empty ``memory`` or ``device_memory`` table (issue 47)."""
    from .frames import FRAME_COLUMNS

    return Columns({c: np.zeros(0, dtype=np.int64) for c in FRAME_COLUMNS[name]})


@dataclass
class Trace:
    """A loaded capture. Build it with :func:`nsysdoc.trace.load_trace`.

    The event tables are in ``store`` (:mod:`nsysdoc.trace.store`); ``trace.kernels`` and the
    other event-table attributes build the whole table as a DataFrame on first use (memory grows
    with the capture: the analysis itself never asks for them). Small tables are
    :class:`~nsysdoc.trace.columns.Columns`.
    ``derived`` holds what the loader computed while streaming the rows (see ``docs/loader.md``):
    ``pageable_async_api`` (runtime rows of async copies from pageable memory, which block the
    host), ``launch_candidates`` (kernel-launch calls of 1 ms or more), ``runtime_name_counts``
    (rows per ``name_id``) and per-table row counts.
    """

    path: str
    nsys_version: str | None
    schema_version: str | None
    tables: frozenset[str]
    traced: dict[str, bool]
    strings: StringTable
    store: object
    devices: Columns
    processes: Columns
    streams: Columns
    threads: Columns
    gpu_metrics: Columns
    diagnostics: Columns
    overhead: Columns
    #: domain name of each ``domain`` index of the nvtx table
    nvtx_domains: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    #: the text of each ``text_group`` code of the nvtx table (:mod:`nsysdoc.trace.nvtx_text`)
    nvtx_groups: list = field(default_factory=list)
    derived: dict = field(default_factory=dict)
    duration_ns: int | None = None
    #: UTC epoch (ns) at the start of the capture session (TARGET_INFO_SESSION_START_TIME), or None
    session_start_utc_ns: int | None = None
    #: how the file's timestamps counted: "session" (from the session start, nsys's default; a
    #: PyTorch Profiler trace's from ``baseTimeNanoseconds``) or "absolute" (on the UTC wall clock:
    #: ``nsys export --ts-normalize=true``, PyTorch < 2.0). The loader puts both on the session
    #: timeline, so event times always count from ``session_start_utc_ns`` (wall = it + t).
    clock: str = "session"
    process_messages: list[str] = field(default_factory=list)
    #: rows the loader refused: [{"table", "reason", "rows"}] (bad values no session can hold)
    dropped_rows: list[dict] = field(default_factory=list)
    load_seconds: float = 0.0
    from_cache: bool = False
    #: the tool that made the trace: "nsys" (an Nsight Systems SQLite export) or "pytorch-profiler"
    #: (a PyTorch Profiler / Kineto Chrome-trace JSON, :mod:`nsysdoc.trace.kineto`)
    source_tool: str = "nsys"
    #: trace types the tool cannot record (a ``traced`` key -> what they are), e.g. OS runtime
    #: calls for the PyTorch Profiler; empty for nsys, where any trace type can be switched on
    not_recorded: dict[str, str] = field(default_factory=dict)
    #: ``{"rank", "world_size", "backend"}`` from a PyTorch Profiler trace's distributedInfo, else None
    distributed: dict | None = None
    #: where trace viewers put 0 on this trace's timeline (ns): a PyTorch Profiler trace opened in
    #: Perfetto, chrome://tracing or TensorBoard shows times from its first event (the profiler's
    #: span); None for nsys, whose GUI shows the export's own times
    viewer_origin_ns: int | None = None
    _frames: dict = field(default_factory=dict, repr=False)
    #: issue 47: memory events (``FRAME_COLUMNS["memory"]``: Kineto ``[memory]`` events, nsys
    #: ``CUDA_GPU_MEMORY_USAGE_EVENTS``) and each GPU's memory size (``device_memory``)
    memory: Columns = field(default_factory=lambda: empty_memory_frame("memory"))
    device_memory: Columns = field(default_factory=lambda: empty_memory_frame("device_memory"))

    @property
    def source_label(self) -> str:
        """The tool's name for people: "Nsight Systems" or "PyTorch Profiler"."""
        return SOURCE_TOOLS.get(self.source_tool, self.source_tool)

    def count(self, name: str) -> int:
        """Rows of an event table (no read)."""
        t = self.store.get(name)
        return 0 if t is None else len(t)

    @property
    def has_gpu_activity(self) -> bool:
        return self.count("kernels") + self.count("memcpy") + self.count("memset") > 0

    def frame(self, name: str) -> pd.DataFrame:
        """The whole event table ``name`` as a DataFrame with the documented columns."""
        if name not in self._frames:
            from .frames import whole_frame

            self._frames[name] = whole_frame(self, name)
        return self._frames[name]

    kernels = property(lambda self: self.frame("kernels"))
    memcpy = property(lambda self: self.frame("memcpy"))
    memset = property(lambda self: self.frame("memset"))
    runtime = property(lambda self: self.frame("runtime"))
    sync = property(lambda self: self.frame("sync"))
    osrt = property(lambda self: self.frame("osrt"))
    nvtx = property(lambda self: self.frame("nvtx"))
