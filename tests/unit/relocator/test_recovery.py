"""Recovery never lets a new journal frame take a position a stored batch names
(relocator/DESIGN.md, "Why a replay never stores an event twice")."""

from __future__ import annotations

from pathlib import Path

from eventstore.names import ChunkKey
from relocator.batch import Batch
from relocator.daemon import Relocator
from relocator.journal import SEGMENT_SHIFT
from relocator.settings import load, parse_cluster_option


def test_segment_numbers_go_on_above_those_stored_batches_name(tmp_path: Path) -> None:
    """Every segment file deleted (their frames are in batches a down cluster still
    waits for): the journal must not start again at segment 0, or a new frame would
    take a position a stored batch covers and be skipped at the next replay."""
    settings = load(
        None,
        data_dir=tmp_path / "data",
        tcp_listen="",
        udp_listen="",
        metrics_listen="",
        clusters=(parse_cluster_option("a=http://127.0.0.1:9"),),
    )
    r = Relocator(settings)
    batch = Batch(
        id="0000-000000000001",
        epoch=100,
        dc="ams1",
        keys=(ChunkKey(100, "ams1", "web", "", 10_000),),
        values=(b"chunk",),
        events=(1,),
        positions=[(7 << SEGMENT_SHIFT) | 8],
        segments=frozenset({7}),
    )
    r.state.add([batch])
    assert r.journal.segments() == []
    r.recover()
    r.journal.append([b"RE\x01 a new frame"])
    assert r.journal.segments() == [8]
    r._close()
