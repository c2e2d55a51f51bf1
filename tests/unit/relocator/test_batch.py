from __future__ import annotations

import pytest

from eventstore.names import ChunkKey
from relocator.batch import Batch, batch_id, chunk_number, decode_batch, encode_batch


def test_chunk_numbers_never_collide_between_writers_and_batches() -> None:
    seen = {
        chunk_number(w, s, i)
        for w in (0, 1, 9000)
        for s in (0, 1, 10**11 - 1)
        for i in (0, 1, 9999)
    }
    assert len(seen) == 27
    assert max(seen) < 2**63
    assert chunk_number(0, 0, 0) == 0
    assert chunk_number(2, 3, 4) == 2 * 10**15 + 3 * 10**4 + 4
    with pytest.raises(ValueError):
        chunk_number(0, 0, 10**4)
    with pytest.raises(ValueError):
        chunk_number(0, 10**11, 0)


def test_batch_round_trip() -> None:
    keys = (ChunkKey(5, "ams1", "web", "", 7), ChunkKey(5, "ams1", "web", "www", 8))
    b = Batch(
        id=batch_id(3, 12),
        epoch=5,
        dc="ams1",
        keys=keys,
        values=(b"\x00abc", b""),
        events=(2, 1),
        positions=(1, 2**41 + 5),
        spool="",
        late=1,
        sealed_at=1.5,
        segments=frozenset({0, 2}),
    )
    assert b.id == "0003-000000000012"
    assert decode_batch(encode_batch(b)) == b
    assert [r.format() for r in b.refs] == ["web::7", "web:www:8"]
    assert b.metadata_key == "5-ams1"


def test_decode_refuses_trailing_bytes() -> None:
    b = Batch(id="x", epoch=1, dc="d", keys=(), values=(), events=())
    with pytest.raises(ValueError):
        decode_batch(encode_batch(b) + b"!")
