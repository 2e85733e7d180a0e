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
from .strings import IdMap, StringTable  # noqa: F401 - re-exported: the readers import them from here

if TYPE_CHECKING:
    import pandas as pd


#: ``Trace.source_tool`` values and their names for people.
SOURCE_TOOLS = {"nsys": "Nsight Systems", "pytorch-profiler": "PyTorch Profiler"}


#: The big event tables: held in :attr:`Trace.store` (blocks, read by time range), and as whole
#: DataFrames only on demand (:meth:`Trace.frame`: tests, small captures, the one-off tools).
EVENT_FRAMES = ("kernels", "memcpy", "memset", "runtime", "sync", "osrt", "nvtx")


def empty_memory_frame(name: str) -> Columns:
    """An empty ``memory`` or ``device_memory`` table (issue 47)."""
    from .tables import FRAME_COLUMNS

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
            self._frames[name] = whole_frame(self, name)
        return self._frames[name]

    kernels = property(lambda self: self.frame("kernels"))
    memcpy = property(lambda self: self.frame("memcpy"))
    memset = property(lambda self: self.frame("memset"))
    runtime = property(lambda self: self.frame("runtime"))
    sync = property(lambda self: self.frame("sync"))
    osrt = property(lambda self: self.frame("osrt"))
    nvtx = property(lambda self: self.frame("nvtx"))


def whole_frame(trace: Trace, name: str) -> pd.DataFrame:
    """Event table ``name`` of ``trace`` as one DataFrame (:data:`nsysdoc.trace.tables.FRAME_COLUMNS`)."""
    from .tables import FRAME_COLUMNS, TABLE_DTYPES
    from .store import to_text
    from ..lazy_pandas import pandas as _pandas
    pd = _pandas()

    t = trace.store.get(name)
    cols = FRAME_COLUMNS[name]
    if name == "nvtx":
        want = ["start_ns", "end_ns", "event_type", "global_tid", "text", "domain", "thread"]
        d = t.read_all(want) if t is not None else t
        doms = trace.nvtx_domains
        n = len(d["start_ns"]) if d is not None else 0
        if n == 0:
            return pd.DataFrame({"start_ns": np.zeros(0, np.int64), "end_ns": np.zeros(0, np.int64),
                                 "event_type": np.zeros(0, np.int64), "global_tid": np.zeros(0, np.int64),
                                 "text": np.zeros(0, dtype=object), "domain": np.zeros(0, dtype=object),
                                 "thread": np.zeros(0, np.int32)})
        return pd.DataFrame({
            "start_ns": d["start_ns"].astype(np.int64), "end_ns": d["end_ns"].astype(np.int64),
            "event_type": d["event_type"].astype(np.int64), "global_tid": d["global_tid"].astype(np.int64),
            "text": to_text(d["text"]), "domain": doms[d["domain"]], "thread": d["thread"].astype(np.int32)})
    if t is None:
        dt = TABLE_DTYPES[name]
        return pd.DataFrame({c: np.zeros(0, dtype=dt.get(c, "int64")) for c in cols})
    d = t.read_all(list(cols) + (["pos"] if t.bucketed else []))
    if t.bucketed:  # blocks hold start-time buckets: back to table order
        order = np.argsort(d["pos"], kind="stable")
        d = {c: d[c][order] for c in cols}
    return pd.DataFrame({c: d[c] for c in cols}, copy=False)
