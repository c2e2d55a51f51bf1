"""Python values for the Perl constructs that plain dicts and lists cannot hold.

The mapping (both directions) is documented in ``sereal_codec/DESIGN.md``. These
wrappers are deliberately small: they exist so that a Perl-produced document decodes
without loss and re-encodes to the same Perl meaning.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from reprlib import recursive_repr
from typing import Any

#: Perl classes whose blessed scalar references are booleans; they decode to ``bool``.
BOOLEAN_CLASSES: frozenset[str] = frozenset(
    {
        "JSON::PP::Boolean",
        "JSON::XS::Boolean",
        "Types::Serialiser::Boolean",
        "Cpanel::JSON::XS::Boolean",
        "Mojo::JSON::_Bool",
        "boolean",
        "Data::MessagePack::Boolean",
    }
)


_comparing = threading.local()  # .pairs: (id, id) of the comparisons under way


def _cycle_safe_eq(a: object, b: object, compare: Callable[[], bool]) -> bool:
    """``compare()`` for ``a == b``, safe on cyclic values (``$x = \\$x`` decodes to a
    ``PerlRef`` whose value is itself). A comparison of the same pair already under
    way further up the stack is a cycle: it is taken as equal, so two cycles of the
    same shape are equal, and the recursion stops."""
    if a is b:
        return True
    pairs: set[tuple[int, int]] | None = getattr(_comparing, "pairs", None)
    if pairs is None:
        pairs = _comparing.pairs = set()
    key = (id(a), id(b))
    if key in pairs:
        return True
    pairs.add(key)
    try:
        return compare()
    finally:
        pairs.discard(key)


class PerlRef:
    """A Perl reference to a scalar (``\\$x``) or to another reference (``\\\\@a``).

    A reference to an array or hash is simply a ``list`` / ``dict``; this wrapper is only
    used where that shortcut would lose a level of indirection. It is mutable so that a
    self-referencing scalar (``$x = \\$x``) can be represented: ``r.value is r``.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PerlRef):
            return NotImplemented
        return _cycle_safe_eq(self, other, lambda: bool(self.value == other.value))

    __hash__ = None  # type: ignore[assignment]  # mutable

    @recursive_repr()
    def __repr__(self) -> str:
        return f"PerlRef({self.value!r})"


class PerlObject:
    """A blessed Perl value: ``class_name`` and the (usually reference) ``value``.

    ``frozen`` is True for OBJECT_FREEZE / OBJECTV_FREEZE, where ``value`` is the list of
    values the class's FREEZE method returned (we never call THAW: there is no Perl class
    here). Re-encoding writes the same class and the same kind of tag.
    """

    __slots__ = ("class_name", "frozen", "value")

    def __init__(self, class_name: str, value: Any, frozen: bool = False) -> None:
        self.class_name = class_name
        self.value = value
        self.frozen = frozen

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PerlObject):
            return NotImplemented
        return (
            self.class_name == other.class_name
            and self.frozen == other.frozen
            and _cycle_safe_eq(self, other, lambda: bool(self.value == other.value))
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    @recursive_repr()
    def __repr__(self) -> str:
        kind = "frozen " if self.frozen else ""
        return f"PerlObject({kind}{self.class_name!r}, {self.value!r})"


class PerlRegexp:
    """A Perl regular expression ``qr/pattern/flags`` (not compiled: Perl and Python
    regex dialects differ)."""

    __slots__ = ("flags", "pattern")

    def __init__(self, pattern: str, flags: str = "") -> None:
        self.pattern = pattern
        self.flags = flags

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PerlRegexp):
            return NotImplemented
        return self.pattern == other.pattern and self.flags == other.flags

    def __hash__(self) -> int:
        return hash((self.pattern, self.flags))

    def __repr__(self) -> str:
        return f"PerlRegexp({self.pattern!r}, {self.flags!r})"
