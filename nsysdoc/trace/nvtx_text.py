"""What PyTorch writes into NVTX range texts, read once per distinct text while loading.

``emit_nvtx`` and ``nsys profile --pytorch=autograd-nvtx`` write an operator's range as its name
followed by per-call fields: ``"aten::addmm, seq = 2, op_id = 5, sizes = [[1, 2]],
input_op_ids = [(1, 0)]"``. Every range's text is then distinct (its ``op_id``) while its operator
is not. The loaders store three columns beside each NVTX row's text (``docs/loader.md``):

* ``text_group``: the row's **text group**, a code into the trace's ``nvtx_groups`` (one list per
  trace): a text whose part after its first ``", "`` starts with one of PyTorch's per-call fields
  (:data:`CALL_FIELD_PREFIXES`) joins the group of the part before it; any other text is its own
  group;
* ``seq``: its autograd sequence number, the ASCII digits (at most 18) between ``", seq = "`` and
  the next ``","`` or the end, else -1;
* ``call_flags``: :data:`FLAG_DECORATED` when the text carries per-call fields,
  :data:`FLAG_STACK` when it holds ``", stack = "`` (the PyTorch Profiler reader keeps a 2021
  trace's call stack there).

The analysis then works per group and never reads millions of texts again. Plain string kernels
only, no regex (RE2 over millions of texts costs seconds); few texts are read in Python, which
spares importing ``pyarrow.compute``.
"""
from __future__ import annotations

import json

import numpy as np

#: Distinct texts up to which the facts are read in Python
PYTHON_GROUPING_MAX = 4096
#: How PyTorch's per-call fields begin, after the operator's name and ", "
CALL_FIELD_PREFIXES = ("seq =", "op_id =", "sizes =", "input_op_ids =", "stack =")
FLAG_DECORATED = 1
FLAG_STACK = 2
_SEQ = ", seq = "
_STACK = ", stack = "


def seq_of(text: str) -> int:
    """The autograd sequence number in a range text (see the module docstring), or -1."""
    if _SEQ not in text:
        return -1
    num = text.split(_SEQ, 1)[1].split(",", 1)[0].strip()
    return int(num) if num.isdigit() and num.isascii() and len(num) <= 18 else -1


class Groups:
    """A trace's text groups: each group text once, with its code."""

    def __init__(self, texts=()) -> None:
        self.texts: list[str] = list(texts)
        self._index = {t: i for i, t in enumerate(self.texts)}

    def codes(self, values: list[str]) -> np.ndarray:
        out = np.empty(len(values), dtype=np.int32)
        index, texts = self._index, self.texts
        for i, v in enumerate(values):
            c = index.get(v)
            if c is None:
                c = index[v] = len(texts)
                texts.append(v)
            out[i] = c
        return out


def call_field_groups(dictionary) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Distinct texts (an Arrow string array) grouped by operator (the module docstring's rule).
    Returns each text's group index, the groups' texts and which texts carried per-call fields."""
    n = len(dictionary)
    if n == 0:
        return np.zeros(0, np.int64), [], np.zeros(0, bool)
    if n <= PYTHON_GROUPING_MAX:  # few texts: Python, and no pyarrow.compute import (~0.08 s)
        return _groups_py(dictionary.to_pylist())
    import pyarrow as pa
    import pyarrow.compute as pc

    d = pc.fill_null(dictionary.cast(pa.large_string()), "")
    cut = pc.find_substring(d, ", ").to_numpy(zero_copy_only=False)
    has = np.flatnonzero(cut >= 0)
    stripped = d
    decorated = np.zeros(n, dtype=bool)
    if len(has):
        sub = d.take(pa.array(has))
        parts = pc.split_pattern(sub, pattern=", ", max_splits=1)
        head, tail = pc.list_element(parts, 0), pc.list_element(parts, 1)
        dec = pc.starts_with(tail, CALL_FIELD_PREFIXES[0])
        for prefix in CALL_FIELD_PREFIXES[1:]:
            dec = pc.or_(dec, pc.starts_with(tail, prefix))
        dec_np = np.asarray(dec.to_numpy(zero_copy_only=False), dtype=bool)
        if dec_np.any():
            decorated[has[dec_np]] = True
            new_sub = pc.if_else(dec, head, sub)
            # scatter the stripped texts back: rows without ", " keep their text
            take = np.arange(n)
            take[has] = n + np.arange(len(has))
            stripped = pa.concat_arrays([d, new_sub.cast(pa.large_string())]).take(pa.array(take))
    enc = stripped.dictionary_encode()
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist(), decorated


def _groups_py(values: list) -> tuple[np.ndarray, list[str], np.ndarray]:
    index: dict[str, int] = {}
    vals: list[str] = []
    n = len(values)
    idx = np.empty(n, dtype=np.int64)
    decorated = np.zeros(n, dtype=bool)
    for i, t in enumerate(values):
        t = t if isinstance(t, str) else ""
        head, sep, tail = t.partition(", ")
        dec = bool(sep) and tail.startswith(CALL_FIELD_PREFIXES)
        g = head if dec else t
        decorated[i] = dec
        j = index.get(g)
        if j is None:
            j = index[g] = len(vals)
            vals.append(g)
        idx[i] = j
    return idx, vals, decorated


def _seq_arrow(d) -> np.ndarray:
    """:func:`seq_of` of every text of a large Arrow string array, with string kernels."""
    import pyarrow as pa
    import pyarrow.compute as pc

    seq = np.full(len(d), -1, dtype=np.int64)
    has = np.flatnonzero(pc.greater_equal(pc.find_substring(d, _SEQ), 0).to_numpy(zero_copy_only=False))
    if len(has):
        seq[has] = _digits(pc.list_element(pc.split_pattern(d.take(pa.array(has)), pattern=_SEQ, max_splits=1), 1))
    return seq


def _facts_arrow(arr) -> tuple:
    """The facts of a large Arrow string array with string kernels, one split at the first ``", "``
    shared by the grouping and the sequence numbers: a text whose per-call fields start with
    ``seq =`` has its number right there; the few others holding ``", seq = "`` further on are
    parsed by :func:`_seq_arrow`. Returns (group index, group texts, decorated, seq, stack)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(arr)
    d = pc.fill_null(arr.cast(pa.large_string()), "")
    decorated = np.zeros(n, dtype=bool)
    seq = np.full(n, -1, dtype=np.int64)
    first = np.zeros(n, dtype=bool)
    stripped = d
    # every text with ", " appended: one split gives every row a head (the text before its first
    # ", ") and a tail (what follows, with the ", " added at its end; "" for a text without one)
    both = pc.split_pattern(pc.binary_join_element_wise(d, pa.scalar(", ", pa.large_string()),
                                                        pa.scalar("", pa.large_string())),
                            pattern=", ", max_splits=1)
    head, tail = pc.list_element(both, 0), pc.list_element(both, 1)
    del both
    dec = pc.starts_with(tail, CALL_FIELD_PREFIXES[0])
    for prefix in CALL_FIELD_PREFIXES[1:]:
        dec = pc.or_(dec, pc.starts_with(tail, prefix))
    decorated = np.asarray(dec.to_numpy(zero_copy_only=False), dtype=bool)
    if decorated.any():
        stripped = pc.if_else(dec, head, d).cast(pa.large_string())
    del head
    # a text whose per-call fields start with "seq =": its number is right there
    at = np.flatnonzero(np.asarray(pc.starts_with(tail, "seq = ").to_numpy(zero_copy_only=False), dtype=bool))
    if len(at):
        first[at] = True
        seq[at] = _digits(pc.utf8_slice_codeunits(tail if len(at) == n else tail.take(pa.array(at)), 6))
    del tail
    enc = stripped.dictionary_encode()
    grp = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    gvals = enc.dictionary.to_pylist()
    del stripped, enc
    # ", seq = " past the first ", " (the first field is something else): the general rule
    rest = np.flatnonzero(~first)
    if 0 < len(rest) < n:
        rest = rest[np.asarray(pc.greater_equal(pc.find_substring(d.take(pa.array(rest)), _SEQ), 0)
                               .to_numpy(zero_copy_only=False), dtype=bool)]
    elif len(rest):
        rest = np.flatnonzero(np.asarray(pc.greater_equal(pc.find_substring(d, _SEQ), 0)
                                         .to_numpy(zero_copy_only=False), dtype=bool))
    if len(rest):
        seq[rest] = _seq_arrow(d.take(pa.array(rest)))
    stack = np.zeros(n, dtype=bool)
    if decorated.any() and _in_bytes(d, _STACK):
        stack = decorated & np.asarray(pc.greater_equal(pc.find_substring(d, _STACK), 0)
                                       .to_numpy(zero_copy_only=False), dtype=bool)
    return grp, gvals, decorated, seq, stack


def _in_bytes(d, pattern: str) -> bool:
    """Whether ``pattern`` may occur in a string array: one search of its data buffer (a few ms)
    instead of a per-text search (60 ms per 500 k texts). May say True for bytes outside the
    array's slice, never False when a text holds it."""
    bufs = d.buffers()
    data = bufs[2] if len(bufs) > 2 else None
    return data is None or data.to_pybytes().find(pattern.encode()) >= 0


def _digits(after) -> np.ndarray:
    """The number at the start of each text, up to the next ``","`` (whitespace trimmed; ASCII
    digits, at most 18), else -1."""
    import pyarrow as pa
    import pyarrow.compute as pc

    num = pc.utf8_trim_whitespace(pc.list_element(pc.split_pattern(after, pattern=",", max_splits=1), 0))
    ok = np.asarray(pc.fill_null(pc.and_(pc.ascii_is_decimal(num), pc.less_equal(pc.utf8_length(num), 18)),
                                 False).to_numpy(zero_copy_only=False), dtype=bool)
    out = np.full(len(after), -1, dtype=np.int64)
    if ok.any():
        out[ok] = pc.cast(num.filter(pa.array(ok)), pa.int64()).to_numpy(zero_copy_only=False)
    return out


def text_facts(values, groups: Groups) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For distinct texts (a list of str, or an Arrow string array): each one's text group code
    (added to ``groups``), sequence number and call flags (the module docstring)."""
    return coded_facts(local_facts(values), groups)


def local_facts(values) -> tuple:
    """The part of :func:`text_facts` that needs no shared state (a loader's worker thread can run
    it: Arrow's string kernels release the GIL): (group index, group texts in first-appearance
    order, decorated, seq, stack)."""
    n = len(values)
    if n == 0:
        return np.zeros(0, np.int64), [], np.zeros(0, bool), np.zeros(0, np.int64), np.zeros(0, bool)
    if n <= PYTHON_GROUPING_MAX:
        vals = values if isinstance(values, list) else values.to_pylist()
        vals = [v if isinstance(v, str) else "" for v in vals]
        grp, gvals, dec = _groups_py(vals)
        seq = np.fromiter((seq_of(v) for v in vals), dtype=np.int64, count=n)
        stack = np.fromiter(((_STACK in v) if dec[i] else False for i, v in enumerate(vals)), dtype=bool, count=n)
        return grp, gvals, dec, seq, stack
    import pyarrow as pa

    arr = pa.array(values, type=pa.large_string()) if isinstance(values, list) else values
    return _facts_arrow(arr)


def coded_facts(local: tuple, groups: Groups) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`local_facts`' result with its groups coded in ``groups`` (in call order, so the codes
    of a trace do not depend on which thread found the facts): (text group code, seq, call flags)."""
    grp, gvals, dec, seq, stack = local
    codes = groups.codes(gvals)
    flags = (dec.astype(np.int8) * FLAG_DECORATED) | (stack.astype(np.int8) * FLAG_STACK)
    return codes[grp] if len(grp) else np.zeros(0, np.int32), seq, flags


def row_facts(texts, groups: Groups) -> dict[str, np.ndarray]:
    """The three columns for rows of texts (an object array or list, one text per row)."""
    seen: dict = {}
    values: list[str] = []
    idx = np.empty(len(texts), dtype=np.int64)
    for i, v in enumerate(texts):
        v = v if isinstance(v, str) else ""
        j = seen.get(v)
        if j is None:
            j = seen[v] = len(values)
            values.append(v)
        idx[i] = j
    g, s, f = text_facts(values, groups)
    return {"text_group": g[idx], "seq": s[idx], "call_flags": f[idx]}


# ---------------------------------------------------------------------------------------------
# input shapes (issue 47): ``sizes = [[..], ..]`` in a range text
# ---------------------------------------------------------------------------------------------
#: Where an operator's input shapes start in its range text: ``nsys --pytorch=autograd-shapes-nvtx``
#: (``emit_nvtx(record_shapes=True)``) writes them so, and the PyTorch Profiler reader writes a
#: ``cpu_op`` event's ``Input Dims`` argument there too (:func:`sizes_text`)
SIZES_FIELD = ", sizes = "
#: Longest shapes text kept (characters): an operator over hundreds of tensors keeps its name
#: without shapes rather than a text no table can show
SIZES_MAX_CHARS = 1000
#: the per-call fields that may follow the shapes in a range text
_AFTER_SIZES = (", input_op_ids = ", ", stack = ", ", op_id = ", ", seq = ")
_I64 = 1 << 63


def _shape_item(item) -> bool:
    if item.__class__ is not list:
        return False
    for v in item:
        if v.__class__ is int:
            if not -_I64 <= v < _I64:
                return False
        elif v.__class__ is list:  # a tensor list's shapes (newer PyTorch)
            for w in v:
                if w.__class__ is not int or not -_I64 <= w < _I64:
                    return False
        else:
            return False
    return True


def too_long_shapes(value: list) -> bool:
    """Whether the canonical text of the list ``value`` is surely longer than
    :data:`SIZES_MAX_CHARS`, from a lower bound on it (no text made): ``n`` inputs take ``2 + 2(n - 1)``
    characters of brackets and separators, an input of ``k`` items at least ``max(2, 3k)`` (each
    item a character and a separator or bracket). So an operator over a huge tensor list is
    refused at once, with the answer :func:`sizes_text` would give (None)."""
    n = len(value)
    if 4 * n > SIZES_MAX_CHARS:
        return True
    return 2 * n + sum(max(2, 3 * len(x)) if x.__class__ is list else 2 for x in value) > SIZES_MAX_CHARS


def raw_too_long_shapes(raw: bytes) -> bool:
    """Whether the ``Input Dims`` value written as ``raw`` (JSON bytes) surely has no shapes text
    (:func:`sizes_text` None): its characters other than JSON blanks exceed twice
    :data:`SIZES_MAX_CHARS`. A value it accepts writes its integers as the canonical text does
    (``-0`` aside: one character more), and each integer takes at least two characters of that text,
    so the raw characters are at most 1.5 times the canonical text's. Lets a reader skip decoding a
    huge value (a tensor list of 300,000 tensors) whose answer is None anyway."""
    limit = 2 * SIZES_MAX_CHARS
    if len(raw) <= limit:
        return False
    for part in (raw[:4 * limit], raw):  # a prefix first: its non-blanks are at most the whole's
        if len(part) - part.count(b" ") - part.count(b"\n") - part.count(b"\t") - part.count(b"\r") > limit:
            return True
    return False


def sizes_text(value) -> str | None:
    """The canonical text of an operator's input shapes as the trace gives them (a Kineto
    ``Input Dims`` value: a list with one list of integers per input, ``[]`` for a non-tensor
    input, a list of such lists for a tensor list): the JSON text with ``", "`` between items,
    ``[[2, 1, 128], [], []]``; None for anything else (a float, a null, a string, a text longer
    than :data:`SIZES_MAX_CHARS`)."""
    if value.__class__ is not list or too_long_shapes(value) or not all(_shape_item(x) for x in value):
        return None
    t = json.dumps(value)
    return t if len(t) <= SIZES_MAX_CHARS else None


def canonical_sizes(raw: str) -> str | None:
    """:func:`sizes_text` of a shapes text as written (``[[10000,768], [4, 512]]``, any blanks),
    or None when it is not one."""
    if not raw or len(raw) > 4 * SIZES_MAX_CHARS:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return sizes_text(value)


def sizes_of(text: str) -> str | None:
    """The canonical input shapes (:func:`sizes_text`) in a range text's ``sizes = `` field, or
    None: ``"aten::mm, seq = 3, sizes = [[2, 3], [3, 4]], input_op_ids = [(1, 0)]"`` ->
    ``"[[2, 3], [3, 4]]"``."""
    if not isinstance(text, str) or SIZES_FIELD not in text:
        return None
    tail = text.split(SIZES_FIELD, 1)[1]
    for field in _AFTER_SIZES:
        tail = tail.split(field, 1)[0]
    return canonical_sizes(tail.strip())
