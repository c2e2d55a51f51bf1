"""The consumer's reads from Riak: metadata, verified chunks, substream results.

This module is the library's one boundary with the store: every
:class:`~eventstore.riak.RiakError` and every blob or codec error is translated here into
a :class:`~consumer_lib.errors.ConsumerError` naming the epoch, dc and key (the original
is the ``__cause__``); nothing above it sees a Riak or HTTP error.

Read options are the seed's (``r=1``, ``notfound_ok=true``): fast, and safe because every
chunk carries a checksum postfix that is verified on every read.

Failure semantics:

1. **A node fails** (connection, timeout, 5xx): the Riak client retries on another node
   of the list with backoff and a deadline; when it gives up: :class:`StoreUnavailable`.
2. **Metadata missing** (404): the epoch is empty for that dc (``None``).
3. **A chunk listed in metadata is missing**: asked once more on another node with
   ``notfound_ok=false`` (a replica that has not got it yet must not hide one that
   has); still missing: :class:`ChunkMissing`.
4. **Checksum mismatch** (or a cut-off blob): the same key is read from every OTHER node
   of the node list in turn (one client per node, so the retry cannot land on the node
   that served the bad copy); the first good copy wins. None: :class:`ChunkCorrupt`
   naming the key and the nodes. On a real Riak cluster the node asked coordinates the
   read and may ask the same replica; trying every node of the list gives each a
   chance to answer from another one (and Riak's read repair fixes nothing here: with
   last_write_wins the bad copy may be as new as the good one).
5. **A result is unreadable** (bad checksum, not a result record): reported as such;
   the substream reader falls back to the full chunk.
6. **A chunk would decode to more than** ``decode_limits`` allows (a small stored blob
   claiming a huge body): :class:`ChunkTooLarge` naming the key, the size and the cap,
   raised from the header before anything is decompressed; not retried (the same bytes
   are on every replica).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client import Counter

from consumer_lib import defaults
from consumer_lib.errors import (
    ChunkCorrupt,
    ChunkMissing,
    ChunkTooLarge,
    ChunkUnreadable,
    ConsumerError,
    MetadataUnreadable,
    StoreUnavailable,
)
from eventstore.blob import BlobTooManyObjects, DecodeLimits, unpack_blob, verify_postfix
from eventstore.errors import (
    BlobError,
    BlobTooLarge,
    ChecksumMismatch,
    EventStoreError,
    InvalidName,
)
from eventstore.names import ChunkKey, ChunkRef, MetadataKey, Namespaces, parse_metadata
from eventstore.ratelog import LogSummary
from eventstore.riak import NotFound, Retry, RiakClient, RiakError
from eventstore.riak.types import Quorum, RiakObject
from substreams.results import ResultRecord, read_result

log = logging.getLogger(__name__)

__all__ = ["FetchedBlob", "FetchedChunk", "FetchedResult", "Store"]

T = TypeVar("T")

CHECKSUM_RETRIES = Counter(
    "consumer_checksum_retries_total",
    "Chunk reads whose copy failed its checksum and were retried on another node",
)


@dataclass(frozen=True)
class FetchedChunk:
    """A chunk read, verified and decoded.

    Attributes:
        key: its chunk key.
        events: the decoded events.
        size_bytes: the stored size (what crossed the network).
        node: the node that served the good copy.
        bad_nodes: nodes that served a copy failing its checksum first (usually empty).
    """

    key: ChunkKey
    events: list[dict[str, Any]]
    size_bytes: int
    node: str
    bad_nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class FetchedBlob:
    """A chunk read and verified, not decoded (for a decode elsewhere: the fallback's
    sandboxed child decodes it with ``unpack_blob(value, limits=Store.decode_limits)``).

    Attributes:
        key: its chunk key.
        value: the stored bytes; their checksum verified, the body's claimed size
            within the store's ``decode_limits``.
        size_bytes: the stored size (what crossed the network).
        node: the node that served the good copy.
        bad_nodes: nodes that served a copy failing its checksum first (usually empty).
    """

    key: ChunkKey
    value: bytes
    size_bytes: int
    node: str
    bad_nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class FetchedResult:
    """A substream result as stored: the decoded record, or why it could not be read.

    Attributes:
        record: the result record (``None`` when ``unreadable``).
        size_bytes: the stored size.
        unreadable: what was wrong with the stored value, if anything.
    """

    record: ResultRecord | None
    size_bytes: int
    unreadable: str | None = None


class Store:
    """Reads for consumers, over one Riak client (and one single-node client per node
    for checksum retries).

    Args:
        nodes: base URLs of the cluster's nodes.
        namespaces: bucket types and buckets.
        r, notfound_ok: Riak read options of every GET (the seed: 1 and true).
        timeout_s: socket timeout of one request, seconds.
        retry: retry policy of the main client (on other nodes).
        decode_limits: what one chunk may decode to (default: ``consumer_lib.defaults``).
    """

    def __init__(
        self,
        nodes: tuple[str, ...],
        *,
        namespaces: Namespaces,
        r: Quorum = 1,
        notfound_ok: bool = True,
        timeout_s: float = 10.0,
        retry: Retry | None = None,
        decode_limits: DecodeLimits | None = None,
    ) -> None:
        self.namespaces = namespaces
        self.decode_limits = decode_limits or DecodeLimits(
            max_decoded_bytes=defaults.MAX_DECODED_BYTES,
            max_decoded_ratio=defaults.MAX_DECODED_RATIO,
        )
        self.r = r
        self.notfound_ok = notfound_ok
        self._timeout_s = timeout_s
        # Our recipes call get() from their own pool; the client's pool stays unused.
        self.riak = RiakClient(nodes, timeout_s=timeout_s, retry=retry, concurrency=1)
        self.nodes: tuple[str, ...] = self.riak.nodes.nodes
        self._single: dict[str, RiakClient] = {}
        self._single_lock = threading.Lock()
        # A node that fails a second look or a retry: DEBUG each time, one WARNING a minute.
        self._node_failures = LogSummary(
            log,
            "consumer: %(count)d reads on node %(key)s failed in the last %(seconds).0f s "
            "(the next node was asked); last: %(last)s",
        )

    # -- metadata ----------------------------------------------------------------------

    def metadata(self, epoch: int, dc: str) -> tuple[ChunkRef, ...] | None:
        """The entries of an epoch's metadata in dc, or ``None`` when there is none.

        Raises:
            MetadataUnreadable: the value is malformed.
            StoreUnavailable: Riak kept failing.
        """
        meta = MetadataKey(epoch, dc)
        key = meta.format()
        with _boundary(epoch=epoch, dc=dc, key=key):
            try:
                obj = self.riak.get(
                    *self.namespaces.metadata_location(meta), r=self.r, notfound_ok=self.notfound_ok
                )
            except NotFound:
                return None
            try:
                return parse_metadata(obj.value, key=key)
            except InvalidName as e:
                raise MetadataUnreadable(
                    f"metadata is malformed: {e}", epoch=epoch, dc=dc, key=key
                ) from e

    # -- chunks ------------------------------------------------------------------------

    def chunk(self, key: ChunkKey) -> FetchedChunk:
        """Read, verify and decode one chunk listed in metadata.

        Raises:
            ChunkMissing: not found on any node asked (see failure scenario 3).
            ChunkCorrupt: no good copy on any node of the list.
            ChunkUnreadable: a good copy that does not decode to a list of events.
            StoreUnavailable: Riak kept failing.
        """
        return self.decode(self.chunk_blob(key))

    def decode(self, blob: FetchedBlob) -> FetchedChunk:
        """Decode a chunk read by :meth:`chunk_blob` (what :meth:`chunk` returns, the
        decode done by the caller's thread when it wants it: the full-stream readers
        prefetch bytes and decode each chunk just before handing it out).

        Raises:
            ChunkTooLarge: it would build more objects than ``decode_limits`` allows.
            ChunkUnreadable: it does not decode to a list of events.
        """
        key = blob.key
        with _boundary(epoch=key.epoch, dc=key.dc, key=key.format()):
            events = _events(blob.value, key, self.decode_limits)
        return FetchedChunk(key, events, blob.size_bytes, blob.node, blob.bad_nodes)

    def chunk_blob(self, key: ChunkKey) -> FetchedBlob:
        """Read and verify one chunk listed in metadata, without decoding it: as
        :meth:`chunk` (same retries), the body's claimed size checked against
        ``decode_limits`` from its header.

        Raises:
            ChunkMissing, ChunkCorrupt, StoreUnavailable: as :meth:`chunk`.
            ChunkTooLarge: the body would decode to more than the cap.
            ChunkUnreadable: the header is malformed.
        """
        value, size, node, bad = self._read_chunk(
            key, lambda value: _verified(value, key, self.decode_limits)
        )
        return FetchedBlob(key, value, size, node, bad)

    def _read_chunk(
        self, key: ChunkKey, parse: Callable[[bytes], T]
    ) -> tuple[T, int, str, tuple[str, ...]]:
        """GET, second look, checksum retry on other nodes; ``parse`` verifies (raising
        ChecksumMismatch for a bad copy). Returns (parsed, stored size, node, bad nodes)."""
        text = key.format()
        where: dict[str, Any] = {"epoch": key.epoch, "dc": key.dc, "key": text}
        location = self.namespaces.chunk_location(key)
        with _boundary(**where):
            obj: RiakObject | None
            try:
                obj = self.riak.get(*location, r=self.r, notfound_ok=self.notfound_ok)
            except NotFound as e:
                obj = self._found_elsewhere(location, e.node)
                if obj is None:
                    raise ChunkMissing("chunk listed in metadata is missing", **where) from None
            first_node = obj.node or ""
            try:
                return parse(obj.value), len(obj.value), first_node, ()
            except ChecksumMismatch as e:
                log.warning("consumer: key=%s from %s: %s; trying other nodes", text, first_node, e)
                CHECKSUM_RETRIES.inc()
                return self._good_copy_elsewhere(key, location, first_node, e, parse)

    def _found_elsewhere(
        self, location: tuple[str, str, str], missing_on: str | None
    ) -> RiakObject | None:
        """A second look for a missing object on another node, with notfound_ok=false."""
        for node in (self._other_nodes(missing_on) or list(self.nodes))[:2]:
            try:
                return self._client_of(node).get(*location, notfound_ok=False)
            except NotFound:
                return None
            except RiakError as e:  # that node is down: ask the next one
                log.debug("consumer: %s: second look on %s failed: %s", location[2], node, e)
                self._node_failures.note(node, f"key={location[2]}: {e}")
        return None

    def _good_copy_elsewhere(
        self,
        key: ChunkKey,
        location: tuple[str, str, str],
        bad_node: str,
        first_error: ChecksumMismatch,
        parse: Callable[[bytes], T],
    ) -> tuple[T, int, str, tuple[str, ...]]:
        text = key.format()
        bad = [bad_node]
        last: Exception = first_error
        for node in self._other_nodes(bad_node):
            try:
                obj = self._client_of(node).get(*location, r=self.r, notfound_ok=False)
                return parse(obj.value), len(obj.value), node, tuple(bad)
            except ChecksumMismatch as e:
                log.warning("consumer: key=%s from %s: %s", text, node, e)
                CHECKSUM_RETRIES.inc()
                bad.append(node)
                last = e
            except RiakError as e:  # down, or no copy there: try the next node
                log.debug("consumer: key=%s: retry on %s failed: %s", text, node, e)
                self._node_failures.note(node, f"key={text}: {e}")
                last = e
        error = ChunkCorrupt(
            f"no good copy of the chunk: checksum failed on {', '.join(bad)}"
            + ("" if len(bad) == len(self.nodes) else f"; last error: {last}"),
            epoch=key.epoch,
            dc=key.dc,
            key=text,
        )
        error.nodes = tuple(bad)
        raise error from first_error

    # -- substream results --------------------------------------------------------------

    def result(self, substream: str, key: ChunkKey) -> FetchedResult | None:
        """The stored result of ``substream`` for a chunk, or ``None`` when there is none.

        Raises:
            StoreUnavailable: Riak kept failing.
        """
        text = key.format()
        with _boundary(epoch=key.epoch, dc=key.dc, key=f"{substream}/{text}"):
            try:
                obj = self.riak.get(
                    *self.namespaces.substream_location(substream, key),
                    r=self.r,
                    notfound_ok=self.notfound_ok,
                )
            except NotFound:
                return None
            try:
                record = read_result(obj.value, key=text)
            except (EventStoreError, ValueError) as e:
                return FetchedResult(None, len(obj.value), f"{type(e).__name__}: {e}")
            return FetchedResult(record, len(obj.value))

    # -- plumbing -------------------------------------------------------------------------

    def _other_nodes(self, node: str | None) -> list[str]:
        """Every node of the list but ``node``, starting after it (spreads the retries)."""
        if node not in self.nodes:
            return list(self.nodes)
        i = self.nodes.index(node)
        return [n for n in self.nodes[i + 1 :] + self.nodes[:i]]

    def _client_of(self, node: str) -> RiakClient:
        with self._single_lock:
            client = self._single.get(node)
            if client is None:
                # One try: the caller moves on to the next node itself.
                client = RiakClient(
                    [node], timeout_s=self._timeout_s, retry=Retry(max_tries=1), concurrency=1
                )
                self._single[node] = client
            return client

    def close(self) -> None:
        """Close every connection."""
        self.riak.close()
        with self._single_lock:
            clients, self._single = list(self._single.values()), {}
        for client in clients:
            client.close()
        self._node_failures.flush()


def _events(value: bytes, key: ChunkKey, limits: DecodeLimits) -> list[dict[str, Any]]:
    """Verify and decode a chunk. ChecksumMismatch passes through (the caller retries)."""
    with _blob_errors(key):
        events = unpack_blob(value, key=key.format(), limits=limits)
    if not isinstance(events, list):
        raise ChunkUnreadable(
            f"chunk holds a {type(events).__name__}, not an array of events",
            epoch=key.epoch,
            dc=key.dc,
            key=key.format(),
        )
    return events


def _verified(value: bytes, key: ChunkKey, limits: DecodeLimits) -> bytes:
    """Verify a chunk and check its claimed body size from the header; returns ``value``.
    ChecksumMismatch passes through (the caller retries)."""
    with _blob_errors(key):
        limits.check(verify_postfix(value, key.format()), len(value), key.format())
    return value


@contextlib.contextmanager
def _blob_errors(key: ChunkKey) -> Iterator[None]:
    """Blob errors as ConsumerErrors naming the chunk; ChecksumMismatch passes through."""
    where: dict[str, Any] = {"epoch": key.epoch, "dc": key.dc, "key": key.format()}
    try:
        yield
    except ChecksumMismatch:
        raise
    except BlobTooManyObjects as e:
        raise ChunkTooLarge(
            f"chunk too large: builds more than {e.max_objects} objects "
            f"(max_decoded_objects) from its {e.stored_bytes} stored bytes",
            **where,
        ) from e
    except BlobTooLarge as e:
        raise ChunkTooLarge(
            f"chunk too large: decodes to {e.decoded_bytes} bytes, more than the cap of "
            f"{e.cap_bytes} bytes for its {e.stored_bytes} stored bytes",
            **where,
        ) from e
    except BlobError as e:
        raise ChunkUnreadable(f"chunk does not decode: {e.reason}", **where) from e


@contextlib.contextmanager
def _boundary(*, epoch: int | None, dc: str | None, key: str | None) -> Iterator[None]:
    """Translate store and blob errors into ConsumerErrors naming epoch, dc and key."""
    try:
        yield
    except ConsumerError:
        raise
    except RiakError as e:
        raise StoreUnavailable(f"Riak read failed: {e}", epoch=epoch, dc=dc, key=key) from e
    except EventStoreError as e:
        raise ChunkUnreadable(f"unreadable: {e}", epoch=epoch, dc=dc, key=key) from e
