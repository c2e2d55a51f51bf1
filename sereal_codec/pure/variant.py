"""Pure-Python JSON -> Spark Variant transcoding: the reference the compiled
``json_to_variant_packed`` is held to, byte for byte and error for error (DESIGN.md,
"Variant transcoding").

A small JSON parser of its own (not :mod:`json`, so that every error names the same
text and byte as the compiled one) writes each text as Spark 4's ``parse_json`` would:
the value (objects' values in document order behind field ids and offsets sorted by
key in Java's String order) and the metadata (the keys in order of first appearance).
"""

from __future__ import annotations

import itertools
import struct
from array import array
from dataclasses import dataclass, field

from sereal_codec.errors import SerealError
from sereal_codec.limits import check_max_depth
from sereal_codec.pure.recursion import room_for

__all__ = ["SIZE_LIMIT", "json_to_variant_packed"]

SIZE_LIMIT = 128 * 2**20  # bytes: Spark's VariantUtil.SIZE_LIMIT
_WS = b" \t\n\r"
_SIMPLE_ESCAPES = {ord(k): v for k, v in zip('"\\/bfnrt', '"\\/\b\f\n\r\t', strict=True)}
_DIGITS = b"0123456789"
_INT64 = (-(2**63), 2**63 - 1)


class _Fail(SerealError):
    """Internal: caught in ``json_to_variant_packed`` and re-raised as the
    ``ValueError`` the compiled core raises."""

    def __init__(self, pos: int, what: str) -> None:
        super().__init__(what)
        self.pos = pos
        self.what = what


def _int_size(v: int) -> int:
    return 1 if v <= 0xFF else 2 if v <= 0xFFFF else 3 if v <= 0xFFFFFF else 4


def _le(v: int, n: int) -> bytes:
    return v.to_bytes(n, "little")


def _container(
    offsets: list[int], data: bytes | bytearray, ids: list[int] | None = None, id_size: int = 0
) -> bytes:
    """A Variant array, or object when ``ids`` (field ids, ``id_size`` bytes each) are
    given: the header, the count, the ids, each value's offset in ``data`` and its
    end, then ``data``."""
    n = len(offsets)
    large = n > 255
    off_size = _int_size(len(data))
    if ids is None:  # basic type 3, array
        header = (large << 2 | (off_size - 1)) << 2 | 3
    else:  # basic type 2, object
        header = (large << 4 | (id_size - 1) << 2 | (off_size - 1)) << 2 | 2
    return b"".join(
        [
            bytes([header]),
            _le(n, 4 if large else 1),
            *(_le(i, id_size) for i in ids or ()),
            *(_le(o, off_size) for o in offsets),
            _le(len(data), off_size),
            data,
        ]
    )


def _java_order(key: bytes) -> bytes:
    """A sort key giving Java's String.compareTo order (UTF-16 code units) on UTF-8:
    U+E000..U+FFFF (lead bytes EE, EF) after the supplementary planes."""
    return key.translate(_JAVA_TABLE)


_JAVA_TABLE = bytes(b + 7 if b in (0xEE, 0xEF) else b for b in range(256))


@dataclass
class _Text:
    s: bytes
    max_depth: int
    pos: int = 0
    depth: int = 0
    keys: dict[bytes, int] = field(default_factory=dict)

    def skip_ws(self) -> None:
        s, n = self.s, len(self.s)
        while self.pos < n and s[self.pos] in _WS:
            self.pos += 1

    def peek(self) -> int:
        return self.s[self.pos] if self.pos < len(self.s) else 0

    def value(self) -> bytes:
        self.skip_ws()
        if self.pos >= len(self.s):
            raise _Fail(self.pos, "expected a value")
        c = self.s[self.pos]
        if c == 0x22:  # "
            return _string_value(self.string())
        if c in b"{[":
            self.depth += 1
            if self.depth > self.max_depth:
                raise _Fail(self.pos, f"nesting deeper than max_depth={self.max_depth}")
            out = self.object() if c == 0x7B else self.array()
            self.depth -= 1
            return out
        if c == 0x2D or c in _DIGITS:
            return self.number()
        for word, header in ((b"null", 0), (b"true", 4), (b"false", 8)):
            if c == word[0]:
                if self.s[self.pos : self.pos + len(word)] != word:
                    raise _Fail(self.pos, "expected a value")
                self.pos += len(word)
                return bytes([header])
        raise _Fail(self.pos, "expected a value")

    def string(self) -> bytes:
        s, n = self.s, len(self.s)
        self.pos += 1
        out = bytearray()
        start = p = self.pos
        while True:
            while p < n and 0x20 <= s[p] < 0x80 and s[p] not in b'"\\':
                p += 1
            if p >= n:
                raise _Fail(n, "unterminated string")
            c = s[p]
            if c == 0x22:
                break
            if c < 0x20:
                raise _Fail(p, "control character in a string")
            if c >= 0x80:
                p += _utf8_seq(s, p)
                continue
            out += s[start:p]
            self.pos = p
            out += self.unescape()
            start = p = self.pos
        out += s[start:p]
        self.pos = p + 1
        return bytes(out)

    def unescape(self) -> bytes:
        s, at = self.s, self.pos
        if at + 1 >= len(s):
            raise _Fail(len(s), "unterminated string")
        c = s[at + 1]
        if c in _SIMPLE_ESCAPES:
            self.pos = at + 2
            return _SIMPLE_ESCAPES[c].encode()
        cp = _hex4(s, at + 2) if c == 0x75 and at + 6 <= len(s) else None
        if cp is None:
            raise _Fail(at, "invalid escape")
        self.pos = at + 6
        if 0xD800 <= cp <= 0xDBFF:
            p = self.pos
            lo = _hex4(s, p + 2) if p + 6 <= len(s) and s[p : p + 2] == b"\\u" else None
            if lo is None or not 0xDC00 <= lo <= 0xDFFF:
                raise _Fail(at, "lone surrogate escape")
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
            self.pos += 6
        elif 0xDC00 <= cp <= 0xDFFF:
            raise _Fail(at, "lone surrogate escape")
        return chr(cp).encode()

    def key_id(self, key: bytes) -> int:
        got = self.keys.get(key)
        if got is None:
            if sum(map(len, self.keys)) + len(key) > SIZE_LIMIT:
                raise _Fail(self.pos, "variant metadata larger than 128 MiB")
            got = self.keys[key] = len(self.keys)
        return got

    def object(self) -> bytes:
        self.pos += 1
        fields: list[tuple[int, int]] = []  # (key id, offset of its value)
        data = bytearray()
        self.skip_ws()
        more = self.peek() != 0x7D
        while more:
            self.skip_ws()
            if self.peek() != 0x22:
                raise _Fail(self.pos, "expected a key")
            fields.append((self.key_id(self.string()), len(data)))
            self.skip_ws()
            if self.peek() != 0x3A:
                raise _Fail(self.pos, "expected ':'")
            self.pos += 1
            data += self.value()
            more = self.more(0x7D)
        self.pos += 1
        names = {i: k for k, i in self.keys.items()}
        fields.sort(key=lambda f: _java_order(names[f[0]]))
        for a, b in itertools.pairwise(fields):
            if a[0] == b[0]:
                key = names[a[0]].decode()
                raise _Fail(self.pos - 1, f"duplicate key {key!r}")
        id_size = _int_size(max((i for i, _ in fields), default=0))
        return _container([o for _, o in fields], data, [i for i, _ in fields], id_size)

    def array(self) -> bytes:
        self.pos += 1
        offsets: list[int] = []
        data = bytearray()
        self.skip_ws()
        more = self.peek() != 0x5D
        while more:
            offsets.append(len(data))
            data += self.value()
            more = self.more(0x5D)
        self.pos += 1
        return _container(offsets, data)

    def more(self, close: int) -> bool:
        """After a member: True past a ',' (consumed), False at ``close`` (not consumed)."""
        self.skip_ws()
        c = self.peek()
        if c == close:
            return False
        if c != 0x2C:
            raise _Fail(self.pos, f"expected ',' or '{chr(close)}'")
        self.pos += 1
        return True

    def number(self) -> bytes:
        s, n = self.s, len(self.s)
        start = p = self.pos
        neg = s[p] == 0x2D
        p += neg
        if p >= n or s[p] not in _DIGITS:
            raise _Fail(start, "invalid number")
        int_start = p
        if s[p] == 0x30:
            p += 1
        else:
            while p < n and s[p] in _DIGITS:
                p += 1
        int_end = frac_start = frac_end = p
        has_exp = False
        if p < n and s[p] == 0x2E:
            p += 1
            frac_start = p
            while p < n and s[p] in _DIGITS:
                p += 1
            frac_end = p
            if frac_end == frac_start:
                raise _Fail(start, "invalid number")
        if p < n and s[p] in b"eE":
            has_exp = True
            p += 1
            if p < n and s[p] in b"+-":
                p += 1
            if p >= n or s[p] not in _DIGITS:
                raise _Fail(start, "invalid number")
            while p < n and s[p] in _DIGITS:
                p += 1
        if p < n and s[p] in _DIGITS:
            raise _Fail(start, "invalid number")
        self.pos = p
        text = s[start:p]
        digits = (s[int_start:int_end] + s[frac_start:frac_end]).lstrip(b"0")
        scale = frac_end - frac_start
        if has_exp or len(digits) > 38 or scale > 38:
            return bytes([7 << 2]) + struct.pack("<d", float(text))
        unscaled = int(digits or b"0")
        if neg:
            unscaled = -unscaled
        if scale == 0 and _INT64[0] <= unscaled <= _INT64[1]:
            for type_id, size in ((3, 1), (4, 2), (5, 4), (6, 8)):
                if -(1 << (8 * size - 1)) <= unscaled < 1 << (8 * size - 1):
                    return bytes([type_id << 2]) + unscaled.to_bytes(size, "little", signed=True)
        precision = max(len(digits), 1)
        size = 4 if scale <= 9 and precision <= 9 else 8 if scale <= 18 and precision <= 18 else 16
        type_id = {4: 8, 8: 9, 16: 10}[size]
        return bytes([type_id << 2, scale]) + unscaled.to_bytes(size, "little", signed=True)

    def metadata(self) -> bytes:
        keys = list(self.keys)  # in order of first appearance
        strings = sum(map(len, keys))
        off_size = _int_size(max(strings, len(keys)))
        offsets = [0]
        for k in keys:
            offsets.append(offsets[-1] + len(k))
        return b"".join(
            [
                bytes([1 | (off_size - 1) << 6]),
                _le(len(keys), off_size),
                *(_le(o, off_size) for o in offsets),
                *keys,
            ]
        )


def _utf8_seq(s: bytes, p: int) -> int:
    """Length of the valid UTF-8 sequence at s[p] (>= 0x80); raises _Fail if none."""
    for n in (2, 3, 4):
        try:
            s[p : p + n].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return n
    raise _Fail(p, "invalid UTF-8")


def _hex4(s: bytes, p: int) -> int | None:
    chunk = s[p : p + 4]
    if len(chunk) != 4 or any(c not in b"0123456789abcdefABCDEF" for c in chunk):
        return None
    return int(chunk, 16)


def _string_value(raw: bytes) -> bytes:
    n = len(raw)
    if n <= 63:
        return bytes([n << 2 | 1]) + raw
    return bytes([16 << 2]) + _le(n, 4) + raw


def json_to_variant_packed(
    text: bytes, offsets: bytes, max_depth: int = 512
) -> tuple[bytes, bytes, bytes, bytes]:
    """Each JSON text ``text[off[i]:off[i+1]]`` (``offsets``: n + 1 native int64) as a
    Spark Variant: returns the values back to back, their n + 1 native int32 offsets,
    the metadata back to back, and theirs (an Arrow binary column's layout each).

    Raises:
        ValueError: bad offsets; or ``JSON text i: <what> at byte p`` for a text that
            is not JSON, holds invalid UTF-8 or a lone surrogate escape, nests deeper
            than ``max_depth``, repeats a key in one object, or exceeds 128 MiB.
    """
    text = bytes(text)
    if len(offsets) % 8 != 0 or len(offsets) < 8:
        raise ValueError("offsets must be n + 1 native int64 (8n + 8 bytes)")
    bounds = array("q", bytes(offsets))
    for i, b in enumerate(bounds):
        if b < (bounds[i - 1] if i else 0) or b > len(text):
            raise ValueError(
                f"offsets[{i}] = {b} is out of order or past the text's {len(text)} bytes"
            )
    check_max_depth(max_depth)
    values, metas = bytearray(), bytearray()
    voff, moff = array("i", [0]), array("i", [0])
    for row in range(len(bounds) - 1):
        t = _Text(text[bounds[row] : bounds[row + 1]], max_depth)
        try:
            with room_for(3 * max_depth):  # frames per level: value, array/object, key
                value = t.value()
            t.skip_ws()
            if t.pos != len(t.s):
                raise _Fail(t.pos, "trailing characters")
            if len(value) > SIZE_LIMIT:
                raise _Fail(len(t.s), "variant value larger than 128 MiB")
        except _Fail as fail:
            raise ValueError(f"JSON text {row}: {fail.what} at byte {fail.pos}") from None
        values += value
        metas += t.metadata()
        if len(values) > 2**31 - 1 or len(metas) > 2**31 - 1:
            raise ValueError("more than 2 GiB of variant data in one call")
        voff.append(len(values))
        moff.append(len(metas))
    return bytes(values), voff.tobytes(), bytes(metas), moff.tobytes()
