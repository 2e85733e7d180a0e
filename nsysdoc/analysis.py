"""Analyse a capture: the library entry point behind ``nsysdoc report``.

``analyze(trace)`` plans the work (``nsysdoc.engine.plan``: steps, windows, attribution), runs the
engine (``nsysdoc.engine.run``: the capture read in time slices, so memory does not grow with the
capture's length) and assembles the result (``nsysdoc.assembly.assemble``: the JSON contract,
``docs/json.md``). It returns an :class:`Analysis` whose ``to_dict()`` is that result; the rules
fill its findings (``nsysdoc.rules.apply_rules``). Once they have, :meth:`Analysis.page_data`
collects what the page needs beyond the result (:func:`page_data`: the timeline windows of the
median and worst steps, or the middle of the capture, of the findings' ranges and of the whole
window), once; the page (``nsysdoc.views``) reads only the result and that
(:class:`nsysdoc.pagedata.PageData`), so the trace and the engine state can be let go
(:meth:`Analysis.release`).

Words (issue 51: "capture" meant six things): the *input* is the file read (an nsys export or
report, a PyTorch Profiler trace); the engine *keeps* timeline windows while it runs and
:meth:`Analysis.replay_windows` replays slices for more; the page data is *collected* after the
rules; ``capture`` stays the JSON section on the data's quality and the command that profiles a
program with nsys.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .assembly import CONTRACT, assemble
from .metrics.steps import Steps, compile_step_pattern
from .pagedata import PageData, TimelineWindow
from .trace import Trace

__all__ = ["Analysis", "analyze", "page_data", "finding_ranges", "CONTRACT"]


@dataclass
class Analysis:
    trace: Trace
    step_pattern: str
    steps: Steps
    #: GPU span (first to last GPU operation) and the parts of it left out of the analysis window
    span: tuple[int | None, int | None] = (None, None)
    excluded: list[dict] = field(default_factory=list)
    result: dict = field(default_factory=dict)
    #: the engine's run (totals and timeline captures), for the page's captures and the event streams
    engine: object = None
    #: whole tables the result shows only the top of (``kernels``: every kernel name in the
    #: window, as ``nsysdoc.metrics.kernels.kernel_tables`` builds it), for the Python API
    tables: dict = field(default_factory=dict)
    #: what the page needs beyond the result (:meth:`page_data`), once captured
    page: PageData | None = None

    def to_dict(self) -> dict:
        return self.result

    def replay_windows(self, windows: dict[str, tuple[int, int]], max_ops: int | None = None) -> dict:
        """Keep more timeline windows ``{name: (start_ns, end_ns)}``, replaying only the slices that
        hold them (``nsysdoc.engine.run.capture_windows``); each is then read with :meth:`window_view`.
        Returns the engine's kept windows by name (``overflow`` set on those dropped for holding more than ``max_ops`` operations)."""
        if self.engine is None:
            return {}
        from .engine.run import capture_windows

        return capture_windows(self.engine, windows, max_ops=max_ops)

    def window_view(self, name: str):
        """The captured data of timeline window ``name`` ("median", "worst" or "middle"), as the
        object :func:`nsysdoc.metrics.timeline.window_timeline` reads, or None."""
        from .engine.view import window_view

        return window_view(self, name)

    def page_data(self, replay: bool = True) -> PageData:
        """What the page needs beyond the result (:func:`page_data` of the ranked findings' ranges),
        captured on the first call (after the rules ran: the findings' ranges get windows) and kept;
        ``replay=False`` keeps the cheap part only (issue 50: a JSON-only run needs no window), and a
        later call with ``replay=True`` completes it while the engine state is at hand."""
        if self.page is None or (replay and not self.page.complete and self.engine is not None):
            self.page = page_data(self, replay=replay)
        return self.page

    def release(self) -> None:
        """Let go of the trace (its tables and block store) and the engine state; the result,
        ``tables`` and the page data (captured now if not yet) stay. Nothing that needs rows works
        on this object afterwards (``nsysdoc.api.Report`` reads the capture again for those)."""
        if self.page is None:
            self.page_data()
        self.trace = None
        self.engine = None


def analyze(trace: Trace, step_pattern: str | None = None) -> Analysis:
    from .engine.plan import make_plan
    from .engine.run import run
    from .trace.allocator import release_between_phases

    pattern = compile_step_pattern(step_pattern)
    plan = make_plan(trace, pattern)
    release_between_phases()  # (a no-op where the process keeps freed memory: see there)
    res = run(trace, plan)
    release_between_phases()
    result, tables = assemble(trace, res, pattern.pattern)
    return Analysis(trace, pattern.pattern, plan.steps, span=plan.span, excluded=res.excluded, engine=res,
                    result=result, tables=tables)


# ---------------------------------------------------------------------------------------------
# the page's captures (issue 51: before, the page replayed engine slices while it was built)
# ---------------------------------------------------------------------------------------------
#: the engine's own windows, in the order the page lists them
NAMED_WINDOWS = ("median", "worst", "middle")


def finding_ranges(result: dict) -> list[tuple[int, int]]:
    """``(start_ns, end_ns)`` of every finding range, in the page's order: findings ranked as
    the page shows them (:func:`nsysdoc.rules.verdict.rank_findings`), each one's
    ``time_ranges`` that have numeric ends (those the page lists: ``views.build._time_ranges``)."""
    from .fmt import is_num
    from .rules.verdict import rank_findings, steady_state_judgeable

    out = []
    for f in rank_findings(result.get("findings") or [], steady_state_judgeable(result or {})):
        for r in f.get("time_ranges") or []:
            if isinstance(r, dict) and is_num(r.get("start_ns")) and is_num(r.get("end_ns")):
                out.append((int(r["start_ns"]), int(r["end_ns"])))
    return out


def _own_strings(view) -> None:
    """The window's trace-like namespace keeps only the strings its rows name (kernel names, CUDA
    API and OS call names: what :mod:`nsysdoc.metrics.timeline` looks up), not the trace's whole
    table (a PyTorch trace's holds a string per operator call)."""
    from .trace.model import StringTable

    mini = view.trace
    parts = [np.asarray(mini.kernels[c], dtype=np.int64) for c in ("short_id", "name_id")]
    parts += [np.asarray(mini.runtime["name_id"], dtype=np.int64), np.asarray(mini.osrt["name_id"], dtype=np.int64)]
    ids = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    mini.strings = StringTable(ids, mini.strings.lookup(ids))


def _window(a: Analysis, name: str, cap, *, ranges: list[int] | None = None) -> TimelineWindow:
    timelines = getattr(a.engine.plan, "timelines", {}) or {}
    view = a.window_view(name) if cap is not None and not cap.overflow else None
    if view is not None:
        _own_strings(view)
    gtid, step = (timelines[name][2], timelines[name][3]) if name in timelines else (None, None)
    return TimelineWindow(int(cap.start), int(cap.end), data=view, n_ops=int(getattr(cap, "n_ops", 0) or 0),
                          host_tid=gtid, step=step, ranges=ranges)


def page_data(a: Analysis, ranges: list[tuple[int, int]] | None = None, *, replay: bool = True) -> PageData:
    """Capture what the page needs (:class:`~nsysdoc.pagedata.PageData`): the engine's step (or
    middle) windows; a window of its own around the finding ``ranges`` (default: the result's,
    :func:`finding_ranges`) no step window holds whole (:func:`nsysdoc.metrics.timeline.range_windows`,
    at most ``RANGE_MAX_OPS`` operations each, else kept without rows: the page then says so); the
    whole analysis window when it holds at most ``WHOLE_WINDOW_MAX_OPS`` GPU operations and no other
    window holds it. The slices that hold the new windows run again once, here; with ``replay=False``
    they don't, and the page data says it is not ``complete``."""
    from .metrics import timeline as tlm

    trace = a.trace
    page = PageData(source_tool=str(getattr(trace, "source_tool", "nsys") or "nsys"),
                    viewer_origin_ns=getattr(trace, "viewer_origin_ns", None), steps=a.steps)
    res = a.engine
    if res is None:
        return page
    for name in NAMED_WINDOWS:
        if name in res.captures:
            page.windows[name] = _window(a, name, res.captures[name])
    if not replay:
        page.complete = False
        return page
    covered = [(w.start_ns, w.end_ns) for w in page.windows.values() if w.data is not None]
    plan = tlm.range_windows(finding_ranges(a.to_dict()) if ranges is None else list(ranges), covered)
    if plan:
        caps = a.replay_windows({f"range{k}": (lo, hi) for k, (lo, hi, _) in enumerate(plan)},
                                 max_ops=tlm.RANGE_MAX_OPS)
        for k, (lo, hi, idx) in enumerate(plan):
            cap = caps.get(f"range{k}")
            if cap is not None and not cap.overflow and not cap.n_ops and not cap.gaps:
                continue  # nothing ran or waited there (a range outside the GPU's work): no window
            if cap is None:
                page.windows[f"range{k}"] = TimelineWindow(int(lo), int(hi), ranges=list(idx))
                continue
            page.windows[f"range{k}"] = w = _window(a, f"range{k}", cap, ranges=list(idx))
            if w.data is not None:
                covered.append((w.start_ns, w.end_ns))
    devices = a.to_dict().get("devices") or []
    n = sum((d.get("kernel_count") or 0) + (d.get("copy_count") or 0) for d in devices)
    lo, hi = res.window_range
    if n and n <= tlm.WHOLE_WINDOW_MAX_OPS and lo is not None and hi is not None and hi > lo \
            and not any(x <= lo and hi <= y for x, y in covered):
        cap = a.replay_windows({"window": (int(lo), int(hi))}, max_ops=4 * tlm.WHOLE_WINDOW_MAX_OPS).get("window")
        if cap is not None and not cap.overflow:
            page.windows["window"] = _window(a, "window", cap)
    return page
