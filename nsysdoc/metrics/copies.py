"""Memory copies by direction and host memory kind.

Definitions (``docs/glossary.md``): copies are grouped by direction (``HtoD``, ``DtoH``, ``DtoD``,
``PtoP``; everything else is ``other``) and, for host transfers, by the host side's memory kind as
nsys numbers it (``ENUM_CUDA_MEM_KIND``: 0 = pageable, 1 = pinned). ``time_ms`` = summed copy
durations; ``gbps`` = bytes / summed duration (10^9 bytes per second). Copies that start inside
the analysis window are counted.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import schema as S

_KIND_NAMES = {S.COPY_HTOD: "HtoD", S.COPY_DTOH: "DtoH", S.COPY_DTOD: "DtoD", S.COPY_PTOP: "PtoP"}


def copy_groups(copy_kind: np.ndarray, host_kind: np.ndarray, nbytes: np.ndarray, dur_ns: np.ndarray) -> dict:
    """Per (copyKind, host memory kind): ``[count, bytes, duration ns]`` of the given copies (a
    partial :func:`copy_table_from` adds up)."""
    out: dict = {}
    if not len(copy_kind):
        return out
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


def copy_table_from(groups: dict) -> pd.DataFrame:
    """The copies table (``kind, host_memory, count, bytes, time_ms, gbps``; module docstring)
    from :func:`copy_groups` partials."""
    cols = ["kind", "host_memory", "count", "bytes", "time_ms", "gbps"]
    if not groups:
        return pd.DataFrame({c: [] for c in cols})
    keys = sorted(groups)
    ck = np.array([k[0] for k in keys], dtype=np.int64)
    hk = np.array([k[1] for k in keys], dtype=np.int64)
    kind = np.array([_KIND_NAMES.get(int(k), "other") for k in ck], dtype=object)
    host = np.where(hk == S.MEM_PAGEABLE, "pageable", np.where(hk == S.MEM_PINNED, "pinned",
                    np.where(hk < 0, "", "other")))
    df = pd.DataFrame({"kind": kind, "host_memory": host, "n": [groups[k][0] for k in keys],
                       "bytes": np.array([groups[k][1] for k in keys], dtype=np.int64),
                       "dur": np.array([groups[k][2] for k in keys], dtype=np.int64)})
    g = df.groupby(["kind", "host_memory"], sort=True).agg(count=("n", "sum"), bytes=("bytes", "sum"),
                                                           dur=("dur", "sum")).reset_index()
    g["time_ms"] = g["dur"] / 1e6
    g["gbps"] = np.where(g["dur"] > 0, g["bytes"] / g["dur"].clip(lower=1), np.nan)
    order = {"HtoD": 0, "DtoH": 1, "DtoD": 2, "PtoP": 3, "other": 4}
    g = g.sort_values(["kind", "host_memory"], key=lambda s: s.map(order) if s.name == "kind" else s)
    return g[cols].reset_index(drop=True)
