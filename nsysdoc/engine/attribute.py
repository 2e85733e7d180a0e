"""Attribution in the engine: which operator, module and Python frame each GPU operation, idle gap
and CUDA call comes from (definitions: :mod:`nsysdoc.metrics.attribution`, ``docs/glossary.md``).

:func:`build` makes an :class:`Attributor` from the host ranges the plan's NVTX pass collected
(``None`` when the capture has none: attribution then costs nothing). The slices ask it for the
*site* of each launch or gap — a row of codes ``(operator, module, frame, backward node, forward
operator)`` into :attr:`Attributor.names`, -1 where there is none — and add time per site:

* over the whole capture, every GPU operation (the operator view: :meth:`Attributor.add_ops`);
* per analysis window, the selections the rules' ``where:`` names (:data:`SELECTORS`).

This module is the entry point: :func:`build` (from the plan's NVTX rows to an attributor) and the
names the engine, the assembly and the tests import from here, re-exported from one module per
concern (issue 51):

* :mod:`nsysdoc.engine.attribute_forest` -- range forests that stay fast however deep they nest;
* :mod:`nsysdoc.engine.attributor` -- the :class:`Attributor`: the site of each query, backward
  nodes to forward operators, the whole-capture accumulators;
* :mod:`nsysdoc.engine.attribute_sites` -- time and count per site (:class:`SiteSums`);
* :mod:`nsysdoc.engine.attribute_operators` -- the operator view (``metrics.operators``);
* :mod:`nsysdoc.engine.attribute_where` -- a finding's ``where`` rows and what the capture lacks;
* :mod:`nsysdoc.engine.attribute_sliced` -- the same, slice by slice, for Nsight Systems captures.
"""
from __future__ import annotations

import numpy as np

from ..metrics import attribution as A
from ..metrics.attribution import SELECTORS  # noqa: F401 - the engine's selections
from ..metrics.attribution import site_index, site_rows  # noqa: F401 - used by the slices
from ..trace import schema as S
# re-exported: the engine (run, slices, plan, shapes, attribute_sliced), the assembly and the tests
# import these names from here
from .attribute_forest import DEEP_LEVELS, Forest  # noqa: F401
from .attribute_operators import (_COPY_LABEL0, NO_OPERATOR, ROWS_MAX, _best, _cpu_rows,  # noqa: F401
                                  _first_rows, _grouped_rows, _per_call, _top_labels, gpu_labels,
                                  label_text, operator_view)
from .attribute_sites import (SiteSums, _add, _sums, accumulate, add_sites, merge_sites,  # noqa: F401
                              site_counts)
from .attribute_where import (HINTS, VIA_RANGE, VIA_SEQUENCE, WHERE_MAX, _where_row,  # noqa: F401
                              _where_rows, missing_data, where_table)
from .attributor import (NONE, Attributor, FwdMap, Names, _min_per_key, _name_at,  # noqa: F401
                         _pair_search, add_common, backward_ranges, first_start_of, first_starts,
                         main_threads_of, merge_first_starts, set_call_frames_of)


def group_fact(text: str) -> tuple[str, bool, int]:
    """A text group's operator name, whether it is operator-like and its pyprof kind (1: a
    source-line marker, a frame)."""
    v = A.op_name(text)
    lk = A.is_op_like(v)
    kind = 0
    # pyprof texts: an operator "mod.op", or a source-line marker (a frame, kind 1)
    pp = A.pyprof(v) if v.startswith("{'") else None
    if pp is not None:
        v = pp[1]
        if pp[0] == "op":
            lk = True
        else:
            kind = 1
    return v, lk, kind


def stack_frame_label(text: str) -> str | None:
    """The frame of a range text's own call stack (``", stack = "``, a 2021 Kineto trace), or None."""
    return A.frame_label(text.split(", stack = ", 1)[1]) if ", stack = " in text else None


def _group_facts(gtexts: list[str], used: np.ndarray, code) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per text group (:mod:`nsysdoc.trace.nvtx_text`) of ``used``: its operator name's code,
    whether it is operator-like and its pyprof kind (:func:`group_fact`); computed once per group,
    in group order."""
    g = len(gtexts)
    name = np.full(g, NONE, dtype=np.int64)
    like = np.zeros(g, dtype=bool)
    kind = np.zeros(g, dtype=np.int8)
    for c in used.tolist():
        v, like[c], kind[c] = group_fact(gtexts[c])
        name[c] = code(v)
    return name, like, kind


def build(trace, rows: list, collector=None, bounds=None) -> Attributor | None:
    """The attributor from the plan's collected host ranges: ``rows`` is a list of blocks
    ``(thread, start_ns, end_ns, text group, seq, call flags, domain index, domain names, {row:
    stack text}[, NVTX table row])`` of push/pop ranges that are not step markers (:func:`nsysdoc.engine.plan._nvtx_scan`);
    and the capture's backtraced CUDA calls (:func:`nsysdoc.trace.stacks.cuda_call_frames`). None
    when nothing can attribute."""
    from ..trace.nvtx_text import FLAG_DECORATED
    from ..trace.stacks import cuda_call_frames

    calls = cuda_call_frames(trace)
    if collector is not None:  # the ranges are read slice by slice (engine.attribute_sliced)
        return collector.finish(bounds, calls)
    rows = [r for r in rows if len(r[0])]
    if not rows and calls is None:
        return None
    kineto = trace.source_tool == "pytorch-profiler"
    names = Names()
    code = names.code
    gtexts = trace.nvtx_groups
    seen = np.zeros(len(gtexts), dtype=bool)
    for r in rows:
        seen[r[3]] = True
    used = np.flatnonzero(seen)
    g_name, g_like, g_kind = _group_facts(gtexts, used, code)

    # per row: global name code, sequence number, operator-like, domain name
    th, st, en, nm, sq, ol, dm, sf, kd, ps = [], [], [], [], [], [], [], [], [], []
    for thread, start, end, grp, seq, flags, dom, dom_names, stacks, *pos in rows:
        own = np.full(len(grp), NONE, dtype=np.int64)
        for i, text in stacks.items():  # the op's own Python frame (2021 Kineto "Call stack")
            lab = stack_frame_label(text)
            if lab is not None:
                own[i] = code(lab)
        sf.append(own)
        kd.append(g_kind[grp])
        th.append(np.asarray(thread, np.int64))
        st.append(np.asarray(start, np.int64))
        en.append(np.asarray(end, np.int64))
        nm.append(g_name[grp])
        sq.append(np.asarray(seq, np.int64))
        if pos:  # the ranges' NVTX rows (the plan's scan gives them: engine.shapes matches by row)
            ps.append(np.asarray(pos[0], np.int64))
        ol.append(g_like[grp] | ((flags & FLAG_DECORATED) != 0))
        if kineto:  # only the profiler's families are told apart by domain
            dm.append(np.array(dom_names, dtype=object)[np.asarray(dom, np.int64)] if len(dom)
                      else np.zeros(0, object))
    rows.clear()
    z = np.zeros(0, np.int64)
    # the parts have their dtype already: no second copy of millions of rows
    cat = lambda parts, dt: np.concatenate(parts).astype(dt, copy=False) if parts else np.zeros(0, dt)  # noqa: E731
    thread, start, end, name, seq = (cat(th, np.int64), cat(st, np.int64), cat(en, np.int64), cat(nm, np.int64),
                                     cat(sq, np.int64))
    op_like = cat(ol, bool)
    op_frame = cat(sf, np.int64)
    marker = cat(kd, np.int8) == 1
    dom = np.concatenate(dm) if dm else np.zeros(0, object)
    row = cat(ps, np.int64) if len(ps) == len(th) else None
    # the blocks are copied into the columns above: drop them (and the rows' arrays they hold)
    # before the forests are built (issue 50: the attributor set a 400 k-launch report's peak)
    del th, st, en, nm, sq, ol, sf, kd, dm, ps
    nn = len(names)
    empty_name = np.array([not x for x in names], dtype=bool) if nn else np.zeros(0, bool)
    if kineto:
        is_cpu_op = dom == "cpu_op"
        is_py = dom == "python_function"
        nnmod = np.array([A.is_module_frame(x) for x in names], dtype=bool) if nn else np.zeros(0, bool)
        user = np.array([A.is_user_frame(x) for x in names], dtype=bool) if nn else np.zeros(0, bool)
        frame_code = np.full(nn, NONE, np.int64)
        for c in np.flatnonzero(user).tolist():
            frame_code[c] = code(A.frame_label(names[c]))
        fam_op = is_cpu_op
        fam_mod = (is_py & nnmod[name]) | (~is_cpu_op & ~is_py)
        fam_fr = is_py & ~nnmod[name] & user[name]
        fr_names = frame_code[name[fam_fr]] if fam_fr.any() else z
    else:
        fam_op = (~empty_name[name] & ~marker) if nn else np.zeros(len(name), bool)
        fam_mod = fam_op & ~op_like
        fam_fr = marker & ~empty_name[name] if nn else np.zeros(len(name), bool)
        fr_names = name[fam_fr]
    if not (fam_op.any() or fam_mod.any() or fam_fr.any()) and calls is None:
        return None
    ops = Forest(thread[fam_op], start[fam_op], end[fam_op], name[fam_op])
    mods = Forest(thread[fam_mod], start[fam_mod], end[fam_mod], name[fam_mod])
    frames = Forest(thread[fam_fr], start[fam_fr], end[fam_fr], fr_names)
    op_seq, op_raw_frame = seq[fam_op], op_frame[fam_op]
    op_row = row[fam_op][ops.order] if row is not None else None
    # the capture-long columns are in the forests now: free them before the attributor's passes
    del thread, start, end, name, seq, op_frame, op_like, marker, dom, fam_op, fam_mod, fam_fr, fr_names, row
    tg = np.asarray(trace.threads["global_tid"], dtype=np.int64)
    thread_pid = tg >> S.PID_SHIFT
    source = ("kineto" if kineto else "nvtx") if len(ops) else None
    attr = Attributor(source, names, ops, mods, frames, op_seq, thread_pid, op_raw_frame)
    del op_seq, op_raw_frame
    # the forests' input order was only needed to build the attributor (issue 50: 4.8 MB at
    # 600 k operator ranges); the sliced attributor drops it the same way
    ops.order = mods.order = frames.order = None
    #: each operator range's NVTX table row (forest order), when the rows came with theirs: the
    #: input shapes are matched by it (engine.shapes.range_shapes)
    attr.op_row = op_row
    # coded after the backward nodes' names, as the sliced attributor codes it
    main_of, via_code = main_threads_of(tg, names)
    attr.main_of, attr.via_code = main_of, via_code
    if calls is not None:
        set_call_frames_of(attr, trace, calls)
    return attr
