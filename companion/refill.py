"""A worker's answer to ``POST /v1/substreams/NAME/refill``: the gaps a substream left
in an epoch-dc while it was disabled or shed, run again (``riak-events substream
refill`` sends every epoch of a range).

Body: ``{"epoch": E, "dc": D, "keys": [...], "dry_run": false}``, the epoch's chunk
keys as its metadata lists them; only peers may POST it (``PeerAllowlist``, as every
write). Of those keys, the ones this node owns (``ownership.py``, the auditor's rule)
and the substream reads are this node's; for each, its stored result is read:

- missing, ``shed``, ``error`` ``disabled: ...``, or not a result record: a **gap**.
  A stale one (not missing) is deleted, then the gaps are admitted to the node's inbox
  as audit items (``Engine.submit(audit=True)``): the chunk thread writes only the
  results still missing, so a result written meanwhile is kept;
- ``ok``, ``error`` (other), ``timeout``, ``killed``: the plugin's answer, **kept**;
  never deleted nor rewritten;
- unreadable (the store down): the keys not yet checked are counted ``unreadable``
  and nothing more is done for them (the sender tries again).

Refused (409) while the substream is disabled on this node: its runs would be marked
``disabled`` again. ``dry_run`` counts without deleting or admitting anything (how the
command confirms its work).

Failure semantics: a gap admitted is run later, like any audit item; if the inbox is
full it is shed (a ``shed`` result: counted ``shed``, the sender sends the epoch again
after backing off). A delete that fails counts the key ``unreadable``: its stale
result stays. Between the read and the delete, a concurrent write of the same key
(the hook firing late) may be deleted and then computed again: the same result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from companion.audit_check import counts_of
from companion.disabled import DisabledSet
from companion.settings import CompanionSettings
from eventstore.errors import EventStoreError
from eventstore.names import ChunkKey
from eventstore.riak import NotFound, RiakClient, RiakError
from substreams.api import Substream
from substreams.results import DISABLED, read_result

log = logging.getLogger(__name__)

__all__ = ["RefillAnswer", "gap_of", "refill_keys"]


class _Engine(Protocol):
    """What a refill uses of the worker's engine (:class:`companion.worker.Engine`)."""

    settings: CompanionSettings
    riak: RiakClient
    disabled: DisabledSet

    def submit(
        self, epoch: int, dc: str, keys: Sequence[ChunkKey], *, audit: bool = False
    ) -> tuple[int, int]: ...


@dataclass(frozen=True)
class RefillAnswer:
    """What the endpoint answers (as JSON, these fields).

    Attributes:
        owned: keys of the body this node owns (whether the substream reads them or not).
        keys: of those, the ones the substream reads (its results were checked).
        gaps: of those, results missing, ``shed`` or ``disabled``.
        accepted: gaps admitted for a run (0 with ``dry_run``).
        shed: gaps shed on admission (the inbox full): send the epoch again later.
        kept: results that are the plugin's answer, left as they are.
        unreadable: keys whose result could not be read or deleted: send again later.
    """

    owned: int = 0
    keys: int = 0
    gaps: int = 0
    accepted: int = 0
    shed: int = 0
    kept: int = 0
    unreadable: int = 0

    def to_json(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Any) -> RefillAnswer:
        """Parse an answer.

        Raises:
            ValueError: not an object of non-negative integers.
        """
        return cls(**counts_of(value, list(cls.__dataclass_fields__), "refill"))


def gap_of(riak: RiakClient, location: tuple[str, str, str]) -> str | None:
    """Why the result at ``location`` is a gap (``"missing"``, ``"shed"``,
    ``"disabled"``, ``"not a result"``), or None when it is the plugin's answer.

    Raises:
        RiakError: the result could not be read (other than not found).
    """
    try:
        value = riak.get(*location).value
    except NotFound:
        return "missing"
    try:
        record = read_result(value, key=location[2])
    except (EventStoreError, ValueError):
        return "not a result"
    if record.status == "shed":
        return "shed"
    if record.status == "error" and record.kind == DISABLED:
        return "disabled"
    return None


def refill_keys(  # noqa: PLR0917 (one argument per part of the request)
    engine: _Engine,
    sub: Substream,
    owned: Callable[[ChunkKey], bool],
    epoch: int,
    dc: str,
    keys: Sequence[ChunkKey],
    *,
    dry_run: bool = False,
) -> RefillAnswer:
    """Find ``sub``'s gaps among ``keys`` (all of ``epoch``-``dc``) and have them run.

    Blocking (a GET per key, a DELETE per stale result): call it off the event loop.

    Args:
        engine: the worker's engine (store, settings, inbox).
        sub: the substream, loaded and enabled on this node (checked by the caller).
        owned: whether a key is this node's.
        epoch, dc: the key group's.
        keys: the epoch-dc's chunk keys.
        dry_run: only count.
    """
    mine = [k for k in keys if owned(k)]
    read = [k for k in mine if sub.matches(k.type, k.subtype)]
    stale: list[ChunkKey] = []
    gaps: list[ChunkKey] = []
    unreadable = 0
    for i, key in enumerate(read):
        location = engine.settings.namespaces.substream_location(sub.name, key)
        try:
            why = gap_of(engine.riak, location)
        except RiakError as e:
            unreadable = len(read) - i
            log.warning(
                "companion: refill substream=%s epoch=%d dc=%s key=%s: result unreadable "
                "(%s); %d keys not checked",
                sub.name, epoch, dc, key, e, unreadable,
            )  # fmt: skip
            break
        if why is not None:
            gaps.append(key)
            if why != "missing":
                stale.append(key)
    kept = len(read) - unreadable - len(gaps)
    if dry_run or not gaps:
        return RefillAnswer(len(mine), len(read), len(gaps), 0, 0, kept, unreadable)
    admit = [k for k in gaps if k not in stale]
    for key in stale:
        location = engine.settings.namespaces.substream_location(sub.name, key)
        try:
            engine.riak.delete(*location)
        except RiakError as e:
            unreadable += 1
            log.warning("companion: refill substream=%s key=%s: stale result not deleted: %s",
                        sub.name, key, e)  # fmt: skip
            continue
        admit.append(key)
    accepted, shed = engine.submit(epoch, dc, admit, audit=True) if admit else (0, 0)
    log.info(
        "companion: refill substream=%s epoch=%d dc=%s: %d gaps (%d stale), %d admitted, "
        "%d shed",
        sub.name, epoch, dc, len(gaps), len(stale), accepted, shed,
    )  # fmt: skip
    return RefillAnswer(len(mine), len(read), len(gaps), accepted, shed, kept, unreadable)
