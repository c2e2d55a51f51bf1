"""The stored blob: a Sereal document followed by a self-identifying checksum postfix.

Layout (all blobs we write; format in ``eventstore/DESIGN.md``, "Blob format")::

    +----------------------+-------------+--------+--------+----------------+
    | Sereal document      | digest      | alg id | length | magic          |
    | (header + body)      | D bytes, LE | 1 byte | 1 byte | b"\\x00REVCK"   |
    +----------------------+-------------+--------+--------+----------------+
                           '------------- postfix: D + 8 bytes ------------'

The digest covers the Sereal document, i.e. every byte before the postfix. Algorithm 1
is xxh3_64 (D = 8, postfix 16 bytes). Readers find the postfix from the end: the magic
says "there is a postfix", the length byte says where it starts, the algorithm id says
how to check it. A blob whose end is cut off has lost its magic, so a missing postfix is
an error by default. Pure logic, no I/O.

**Bounded decoding.** A small stored blob can claim a body of gigabytes (a zstd frame
of zeros is ~30 KB per GiB). :class:`DecodeLimits` caps what a blob may decode to,
relative to its stored size and absolutely; :func:`unpack_blob` given limits reads the
body's claimed size from the header (no decompression) and raises
:class:`~eventstore.errors.BlobTooLarge` over the cap, then decompresses with the cap
as the decompressor's limit, and decodes with an object budget
(``DecodeLimits.max_decoded_objects``): a small body can still build many objects
(an empty hash is one byte and ~72 bytes of Python), so past the budget the decoder
stops and :class:`BlobTooManyObjects` (a ``BlobTooLarge``) is raised. Design and
figures: ``sereal_codec/DESIGN.md``, "Bounded decoding".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import xxhash

import sereal_codec as sereal
from eventstore.errors import (
    BlobDecodeError,
    BlobError,
    BlobTooLarge,
    ChecksumMismatch,
    ChecksumMissing,
    UnsupportedChecksum,
)
from sereal_codec import document as sereal_document
from sereal_codec.errors import DecodeBudgetExceeded, SerealError
from sereal_codec.projection import Field, compile_fields

__all__ = [
    "ALG_XXH3_64",
    "DECODED_FLOOR_BYTES",
    "DEFAULT_ALGORITHM",
    "MAGIC",
    "MAX_DECODED_BYTES",
    "MAX_DECODED_OBJECTS",
    "MAX_DECODED_RATIO",
    "BlobTooManyObjects",
    "DecodeLimits",
    "add_postfix",
    "has_postfix",
    "pack_blob",
    "postfix_length",
    "unpack_blob",
    "verify_postfix",
]

#: The last bytes of every blob with a postfix. The NUL makes it unlike text, and
#: together with a valid algorithm id and length byte a document without postfix ends
#: like this by chance with probability about 2**-64.
MAGIC = b"\x00REVCK"

#: Algorithm id of xxh3_64 (64-bit XXH3, seed 0, digest stored little-endian).
ALG_XXH3_64 = 1
DEFAULT_ALGORITHM = ALG_XXH3_64

Buffer = bytes | bytearray | memoryview

#: Default absolute cap on a blob's decompressed body, bytes.
MAX_DECODED_BYTES = 64 * 2**20
#: Default cap relative to the stored size: decompressed body / stored bytes. Realistic
#: chunks of varied events come out at 2.4-2.8 (zstd, dedupe).
MAX_DECODED_RATIO = 64.0
#: Every blob may decode to this much whatever its ratio (unless the absolute cap is
#: lower): chunks of near-identical events legitimately reach ratios in the thousands,
#: and our own writers keep a chunk's body under half of this
#: (``eventstore.chunking.CHUNK_MAX_BODY_BYTES``), so nothing we write is refused.
DECODED_FLOOR_BYTES = 16 * 2**20
#: Default budget of Python objects one blob may decode to, counted as
#: ``sereal_codec/DESIGN.md`` ("Bounded decoding") says (containers with their
#: slots, references, objects, regexps). Realistic 500 KB chunks of the events
#: generator need ~320,000; an 8 MiB body of them (the most our writers put in a chunk)
#: ~2.4 million, of one event repeated ~3.1 million. At the worst ~80 bytes measured per
#: counted object, a hostile body stops at ~340 MB of objects.
MAX_DECODED_OBJECTS = 4 * 2**20


class BlobTooManyObjects(BlobTooLarge):
    """The blob's body would build more Python objects than the reader allows
    (``DecodeLimits.max_decoded_objects``): the decoder stopped at the budget, before
    building more. A :class:`~eventstore.errors.BlobTooLarge`, so every reader that
    answers "too large" answers this too.

    Not retriable: identical bytes are on every replica.

    Args:
        key: the Riak key, or None.
        decoded_bytes: the body's decompressed size, bytes (within the byte cap).
        cap_bytes: the byte cap for a blob of this stored size, bytes.
        stored_bytes: the blob's stored size, bytes.
        max_objects: the object budget that was exceeded.
        offset: the body offset where the decoder stopped.
    """

    def __init__(  # noqa: PLR0917  (BlobTooLarge's fields and the budget's)
        self,
        key: str | None,
        decoded_bytes: int,
        cap_bytes: int,
        stored_bytes: int,
        max_objects: int,
        offset: int | None,
    ) -> None:
        self.decoded_bytes = decoded_bytes
        self.cap_bytes = cap_bytes
        self.stored_bytes = stored_bytes
        self.max_objects = max_objects
        self.offset = offset
        BlobError.__init__(
            self,
            key,
            f"its {decoded_bytes}-byte body builds more than {max_objects} objects, the "
            f"budget for any blob (stopped at body byte {offset}; {stored_bytes} stored bytes)",
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (
                self.key,
                self.decoded_bytes,
                self.cap_bytes,
                self.stored_bytes,
                self.max_objects,
                self.offset,
            ),
        )


@dataclass(frozen=True)
class DecodeLimits:
    """How much a stored blob may decode to: ``min(max_decoded_bytes,
    max(floor_bytes, max_decoded_ratio x stored bytes))`` of decompressed body.

    And at most ``max_decoded_objects`` Python objects, whatever the body's size.

    Attributes:
        max_decoded_bytes: absolute cap, bytes (> 0).
        max_decoded_ratio: cap relative to the blob's stored size (> 0).
        floor_bytes: what every blob may decode to whatever its ratio, bytes (>= 0).
        max_decoded_objects: the decoder's object budget (> 0), counted as
            ``sereal_codec/DESIGN.md`` ("Bounded decoding") says.
    """

    max_decoded_bytes: int = MAX_DECODED_BYTES
    max_decoded_ratio: float = MAX_DECODED_RATIO
    floor_bytes: int = DECODED_FLOOR_BYTES
    max_decoded_objects: int = MAX_DECODED_OBJECTS

    def __post_init__(self) -> None:
        if (
            self.max_decoded_bytes <= 0
            or self.max_decoded_ratio <= 0
            or self.floor_bytes < 0
            or self.max_decoded_objects <= 0
        ):
            raise ValueError(f"decode limits must be positive: {self}")

    def cap_for(self, stored_bytes: int) -> int:
        """Returns: the largest decompressed body, bytes, of a blob of ``stored_bytes``."""
        relative = max(self.floor_bytes, int(self.max_decoded_ratio * stored_bytes))
        return min(self.max_decoded_bytes, relative)

    def check(self, document: Buffer, stored_bytes: int, key: str | None = None) -> int:
        """Check the body size a Sereal document claims against the cap, without
        decompressing it.

        Args:
            document: the Sereal document (postfix removed).
            stored_bytes: the blob's stored size (document and postfix), bytes.
            key: the Riak key, for the error.

        Returns:
            The cap, bytes (to pass on as the decoder's ``max_decompressed_size``).

        Raises:
            BlobTooLarge: the claimed size is over the cap.
            BlobDecodeError: the header or compression framing is malformed.
        """
        cap = self.cap_for(stored_bytes)
        try:
            claimed = sereal_document.body_size(document)
        except SerealError as e:
            raise BlobDecodeError(key, f"Sereal document does not decode: {e}") from e
        if claimed > cap:
            raise BlobTooLarge(key, claimed, cap, stored_bytes)
        return cap


@dataclass(frozen=True)
class _Algorithm:
    name: str
    digest_size: int
    digest: Callable[[Buffer], bytes]


def _xxh3_64(data: Buffer) -> bytes:
    return xxhash.xxh3_64_intdigest(data).to_bytes(8, "little")


_ALGORITHMS: dict[int, _Algorithm] = {
    ALG_XXH3_64: _Algorithm("xxh3_64", 8, _xxh3_64),
}

# Bytes after the digest: algorithm id, postfix length, magic.
_TRAILER = 2 + len(MAGIC)


def postfix_length(algorithm: int = DEFAULT_ALGORITHM) -> int:
    """Returns: the postfix size in bytes for ``algorithm`` (16 for xxh3_64).

    Raises:
        UnsupportedChecksum: for an unknown algorithm id.
    """
    alg = _ALGORITHMS.get(algorithm)
    if alg is None:
        raise UnsupportedChecksum(None, f"unknown checksum algorithm id {algorithm}")
    return alg.digest_size + _TRAILER


def add_postfix(document: Buffer, *, algorithm: int = DEFAULT_ALGORITHM) -> bytes:
    """Append the checksum postfix to a Sereal document.

    Args:
        document: the Sereal document bytes.
        algorithm: checksum algorithm id (default xxh3_64).

    Returns:
        ``document + postfix``.

    Raises:
        UnsupportedChecksum: for an unknown algorithm id.
    """
    alg = _ALGORITHMS.get(algorithm)
    if alg is None:
        raise UnsupportedChecksum(None, f"unknown checksum algorithm id {algorithm}")
    size = alg.digest_size + _TRAILER
    return b"".join((document, alg.digest(document), bytes((algorithm, size)), MAGIC))


def has_postfix(data: Buffer) -> bool:
    """True when ``data`` ends with the postfix magic (its digest is not checked)."""
    n = len(data)
    return n >= _TRAILER and bytes(memoryview(data)[n - len(MAGIC) :]) == MAGIC


def verify_postfix(data: Buffer, key: str | None = None, *, required: bool = True) -> memoryview:
    """Check a blob's postfix and return the Sereal document before it.

    Args:
        data: the stored bytes.
        key: the Riak key they were read from, named in errors.
        required: when False, bytes without a postfix (legacy or foreign blobs) are
            returned whole, unverified; truncation is then left to the Sereal decoder.

    Returns:
        A zero-copy view of the Sereal document.

    Raises:
        ChecksumMissing: no postfix and ``required`` (includes blobs cut short).
        ChecksumMismatch: the postfix is malformed or its digest does not match.
        UnsupportedChecksum: the postfix names an unknown algorithm.
    """
    view = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
    n = len(view)
    if not has_postfix(view):
        if required:
            raise ChecksumMissing(
                key, f"no checksum postfix in {n} bytes (truncated, or not written by us)"
            )
        return view
    alg_id, size = view[n - _TRAILER], view[n - _TRAILER + 1]
    alg = _ALGORITHMS.get(alg_id)
    if alg is None:
        raise UnsupportedChecksum(key, f"unknown checksum algorithm id {alg_id} in postfix")
    if size != alg.digest_size + _TRAILER or size > n:
        raise ChecksumMismatch(
            key, f"malformed postfix: length byte {size} for {alg.name} in {n} bytes"
        )
    document = view[: n - size]
    stored = bytes(view[n - size : n - _TRAILER])
    actual = alg.digest(document)
    if stored != actual:
        raise ChecksumMismatch(
            key,
            f"{alg.name} of {len(document)} bytes is {actual.hex()}, postfix says {stored.hex()}",
        )
    return document


def pack_blob(
    value: Any,
    *,
    compress: str | None = "zstd",
    level: int | None = None,
    dedupe_strings: bool = True,
    protocol: int | None = None,
    compress_threshold: int = 1024,
    algorithm: int = DEFAULT_ALGORITHM,
) -> bytes:
    """Encode a value (usually a list of event dicts) as a stored blob.

    Args:
        value: what to store.
        compress, level, dedupe_strings, protocol, compress_threshold: passed to
            :func:`sereal_codec.encode` (``compress``: "zstd", "zlib", "snappy" or
            None; ``compress_threshold`` in bytes of uncompressed body).
        algorithm: checksum algorithm id.

    Returns:
        The Sereal document with its checksum postfix.

    Raises:
        sereal_codec.errors.SerealEncodeError: when the value cannot be encoded.
    """
    kwargs: dict[str, Any] = {
        "compress": compress,
        "dedupe_strings": dedupe_strings,
        "compress_threshold": compress_threshold,
    }
    if level is not None:
        kwargs["level"] = level
    if protocol is not None:
        kwargs["protocol"] = protocol
    return add_postfix(sereal.encode(value, **kwargs), algorithm=algorithm)


def unpack_blob(
    data: Buffer,
    *,
    key: str | None = None,
    required: bool = True,
    binary: str | None = None,
    max_depth: int | None = None,
    max_decompressed_size: int | None = None,
    limits: DecodeLimits | None = None,
    fields: Iterable[Field] | None = None,
) -> Any:
    """Verify a stored blob's checksum and decode the Sereal document in it.

    Args:
        data: the stored bytes.
        key: the Riak key they came from, named in every error.
        required: see :func:`verify_postfix`.
        binary, max_depth, max_decompressed_size: passed to
            :func:`sereal_codec.decode` when given (its defaults otherwise).
        limits: when given, the body's claimed decompressed size is checked against
            ``limits.cap_for(len(data))`` before anything is decompressed, the cap
            (or ``max_decompressed_size`` if lower) bounds the decompressor, and
            ``limits.max_decoded_objects`` the objects the decoder builds.
        fields: passed to :func:`sereal_codec.decode`: build only these fields
            of each event (dotted paths; None for all), by the rule of
            :mod:`sereal_codec.projection`.

    Returns:
        The decoded value.

    Raises:
        ChecksumMissing, ChecksumMismatch, UnsupportedChecksum: see :func:`verify_postfix`.
        BlobTooLarge: with ``limits``, the body would decode to more than the cap;
            :class:`BlobTooManyObjects` when it would build more objects than allowed.
        BlobDecodeError: the checksum matched but the document does not decode (the
            codec's SerealError is the ``__cause__``).
        ValueError: a bad field (before anything is read).
    """
    if fields is not None and not isinstance(fields, str):
        fields = list(fields)  # read twice: checked here, compiled again by decode
    compile_fields(fields)  # a bad field fails before anything is read
    view = verify_postfix(data, key, required=required)
    document = bytes(view)
    kwargs: dict[str, Any] = {}
    cap = 0
    if limits is not None:
        cap = limits.check(document, len(data), key)
        if max_decompressed_size is None or cap < max_decompressed_size:
            max_decompressed_size = cap
        kwargs["max_objects"] = limits.max_decoded_objects
    if binary is not None:
        kwargs["binary"] = binary
    if max_depth is not None:
        kwargs["max_depth"] = max_depth
    if max_decompressed_size is not None:
        kwargs["max_decompressed_size"] = max_decompressed_size
    if fields is not None:
        kwargs["fields"] = fields
    try:
        return sereal.decode(document, **kwargs)
    except DecodeBudgetExceeded as e:
        body = sereal_document.body_size(document)  # checked above: it decoded that far
        raise BlobTooManyObjects(key, body, cap, len(data), kwargs["max_objects"], e.offset) from e
    except SerealError as e:
        raise BlobDecodeError(key, f"Sereal document does not decode: {e}") from e
