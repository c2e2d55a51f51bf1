"""One error tree for the project (eventstore/errors.py's docstring draws it).

Every exception class riak-events defines derives from
:class:`eventstore.errors.RiakEventsError`; each package has exactly one root under it
(:data:`PACKAGE_ROOTS`, defined in the package's ``errors`` module), and a subpackage's
root derives from its parent package's; no two of the classes share a name; each has
the ``retriable`` class attribute. The classes are found by importing every module of
the project's packages, so a class defined anywhere (not only in an ``errors`` module) is
checked.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import pytest

import eventstore.errors
from companion.errors import CompanionError
from consumer_lib.errors import ConsumerError
from devnode.errors import DevnodeError
from eventstore.errors import EventStoreError, RiakEventsError
from eventstore.riak.errors import RiakError
from fleet.cluster.errors import ClusterError
from fleet.devstack.errors import DevStackError
from fleet.errors import FleetError
from relocator.errors import RelocatorError
from sereal_codec.errors import SerealError
from substreams.errors import SoftTimeout, SubstreamError

ROOT = Path(__file__).resolve().parents[2]

#: The project's packages: every top-level folder of the checkout that is a package (so
#: that a new package is checked without being listed here).
PACKAGES = tuple(sorted(p.parent.name for p in ROOT.glob("*/__init__.py")))

#: Package -> its one root. A class belongs to the deepest package listed here whose
#: name prefixes its module (``sereal_codec.pure.variant`` -> ``sereal_codec``).
PACKAGE_ROOTS: dict[str, type[BaseException]] = {
    "sereal_codec": SerealError,
    "eventstore": EventStoreError,
    "eventstore.riak": RiakError,
    "devnode": DevnodeError,
    "relocator": RelocatorError,
    "companion": CompanionError,
    "substreams": SubstreamError,
    "consumer_lib": ConsumerError,
    "fleet": FleetError,
    "fleet.cluster": ClusterError,
    "fleet.devstack": DevStackError,
}

#: Packages released on their own (they import nothing of riak-events): their root
#: derives from this standard exception instead of RiakEventsError, and the store
#: translates their errors at its boundaries.
LIBRARIES: dict[str, type[BaseException]] = {"sereal_codec": ValueError}

#: Not errors: a plugin's deadline is a BaseException so that the plugin's own
#: ``except Exception`` cannot swallow it (substreams/errors.py).
NOT_ERRORS: frozenset[type[BaseException]] = frozenset({SoftTimeout})

#: Optional dependencies (extras); a module that needs one that is not installed is
#: not imported, and its classes are not checked.
OPTIONAL = frozenset({"pyspark", "pyarrow", "pandas", "docker", "kazoo"})


def _modules() -> list[ModuleType]:
    found = []
    for name in PACKAGES:
        package = importlib.import_module(name)
        found.append(package)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if info.name.rpartition(".")[2] == "__main__":
                continue  # runs a command
            try:
                found.append(importlib.import_module(info.name))
            except ModuleNotFoundError as e:
                if (e.name or "").partition(".")[0] not in OPTIONAL:
                    raise
    return found


def _exception_classes() -> list[type[BaseException]]:
    classes = []
    for module in _modules():
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                classes.append(value)
    return classes


CLASSES = _exception_classes()
ERRORS = [c for c in CLASSES if c not in NOT_ERRORS]


def package_of(cls: type[BaseException]) -> str:
    """The deepest package of :data:`PACKAGE_ROOTS` that holds ``cls``'s module."""
    holders = [p for p in PACKAGE_ROOTS if f"{cls.__module__}.".startswith(f"{p}.")]
    assert holders, f"{cls.__module__}.{cls.__qualname__} is outside the packages"
    return max(holders, key=len)


def roots_of(classes: list[type[BaseException]], package: str) -> list[type[BaseException]]:
    """The classes of ``package`` none of whose project bases is of ``package`` too."""
    project = set(classes) | {RiakEventsError}

    def inside(c: type[BaseException]) -> bool:
        return c is not RiakEventsError and package_of(c) == package

    return [
        c for c in classes if inside(c) and not any(inside(b) for b in c.__bases__ if b in project)
    ]


def test_the_classes_are_found() -> None:
    # The walk reaches modules other than the errors modules (a class defined next to
    # its use is checked too).
    names = {f"{c.__module__}.{c.__qualname__}" for c in CLASSES}
    assert "eventstore.dirlock.DirectoryLocked" in names
    assert "substreams.sandbox.SandboxUnavailable" in names
    assert len(CLASSES) > 100


def test_every_error_derives_from_the_project_root() -> None:
    outside = [
        f"{c.__module__}.{c.__qualname__}"
        for c in ERRORS
        if not issubclass(c, RiakEventsError) and package_of(c) not in LIBRARIES
    ]
    assert not outside, f"not a RiakEventsError: {outside}"


def test_every_error_has_retriable_as_a_class_attribute() -> None:
    assert all(isinstance(getattr(c, "retriable", None), bool) for c in ERRORS)


@pytest.mark.parametrize("package", list(PACKAGE_ROOTS))
def test_each_package_has_one_root_under_its_parents(package: str) -> None:
    root = PACKAGE_ROOTS[package]
    assert root.__module__ == f"{package}.errors", "a package's root lives in its errors module"
    assert roots_of(ERRORS, package) == [root]
    members = [c for c in ERRORS if c is not RiakEventsError and package_of(c) == package]
    assert all(issubclass(c, root) for c in members)
    parent = package.rpartition(".")[0]
    if package in LIBRARIES:
        assert root.__bases__ == (LIBRARIES[package],)
        assert not issubclass(root, RiakEventsError)
    else:
        expected = PACKAGE_ROOTS[parent] if parent else RiakEventsError
        project_bases = [b for b in root.__bases__ if issubclass(b, RiakEventsError)]
        assert project_bases == [expected], f"{root.__name__} should be a {expected.__name__}"
    # Documented: the tree in eventstore/errors.py's docstring names the root and package.
    assert eventstore.errors.__doc__ is not None
    assert any(
        root.__name__ in line and package in line for line in eventstore.errors.__doc__.splitlines()
    )


def test_every_errors_module_belongs_to_a_listed_package() -> None:
    modules = {m for m in sys.modules if m.endswith(".errors") and m.partition(".")[0] in PACKAGES}
    assert modules == {f"{p}.errors" for p in PACKAGE_ROOTS}


def test_no_two_exception_classes_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for c in CLASSES:
        where[c.__qualname__].append(c.__module__)
    shared = {name: modules for name, modules in where.items() if len(modules) > 1}
    assert not shared, f"one name, several classes: {shared}"


def test_the_checks_see_a_second_root_and_a_stray_class() -> None:
    # The root finder on made-up classes: a second root in a package is reported.
    class Second(Exception):
        pass

    Second.__module__ = "relocator.made_up"
    assert roots_of([RelocatorError, Second], "relocator") == [RelocatorError, Second]
    assert not issubclass(Second, RiakEventsError)
