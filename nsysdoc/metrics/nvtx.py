"""NVTX ranges in the window, grouped by folded name (``metrics.nvtx`` of the JSON result)."""
from __future__ import annotations

import numpy as np

from ..trace import schema as S
from ..trace.nvtx_text import PYTHON_GROUPING_MAX, call_field_groups  # noqa: F401 - re-exported
from .attribution import site_index, site_rows


def nvtx_summary(nvtx, w0: int | None, w1: int | None, limit: int = 200) -> list[dict]:
    """NVTX ranges overlapping ``[w0, w1)`` grouped by (domain, text), top ``limit`` by total.

    Each row: ``text, domain, count, total_ms, mean_ms, max_ms`` — durations clipped to the window;
    nested ranges count at every level and threads add up (inclusive times, not a share of wall time).
    Texts are folded (``nsysdoc.trace.schema.fold_nvtx_text``): PyTorch's ``seq = N``, ``op_id = N``
    and ``sizes = ...`` fields are dropped and standalone numbers shown as ``N``, so ``aten::linear``
    is one row with a count and step markers one row per shape (``ProfilerStep#N``).
    """
    if nvtx is None or len(nvtx) == 0 or w0 is None or w1 is None:
        return []
    from ..lazy_pandas import pandas as _pandas
    pd = _pandas()  # a whole NVTX frame (tests, one-off tools); the report reads blocks

    s = np.asarray(nvtx["start_ns"], dtype=np.int64)
    e = np.asarray(nvtx["end_ns"], dtype=np.int64)
    ok = np.isin(np.asarray(nvtx["event_type"]), S.NVTX_RANGE_TYPES) & (e >= s) & (s < w1) & (e > w0)
    if not ok.any():
        return []
    dur = np.minimum(e[ok], w1) - np.maximum(s[ok], w0)
    df = pd.DataFrame({"text": np.asarray(nvtx["text"], dtype=object)[ok], "domain": np.asarray(nvtx["domain"], dtype=object)[ok],
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


def nvtx_summary_blocks(blocks, domains, w0: int | None, w1: int | None, limit: int = 200,
                        group_texts: list | None = None) -> list[dict]:
    """:func:`nvtx_summary` over NVTX blocks (``start_ns, end_ns, event_type, domain`` columns,
    ``domain`` an index into ``domains``, and the ``text_group`` column with the group texts
    ``group_texts`` -- :mod:`nsysdoc.trace.nvtx_text` --, else ``text`` as an Arrow column, grouped
    here), one block at a time. The loader's groups spare grouping the texts again: on an
    ``--pytorch=autograd-nvtx`` capture every range's text is distinct, and grouping them was
    most of this summary's time."""
    if w0 is None or w1 is None:
        return []
    groups: dict[tuple[str, str], list] = {}   # (domain, folded) -> [first row, count, total, max]
    folded_cache: dict[str, str] = {}
    row0 = 0
    for b in blocks:
        s, e = b["start_ns"], b["end_ns"]
        n = len(s)
        ok = np.isin(b["event_type"], S.NVTX_RANGE_TYPES) & (e >= s) & (s < w1) & (e > w0)
        idx = np.flatnonzero(ok)
        if len(idx):
            import pyarrow as pa

            dur = np.minimum(e[idx], w1) - np.maximum(s[idx], w0)
            if group_texts is not None and "text_group" in b:
                # the loader's groups: codes into one table-wide list, folded once each
                ti = b["text_group"][idx].astype(np.int64)
                vals = group_texts
            else:
                enc = b["text"].take(pa.array(idx)).dictionary_encode()
                # fold per group of texts that differ only in PyTorch's per-call fields (folding
                # drops them): one Python call per operator, not per range
                grp, gvals, _dec = call_field_groups(enc.dictionary)
                ti = grp[enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)] if len(grp) else \
                    np.zeros(len(idx), np.int64)
                vals = gvals
            dom = b["domain"][idx]
            # (domain, group) pairs: few, so counted rather than sorted
            distinct, key_codes = site_index(site_rows(dom, ti))
            uniq = [tuple(r) for r in distinct.tolist()]
            first = np.full(len(uniq), len(idx), dtype=np.int64)
            np.minimum.at(first, key_codes, np.arange(len(idx)))
            cnt = np.bincount(key_codes, minlength=len(uniq))
            tot = np.zeros(len(uniq), dtype=np.int64)
            np.add.at(tot, key_codes, dur)
            mx = np.full(len(uniq), np.iinfo(np.int64).min, dtype=np.int64)
            np.maximum.at(mx, key_codes, dur)
            for j, (d_, t_) in enumerate(uniq):
                dname = domains[d_] if 0 <= d_ < len(domains) else ""
                v = vals[t_]
                f = folded_cache.get(v)
                if f is None:  # folded once per distinct group text
                    f = folded_cache[v] = S.fold_nvtx_text(v if isinstance(v, str) else "")
                key = (dname if isinstance(dname, str) else "", f)
                gr = groups.get(key)
                if gr is None:
                    groups[key] = [row0 + int(idx[first[j]]), int(cnt[j]), int(tot[j]), int(mx[j])]
                else:
                    gr[0] = min(gr[0], row0 + int(idx[first[j]]))
                    gr[1] += int(cnt[j])
                    gr[2] += int(tot[j])
                    gr[3] = max(gr[3], int(mx[j]))
        row0 += n
    if not groups:
        return []
    items = sorted(groups.items(), key=lambda kv: kv[1][0])  # first appearance, as groupby(sort=False)
    # by total, then count (both descending), then text; stable, so ties keep first appearance
    items.sort(key=lambda kv: (-kv[1][2], -kv[1][1], kv[0][1]))
    return [{"text": text, "domain": dom, "count": int(n), "total_ms": float(total) / 1e6,
             "mean_ms": float(total) / n / 1e6, "max_ms": float(mx) / 1e6}
            for (dom, text), (_, n, total, mx) in items[:limit]]
