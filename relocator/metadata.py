"""Merging our chunk entries into an epoch's metadata ``<epoch>-<dc>`` on one cluster.

The epochs bucket is last_write_wins (no siblings), so a plain read-modify-write can
lose an entry when two writers interleave (A reads, B reads, A writes, B writes: A's
entry is gone). The guarantee that **no writer ever drops a key another wrote** comes
from four layers (relocator/DESIGN.md, "Metadata merge", gives the argument):

1. Chunk keys never collide: chunk numbers carry the writer id and the batch sequence,
   so a lost entry is the only possible damage, never a wrong one.
2. Mutual exclusion of writers of one metadata key: in one process a striped lock per
   (cluster, key); across relocators a ZooKeeper lock per (cluster, dc) when ZooKeeper
   is configured (``lock`` below). Without ZooKeeper, one relocator per deployment.
3. Verification: after writing, read the key back and check that every entry we wrote
   is there; if not (a writer outside the lock, a sloppy-quorum read), merge and write
   again, up to ``max_rounds`` times, then fail the batch so it is retried later.
4. Conditional writes: each PUT only over the version read (below).

The value written is always ``merge_metadata(current, ours)``: a sorted union, so
everything read is written back. And it is written only over the version read
(``If-Match`` its ETag, ``If-None-Match: *`` when there was none): a PUT that arrives
late (the client's retry of a try that did land, a node that stalled with the request
in its buffers) is refused with 412 instead of overwriting entries written since its
read; the round then reads again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from eventstore.names import ChunkRef, merge_metadata, parse_metadata
from eventstore.riak import NotFound, PreconditionFailed, RiakClient
from eventstore.riak.defaults import CONFIRMED_ABSENCE
from relocator.errors import MetadataNotSettled

log = logging.getLogger(__name__)

LockFactory = Callable[[str, str, str], AbstractContextManager[object]]


@contextlib.contextmanager
def _no_lock() -> Iterator[None]:
    yield


class MetadataWriter:
    """Read-merge-write-verify of metadata keys."""

    def __init__(
        self,
        *,
        bucket_type: str,
        bucket: str,
        max_rounds: int,
        lock: LockFactory | None = None,
        on_repair: Callable[[str], None] | None = None,
    ) -> None:
        self._bucket_type = bucket_type
        self._bucket = bucket
        self._max_rounds = max_rounds
        self._lock = lock
        self._on_repair = on_repair
        self._stripes = [threading.Lock() for _ in range(64)]

    def merge(
        self, cluster: str, client: RiakClient, epoch: int, dc: str, refs: list[ChunkRef]
    ) -> str:
        """Make sure every entry of ``refs`` is in ``<epoch>-<dc>`` on this cluster.

        Returns:
            The metadata value as last read back (contains ``refs``).

        Raises:
            MetadataNotSettled: our entries were still missing after ``max_rounds``.
            eventstore.riak.RiakError: the cluster failed (after the client's retries).
        """
        key = f"{epoch}-{dc}"
        want = {r.format() for r in refs}
        stripe = self._stripes[zlib.crc32(f"{cluster}/{key}".encode()) % len(self._stripes)]
        outer = self._lock(cluster, dc, key) if self._lock else _no_lock()
        with stripe, outer:
            for round_ in range(self._max_rounds):
                current, etag = self._read(client, key)
                if round_ > 0 and self._on_repair is not None:
                    self._on_repair(cluster)
                merged = merge_metadata(current, refs)
                if merged != current:
                    try:
                        client.put(
                            self._bucket_type,
                            self._bucket,
                            key,
                            merged.encode("ascii"),
                            content_type="text/plain",
                            if_match=etag or None,
                            if_none_match="*" if etag is None else None,
                        )
                    except PreconditionFailed:
                        # written since our read (or our own retried try had landed):
                        # nothing was overwritten; the next round reads and merges again
                        log.info("metadata: cluster=%s key=%s changed under us", cluster, key)
                        continue
                check, _ = self._read(client, key)
                have = {r.format() for r in parse_metadata(check, key=key)} if check else set()
                if want <= have:
                    return check
                log.warning(
                    "metadata: cluster=%s key=%s lost %d of our entries; rewriting",
                    cluster,
                    key,
                    len(want - have),
                )
        raise MetadataNotSettled(f"cluster={cluster} key={key}: entries kept disappearing")

    def _read(self, client: RiakClient, key: str) -> tuple[str, str | None]:
        """The value ("" when absent) and its ETag: None when absent, "" for an object
        without one (then written over unconditionally)."""
        try:
            # A false "not found" (an empty fallback replica answering first) would make
            # this writer create the key afresh over entries others wrote.
            obj = client.get(self._bucket_type, self._bucket, key, **CONFIRMED_ABSENCE)
        except NotFound:
            return "", None
        return obj.value.decode("ascii"), obj.etag or ""
