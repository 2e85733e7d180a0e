"""The slow parser engine: ``traceEvents`` one event at a time (:meth:`json.JSONDecoder.raw_decode`).

It defines the reader's behaviour: every window the column engines (:mod:`.parse_arrow`,
:mod:`.parse_msgspec`) do not take comes here, and they must give exactly its rows. It also gives
every refusal (damage, truncation), with the character where it happened. The order the engines
are tried in is written once, in :mod:`.engines`.
"""
from __future__ import annotations

import time
from json import JSONDecodeError

from ...errors import CorruptFileError
from .. import tables as F
from .accumulate import _EMPTY, _Acc, _memory_event, _metadata_event
from .events import (CATEGORIES, FLOW_CATEGORIES, HOST_DOMAIN, K_DRIVER, K_HOST, K_KERNEL, K_MEMCPY, K_MEMSET,
                     K_OVERHEAD, K_RUNTIME, K_SPAN, K_SYNC, MEMORY_EVENT, _DOM_CODE, _DOM_OP)
from .names import _user_frame
from .numbers import BAD, _I32, _LIM, _small_int, _stream_of, us_to_ns
from .stream import _AFTER, _WS, _Stream
from ..nvtx_text import SIZES_FIELD as _SIZES_FIELD, sizes_text as _sizes_text

def _events_slow(st: _Stream, acc: _Acc, progress=None, stop: int | None = None,  # noqa: C901
                 first: bool = True) -> bool:
    """Parse ``traceEvents`` items one at a time into ``acc`` (``st.pos`` at the first item, or the
    ']' of an empty list; ``first=False``: at an item after a ','), until the closing ']' (True),
    or until the item separator at or past character ``stop`` of the file (False). Every input
    the fast path (:func:`_events`) does not take comes here: this defines the reader's behaviour."""
    decode = st._fast  # the hot path; st.decode's fallback only on a ValueError
    ws = _WS.match
    after = _AFTER.match
    cats = CATEGORIES
    ns = us_to_ns
    name_id = acc.name_id
    launch_code = acc.launch_code
    threads = acc.threads
    gk, gm, gs, gy = (acc.gpu[k] for k in (K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC))
    gpu_tabs = {K_KERNEL: gk, K_MEMCPY: gm, K_MEMSET: gs, K_SYNC: gy}
    rt, host, fs, ff = acc.rt, acc.host, acc.flow_s, acc.flow_f
    rt_s, rt_e, rt_thr, rt_corr, rt_name, rt_drv = (rt[k].append for k in ("s", "e", "thr", "corr", "name", "drv"))
    h_s, h_e, h_thr, h_name, h_dom = (host[k].append for k in ("s", "e", "thr", "name", "dom"))
    seen_kinds = acc.kinds
    n = ignored = 0
    tick = time.monotonic() + 2.0
    # the first item may be ']' (an empty list)
    if first and st.peek() == "]":
        st.pos += 1
        return True
    ended = True
    while True:
        # ---- one item -------------------------------------------------------------------
        pos = ws(st.buf, st.pos).end()
        if pos >= len(st.buf):
            st.pos = pos
            if not st.more():
                st.fail(truncated=True)
            continue
        try:
            try:
                ev, end = decode(st.buf, pos)
            except JSONDecodeError:
                raise
            except ValueError:  # an integer of > 4300 digits: decoded again, kept as text
                ev, end = st._slow(st.buf, pos)
        except JSONDecodeError as exc:
            st.pos = pos
            if st._incomplete(exc) and st.more(grow=True):
                continue
            st.fail(exc)
        except RecursionError:
            raise CorruptFileError(f"{st.path}: JSON nested too deeply to be a trace") from None
        st.pos = end
        n += 1
        if ev.__class__ is dict:
            ph = ev.get("ph")
            if ph == "X":
                cat = ev.get("cat")
                kind = cats.get(cat) if cat.__class__ is str else None
                if kind is None:
                    ignored += 1
                else:
                    seen_kinds.add(kind)
                    s = ns(ev.get("ts"))
                    d = ns(ev.get("dur"))
                    e = s + d if s != BAD and d != BAD else BAD
                    if e != BAD and not -_LIM < e < _LIM:
                        e = BAD
                    a = ev.get("args")
                    if a.__class__ is not dict:
                        a = _EMPTY
                    if kind == K_RUNTIME or kind == K_DRIVER:
                        tkey = (ev.get("pid"), ev.get("tid"))
                        try:
                            ti = threads.get(tkey)
                        except TypeError:  # an unhashable pid/tid (a list): one thread for all such rows
                            tkey = (repr(tkey[0])[:64], repr(tkey[1])[:64])
                            ti = threads.get(tkey)
                        if ti is None:
                            ti = threads[tkey] = len(threads)
                        c = a.get("correlation")
                        if c.__class__ is not int or not 0 < c < 4294967296:
                            c = 0
                        rt_s(s)
                        rt_e(e)
                        rt_thr(ti)
                        rt_corr(c)
                        rt_name(name_id(ev.get("name")))
                        rt_drv(1 if kind == K_DRIVER else 0)
                    elif kind == K_HOST:
                        tkey = (ev.get("pid"), ev.get("tid"))
                        try:
                            ti = threads.get(tkey)
                        except TypeError:
                            tkey = (repr(tkey[0])[:64], repr(tkey[1])[:64])
                            ti = threads.get(tkey)
                        if ti is None:
                            ti = threads[tkey] = len(threads)
                        name = ev.get("name")
                        dom = _DOM_CODE[HOST_DOMAIN[cat]]
                        if dom == _DOM_OP and a:
                            # autograd's sequence number links a backward node to its forward op:
                            # kept in the text as emit_nvtx writes it ("aten::mul, seq = 12")
                            sq = a.get("Sequence number")
                            if sq.__class__ is int and 0 <= sq < _LIM and name.__class__ is str:
                                name = f"{name}, seq = {sq}"
                            # record_shapes: the op's input shapes, as emit_nvtx writes them ("sizes = [[2, 3]]")
                            dims = a.get("Input Dims")
                            if dims.__class__ is list and name.__class__ is str:
                                sz = _sizes_text(dims)
                                if sz is not None:
                                    name = f"{name}{_SIZES_FIELD}{sz}"
                            # 2021 format: the op's Python stack, innermost first; its innermost
                            # frame of the user's code is kept in the text ("..., stack = f.py(3): g")
                            cs = a.get("Call stack")
                            if cs.__class__ is str and cs and name.__class__ is str:
                                fr = _user_frame(cs)
                                if fr:
                                    name = f"{name}, stack = {fr}"
                        h_s(s)
                        h_e(e)
                        h_thr(ti)
                        h_name(name_id(name))
                        h_dom(dom)
                    elif kind == K_SPAN:
                        if s != BAD and e != BAD:
                            acc.spans.append((s, e))
                    elif kind == K_OVERHEAD:
                        if s != BAD and e != BAD and len(acc.overhead) < 100_000:
                            acc.overhead.append((s, e, F.cap(str(ev.get("name") or ""))))
                    else:  # GPU rows
                        g = gpu_tabs[kind]
                        pid = ev.get("pid")
                        dev = a.get("device", pid)
                        if dev.__class__ is not int or not 0 <= dev < 65536:
                            dev = _small_int(dev, 0, 65536, BAD)
                        stream = a.get("stream")
                        if stream.__class__ is not int or not -_I32 <= stream < _I32:
                            stream = _stream_of(ev.get("tid"))
                        ctx = a.get("context", 0)
                        if ctx.__class__ is not int or not -_I32 <= ctx < _I32:
                            ctx = 0
                        c = a.get("correlation")
                        if c.__class__ is not int or not 0 < c < 4294967296:
                            c = 0
                        nb = a.get("bytes", 0)
                        if nb.__class__ is not int or not 0 <= nb < _LIM:
                            nb = 0
                        g["s"].append(s)
                        g["e"].append(e)
                        g["dev"].append(dev)
                        g["ctx"].append(ctx)
                        g["st"].append(stream)
                        g["corr"].append(c)
                        g["name"].append(name_id(ev.get("name")))
                        g["bytes"].append(nb)
                        if kind == K_KERNEL:
                            g["launch"].append(launch_code(a))
            elif (ph == "s" or ph == "f") and ev.get("cat") in FLOW_CATEGORIES:
                fid = ev.get("id")
                ts = ns(ev.get("ts"))
                if fid.__class__ is int and 0 < fid < 4294967296 and ts != BAD:
                    if ph == "s":
                        tkey = (ev.get("pid"), ev.get("tid"))
                        try:
                            ti = threads.get(tkey)
                            if ti is None:
                                ti = threads[tkey] = len(threads)
                        except TypeError:  # unhashable ids bind to no call
                            ti = None
                        if ti is not None:
                            fs["id"].append(fid)
                            fs["thr"].append(ti)
                            fs["ts"].append(ts)
                    else:
                        dev = _small_int(ev.get("pid"), 0, 65536, -1)
                        if dev >= 0:
                            ff["id"].append(fid)
                            ff["dev"].append(dev)
                            ff["st"].append(_stream_of(ev.get("tid")))
                            ff["ts"].append(ts)
            elif ph == "M":
                _metadata_event(ev, acc)
            elif ph == "i" and ev.get("name") == MEMORY_EVENT:
                _memory_event(ev, acc)
            else:
                ignored += 1
        else:
            ignored += 1
        # ---- separator ------------------------------------------------------------------
        m = after(st.buf, st.pos)
        while m is None:
            if st.buf[st.pos:].strip(" \t\r\n"):
                st.fail(what="expected ',' or ']' after an event", truncated=False)
            if not st.more():
                st.fail(truncated=True)
            m = after(st.buf, st.pos)
        st.pos = m.end()
        if m.group(1) == "]":
            break
        if stop is not None and st.offset + st.pos >= stop:
            ended = False
            break
        if progress is not None and n % 65536 == 0 and time.monotonic() > tick:
            progress(f"read {acc.events + n:,} trace events")
            tick = time.monotonic() + 2.0
    acc.events += n
    acc.ignored += ignored
    return ended
