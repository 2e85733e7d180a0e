"""The operator view (``metrics.operators``): per operator name, calls, GPU and CPU time, top
kernel, module and frame; then the GPU time grouped by module and by frame.

Why a module of its own: it turns the attributor's whole-capture accumulators
(:meth:`nsysdoc.engine.attributor.Attributor.op_totals`, its :class:`SiteSums`) into the rows the
JSON and the page show, choosing the rows from arrays; finding the sites is
:mod:`nsysdoc.engine.attributor`, a finding's ``where`` is :mod:`nsysdoc.engine.attribute_where`.
Moved out of ``nsysdoc/engine/attribute.py`` (issue 51); re-exported there.
"""
from __future__ import annotations

import heapq

import numpy as np

from ..metrics.attribution import site_index
from ..trace import schema as S
from .attribute_sites import SiteSums, _sums
from .attributor import NONE, Attributor

#: GPU-operation labels for the operator view's top kernel: kernels use their name id; copies and
#: memsets these negative codes
_COPY_LABEL0 = -100
#: Rows of the operator view kept in the JSON
ROWS_MAX = 500
NO_OPERATOR = "(no operator)"


def gpu_labels(kind: np.ndarray, name_id: np.ndarray, copy_kind: np.ndarray) -> np.ndarray:
    """The operator view's label of each GPU operation: a kernel's name id, else a negative code
    for "Memcpy <kind>" or "Memset"."""
    from ..metrics.ops import KIND_KERNEL, KIND_MEMCPY

    out = np.where(kind == KIND_KERNEL, name_id.astype(np.int64), _COPY_LABEL0 - 1)
    m = kind == KIND_MEMCPY
    out[m] = _COPY_LABEL0 - 2 - np.maximum(copy_kind[m].astype(np.int64), 0)
    return out


def label_text(code: int, strings) -> str:
    if code >= 0:
        return strings.get(code)
    if code == -1:
        return "(unnamed kernel)"
    if code == _COPY_LABEL0 - 1:
        return "Memset"
    k = _COPY_LABEL0 - 2 - code
    return f"Memcpy {S.COPY_KIND_LABELS.get(k, 'Unknown')}"


def _best(acc, key_col: int, val_col: int, keys: list[int] | None = None) -> dict[int, int]:
    """For each value of site column ``key_col`` (of ``keys`` only, when given), the value of
    ``val_col`` with the most time (ties: the lower code); -1 values are skipped."""
    if isinstance(acc, SiteSums):
        distinct, ns, _cnt = acc.arrays()
        if not len(ns):
            return {}
        keep = distinct[:, val_col] >= 0
        if keys is not None:
            keep &= np.isin(distinct[:, key_col], np.asarray(keys, dtype=np.int64))
        pairs, inv = site_index(distinct[keep][:, [key_col, val_col]])
        if not len(pairs):
            return {}
        tot = _sums(inv, ns[keep], len(pairs))
        # per key: the most time first, then the lower code (pairs are in (key, value) order)
        o = np.lexsort((pairs[:, 1], -tot, pairs[:, 0]))
        first = np.ones(len(o), dtype=bool)
        first[1:] = pairs[o[1:], 0] != pairs[o[:-1], 0]
        o = o[first]
        return dict(zip(pairs[o, 0].tolist(), pairs[o, 1].tolist()))
    tot: dict = {}
    for k, (ns, _c) in acc.items():
        v = k[val_col]
        if v < 0:
            continue
        kk = (k[key_col], v)
        tot[kk] = tot.get(kk, 0) + ns
    best: dict = {}
    for (a, v), ns in tot.items():
        cur = best.get(a)
        if cur is None or ns > cur[1] or (ns == cur[1] and v < cur[0]):
            best[a] = (v, ns)
    return {a: v for a, (v, _ns) in best.items()}

def _first_rows(value: np.ndarray, name_of, limit: int) -> list[int]:
    """The first ``limit`` row indices of ``value`` ordered by ``(-value, name_of(row))``, as a
    stable sort of every row would give them, reading the names of only the rows that can be
    among them: those above the ``limit``-th largest value and, of those equal to it, the ones
    whose names are smallest (equal names all kept, for the sort to order them by index)."""
    rows = np.arange(len(value), dtype=np.int64)
    if len(rows) > limit:
        thr = np.partition(value, len(value) - limit)[len(value) - limit]
        above, tied = rows[value > thr], rows[value == thr]
        need = limit - len(above)
        if need < len(tied):
            names = [name_of(r) for r in tied.tolist()]
            cutoff = heapq.nsmallest(need, names)[-1]
            tied = tied[np.fromiter((x <= cutoff for x in names), dtype=bool, count=len(names))]
        rows = np.sort(np.concatenate([above, tied]))
    v = value[rows].tolist()
    order = sorted(range(len(rows)), key=lambda i: (-v[i], name_of(int(rows[i]))))
    return [int(rows[i]) for i in order[:limit]]


def operator_view(attr: Attributor | None, strings) -> dict:
    """``metrics.operators``: per operator name, calls, GPU and CPU time, GPU operations, top
    kernel, module and frame; then the same GPU time grouped by module and by frame. Rows are
    chosen from arrays (a capture with millions of distinct operator names builds the 500 rows
    shown, not one dict per name)."""
    out = {"source": None, "rows": [], "row_count": 0, "modules": [], "frames": [],
           "gpu_ms": None, "attributed_pct": None}
    if attr is None or attr.source is None:
        return out
    names = attr.names
    tot = attr.op_totals()
    calls, self_gpu, gpu, cpu, self_cpu, kernels = (tot[k] for k in ("calls", "self_gpu", "gpu", "cpu", "self_cpu",
                                                                      "kernels"))
    outer = tot.get("outer_calls")
    op_codes = np.flatnonzero(calls > 0)
    # the rows shown: the first ROWS_MAX by (-self GPU ms, name), "(no operator)" after the
    # operators in input order (the stable sort of every row gave them so)
    sg = np.asarray(self_gpu, dtype=np.float64)[op_codes] / 1e6
    none_row = len(op_codes)
    name_of = lambda i: names[int(op_codes[i])] if i < none_row else NO_OPERATOR  # noqa: E731
    value = np.append(sg, attr.none_gpu_ns / 1e6) if attr.none_ops else sg
    chosen = _first_rows(value, name_of, ROWS_MAX)
    chosen += _cpu_rows(np.asarray(cpu, dtype=np.float64)[op_codes] / 1e6, name_of, chosen)
    ops_shown = [int(op_codes[i]) if i < none_row else NONE for i in chosen]
    mod = _best(attr.sites_all, 0, 1, ops_shown)
    frame = _best(attr.sites_all, 0, 2, ops_shown)
    top = _top_labels(attr.pairs, set(ops_shown), strings)
    rows = []
    for c in ops_shown:
        t = top.get(c)
        if c == NONE:
            rows.append({"name": NO_OPERATOR, "calls": 0, "self_gpu_ms": attr.none_gpu_ns / 1e6,
                         "gpu_ms": attr.none_gpu_ns / 1e6, "self_cpu_ms": None, "cpu_ms": None,
                         "kernels": attr.none_ops, "top_kernel": label_text(t[0], strings) if t else None,
                         "module": names[mod[NONE]] if NONE in mod else None,
                         "frame": names[frame[NONE]] if NONE in frame else None,
                         "cpu_us_per_call": None, "gpu_us_per_call": None, "cpu_exceeds_gpu": False,
                         "outer_calls": None})
            continue
        rows.append({"name": names[c], "calls": int(calls[c]), "self_gpu_ms": self_gpu[c] / 1e6,
                     "gpu_ms": gpu[c] / 1e6, "self_cpu_ms": self_cpu[c] / 1e6, "cpu_ms": cpu[c] / 1e6,
                     "kernels": int(kernels[c]), "top_kernel": label_text(t[0], strings) if t else None,
                     "module": names[mod[c]] if c in mod else None,
                     "frame": names[frame[c]] if c in frame else None,
                     **_per_call(cpu[c], gpu[c], outer[c] if outer is not None else calls[c]),
                     # the calls not inside a call of the same name: what the per-call times divide by
                     "outer_calls": int(outer[c] if outer is not None else calls[c])})
    out.update(source=attr.source, rows=rows, row_count=len(op_codes) + (1 if attr.none_ops else 0),
               gpu_ms=attr.total_gpu_ns / 1e6,
               attributed_pct=(attr.total_gpu_ns - attr.none_gpu_ns) / attr.total_gpu_ns * 100
               if attr.total_gpu_ns else None)
    for col, key in ((1, "modules"), (2, "frames")):
        out[key] = _grouped_rows(attr.sites_all, col, names)
    return out


def _cpu_rows(cpu_ms: np.ndarray, name_of, chosen: list[int]) -> list[int]:
    """Rows among the first ROWS_MAX by ``(-CPU ms, name)`` that ``chosen`` (the first by self GPU
    time) lacks, in that order: with them the JSON holds the true top rows by either time, so a
    CPU-heavy operator with little GPU time is never cut (issue 47, the CPU-side table)."""
    if not len(cpu_ms):
        return []
    have = set(chosen)
    return [i for i in _first_rows(cpu_ms, name_of, ROWS_MAX) if i not in have]


def _per_call(cpu_ns, gpu_ns, outer_calls) -> dict:
    """An operator row's per-call times (µs; calls not inside a call of the same name, as its CPU
    and GPU totals count them) and whether the CPU dispatch is slower than the GPU work: it
    launched GPU work, and its inclusive CPU time per call exceeds the summed durations of the GPU
    operations it launched, children included, per call (docs/glossary.md, "Operators")."""
    n = int(outer_calls)
    if n <= 0:
        return {"cpu_us_per_call": None, "gpu_us_per_call": None, "cpu_exceeds_gpu": False}
    c, g = float(cpu_ns) / 1e3 / n, float(gpu_ns) / 1e3 / n
    return {"cpu_us_per_call": c, "gpu_us_per_call": g, "cpu_exceeds_gpu": bool(g > 0 and c > g)}


def _top_labels(pairs, ops: set, strings) -> dict:
    """Per operator code of ``ops``: (its GPU label with the most time, that time); ties: the
    label whose text sorts first, then the lower code."""
    top: dict = {}
    if isinstance(pairs, SiteSums):
        distinct, ns, _cnt = pairs.arrays()
        if not len(ns) or not ops:
            return top
        m = np.flatnonzero(np.isin(distinct[:, 0], np.fromiter(ops, dtype=np.int64, count=len(ops))))
        items = zip(distinct[m, 0].tolist(), distinct[m, 1].tolist(), ns[m].tolist())
    else:
        items = ((op, label, ns) for (op, label), (ns, _c) in pairs.items() if op in ops)
    for op, label, ns in items:
        cur = top.get(op)
        if cur is None or ns > cur[1] or (ns == cur[1] and label_text(label, strings) < label_text(cur[0], strings)):
            top[op] = (label, ns)
    return top


def _grouped_rows(sites, col: int, names) -> list[dict]:
    """The operator view's ``modules`` (``col`` 1) or ``frames`` (2): GPU time and operations per
    value of that site column, with its operator of most time (ties: the lower code); the first
    ROWS_MAX by (no name last, -time, name), none when no value has a name."""
    if isinstance(sites, SiteSums):
        distinct, ns, cnt = sites.arrays()
    else:
        items = list(sites.items())
        distinct = np.array([k for k, _v in items], dtype=np.int64).reshape(len(items), -1)
        ns = np.array([v[0] for _k, v in items], dtype=np.int64)
        cnt = np.array([v[1] for _k, v in items], dtype=np.int64)
    if not len(ns):
        return []
    v = distinct[:, col]
    vmin, vmax = int(v.min()), int(v.max())
    if vmax - vmin <= max(1 << 22, 4 * len(v)):  # codes are names: a count per code, no sort
        key = v - vmin
        hit = np.bincount(key, minlength=vmax - vmin + 1) > 0
        vals = np.flatnonzero(hit) + vmin
        inv = (np.cumsum(hit) - 1)[key]
    else:
        vals, inv = np.unique(v, return_inverse=True)
        inv = inv.reshape(-1)
    v_ns, v_cnt = _sums(inv, ns, len(vals)), _sums(inv, cnt, len(vals))
    if not (vals >= 0).any():
        return []
    ms = v_ns / 1e6
    named = np.flatnonzero(vals >= 0)
    chosen = _first_rows(ms[named], lambda i: names[int(vals[named[i]])], ROWS_MAX)
    shown = [int(named[i]) for i in chosen]
    if len(shown) < ROWS_MAX and (vals < 0).any():
        shown.append(int(np.flatnonzero(vals < 0)[0]))  # no name: after every named row
    # the operator of most time per value shown (ties: the lower operator code)
    m = np.isin(inv, np.asarray(shown, dtype=np.int64))
    pairs, pinv = site_index(np.stack([v[m], distinct[m, 0]], axis=1))
    p_ns = _sums(pinv, ns[m], len(pairs))
    o = np.lexsort((pairs[:, 1], -p_ns, pairs[:, 0]))
    first = np.ones(len(o), dtype=bool)
    first[1:] = pairs[o[1:], 0] != pairs[o[:-1], 0]
    top_op = dict(zip(pairs[o[first], 0].tolist(), pairs[o[first], 1].tolist()))
    out = []
    for i in shown:
        val = int(vals[i])
        b = top_op[val]
        out.append({"name": names[val] if val >= 0 else None, "gpu_ms": int(v_ns[i]) / 1e6, "gpu_ops": int(v_cnt[i]),
                    "top_op": names[b] if b >= 0 else NO_OPERATOR})
    return out
