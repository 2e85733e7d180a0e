"""What a Kineto event's name says: kernel short names, copy/memset kinds, sync types, user frames.

The same facts nsys records as columns (``shortName``, ``copyKind``, ``syncType``) are in Kineto
only in the event names (``Memcpy HtoD (Pinned -> Device)``) or its args (a 2021 trace's ``Call
stack``). Pure string functions, apart from the parsing: the table mapping (:mod:`.mapping`) and
the engines call them. :func:`short_kernel_name` lives in :mod:`nsysdoc.trace.kernel_names`
(format-neutral: the page reads it through ``metrics.kernels``).
"""
from __future__ import annotations

import re

from .. import schema as S
from ..kernel_names import short_kernel_name  # noqa: F401 - the engines and the mapping read it here

#: Kineto's memory kind names (CUPTI) -> nsys ``ENUM_CUDA_MEM_KIND`` numbering (0 = pageable).
MEM_KINDS = {"pageable": 0, "pinned": 1, "device": 2, "array": 3, "managed": 4, "device static": 5,
             "managed static": 6, "unknown": 7}
COPY_KINDS = {v: k for k, v in S.COPY_KIND_LABELS.items() if not v.startswith("UVM")}
_MEMCPY_NAME = re.compile(r"^\s*Memcpy\s+(\w+)\s*(?:\(\s*([^)]*?)\s*->\s*([^)]*?)\s*\))?", re.IGNORECASE)
_MEMSET_NAME = re.compile(r"^\s*Memset\s*\(\s*([^)]*?)\s*\)", re.IGNORECASE)
_SYNC_TYPES = (("wait event", 2), ("event sync", 1), ("stream sync", 3), ("context sync", 4), ("device sync", 4))


def _copy_kinds(name: str) -> tuple[int, int, int]:
    """(copyKind, srcKind, dstKind) from ``Memcpy HtoD (Pinned -> Device)``; nsys numbering."""
    m = _MEMCPY_NAME.match(name)
    if not m:
        return 0, -1, -1
    kind = COPY_KINDS.get(m.group(1), 0)
    src = MEM_KINDS.get((m.group(2) or "").lower(), -1)
    dst = MEM_KINDS.get((m.group(3) or "").lower(), -1)
    return kind, src, dst


def _memset_kind(name: str) -> int:
    m = _MEMSET_NAME.match(name)
    return MEM_KINDS.get(m.group(1).lower(), -1) if m else -1


def _sync_type(name: str) -> int:
    low = name.lower()
    return next((code for text, code in _SYNC_TYPES if text in low), 0)


# --------------------------------------------------------------------------------------------


#: frames of a 2021-format ``Call stack`` looked at per op (the innermost ones)
_MAX_STACK = 64


def _user_frame(stack: str) -> str | None:
    """The innermost frame of the user's code in a ``Call stack`` argument (innermost first)."""
    from ..python_frames import is_user_frame

    for fr in stack.split(";", _MAX_STACK)[:_MAX_STACK]:
        fr = fr.strip()
        if fr and is_user_frame(fr):
            return fr[:1000]
    return None
