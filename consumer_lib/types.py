"""The shapes the consumer library yields: chunks, epochs, tagged events, substream results.

Pure data, no I/O.
"""

from __future__ import annotations

import fnmatch
import importlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Literal

from consumer_lib.errors import InvalidArgument
from eventstore.names import ChunkKey, ChunkRef

__all__ = [
    "Chunk",
    "ChunkFilter",
    "Epoch",
    "Event",
    "Served",
    "SubstreamEpoch",
    "SubstreamResult",
    "TaggedEvent",
]

#: One decoded event: a dict at the top level, schema-less below it.
Event = dict[str, Any]

#: How a substream result was served: read from the server (the companion computed it),
#: computed here by the client-side fallback, or not at all (fallback off or failed).
Served = Literal["server", "fallback", "gap"]


@dataclass(frozen=True)
class Chunk:
    """One chunk of the full stream, verified and decoded.

    Attributes:
        key: its chunk key (epoch, dc, type, subtype, chunk number).
        events: the decoded events, in stored order.
        size_bytes: stored size, bytes (what crossed the network).
        node: the node that served the good copy.
        bad_nodes: nodes whose copy failed its checksum before (usually empty).
    """

    key: ChunkKey
    events: list[Event]
    size_bytes: int
    node: str
    bad_nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Epoch:
    """One epoch of one dc: its chunks in chunk order (type, subtype, chunk number).

    Attributes:
        epoch: unix seconds, UTC.
        dc: the data centre.
        chunks: the chunks kept by the filters, decoded.
        found: whether the epoch had metadata (a missing epoch is empty, not an error).
        skipped: ``tail`` only: no metadata appeared within its wait for late metadata.
    """

    epoch: int
    dc: str
    chunks: tuple[Chunk, ...]
    found: bool = True
    skipped: bool = False

    @property
    def events(self) -> list[Event]:
        """Every event of the kept chunks, in chunk order."""
        return [e for c in self.chunks for e in c.events]

    @property
    def size_bytes(self) -> int:
        """Stored bytes read for this epoch."""
        return sum(c.size_bytes for c in self.chunks)


@dataclass(frozen=True, slots=True)
class TaggedEvent:
    """One event of the flat view, with where it came from.

    Slotted: the flat view builds one per event, and an instance without a ``__dict__``
    is one object for the cyclic collector to scan instead of two.
    """

    epoch: int
    dc: str
    type: str
    subtype: str
    chunk: int
    event: Event

    def as_dict(self) -> dict[str, Any]:
        """``{"epoch", "dc", "type", "subtype", "chunk", "event"}``."""
        return {
            "epoch": self.epoch,
            "dc": self.dc,
            "type": self.type,
            "subtype": self.subtype,
            "chunk": self.chunk,
            "event": self.event,
        }


@dataclass(frozen=True)
class SubstreamResult:
    """One substream result for one chunk, and how it was served.

    Attributes:
        substream: the substream's name.
        key: the chunk it was computed from (epoch, dc, type, subtype, chunk).
        served: ``server``, ``fallback`` or ``gap``.
        reason: why it was not served by the server: ``missing``, ``shed``,
            ``timeout``, ``error``, ``killed``, ``version_mismatch``, ``unreadable``,
            ``disabled`` (the server disabled this plugin version: a gap, not re-run
            here), or ``forced`` (``fallback="always"``); ``None`` when served by the
            server.
        result: the plugin's result (``None`` for a gap).
        version: the plugin version that computed it (the stored one, or the local one).
        error: for a gap: the server's error, or why the fallback failed
            (``fallback <status>: <kind>: <detail>``).
        size_bytes: bytes read for it (the result, or the full chunk on fallback).
        fallback_status: how the sandboxed fallback run here ended: ``ok``, or
            ``timeout``, ``killed``, ``error`` (a gap); ``None`` when none ran.
    """

    substream: str
    key: ChunkKey
    served: Served
    reason: str | None
    result: Any
    version: str
    error: str | None = None
    size_bytes: int = 0
    fallback_status: str | None = None

    @property
    def epoch(self) -> int:
        return self.key.epoch

    @property
    def dc(self) -> str:
        return self.key.dc

    @property
    def type(self) -> str:
        return self.key.type

    @property
    def subtype(self) -> str:
        return self.key.subtype

    @property
    def chunk(self) -> int:
        return self.key.chunk

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly view (the CLI's JSON Lines record)."""
        return {
            "substream": self.substream,
            "epoch": self.epoch,
            "dc": self.dc,
            "type": self.type,
            "subtype": self.subtype,
            "chunk": self.chunk,
            "served": self.served,
            "reason": self.reason,
            "version": self.version,
            "error": self.error,
            "fallback_status": self.fallback_status,
            "result": self.result,
        }


@dataclass(frozen=True)
class SubstreamEpoch:
    """One epoch of a substream, as ``tail_substream`` delivers it.

    Attributes:
        epoch, dc: which epoch.
        results: the results of its chunks the substream reads, in chunk order.
        found: whether the epoch had metadata.
        skipped: no metadata appeared within tail's wait for late metadata.
    """

    epoch: int
    dc: str
    results: tuple[SubstreamResult, ...]
    found: bool = True
    skipped: bool = False


def _patterns(value: Iterable[str] | str | None, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    patterns = (value,) if isinstance(value, str) else tuple(value)
    for p in patterns:
        if not isinstance(p, str):
            raise InvalidArgument(f"{what} filter {p!r} is not a string")
    return patterns


@dataclass(frozen=True)
class ChunkFilter:
    """Which chunks to read, by type and subtype, decided from the metadata alone.

    ``types`` and ``subtypes`` are exact names or glob patterns (``web``, ``web.*``);
    empty means all. ``""`` in ``subtypes`` selects the empty subtype.
    """

    types: tuple[str, ...] = ()
    subtypes: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, types: Iterable[str] | str | None = None, subtypes: Iterable[str] | str | None = None
    ) -> ChunkFilter:
        """Build one from the arguments of the reading functions.

        Raises:
            InvalidArgument: a pattern that is not a string.
        """
        return cls(_patterns(types, "type"), _patterns(subtypes, "subtype"))

    def keeps(self, type_: str, subtype: str) -> bool:
        """Whether chunks of ``type_`` / ``subtype`` are read."""
        if self.types and not any(fnmatch.fnmatchcase(type_, p) for p in self.types):
            return False
        return not self.subtypes or any(fnmatch.fnmatchcase(subtype, p) for p in self.subtypes)

    def select(self, refs: Iterable[ChunkRef]) -> list[ChunkRef]:
        """The kept entries in chunk order: (type, subtype) then chunk NUMBER.

        Metadata is byte-order sorted (``t::10`` before ``t::2``); readers want chunk
        order, which ``ChunkRef``'s own ordering gives.
        """
        return sorted(r for r in refs if self.keeps(r.type, r.subtype))


def flatten(epochs: Iterable[Epoch]) -> Iterator[TaggedEvent]:
    """Every event of ``epochs`` tagged with epoch, dc, type, subtype and chunk."""
    for epoch in epochs:
        for chunk in epoch.chunks:
            yield from tag_chunk(chunk)


# The frozen dataclass's __init__ sets each field through object.__setattr__; setting the
# slots directly is half the cost, and the flat view pays it once per event.
_new = object.__new__
_set_epoch, _set_dc, _set_type, _set_subtype, _set_chunk, _set_event = (
    TaggedEvent.__dict__[name].__set__
    for name in ("epoch", "dc", "type", "subtype", "chunk", "event")
)


def tag_chunk(chunk: Chunk) -> Iterator[TaggedEvent]:
    """The events of one chunk, tagged (what ``TaggedEvent(...)`` builds, built faster).

    One event at a time: the reference that :func:`tag_events` equals."""
    k = chunk.key
    epoch, dc, type_, subtype, number = k.epoch, k.dc, k.type, k.subtype, k.chunk
    for event in chunk.events:
        tagged = _new(TaggedEvent)
        _set_epoch(tagged, epoch)
        _set_dc(tagged, dc)
        _set_type(tagged, type_)
        _set_subtype(tagged, subtype)
        _set_chunk(tagged, number)
        _set_event(tagged, event)
        yield tagged


#: TaggedEvent's slot descriptors in the order :func:`tag_events` sets them, event last.
TAG_SLOTS: tuple[Any, ...] = tuple(
    TaggedEvent.__dict__[name] for name in ("epoch", "dc", "type", "subtype", "chunk", "event")
)

#: ``(cls, slots, values, events) -> list``: a new ``cls`` per event, ``slots[:-1]`` set
#: to ``values`` and the last slot to the event, each through its descriptor.
Tagger = Callable[[type[Any], tuple[Any, ...], tuple[Any, ...], list[Any]], list[Any]]

_drain: Callable[[Iterable[object]], None] = deque[object](maxlen=0).extend  # runs it in C


def tag_events_py(
    cls: type[Any], slots: tuple[Any, ...], values: tuple[Any, ...], events: list[Any]
) -> list[Any]:
    """The reference of the core's ``tag_events`` (used where the core is not built):
    what :func:`tag_chunk` does per event, by C loops (``map``) a slot at a time
    instead of a Python loop per event (about a fifth cheaper)."""
    n = len(events)
    batch = list(map(_new, repeat(cls, n)))
    for slot, value in zip(slots[:-1], values, strict=True):
        _drain(map(slot.__set__, batch, repeat(value, n)))
    _drain(map(slots[-1].__set__, batch, events))
    return batch


def _core_tagger() -> Tagger:
    try:
        # By name, as sereal_codec looks its core up (an import statement of the
        # extension would be an edge of the import graph to a module not parsed).
        tagger: Tagger = importlib.import_module("consumer_lib._tagger").tag_events
    except (ImportError, AttributeError):  # not built: the reference
        return tag_events_py
    return tagger


#: The tagger :func:`tag_events` uses: the compiled one (``consumer_lib/csrc/tag_events.c``,
#: the module ``consumer_lib._tagger``) when built.
TAGGER: Tagger = _core_tagger()


def tag_events(events: list[Event], key: ChunkKey) -> list[TaggedEvent]:
    """``events`` tagged with ``key``'s epoch, dc, type, subtype and chunk, in one call.

    Equal object for object to :func:`tag_chunk` (a new :class:`TaggedEvent` per
    event, holding these very objects); built by the Sereal core when it is built
    (``consumer_lib/csrc/tag_events.c``: an allocation and six stores per event,
    where the descriptors cost ~0.2 us), else by :func:`tag_events_py`.

    Args:
        events: the decoded events (a list).
        key: the chunk they were read from.

    Returns:
        A new list of :class:`TaggedEvent`, in the order of ``events``.
    """
    values = (key.epoch, key.dc, key.type, key.subtype, key.chunk)
    return TAGGER(TaggedEvent, TAG_SLOTS, values, events)
