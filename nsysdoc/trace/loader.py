"""``load_trace``: hands a capture file to the reader of its format.

* :mod:`nsysdoc.trace.sqlite`: an Nsight Systems SQLite export (``nsys export --type sqlite``);
* :mod:`nsysdoc.trace.kineto`: a PyTorch Profiler (Kineto) Chrome-trace JSON, plain or gzipped.

Both build the same tables (:mod:`nsysdoc.trace.tables`) and cache them the same way
(:mod:`nsysdoc.trace.cache_entry`); neither imports the other. This module only picks one and
carries on without the cache when writing it fails.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .. import cache as cache_m
from ..errors import OutputError
from ..formats import input_kind
from . import sqlite
from .tables import ProgressFn
from .model import Trace
from .store import SpillError




def load_trace(path: str | os.PathLike, *, cache: bool = True, cache_dir: str | os.PathLike | None = None,
               progress: ProgressFn | None = None) -> Trace:
    """Load an nsys SQLite export, or a PyTorch Profiler (Kineto) trace (JSON or gzip-compressed
    JSON: :mod:`nsysdoc.trace.kineto`, cached the same way). Raises :mod:`nsysdoc.errors`
    exceptions on bad input.

    The cache can fail without failing the load: when writing the new entry fails (a full disk, its
    folder removed by another process), the capture is read again without the cache and the
    problem is recorded (:func:`nsysdoc.cache.note_problem`). Only when even the temporary files
    of a cache-less load cannot be written is it an error (OutputError, one line)."""
    def once(use_cache: bool) -> Trace:
        # what the file holds: nsysdoc.formats (an SQLite file never imports the Kineto reader)
        if input_kind(path) == "kineto":
            from . import kineto

            return kineto.load_kineto(path, cache=use_cache, cache_dir=cache_dir, progress=progress)
        return sqlite.load_export(path, cache=use_cache, cache_dir=cache_dir, progress=progress)

    try:
        return once(cache)
    except SpillError as exc:
        if not cache:
            raise _spill_refusal(exc) from None
        cache_m.note_problem(f"cannot write the cache in {Path(cache_dir or cache_m.default_cache_dir())}: "
                             f"{_short(exc)}")
    try:
        return once(False)
    except SpillError as exc:
        raise _spill_refusal(exc) from None


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def _spill_refusal(exc: BaseException) -> OutputError:
    return OutputError(f"cannot write temporary files in {tempfile.gettempdir()}: {_short(exc)}",
                       hint="free some disk space there, or point TMPDIR at a folder with room")
