"""The severity policy of the built-in rules (``severity: by-impact``), in one place.

A finding's severity follows its impact: the time fixing its cause could recover, as a share of
the analysis window (wall-clock, per device: never a sum over GPUs).

* **critical** from ``CRITICAL_PCT`` % of the window,
* **warning** from ``WARNING_PCT`` %,
* **info** below.

A rule may cap it (``max_severity``: one-time set-up does not recur in a longer run, so it is at
most a warning). On a capture with too little GPU work to judge (``enough_gpu_work`` false) every
``by-impact`` rule is at most info (the capture-quality finding says why), except a rule of
``scope: host`` in a window of at least ``HOST_JUDGE_MIN_WINDOW_MS``: the GPU's own work is too
little to judge, but seconds of GPU idle time spent on host work are not. Team rules may keep
their own bands (a fixed severity or expressions) instead.
"""
from __future__ import annotations

CRITICAL_PCT = 15.0
WARNING_PCT = 3.0
from ..severity import SEVERITIES  # noqa: E402
#: Window length from which host-side rules keep their severity on a capture with little GPU work.
HOST_JUDGE_MIN_WINDOW_MS = 500.0


def by_impact(impact_pct: float | None) -> str:
    """Severity for an impact given as a percentage of the window (``None`` counts as 0)."""
    pct = impact_pct or 0.0
    if pct >= CRITICAL_PCT:
        return "critical"
    if pct >= WARNING_PCT:
        return "warning"
    return "info"


def cap(severity: str, ceiling: str | None) -> str:
    """``severity`` lowered to ``ceiling`` when above it."""
    if ceiling is None:
        return severity
    return min(severity, ceiling, key=SEVERITIES.index)
