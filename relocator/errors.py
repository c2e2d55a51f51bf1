"""The relocator's errors: one root, leaves named for what happened.

``retriable`` (a class attribute) says whether doing the same thing again later can help.
"""

from __future__ import annotations

from eventstore.errors import RiakEventsError


class RelocatorError(RiakEventsError):
    """Root of every error the relocator raises on purpose (a ``RiakEventsError``)."""


class ListenFailed(RelocatorError):
    """A listening socket (``udp_listen``, ``tcp_listen``, ``metrics_listen``) could not
    be opened: the address is in use, not this host's, or needs privileges.

    Args:
        setting: the setting that names the address.
        address: ``HOST:PORT``.
        error: the operating system's error.
    """

    def __init__(self, setting: str, address: str, error: OSError) -> None:
        self.setting = setting
        self.address = address
        reason = (error.strerror or str(error)).lower()
        super().__init__(f"relocator: cannot listen on {address} ({setting}): {reason}")


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


class StateStoreLost(RelocatorError):
    """The state store cannot be trusted to be the one this data directory wrote: emptied,
    replaced by another, or unreadable. Starting on it would number batches again from 0,
    writing chunk keys that already hold stored events, and push the journal again. The
    message names the directory and what to do."""


class PushFailed(RelocatorError):
    """Chunks or metadata of a batch could not be stored in one cluster (yet)."""

    retriable = True


class MetadataNotSettled(PushFailed):
    """After ``metadata_max_rounds`` read-merge-write-verify rounds our refs were still
    missing from the metadata (another writer kept overwriting it); tried again later."""


class OwnershipLost(RelocatorError):
    """The ZooKeeper session ended: every work unit this relocator owned is released."""

    retriable = True


class CoordinationUnavailable(RelocatorError):
    """A ZooKeeper call failed (connection lost, session expired, lock not acquired in
    time): ownership decisions and pushes wait until ZooKeeper answers again."""

    retriable = True


class WriterIdTaken(RelocatorError):
    """Another live ZooKeeper session holds this relocator's writer id (or its
    ``relocators/<id>`` znode): two processes must never number chunks with one id.

    Args:
        writer_id: the contested writer id.
        path: the znode.
        holder: the holder's relocator id (the znode's data).
        session: the holder's ZooKeeper session id.
    """

    def __init__(self, writer_id: int, path: str, holder: str, session: int) -> None:
        self.writer_id = writer_id
        self.path = path
        self.holder = holder
        self.session = session
        super().__init__(
            f"writer id {writer_id} is held by relocator {holder} (ZooKeeper session "
            f"0x{session:x}, znode {path}); stop that relocator or give this one another "
            "writer id (a killed relocator's session expires after session_timeout_s)"
        )

    def __reduce__(self) -> tuple[type[WriterIdTaken], tuple[int, str, str, int]]:
        return (type(self), (self.writer_id, self.path, self.holder, self.session))


class ExtraMissing(RelocatorError):
    """A configured feature needs an optional extra that is not installed."""
