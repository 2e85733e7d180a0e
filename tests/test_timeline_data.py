"""The interactive timeline's data (nsysdoc/views/tldata.py, nsysdoc/metrics/timeline.py):
every operation of the shown steps when the budget allows, a hard byte cap otherwise (merged spans
keep every operation's count), and finding ranges mapped onto the windows."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nsysdoc.analysis import analyze, page_data
from nsysdoc.metrics import timeline as tlm
from nsysdoc.views.context import FindingView, TimeRange
from nsysdoc.views.tldata import timeline_data
from nsysdoc.trace import load_trace


def _analysis(path):
    return analyze(load_trace(path, cache=False))


def _data(a, findings=()):
    """timeline_data of the page data captured for these findings' ranges (the pipeline captures
    the result's: nsysdoc.analysis.page_data)."""
    page = page_data(a, ranges=[(r.start_ns, r.end_ns) for f in findings for r in f.time_ranges])
    return timeline_data(page, findings)


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
    data, _ = _data(a)
    # the median and worst steps, and the whole window as an overview (3,516 kernels: under 50,000)
    assert [w["id"] for w in data["windows"]] == ["median", "worst", "window"]
    whole = a.window_view("window")
    assert (whole.window == tuple(a.engine.window_range)) and len(whole.ops) >= 3516
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
    _, text = _data(a)
    assert json.loads(text) == {k: v for k, v in data.items() if k != "bytes"}, "what the page embeds"


def test_byte_cap_is_enforced_and_merged_spans_keep_their_counts(build, monkeypatch):
    a = _analysis(build("launch_bound_small_kernels", steps=3, kernels=5000))
    full, _ = _data(a)
    n_ops = len(_lane(full, "median", "stream 7")[0]["s"])
    assert n_ops >= 5000
    per_span = full["bytes"] / full["spans"]
    assert per_span < 20, f"{per_span:.1f} bytes per span"
    monkeypatch.setattr(tlm, "DETAIL_MAX_BYTES", 120_000)
    small, _ = _data(a)
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

    inside, partly = tr(w0 + 1000, w0 + 5000), tr(w0 - 10_000_000_000, w1)
    outside = tr(w1 + 10**12, w1 + 10**12 + 10)  # 1,000 s after the capture: nothing there
    f = _finding([inside, partly, outside])
    data, _ = _data(a, [f])
    by_id = {r["id"]: r for r in data["ranges"]}
    assert inside.timeline == "finding-1-r0" and inside.timeline_note == ""
    assert by_id["finding-1-r0"]["w"] == "worst"
    assert (by_id["finding-1-r0"]["s"], by_id["finding-1-r0"]["e"]) == (1000, 5000)
    # a range the step windows hold only in part gets a window of its own, padded, holding it whole
    assert partly.timeline == "finding-1-r1" and partly.timeline_note == ""
    win = {w["id"]: w for w in data["windows"]}[by_id["finding-1-r1"]["w"]]
    assert win["title"] == "Around finding 1" + win["title"][len("Around finding 1"):]
    assert by_id["finding-1-r1"]["s"] > 0 and by_id["finding-1-r1"]["e"] < win["dur"]
    # a range where nothing ran gets no window and no link
    assert outside.timeline == "" and len(data["ranges"]) == 2
    # the padded window of the second range holds the whole analysis window: no overview added
    assert "window" not in {w["id"] for w in data["windows"]}


def test_a_step_window_is_preferred_to_the_overview(build):
    a = _analysis(build("sample_training"))
    w0, w1 = a.window_view("worst").window
    r = TimeRange(label="x", start_ns=w0 + 1000, end_ns=w0 + 5000, start_s="", end_s="", duration="", device="")
    data, _ = _data(a, [_finding([r])])
    # the overview holds the range too, but the step window (never merged) is preferred
    assert "window" in {w["id"] for w in data["windows"]}
    assert [x["w"] for x in data["ranges"]] == ["worst"]


def test_range_windows_are_padded_merged_and_capped():
    ms = 1_000_000
    covered = [(0, 10 * ms)]
    ranges = [(2 * ms, 3 * ms),            # inside the covered window: nothing to add
              (20 * ms, 24 * ms),          # pad max(25 % of 4 ms, 0.1 ms) = 1 ms: [19, 25] ms
              (24_500_000, 24_600_000),    # pad 0.1 ms: [24.4, 24.7] ms overlaps the last: merged
              (9 * ms, 11 * ms),           # only partly covered: pad 0.5 ms -> [8.5, 11.5] ms
              (50 * ms, 50 * ms)]          # a point: [49.9, 50.1] ms (one ns long, then padded)
    got = tlm.range_windows(ranges, covered)
    assert got == [(19 * ms, 25 * ms, [1, 2]), (8_500_000, 11_500_000, [3]), (49_900_000, 50_100_001, [4])]
    assert tlm.range_windows(ranges, covered, max_windows=1) == [(19 * ms, 25 * ms, [1, 2])]


def test_a_range_with_too_many_operations_gets_a_note_not_a_link(build, monkeypatch):
    a = _analysis(build("sample_training"))
    st = a.steps.table  # steps 8 to 10: neither the median (4) nor the worst (2) step
    s0, s1 = int(np.asarray(st["start_ns"])[8]), int(np.asarray(st["end_ns"])[10])
    r = TimeRange(label="x", start_ns=s0, end_ns=s1, start_s="0.5", end_s="1.2", duration="", device="")
    monkeypatch.setattr(tlm, "RANGE_MAX_OPS", 100)
    monkeypatch.setattr(tlm, "WHOLE_WINDOW_MAX_OPS", 0)  # no overview window to fall back on
    _data(a, [_finding([r])])
    assert r.timeline == ""
    assert r.timeline_note == ("more than 100 operations around it: too many for this page; export it with "
                               "-f perfetto --range 0.5:1.2")


@pytest.mark.parametrize("scenario", ["ddp_nccl", "no_step_markers"])
def test_other_scenarios_have_data(build, scenario):
    from nsysdoc.testing.scenarios import SCENARIOS

    if scenario not in SCENARIOS:
        pytest.skip(f"no scenario {scenario}")
    res = _data(_analysis(build(scenario)))
    assert res is not None
    data, text = res
    assert len(text.encode()) == data["bytes"] and data["spans"] > 0
    assert data["bytes"] <= tlm.DETAIL_MAX_BYTES


@pytest.mark.parametrize("scenario", ["sample_training", "sync_storm", "pageable_h2d", "where_tiny_kernels_and_item"])
def test_every_finding_range_has_a_link_on_the_timeline(build, scenario):
    """Each time range a finding cites opens on the timeline: in a step window that holds it whole,
    else in a window of its own (before, ranges outside the median and worst steps had no link)."""
    import re

    from nsysdoc.rules import apply_rules, load_rules
    from nsysdoc.views import render_html

    a = _analysis(build(scenario))
    apply_rules(a.to_dict(), load_rules())
    page = render_html(a)
    n_ranges = sum(len(f.get("time_ranges") or []) for f in a.to_dict()["findings"])
    links = re.findall(r'data-tl-range="([^"]+)"', page)
    assert n_ranges > 0 and len(set(links)) == n_ranges, (scenario, n_ranges, links)
    data = json.loads(re.search(r'<script type="application/json" id="tl-data">(.*?)</script>', page, re.S).group(1))
    assert {r["id"] for r in data["ranges"]} == set(links)


def test_a_capture_sure_to_overflow_replays_no_slice(build, monkeypatch):
    """Issue 50: a window the slices' own operation counts already put over ``max_ops`` (a finding
    range spanning the capture) is dropped without replaying a slice, as replaying would drop it;
    one that may fit is replayed as before."""
    from nsysdoc.engine import run

    a = _analysis(build("sample_training"))
    res = a.engine
    assert len(res.slice_ops) == len(res.spans)
    total = sum(k for k, _, _ in res.slice_ops)
    lo, hi = -(1 << 62), 1 << 62  # the whole capture
    replayed = []
    real = run.phase_a
    monkeypatch.setattr(run, "phase_a", lambda *x, **k: replayed.append(1) or real(*x, **k))
    caps = run.capture_windows(res, {"all": (lo, hi)}, max_ops=total - 1)
    assert caps["all"].overflow and caps["all"].n_ops == total and not replayed
    assert "all" not in res.captures
    # the same window with room for every operation: replayed, nothing dropped
    caps = run.capture_windows(res, {"all2": (lo, hi)}, max_ops=total)
    assert not caps["all2"].overflow and caps["all2"].n_ops == total and replayed
