"""Projection: the fields of each event a reader asks for (issue 16).

A *field* is a dotted path (``"status"``, ``"http.latency_ms"``), as the substream
helper ``dig`` takes it; a tuple of parts names a key holding a dot
(``("a.b", "c")``). A set of fields compiles to a *tree*: a dict from key to either
``None`` (keep the whole value) or a subtree (keep only those keys of a dict value)::

    compile_fields(["status", "http.latency_ms", "http.status"])
    == {"status": None, "http": {"latency_ms": None, "status": None}}

Projecting a value by a tree (:func:`project`), the rule every implementation follows
(this module, the pure decoder, the compiled decoder; ``DESIGN.md``, "Projection"):

- a ``dict`` keeps only the keys the tree names, in the order it has them; a kept key
  whose subtree is a dict is projected by it in turn, one marked ``None`` is kept whole;
- anything else (a list, a scalar, a ``PerlObject``, a ``PerlRef`` to a scalar) is kept
  whole: a path that steps into it is not narrowed further.

So for every declared path ``p`` and every path ``q`` that starts with ``p``,
``dig(project(e, tree), q) == dig(e, q)``: a plugin that reads only what it declared
sees the same values either way. A decoder applies the tree to each element of the
body's top-level array (the events); a body that is not an array is not projected.

``fields=None`` means everything (no projection); ``fields=[]`` keeps no key at all.

A *strict* projection (``project_events(events, tree, strict=refuse)``) also says
what was left out: each dict it narrows is a :class:`StrictDict` (the compiled core's
own type where it is built), on which reading a key the tree does not name at that
level (``d[k]``, ``d.get(k)``, ``k in d``) raises ``refuse(path, k)`` (``path``: the
keys from the event down to that dict); a key the tree names that the dict lacks reads
as on a plain dict, and everything else (iteration, ``==``, encoding) is a dict's. The
substreams' declared fields are enforced this way (``substreams/declared.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sereal_codec.limits import MAX_DEPTH_CAP

__all__ = [
    "Field",
    "Refuse",
    "StrictDict",
    "Tree",
    "check_tree",
    "compile_fields",
    "merge",
    "project",
    "project_events",
]

#: One field: a dotted path, or its parts.
Field = str | Sequence[str]
#: A compiled projection: key -> None (whole value) or a subtree.
Tree = dict[str, Any]
#: A strict projection's refusal: ``refuse(path, key)`` is the exception to raise for
#: reading ``key``, not in the tree, of the dict at ``path`` (``()``: the event).
Refuse = Callable[[tuple[Any, ...], Any], BaseException]


def _parts(field: Field) -> tuple[str, ...]:
    if isinstance(field, str):
        parts = tuple(field.split("."))
    elif isinstance(field, Sequence) and all(isinstance(p, str) for p in field):
        parts = tuple(field)
    else:
        raise ValueError(f"a field is a dotted path or a sequence of keys, not {field!r}")
    if not parts or any(p == "" for p in parts):
        raise ValueError(f"field {field!r} has an empty part")
    return parts


def compile_fields(fields: Iterable[Field] | None) -> Tree | None:
    """The tree of ``fields`` (``None``: no projection).

    Raises:
        ValueError: a field that is not a non-empty dotted path or sequence of keys,
            or ``fields`` given as one string (a list of one is meant).
    """
    if fields is None:
        return None
    if isinstance(fields, str):
        raise ValueError(f"fields must be a list of paths, not the string {fields!r}")
    tree: Tree = {}
    for field in fields:
        node = tree
        parts = _parts(field)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if part in node and node[part] is None:
                break  # the whole value is already kept
            if last:
                node[part] = None
            else:
                node = node.setdefault(part, {})
    return tree


def merge(trees: Iterable[Tree | None]) -> Tree | None:
    """The union of trees: what any of them keeps (``None`` in any: everything)."""
    out: Tree = {}
    for tree in trees:
        if tree is None:
            return None
        _merge_into(out, tree)
    return out


def _merge_into(out: Tree, tree: Tree) -> None:
    for key, sub in tree.items():
        if sub is None or (key in out and out[key] is None):
            out[key] = None
        elif key in out:
            _merge_into(out[key], sub)
        else:
            out[key] = {}
            _merge_into(out[key], sub)


def project(value: Any, tree: Tree | None) -> Any:
    """``value`` narrowed to ``tree`` (see the module's rule); a new dict where one is
    narrowed, the same objects elsewhere."""
    if tree is None or not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key in tree:
            sub = tree[key]
            out[key] = item if sub is None else project(item, sub)
    return out


_MISSING: Any = object()
#: A StrictDict's level: the keys declared there, its path, the refusal.
_Level = tuple[frozenset[Any], tuple[Any, ...], Refuse]


class StrictDict(dict[Any, Any]):
    """A dict narrowed by a strict projection (the reference of the compiled core's
    ``StrictDict``, used where the core is not built): reading a key not declared at
    its level raises the refusal's exception, a declared one it lacks reads as on a
    plain dict. One made without a level (``StrictDict()``) is a plain dict."""

    __slots__ = ("_level",)
    _level: _Level | None

    def _check(self, key: Any) -> None:
        level: _Level | None = getattr(self, "_level", None)
        if level is None or key in level[0]:
            return
        error = level[2](level[1], key)
        if not isinstance(error, BaseException):
            raise TypeError(f"strict(path, key) returns an exception, not {type(error).__name__}")
        raise error

    def __missing__(self, key: Any) -> Any:
        self._check(key)
        raise KeyError(key)

    def get(self, key: Any, default: Any = None) -> Any:
        value = dict.get(self, key, _MISSING)
        if value is _MISSING:
            self._check(key)
            return default
        return value

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        self._check(key)
        return False

    def __reduce__(self) -> Any:  # copy.copy and copy.deepcopy keep the level
        return (_strict, (getattr(self, "_level", None),), None, None, iter(self.items()))


def _strict(level: _Level | None) -> StrictDict:
    out = StrictDict()
    out._level = level
    return out


def _project_strict(value: Any, tree: Tree, level: _Level) -> Any:
    """:func:`project` making each narrowed dict a :class:`StrictDict` at ``level``."""
    if not isinstance(value, dict):
        return value
    out = _strict(level)
    for key, item in value.items():
        if key in tree:
            sub = tree[key]
            if sub is None:
                out[key] = item
            else:
                out[key] = _project_strict(item, sub, (frozenset(sub), (*level[1], key), level[2]))
    return out


def _project_events_py(
    events: list[Any], tree: Tree | None, *, strict: Refuse | None = None
) -> list[Any]:
    """The reference of :func:`project_events` (used where the core is not built)."""
    if tree is None:
        return events
    check_tree(tree)
    if strict is None:
        return [project(e, tree) for e in events]
    if not callable(strict):
        raise TypeError(f"strict is None or a callable, not {type(strict).__name__}")
    level: _Level = (frozenset(tree), (), strict)
    return [_project_strict(e, tree, level) for e in events]


def check_tree(tree: Any) -> None:
    """Raise ValueError unless ``tree`` is a projection tree: dicts from str to None or
    a tree, at most ``MAX_DEPTH_CAP`` deep (the compiled core's check too,
    ``csrc/decode_project.c``, so every implementation refuses alike)."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict):
            raise ValueError(f"a projection tree is a dict, not {type(node).__name__}")
        if depth > MAX_DEPTH_CAP:
            raise ValueError(f"projection tree deeper than {MAX_DEPTH_CAP}")
        for key, sub in node.items():
            if type(key) is not str:
                raise ValueError(f"projection keys are str, not {type(key).__name__}")
            if sub is not None:
                stack.append((sub, depth + 1))


def project_events(
    events: list[Any], tree: Tree | None, *, strict: Refuse | None = None
) -> list[Any]:
    """Each event projected by :func:`project` (the list itself when ``tree`` is
    ``None``); compiled in the Sereal core when it is built (``csrc/project_events.c``).

    Args:
        events: the events (a non-dict item is kept as it is).
        tree: the compiled fields (:func:`compile_fields`); None: no projection.
        strict: None, or the refusal of a strict projection (module docstring): each
            narrowed dict is then a ``StrictDict`` raising ``strict(path, key)`` for a
            key the tree does not name. As fast as the plain projection in the core
            (one allocation per narrowed dict, C ``get`` / ``in`` / ``[]``).

    Raises:
        ValueError: ``tree`` is not a tree: dicts from str to None or a tree, at most
            ``MAX_DEPTH_CAP`` deep.
        TypeError: ``strict`` is not callable.
    """
    return _project_events(events, tree, strict=strict)


_project_events: Callable[..., list[Any]]
try:
    # Looked up by name, as sereal_codec's __init__ looks the core up: an import
    # statement of the extension would count as one of the package (test_import_graph).
    _project_events = importlib.import_module("sereal_codec._sereal").project_events
except ImportError:  # the core is not built: the reference
    _project_events = _project_events_py
