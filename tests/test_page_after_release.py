"""The page is a function of the result and of the page data captured beside it (issue 51).

Before, building the page replayed engine slices (``views/tldata.py`` called
``analysis.capture_windows``: twice, a third time when the page was too large) and read
``analysis.trace``; a ``Report`` kept the trace, its block store and the engine state alive. Now
the pipeline captures the page's windows once after the rules ran (``nsysdoc.analysis.page_data``)
and a ``Report`` lets the rest go; the accessors that need rows read the capture again.
"""
from __future__ import annotations

import gc
import re
import weakref

import pytest

import nsysdoc
from nsysdoc import pipeline
from nsysdoc.api import Report, _reopen
from nsysdoc.views import render_html


def _no_engine(monkeypatch):
    """Make every way back into the engine fail: the window captures, the slices, the window rows."""
    import nsysdoc.analysis as an
    import nsysdoc.engine.run as run
    import nsysdoc.engine.slices as slices
    import nsysdoc.engine.view as view

    def boom(*a, **k):
        raise AssertionError("the page ran the engine")

    for mod, name in ((run, "capture_windows"), (run, "phase_a"), (slices, "phase_a"), (view, "window_view"),
                      (an, "page_data")):
        monkeypatch.setattr(mod, name, boom)


def _diagnose(path):
    return pipeline.diagnose(path, pipeline.load_ruleset(no_config=True), cache=False)


@pytest.mark.parametrize("scenario", ["sync_storm", "pageable_h2d"])
def test_a_released_report_renders_the_same_page_from_the_result_alone(build, monkeypatch, scenario):
    """sync_storm and pageable_h2d: findings whose ranges lie outside the median and worst steps,
    so the page holds windows of their own around them (captured with the page data), as well as
    the step windows; the page of a report whose trace, block store and engine state are gone is
    byte for byte the page made while they were at hand."""
    path = build(scenario)
    kept = render_html(_diagnose(path))  # everything at hand (the page data captured on the way)
    a = _diagnose(path)
    refs = [weakref.ref(x) for x in (a.trace, a.trace.store, a.engine, a.engine.ctx)]
    rep = Report(a, cache=False, reopen=_reopen(str(path), a.step_pattern, a.to_dict(), cache=False, cache_dir=None))
    gc.collect()
    # ``a`` is still held here: what it kept (and nothing else, the page data included) is let go
    assert [r() for r in refs] == [None] * 4, "the trace, its store and the engine state are let go"
    assert rep._analysis is None and a.page is rep._page and a.result is rep.result
    _no_engine(monkeypatch)
    page = rep.to_html()
    assert page == kept
    # the finding ranges outside the step windows have windows of their own ("Around finding ...")
    assert re.search(r'"id":"range0"', page), "a window captured for a finding range"
    assert rep.to_html(worst_step=True) != page  # the worst step first: still no engine
    assert rep.to_markdown() and rep.summary_text()


def test_the_page_data_holds_only_the_strings_its_windows_name(build):
    """A window's rows keep the strings they name (kernels, CUDA API and OS calls), not the
    trace's whole string table (a PyTorch trace's holds a string per operator call)."""
    a = _diagnose(build("sync_storm"))
    page = a.page_data()
    assert page is a.page_data(), "captured once"
    view = page.window_view("median")
    # hand count: the median step's window names its kernels (short and full names), the CUDA API
    # calls and the OS calls of its rows; the trace's table has every string of the capture
    want = set()
    for col in ("short_id", "name_id"):
        want |= set(view.trace.kernels[col].tolist())
    want |= set(view.trace.runtime["name_id"].tolist()) | set(view.trace.osrt["name_id"].tolist())
    assert set(view.trace.strings.ids.tolist()) == want
    assert len(view.trace.strings) < len(a.trace.strings)
    full = a.trace.strings.lookup(sorted(want))
    assert list(view.trace.strings.lookup(sorted(want))) == list(full)


def test_rows_after_release_are_read_again_and_equal_those_of_a_kept_report(build):
    """gpu_ops, all_gaps and memory after the release read the capture again (docs/api.md): the
    same rows as a report that kept its analysis (made without ``reopen``)."""
    path = build("pageable_h2d")
    released = nsysdoc.report(str(path), no_config=True, cache=False)
    kept = Report(_diagnose(path), cache=False)
    assert released._analysis is None and kept._analysis is not None
    assert released.gpu_ops.equals(kept.gpu_ops) and len(kept.gpu_ops) > 0
    assert released.all_gaps().equals(kept.all_gaps())
    assert released.memory.equals(kept.memory)
    assert released.to_json() == kept.to_json()
    assert "".join(released.perfetto_chunks()) == "".join(kept.perfetto_chunks())
    assert released.result is released._result and released.result["findings"]


def test_a_json_only_report_replays_no_slice_and_its_page_is_the_same_later(build, monkeypatch):
    """sync_storm: its findings' ranges lie outside the step windows, so the full page data replays
    slices for windows of their own. A report made for JSON only (``page_windows=False``, what
    ``report -f json`` asks, issue 50) replays none — the JSON is the same — and if its page is asked
    for afterwards, the page data is completed then (the capture read again) and the page is byte
    for byte the one made with the windows captured up front."""
    from nsysdoc.api import _report
    import nsysdoc.engine.run as run

    path = build("sync_storm")
    ruleset = pipeline.load_ruleset(no_config=True)
    full = _report(path, ruleset, cache=False)
    assert full._page.complete and any(k.startswith("range") for k in full._page.windows)
    calls = []
    real = run.capture_windows
    monkeypatch.setattr(run, "capture_windows", lambda *a, **k: calls.append(1) or real(*a, **k))
    lean = _report(path, ruleset, cache=False, page_windows=False)
    assert calls == [] and not lean._page.complete
    assert not any(k.startswith("range") for k in lean._page.windows)
    assert lean.to_json() == full.to_json()
    assert lean.summary_text() == full.summary_text()
    assert lean.to_html() == full.to_html()
    assert lean._page.complete and calls, "the page completed its data when asked for"
