"""Cherry-picking one-liners for plugin authors: safe nested access, selection, filters.

Events are schema-less: any field may be missing or of an unexpected kind. These
helpers never raise on a missing or oddly-shaped branch; they return the default. The
one exception: a field the substream did not declare in ``@substream(fields=...)``
raises ``UndeclaredField`` (``substreams/declared.py``: its events answer ``get`` and
``in`` that way), so it never reads as missing.

    dig(e, "http.status")                  # e["http"]["status"] or None
    dig(e, "items.0.price", 0)             # list indices by number
    pick(e, "http.url", "http.status")     # {"http.url": ..., "http.status": ...}
    where(events, type="web", **{"http.status": 503})
    count_by(events, "host")               # {"web-1": 10, ...}

Pure logic, no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

__all__ = ["MISSING", "count_by", "dig", "pick", "where"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: The default of :func:`dig` that lets a caller tell "absent" from "None".
MISSING: Any = _Missing()


def dig(event: Any, path: str, default: Any = None) -> Any:
    """Safe nested access by a dotted path.

    Args:
        event: a dict (or anything; non-containers yield ``default``).
        path: ``"a.b.c"``; a part that is a decimal number indexes a list.
        default: returned when any step is missing or not a container.

    Returns:
        The value at ``path``, or ``default``.
    """
    if isinstance(event, dict) and "." not in path:  # the common case: one plain field
        # A declared event's get (compiled) raises for a field it did not declare.
        return event.get(path, default)
    node = event
    for part, index in _steps(path):
        if isinstance(node, Mapping):
            if part not in node:  # a declared event's `in` raises for an undeclared part
                return default
            node = node[part]
        elif index is not None and isinstance(node, list | tuple):
            if not -len(node) <= index < len(node):
                return default
            node = node[index]
        else:
            return default
    return node


@lru_cache(maxsize=4096)
def _steps(path: str) -> tuple[tuple[str, int | None], ...]:
    """A dotted path split once: each part, and its list index when it is a number."""
    return tuple((part, _index(part)) for part in path.split("."))


def _index(part: str) -> int | None:
    try:
        return int(part) if part.lstrip("-").isdigit() else None
    except ValueError:  # "--1"
        return None


def pick(event: Any, *paths: str, rename: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Select fields by dotted path; absent ones are left out.

    Args:
        event: the event.
        paths: dotted paths to keep.
        rename: path -> output name (default: the path itself).

    Returns:
        A flat dict of the selected values.
    """
    names = rename or {}
    out: dict[str, Any] = {}
    for path in paths:
        value = dig(event, path, MISSING)
        if value is not MISSING:
            out[names.get(path, path)] = value
    return out


def where(
    events: Iterable[Any], predicate: Callable[[Any], bool] | None = None, **equals: Any
) -> list[Any]:
    """Filter events: those for which ``predicate`` is true and every ``path == value``.

    Args:
        events: the events.
        predicate: an optional test; an exception in it counts as False for that event.
        equals: dotted path (as keyword, ``**{"http.status": 500}`` for dots) -> value.

    Returns:
        The matching events, in order.
    """
    out = []
    for event in events:
        if any(dig(event, path, MISSING) != value for path, value in equals.items()):
            continue
        if predicate is not None:
            try:
                if not predicate(event):
                    continue
            except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                continue
        out.append(event)
    return out


def count_by(events: Iterable[Any], *paths: str, missing: str = "") -> dict[str, int]:
    """Count events by the values at ``paths`` joined with ``"|"``.

    Args:
        events: the events.
        paths: dotted paths whose values form the group.
        missing: written for an absent value.

    Returns:
        group -> count, in order of first appearance.
    """
    if len(paths) == 1:
        (path,) = paths
        counts = Counter(str(dig(event, path, missing)) for event in events)
    else:
        counts = Counter("|".join(str(dig(event, p, missing)) for p in paths) for event in events)
    return dict(counts)
