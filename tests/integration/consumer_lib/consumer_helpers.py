"""Helpers of the consumer library's integration tests: epochs written as relocators
write them (chunks first, metadata last)."""

from __future__ import annotations

from collections.abc import Callable

from eventstore.names import ChunkKey
from eventstore.testing import Spec, write_epoch

__all__ = ["Spec", "Writer", "sample_spec", "write_epoch"]

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
