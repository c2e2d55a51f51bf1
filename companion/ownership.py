"""Which chunks are this node's: the first node of each key's preflist in ``[ring]``.

The one rule the auditor and the refill endpoint share, so a key is checked by exactly
one companion when the ring is configured (the hook sends it to the first *up* node of
the same preflist). Without a ring every key is this node's (a one-node setup, or
companions that do not know the ring: each then answers for every key, which costs
reads and repeats work, never loses any).

Pure logic, no I/O.
"""

from __future__ import annotations

from companion.settings import CompanionSettings
from eventstore.names import ChunkKey
from eventstore.ring import Ring

__all__ = ["Ownership"]


class Ownership:
    """``owned(key)``: whether this node is the first primary of ``key``.

    Args:
        settings: the companion's settings (``ring_nodes``, ``ring_size``, ``n_val``,
            ``node``, ``namespaces``).
    """

    def __init__(self, settings: CompanionSettings) -> None:
        self._settings = settings
        self._ring = Ring(settings.ring_nodes, settings.ring_size) if settings.ring_nodes else None

    def owned(self, key: ChunkKey) -> bool:
        """Whether this node is the first primary of ``key`` (always, without a ring)."""
        if self._ring is None:
            return True
        ns = self._settings.namespaces
        preflist = self._ring.preflist(
            ns.events_bucket,
            key.format(),
            bucket_type=ns.events_bucket_type,
            n_val=self._settings.n_val,
        )
        return bool(preflist) and preflist[0].node == self._settings.node
