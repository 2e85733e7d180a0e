"""A loaded trace's cache entry: written after a fresh read, read back instead of the input.

Both readers (:mod:`nsysdoc.trace.sqlite_reader`, :mod:`nsysdoc.trace.kineto`) store the same
entry: the store's Arrow IPC block files, the small tables and strings as Parquet, the derived
arrays as ``.npy`` and ``meta.json`` (``docs/loader.md``, "The cache"). Keys, validation of the
folder and the size cap are :mod:`nsysdoc.cache`'s.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from .. import cache as cache_m
from .columns import Columns
from .tables import FRAME_COLUMNS, SMALL_FRAMES, TABLE_DTYPES, stream_luts
from .model import EVENT_FRAMES, StringTable
from .store import STR, Store


#: Bump when the stored tables change shape: old cache entries are then ignored.
CACHE_FORMAT = 23  # 23: the memory and device_memory tables (issue 47)


def _read_parquet(path: Path) -> Columns:
    """Parquet -> numpy columns, one column at a time (peak = result + one column, not 2x the
    table). Typed as pandas would type them: integers with nulls as floats with NaN, text and
    booleans with nulls as objects (None)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    cols = {}
    for name in pf.schema_arrow.names:
        col = pf.read(columns=[name]).column(0)
        numeric = pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type)
        if numeric and col.null_count == 0:
            cols[name] = col.to_numpy()
        elif (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)) and col.null_count:
            cols[name] = col.cast(pa.float64()).to_numpy(zero_copy_only=False)  # nulls -> NaN
        else:
            cols[name] = np.asarray(col.to_pylist(), dtype=object)
        del col
    return Columns(cols, n=pf.metadata.num_rows)


_META_KEYS = {"format": int, "nsys_version": (str, type(None)), "schema_version": (str, type(None)),
              "duration_ns": (int, type(None)), "process_messages": list,
              "session_start_utc_ns": (int, type(None)), "clock": str, "dropped_rows": list, "store": dict}
_ARRAYS = ("remap_proc", "remap_device", "remap_thread", "pageable_async_api", "launch_candidates",
           "setup_launch", "runtime_name_counts", "kernel_name_ids", "kernel_short_ids", "launch_keys",
           "launch_est_occupancy")


def _arrow_table(t: Columns):
    """A small table as Arrow, for the cache: NaN in a float column is written as null (read back
    as NaN), text as strings."""
    import pyarrow as pa

    cols = {}
    for k in t.columns:
        v = t[k]
        cols[k] = pa.array(v, from_pandas=True) if v.dtype.kind == "f" else pa.array(v.tolist() if v.dtype == object else v)
    return pa.table(cols) if cols else pa.table({})


def _entry_ok(meta, frames: dict[str, Columns], store: Store) -> bool:
    """True when a cache entry has the shape this version writes (else it is rebuilt). A block
    damaged inside a well-formed file is found when read: a one-line error, and the entry is
    removed (``Store._read_group``)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    if not isinstance(meta, dict) or meta.get("format") != CACHE_FORMAT:
        return False
    if any(not isinstance(meta.get(k), typ) for k, typ in _META_KEYS.items()):
        return False
    for name in SMALL_FRAMES:
        df = frames[name]
        if tuple(df.columns) != FRAME_COLUMNS[name]:
            return False
        if name == "streams" and any(df[c].dtype.kind not in "iu" for c in df.columns):
            return False
    if set(store.tables) != set(EVENT_FRAMES):
        return False
    for name, t in store.tables.items():
        if {k: (v if v == STR else str(v)) for k, v in t.dtypes.items()} != TABLE_DTYPES[name]:
            return False
        if t._file is None:
            if t.blocks:
                return False
            continue
        if os.stat(t._file).st_size != t.file_bytes:  # cut short or appended to since written
            return False
        rd = ipc.open_file(pa.OSFile(str(t._file)))
        if rd.num_record_batches != len(t.blocks) or list(rd.schema.names) != list(t.dtypes):
            return False
    return True


def cache_read(entry: Path) -> dict | None:
    meta_path = entry / "meta.json"
    try:
        # only an entry this user sealed under this very key (the input's identity and content):
        # another capture's entry renamed here, or another user's, is a miss and is rebuilt
        if not cache_m.trusted_entry(entry) or not meta_path.is_file():
            return None
        import pyarrow.parquet as pq

        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        frames = {name: _read_parquet(entry / f"{name}.parquet") for name in SMALL_FRAMES}
        # ParquetFile, not read_table: read_table goes through pyarrow.dataset, whose import (with
        # pyarrow.compute) costs 0.07-0.09 s of a cached report
        st = pq.ParquetFile(entry / "strings.parquet").read()
        strings = StringTable(st.column("id").to_numpy(), np.array(st.column("value").to_pylist(), dtype=object))
        arrays = {k: np.load(entry / f"{k}.npy", allow_pickle=False) for k in _ARRAYS}
        doms = np.array(pq.ParquetFile(entry / "nvtx_domains.parquet").read().column("domain").to_pylist(), dtype=object)
        groups = pq.ParquetFile(entry / "nvtx_groups.parquet").read().column("text").to_pylist()
        remaps = {k[6:]: arrays[k].astype(np.int32) for k in _ARRAYS if k.startswith("remap_")}
        store = Store.from_description(entry, meta["store"], remaps)
        store.luts.update(stream_luts(frames["streams"], frames["devices"]))
        if not _entry_ok(meta, frames, store) or strings.ids.dtype.kind not in "iu":
            return None
    except Exception:
        return None  # an unreadable, damaged or foreign cache entry is ignored and rebuilt
    cache_m.touch(entry)
    store.cache_entry = entry
    derived = {k: arrays[k].astype(np.int64) for k in _ARRAYS if not k.startswith("remap_")}
    return {"meta": meta, "frames": frames, "strings": strings, "store": store, "nvtx_domains": doms,
            "nvtx_groups": groups,
            "derived": derived}


def wait_for_cache_writes() -> None:
    """Cache entries are complete when ``load_trace`` returns (kept for callers of older versions)."""


def cache_tmp(cache_dir: Path) -> Path | None:
    """A private folder to write a new entry into, or None when the cache folder is unwritable
    (recorded for the CLI's warning)."""
    try:
        cache_m.make_dir(cache_dir)
        return Path(tempfile.mkdtemp(prefix=".tmp-", dir=cache_dir))
    except OSError as exc:
        cache_m.note_problem(f"cannot write the cache folder {cache_dir}: {exc.strerror or exc}")
        return None


def publish(tmp: Path, entry: Path, meta: dict, frames: dict[str, Columns], strings: StringTable,
             store: Store, extras: dict) -> bool:
    """Write the entry's metadata and small tables next to the store's files in ``tmp``, then
    rename ``tmp`` to ``entry``. Returns whether the entry was published (never raises)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        store.finish_writes()
        for name in SMALL_FRAMES:
            pq.write_table(_arrow_table(frames[name]), tmp / f"{name}.parquet", compression="lz4")
        pq.write_table(pa.table({"id": strings.ids, "value": pa.array(list(strings.values), type=pa.string())}),
                       tmp / "strings.parquet", compression="lz4")
        pq.write_table(pa.table({"domain": pa.array([str(x) for x in extras["nvtx_domains"]], type=pa.string())}),
                       tmp / "nvtx_domains.parquet", compression="lz4")
        pq.write_table(pa.table({"text": pa.array(list(extras["nvtx_groups"]), type=pa.string())}),
                       tmp / "nvtx_groups.parquet", compression="lz4")
        for k in _ARRAYS:
            arr = store.remaps.get(k[6:], np.zeros(0, np.int32)) if k.startswith("remap_") else extras["derived"][k]
            np.save(tmp / f"{k}.npy", np.asarray(arr), allow_pickle=False)
        (tmp / "meta.json").write_text(json.dumps({**meta, "format": CACHE_FORMAT, "store": store.describe()}),
                                       encoding="utf-8")
        cache_m.seal(tmp, entry.name)  # last: an entry is read only under the key it was sealed with
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        os.replace(tmp, entry)
    except Exception:
        return False
    store.relocate(entry)
    store.cache_entry = entry
    try:
        cache_m.evict(entry.parent, keep=entry)
    except Exception:
        pass
    return True
