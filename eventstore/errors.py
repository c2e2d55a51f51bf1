"""The project's root exception, the ``eventstore`` package's, and the leaves for names,
ranges, blobs and chunks.

Every error riak-events raises on purpose is a :class:`RiakEventsError`; under it each
package has exactly one root, and every error of the package derives from it::

    RiakEventsError
        EventStoreError        eventstore (this module)
            RiakError          eventstore.riak.errors
        DevnodeError           devnode.errors
        RelocatorError         relocator.errors
        CompanionError         companion.errors
        SubstreamError         substreams.errors
        ConsumerError          consumer_lib.errors
        FleetError             fleet.errors
            ClusterError       fleet.cluster.errors
            DevStackError      fleet.devstack.errors

The Sereal codec is a library of its own (``sereal_codec``, importing nothing of
riak-events): its root SerealError in sereal_codec.errors is a ValueError outside this
tree, and :mod:`eventstore.blob` and :mod:`eventstore.chunking` translate its errors
into ``BlobError``s. All of it is checked by ``tests/unit/test_error_tree.py``, which
also checks that no two of the project's exception classes share a name. The one
exception that is not an error: ``substreams.errors.SoftTimeout``, a ``BaseException``
so that a plugin's ``except Exception`` cannot swallow its deadline.

Leaves are named for what happened and carry the identifiers needed to act on them (the
key, the part of a key, the index of an event). ``retriable`` says whether trying again
(another replica, another node) can help; it is a class attribute so handlers can decide
without parsing messages. The Riak client's errors live in ``eventstore.riak`` and the
Sereal codec's in ``sereal_codec.errors``; they are translated at those boundaries.
"""

from __future__ import annotations

from typing import ClassVar


class RiakEventsError(Exception):
    """Root of every error riak-events raises on purpose: catch this to handle them all.

    Attributes:
        retriable: whether doing the same thing again later may succeed (a class
            attribute, so a handler decides without parsing the message).
    """

    retriable: ClassVar[bool] = False


class EventStoreError(RiakEventsError):
    """Root of every error the ``eventstore`` package raises on purpose."""


# -- names ------------------------------------------------------------------------------


class InvalidName(EventStoreError, ValueError):
    """A key, metadata value or namespace name does not follow the naming contract.

    Args:
        text: the whole offending text (a chunk key, metadata key, metadata value, ...).
        part: which part is wrong (``"epoch"``, ``"dc"``, ``"type"``, ``"subtype"``,
            ``"chunk"``, ``"entry 3"``, ...), or ``"key"`` when the shape itself is wrong.
        reason: what is wrong with it, in words.
    """

    what: ClassVar[str] = "name"

    def __init__(self, text: str, part: str, reason: str) -> None:
        self.text = text
        self.part = part
        self.reason = reason
        super().__init__(f"invalid {self.what} {text!r}: {part}: {reason}")

    def __reduce__(self) -> tuple[type[InvalidName], tuple[str, str, str]]:
        return (type(self), (self.text, self.part, self.reason))


class InvalidKey(InvalidName):
    """A chunk key or metadata key is malformed (see ``eventstore/DESIGN.md``)."""

    what = "key"


class InvalidMetadataValue(InvalidName):
    """A metadata value (``type:subtype:chunk`` entries joined by ``|``) is malformed."""

    what = "metadata value"


# -- epoch ranges -----------------------------------------------------------------------


class InvalidRange(EventStoreError, ValueError):
    """A range bound or an epoch range is not valid (``eventstore.ranges``): a bound of
    no known form, a negative epoch, a naive datetime, an end before its start."""


# -- blobs ------------------------------------------------------------------------------


class BlobError(EventStoreError):
    """A stored blob cannot be read back.

    Args:
        key: the Riak key the blob was read from, or None when the caller gave none.
        reason: what is wrong, in words.
    """

    def __init__(self, key: str | None, reason: str) -> None:
        self.key = key
        self.reason = reason
        where = f"blob {key!r}" if key is not None else "blob"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[type[BlobError], tuple[str | None, str]]:
        return (type(self), (self.key, self.reason))


class ChecksumMismatch(BlobError):
    """The checksum postfix does not match the document, or is malformed or cut off.

    Retriable: another replica of the same key may hold intact bytes.
    """

    retriable = True


class ChecksumMissing(ChecksumMismatch):
    """The blob has no checksum postfix (a truncated blob looks like this too)."""


class UnsupportedChecksum(BlobError):
    """The postfix names a checksum algorithm this version does not know."""


class BlobDecodeError(BlobError):
    """The checksum matched but the Sereal document inside does not decode.

    The original :class:`sereal_codec.errors.SerealError` is the ``__cause__``.
    Not retriable: identical bytes are on every replica (the checksum proved it).
    """


class BlobTooLarge(BlobError):
    """The blob's body would decode to more bytes than the reader allows
    (:class:`eventstore.blob.DecodeLimits`): refused before it is decompressed.

    Not retriable: identical bytes are on every replica.

    Args:
        key: the Riak key, or None.
        decoded_bytes: the size the body claims (its decompressed size), bytes.
        cap_bytes: the reader's cap for a blob of this stored size, bytes.
        stored_bytes: the blob's stored size, bytes.
    """

    def __init__(
        self, key: str | None, decoded_bytes: int, cap_bytes: int, stored_bytes: int
    ) -> None:
        self.decoded_bytes = decoded_bytes
        self.cap_bytes = cap_bytes
        self.stored_bytes = stored_bytes
        super().__init__(
            key,
            f"decodes to {decoded_bytes} bytes, more than the cap of {cap_bytes} bytes "
            f"for {stored_bytes} stored bytes",
        )

    def __reduce__(self) -> tuple[type[BlobTooLarge], tuple[str | None, int, int, int]]:  # type: ignore[override]
        return (type(self), (self.key, self.decoded_bytes, self.cap_bytes, self.stored_bytes))


# -- chunking ---------------------------------------------------------------------------


class ChunkingError(EventStoreError):
    """Events or a blob cannot be cut into chunks."""


class EventTooLarge(ChunkingError):
    """One event alone, stored as a chunk, exceeds ``chunk_max_bytes``.

    Args:
        index: the event's 0-based index in the input list or blob array.
        size_bytes: the stored size of a chunk holding only that event (compressed,
            with postfix).
        chunk_max_bytes: the limit it exceeds.
    """

    def __init__(self, index: int, size_bytes: int, chunk_max_bytes: int) -> None:
        self.index = index
        self.size_bytes = size_bytes
        self.chunk_max_bytes = chunk_max_bytes
        super().__init__(
            f"event {index} needs {size_bytes} bytes as a chunk of its own, "
            f"more than chunk_max_bytes={chunk_max_bytes}"
        )

    def __reduce__(self) -> tuple[type[EventTooLarge], tuple[int, int, int]]:
        return (type(self), (self.index, self.size_bytes, self.chunk_max_bytes))


class NotAnArrayBlob(ChunkingError):
    """A blob given to ``split_blob`` is not a Sereal document whose body is an array."""


class SplitterUnavailable(ChunkingError):
    """The compiled splitter (``sereal_codec._sereal.array_layout``) is not built."""
