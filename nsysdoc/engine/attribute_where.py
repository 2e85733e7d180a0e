"""A finding's ``where``: the sites of a selector's time, most first, and what the capture lacks
for attribution (the switch that adds it).

Why a module of its own: the rules name a selection (``where:``,
:data:`nsysdoc.metrics.attribution.SELECTORS`) whose time the slices added per site; this module
reads those sums into the few rows a finding shows, and says which attribution data (operator
ranges, Python frames, modules) the capture lacks. The operator view is
:mod:`nsysdoc.engine.attribute_operators`. Moved out of ``nsysdoc/engine/attribute.py`` (issue
51); re-exported there.
"""
from __future__ import annotations

import numpy as np

from ..metrics.attribution import site_index
from .attribute_operators import NO_OPERATOR
from .attribute_sites import SiteSums, _add, _sums
from .attributor import NONE, Attributor

#: Entries of a finding's ``where``
WHERE_MAX = 5


def where_table(attr: Attributor | None, where: dict, selector: str, ndev: int, strings=None,
                kernel_name: str | None = None) -> list[dict]:
    """A finding's ``where``: the sites of a selector's time, most first, with their share of it
    and their time per GPU (ms; the mean over the ``ndev`` devices with GPU work)."""
    if attr is None or attr.source is None and not len(attr.frames) and not len(attr.mods) and not attr._calls:
        return []
    got = where.get("by_kernel" if selector == "top_kernel" else selector)
    if isinstance(got, SiteSums):
        return _where_rows(attr, got, selector, ndev, strings, kernel_name)
    if selector == "top_kernel":
        acc: dict = {}
        by = where.get("by_kernel", {})
        if kernel_name is not None and strings is not None and by:
            # the name ids with that name, each looked up once (there are many more sites x names)
            ids = {k[5] for k in by}
            match = {i for i in ids if strings.get(i) == kernel_name}
            for k, v in by.items():
                if k[5] in match:
                    _add(acc, k[:5], v[0], v[1])
    else:
        acc = where.get(selector, {})
    total = sum(v[0] for v in acc.values())
    if not total:
        return []
    rows = sorted(acc.items(), key=lambda kv: (-kv[1][0], kv[0]))[:WHERE_MAX]
    return [_where_row(attr, k, ns, c, total, ndev) for k, (ns, c) in rows]


#: How a where row's operator was found when not by the launching thread's own innermost operator
#: range (docs/glossary.md, "Operators and where")
VIA_SEQUENCE = "sequence"
VIA_RANGE = "enclosing range"


def _where_row(attr, k, ns: int, count: int, total: int, ndev: int) -> dict:
    """One where row from its site codes: ``via`` is ``"sequence"`` when the work ran in an
    autograd backward node whose forward operator was found by its sequence number, ``"enclosing
    range"`` when the launching thread had no operator range and the main thread's ranges open at
    the launch name it (:meth:`Attributor.sites_and_ranges`), else None."""
    names = attr.names
    nm = lambda c: names[c] if c >= 0 else None  # noqa: E731
    enclosing = k[3] >= 0 and k[3] == getattr(attr, "via_code", NONE)
    via = VIA_RANGE if enclosing else VIA_SEQUENCE if k[3] >= 0 and k[4] >= 0 else None
    return {"op": nm(k[0]) if k[0] >= 0 else NO_OPERATOR, "module": nm(k[1]), "frame": nm(k[2]),
            "backward_op": None if enclosing else nm(k[3]), "forward_op": None if enclosing else nm(k[4]),
            "via": via, "share_pct": ns / total * 100, "ms": ns / 1e6 / max(ndev, 1), "count": count}


def _where_rows(attr: Attributor, acc: SiteSums, selector: str, ndev: int, strings, kernel_name) -> list[dict]:
    """:func:`where_table` from a selector's arrays: the WHERE_MAX sites of most time (ties: the
    lower site row), picked with one sort of the arrays, not a dict per site."""
    distinct, ns, cnt = acc.arrays()
    if selector == "top_kernel":
        if kernel_name is None or strings is None or not len(ns):
            return []
        ids = np.unique(distinct[:, 5])
        match = [i for i in ids.tolist() if strings.get(i) == kernel_name]
        m = np.isin(distinct[:, 5], np.asarray(match, dtype=np.int64))
        if not m.any():
            return []
        distinct, inv = site_index(distinct[m][:, :5])
        ns, cnt = _sums(inv, ns[m], len(distinct)), _sums(inv, cnt[m], len(distinct))
    total = int(ns.sum()) if len(ns) else 0
    if not total:
        return []
    cand = np.arange(len(ns))
    if len(ns) > WHERE_MAX:  # only the sites with at least the WHERE_MAX-th most time are sorted
        cand = np.flatnonzero(ns >= np.partition(ns, len(ns) - WHERE_MAX)[len(ns) - WHERE_MAX])
    d = distinct[cand]
    o = cand[np.lexsort(tuple(d[:, j] for j in range(d.shape[1] - 1, -1, -1)) + (-ns[cand],))[:WHERE_MAX]]
    return [_where_row(attr, k, n_, c, total, ndev)
            for k, n_, c in zip(distinct[o].tolist(), ns[o].tolist(), cnt[o].tolist())]


#: What adds attribution data a capture lacks: (what is missing, the switch, where it is documented).
#: Versions and syntax: docs/capture.md, "Where: operators and stacks".
HINTS = {
    "nvtx_ops": ("operator ranges (which operator or code region launched each kernel)",
                 "for PyTorch, nsysdoc capture --where (nsys profile --pytorch=autograd-nvtx, nsys 2024 or newer) or "
                 "torch.autograd.profiler.emit_nvtx(); elsewhere, NVTX ranges (nvtxRangePush/Pop) around your code"),
    "nsys_stacks": ("Python lines (the call stack of each CUDA call)",
                    "profile the same steps with torch.profiler.profile(with_stack=True) and report on that trace; "
                    "nsys --python-backtrace=cuda stacks show in the Nsight Systems GUI but their Python frames are "
                    "not in the SQLite export nsysdoc reads"),
    "kineto_stack": ("Python lines and nn.Module names",
                     "torch.profiler.profile(with_stack=True)"),
    "kineto_modules": ("regions that group operators (model parts)",
                       "torch.profiler.record_function('name') around model parts, or with_stack=True for nn.Module names"),
}


def missing_data(trace, attr: Attributor | None) -> list[dict]:
    """What this capture lacks for attribution, and the switch that adds it."""
    keys = []
    if trace.source_tool == "pytorch-profiler":
        if attr is None or not (len(attr.frames) or (attr.op_frame >= 0).any()):
            keys.append("kineto_stack")
        if attr is None or not len(attr.mods):
            keys.append("kineto_modules")
    else:
        if attr is None or attr.source is None:
            keys.append("nvtx_ops")
        if attr is None or not (attr._calls or len(attr.frames)):  # no frame of the program's own code
            keys.append("nsys_stacks")
    return [{"key": k, "what": HINTS[k][0], "switch": HINTS[k][1]} for k in keys]
