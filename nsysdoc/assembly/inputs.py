"""What the assembly reads (issue 51): the trace, the engine's run and the step pattern, gathered
by :func:`nsysdoc.assembly.assemble` from its arguments into one plain object that every section
function takes as ``a``. Before, the sections read a half-built ``nsysdoc.analysis.Analysis`` (an
import circle); the assembly now imports nothing above it. The run reaches the assembly once, here:
the plan's steps and span and the run's excluded parts are read from it (before, ``assemble`` took
the plan beside the run that holds it, and ``Inputs`` a copy of the run's ``excluded``)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Inputs:
    """The inputs of one assembly (read-only; ``tables`` receives the whole tables the result
    shows only the top of, returned beside the result)."""

    trace: object
    #: the engine's run (:class:`nsysdoc.engine.run.Result`; its ``plan`` is the plan it ran)
    engine: object
    #: the step pattern the steps were found with (``capture.step_pattern``)
    step_pattern: str
    tables: dict = field(default_factory=dict)

    @property
    def steps(self):
        """The plan's steps (:class:`nsysdoc.metrics.steps.Steps`): window, markers, per-step table."""
        return self.engine.plan.steps

    @property
    def span(self) -> tuple:
        """GPU span (first to last GPU operation)."""
        return self.engine.plan.span

    @property
    def excluded(self) -> list:
        """The parts of the span left out of the analysis window."""
        return self.engine.excluded


__all__ = ["Inputs"]
