"""The msgspec parser engine: a window of events decoded in one call, then its rows a column at a time.

:mod:`msgspec` decodes a window's events into structs of only the fields a row needs
(:class:`_Ev`, :class:`_Args`: a ``cpu_op``'s input shapes and the like are skipped, never built);
:func:`_chunk` turns them into the same rows, names, threads and launch codes the slow engine
(:mod:`.parse_slow`) makes one event at a time. It reads the windows the Arrow engine does not
take, and raises on anything it does not expect (the window then goes to the slow engine: the
chain is written in :mod:`.engines`).
"""
from __future__ import annotations

import json
from itertools import compress

import msgspec
import numpy as np

from .. import tables as F
from ..columns import factorize
from ..nvtx_text import SIZES_FIELD as _SIZES_FIELD, sizes_text as _sizes_text
from ..nvtx_text import raw_too_long_shapes as _raw_too_long_shapes
from .accumulate import _MEM_ARGS, _Acc, _add, _commit_rows, _metadata_event, _numbered
from .events import (K_DRIVER, K_HOST, K_KERNEL, K_MEM, K_MEMCPY, K_MEMSET, K_OVERHEAD, K_RUNTIME, K_SPAN,
                     K_SYNC, MEMORY_EVENT, _DOM_OP, _F_END, _F_START, _HOST_DOM, _IGNORED, _KIND, _META,
                     _NAMED, _THREADED, _X_KIND)
from .names import _user_frame
from .numbers import BAD, _I32, _LIM, _big_int, _ints, _ns_many, _small_int, _stream_of

_UNSET = msgspec.UNSET
_NO_RAW = msgspec.Raw()


class _Args(msgspec.Struct, gc=False):
    """The ``args`` an event's row needs; the rest (input shapes, strides ...) is skipped unbuilt."""
    device: object = _UNSET  # missing: the event's pid
    stream: object = None
    context: object = 0
    correlation: object = None
    bytes: object = 0
    grid: object = None
    block: object = None
    regs: object = msgspec.field(default=None, name="registers per thread")
    smem: object = msgspec.field(default=None, name="shared memory")
    occ: object = msgspec.field(default=None, name="est. achieved occupancy %")
    seq: object = msgspec.field(default=None, name="Sequence number")
    stack: object = msgspec.field(default=None, name="Call stack")
    name: object = None  # metadata events: the process or thread name
    # [memory] events (issue 47)
    m_bytes: object = msgspec.field(default=None, name="Bytes")
    m_alloc: object = msgspec.field(default=None, name="Total Allocated")
    m_resv: object = msgspec.field(default=None, name="Total Reserved")
    m_dtype: object = msgspec.field(default=None, name="Device Type")
    m_dev: object = msgspec.field(default=None, name="Device Id")
    m_addr: object = msgspec.field(default=None, name="Addr")
    # record_shapes: an op's input shapes, as written (made a text once per distinct value: _dims_texts)
    dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")


class _Ev(msgspec.Struct, gc=False):
    ph: object = None
    cat: object = None
    name: object = None
    pid: object = None
    tid: object = None
    ts: msgspec.Raw = _NO_RAW  # the text, converted exactly (:func:`_ns_many`); empty when missing
    dur: msgspec.Raw = _NO_RAW
    id: object = None
    args: _Args | None = None  # any other JSON value: the slow path's (ValidationError)


_NO_ARGS = _Args()
_DIMS_DECODE = json.JSONDecoder(parse_float=str, parse_int=_big_int).decode


def _dims_texts(raws: list) -> list:
    """:func:`~nsysdoc.trace.nvtx_text.sizes_text` of each op's ``Input Dims`` as written (a
    ``msgspec.Raw``; empty when missing), decoded as the slow path decodes it, once per distinct
    text (an op's shapes repeat every step); the loops over the ops are C-level (``map``)."""
    keys = list(map(bytes, raws))
    memo = {}
    for key in set(keys):
        got = None
        if key and not _raw_too_long_shapes(key):  # (a huge value is None without decoding it)
            try:
                got = _sizes_text(_DIMS_DECODE(key.decode("utf-8")))
            except (ValueError, RecursionError):
                got = None
        memo[key] = got
    return list(map(memo.__getitem__, keys))


#: a window of events, floats as their text (``float_hook=str``), as the slow engine's ``parse_float=str``
_decode_events = msgspec.json.Decoder(list[_Ev], float_hook=str).decode

#: :class:`_Args` field of each memory column (:data:`_MEM_ARGS`)
_MEM_FIELDS = {"dtype": "m_dtype", "dev": "m_dev", "bytes": "m_bytes", "alloc": "m_alloc", "resv": "m_resv",
               "addr": "m_addr"}


def _thread_numbers(threads: dict, evs: list) -> np.ndarray:
    """:func:`_numbered` of the events' ``(pid, tid)`` keys. When every pid and tid is an int
    (of 64 bits), the pairs are factorised as numbers (first appearance first) and only the
    distinct pairs are looked up: a tuple per event cost twice as much (its allocation, and the
    garbage collections those allocations set off)."""
    pids = [e.pid for e in evs]
    tids = [e.tid for e in evs]
    if set(map(type, pids)) <= {int} and set(map(type, tids)) <= {int}:
        try:
            p = np.fromiter(pids, dtype=np.int64, count=len(pids))
            t = np.fromiter(tids, dtype=np.int64, count=len(tids))
        except OverflowError:
            p = None
        if p is not None:
            pc, pu = factorize(p)
            tc, tu = factorize(t)
            nt = len(tu)
            codes, pairs = factorize(pc * nt + tc)
            pl, tl = pu.tolist(), tu.tolist()
            nums = []
            for c in pairs.tolist():
                key = (pl[c // nt], tl[c % nt])
                v = threads.get(key)
                if v is None:
                    v = threads[key] = len(threads)
                nums.append(v)
            return np.asarray(nums, dtype=np.int64)[codes]
    return _numbered(threads, list(zip(pids, tids)))


def _launch_codes(acc: _Acc, args: list) -> np.ndarray:
    """:meth:`_Acc.launch_code5` of each kernel's args: a configuration seen before (grid and
    block lists of 3, the usual case) is one look-up of the key launch_code5 would build."""
    known = acc.launch_raw.get
    lc = acc.launch_code5
    out = []
    add = out.append
    try:
        for a in args:
            g, b = a.grid, a.block
            if g.__class__ is list and b.__class__ is list and len(g) == 3 and len(b) == 3:
                code = known((*g, *b, a.regs, a.smem, a.occ))
                if code is not None:
                    add(code)
                    continue
            add(lc(g, b, a.regs, a.smem, a.occ))
    except TypeError:  # an unhashable value: launch_code5 gives each event's code
        out = [lc(a.grid, a.block, a.regs, a.smem, a.occ) for a in args]
    return np.fromiter(out, dtype=np.int64, count=len(out))


def _chunk(evs: list, acc: _Acc) -> None:  # noqa: C901 - one pass per column, kept together
    """Rows of a window of decoded events, as :func:`_events_slow` makes them one at a time: the
    same rows, names, threads and launch codes, in the same order. Raises on anything it does not
    expect (the window is then read again by the slow path); ``acc`` is only appended to at the
    end, and its name, thread and launch-code numbering is assigned in event order, so a window
    read again gets the same numbers."""
    n = len(evs)
    kinds = np.fromiter([_X_KIND.get(e.cat, _IGNORED) if e.ph == "X" else _KIND.get((e.ph, e.cat), _IGNORED)
                          for e in evs], dtype=np.int8, count=n)
    for i in np.flatnonzero(kinds == _IGNORED).tolist():
        if evs[i].ph == "M":  # a metadata event with a category
            kinds[i] = _META
        elif evs[i].ph == "i" and evs[i].name == MEMORY_EVENT:
            kinds[i] = K_MEM
    # ---- times of X rows and flows ------------------------------------------------------------
    is_x = (kinds >= 0) & (kinds <= K_OVERHEAD)
    xev = list(compress(evs, is_x.tolist()))
    xk = kinds[is_x]
    s = _ns_many([e.ts for e in xev])
    d = _ns_many([e.dur for e in xev])
    ok = (s != BAD) & (d != BAD)
    e_ = np.where(ok, s + np.where(ok, d, 0), BAD)
    e_[(e_ != BAD) & ~((e_ > -_LIM) & (e_ < _LIM))] = BAD
    is_flow = (kinds == _F_START) | (kinds == _F_END)
    fev = list(compress(evs, is_flow.tolist()))
    fk = kinds[is_flow]
    fid = _ints([e.id for e in fev], 1, 1 << 32, lambda i: 0)
    fts = _ns_many([e.ts for e in fev])
    fvalid = (fid != 0) & (fts != BAD)
    # ---- threads, in event order: calls, host ranges, flow starts that bind -------------------
    need = np.isin(kinds, _THREADED)
    need[np.flatnonzero(is_flow)[fvalid & (fk == _F_START)]] = True
    thr_all = _thread_numbers(acc.threads, list(compress(evs, need.tolist())))
    thr_kind = kinds[need]
    # ---- names, in event order (host ranges get their sequence number and stack frame) --------
    named = np.isin(kinds, _NAMED)
    nev = list(compress(evs, named.tolist()))
    nk = kinds[named]
    nm = [e.name for e in nev]
    host_pos = np.flatnonzero(nk == K_HOST).tolist()
    hev = list(compress(nev, (nk == K_HOST).tolist()))
    dom = np.fromiter([_HOST_DOM[e.cat] for e in hev], dtype=np.int8, count=len(hev))
    op = (dom == _DOM_OP).tolist()
    o_pos = list(compress(host_pos, op))
    if o_pos:
        o_args = [e.args for e in compress(hev, op)]
        if None in o_args:
            o_args = [_NO_ARGS if a is None else a for a in o_args]
        seqs = [a.seq for a in o_args]
        stacks = [a.stack for a in o_args]
        changed = set(map(type, seqs)) != {type(None)}
        if changed:  # autograd's sequence number, kept in the text as emit_nvtx writes it
            for i, sq in zip(o_pos, seqs):
                name = nm[i]
                if sq.__class__ is int and 0 <= sq < _LIM and name.__class__ is str:
                    nm[i] = f"{name}, seq = {sq}"
        dims = [a.dims for a in o_args]
        if any(dims):  # record_shapes: the input shapes, as emit_nvtx writes them
            for i, sz in zip(o_pos, _dims_texts(dims)):
                name = nm[i]
                if sz is not None and name.__class__ is str:
                    nm[i] = f"{name}{_SIZES_FIELD}{sz}"
        if any(cs.__class__ is str and cs for cs in stacks):  # 2021 format: the innermost user frame
            for i, cs in zip(o_pos, stacks):
                name = nm[i]
                if cs.__class__ is str and cs and name.__class__ is str:
                    fr = _user_frame(cs)
                    if fr:
                        nm[i] = f"{name}, stack = {fr}"
    if set(map(type, nm)) - {str}:
        nm = [v if v.__class__ is str else (F.UNKNOWN_NAME if v is None else str(v)) for v in nm]
    nid = _numbered(acc.names, nm)
    # ---- GPU rows -------------------------------------------------------------------------------
    gpu_rows = {}
    for kind in (K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC):
        sel = xk == kind
        if not sel.any():
            continue
        gev = list(compress(xev, sel.tolist()))
        args = [e.args for e in gev]
        if None in args:
            args = [_NO_ARGS if a is None else a for a in args]
        dev = [a.device for a in args]
        if _UNSET in dev:
            dev = [e.pid if v is _UNSET else v for v, e in zip(dev, gev)]
        row = {"s": s[sel], "e": e_[sel],
               "dev": _ints(dev, 0, 65536, lambda i: _small_int(dev[i], 0, 65536, BAD)),
               "ctx": _ints([a.context for a in args], -_I32, _I32, lambda i: 0),
               "st": _ints([a.stream for a in args], -_I32, _I32, lambda i: _stream_of(gev[i].tid)),
               "corr": _ints([a.correlation for a in args], 1, 1 << 32, lambda i: 0),
               "name": nid[nk == kind],
               "bytes": _ints([a.bytes for a in args], 0, _LIM, lambda i: 0)}
        if kind == K_KERNEL:
            row["launch"] = _launch_codes(acc, args)
        gpu_rows[kind] = row
    # ---- calls and host ranges ----------------------------------------------------------------
    rsel = (xk == K_RUNTIME) | (xk == K_DRIVER)
    rt_row = None
    if rsel.any():
        rev = list(compress(xev, rsel.tolist()))
        nsel = (nk == K_RUNTIME) | (nk == K_DRIVER)
        rt_row = {"s": s[rsel], "e": e_[rsel], "thr": thr_all[(thr_kind == K_RUNTIME) | (thr_kind == K_DRIVER)],
                  "corr": _ints([(e.args or _NO_ARGS).correlation for e in rev], 1, 1 << 32, lambda i: 0),
                  "name": nid[nsel], "drv": (xk[rsel] == K_DRIVER).astype(np.int8)}
    hsel = xk == K_HOST
    host_row = None
    if hsel.any():
        host_row = {"s": s[hsel], "e": e_[hsel], "thr": thr_all[thr_kind == K_HOST], "name": nid[nk == K_HOST],
                    "dom": dom}
    # ---- flows ----------------------------------------------------------------------------------
    fs_sel = fvalid & (fk == _F_START)
    fs_row = {"id": fid[fs_sel], "thr": thr_all[thr_kind == _F_START], "ts": fts[fs_sel]}
    fe = fvalid & (fk == _F_END)
    fe_ev = list(compress(fev, fe.tolist()))
    fdev = _ints([e.pid for e in fe_ev], 0, 65536, lambda i: _small_int(fe_ev[i].pid, 0, 65536, -1))
    fst = _ints([e.tid for e in fe_ev], -_I32, _I32, lambda i: _stream_of(fe_ev[i].tid))
    bind = fdev >= 0
    fe_row = {"id": fid[fe][bind], "dev": fdev[bind], "st": fst[bind], "ts": fts[fe][bind]}
    # ---- memory events ------------------------------------------------------------------------
    mem_row = None
    if (kinds == K_MEM).any():
        mev = list(compress(evs, (kinds == K_MEM).tolist()))
        margs = [_NO_ARGS if e.args is None else e.args for e in mev]
        mem_row = {"s": _ns_many([e.ts for e in mev]), "thr": thr_all[thr_kind == K_MEM]}
        for key, (_arg, lo, hi, other) in _MEM_ARGS.items():
            fld = _MEM_FIELDS[key]
            mem_row[key] = _ints([getattr(a, fld) for a in margs], lo, hi, lambda i, o=other: o)
    # ---- commit -----------------------------------------------------------------------------------
    _commit_rows(acc, np.unique(xk), gpu_rows, rt_row, host_row, fs_row, fe_row)
    if mem_row is not None:
        for k, v in mem_row.items():
            _add(acc.mem[k], v)
    for i in np.flatnonzero(xk == K_SPAN).tolist():
        if s[i] != BAD and e_[i] != BAD:
            acc.spans.append((int(s[i]), int(e_[i])))
    for i in np.flatnonzero(xk == K_OVERHEAD).tolist():
        if s[i] != BAD and e_[i] != BAD and len(acc.overhead) < 100_000:
            acc.overhead.append((int(s[i]), int(e_[i]), F.cap(str(xev[i].name or ""))))
    for e in compress(evs, (kinds == _META).tolist()):
        if e.args is not None:
            _metadata_event({"name": e.name, "pid": e.pid, "tid": e.tid, "args": {"name": e.args.name}}, acc)
    acc.events += n
    acc.ignored += int((kinds == _IGNORED).sum())


def _msgspec_part(body: bytes) -> _Acc | None:
    """The rows of a window read by msgspec (:func:`_chunk`), or None (the slow path's)."""
    part = _Acc()
    try:
        _chunk(_decode_events(b"".join((b"[", body, b"]"))), part)
    except Exception:  # noqa: BLE001 - any surprise (RecursionError too): the slow path reads this window
        return None
    part.paths["msgspec"] += 1
    return part
