"""``load_kineto``: a Kineto trace file to a :class:`~nsysdoc.trace.model.Trace`, through the cache.

The reader's one entry point: the canonical tables are cached like an nsys export's (the same
cache functions, :mod:`nsysdoc.trace.cache_entry`, and key, with :data:`KINETO_FORMAT` in the
key's version); on a miss the trace is parsed (:mod:`.document`), mapped (:mod:`.mapping`) and
stored. Every unexpected value becomes a one-line refusal, never a traceback.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from ... import cache as cache_m
from ...errors import CorruptFileError, InputError
from ...inputs import regular_file
from .. import schema as S
from .. import tables as F
from ..allocator import release_after_load
from ..cache_entry import CACHE_FORMAT, cache_read, cache_tmp, publish
from ..model import Trace
from .document import _parse
from .errors import EmptyTraceError
from .mapping import _frames

#: ``Trace.source_tool`` of traces read here.
SOURCE_TOOL = "pytorch-profiler"
#: Bump when the mapping below changes: cached tables of older versions are then rebuilt.
KINETO_FORMAT = 8  # 6: [memory] events; 7: record_shapes ("Input Dims") kept in op texts (issue 47);
# 8: the string table keeps only the names an id column holds (issue 50)


def load_kineto(path: str | os.PathLike, *, cache: bool = True, cache_dir: str | os.PathLike | None = None,
                progress=None) -> Trace:
    """Load a PyTorch Profiler (Kineto) trace. Raises :mod:`nsysdoc.errors` exceptions (one line,
    exit 2 at the CLI) on input that is not JSON, not a trace, truncated, damaged or empty."""
    t0 = time.perf_counter()
    p = regular_file(path, "input")
    folder = Path(cache_dir or cache_m.default_cache_dir())
    entry = cache_m.entry_path(folder, p, "trace", f"{CACHE_FORMAT}-kineto{KINETO_FORMAT}") if cache else None
    cached = cache_read(entry) if entry is not None else None
    if cached is not None and cached["meta"].get("source_tool") == SOURCE_TOOL:
        meta, frames, strings, from_cache = cached["meta"], cached["frames"], cached["strings"], True
        store, extras = cached["store"], cached
    else:
        if progress:
            progress("reading the PyTorch Profiler trace")
        try:
            top, acc = _parse(p, progress)
            if not (len(acc.rt["s"]) or len(acc.host["s"]) or any(len(t["s"]) for t in acc.gpu.values())):
                raise EmptyTraceError(
                    f"{p}: empty trace: no kernel, CUDA API, memcpy/memset or CPU-op events were recorded "
                    f"({acc.events:,} trace events in all)",
                    hint="profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] around steps that run")
            if progress:
                progress("building tables")
            drops = F.Drops()
            built = _frames(top, acc, p, drops)
            del acc  # its name dictionary (every distinct event name) is not read again
        except (ValueError, TypeError, OverflowError, KeyError, IndexError) as exc:
            raise CorruptFileError(f"{p}: damaged trace: unexpected values ({type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0][:120] if str(exc) else ''})") from None
        except MemoryError:
            raise InputError(f"{p}: not enough memory to load this trace") from None
        frames, strings, info = built["frames"], built["strings"], built["info"]
        meta = {"nsys_version": None, "schema_version": info["schema_version"], "duration_ns": info["duration_ns"],
                "process_messages": [], "session_start_utc_ns": info["session_start_utc_ns"], "clock": info["clock"],
                "dropped_rows": drops.as_list(), "source_tool": SOURCE_TOOL, "traced": info["traced"],
                "not_recorded": info["not_recorded"], "distributed": info["distributed"], "tables": info["tables"],
                "viewer_origin_ns": info["viewer_origin_ns"]}
        from_cache = False
        tmp = cache_tmp(folder) if entry is not None else None
        # every block is written (to the cache entry, else to a private temporary folder) and then
        # read from its memory-mapped file, as a cache hit reads it: the analysis then holds the
        # pages it touches, not the whole store (issue 50: 116 MB of rows at 400 k launches).
        # Where nothing can be written the store stays in memory.
        kw = {"launch_configs": built["launch"], "nvtx_facts": built["nvtx_facts"]}
        try:
            # (budget 0: no block is held in memory beside the file it goes to)
            store, extras = F.store_from_frames(frames, strings, tmp, write_all=True, memory_budget=0, **kw)
        except OSError:  # (SpillError: a full disk, a folder removed)
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            tmp = None
            store, extras = F.store_from_frames(frames, strings, None, write_all=False, **kw)
        else:
            if tmp is not None and not publish(tmp, entry, meta, frames, strings, store, extras):
                store._own_tmp = tmp
            store.map_written()
    traced = {k: bool(meta.get("traced", {}).get(k, False)) for k in S.TRACE_TYPES}
    trace = Trace(
        path=str(p), nsys_version=None, schema_version=meta.get("schema_version"),
        tables=frozenset(meta.get("tables") or ()), traced=traced, strings=strings,
        store=store, **{name: frames[name] for name in F.SMALL_FRAMES},
        nvtx_domains=extras["nvtx_domains"], nvtx_groups=extras["nvtx_groups"], derived=extras["derived"],
        duration_ns=meta.get("duration_ns"), process_messages=[],
        session_start_utc_ns=meta.get("session_start_utc_ns"), clock=meta.get("clock") or "session",
        dropped_rows=list(meta.get("dropped_rows") or []), from_cache=from_cache,
        source_tool=SOURCE_TOOL, not_recorded=dict(meta.get("not_recorded") or {}),
        distributed=meta.get("distributed"),
        viewer_origin_ns=meta.get("viewer_origin_ns") if isinstance(meta.get("viewer_origin_ns"), int) else None,
    )
    # what the load freed, kept by Arrow's pool and glibc's heap, is handed back: the analysis
    # allocates through numpy and would not reuse most of it (issue 50)
    release_after_load()
    trace.load_seconds = time.perf_counter() - t0
    return trace
