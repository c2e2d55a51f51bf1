"""companion/held.py: the chunks of a batch beyond the first go back into the inbox when
their worker dies, and nowhere once they are done."""

from __future__ import annotations

import os
from pathlib import Path

from companion.held import hold, release, requeue
from companion.inbox import Inbox, InboxItem
from eventstore.names import ChunkKey


def item(chunk: int, audit: bool = False) -> InboxItem:
    key = ChunkKey(1_700_000_000, "dc1", "web", "main", chunk)
    return InboxItem(key, 10.0 + chunk, 40.0, audit)


def test_a_dead_workers_held_chunks_are_queued_again_as_they_were(tmp_path: Path) -> None:
    inbox = Inbox(8)
    try:
        held = [item(1), item(2, audit=True)]
        assert hold(tmp_path, held) is not None
        assert requeue(tmp_path, os.getpid(), inbox) == 2
        assert [inbox.get(0), inbox.get(0), inbox.get(0)] == [*held, None]
        assert not list(tmp_path.iterdir())  # put back once
        assert requeue(tmp_path, os.getpid(), inbox) == 0
    finally:
        inbox.close()


def test_released_chunks_and_other_workers_are_not_queued_again(tmp_path: Path) -> None:
    inbox = Inbox(8)
    try:
        release(hold(tmp_path, [item(1)]))
        hold(tmp_path, [item(2)])
        assert requeue(tmp_path, os.getpid() + 1, inbox) == 0  # not that worker's
        assert inbox.get(0) is None
        assert hold(tmp_path, []) is None
    finally:
        inbox.close()
