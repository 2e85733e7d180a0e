"""The columns a Kineto trace's rows are gathered in while the events stream by, and their merging.

:class:`_Acc` holds typed :class:`array.array` columns per event kind, the name, thread and
launch-configuration numbering, and the rare rows kept as Python objects. Every parser engine
fills one (a window's own, numbered from 0); :func:`_merge` appends a window's to the trace's in
file order, renumbering what is new, so the numbers are those the slow engine, reading the events
one by one, gives. Also here: the rows of the rare events every engine hands over one at a time
(process/thread names, ``[memory]`` events).
"""
from __future__ import annotations

from array import array

import numpy as np

from .. import schema as S
from .. import tables as F
from .events import K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC
from .numbers import BAD, _I32, _LIM, us_to_ns

_EMPTY: dict = {}


class _Acc:
    """Typed columns of every event kind, filled while the events stream by."""

    def __init__(self) -> None:
        q = lambda: array("q")  # noqa: E731
        i = lambda: array("i")  # noqa: E731
        # GPU tables: start, end, device, context, stream, correlation, name, bytes
        self.gpu = {k: {"s": q(), "e": q(), "dev": q(), "ctx": i(), "st": i(), "corr": q(), "name": i(), "bytes": q()}
                    for k in (K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC)}
        # kernels: the launch configuration's code (grid, block, registers, shared memory and the
        # estimated achieved occupancy, as distinct packed keys: schema.launch_key_sql)
        self.gpu[K_KERNEL]["launch"] = i()
        self.launch_raw: dict = {}   # args as written -> code
        self.launch_codes: dict[tuple[int, int], int] = {}  # (packed key, est. occupancy %) -> code
        self.rt = {"s": q(), "e": q(), "thr": i(), "corr": q(), "name": i(), "drv": array("b")}
        self.host = {"s": q(), "e": q(), "thr": i(), "name": i(), "dom": array("b")}
        self.flow_s = {"id": q(), "thr": i(), "ts": q()}
        # [memory] events: time, thread, Device Type (-1 unknown), Device Id (-2 unknown), Bytes
        # (signed, BAD unknown), Total Allocated / Total Reserved / Addr (-1 when absent)
        self.mem = {"s": q(), "thr": i(), "dtype": i(), "dev": i(), "bytes": q(), "alloc": q(), "resv": q(),
                    "addr": q()}
        self.flow_f = {"id": q(), "dev": q(), "st": i(), "ts": q()}
        self.spans: list[tuple[int, int]] = []
        self.overhead: list[tuple[int, int, str]] = []
        self.names: dict[str, int] = {}
        self.threads: dict[tuple, int] = {}
        self.proc_names: dict = {}
        self.thread_names: dict = {}
        self.kinds: set[int] = set()  # the kinds of X events seen (``tables``)
        self.events = 0
        self.ignored = 0
        #: windows read by each path (:func:`_events`): "arrow", "msgspec", and "slow" (one call
        #: of the one-event-at-a-time reader, for a window or the events after the last cut)
        self.paths = {"arrow": 0, "msgspec": 0, "slow": 0}

    def launch_code(self, a: dict) -> int:
        """The code of a kernel event's launch configuration (its ``args``)."""
        return self.launch_code5(a.get("grid"), a.get("block"), a.get("registers per thread"),
                                 a.get("shared memory"), a.get("est. achieved occupancy %"))

    def launch_code5(self, g, b, regs, smem, est) -> int:
        """:meth:`launch_code` of the five args it reads (grid, block, registers per thread,
        shared memory, est. achieved occupancy %)."""
        if g.__class__ is list and b.__class__ is list and len(g) == 3 and len(b) == 3:
            raw = (g[0], g[1], g[2], b[0], b[1], b[2], regs, smem, est)
        else:  # the rare event without both: each dimension list kept on its own
            raw = (tuple(g) if g.__class__ is list and len(g) == 3 else None,
                   tuple(b) if b.__class__ is list and len(b) == 3 else None, regs, smem, est)
        try:
            code = self.launch_raw.get(raw)
        except TypeError:  # an unhashable value (a list where a number belongs)
            raw, code = None, None
        if code is None:
            item = _launch_fields(raw)
            code = self.launch_codes.get(item)
            if code is None:
                code = self.launch_codes[item] = len(self.launch_codes)
            if raw is not None:
                self.launch_raw[raw] = code
        return code

    def name_id(self, v) -> int:
        if v.__class__ is not str:
            v = F.UNKNOWN_NAME if v is None else str(v)
        got = self.names.get(v)
        if got is None:
            got = self.names[v] = len(self.names)
        return got


def _launch_fields(raw) -> tuple[int, int]:
    """(packed launch key, est. achieved occupancy % or -1) of a kernel's args ``(grid, block,
    registers per thread, shared memory, est. achieved occupancy %)``; a value of the wrong type
    or out of range leaves its field unknown."""
    if raw is None:
        return S.LAUNCH_UNKNOWN, -1
    if len(raw) == 9:  # grid and block both lists of 3, flattened
        g, b, (r, sm, est) = raw[0:3], raw[3:6], raw[6:]
    else:
        g, b, r, sm, est = raw

    def size(dims, cap):
        if dims is None or any(v.__class__ is not int or not 1 <= v < _I32 for v in dims):
            return -1
        return min(dims[0] * dims[1] * dims[2], cap)

    blocks = size(g, S.LAUNCH_BLOCKS_CAP)
    threads = size(b, 1 << 20)
    regs = r if r.__class__ is int and 0 <= r <= 255 else -1
    smem = sm if sm.__class__ is int and 0 <= sm < _I32 else -1
    occ = int(round(est)) if est.__class__ in (int, float) and 0 <= est <= 100 else -1
    return S.pack_launch(blocks, threads, regs, smem), occ


def _numbered(ids: dict, keys: list) -> np.ndarray:
    """Each key's number in ``ids``, new keys numbered in order as they first come (the slow
    path's ``ids.get(k)``/``ids[k] = len(ids)``). TypeError on an unhashable key."""
    got = list(map(ids.get, keys))
    if None in got:
        for i in [i for i, v in enumerate(got) if v is None]:
            k = keys[i]
            v = ids.get(k)
            if v is None:
                v = ids[k] = len(ids)
            got[i] = v
    return np.fromiter(got, dtype=np.int64, count=len(got))


def _number(known: dict, new: dict, keys: list) -> np.ndarray:
    """Each key's number (``keys``: distinct): from ``known``, else the next number after
    ``known``'s, in order, recorded in ``new`` (empty): the slow path's numbering, not yet
    committed."""
    got = list(map(known.get, keys))
    if None in got:
        missing = [k for k, v in zip(keys, got) if v is None]
        new.update(zip(missing, range(len(known), len(known) + len(missing))))
        got = list(map(new.get, keys, got))  # (a known key is never in new: its number stays)
    return np.fromiter(got, dtype=np.int64, count=len(got))


def _add(col: array, values: np.ndarray) -> None:
    """Append a numpy column to an :class:`array.array` of the same item size."""
    if len(values):
        col.frombytes(np.ascontiguousarray(values, dtype=np.dtype(col.typecode)).tobytes())


def _commit_rows(acc: _Acc, kinds: np.ndarray, gpu_rows: dict, rt_row, host_row, fs_row, fe_row) -> None:
    """Append one window's rows (either reader's: :func:`_chunk`, :func:`_arrow_chunk`) to the
    accumulator's columns; a table whose row dict is None got no rows."""
    acc.kinds.update(kinds.tolist())
    for kind, row in gpu_rows.items():
        for k, v in row.items():
            _add(acc.gpu[kind][k], v)
    for table, row in ((acc.rt, rt_row), (acc.host, host_row), (acc.flow_s, fs_row), (acc.flow_f, fe_row)):
        if row is not None:
            for k, v in row.items():
                _add(table[k], v)


def _merge(acc: _Acc, part: _Acc) -> None:
    """Append a window's rows (``part``, numbered from 0) to ``acc``: names, threads and launch
    configurations new to ``acc`` are numbered after its own in the order the window met them,
    which is the order the slow path, reading the events one by one, numbers them in."""
    def lut(known: dict, numbered: dict) -> np.ndarray:
        new: dict = {}
        out = _number(known, new, list(numbered))
        known.update(new)
        return out

    names, threads, launch = lut(acc.names, part.names), lut(acc.threads, part.threads), \
        lut(acc.launch_codes, part.launch_codes)
    acc.launch_raw.update(zip(part.launch_raw, launch[list(part.launch_raw.values())].tolist()))
    recode = {"name": names, "thr": threads, "launch": launch}
    for mine, theirs in [(acc.gpu[k], part.gpu[k]) for k in acc.gpu] + [(acc.rt, part.rt), (acc.host, part.host),
                                                                       (acc.flow_s, part.flow_s), (acc.flow_f, part.flow_f),
                                                                       (acc.mem, part.mem)]:
        for key, col in theirs.items():
            if len(col):
                if key in recode:
                    _add(mine[key], recode[key][np.frombuffer(col, dtype=col.typecode)])
                else:
                    mine[key].extend(col)
    acc.spans.extend(part.spans)
    acc.overhead.extend(part.overhead[:max(0, 100_000 - len(acc.overhead))])
    acc.proc_names.update(part.proc_names)
    acc.thread_names.update(part.thread_names)
    acc.kinds.update(part.kinds)
    acc.events += part.events
    acc.ignored += part.ignored
    for k, v in part.paths.items():
        acc.paths[k] += v


def _metadata_event(ev: dict, acc: _Acc) -> None:
    a = ev.get("args")
    if a.__class__ is not dict:
        return
    name = ev.get("name")
    label = a.get("name")
    if not isinstance(label, str):
        return
    try:
        if name == "process_name":
            acc.proc_names[ev.get("pid")] = F.cap(label)
        elif name == "thread_name":
            acc.thread_names[(ev.get("pid"), ev.get("tid"))] = F.cap(label)
    except TypeError:  # unhashable ids
        pass


def _mem_int(v, lo: int, hi: int, other: int) -> int:
    """A memory event's integer arg when it is an int in [lo, hi), else ``other``."""
    return v if v.__class__ is int and lo <= v < hi else other


def _memory_event(ev: dict, acc: _Acc) -> None:
    """One ``[memory]`` instant event (the slow path's, which defines the row the fast paths
    make: :func:`_memory_rows`)."""
    tkey = (ev.get("pid"), ev.get("tid"))
    threads = acc.threads
    try:
        ti = threads.get(tkey)
    except TypeError:  # an unhashable pid/tid: one thread for all such rows
        tkey = (repr(tkey[0])[:64], repr(tkey[1])[:64])
        ti = threads.get(tkey)
    if ti is None:
        ti = threads[tkey] = len(threads)
    a = ev.get("args")
    if a.__class__ is not dict:
        a = _EMPTY
    m = acc.mem
    m["s"].append(us_to_ns(ev.get("ts")))
    m["thr"].append(ti)
    m["dtype"].append(_mem_int(a.get("Device Type"), 0, 256, -1))
    m["dev"].append(_mem_int(a.get("Device Id"), -1, 65536, -2))
    m["bytes"].append(_mem_int(a.get("Bytes"), -_LIM + 1, _LIM, BAD))
    m["alloc"].append(_mem_int(a.get("Total Allocated"), 0, _LIM, -1))
    m["resv"].append(_mem_int(a.get("Total Reserved"), 0, _LIM, -1))
    m["addr"].append(_mem_int(a.get("Addr"), 0, _LIM, -1))


#: (arg name, lowest, highest + 1, value when not an int in range) of each memory column
_MEM_ARGS = {"dtype": ("Device Type", 0, 256, -1), "dev": ("Device Id", -1, 65536, -2),
             "bytes": ("Bytes", -_LIM + 1, _LIM, BAD), "alloc": ("Total Allocated", 0, _LIM, -1),
             "resv": ("Total Reserved", 0, _LIM, -1), "addr": ("Addr", 0, _LIM, -1)}


# --------------------------------------------------------------------------------------------
