"""The NVTX reader: ranges, marks and domain names of ``NVTX_EVENTS`` in rowid chunks.

Why a module of its own (issue 51): NVTX is the one big table with text. A range's text is inline
or a ``textId`` into ``StringIds``; autograd-nvtx captures give almost every range a text of its
own, so a chunk's texts stay Arrow (no Python string each) when they are valid UTF-8 within the
cap (:func:`_utf8_as_is`), and PyTorch's per-call fields (``seq``, ``op_id``) are read once per
distinct text (:mod:`nsysdoc.trace.nvtx_text`), on the reader threads when every row is distinct
(:func:`_per_row_facts`). Domain names are resolved once every ``DomainCreate`` row is read.
"""
from __future__ import annotations

import numpy as np

from .. import schema as S
from ..nvtx_text import PYTHON_GROUPING_MAX, coded_facts, local_facts, text_facts
from ..open import ExportFile
from ..tables import BAD, MAX_STRING_CHARS, median_anchor, row_checks, validate
from . import chunks as chunked  # looked up at call time: tests patch _adbc_module and CHUNK_ROWS there
from .cells import _text
from .chunks import _fetch_integers, _fetch_rows, _pipelined, _safe_expr, _sample_windows, _table_ranges
from .clock import _shift_times


class _NvtxReader:
    """NVTX rows in rowid chunks: ranges, marks and domain names; texts interned (inline text, else
    the ``textId`` string)."""

    TYPES = S.NVTX_RANGE_TYPES + (S.NVTX_MARK, S.NVTX_DOMAIN_CREATE)

    def __init__(self, exp: ExportFile, present: set[str]) -> None:
        self.exp = exp
        ints = (("start", "NULL"), ("end", "NULL"), ("eventType", "NULL"), ("globalTid", "0"), ("textId", "NULL"),
                ("domainId", "0"))
        # as bytes: decoded here, with replacement characters for invalid UTF-8; a value of another
        # storage class is NULL (the ADBC driver would turn an integer or a blob into text)
        text = "CASE WHEN typeof(\"text\") = 'text' THEN CAST(\"text\" AS BLOB) END" if "text" in present else "NULL"
        types = ",".join(str(t) for t in self.TYPES)
        tail = f' FROM "{S.NVTX}" WHERE rowid >= ? AND rowid < ? AND eventType IN ({types})'
        # the integer columns as stored: half the cost of a chunk's read; a chunk where one holds
        # another storage class (the driver refuses it, or types the column otherwise) is read
        # again with every value that is not an integer as NULL
        self.plain_sql = "SELECT " + ", ".join([f'"{c}"' if c in present else d for c, d in ints] + [text]) + tail
        self.sql = "SELECT " + ", ".join([_safe_expr(f'"{c}"') if c in present else d for c, d in ints] + [text]) + tail
        self.ranges = _table_ranges(exp, S.NVTX, chunked.CHUNK_ROWS)
        self.lo, self.hi = self.ranges.lo, self.ranges.hi

    def _read(self, lo: int, hi: int):
        rows = _fetch_rows(self.exp, self.sql, lo, hi)
        n = len(rows)
        ints = {}
        for j, (name, default) in enumerate((("start_ns", BAD), ("end_ns", BAD), ("event_type", -1),
                                              ("global_tid", 0), ("text_id", -1), ("domain_id", 0))):
            ints[name] = np.fromiter((default if r[j] is None else r[j] for r in rows), dtype=np.int64, count=n)
        text = [r[6] for r in rows]
        return ints, text

    def _read_adbc(self, lo: int, hi: int):
        import pyarrow as pa

        tbl = _fetch_integers(self.exp, self.plain_sql, self.sql, lo, hi, n_int=6)  # (the text is the 7th)
        ints = {}
        for j, (name, default) in enumerate((("start_ns", BAD), ("end_ns", BAD), ("event_type", -1),
                                              ("global_tid", 0), ("text_id", -1), ("domain_id", 0))):
            col = tbl.column(j)
            if pa.types.is_null(col.type):
                ints[name] = np.full(tbl.num_rows, default, dtype=np.int64)
            else:
                ints[name] = col.fill_null(default).cast(pa.int64()).to_numpy()
        tc = tbl.column(6)
        return ints, tc

    def _read_with_facts(self, lo: int, hi: int):
        """A chunk read with ADBC, and when every row holds a text of its own (autograd-nvtx: the
        per-row Arrow path of :meth:`_chunk`), those texts' facts found here on the worker thread
        (Arrow's string kernels release the GIL; the groups are coded later, in chunk order)."""
        ints, tc = self._read_adbc(lo, hi)
        return ints, tc, _per_row_facts(tc, len(ints["start_ns"]))

    def chunks(self, ing):  # ing: the ingest (.ingest._Ingest) these rows go to
        reader = self._read_adbc if chunked._adbc_module() is not None else self._read
        chunk_reader = self._read_with_facts if chunked._adbc_module() is not None else self._read
        anchor = None
        multi = len(self.ranges) > 1
        if multi and ing.duration_ns:
            # the sample's windows are read on the pool: this thread waits, which Ctrl-C interrupts
            parts = []
            for ints, _ in _pipelined(self.exp, _sample_windows(self.exp, S.NVTX, self.ranges), reader):
                keep = ints["event_type"] != S.NVTX_DOMAIN_CREATE
                parts.append({k: v[keep] for k, v in ints.items()})
            if parts:
                smp = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
                ok, _, _ = row_checks(smp, True)
                anchor = median_anchor(smp["start_ns"], ok)
                anchor = None if anchor is None else anchor - ing.shift
        for got in _pipelined(self.exp, self.ranges, chunk_reader):
            yield self._chunk(ing, *got, anchor=anchor, multi=multi)

    def _chunk(self, ing, ints: dict, text, pre=None, *, anchor, multi: bool) -> dict:
        """One chunk's rows: the text column as Arrow (inline text, decoded with replacement
        characters and capped, else the ``textId`` string), DomainCreate rows kept aside. ``pre``:
        the per-row texts and their facts when the reader found them (:func:`_per_row_facts`)."""
        import pyarrow as pa

        _shift_times(ints, ing.shift)
        n = len(ints["start_ns"])
        idx = np.full(n, -1, dtype=np.int64)
        values: list[str] = []
        arrow_values = None  # the distinct texts as Arrow when they never were Python strings
        per_row = False  # arrow_values holds every row's text (idx = row)
        if pre is not None:
            arrow_values, per_row, idx = pre[0], True, np.arange(n, dtype=np.int64)
        elif not isinstance(text, list):  # an Arrow column of bytes
            if not pa.types.is_null(text.type) and text.null_count < n:
                col = text.combine_chunks() if hasattr(text, "combine_chunks") else text
                if col.null_count == 0 and n > PYTHON_GROUPING_MAX and _mostly_distinct(col):
                    # autograd-nvtx: a distinct text per range; hashing them all to find the few
                    # repeats costs more than reading each (0.45 us a text)
                    arrow_values = _utf8_as_is(col)
                    per_row = arrow_values is not None
                if per_row:
                    idx = np.arange(n, dtype=np.int64)
                else:
                    enc = col.dictionary_encode()
                    idx = enc.indices.fill_null(-1).to_numpy().astype(np.int64)
                    # many distinct texts stay Arrow: no Python string each
                    arrow_values = _utf8_as_is(enc.dictionary) if len(enc.dictionary) > PYTHON_GROUPING_MAX else None
                    values = [_text(v) for v in enc.dictionary.to_pylist()] if arrow_values is None else []
        else:
            seen: dict = {}
            for i, v in enumerate(text):
                if isinstance(v, (str, bytes)):
                    j = seen.get(v)
                    if j is None:
                        j = seen[v] = len(values)
                        values.append(_text(v))
                    idx[i] = j
        need = idx < 0
        extra: list[str] = []
        base = len(values) if arrow_values is None else len(arrow_values)
        if need.any():
            uniq, inv = np.unique(ints["text_id"][need], return_inverse=True)
            idx[need] = base + inv
            extra = [str(v) for v in ing.raw_strings.lookup(uniq)]
        if arrow_values is None:
            values += extra
            varr = pa.array(values, type=pa.large_string())
        else:
            varr = pa.concat_arrays([arrow_values, pa.array(extra, type=pa.large_string())]) if extra else arrow_values
        etype, gtid, dom = ints["event_type"], ints["global_tid"], ints["domain_id"]
        pbits = gtid & S.PROCESS_MASK
        is_dom = etype == S.NVTX_DOMAIN_CREATE
        if is_dom.any():
            for p, d_, j in zip(pbits[is_dom].tolist(), dom[is_dom].tolist(), idx[is_dom].tolist()):
                name = values[j] if arrow_values is None else varr[j].as_py()
                ing.domain_names[(p, d_)] = name
                ing.domain_any[d_] = name
        keep = ~is_dom
        kidx = idx[keep]
        if per_row:
            textcol = varr if keep.all() else varr.filter(pa.array(keep))
        else:
            textcol = pa.DictionaryArray.from_arrays(pa.array(kidx.astype(np.int32)), varr).dictionary_decode() \
                if len(kidx) else pa.array([], type=pa.large_string())
        # PyTorch's per-call fields, read once per distinct text (nsysdoc.trace.nvtx_text)
        if pre is not None:
            grp, seq, flags = coded_facts(pre[1], ing.nvtx_groups)
        else:
            small = len(varr) <= PYTHON_GROUPING_MAX
            grp, seq, flags = text_facts((values if arrow_values is None else varr.to_pylist()) if small else varr,
                                         ing.nvtx_groups)
        d = {"start_ns": ints["start_ns"][keep], "end_ns": ints["end_ns"][keep], "event_type": etype[keep],
             "global_tid": gtid[keep], "text": textcol, "text_group": grp[kidx], "seq": seq[kidx],
             "call_flags": flags[kidx], "_pbits": pbits[keep], "_dom": dom[keep]}
        d = validate(d, S.NVTX, ing.duration_ns, ing.drops, end_optional=True, anchor=anchor if multi else None)
        d["end_ns"] = np.where(d["end_ns"] == BAD, -1, d["end_ns"])
        # domain: (process bits, domainId); names are resolved once every DomainCreate row is read
        pb, dm = d.pop("_pbits"), d.pop("_dom")
        d["domain"] = ing.nvtx_domains(np.where(dm != 0, pb, 0), dm)
        d["thread"] = ing.threads(d["global_tid"])
        return d


def _per_row_facts(text, n: int):
    """``(texts, local facts)`` of a chunk's text column (Arrow bytes) when :meth:`_NvtxReader._chunk`
    would keep every row's text as it is (no NULL, more than ``PYTHON_GROUPING_MAX`` rows, mostly
    distinct, valid UTF-8 within the cap), else None."""
    import pyarrow as pa

    if isinstance(text, list) or pa.types.is_null(text.type) or text.null_count:
        return None
    col = text.combine_chunks() if hasattr(text, "combine_chunks") else text
    if n <= PYTHON_GROUPING_MAX or not _mostly_distinct(col):
        return None
    values = _utf8_as_is(col)
    return None if values is None else (values, local_facts(values))


def _mostly_distinct(col, sample: int = 4096) -> bool:
    """Whether most of a column's first ``sample`` texts differ (then hashing the column to find
    its distinct texts saves nothing)."""
    return len(col.slice(0, sample).dictionary_encode().dictionary) > sample // 2


def _utf8_as_is(dictionary):
    """Distinct text cells (Arrow binary) as an Arrow string array when every one is valid UTF-8
    and within :data:`~nsysdoc.trace.tables.MAX_STRING_CHARS` bytes (what :func:`_text` would
    leave unchanged), else None (then each is decoded in Python, with replacement characters)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if dictionary.null_count or not len(dictionary):
        return None
    if int(pc.max(pc.binary_length(dictionary)).as_py()) > MAX_STRING_CHARS:
        return None
    try:
        return dictionary.cast(pa.large_string())  # validates the UTF-8
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
