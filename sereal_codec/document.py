"""Sereal documents: header, user header, compression; shared by both body codecs.

The one Python place that reads and writes a document's header (magic, version-type
byte, suffix) and opens its body (through :mod:`sereal_codec.compression`, with a
cap on the decompressed size): the splitter and the relocator's sealer go through
:func:`read_layout`, :func:`open_body`, :func:`decompressed_document` and
:func:`rewrap_body` rather than reading headers themselves.

The public API over a body codec is :class:`sereal_codec.codec.Codec`; the body
codec's interface, :class:`BodyCodec`, is here, beside the documents it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sereal_codec import compression, tags
from sereal_codec.compression import read_varint
from sereal_codec.errors import (
    BadHeader,
    InvalidStructure,
    TruncatedInput,
    UnsupportedVersion,
)
from sereal_codec.limits import MAX_DEPTH_CAP
from sereal_codec.projection import Tree

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "DEFAULT_MAX_DEPTH",
    "MAX_DEPTH_CAP",
    "UNCOMPRESSED_BELOW",
    "VERSION_TYPE_AT",
    "BodyCodec",
    "DecodeBody",
    "Header",
    "Layout",
    "body_size",
    "decompressed_document",
    "open_body",
    "open_document",
    "read_layout",
    "rewrap_body",
    "wrap_body",
]

DEFAULT_MAX_DEPTH = 512
DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 2**20  # bytes
DEFAULT_PROTOCOL = 4  # read by Perl's Sereal 4.x and 5.x, Go and Java
DEFAULT_COMPRESS_THRESHOLD = 1024  # bytes: smaller bodies are not worth compressing

#: Offset of the version-type byte: protocol in the low nibble, document type above.
VERSION_TYPE_AT = 4
#: Version-type bytes below this are uncompressed documents (type ``TYPE_RAW``).
UNCOMPRESSED_BELOW = (tags.TYPE_RAW + 1) << 4

_BINARY_MODES = {"utf8": tags.BINARY_UTF8, "latin1": tags.BINARY_LATIN1, "bytes": tags.BINARY_BYTES}
# Types are read from their first protocol (tags.DOC_TYPE_MIN_PROTOCOL; SNAPPY: only
# version 1) and written from `Framing.write_protocol` (zstd: 4, see `encode`).
_DOC_TYPES = compression.DOC_TYPES
# Only the types compression.py frames: one that tags.py names but compression.py does
# not know is refused as unsupported (test_document_types fails on it).
_MIN_PROTOCOL = {t: p for t, p in tags.DOC_TYPE_MIN_PROTOCOL.items() if t in _DOC_TYPES}
_PROTOCOL_MAX = tags.PROTOCOLS[-1]
# "compress must be zstd, zlib, snappy, none or None"
_METHODS_TEXT = ", ".join(reversed(compression.METHODS)) + " or None"


class DecodeBody(Protocol):
    """A body codec's ``decode_body``, as both codecs (and the compiled core's stub,
    ``_sereal.pyi``) declare it: one item of a body (see DESIGN.md, "Layers")."""

    def __call__(  # noqa: PLR0917  (the body-codec contract)
        self,
        data: bytes,
        pos: int,
        end: int,
        base: int,
        binary: int,
        max_depth: int,
        max_objects: int = ...,
        projection: Tree | None = ...,
    ) -> tuple[Any, int]: ...


class BodyCodec(Protocol):
    """What a body codec provides (see DESIGN.md, "Layers")."""

    @property
    def decode_body(self) -> DecodeBody: ...

    def encode_body(self, obj: object, dedupe_strings: bool, max_depth: int) -> bytes: ...

    def array_to_json_lines(  # noqa: PLR0917
        self, data: bytes, pos: int, end: int, base: int, binary: int, max_depth: int
    ) -> list[bytes]: ...

    def array_to_json_packed(  # noqa: PLR0917
        self, data: bytes, pos: int, end: int, base: int, binary: int, max_depth: int
    ) -> tuple[bytes, bytes]: ...

    def json_to_variant_packed(
        self, text: bytes, offsets: bytes, max_depth: int = ...
    ) -> tuple[bytes, bytes, bytes, bytes]: ...


@dataclass(frozen=True)
class Header:
    """What a document's header says.

    Attributes:
        protocol: Sereal protocol version, 1 to 5.
        compression: ``"none"``, ``"snappy"`` (protocol 1 whole-body Snappy),
            ``"snappy_incr"``, ``"zlib"`` or ``"zstd"``.
        user_header: the decoded user header, or None when there is none.
        body_offset: document offset of the first byte after the header (the body,
            or its compression framing).
    """

    protocol: int
    compression: str
    user_header: Any
    body_offset: int


@dataclass(frozen=True)
class Layout:
    """Where a document's parts are (:func:`read_layout`).

    Attributes:
        protocol: Sereal protocol version, 1 to 5.
        doc_type: the document type, a key of ``compression.DOC_TYPES``.
        suffix_start: document offset of the header suffix (after its varint length,
            which starts at ``VERSION_TYPE_AT + 1``).
        body_offset: document offset of the first byte after the header.
    """

    protocol: int
    doc_type: int
    suffix_start: int
    body_offset: int


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"expected bytes, bytearray or memoryview, not {type(data).__name__}")


def read_layout(data: bytes) -> Layout:
    """Read a document's header (magic, version-type byte, suffix length); neither
    the user header nor the body is looked at.

    Raises:
        SerealDecodeError: BadHeader (magic), UnsupportedVersion (protocol, or a type
            that protocol does not have), TruncatedInput, InvalidStructure (the
            suffix's varint).
    """
    n = len(data)
    magic = data[:4]
    if magic not in (tags.MAGIC_V1, tags.MAGIC_V3):
        if tags.MAGIC_V1.startswith(magic) or tags.MAGIC_V3.startswith(magic):
            raise TruncatedInput("input ends inside the magic string", n)
        if data[:5] == b"=\xc3\xb3rl":
            raise BadHeader("not a Sereal document (it was UTF-8 encoded)", 0)
        raise BadHeader("not a Sereal document (bad magic string)", 0)
    if n < 5:
        raise TruncatedInput("input ends before the version byte", n)
    protocol, doc_type = data[4] & 0x0F, data[4] >> 4
    if not 1 <= protocol <= _PROTOCOL_MAX:
        raise UnsupportedVersion(f"protocol version {protocol} is not 1 to {_PROTOCOL_MAX}", 4)
    if (magic == tags.MAGIC_V3) != (protocol >= 3):
        raise BadHeader(f"magic string {magic!r} does not match protocol {protocol}", 0)
    if protocol < _MIN_PROTOCOL.get(doc_type, 99) or (
        doc_type == tags.TYPE_SNAPPY and protocol != 1
    ):
        raise UnsupportedVersion(f"document type {doc_type} in protocol {protocol}", 4)
    suffix_size, suffix_start = read_varint(data, 5, n)
    if suffix_size > n - suffix_start:
        raise TruncatedInput("input ends inside the header suffix", n)
    return Layout(protocol, doc_type, suffix_start, suffix_start + suffix_size)


def _head(protocol: int, doc_type: int) -> bytes:
    """Magic string and version-type byte."""
    magic = tags.MAGIC_V3 if protocol >= 3 else tags.MAGIC_V1
    return magic + bytes(((doc_type << 4) | protocol,))


def _check_trailing(buf: bytes, pos: int, end: int) -> None:
    """Only PAD may follow a body's item."""
    while pos < end:
        if buf[pos] & 0x7F != tags.PAD:
            raise InvalidStructure("trailing bytes after the body", pos)
        pos += 1


def _check_int(name: str, value: Any, allowed: range | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} must be an int, not {type(value).__name__}")
    if allowed is None:
        allowed = range(0, 1 << 63)
    if value not in allowed:
        raise ValueError(f"{name}={value} is outside {allowed.start}..{allowed.stop - 1}")
    return value


def _document_options(
    compress: str | None, level: int | None, protocol: int | None
) -> tuple[int, str, int]:
    version = DEFAULT_PROTOCOL if protocol is None else _check_int("protocol", protocol)
    if version not in (3, 4, 5):
        raise ValueError(f"protocol must be 3, 4 or 5 (or None for 4), not {version}")
    method = "none" if compress is None else compress
    doc_type = compression.METHODS.get(method) if isinstance(method, str) else None
    if doc_type is None:
        raise ValueError(f"compress must be {_METHODS_TEXT}: {method!r}")
    framing = _DOC_TYPES[doc_type]
    if version < framing.write_protocol:
        raise ValueError(f"{method} compression needs protocol {framing.write_protocol} or later")
    default, levels = framing.default_level, framing.levels
    lvl = default if level is None else _check_int("level", level, levels)
    return version, method, lvl


def wrap_body(
    body: bytes,
    *,
    compress: str | None = "zstd",
    level: int | None = None,
    protocol: int | None = None,
    compress_threshold: int = DEFAULT_COMPRESS_THRESHOLD,
) -> bytes:
    """Wrap an already encoded body (1-based offsets, protocol 2+ layout) into a
    document, compressed as :meth:`Codec.encode` would: the same header, framing and
    threshold, no user header.

    Args:
        body: the body bytes, e.g. from ``join_bodies`` or ``encode_body``.
        compress, level, protocol, compress_threshold: as for :meth:`Codec.encode`.

    Returns:
        The document bytes.

    Raises:
        ValueError: an invalid option.
    """
    version, method, lvl = _document_options(compress, level, protocol)
    threshold = _check_int("compress_threshold", compress_threshold)
    doc_type, payload = compression.compress_body(body, method, lvl, threshold)
    return b"".join((_head(version, doc_type), b"\0", payload))


def rewrap_body(
    body: bytes, source: bytes, layout: Layout, *, compress: str | None, level: int | None
) -> bytes:
    """A document for a body cut or joined from ``source`` (1-based offsets, protocol
    2+ layout), with ``source``'s header suffix byte for byte (its user header), its
    protocol or the lowest that has the layout and the compression, whichever is
    higher, and always compressed with ``compress`` (no threshold).

    Args:
        body: the body bytes (e.g. from ``extract_array``).
        source, layout: the document it came from and its :func:`read_layout`.
        compress: a ``compress=`` option of :meth:`Codec.encode` ("zstd", "zlib",
            "snappy", "none" or None); level: its level, None for the default.

    Raises:
        KeyError: ``compress`` is no such option (the caller checks it).
    """
    doc_type = compression.METHODS["none" if compress is None else compress]
    framing = _DOC_TYPES[doc_type]
    protocol = max(layout.protocol, 2, framing.write_protocol)
    payload = compression.frame_body(
        doc_type, body, framing.default_level if level is None else level
    )
    suffix = source[VERSION_TYPE_AT + 1 : layout.body_offset]
    return b"".join((_head(protocol, doc_type), suffix, payload))


def open_body(
    data: bytes, layout: Layout, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> tuple[bytes, int, int]:
    """As :func:`open_document`, for a document whose header was read already.

    Raises:
        SerealDecodeError: a bad compressed body; SizeLimitExceeded when it claims
            (or inflates to) more than ``max_decompressed_size`` bytes.
    """
    return compression.unframe_body(
        data, layout.protocol, layout.doc_type, layout.body_offset, max_decompressed_size
    )


def decompressed_document(data: bytes, *, max_decompressed_size: int) -> bytes:
    """The same document with its body decompressed (at most ``max_decompressed_size``
    bytes, checked against the body's claim before inflating): the header is kept
    byte for byte but for the type, so the body starts where it did and every offset
    in it still points where it did (protocol 1 counts from the document start, 2+
    from the body). The user header is not looked at.

    Raises:
        SizeLimitExceeded: the body claims (or inflates to) more than the cap.
        SerealDecodeError: a bad header or compressed body.
    """
    layout = read_layout(data)
    body, pos, _ = open_body(data, layout, max_decompressed_size=max_decompressed_size)
    suffix = data[VERSION_TYPE_AT + 1 : layout.body_offset]
    return b"".join((_head(layout.protocol, tags.TYPE_RAW), suffix, body[pos:]))


def open_document(
    data: bytes, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> tuple[bytes, int, int]:
    """The body of a document as ``(buffer, pos, base)``, decompressed if need be: the
    item is ``buffer[pos:]`` with offsets counted from ``base``, as ``decode_body``
    (and ``join_bodies``) take them. The body itself is not looked at.

    Raises:
        SerealDecodeError: a bad header or compressed body.
    """
    return open_body(data, read_layout(data), max_decompressed_size=max_decompressed_size)


def body_size(data: bytes | bytearray | memoryview) -> int:
    """The size in bytes of a document's body once decompressed, as its header and
    compression framing claim it, without decompressing (``decode`` and
    ``open_document`` then hold the body to exactly that size). Cheap: reads a few
    header bytes.

    Raises:
        SerealDecodeError: a bad header or framing (for zstd: no content size).
    """
    doc = _as_bytes(data)
    layout = read_layout(doc)
    return compression.claimed_body_size(doc, layout.protocol, layout.doc_type, layout.body_offset)
