"""Chunking policy, events round trips and limits, and exact splitting of blobs (of
blobs Perl wrote: tests/interop/test_perl_split.py).

The policy tests drive the estimate/encode/re-split core with synthetic encoders (no
codec needed). Round trips use the Sereal codec; splitting uses the compiled splitter,
which every build has (tests/unit/sereal_codec/test_core.py fails when it is missing).
"""

from __future__ import annotations

import importlib
import itertools
import os
import random
from typing import Any

import pytest

from eventstore import chunking
from eventstore.blob import has_postfix, postfix_length, unpack_blob
from eventstore.chunking import (
    CHUNK_MAX_BODY_BYTES,
    _build,
    _groups,
    _plan,
    chunk_documents,
    chunk_events,
    split_blob,
)
from eventstore.errors import EventTooLarge, NotAnArrayBlob
from eventstore.testing import unpacked_events
from sereal_codec.errors import SerealError


def _codec() -> Any:
    return importlib.import_module("sereal_codec")


def _need_splitter() -> None:
    assert chunking.splitter_available(), "the compiled splitter is missing: run make test"


# -- the policy, with synthetic encoders --------------------------------------------------


def test_groups_are_greedy_and_cover_everything() -> None:
    assert _groups([3, 3, 3, 3], 6) == [(0, 2), (2, 4)]
    assert _groups([10, 1, 1], 5) == [(0, 1), (1, 3)]  # an oversized element alone
    assert _groups([], 5) == []
    weights = [random.Random(1).randrange(1, 100) for _ in range(500)]
    ranges = _groups(weights, 250)
    assert ranges[0][0] == 0 and ranges[-1][1] == 500
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))


# The synthetic "blobs" below are not documents: no body limit, no body to measure.
NO_BODY_LIMIT: dict[str, Any] = {"max_body_bytes": 2**62, "body_bytes": len}


def _incompressible(sizes: list[int]) -> Any:
    # stored size = sum of element sizes + 40 bytes of header and postfix
    def make(a: int, b: int) -> bytes:
        return bytes(sum(sizes[a:b]) + 40)

    return make


def test_build_resplits_until_everything_fits() -> None:
    sizes = [100] * 64
    make = _incompressible(sizes)
    chunks = _build([(0, 64)], make, 1000, **NO_BODY_LIMIT)
    assert [(c.start, c.stop) for c in chunks] == [(i, i + 8) for i in range(0, 64, 8)]
    assert all(len(c.data) <= 1000 for c in chunks)


def test_plan_with_a_bad_estimate_still_respects_the_limit() -> None:
    # Compression that is great for the whole (ratio 0.1) but poor for small groups:
    # the estimate is far too optimistic, re-splitting must repair it.
    sizes = [1000] * 200

    def make(a: int, b: int) -> bytes:
        n = b - a
        return bytes(100 * 200 if n == 200 else 900 * n + 40)

    chunks = _plan(sizes, make(0, 200), make, 5_000, **NO_BODY_LIMIT)
    assert all(len(c.data) <= 5_000 for c in chunks)
    assert chunks[0].start == 0 and chunks[-1].stop == 200
    assert all(a.stop == b.start for a, b in itertools.pairwise(chunks))


def test_single_oversized_element_names_its_index() -> None:
    sizes = [10, 10, 5000, 10]
    with pytest.raises(EventTooLarge) as e:
        _plan(sizes, bytes(5100), _incompressible(sizes), 1000, **NO_BODY_LIMIT)
    assert e.value.index == 2
    assert e.value.size_bytes == 5040
    assert "event 2" in str(e.value) and "1000" in str(e.value)


# -- events round trips (need the codec) ---------------------------------------------------


def _events(n: int, seed: int = 7, payload: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ev: dict[str, Any] = {
            "epoch": 1413813813,
            "type": "web.request",
            "url": f"/hotel/nl/{rng.choice(['a', 'b', 'c'])}.html",
            "ms": rng.randrange(1000),
            "i": i,
        }
        if payload:
            ev["blob"] = os.urandom(payload).hex()
        out.append(ev)
    return out


@pytest.mark.parametrize("compress", ["zstd", "zlib", "snappy", None])
def test_small_input_is_one_chunk(compress: str | None) -> None:
    _codec()
    events = _events(50)
    chunks = chunk_events(events, compress=compress)
    assert len(chunks) == 1
    assert has_postfix(chunks[0].data)
    assert unpacked_events(chunks) == events


def test_incompressible_events_round_trip_under_the_limit() -> None:
    _codec()
    events = _events(300, payload=700)  # ~1.5 KB of random hex each
    chunks = chunk_events(events, chunk_max_bytes=50_000)
    assert len(chunks) > 5
    assert all(len(c.data) <= 50_000 for c in chunks)
    assert unpacked_events(chunks) == events


def test_compressible_events_round_trip_under_the_limit() -> None:
    _codec()
    events = _events(20_000)
    chunks = chunk_events(events, chunk_max_bytes=20_000)
    assert len(chunks) > 1
    assert all(len(c.data) <= 20_000 for c in chunks)
    # the estimate should fill chunks reasonably, not cut one event per chunk
    assert len(chunks) < 4 * sum(len(c.data) for c in chunks) / 20_000 + 2
    assert unpacked_events(chunks) == events


def test_event_too_large() -> None:
    _codec()
    events = [*_events(3), {"big": os.urandom(40_000)}, *_events(3)]
    with pytest.raises(EventTooLarge) as e:
        chunk_events(events, chunk_max_bytes=10_000)
    assert e.value.index == 3
    assert e.value.size_bytes > 10_000


def test_empty_and_bad_limits() -> None:
    assert chunk_events([]) == []
    with pytest.raises(ValueError):
        chunk_events([{"a": 1}], chunk_max_bytes=10)


# -- splitting existing blobs ----------------------------------------------------------------


def test_split_blob_rejects_non_arrays() -> None:
    _need_splitter()
    codec = _codec()
    with pytest.raises(NotAnArrayBlob):
        split_blob(codec.encode({"not": "an array"}))
    with pytest.raises(NotAnArrayBlob):
        split_blob(b"not sereal at all")


# -- joining single-event documents --------------------------------------------------------


def _documents(events: list[Any]) -> list[bytes]:
    codec = _codec()
    forms: list[dict[str, Any]] = [
        {"compress": None},
        {"compress": None, "protocol": 3},
        {"compress": "zstd", "compress_threshold": 0},
        {"compress": "snappy", "compress_threshold": 0, "user_header": {"h": 1}},
    ]
    return [codec.encode(e, **forms[i % 7 // 2]) for i, e in enumerate(events)]


@pytest.mark.parametrize("ratio", [None, 0.01, 0.1, 1.0, 5.0])
@pytest.mark.parametrize("limit", [3_000, 20_000, 500_000])
def test_chunk_documents_round_trips_under_the_limit(ratio: float | None, limit: int) -> None:
    assert chunking.join_available(), "the compiled join_bodies is missing: run make test"
    events = _events(3_000)
    shared = {"dc": "ams4"}
    for i, ev in enumerate(events):
        if i % 3 == 0:  # COPY and REFP inside the documents
            ev["a"], ev["b"], ev["c"] = shared, shared, ev["url"]
    docs = _documents(events)
    chunks = chunk_documents(docs, chunk_max_bytes=limit, ratio=ratio)
    assert all(len(c.data) <= limit and has_postfix(c.data) for c in chunks)
    assert [(c.start, c.stop) for c in chunks] == list(
        itertools.pairwise([0, *(c.stop for c in chunks)])
    )
    assert chunks[-1].stop == len(events)
    assert unpacked_events(chunks) == events
    if limit == 500_000 and ratio is None:
        assert len(chunks) == 1
    # a wrong ratio costs re-splits, never an oversized chunk; a right one fills chunks
    if ratio == 0.1 and limit == 20_000:
        assert len(chunks) < 3 * sum(len(c.data) for c in chunks) / limit + 2


def test_chunk_documents_drops_bad_documents_with_their_index() -> None:
    events = _events(200)
    docs = _documents(events)
    good = docs[1]
    docs[1] = b"not sereal"
    docs[50] = good[:-3]  # truncated body
    docs[199] = good + b"\x01"  # trailing bytes
    seen: list[int] = []
    chunks = chunk_documents(docs, chunk_max_bytes=5_000, on_bad=lambda i, e: seen.append(i))
    assert sorted(seen) == [1, 50, 199]
    kept = [e for i, e in enumerate(events) if i not in (1, 50, 199)]
    assert unpacked_events(chunks) == kept
    assert chunks[-1].stop == len(kept)
    with pytest.raises(SerealError) as info:
        chunk_documents(docs[2:], chunk_max_bytes=5_000)
    assert getattr(info.value, "index", None) == 48
    assert chunk_documents([b"x", b"y"], on_bad=lambda i, e: None) == []
    assert chunk_documents([]) == []


@pytest.mark.parametrize("ratio", [None, 0.5])
def test_chunk_documents_event_too_large_names_its_index(ratio: float | None) -> None:
    codec = _codec()
    docs = [codec.encode(e, compress=None) for e in _events(5)]
    docs.insert(3, codec.encode({"big": os.urandom(40_000)}, compress=None))
    docs.insert(1, b"bad")
    with pytest.raises(EventTooLarge) as e:
        chunk_documents(docs, chunk_max_bytes=10_000, ratio=ratio, on_bad=lambda i, e: None)
    assert e.value.index == 4


def test_chunk_documents_without_the_compiled_join(monkeypatch: pytest.MonkeyPatch) -> None:
    events = _events(500)
    docs = _documents(events)
    docs[7] = b"bad"
    monkeypatch.setattr(chunking, "join_available", lambda: False)
    seen: list[int] = []
    chunks = chunk_documents(docs, chunk_max_bytes=5_000, on_bad=lambda i, e: seen.append(i))
    assert seen == [7]
    assert unpacked_events(chunks) == events[:7] + events[8:]
    with pytest.raises(SerealError) as info:
        chunk_documents(docs)
    assert getattr(info.value, "index", None) == 7


def test_chunk_bodies_stay_under_the_body_limit() -> None:
    # Near-identical events compress a thousandfold: the stored limit alone would let
    # one 500 KB chunk hold gigabytes of body, which readers refuse (DecodeLimits).
    from eventstore.blob import DecodeLimits
    from relocator.events import generate_events
    from sereal_codec.document import body_size

    event = generate_events(1, 3)[0]
    events = [dict(event, id=i % 3) for i in range(100_000)]
    docs = [_codec().encode(e, compress=None) for e in events]
    for chunks in (chunk_events(events), chunk_documents(docs)):
        assert len(chunks) > 1
        assert chunks[0].start == 0 and chunks[-1].stop == len(events)
        for chunk in chunks:
            assert body_size(chunk.data[: -postfix_length()]) <= CHUNK_MAX_BODY_BYTES
            assert len(unpack_blob(chunk.data, limits=DecodeLimits())) == chunk.count
    small = chunk_events(events[:5000], max_body_bytes=200_000)
    assert all(body_size(c.data[: -postfix_length()]) <= 200_000 for c in small)
