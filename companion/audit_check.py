"""A worker's answer to the auditor (``POST /v1/audit``): which of an epoch-dc's keys
lack a result, admitted for repair, and whether that could be known for every key.

For each key, one GET per matching enabled substream (stopping at the first missing
one: the chunk thread reads them all again and writes only the missing ones). A result
that cannot be read (the store down, a timeout) makes the answer *unreadable*: the
keys not yet known are counted so, and the auditor does not take the epoch as
complete (its cursor stays; it asks again next round). A stored result is never
overwritten.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from companion.settings import CompanionSettings
from eventstore.names import ChunkKey
from eventstore.riak import NotFound, RiakClient, RiakError
from substreams.api import Substream

log = logging.getLogger(__name__)

__all__ = ["AuditAnswer", "audit_keys"]


class _Engine(Protocol):
    """What an audit uses of the worker's engine (:class:`companion.worker.Engine`, which
    imports this module through the auditor: a protocol, so this one need not import
    it back)."""

    settings: CompanionSettings
    riak: RiakClient

    def matching(self, key: ChunkKey) -> list[Substream]: ...

    def submit(
        self, epoch: int, dc: str, keys: Sequence[ChunkKey], *, audit: bool = False
    ) -> tuple[int, int]: ...


@dataclass(frozen=True)
class AuditAnswer:
    """What ``/v1/audit`` answers (as JSON, these fields).

    Attributes:
        missing: keys lacking a result of some matching enabled substream.
        unreadable: keys whose results could not all be read (not known).
        accepted: missing keys admitted to the node's inbox for repair.
        shed: missing keys shed (their missing results marked ``shed``).
    """

    missing: int = 0
    unreadable: int = 0
    accepted: int = 0
    shed: int = 0

    @property
    def complete(self) -> bool:
        """Every key has every result it should have: nothing to repair, nothing unknown."""
        return self.missing == 0 and self.unreadable == 0

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Any) -> AuditAnswer:
        """Parse an answer; an old companion's (no ``unreadable``) reads as 0.

        Raises:
            ValueError: not an object of non-negative integers.
        """
        return cls(**counts_of(value, ("missing", "unreadable", "accepted", "shed"), "audit"))


def counts_of(value: Any, names: Sequence[str], what: str) -> dict[str, int]:
    """The non-negative integer ``names`` of a JSON answer (absent ones are 0), for a
    companion's audit and refill answers.

    Raises:
        ValueError: not an object, or a count that is not a non-negative integer.
    """
    if not isinstance(value, dict):
        raise ValueError(
            f"{'an' if what[0] in 'aeiou' else 'a'} {what} answer must be a JSON object"
        )
    counts = {}
    for name in names:
        n = value.get(name, 0)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"{what} answer: {name} must be a non-negative integer")
        counts[name] = n
    return counts


def audit_keys(engine: _Engine, epoch: int, dc: str, keys: Sequence[ChunkKey]) -> AuditAnswer:
    """Check ``keys`` (all of ``epoch``-``dc``) and admit those lacking a result.

    Blocking (one GET per key and substream at most): call it off the event loop.

    Returns:
        The answer; ``unreadable`` > 0 when the store failed a read (the rest of the
        keys are then not checked: the store is likely down).
    """
    missing: list[ChunkKey] = []
    unreadable = 0
    for i, key in enumerate(keys):
        try:
            if _lacks_a_result(engine, key):
                missing.append(key)
        except RiakError as e:
            unreadable = len(keys) - i
            log.warning(
                "companion: audit epoch=%d dc=%s key=%s: result unreadable (%s); "
                "%d keys not checked",
                epoch,
                dc,
                key,
                e,
                unreadable,
            )
            break
    accepted = shed = 0
    if missing:
        log.info("companion: audit epoch=%d dc=%s: %d keys lack results", epoch, dc, len(missing))
        accepted, shed = engine.submit(epoch, dc, missing, audit=True)
    return AuditAnswer(len(missing), unreadable, accepted, shed)


def _lacks_a_result(engine: _Engine, key: ChunkKey) -> bool:
    """Whether some matching enabled substream has no stored result for ``key``.

    Raises:
        RiakError: a result could not be read (other than not found).
    """
    for sub in engine.matching(key):
        try:
            engine.riak.get(*engine.settings.namespaces.substream_location(sub.name, key))
        except NotFound:
            return True
    return False
