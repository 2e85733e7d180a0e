"""The import graph of ``nsysdoc``: modules, lines, arrows, circles, layers and upward arrows.

Run ``python tools/import_graph.py`` (add ``--arrows`` for every upward arrow, ``--json`` for
the figures as JSON). Read from the source with :mod:`ast` only: nothing is imported, so the
figures hold for a tree that does not even import. An *arrow* is "module A imports module B",
counted once per pair, wherever the import sits: at the top, inside a function (a lazy import
still ties the two modules together) or under ``if TYPE_CHECKING:`` (it never runs, but a
reader still has to open B to read A; such arrows are marked ``typing``). ``from . import x``
is an arrow to the module ``x`` when it is one, else to the package.

The layers are defined here and nowhere else (:data:`LAYERS`, lowest first). A module belongs
to the layer of the longest prefix that names it. An arrow may stay inside a layer or go down;
one that goes from a lower layer to a higher one is an *upward arrow*. A *circle* is a strongly
connected component of more than one module. Some arrows that go down are still out of bounds: a
*forbidden arrow* breaks a rule of :data:`FORBIDDEN` (the views import no engine, reader or
analysis), unless :data:`FORBIDDEN_ALLOWED` names it with its reason. tests/test_import_graph.py
asserts the figures this script prints.
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "nsysdoc"

#: the floors of the house, lowest first: (layer, module prefixes). What each one may import:
#: anything on its own floor or below.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # words and numbers every floor shares: no nsysdoc import but each other
    ("ground", ("nsysdoc.version", "nsysdoc.errors", "nsysdoc.severity", "nsysdoc.idle_causes",
                "nsysdoc.fmt", "nsysdoc.safe_regex", "nsysdoc.lazy_pandas", "nsysdoc.pagedata",
                "nsysdoc.options")),
    # what a path holds and where files go: input formats, the user's paths, outputs, the cache
    ("files", ("nsysdoc.formats", "nsysdoc.inputs", "nsysdoc.outputs", "nsysdoc.cache")),
    ("trace", ("nsysdoc.trace",)),          # readers: a capture -> tables
    ("nsys", ("nsysdoc.nsys",)),            # running nsys: profile, export to SQLite
    ("metrics", ("nsysdoc.metrics",)),      # pure functions of tables, units in names
    ("engine", ("nsysdoc.engine",)),        # the sliced pass over a large trace
    ("rules", ("nsysdoc.rules",)),          # YAML rules: thresholds, wording, verdict
    ("assembly", ("nsysdoc.assembly",)),    # the values and tables the rules read
    ("analysis", ("nsysdoc.analysis",)),    # one trace -> one result
    # results of several captures: the pipeline, the diff, a job's analysis of its ranks
    ("results", ("nsysdoc.pipeline", "nsysdoc.compare", "nsysdoc.jobs.analysis", "nsysdoc.jobs.align",
                 "nsysdoc.jobs.what_if")),
    ("testing", ("nsysdoc.testing",)),      # scenario builders and the rule-case runner
    ("views", ("nsysdoc.views",)),          # the page, Markdown, Perfetto: render a result
    ("jobs", ("nsysdoc.jobs",)),            # running a job: ranks in workers, their pages
    ("api", ("nsysdoc.api", "nsysdoc.api_tables", "nsysdoc.api_args")),  # the public Python API
    ("cli", ("nsysdoc.cli", "nsysdoc.cli_params", "nsysdoc.__main__")),
    ("face", ("nsysdoc",)),                 # the package face: hands over api's names lazily
)

#: a module longer than this many lines holds several concerns (issue 51)
MAX_LINES = 1000

#: arrows that go down but skip floors they must not reach: (rule, importers, imported) — a module
#: under an importer prefix may not import one under an imported prefix. Issue 51: the views
#: render the result and the page data (and the Perfetto export's rows, read by
#: ``assembly.perfetto_rows``); they never read a capture, replay the engine or run an analysis.
FORBIDDEN: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("views render only", ("nsysdoc.views",), ("nsysdoc.engine", "nsysdoc.trace", "nsysdoc.analysis")),
)
#: the forbidden arrows still allowed, each with its reason: (importer, imported prefix) -> reason
FORBIDDEN_ALLOWED: dict[tuple[str, str], str] = {}


def _under(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def forbidden(arr, rules=FORBIDDEN, allowed=None) -> list[dict]:
    """The arrows that break a rule of ``rules``, each with whether ``allowed`` (default
    :data:`FORBIDDEN_ALLOWED`) lets it stand and why."""
    allowed = FORBIDDEN_ALLOWED if allowed is None else allowed
    out = []
    for a, b in sorted(arr):
        for rule, importers, imported in rules:
            if _under(a, importers) and _under(b, imported):
                why = next((r for (x, y), r in allowed.items() if x == a and _under(b, (y,))), "")
                out.append({"rule": rule, "from": a, "to": b, "allowed": why})
    return out


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """(import statement, under ``if TYPE_CHECKING:``) for every import at any depth."""
    todo = [(tree, False)]
    while todo:
        node, typing_only = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, typing_only
        elif isinstance(node, ast.If) and _is_type_checking(node):
            todo.extend((c, True) for c in node.body)
            todo.extend((c, typing_only) for c in node.orelse)
        else:
            todo.extend((c, typing_only) for c in ast.iter_child_nodes(node))


def modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def arrows(root: Path = ROOT) -> dict[tuple[str, str], bool]:
    """(importer, imported) -> True when every import of the pair is under ``TYPE_CHECKING``."""
    files = modules(root)
    out: dict[tuple[str, str], bool] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, typing_only in _import_nodes(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1]) if node.level else ""
                base = ".".join(x for x in (base, node.module or "") if x)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files:  # "import a.b.c" of a package module: its nearest module
                    t = t.rpartition(".")[0]
                if t and t != name:
                    out[(name, t)] = out.get((name, t), True) and typing_only
    return out


def layer_of(module: str, layers=LAYERS) -> int:
    """Index in ``layers`` of the longest prefix naming ``module``; -1 when none does."""
    best, best_len = -1, -1
    for i, (_, prefixes) in enumerate(layers):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def circles(edges) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative), each sorted."""
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
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
    return sorted(out)


def room(module: str) -> str:
    """The room a module stands in: its sub-package (``nsysdoc.trace``) or itself (``nsysdoc.cli``)."""
    return ".".join(module.split(".")[:2])


def figures(root: Path = ROOT, layers=LAYERS, max_lines: int = MAX_LINES, rules=FORBIDDEN, allowed=None) -> dict:
    files = modules(root)
    lines = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in files.items()}
    arr = arrows(root)
    up = {m: layer_of(m, layers) for m in files}
    upward = sorted((a, b) for (a, b) in arr if up[a] < up[b])
    rooms = {room(m) for m in files}
    room_arrows = {(room(a), room(b)) for a, b in arr if room(a) != room(b)}
    return {
        "modules": len(files),
        "lines": sum(lines.values()),
        "rooms": len(rooms),
        "layers": len(LAYERS),
        "arrows": len(arr),
        "typing_arrows": sum(arr.values()),
        "room_arrows": len(room_arrows),
        "circles": circles(arr),
        "runtime_circles": circles(e for e, t in arr.items() if not t),
        "upward": [{"from": a, "to": b, "from_layer": layers[up[a]][0], "to_layer": layers[up[b]][0],
                    "typing": arr[(a, b)]} for a, b in upward],
        "unlayered": sorted(m for m in files if up[m] < 0),
        "oversize": sorted(([m, n] for m, n in lines.items() if n > max_lines), key=lambda x: -x[1]),
        "forbidden": forbidden(arr, rules, allowed),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--arrows", action="store_true", help="list every upward arrow")
    args = ap.parse_args(argv)
    f = figures()
    if args.json:
        print(json.dumps(f, indent=1))
        return 0
    print(f"modules {f['modules']}  lines {f['lines']}  rooms {f['rooms']}  layers {f['layers']}")
    print(f"arrows {f['arrows']} ({f['typing_arrows']} under TYPE_CHECKING)  between rooms {f['room_arrows']}")
    print(f"circles {len(f['circles'])} (at run time {len(f['runtime_circles'])})")
    for c in f["circles"]:
        print(f"  circle of {len(c)}: {' '.join(c) if len(c) <= 8 else ' '.join(c[:8]) + ' …'}")
    print(f"upward arrows {len(f['upward'])}")
    for u in f["upward"] if args.arrows else ():
        print(f"  {u['from']} ({u['from_layer']}) -> {u['to']} ({u['to_layer']}){'  [typing]' if u['typing'] else ''}")
    bad = [x for x in f["forbidden"] if not x["allowed"]]
    print(f"forbidden arrows {len(bad)} (and {len(f['forbidden']) - len(bad)} allowed, with a reason)")
    for x in f["forbidden"]:
        print(f"  [{x['rule']}] {x['from']} -> {x['to']}" + (f"  allowed: {x['allowed']}" if x["allowed"] else ""))
    if f["unlayered"]:
        print(f"modules in no layer: {' '.join(f['unlayered'])}")
    print(f"modules over {MAX_LINES} lines {len(f['oversize'])}: " + ", ".join(f"{m} {n}" for m, n in f["oversize"]))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # | head
        sys.exit(0)
