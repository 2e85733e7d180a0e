"""Analyse a capture: the library entry point behind ``nsysdoc report``.

``analyze(trace)`` plans the work (``nsysdoc.engine.plan``: steps, windows, attribution), runs the
engine (``nsysdoc.engine.run``: the capture read in time slices, so memory does not grow with the
capture's length) and assembles the result (``nsysdoc.assembly``: the JSON contract,
``docs/json.md``). It returns an :class:`Analysis` whose ``to_dict()`` is that result; the rules
fill its findings (``nsysdoc.rules.apply_rules``). The timeline windows (median and worst step, or
the middle of the capture) are kept for renderers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .assembly import CONTRACT, assemble
from .metrics.steps import Steps, compile_step_pattern
from .trace import Trace

__all__ = ["Analysis", "analyze", "CONTRACT"]


@dataclass
class Analysis:
    trace: Trace
    step_pattern: str
    steps: Steps
    #: GPU span (first to last GPU operation) and the parts of it left out of the analysis window
    span: tuple[int | None, int | None] = (None, None)
    excluded: list[dict] = field(default_factory=list)
    result: dict = field(default_factory=dict)
    #: the engine's run (totals and timeline captures), for renderers
    engine: object = None
    #: whole tables the result shows only the top of (``kernels``: every kernel name in the
    #: window, as ``nsysdoc.metrics.kernels.kernel_tables`` builds it), for the Python API
    tables: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return self.result

    def capture_windows(self, windows: dict[str, tuple[int, int]], max_ops: int | None = None) -> dict:
        """Capture more timeline windows ``{name: (start_ns, end_ns)}`` (replaying only the slices
        that hold them); each is then read with :meth:`window_view`. Returns the engine's captures
        by name (``overflow`` set on those dropped for holding more than ``max_ops`` operations)."""
        if self.engine is None:
            return {}
        from .engine.run import capture_windows

        return capture_windows(self.engine, windows, max_ops=max_ops)

    def window_view(self, name: str):
        """The captured data of timeline window ``name`` ("median", "worst" or "middle"), as the
        object :func:`nsysdoc.metrics.timeline.window_timeline` reads, or None."""
        from .engine.view import window_view

        return window_view(self, name)


def analyze(trace: Trace, step_pattern: str | None = None) -> Analysis:
    from .engine.plan import make_plan
    from .engine.run import run

    pattern = compile_step_pattern(step_pattern)
    plan = make_plan(trace, pattern)
    res = run(trace, plan)
    a = Analysis(trace, pattern.pattern, plan.steps, span=plan.span, excluded=res.excluded, engine=res)
    a.result = assemble(a, res)
    return a
