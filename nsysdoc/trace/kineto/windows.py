"""The window scheduler: ``traceEvents`` cut into windows of bytes, each read by a parser engine.

The file's bytes are cut after the last ``"},"`` of about :data:`FAST_CHARS` bytes; up to
:data:`ARROW_AHEAD` windows are parsed by pyarrow on a worker thread while this thread reads
others with msgspec; the windows' rows are merged in file order (:func:`~.accumulate._merge`); a
window no column engine takes, and the events after the last cut, go to the slow engine. Which
engine reads a window, in which order, is :mod:`.engines`'; this module only schedules.
"""
from __future__ import annotations

import sys
import time
from collections import deque

from . import engines as E
from .accumulate import _Acc, _merge
from .stream import _Stream

# --------------------------------------------------------------------------------------------
#: bytes per window (its last event ends at a "},": its separator). 8 MB before the Arrow path:
#: with windows read two ways at once, 4 MB is as fast and holds less memory
FAST_CHARS = 4 << 20
#: whether windows are read by pyarrow's JSON reader too (:func:`_arrow_read`); the tests turn
#: it off to check the msgspec path on its own
ARROW = sys.byteorder == "little"  # (decimals are read as little-endian words: _dec_ns)


#: windows being read by pyarrow at once (on a worker thread, while this one reads others with
#: msgspec), and windows read but not yet merged into the accumulators, at most
ARROW_AHEAD = 2
_MAX_PENDING = 6


class _Window:
    """A window of events (:func:`_events`): its bytes as read (``raw``) and as decoded
    (``body``: the same unless not UTF-8), where it starts (``offset``, in characters), its
    length in characters with its ',' (``chars``), and its rows once read (``part``: an
    :class:`_Acc` of its own, numbered from 0; None: the slow path's) or being read by pyarrow
    (``future``)."""
    __slots__ = ("raw", "body", "offset", "chars", "first", "future", "part")

    def __init__(self, raw: bytes, body: bytes, offset: int, chars: int, first: bool) -> None:
        self.raw, self.body, self.offset, self.chars, self.first = raw, body, offset, chars, first
        self.future = self.part = None


def _events(st: _Stream, acc: _Acc, progress=None) -> None:  # noqa: C901 - one loop, kept together
    """Parse ``traceEvents`` items (the '[' is consumed) into ``acc`` until the closing ']'.

    The file's bytes are cut into windows of about :data:`FAST_CHARS` bytes (the file's UTF-8,
    as :class:`_Stream` would decode it: read as bytes, never built as text), each after the
    last ``"},"`` in it. A cut anywhere but between two events makes that text invalid JSON (a
    newline is never inside a string, an unbalanced bracket never decodes). Each window is read
    by one of two column readers, both reading exactly what the slow path reads:

    * pyarrow's JSON reader (:func:`_arrow_text`, :func:`_arrow_read`, :func:`_arrow_chunk`),
      which parses on a worker thread, without the GIL, up to :data:`ARROW_AHEAD` windows at
      once, while this thread reads the next windows with
    * msgspec (:func:`_chunk`): one call into structs of the fields a row needs (:class:`_Ev`:
      unknown fields, such as a ``cpu_op``'s input shapes, are skipped without being built).

    A window pyarrow does not take goes to msgspec. Each window's rows are numbered on their own
    and merged in file order (:func:`_merge`). A window msgspec does not take either (it fails
    to decode, or holds a value :func:`_chunk` does not expect) is read by the slow path, after
    the windows before it are merged and from its first character, as are the events after the
    last cut; it gives every refusal."""
    if st.peek() == "]":
        st.pos += 1
        return
    first = True
    tick = time.monotonic() + 2.0
    data, pos = st.take_bytes(), 0  # the file's bytes from the first event on
    offset = st.offset  # characters before data[pos]
    pending: deque[_Window] = deque()  # read, or being read, not yet merged
    tid = ["int"]  # the type of the tids pyarrow last read

    def merge_ready(wait: bool = False) -> _Window | None:
        """Merge the pending windows that are read, in order (``wait``: all of them); the first
        one that is the slow path's is returned (with those after it), not merged."""
        while pending:
            w = pending[0]
            if w.future is not None:
                if not (wait or w.future.done()):
                    return None
                try:
                    got = w.future.result()
                except Exception:  # noqa: BLE001 - any surprise in pyarrow: the msgspec path reads it
                    got = None
                w.future = None
                if got is not None:
                    tid[0] = got[1]
                w.part = E.read_window(w.body, got)
            if w.part is None:
                return w
            pending.popleft()
            _merge(acc, w.part)
            w.part = w.raw = w.body = None
        return None

    def slow(w: _Window | None) -> bool:
        """Merge what is pending before ``w``, then read from ``w`` on (else from data[pos]) with
        the slow path up to ``w``'s end (else to the last event): True at the list's end."""
        nonlocal data, pos, offset, first
        if w is not None:  # what comes after w is cut and read again
            first = w.first
            rest = b",".join(x.raw for x in pending) + b"," + data[pos:]
            for x in pending:
                if x.future is not None:
                    x.future.cancel()
            pending.clear()
            st.offset = w.offset
            st.give_bytes(rest)
            stop = w.offset + w.chars
        else:
            st.offset = offset
            st.give_bytes(data[pos:])
            stop = st.offset + len(st.buf)
        acc.paths["slow"] += 1
        if E.SLOW(st, acc, progress, stop=stop, first=first):
            return True  # (the stream is after the ']')
        first = False
        data, pos = st.take_bytes(), 0
        offset = st.offset
        return False

    pool = None
    try:
        while True:
            if len(data) - pos < FAST_CHARS:
                more = st.read_bytes(FAST_CHARS)
                if more:
                    data, pos = data[pos:] + more, 0
            cut = data.rfind(b"},\n", pos, pos + FAST_CHARS + 3)
            if cut < 0:
                cut = data.rfind(b"},\n", pos)
            if cut < 0:
                cut = data.rfind(b"},", pos)
            if cut < 0:  # the last events, or no line breaks or object ends in a whole window
                w = merge_ready(wait=True)
                if w is not None:
                    slow(w)  # (then the windows after it are cut again)
                elif slow(None):
                    return
                continue
            raw = body = data[pos:cut + 1]
            if body.isascii():
                chars = len(body) + 1  # the window and its ','
            else:  # decoders read the text as the slow path sees it (U+FFFD for what is not UTF-8)
                try:
                    chars = len(body.decode("utf-8")) + 1
                except UnicodeDecodeError:
                    text = body.decode("utf-8", "replace")
                    chars, body = len(text) + 1, text.encode("utf-8")
            w = _Window(raw, body, offset, chars, first)
            offset += chars
            pos = cut + 2
            if ARROW and len(body) <= 4 * FAST_CHARS and sum(x.future is not None for x in pending) < ARROW_AHEAD:
                # (a window that long has an event longer than FAST_CHARS: msgspec's, without the
                # guards' temporary arrays of its size)
                if pool is None:
                    from concurrent.futures import ThreadPoolExecutor
                    pool = ThreadPoolExecutor(1, thread_name_prefix="nsysdoc-kineto")
                w.future = pool.submit(E.READ_AHEAD, body, tid[0])
            else:
                w.part = E.read_window(body)
            pending.append(w)
            w = merge_ready(wait=len(pending) > _MAX_PENDING)
            if w is not None:
                slow(w)
            first = False
            if progress is not None and time.monotonic() > tick:
                progress(f"read {acc.events:,} trace events")
                tick = time.monotonic() + 2.0
    finally:
        for x in pending:
            if x.future is not None:
                x.future.cancel()
        if pool is not None:
            pool.shutdown(wait=True)
            _release_memory()


def _release_memory() -> None:
    """Give the windows' freed buffers back to the system: pyarrow's pool keeps what it freed,
    and glibc keeps the worker thread's freed memory in that thread's arena, where the rest of
    the report (on this thread) cannot reuse it: a report's peak memory would grow by ~50 MB."""
    from ..allocator import release_now

    release_now()
