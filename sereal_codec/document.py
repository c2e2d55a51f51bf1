"""Sereal documents: header, user header, compression; shared by both body codecs.

The one Python place that reads and writes a document's header (magic, version-type
byte, suffix) and opens its body (through :mod:`sereal_codec.compression`, with a
cap on the decompressed size): the splitter and the relocator's sealer go through
:func:`read_layout`, :func:`open_body`, :func:`decompressed_document` and
:func:`rewrap_body` rather than reading headers themselves.

A :class:`Codec` wraps a body codec (the compiled ``_sereal`` module or
``sereal_codec.pure``'s decoder and encoder, anything with ``decode_body`` and
``encode_body``, see DESIGN.md) and gives it the public API. Header errors carry
document offsets; body errors carry offsets into the buffer the body was decoded from
(the document for a raw body, the decompressed body otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from sereal_codec import compression, tags
from sereal_codec.compression import read_varint, varint_bytes
from sereal_codec.errors import (
    BadHeader,
    InvalidStructure,
    SerealError,
    TruncatedInput,
    UnsupportedVersion,
)
from sereal_codec.limits import MAX_DEPTH_CAP, check_max_depth
from sereal_codec.projection import Field, Tree, compile_fields

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "DEFAULT_MAX_DEPTH",
    "MAX_DEPTH_CAP",
    "UNCOMPRESSED_BELOW",
    "VERSION_TYPE_AT",
    "BodyCodec",
    "Codec",
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


class BodyCodec(Protocol):
    """What a body codec provides (see DESIGN.md, "Layers")."""

    def decode_body(  # noqa: PLR0917  (the body-codec contract)
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
    return compression.open_body(
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


class Codec:
    """The public Sereal API over one body codec.

    Args:
        backend: the body codec (module or object with ``decode_body``/``encode_body``).
    """

    def __init__(self, backend: BodyCodec) -> None:
        self._backend = backend

    def encode(
        self,
        obj: object,
        *,
        compress: str | None = "zstd",
        level: int | None = None,
        dedupe_strings: bool = True,
        protocol: int | None = None,
        user_header: object = None,
        compress_threshold: int = DEFAULT_COMPRESS_THRESHOLD,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> bytes:
        """Encode ``obj`` as a Sereal document.

        Args:
            obj: the value (mapping in sereal_codec/DESIGN.md).
            compress: ``"zstd"`` (needs protocol >= 4), ``"zlib"``, ``"snappy"``
                (incremental framing) or ``"none"``/None.
            level: compression level; None for the default (zstd 3, zlib 6). Ignored
                for snappy and none.
            dedupe_strings: write repeated string values as COPY (hash keys always are).
            protocol: 3, 4 or 5; None for 4.
            user_header: a value to embed as the user header, or None for none.
            compress_threshold: bodies shorter than this many bytes stay uncompressed;
                so do bodies that compression would not shrink.
            max_depth: nesting levels allowed.

        Returns:
            The document bytes.

        Raises:
            UnencodableValue: a value Sereal cannot represent.
            EncodeDepthExceeded: nesting deeper than ``max_depth``.
            ValueError: an invalid option.
        """
        version, method, lvl = _document_options(compress, level, protocol)
        threshold = _check_int("compress_threshold", compress_threshold)
        depth = check_max_depth(max_depth)
        body = self._backend.encode_body(obj, bool(dedupe_strings), depth)
        suffix = b""
        if user_header is not None:
            user_body = self._backend.encode_body(user_header, bool(dedupe_strings), depth)
            suffix = bytes((tags.HEADER_BIT_USER_META,)) + user_body
        doc_type, payload = compression.compress_body(body, method, lvl, threshold)
        return b"".join(
            (
                _head(version, doc_type),
                varint_bytes(len(suffix)),
                suffix,
                payload,
            )
        )

    def decode(
        self,
        data: bytes | bytearray | memoryview,
        *,
        binary: str = "utf8",
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        max_objects: int | None = None,
        fields: Iterable[Field] | None = None,
    ) -> Any:
        """Decode a Sereal document (protocol 1 to 5, any compression).

        Args:
            data: the document.
            binary: how BINARY strings decode as values: ``"utf8"`` (str; bytes that
                are not UTF-8 via surrogateescape, so they re-encode identically),
                ``"latin1"`` (str, Perl's meaning) or ``"bytes"``.
            max_depth: nesting levels allowed.
            max_decompressed_size: largest decompressed body accepted, in bytes.
            max_objects: most Python objects the body may build, counted as DESIGN.md
                ("Bounded decoding") says (containers with their slots, references,
                objects, regexps); None for no limit. With ``fields``, only what is
                built counts (DESIGN.md, "Projection").
            fields: the fields of each event to build, as dotted paths
                (:func:`sereal_codec.projection.compile_fields`); None for all.
                Applied to each element of the body's top-level array by the rule of
                :mod:`sereal_codec.projection` (a body that is no array is
                returned whole); the rest of each event is checked as a full decode
                checks it, without being built.

        Returns:
            The body's value. The user header, if any, is skipped (see decode_header).
            With ``fields``: ``project_events(decode(data), compile_fields(fields))``
            for an array body.

        Raises:
            SerealDecodeError: a subclass saying what is wrong and at which offset;
                DecodeBudgetExceeded past ``max_objects`` (before building more).
            ValueError: an invalid option or field. TypeError: ``data`` is not
                bytes-like.
        """
        mode = _binary_mode(binary)
        depth = check_max_depth(max_depth)
        max_size = _check_int("max_decompressed_size", max_decompressed_size)
        budget = -1 if max_objects is None else _check_int("max_objects", max_objects)
        tree = compile_fields(fields)
        doc = _as_bytes(data)
        layout = read_layout(doc)
        buf, start, base = compression.open_body(
            doc, layout.protocol, layout.doc_type, layout.body_offset, max_size
        )
        if tree is None:
            value, pos = self._backend.decode_body(buf, start, len(buf), base, mode, depth, budget)
        else:
            value, pos = self._backend.decode_body(
                buf, start, len(buf), base, mode, depth, budget, tree
            )
        _check_trailing(buf, pos, len(buf))
        return value

    def decode_json_lines(
        self,
        data: bytes | bytearray | memoryview,
        *,
        binary: str = "utf8",
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> list[bytes]:
        """Decode a document whose body is an array straight to JSON texts.

        The compiled core writes the JSON without building Python values (DESIGN.md,
        "JSON transcoding", has the exact mapping); it checks the body exactly as
        :meth:`decode` does.

        Args:
            data: the document.
            binary: how BINARY strings become JSON: ``"utf8"`` (valid UTF-8 as is, each
                other byte as U+FFFD), ``"latin1"`` or ``"bytes"`` (a base64 string).
            max_depth: nesting levels allowed.
            max_decompressed_size: largest decompressed body accepted, in bytes.

        Returns:
            One compact JSON text (UTF-8 bytes) per element of the array.

        Raises:
            SerealDecodeError: whatever :meth:`decode` raises for the document; else
                InvalidStructure when the body is not an array or holds a cycle, and
                SizeLimitExceeded when shared values would repeat into more than
                max(64 MiB, 64 x the body's size) of JSON.
            ValueError: an invalid option. TypeError: ``data`` is not bytes-like.
        """
        return self._backend.array_to_json_lines(
            *self._json_args(data, binary, max_depth, max_decompressed_size)
        )

    def decode_json_packed(
        self,
        data: bytes | bytearray | memoryview,
        *,
        binary: str = "utf8",
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> tuple[bytes, bytes]:
        """As :meth:`decode_json_lines`, the texts back to back in one ``bytes`` plus
        n + 1 native int64 offsets (as ``bytes``) bounding them: text i is
        ``text[off[i]:off[i + 1]]``. That is an Arrow ``large_string`` column's layout
        (``pa.LargeStringArray.from_buffers(n, offsets, text)``, no copy), the fastest
        way into Spark."""
        return self._backend.array_to_json_packed(
            *self._json_args(data, binary, max_depth, max_decompressed_size)
        )

    def decode_variant_packed(
        self,
        data: bytes | bytearray | memoryview,
        *,
        binary: str = "utf8",
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        via_json: bool = False,
    ) -> tuple[bytes, bytes, bytes, bytes]:
        """Each event of an array document as Spark's Variant binary encoding, exactly
        what ``parse_json`` makes of its :meth:`decode_json_packed` text (DESIGN.md,
        "Variant transcoding"), without Python values.

        The compiled core walks the body straight to Variants (DESIGN.md, "Direct
        walk"); a body it leaves alone (malformed, or holding references, objects,
        weak references or regexps) takes the JSON path: the text, then ``parse_json``'s
        rules, which is also the reference the direct walk is tested against, byte for
        byte, and what the pure codec always does.

        Args:
            via_json: always take the JSON path (the reference; for tests and
                comparisons).

        Returns:
            ``(values, value_offsets, metadata, metadata_offsets)``: the values back to
            back and n + 1 native int32 offsets bounding them, the same for the
            metadata (two Arrow ``binary`` columns' layouts, for
            ``pa.BinaryArray.from_buffers``).

        Raises:
            Whatever :meth:`decode_json_packed` raises; ValueError for an event that
            Spark's ``parse_json`` refuses too (a key repeated in one hash) or whose
            Variant exceeds 128 MiB.
        """
        args = self._json_args(data, binary, max_depth, max_decompressed_size)
        direct = None if via_json else getattr(self._backend, "array_to_variant_packed", None)
        if direct is not None:
            result: tuple[bytes, bytes, bytes, bytes] | None = direct(*args)
            if result is not None:
                return result
        text, offsets = self._backend.array_to_json_packed(*args)
        return self._backend.json_to_variant_packed(text, offsets, args[-1])

    @staticmethod
    def _json_args(
        data: bytes | bytearray | memoryview, binary: str, max_depth: int, max_size: int
    ) -> tuple[bytes, int, int, int, int, int]:
        mode = _binary_mode(binary)
        depth = check_max_depth(max_depth)
        limit = _check_int("max_decompressed_size", max_size)
        doc = _as_bytes(data)
        layout = read_layout(doc)
        buf, start, base = compression.open_body(
            doc, layout.protocol, layout.doc_type, layout.body_offset, limit
        )
        return buf, start, len(buf), base, mode, depth

    def decode_header(
        self,
        data: bytes | bytearray | memoryview,
        *,
        binary: str = "utf8",
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> Header:
        """Read a document's header and user header without touching its body.

        Args:
            data: the document (only the header needs to be present).
            binary: as for :meth:`decode`, applied to the user header.
            max_depth: nesting levels allowed in the user header.

        Returns:
            The :class:`Header`.

        Raises:
            SerealDecodeError: a bad header or user header.
        """
        mode = _binary_mode(binary)
        depth = check_max_depth(max_depth)
        doc = _as_bytes(data)
        layout = read_layout(doc)
        user_header = None
        start, end = layout.suffix_start, layout.body_offset
        # Protocol 1 suffixes are opaque; later ones are <bitfield> [<user header>].
        if layout.protocol >= 2 and end > start and doc[start] & tags.HEADER_BIT_USER_META:
            user_header, pos = self._backend.decode_body(doc, start + 1, end, start, mode, depth)
            _check_trailing(doc, pos, end)
        return Header(layout.protocol, _DOC_TYPES[layout.doc_type].name, user_header, end)

    @staticmethod
    def looks_like_sereal(data: object) -> bool:
        """True when ``data`` is bytes-like with a valid Sereal header and some body.

        Never raises; it does not look at the body itself.
        """
        try:
            doc = _as_bytes(data)
            return read_layout(doc).body_offset < len(doc)
        except (TypeError, SerealError):
            return False


def _binary_mode(binary: str) -> int:
    try:
        return _BINARY_MODES[binary]
    except (KeyError, TypeError):
        raise ValueError(f"binary must be 'utf8', 'latin1' or 'bytes', not {binary!r}") from None
