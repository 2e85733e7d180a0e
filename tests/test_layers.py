"""Layers of ``nsysdoc.trace``: each input format has its own reader behind one ``load_trace``.

The SQLite reader (``sqlite_reader.py``) and the PyTorch Profiler reader (``kineto.py``) stand side
by side on what they share (``frames.py``, ``cache_entry.py``, ``store.py``, ``model.py``):
neither imports the other nor ``loader.py``, which picks one of them. Read from the source with
``ast`` (nothing is imported), counting imports inside functions too: a lazy import still ties
the two modules together. Imports under ``if TYPE_CHECKING:`` never run and are not counted.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

NSYSDOC = Path(__file__).resolve().parents[1] / "nsysdoc"
TRACE = "nsysdoc.trace"
READERS = (f"{TRACE}.kineto", f"{TRACE}.sqlite_reader")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """Every import statement, at any depth, except those under ``if TYPE_CHECKING:``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            elif isinstance(child, ast.If) and _is_type_checking(child):
                todo.extend(child.orelse)
            else:
                todo.append(child)


def import_graph(root: Path = NSYSDOC) -> dict[str, set[str]]:
    """Module -> the modules of ``root``'s package it imports (``from . import x`` resolved to the
    module ``x`` when it is one, else to the package)."""
    files = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]) if node.level else ""
                base = ".".join(x for x in (base, node.module or "") if x)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files:  # "import a.b.c" of a package module: its nearest module
                    t = t.rpartition(".")[0]
                if t and t != name:
                    found.add(t)
        graph[name] = found
    return graph


# issue 50: the tests below read one graph; parsing the package's files took 1.5-2 s per test
import_graph = functools.lru_cache(maxsize=None)(import_graph)  # noqa: E305 - never mutated by the tests


def cycles(graph: dict[str, set[str]], prefix: str) -> list[list[str]]:
    """The import cycles among modules named ``prefix`` or ``prefix.*`` (strongly connected
    components of more than one module), each sorted."""
    nodes = {n for n in graph if n == prefix or n.startswith(prefix + ".")}
    edges = {n: sorted(graph[n] & nodes) for n in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for n in sorted(nodes):
        if n not in index:
            visit(n)
    return sorted(out)


def test_the_graph_sees_lazy_and_relative_imports():
    g = import_graph()
    assert f"{TRACE}.frames" in g[f"{TRACE}.kineto"]  # from . import frames as F
    assert f"{TRACE}.kineto" in g[f"{TRACE}.loader"]  # inside load_trace
    assert f"{TRACE}.frames" in g[f"{TRACE}.model"]  # inside Trace.frame


def test_the_readers_import_neither_each_other_nor_the_loader():
    g = import_graph()
    for reader in READERS:
        assert reader in g, reader
        wrong = g[reader] & (set(READERS) | {f"{TRACE}.loader", TRACE})
        assert not wrong, f"{reader} imports {sorted(wrong)}"


def test_model_and_the_shared_layers_import_no_reader():
    g = import_graph()
    for shared in ("model", "frames", "cache_entry", "store", "columns", "schema"):
        wrong = g[f"{TRACE}.{shared}"] & (set(READERS) | {f"{TRACE}.loader"})
        assert not wrong, f"{shared} imports {sorted(wrong)}"


def test_no_import_cycle_among_the_trace_modules():
    assert cycles(import_graph(), TRACE) == []


def test_no_import_cycle_anywhere_in_the_package():
    """The layers import downwards only: cli -> api -> pipeline -> analysis -> engine/assembly ->
    metrics/trace. The package root is left out: it hands its public names over lazily
    (``nsysdoc.__getattr__`` imports ``nsysdoc.api``), and modules read ``__version__`` from it.
    Before the split, analysis <-> engine.run (judgeability thresholds) and engine.fill <->
    engine.slices (``in_window``) were circles."""
    graph = {m: {d for d in deps if d != "nsysdoc"} for m, deps in import_graph().items() if m != "nsysdoc"}
    assert cycles(graph, "nsysdoc") == []


def test_rules_import_no_assembly():
    """Rules read the result's values and tables; building them is assembly's job, never the other
    way round (issue 47 review: the memory rules' evidence tables came from nsysdoc.assembly)."""
    g = import_graph()
    for mod, deps in g.items():
        if mod == "nsysdoc.rules" or mod.startswith("nsysdoc.rules."):
            wrong = {d for d in deps if d == "nsysdoc.assembly" or d.startswith("nsysdoc.assembly.")}
            assert not wrong, f"{mod} imports {sorted(wrong)}"
