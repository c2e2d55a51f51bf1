"""One road from a chunk's bytes and its plugins to outcomes (issue 22, item 2): the
author's harness is off the production path, the default caps are defined once, and an
outcome crosses the fork server's wire whole.

The import check parses every module (not importing it), as
``tests/unit/test_import_graph.py`` does: an import inside a function or under
``TYPE_CHECKING`` counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import companion.defaults
import consumer_lib.fallback
import substreams.harness
from substreams import defaults
from substreams.forkserver_process import outcome_fields, outcome_from
from substreams.protocol import DEFAULT_CAP, Outcome
from tests.unit.module_scan import imported_names, modules, write_modules

ROOT = Path(__file__).resolve().parents[3]
#: Every package of ours; their modules are production code unless exempted below.
PACKAGES = (
    "eventstore", "devnode", "substreams", "relocator", "companion", "consumer_lib", "fleet"
)  # fmt: skip
#: The author's harness, and the command that runs it (``riak-events substream test``).
AUTHOR_TOOLS = frozenset({"substreams.harness", "substreams.cli"})


def importers_of(target: str, root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """``module (line n)`` for every import of ``target`` (or a name from it) in the
    packages' modules, however it is written (relative imports included)."""
    found = set()
    for module, (path, is_package) in modules(root, packages).items():
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom) and any(
                n == target or n.startswith(f"{target}.")
                for n in imported_names(node, module, is_package)
            ):
                found.add(f"{module} (line {node.lineno})")
    return sorted(found)


def test_production_modules_do_not_import_the_authors_harness() -> None:
    importers = [
        i for i in importers_of("substreams.harness") if i.split(" ")[0] not in AUTHOR_TOOLS
    ]
    assert not importers, "production code importing the author's harness:\n" + "\n".join(importers)


#: Modules importing the harness in every way an import can be written (and one that
#: imports a sibling of it, which must not count).
HARNESS_IMPORTS = {
    "consumer_lib/__init__.py": "",
    "consumer_lib/a.py": "from substreams.harness import DEFAULT_CAP\n",
    "consumer_lib/b.py": "def f():\n    import substreams.harness as h\n    return h\n",
    "consumer_lib/c.py": "from substreams import harness\n",
    "consumer_lib/d.py": "from substreams import run\nfrom substreams.run import x\n",
    "substreams/e.py": "from . import harness\n",
}


def test_the_import_check_finds_every_way_of_writing_the_import(tmp_path: Path) -> None:
    # So that an empty answer above means something.
    write_modules(tmp_path, HARNESS_IMPORTS)
    found = importers_of("substreams.harness", tmp_path, ("consumer_lib", "substreams"))
    assert found == [
        "consumer_lib.a (line 1)",
        "consumer_lib.b (line 2)",
        "consumer_lib.c (line 1)",
        "substreams.e (line 1)",
    ]


def test_the_default_caps_are_defined_once_in_substreams() -> None:
    assert (DEFAULT_CAP.timeout_s, DEFAULT_CAP.memory_mb, DEFAULT_CAP.max_result_bytes) == (
        defaults.CAP_TIMEOUT_S,
        defaults.CAP_MEMORY_MB,
        defaults.CAP_MAX_RESULT_BYTES,
    )
    # The companion's defaults name them, they do not repeat the numbers.
    assert (
        companion.defaults.TIMEOUT_CAP_S,
        companion.defaults.MEMORY_CAP_MB,
        companion.defaults.MAX_RESULT_BYTES_CAP,
    ) == (defaults.CAP_TIMEOUT_S, defaults.CAP_MEMORY_MB, defaults.CAP_MAX_RESULT_BYTES)
    source = Path(companion.defaults.__file__).read_text()
    caps = {"TIMEOUT_CAP_S", "MEMORY_CAP_MB", "MAX_RESULT_BYTES_CAP"}
    literal = [
        node.targets[0].id
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id in caps
        and not isinstance(node.value, ast.Attribute)
    ]
    assert not literal, f"companion/defaults.py spells out caps of its own: {literal}"
    assert substreams.harness.DEFAULT_CAP is DEFAULT_CAP
    assert consumer_lib.fallback.DEFAULT_CAP is DEFAULT_CAP


def test_an_outcome_crosses_the_fork_servers_wire_whole() -> None:
    # Whether the loader refused the chunk's bytes travels as a field: the consumer
    # raises the store's own error for it, and marks a child that died decoding.
    refused = Outcome(
        "s", "unreadable", error="chunk_unreadable: bad postfix", load_cpu_s=0.5,
        loader_raised=True,
    )  # fmt: skip
    died = Outcome("s", "unreadable", error="chunk_unreadable: loading the events: killed")
    ok = Outcome("s", "ok", b"value", wall_s=0.25, cpu_s=0.125, max_rss_kb=7, child_cpu_s=1.0)
    for outcome in (refused, died, ok):
        assert outcome_from("s", outcome_fields(outcome), outcome.payload) == outcome
    assert outcome_from("s", outcome_fields(refused), b"").loader_raised
    assert not outcome_from("s", outcome_fields(died), b"").loader_raised
