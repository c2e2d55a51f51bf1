"""The declared-fields contract, enforced: events on which reading an undeclared field
raises :class:`~substreams.errors.UndeclaredField` instead of answering None.

A substream declaring ``fields=[...]`` is given its events narrowed to those fields
(``eventstore/sereal/projection.py``). Narrowed alone, a read of a field it did not
declare would answer as if the field were absent (``dig`` and ``.get`` say None), the
same everywhere, and nobody would notice. So each event (and each dict a declared path
narrows, ``"search.city"``: ``search``) is given as a :class:`DeclaredEvent`, a ``dict``
subclass that knows which keys its level declares:

- ``e["k"]``, ``e.get("k")``, ``"k" in e`` and ``dig(e, "k")`` (so ``pick``, ``where``
  and ``count_by``) raise ``UndeclaredField`` naming the field and the declared list
  when ``k`` is not declared at that level;
- a declared key the event lacks behaves as on a plain dict (``KeyError``, the default,
  False);
- everything else (iteration, ``len``, ``items``, ``==``, encoding a returned event) is
  the plain dict's.

``UndeclaredField`` is not a ``KeyError``: ``except KeyError`` in a plugin (or
``where``'s predicate) does not swallow it. The run ends in status ``error``
(``exception: UndeclaredField: ...``) in the companion, in the consumer's fallback and
in ``substream test`` alike.

Cost (substreams/DESIGN.md, "Declared fields"): one ``dict`` subclass instance per
event and field set (a copy of the narrowed dict, ~0.07 us per event), and a Python
call per ``.get``/``in`` on an event; ``dig`` and ``e["k"]`` of a present key cost
what they cost on a plain dict. A substream declaring no ``fields`` gets plain dicts.

Pure logic, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from substreams.errors import UndeclaredField

if TYPE_CHECKING:
    from eventstore.sereal.projection import Tree

__all__ = ["DeclaredEvent", "declared_events", "undeclared"]

_MISSING: Any = object()
_get = dict.get
_contains = dict.__contains__
_setitem = dict.__setitem__


class DeclaredEvent(dict[str, Any]):
    """An event (or a narrowed sub-dict of one) that refuses undeclared fields.

    Class attributes (one subclass per declaration and level, see :func:`_class_for`):
    ``declared`` the keys declared at this level, ``prefix`` the dotted path of this
    level (``""`` for the event), ``fields`` the substream's declared paths.
    """

    __slots__ = ()
    declared: ClassVar[frozenset[str]] = frozenset()
    prefix: ClassVar[str] = ""
    fields: ClassVar[tuple[str, ...]] = ()

    def __missing__(self, key: Any) -> Any:
        if key in self.declared:
            raise KeyError(key)
        raise undeclared(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        value = _get(self, key, _MISSING)
        if value is _MISSING:
            if key in self.declared:
                return default
            raise undeclared(self, key)
        return value

    def __contains__(self, key: object) -> bool:
        if _contains(self, key):
            return True
        if key in self.declared:
            return False
        raise undeclared(self, key)


def undeclared(event: DeclaredEvent, key: Any) -> UndeclaredField:
    """The error for reading ``key`` at ``event``'s level."""
    path = f"{event.prefix}.{key}" if event.prefix else str(key)
    declared = ", ".join(event.fields) or "none"
    return UndeclaredField(
        f"field {path!r} is not declared (declared fields: {declared}); "
        f"add {path!r} to @substream(fields=[...])"
    )


_CLASSES: dict[tuple[tuple[str, ...], str, frozenset[str]], type[DeclaredEvent]] = {}


def _class_for(fields: tuple[str, ...], prefix: str, tree: Tree) -> type[DeclaredEvent]:
    """The subclass for one level of one declaration (made once per process)."""
    declared = frozenset(tree)
    key = (fields, prefix, declared)
    cls = _CLASSES.get(key)
    if cls is None:
        namespace = {"__slots__": (), "declared": declared, "prefix": prefix, "fields": fields}
        cls = _CLASSES[key] = type("DeclaredEvent", (DeclaredEvent,), namespace)
    return cls


def declared_events(
    events: list[Any], fields: Sequence[str] | None, tree: Tree | None
) -> list[Any]:
    """``events`` (already narrowed to ``tree``) as :class:`DeclaredEvent` s.

    Args:
        events: the events narrowed to ``tree`` (a non-dict item is kept as it is).
        fields: the substream's declared paths (None: it reads every field, and
            ``events`` is returned as it is).
        tree: the compiled declaration (``Substream.projection``).

    Returns:
        A new list; the events are new dicts (the ones given are not changed).
    """
    if fields is None or tree is None:
        return events
    return _guard(events, tuple(fields), "", tree)


def _guard(items: list[Any], fields: tuple[str, ...], prefix: str, tree: Tree) -> list[Any]:
    cls = _class_for(fields, prefix, tree)
    try:
        out = list(map(cls, items))  # every item a dict: the common case, ~30% cheaper
    except (TypeError, ValueError):
        out = [cls(e) if type(e) is dict else e for e in items]
    else:
        if not all(type(e) is dict for e in items):  # a list of pairs made into a dict
            out = [cls(e) if type(e) is dict else e for e in items]
    for key, subtree in tree.items():
        if not subtree:  # kept whole: a value named by a path, or one it steps into
            continue
        parents = [e for e in out if type(_get(e, key)) is dict]
        if parents:
            path = f"{prefix}.{key}" if prefix else key
            inner = _guard([_get(e, key) for e in parents], fields, path, subtree)
            for parent, value in zip(parents, inner, strict=True):
                _setitem(parent, key, value)
    return out
