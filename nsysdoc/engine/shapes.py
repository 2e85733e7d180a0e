"""Operators by input shape (issue 47): ``metrics.operators_by_shape`` and what the
``dynamic-shapes`` and ``cudnn-benchmark`` rules read.

An operator range's **input shapes** are the ``sizes = [[..], ..]`` field of its range text
(:func:`nsysdoc.trace.nvtx_text.sizes_of`): ``nsys --pytorch=autograd-shapes-nvtx`` writes it, and
the PyTorch Profiler reader writes a ``cpu_op`` event's ``Input Dims`` there (``record_shapes=True``).
They are read here, once, from the NVTX table's texts of the rows that hold the field, and matched
to the attributor's operator ranges by (thread, start, end, operator name): the per-range
accumulators of the operator view (:meth:`nsysdoc.engine.attribute.Attributor.op_totals`) are then
summed per (name, shapes) instead of per name, so a name's rows add up to its operator-view row.
Glossary: "Operators by input shape".
"""
from __future__ import annotations

import json

import numpy as np

from ..trace.nvtx_text import SIZES_FIELD, _AFTER_SIZES, canonical_sizes
from .attribute import NONE, NO_OPERATOR, ROWS_MAX, _first_rows, group_fact

#: what records input shapes, per tool (``missing`` when no operator range has them)
SHAPES_SWITCH = {
    "pytorch-profiler": "torch.profiler.profile(record_shapes=True)",
    "nsys": "nsys profile --pytorch=autograd-shapes-nvtx (or torch.autograd.profiler.emit_nvtx(record_shapes=True))",
}


class RangeShapes:
    """Per operator range of an attributor (forest order): its shapes code (-1: none recorded),
    and the canonical shapes texts the codes index."""

    def __init__(self, code: np.ndarray, texts: list[str]) -> None:
        self.code = code
        self.texts = texts

    def __bool__(self) -> bool:
        return bool(len(self.code)) and bool((self.code >= 0).any())


def _whole(attr) -> bool:
    """Whether the attributor keeps per-range accumulators over the whole capture (the sliced
    one of a large nsys export keeps per-name sums only)."""
    return attr is not None and attr.source is not None and hasattr(attr, "self_gpu_ns") \
        and len(getattr(attr, "self_gpu_ns", ())) == len(attr.ops) and len(attr.ops) > 0


def _shaped_rows(trace):
    """The NVTX rows whose text holds ``", sizes = "``: (thread, start, end, text group, shapes
    code, row) arrays and the canonical shapes texts the codes index (:class:`_Coder`; -1: not
    shapes); None when there are none. Block by block: a block's shapes texts are coded and let
    go before the next block is read."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = trace.store.get("nvtx") if trace.store is not None else None
    if t is None or not len(t):
        return None
    from ..trace.nvtx_text import FLAG_DECORATED

    parts = []
    coder = _Coder()
    for i in range(len(t.blocks)):
        # shapes are a per-call field: only blocks with decorated texts are read further (a
        # capture without PyTorch's ranges reads one int8 column)
        if not (np.asarray(t.read_block(i, ["call_flags"])["call_flags"]) & FLAG_DECORATED).any():
            continue
        blk = t.read_block(i, ["start_ns", "end_ns", "thread", "text_group", "pos"])
        text = t.read_text(i, "text")  # (read for this pass only: issue 50)
        if isinstance(text, np.ndarray):
            text = pa.array([v if isinstance(v, str) else None for v in text.tolist()], type=pa.large_string())
        if not len(text):
            continue
        at = pc.fill_null(pc.find_substring(text, SIZES_FIELD), -1).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(np.asarray(at, dtype=np.int64) >= 0)
        if not len(rows):
            continue
        sub = text.take(pa.array(rows))
        del text
        tail = pc.list_element(pc.split_pattern(sub, pattern=SIZES_FIELD, max_splits=1), 1)
        del sub
        # every field that may follow the shapes has " = ": without one in any text (the usual
        # case: a Kineto op's text ends with its shapes) there is nothing to cut
        if not all(" = " in f for f in _AFTER_SIZES) or pc.any(pc.match_substring(tail, " = ")).as_py():
            for field in _AFTER_SIZES:
                tail = pc.list_element(pc.split_pattern(tail, pattern=field, max_splits=1), 0)
        code = coder.codes(tail.cast(pa.large_string()))
        del tail
        keep = code >= 0  # only the rows whose shapes parse are kept (issue 50: peak memory)
        rows, code = rows[keep], code[keep]
        # (thread, text group and code are small: int32, widened where they are read)
        parts.append([blk["thread"][rows].astype(np.int32), blk["start_ns"][rows].astype(np.int64),
                      blk["end_ns"][rows].astype(np.int64), blk["text_group"][rows].astype(np.int32),
                      code.astype(np.int32), blk["pos"][rows].astype(np.int64)])
        del blk
    # the blocks' texts and their splits were Arrow's: its pool keeps freed memory, which the
    # numpy arrays of the rest of the report cannot reuse (~40 MB on 600 k shaped rows)
    pa.default_memory_pool().release_unused()
    if not parts:
        return None
    out = []
    for k in range(6):  # column by column, each block's part let go once copied
        out.append(np.concatenate([p[k] for p in parts]))
        for p in parts:
            p[k] = None
    return tuple(out) + (coder.texts,)


class _Coder:
    """Shapes texts as written (Arrow string arrays, one after another) as codes into the
    canonical texts (:func:`~nsysdoc.trace.nvtx_text.canonical_sizes`, computed once per
    distinct text as written; -1: not shapes), numbered in the order the texts as written first
    appear (as one dictionary encoding of all of them would number them)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._canon: dict[str, int] = {}
        self._raw: dict = {}

    def code(self, r) -> int:
        got = self._raw.get(r)
        if got is None:
            c = canonical_sizes(r.strip()) if isinstance(r, str) else None
            got = NONE
            if c is not None:
                got = self._canon.get(c, NONE)
                if got == NONE:
                    got = self._canon[c] = len(self.texts)
                    self.texts.append(c)
            self._raw[r] = got
        return got

    def codes(self, raw) -> np.ndarray:
        import pyarrow.compute as pc

        enc = raw.dictionary_encode()
        words = enc.dictionary.to_pylist()
        lut = np.array([self.code(r) for r in words] + [NONE], dtype=np.int64)  # a null: the last
        idx = pc.fill_null(enc.indices, len(words)).to_numpy(zero_copy_only=False).astype(np.int64)
        return lut[idx] if len(idx) else np.zeros(0, np.int64)


class ShapedRows:
    """The NVTX rows that carry input shapes, read once (:func:`shaped_rows`): thread, start,
    end, text group, shapes code (into ``texts``, canonical) and table row, aligned arrays."""

    def __init__(self, th, st, en, grp, code, pos, texts: list[str]) -> None:
        self.th, self.st, self.en, self.grp, self.code, self.pos = th, st, en, grp, code, pos
        self.texts = texts

    def __len__(self) -> int:
        return len(self.code)


def shaped_rows(trace) -> ShapedRows | None:
    """:class:`ShapedRows` of a trace; None when no range text holds shapes."""
    got = _shaped_rows(trace)
    if got is None:
        return None
    th, st, en, grp, code, pos, texts = got
    if not len(code):  # (only rows whose shapes parse are read: codes >= 0)
        return None
    return ShapedRows(th, st, en, grp, code, pos, texts)


def _group_names(trace, grp: np.ndarray, code_of) -> np.ndarray:
    """Each row's operator name (its text group's, :func:`group_fact`) as ``code_of(name)``, read
    once per distinct group (a text group out of range names ""): one look-up per row, in numpy."""
    grp = np.asarray(grp, np.int64)
    if not len(grp):
        return np.zeros(0, np.int64)
    gtexts = trace.nvtx_groups
    ng = len(gtexts)
    slot = np.where((grp >= 0) & (grp < ng), grp, ng)  # slot ng: a group out of range
    used = np.flatnonzero(np.bincount(slot, minlength=ng + 1))
    lut = np.full(ng + 1, NONE, dtype=np.int64)
    for g in used.tolist():
        lut[g] = code_of(group_fact(gtexts[g])[0] if g < ng else "")
    return lut[slot]


def _pack(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``(a - min a) * (span of b) + (b - min b)``: one int64 key that orders and compares as the
    pair (a, b) does; None when it could overflow."""
    if not len(a):
        return np.zeros(0, np.int64)
    bmin, bmax = int(b.min()), int(b.max())
    amin, amax = int(a.min()), int(a.max())
    span = bmax - bmin + 1
    if (amax - amin + 1) * span >= 1 << 62:
        return None
    key = a - amin  # in place from here: one array, not three (issue 50)
    key *= span
    key += b
    key -= bmin
    return key


def _match_rows(f: list[np.ndarray], q: list[np.ndarray]) -> np.ndarray:
    """For each row of ``q`` (aligned key columns), the row of ``f`` (same columns) with the same
    key and the same occurrence of it (the k-th row of a key in ``q``'s order matches the k-th of
    that key in ``f``'s order); -1 for none. One stable sort of both sides together: within a key,
    ``f``'s rows come first (they come first in the concatenation), then ``q``'s, each in its own
    order. Empties both lists once their columns are copied (the caller's columns are freed
    before the sort: issue 50, peak memory)."""
    nf, nq = len(f[0]), len(q[0])
    out = np.full(nq, NONE, dtype=np.int64)
    if not nf or not nq:
        return out
    cols = [np.concatenate([a, b]).astype(np.int64, copy=False) for a, b in zip(f, q)]
    f.clear()
    q.clear()
    # fewer sort passes: columns packed into one key while they fit, the narrowest first (the
    # order of the key's columns is free: only equality matters)
    keys = sorted(cols, key=lambda c: int(c.max()) - int(c.min()))
    del cols  # (the packed keys replace the columns they hold: each is freed once packed)
    while len(keys) > 1:
        pk = _pack(keys[0], keys[1])
        if pk is None:
            break
        keys = [pk] + keys[2:]
        del pk
    order = np.lexsort(keys[::-1]) if len(keys) > 1 else np.argsort(keys[0], kind="stable")
    n = nf + nq
    new = np.zeros(n, dtype=bool)  # a row whose key is not the previous row's
    new[0] = True
    for k in keys:
        k = k[order]
        new[1:] |= k[1:] != k[:-1]
    del keys, k
    # in place, one array each (issue 50: this match set a 400 k-launch report's peak)
    start = np.arange(n)
    start[~new] = 0
    np.maximum.accumulate(start, out=start)
    gid = np.cumsum(new)
    gid -= 1
    del new
    is_q = order >= nf
    nf_in = np.bincount(gid[~is_q], minlength=int(gid[-1]) + 1)  # per key: its rows of f (first)
    qpos = np.flatnonzero(is_q)
    del is_q
    # (each whole-length array freed once read: issue 50)
    q_start = start[qpos]
    del start
    q_nf = nf_in[gid[qpos]]
    del gid
    rank = qpos - q_start - q_nf  # occurrence of the q row among its key's q rows
    hit = rank < q_nf
    out[order[qpos[hit]] - nf] = order[q_start[hit] + rank[hit]]
    return out


def _by_row(op_row: np.ndarray, pos: np.ndarray, code: np.ndarray, texts: list[str]) -> RangeShapes | None:
    """:func:`range_shapes` when each operator range's NVTX row is known (``op_row``, forest
    order): each shaped row's code goes to the range read from that row (a row that is no
    operator range, or one whose range was dropped, gives none)."""
    out = np.full(len(op_row), NONE, dtype=np.int64)
    ok = (code >= 0) & (pos >= 0)
    if len(op_row) and ok.any():
        # a look-up table over the NVTX rows (int32: 4 bytes a row, not a sort of both sides)
        n = int(max(int(op_row.max()), int(pos[ok].max()))) + 1
        lut = np.full(n, -1, dtype=np.int32 if len(op_row) < (1 << 31) else np.int64)
        valid = op_row >= 0
        lut[op_row[valid]] = np.flatnonzero(valid)
        at = np.full(len(pos), -1, dtype=lut.dtype)
        at[ok] = lut[pos[ok]]
        del lut
        hit = at >= 0
        out[at[hit]] = code[hit]
    rs = RangeShapes(out, texts)
    return rs if rs else None


def range_shapes(trace, attr, rows: ShapedRows | None) -> RangeShapes | None:
    """Each operator range's input shapes (module docstring), for the whole-capture attributor
    (a PyTorch Profiler trace); None when the attributor cannot say per range, or no range text
    holds shapes."""
    if not _whole(attr) or rows is None:
        return None
    th, st, en, grp, code, texts = rows.th, rows.st, rows.en, rows.grp, rows.code, rows.texts
    op_row = getattr(attr, "op_row", None)
    if op_row is not None and len(op_row) == len(attr.ops):
        # the attributor knows each range's NVTX row: a shaped row is its own range's (no
        # match over (thread, start, end, name) keys, whose sort set a 400 k-launch report's
        # peak memory: issue 50)
        return _by_row(op_row, np.asarray(rows.pos, np.int64), np.asarray(code, np.int64), texts)
    # the operator name of each row, as the attributor coded it (per text group)
    names = attr.names
    index = names._index if hasattr(names, "_index") else {}
    nm = _group_names(trace, grp, lambda v: index.get(v, NONE))
    ok = (code >= 0) & (nm >= 0)
    ops = attr.ops
    f = [np.asarray(ops.thread, np.int64), np.asarray(ops.start, np.int64), np.asarray(ops.end, np.int64),
         np.asarray(ops.name, np.int64)]
    # (thread, start, end, name, occurrence) identifies a range on both sides
    q = [np.asarray(th, np.int64)[ok], np.asarray(st, np.int64)[ok], np.asarray(en, np.int64)[ok], nm[ok]]
    qcode = np.asarray(code, np.int64)[ok]
    out = np.full(len(ops), NONE, dtype=np.int64)
    at = _match_rows(f, q)
    hit = at >= 0
    out[at[hit]] = qcode[hit]
    rs = RangeShapes(out, texts)
    return rs if rs else None


#: the operator view's sums that are kept per (name, shapes) too
TOTALS = ("calls", "self_gpu", "gpu", "cpu", "self_cpu", "kernels")


class ShapeTotals:
    """The operator view's sums per (name, shapes) of the sliced attributor (an nsys export: its
    operator ranges are read slice by slice, :mod:`nsysdoc.engine.attribute_sliced`): the slices
    add their ranges' parts here beside their per-name sums, keyed by ``name * (shapes + 1) +
    shapes code + 1`` (code -1: none recorded); a range's shapes come from its NVTX row."""

    def __init__(self, rows: ShapedRows) -> None:
        self.rows = rows
        o = np.argsort(rows.pos, kind="stable")
        self.row_pos, self.row_code = np.asarray(rows.pos, np.int64)[o], np.asarray(rows.code, np.int64)[o]
        self.texts = rows.texts
        self.width = len(rows.texts) + 1
        self.sums: dict[str, dict[int, float]] = {k: {} for k in TOTALS}

    @classmethod
    def of(cls, trace) -> "ShapeTotals | None":
        rows = shaped_rows(trace)
        return cls(rows) if rows is not None else None

    def keys(self, name: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """The (name, shapes) keys of ranges with name codes ``name`` and NVTX rows ``pos``."""
        pos = np.asarray(pos, np.int64)
        code = np.full(len(pos), NONE, dtype=np.int64)
        if len(self.row_pos) and len(pos):
            at = np.clip(np.searchsorted(self.row_pos, pos), 0, len(self.row_pos) - 1)
            hit = self.row_pos[at] == pos
            code[hit] = self.row_code[at[hit]]
        return np.asarray(name, np.int64) * self.width + code + 1

    @staticmethod
    def part(keys: np.ndarray, weights=None) -> tuple[np.ndarray, np.ndarray]:
        u, inv = np.unique(np.asarray(keys, np.int64), return_inverse=True)
        return u, np.bincount(inv, weights=weights, minlength=len(u))

    def add(self, col: str, part) -> None:
        acc = self.sums[col]
        for k, v in zip(part[0].tolist(), part[1].tolist()):
            acc[k] = acc.get(k, 0) + v

    def add_one(self, col: str, name: int, pos: int, value) -> None:
        k = int(self.keys(np.array([name]), np.array([pos]))[0])
        self.sums[col][k] = self.sums[col].get(k, 0) + value


def slice_ops_part(st: ShapeTotals, ops, pos: np.ndarray, r: np.ndarray, d: np.ndarray, sub: np.ndarray,
                   top: np.ndarray) -> dict:
    """A slice's GPU operations per (name, shapes), as ``SliceView._ops_part`` sums them per name:
    ``r`` the operations' innermost ranges, ``d`` their durations, ``top`` the ranges with GPU time
    not inside a range of their name, ``sub`` each range's subtree GPU time."""
    keys = st.keys(ops.name, pos)
    return {"self_gpu": st.part(keys[r], d), "kernels": st.part(keys[r]), "gpu": st.part(keys[top], sub[top])}


def slice_ranges_part(st: ShapeTotals, ops, pos: np.ndarray, m: np.ndarray, top: np.ndarray, dur: np.ndarray,
                      f: np.ndarray, self_ns: np.ndarray | None) -> dict:
    """A slice's ranges per (name, shapes), as ``SliceView._ranges_part`` sums them per name:
    ``m`` the ranges starting in the slice (``top``: not inside one of their name; ``dur`` their
    durations), ``f`` those whose children are all in (``self_ns`` their self CPU time)."""
    keys = st.keys(ops.name, pos)
    out = {"calls": st.part(keys[m]), "cpu": st.part(keys[m][top], dur[top])}
    if self_ns is not None and len(f):
        out["self_cpu"] = st.part(keys[f], self_ns)
    return out


def _whole_totals(attr, shapes: RangeShapes) -> tuple[np.ndarray, dict]:
    """(keys, sums per key) of the whole-capture attributor's ranges (the definitions of
    :meth:`nsysdoc.engine.attribute.Attributor.op_totals`, per (name, shapes))."""
    ops = attr.ops
    width = len(shapes.texts) + 1
    key = np.asarray(ops.name, np.int64) * width
    key += shapes.code
    key += 1
    keys, inv = np.unique(key, return_inverse=True)
    del key
    k = len(keys)
    # one capture-long temporary at a time (issue 50: this table set a 400 k-launch report's peak)
    calls = np.bincount(inv, minlength=k)
    self_gpu = np.bincount(inv, weights=attr.self_gpu_ns, minlength=k)
    self_cpu = np.bincount(inv, weights=ops.self_time(), minlength=k)
    kernels = np.bincount(inv, weights=attr.self_ops, minlength=k)
    top = np.flatnonzero(~ops.nested_in_same_name())  # not inside a range of its own name
    inv = inv[top]
    gpu = np.bincount(inv, weights=ops.subtree_sum(attr.self_gpu_ns)[top], minlength=k)
    cpu = np.bincount(inv, weights=(ops.end[top] - ops.start[top]), minlength=k)
    return keys, {"calls": calls, "self_gpu": self_gpu, "gpu": gpu, "cpu": cpu, "self_cpu": self_cpu,
                  "kernels": kernels}


def _sliced_totals(st: ShapeTotals) -> tuple[np.ndarray, dict]:
    keys = np.array(sorted(set().union(*(d.keys() for d in st.sums.values()))), dtype=np.int64)
    return keys, {c: np.array([st.sums[c].get(int(k), 0) for k in keys.tolist()], dtype=np.float64) for c in TOTALS}


def operators_by_shape(trace, attr, shapes: RangeShapes | None) -> dict:
    """``metrics.operators_by_shape``: per (operator name, input shapes) the operator view's
    numbers (glossary "Operators by input shape"); ``missing`` names the switch that records
    shapes when no operator range has them."""
    out = {"source": None, "rows": [], "row_count": 0, "missing": None}
    if attr is None or attr.source is None:
        return out
    sliced = getattr(attr, "shape_totals", None)
    if shapes is not None and _whole(attr):
        texts = shapes.texts
        keys, tot = _whole_totals(attr, shapes)
    elif sliced is not None:
        texts = sliced.texts
        keys, tot = _sliced_totals(sliced)
    else:
        out["missing"] = (f"no operator range carries its input shapes: record them with "
                          f"{SHAPES_SWITCH.get(trace.source_tool, SHAPES_SWITCH['nsys'])}")
        return out
    width = len(texts) + 1
    names = attr.names
    name_c = keys // width
    shape_c = keys % width - 1
    label = lambda i: (names[int(name_c[i])], texts[int(shape_c[i])] if shape_c[i] >= 0 else "")  # noqa: E731
    chosen = _first_rows(np.asarray(tot["self_gpu"], dtype=np.float64) / 1e6, label, ROWS_MAX)
    rows = []
    for i in chosen:
        s = int(shape_c[i])
        rows.append({"name": names[int(name_c[i])] or NO_OPERATOR,
                     "input_dims": json.loads(texts[s]) if s >= 0 else None,
                     "calls": int(tot["calls"][i]), "self_gpu_ms": float(tot["self_gpu"][i]) / 1e6,
                     "gpu_ms": float(tot["gpu"][i]) / 1e6, "self_cpu_ms": float(tot["self_cpu"][i]) / 1e6,
                     "cpu_ms": float(tot["cpu"][i]) / 1e6, "kernels": int(tot["kernels"][i])})
    out.update(source=attr.source, rows=rows, row_count=len(keys))
    return out


# ---------------------------------------------------------------------------------------------
# shapes that change between steps (rule dynamic-shapes) and fixed convolution shapes (rule
# cudnn-benchmark); glossary "Input shapes across steps"
# ---------------------------------------------------------------------------------------------
#: operator names that are convolutions (aten::conv2d, aten::cudnn_convolution, ConvolutionBackward0 ...)
def is_conv_op(name: str) -> bool:
    return "conv" in name.lower()


#: characters of one shapes text quoted in a message
NOTE_SHAPES_CHARS = 60
#: operators named in ``shape_change_note``
NOTE_OPS = 3


def _short(codes, texts: list[str]) -> str:
    """A set of shapes codes as text: the shapes sorted, joined by "; ", cut to
    :data:`NOTE_SHAPES_CHARS` characters with "…"."""
    text = "; ".join(sorted(texts[c] for c in codes)) or "(no shapes)"
    return text if len(text) <= NOTE_SHAPES_CHARS else text[:NOTE_SHAPES_CHARS - 1].rstrip(", ;") + "…"


def _steps_list(labels: list[str]) -> str:
    return ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")


def _op_note(name: str, usual, per: dict, odd: list[int], label, texts: list[str]) -> str:
    """One operator's part of ``shape_change_note``: the shapes its usual set has and the others
    lack, the steps with it, and per other set the shapes it has and the usual set lacks, with its
    steps; without a usual set, the shapes of the first steps beyond those every step has."""
    if usual is None:
        common = frozenset.intersection(*per.values())
        shown = [f"{_short(per[p] - common, texts)} in {label(p)}" for p in sorted(per)[:2]]
        return f"{name}: other input shapes in each of {len(per)} steps ({', '.join(shown)}, …)"
    others: dict[frozenset, list] = {}
    for p in odd:
        others.setdefault(per[p], []).append(p)
    first = sorted(others.items(), key=lambda kv: kv[1][0])
    removed = frozenset().union(*(usual - v for v, _ in first)) if first else frozenset()
    k = sum(1 for v in per.values() if v == usual)
    parts = [f"{_short(v - usual, texts)} in {_steps_list([label(p) for p in ps])}" for v, ps in first[:2]]
    more = f" and {len(first) - 2} other sets" if len(first) > 2 else ""
    return f"{name}: {_short(removed, texts)} in {k} steps, " + ", ".join(parts) + more


def _distinct_triples(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The distinct rows (a, b, c) of three aligned non-negative int arrays, sorted (as
    ``np.unique(..., axis=0)``), found as one int64 key per row when the three fit in one."""
    if not len(a):
        return np.zeros((0, 3), np.int64)
    wb, wc = int(b.max()) + 1, int(c.max()) + 1
    if min(int(a.min()), int(b.min()), int(c.min())) < 0 or (int(a.max()) + 1) * wb * wc >= 1 << 62:
        a, b, c = (np.asarray(x, np.int64) for x in (a, b, c))
        return np.unique(np.stack([a, b, c], axis=1), axis=0)
    # the key built and sorted in place: one capture-long array (issue 50, peak memory)
    u = np.asarray(a, np.int64) * wb
    u += b
    u *= wc
    u += c
    u.sort()
    new = np.empty(len(u), dtype=bool)
    new[0] = True
    np.not_equal(u[1:], u[:-1], out=new[1:])
    u = u[new]
    return np.stack([u // (wb * wc), u // wc % wb, u % wc], axis=1)


def shape_changes(trace, rows: ShapedRows | None, steps, gpu_ms: dict | None = None) -> dict:
    """Which operators' input shapes change between the steps (glossary "Input shapes across
    steps"): per process, each operator name's set of shapes in each primary step it runs in; its
    **usual set** is the set most steps have (ties: the one more interior steps have, then the
    earliest), when at least half of the steps it runs in have it (else it has none: its shapes
    follow the data); a step **differs** for it when its set is another (every step, without one). An operator **changes** when it
    differs in an interior step (neither the process's first nor last step: the first holds warm-up
    work, the last may be cut by the capture). The cost: per interior step that differs for any
    changing operator, its step time less the median step time of the interior steps that differ
    for none (of all interior steps when every one differs), floored at 0 (capped at the step by construction); summed over those steps (the
    process with the largest sum on a multi-process capture). Empty values (None) without shapes or
    with fewer than 3 steps in every process. ``gpu_ms``: self GPU time per operator name (the
    operator view's), to name the operators with the most first."""
    from ..trace import schema as S

    none = {"shape_steps_compared": None, "shape_changing_op_count": None, "shape_changing_steps": None,
            "shape_change_ms": None, "shape_change_pct": None, "shape_modal_step_ms": None, "shape_changed_step_ms": None,
            "shape_change_note": None, "conv_shapes_fixed": None}
    if rows is None or steps is None or not len(steps):
        return none
    prim = np.asarray(steps["primary"], dtype=bool)
    s0 = np.asarray(steps["start_ns"], np.int64)[prim]
    s1 = np.asarray(steps["end_ns"], np.int64)[prim]
    stime = np.asarray(steps["step_time_ns"], np.float64)[prim]
    sproc = np.asarray(steps["global_tid"], np.int64)[prim] & S.PROCESS_MASK
    sname = [str(x) for x in np.asarray(steps["name"], dtype=object)[prim].tolist()]
    snum = np.asarray(steps["step"], np.int64)[prim]
    tg = np.asarray(trace.threads["global_tid"], dtype=np.int64)
    # each row's process (-1: a thread out of range), through a per-thread table
    tproc = np.append(tg & S.PROCESS_MASK, -1)
    th = np.asarray(rows.th)
    rproc = tproc[np.where((th >= 0) & (th < len(tg)), th, len(tg))]
    rstart = np.asarray(rows.st, np.int64)
    rcode = rows.code
    # each row's operator name (its text group's, as the operator view names it), coded locally
    names: list[str] = []
    index: dict[str, int] = {}

    def code_of(v: str) -> int:
        if v not in index:
            index[v] = len(names)
            names.append(v)
        return index[v]

    rname = _group_names(trace, rows.grp, code_of)
    shapes = rows
    gpu_ms = gpu_ms or {}
    best = None
    conv_seen, conv_changes = False, False
    for proc in np.unique(sproc).tolist():
        si = np.flatnonzero(sproc == proc)
        si = si[np.argsort(s0[si], kind="stable")]
        n = len(si)
        if n < 3:
            continue
        mine = rproc == proc
        # (one process holding every row, the usual case: the rows as they are, not copies)
        m = slice(None) if mine.all() else np.flatnonzero(mine)
        del mine
        pos = np.searchsorted(s0[si], rstart[m], side="right")
        pos -= 1
        ok = pos >= 0
        ok[ok] = rstart[m][ok] < s1[si][pos[ok]]
        if not ok.all():
            m = np.flatnonzero(ok) if isinstance(m, slice) else m[ok]
            pos = pos[ok]
        del ok
        # per (name, step): the set of shapes codes
        sets: dict[int, dict[int, frozenset]] = {}
        pairs = _distinct_triples(rname[m], pos, rcode[m])
        for nm_c, p, c in pairs.tolist():
            sets.setdefault(nm_c, {}).setdefault(p, set()).add(c)
        interior = set(range(1, n - 1))
        differ_steps: set[int] = set()
        changing = []
        for nm_c, per in sets.items():
            per = {p: frozenset(v) for p, v in per.items()}
            conv = is_conv_op(names[nm_c])
            conv_seen |= conv
            if len(per) < 2:
                continue
            count: dict[frozenset, list] = {}
            for p in sorted(per):
                c = count.setdefault(per[p], [0, 0, p])
                c[0] += 1
                c[1] += p in interior
            usual = max(count, key=lambda k: (count[k][0], count[k][1], -count[k][2]))
            if 2 * count[usual][0] < len(per):  # no set in half the steps: it varies with the data
                usual = None
            odd = sorted(p for p, v in per.items() if v != usual)
            odd_in = [p for p in odd if p in interior]
            # cudnn.benchmark's fixed shapes: the same set in every step compared, first and last too
            conv_changes |= conv and bool(odd)
            if not odd_in:
                continue
            differ_steps.update(odd_in)
            changing.append((nm_c, usual, odd, per))  # (usual None: no set in half the steps)
        if not changing:
            cand = (0.0, proc, 0, [], None, None, n)
        else:
            # the usual steps: interior steps that differ for no changing operator; when every
            # interior step differs there is no usual step and the cost is not judged (no median
            # to compare with: the steps' scatter is not the shapes' cost)
            base = [p for p in sorted(interior) if p not in differ_steps]
            med = float(np.median(stime[si][base])) if base else None
            dsteps = sorted(differ_steps)
            excess = sum(max(0.0, float(stime[si][p]) - med) for p in dsteps) if med is not None else 0.0
            # the note: the changing operators with the most self GPU time first
            gpu = {nm_c: float(gpu_ms.get(names[nm_c]) or 0.0) for nm_c, *_ in changing}
            changing.sort(key=lambda c: (-gpu[c[0]], names[c[0]]))
            label = lambda p: sname[si[p]] or f"step {int(snum[si[p]])}"  # noqa: E731
            parts = [_op_note(names[nm_c], usual, per, odd, label, shapes.texts)
                     for nm_c, usual, odd, per in changing[:NOTE_OPS]]
            note = "; ".join(parts) + (f"; and {len(changing) - NOTE_OPS} more operators" if len(changing) > NOTE_OPS else "")
            cand = (excess, proc, len(changing), dsteps, med,
                    {"note": note, "changed_ms": float(np.median(stime[si][dsteps])) / 1e6 if dsteps else None}, n)
        if best is None or cand[0] > best[0] or (cand[0] == best[0] and cand[2] > best[2]):
            best = cand
    if best is None:
        return none
    excess, _proc, nchg, dsteps, med, extra, n_chosen = best
    # the steps compared in the process the values come from (not the most over processes)
    return {"shape_steps_compared": n_chosen, "shape_changing_op_count": nchg,
            "shape_changing_steps": len(dsteps), "shape_change_ms": excess / 1e6, "shape_change_pct": None,
            "shape_modal_step_ms": med / 1e6 if med is not None else None,
            "shape_changed_step_ms": extra["changed_ms"] if extra else None,
            "shape_change_note": extra["note"] if extra else None,
            "conv_shapes_fixed": (not conv_changes) if conv_seen else None}
