"""The chaos campaign's readback: everything stored, read through ``consumer_lib``, against
what the producers were told was durable.

For each dc and epoch of the run, the metadata is read and every chunk it lists is read,
verified and decoded (``EventsClient``'s store: the reads a consumer makes, one chunk at
a time so that one bad chunk is attributed to its key instead of ending the range).
Then, for every listed chunk and every plugin whose types/subtypes match it, the
substream result is read.

Counted (:class:`Readback`):

- ``acknowledged``: ids acknowledged (TCP acks after the relocator's fdatasync, spool
  files durably renamed); ``found``: those read back at least once;
- ``lost``: acknowledged, not found, and not in a record or chunk the campaign itself
  corrupted; ``lost_injected_journal`` / ``lost_injected_store``: not found, and in a
  corrupted journal record / a corrupted stored chunk (reported apart: the corruption
  was the campaign's, the promise is that nothing *else* goes with it);
- ``duplicated``: extra copies of ids of the producers with ids and of the spool
  (exactly once into the store: relocator/DESIGN.md, issue 24), by source in
  ``duplicated_by_source``; ``duplicated_legacy``: extra copies of the producer without
  an id (at-least-once by design: it resends what was not acknowledged when a
  connection broke), reported apart and not a failure;
- ``refused``: events of spool files the relocators must refuse whole (an event that
  fits no chunk); ``refused_found``: those read back anyway (a finding);
  ``refused_not_kept``: such files not found in ``.rejected/``;
- ``dangling``: metadata entries whose chunk is not stored (ChunkMissing);
- ``corrupt_injected``: listed chunks that fail their checksum and that the campaign
  corrupted (expected: a clear ChunkCorrupt, never silently wrong events);
  ``corrupt_other``: chunks that fail their checksum or do not decode without the
  campaign having touched them (a finding; their events also show up as lost);
- ``without_result``: (chunk, matching substream) pairs with no stored result, by
  substream; results are counted by status (ok, error, timeout, killed, shed).
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_load import ID_KEY

from consumer_lib import ChunkCorrupt, ChunkMissing, ChunkUnreadable, EventsClient
from eventstore.names import ChunkKey
from substreams.api import Substream

__all__ = ["Readback", "read_back"]


@dataclass
class Readback:
    """What the readback found (see the module docstring)."""

    acknowledged: int = 0
    found: int = 0
    lost: int = 0
    lost_injected_journal: int = 0
    lost_injected_store: int = 0
    duplicated: int = 0
    duplicated_legacy: int = 0
    duplicated_by_source: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    refused_found: int = 0
    refused_not_kept: list[str] = field(default_factory=list)
    unacknowledged_found: int = 0
    events_read: int = 0
    epochs: int = 0
    chunks: int = 0
    dangling: int = 0
    corrupt_injected: int = 0
    corrupt_other: int = 0
    without_result: int = 0
    without_result_by_substream: dict[str, int] = field(default_factory=dict)
    results_by_status: dict[str, int] = field(default_factory=dict)
    lost_sample: list[int] = field(default_factory=list)
    dangling_sample: list[str] = field(default_factory=list)
    corrupt_other_sample: list[str] = field(default_factory=list)
    without_result_sample: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """The readback's verdict: anything lost, stored twice (but the legacy producer's),
        dangling, a chunk without a result, or a refused spool file stored or not kept."""
        return bool(
            self.lost
            or self.duplicated
            or self.dangling
            or self.without_result
            or self.refused_found
            or self.refused_not_kept
        )

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def listed_chunks(client: EventsClient, dcs: Iterable[str], epochs: range) -> list[ChunkKey]:
    """Every chunk key the metadata of ``dcs`` x ``epochs`` lists."""
    keys = []
    for dc in dcs:
        for epoch in epochs:
            for ref in client.store.metadata(epoch, dc) or ():
                keys.append(ChunkKey(epoch, dc, ref.type, ref.subtype, ref.chunk))
    return keys


def missing_results(
    client: EventsClient, keys: list[ChunkKey], plugins: Iterable[Substream], *, threads: int = 8
) -> tuple[list[tuple[str, ChunkKey]], collections.Counter[str]]:
    """(substream, key) pairs with no readable stored result, and the results by status."""
    pairs = [(p.name, k) for k in keys for p in plugins if p.matches(k.type, k.subtype)]

    def status(pair: tuple[str, ChunkKey]) -> str | None:
        fetched = client.store.result(*pair)
        return None if fetched is None or fetched.record is None else str(fetched.record.status)

    with ThreadPoolExecutor(threads) as pool:
        found = list(pool.map(status, pairs))
    statuses = collections.Counter(s for s in found if s is not None)
    return [pair for pair, s in zip(pairs, found, strict=True) if s is None], statuses


def read_back(
    client: EventsClient,
    *,
    dcs: Iterable[str],
    epochs: range,
    acknowledged: Iterable[int],
    corrupted_records: Iterable[int],
    corrupted_chunks: dict[str, list[int]],
    plugins: list[Substream],
    sources: list[tuple[int, str]] | None = None,
    refused: dict[str, list[int]] | None = None,
    rejected_dir: Path | None = None,
    threads: int = 8,
) -> Readback:
    """Read everything back and count (see the module docstring).

    Args:
        client: a consumer of the run's store.
        dcs, epochs: what the run wrote.
        acknowledged: every id the producers were told is durable.
        corrupted_records: ids of events in journal records the campaign corrupted.
        corrupted_chunks: chunk key -> ids of its events, for chunks the campaign corrupted.
        plugins: the companion's plugins (their declared types/subtypes pick the chunks).
        sources: (first id, source name) ascending; a source named ``legacy`` is
            at-least-once (its duplicates are counted apart).
        refused: spool file name -> ids, for files that must be refused whole.
        rejected_dir: where refused spool files are kept (``<spool>/.rejected``).
        threads: parallel chunk and result reads.
    """
    out = Readback()
    keys = listed_chunks(client, list(dcs), epochs)
    out.chunks = len(keys)
    out.epochs = len({(k.epoch, k.dc) for k in keys})
    seen: collections.Counter[int] = collections.Counter()

    def read(key: ChunkKey) -> tuple[ChunkKey, list[int] | str]:
        try:
            return key, [int(e[ID_KEY]) for e in client.store.chunk(key).events]
        except ChunkMissing:
            return key, "missing"
        except ChunkCorrupt:
            return key, "corrupt"
        except ChunkUnreadable:
            return key, "unreadable"

    with ThreadPoolExecutor(threads) as pool:
        for key, got in pool.map(read, keys):
            text = key.format()
            if isinstance(got, list):
                seen.update(got)
                out.events_read += len(got)
            elif got == "missing":
                out.dangling += 1
                out.dangling_sample = [*out.dangling_sample, text][:10]
            elif got == "corrupt" and text in corrupted_chunks:
                out.corrupt_injected += 1
            else:
                out.corrupt_other += 1
                out.corrupt_other_sample = [*out.corrupt_other_sample, f"{text}: {got}"][:10]
    acked = set(acknowledged)
    journal = set(corrupted_records)
    store = {i for ids in corrupted_chunks.values() for i in ids}
    out.acknowledged = len(acked)
    out.found = sum(1 for i in acked if i in seen)
    firsts = [first for first, _ in sources or [(0, "all")]]
    names = [name for _, name in sources or [(0, "all")]]
    by_source: collections.Counter[str] = collections.Counter()
    for i, n in seen.items():
        if n > 1:
            by_source[names[max(0, bisect.bisect_right(firsts, i) - 1)]] += n - 1
    out.duplicated_by_source = dict(by_source)
    out.duplicated_legacy = by_source.get("legacy", 0)
    out.duplicated = sum(by_source.values()) - out.duplicated_legacy
    refused_ids = {i for ids in (refused or {}).values() for i in ids}
    out.refused = len(refused_ids)
    out.refused_found = sum(1 for i in refused_ids if i in seen)
    out.refused_not_kept = [
        name for name in (refused or {}) if rejected_dir and not (rejected_dir / name).exists()
    ]
    out.unacknowledged_found = sum(1 for i in seen if i not in acked and i not in refused_ids)
    for i in sorted(acked - seen.keys()):
        if i in store:
            out.lost_injected_store += 1
        elif i in journal:
            out.lost_injected_journal += 1
        else:
            out.lost += 1
            if len(out.lost_sample) < 10:
                out.lost_sample.append(i)
    missing, statuses = missing_results(client, keys, plugins, threads=threads)
    out.results_by_status = dict(statuses)
    out.without_result = len(missing)
    out.without_result_by_substream = dict(collections.Counter(name for name, _ in missing))
    out.without_result_sample = [f"{name}/{key.format()}" for name, key in missing[:10]]
    return out
