"""Reading the full stream: epoch ranges of one dc, in chronological order.

The seed's "Reading from Riak", for a range::

    for each epoch of [start, end), in order (metadata read up to `metadata_depth` ahead):
        refs = metadata <epoch>-<dc>            # 404: the epoch is empty
        keep the refs whose type/subtype pass the filter   # before fetching anything
        sort them in chunk order (type, subtype, chunk NUMBER)
        fetch + verify each chunk on the pool, up to `prefetch` chunks ahead (bytes)
    for each chunk, in order: decode it, on the consumer's thread, just before handing
        it out, with the collector's allowance for its objects (consumer_lib.collector)
    yield each epoch (or each chunk, or each event) in order

Why decode last: the decoder holds the GIL, so decoding ahead on the pool overlaps
with nothing but the fetches' waits, while every chunk decoded ahead stays alive until
its turn: the collector scans it again and again and it is freed cold (consumer_lib
DESIGN.md, "Figures": that was half the cost of a read). Socket waits and xxh3
release the GIL, so fetching and verifying overlap with the decode (their Python half,
http.client, does not). Decompressing on the pool too was measured and lost: zstd
releases the GIL, but the Python around it and the handing back cost the decoding
thread more than the decompression.

Memory is bounded whatever the range: at most ``prefetch`` chunks' stored bytes are
held ahead of the consumer (:mod:`consumer_lib.pipeline`), one
decoded chunk (the one being handed out: :func:`events` drops it before decoding the
next, :func:`chunks` too, though a caller's loop variable holds it until the next one
replaces it), plus, for :func:`epochs`, the epoch being assembled.

Failure semantics: a missing epoch is empty (``Epoch.found`` false). A chunk listed in
metadata but missing raises :class:`~consumer_lib.errors.ChunkMissing`; a chunk whose
every copy fails its checksum raises :class:`~consumer_lib.errors.ChunkCorrupt`; both
name the key, and are raised in order: every earlier epoch has been yielded first.
Checksum retries on other nodes happen below, in :mod:`consumer_lib.store`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass

from consumer_lib.collector import Allowance
from consumer_lib.pipeline import prefetch
from consumer_lib.ranges import EpochRange
from consumer_lib.store import FetchedBlob, Store
from consumer_lib.types import Chunk, ChunkFilter, Epoch, TaggedEvent, tag_events
from eventstore.names import ChunkKey, ChunkRef

__all__ = [
    "EpochMark",
    "RangeRead",
    "chunk_stream",
    "epoch_metadata",
    "epoch_reader",
    "epochs",
    "events",
]

#: An epoch's metadata as read: its entries, or None when it has no metadata.
Metadata = tuple[ChunkRef, ...] | None

#: Events tagged per step of :func:`events` (allocated at once: the chunk's collector
#: allowance covers them too).
TAG_BATCH = 256


@dataclass(frozen=True)
class EpochMark:
    """Marks the start of an epoch in the chunk stream: the keys that follow are its."""

    epoch: int
    dc: str
    found: bool
    keys: tuple[ChunkKey, ...]
    skipped: bool = False


def epoch_metadata(
    store: Store, executor: Executor, dc: str, epoch_range: EpochRange, depth: int
) -> Iterator[tuple[int, Metadata]]:
    """``(epoch, metadata)`` for every epoch of the range, in order, read ``depth`` ahead."""
    yield from prefetch(epoch_range, lambda e: store.metadata(e, dc), executor, depth)


def marks(
    dc: str,
    metadata: Iterable[tuple[int, Metadata]],
    keep: ChunkFilter,
    also: Callable[[str, str], bool] | None = None,
) -> Iterator[EpochMark | ChunkKey]:
    """The chunk stream's items: for each epoch a mark, then its kept keys in order.

    ``also``: a second condition on (type, subtype), e.g. a plugin's declaration.
    """
    for epoch, refs in metadata:
        kept = keep.select(refs or ())
        if also is not None:
            kept = [r for r in kept if also(r.type, r.subtype)]
        keys = tuple(r.key(epoch, dc) for r in kept)
        yield EpochMark(epoch, dc, refs is not None, keys)
        yield from keys


def chunk_stream(
    store: Store,
    executor: Executor,
    items: Iterable[EpochMark | ChunkKey],
    prefetch_chunks: int,
    *,
    also_covered: int = 0,
) -> Iterator[EpochMark | Chunk]:
    """Marks and decoded chunks, in order: up to ``prefetch_chunks`` fetched and verified
    ahead on ``executor``, each decoded here when its turn comes (see the module).

    The collector's allowance for a chunk's objects (:mod:`consumer_lib.collector`), plus
    ``also_covered`` containers its consumer allocates while handing it out, lasts until
    the next chunk is decoded, or the stream ends or is closed.
    """
    fetch: Callable[[EpochMark | ChunkKey], FetchedBlob] = lambda key: _blob(store, key)  # noqa: E731
    handed_out: Allowance | None = None  # for the chunk handed out last
    try:
        for item, blob in prefetch(
            items, fetch, executor, prefetch_chunks, is_marker=lambda i: isinstance(i, EpochMark)
        ):
            if blob is None:
                yield item  # type: ignore[misc]
                continue
            allowed = Allowance(store.decode_limits.max_decoded_objects)
            try:
                fetched = store.decode(blob)
            except BaseException:
                allowed.close()
                raise
            del blob  # the stored bytes are not needed any more
            chunk = Chunk(
                fetched.key, fetched.events, fetched.size_bytes, fetched.node, fetched.bad_nodes
            )
            del fetched
            allowed.cover_new_objects(also=also_covered)
            # The last chunk's allowance ends only now, with nothing allocated before the
            # yield: a consumer's loop variable holds that chunk until this one replaces it.
            if handed_out is not None:
                handed_out.close()
            handed_out = allowed
            yield chunk
            del chunk  # freed now if the consumer let it go
    finally:
        if handed_out is not None:
            handed_out.close()


def _blob(store: Store, key: EpochMark | ChunkKey) -> FetchedBlob:
    assert isinstance(key, ChunkKey)
    return store.chunk_blob(key)


def group_epochs(stream: Iterable[EpochMark | Chunk]) -> Iterator[Epoch]:
    """Assemble the chunk stream into epochs."""
    mark: EpochMark | None = None
    chunks: list[Chunk] = []
    for item in stream:
        if isinstance(item, EpochMark):
            if mark is not None:
                yield Epoch(mark.epoch, mark.dc, tuple(chunks), mark.found, mark.skipped)
            mark, chunks = item, []
        else:
            chunks.append(item)
    if mark is not None:
        yield Epoch(mark.epoch, mark.dc, tuple(chunks), mark.found, mark.skipped)


@dataclass(frozen=True)
class RangeRead:
    """One read of an epoch range of one dc: where from, what it keeps, how far ahead.
    :func:`epochs`, :func:`chunks` and :func:`events` are its three views."""

    store: Store
    executor: Executor
    dc: str
    epoch_range: EpochRange
    keep: ChunkFilter
    prefetch_chunks: int
    metadata_depth: int

    def stream(self, *, also_covered: int = 0) -> Iterator[EpochMark | Chunk]:
        """Marks and decoded chunks of the range, in order (:func:`chunk_stream`)."""
        metadata = epoch_metadata(
            self.store, self.executor, self.dc, self.epoch_range, self.metadata_depth
        )
        items = marks(self.dc, metadata, self.keep)
        return chunk_stream(
            self.store, self.executor, items, self.prefetch_chunks, also_covered=also_covered
        )


def epochs(read: RangeRead) -> Iterator[Epoch]:
    """Every epoch of the range, in order, with its kept chunks decoded (see module)."""
    return group_epochs(read.stream())


def chunks(read: RangeRead) -> Iterator[Chunk]:
    """Every kept chunk of the range, in order, one at a time (no epoch is assembled)."""
    return _chunks_only(read.stream())


def _chunks_only(stream: Iterable[EpochMark | Chunk]) -> Iterator[Chunk]:
    for item in stream:
        if isinstance(item, Chunk):
            yield item
        del item  # before the stream decodes the next: one decoded chunk alive here


def tagged_batches(chunk: Chunk) -> Iterator[list[TaggedEvent]]:
    """The events of one chunk tagged as :func:`~consumer_lib.types.tag_chunk` tags them,
    in lists of up to :data:`TAG_BATCH`, each built in one call
    (:func:`~consumer_lib.types.tag_events`: compiled in the Sereal core)."""
    key = chunk.key
    events = chunk.events
    for start in range(0, len(events), TAG_BATCH):
        yield tag_events(events[start : start + TAG_BATCH], key)


def events(read: RangeRead) -> Iterator[TaggedEvent]:
    """Every event of the range, in order, tagged with epoch/dc/type/subtype/chunk."""
    # a batch: its TaggedEvents, their list, the slice of events and the values tuple
    for chunk in _chunks_only(read.stream(also_covered=TAG_BATCH + 3)):
        batches = tagged_batches(chunk)
        del chunk  # the batches hold it until the last: then one decoded chunk alive
        for batch in batches:
            yield from batch
            del batch


def epoch_reader(
    store: Store, executor: Executor, dc: str, keep: ChunkFilter, *, prefetch_chunks: int
) -> Callable[[int, Metadata], Epoch]:
    """For ``tail``: reads one epoch from its metadata (None: a skipped epoch)."""

    def read(epoch: int, refs: Metadata) -> Epoch:
        if refs is None:
            return Epoch(epoch, dc, (), found=False, skipped=True)
        stream = chunk_stream(store, executor, marks(dc, [(epoch, refs)], keep), prefetch_chunks)
        (one,) = group_epochs(stream)
        return one

    return read
