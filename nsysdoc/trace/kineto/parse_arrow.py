"""The Arrow parser engine: a window's events parsed into columns by pyarrow's JSON reader.

No Python object per event: pyarrow parses a window on a worker thread, mostly without the GIL
(:func:`_arrow_read`, after :func:`_arrow_text` has refused what pyarrow would read differently
from the json module), and :func:`_arrow_chunk` makes the rows from its columns with pyarrow's
kernels and numpy, on the scheduler's thread. The events after the first of another type than
the schema's are read by the msgspec engine; a window it does not take at all goes down the
chain written in :mod:`.engines`.
"""
from __future__ import annotations

import re

import numpy as np

from .. import tables as F
from ..columns import factorize
from ..nvtx_text import SIZES_FIELD as _SIZES_FIELD, SIZES_MAX_CHARS as _SIZES_MAX
from . import parse_msgspec as _M
from .accumulate import _MEM_ARGS, _Acc, _add, _commit_rows, _launch_fields, _metadata_event, _number
from .events import (K_DRIVER, K_HOST, K_KERNEL, K_MEM, K_MEMCPY, K_MEMSET, K_OVERHEAD, K_RUNTIME, K_SPAN,
                     K_SYNC, MEMORY_EVENT, _DOM_OP, _F_END, _F_START, _HOST_DOM, _IGNORED, _KIND, _META,
                     _NAMED, _THREADED, _X_KIND)
from .names import _user_frame
from .numbers import BAD, _I32, _LIM, _MAX_NUMBER_CHARS, _stream_of  # noqa: F401 - _MAX_NUMBER_CHARS: docs

#: the deepest nesting the Arrow path takes (far below the recursion limit at which msgspec and
#: the json module give up: deeper windows get their RecursionError, and refusal, as before).
#: An event shorter than twice this nests less deeply (each level takes two brackets); the
#: brackets of longer ones are counted
_MAX_NEST = 512
#: bytes per block when looking for the event separators (:func:`_deep_event`)
_SEP_BLOCK = 512
#: an aligned block of this many bytes all digits is where a run of 33 digits would be (any
#: number text over :data:`_MAX_NUMBER_CHARS` characters has one)
_DIGIT_BLOCK = 17
_LEADING_OBJECT = re.compile(rb"[ \t\n]*\{")
_GPU_KINDS = (K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC)


class _NotForArrow(Exception):
    """A window pyarrow read whose rows it cannot make exactly (the msgspec path reads it)."""


_ARROW: dict = {}


def _arrow():
    """pyarrow and the reader's options (tids as numbers, and as text: traces before PyTorch 1.13),
    imported on first use."""
    if not _ARROW:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.json as pj

        i64 = pa.int64()
        # the fields a row needs, typed as Kineto writes them: a window where any of them has
        # another type (a string pid, a float grid) fails to parse and goes to the msgspec path
        args = pa.struct([("device", i64), ("stream", i64), ("context", i64), ("correlation", i64),
                          ("bytes", i64), ("grid", pa.list_(i64)), ("block", pa.list_(i64)),
                          ("registers per thread", i64), ("shared memory", i64),
                          ("est. achieved occupancy %", i64), ("Sequence number", i64),
                          ("Call stack", pa.string()), ("name", pa.string()),
                          # [memory] events (issue 47)
                          ("Bytes", i64), ("Total Allocated", i64), ("Total Reserved", i64),
                          ("Device Type", i64), ("Device Id", i64), ("Addr", i64),
                          ("Input Dims", pa.list_(pa.list_(i64)))])
        # times as decimals of 3 places: exact (no binary float), and a value with more places,
        # or more than 24 digits, fails to parse
        us = pa.decimal128(24, 3)
        got = {"pa": pa, "pc": pc, "pj": pj}
        for tid in ("int", "text"):
            schema = pa.schema([("ph", pa.string()), ("cat", pa.string()), ("name", pa.string()), ("pid", i64),
                                ("tid", i64 if tid == "int" else pa.string()), ("ts", us), ("dur", us), ("id", i64),
                                ("args", args)])
            got[tid] = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore",
                                       newlines_in_values=True)
        _ARROW.update(got)  # (at once: the worker thread and this one may both ask)
    return _ARROW


#: bytes after which a ``NaN`` or ``Inf`` could be a JSON value: ':', '[', ',', blanks, '-'
_BEFORE_LITERAL = np.frombuffer(b":[, \t\n-", dtype=np.uint8)
_DIGIT_RUN = re.compile(rb"[0-9]{33}")


def _odd_literals(body: bytes, c: np.ndarray) -> bool:
    """Whether ``body`` (``c``: its bytes) may hold ``Inf`` or ``-NaN`` as a value: pyarrow takes
    them where it ignores a field, the json module refuses them (``NaN``, ``Infinity`` and
    ``-Infinity`` both take; ``Infinity`` is refused here with ``Inf``, a name such as
    ``cudaStreamGetCaptureInfo`` is not). Looked for as bytes ('N' is rare in traces, 'I' not)."""
    if body.find(b"N") >= 0:
        p = np.flatnonzero(c == 78)  # 'N'
        p = p[(p > 0) & (p + 2 < len(c))]
        if ((c[p - 1] == 45) & (c[p + 1] == 97) & (c[p + 2] == 78)).any():  # -NaN
            return True
    p = np.flatnonzero(c == 73)  # 'I'
    p = p[p + 2 < len(c)]
    p = p[(c[p + 1] == 110) & (c[p + 2] == 102)]  # Inf (Infinity too: refused alike)
    return bool(len(p)) and (p[0] == 0 or np.isin(c[p[p > 0] - 1], _BEFORE_LITERAL).any())


def _long_digit_run(body: bytes) -> bool:
    """Whether ``body`` has a run of 33 digits (where a time text over :data:`_MAX_NUMBER_CHARS`
    characters, out of range for the slow path, could be: pyarrow reads it as a number)."""
    n = len(body) // _DIGIT_BLOCK
    for k in np.flatnonzero(np.strings.isdigit(np.frombuffer(body, dtype=f"S{_DIGIT_BLOCK}", count=n))).tolist():
        at = k * _DIGIT_BLOCK
        if _DIGIT_RUN.search(body, max(0, at - 32), at + _DIGIT_BLOCK + 32):
            return True
    return False


def _deep_event(text: np.ndarray) -> bool:
    """Whether an event of ``text`` (bytes; events separated by ``\\r``: :func:`_arrow_text`)
    may nest :data:`_MAX_NEST` deep. The first separator of each block of :data:`_SEP_BLOCK`
    bytes is found at once; between two such separators less than twice that apart, events nest
    less deeply (each level takes two brackets); any longer stretch (a long event, or the
    window's ends) is looked at as a whole: fewer than that many opening brackets in it, no
    event in it nests so deeply."""
    n = len(text) // _SEP_BLOCK
    first = np.strings.find(np.frombuffer(text, dtype=f"S{_SEP_BLOCK}", count=n), b"\r")
    cut = np.flatnonzero(first >= 0)
    at = np.concatenate(([0], cut * _SEP_BLOCK + first[cut], [len(text)]))
    long = np.flatnonzero(np.diff(at) >= 2 * _MAX_NEST)
    if not len(long):
        return False
    opening = np.flatnonzero((text == 91) | (text == 123))  # '[', '{'
    inside = np.searchsorted(opening, at[long + 1]) - np.searchsorted(opening, at[long])
    return bool((inside >= _MAX_NEST).any())


def _arrow_text(body: bytes) -> np.ndarray | None:
    """The events of a window (``body``: UTF-8 from an event's ``{`` to the last event's ``}``,
    events separated by ``},\\n``) as text for pyarrow's JSON reader (:func:`_arrow_read`), or
    None when the window is not for the Arrow path, which then reads exactly what
    :func:`_events_slow` would:

    * separators: each ``},\\n`` becomes ``}\\r\\n`` (whitespace: pyarrow reads objects one after
      another). One inside an event (a nested object followed by ``,`` and a line break) would
      leave two members or elements without a comma between them: invalid JSON, so the parse
      fails; a ``,`` between events not written so is left, and fails too. A window that
      parses is therefore exactly its events, each between two ``\\r``;
    * what pyarrow accepts and the json module does not, or reads differently, is refused here:
      a ``\\r`` in the text (it marks the separators), a first value that is not an object
      (pyarrow 26 crashes on a leading ``null``), ``Inf`` or ``-NaN`` as a value
      (:func:`_odd_literals`), a run of 33 digits (:func:`_long_digit_run`), an event nested
      :data:`_MAX_NEST` deep (:func:`_deep_event`: pyarrow has no depth limit; msgspec and the
      json module stop near the recursion limit). (A GPU row whose ``device`` is null, which
      pyarrow cannot tell from a missing one, is refused by :func:`_arrow_chunk`);
    * values of other types than the schema's (a string pid, a float in ``grid``, ``NaN`` in a
      number), times with more than 3 decimals, duplicate keys, invalid JSON: pyarrow raises
      (ArrowInvalid: :func:`_arrow_read`)."""
    if not _LEADING_OBJECT.match(body) or body.find(b"\r") >= 0:
        return None
    c = np.frombuffer(body, dtype=np.uint8)
    if _odd_literals(body, c) or _long_digit_run(body):
        return None
    at = np.flatnonzero(c[1:-1] == 44)  # ',': those of "},\n" become '\r' (numpy: without the GIL)
    at = at[(c[at] == 125) & (c[at + 2] == 10)] + 1
    text = c.copy()
    text[at] = 13
    return None if _deep_event(text) else text


_ROW = re.compile(r"changed from \w+ to \w+ in row (\d+)")


def _arrow_read(body: bytes, tid: str = "int"):
    """pyarrow's table of the events of a window (``body``: :func:`_arrow_text`), the tid type it
    was read with (``tid``, else the other one), and how many bytes of ``body`` it holds: all,
    or the events before the first one of another type than the schema's (a span's text pid,
    say), the rest being left to the msgspec path. None when it is not for pyarrow or none can
    be read. Runs on a worker thread, mostly without the GIL (numpy, pyarrow's parser)."""
    text = _arrow_text(body)
    if text is None:
        return None
    ar = _arrow()
    pa, pj = ar["pa"], ar["pj"]
    read = pj.ReadOptions(use_threads=False, block_size=len(text) + 1)
    best = (0, tid)
    for kind in (tid, "text" if tid == "int" else "int"):
        try:
            return pj.read_json(pa.BufferReader(text), parse_options=ar[kind], read_options=read), kind, len(text)
        except pa.ArrowException as exc:
            m = _ROW.search(str(exc))
            if m is None:
                return None
            best = max(best, (int(m.group(1)), kind))
            if "Column(/tid) changed from" not in str(exc):
                break
    rows, kind = best
    if rows == 0:
        return None
    end = int(np.flatnonzero(text == 13)[rows - 1])  # the '\r' after it
    if end < len(text) // 4:  # (a 2021 trace's device events mix number and text tids: msgspec's)
        return None
    try:
        return pj.read_json(pa.BufferReader(text[:end]), parse_options=ar[kind], read_options=read), kind, end
    except pa.ArrowException:
        return None


def _valid(arr) -> np.ndarray:
    """Which values of a pyarrow array are not null (a bool array)."""
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _int_col(arr) -> tuple[np.ndarray, np.ndarray]:
    """An int64 pyarrow array as (values, 0 where null; which are not null)."""
    if arr.null_count == 0:
        return arr.to_numpy(), np.ones(len(arr), dtype=bool)
    return arr.fill_null(0).to_numpy(), arr.is_valid().to_numpy(zero_copy_only=False)


def _dec_ns(arr) -> np.ndarray:
    """A decimal128(24, 3) array of microseconds as int64 nanoseconds, exactly: the decimal's
    unscaled integer (two little-endian 64-bit words) is the nanoseconds. BAD where null or not
    within +-2^62 ns, as :func:`us_to_ns`."""
    data = arr.buffers()[1]
    if data is None or arr.null_count == len(arr):
        return np.full(len(arr), BAD, dtype=np.int64)
    w = np.frombuffer(data, dtype=np.int64)[2 * arr.offset:2 * (arr.offset + len(arr))]
    lo, hi = w[0::2], w[1::2]
    ok = (hi == (lo >> 63)) & (lo > -_LIM) & (lo < _LIM)
    if arr.null_count:
        ok &= _valid(arr)
    return np.where(ok, lo, BAD)


def _first_codes(pc, arr) -> tuple[np.ndarray, list]:
    """(code of each value, the distinct values as Python objects in order of first appearance;
    null is a value, None)."""
    d = pc.dictionary_encode(arr, null_encoding="encode")
    return d.indices.to_numpy().astype(np.int64), d.dictionary.to_pylist()


def _row_codes(pa, pc, mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code of each row of an int64 matrix, the distinct rows in order of first appearance):
    the rows hashed as fixed-size binary values by pyarrow."""
    mat = np.ascontiguousarray(mat, dtype=np.int64)
    width = mat.shape[1]
    rows = pa.Array.from_buffers(pa.binary(8 * width), len(mat), [None, pa.py_buffer(mat)])
    d = pc.dictionary_encode(rows)
    uniq = np.frombuffer(d.dictionary.buffers()[1], dtype=np.int64).reshape(-1, width)
    return d.indices.to_numpy().astype(np.int64), uniq


def _list3(lst, rows: np.ndarray) -> np.ndarray:
    """For the ``rows`` of a list<int64> array: is it a list of 3, and its 3 values with their
    validity (zeros when not a list of 3), as 7 int64 columns."""
    k = len(rows)
    out = np.zeros((k, 7), dtype=np.int64)
    off = lst.offsets.to_numpy()
    lens = np.where(_valid(lst), off[1:] - off[:-1], -1)[rows]
    is3 = lens == 3
    out[:, 0] = is3
    if is3.any():
        vals, ok = _int_col(lst.values)
        at = off[:-1][rows][is3]
        for j in range(3):
            out[is3, 1 + 2 * j] = vals[at + j]
            out[is3, 2 + 2 * j] = ok[at + j]
    return out


def _arrow_launch(pa, pc, acc: _Acc, rows: np.ndarray, f: dict, new_raw: dict, new_items: dict) -> np.ndarray:
    """:meth:`_Acc.launch_code5` of each kernel row, the distinct configurations looked up once
    (in order of first appearance, so new codes are numbered as the slow path numbers them)."""
    parts = [_list3(f["grid"], rows), _list3(f["block"], rows)]
    for key in ("registers per thread", "shared memory", "est. achieved occupancy %"):
        v, ok = _int_col(f[key])
        parts.append(np.stack([v[rows], ok[rows]], axis=1))
    codes, uniq = _row_codes(pa, pc, np.concatenate(parts, axis=1))
    out = []
    for u in uniq.tolist():
        g = tuple(u[1 + 2 * j] if u[2 + 2 * j] else None for j in range(3)) if u[0] else None
        b = tuple(u[8 + 2 * j] if u[9 + 2 * j] else None for j in range(3)) if u[7] else None
        regs, smem, est = (u[14] if u[15] else None), (u[16] if u[17] else None), (u[18] if u[19] else None)
        raw = (*g, *b, regs, smem, est) if g is not None and b is not None else (g, b, regs, smem, est)
        code = acc.launch_raw.get(raw)
        if code is None:
            code = new_raw.get(raw)
        if code is None:
            item = _launch_fields(raw)
            code = acc.launch_codes.get(item)
            if code is None:
                code = new_items.get(item)
            if code is None:
                code = new_items[item] = len(acc.launch_codes) + len(new_items)
            new_raw[raw] = code
        out.append(code)
    return np.asarray(out, dtype=np.int64)[codes]


def _arrow_sizes(pa, pc, dims, rows: np.ndarray, name):
    """``name`` with ``", sizes = "`` and the canonical text of ``Input Dims`` (:func:`_sizes_text`)
    appended on the ``rows`` that have one, made from the columns: each shape's integers joined
    by ``", "`` in brackets, then the shapes likewise. A null inside a value (which the other
    paths refuse) sends the window to them."""
    has = rows & _valid(dims)
    if not has.any():
        return name
    at = np.flatnonzero(has)
    d = dims.take(pa.array(at))
    inner = d.flatten()  # one list per input
    if inner.null_count or inner.flatten().null_count:
        raise _NotForArrow("a null in Input Dims")
    # rows whose text would surely pass the cap (nvtx_text.too_long_shapes' lower bound: 2 + 2(n - 1)
    # for n inputs, max(2, 3k) per input of k integers) are dropped before any text is made
    k = np.asarray(pc.list_value_length(inner).to_numpy(zero_copy_only=False), dtype=np.int64)
    cs = np.concatenate(([0], np.cumsum(np.maximum(2, 3 * k))))
    offs = np.asarray(d.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    offs = offs - offs[0]
    n_in = np.diff(offs)
    low = 2 * n_in + (cs[offs[1:]] - cs[offs[:-1]])
    fits = low <= _SIZES_MAX
    if not fits.all():
        if not fits.any():
            return name
        at = at[fits]
        d = d.filter(pa.array(fits))
        inner = d.flatten()
    one = pc.binary_join(pc.cast(inner, pa.list_(pa.string())), ", ")
    one = pc.binary_join_element_wise("[", one, "]", "")
    outer = pa.ListArray.from_arrays(pc.subtract(d.offsets, d.offsets[0]), one)
    text = pc.binary_join_element_wise("[", pc.binary_join(outer, ", "), "]", "")
    keep = pc.less_equal(pc.utf8_length(text), _SIZES_MAX).to_numpy(zero_copy_only=False)
    if not keep.any():
        return name
    at = at[keep]
    full = pc.binary_join_element_wise(name.take(pa.array(at)), text.filter(pa.array(keep)), _SIZES_FIELD)
    mask = np.zeros(len(name), dtype=bool)
    mask[at] = True
    return pc.replace_with_mask(name, pa.array(mask), full)


def _arrow_chunk(t, acc: _Acc) -> None:  # noqa: C901 - one pass per column, kept together
    """:func:`_chunk` of a window read by pyarrow (:func:`_arrow_read`): the same rows, names,
    threads and launch codes, in the same order, from the columns (no Python object per event;
    Python only per distinct name, thread and launch configuration, and for the rare span,
    overhead and metadata events). ``acc`` (a window's own: :func:`_arrow_part`) is only changed
    at the end (new numbers are held apart until then); a window that raises here is read again,
    from scratch, by the msgspec path."""
    ar = _arrow()
    pa, pc = ar["pa"], ar["pc"]
    n = t.num_rows
    col = {name: t.column(name).combine_chunks() for name in t.column_names}
    args = col["args"]
    f = dict(zip((args.type.field(i).name for i in range(args.type.num_fields)), args.flatten()))
    # ---- kinds, from the distinct (ph, cat) pairs -----------------------------------------
    phc, phv = _first_codes(pc, col["ph"])
    catc, catv = _first_codes(pc, col["cat"])
    nc = len(catv)
    lut = np.array([(_X_KIND.get(c, _IGNORED) if p == "X" else _META if p == "M" else _KIND.get((p, c), _IGNORED))
                    for p in phv for c in catv], dtype=np.int8)
    kinds = lut[phc * nc + catc]
    if "i" in phv:  # [memory] instant events, whatever their category
        is_i = phc == phv.index("i")
        named_mem = pc.fill_null(pc.equal(col["name"], pa.scalar(MEMORY_EVENT)), False).to_numpy(zero_copy_only=False)
        kinds[is_i & named_mem] = K_MEM
    # ---- times ----------------------------------------------------------------------------
    s = _dec_ns(col["ts"])
    d = _dec_ns(col["dur"])
    ok = (s != BAD) & (d != BAD)
    e_ = np.where(ok, s + np.where(ok, d, 0), BAD)
    e_[(e_ != BAD) & ~((e_ > -_LIM) & (e_ < _LIM))] = BAD
    is_x = (kinds >= 0) & (kinds <= K_OVERHEAD)
    fid, fid_ok = _int_col(col["id"])
    fid = np.where(fid_ok & (fid > 0) & (fid < (1 << 32)), fid, 0)
    fstart = (kinds == _F_START) & (fid != 0) & (s != BAD)
    fend = (kinds == _F_END) & (fid != 0) & (s != BAD)
    # ---- threads, in event order: calls, host ranges, flow starts that bind -----------------
    pid, pid_ok = _int_col(col["pid"])
    pc_, pv = _first_codes(pc, col["pid"])
    tc_, tv = _first_codes(pc, col["tid"])  # ints, or text (traces before PyTorch 1.13)
    tid_stream = np.array([_stream_of(v) for v in tv], dtype=np.int64)[tc_]  # _stream_of(tid)
    need = np.flatnonzero(np.isin(kinds, _THREADED) | fstart)
    thr = np.full(n, -1, dtype=np.int64)
    new_threads: dict = {}
    if len(need):
        nt = len(tv)
        codes, pairs = factorize(pc_[need] * nt + tc_[need])
        thr[need] = _number(acc.threads, new_threads, [(pv[c // nt], tv[c % nt]) for c in pairs.tolist()])[codes]
    # ---- names, in event order (host ranges get their sequence number and stack frame) ------
    named = np.flatnonzero(np.isin(kinds, _NAMED))
    host = kinds == K_HOST
    dom_lut = np.array([_HOST_DOM.get(c, 0) if c.__class__ is str else 0 for c in catv], dtype=np.int8)
    dom = dom_lut[catc]
    name = col["name"]
    name_ok = _valid(name)
    op = host & (dom == _DOM_OP)
    seq, seq_ok = _int_col(f["Sequence number"])
    with_seq = op & seq_ok & (seq >= 0) & (seq < _LIM) & name_ok
    if with_seq.any():  # autograd's sequence number, kept in the text as emit_nvtx writes it
        seq_text = pc.if_else(pa.array(with_seq), pc.cast(f["Sequence number"], pa.string()), pa.scalar(None, pa.string()))
        name = pc.coalesce(pc.binary_join_element_wise(name, seq_text, ", seq = "), name)
    name = _arrow_sizes(pa, pc, f["Input Dims"], op & name_ok, name)
    stack = f["Call stack"]
    if stack.null_count < n:  # 2021 format: the innermost frame of the user's code
        has = op & name_ok & _valid(stack)
        has &= pc.fill_null(pc.binary_length(stack), 0).to_numpy() > 0
        at = np.flatnonzero(has)
        if len(at):
            idx = pa.array(at)
            texts = []
            for nm, cs in zip(name.take(idx).to_pylist(), stack.take(idx).to_pylist()):
                fr = _user_frame(cs)
                texts.append(f"{nm}, stack = {fr}" if fr else nm)
            mask = np.zeros(n, dtype=bool)
            mask[at] = True
            name = pc.replace_with_mask(name, pa.array(mask), pa.array(texts, type=pa.string()))
    nid = np.full(n, -1, dtype=np.int64)
    new_names: dict = {}
    if len(named):
        codes, distinct = _first_codes(pc, name.take(pa.array(named)))
        distinct = [F.UNKNOWN_NAME if v is None else v for v in distinct]
        nid[named] = _number(acc.names, new_names, distinct)[codes]
    # ---- GPU rows ---------------------------------------------------------------------------
    dev, dev_ok = _int_col(f["device"])  # missing: the event's pid; null: unknown (BAD)
    if not dev_ok[np.isin(kinds, _GPU_KINDS)].all():
        raise _NotForArrow("a GPU row's device is null or missing: pyarrow cannot tell which")
    dev = np.where((dev >= 0) & (dev < 65536), dev, BAD)
    stream, ok = _int_col(f["stream"])
    stream = np.where(ok & (stream >= -_I32) & (stream < _I32), stream, tid_stream)
    ctx, ok = _int_col(f["context"])
    ctx = np.where(ok & (ctx >= -_I32) & (ctx < _I32), ctx, 0)
    corr, ok = _int_col(f["correlation"])
    corr = np.where(ok & (corr > 0) & (corr < (1 << 32)), corr, 0)
    nbytes, ok = _int_col(f["bytes"])
    nbytes = np.where(ok & (nbytes >= 0) & (nbytes < _LIM), nbytes, 0)
    gpu_rows = {}
    new_raw: dict = {}
    new_items: dict = {}
    for kind in (K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC):
        rows = np.flatnonzero(kinds == kind)
        if not len(rows):
            continue
        row = {"s": s[rows], "e": e_[rows], "dev": dev[rows], "ctx": ctx[rows], "st": stream[rows],
               "corr": corr[rows], "name": nid[rows], "bytes": nbytes[rows]}
        if kind == K_KERNEL:
            row["launch"] = _arrow_launch(pa, pc, acc, rows, f, new_raw, new_items)
        gpu_rows[kind] = row
    rows = np.flatnonzero((kinds == K_RUNTIME) | (kinds == K_DRIVER))
    rt_row = {"s": s[rows], "e": e_[rows], "thr": thr[rows], "corr": corr[rows], "name": nid[rows],
              "drv": (kinds[rows] == K_DRIVER).astype(np.int8)} if len(rows) else None
    rows = np.flatnonzero(host)
    host_row = {"s": s[rows], "e": e_[rows], "thr": thr[rows], "name": nid[rows], "dom": dom[rows]} \
        if len(rows) else None
    rows = np.flatnonzero(fstart)
    fs_row = {"id": fid[rows], "thr": thr[rows], "ts": s[rows]}
    fdev = np.where(pid_ok & (pid >= 0) & (pid < 65536), pid, -1)  # _small_int(pid, 0, 65536, -1)
    rows = np.flatnonzero(fend & (fdev >= 0))
    fe_row = {"id": fid[rows], "dev": fdev[rows], "st": tid_stream[rows], "ts": s[rows]}
    # the rare rows kept as Python objects (read before anything is committed)
    spans = [(int(s[i]), int(e_[i])) for i in np.flatnonzero(kinds == K_SPAN).tolist() if s[i] != BAD and e_[i] != BAD]
    over = np.flatnonzero((kinds == K_OVERHEAD) & (s != BAD) & (e_ != BAD))
    over = [(int(s[i]), int(e_[i]), F.cap(str(nm or ""))) for i, nm in
            zip(over.tolist(), col["name"].take(pa.array(over, type=pa.int64())).to_pylist())]
    meta = np.flatnonzero((kinds == _META) & _valid(args))
    if len(meta):
        idx = pa.array(meta, type=pa.int64())
        meta = [{"name": nm, "pid": p, "tid": q, "args": {"name": label}} for nm, p, q, label in
                zip(*(c.take(idx).to_pylist() for c in (col["name"], col["pid"], col["tid"], f["name"])))]
    # ---- memory events ----------------------------------------------------------------------
    rows = np.flatnonzero(kinds == K_MEM)
    mem_row = None
    if len(rows):
        mem_row = {"s": s[rows], "thr": thr[rows]}
        for key, (arg, lo, hi, other) in _MEM_ARGS.items():
            v, ok = _int_col(f[arg])
            mem_row[key] = np.where(ok & (v >= lo) & (v < hi), v, other)[rows]
    # ---- commit -----------------------------------------------------------------------------
    acc.names.update(new_names)
    acc.threads.update(new_threads)
    acc.launch_codes.update(new_items)
    acc.launch_raw.update(new_raw)
    _commit_rows(acc, np.unique(kinds[is_x]), gpu_rows, rt_row, host_row, fs_row, fe_row)
    if mem_row is not None:
        for k, v in mem_row.items():
            _add(acc.mem[k], v)
    acc.spans.extend(spans)
    for o in over:
        if len(acc.overhead) < 100_000:
            acc.overhead.append(o)
    for ev in meta:
        _metadata_event(ev, acc)
    acc.events += n
    acc.ignored += int((kinds == _IGNORED).sum())


def _arrow_part(body: bytes, got) -> _Acc | None:
    """The rows of a window read by pyarrow (``got``: :func:`_arrow_read`'s) made by
    :func:`_arrow_chunk` (on this thread: it holds the GIL much of the time, which would stall
    this thread's msgspec reading on the worker's), those of the events it left read by msgspec;
    None: not pyarrow's (the msgspec path's)."""
    if got is None:
        return None
    table, tid, end = got
    part = _Acc()
    try:
        _arrow_chunk(table, part)
        if end < len(body):  # the events from the first of another type on
            _M._chunk(_M._decode_events(b"".join((b"[", body[end + 1:], b"]"))), part)
            part.paths["msgspec"] += 1
    except Exception:  # noqa: BLE001 - the msgspec path reads this window
        return None
    part.paths["arrow"] += 1
    return part
