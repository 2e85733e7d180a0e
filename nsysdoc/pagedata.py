"""What the page needs beyond the result (issue 51): the rows of the timeline windows, captured
once right after the rules run (:func:`nsysdoc.assembly.page.capture_page`), kept beside the result.

The page (``nsysdoc.views``) is a function of the result and of this object: it never reads the
trace, the block store or the engine, so a :class:`~nsysdoc.api.Report` can let those go once
analysed. Everything here is plain data (numpy arrays, :class:`~nsysdoc.trace.columns.Columns`,
dicts); this module imports nothing of nsysdoc, so every layer may read it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TimelineWindow:
    """One captured timeline window ``[start_ns, end_ns)``."""

    start_ns: int
    end_ns: int
    #: the window's rows, as :mod:`nsysdoc.metrics.timeline` reads them (``trace``: a small
    #: trace-like namespace of the window's tables and only the strings they use, ``ops``, ``gaps``,
    #: ``blocking``, ``steps``, ``window``, ``host_tid``); None when the window held more
    #: operations than the page takes (a finding's range window: the page says so instead)
    data: Any = None
    #: GPU operations in the window (the page shares its span budget by it)
    n_ops: int = 0
    #: the step thread listed first (a step window), and the step (:func:`~nsysdoc.metrics.
    #: timeline.pick_step`'s dict), or None
    host_tid: int | None = None
    step: dict | None = None
    #: a window around finding ranges: the indexes of the ranges it holds, in the page's order
    #: (findings ranked as the page shows them, each one's ``time_ranges`` with numeric ends:
    #: :func:`nsysdoc.assembly.page.finding_ranges`); None for the other windows
    ranges: list[int] | None = None


@dataclass
class PageData:
    """The page's inputs other than the result."""

    #: ``Trace.source_tool`` ("nsys" or "pytorch-profiler") and ``Trace.viewer_origin_ns``
    source_tool: str = "nsys"
    viewer_origin_ns: int | None = None
    #: the plan's steps (:class:`nsysdoc.metrics.steps.Steps`: window, markers, per-step table)
    steps: Any = None
    #: captured windows by name, in the order the page lists them: "median", "worst", "middle"
    #: (the engine's), "range0"... (finding ranges no step window holds whole), "window" (the
    #: whole analysis window, when small enough)
    windows: dict[str, TimelineWindow] = field(default_factory=dict)
    #: False when captured without replaying slices (``replay=False``: a JSON-only run): only the
    #: windows the engine kept are here, not the finding ranges' or the whole window's
    complete: bool = True

    def window_view(self, name: str):
        """The rows of window ``name`` (what ``Analysis.window_view`` gave), or None."""
        w = self.windows.get(name)
        return w.data if w is not None else None


__all__ = ["PageData", "TimelineWindow"]
