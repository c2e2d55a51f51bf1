"""Errors raised by the Sereal codec.

Every error is a :class:`SerealError`, itself a :class:`ValueError`, so callers that
only care about "bad input" can catch ``ValueError``. The codec is a library of its own
(it imports nothing of riak-events), so its root is not under riak-events' error tree:
the store translates codec errors at its boundaries (``eventstore.blob``,
``eventstore.chunking``), where they become ``BlobError``s with the codec's error as
``__cause__``. Decoding errors carry the byte
``offset`` at which the problem was found (relative to the buffer the decoder was
reading: the document for the header, the decompressed body for body errors).
"""

from __future__ import annotations

from typing import ClassVar


class SerealError(ValueError):
    """Root of every codec error.

    Attributes:
        retriable: always False: the same bytes fail the same way (a class attribute,
            as on every riak-events error, so one handler can ask any of them).

    Args:
        message: what was wrong, in words.
        offset: byte offset where it was found, or None when it has no position.
    """

    retriable: ClassVar[bool] = False

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.message = message
        self.offset = offset
        super().__init__(message if offset is None else f"{message} at byte {offset}")

    def __reduce__(self) -> tuple[type[SerealError], tuple[str, int | None]]:
        return (type(self), (self.message, self.offset))


class SerealDecodeError(SerealError):
    """The input is not a valid Sereal document (or not one we accept)."""


class BadHeader(SerealDecodeError):
    """Magic string, version/type byte or header suffix is invalid."""


class UnsupportedVersion(BadHeader):
    """The protocol version or document type is not one the spec defines."""


class TruncatedInput(SerealDecodeError):
    """The input ends in the middle of a header, tag, length or string."""


class UnknownTag(SerealDecodeError):
    """A tag byte that is reserved, unimplemented (MANY, EXTEND) or misplaced."""


class BadBackReference(SerealDecodeError):
    """REFP / ALIAS / COPY / OBJECTV points forward, outside the body, at an
    untracked item, or at a tag it may not point at (COPY of a COPY)."""


class InvalidStructure(SerealDecodeError):
    """Well-formed tags in a combination the spec forbids (a non-string hash key,
    class name or regexp part, trailing bytes after the body, a varint longer than 16
    bytes or above 2**64 - 1, ...). A length or count larger than the remaining input
    is :class:`TruncatedInput`."""


class DepthExceeded(SerealDecodeError):
    """Nesting is deeper than ``max_depth``."""


class SizeLimitExceeded(SerealDecodeError):
    """A compressed body claims (or inflates to) more than ``max_decompressed_size``."""


class DecodeBudgetExceeded(SizeLimitExceeded):
    """The body would build more Python objects than ``max_objects`` (counted as
    DESIGN.md, "Bounded decoding", says); ``offset`` is the tag where the decoder
    stopped, before building what it was charging for."""


class DecompressionError(SerealDecodeError):
    """The compressed body is corrupt or disagrees with its declared lengths."""


class SerealEncodeError(SerealError):
    """A value cannot be encoded."""


class UnencodableValue(SerealEncodeError):
    """A value of a type Sereal cannot represent (a set, an object, an int beyond
    64 bits, a dict key that is not str/bytes, ...)."""


class EncodeDepthExceeded(SerealEncodeError):
    """The value nests deeper than the encoder's ``max_depth``."""
