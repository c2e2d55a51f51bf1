"""The consumer library's errors: one root, each naming its epoch, dc and key."""

from __future__ import annotations

import pickle

from consumer_lib import ChunkMissing, ConsumerError, InvalidArgument


def test_errors_have_one_root_and_name_epoch_dc_key() -> None:
    error = ChunkMissing("chunk listed in metadata is missing", epoch=5, dc="d", key="5:d:t::0")
    assert isinstance(error, ConsumerError)
    assert str(error) == (
        "chunk listed in metadata is missing (epoch=5 (1970-01-01T00:00:05Z), dc=d, key=5:d:t::0)"
    )
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), again.epoch, again.dc, again.key) == (ChunkMissing, 5, "d", "5:d:t::0")
    assert issubclass(InvalidArgument, ValueError) and not ChunkMissing.retriable
