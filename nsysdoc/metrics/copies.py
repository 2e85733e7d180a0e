"""Memory copies by direction and host memory kind.

Definitions (``docs/glossary.md``): copies are grouped by direction (``HtoD``, ``DtoH``, ``DtoD``,
``PtoP``; everything else is ``other``) and, for host transfers, by the host side's memory kind as
nsys numbers it (``ENUM_CUDA_MEM_KIND``: 0 = pageable, 1 = pinned). Pageable copies smaller than
``PAGEABLE_MIN_BYTES`` are their own group, ``pageable, small``: their time is latency (a
round trip, often a blocking readback), which pinned memory does not shorten, so they are not
"pageable memcpy" (bytes moved through the driver's staging buffer). ``time_ms`` = summed copy
durations; ``gbps`` = bytes / summed duration (10^9 bytes per second). Copies that start inside
the analysis window are counted.
"""
from __future__ import annotations

import numpy as np

from ..trace import schema as S
from ..trace.columns import Columns

#: Pageable copies below this size are latency, not staging bandwidth (same floor as the pinned
#: bandwidth reference in ``nsysdoc.analysis``: 64 KiB on average).
PAGEABLE_MIN_BYTES = 64 * 1024
#: Host-memory code of the small pageable copies' group (not an nsys value).
SMALL_PAGEABLE = 64

_KIND_NAMES = {S.COPY_HTOD: "HtoD", S.COPY_DTOH: "DtoH", S.COPY_DTOD: "DtoD", S.COPY_PTOP: "PtoP"}
_KIND_ORDER = {"HtoD": 0, "DtoH": 1, "DtoD": 2, "PtoP": 3, "other": 4}


def copy_groups(copy_kind: np.ndarray, host_kind: np.ndarray, nbytes: np.ndarray, dur_ns: np.ndarray) -> dict:
    """Per (copyKind, host memory kind): ``[count, bytes, duration ns]`` of the given copies (a
    partial :func:`copy_table_from` adds up); small pageable copies form their own group."""
    out: dict = {}
    if not len(copy_kind):
        return out
    host_kind = np.where((np.asarray(host_kind) == S.MEM_PAGEABLE) & (np.asarray(nbytes) < PAGEABLE_MIN_BYTES),
                         SMALL_PAGEABLE, host_kind)
    key = (np.asarray(copy_kind, dtype=np.int64) << 8) | (np.asarray(host_kind, dtype=np.int64) & 0xFF)
    uk, inv = np.unique(key, return_inverse=True)
    cnt = np.bincount(inv, minlength=len(uk))
    bi = np.zeros(len(uk), dtype=np.int64)
    np.add.at(bi, inv, np.asarray(nbytes, dtype=np.int64))
    d = np.zeros(len(uk), dtype=np.int64)
    np.add.at(d, inv, np.asarray(dur_ns, dtype=np.int64))
    for j, k in enumerate(uk.tolist()):
        hk = k & 0xFF
        out[(k >> 8, hk - 256 if hk >= 128 else hk)] = [int(cnt[j]), int(bi[j]), int(d[j])]
    return out


def merge_groups(a: dict, b: dict) -> dict:
    for k, v in b.items():
        if k in a:
            a[k] = [x + y for x, y in zip(a[k], v)]
        else:
            a[k] = list(v)
    return a


def copy_table_from(groups: dict) -> Columns:
    """The copies table (``kind, host_memory, count, bytes, time_ms, gbps``; module docstring)
    from :func:`copy_groups` partials, by kind (HtoD, DtoH, DtoD, PtoP, other), then host memory."""
    cols = ["kind", "host_memory", "count", "bytes", "time_ms", "gbps"]
    if not groups:
        return Columns({c: [] for c in cols})
    totals: dict[tuple[str, str], list] = {}
    for (ck, hk), (n, nbytes, dur) in sorted(groups.items()):
        kind = _KIND_NAMES.get(int(ck), "other")
        hk = int(hk)
        host = "pageable" if hk == S.MEM_PAGEABLE else "pinned" if hk == S.MEM_PINNED else \
            "pageable, small" if hk == SMALL_PAGEABLE else "" if hk < 0 else "other"
        t = totals.setdefault((kind, host), [0, 0, 0])
        t[0] += int(n)
        t[1] += int(nbytes)
        t[2] += int(dur)
    keys = sorted(totals, key=lambda k: (_KIND_ORDER.get(k[0], len(_KIND_ORDER)), k[1]))
    nbytes = np.array([totals[k][1] for k in keys], dtype=np.int64)
    dur = np.array([totals[k][2] for k in keys], dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        gbps = np.where(dur > 0, nbytes / np.maximum(dur, 1), np.nan)
    return Columns({"kind": np.array([k[0] for k in keys], dtype=object),
                    "host_memory": np.array([k[1] for k in keys], dtype=object),
                    "count": np.array([totals[k][0] for k in keys], dtype=np.int64),
                    "bytes": nbytes, "time_ms": dur / 1e6, "gbps": gbps})
