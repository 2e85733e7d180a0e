"""What a Kineto event's name says: kernel short names, copy/memset kinds, sync types, user frames.

The same facts nsys records as columns (``shortName``, ``copyKind``, ``syncType``) are in Kineto
only in the event names (``Memcpy HtoD (Pinned -> Device)``) or its args (a 2021 trace's ``Call
stack``). Pure string functions, apart from the parsing: the table mapping (:mod:`.mapping`) and
the engines call them, and the page reads :func:`short_kernel_name` (``views/columns.py``).
"""
from __future__ import annotations

import re

from .. import schema as S

#: Kineto's memory kind names (CUPTI) -> nsys ``ENUM_CUDA_MEM_KIND`` numbering (0 = pageable).
MEM_KINDS = {"pageable": 0, "pinned": 1, "device": 2, "array": 3, "managed": 4, "device static": 5,
             "managed static": 6, "unknown": 7}
COPY_KINDS = {v: k for k, v in S.COPY_KIND_LABELS.items() if not v.startswith("UVM")}
_MEMCPY_NAME = re.compile(r"^\s*Memcpy\s+(\w+)\s*(?:\(\s*([^)]*?)\s*->\s*([^)]*?)\s*\))?", re.IGNORECASE)
_MEMSET_NAME = re.compile(r"^\s*Memset\s*\(\s*([^)]*?)\s*\)", re.IGNORECASE)
_SYNC_TYPES = (("wait event", 2), ("event sync", 1), ("stream sync", 3), ("context sync", 4), ("device sync", 4))


def short_kernel_name(name: str) -> str:
    """nsys's ``shortName`` of a demangled kernel name: the function's own name, without return
    type, namespaces, template arguments and parameters (``void at::native::(anonymous
    namespace)::multi_tensor_apply_kernel<...>(...)`` -> ``multi_tensor_apply_kernel``)."""
    s = name.strip()
    out = []
    angle = 0
    i, n = 0, len(s)
    while i < n:
        ch = s[i]
        if ch == "(" and angle == 0:
            if s.startswith("(anonymous namespace)", i):
                out.append("(anonymous namespace)")
                i += len("(anonymous namespace)")
                continue
            break  # the parameter list
        if ch == "<":
            angle += 1
        elif ch == ">":
            angle = max(0, angle - 1)
        elif angle == 0:
            out.append(ch)
        i += 1
    base = "".join(out).strip()
    base = base.replace("(anonymous namespace)", "anonymous_namespace")
    base = base.split()[-1] if base.split() else ""
    short = base.split("::")[-1]
    return short or name


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
