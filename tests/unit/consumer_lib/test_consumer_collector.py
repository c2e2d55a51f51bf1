"""The collector's allowance for a decoded chunk (consumer_lib.collector): the young
threshold raised by the sum of the open grants and set back to what was found, someone
else's setting never overwritten, and no young collection over a covered chunk."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from consumer_lib import collector
from consumer_lib.collector import Allowance, Threshold


@pytest.fixture(autouse=True)
def thresholds_restored() -> Iterator[tuple[int, int, int]]:
    """The process's thresholds as found, set back whatever a test did."""
    found = gc.get_threshold()
    yield found
    gc.set_threshold(*found)


def test_grants_add_up_and_the_last_release_sets_back_what_was_found(
    thresholds_restored: tuple[int, int, int],
) -> None:
    base, t1, t2 = thresholds_restored
    threshold = Threshold()
    a = threshold.grant(5_000)
    assert gc.get_threshold() == (base + 5_000, t1, t2)
    b = threshold.grant(300)
    assert gc.get_threshold() == (base + 5_300, t1, t2) and threshold.raised == 5_300
    threshold.release(a)  # in any order
    assert gc.get_threshold() == (base + 300, t1, t2)
    threshold.release(a)  # twice: nothing more
    assert gc.get_threshold() == (base + 300, t1, t2)
    threshold.release(b)
    assert gc.get_threshold() == (base, t1, t2) and threshold.raised == 0
    b = threshold.adjust(threshold.grant(4_000_000), 42)  # narrowed in one step
    assert gc.get_threshold()[0] == base + 42
    threshold.release(b)
    assert gc.get_threshold() == (base, t1, t2)


def test_someone_else_s_threshold_is_never_overwritten() -> None:
    threshold = Threshold()
    open_grant = threshold.grant(1_000)
    gc.set_threshold(1_234, 11, 12)  # the application sets its own while a read is open
    threshold.release(open_grant)
    assert gc.get_threshold() == (1_234, 11, 12)
    # later grants start from it, and the void grant releases nothing
    later = threshold.grant(100)
    assert gc.get_threshold() == (1_334, 11, 12)
    threshold.release(open_grant)
    assert gc.get_threshold() == (1_334, 11, 12)
    threshold.release(later)
    assert gc.get_threshold() == (1_234, 11, 12)


def test_a_threshold_of_zero_is_never_raised() -> None:
    gc.set_threshold(0)  # automatic collection off: raising it would turn it on
    threshold = Threshold()
    grant = threshold.grant(10_000)
    assert gc.get_threshold()[0] == 0
    threshold.release(grant)
    assert gc.get_threshold()[0] == 0


def test_a_covered_chunk_starts_no_young_collection_and_is_covered_exactly() -> None:
    collections: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    base = gc.get_threshold()[0]
    threshold = Threshold()
    gc.collect()
    before = [[i] for i in range(500)]  # young containers of the caller's, not covered
    gc.callbacks.append(count)
    try:
        allowed = Allowance(1_000_000, threshold)
        # a "decode": 20,000 containers built with the collector paused, as the decoder does
        gc.disable()
        chunk = [{"i": i} for i in range(20_000)]
        gc.enable()
        allowed.cover_new_objects()
        raised = threshold.raised
        handed_out = [[i] for i in range(100)]  # what a reader allocates while handing out
        assert collections == []
        allowed.close()
        assert gc.get_threshold()[0] == base
        more = [[i] for i in range(100)]  # uncovered now: the chunk is collected as usual
        assert collections != []
    finally:
        gc.callbacks.remove(count)
    # the chunk's containers (net, since the allowance opened), not the 1,000,000 expected
    assert 20_000 <= raised < 20_000 + 200
    assert len(before) + len(chunk) + len(handed_out) + len(more) == 20_700


def test_what_the_reader_allocates_while_handing_out_is_covered_too() -> None:
    threshold = Threshold()
    allowed = Allowance(1_000_000, threshold)
    gc.disable()
    chunk = [{"i": i} for i in range(5_000)]
    gc.enable()
    allowed.cover_new_objects(also=257)  # a batch of tagged events and its list
    assert 5_000 + 100 < threshold.raised < 5_257 + 200  # net of what was freed meanwhile
    allowed.close()
    nothing = Allowance(1_000_000, threshold)
    nothing.cover_new_objects(also=257)  # nothing decoded: nothing to hand out either
    assert threshold.raised == 0 and len(chunk) == 5_000
    nothing.close()


class CollectingAt:
    """The gc module as the collector module sees it, except that a collection, whose
    finalizer releases a grant, runs inside the first call of ``set_threshold`` (before
    it sets anything): as when an allocation there starts one, the update half done
    (which allocations start one depends on free lists; this makes it one known place)."""

    def __init__(self, finalizer: Callable[[], None]) -> None:
        self._finalizer: Callable[[], None] | None = finalizer

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)

    def set_threshold(self, *thresholds: int) -> None:
        finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer()
        gc.set_threshold(*thresholds)


def test_a_release_from_a_collection_started_inside_the_threshold_s_own_update(
    thresholds_restored: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reader's generator caught in a reference cycle is closed by the collector, and
    # its allowance released, during whatever allocation started that collection: it
    # may be one inside Threshold.adjust, on the same thread, the lock held.
    base = thresholds_restored[0]
    threshold = Threshold()
    first = threshold.grant(100)
    monkeypatch.setattr(collector, "gc", CollectingAt(lambda: threshold.release(first)))
    second = threshold.grant(50)
    assert gc.get_threshold()[0] == base + 50 and threshold.raised == 50
    threshold.release(second)
    assert gc.get_threshold()[0] == base and threshold.raised == 0
