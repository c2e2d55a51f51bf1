"""The public Sereal API: :class:`Codec` over one body codec.

A :class:`Codec` wraps a body codec (the compiled ``_sereal`` module or
``sereal_codec.pure``'s decoder and encoder, anything with ``decode_body`` and
``encode_body``, see DESIGN.md) and gives it the public API: ``decode``, ``encode``,
the JSON and Variant transcoders, ``looks_like_sereal``. Documents (header, layout,
compression) are :mod:`sereal_codec.document`'s; header errors carry document offsets,
body errors offsets into the buffer the body was decoded from (the document for a raw
body, the decompressed body otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sereal_codec import compression, tags
from sereal_codec.compression import varint_bytes
from sereal_codec.document import (
    _BINARY_MODES,
    _DOC_TYPES,
    DEFAULT_COMPRESS_THRESHOLD,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    DEFAULT_MAX_DEPTH,
    BodyCodec,
    Header,
    _as_bytes,
    _check_int,
    _check_trailing,
    _document_options,
    _head,
    read_layout,
)
from sereal_codec.errors import SerealError
from sereal_codec.limits import check_max_depth
from sereal_codec.projection import Field, compile_fields

__all__ = ["Codec"]


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
        buf, start, base = compression.unframe_body(
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
        buf, start, base = compression.unframe_body(
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
