"""The declared-fields contract, enforced: events on which reading an undeclared field
raises :class:`~substreams.errors.UndeclaredField` instead of answering None.

A substream declaring ``fields=[...]`` is given its events narrowed to those fields
(``sereal_codec/projection.py``). Narrowed alone, a read of a field it did not
declare would answer as if the field were absent (``dig`` and ``.get`` say None), the
same everywhere, and nobody would notice. So its events are narrowed by a *strict*
projection (``project_events(events, tree, strict=...)``): each event, and each dict a
declared path narrows (``"search.city"``: ``search``), is a ``StrictDict``, a ``dict``
subclass that knows which keys its level declares:

- ``e["k"]``, ``e.get("k")``, ``"k" in e`` and ``dig(e, "k")`` (so ``pick``, ``where``
  and ``count_by``) raise ``UndeclaredField`` naming the field and the declared list
  when ``k`` is not declared at that level, even when the event holds it (decoded
  for another substream of the chunk);
- a declared key the event lacks behaves as on a plain dict (``KeyError``, the default,
  False);
- everything else (iteration, ``len``, ``items``, ``==``, encoding a returned event,
  ``copy.copy``) is the plain dict's.

``UndeclaredField`` is not a ``KeyError``: ``except KeyError`` in a plugin (or
``where``'s predicate) does not swallow it. The run ends in status ``error``
(``exception: UndeclaredField: ...``) in the companion, in the consumer's fallback and
in ``substream test`` alike.

Cost (substreams/DESIGN.md, "Declared fields"): none beyond the narrowing. The compiled
core builds each narrowed dict as a ``StrictDict`` in the narrowing's own walk (one
allocation per event, as a plain narrowed dict) and its ``get``, ``in`` and ``[]`` are
C; only a miss looks at the declaration, and only an undeclared key calls back here
for the message. A substream declaring no ``fields`` gets plain dicts.

Pure logic, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sereal_codec.projection import Refuse, Tree, project_events
from substreams.errors import UndeclaredField

__all__ = ["declared_events", "refusal"]


def refusal(fields: Sequence[str]) -> Refuse:
    """The strict projection's refusal for a substream declaring ``fields``: the
    :class:`UndeclaredField` naming the path read and the declared ones."""
    declared = ", ".join(fields) or "none"

    def refuse(path: tuple[Any, ...], key: Any) -> UndeclaredField:
        dotted = ".".join((*map(str, path), str(key)))
        return UndeclaredField(
            f"field {dotted!r} is not declared (declared fields: {declared}); "
            f"add {dotted!r} to @substream(fields=[...])"
        )

    return refuse


def declared_events(
    events: list[Any], fields: Sequence[str] | None, tree: Tree | None
) -> list[Any]:
    """``events`` narrowed to ``tree``, strictly (each narrowed dict refuses the keys
    ``fields`` does not declare).

    Args:
        events: the events, whole or narrowed to any tree containing ``tree`` (a
            non-dict item is kept as it is).
        fields: the substream's declared paths (None: it reads every field, and
            ``events`` is returned as it is).
        tree: the compiled declaration (``Substream.projection``).

    Returns:
        A new list of new dicts (the ones given are not changed).
    """
    if fields is None or tree is None:
        return events
    return project_events(events, tree, strict=refusal(fields))
