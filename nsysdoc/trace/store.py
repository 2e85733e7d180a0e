"""Event tables held in blocks, in memory or spilled to Arrow IPC files, read by time range.

Exports of long runs hold tens of millions of rows. The loader never builds a table whole: it
streams each big table (kernels, memcpy, memset, sync, runtime, OS runtime, NVTX) into a
:class:`Table` of **blocks** of at most :data:`BLOCK_ROWS` rows, in the table's own order, and
records for each block its row offset and the smallest start, largest start and largest end of
its rows. The analysis (:mod:`nsysdoc.engine`) then reads only the blocks a time range needs:

* :meth:`Table.rows_starting_in` — rows whose start lies in ``[t0, t1)``;
* :meth:`Table.rows_overlapping` — rows with ``start < t1`` and ``end > t0``;
* :meth:`Table.gather` — rows by position (``api``: the runtime row that launched a GPU row).

nsys writes rows in buffer-flush order, nearly sorted by time, so a time range touches a few
blocks; rows out of order only cost reading more blocks, never a wrong answer (every selection
filters the rows themselves).

Blocks stay in memory until the store holds :data:`MEMORY_BUDGET` bytes (the loader sets the
budget to 0 for a capture whose rows would not all fit it); later blocks are written to Arrow IPC
files, one record batch per block (the cache entry's files, or a private temporary folder with
``--no-cache``), and read back when needed, so peak memory does not grow with the capture's
length. Up to :data:`UNCOMPRESSED_MAX_BYTES` the batches are uncompressed: reading one back is a
file read (2 M kernel rows in 0.01-0.02 s, against 0.4 s to decode them lz4-compressed, for files
about twice as big); bigger spills stay lz4 so that they fit the disk and the cache's cap. Small ids that
are only final once every row has been seen (process, device, stream, thread) are stored as
first-seen codes and mapped to their final indices when read (``Store.remaps``).
"""
from __future__ import annotations

import queue
import shutil
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# the allocator release (issue 51: apart from the block store); its names stay importable from here
from .allocator import (MMAP_THRESHOLD_BYTES, RELEASE_GROWTH_BYTES, RELEASE_RSS_BYTES, Releaser,  # noqa: F401
                        _malloc_trim, keep_freed_memory, release_memory, resident_bytes)

#: Rows per block (one record batch): small enough that a slice's blocks stay in the read cache
#: and a slice edge over-reads little, large enough that per-block overhead does not count.
BLOCK_ROWS = 1 << 16
#: Rows a bucketed table may hold waiting for their block (about 70 MB of kernel rows).
PENDING_ROWS = 16 * BLOCK_ROWS
#: Bytes of blocks kept in memory before later blocks are spilled to disk.
MEMORY_BUDGET = 384 << 20
#: Largest spill (or cache entry) written uncompressed, estimated from the rows: an uncompressed
#: block reads back 20-40x faster than an lz4 one, but takes 1.6-2.4x the disk; above this the
#: files stay lz4 (a 50 M + 50 M capture: 2.6 GB instead of 4.8 GB, inside the cache's 4 GB cap).
#: Half the default cap (issue 50): a 20 M + 20 M capture (1.9 GB uncompressed, 1.0 GB lz4) stays
#: uncompressed. Its blocks are read about 4.5 times each: 11.8 s of lz4 decoding (all threads)
#: against 2.5 s of file reads; the first report (writes the cache) took 52 s against 70 s and
#: --no-cache 61 s against 71 s; a cache hit about the same (18-23 s against 20-21 s: the decoding
#: runs on the prefetch thread, hidden while a core is free), measured 2026-12-06.
UNCOMPRESSED_MAX_BYTES = 2 << 30
#: Average bytes per row of an uncompressed block (kernels about 61, runtime calls about 35).
UNCOMPRESSED_ROW_BYTES = 48
#: Bytes of decoded spilled blocks kept for reuse (a slice and its neighbours read the same blocks).
READ_CACHE_BYTES = 160 << 20


@dataclass
class Block:
    """One block: ``n`` rows starting at global row ``offset``; ``data`` in memory, or record batch
    ``group`` of its table's file."""

    n: int
    offset: int
    start_min: int
    start_max: int
    end_max: int
    data: dict | None = None
    group: int = -1
    nbytes: int = 0


#: dtype name of a text column: held as an Arrow ``large_string`` array (never as Python objects)
STR = "str"


def _is_arrow(v) -> bool:
    return not isinstance(v, np.ndarray)


def take(v, idx):
    """``v[idx]`` for numpy and Arrow columns (``idx``: boolean mask or integer positions)."""
    if not _is_arrow(v):
        return v[idx]
    import pyarrow as pa

    idx = np.asarray(idx)
    if idx.dtype == bool:
        return v.filter(pa.array(idx))
    return v.take(pa.array(idx.astype(np.int64)))


def concat(parts: list):
    if not _is_arrow(parts[0]):
        return np.concatenate(parts)
    import pyarrow as pa

    return pa.concat_arrays(parts)


def to_text(v) -> np.ndarray:
    """A text column as an object array of str (for small selections: tests, the timeline)."""
    if not _is_arrow(v):
        return np.asarray(v, dtype=object)
    return np.array(v.to_pylist(), dtype=object)


def empty_text():
    import pyarrow as pa

    return pa.array([], type=pa.large_string())


class Table:
    """One event table as blocks (see the module docstring). Columns have fixed numpy dtypes (or
    :data:`STR`); ``coded`` columns hold first-seen codes mapped through ``store.remaps[name]``
    when read."""

    def __init__(self, store: "Store", name: str, dtypes: dict[str, str], coded: tuple[str, ...] = (),
                 end_col: str = "end_ns") -> None:
        self.store = store
        self.name = name
        self.dtypes = {k: (STR if v == STR else np.dtype(v)) for k, v in dtypes.items()}
        #: coded column -> the remap it goes through ("api_thread=thread": api_thread by thread's)
        self.remap_of = {c.split("=")[0]: c.split("=")[-1] for c in coded}
        #: columns not stored but looked up from another one when read: name -> (column, table
        #: of ``store.luts``); e.g. a GPU row's device and process follow from its stream
        self.virtual: dict[str, tuple[str, str]] = {}
        self.coded = tuple(coded)
        self.end_col = end_col
        self.blocks: list[Block] = []
        self.n = 0
        self._file: Path | None = None
        self.file_bytes: int | None = None
        self._groups = 0
        self._offsets: np.ndarray | None = None
        #: time-bucketed tables keep their rows' table order in a ``row`` column (blocks then hold
        #: rows of one start-time bucket; see :meth:`bucket_by_start`)
        self.bucketed = "row" in self.dtypes
        self._buckets: tuple[int, int, int] | None = None
        self._pending: dict[int, list] = {}
        self._pending_rows = 0

    # ---- writing -----------------------------------------------------------------------------
    def bucket_by_start(self, origin: int, width: int) -> None:
        """Group appended rows into blocks by start time (buckets of ``width`` ns from ``origin``,
        any number of them), so that every block covers a short stretch of time whatever order
        the rows come in. Rows wait in bucket buffers of at most :data:`PENDING_ROWS` rows in all;
        past that the earliest buckets are written, neighbours coalesced into full blocks. Only
        speed depends on this (every read filters rows by time): nearly sorted rows, as nsys
        writes them, give blocks of consecutive times; rows in any order still load and read right."""
        self._buckets = (int(origin), max(1, int(width)), 0)

    def append(self, cols: dict[str, np.ndarray]) -> None:
        """Append rows (every column of ``dtypes``), cut into blocks of at most BLOCK_ROWS."""
        if self._buckets is not None:
            return self._append_bucketed(cols)
        n = len(cols["start_ns"])
        for a in range(0, n, BLOCK_ROWS):
            b = min(n, a + BLOCK_ROWS)
            part = {}
            for k, dt in self.dtypes.items():
                if dt == STR:
                    part[k] = _text_array(cols[k], a, b)
                else:
                    part[k] = np.ascontiguousarray(np.asarray(cols[k][a:b]).astype(dt, copy=False))
            self._add_block(part)

    def _append_bucketed(self, cols: dict[str, np.ndarray]) -> None:
        origin, width, _ = self._buckets
        s = np.asarray(cols["start_ns"], dtype=np.int64)
        if not len(s):
            return
        b = (s - origin) // width
        if (b[1:] >= b[:-1]).all():
            sb, sorted_cols = b, {k: cols[k] for k in self.dtypes}
        else:  # one reorder of the chunk; each bucket is then a slice (a view)
            order = np.argsort(b, kind="stable")
            sb = b[order]
            # each column in its stored type first (the cast blocks get anyway): the reorder then
            # moves 1-4 bytes per value instead of 8
            sorted_cols = {k: (take(cols[k], order) if not isinstance(cols[k], np.ndarray)
                               else (cols[k] if dt == STR else cols[k].astype(dt, copy=False))[order])
                           for k, dt in self.dtypes.items()}
        cuts = np.flatnonzero(np.concatenate(([True], sb[1:] != sb[:-1]))).tolist() + [len(sb)]
        for a, z in zip(cuts[:-1], cuts[1:]):
            part = {k: v[a:z] if isinstance(v, np.ndarray) else v.slice(a, z - a) for k, v in sorted_cols.items()}
            key = int(sb[a])
            rows, parts = self._pending.get(key, (0, []))
            parts.append(part)
            self._pending[key] = (rows + (z - a), parts)
            self._pending_rows += z - a
        if self._pending_rows > PENDING_ROWS:
            self._flush_earliest(PENDING_ROWS // 2)

    def _flush_earliest(self, keep_rows: int) -> None:
        """Write the earliest buckets, coalesced into blocks of up to BLOCK_ROWS, until at most
        ``keep_rows`` rows wait."""
        group: list = []
        n = 0
        for key in sorted(self._pending):
            if self._pending_rows <= keep_rows and not group:
                break
            rows, parts = self._pending.pop(key)
            self._pending_rows -= rows
            group.extend(parts)
            n += rows
            if n >= BLOCK_ROWS:
                self._write_parts(group)
                group, n = [], 0
        if group:
            self._write_parts(group)

    def _write_parts(self, parts: list) -> None:
        cols = {k: concat([p[k] for p in parts]) if len(parts) > 1 else parts[0][k] for k in self.dtypes}
        n = len(cols["start_ns"])
        for a in range(0, n, BLOCK_ROWS):
            b = min(n, a + BLOCK_ROWS)
            part = {}
            for k, dt in self.dtypes.items():
                v = cols[k]
                part[k] = _text_array(v, a, b) if dt == STR else np.ascontiguousarray(
                    np.asarray(v[a:b]).astype(dt, copy=False))
            self._add_block(part)

    def finish(self) -> None:
        """Write out the rows still waiting in bucket buffers (time order)."""
        if self._pending:
            self._flush_earliest(-1)

    def _add_block(self, part: dict[str, np.ndarray]) -> None:
        n = len(part["start_ns"])
        if n == 0:
            return
        s = part["start_ns"]
        e = part[self.end_col] if self.end_col in part else s
        blk = Block(n=n, offset=self.n, start_min=int(s.min()), start_max=int(s.max()),
                    end_max=int(max(int(e.max()), int(s.max()))), nbytes=sum(int(v.nbytes) for v in part.values()))
        self.blocks.append(blk)
        self.n += n
        self._offsets = None
        self.store._place(self, blk, part)

    # ---- reading -----------------------------------------------------------------------------
    @property
    def offsets(self) -> np.ndarray:
        if self._offsets is None:
            self._offsets = np.array([b.offset for b in self.blocks] + [self.n], dtype=np.int64)
            self._smin = np.array([b.start_min for b in self.blocks], dtype=np.int64)
            self._smax = np.array([b.start_max for b in self.blocks], dtype=np.int64)
            self._emax = np.array([b.end_max for b in self.blocks], dtype=np.int64)
        return self._offsets

    def __len__(self) -> int:
        return self.n

    def columns(self, cols=None) -> list[str]:
        if cols is None:
            return list(self.dtypes) + list(self.virtual)
        return [c for c in cols if c in self.dtypes or c in self.virtual or c == "pos"]

    def read_block(self, i: int, cols=None) -> dict[str, np.ndarray]:
        """Block ``i``'s columns (remapped), plus ``pos`` (global row index) when asked for."""
        blk = self.blocks[i]
        want = self.columns(cols)
        raw = [c for c in want if c != "pos" and c not in self.virtual]
        virt = [c for c in want if c in self.virtual]
        data = blk.data if blk.data is not None else self.store._read_group(self, blk, raw)
        out = {}
        for c in virt:
            base, lut = self.virtual[c]
            out[c] = self.store.luts[lut][data[base]]
        for c in raw:
            v = data[c]
            key = self.remap_of.get(c)
            if key is not None:
                remap = self.store.remap(key)
                if remap is not None:
                    v = remap[v] if key == c else np.where(v >= 0, remap[np.maximum(v, 0)], -1).astype(remap.dtype)
            out[c] = v
        if "pos" in want:
            out["pos"] = data["row"].astype(np.int64) if self.bucketed else \
                np.arange(blk.offset, blk.offset + blk.n, dtype=np.int64)
        return out

    def read_text(self, i: int, col: str):
        """Block ``i``'s text column ``col`` (an Arrow array) for one pass over it: a block held
        in memory gives its own; a block in a file is read into memory and not kept, never
        through the memory map, whose pages would stay resident once touched (issue 50: a
        whole-capture pass over the NVTX texts held 40 MB of a 400 k-launch trace's file)."""
        blk = self.blocks[i]
        if blk.data is not None or not self.store.map_files:
            return self.read_block(i, [col])[col]
        return self.store._read_unmapped(self, blk, col)

    def _empty(self, cols) -> dict[str, np.ndarray]:
        out = {}
        for c in self.columns(cols):
            if c == "pos":
                out[c] = np.zeros(0, np.int64)
            elif c in self.virtual:
                out[c] = np.zeros(0, np.int32)
            elif self.dtypes[c] == STR:
                out[c] = empty_text()
            else:
                dt = self.dtypes[c]
                key = self.remap_of.get(c)
                if key is not None and self.store.remap(key) is not None:
                    dt = self.store.remap(key).dtype
                out[c] = np.zeros(0, dt)
        return out

    def _concat(self, parts: list[dict], cols) -> dict[str, np.ndarray]:
        if not parts:
            return self._empty(cols)
        if len(parts) == 1:
            return parts[0]
        return {k: concat([p[k] for p in parts]) for k in parts[0]}

    def blocks_where(self, start_lo=None, start_hi=None, end_gt=None) -> list[int]:
        """Blocks that may hold rows with ``start >= start_lo``, ``start < start_hi``, ``end > end_gt``."""
        if not self.blocks:
            return []
        self.offsets  # noqa: B018 - builds the stat arrays
        ok = np.ones(len(self.blocks), dtype=bool)
        if start_lo is not None:
            ok &= self._smax >= start_lo
        if start_hi is not None:
            ok &= self._smin < start_hi
        if end_gt is not None:
            ok &= self._emax > end_gt
        return np.flatnonzero(ok).tolist()

    def rows_starting_in(self, t0, t1, cols=None) -> dict[str, np.ndarray]:
        """Rows with ``t0 <= start < t1`` (``None`` = unbounded), in table order."""
        need = self.columns(cols)
        parts = []
        for i in self.blocks_where(start_lo=t0, start_hi=t1):
            b = self.blocks[i]
            d = self.read_block(i, need + ([] if "start_ns" in need else ["start_ns"]))
            s = d["start_ns"]
            lo_ok = t0 is None or b.start_min >= t0
            hi_ok = t1 is None or b.start_max < t1
            if not (lo_ok and hi_ok):
                m = np.ones(len(s), dtype=bool)
                if t0 is not None:
                    m &= s >= t0
                if t1 is not None:
                    m &= s < t1
                d = {k: take(v, m) for k, v in d.items()}
            if "start_ns" not in need:
                d.pop("start_ns")
            parts.append(d)
        return self._concat(parts, cols)

    def rows_overlapping(self, t0: int, t1: int, cols=None, *, touching: bool = False) -> dict[str, np.ndarray]:
        """Rows with ``start < t1`` and ``end > t0`` (``end >= t0`` with ``touching``), in table order."""
        need = self.columns(cols)
        extra = [c for c in ("start_ns", self.end_col) if c not in need]
        parts = []
        lim = t0 - 1 if touching else t0
        for i in self.blocks_where(start_hi=t1, end_gt=lim):
            d = self.read_block(i, need + extra)
            m = (d["start_ns"] < t1) & ((d[self.end_col] >= t0) if touching else (d[self.end_col] > t0))
            if not m.all():
                d = {k: take(v, m) for k, v in d.items()}
            for c in extra:
                d.pop(c)
            parts.append(d)
        return self._concat(parts, cols)

    def gather(self, pos: np.ndarray, cols=None) -> dict[str, np.ndarray]:
        """Rows at global positions ``pos`` (any order, repeats allowed; every position valid).
        Not for time-bucketed tables (their positions are not in block order)."""
        assert not self.bucketed, "gather() needs a table kept in table order"
        pos = np.asarray(pos, dtype=np.int64)
        want = [c for c in self.columns(cols) if c != "pos"]
        out = self._empty(want)
        if any(c in self.virtual for c in want):
            raise ValueError("gather() reads stored columns only")
        if len(pos) == 0:
            return out
        bi = np.searchsorted(self.offsets, pos, side="right") - 1
        if len(self.blocks) == 1 or any(self.dtypes[c] == STR for c in want):
            if len(self.blocks) == 1:
                d = self.read_block(0, want)
                return {c: take(d[c], pos) for c in want}
            parts = [self.read_block(int(i), want) for i in np.unique(bi)]
            d = self._concat(parts, want)
            base = np.concatenate([np.arange(self.blocks[int(i)].offset, self.blocks[int(i)].offset + self.blocks[int(i)].n)
                                   for i in np.unique(bi)])
            return {c: take(d[c], np.searchsorted(base, pos)) for c in want}
        out = {c: np.empty(len(pos), dtype=v.dtype) for c, v in out.items()}
        order = np.argsort(bi, kind="stable")
        sb = bi[order]
        cuts = np.flatnonzero(np.concatenate(([True], sb[1:] != sb[:-1]))).tolist() + [len(sb)]
        for a, b in zip(cuts[:-1], cuts[1:]):
            i = int(sb[a])
            idx = order[a:b]
            d = self.read_block(i, want)
            local = pos[idx] - self.blocks[i].offset
            for c in want:
                out[c][idx] = d[c][local]
        return out

    def iter_blocks(self, cols=None, ahead: bool = False):
        """Every block's columns, in table order. ``ahead``: the next block is read on a thread
        of its own while the caller works on this one (the decoder releases the GIL), for a pass
        over a spilled table that nothing else runs beside (the plan's passes)."""
        n = len(self.blocks)
        if not ahead or n < 2 or all(b.data is not None for b in self.blocks):
            for i in range(n):
                yield self.read_block(i, cols)
            return
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsysdoc-read")
        try:
            nxt = pool.submit(self.read_block, 0, cols)
            for i in range(n):
                cur = nxt.result()
                nxt = pool.submit(self.read_block, i + 1, cols) if i + 1 < n else None
                yield cur
                del cur
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def read_all(self, cols=None) -> dict[str, np.ndarray]:
        """The whole table (for small captures and tests: this is the one read that is not bounded)."""
        return self._concat([self.read_block(i, cols) for i in range(len(self.blocks))], cols)

    def stats(self) -> dict:
        """Smallest start and largest end over the table (``None`` when empty)."""
        if not self.blocks:
            return {"start_min": None, "end_max": None}
        return {"start_min": min(b.start_min for b in self.blocks), "end_max": max(b.end_max for b in self.blocks)}


class Store:
    """The tables of one capture, the remaps of their coded columns, and where spilled blocks live.

    ``spill_dir``: folder for the blocks' Arrow IPC files (the cache entry being written, or a temporary folder);
    ``write_all``: write every block to it (a cache entry), not only those over the memory budget.
    """

    def __init__(self, spill_dir: Path | None = None, *, write_all: bool = False,
                 memory_budget: int | None = None) -> None:
        self.tables: dict[str, Table] = {}
        self.remaps: dict[str, np.ndarray] = {}
        self.luts: dict[str, np.ndarray] = {}
        self._identity: dict[str, tuple] = {}
        self.memory_budget = MEMORY_BUDGET if memory_budget is None else memory_budget
        #: bytes of decoded spilled blocks kept for reuse (the whole store when it fits the budget)
        self.read_cache_bytes = READ_CACHE_BYTES
        self.in_memory = 0
        self.write_all = write_all
        #: lz4-compress spilled blocks (the loader turns it on for captures whose files would be
        #: big: see ``UNCOMPRESSED_MAX_BYTES``); reading handles either
        self.compress = False
        self._spill_dir = Path(spill_dir) if spill_dir is not None else None
        self._own_tmp: Path | None = None
        self._writer: _Writer | None = None
        self._readers: dict[str, object] = {}
        #: memory-map the tables' files instead of reading them (see :meth:`from_description`)
        self.map_files = False
        self._lru: OrderedDict = OrderedDict()
        self._lru_bytes = 0
        self._lock = threading.Lock()
        self.damaged = False
        #: the cache entry whose files the store reads (removed when one of them is damaged)
        self.cache_entry: Path | None = None

    def remap(self, name: str) -> np.ndarray | None:
        """The remap of coded column ``name``, or None when codes are already the final indices."""
        r = self.remaps.get(name)
        if r is None:
            return None
        ident = self._identity.get(name)
        if ident is None or ident[0] is not r:
            ident = (r, bool(np.array_equal(r, np.arange(len(r)))))
            self._identity[name] = ident
        return None if ident[1] else r

    def table(self, name: str, dtypes: dict[str, str], coded: tuple[str, ...] = (), end_col: str = "end_ns") -> Table:
        t = Table(self, name, dtypes, coded, end_col)
        self.tables[name] = t
        return t

    def __getitem__(self, name: str) -> Table:
        return self.tables[name]

    def get(self, name: str) -> Table | None:
        return self.tables.get(name)

    # ---- spilling ----------------------------------------------------------------------------
    def _folder(self) -> Path:
        if self._spill_dir is None:
            self._own_tmp = Path(tempfile.mkdtemp(prefix="nsysdoc-spill-"))
            self._spill_dir = self._own_tmp
        return self._spill_dir

    def _place(self, table: Table, blk: Block, part: dict[str, np.ndarray]) -> None:
        keep = self.in_memory + blk.nbytes <= self.memory_budget
        if keep:
            blk.data = part
            self.in_memory += blk.nbytes
        if self.write_all or not keep:
            if table._file is None:
                table._file = self._folder() / f"{table.name}.arrow"
            blk.group = table._groups
            table._groups += 1
            if self._writer is None:
                self._writer = _Writer("lz4" if self.compress else None)
            self._writer.put(table, part)

    def finish_writes(self) -> None:
        """Write out bucket buffers and wait until every spilled block is on disk (before reading
        any back)."""
        for t in self.tables.values():
            t.finish()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def map_written(self) -> None:
        """From now on read every block from its file, memory-mapped (as a cache hit's store
        reads it), and let go of the blocks held in memory; when every block was written
        (``write_all``). Mapped pages are the page cache's: only those the analysis touches
        count in the process's memory, and the system can take them back."""
        self.finish_writes()
        if not all(t._file is not None and all(b.group >= 0 for b in t.blocks)
                   for t in self.tables.values() if t.blocks):
            return
        for t in self.tables.values():
            for b in t.blocks:
                b.data = None
        self.in_memory = 0
        self._readers.clear()
        self._read_mapped()

    def _read_mapped(self) -> None:
        """Read blocks from the memory-mapped files from now on; decoded blocks (views of the
        mapped pages) are kept for reuse up to the memory budget."""
        self.read_cache_bytes = max(READ_CACHE_BYTES, self.memory_budget)
        self.map_files = True

    def files_present(self) -> bool:
        """Whether every spilled table's file is still there (its folder may have been removed)."""
        return all(t._file is None or Path(t._file).is_file() for t in self.tables.values())

    def relocate(self, folder: Path) -> None:
        """The spill folder was renamed (a cache entry published): read files from ``folder``."""
        self._spill_dir = Path(folder)
        for t in self.tables.values():
            if t._file is not None:
                t._file = self._spill_dir / t._file.name
        self._readers.clear()

    def _read_group(self, table: Table, blk: Block, cols=None) -> dict[str, np.ndarray]:
        """A spilled block, every column decoded at once (a slice wants most of them, and the next
        slice often the same block): kept in a small cache bounded in bytes. A read that asks for
        no text column of a table that has one (NVTX) decodes the other columns only: the texts
        are most of its bytes (an lz4 spill decompresses them all otherwise; 20 M steps-ops warm
        22.2 -> 20.8-21.3 s)."""
        texts = [c for c, dt in table.dtypes.items() if dt == STR]
        # (not from memory-mapped files: those decode in place, where a projected read copied and
        # measured slower, 2 M steps-ops warm 2.1 -> 2.4 s)
        narrow = bool(texts) and cols is not None and not any(c in texts for c in cols) and not self.map_files
        key = (table.name, blk.group)
        with self._lock:
            hit = self._lru.get(key)
            if hit is None and narrow:
                hit = self._lru.get(key + ("narrow",))
            if hit is not None:
                self._lru.move_to_end(key if key in self._lru else key + ("narrow",))
                return hit[0]
        if narrow:
            key = key + ("narrow",)
        import pyarrow as pa
        import pyarrow.ipc as ipc

        try:
            # one reader per thread (decoding runs unlocked) and per column set
            rkey = (table.name, threading.get_ident(), narrow)
            with self._lock:
                rd = self._readers.get(rkey)
            if rd is None:
                src = lambda: pa.memory_map(str(table._file)) if self.map_files else pa.OSFile(str(table._file))  # noqa: E731
                rd = ipc.open_file(src())
                if narrow:
                    keep = [i for i, n in enumerate(rd.schema.names) if n not in texts]
                    rd = ipc.open_file(src(), options=ipc.IpcReadOptions(included_fields=keep))
                with self._lock:
                    self._readers[rkey] = rd
            batch = rd.get_batch(blk.group)
            if batch.num_rows != blk.n:
                raise ValueError(f"block {blk.group} has {batch.num_rows} rows, expected {blk.n}")
            data = {}
            for name, col in zip(batch.schema.names, batch.columns):
                data[name] = col if table.dtypes.get(name) == STR else col.to_numpy(zero_copy_only=False)
            self._check_block(table, blk, data)
        except Exception as exc:  # a damaged spill or cache file: one line, and the entry goes
            raise self._damaged(table, exc) from None
        nbytes = sum(int(v.nbytes) for v in data.values())
        with self._lock:
            if key in self._lru:  # decoded meanwhile by the other thread
                return self._lru[key][0]
            self._lru[key] = (data, nbytes)
            self._lru_bytes += nbytes
            while self._lru_bytes > self.read_cache_bytes and len(self._lru) > 1:
                _k, (_d, nb) = self._lru.popitem(last=False)
                self._lru_bytes -= nb
        return data

    def _read_unmapped(self, table: Table, blk: Block, col: str):
        """Column ``col`` of a spilled block, read from its file into memory (not cached)."""
        import pyarrow as pa
        import pyarrow.ipc as ipc

        try:
            with pa.OSFile(str(table._file)) as f:
                names = ipc.open_file(f).schema.names
                rd = ipc.open_file(f, options=ipc.IpcReadOptions(included_fields=[names.index(col)]))
                batch = rd.get_batch(blk.group)
            if batch.num_rows != blk.n:
                raise ValueError(f"block {blk.group} has {batch.num_rows} rows, expected {blk.n}")
            return batch.column(0)
        except Exception as exc:  # as _read_group: a damaged file is one line, and the entry goes
            raise self._damaged(table, exc) from None

    def _damaged(self, table: Table, exc: Exception):
        """The one-line error for a spilled or cached file of ``table`` that cannot be read back;
        the store is marked damaged and its cache entry removed (the next report rebuilds it)."""
        from ..errors import CorruptFileError

        self.damaged = True
        if self.cache_entry is not None:
            shutil.rmtree(self.cache_entry, ignore_errors=True)
        return CorruptFileError(f"stored rows of the {table.name} table cannot be read ({type(exc).__name__}: "
                                f"{str(exc).splitlines()[0][:120] if str(exc) else ''})",
                                hint="the cache entry was removed; run the report again")

    def _check_block(self, table: "Table", blk: Block, data: dict) -> None:
        """Raise ValueError unless a block read back agrees with what was recorded when it was
        written (its time range) and its codes index their tables: bytes damaged in place decode to
        valid Arrow with wrong values, which would otherwise surface as an internal error deep in
        the analysis, run after run. A few reductions per block (about 1 ms per million rows)."""
        s = data["start_ns"]
        if len(s) == 0:
            return
        e = data[table.end_col] if table.end_col in data else s
        smin, smax = int(s.min()), int(s.max())
        if (smin, smax, max(int(e.max()), smax)) != (blk.start_min, blk.start_max, blk.end_max):
            raise ValueError(f"block {blk.group} does not hold the times it was written with")
        for c, key in table.remap_of.items():
            remap = self.remap(key)  # None: the codes are the final indices, nothing is looked up
            v = data.get(c)
            if remap is not None and v is not None and (int(v.min()) < -1 or int(v.max()) >= len(remap)):
                raise ValueError(f"block {blk.group} has {c} codes outside their table")
        for base, lut in table.virtual.values():
            v, lt = data.get(base), self.luts.get(lut)
            if v is not None and lt is not None and (int(v.min()) < -1 or int(v.max()) >= len(lt)):
                raise ValueError(f"block {blk.group} has {base} codes outside their table")

    def prefetch(self, table: "Table", blocks: list[int]) -> None:
        """Decode spilled blocks into the read cache ahead of use (another thread's slice runs
        meanwhile: the decoder releases the GIL). Stops when the cache is half full of them."""
        done = 0
        for i in blocks:
            blk = table.blocks[i]
            if blk.data is not None:
                continue
            key = (table.name, blk.group)
            with self._lock:
                if key in self._lru:
                    continue
            try:
                self._read_group(table, blk)
            except Exception:
                return  # the reader that needs it will say why
            with self._lock:  # decoded size (blocks described by a cache entry carry no nbytes)
                done += self._lru[key][1] if key in self._lru else 1
            if done > self.read_cache_bytes // 2:
                return

    def close(self) -> None:
        """Drop readers and the private temporary folder, if any (never raises: it cleans up after
        errors too)."""
        try:
            self.finish_writes()
        except OSError:
            pass
        self._readers.clear()
        self._lru.clear()
        self._lru_bytes = 0
        if self._own_tmp is not None:
            shutil.rmtree(self._own_tmp, ignore_errors=True)
            self._own_tmp = None

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            if self._own_tmp is not None:
                shutil.rmtree(self._own_tmp, ignore_errors=True)
        except Exception:
            pass

    # ---- description (cache metadata) --------------------------------------------------------
    def describe(self) -> dict:
        return {name: {"dtypes": {k: (STR if v == STR else str(v)) for k, v in t.dtypes.items()}, "coded": list(t.coded),
                       "virtual": {k: list(v) for k, v in t.virtual.items()},
                       "end_col": t.end_col, "file": t._file.name if t._file is not None else None,
                       "bytes": t._file.stat().st_size if t._file is not None else None,
                       "blocks": [[b.n, b.offset, b.start_min, b.start_max, b.end_max, b.group] for b in t.blocks]}
                for name, t in self.tables.items()}

    @classmethod
    def from_description(cls, folder: Path, desc: dict, remaps: dict[str, np.ndarray]) -> "Store":
        """A store whose every block is a record batch of the Arrow IPC files in ``folder``."""
        st = cls(folder)
        st.remaps = dict(remaps)
        for name, d in desc.items():
            t = st.table(name, d["dtypes"], tuple(d["coded"]), d["end_col"])
            t.virtual = {k: (v[0], v[1]) for k, v in d.get("virtual", {}).items()}
            t._file = folder / d["file"] if d["file"] else None
            #: the file's size when written (a cache entry whose file differs is not used)
            t.file_bytes = d.get("bytes")
            for n, off, s0, s1, e1, g in d["blocks"]:
                if g < 0 or t._file is None:
                    raise ValueError("cache entry block without a file")
                t.blocks.append(Block(int(n), int(off), int(s0), int(s1), int(e1), None, int(g)))
            t.n = sum(b.n for b in t.blocks)
            t._groups = len(t.blocks)
        # a store whose decoded blocks fit the memory budget stays decoded once read (each block is
        # then decoded once, not once per pass), as a cold load would have held it; its files are
        # memory-mapped, so uncompressed batches decode in place, on the page cache's pages: a read
        # copies every byte into freshly allocated memory, and first touching new memory is what
        # costs here (2 M + 2 M warm: 7-17% less time, 2,000 steps: 13-25%, same or lower peak). Bigger
        # stores read, since the mapped pages they touch would stay resident while the mapping lives.
        # Entries are written once and published by a rename, never rewritten in place.
        decoded = sum(t.n * sum(16 if v == STR else np.dtype(v).itemsize for v in t.dtypes.values())
                      for t in st.tables.values())
        if decoded <= st.memory_budget:
            st._read_mapped()
        return st


class SpillError(OSError):
    """A spilled block could not be written (full disk, folder removed ...). The loader then carries
    on without the cache, or refuses in one line when even its temporary folder cannot be written."""


class _Writer:
    """Writes blocks to their table's Arrow IPC file (one record batch per block) on
    a background thread (the writes overlap the reading of the next chunks); the queue is
    short, so at most a few blocks wait in memory."""

    def __init__(self, compression: str | None = None) -> None:
        self.compression = compression
        self.q: queue.Queue = queue.Queue(maxsize=4)
        self.writers: dict[str, object] = {}
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="nsysdoc-spill", daemon=True)
        self.thread.start()

    def put(self, table: Table, part: dict[str, np.ndarray]) -> None:
        if self.error is not None:
            raise SpillError(f"cannot write spilled rows: {self.error}")
        self.q.put((table, part))

    def _run(self) -> None:
        import pyarrow as pa
        import pyarrow.ipc as ipc

        while True:
            item = self.q.get()
            if item is None:
                break
            if self.error is not None:
                continue
            table, part = item
            try:
                batch = pa.record_batch({k: (v if not isinstance(v, np.ndarray) else pa.array(v)) for k, v in part.items()})
                w = self.writers.get(table.name)
                if w is None:
                    w = self.writers[table.name] = ipc.new_file(
                        str(table._file), batch.schema, options=ipc.IpcWriteOptions(compression=self.compression))
                w.write_batch(batch)
            except BaseException as exc:  # surfaced by the next put() or close()
                self.error = exc

    def close(self) -> None:
        self.q.put(None)
        self.thread.join()
        for w in self.writers.values():
            try:
                w.close()
            except Exception as exc:
                self.error = self.error or exc
        if self.error is not None:
            raise SpillError(f"cannot write spilled rows: {self.error}")


def _text_array(values, a: int, b: int):
    """Rows ``a:b`` of a text column (Arrow array, or a sequence of str) as Arrow large_string."""
    import pyarrow as pa

    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        v = values.slice(a, b - a)
        if hasattr(v, "combine_chunks"):
            v = v.combine_chunks()
        return v.cast(pa.large_string()) if v.type != pa.large_string() else v
    return pa.array([x if isinstance(x, str) else "" for x in list(values[a:b])], type=pa.large_string())


def arrays_nbytes(cols: dict[str, np.ndarray]) -> int:
    return int(sum(np.asarray(v).nbytes for v in cols.values()))


def disk_free(folder: Path) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 0


__all__ = ["BLOCK_ROWS", "MEMORY_BUDGET", "Block", "SpillError", "Store", "Table", "arrays_nbytes", "disk_free"]
