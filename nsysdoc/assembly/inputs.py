"""What the assembly reads (issue 51): the trace, the plan's steps, span and pattern, the engine's
run, gathered by :func:`nsysdoc.assembly.assemble` from its arguments into one plain object that
every section function takes as ``a``. Before, the sections read a half-built
``nsysdoc.analysis.Analysis`` (an import circle); the assembly now imports nothing above it."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Inputs:
    """The inputs of one assembly (read-only; ``tables`` receives the whole tables the result
    shows only the top of, returned beside the result)."""

    trace: object
    #: the plan's steps (:class:`nsysdoc.metrics.steps.Steps`): window, markers, per-step table
    steps: object
    #: the step pattern the steps were found with (``capture.step_pattern``)
    step_pattern: str
    #: the engine's run (:class:`nsysdoc.engine.run.Result`)
    engine: object
    #: GPU span (first to last GPU operation)
    span: tuple = (None, None)
    #: the parts of the span left out of the analysis window (the run's ``excluded``)
    excluded: list = field(default_factory=list)
    tables: dict = field(default_factory=dict)


__all__ = ["Inputs"]
