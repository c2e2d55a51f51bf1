"""The consumer library: read epoch ranges of the full stream or of a substream (with
client-side fallback), and follow a dc in near real time.

    from consumer_lib import EventsClient, merge_partials   # the latter: a query
                                                             # substream's chunks merged

See ``consumer_lib/DESIGN.md`` and :mod:`consumer_lib.client`.
"""

from __future__ import annotations

from consumer_lib.client import EventsClient
from consumer_lib.errors import (
    ChunkCorrupt,
    ChunkMissing,
    ChunkUnreadable,
    ConsumerError,
    DiscoveryFailed,
    InvalidArgument,
    MetadataUnreadable,
    PluginNotFound,
    PositionError,
    StoreUnavailable,
    SubstreamNotFound,
)
from consumer_lib.gaps import ReadSummary, SubstreamResults
from consumer_lib.listing import Inventory
from consumer_lib.ranges import EpochRange
from consumer_lib.tail import Tail
from consumer_lib.types import Chunk, Epoch, SubstreamEpoch, SubstreamResult, TaggedEvent
from substreams.query import merge_partials

__all__ = [
    "Chunk",
    "ChunkCorrupt",
    "ChunkMissing",
    "ChunkUnreadable",
    "ConsumerError",
    "DiscoveryFailed",
    "Epoch",
    "EpochRange",
    "EventsClient",
    "InvalidArgument",
    "Inventory",
    "MetadataUnreadable",
    "PluginNotFound",
    "PositionError",
    "ReadSummary",
    "StoreUnavailable",
    "SubstreamEpoch",
    "SubstreamNotFound",
    "SubstreamResult",
    "SubstreamResults",
    "TaggedEvent",
    "Tail",
    "merge_partials",
]
