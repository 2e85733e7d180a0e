"""The ingest: an export's event tables streamed into the capture's block store.

Why a module of its own (issue 51): this is where the reader's pieces meet. Each big table
(CUDA API calls first, then kernels, copies, memsets, syncs, OS runtime calls, NVTX) is read in
chunks (:mod:`.chunks`), put on the session timeline (:mod:`.clock`), checked row by row
(``trace.tables.validate``: refused rows are counted, never silently kept), given first-seen
codes (:mod:`.codes`), joined to the runtime row that launched it, and appended to the
:class:`~nsysdoc.trace.store.Store` in blocks; no table is ever held whole. :meth:`_Ingest.finish`
then builds the small tables the codes index.
"""
from __future__ import annotations

import numpy as np

from .. import schema as S
from ..columns import Columns
from ..model import StringTable
from ..nvtx_text import Groups
from ..open import ExportFile
from ..store import Store
from ..tables import (DROP_REASONS, TABLE_CODED, TABLE_DTYPES, UNKNOWN_NAME, Drops, FirstLaunches, ProgressFn,
                      api_kind_codes, gpu_table, launch_arrays, median_anchor, row_checks, stream_luts,
                      threads_table, unique_ints, validate)
from .chunks import _ChunkReader, _file_size, _query, _rows_bound
from .clock import _shift_times
from .codes import _Codes, _CorrIndex, _Grow, _TupleCodes
from .nvtx import _NvtxReader
from .small import _devices_frame


GPU_TABLES = ("kernels", "memcpy", "memset", "sync")
_TABLE_OF = {"kernels": S.KERNEL, "memcpy": S.MEMCPY, "memset": S.MEMSET, "sync": S.SYNC, "runtime": S.RUNTIME,
             "osrt": S.OSRT, "nvtx": S.NVTX}
_COLS_OF = {"kernels": S.KERNEL_COLS, "memcpy": S.MEMCPY_COLS, "memset": S.MEMSET_COLS, "sync": S.SYNC_COLS,
            "runtime": S.RUNTIME_COLS, "osrt": S.OSRT_COLS}
#: the order tables' refused rows are listed in (as the tables appear in the report)
_DROP_ORDER = (S.KERNEL, S.RUNTIME, S.MEMCPY, S.MEMSET, S.SYNC, S.OSRT, S.NVTX)


class _Ingest:
    """Streams an export's tables into a :class:`Store` (see the module docstring)."""

    def __init__(self, exp: ExportFile, store: Store, strings: StringTable, duration_ns: int | None,
                 drops: Drops, progress: ProgressFn | None = None, shift: int = 0) -> None:
        self.exp, self.store, self.duration_ns, self.drops = exp, store, duration_ns, drops
        #: ``StringIds`` as exported (NVTX ``textId`` and the small tables' ids look names up in it)
        self.raw_strings = strings
        #: string ids size arrays (per-name counts and codes): ids far beyond the number of
        #: strings (a ``StringIds`` row at id 2^31) are renumbered to their rank, and the event
        #: tables' name ids with them (``None``: the ids are kept, the usual dense 0..n-1)
        self.string_ids: np.ndarray | None = None
        if len(strings) and (int(strings.ids[0]) < 0 or int(strings.ids[-1]) >= max(1 << 22, 4 * len(strings))):
            self.string_ids = strings.ids
            strings = StringTable(np.arange(len(strings), dtype=np.int64), strings.values)
        self.strings = strings
        #: subtracted from every time read: absolute timestamps back on the session timeline
        self.shift = shift
        self.say = progress or (lambda _msg: None)
        self.procs, self.devices, self.threads = _Codes(), _Codes(), _Codes()
        self.streams = _TupleCodes()
        self.corr = _CorrIndex()
        #: the largest string id: a name id beyond it names nothing (and must not size an array)
        self.max_id = int(strings.ids.max()) if len(strings) else -1
        self.unknown_id = self.max_id + 1
        self.unknown_used = False
        # per runtime row, for the launch join: start, kind, duration (uint32; longer ones in
        # rt_long) and thread code (int16 until there are more threads)
        self.rt_start, self.rt_kind = _Grow(np.int64), _Grow(np.int8)
        self.rt_dur, self.rt_thread = _Grow(np.uint32), _Grow(np.int16)
        self.rt_long: dict[int, int] = {}  # durations of 2^32 ns or more, by position
        self.rt_n = 0
        self.kind_of = api_kind_codes(strings)
        self.launch_name = strings.flags(lambda v: S.KERNEL_LAUNCH_APIS.match(S.strip_api_suffix(v)) is not None)
        self.is_wait = strings.flags(lambda v: S.OS_WAIT_CALLS.match(v) is not None)
        self.name_counts = np.zeros(0, dtype=np.int64)
        self.candidates: list[np.ndarray] = []
        self.pageable: list[np.ndarray] = []
        self.first = FirstLaunches()
        self.kernel_names: set[int] = set()
        self.expected: dict[str, int] = {}  # rows of each big table (its rowid range)
        self.kernel_shorts: set[int] = set()
        #: distinct packed launch configurations (schema.launch_key_sql): a kernel row keeps its code
        self.launch = _Codes()
        self.nvtx_domains = _TupleCodes()
        self.nvtx_groups = Groups()
        self.domain_names: dict[tuple[int, int], str] = {}
        self.domain_any: dict[int, str] = {}
        self.counts: dict[str, int] = {}

    # ---- shared steps ------------------------------------------------------------------------
    def _names(self, d: dict[str, np.ndarray]) -> None:
        """Name ids that are NULL, negative or beyond the strings table's largest id point at one
        added string, so per-name statistics keep the row's time under a visible name instead of
        failing (an id of 2^31 - 1 would size a per-name count at 16 GiB); with renumbered strings
        (:attr:`string_ids`) each id becomes its rank, an id without a string the added one."""
        for c in ("name_id", "short_id"):
            if c in d and len(d[c]):
                v = d[c]
                if self.string_ids is not None:
                    ids = self.string_ids
                    pos = np.minimum(np.searchsorted(ids, v), len(ids) - 1)
                    found = ids[pos] == v
                    d[c] = np.where(found, pos, self.unknown_id)
                    self.unknown_used |= not found.all()
                    continue
                bad = (v < 0) | (v > self.max_id)
                if bad.any():
                    d[c] = v.copy()
                    d[c][bad] = self.unknown_id
                    self.unknown_used = True

    def _rows(self, key: str, where: str = "", cols=None, end_optional: bool = False):
        """Validated chunks of one table (dict of columns), in rowid order."""
        table = _TABLE_OF[key]
        # a kernel's launch configuration, packed by SQLite into one column (schema.launch_key_sql)
        extra = {"launch_key": (S.launch_key_sql(self.exp.columns(table)), S.LAUNCH_UNKNOWN)} \
            if key == "kernels" else None
        reader = _ChunkReader(self.exp, table, cols or _COLS_OF[key], where, extra=extra)
        self.expected[key] = min(max(0, reader.hi - reader.lo), _rows_bound(self.exp))
        anchor = None
        if len(reader.ranges) > 1 and self.duration_ns:
            smp = reader.sample()
            ok, _, _ = row_checks(smp, end_optional)
            anchor = median_anchor(smp["start_ns"], ok)
            anchor = None if anchor is None else anchor - self.shift
        for chunk in reader.chunks():
            self._names(chunk)
            _shift_times(chunk, self.shift)
            d = validate(chunk, table, self.duration_ns, self.drops, end_optional, anchor=anchor if len(reader.ranges) > 1 else None)
            yield d

    # ---- tables ------------------------------------------------------------------------------
    def runtime(self) -> None:
        t = self.store.table("runtime", TABLE_DTYPES["runtime"], TABLE_CODED["runtime"])
        if not self.exp.has(S.RUNTIME):
            return
        for d in self._rows("runtime"):
            n = len(d["start_ns"])
            if n == 0:
                continue
            if not self.rt_n:  # the rowid range bounds the rows; a row takes more than 8 bytes on disk
                rows = min(self.expected.get("runtime", 0), _file_size(self.exp.read_path) // 8)
                for g in (self.rt_start, self.rt_kind, self.rt_dur, self.rt_thread):
                    g.reserve(rows)
            pos = np.arange(self.rt_n, self.rt_n + n, dtype=np.int64)
            gtid = d["global_tid"]
            proc = self.procs(gtid & S.PROCESS_MASK)
            kind = self.kind_of(d["name_id"]).astype(np.int8)
            corr = d["correlation_id"]
            valid = (d["event_class"] != 67) & (corr > 0)
            self.corr.add(proc[valid], corr[valid], pos[valid])
            dur = d["end_ns"] - d["start_ns"]
            from ..schema import SETUP_LAUNCH_MIN_NS

            cand = (kind == S.API_LAUNCH) & (dur >= SETUP_LAUNCH_MIN_NS)
            if cand.any():
                cand &= self.launch_name(d["name_id"])
                self.candidates.append(pos[cand])
            nid = d["name_id"]
            if len(nid):
                bc = np.bincount(np.maximum(nid, 0).astype(np.int64))
                if len(bc) > len(self.name_counts):
                    bc[:len(self.name_counts)] += self.name_counts
                    self.name_counts = bc
                else:
                    self.name_counts[:len(bc)] += bc
            thread = self.threads(gtid)
            self.rt_start.add(d["start_ns"])
            self.rt_kind.add(kind)
            self.rt_thread.add(thread)
            big = dur >= (1 << 32)
            if big.any():
                self.rt_long.update(zip(pos[big].tolist(), dur[big].tolist()))
                dur = np.where(big, 0, dur)
            self.rt_dur.add(dur)
            self.rt_n += n
            t.append({"start_ns": d["start_ns"], "end_ns": d["end_ns"], "correlation_id": corr,
                      "name_id": nid, "event_class": d["event_class"], "api_kind": kind, "proc": proc,
                      "thread": thread})
        self._cand = np.unique(np.concatenate(self.candidates) if self.candidates else np.zeros(0, np.int64))
        self._rt_start, self._rt_kind = self.rt_start.done(), self.rt_kind.done()
        self._rt_dur, self._rt_thread = self.rt_dur.done(), self.rt_thread.done()

    def gpu(self, key: str) -> None:
        t = gpu_table(self.store, key)
        table = _TABLE_OF[key]
        if not self.exp.has(table):
            return
        rt_kind = getattr(self, "_rt_kind", np.zeros(0, np.int8))
        nrows = 0
        for d in self._rows(key):
            n = len(d["start_ns"])
            if n == 0:
                continue
            if "row" in t.dtypes:
                if t._buckets is None:
                    self._buckets(t, d["start_ns"])
                d["row"] = np.arange(nrows, nrows + n, dtype=np.int64)
                nrows += n
            gpid = d.pop("global_pid")
            proc = self.procs(gpid & S.PROCESS_MASK)
            dev_key = ((gpid >> 48) & 0xFFFF) * 65536 + d["device_id"]
            dev = self.devices(dev_key)
            d["proc"], d["device"] = proc, dev
            d["stream"] = self.streams(proc, dev, d["context_id"], d["stream_id"])
            if key == "memcpy":
                host_kind = np.full(n, -1, dtype=np.int8)
                h2d = d["copy_kind"] == S.COPY_HTOD
                d2h = d["copy_kind"] == S.COPY_DTOH
                host_kind[h2d] = d["src_kind"][h2d]
                host_kind[d2h] = d["dst_kind"][d2h]
                d["host_kind"] = host_kind
            if key != "sync":
                api = self.corr.lookup(proc, d["correlation_id"])
                has = api >= 0
                d["api"] = api
                d.update(self._launching(api, has, n))
                if key == "kernels":
                    d["launch"] = self.launch(d.pop("launch_key"))
                    self.kernel_names.update(unique_ints(d["name_id"]).tolist())
                    self.kernel_shorts.update(unique_ints(d["short_id"]).tolist())
                    self.first.add(getattr(self, "_cand", None), proc, d["name_id"], api, d["api_start_ns"], d["row"])
                if key == "memcpy" and len(rt_kind):
                    pg = has & (d["host_kind"] == S.MEM_PAGEABLE)
                    rows = api[pg]
                    rows = rows[rt_kind[rows] == S.API_ASYNC_COPY]
                    if len(rows):
                        self.pageable.append(rows)
            t.append(d)

    def _launching(self, api: np.ndarray, has: np.ndarray, n: int) -> dict[str, np.ndarray]:
        """Start, end, thread and kind of the launching call of each GPU row (-1: unknown)."""
        rt_start = getattr(self, "_rt_start", None)
        if rt_start is None or not len(rt_start):
            return {"api_start_ns": np.full(n, -1, np.int64), "api_end_ns": np.full(n, -1, np.int64),
                    "api_thread": np.full(n, -1, np.int32), "api_kind": np.full(n, -1, np.int8)}
        a = np.maximum(api, 0)
        start = rt_start[a]
        dur = self._rt_dur[a].astype(np.int64)
        if self.rt_long:
            for i in np.flatnonzero(has & (dur == 0)).tolist():
                dur[i] = self.rt_long.get(int(api[i]), 0)
        return {"api_start_ns": np.where(has, start, -1), "api_end_ns": np.where(has, start + dur, -1),
                "api_thread": np.where(has, self._rt_thread[a], -1).astype(np.int32),
                "api_kind": np.where(has, self._rt_kind[a], -1).astype(np.int8)}

    def _buckets(self, t, first_starts: np.ndarray) -> None:
        """Start-time buckets over the capture: the CUDA API calls' span (launches precede their
        operations), else the first chunk's, widened by the session's duration."""
        rt = self.store.get("runtime")
        st = rt.stats() if rt is not None else {"start_min": None}
        if st["start_min"] is not None:
            lo, hi = st["start_min"], st["end_max"]
        else:
            lo, hi = int(first_starts.min()), int(first_starts.max())
        hi = max(hi, lo + (self.duration_ns or 0), int(first_starts.max()) + 1)
        # blocks need only be narrower than a slice: about four buckets per slice of the capture
        from ..rows import slice_rows

        rows = sum(self.expected.values()) or 1
        buckets = int(np.clip(4 * rows // slice_rows(), 16, 4096))
        t.bucket_by_start(lo, (hi - lo) // buckets + 1)

    def osrt(self) -> None:
        t = self.store.table("osrt", TABLE_DTYPES["osrt"], TABLE_CODED["osrt"])
        if not self.exp.has(S.OSRT):
            return
        where = f"WHERE eventClass = {S.OSRT_EVENT_CLASS}" if "eventClass" in self.exp.columns(S.OSRT) else ""
        for d in self._rows("osrt", where):
            if not len(d["start_ns"]):
                continue
            d["is_wait"] = self.is_wait(d["name_id"])
            d["thread"] = self.threads(d["global_tid"])
            t.append(d)

    def nvtx(self) -> None:
        t = self.store.table("nvtx", TABLE_DTYPES["nvtx"], TABLE_CODED["nvtx"])
        if not self.exp.has(S.NVTX):
            return
        present = set(self.exp.columns(S.NVTX))
        if not {"start", "eventType"} <= present:  # a quoted missing column would read as a string literal
            n = _query(self.exp, f'SELECT count(*) FROM "{S.NVTX}"')[0][0]
            self.drops.add(S.NVTX, DROP_REASONS[5], n)
            return
        for d in _NvtxReader(self.exp, present).chunks(self):
            n = len(d["start_ns"])
            if n == 0:
                continue
            t.append(d)

    # ---- end ---------------------------------------------------------------------------------
    def finish(self, thread_names: dict[int, str]) -> dict:
        """Final indices of the coded columns, and the small tables they index."""
        exp = self.exp
        self._rt_start = self._rt_kind = self._rt_dur = self._rt_thread = None
        self.rt_long = {}
        self.threads.add(thread_names)
        all_keys, proc_remap = self.procs.remap()
        all_dev, dev_remap = self.devices.remap()
        tids, thread_remap = self.threads.remap()
        self.store.remaps.update({"proc": proc_remap, "device": dev_remap, "thread": thread_remap})
        proc_names = {}
        if exp.has("PROCESSES") and {"globalPid", "name"} <= set(exp.columns("PROCESSES")):
            for gp, name in _query(exp, 'SELECT globalPid, name FROM "PROCESSES"'):
                if type(gp) is int:
                    proc_names[gp & S.PROCESS_MASK] = name if isinstance(name, str) else ""
        out = {"processes": Columns({"global_pid": all_keys, "pid": S.decode_pid(all_keys),
                                     "name": np.array([proc_names.get(int(k), "") for k in all_keys], dtype=object)})}
        out["devices"] = _devices_frame(exp, all_dev)
        rows = np.asarray(self.streams.rows, dtype=np.int64).reshape(-1, 4)
        out["streams"] = Columns({"stream": np.arange(len(rows), dtype=np.int32),
                                  "proc": proc_remap[rows[:, 0]].astype(np.int64) if len(rows) else rows[:, 0],
                                  "device": dev_remap[rows[:, 1]].astype(np.int64) if len(rows) else rows[:, 1],
                                  "context_id": rows[:, 2], "stream_id": rows[:, 3]})
        out["threads"] = threads_table(tids, thread_names)
        self.store.luts.update(stream_luts(out["streams"], out["devices"]))
        # NVTX domains: matched on (process bits, domainId), else any process's name for the id
        dnames = [self.domain_names.get((p, dom), self.domain_any.get(dom, "")) if dom else ""
                  for p, dom in self.nvtx_domains.rows]
        strings = self.strings
        if self.unknown_used:
            strings = StringTable(np.append(strings.ids, self.unknown_id),
                                  np.append(strings.values, np.array([UNKNOWN_NAME], dtype=object)))
        derived = {
            "pageable_async_api": np.unique(np.concatenate(self.pageable)) if self.pageable else np.zeros(0, np.int64),
            "launch_candidates": np.unique(np.concatenate(self.candidates)) if self.candidates else np.zeros(0, np.int64),
            "setup_launch": self.first.setup_launches(getattr(self, "_cand", np.zeros(0, np.int64))),
            "kernel_name_ids": np.array(sorted(self.kernel_names), dtype=np.int64),
            "kernel_short_ids": np.array(sorted(self.kernel_shorts), dtype=np.int64),
            "runtime_name_counts": self.name_counts,
            **launch_arrays(self.launch.keys),
        }
        return {"frames": out, "strings": strings, "nvtx_domains": np.array(dnames, dtype=object),
                "nvtx_groups": self.nvtx_groups.texts, "derived": derived}
