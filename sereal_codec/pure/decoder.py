"""Pure-Python Sereal body decoder: the reference the compiled core is tested against.

One entry point, :func:`decode_body`, with the contract of ``sereal_codec/DESIGN.md``
(section Layers). The decoder is a dispatch table indexed by the raw tag byte; each
handler takes the decoder state, the position of its tag and the number of nesting
levels already open, and returns ``(value, position after the item)``.

Every read is checked against ``end`` (the buffer may continue past it: a user header
is decoded in place inside its document), so hostile input can only produce a
:class:`~sereal_codec.errors.SerealDecodeError`. Work is linear in the input:
COPY may only target a string that this decode already read as a string (so targets
never overlap and each is decoded at most twice), and nesting is bounded by
``max_depth``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sereal_codec import tags
from sereal_codec.errors import (
    BadBackReference,
    DecodeBudgetExceeded,
    DepthExceeded,
    InvalidStructure,
    TruncatedInput,
    UnknownTag,
)
from sereal_codec.limits import check_max_depth
from sereal_codec.pure.numbers import (
    _double,
    _float,
    _float_128,
    _long_double,
    _neg_small,
    _pos_small,
    _varint,
    _zigzag,
)
from sereal_codec.pure.recursion import room_for
from sereal_codec.types import BOOLEAN_CLASSES, PerlObject, PerlRef, PerlRegexp

__all__ = ["decode_item", "new_decoder", "perl_truthy"]

_UINT64_MAX = (1 << 64) - 1
_MAX_VARINT_BYTES = 16  # padded varints (Perl reserves space for lengths) are legal

Handler = Callable[["_Decoder", int, int], tuple[Any, int]]
# Positions a value is registered under: the F-bit tag itself and the enclosing
# REFN|F / WEAKEN|F tags that stand for the same Perl value.
Track = tuple[int, ...]
TrackedHandler = Callable[["_Decoder", int, int, Track], tuple[Any, int]]

_STRING_TAGS = frozenset({tags.BINARY, tags.STR_UTF8, *range(tags.SHORT_BINARY_LOW, 0x80)})
_CONTAINER_TAGS = (tags.ARRAY, tags.HASH)
_SCALAR_TYPES = (type(None), bool, int, float, str, bytes)
_MISSING = object()
_NO_LIMIT = (1 << 63) - 1


def decode_item(dec: _Decoder, pos: int) -> tuple[Any, int]:
    """The item at ``pos`` decoded in full by ``dec`` (:func:`new_decoder`): the pure
    codec's ``decode_body`` without a projection (``pure/project.py``)."""
    # Up to six frames per level: PAD, handler, REFN, container, fill loop.
    with room_for(6 * dec.max_depth):
        return _HANDLERS[dec.data[pos]](dec, pos, 0)


def new_decoder(  # noqa: PLR0917  (decode_body's arguments)
    data: bytes, pos: int, end: int, base: int, binary: int, max_depth: int, max_objects: int
) -> _Decoder:
    """A decoder over the body, its arguments checked as the pure codec's
    ``decode_body`` says (``pure/project.py``).

    Raises:
        ValueError: an argument out of its domain. TruncatedInput: an empty body.
    """
    if not isinstance(max_objects, int) or isinstance(max_objects, bool) or max_objects < -1:
        raise ValueError(f"max_objects must be >= 0 (or -1: no limit), got {max_objects!r}")
    if binary not in (tags.BINARY_UTF8, tags.BINARY_LATIN1, tags.BINARY_BYTES):
        raise ValueError(f"binary mode must be 0, 1 or 2, not {binary!r}")
    if not 0 <= pos <= end <= len(data):
        raise ValueError(f"bad body bounds pos={pos} end={end} len={len(data)}")
    check_max_depth(max_depth)
    dec = _Decoder(data, pos, end, base, binary, max_depth, max_objects)
    if pos >= end:
        raise TruncatedInput("empty body", end)
    return dec


def perl_truthy(value: Any) -> bool:
    """Perl's truth of a plain scalar: undef, ``""``, ``"0"`` and numeric 0 are false."""
    if value is None:
        return False
    if isinstance(value, (str, bytes)):
        return value not in ("", "0", b"", b"0")
    return bool(value)


class _Decoder:
    """State of one body decode. Positions are absolute indexes into ``data``."""

    __slots__ = (
        "base",
        "blessed",
        "class_names",
        "data",
        "end",
        "key_cache",
        "latin1",
        "max_depth",
        "max_objects",
        "mode",
        "objects_left",
        "start",
        "string_starts",
        "tracked",
        "value_cache",
    )

    def __init__(  # noqa: PLR0917
        self,
        data: bytes,
        start: int,
        end: int,
        base: int,
        mode: int,
        max_depth: int,
        max_objects: int = -1,
    ) -> None:
        self.data = data
        self.start = start
        self.end = end
        self.base = base
        self.mode = mode
        self.latin1 = mode == tags.BINARY_LATIN1
        self.max_depth = max_depth
        self.max_objects = max_objects
        # Objects still allowed (DESIGN.md, "Bounded decoding"); the compiled core's
        # "no limit" is PY_SSIZE_T_MAX, never reached either.
        self.objects_left = _NO_LIMIT if max_objects < 0 else max_objects
        self.tracked: dict[int, Any] = {}  # tag position -> value (F-bit items)
        self.class_names: dict[int, str] = {}  # string position -> class name
        # tracked referent position -> the object its blessing produced (see refp)
        self.blessed: dict[int, Any] = {}
        self.key_cache: dict[int, str] = {}  # COPY target -> decoded as key
        self.value_cache: dict[int, Any] = {}  # COPY target -> decoded as value
        # 1 at the position of every string tag read so far: the legal COPY targets.
        self.string_starts = bytearray(end)

    # -- primitives -------------------------------------------------------------

    def varint(self, pos: int) -> tuple[int, int]:
        """Read a varint at ``pos``; return ``(value, position after it)``."""
        data = self.data
        if pos >= self.end:
            raise TruncatedInput("input ends inside a varint", self.end)
        byte = data[pos]
        if byte < 0x80:
            return byte, pos + 1
        value = 0
        shift = 0
        p = pos
        while True:
            if p >= self.end:
                raise TruncatedInput("input ends inside a varint", self.end)
            byte = data[p]
            value |= (byte & 0x7F) << shift
            p += 1
            if byte < 0x80:
                break
            if p - pos >= _MAX_VARINT_BYTES:
                raise InvalidStructure("varint longer than 16 bytes", pos)
            shift += 7
        if value > _UINT64_MAX:
            raise InvalidStructure("varint exceeds 64 bits", pos)
        return value, p

    def length_at(self, pos: int) -> tuple[int, int]:
        """A byte length varint at ``pos``, checked against the remaining input."""
        n, p = self.varint(pos)
        if n > self.end - p:
            raise TruncatedInput(f"string of {n} bytes exceeds the input", self.end)
        return n, p

    def skip_pad(self, pos: int) -> int:
        """Position of the first non-PAD tag at or after ``pos`` (must exist)."""
        data = self.data
        end = self.end
        while pos < end and data[pos] & 0x7F == tags.PAD:
            pos += 1
        if pos >= end:
            raise TruncatedInput("input ends where a tag was expected", end)
        return pos

    def item(self, pos: int, depth: int) -> tuple[Any, int]:
        """Decode the item whose tag is at ``pos`` (bounds-checked)."""
        if pos >= self.end:
            raise TruncatedInput("input ends where a tag was expected", self.end)
        return _HANDLERS[self.data[pos]](self, pos, depth)

    def charge(self, pos: int, cost: int) -> None:
        """Charge ``cost`` objects about to be built for the tag at ``pos`` to the
        budget, at the same tags and for the same costs as the compiled core."""
        self.objects_left -= cost
        if self.objects_left < 0:
            raise DecodeBudgetExceeded(
                f"the body builds more than max_objects={self.max_objects} objects", pos
            )

    def enter(self, pos: int, depth: int) -> None:
        """Check that a nesting tag at ``pos`` inside ``depth`` open levels is allowed."""
        if depth >= self.max_depth:
            raise DepthExceeded(f"nesting deeper than max_depth={self.max_depth}", pos)

    def string_span(self, pos: int) -> tuple[int, int, int]:
        """Tag (low 7 bits), payload start and stop of the string tag at ``pos``."""
        tag = self.data[pos] & 0x7F
        if tag >= tags.SHORT_BINARY_LOW:
            start = pos + 1
            stop = start + (tag & 0x1F)
            if stop > self.end:
                raise TruncatedInput("input ends inside a string", self.end)
            return tag, start, stop
        n, start = self.length_at(pos + 1)
        return tag, start, start + n

    def text(self, raw: bytes, tag: int) -> str:
        """A string payload as ``str`` the way keys, class names and patterns decode."""
        if tag != tags.STR_UTF8 and self.latin1:
            return raw.decode("latin-1")
        return raw.decode("utf-8", "surrogateescape")

    def value_of(self, raw: bytes, tag: int) -> Any:
        """A string payload as a value, honouring the ``binary`` mode."""
        if tag == tags.STR_UTF8 or self.mode == tags.BINARY_UTF8:
            return raw.decode("utf-8", "surrogateescape")
        if self.mode == tags.BINARY_LATIN1:
            return raw.decode("latin-1")
        return raw

    def copy_target(self, pos: int) -> tuple[int, int]:
        """Target position and end of the COPY tag at ``pos``, validated."""
        offset, after = self.varint(pos + 1)
        target = self.base + offset
        if not (self.start <= target < pos and self.string_starts[target]):
            raise BadBackReference(
                f"COPY offset {offset} is not a string read earlier in this body", pos
            )
        return target, after

    def text_item(self, pos: int) -> tuple[str, int, int]:
        """A hash key, class name or regexp part at ``pos`` (after PADs): a string tag
        or a COPY of one. Returns ``(text, position of its string, position after)``."""
        pos = self.skip_pad(pos)
        tag = self.data[pos] & 0x7F
        if tag in _STRING_TAGS:
            tag, start, stop = self.string_span(pos)
            self.string_starts[pos] = 1
            return self.text(self.data[start:stop], tag), pos, stop
        if tag == tags.COPY:
            target, after = self.copy_target(pos)
            cached = self.key_cache.get(target)
            if cached is None:
                tag, start, stop = self.string_span(target)
                cached = self.text(self.data[start:stop], tag)
                self.key_cache[target] = cached
            return cached, target, after
        raise InvalidStructure(f"expected a string or COPY, found tag 0x{tag:02x}", pos)

    def fill_list(self, lst: list[Any], pos: int, depth: int) -> int:
        data = self.data
        end = self.end
        for i in range(len(lst)):
            if pos >= end:
                raise TruncatedInput("input ends inside an array", end)
            lst[i], pos = _HANDLERS[data[pos]](self, pos, depth)
        return pos

    def hash_key(self, pos: int) -> tuple[str, int]:
        """The key of a hash pair at ``pos`` (a string or a COPY of one) and where its
        value starts, which must be before the end."""
        key, _kpos, pos = self.text_item(pos)
        if pos >= self.end:
            raise TruncatedInput("input ends inside a hash", self.end)
        return key, pos

    def fill_dict(self, dct: dict[str, Any], count: int, pos: int, depth: int) -> int:
        data = self.data
        for _ in range(count):
            key, pos = self.hash_key(pos)
            dct[key], pos = _HANDLERS[data[pos]](self, pos, depth)
        return pos

    def counted(self, pos: int, per_item: int) -> tuple[int, int]:
        """An ARRAY/HASH count at ``pos``, checked against the remaining input."""
        n, p = self.varint(pos)
        if n * per_item > self.end - p:
            raise TruncatedInput(f"count {n} exceeds the remaining input", self.end)
        return n, p

    def register(self, track: Track, value: Any) -> None:
        for p in track:
            self.tracked[p] = value

    def container(self, pos: int, depth: int, track: Track) -> tuple[Any, int]:
        """ARRAY or HASH at ``pos``; ``depth`` already counts its level. Registered
        under ``pos`` when it has the F bit and under every position in ``track``."""
        data = self.data
        if data[pos] & tags.TRACK_FLAG:
            track = (*track, pos)
        if data[pos] & 0x7F == tags.ARRAY:
            n, p = self.counted(pos + 1, 1)
            self.charge(pos, 1 + n)  # the list and its slots
            lst: list[Any] = [None] * n
            self.register(track, lst)
            return lst, self.fill_list(lst, p, depth)
        n, p = self.counted(pos + 1, 2)
        self.charge(pos, 1 + 2 * n)  # the dict, a key and a value a pair
        dct: dict[str, Any] = {}
        self.register(track, dct)
        return dct, self.fill_dict(dct, n, p, depth)

    def seq_ref(self, pos: int, depth: int, track: Track) -> tuple[Any, int]:
        """ARRAYREF_n or HASHREF_n at ``pos`` (registers itself when it has the F bit)."""
        self.enter(pos, depth)
        data = self.data
        if data[pos] & tags.TRACK_FLAG:
            track = (*track, pos)
        n = data[pos] & 0x0F
        if data[pos] & 0x7F < tags.HASHREF_LOW:
            if n > self.end - pos - 1:
                raise TruncatedInput(f"count {n} exceeds the remaining input", self.end)
            self.charge(pos, 1 + n)
            lst: list[Any] = [None] * n
            self.register(track, lst)
            return lst, self.fill_list(lst, pos + 1, depth + 1)
        if 2 * n > self.end - pos - 1:
            raise TruncatedInput(f"count {n} exceeds the remaining input", self.end)
        self.charge(pos, 1 + 2 * n)
        dct: dict[str, Any] = {}
        self.register(track, dct)
        return dct, self.fill_dict(dct, n, pos + 1, depth + 1)

    def tracked_item(self, pos: int, depth: int, track: Track) -> tuple[Any, int]:
        """The item at ``pos`` (after PADs), registered under the positions in
        ``track`` and under its own position when it has the F bit. References,
        containers and objects register before their contents (so cycles resolve to
        the same Python object), everything else once decoded."""
        pos = self.skip_pad(pos)
        byte = self.data[pos]
        tag = byte & 0x7F
        if tags.ARRAYREF_LOW <= tag < tags.SHORT_BINARY_LOW:
            return self.seq_ref(pos, depth, track)  # its own F bit is its business
        if tag in _CONTAINER_TAGS:
            self.enter(pos, depth)
            return self.container(pos, depth + 1, track)
        if byte & tags.TRACK_FLAG:
            track = (*track, pos)
        special = _TRACKED_HANDLERS.get(tag)
        if special is not None:
            return special(self, pos, depth, track)
        value, p = _HANDLERS[tag](self, pos, depth)
        self.register(track, value)
        return value, p

    def refn(self, pos: int, depth: int, track: Track) -> tuple[Any, int]:
        self.enter(pos, depth)
        q = self.skip_pad(pos + 1)
        if self.data[q] & 0x7F in _CONTAINER_TAGS:
            # REFN ARRAY / REFN HASH is one Python container and one nesting level.
            return self.container(q, depth + 1, track)
        self.charge(pos, 1)  # its PerlRef
        if track:
            ref = PerlRef()
            self.register(track, ref)  # before the target: `$x = \$x` needs it
            ref.value, p = _HANDLERS[self.data[q]](self, q, depth + 1)
            return ref, p
        value, p = _HANDLERS[self.data[q]](self, q, depth + 1)
        return PerlRef(value), p

    def refp(self, pos: int, track: Track, plain: bool = False) -> tuple[Any, int]:
        """REFP at ``pos``. ``plain``: a reference about to be blessed (the value of an
        OBJECT), so an earlier blessing of the referent does not apply."""
        offset, after = self.varint(pos + 1)
        target = self.base + offset
        # The target holds a tracked item, or is about to: a REFP|F naming itself, or a
        # WEAKEN|F right before it (the REFP's value is registered there too).
        if target not in self.tracked and target not in track:
            raise BadBackReference(f"REFP offset {offset} is not a tracked item", pos)
        # Perl blesses the referent, so another reference to a blessed referent is the
        # same object (JSON::PP::true written twice, say).
        blessed = _MISSING if plain else self.blessed.get(target, _MISSING)
        if blessed is not _MISSING or self.data[target] & 0x7F in _CONTAINER_TAGS:
            value = self.tracked[target] if blessed is _MISSING else blessed
            self.register(track, value)
            return value, after
        self.charge(pos, 1)
        ref = PerlRef()
        self.register(track, ref)  # a tracked REFP may point at itself
        ref.value = self.tracked[target]
        return ref, after

    def obj(self, pos: int, depth: int, track: Track) -> tuple[Any, int]:
        """OBJECT, OBJECTV, OBJECT_FREEZE or OBJECTV_FREEZE at ``pos``."""
        self.enter(pos, depth)
        tag = self.data[pos] & 0x7F
        named = tag in (tags.OBJECT, tags.OBJECT_FREEZE)
        self.charge(pos, 2 if named else 1)  # the object, and a class name spelled out
        if named:
            cls, cls_pos, p = self.text_item(pos + 1)
            self.class_names[cls_pos] = cls
        else:
            offset, p = self.varint(pos + 1)
            found = self.class_names.get(self.base + offset)
            if found is None:
                raise BadBackReference(
                    f"OBJECTV offset {offset} is not a class name read earlier", pos
                )
            cls = found
        frozen = tag in (tags.OBJECT_FREEZE, tags.OBJECTV_FREEZE)
        result = PerlObject(cls, None, frozen)
        self.register(track, result)  # a blessed array may hold a ref to itself
        value_pos = self.skip_pad(p)
        data = self.data
        vtag = data[value_pos] & 0x7F
        # Perl blesses the referent: from here on a REFP to it means this object (see
        # DESIGN.md, "Blessed referents"). The referent is the tracked target of a
        # REFN (known before its contents are decoded, which may refer to it) or the
        # target of a REFP.
        referent = -1
        if vtag == tags.REFP:
            own = (value_pos,) if data[value_pos] & tags.TRACK_FLAG else ()
            result.value, p = self.refp(value_pos, own, plain=True)
            referent = self.base + self.varint(value_pos + 1)[0]
        else:
            if vtag == tags.REFN:
                q = value_pos + 1
                while q < self.end and data[q] & 0x7F == tags.PAD:
                    q += 1
                if q < self.end and data[q] & tags.TRACK_FLAG:
                    referent = q
                    self.blessed[q] = result
            result.value, p = _HANDLERS[data[value_pos]](self, value_pos, depth + 1)
        final = _bless(result)
        if final is not result:
            self.register(track, final)
        if referent >= 0:
            self.blessed[referent] = final
        return final, p


def _bless(obj: PerlObject) -> Any:
    """The Python value of a decoded object: bool and Regexp have their own types."""
    value = obj.value
    if not obj.frozen and isinstance(value, PerlRef):
        if obj.class_name in BOOLEAN_CLASSES and type(value.value) in _SCALAR_TYPES:
            return perl_truthy(value.value)
        if obj.class_name == "Regexp" and isinstance(value.value, PerlRegexp):
            return value.value
    return obj


# -- handlers (tag byte -> function) --------------------------------------------


def _constant(value: Any) -> Handler:
    def handler(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
        return value, pos + 1

    return handler


def _string(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    tag, start, stop = dec.string_span(pos)
    dec.string_starts[pos] = 1
    return dec.value_of(dec.data[start:stop], tag), stop


def _refn(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    return dec.refn(pos, depth, ())


def _refp(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    return dec.refp(pos, ())


def _container(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    dec.enter(pos, depth)
    return dec.container(pos, depth + 1, ())


def _seq_ref(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    return dec.seq_ref(pos, depth, ())


def _object(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    return dec.obj(pos, depth, ())


def _alias(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    offset, after = dec.varint(pos + 1)
    target = dec.base + offset
    try:
        return dec.tracked[target], after
    except KeyError:
        raise BadBackReference(f"ALIAS offset {offset} is not a tracked item", pos) from None


def _copy(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    target, after = dec.copy_target(pos)
    cache = dec.value_cache
    if target in cache:
        return cache[target], after
    tag, start, stop = dec.string_span(target)
    value = cache[target] = dec.value_of(dec.data[start:stop], tag)
    return value, after


def _weaken(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    dec.enter(pos, depth)
    return dec.item(pos + 1, depth + 1)


def _regexp(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    dec.charge(pos, 3)  # the regexp, its pattern and its flags
    pattern, _, p = dec.text_item(pos + 1)
    flags, _, p = dec.text_item(p)
    return PerlRegexp(pattern, flags), p


def _pad(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    q = dec.skip_pad(pos)
    return _HANDLERS[dec.data[q]](dec, q, depth)


def _unknown(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    tag = dec.data[pos] & 0x7F
    raise UnknownTag(f"tag 0x{tag:02x} is reserved or unsupported", pos)


# Tracked (F-bit) tags, and the item under a WEAKEN|F: references and objects
# register before their contents so that cycles resolve to the same Python object
# (containers do so themselves); everything else is registered once decoded.


def _tracked(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    return dec.tracked_item(pos, depth, ())


def _tracked_refn(dec: _Decoder, pos: int, depth: int, track: Track) -> tuple[Any, int]:
    return dec.refn(pos, depth, track)


def _tracked_refp(dec: _Decoder, pos: int, depth: int, track: Track) -> tuple[Any, int]:
    return dec.refp(pos, track)


def _tracked_object(dec: _Decoder, pos: int, depth: int, track: Track) -> tuple[Any, int]:
    return dec.obj(pos, depth, track)


def _tracked_weaken(dec: _Decoder, pos: int, depth: int, track: Track) -> tuple[Any, int]:
    # WEAKEN reads into the same Perl value it weakens: the item after it is
    # registered under the WEAKEN's position (and any enclosing ones) too.
    dec.enter(pos, depth)
    return dec.tracked_item(pos + 1, depth + 1, track)


def _build_handlers() -> list[Handler]:
    table: list[Handler] = [_unknown] * 256
    for tag in range(0x10):
        table[tag] = _pos_small
        table[tags.NEG_LOW + tag] = _neg_small
        table[tags.ARRAYREF_LOW + tag] = _seq_ref
        table[tags.HASHREF_LOW + tag] = _seq_ref
    for tag in range(tags.SHORT_BINARY_LOW, 0x80):
        table[tag] = _string
    simple: dict[int, Handler] = {
        tags.VARINT: _varint,
        tags.ZIGZAG: _zigzag,
        tags.FLOAT: _float,
        tags.DOUBLE: _double,
        tags.LONG_DOUBLE: _long_double,
        tags.FLOAT_128: _float_128,
        tags.UNDEF: _constant(None),
        tags.CANONICAL_UNDEF: _constant(None),
        tags.TRUE: _constant(True),
        tags.YES: _constant(True),
        tags.FALSE: _constant(False),
        tags.NO: _constant(False),
        tags.BINARY: _string,
        tags.STR_UTF8: _string,
        tags.REFN: _refn,
        tags.REFP: _refp,
        tags.HASH: _container,
        tags.ARRAY: _container,
        tags.OBJECT: _object,
        tags.OBJECTV: _object,
        tags.OBJECT_FREEZE: _object,
        tags.OBJECTV_FREEZE: _object,
        tags.ALIAS: _alias,
        tags.COPY: _copy,
        tags.WEAKEN: _weaken,
        tags.REGEXP: _regexp,
        tags.PAD: _pad,
    }
    for tag, handler in simple.items():
        table[tag] = handler
    for tag in range(0x80):
        # ARRAYREF_n / HASHREF_n register themselves; the rest go through _tracked.
        if tags.ARRAYREF_LOW <= tag < tags.SHORT_BINARY_LOW:
            table[tag | tags.TRACK_FLAG] = table[tag]
        elif table[tag] is _unknown or tag == tags.PAD:
            table[tag | tags.TRACK_FLAG] = table[tag]  # the F bit means nothing here
        else:
            table[tag | tags.TRACK_FLAG] = _tracked
    return table


_TRACKED_HANDLERS: dict[int, TrackedHandler] = {
    tags.REFN: _tracked_refn,
    tags.REFP: _tracked_refp,
    tags.OBJECT: _tracked_object,
    tags.OBJECTV: _tracked_object,
    tags.OBJECT_FREEZE: _tracked_object,
    tags.OBJECTV_FREEZE: _tracked_object,
    tags.WEAKEN: _tracked_weaken,
}

_HANDLERS: list[Handler] = _build_handlers()
