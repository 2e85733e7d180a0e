"""Edge cases of the idle-gap cause rules (docs/glossary.md, "Idle gaps and their causes")."""
from __future__ import annotations

import pytest

from nsysdoc.testing import Capture

from .conftest import analyze_path


def test_call_starting_exactly_when_gpu_goes_idle_is_launch_latency(tmp_path):
    cap = Capture()
    t = cap.process(pid=1).thread()
    with t.range("step_0"):
        first = t.launch("k", us=10, api_us=5)   # ends at g0
        t.at(first.end)                           # the next call starts exactly at g0: a == g0
        second = t.launch("k", us=10, api_us=5)   # starts at a + 3 us + 2 us -> 5 us gap
    d = analyze_path(cap.write(tmp_path / "a_eq_g0.sqlite"))
    gap = second.start - first.end
    assert gap == 5_000
    by = d["metrics"]["idle_gaps"]["idle_ms_by_cause"]
    assert by["launch"] == pytest.approx(gap / 1e6 + d["steps"][0]["idle_before_first_op_ms"], abs=1e-4)
    assert by["host"] == 0
