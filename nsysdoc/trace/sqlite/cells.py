"""SQLite cells as Python values, and the export's string table (``StringIds``).

Why a module of its own (issue 51): a cell may hold any storage class whatever its column's
declared type; text is decoded with replacement characters and capped (:func:`_text`), an
integer column's other values fall back to a default (:func:`_int`), and ``StringIds`` (the names
every event table points at by id) is read once, as a :class:`~nsysdoc.trace.model.StringTable`.
"""
from __future__ import annotations

import numpy as np

from .. import schema as S
from ..model import StringTable
from ..open import ExportFile
from ..tables import cap
from .chunks import _query


def _text(v) -> str:
    """A string cell as text: bytes are decoded with replacement characters, NULL is "", and the
    length is capped (:data:`~nsysdoc.trace.tables.MAX_STRING_CHARS`)."""
    if isinstance(v, str):
        return cap(v)
    if isinstance(v, bytes):
        return cap(v.decode("utf-8", "replace"))
    return "" if v is None else cap(str(v))


def _int(v, default: int) -> int:
    """``v`` if SQLite gave an integer, else ``default`` (NULL, text, real and blob values)."""
    return v if type(v) is int else default


def _strings(exp: ExportFile) -> StringTable:
    if not exp.has(S.STRINGS):
        return StringTable(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object))
    rows = _query(exp, 'SELECT id, value FROM "StringIds"')
    rows = [r for r in rows if type(r[0]) is int]  # a NULL or non-integer id names nothing
    if not rows:
        return StringTable(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object))
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    vals = np.array([_text(r[1]) for r in rows], dtype=object)
    return StringTable(ids, vals)
