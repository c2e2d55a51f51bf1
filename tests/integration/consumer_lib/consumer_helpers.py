"""Helpers of the consumer library's integration tests: epochs written as relocators
write them (chunks first, metadata last), and a client with one plugin file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from consumer_lib import EventsClient
from eventstore.names import ChunkKey
from eventstore.riak import RiakClient
from eventstore.testing import Spec, write_epoch
from substreams.testing import plugin_dir

__all__ = ["Spec", "Writer", "client_with_plugin", "sample_spec", "write_epoch"]

Writer = Callable[..., list[ChunkKey]]


def sample_spec(epoch: int, *, web_chunks: int = 12) -> Spec:
    """web:app in ``web_chunks`` chunks (so "web:app:10" sorts before "web:app:2" in the
    metadata), lb:edge in one, cron with an empty subtype in one."""
    return {
        ("web", "app"): [
            [{"epoch": epoch, "type": "web", "chunk": c, "i": i} for i in range(3)]
            for c in range(web_chunks)
        ],
        ("lb", "edge"): [[{"epoch": epoch, "type": "lb", "i": i} for i in range(2)]],
        ("cron", ""): [[{"epoch": epoch, "type": "cron", "i": 0}]],
    }


@contextmanager
def client_with_plugin(
    tmp_path: Path, riak: RiakClient, filename: str, source: str, *, concurrency: int
) -> Iterator[tuple[EventsClient, Path]]:
    """A client of ``riak``'s nodes whose only plugins are the file ``filename`` with
    ``source`` (in ``tmp_path/plugins``; no entry points); yields it and the file."""
    directory = plugin_dir(tmp_path, filename, source)
    with EventsClient(
        riak.nodes.nodes, plugin_dirs=[directory], use_entry_points=False, concurrency=concurrency
    ) as client:
        yield client, directory / filename
