from __future__ import annotations

from pathlib import Path

import pytest

from eventstore.names import ChunkKey
from relocator.batch import Batch
from relocator.state import State

pytestmark = pytest.mark.unit


def test_state_survives_reopen_and_tracks_clusters(tmp_path: Path) -> None:
    s = State(tmp_path, map_size_bytes=1 << 24)
    assert [s.reserve_seq() for _ in range(3)] == [0, 1, 2]
    b = Batch(
        id="0000-000000000001",
        epoch=1,
        dc="d",
        keys=(ChunkKey(1, "d", "t", "", 10001),),
        values=(b"v",),
        events=(1,),
    )
    s.add([b])
    s.mark_pushed("a", b.id)
    s.close()
    s = State(tmp_path, map_size_bytes=1 << 24)
    assert s.reserve_seq() == 3
    assert s.ids() == [b.id]
    assert s.get(b.id) == b
    assert s.pushed("a") == {b.id} and s.pushed("b") == set() and s.pushed("") == set()
    s.remove(b.id, ["a", "b"])
    assert s.ids() == [] and s.pushed("a") == set() and s.get(b.id) is None
    s.close()
