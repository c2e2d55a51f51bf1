"""The inbox shared by a node's workers, read by two real processes (a fork): each item
reaches exactly one of them."""

from __future__ import annotations

import os

from companion.inbox import Inbox, InboxItem
from eventstore.names import ChunkKey


def _item(chunk: int, *, type_: str = "web") -> InboxItem:
    return InboxItem(ChunkKey(1_700_000_000, "dc1", type_, "main", chunk), 10.0 + chunk, 99.5)


def test_two_processes_reading_one_inbox_share_the_items_without_duplicates() -> None:
    inbox = Inbox(200)
    for i in range(200):
        assert inbox.put(_item(i))
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # a second "worker"
        os.close(read_fd)
        taken = []
        while (item := inbox.get(0.05)) is not None:
            taken.append(str(item.key.chunk))
        os.write(write_fd, ",".join(taken).encode())
        os._exit(0)
    os.close(write_fd)
    mine = []
    while (item := inbox.get(0.05)) is not None:
        mine.append(item.key.chunk)
    with os.fdopen(read_fd, "rb") as f:
        text = f.read().decode()
    os.waitpid(pid, 0)
    inbox.close()
    theirs = [int(c) for c in text.split(",") if c]
    assert sorted(mine + theirs) == list(range(200))
    assert not set(mine) & set(theirs)
