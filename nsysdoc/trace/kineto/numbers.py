"""Exact numbers of a Kineto trace: ``ts``/``dur`` microseconds to integer nanoseconds, ids in range.

Kineto writes times as decimal text with 3 digits (``"5203460419.456"``) since PyTorch 2.0 and as
integers before; they are read as their text and converted exactly (no binary float in between),
other decimal forms rounded half-even to the nanosecond. Apart because all three parser engines
must give the same integer for the same text: :func:`us_to_ns` (one value, the slow engine's, which
defines the result), :func:`_ns_many` (a column of texts at once) and the range checks of
:func:`_small_int`/:func:`_ints`/:func:`_stream_of`.
"""
from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, Decimal, DecimalException

import msgspec
import numpy as np

from .. import tables as F

_STREAM_TID = re.compile(r"^\s*stream\s+(\d+)\s*$", re.IGNORECASE)
BAD = F.BAD
_I32 = 1 << 31
_LIM = 1 << 62
#: longest number text read as a time (longer ones are out of range: the row is dropped)
_MAX_NUMBER_CHARS = 100


def _big_int(text: str):
    """``parse_int`` of the fallback decoder: an integer longer than Python's int-from-text limit
    (4300 digits) stays text, so the value is out of range (its row dropped), not a refusal."""
    return int(text) if len(text) <= 4000 else text


# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------
def _ns_slow(v) -> int:
    """Microseconds (decimal text or a number) -> integer ns, rounded half-even; BAD if not a
    finite number within +-2^62 ns."""
    if v.__class__ is int:
        x = v * 1000
    elif v.__class__ is str:
        if len(v) > _MAX_NUMBER_CHARS:
            return BAD
        try:
            d = Decimal(v.strip())
            # a huge exponent (1e999999) is out of range before any arithmetic (which would
            # overflow the decimal context, or build a million-digit integer)
            if not d.is_finite() or (d and d.adjusted() > 30):
                return BAD
            x = int((d * 1000).to_integral_value(ROUND_HALF_EVEN))
        except DecimalException:
            return BAD
    else:
        return BAD
    return x if -_LIM < x < _LIM else BAD


def us_to_ns(v) -> int:
    """A Kineto ``ts``/``dur`` value (microseconds) as integer nanoseconds, exactly: floats arrive
    as their decimal text (``parse_float=str``), and Kineto's ``"{}.{:03}"`` form is one integer
    parse. :data:`BAD` for anything that is not a number."""
    if v.__class__ is str:
        if len(v) > 4 and v[-4] == "." and len(v) < 20:
            try:
                return int(v[:-4] + v[-3:])
            except ValueError:
                return _ns_slow(v)
        return _ns_slow(v)
    if v.__class__ is int and -_LIM < v < (_LIM // 1000):
        return v * 1000
    return _ns_slow(v) if v.__class__ is int else BAD


def _small_int(v, lo: int, hi: int, default: int) -> int:
    if v.__class__ is int and lo <= v < hi:
        return v
    if v.__class__ is str:
        t = v.strip()
        if t.isdigit() and len(t) < 12 and lo <= int(t) < hi:
            return int(t)
    return default


def _stream_of(tid) -> int:
    """A GPU event's stream when ``args.stream`` is missing: its tid (``7`` or ``"stream 7"``)."""
    if tid.__class__ is int and -_I32 <= tid < _I32:
        return tid
    if tid.__class__ is str:
        m = _STREAM_TID.match(tid)
        if m and len(m.group(1)) < 10:
            return int(m.group(1))
        return _small_int(tid, -_I32, _I32, 0)
    return 0


#: one JSON value, floats as their text (``float_hook=str``), as the slow engine's ``parse_float=str``
_decode_value = msgspec.json.Decoder(float_hook=str).decode


def _ns_many(vals: list) -> np.ndarray:
    """:func:`us_to_ns` of each value, given as its JSON text (:class:`msgspec.Raw`; empty when
    missing). Vectorised when every text is in Kineto's form, ``[0-9]{1,15}.[0-9]{3}``
    (microseconds with 3 decimals: the digits without the dot are the ns), or every one is an
    integer of at most 15 digits: one join, a check of what is left without the digits, the dot
    positions, one C parse. Any other text is decoded as the slow path decodes it and converted
    by :func:`us_to_ns` itself."""
    n = len(vals)
    if not n:
        return np.zeros(0, dtype=np.int64)
    b = b",".join(vals)
    rest = b.translate(None, b"0123456789")
    if rest.strip(b".,") == b"":
        c = np.frombuffer(b, dtype=np.uint8)
        ends = np.append(np.flatnonzero(c == 44), len(b))
        starts = np.concatenate(([0], ends[:-1] + 1))
        if rest == b".," * (n - 1) + b".":
            dots = np.flatnonzero(c == 46)
            whole = dots - starts  # digits before each dot
            if np.all(ends - dots == 4) and np.all(whole >= 1) and np.all(whole <= 15):
                out = np.fromstring(b.replace(b".", b""), dtype=np.int64, sep=",")
                if len(out) == n:
                    return out
        elif rest == b"," * (n - 1):
            if np.all(ends - starts >= 1) and np.all(ends - starts <= 15):
                out = np.fromstring(b, dtype=np.int64, sep=",")
                if len(out) == n:
                    return out * 1000
    return np.fromiter((us_to_ns(_decode_value(v)) if len(v) else BAD for v in vals), dtype=np.int64, count=n)


def _ints(vals: list, lo: int, hi: int, other) -> np.ndarray:
    """Each value when it is an int in [lo, hi), else ``other(i)`` (int64)."""
    n = len(vals)
    if set(map(type, vals)) <= {int}:
        try:
            a = np.fromiter(vals, dtype=np.int64, count=n)
        except OverflowError:
            a = None
        if a is not None:
            bad = np.flatnonzero((a < lo) | (a >= hi))
            for i in bad.tolist():
                a[i] = other(i)
            return a
    return np.fromiter((v if v.__class__ is int and lo <= v < hi else other(i) for i, v in enumerate(vals)),
                       dtype=np.int64, count=n)
