"""The deprecated import paths of packages that moved out of eventstore (eventstore/moved.py)."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest

import devnode.hook
import devnode.routing
from eventstore import moved


def _forget(prefix: str) -> None:
    for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
        del sys.modules[name]


def test_an_old_path_gives_the_very_module_of_the_new_one_with_a_warning() -> None:
    _forget("eventstore.devnode")
    with pytest.warns(DeprecationWarning, match=r"eventstore\.devnode moved to devnode"):
        old = importlib.import_module("eventstore.devnode.hook")
    assert old is devnode.hook  # one module: the same classes and state
    from eventstore.devnode.routing import route

    assert route is devnode.routing.route
    # The module keeps its own spec (the import system would give it the old name's).
    assert devnode.hook.__spec__ is not None
    assert devnode.hook.__spec__.name == "devnode.hook"


def test_a_name_that_never_existed_under_the_old_path_is_still_an_import_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("eventstore.devnode.no_such_module")
    assert "eventstore.devnode.no_such_module" not in sys.modules


def test_every_moved_package_exists_at_its_new_path() -> None:
    for old, new in moved.MOVED.items():
        assert importlib.util.find_spec(new) is not None, (old, new)
