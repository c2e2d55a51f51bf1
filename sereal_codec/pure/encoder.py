"""Pure-Python Sereal body encoder: the reference the compiled core is tested against.

One entry point, :func:`encode_body`. The bytes it writes are specified to the byte in
``sereal_codec/DESIGN.md`` (section "Python mapping", Encoding): the compiled
core must produce exactly the same, so every choice here (which tag, when to COPY,
where the F bit goes) follows that table rather than taste.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from sereal_codec import tags
from sereal_codec.compression import varint_bytes
from sereal_codec.errors import EncodeDepthExceeded, UnencodableValue
from sereal_codec.limits import check_max_depth
from sereal_codec.pure.recursion import room_for
from sereal_codec.types import PerlObject, PerlRef, PerlRegexp

__all__ = ["encode_body", "varint"]

_UINT64_MAX = (1 << 64) - 1
_INT64_MIN = -(1 << 63)
_pack_double = struct.Struct("<d").pack
_REGEXP_CLASS = "Regexp"
_NESTING_TYPES = (list, tuple, dict, PerlRef, PerlObject)


def varint(value: int) -> bytes:
    """The canonical (shortest) varint of a non-negative integer."""
    return bytes((value,)) if value < 0x80 else varint_bytes(value)


def encode_body(obj: object, dedupe_strings: bool, max_depth: int) -> bytes:
    """Encode ``obj`` as one Sereal body with 1-based offsets (protocol 2+ layout).

    Args:
        obj: the value; see DESIGN.md for the accepted types.
        dedupe_strings: write a repeated string value as COPY when that is shorter
            (hash keys are always deduplicated).
        max_depth: nesting levels allowed, counted as the decoder counts them.

    Returns:
        The body bytes (no header, uncompressed).

    Raises:
        UnencodableValue: a value of an unsupported type, an int beyond 64 bits, a
            dict key that is not ``str``/``bytes``.
        EncodeDepthExceeded: the value nests deeper than ``max_depth``.
    """
    check_max_depth(max_depth)
    encoder = _Encoder(dedupe_strings, max_depth, _shared_objects(obj))
    with room_for(3 * max_depth):  # frames per level: item, container, key
        encoder.item(obj, 0)
    return bytes(encoder.out)


def _shared_objects(root: object) -> set[int]:
    """Ids of the lists, tuples, dicts, ``PerlRef`` and ``PerlObject`` objects
    reachable more than once from ``root`` (the root counts as one way).

    Iterative, and it descends into each object once, so cycles and deep values
    terminate here (depth is enforced by the encoding pass).
    """
    seen: set[int] = set()
    shared: set[int] = set()
    stack: list[Any] = [root]
    while stack:
        obj = stack.pop()
        key = id(obj)
        if key in seen:
            shared.add(key)
            continue
        if isinstance(obj, dict):
            children: Any = obj.values()
        elif isinstance(obj, (list, tuple)):
            children = obj
        elif isinstance(obj, (PerlRef, PerlObject)):
            children = (obj.value,)
        else:
            continue
        seen.add(key)
        stack.extend([c for c in children if isinstance(c, _NESTING_TYPES)])
    return shared


def _str_payload(s: str) -> tuple[bool, bytes]:
    """``(is_utf8, payload)`` for a ``str``: ASCII as binary, other text as UTF-8,
    surrogateescape'd bytes back to the very bytes they came from."""
    if s.isascii():
        return False, s.encode("ascii")
    try:
        return True, s.encode("utf-8")
    except UnicodeEncodeError:
        pass
    try:
        return False, s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return True, s.encode("utf-8", "surrogatepass")


def _literal(is_utf8: bool, payload: bytes) -> bytes:
    """The complete string item: SHORT_BINARY, BINARY or STR_UTF8."""
    n = len(payload)
    if is_utf8:
        return bytes((tags.STR_UTF8,)) + varint(n) + payload
    if n < 32:
        return bytes((tags.SHORT_BINARY_LOW | n,)) + payload
    return bytes((tags.BINARY,)) + varint(n) + payload


class _Encoder:
    """State of one body encode.

    Back-references (DESIGN.md, "Sharing"): ``again`` maps an object already written
    to the offset a later occurrence is written as ``REFP`` to (a container: its
    ARRAY/HASH tag; a ``PerlRef``: its referent; a ``PerlObject``: its blessed
    referent); ``own`` maps a shared object to the offset of its own first tag, the
    referent of a ``PerlRef`` to it. The F bit goes on a tag when the first ``REFP``
    to it is written (as Perl's encoder does), except on shared containers' ARRAY/HASH
    tags, which are written with it.
    """

    __slots__ = (
        "again",
        "binaries",
        "classes",
        "dedupe",
        "max_depth",
        "out",
        "own",
        "shared",
        "texts",
    )

    def __init__(self, dedupe: bool, max_depth: int, shared: set[int]) -> None:
        self.out = bytearray()
        self.dedupe = dedupe
        self.max_depth = max_depth
        self.shared = shared
        self.again: dict[int, int] = {}  # id -> offset a later occurrence REFPs to
        self.own: dict[int, int] = {}  # shared object id -> offset of its first tag
        # string -> what a later occurrence is written as (COPY when shorter, else the
        # literal again); str and bytes apart: "a" and b"a" are different strings.
        self.texts: dict[str, bytes] = {}
        self.binaries: dict[bytes, bytes] = {}
        self.classes: dict[str, int] = {}  # class name -> offset of its string tag

    def enter(self, depth: int, levels: int = 1) -> None:
        if depth + levels > self.max_depth:
            raise EncodeDepthExceeded(f"value nests deeper than max_depth={self.max_depth}")

    def item(self, obj: Any, depth: int) -> None:
        handler = _BY_TYPE.get(type(obj))
        if handler is None:
            handler = _by_base_type(obj)
        handler(self, obj, depth)

    def text(self, s: str) -> None:
        """Write a deduplicated ``str``: the first literal records its offset."""
        again = self.texts.get(s)
        if again is not None:
            self.out += again
            return
        literal = _literal(*_str_payload(s))
        self.texts[s] = self.repeat(literal)
        self.out += literal

    def binary(self, b: bytes) -> None:
        """Write deduplicated ``bytes``: the first literal records its offset."""
        again = self.binaries.get(b)
        if again is not None:
            self.out += again
            return
        literal = _literal(False, b)
        self.binaries[b] = self.repeat(literal)
        self.out += literal

    def repeat(self, literal: bytes) -> bytes:
        """What a later occurrence of ``literal`` (about to be written) is written as:
        COPY of this one when strictly shorter, else the literal again."""
        copy = bytes((tags.COPY,)) + varint(len(self.out) + 1)
        return copy if len(copy) < len(literal) else literal

    def key(self, k: Any) -> None:
        if type(k) is str:
            self.text(k)
        elif isinstance(k, str):
            self.text(str.__str__(k))
        elif isinstance(k, bytes):
            self.binary(bytes(k))
        else:
            raise UnencodableValue(f"dict key of type {type(k).__name__} (need str or bytes)")

    def refp(self, offset: int) -> None:
        """REFP ``offset``, setting the F bit on the tag there (the REFP itself when
        it names its own offset, as in ``$x = \\$x``)."""
        out = self.out
        out.append(tags.REFP)
        out += varint(offset)
        out[offset - 1] |= tags.TRACK_FLAG

    def shared_start(self, obj: Any, tag: int, owner: int = 0) -> bool:
        """For a shared container (or the value of a shared ``PerlObject``, whose id
        is ``owner``): write REFP if already written and return True; else write REFN
        + the tag with the F bit and record its offset."""
        ident = id(obj)
        offset = self.again.get(ident)
        out = self.out
        if offset is not None:
            self.refp(offset)
            if owner:
                self.again[owner] = offset
            return True
        if ident in self.shared:
            self.own[ident] = len(out) + 1
        out.append(tags.REFN)
        offset = len(out) + 1
        self.again[ident] = offset
        if owner:
            self.again[owner] = offset
        out.append(tag | tags.TRACK_FLAG)
        out += varint(len(obj))
        return False


def _none(enc: _Encoder, obj: Any, depth: int) -> None:
    enc.out.append(tags.UNDEF)


def _bool(enc: _Encoder, obj: Any, depth: int) -> None:
    enc.out.append(tags.TRUE if obj else tags.FALSE)


def _int(enc: _Encoder, obj: Any, depth: int) -> None:
    v = int(obj)
    out = enc.out
    if 0 <= v < 16:
        out.append(v)
    elif -16 <= v < 0:
        out.append(v + 32)
    elif v >= 16:
        if v > _UINT64_MAX:
            raise UnencodableValue(f"int {v} is beyond uint64")
        out.append(tags.VARINT)
        out += varint(v)
    else:
        if v < _INT64_MIN:
            raise UnencodableValue(f"int {v} is beyond int64")
        out.append(tags.ZIGZAG)
        out += varint(-2 * v - 1)  # zigzag of a negative int64


def _float(enc: _Encoder, obj: Any, depth: int) -> None:
    enc.out.append(tags.DOUBLE)
    enc.out += _pack_double(obj)


def _str(enc: _Encoder, obj: Any, depth: int) -> None:
    s = obj if type(obj) is str else str.__str__(obj)
    if enc.dedupe:
        enc.text(s)
    else:
        enc.out += _literal(*_str_payload(s))


def _bytes(enc: _Encoder, obj: Any, depth: int) -> None:
    b = obj if type(obj) is bytes else bytes(obj)
    if enc.dedupe:
        enc.binary(b)
    else:
        enc.out += _literal(False, b)


def _container_start(enc: _Encoder, obj: Any, depth: int, owner: int, tag: int) -> bool:
    """Open a list (``tag`` ARRAY) or dict (HASH): REFN + its tag and count, one byte
    ARRAYREF_n / HASHREF_n under 16 items, or the shared form; False when a shared
    container was already written (a REFP to it stands for it)."""
    enc.enter(depth)
    n = len(obj)
    if owner or id(obj) in enc.shared:
        return not enc.shared_start(obj, tag, owner)
    out = enc.out
    if n < 16:
        out.append((tags.ARRAYREF_LOW if tag == tags.ARRAY else tags.HASHREF_LOW) | n)
    else:
        out.append(tags.REFN)
        out.append(tag)
        out += varint(n)
    return True


def _list(enc: _Encoder, obj: Any, depth: int, owner: int = 0) -> None:
    if not _container_start(enc, obj, depth, owner, tags.ARRAY):
        return
    item = enc.item
    depth += 1
    for value in obj:
        item(value, depth)


def _dict(enc: _Encoder, obj: Any, depth: int, owner: int = 0) -> None:
    if not _container_start(enc, obj, depth, owner, tags.HASH):
        return
    item = enc.item
    key = enc.key
    depth += 1
    for k, value in obj.items():
        key(k)
        item(value, depth)


def _perl_ref(enc: _Encoder, obj: Any, depth: int, owner: int = 0) -> None:
    """A ``PerlRef``: REFN + its referent, or REFP to the referent when that is
    already written. ``owner``: the id of the shared ``PerlObject`` whose value this
    is (that object's blessed referent is this reference's referent)."""
    enc.enter(depth)
    ident = id(obj)
    again = enc.again
    referent = again.get(ident)
    if referent is not None:  # written before: another reference to its referent
        enc.refp(referent)
        if owner:
            again[owner] = referent
        return
    out = enc.out
    shared = ident in enc.shared
    if shared:
        enc.own[ident] = len(out) + 1
    value = obj.value
    referent = enc.own.get(id(value))
    written = referent is not None
    if referent is not None:  # the referent is written (or being written) already
        enc.refp(referent)
    else:
        out.append(tags.REFN)
        referent = len(out) + 1
    if shared or owner:  # later occurrences are REFPs to the referent
        again[ident] = referent
        if owner:
            again[owner] = referent
    if written:
        return
    if (shared or owner) and not isinstance(value, _NESTING_TYPES):
        # A scalar referent that a later REFP will track: a literal, neither a COPY
        # nor a COPY target (Perl's decoder would track a COPY's target again).
        dedupe = enc.dedupe
        enc.dedupe = False
        try:
            enc.item(value, depth + 1)
        finally:
            enc.dedupe = dedupe
        return
    enc.item(value, depth + 1)


def _class_name(enc: _Encoder, name: Any, frozen: bool) -> None:
    if not isinstance(name, str):
        raise UnencodableValue(f"class name of type {type(name).__name__} (need str)")
    out = enc.out
    offset = enc.classes.get(name)
    if offset is not None:
        out.append(tags.OBJECTV_FREEZE if frozen else tags.OBJECTV)
        out += varint(offset)
        return
    out.append(tags.OBJECT_FREEZE if frozen else tags.OBJECT)
    enc.classes[name] = len(out) + 1
    out += _literal(*_str_payload(name))


def _perl_object(enc: _Encoder, obj: Any, depth: int) -> None:
    """OBJECT cls value. A shared object whose value is a list, tuple, dict or
    ``PerlRef`` is written as Perl writes a blessed referent reachable twice: its
    referent tracked, later occurrences REFP to it (which decodes to this object)."""
    enc.enter(depth)
    ident = id(obj)
    referent = enc.again.get(ident)
    if referent is not None:
        enc.refp(referent)
        return
    shared = ident in enc.shared
    if shared:
        enc.own[ident] = len(enc.out) + 1
    _class_name(enc, obj.class_name, bool(obj.frozen))
    value = obj.value
    handler = _BY_TYPE.get(type(value)) or _by_base_type(value)
    if shared and handler is _perl_ref:
        _perl_ref(enc, value, depth + 1, ident)
    elif shared and handler is _list:
        _list(enc, value, depth + 1, ident)
    elif shared and handler is _dict:
        _dict(enc, value, depth + 1, ident)
    else:
        handler(enc, value, depth + 1)


def _perl_regexp(enc: _Encoder, obj: Any, depth: int) -> None:
    # As Perl writes qr//: OBJECT "Regexp" REFN REGEXP pattern flags (two levels).
    pattern, flags = obj.pattern, obj.flags
    if not isinstance(pattern, str) or not isinstance(flags, str):
        raise UnencodableValue("PerlRegexp pattern and flags must be str")
    enc.enter(depth, 2)
    _class_name(enc, _REGEXP_CLASS, False)
    out = enc.out
    out.append(tags.REFN)
    out.append(tags.REGEXP)
    out += _literal(*_str_payload(pattern))
    out += _literal(*_str_payload(flags))


_Handler = Callable[[_Encoder, Any, int], None]

_BY_TYPE: dict[type, _Handler] = {
    type(None): _none,
    bool: _bool,
    int: _int,
    float: _float,
    str: _str,
    bytes: _bytes,
    bytearray: _bytes,
    list: _list,
    tuple: _list,
    dict: _dict,
    PerlRef: _perl_ref,
    PerlObject: _perl_object,
    PerlRegexp: _perl_regexp,
}

# Subclasses (IntEnum, OrderedDict, a str subclass...) encode as their base type;
# order matters: bool before int.
_BASES: tuple[tuple[type, _Handler], ...] = (
    (bool, _bool),
    (int, _int),
    (float, _float),
    (str, _str),
    (bytes, _bytes),
    (bytearray, _bytes),
    (list, _list),
    (tuple, _list),
    (dict, _dict),
    (PerlRef, _perl_ref),
    (PerlObject, _perl_object),
    (PerlRegexp, _perl_regexp),
)


def _by_base_type(obj: Any) -> _Handler:
    for base, handler in _BASES:
        if isinstance(obj, base):
            return handler
    raise UnencodableValue(f"cannot encode a value of type {type(obj).__name__}")
