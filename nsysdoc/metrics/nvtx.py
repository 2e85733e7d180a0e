"""NVTX ranges in the window, grouped by folded name (``metrics.nvtx`` of the JSON result)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import schema as S


def nvtx_summary(nvtx: pd.DataFrame, w0: int | None, w1: int | None, limit: int = 200) -> list[dict]:
    """NVTX ranges overlapping ``[w0, w1)`` grouped by (domain, text), top ``limit`` by total.

    Each row: ``text, domain, count, total_ms, mean_ms, max_ms`` — durations clipped to the window;
    nested ranges count at every level and threads add up (inclusive times, not a share of wall time).
    Texts are folded (``nsysdoc.trace.schema.fold_nvtx_text``): PyTorch's ``seq = N``, ``op_id = N``
    and ``sizes = ...`` fields are dropped and standalone numbers shown as ``N``, so ``aten::linear``
    is one row with a count and step markers one row per shape (``ProfilerStep#N``).
    """
    if nvtx is None or len(nvtx) == 0 or w0 is None or w1 is None:
        return []
    s = nvtx["start_ns"].to_numpy(np.int64)
    e = nvtx["end_ns"].to_numpy(np.int64)
    ok = np.isin(nvtx["event_type"].to_numpy(), S.NVTX_RANGE_TYPES) & (e >= s) & (s < w1) & (e > w0)
    if not ok.any():
        return []
    dur = np.minimum(e[ok], w1) - np.maximum(s[ok], w0)
    df = pd.DataFrame({"text": nvtx["text"].to_numpy(object)[ok], "domain": nvtx["domain"].to_numpy(object)[ok],
                       "dur": dur})
    df["text"] = df["text"].map(lambda t: t if isinstance(t, str) else "")
    df["domain"] = df["domain"].map(lambda t: t if isinstance(t, str) else "")
    folded = {t: S.fold_nvtx_text(t) for t in pd.unique(df["text"])}
    df["text"] = df["text"].map(folded)
    g = df.groupby(["domain", "text"], sort=False)["dur"].agg(n="count", total="sum", mx="max").reset_index()
    g = g.sort_values(["total", "n", "text"], ascending=[False, False, True], kind="stable").head(limit)
    return [{"text": r.text, "domain": r.domain, "count": int(r.n), "total_ms": float(r.total) / 1e6,
             "mean_ms": float(r.total) / r.n / 1e6, "max_ms": float(r.mx) / 1e6}
            for r in g.itertuples(index=False)]
