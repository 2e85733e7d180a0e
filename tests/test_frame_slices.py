"""The frame's code paths read in slices (issue 44): markers set aside, step-like ranges, one-step
and period inference, phase and loop framing and inferred steps dropped by a trimmed window give
the same JSON whatever the slice size (NSYSDOC_SLICE_ROWS=7 cuts every step, gap and operation
run across slice edges), as tests/test_engine_slices.py checks for the golden scenarios."""
from __future__ import annotations

import json

import pytest

from nsysdoc.testing.frame_scenarios import FRAME_SCENARIOS

from . import test_frame_review as review
from .conftest import diagnose_path

CASES = {**{f"frame.{k}": v for k, v in FRAME_SCENARIOS.items()},
         **{f"review.{f.__name__}": f for f in (
             review.host_ahead_then_a_short_last_step, review.weight_upload_then_profiler_steps,
             review.per_iteration_loop_named_range, review.train_and_eval_steps,
             review.worker_thread_iteration_ranges, review.markers_in_a_process_without_gpu_work,
             review.steps_without_gpu_work_between_steps_with_it, review.partly_marked_run)}}


def _json(path, monkeypatch, rows: int | None) -> str:
    if rows is None:
        monkeypatch.delenv("NSYSDOC_SLICE_ROWS", raising=False)
    else:
        monkeypatch.setenv("NSYSDOC_SLICE_ROWS", str(rows))
    r = diagnose_path(path)
    r.get("source", {}).pop("path", None)
    return json.dumps(r, sort_keys=True)


@pytest.mark.slow  # issue 50: every frame scenario in 7-row slices (6.8 s of CPU); .ci/run runs it
@pytest.mark.parametrize("name", sorted(CASES))
def test_frame_paths_give_the_same_json_in_slices_of_seven_rows(name, tmp_path, monkeypatch):
    path = CASES[name]().write(tmp_path / "c.sqlite")
    whole = _json(path, monkeypatch, None)
    sliced = _json(path, monkeypatch, 7)
    assert sliced == whole
