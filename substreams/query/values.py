"""What a query makes of the values it finds in events: the one place that says it.

Events are schema-less, so a query meets every kind of value at every path. Each value
falls in one of four classes for comparisons (``substreams/DESIGN.md``, "Declarative
substreams", "Semantics"):

- NULL: a missing field, ``None`` (Perl's undef), a float NaN;
- NUMBER: ``int``, ``float`` and ``bool`` (TRUE and FALSE are 1 and 0, as in Perl and
  Python); an int and a float compare by value (``500 = 500.0``);
- TEXT: ``str``, and ``bytes`` read as the codec's default mode reads a Perl byte
  string (UTF-8; a stray byte as ``surrogateescape`` keeps it), so a query gives the
  same answer whichever mode decoded the chunk;
- OTHER: a list, a dict, a Perl object, reference or regexp: equal to nothing.

Pure logic, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from substreams.query.plan import Path

__all__ = [
    "KINDS",
    "NULL",
    "NUMBER",
    "OTHER",
    "TEXT",
    "getter",
    "group_key",
    "order_key",
    "scalar",
    "typeof",
]

NULL: Final = 0
NUMBER: Final = 1
TEXT: Final = 2
OTHER: Final = 3

#: What ``typeof(path)`` answers.
KINDS = ("null", "boolean", "integer", "float", "text", "list", "map", "other")


def scalar(value: Any) -> tuple[int, Any]:
    """``(class, comparable value)`` of an event's value: NULL, NUMBER, TEXT or OTHER."""
    if value is None:
        return NULL, None
    if isinstance(value, str):
        return TEXT, value
    if isinstance(value, bool | int):
        return NUMBER, value
    if isinstance(value, float):
        return (NULL, None) if math.isnan(value) else (NUMBER, value)
    if isinstance(value, bytes | bytearray):
        return TEXT, bytes(value).decode("utf-8", "surrogateescape")
    return OTHER, value


def typeof(value: Any) -> str:
    """The kind ``typeof(path)`` names: one of :data:`KINDS`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "null" if math.isnan(value) else "float"
    if isinstance(value, str | bytes | bytearray):
        return "text"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, dict):
        return "map"
    return "other"


def group_key(value: Any) -> tuple[Any, ...]:
    """The group an event's value falls in: NULL, a container and NaN all in the NULL
    group; otherwise the value with its kind, so ``1``, ``1.0`` and ``TRUE`` are three
    groups (a query never converts a value), and a ``str`` and the ``bytes`` of its
    UTF-8 one."""
    kind = typeof(value)
    if kind in ("null", "list", "map", "other"):
        return ("null",)
    if kind == "text":
        return ("text", scalar(value)[1])
    return (kind, value)


def order_key(value: Any) -> tuple[int, Any] | None:
    """How ``min`` and ``max`` order values: numbers by value, before texts by code
    point; None for a value they skip (NULL, a container)."""
    kind, v = scalar(value)
    if kind == NUMBER:
        return (0, v)
    if kind == TEXT:
        return (1, v)
    return None


def _index(part: str) -> int | None:
    try:
        return int(part) if part.lstrip("-").isdigit() else None
    except ValueError:  # "--1"
        return None


def getter(path: Path) -> Callable[[Any], Any]:
    """A function from an event to the value at ``path`` (None where it is missing), by
    ``dig``'s rule: a dict steps by key, a list or tuple by a part that is a number
    (negative from the end), anything else ends the path as missing."""
    if len(path.parts) == 1:
        (key,) = path.parts

        def get_one(event: Any) -> Any:
            return dict.get(event, key) if isinstance(event, dict) else None

        return get_one
    steps = tuple((part, _index(part)) for part in path.parts)

    def get_path(event: Any) -> Any:
        node = event
        for part, index in steps:
            if isinstance(node, dict):
                # dict.get: a declared event's own get refuses undeclared keys; the plan
                # reads only the paths it declared, so the plain lookup is the same.
                node = dict.get(node, part)
                if node is None:
                    return None
            elif index is not None and isinstance(node, list | tuple):
                if not -len(node) <= index < len(node):
                    return None
                node = node[index]
            else:
                return None
        return node

    return get_path
