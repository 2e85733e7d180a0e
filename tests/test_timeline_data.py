"""The interactive timeline's data (nsysdoc/views/tldata.py, nsysdoc/metrics/timeline.py):
every operation of the shown steps when the budget allows, a hard byte cap otherwise (merged spans
keep every operation's count), and finding ranges mapped onto the windows."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nsysdoc.analysis import analyze
from nsysdoc.metrics import timeline as tlm
from nsysdoc.views.context import FindingView, TimeRange
from nsysdoc.views.tldata import timeline_data
from nsysdoc.trace import load_trace


def _analysis(path):
    return analyze(load_trace(path, cache=False))


def _lane(data, window, label):
    w = next(w for w in data["windows"] if w["id"] == window)
    return [ln for ln in w["lanes"] if ln.get("label") == label]


def test_fill_cap_gives_small_lanes_all_their_spans():
    assert tlm.fill_cap([10, 20, 1000], 500) == 470
    assert tlm.fill_cap([300, 300], 1000) == 300
    assert tlm.fill_cap([1, 2], 100) == tlm.MIN_SPANS_PER_LANE
    assert tlm.fill_cap([], 100) == tlm.MIN_SPANS_PER_LANE


def test_every_operation_of_the_step_is_in_the_data(build):
    a = _analysis(build("sample_training"))
    data, _ = timeline_data(a, [])
    assert [w["id"] for w in data["windows"]] == ["median", "worst"]
    view = a.window_view("median")
    w0, w1 = view.window
    in_window = int(((view.ops.start_ns < w1) & (view.ops.end_ns > w0)).sum())
    gpu = sum(len(ln["s"]) for ln in _lane(data, "median", "stream 7"))
    assert gpu == in_window > 100
    assert not any("c" in ln for w in data["windows"] for ln in w["lanes"]), "nothing merged"
    # starts are deltas: they decode to sorted offsets inside the window
    ln = _lane(data, "median", "stream 7")[0]
    starts = np.cumsum(ln["s"])
    assert starts[0] >= 0 and np.all(np.diff(starts) >= 0) and starts[-1] + ln["d"][-1] <= data["windows"][0]["dur"]
    assert 0 < data["bytes"] <= tlm.DETAIL_MAX_BYTES
    _, text = timeline_data(a, [])
    assert json.loads(text) == {k: v for k, v in data.items() if k != "bytes"}, "what the page embeds"


def test_byte_cap_is_enforced_and_merged_spans_keep_their_counts(build, monkeypatch):
    a = _analysis(build("launch_bound_small_kernels", steps=3, kernels=5000))
    full, _ = timeline_data(a, [])
    n_ops = len(_lane(full, "median", "stream 7")[0]["s"])
    assert n_ops >= 5000
    per_span = full["bytes"] / full["spans"]
    assert per_span < 20, f"{per_span:.1f} bytes per span"
    monkeypatch.setattr(tlm, "DETAIL_MAX_BYTES", 120_000)
    small, _ = timeline_data(a, [])
    assert small["bytes"] <= 120_000 < full["bytes"]
    lane = _lane(small, "median", "stream 7")[0]
    assert "c" in lane and len(lane["s"]) < n_ops
    assert sum(lane["c"]) == n_ops, "merged spans stand for every operation"
    assert all(0 <= b <= d for b, d in zip(lane["b"], lane["d"]))


def _finding(ranges):
    return FindingView(rank=1, anchor="finding-1", rule="r", severity="info", category="", title="T", message="",
                       impact="", impact_ms=None, impact_ms_per_step=None, impact_pct=None, evidence=None, verify="",
                       fix="", references=[], time_ranges=ranges, source="builtin", replaces_builtin=False,
                       where=[], where_note="")


def test_finding_ranges_map_onto_windows(build):
    a = _analysis(build("sample_training"))
    v = a.window_view("worst")
    w0, w1 = v.window

    def tr(s, e):
        return TimeRange(label="x", start_ns=s, end_ns=e, start_s="", end_s="", duration="", device="")

    inside, partly, outside = tr(w0 + 1000, w0 + 5000), tr(w0 - 10_000_000_000, w1), tr(10, 20)
    f = _finding([inside, partly, outside])
    data, _ = timeline_data(a, [f])
    by_id = {r["id"]: r for r in data["ranges"]}
    assert inside.timeline == "finding-1-r0" and inside.timeline_note == ""
    assert by_id["finding-1-r0"]["w"] == "worst"
    assert (by_id["finding-1-r0"]["s"], by_id["finding-1-r0"]["e"]) == (1000, 5000)
    assert partly.timeline and partly.timeline_note.startswith("the part in the")
    assert outside.timeline == "" and len(data["ranges"]) == 2


@pytest.mark.parametrize("scenario", ["ddp_nccl", "no_step_markers"])
def test_other_scenarios_have_data(build, scenario):
    from nsysdoc.testing.scenarios import SCENARIOS

    if scenario not in SCENARIOS:
        pytest.skip(f"no scenario {scenario}")
    res = timeline_data(_analysis(build(scenario)), [])
    assert res is not None
    data, text = res
    assert len(text.encode()) == data["bytes"] and data["spans"] > 0
    assert data["bytes"] <= tlm.DETAIL_MAX_BYTES
