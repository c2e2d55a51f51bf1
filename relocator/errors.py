"""The relocator's errors: one root, leaves named for what happened.

``retriable`` (a class attribute) says whether doing the same thing again later can help.
"""

from __future__ import annotations

from typing import ClassVar


class RelocatorError(Exception):
    """Root of every error the relocator raises on purpose."""

    retriable: ClassVar[bool] = False


class MalformedFrame(RelocatorError):
    """An intake frame that does not follow the wire format (``relocator.wire``)."""


class OversizedEvent(RelocatorError):
    """An event frame larger than ``max_event_bytes``."""


class JournalCorrupt(RelocatorError):
    """A journal record failed its CRC before the torn tail of the last segment."""


class JournalFormatError(RelocatorError):
    """The journal directory holds segments this version cannot replay."""


class BadSpoolFile(RelocatorError):
    """A spool file with a name or content we cannot use; it is moved aside."""


class PushFailed(RelocatorError):
    """Chunks or metadata of a batch could not be stored in one cluster (yet)."""

    retriable = True


class MetadataNotSettled(PushFailed):
    """After ``metadata_max_rounds`` read-merge-write-verify rounds our refs were still
    missing from the metadata (another writer kept overwriting it); tried again later."""


class OwnershipLost(RelocatorError):
    """The ZooKeeper session ended: every work unit this relocator owned is released."""

    retriable = True
