from __future__ import annotations

from pathlib import Path

import lmdb
import pytest

from eventstore.names import ChunkKey
from relocator.batch import Batch
from relocator.errors import StateStoreLost
from relocator.state import State


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


def test_an_emptied_store_is_refused_not_numbered_from_zero_again(tmp_path: Path) -> None:
    # LMDB opens a 0-byte data.mdb as a new store: batches numbered from 0 again wrote
    # chunk keys that held stored events (2,000 overwritten in a chaos campaign) and the
    # journal was pushed again (duplicates).
    s = State(tmp_path, map_size_bytes=1 << 24)
    assert [s.reserve_seq() for _ in range(3)] == [0, 1, 2]
    s.close()
    (tmp_path / "data.mdb").write_bytes(b"")
    with pytest.raises(StateStoreLost, match=rf"state store {tmp_path} is empty, but .*store-id"):
        State(tmp_path, map_size_bytes=1 << 24)


def test_a_store_replaced_by_another_is_refused(tmp_path: Path) -> None:
    for name in ("a", "b"):
        State(tmp_path / name, map_size_bytes=1 << 24).close()
    (tmp_path / "a" / "data.mdb").write_bytes((tmp_path / "b" / "data.mdb").read_bytes())
    with pytest.raises(StateStoreLost, match=r"is not the one .* names: it was replaced"):
        State(tmp_path / "a", map_size_bytes=1 << 24)


def test_a_store_of_a_version_without_ids_is_taken_and_given_one(tmp_path: Path) -> None:
    s = State(tmp_path, map_size_bytes=1 << 24)
    s.reserve_seq()
    s.close()
    (tmp_path / "store-id").unlink()  # as an older version left it: no file ...
    env = lmdb.open(str(tmp_path), max_dbs=4)
    with env.begin(write=True, db=env.open_db(b"counters")) as txn:
        txn.delete(b"store_id")  # ... and no id in the store
    env.close()
    s = State(tmp_path, map_size_bytes=1 << 24)
    assert s.reserve_seq() == 1
    s.close()
    assert (tmp_path / "store-id").read_bytes().strip()
    State(tmp_path, map_size_bytes=1 << 24).close()  # and it is itself from then on


def test_a_garbled_store_is_one_error_naming_it(tmp_path: Path) -> None:
    State(tmp_path, map_size_bytes=1 << 24).close()
    data = bytearray((tmp_path / "data.mdb").read_bytes())
    data[:64] = b"\xff" * 64  # the first meta page's header
    data[4096 : 4096 + 64] = b"\xff" * 64  # and the second's
    (tmp_path / "data.mdb").write_bytes(bytes(data))
    with pytest.raises(StateStoreLost, match=rf"state store {tmp_path} cannot be opened"):
        State(tmp_path, map_size_bytes=1 << 24)
