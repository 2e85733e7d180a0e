"""Layers of ``nsysdoc.trace``: each input format has its own reader behind one ``load_trace``.

The SQLite reader (``sqlite_reader.py``) and the PyTorch Profiler reader (``kineto.py``) stand side
by side on what they share (``tables.py``, ``cache_entry.py``, ``store.py``, ``model.py``):
neither imports the other nor ``loader.py``, which picks one of them. Read from the source with
``ast`` (nothing is imported), counting imports inside functions too: a lazy import still ties
the two modules together. Imports under ``if TYPE_CHECKING:`` never run and are not counted.
"""
from __future__ import annotations

import functools
from pathlib import Path

NSYSDOC = Path(__file__).resolve().parents[1] / "nsysdoc"
TRACE = "nsysdoc.trace"
READERS = (f"{TRACE}.kineto", f"{TRACE}.sqlite_reader")

from tests.test_import_graph import _tool  # noqa: E402 - the one import-graph reader (tools/import_graph.py)


@functools.lru_cache(maxsize=None)  # issue 50: the tests below read one graph (parsing takes 1.5-2 s)
def import_graph(root: Path = NSYSDOC) -> dict[str, set[str]]:
    """Module -> the modules of ``root``'s package it imports at run time (``from . import x``
    resolved to the module ``x`` when it is one, else to the package): the arrows of
    ``tools/import_graph.py`` (issue 51's house figures) not all under ``TYPE_CHECKING``."""
    tool = _tool()
    graph: dict[str, set[str]] = {m: set() for m in tool.modules(root)}
    for (a, b), typing_only in tool.arrows(root).items():
        if not typing_only:
            graph[a].add(b)
    return graph


def cycles(graph: dict[str, set[str]], prefix: str) -> list[list[str]]:
    """The import cycles among modules named ``prefix`` or ``prefix.*`` (strongly connected
    components of more than one module, ``tools/import_graph.py: circles``), each sorted."""
    nodes = {n for n in graph if n == prefix or n.startswith(prefix + ".")}
    return _tool().circles([(a, b) for a in nodes for b in graph[a] & nodes])


def test_the_graph_sees_lazy_and_relative_imports():
    g = import_graph()
    assert f"{TRACE}.tables" in g[f"{TRACE}.kineto.mapping"]  # from .. import tables as F
    assert f"{TRACE}.kineto" in g[f"{TRACE}.loader"]  # inside load_trace
    assert f"{TRACE}.tables" in g[f"{TRACE}.model"]  # inside Trace.frame


def test_the_readers_import_neither_each_other_nor_the_loader():
    g = import_graph()
    for reader in READERS:
        assert reader in g, reader
        wrong = g[reader] & (set(READERS) | {f"{TRACE}.loader", TRACE})
        assert not wrong, f"{reader} imports {sorted(wrong)}"


def test_the_kineto_package_imports_no_other_reader_nor_the_loader():
    """issue 51: the Kineto reader is a package (one module per concern); none of its modules
    imports the other reader, the loader or the ``nsysdoc.trace`` face, and they form no circle."""
    g = import_graph()
    mine = [m for m in g if m.startswith(f"{TRACE}.kineto.")]
    assert f"{TRACE}.kineto.parse_slow" in mine and f"{TRACE}.kineto.mapping" in mine
    for mod in mine:
        wrong = g[mod] & ((set(READERS) - {f"{TRACE}.kineto"}) | {f"{TRACE}.loader", TRACE, f"{TRACE}.kineto"})
        assert not wrong, f"{mod} imports {sorted(wrong)}"
    assert cycles(g, f"{TRACE}.kineto") == []


def test_model_and_the_shared_layers_import_no_reader():
    g = import_graph()
    for shared in ("model", "tables", "cache_entry", "store", "columns", "schema"):
        wrong = g[f"{TRACE}.{shared}"] & (set(READERS) | {f"{TRACE}.loader"})
        assert not wrong, f"{shared} imports {sorted(wrong)}"


def test_no_import_cycle_among_the_trace_modules():
    assert cycles(import_graph(), TRACE) == []


def test_no_import_cycle_anywhere_in_the_package():
    """The layers import downwards only: cli -> api -> pipeline -> analysis -> engine/assembly ->
    metrics/trace (the floors: tools/import_graph.py). The package root counts too: it hands its
    public names over lazily (``nsysdoc.__getattr__`` imports ``nsysdoc.api``), and since issue 51
    no module imports it (``__version__`` is in ``nsysdoc.version``). Before the split,
    analysis <-> engine.run (judgeability thresholds) and engine.fill <-> engine.slices
    (``in_window``) were circles."""
    assert cycles(import_graph(), "nsysdoc") == []


def test_rules_import_no_assembly():
    """Rules read the result's values and tables; building them is assembly's job, never the other
    way round (issue 47 review: the memory rules' evidence tables came from nsysdoc.assembly)."""
    g = import_graph()
    for mod, deps in g.items():
        if mod == "nsysdoc.rules" or mod.startswith("nsysdoc.rules."):
            wrong = {d for d in deps if d == "nsysdoc.assembly" or d.startswith("nsysdoc.assembly.")}
            assert not wrong, f"{mod} imports {sorted(wrong)}"


# issue 51: the page is a function of the result (and of the page data captured beside it)
#: the page's modules, with no exception since issue 51's views part: ``views.perfetto`` (the
#: Perfetto export) formats the rows ``assembly.perfetto_rows`` reads and replays
PAGE_MODULES_EXCEPT: set[str] = set()
PAGE_MUST_NOT_IMPORT = ("nsysdoc.engine", "nsysdoc.analysis", "nsysdoc.trace")
#: no exception left: nsys's ``shortName`` of a kernel name, the one string function the page read
#: from the Kineto reader, lives in ``trace.kernel_names`` and reaches the page through ``metrics.kernels``
PAGE_MAY_IMPORT: set[tuple[str, str]] = set()


def _imports_of(prefix: str) -> dict[str, set[str]]:
    """Module -> every module of the package it imports, ``TYPE_CHECKING`` ones included."""
    tool = _tool()
    out = {m: set() for m in tool.modules(NSYSDOC) if m == prefix or m.startswith(prefix + ".")}
    for a, b in tool.arrows(NSYSDOC):
        if a in out:
            out[a].add(b)
    return out


def _under(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def test_the_page_imports_no_engine_analysis_or_trace():
    """The views read the result and the page data (``nsysdoc.pagedata``) only: before, the
    timeline's data replayed engine slices while the page was built (``analysis.capture_windows``
    from ``views/tldata.py``), and the page read ``analysis.trace``."""
    found = _imports_of("nsysdoc.views")
    assert "nsysdoc.views.tldata" in found and "nsysdoc.views.perfetto" in found
    assert _under("nsysdoc.trace.schema", PAGE_MUST_NOT_IMPORT)  # the check can see one
    # ... as it saw views.perfetto's before issue 51 moved its reading to assembly.perfetto_rows
    assert any(_under(d, PAGE_MUST_NOT_IMPORT) for d in _imports_of("nsysdoc.assembly")["nsysdoc.assembly.perfetto_rows"])
    for mod, deps in found.items():
        if mod in PAGE_MODULES_EXCEPT:
            continue
        wrong = sorted(d for d in deps if _under(d, PAGE_MUST_NOT_IMPORT) and (mod, d) not in PAGE_MAY_IMPORT)
        assert not wrong, f"{mod} imports {wrong}"


def test_the_assembly_imports_no_analysis():
    """``assemble(trace, run, step_pattern) -> (result, tables)``: the assembly takes what it
    needs as arguments (before, it read a half-built ``Analysis``, even if only for its type)."""
    found = _imports_of("nsysdoc.assembly")
    assert "nsysdoc.assembly.inputs" in found["nsysdoc.assembly"]
    for mod, deps in found.items():
        wrong = sorted(d for d in deps if _under(d, ("nsysdoc.analysis", "nsysdoc.pipeline", "nsysdoc.api",
                                                        "nsysdoc.views", "nsysdoc.cli")))
        assert not wrong, f"{mod} imports {wrong}"


def test_the_sqlite_package_imports_neither_the_other_reader_nor_the_loader():
    """Issue 51: the SQLite reader is the package ``nsysdoc.trace.sqlite`` (one module per concern);
    none of its modules imports the Kineto reader (module or package), the loader or
    ``nsysdoc.trace`` itself, and its modules form no import circle."""
    g = import_graph()
    pkg = f"{TRACE}.sqlite"
    mods = [m for m in g if m == pkg or m.startswith(pkg + ".")]
    assert {f"{pkg}.chunks", f"{pkg}.ingest", f"{pkg}.nvtx", f"{pkg}.load"} <= set(mods), mods
    for m in mods:
        wrong = {b for b in g[m] if b in (f"{TRACE}.loader", TRACE) or b == f"{TRACE}.kineto"
                 or b.startswith(f"{TRACE}.kineto.")}
        assert not wrong, f"{m} imports {sorted(wrong)}"
    assert cycles(g, pkg) == []
