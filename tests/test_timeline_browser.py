"""The interactive timeline (issue 32) in headless Chromium, at 1400 and 900 px.

Reuses the DevTools-protocol client of ``tests/test_report_browser.py``. For a page made with the
built-in rules from the sample capture: the canvas timeline replaces the static SVG; zoomed out it
merges neighbours into blocks; zooming into the step until no block is left draws every operation
of the view one by one (the count drawn equals the count of spans in the data overlapping the view);
a finding's "show on the timeline" link switches to its window, zooms to its range, scrolls the
timeline into view and places the highlight over it; no horizontal page scroll; no console error,
no network request. Screenshots: ``artifacts/timeline-<width>-step.png`` (zoomed into the step) and
``artifacts/timeline-<width>-finding.png`` (after following a finding's link).
"""
from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.test_report_browser import Browser, artifacts_dir, browser_binary  # noqa: F401  (fixture)

# issue 50: headless Chromium costs seconds per page; README's command leaves these to .ci/run
pytestmark = pytest.mark.slow

STATE_JS = r"""
(() => {
  const live = document.getElementById('tl-live'), c = live && live.querySelector('.tl-canvas');
  const vis = el => { if (!el || el.hidden) return false; const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const view = live && live.nsysdocTimeline ? live.nsysdocTimeline.view() : null;
  // spans of the data overlapping the view, over every lane of the shown window
  let expected = 0, gpu = 0;
  if (view) {
    const data = JSON.parse(document.getElementById('tl-data').textContent);
    const w = data.windows.find(x => x.id === view[2]);
    let gpuLane = false;
    for (const ln of w.lanes) {
      if (ln.h) { gpuLane = ln.h.startsWith('GPU'); continue; }
      let t = 0;
      for (let i = 0; i < ln.s.length; i++) {
        t += ln.s[i];
        if (t < view[1] && t + ln.d[i] > view[0]) { expected++; if (gpuLane && !ln.gap) gpu++; }
      }
    }
  }
  const hl = live && live.querySelector('.tl-highlight');
  const hr = hl && !hl.hidden ? hl.getBoundingClientRect() : null, cr = c ? c.getBoundingClientRect() : null;
  return {
    js: document.documentElement.getAttribute('data-js'), live: vis(live), canvas: vis(c),
    staticShown: [...document.querySelectorAll('.tl-static')].some(vis),
    ops: c ? Number(c.dataset.ops) : -1, blocks: c ? Number(c.dataset.blocks) : -1, view, expected, gpu,
    window: live ? live.dataset.window : null,
    highlight: hr ? {range: hl.dataset.range, left: hr.left, right: hr.right, top: hr.top} : null,
    canvasRect: cr ? {left: cr.left, right: cr.right, top: cr.top} : null,
    liveTop: live ? live.getBoundingClientRect().top : null,
    pageWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth,
    links: [...document.querySelectorAll('a.tl-link')].map(a => a.dataset.tlRange),
  };
})()
"""


def _page(tmp_path) -> Path:
    from nsysdoc.analysis import analyze
    from nsysdoc.views import render_html
    from nsysdoc.rules import apply_rules
    from nsysdoc.rules.evaluate import default_ruleset
    from nsysdoc.testing.scenarios import sample_training
    from nsysdoc.trace import load_trace

    a = analyze(load_trace(sample_training().write(tmp_path / "sample.sqlite"), cache=False))
    apply_rules(a.to_dict(), default_ruleset(use_config=False))
    page = tmp_path / "report.html"
    page.write_text(render_html(a), encoding="utf-8")
    return page


def _shot(b: Browser, path: Path) -> None:
    """The interactive timeline only (scrolled to the top first: the sticky page head stays out)."""
    b.evaluate("window.scrollTo(0, 0); true")
    r = b.evaluate("(() => { const r = document.getElementById('tl-live').getBoundingClientRect();"
                   " return [r.x, r.y + window.scrollY, r.width, r.height]; })()")
    data = b.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                             "clip": {"x": r[0], "y": r[1], "width": r[2], "height": r[3], "scale": 1}})
    path.write_bytes(base64.b64decode(data["data"]))


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    return _page(tmp_path_factory.mktemp("timeline"))


@pytest.mark.parametrize("width", [1400, 900])
def test_zoom_into_the_step_draws_single_operations(page, browser_binary, width):  # noqa: F811
    url = page.resolve().as_uri()
    b = Browser(browser_binary)
    try:
        b.open(url, width=width, height=1000)
        whole = b.evaluate(STATE_JS)
        # zoom in (the page's own button) around the middle of the step until nothing is merged
        b.evaluate("(() => { const t = document.getElementById('tl-live').nsysdocTimeline, v = t.view();"
                   " t.setView(v[1] * 0.66, v[1] * 0.74); return true; })()")
        zoomed = None
        for _ in range(40):
            zoomed = b.evaluate(STATE_JS)
            if zoomed["blocks"] == 0:
                break
            b.evaluate("document.querySelector('#tl-live [data-zoom=in]').click(); true")
        _shot(b, artifacts_dir() / f"timeline-{width}-step.png")
        b.evaluate("document.querySelector('#tl-live [data-zoom=reset]').click(); true")
        reset = b.evaluate(STATE_JS)
        b.pump(0.3)
        problems = b.problems(url)
    finally:
        b.close()
    assert problems == {"errors": [], "requests": [], "dialogs": []}, problems
    assert whole["js"] == "ready" and whole["live"] and whole["canvas"]
    assert not whole["staticShown"], "the static SVG is the no-script fallback only"
    assert whole["pageWidth"] <= whole["clientWidth"], whole
    assert whole["blocks"] > 0, "zoomed out, neighbours narrower than a pixel are merged"
    assert whole["ops"] + whole["blocks"] < whole["expected"]
    # zoomed into the step: every operation of the view is drawn on its own, kernels among them
    assert zoomed["blocks"] == 0, zoomed
    assert zoomed["ops"] == zoomed["expected"] > 0, zoomed
    assert zoomed["gpu"] >= 3, zoomed
    assert zoomed["view"][1] - zoomed["view"][0] < (whole["view"][1] - whole["view"][0]) / 4
    assert zoomed["pageWidth"] <= zoomed["clientWidth"]
    assert reset["view"][:2] == whole["view"][:2]


@pytest.mark.parametrize("width", [1400, 900])
def test_finding_link_zooms_to_and_highlights_its_range(page, browser_binary, width):  # noqa: F811
    url = page.resolve().as_uri()
    b = Browser(browser_binary)
    try:
        b.open(url, width=width, height=1000)
        before = b.evaluate(STATE_JS)
        assert before["links"], "the sample's findings have time ranges inside the shown steps"
        rid = before["links"][0]
        b.evaluate(f"document.querySelector('a.tl-link[data-tl-range=\"{rid}\"]').scrollIntoView(); true")
        b.evaluate(f"document.querySelector('a.tl-link[data-tl-range=\"{rid}\"]').click(); true")
        b.pump(0.3)
        after = b.evaluate(STATE_JS)
        data_range = b.evaluate(f"JSON.parse(document.getElementById('tl-data').textContent).ranges"
                                f".find(r => r.id === '{rid}')")
        _shot(b, artifacts_dir() / f"timeline-{width}-finding.png")
        problems = b.problems(url)
    finally:
        b.close()
    assert problems == {"errors": [], "requests": [], "dialogs": []}, problems
    # scrolled: the timeline's top is in the viewport, below the sticky page head
    assert 40 <= after["liveTop"] <= 200, after["liveTop"]
    assert after["window"] == data_range["w"]
    hl = after["highlight"]
    assert hl is not None and hl["range"] == rid
    assert after["canvasRect"]["left"] <= hl["left"] < hl["right"] <= after["canvasRect"]["right"] + 1
    # the view frames the range with a margin
    v0, v1 = after["view"][:2]
    assert v0 <= data_range["s"] and data_range["e"] <= v1
    assert (data_range["e"] - data_range["s"]) / (v1 - v0) > 0.5
    assert after["pageWidth"] <= after["clientWidth"]
