"""What a dc holds over a range, from its metadata: the ``ls`` command's recipe.

Riak cannot list what exists without listing keys, which a read path never does
(a full scan of the cluster). Everything here is read by key:

    epochs  = the range, or, longer than max_epochs, max_epochs epochs spread evenly
    for each epoch (read metadata_depth ahead): GET epochs/<epoch>-<dc>   # metadata only
        per type:subtype: epochs with data, chunks, first and last epoch,
                          a few chunk keys to probe (the first and the last seen)
    per substream, per type:subtype (at most INVENTORY_MAX_PROBES reads in all):
        GET substreams/<name>/<probe key> for each probe until one exists
        -> the substream has results for it (a stored failure counts: the companion
           ran it there), or none at the probed chunks

So the cost is one small GET per epoch read plus the probes; no chunk is fetched. dcs
are not discoverable the same way (a dc is part of every key): the caller names them.

Failure semantics: a store error raises as in the full stream (``StoreUnavailable``,
``MetadataUnreadable`` naming the epoch); probes past the cap are not made and the
pairs left unchecked are listed as such, never as "no results".
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from consumer_lib import defaults
from consumer_lib.instants import utc
from consumer_lib.pipeline import prefetch
from consumer_lib.ranges import EpochRange
from consumer_lib.store import Store
from eventstore.names import ChunkKey

__all__ = ["GroupData", "Inventory", "inventory", "sample_epochs"]


@dataclass
class GroupData:
    """One type:subtype with data in the epochs read.

    Attributes:
        type, subtype: the chunks' type and subtype.
        epochs: epochs read that hold at least one of its chunks.
        chunks: its chunks in those epochs.
        first, last: the first and last of those epochs.
        substreams: substream name -> True (a result at a probed chunk), False (none at
            the probed chunks), None (not checked: past the probe cap).
    """

    type: str
    subtype: str
    epochs: int = 0
    chunks: int = 0
    first: int = 0
    last: int = 0
    probes: list[ChunkKey] = field(default_factory=list, repr=False)
    substreams: dict[str, bool | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly view."""
        return {
            "type": self.type,
            "subtype": self.subtype,
            "epochs": self.epochs,
            "chunks": self.chunks,
            "first": self.first,
            "first_utc": utc(self.first),
            "last": self.last,
            "last_utc": utc(self.last),
            "substreams": dict(self.substreams),
        }


@dataclass
class Inventory:
    """What :func:`inventory` found.

    Attributes:
        dc: the dc.
        range: the range asked for.
        epochs_read: how many epochs' metadata were read.
        sampled: True when the range was longer than ``max_epochs`` (then
            ``epochs_read`` of its epochs, spread evenly, were read).
        epochs_with_data: epochs read that have metadata.
        groups: every type:subtype found, sorted.
        substreams: the substream names checked (empty: no check).
        probes: result reads made.
    """

    dc: str
    range: EpochRange
    epochs_read: int
    sampled: bool
    epochs_with_data: int
    groups: list[GroupData]
    substreams: list[str]
    probes: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly view (``ls --json``)."""
        return {
            "dc": self.dc,
            "start": self.range.start,
            "end": self.range.end,
            "start_utc": utc(self.range.start),
            "end_utc": utc(self.range.end),
            "epochs_read": self.epochs_read,
            "sampled": self.sampled,
            "epochs_with_data": self.epochs_with_data,
            "substreams_checked": list(self.substreams),
            "probes": self.probes,
            "groups": [g.as_dict() for g in self.groups],
        }


def sample_epochs(epoch_range: EpochRange, max_epochs: int) -> list[int]:
    """Every epoch of the range, or ``max_epochs`` of them spread evenly (the first
    included), ascending."""
    n = len(epoch_range)
    if n <= max_epochs:
        return list(epoch_range)
    return [epoch_range.start + (i * n) // max_epochs for i in range(max_epochs)]


def inventory(
    store: Store,
    executor: Executor,
    dc: str,
    epoch_range: EpochRange,
    *,
    max_epochs: int,
    substreams: Sequence[str],
    metadata_depth: int,
    max_probes: int = defaults.INVENTORY_MAX_PROBES,
    probes_per_group: int = defaults.INVENTORY_PROBES_PER_GROUP,
) -> Inventory:
    """Read the metadata of the range (or a sample) and probe substream results (see
    the module)."""
    epochs = sample_epochs(epoch_range, max_epochs)
    groups: dict[tuple[str, str], GroupData] = {}
    with_data = 0
    for epoch, refs in prefetch(epochs, lambda e: store.metadata(e, dc), executor, metadata_depth):
        if refs is None:
            continue
        with_data += 1
        seen: set[tuple[str, str]] = set()
        for ref in refs:
            g = groups.setdefault((ref.type, ref.subtype), GroupData(ref.type, ref.subtype))
            g.chunks += 1
            key = ChunkKey(epoch, dc, ref.type, ref.subtype, ref.chunk)
            if (ref.type, ref.subtype) not in seen:
                seen.add((ref.type, ref.subtype))
                if g.epochs == 0:
                    g.first = epoch
                    g.probes.append(key)  # the first chunk seen
                elif probes_per_group > 1:
                    g.probes[1:] = [key]  # the last epoch's first chunk
                g.epochs += 1
                g.last = epoch
    ordered = [groups[k] for k in sorted(groups)]
    made = _probe(store, executor, ordered, substreams, max_probes)
    return Inventory(
        dc, epoch_range, len(epochs), len(epochs) < len(epoch_range), with_data, ordered,
        list(substreams), made,
    )  # fmt: skip


def _probe(
    store: Store,
    executor: Executor,
    groups: list[GroupData],
    substreams: Sequence[str],
    max_probes: int,
) -> int:
    """Fill each group's ``substreams``; returns how many results were read."""
    pairs = [(g, name) for name in substreams for g in groups]
    budget = max_probes
    planned: list[tuple[GroupData, str]] = []
    for g, name in pairs:
        if budget >= len(g.probes):
            budget -= len(g.probes)
            planned.append((g, name))
        else:
            g.substreams[name] = None  # past the cap: not checked

    def check(pair: tuple[GroupData, str]) -> tuple[bool, int]:
        g, name = pair
        for n, key in enumerate(g.probes, 1):
            if store.result(name, key) is not None:
                return True, n
        return False, len(g.probes)

    made = 0
    for (g, name), outcome in prefetch(planned, check, executor, 16):
        assert outcome is not None  # no markers here
        g.substreams[name], reads = outcome
        made += reads
    for g in groups:
        g.substreams = dict(sorted(g.substreams.items()))
    return made
