"""Errors of the consumer library: one root, leaves named for what happened.

Every error raised on purpose by ``consumer_lib`` is a :class:`ConsumerError`. Riak,
HTTP, checksum and codec errors never leak: :mod:`consumer_lib.store` translates them
at one boundary, keeping the original as ``__cause__``. Each error carries the epoch, dc
and key it concerns (``None`` when not applicable) and says in ``retriable`` whether
trying the same read again later may succeed.
"""

from __future__ import annotations

from consumer_lib.instants import when_text
from eventstore.errors import RiakEventsError


class ConsumerError(RiakEventsError):
    """Root of every error the consumer library raises on purpose (a ``RiakEventsError``).

    Args:
        message: what happened, in words.
        epoch: the epoch concerned, if any.
        dc: the dc concerned, if any.
        key: the Riak key concerned (chunk, metadata or result key), if any.
    """

    def __init__(
        self,
        message: str,
        *,
        epoch: int | None = None,
        dc: str | None = None,
        key: str | None = None,
    ) -> None:
        self.message = message
        self.epoch = epoch
        self.dc = dc
        self.key = key
        shown = None if epoch is None else when_text(epoch)  # the number, then UTC
        where = [f"{n}={v}" for n, v in (("epoch", shown), ("dc", dc), ("key", key)) if v]
        super().__init__(f"{message} ({', '.join(where)})" if where else message)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.message, self.epoch, self.dc, self.key))


def _rebuild(
    cls: type[ConsumerError], message: str, epoch: int | None, dc: str | None, key: str | None
) -> ConsumerError:
    return cls(message, epoch=epoch, dc=dc, key=key)


class InvalidArgument(ConsumerError, ValueError):
    """A range, filter, name or option given to the library is not valid."""


class StoreUnavailable(ConsumerError):
    """Riak could not be reached or kept failing (after the client's retries on other
    nodes). Retriable: the cluster may recover."""

    retriable = True


class MetadataUnreadable(ConsumerError):
    """An epoch's metadata exists but is malformed (names the metadata key)."""


class ChunkMissing(ConsumerError):
    """A chunk listed in the metadata is not in Riak, even asked with notfound_ok=false
    on another node. Metadata is written after its chunks, so this means data loss or
    expiry between the metadata read and the chunk read."""


class ChunkCorrupt(ConsumerError):
    """No node of the node list returned a copy of the chunk whose checksum matches.

    Attributes:
        nodes: the nodes that returned a bad copy, in the order they were asked.
    """

    nodes: tuple[str, ...] = ()


class ChunkUnreadable(ConsumerError):
    """The chunk's checksum matched but it does not decode to a list of events (the same
    bytes are on every replica, so not retriable)."""


class ChunkTooLarge(ChunkUnreadable):
    """The chunk would decode to more than the reader's cap (``Store(decode_limits=)``,
    defaults in ``consumer_lib.defaults``): refused before it is decompressed. The
    message names the decompressed size and the cap, in bytes; not retriable (the same
    bytes are on every replica)."""


class PluginNotFound(ConsumerError):
    """The substream's plugin is not in the plugin directories, entry points or registry
    the client was configured with, and the read cannot go without it
    (``fallback="always"``). Other reads return the served results without it."""


class SubstreamNotFound(PluginNotFound):
    """No plugin here declares the substream and the server holds no result of it for
    any chunk of the range: most likely a mistyped name. The message lists the known
    names and the closest one (``no substream web5xx; known: ... (did you mean
    web_5xx?)``); ``known`` holds them. A :class:`PluginNotFound`, so code catching that
    still does."""

    known: tuple[str, ...] = ()


class DiscoveryFailed(ConsumerError):
    """No node list could be obtained (ZooKeeper unreachable, or no live node)."""

    retriable = True


class PositionError(ConsumerError):
    """A tail position file cannot be read or written, or belongs to another dc."""


class SparkSourceError(ConsumerError, ValueError):
    """The Spark source (``consumer_lib.spark``) was given bad options, or stored data it
    cannot read (a chunk the metadata names is missing); the message names the option
    or the key."""
