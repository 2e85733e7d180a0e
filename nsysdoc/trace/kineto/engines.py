"""The parser engines of the Kineto reader, and the one place their fallback chain is written.

Like ``pandas.read_csv(engine=)``: one module per engine, all behind one interface, each reading
exactly what the others read (the tests compare them on every form of trace):

* :mod:`.parse_arrow`: pyarrow's JSON reader, a window's events into columns, no Python object per
  event. Its parse runs on a worker thread (:data:`READ_AHEAD`), its rows on the scheduler's
  thread; the events after the first of another type than its schema's are read by msgspec.
* :mod:`.parse_msgspec`: msgspec, a window's events decoded in one call into structs of only the
  fields a row needs, then rows a column at a time.
* :mod:`.parse_slow`: the json module, one event at a time from the byte stream. It defines the
  behaviour (every value it reads, every refusal it gives) and reads whatever the others leave.

The chain: a window is offered to :data:`CHAIN` in order (arrow, when the scheduler had it
parsed ahead; then msgspec); the first engine that returns rows wins; an engine returns None for
a window it does not take (damage, a value of an unexpected type, an event nested too deep ...),
never raises. A window no engine of the chain takes is read by :data:`SLOW`, from the stream, in
file order (:mod:`.windows` merges the windows before it first), as are the events after the
last cut. The window scheduler (:mod:`.windows`) decides only which windows to parse ahead and
when to merge.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from . import parse_arrow, parse_msgspec, parse_slow
from .accumulate import _Acc


class Engine(NamedTuple):
    """A parser engine of windows: ``read(body, ahead)`` gives the rows of a window (``body``:
    UTF-8 from its first event's ``{`` to its last one's ``}``; ``ahead``: what
    :data:`READ_AHEAD` gave for it, None when it was not parsed ahead) in an :class:`_Acc` of its
    own, numbered from 0 (the window's path counted in its ``paths[name]``), or None when it
    does not take the window."""
    name: str
    read: Callable[[bytes, object], "_Acc | None"]


def _msgspec(body: bytes, ahead) -> _Acc | None:
    return parse_msgspec._msgspec_part(body)


#: the engines a window is offered to, in order
CHAIN: tuple[Engine, ...] = (Engine("arrow", parse_arrow._arrow_part), Engine("msgspec", _msgspec))
#: the part of an engine run ahead on the worker thread (mostly without the GIL): pyarrow's
#: parse of a window, later handed to its engine's ``read`` as ``ahead``
READ_AHEAD = parse_arrow._arrow_read
#: the last engine: the events from the stream's position up to a character (or the list's end)
SLOW = parse_slow._events_slow


def read_window(body: bytes, ahead=None) -> _Acc | None:
    """The rows of a window from the first engine of :data:`CHAIN` that takes it; None: it is
    :data:`SLOW`'s."""
    for engine in CHAIN:
        part = engine.read(body, ahead)
        if part is not None:
            return part
    return None
