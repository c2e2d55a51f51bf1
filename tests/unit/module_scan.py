"""The project's modules read as text, for the tests that check imports
(``test_import_graph.py``, ``substreams/test_one_road.py``): each module parsed, not
imported, so that an import inside a function or under ``TYPE_CHECKING`` counts too."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path


def modules(root: Path, packages: Iterable[str]) -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package ``__init__``), for every ``*.py`` under the
    packages."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join(parts)] = (path, is_package)
    return found


def imported_names(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool
) -> Iterator[str]:
    """The dotted names an import statement in ``module`` may refer to, relative imports
    resolved: ``from a.b import c`` gives ``a.b.c`` (a submodule, or a name defined in
    ``a.b``)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join([*base, node.module] if node.module else base)
    else:
        prefix = node.module or ""
    for alias in node.names:
        yield f"{prefix}.{alias.name}"


def write_modules(root: Path, texts: Mapping[str, str]) -> None:
    """Write each ``texts`` entry (a path below ``root`` -> its text), making folders."""
    for name, text in texts.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
