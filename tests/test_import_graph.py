"""The house's figures from ``tools/import_graph.py`` (issue 51): every module on a floor, no
import circle, no import from a lower floor to a higher one, no module over 1,000 lines — except
the allowances below, each with its reason, which may only shrink: a new circle, upward arrow or
oversize module fails here.

The tool is checked first on a five-module package made here, whose figures are counted by hand.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("import_graph", REPO / "tools" / "import_graph.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: no allowance left: issue 51's two parts removed the analysis <-> assembly circle (assemble() takes
#: its inputs as arguments) and every upward arrow; a new one fails here.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}
ALLOWED_CIRCLE: set[str] = set()
#: modules over 1,000 lines: none left (issue 51 split the eight: kineto, the SQLite reader,
#: engine.attribute, engine.slices, rules.evaluate, views.build, views.perfetto, api); a new one fails here
KNOWN_OVERSIZE: dict[str, str] = {}


def test_the_tool_counts_a_hand_made_package(tmp_path):
    """pkg (face) imports nothing; pkg.low imports pkg.high inside a function (lazy: it counts);
    pkg.high imports pkg.low at the top; pkg.sub.a imports pkg.high under TYPE_CHECKING; pkg.sub is
    empty. Floors: base = pkg.low, pkg.sub; top = pkg.high, pkg. By hand: 5 modules, 3 arrows (1
    typing), 1 circle {high, low} (also at run time), 2 upward arrows (low->high, sub.a->high, the
    second typing), and with a 3-line limit one oversize module: pkg.low (5 lines)."""
    g = _tool()
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("X = 1\n\n\ndef f():\n    from . import high\n")
    (pkg / "high.py").write_text("from .low import X\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..high import X\n")
    layers = (("base", ("pkg.low", "pkg.sub")), ("top", ("pkg.high", "pkg")))
    f = g.figures(pkg, layers, max_lines=3)
    assert f["modules"] == 5
    assert (f["arrows"], f["typing_arrows"]) == (3, 1)
    assert f["circles"] == [["pkg.high", "pkg.low"]] == f["runtime_circles"]
    assert [(u["from"], u["to"], u["typing"]) for u in f["upward"]] == [
        ("pkg.low", "pkg.high", False), ("pkg.sub.a", "pkg.high", True)]
    assert f["oversize"] == [["pkg.low", 5]]
    assert f["unlayered"] == []


def test_every_module_stands_on_a_floor():
    assert _tool().figures()["unlayered"] == []


def test_no_circle():
    circles = _tool().figures()["circles"]
    assert all(set(c) <= ALLOWED_CIRCLE for c in circles), circles
    assert circles == []


def test_no_upward_arrow_but_the_allowed_ones():
    up = {(u["from"], u["to"]) for u in _tool().figures()["upward"]}
    assert up <= set(ALLOWED_UPWARD), sorted(up - set(ALLOWED_UPWARD))


def test_no_new_module_over_1000_lines():
    over = {m for m, _ in _tool().figures()["oversize"]}
    assert over <= set(KNOWN_OVERSIZE), sorted(over - set(KNOWN_OVERSIZE))


# issue 51, the views part: a rule the floors alone do not say. The views stand above the engine,
# the readers and the analysis, so importing them is no upward arrow; still the page must be a
# function of the result and its page data, and the Perfetto export a formatter of the rows
# assembly.perfetto_rows reads. tools/import_graph.py: FORBIDDEN, FORBIDDEN_ALLOWED.
def test_the_tool_finds_forbidden_arrows_in_a_hand_made_package(tmp_path):
    """pkg.views.page imports pkg.engine.run (forbidden), pkg.views.cells imports pkg.trace.reader
    (forbidden but allowed, with a reason) and pkg.rows (allowed: not under a forbidden prefix);
    pkg.rows imports pkg.engine.run (not a view: no rule). By hand: 2 forbidden arrows, 1 of them
    allowed; the allowance covers modules under the prefix it names (pkg.trace.reader under
    pkg.trace)."""
    g = _tool()
    pkg = tmp_path / "pkg"
    for d in ("views", "engine", "trace"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "engine" / "run.py").write_text("X = 1\n")
    (pkg / "trace" / "reader.py").write_text("Y = 1\n")
    (pkg / "rows.py").write_text("from .engine.run import X\n")
    (pkg / "views" / "page.py").write_text("from ..engine.run import X\n")
    (pkg / "views" / "cells.py").write_text("def f():\n    from ..trace.reader import Y\n    from .. import rows\n")
    rules = (("views render only", ("pkg.views",), ("pkg.engine", "pkg.trace")),)
    allowed = {("pkg.views.cells", "pkg.trace"): "a pure string function"}
    layers = (("low", ("pkg.engine", "pkg.trace", "pkg.rows")), ("top", ("pkg",)))
    f = g.figures(pkg, layers, rules=rules, allowed=allowed)
    assert [(x["from"], x["to"], x["allowed"]) for x in f["forbidden"]] == [
        ("pkg.views.cells", "pkg.trace.reader", "a pure string function"),
        ("pkg.views.page", "pkg.engine.run", "")]
    assert f["upward"] == []  # every arrow goes down: only the rule catches them


def test_views_import_no_engine_reader_or_analysis():
    """No view imports nsysdoc.engine, nsysdoc.trace or nsysdoc.analysis, but the allowed arrows
    (each with its reason); before issue 51's views part, views.perfetto imported engine.data,
    engine.slices, trace.store and trace.schema."""
    tool = _tool()
    found = tool.figures()["forbidden"]
    assert [x for x in found if not x["allowed"]] == []
    # may only shrink (the Kineto reader's split keeps the name importable from its package)
    assert all(x["from"] == "nsysdoc.views.columns" and x["to"].startswith("nsysdoc.trace.kineto") for x in found)
    assert not any(x["from"] == "nsysdoc.views.perfetto" for x in found)
