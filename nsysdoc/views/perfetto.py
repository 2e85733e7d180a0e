"""A Chrome trace (JSON) of the analysis window, for ui.perfetto.dev and chrome://tracing.

:func:`chrome_trace` yields the file as text chunks of at most :data:`EVENTS_PER_CHUNK` events (a
capture with millions of GPU operations, or a slice of a million, is never held as text or as a
list of events; each batch is formatted by one ``%`` over numpy columns, names made once per
distinct name); the command line writes them. What it holds
(``docs/perfetto.md``):

* every GPU operation (kernel, memcpy, memset) that the export selects, as a complete event
  (``ph: "X"``) on a track per device (a process ``GPU 0 (NVIDIA H100 ...)``) and stream (a thread
  ``stream 7``), with its true start and duration;
* per device, an ``idle gaps`` track: each idle gap overlapping the selection, clipped to it, named
  ``idle: <class>`` after its largest idle class (the classes of ``analysis.gaps``: sync, input,
  alloc, setup, launch, api, host, dependency, tail, unattributed), with the class split in args;
* per host thread, its NVTX ranges (a PyTorch Profiler trace: ``cpu_op``, annotations and Python
  functions) on the thread's track and its CUDA API calls on a ``<thread> CUDA API`` track;
* a ``nsysdoc findings`` process with one track per finding: an event per time range the finding
  names (or the whole selection when it names none), its name ``<rule id>: <title>``, its message,
  severity and impact in args;
* on each GPU operation, args: correlation id, device, stream, launch configuration (kernels),
  bytes and copy kind (copies, memsets), the Where attribution of its launch (operator, module,
  Python frame, backward node);
* flows (``s``/``f`` pairs): from each operation's launching CUDA call to the operation
  (``launch``), and from the operator range the Where attribution gives the launch to the call
  (``operator``), written only when both ends are in the export (:class:`_Flows`).

Which operations: those that *start* in the selection (the analysis window by default, as the
analysis counts them; or ``--range`` / ``--steps``); host rows and gaps that *overlap* it.
Timestamps are microseconds (3 decimals: ns precision) on the capture's timeline: an nsys
export's own times, a PyTorch Profiler trace's times from the instant trace viewers show as 0.

Slices of the analysis engine are run again to get the idle gaps with their classes (each gap is
classified once, in the slice its end falls in), so memory stays that of one slice's columns
and one batch of text. That reading (the replay, the host rows, the tables the tracks are named
after, the schema's codes) is :mod:`nsysdoc.assembly.perfetto_rows`'s: this module only turns its
rows into Chrome-trace JSON and imports neither the engine nor the readers (issue 51). What to
export (the window, ``--range``, ``--steps``) is :mod:`nsysdoc.views.perfetto_selection`'s.
"""
from __future__ import annotations

import json
import re
from typing import Iterator

import numpy as np

from ..version import __version__
from ..metrics.gpu import CAUSES
from ..metrics.ops import KIND_KERNEL, KIND_MEMCPY
from ..assembly.perfetto_rows import (ExportSource, TrackTables, api_name, copy_kind_label, host_ids, launch_fields,
                                      mem_kind_label)
# what to export, re-exported: the command line and the API import these from here
from .perfetto_selection import (Selection, check_export_options, merge_intervals, parse_range,  # noqa: F401
                                 parse_steps, selection_for, time_origin_ns)

#: Synthetic ids (OS pids and tids are 24-bit, so these never collide with them).
GPU_PID_BASE = 1 << 24          # + device index
FINDINGS_PID = (1 << 24) - 1 + (1 << 25)
HOST_PID_EXTRA = 1 << 26        # + n, for a pid seen on two hosts
GAP_TID = 1 << 24               # a device's idle-gap track
UNKNOWN_STREAM_TID = (1 << 24) + 1
API_TID = 1 << 24               # + OS tid: a thread's CUDA API track
OVERLAP_TID = 1 << 25           # + track tid: events that overlap their track without nesting

_SURROGATES = re.compile("[\ud800-\udfff]")


def jstr(s) -> str:
    """A JSON string literal for any text from a trace: unpaired surrogates (undecodable bytes)
    become U+FFFD, control characters are escaped."""
    s = "" if s is None else str(s)
    if _SURROGATES.search(s):
        s = _SURROGATES.sub("\ufffd", s)
    return json.dumps(s, ensure_ascii=False)


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.{2 if unit == 'GiB' else 1}f} {unit}"
    return f"{n} B"


# ---------------------------------------------------------------------------------------------
# tracks
# ---------------------------------------------------------------------------------------------
class _Tracks:
    """Track ids and their metadata events, emitted the first time a track is used."""

    def __init__(self, tables: TrackTables) -> None:
        self.pending: list[str] = []
        self._procs: set = set()
        self._threads: set = set()
        self.dev_label, self.dev_name = tables.dev_label, tables.dev_name
        self.stream_id, self.stream_proc, self.stream_dev = tables.stream_id, tables.stream_proc, tables.stream_dev
        self.proc_pid, self.proc_names = tables.proc_pid, tables.proc_names
        self.thread_gtid, self.thread_name = tables.thread_gtid, tables.thread_name
        # streams of more than one process on a device: their labels name the pid
        self.multi_proc_dev = set()
        for d in np.unique(self.stream_dev).tolist():
            if len(np.unique(self.stream_proc[self.stream_dev == d])) > 1:
                self.multi_proc_dev.add(int(d))
        self._host_pid: dict[int, int] = {}

    def _meta(self, kind: str, pid: int, tid: int | None, value) -> None:
        key = "name" if kind.endswith("_name") else "sort_index"
        val = jstr(value) if key == "name" else int(value)
        t = "" if tid is None else f',"tid":{tid}'
        self.pending.append(f'{{"ph":"M","name":"{kind}","pid":{pid}{t},"args":{{"{key}":{val}}}}}')

    def _process(self, pid: int, name: str, sort: int) -> None:
        if pid not in self._procs:
            self._procs.add(pid)
            self._meta("process_name", pid, None, name)
            self._meta("process_sort_index", pid, None, sort)

    def _thread(self, pid: int, tid: int, name: str, sort: int) -> None:
        if (pid, tid) not in self._threads:
            self._threads.add((pid, tid))
            self._meta("thread_name", pid, tid, name)
            self._meta("thread_sort_index", pid, tid, sort)

    # GPU
    def gpu_pid(self, d: int) -> int:
        pid = GPU_PID_BASE + d
        if pid not in self._procs:
            label = self.dev_label[d] if 0 <= d < len(self.dev_label) else str(d)
            name = self.dev_name[d] if 0 <= d < len(self.dev_name) else ""
            self._process(pid, f"GPU {label}" + (f" ({name})" if name else ""), 1000 + d)
        return pid

    def stream_tid(self, d: int, s: int, overlap: bool = False) -> int:
        pid = self.gpu_pid(d)
        if 0 <= s < len(self.stream_id):
            tid, sid = s + 1, int(self.stream_id[s])
            label = f"stream {sid}"
            if d in self.multi_proc_dev:
                p = int(self.stream_proc[s])
                if 0 <= p < len(self.proc_pid):
                    label += f" · pid {int(self.proc_pid[p])}"
            sort = sid
        else:
            tid, label, sort = UNKNOWN_STREAM_TID, "stream ?", 1 << 30
        if overlap:
            tid, label = tid + OVERLAP_TID, label + " (overlapping)"
        self._thread(pid, tid, label, sort)
        return tid

    def gap_tid(self, d: int) -> int:
        pid = self.gpu_pid(d)
        self._thread(pid, GAP_TID, "idle gaps", -1)
        return GAP_TID

    # host
    def host_pid(self, gtid: int) -> int:
        gpid, os_pid, _ = host_ids(gtid)
        pid = self._host_pid.get(gpid)
        if pid is None:
            pid = os_pid
            if pid in self._host_pid.values() or pid >= GPU_PID_BASE:
                pid = HOST_PID_EXTRA + len(self._host_pid)
            self._host_pid[gpid] = pid
            name = self.proc_names.get(gpid) or f"process {os_pid}"
            self._process(pid, f"{name} (pid {os_pid})", 10 + len(self._host_pid))
        return pid

    def host_tid(self, gtid: int, api: bool = False, overlap: bool = False) -> tuple[int, int]:
        pid = self.host_pid(gtid)
        tid = host_ids(gtid)[2]
        name = self.thread_name.get(int(gtid)) or f"thread {tid}"
        out, label = tid, name
        if api:
            out, label = API_TID + tid, f"{name} CUDA API"
        if overlap:
            out, label = out + OVERLAP_TID, label + " (overlapping)"
        self._thread(pid, out, label, tid * 4 + (1 if api else 0) + (2 if overlap else 0))
        return pid, out

    # findings
    def finding_tid(self, i: int, rule: str) -> int:
        self._process(FINDINGS_PID, "nsysdoc findings", 0)
        self._thread(FINDINGS_PID, i + 1, rule, i)
        return i + 1

    def take(self) -> list[str]:
        out, self.pending = self.pending, []
        return out


def _us(ns: np.ndarray) -> list[str]:
    """ns -> exact µs text (3 decimals), never negative."""
    ns = np.maximum(np.asarray(ns, dtype=np.int64), 0)
    q, r = np.divmod(ns, 1000)
    return [f"{a}.{b:03d}" if b else str(a) for a, b in zip(q.tolist(), r.tolist())]


#: ``_US_FRAC[r]``: the text after the whole µs of a time with ``r`` ns over them ("" for 0)
_US_FRAC = np.array([""] + [f".{r:03d}" for r in range(1, 1000)], dtype=object)


def _us_cols(ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_us` as two columns for ``"%d%s"``: whole µs and the fraction's text."""
    q, r = np.divmod(np.maximum(np.asarray(ns, dtype=np.int64), 0), 1000)
    return q, _US_FRAC[r]


def _rows(fmt: str, n: int, cols: list) -> str:
    """``n`` rows of ``fmt`` (a %-format) filled from ``cols`` (arrays of length ``n``, or scalars),
    formatted by one ``%`` over the batch: no Python code runs per event."""
    if n <= 0:
        return ""
    flat = np.empty((n, len(cols)), dtype=object)
    for j, c in enumerate(cols):
        flat[:, j] = c
    return (fmt * n) % tuple(flat.ravel().tolist())


def _jstrs(texts: list) -> np.ndarray:
    """:func:`jstr` of each text (strings), encoded in one ``json.dumps``, without the quotes."""
    if not texts:
        return np.zeros(0, dtype=object)
    body = json.dumps(texts, ensure_ascii=False, separators=(",", ":"))
    if _SURROGATES.search(body):
        body = _SURROGATES.sub("\ufffd", body)
    # inside a JSON string every '"' is escaped, so '","' only ever separates two of them
    parts = body[2:-2].split('","')
    if len(parts) != len(texts):  # never, by the above; kept for safety
        parts = [jstr(t)[1:-1] for t in texts]
    out = np.empty(len(parts), dtype=object)
    out[:] = parts
    return out


def _groups(*cols: np.ndarray) -> tuple[list, np.ndarray]:
    """The distinct rows of integer columns (as tuples of ints) and each row's index in them."""
    code = None
    vals = []
    for c in cols:  # each column's distinct values, then one int64 code per row (few of each)
        u, inv = np.unique(np.asarray(c, dtype=np.int64), return_inverse=True)
        inv = inv.reshape(-1).astype(np.int64)
        vals.append(u.tolist())
        code = inv if code is None else code * len(u) + inv
    if code is None or not len(code):
        return [], np.zeros(0, dtype=np.int64)
    uc, inv = np.unique(code, return_inverse=True)
    keys = []
    for x in uc.tolist():
        row = []
        for v in reversed(vals):
            x, r = divmod(x, len(v))
            row.append(v[r])
        keys.append(tuple(reversed(row)))
    return keys, inv.reshape(-1)


def _batches(n: int):
    """``[a, b)`` ranges of at most :data:`EVENTS_PER_CHUNK` rows covering ``n``."""
    step = max(int(EVENTS_PER_CHUNK), 1)
    for a in range(0, n, step):
        yield a, min(a + step, n)


def _overlapping(key: np.ndarray, start: np.ndarray, end: np.ndarray, stacks: dict) -> np.ndarray:
    """Which events do not nest properly in their track (Perfetto drops those from one track), as
    Perfetto nests them: per track in start order (longer first at equal starts), the events still
    open form a stack; an event that starts before the innermost open event ends and ends after it
    overlaps it without nesting. Those go to the twin track and are not pushed. ``stacks`` carries
    each track's open events (their ends, outermost first) to the next call.

    Vectorised where a track's events follow one another (a GPU stream, CUDA calls of a thread):
    only from a track's first event that starts inside an earlier one is a stack walked in Python."""
    out = np.zeros(len(key), dtype=bool)
    if not len(key):
        return out
    order = np.lexsort((-end, start, key))
    k, s, e = key[order], start[order], end[order]
    cut = np.flatnonzero(np.diff(k)) + 1
    for a, b in zip(np.concatenate(([0], cut)).tolist(), np.concatenate((cut, [len(k)])).tolist()):
        kk = int(k[a])
        stack = stacks.get(kk) or []
        ss, ee = s[a:b], e[a:b]
        # the events still open at the first start: a stack of depth <= 1 is one "previous end"
        while stack and stack[-1] <= int(ss[0]):
            stack.pop()
        if len(stack) <= 1:
            r0 = stack[0] if stack else -(1 << 62)
            prev = np.concatenate(([r0], ee[:-1]))
            inside = np.flatnonzero(ss < prev)  # starts before the previous event ends
            if not len(inside):
                stacks[kk] = [int(ee[-1])]
                continue
            i0 = int(inside[0])
            if i0:
                stack = [int(ee[i0 - 1])]
        else:
            i0 = 0
        bad = []
        for i, (x, y) in enumerate(zip(ss[i0:].tolist(), ee[i0:].tolist()), i0):
            while stack and stack[-1] <= x:
                stack.pop()
            if stack and y > stack[-1]:
                bad.append(i)
            else:
                stack.append(y)
        if bad:
            out[order[a:b][np.asarray(bad, dtype=np.int64)]] = True
        stacks[kk] = stack
    return out


#: At most this many trace events in one chunk of text (plus the metadata events of the tracks
#: they use first): memory stays that of one batch whatever an engine slice holds.
EVENTS_PER_CHUNK = 65536

_API_CATS = ("cuda_api", "cuda_api,sync")
# A row is a head (what comes before "ts": made once per distinct category and name), the times,
# and a tail (the track's pid and tid, made once per track): the fewer values, the faster the %.
_TIMES = '%d%s,"dur":%d%s'
_ROW = "%s" + _TIMES + "%s"               # head, times, tail
_NVTX_ROW = '%s%s","ts":' + _TIMES + "%s%s}"  # head, name, times, track, args
_GAP_ROW = "%s" + _TIMES + '%s,"gap_ms":%.6g,"split_ms":{'  # head, times, tail (to "class")
_GAP_FIXED = 7  # values of _GAP_ROW
#: a GPU operation: head, times, track (tail without its "}"), then its args: the correlation id,
#: the track's part (device, stream), the kind's part (launch configuration; bytes, copy kind) and
#: the Where part (operator, module, Python frame), each text made once per distinct value
_OP_ROW = "%s" + _TIMES + '%s,"args":{"correlation":%d%s%s%s}}'
#: flow events (Chrome trace format, v1): a start ("s") bound to the slice enclosing it on its
#: track, an end ("f", ``bp: "e"``) bound to the slice enclosing it on its track; category, name,
#: id, ts, track (``,"pid":..,"tid":..`` without its "}")
_FLOW_S = ',\n{"ph":"s","cat":"%s","name":"%s","id":%d,"ts":%d%s%s}'
_FLOW_F = ',\n{"ph":"f","bp":"e","cat":"%s","name":"%s","id":%d,"ts":%d%s%s}'


def _head(cat: str, name_json: str) -> str:
    return f',\n{{"ph":"X","cat":"{cat}","name":{name_json},"ts":'


def _tail(pid: int, tid: int) -> str:
    return f',"pid":{pid},"tid":{tid}}}'


# ---------------------------------------------------------------------------------------------
# the export
# ---------------------------------------------------------------------------------------------
class _Exporter:
    def __init__(self, analysis, sel: Selection) -> None:
        self.src = ExportSource(analysis)
        self.sel = sel
        self.origin = self.src.origin_ns
        self.tracks = _Tracks(self.src.tracks)
        self.kernel_names: dict = {}
        self.copy_names: dict = {}
        self.api_names: dict = {}
        # per kind of track, each track's open events (see _overlapping)
        self.stack_ops: dict = {}
        self.stack_api: dict = {}
        self.stack_nvtx: dict = {}
        self.counts = {"kernel": 0, "memcpy": 0, "memset": 0, "gap": 0, "cuda_api": 0, "nvtx": 0, "finding": 0,
                       "launch_flow": 0, "operator_flow": 0}
        self.first = True
        self.launch_keys = self.src.launch_keys
        self.launch_args: dict = {}
        #: launching calls whose operator flow the previous slice wrote (a call launching
        #: operations in two slices gets one): sorted runtime rows
        self.prev_calls = np.zeros(0, dtype=np.int64)

    def ts(self, ns) -> list[str]:
        return _us(np.asarray(ns, dtype=np.int64) - self.origin)

    def times(self, s: np.ndarray, e: np.ndarray) -> list:
        """The ``ts`` and ``dur`` columns (``"%d%s"`` each) of events ``[s, e)``."""
        return [*_us_cols(s - self.origin), *_us_cols(e - s)]

    # -- GPU operations ----------------------------------------------------------------------
    def op_chunks(self, ops, state=None) -> Iterator[str]:
        """The operations of a slice that the selection holds, a batch of rows at a time, each
        with its args (:meth:`_op_args`), then the batch's flows from the launching calls, then
        the slice's flows from the operators to the calls (:class:`_Flows`). ``state``: the
        engine slice (:class:`~nsysdoc.engine.slices.SliceState`) the operations are from."""
        if ops is None or not len(ops):
            return
        idx = np.flatnonzero(self.sel.ops_mask(ops.start_ns, ops.end_ns))
        if not len(idx):
            return
        s = ops.start_ns[idx].astype(np.int64)
        e = np.maximum(ops.end_ns[idx].astype(np.int64), s)
        dev = ops.device[idx].astype(np.int64)
        stream = ops.stream[idx].astype(np.int64)
        kind = ops.kind[idx]
        over = _overlapping(dev * (1 << 32) + stream + 1, s, e, self.stack_ops)
        is_k, is_c = kind == KIND_KERNEL, kind == KIND_MEMCPY
        nk, nc = int(is_k.sum()), int(is_c.sum())
        self.counts["kernel"] += nk
        self.counts["memcpy"] += nc
        self.counts["memset"] += len(idx) - nk - nc
        del is_k, is_c, kind
        extra = self._op_args(ops, idx, state)
        flows = _Flows(self, ops, idx, s, e, state)
        for a, b in _batches(len(idx)):
            keys, inv = _groups(dev[a:b], stream[a:b], over[a:b].astype(np.int64))
            tracks = np.empty(len(keys), dtype=object)
            tracks[:] = [_tail(GPU_PID_BASE + d, self.tracks.stream_tid(d, st, bool(ov)))[:-1] for d, st, ov in keys]
            yield _rows(_OP_ROW, b - a, [self._op_heads(ops, idx[a:b]), *self.times(s[a:b], e[a:b]), tracks[inv],
                                         *(c[a:b] for c in extra)])
            yield from flows.launch_chunks(a, b, tracks[inv])
        yield from flows.operator_chunks()

    def _op_args(self, ops, idx, state) -> list:
        """The args columns of operations ``idx`` (for :data:`_OP_ROW`): correlation ids (0 when
        the capture has none), then texts made once per distinct value: the track's part
        (``device``, ``stream``), the kind's part (a kernel's ``grid``, ``block``, ``registers
        per thread``, ``shared memory``, each when known; a copy's ``bytes``, ``copy kind`` and
        ``host memory``; a memset's ``bytes``) and the Where part (``operator``, ``module``,
        ``python frame``, ``backward node``, ``forward operator``: the attribution of the
        operation's launch, as the report's Where tables count it)."""
        n = len(idx)
        corr = self._correlations(ops, idx, state)
        dev = ops.device[idx].astype(np.int64)
        stream = ops.stream[idx].astype(np.int64)
        keys, inv = _groups(dev, stream)
        track = np.empty(len(keys), dtype=object)
        track[:] = [self._track_args(d, st) for d, st in keys]
        kind_part = np.empty(n, dtype=object)
        kind_part[:] = ""
        kind = ops.kind[idx]
        k = np.flatnonzero(kind == KIND_KERNEL)
        if len(k):
            lk, linv = _groups(ops.launch[idx[k]])
            texts = np.empty(len(lk), dtype=object)
            texts[:] = [self._launch_args(c) for (c,) in lk]
            kind_part[k] = texts[linv]
        c = np.flatnonzero(kind != KIND_KERNEL)
        if len(c):
            i = idx[c]
            ck, cinv = _groups(kind[c], ops.copy_kind[i], ops.nbytes[i], ops.host_kind[i])
            texts = np.empty(len(ck), dtype=object)
            texts[:] = [self._copy_args(*x) for x in ck]
            kind_part[c] = texts[cinv]
        where = np.empty(n, dtype=object)
        where[:] = ""
        sites = self._sites(state)
        if sites is not None and len(sites) == len(ops):
            rows = sites[idx]
            wk, winv = _groups(*(rows[:, j] for j in range(rows.shape[1])))
            texts = np.empty(len(wk), dtype=object)
            texts[:] = [self._where_args(x) for x in wk]
            where = texts[winv]
        return [corr, track[inv], kind_part, where]

    def _correlations(self, ops, idx, state) -> np.ndarray:
        """The correlation id of operations ``idx`` (0: unknown; :meth:`ExportSource.correlations`)."""
        return self.src.correlations(ops, idx, state)

    def _track_args(self, d: int, s: int) -> str:
        label = self.tracks.dev_label[d] if 0 <= d < len(self.tracks.dev_label) else str(d)
        sid = int(self.tracks.stream_id[s]) if 0 <= s < len(self.tracks.stream_id) else None
        return f',"device":{jstr(label)},"stream":{"null" if sid is None else sid}'

    def _launch_args(self, code: int) -> str:
        got = self.launch_args.get(code)
        if got is None:
            got = "".join(f',"{label}":{value}' for label, value in launch_fields(self.launch_keys, code))
            self.launch_args[code] = got
        return got

    @staticmethod
    def _copy_args(kind: int, copy_kind: int, nbytes: int, host_kind: int) -> str:
        out = f',"bytes":{int(nbytes)}'
        if kind == KIND_MEMCPY:
            out += f',"copy kind":{jstr(copy_kind_label(copy_kind, "other"))}'
            if host_kind >= 0:
                out += f',"host memory":{jstr(mem_kind_label(host_kind, "unknown"))}'
        return out

    def _sites(self, state):
        """The slice's site rows (operator, module, frame, backward node, forward operator codes;
        -1: none) of its operations, as the engine attributed them; None without ranges."""
        got = self._site_cache(state)
        return None if got is None else got[0]

    def _site_cache(self, state):
        return self.src.sites(state)

    def _name(self, code: int) -> str | None:
        return self.src.site_name(code)

    def _where_args(self, row) -> str:
        from ..metrics.attribution import VIA_ENCLOSING

        op, mod, frame, bwd, fwd = (int(x) for x in row[:5])
        parts = []
        for label, code in (("operator", op), ("module", mod), ("python frame", frame), ("backward node", bwd),
                            ("forward operator", fwd)):
            name = self._name(code)
            if name is None:
                continue
            if name == VIA_ENCLOSING:
                parts.append(f',"launched":{jstr("on another thread, inside the main thread" + chr(39) + "s ranges")}')
                continue
            parts.append(f',"{label}":{jstr(name)}')
        return "".join(parts)

    def _op_heads(self, ops, idx) -> np.ndarray:
        """Each operation's row head (:func:`_head`: its category and name, made once per
        distinct pair)."""
        from ..metrics.kernels import display_name

        out = np.empty(len(idx), dtype=object)
        kind = ops.kind[idx]
        k = np.flatnonzero(kind == KIND_KERNEL)
        if len(k):
            keys, inv = _groups(ops.short_id[idx[k]], ops.name_id[idx[k]], ops.is_nccl[idx[k]].astype(np.int64))
            new = [x for x in keys if x not in self.kernel_names]
            if new:
                shorts = self.src.lookup(np.array([x[0] for x in new], dtype=np.int64))
                longs = self.src.lookup(np.array([x[1] for x in new], dtype=np.int64))
                for key, sh, lg in zip(new, shorts, longs):
                    self.kernel_names[key] = _head("kernel,nccl" if key[2] else "kernel",
                                                   jstr(display_name(str(sh), str(lg)) or "(unnamed kernel)"))
            names = np.empty(len(keys), dtype=object)
            names[:] = [self.kernel_names[x] for x in keys]
            out[k] = names[inv]
        rest = np.flatnonzero(kind != KIND_KERNEL)
        if len(rest):
            i = idx[rest]
            keys, inv = _groups(kind[rest], ops.copy_kind[i], ops.nbytes[i], ops.host_kind[i])
            names = np.empty(len(keys), dtype=object)
            for j, key in enumerate(keys):
                nm = self.copy_names.get(key)
                if nm is None:
                    if key[0] == KIND_MEMCPY:
                        mem = mem_kind_label(key[3], "") if key[3] >= 0 else ""
                        text = f"memcpy {copy_kind_label(key[1], 'other')} {_fmt_bytes(key[2])}" + \
                            (f" ({mem})" if mem else "")
                    else:
                        text = f"memset {_fmt_bytes(key[2])}"
                    nm = self.copy_names[key] = _head("memcpy" if key[0] == KIND_MEMCPY else "memset", jstr(text))
                names[j] = nm
            out[rest] = names[inv]
        return out

    # -- idle gaps -----------------------------------------------------------------------------
    def gap_chunks(self, g) -> Iterator[str]:
        """The gaps of a slice overlapping the selection, clipped to it, a batch at a time. The
        class split (``split_ms``) names only the classes a gap has: rows with the same classes
        share a format, so each batch is still one ``%``."""
        if g is None or not len(g):
            return
        for lo, hi in self.sel.intervals:
            gm_all = np.flatnonzero((g.start_ns < hi) & (g.end_ns > lo))
            for a, b in _batches(len(gm_all)):
                gm = gm_all[a:b]
                n = len(gm)
                split = g.split(gm, lo, hi)
                s = np.maximum(g.start_ns[gm], lo).astype(np.int64)
                e = np.minimum(g.end_ns[gm], hi).astype(np.int64)
                dev = g.device[gm].astype(np.int64)
                cause = g.cause[gm].astype(np.int64)
                heads = np.array([_head("idle", f'"idle: {c}"') for c in CAUSES], dtype=object)
                keys, kinv = _groups(dev, cause)
                tails = np.empty(len(keys), dtype=object)
                tails[:] = [_tail(GPU_PID_BASE + d, self.tracks.gap_tid(d))[:-1] + f',"args":{{"class":"{CAUSES[c]}"'
                            for d, c in keys]
                fixed = [heads[cause], *self.times(s, e), tails[kinv],
                         (g.end_ns[gm] - g.start_ns[gm]).astype(np.float64) / 1e6]
                # a format per set of classes present (bit j: class j)
                nz = split != 0
                code = (nz.astype(np.int64) << np.arange(len(CAUSES), dtype=np.int64)).sum(axis=1)
                codes, cinv = np.unique(code, return_inverse=True)
                fmts = np.empty(len(codes), dtype=object)
                fmts[:] = [_GAP_ROW + ",".join(f'"{CAUSES[j]}":%.6g' for j in range(len(CAUSES)) if c >> j & 1)
                           + "}}}" for c in codes.tolist()]
                fmt = "".join(fmts[cinv.reshape(-1)].tolist())
                # the values, row by row: the fixed ones, then the row's nonzero classes in order
                per = nz.sum(axis=1)
                base = np.arange(n, dtype=np.int64) * _GAP_FIXED + np.concatenate(([0], np.cumsum(per)[:-1]))
                vals = np.empty(n * _GAP_FIXED + int(per.sum()), dtype=object)
                for j, c in enumerate(fixed):
                    vals[base + j] = c
                r, c = np.nonzero(nz)
                first = np.concatenate(([0], np.cumsum(per)[:-1]))
                vals[base[r] + _GAP_FIXED + (np.arange(len(r)) - first[r])] = split[r, c].astype(np.float64) / 1e6
                self.counts["gap"] += n
                yield fmt % tuple(vals.tolist())

    def _in_earlier(self, start: np.ndarray, lo: int) -> np.ndarray:
        """Rows starting in an interval of the selection before the one starting at ``lo``
        (written with that interval already)."""
        m = np.zeros(len(start), dtype=bool)
        for a, b in self.sel.intervals:
            if a >= lo:
                break
            m |= (start >= a) & (start < b)
        return m

    # -- host ----------------------------------------------------------------------------------
    def host_chunks(self, lo: int, hi: int, before: bool = False) -> Iterator[str]:
        """CUDA API calls and NVTX ranges starting in ``[lo, hi)`` (with ``before``: starting
        before ``lo`` and still running at it), a batch at a time."""
        d = self.src.api_calls(lo, hi, before, self._in_earlier)
        if d is not None:
            yield from self._api_chunks(d)
        d = self.src.nvtx_ranges(lo, hi, before, self._in_earlier)
        if d is not None:
            yield from self._nvtx_chunks(d)

    def _api_chunks(self, d: dict) -> Iterator[str]:
        """CUDA API calls (:meth:`ExportSource.api_calls`) on their threads' ``CUDA API`` tracks."""
        s, e, gt, nid, sync = d["start"], d["end"], d["gtid"], d["name_id"], d["sync"]
        over = _overlapping(gt, s, e, self.stack_api).astype(np.int64)
        for a, b in _batches(len(s)):
            keys, inv = _groups(gt[a:b], over[a:b])
            tails = np.empty(len(keys), dtype=object)
            tails[:] = [_tail(*self.tracks.host_tid(g, api=True, overlap=bool(ov))) for g, ov in keys]
            ids, ninv = _groups(nid[a:b], sync[a:b])
            new = [x for (x, _) in ids if x not in self.api_names]
            for x, v in zip(new, self.src.lookup(np.array(new, dtype=np.int64))):
                self.api_names[x] = jstr(api_name(str(v)) or "(CUDA API)")
            heads = np.empty(len(ids), dtype=object)
            heads[:] = [_head(_API_CATS[y], self.api_names[x]) for x, y in ids]
            self.counts["cuda_api"] += b - a
            yield _rows(_ROW, b - a, [heads[ninv], *self.times(s[a:b], e[a:b]), tails[inv]])

    def _nvtx_chunks(self, d: dict) -> Iterator[str]:
        """NVTX ranges (:meth:`ExportSource.nvtx_ranges`) on their threads' tracks."""
        texts, dom, gt, s, e = d["text"], d["domain"], d["gtid"], d["start"], d["end"]
        doms = self.src.nvtx_domains
        over = _overlapping(gt, s, e, self.stack_nvtx).astype(np.int64)
        for a, b in _batches(len(s)):
            keys, inv = _groups(gt[a:b], over[a:b])
            tracks = np.empty(len(keys), dtype=object)
            tracks[:] = [_tail(*self.tracks.host_tid(g, overlap=bool(ov)))[:-1] for g, ov in keys]
            dkeys, dinv = _groups(dom[a:b])
            dcat = np.empty(len(dkeys), dtype=object)
            dargs = np.empty(len(dkeys), dtype=object)
            for j, (dm,) in enumerate(dkeys):
                dname = str(doms[dm]) if 0 <= dm < len(doms) else ""
                cat = "cpu_op" if dname == "cpu_op" else (
                    "python_function" if dname == "python_function" else "nvtx")
                dcat[j] = f',\n{{"ph":"X","cat":"{cat}","name":"'
                dargs[j] = f',"args":{{"domain":{jstr(dname)}}}' if dname and cat == "nvtx" else ""
            names = _jstrs([tx if isinstance(tx, str) and tx else "(unnamed range)"
                            for tx in texts[a:b].tolist()])
            self.counts["nvtx"] += b - a
            yield _rows(_NVTX_ROW, b - a, [dcat[dinv], names, *self.times(s[a:b], e[a:b]),
                                           tracks[inv], dargs[dinv]])

    # -- findings ------------------------------------------------------------------------------
    def finding_lines(self) -> list[str]:
        out = []
        findings = self.src.result().get("findings") or []
        if not self.sel.intervals:
            return out
        for i, f in enumerate(findings):
            rule = str(f.get("rule") or "?")
            ranges = []
            for r in f.get("time_ranges") or []:
                a, b = r.get("start_ns"), r.get("end_ns")
                if isinstance(a, int) and isinstance(b, int) and b >= a and \
                        any(a < hi and b > lo or a == b == lo for lo, hi in self.sel.intervals):
                    ranges.append((a, b, str(r.get("label") or ""), str(r.get("device") or "")))
            if not f.get("time_ranges"):
                ranges.append((self.sel.lo, self.sel.hi, f"{f.get('impact_of') or 'analysis window'}", ""))
            if not ranges:
                continue
            tid = self.tracks.finding_tid(i, rule)
            args = {"rule": rule, "severity": f.get("severity"), "message": f.get("message"),
                    "impact_ms": f.get("impact_ms"), "impact_ms_per_step": f.get("impact_ms_per_step"),
                    "impact_pct": f.get("impact_pct"), "impact_of": f.get("impact_of")}
            for a, b, label, dev in ranges:
                extra = dict(args, range=label, **({"device": dev} if dev else {}))
                self.counts["finding"] += 1
                out.append(f'{{"ph":"X","cat":"finding","name":{jstr(rule + ": " + str(f.get("title") or ""))},'
                           f'"ts":{self.ts([a])[0]},"dur":{_us([b - a])[0]},"pid":{FINDINGS_PID},"tid":{tid},'
                           f'"args":{_json_args(extra)}}}')
        return out

    def emit(self, body: str) -> str:
        """``body`` (events, each after ``",\n"``) after the metadata of the tracks it uses first."""
        meta = self.tracks.take()
        text = "".join(",\n" + m for m in meta) + body if meta else body
        if text and self.first:
            text, self.first = text[1:], False  # the first event follows "[" without a comma
        return text


def _inside(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Where a flow event binds to the slice ``[start, end)``: 1 ns after its start (so a viewer
    that binds to the innermost slice open at the flow's time finds it, whatever order it reads
    events with equal times in), or the start itself for a slice shorter than 2 ns."""
    return start + ((end - start) >= 2)


class _Flows:
    """The flows of a slice's exported operations (Chrome trace format, flow events v1):

    * ``launch``: from the launching CUDA call (a start event 1 ns into the call, on the thread's
      ``CUDA API`` track) to the GPU operation (an end event bound to it, ``bp: "e"``, 1 ns into
      it); id ``4 * row + kind + 1`` (the operation's row in its table, kind 0-2: unique);
    * ``operator``: from the operator range the Where attribution gives the launch (a start 1 ns
      into the range, on the thread's track) to the launching call; one per call (the first
      operation of a call launching several, also across two slices), id ``4 * call row + 4``.

    A flow is written only when both ends are in the export (the call and the range overlap the
    selection as host rows do; the operation starts in it): none dangles. Columns are computed once
    per slice; the events a batch at a time."""

    def __init__(self, ex, ops, idx, s, e, state) -> None:
        self.ex, self.ops, self.idx, self.state = ex, ops, idx, state
        self.s, self.e = s, e
        api = ops.api[idx].astype(np.int64)
        th = ops.api_thread[idx].astype(np.int64)
        cs = ops.api_start_ns[idx].astype(np.int64)
        ce = np.maximum(ops.api_end[idx].astype(np.int64), cs)
        self.ok = (api >= 0) & (th >= 0) & self.exported(cs, ce)
        self.api, self.cs, self.ce = api, cs, ce
        self.gt = ops.api_tid(idx).astype(np.int64)

    def exported(self, s: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Host rows the export writes: starting in an interval, or running at its start."""
        m = np.zeros(len(s), dtype=bool)
        for lo, hi in self.ex.sel.intervals:
            m |= ((s >= lo) & (s < hi)) | ((s < lo) & (e > lo))
        return m

    def _api_tracks(self, gt: np.ndarray) -> np.ndarray:
        keys, inv = _groups(gt)
        tracks = np.empty(len(keys), dtype=object)
        tracks[:] = [_tail(*self.ex.tracks.host_tid(g, api=True))[:-1] for (g,) in keys]
        return tracks[inv]

    def launch_chunks(self, a: int, b: int, op_tracks: np.ndarray) -> Iterator[str]:
        j = np.flatnonzero(self.ok[a:b])
        if not len(j):
            return
        i = a + j
        fid = self.ops.row[self.idx[i]].astype(np.int64) * 4 + self.ops.kind[self.idx[i]].astype(np.int64) + 1
        self.ex.counts["launch_flow"] += len(i)
        yield _rows(_FLOW_S, len(i), ["launch", "launch", fid,
                                            *_us_cols(_inside(self.cs[i], self.ce[i]) - self.ex.origin),
                                            self._api_tracks(self.gt[i])])
        yield _rows(_FLOW_F, len(i), ["launch", "launch", fid,
                                            *_us_cols(_inside(self.s[i], self.e[i]) - self.ex.origin),
                                            op_tracks[j]])

    def operator_chunks(self) -> Iterator[str]:
        got = self.ex._site_cache(self.state)
        ok = self.ok
        calls = np.unique(self.api[ok])
        prev, self.ex.prev_calls = self.ex.prev_calls, calls
        if got is None or not ok.any():
            return
        ranges = np.asarray(got[1], dtype=np.int64)
        if len(ranges) != len(self.ops):
            return
        r = ranges[self.idx]
        cand = np.flatnonzero(ok & (r >= 0))
        if not len(cand):
            return
        # one per call: its first operation here, and none for a call the previous slice had
        _, first = np.unique(self.api[cand], return_index=True)
        cand = cand[np.sort(first)]
        cand = cand[~np.isin(self.api[cand], prev)]
        forest = self.ex.src.operator_forest(self.state)
        rr = r[cand]
        if not len(rr) or int(rr.max()) >= len(forest.start):
            return
        os_ = np.asarray(forest.start, dtype=np.int64)[rr]
        oe = np.maximum(np.asarray(forest.end, dtype=np.int64)[rr], os_)
        keep = self.exported(os_, oe)
        cand, rr, os_, oe = cand[keep], rr[keep], os_[keep], oe[keep]
        if not len(cand):
            return
        th = np.asarray(forest.thread, dtype=np.int64)[rr]
        gtid = self.ex.tracks.thread_gtid
        ot = np.where((th >= 0) & (th < len(gtid)), gtid[np.clip(th, 0, max(len(gtid) - 1, 0))], 0) \
            if len(gtid) else np.zeros(len(th), np.int64)
        fid = self.api[cand] * 4 + 4
        for a, b in _batches(len(cand)):
            keys, inv = _groups(ot[a:b])
            tracks = np.empty(len(keys), dtype=object)
            tracks[:] = [_tail(*self.ex.tracks.host_tid(g))[:-1] for (g,) in keys]
            self.ex.counts["operator_flow"] += b - a
            yield _rows(_FLOW_S, b - a, ["operator", "operator", fid[a:b],
                                               *_us_cols(_inside(os_[a:b], oe[a:b]) - self.ex.origin), tracks[inv]])
            c = cand[a:b]
            yield _rows(_FLOW_F, b - a, ["operator", "operator", fid[a:b],
                                               *_us_cols(_inside(self.cs[c], self.ce[c]) - self.ex.origin),
                                               self._api_tracks(self.gt[c])])


def _json_args(d: dict) -> str:
    def clean(v):
        if isinstance(v, str):
            return _SURROGATES.sub("\ufffd", v)
        if isinstance(v, float) and not np.isfinite(v):
            return None
        return v

    return json.dumps({k: clean(v) for k, v in d.items()}, ensure_ascii=False, allow_nan=False)


def chrome_trace(analysis, sel: Selection) -> Iterator[str]:
    """The Chrome trace JSON of ``sel`` as text chunks (see the module doc): at most
    :data:`EVENTS_PER_CHUNK` events each, with the metadata of the tracks they use first."""
    ex = _Exporter(analysis, sel)
    yield '{"traceEvents":['

    def chunks(bodies):
        for body in bodies:
            chunk = ex.emit(body)
            if chunk:
                yield chunk

    if sel.intervals:
        for lo, hi in sel.intervals:  # host rows begun before the selection and running into it
            yield from chunks(ex.host_chunks(lo, hi, before=True))
        for st in ex.src.slices(sel.lo, sel.hi):
            yield from chunks(ex.op_chunks(st.ops, st))
            yield from chunks(ex.gap_chunks(st.gaps))
            for lo, hi in sel.intervals:
                a, b = max(lo, st.c0), min(hi, st.c1)
                if b > a:
                    yield from chunks(ex.host_chunks(a, b))
            del st
        lines = ex.finding_lines()
        for a, b in _batches(len(lines)):
            yield from chunks(["".join(",\n" + x for x in lines[a:b])])
    src = ex.src.result().get("source") or {}
    other = {"generator": f"nsysdoc {__version__}", "source": src.get("path"), "tool": src.get("tool"),
             "time_origin_ns": ex.origin, "selection": sel.kind,
             "intervals_ns": [[int(a), int(b)] for a, b in sel.intervals], "events": ex.counts}
    yield f'\n],"displayTimeUnit":"ns","otherData":{_json_args(other)}}}\n'
