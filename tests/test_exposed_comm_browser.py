"""Issue 49 in headless Chromium: following the exposed-NCCL finding's link highlights the
stretches where the all-reduce runs alone (``metrics.exposed_comm``), not the whole slowest step.

Scenario ``nccl_partly_overlapped`` (see its docstring; times by hand): the slowest step, step 2,
starts at a = T0 + 5 ms and lasts 3 ms; its all-reduce is alone on the GPU during
[a+305 µs, a+418 µs) and [a+468 µs, a+911.8 µs). Reuses the DevTools-protocol client of
``tests/test_report_browser.py`` (skips without Chromium, like it)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_report_browser import Browser, artifacts_dir, browser_binary  # noqa: F401  (fixture)

# issue 50: headless Chromium costs seconds per page; README's command leaves these to .ci/run
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    from nsysdoc.analysis import analyze
    from nsysdoc.rules import apply_rules, load_rules
    from nsysdoc.testing.scenarios import nccl_partly_overlapped
    from nsysdoc.trace import load_trace
    from nsysdoc.views import render_html

    d = tmp_path_factory.mktemp("nccl49page")
    a = analyze(load_trace(nccl_partly_overlapped().write(d / "nccl_partly_overlapped.sqlite"), cache=False))
    apply_rules(a.result, load_rules())
    out = d / "report.html"
    out.write_text(render_html(a), encoding="utf-8")
    return out


def test_exposed_nccl_link_highlights_the_exposed_stretches(page, browser_binary):  # noqa: F811
    """After the link, zoomed to the slowest step's window (3 ms from its start), exactly the
    finding's two highlights show: left edges at +305 and +468 µs, widths 113 and 443.8 µs, so
    (left1 - left0) / width0 = 163 / 113 and width1 / width0 = 443.8 / 113; and they are far
    narrower than the step (width0 = 113 / 3000 of the 3 ms view)."""
    url = page.resolve().as_uri()
    b = Browser(browser_binary)
    try:
        b.open(url, width=1400, height=1000)
        anchor = b.evaluate("document.querySelector('article.finding[data-rule=\"nccl-exposed\"]').id")
        b.evaluate("(() => { const a = document.querySelector('article.finding[data-rule=\"nccl-exposed\"] a.tl-link');"
                   " a.scrollIntoView(); a.click(); return true; })()")
        b.pump(0.2)
        shown0 = b.evaluate("document.getElementById('tl-live').nsysdocTimeline.view()")
        b.evaluate("(() => { document.getElementById('tl-live').nsysdocTimeline.setView(0, 3000000); return true; })()")
        b.pump(0.2)
        hl = b.timeline_highlights()
        track = b.evaluate("document.querySelector('#tl-live canvas').getBoundingClientRect().width")
        b.screenshot(artifacts_dir() / "page49-nccl-exposed-stretches.png")
        problems = b.problems(url)
    finally:
        b.close()
    assert problems == {"errors": [], "requests": [], "dialogs": []}, problems
    assert shown0[2] == "worst", shown0
    by = {r: (left, w) for r, left, w in hl}
    assert set(by) == {f"{anchor}-r0", f"{anchor}-r1"}, hl
    (l0, w0), (l1, w1) = by[f"{anchor}-r0"], by[f"{anchor}-r1"]
    assert (l1 - l0) / w0 == pytest.approx(163 / 113, rel=0.03)
    assert w1 / w0 == pytest.approx(443.8 / 113, rel=0.03)
    assert w0 + w1 < 0.25 * track, (w0, w1, track)  # 556.8 µs of a 3 ms view, not the whole step
