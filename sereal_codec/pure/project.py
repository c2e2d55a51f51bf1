"""Projected decoding in the pure reference: the events of an array body narrowed to a
projection tree while they are read (``sereal_codec/DESIGN.md``, "Projection").

The result is ``project_events(full decode, tree)`` for an array body (the body itself
otherwise), and the errors are a full decode's: every byte is walked and checked in the
same order with the same checks. What is not kept is walked by :func:`_skip`, which
builds nothing that is charged to the object budget, except for two kinds of item that
later back-references may need as decoded: an item with the F bit (a REFP or ALIAS may
name it) and an object (OBJECT*: it registers its class name and the blessing of its
referent). Those are decoded in full wherever they are, as a full decode would, and
charged. The compiled core (``csrc/decode_project.c``) follows this module step by step.
"""

from __future__ import annotations

from typing import Any

from sereal_codec import tags
from sereal_codec.errors import BadBackReference, TruncatedInput
from sereal_codec.projection import Tree, check_tree, project
from sereal_codec.pure.decoder import _HANDLERS, _Decoder, _unknown, decode_item, new_decoder
from sereal_codec.pure.recursion import room_for

__all__ = ["decode_body", "decode_projected"]

_F = tags.TRACK_FLAG
_OBJECT_TAGS = frozenset({tags.OBJECT, tags.OBJECTV, tags.OBJECT_FREEZE, tags.OBJECTV_FREEZE})
# Tags whose F bit means nothing (the full decoder treats them as without it).
_F_IGNORED = frozenset({tags.PAD, *(t for t in range(0x80) if _HANDLERS[t] is _unknown)})


def decode_body(  # noqa: PLR0917  (the body-codec contract, DESIGN.md)
    data: bytes,
    pos: int,
    end: int,
    base: int,
    binary: int,
    max_depth: int,
    max_objects: int = -1,
    projection: Tree | None = None,
) -> tuple[Any, int]:
    """The pure codec's ``decode_body``: one tagged item (after any PAD bytes) starting
    at ``data[pos]``, each element of a top-level array narrowed to ``projection`` (a
    compiled tree, :func:`sereal_codec.projection.compile_fields`; None: everything),
    skipping the rest (DESIGN.md, "Projection").

    Args:
        data: the buffer holding the body (a document, or a decompressed body).
        pos: index of the body's first byte; nothing before it is ever read.
        end: index one past the last byte that may be read.
        base: a back-reference offset ``o`` denotes ``data[base + o]`` (protocol 2+:
            ``pos - 1``; protocol 1: index of the document's first byte, negative for a
            decompressed body).
        binary: ``tags.BINARY_UTF8``, ``BINARY_LATIN1`` or ``BINARY_BYTES``.
        max_depth: nesting levels allowed (see DESIGN.md, "Depth").
        max_objects: objects the decode may build, counted as DESIGN.md ("Bounded
            decoding") says; -1 for no limit.
        projection: the tree, or None.

    Returns:
        ``(value, index just after the item)``. Trailing bytes are the caller's concern.

    Raises:
        SerealDecodeError: a subclass naming the problem, with the offset into ``data``
            (:class:`DecodeBudgetExceeded` past ``max_objects``).
        ValueError: an argument out of its domain; a ``projection`` that is not a tree
            (checked first).
    """
    if projection is not None:
        check_tree(projection)
    dec = new_decoder(data, pos, end, base, binary, max_depth, max_objects)
    if projection is None:
        return decode_item(dec, pos)
    # Up to six frames per level: PAD, handler, REFN, container, fill loop.
    with room_for(6 * max_depth):
        return decode_projected(dec, pos, projection)


def decode_projected(dec: _Decoder, pos: int, tree: Tree) -> tuple[Any, int]:
    """The body item at ``pos`` (the first byte of the body, maybe a PAD), each element
    of a top-level array narrowed to ``tree``."""
    data = dec.data
    p = _past_pad(dec, pos)
    if p < dec.end and not data[p] & _F:
        tag = data[p]
        if tag == tags.ARRAY:
            return _array(dec, p, p, 0, tree)
        if tags.ARRAYREF_LOW <= tag < tags.HASHREF_LOW:
            dec.enter(p, 0)
            n = tag & 0x0F
            if n > dec.end - p - 1:
                raise TruncatedInput(f"count {n} exceeds the remaining input", dec.end)
            return _events(dec, p, n, p + 1, 1, tree)
        if tag == tags.REFN:
            q = _past_pad(dec, p + 1)
            if q < dec.end and data[q] == tags.ARRAY:
                return _array(dec, p, q, 0, tree)
    value, after = _HANDLERS[data[pos]](dec, pos, 0)
    if isinstance(value, list):
        value = [project(e, tree) for e in value]
    return value, after


def _past_pad(dec: _Decoder, pos: int) -> int:
    """The first non-PAD position at or after ``pos`` (maybe ``end``); raises nothing."""
    data = dec.data
    while pos < dec.end and data[pos] & 0x7F == tags.PAD:
        pos += 1
    return pos


def _array(dec: _Decoder, tagpos: int, q: int, depth: int, tree: Tree) -> tuple[Any, int]:
    """The untracked ARRAY at ``q`` (``tagpos``: the REFN before it, or ``q``)."""
    dec.enter(tagpos, depth)
    n, p = dec.counted(q + 1, 1)
    return _events(dec, q, n, p, depth + 1, tree)


def _events(  # noqa: PLR0917
    dec: _Decoder, tagpos: int, n: int, p: int, depth: int, tree: Tree
) -> tuple[Any, int]:
    dec.charge(tagpos, 1 + n)  # the list and its slots, as a full decode charges them
    out: list[Any] = [None] * n
    end = dec.end
    for i in range(n):
        if p >= end:
            raise TruncatedInput("input ends inside an array", end)
        out[i], p = _value(dec, p, depth, tree)
    return out, p


def _value(dec: _Decoder, pos: int, depth: int, tree: Tree) -> tuple[Any, int]:
    """The item at ``pos`` narrowed to ``tree``: an untracked hash is read key by key;
    anything else is decoded in full (then narrowed if it is a dict)."""
    data = dec.data
    p = _past_pad(dec, pos)
    if p < dec.end and not data[p] & _F:
        tag = data[p]
        if tag == tags.HASH:
            dec.enter(p, depth)
            n, after = dec.counted(p + 1, 2)
            return _hash(dec, p, n, after, depth + 1, tree)
        if tags.HASHREF_LOW <= tag < tags.SHORT_BINARY_LOW:
            dec.enter(p, depth)
            n = tag & 0x0F
            if 2 * n > dec.end - p - 1:
                raise TruncatedInput(f"count {n} exceeds the remaining input", dec.end)
            return _hash(dec, p, n, p + 1, depth + 1, tree)
        if tag == tags.REFN:
            q = _past_pad(dec, p + 1)
            if q < dec.end and data[q] == tags.HASH:
                dec.enter(p, depth)
                n, after = dec.counted(q + 1, 2)
                return _hash(dec, q, n, after, depth + 1, tree)
    value, after = _HANDLERS[data[pos]](dec, pos, depth)
    return project(value, tree), after


def _hash(  # noqa: PLR0917
    dec: _Decoder, tagpos: int, n: int, p: int, depth: int, tree: Tree
) -> tuple[Any, int]:
    """The ``n`` pairs at ``p`` of the untracked hash at ``tagpos``, only the keys in
    ``tree`` kept. Charges the dict at its tag, then a key and a value per kept pair."""
    dec.charge(tagpos, 1)
    out: dict[str, Any] = {}
    data = dec.data
    for _ in range(n):
        key, p = dec.hash_key(p)
        if key in tree:
            dec.charge(tagpos, 2)
            sub = tree[key]
            if sub is None:
                out[key], p = _HANDLERS[data[p]](dec, p, depth)
            else:
                out[key], p = _value(dec, p, depth, sub)
        else:
            p = _skip(dec, p, depth)
    return out, p


def _skip(dec: _Decoder, pos: int, depth: int) -> int:
    """Walk the item at ``pos`` (``pos < end``) as a full decode would read it, without
    building what it would charge; return the position after it."""
    data = dec.data
    byte = data[pos]
    tag = byte & 0x7F
    if (byte & _F and tag not in _F_IGNORED) or tag in _OBJECT_TAGS:
        return _HANDLERS[byte](dec, pos, depth)[1]  # decoded in full: see the module doc
    if tag == tags.PAD:
        q = dec.skip_pad(pos)
        return _skip(dec, q, depth)
    if tags.ARRAYREF_LOW <= tag < tags.SHORT_BINARY_LOW:
        dec.enter(pos, depth)
        n = tag & 0x0F
        per = 1 if tag < tags.HASHREF_LOW else 2
        if per * n > dec.end - pos - 1:
            raise TruncatedInput(f"count {n} exceeds the remaining input", dec.end)
        return _skip_items(dec, n, pos + 1, depth + 1, per == 2)
    if tag in (tags.ARRAY, tags.HASH):
        dec.enter(pos, depth)
        return _skip_container(dec, pos, depth + 1)
    if tag == tags.REFN:
        dec.enter(pos, depth)
        q = dec.skip_pad(pos + 1)
        if data[q] & _F and data[q] & 0x7F in (tags.ARRAY, tags.HASH):
            return dec.container(q, depth + 1, ())[1]  # tracked: decoded in full
        if data[q] in (tags.ARRAY, tags.HASH):
            return _skip_container(dec, q, depth + 1)
        return _skip(dec, q, depth + 1)
    if tag == tags.REFP:
        offset, after = dec.varint(pos + 1)
        if dec.base + offset not in dec.tracked:
            raise BadBackReference(f"REFP offset {offset} is not a tracked item", pos)
        return after
    if tag == tags.WEAKEN:
        dec.enter(pos, depth)
        if pos + 1 >= dec.end:
            raise TruncatedInput("input ends where a tag was expected", dec.end)
        return _skip(dec, pos + 1, depth + 1)
    if tag == tags.REGEXP:
        _, _, p = dec.text_item(pos + 1)
        return dec.text_item(p)[2]
    # Scalars, strings, COPY and ALIAS: no charge, nothing to save.
    return _HANDLERS[tag](dec, pos, depth)[1]


def _skip_container(dec: _Decoder, pos: int, depth: int) -> int:
    """The untracked ARRAY or HASH at ``pos``; ``depth`` already counts its level."""
    if dec.data[pos] & 0x7F == tags.ARRAY:
        n, p = dec.counted(pos + 1, 1)
        return _skip_items(dec, n, p, depth, False)
    n, p = dec.counted(pos + 1, 2)
    return _skip_items(dec, n, p, depth, True)


def _skip_items(dec: _Decoder, n: int, p: int, depth: int, pairs: bool) -> int:
    end = dec.end
    for _ in range(n):
        if pairs:
            p = dec.text_item(p)[2]
        if p >= end:
            raise TruncatedInput("input ends inside a container", end)
        p = _skip(dec, p, depth)
    return p
