"""The read pipeline's parts: the chunk filter on metadata, and prefetch (order kept,
work ahead bounded, markers and errors passed through in order)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from consumer_lib import ChunkMissing, InvalidArgument
from consumer_lib.pipeline import prefetch
from consumer_lib.types import ChunkFilter
from eventstore.names import parse_metadata


def test_filter_is_applied_to_metadata_and_gives_chunk_order() -> None:
    refs = parse_metadata("web:app:10|web:app:2|web:app:0|lb::0|cron:x:1|web.api:v2:0")
    assert [r.format() for r in refs][:3] == ["cron:x:1", "lb::0", "web.api:v2:0"]
    everything = ChunkFilter.of()
    assert [r.format() for r in everything.select(refs)] == [
        "cron:x:1",
        "lb::0",
        "web:app:0",
        "web:app:2",
        "web:app:10",  # chunk number order, not byte order
        "web.api:v2:0",
    ]
    assert [r.format() for r in ChunkFilter.of("web*").select(refs)] == [
        "web:app:0",
        "web:app:2",
        "web:app:10",
        "web.api:v2:0",
    ]
    assert [r.format() for r in ChunkFilter.of(subtypes=[""]).select(refs)] == ["lb::0"]
    assert ChunkFilter.of(["lb", "cron"], "x").keeps("cron", "x")
    with pytest.raises(InvalidArgument):
        ChunkFilter.of([1])  # type: ignore[list-item]


def test_prefetch_keeps_order_and_bounds_the_work_ahead() -> None:
    lock = threading.Lock()
    started: list[int] = []
    handed = 0
    ahead = 0

    def work(i: int) -> int:
        nonlocal ahead
        with lock:
            started.append(i)
            ahead = max(ahead, len(started) - handed)
        time.sleep(0.001 * (i % 3))  # finish out of order
        return i * i

    with ThreadPoolExecutor(4) as pool:
        out = []
        for item, result in prefetch(range(200), work, pool, 5):
            out.append((item, result))
            handed += 1
    assert out == [(i, i * i) for i in range(200)]
    assert ahead <= 5  # never more than `depth` items worked but not handed back


def test_prefetch_markers_pass_through_and_errors_come_in_order() -> None:
    def work(i: object) -> object:
        if i == 3:
            raise ChunkMissing("gone", key="k3")
        return i

    with ThreadPoolExecutor(2) as pool:
        stream = prefetch(["m", 1, 2, "m", 3, 4], work, pool, 3, is_marker=lambda i: i == "m")
        assert [next(stream) for _ in range(4)] == [("m", None), (1, 1), (2, 2), ("m", None)]
        with pytest.raises(ChunkMissing):
            next(stream)
