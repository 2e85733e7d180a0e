"""The options of one report run, as one object (issue 51: ``step_marker``, ``cache``,
``cache_dir``, ``nsys`` and ``progress`` were threaded separately through six functions of
``api`` and ``pipeline``, and the job's workers got them as loose dictionary keys).

The command line and the Python API each build a :class:`ReportOptions` once, from their flags or
keyword arguments (the API checks the values first: ``nsysdoc.api_args.report_options``), and
hand it down: :func:`nsysdoc.pipeline.diagnose`, :func:`nsysdoc.pipeline.diff_side`, the API's
reports and the job's workers (:meth:`ReportOptions.job_fields` / :meth:`ReportOptions.from_job_fields`:
what crosses to a worker process or a Dask worker is the same plain dictionary as before).
Nothing here imports nsysdoc (ground floor): every layer above may read it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Callable, Optional, Union


@dataclass(frozen=True)
class ReportOptions:
    """How to read and analyse a capture (the same for every capture of one run)."""

    #: regex an NVTX range's whole text must match to mark a training step (None: the
    #: configuration's, else the built-in one)
    step_marker: Optional[str] = None
    #: read and write the cache of the export's tables (``--no-cache`` is ``cache=False``)
    cache: bool = True
    #: the cache folder (None: ``$NSYSDOC_CACHE_DIR`` or ``~/.cache/nsysdoc``)
    cache_dir: Union[str, os.PathLike, None] = None
    #: the nsys binary that exports a ``.nsys-rep`` (None: ``$NSYS``, then PATH)
    nsys: Optional[str] = None
    #: receives short phase messages (the command line shows them on a terminal)
    progress: Optional[Callable[[str], None]] = None

    def with_progress(self, progress: Optional[Callable[[str], None]]) -> "ReportOptions":
        """The same options with another progress callback (a job's worker reports none)."""
        return replace(self, progress=progress)

    def job_fields(self) -> dict:
        """The fields a job's worker needs, as the plain keys of the job's options dictionary
        (``nsysdoc.jobs.summary.summarize_file``): picklable, no callback."""
        return {"step_marker": self.step_marker, "no_cache": not self.cache,
                "cache_dir": str(self.cache_dir) if self.cache_dir else None, "nsys": self.nsys}

    @classmethod
    def from_job_fields(cls, fields: dict) -> "ReportOptions":
        """The options :meth:`job_fields` wrote (missing keys: the defaults)."""
        return cls(step_marker=fields.get("step_marker"), cache=not fields.get("no_cache"),
                   cache_dir=fields.get("cache_dir"), nsys=fields.get("nsys"))


#: no option given: the defaults of the commands and the API
DEFAULT_OPTIONS = ReportOptions()


def options_of(options: Optional[ReportOptions] = None, **fields) -> ReportOptions:
    """``options`` (none: :data:`DEFAULT_OPTIONS`) with the fields named as keywords replaced, for
    the callers (tests, scripts) that name a field or two: ``diagnose(path, ruleset, cache=False)``."""
    o = options if options is not None else DEFAULT_OPTIONS
    return replace(o, **fields) if fields else o


__all__ = ["ReportOptions", "DEFAULT_OPTIONS", "options_of"]
