"""Pure-Python JSON transcoding: the reference the compiled ``array_to_json_lines`` is
held to, byte for byte (DESIGN.md, "JSON transcoding").

Built on the pure decoder: the body is decoded to Python values (so every decode error
is the decoder's own, and comes first), then each element of the top-level array is
written as compact JSON. The one thing a dict loses, a key written twice, is kept by
recording every hash's pairs in document order while decoding.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
from array import array
from typing import Any

from sereal_codec import tags
from sereal_codec.errors import InvalidStructure, SizeLimitExceeded, TruncatedInput
from sereal_codec.limits import check_max_depth
from sereal_codec.pure.decoder import _HANDLERS, _Decoder
from sereal_codec.pure.recursion import room_for
from sereal_codec.types import PerlObject, PerlRef, PerlRegexp

__all__ = ["MIN_OUTPUT_CAP", "array_to_json_lines", "array_to_json_packed", "output_cap"]

MIN_OUTPUT_CAP = 64 * 2**20  # bytes
_OUTPUT_CAP_FACTOR = 64  # x the body's size
_CYCLE = "cycle cannot be represented as JSON"
_TOO_LONG = "JSON text exceeds the output limit (shared values repeated)"
# Lone surrogates from surrogateescape (one per byte that is not valid UTF-8) -> U+FFFD.
_REPLACE_ESCAPED = {c: 0xFFFD for c in range(0xDC80, 0xDD00)}


def output_cap(body_size: int) -> int:
    """Most bytes of JSON text one body may produce: max(64 MiB, 64 x its size)."""
    return max(MIN_OUTPUT_CAP, _OUTPUT_CAP_FACTOR * body_size)


class _PairsDecoder(_Decoder):
    """The pure decoder, also keeping each dict's pairs as written (repeats included)."""

    __slots__ = ("pairs",)

    def __init__(  # noqa: PLR0917
        self, data: bytes, start: int, end: int, base: int, mode: int, max_depth: int
    ) -> None:
        super().__init__(data, start, end, base, mode, max_depth)
        # id(dict) -> (the dict, kept alive so the id stays its own; its pairs)
        self.pairs: dict[int, tuple[dict[str, Any], list[tuple[str, Any]]]] = {}

    def fill_dict(self, dct: dict[str, Any], count: int, pos: int, depth: int) -> int:
        pairs: list[tuple[str, Any]] = []
        self.pairs[id(dct)] = (dct, pairs)
        data = self.data
        for _ in range(count):
            key, pos = self.hash_key(pos)
            value, pos = _HANDLERS[data[pos]](self, pos, depth)
            dct[key] = value
            pairs.append((key, value))
        return pos


def array_to_json_lines(  # noqa: PLR0917  (the body-codec contract)
    data: bytes, pos: int, end: int, base: int, binary: int, max_depth: int
) -> list[bytes]:
    """One compact JSON text (UTF-8) per element of the body's top-level array.

    Arguments as for ``decode_body``; the whole of ``data[pos:end]`` is the body (only
    PADs may follow its item).

    Raises:
        SerealDecodeError: what ``decode_body`` raises for the body, else
            InvalidStructure (trailing bytes; the body is not an array; a cycle),
            SizeLimitExceeded (more text than :func:`output_cap` allows).
    """
    if binary not in (tags.BINARY_UTF8, tags.BINARY_LATIN1, tags.BINARY_BYTES):
        raise ValueError(f"binary mode must be 0, 1 or 2, not {binary!r}")
    if not 0 <= pos <= end <= len(data):
        raise ValueError(f"bad body bounds pos={pos} end={end} len={len(data)}")
    check_max_depth(max_depth)
    dec = _PairsDecoder(data, pos, end, base, binary, max_depth)
    if pos >= end:
        raise TruncatedInput("empty body", end)
    with room_for(6 * max_depth):
        value, after = _HANDLERS[data[pos]](dec, pos, 0)
    for p in range(after, end):
        if data[p] & 0x7F != tags.PAD:
            raise InvalidStructure("trailing bytes after the body", p)
    if type(value) is not list:
        raise InvalidStructure("the body is not an array", pos)
    writer = _Writer(dec.pairs, output_cap(end - pos))
    # A PerlRef / PerlObject wrapper costs a level of its own when writing.
    with room_for(4 * max_depth):
        return [writer.line(item) for item in value]


def array_to_json_packed(  # noqa: PLR0917  (the body-codec contract)
    data: bytes, pos: int, end: int, base: int, binary: int, max_depth: int
) -> tuple[bytes, bytes]:
    """The texts of :func:`array_to_json_lines` back to back, and n + 1 native int64
    offsets (as bytes) bounding them: text i is ``text[off[i]:off[i + 1]]``."""
    lines = array_to_json_lines(data, pos, end, base, binary, max_depth)
    offsets = array("q", itertools.accumulate(map(len, lines), initial=0))
    return b"".join(lines), offsets.tobytes()


def _json_string(text: str) -> bytes:
    return json.dumps(text.translate(_REPLACE_ESCAPED), ensure_ascii=False).encode()


class _Writer:
    """Compact JSON of decoded values, with the running size checked against the cap."""

    def __init__(self, pairs: dict[int, tuple[dict[str, Any], list[tuple[str, Any]]]], cap: int):
        self.pairs = pairs
        self.cap = cap
        self.total = 0
        self.parts: list[bytes] = []
        self.path: set[int] = set()  # containers and wrappers being written

    def line(self, value: Any) -> bytes:
        self.parts = []
        self.write(value)
        return b"".join(self.parts)

    def put(self, text: bytes) -> None:
        self.parts.append(text)
        self.total += len(text)
        if self.total > self.cap:
            raise SizeLimitExceeded(_TOO_LONG)

    def write(self, value: Any) -> None:
        if value is None:
            self.put(b"null")
        elif value is True:
            self.put(b"true")
        elif value is False:
            self.put(b"false")
        elif type(value) is int:
            self.put(str(value).encode())
        elif type(value) is float:
            self.put(repr(value).encode() if math.isfinite(value) else b"null")
        elif type(value) is str:
            self.put(_json_string(value))
        elif type(value) is bytes:
            self.put(b'"' + base64.b64encode(value) + b'"')
        elif type(value) is PerlRegexp:
            self.put(_json_string(value.pattern))
        else:
            self.nested(value)

    def nested(self, value: Any) -> None:
        """A list, dict, PerlRef or PerlObject: a cycle when already being written."""
        if id(value) in self.path:
            raise InvalidStructure(_CYCLE)
        self.path.add(id(value))
        if type(value) is list:
            self.put(b"[")
            for i, item in enumerate(value):
                if i:
                    self.put(b",")
                self.write(item)
            self.put(b"]")
        elif type(value) is dict:
            self.put(b"{")
            for i, (key, item) in enumerate(self.pairs[id(value)][1]):
                if i:
                    self.put(b",")
                self.put(_json_string(key))
                self.put(b":")
                self.write(item)
            self.put(b"}")
        elif isinstance(value, (PerlRef, PerlObject)):  # a reference is its referent,
            self.write(value.value)  # an object its value (the class is dropped)
        else:  # pragma: no cover  (the decoder makes nothing else)
            raise TypeError(f"unexpected decoded type {type(value).__name__}")
        self.path.discard(id(value))
