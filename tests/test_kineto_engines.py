"""The Kineto reader's parser engines behind one interface (issue 51: ``trace/kineto/engines.py``).

A window is offered to the engines of ``CHAIN`` in order, Arrow (when the scheduler had pyarrow
parse it ahead) then msgspec; the first that returns rows wins; a window neither takes is the
slow engine's (None). Which engine read a window is counted in its rows' ``paths``.
"""
from __future__ import annotations

from nsysdoc.trace import kineto as K

E = K.engines
#: one kernel event as Kineto writes it: ts 1.000 us, dur 2.000 us -> 1,000 .. 3,000 ns (by hand)
KERNEL = (b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.000, "dur": 2.000, '
          b'"args": {"device": 0, "stream": 7, "correlation": 5}}')


def _row(part):
    g = part.gpu[K.K_KERNEL]
    return list(g["s"]), list(g["e"]), list(g["st"]), list(g["corr"])


def test_the_chain_is_arrow_then_msgspec_then_slow():
    assert [e.name for e in E.CHAIN] == ["arrow", "msgspec"]
    assert E.SLOW is K.parse_slow._events_slow and E.READ_AHEAD is K.parse_arrow._arrow_read


def test_a_window_parsed_ahead_is_arrows_else_msgspecs_with_the_same_row():
    ahead = E.READ_AHEAD(KERNEL)
    assert ahead is not None
    by_arrow = E.read_window(KERNEL, ahead)
    by_msgspec = E.read_window(KERNEL)
    assert by_arrow.paths == {"arrow": 1, "msgspec": 0, "slow": 0}
    assert by_msgspec.paths == {"arrow": 0, "msgspec": 1, "slow": 0}
    assert _row(by_arrow) == _row(by_msgspec) == ([1_000], [3_000], [7], [5])


def test_a_window_no_engine_of_the_chain_takes_is_the_slow_engines():
    cut = KERNEL[:-20]  # an event cut in its args: invalid JSON to both column engines
    assert E.READ_AHEAD(cut) is None
    assert E.read_window(cut) is None and E.read_window(cut, None) is None
