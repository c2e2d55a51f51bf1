"""The post-commit hook's routing: which companion gets which chunk keys (pure, no I/O).

This is the Python twin of the Erlang hook's routing in ``erlang_hooks/``; both are
tested against the same JSON vectors (``tests/vectors/hook_routing.json``), so they
route identically:

1. Parse the metadata key ``<epoch>-<dc>`` and value (``<type>:<subtype>:<chunk>``
   entries joined by ``|``) with :mod:`eventstore.names`: entries come out sorted in
   byte order, duplicates removed; an empty value has no entries. Anything malformed
   rejects the whole write's routing (the relocator never writes such values).
2. Build each entry's chunk key ``<epoch>:<dc>:<type>:<subtype>:<chunk>``.
3. Compute its preflist in the data bucket (bucket type ``events``, bucket ``events``
   by default) with the bucket type's n_val and the set of down nodes; the first entry
   (the first up primary, or the fallback standing in for it) is the node that holds
   the chunk and whose companion gets the key.
4. Group keys by that node, keeping the sorted order within each group; groups appear
   in the order of their first key.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from eventstore.keygroup import KeyGroup
from eventstore.names import MetadataKey, parse_metadata
from eventstore.ring import Ring


@dataclass(frozen=True)
class Routing:
    """Where one metadata write's chunk keys go.

    Attributes:
        epoch: the epoch of the metadata key.
        dc: its dc.
        groups: node name -> chunk keys that node holds, in sorted order.
        unroutable: keys whose whole preflist is down (no node to send them to).
    """

    epoch: int
    dc: str
    groups: dict[str, list[str]] = field(default_factory=dict)
    unroutable: list[str] = field(default_factory=list)

    def bodies(self) -> dict[str, dict[str, object]]:
        """The JSON body POSTed to each node's companion: ``{"epoch", "dc", "keys"}``."""
        return {node: self.group(node).body() for node in self.groups}

    def group(self, node: str) -> KeyGroup:
        """The key group POSTed to ``node``'s companion (eventstore/keygroup.py)."""
        return KeyGroup.of(self.epoch, self.dc, self.groups[node])


def route(
    metadata_key: str,
    metadata_value: bytes | str,
    ring: Ring,
    *,
    bucket_type: str,
    bucket: str,
    n_val: int,
    down: Collection[str] = (),
) -> Routing:
    """Group a metadata write's chunk keys by the node holding each.

    Args:
        metadata_key: the key written in the epochs bucket, ``<epoch>-<dc>``.
        metadata_value: the value written (ASCII).
        ring: the cluster's ring.
        bucket_type, bucket: where the chunks live (the events bucket type and bucket).
        n_val: that bucket type's n_val.
        down: nodes currently down.

    Returns:
        The grouping; empty groups when the value has no entries.

    Raises:
        eventstore.errors.InvalidKey: the metadata key is malformed.
        eventstore.errors.InvalidMetadataValue: the value is malformed.
    """
    meta = MetadataKey.parse(metadata_key)
    routing = Routing(meta.epoch, meta.dc)
    for ref in parse_metadata(metadata_value, key=metadata_key):
        chunk_key = meta.chunk_key(ref).format()
        preflist = ring.preflist(bucket, chunk_key, bucket_type=bucket_type, n_val=n_val, down=down)
        if not preflist:
            routing.unroutable.append(chunk_key)
            continue
        routing.groups.setdefault(preflist[0].node, []).append(chunk_key)
    return routing
