"""The import graph of the project's modules: no cycle, and the packages' layering.

Every module of the six packages is parsed (not imported) and every import statement in
it counts, wherever it is: at the top, inside a function, under ``if TYPE_CHECKING``. A
cycle broken by a function-level import or hidden behind ``TYPE_CHECKING`` is still a
cycle; the shared part moves down into a module of its own (or, for a type, a
``Protocol`` of what the lower module uses).

``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to ``a.b``; the
implicit import of a module's parent packages is not an edge (a package's ``__init__``
importing its own submodules is not a cycle).

Layering (a package may import itself and those listed):

    sereal_codec    - (a library of its own; every package may import it)
    eventstore      -
    devnode         eventstore (a Riak stand-in: it serves the store's contract)
    substreams      eventstore
    relocator       eventstore
    companion       eventstore, substreams
    consumer_lib    eventstore, substreams
    fleet           all of them (containers, the dev stack, status: it runs and observes
                    every daemon from outside)

One exception: a package's ``testing`` module (the harness that starts its daemon for
tests and benches) may also import the harnesses below it in :data:`HARNESSES`, e.g.
the companion's harness starts a devnode to store into, through fleet's process harness.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.unit.module_scan import imported_names, modules, write_modules

ROOT = Path(__file__).resolve().parents[2]

#: Package -> the other packages it may import.
ALLOWED: dict[str, frozenset[str]] = {
    "sereal_codec": frozenset(),
    "eventstore": frozenset(),
    "devnode": frozenset({"eventstore"}),
    "substreams": frozenset({"eventstore"}),
    "relocator": frozenset({"eventstore"}),
    "companion": frozenset({"eventstore", "substreams"}),
    "consumer_lib": frozenset({"eventstore", "substreams"}),
    "fleet": frozenset(
        {"eventstore", "devnode", "substreams", "relocator", "companion", "consumer_lib"}
    ),
}

#: The harness modules any package's ``testing`` module may import too.
HARNESSES = frozenset({"devnode.testing", "fleet.harness"})


@dataclass(frozen=True, order=True)
class Edge:
    """``source`` imports ``target`` at ``line``."""

    source: str
    target: str
    line: int


def import_graph(known: Mapping[str, tuple[Path, bool]]) -> list[Edge]:
    """Every import of a known module by a known module (see the module docstring)."""
    edges = set()
    for module, (path, is_package) in known.items():
        tree = ast.parse(path.read_bytes(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in imported_names(node, module, is_package):
                target = name
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != module:
                    edges.add(Edge(module, target, node.lineno))
    return sorted(edges)


def cycles(edges: Iterable[Edge]) -> list[list[Edge]]:
    """One cycle (as its edges, in order) per strongly connected component of more than
    one module (Tarjan's algorithm, iterative)."""
    out: dict[str, list[Edge]] = {}
    for edge in edges:
        out.setdefault(edge.source, []).append(edge)
        out.setdefault(edge.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for start in sorted(out):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(out[node]):
                work.append((node, i + 1))
                target = out[node][i].target
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return [_cycle_in(component, out) for component in components]


def _cycle_in(component: set[str], out: Mapping[str, list[Edge]]) -> list[Edge]:
    """A shortest cycle through the component's first module (breadth-first)."""
    first = min(component)
    came: dict[str, Edge] = {}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for edge in out[node]:
                if edge.target not in component or edge.target in came:
                    continue
                came[edge.target] = edge
                if edge.target == first:
                    path = [edge]
                    while path[0].source != first:
                        path.insert(0, came[path[0].source])
                    return path
                following.append(edge.target)
        frontier = following
    raise AssertionError(f"no cycle through {first} in {sorted(component)}")


def describe(cycle: list[Edge]) -> str:
    """``a -(line 3)-> b -(line 9)-> a``."""
    return cycle[0].source + "".join(f" -(line {e.line})-> {e.target}" for e in cycle)


def layering_violations(edges: Iterable[Edge]) -> list[str]:
    """The edges from one package to another it may not import (:data:`ALLOWED`)."""
    bad = []
    for edge in edges:
        source, target = edge.source.partition(".")[0], edge.target.partition(".")[0]
        harness = edge.source.endswith(".testing") and edge.target in HARNESSES
        codec = target == "sereal_codec"  # below everything
        if source != target and target not in ALLOWED[source] and not harness and not codec:
            bad.append(f"{edge.source} imports {edge.target} (line {edge.line})")
    return bad


EDGES = import_graph(modules(ROOT, ALLOWED))


def test_the_graph_holds_function_level_and_type_only_imports() -> None:
    # Known edges of each kind, so that an empty or partial graph cannot pass.
    assert len(EDGES) > 500
    top = [e for e in EDGES if e.source == "consumer_lib.cli" and e.target == "eventstore.options"]
    assert top
    inside = [e for e in EDGES if e.source == "substreams.cli" and e.target == "substreams.harness"]
    assert inside  # imported inside the `test` command
    typed = [e for e in EDGES if e.source == "relocator.daemon" and e.target == "relocator.zk"]
    assert typed  # under `if TYPE_CHECKING`


def test_no_import_cycles() -> None:
    found = [describe(c) for c in cycles(EDGES)]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_packages_import_only_the_packages_below_them() -> None:
    bad = layering_violations(EDGES)
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_the_checks_find_a_cycle_made_of_function_level_imports(tmp_path: Path) -> None:
    write_modules(
        tmp_path,
        {
            "substreams/__init__.py": "from substreams.a import f\n",
            "substreams/a.py": "def f():\n    from substreams import b\n    return b\n",
            "substreams/b.py": "def g():\n    from .a import f\n    import consumer_lib.x\n",
            "consumer_lib/x.py": "",
        },
    )
    edges = import_graph(modules(tmp_path, ["substreams", "consumer_lib"]))
    assert [describe(c) for c in cycles(edges)] == [
        "substreams.a -(line 2)-> substreams.b -(line 2)-> substreams.a"
    ]
    assert layering_violations(edges) == ["substreams.b imports consumer_lib.x (line 3)"]
