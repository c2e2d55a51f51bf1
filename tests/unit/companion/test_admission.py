"""Admission (companion/admission.py): keys into the node's inbox or refused, taken
out in batches only while every chunk thread of the node has one, the late apart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from companion.admission import Admission
from companion.inbox import Inbox
from eventstore.names import ChunkKey


def key(chunk: int, type_: str = "web") -> ChunkKey:
    return ChunkKey(1_700_000_000, "dc1", type_, "main", chunk)


@pytest.fixture
def inbox() -> Iterator[Inbox]:
    box = Inbox(4)
    yield box
    box.close()


def test_a_full_inbox_and_a_key_too_long_are_refused_with_their_reasons(inbox: Inbox) -> None:
    admission = Admission(inbox, max_wait_s=2.0, batch_chunks=4, threads=1, clock=lambda: 100.0)
    got = admission.admit([key(i) for i in range(5)] + [key(9, "t" * 300)], audit=True)
    assert got.accepted == 4
    assert [(k.chunk, why) for k, why in got.refused[:1]] == [(4, "overload: queue full")]
    assert got.refused[1][0] == key(9, "t" * 300) and "over 238 bytes" in got.refused[1][1]
    item = inbox.get(0.1)
    assert item is not None
    assert (item.key, item.arrived, item.deadline, item.audit) == (key(0), 100.0, 102.0, True)


def test_more_chunks_are_taken_only_while_every_thread_of_the_node_has_one(inbox: Inbox) -> None:
    now = [100.0]
    admission = Admission(inbox, max_wait_s=2.0, batch_chunks=3, threads=2, clock=lambda: now[0])
    admission.admit([key(i) for i in range(4)])
    taken = admission.take(0.1)
    # 3 waiting after the first >= 2 threads: one more; then 2 >= 2: one more (3 at most).
    assert [i.key.chunk for i in taken.live] == [0, 1, 2] and taken.late == ()
    assert [i.key.chunk for i in admission.take(0.1).live] == [3]  # alone: none waits
    assert admission.take(0.01).live == ()


def test_the_chunks_that_waited_past_their_deadline_are_taken_apart(inbox: Inbox) -> None:
    now = [100.0]
    admission = Admission(inbox, max_wait_s=2.0, batch_chunks=4, threads=1, clock=lambda: now[0])
    admission.admit([key(0)])
    now[0] = 101.0
    admission.admit([key(1)])
    now[0] = 102.5
    taken = admission.take(0.1)
    assert [i.key.chunk for i in taken.late] == [0]
    assert [i.key.chunk for i in taken.live] == [1]
    assert taken.late_reason == "overload: waited over 2.0s"
    assert admission.depth() == 0
