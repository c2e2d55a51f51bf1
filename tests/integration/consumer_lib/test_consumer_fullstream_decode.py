"""The full stream's decoded chunks through a real devnode: fetched ahead as bytes,
decoded on the consumer's thread one at a time, and the collector's threshold raised
only while a chunk is handed out, as found after every way a read ends (exhausted,
closed early, an error fetching, an error decoding) and never overwriting the
application's own."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

import pytest

import sereal_codec as sereal
from consumer_lib import ChunkMissing, EventsClient, fullstream
from consumer_lib.errors import ChunkTooLarge
from consumer_lib.ranges import EpochRange
from consumer_lib.types import ChunkFilter, TaggedEvent, tag_chunk
from eventstore.blob import DecodeLimits
from eventstore.riak import RiakClient
from eventstore.testing import Spec, write_epoch

E0 = 1_700_000_900
T = TypeVar("T")


def big_spec(epoch: int, chunks: int = 4, per_chunk: int = 300) -> Spec:
    """web:app in ``chunks`` chunks of ``per_chunk`` events (thousands of containers)."""
    return {
        ("web", "app"): [
            [
                {"epoch": epoch, "chunk": c, "i": i, "http": {"status": 200}}
                for i in range(per_chunk)
            ]
            for c in range(chunks)
        ]
    }


def read_begun(client: EventsClient, riak: RiakClient, dc: str) -> Iterator[TaggedEvent]:
    """The :func:`big_spec` epoch written and a read of it that has handed out its first
    event (its first chunk is out)."""
    write_epoch([riak], E0, dc, big_spec(E0))
    stream = client.events(dc, E0, E0 + 1)
    next(stream)
    return stream


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[tuple[int, int, int]]:
    """The process's collector thresholds as found, set back whatever a test did."""
    found = gc.get_threshold()
    yield found
    gc.set_threshold(*found)


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The thread of every Sereal decode, in order (the store's and the blob module's)."""
    threads: list[int] = []
    decode = sereal.decode

    def counted(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.get_ident())
        return decode(*args, **kwargs)

    monkeypatch.setattr(sereal, "decode", counted)
    return threads


class InlineExecutor(Executor):
    """Runs each task at submit: what a pool that has finished every fetch looks like."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # handed back at the item's turn, as the pool does
            future.set_exception(e)
        return future


def test_chunks_are_fetched_ahead_and_decoded_one_at_a_time_on_the_consumer_thread(
    client: EventsClient, riak: RiakClient, dc: str, decodes: list[int]
) -> None:
    write_epoch([riak], E0, dc, big_spec(E0, chunks=6))
    fetches: list[str] = []
    real_blob = client.store.chunk_blob

    def fetched(key: Any, **options: Any) -> Any:
        fetches.append(key.format())
        return real_blob(key, **options)

    client.store.chunk_blob = fetched  # type: ignore[method-assign]
    stream = fullstream.events(
        fullstream.RangeRead(
            client.store,
            InlineExecutor(),
            dc,
            EpochRange(E0, E0 + 1),
            ChunkFilter.of(None, None),
            prefetch_chunks=4,
            metadata_depth=1,
        )
    )
    first = next(stream)
    assert (first.chunk, first.event["i"]) == (0, 0)
    assert len(fetches) == 4  # four chunks fetched ahead, one decoded
    assert len(decodes) == 1
    rest = list(stream)
    assert len(rest) == 6 * 300 - 1 and len(decodes) == 6
    # through the client's pool: every decode on the caller's thread
    decodes.clear()
    assert sum(1 for _ in client.events(dc, E0, E0 + 1)) == 6 * 300
    assert decodes == [threading.get_ident()] * 6


def test_the_threshold_is_raised_while_a_chunk_is_handed_out_and_set_back_after(
    client: EventsClient, riak: RiakClient, dc: str, thresholds: tuple[int, int, int]
) -> None:
    stream = read_begun(client, riak, dc)
    # the chunk's containers (~300 events of 2 dicts each) do not count
    assert gc.get_threshold()[0] > thresholds[0] + 500
    assert gc.get_threshold()[1:] == thresholds[1:]
    assert len(list(stream)) == 4 * 300 - 1
    assert gc.get_threshold() == thresholds
    for chunk in client.chunks(dc, E0, E0 + 1):  # the same for whole chunks
        assert gc.get_threshold()[0] > thresholds[0] + 500
        assert len(chunk.events) == 300
    assert gc.get_threshold() == thresholds


def test_the_threshold_is_set_back_when_a_read_is_closed_early(
    client: EventsClient, riak: RiakClient, dc: str, thresholds: tuple[int, int, int]
) -> None:
    stream = read_begun(client, riak, dc)
    stream.close()  # type: ignore[attr-defined]
    assert gc.get_threshold() == thresholds
    for _ in client.events(dc, E0, E0 + 1):
        break  # the loop drops the iterator: closed
    assert gc.get_threshold() == thresholds
    epochs = client.epochs(dc, E0, E0 + 1)
    del epochs  # never started
    assert gc.get_threshold() == thresholds


def test_the_threshold_is_set_back_after_an_error_fetching_or_decoding(
    client: EventsClient, riak: RiakClient, dc: str, thresholds: tuple[int, int, int]
) -> None:
    keys = write_epoch([riak], E0, dc, big_spec(E0))
    riak.delete("events", "events", keys[2].format())
    stream = client.events(dc, E0, E0 + 1)
    assert next(stream).chunk == 0
    with pytest.raises(ChunkMissing):
        list(stream)  # chunk 1 handed out, then chunk 2 is missing
    assert gc.get_threshold() == thresholds

    # a chunk that builds more objects than the store allows fails in the decode itself
    client.store.decode_limits = DecodeLimits(max_decoded_objects=400)
    with pytest.raises(ChunkTooLarge):
        list(client.events(dc, E0, E0 + 1))
    assert gc.get_threshold() == thresholds


def test_the_application_s_own_threshold_is_kept(
    client: EventsClient, riak: RiakClient, dc: str
) -> None:
    stream = read_begun(client, riak, dc)
    gc.set_threshold(5_000, 20, 30)  # set while the read is open
    assert len(list(stream)) == 4 * 300 - 1
    assert gc.get_threshold() == (5_000, 20, 30)


def test_events_are_tagged_as_tag_chunk_tags_them_across_batches(
    client: EventsClient, riak: RiakClient, dc: str
) -> None:
    spec = big_spec(E0)
    write_epoch([riak], E0, dc, spec)
    expected = [e for chunk in spec["web", "app"] for e in chunk]
    tagged = list(client.events(dc, E0, E0 + 1))  # 300 a chunk: tagged in two batches
    assert [t.event for t in tagged] == expected
    chunks = list(client.chunks(dc, E0, E0 + 1))
    assert [c.events for c in chunks] == spec["web", "app"]
    assert tagged == [t for c in chunks for t in tag_chunk(c)]  # what tag_chunk builds
    assert all(type(t) is TaggedEvent for t in tagged)


def test_handing_out_chunks_starts_no_young_collection_over_them(
    client: EventsClient, riak: RiakClient, dc: str
) -> None:
    write_epoch([riak], E0, dc, big_spec(E0, chunks=8, per_chunk=1_000))
    passes: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        read = sum(1 for _ in client.events(dc, E0, E0 + 1))
    finally:
        gc.callbacks.remove(count)
    assert read == 8 * 1_000
    # each chunk is ~3,000 containers: uncovered, each would start at least one
    assert len(passes) < 4, passes
