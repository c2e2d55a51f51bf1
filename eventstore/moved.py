"""Deprecated import paths of packages that moved out of eventstore (issue 22).

``eventstore.devnode`` is now the top-level ``devnode`` (and ``sereal_codec`` the
top-level ``sereal_codec``). For one release the old paths still import, with a
``DeprecationWarning`` naming the new one: ``import eventstore.devnode.app`` gives the very
module object ``devnode.app`` (one module, not a copy: its classes, counters and state are
the same), so code written against the old path keeps working unchanged.

The aliases are a finder at the front of ``sys.meta_path``, installed when ``eventstore``
is imported; it answers only for names under a moved prefix.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "install"]

#: Old package path -> its new home.
MOVED: dict[str, str] = {
    "eventstore.devnode": "devnode",
    "eventstore.sereal": "sereal_codec",
}


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old name to the module of its new name (the same object)."""

    def __init__(self, moved: dict[str, str]) -> None:
        self._moved = dict(moved)
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def _new_name(self, fullname: str) -> str | None:
        for old, new in self._moved.items():
            if fullname == old or fullname.startswith(old + "."):
                return new + fullname[len(old) :]
        return None

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = self._new_name(fullname)
        if new is None or importlib.util.find_spec(new) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = self._new_name(spec.name)
        assert new is not None  # find_spec answered for it
        if spec.name in self._moved:  # once per moved package, not per submodule
            warnings.warn(
                f"{spec.name} moved to {new}; the old import path goes in the next release",
                DeprecationWarning,
                stacklevel=2,
            )
        module = importlib.import_module(new)
        self._specs[spec.name] = module.__spec__  # the import system overwrites it
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The module already ran under its new name; give it its own spec back.
        module.__spec__ = self._specs.pop(module.__spec__.name if module.__spec__ else "", None)


def install() -> None:
    """Put the finder at the front of ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder(MOVED))
