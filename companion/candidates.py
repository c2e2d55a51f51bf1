"""Which loaded substreams a chunk needs a result of: those reading its type and
subtype; for the auditor's chunks, only those without a stored result.

Used by the chunk threads (``worker.py``), the shed thread (``shedding.py``) and the
audit check (``audit_check.py``, through ``Engine.matching``), so a shed chunk and a
processed one are answered for the same substreams.

Failure semantics: a stored result that cannot be read (the store down) counts as
present, logged: a repair never overwrites what it could not see.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from companion.disabled import DisabledSet
from eventstore.names import ChunkKey, Namespaces
from eventstore.riak import NotFound, RiakClient, RiakError
from substreams.api import Substream
from substreams.loader import PluginSet

log = logging.getLogger(__name__)

__all__ = ["Candidates"]


class Candidates:
    """The substreams of a chunk, from the worker's plugin set.

    Args:
        plugins: the worker's plugin set (refreshed elsewhere; read here).
        disabled: the node's disabled markers.
        riak: a client of the local node (for the auditor's chunks).
        namespaces: where results are stored.
    """

    def __init__(
        self, plugins: PluginSet, disabled: DisabledSet, riak: RiakClient, namespaces: Namespaces
    ) -> None:
        self._plugins = plugins
        self._disabled = disabled
        self._riak = riak
        self._namespaces = namespaces

    def of(self, key: ChunkKey, *, audit: bool = False) -> list[Substream]:
        """Every loaded substream reading ``key``, disabled or not (``audit``: only
        those without a stored result)."""
        subs = [s for s in self._plugins.substreams.values() if s.matches(key.type, key.subtype)]
        return self.missing(key, subs) if audit else subs

    def enabled(self, key: ChunkKey) -> list[Substream]:
        """The enabled substreams that read ``key``'s type and subtype."""
        return [
            s
            for s in self._plugins.substreams.values()
            if s.matches(key.type, key.subtype)
            and not self._disabled.is_disabled(s.name, s.version)
        ]

    def missing(self, key: ChunkKey, subs: Sequence[Substream]) -> list[Substream]:
        """The substreams of ``subs`` without a stored result for ``key``."""
        missing = []
        for sub in subs:
            location = self._namespaces.substream_location(sub.name, key)
            try:
                self._riak.get(*location)
            except NotFound:
                missing.append(sub)
            except RiakError as e:
                log.warning("companion: audit key=%s substream=%s: %s", key, sub.name, e)
        return missing
