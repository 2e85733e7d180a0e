"""``load_export``: an nsys SQLite export as a :class:`~nsysdoc.trace.model.Trace`.

Why a module of its own (issue 51): it decides, once per capture, where the rows come from (a
valid cache entry, else the export through :mod:`.ingest`), how the store holds them (every
block on disk when the rows' estimate passes the memory budget; lz4 when the files would pass
``UNCOMPRESSED_MAX_BYTES``) and turns any value no nsys export holds into one line
(:class:`~nsysdoc.errors.CorruptFileError`), never a traceback. Tests patch
:data:`_MIN_ROW_BYTES`, ``UNCOMPRESSED_MAX_BYTES``, ``_strings`` and ``publish`` here.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from ... import cache as cache_m
from ...errors import CorruptFileError, EmptyCaptureError
from .. import schema as S
from ..allocator import release_memory
from ..cache_entry import CACHE_FORMAT, cache_read, cache_tmp, publish
from ..model import Trace
from ..open import ExportFile, open_export
from ..store import UNCOMPRESSED_MAX_BYTES, UNCOMPRESSED_ROW_BYTES, SpillError, Store
from ..tables import SMALL_FRAMES, Drops, ProgressFn
from .cells import _strings
from .chunks import _rowid_range, _rows_bound
from .clock import _session_duration, _session_start, timestamp_clock
from .ingest import _DROP_ORDER, _TABLE_OF, GPU_TABLES, _Ingest
from .small import GPU_METRICS_DROP_REASON, MEMORY_DROP_REASON, MEMORY_USAGE, _small_tables, _thread_names


#: Fewest bytes a stored event row takes (runtime rows ~35, GPU rows ~70 with their launch columns).
_MIN_ROW_BYTES = 32


def _expected_rows(exp: ExportFile, tables) -> int:
    """Upper bound of the event rows: each big table's rowid range, at most what the file holds."""
    n = 0
    for t in set(_TABLE_OF.values()) | {S.NVTX, S.OSRT}:
        if t in tables:
            lo, hi = _rowid_range(exp, t)
            n += min(max(0, hi - lo), _rows_bound(exp))
    return n


EVENT_TABLES = (S.KERNEL, S.MEMCPY, S.MEMSET, S.RUNTIME, S.NVTX, S.OSRT)


def load_export(path: str | os.PathLike, *, cache: bool, cache_dir: str | os.PathLike | None,
                progress: ProgressFn | None) -> Trace:
    """An nsys SQLite export as a :class:`Trace`, from its cache entry when there is a valid one."""
    t0 = time.perf_counter()
    exp = open_export(path)
    tables = frozenset(exp.tables)
    traced = {k: any(t in tables for t in ts) for k, ts in S.TRACE_TYPES.items()}
    # an export with a -wal/-journal beside it is read from a settled private copy, never cached
    # (the sidecar's content is not part of the file's identity)
    folder = Path(cache_dir or cache_m.default_cache_dir())
    entry = cache_m.entry_path(folder, exp.path, "trace", CACHE_FORMAT) \
        if cache and exp.read_path == exp.path else None
    cached = cache_read(entry) if entry is not None else None
    if cached is not None:
        meta, frames, strings, store = cached["meta"], cached["frames"], cached["strings"], cached["store"]
        extras = cached
        from_cache = True
    else:
        if not any(t in tables for t in EVENT_TABLES):
            small = _small_tables(exp, _strings(exp))
            why = "; ".join(small["process_messages"][:2])
            raise EmptyCaptureError(
                f"{exp.path}: capture is empty: no CUDA, NVTX or OS-runtime events were recorded",
                hint=(f"the profiled process reported: {why}" if why else
                      "check that the program ran under nsys with --trace=cuda,nvtx,osrt and did GPU work"),
            )
        tmp = cache_tmp(folder) if entry is not None else None
        store = Store(tmp, write_all=tmp is not None)
        try:
            # a capture whose blocks would not all fit the memory budget keeps none in memory:
            # the first blocks held would only raise the peak (every later phase reads from disk)
            expected = _expected_rows(exp, tables)
            if expected * _MIN_ROW_BYTES > store.memory_budget:
                store.memory_budget = 0
            store.compress = expected * UNCOMPRESSED_ROW_BYTES > UNCOMPRESSED_MAX_BYTES
            strings = _strings(exp)
            drops = Drops(order=_DROP_ORDER)
            clock, shift = timestamp_clock(exp, _session_start(exp))
            ing = _Ingest(exp, store, strings, _session_duration(exp), drops, progress, shift=shift)
            say = progress or (lambda _msg: None)
            say("reading the CUDA API calls")
            ing.runtime()
            say("reading the GPU operations")
            for key in GPU_TABLES:
                ing.gpu(key)
            say("reading OS runtime calls and NVTX ranges")
            ing.osrt()
            ing.nvtx()
            built = ing.finish(_thread_names(exp, strings))
            store.finish_writes()
            release_memory()
            strings = built["strings"]
            frames = built["frames"]
            # (the small tables' name ids are the export's own: renumbered strings do not fit them)
            small = _small_tables(exp, strings if ing.string_ids is None else ing.raw_strings, shift)
        except (ValueError, TypeError, OverflowError, KeyError, IndexError, UnicodeError) as exc:
            store.close()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            # values no export of nsys holds, in a place the row checks do not cover: refuse in one line
            raise CorruptFileError(f"{exp.path}: damaged export: unexpected values ({type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0][:120] if str(exc) else ''})",
                                   hint="export again with nsys export --type sqlite") from None
        except BaseException:
            store.close()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        frames.update({k: small[k] for k in ("diagnostics", "overhead", "gpu_metrics")})
        frames.update({k: small[k] for k in ("memory", "device_memory")})  # issue 47
        drops.add(S.GPU_METRICS, GPU_METRICS_DROP_REASON, small.get("gpu_metrics_nonfinite", 0))
        drops.add(MEMORY_USAGE, MEMORY_DROP_REASON, small.get("memory_dropped", 0))
        meta = {"nsys_version": exp.nsys_version, "schema_version": exp.schema_version,
                "duration_ns": small["duration_ns"], "process_messages": small["process_messages"],
                "session_start_utc_ns": small["session_start_utc_ns"], "clock": clock,
                "dropped_rows": drops.as_list()}
        extras = built
        from_cache = False
        if tmp is not None and not publish(tmp, entry, meta, frames, strings, store, built):
            store._own_tmp = tmp  # the store still reads its spilled blocks there; removed with it
            if not store.files_present():  # the folder was removed under us (another nsysdoc's clear)
                store.close()
                raise SpillError(f"the cache's working folder {tmp} was removed while in use")
            cache_m.note_problem(f"cannot write the cache entry {entry}; carrying on without it")
    trace = Trace(
        path=str(exp.path), nsys_version=meta["nsys_version"], schema_version=meta["schema_version"],
        tables=tables, traced=traced, strings=strings, store=store,
        **{name: frames[name] for name in SMALL_FRAMES},
        nvtx_domains=extras["nvtx_domains"], nvtx_groups=extras["nvtx_groups"], derived=extras["derived"],
        duration_ns=meta["duration_ns"], process_messages=list(meta["process_messages"]),
        session_start_utc_ns=meta.get("session_start_utc_ns"), clock=meta["clock"],
        dropped_rows=list(meta.get("dropped_rows", [])),
        from_cache=from_cache,
    )
    trace.load_seconds = time.perf_counter() - t0
    return trace
