"""The inbox every worker of a node reads: a bounded FIFO of whole records."""

from __future__ import annotations

import pytest

from companion.inbox import Inbox, InboxItem
from eventstore.names import ChunkKey


def _item(chunk: int, *, type_: str = "web") -> InboxItem:
    return InboxItem(ChunkKey(1_700_000_000, "dc1", type_, "main", chunk), 10.0 + chunk, 99.5)


def test_the_inbox_is_a_bounded_fifo_of_whole_records() -> None:
    inbox = Inbox(3)
    try:
        assert inbox.capacity == 3 and inbox.depth() == 0
        assert [inbox.put(_item(i)) for i in range(4)] == [True, True, True, False]
        assert inbox.depth() == 3
        first = inbox.get(0.1)
        assert first == _item(0)
        assert inbox.put(_item(9))  # room again
        assert [inbox.get(0.1) for _ in range(3)] == [_item(1), _item(2), _item(9)]
        assert inbox.get(0.01) is None
        with pytest.raises(ValueError, match="over 238 bytes"):
            inbox.put(_item(0, type_="t" * 300))
        inbox.put(_item(5))
        assert inbox.drain() == 1 and inbox.depth() == 0
    finally:
        inbox.close()


def test_inbox_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        Inbox(0)
