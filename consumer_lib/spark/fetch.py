"""Many GETs of one Riak bucket over one keep-alive connection, pipelined: the requests
go out up to ``depth`` ahead of the answers, which are parsed by ``httptools`` (the C
HTTP parser the devnode's server uses too).

Why: the Spark source reads thousands of chunks per task; through
:class:`eventstore.riak.RiakClient` (``http.client`` on a thread pool) a GET costs the
Python worker ~130 us of CPU, pipelined ~35 us (bench/README.md "spark_bench.py"), and
no thread is needed: the server answers while the caller transcodes the previous chunk.

Failure semantics: this is a fast path only. The first thing that is not a complete
``200`` or ``404`` answer (refused or reset connection, timeout, a server closing the
connection, another status such as ``300`` for siblings or ``503``, an unparsable answer)
ends it: :func:`pipelined_get` stops and the caller fetches every key still unanswered
through the client, with its retries on other nodes and its errors. No answer is ever
handed out twice or out of order.
"""

from __future__ import annotations

import logging
import socket
from collections import deque
from collections.abc import Iterator, Sequence
from urllib.parse import urlsplit

import httptools

from consumer_lib.errors import ConsumerError
from eventstore.riak import RiakClient, paths
from eventstore.riak.defaults import CONFIRMED_ABSENCE
from eventstore.riak.errors import NotFound

__all__ = ["PipelineBroken", "get_all", "pipelined_get"]

log = logging.getLogger(__name__)

_RECV_BYTES = 1 << 20


class PipelineBroken(ConsumerError):
    """The pipeline stopped (why is the message); ``answered`` keys came back whole.
    Internal to this module: :func:`get_all` never lets it out. Retriable: another
    connection may answer."""

    retriable = True

    def __init__(self, message: str, answered: int) -> None:
        super().__init__(message)
        self.answered = answered


class _Answers:
    """httptools callbacks: complete answers as (status, body), in order."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.done: deque[tuple[int, bytes]] = deque()
        self._body: list[bytes] = []

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self.done.append((self.parser.get_status_code(), b"".join(self._body)))
        self._body = []


def pipelined_get(
    node: str,
    bucket_type: str | None,
    bucket: str,
    keys: Sequence[str],
    *,
    depth: int = 32,
    timeout_s: float = 30.0,
) -> Iterator[tuple[str, bytes | None]]:
    """Yield ``(key, value)`` for each of ``keys`` in order (``None``: not found).

    Args:
        node: the node's base URL, ``http://host:port``.
        bucket_type, bucket: where the keys are.
        keys: the keys, each fetched once, in this order.
        depth: requests sent and not yet answered, at most.
        timeout_s: the longest wait for the socket (connect, send or receive).

    Raises:
        PipelineBroken: the pipeline stopped; the keys from ``answered`` on were not
            handed out (fetch them another way).
    """
    parts = urlsplit(node)
    host, port = parts.hostname or "", parts.port or 8098
    prefix = f"{parts.path.rstrip('/')}"
    head = f" HTTP/1.1\r\nHost: {parts.netloc}\r\nUser-Agent: riak-events\r\n"
    # Metadata and chunks: no false "not found" from an empty fallback replica.
    confirmed = paths.query({k: bool(v) for k, v in CONFIRMED_ABSENCE.items()})
    head += "X-Riak-URL-Encoding: on\r\n\r\n"
    answers = _Answers()
    answered = sent = 0
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as e:
        raise PipelineBroken(f"connect to {node}: {e}", 0) from e
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        unsendable: OSError | None = None
        while answered < len(keys):
            if unsendable is None and sent < len(keys) and sent - answered < depth:
                # Every request the window allows, in one send.
                stop = min(len(keys), answered + depth)
                batch = "".join(
                    f"GET {prefix}{paths.object_path(bucket_type, bucket, k)}{confirmed}{head}"
                    for k in keys[sent:stop]
                )
                try:
                    sock.sendall(batch.encode())
                    sent = stop
                except OSError as e:
                    # The server closed the connection (or reset it): the answers it
                    # sent before are still to be read; then the pipeline ends.
                    unsendable = e
            if answered >= sent:
                raise PipelineBroken(f"send to {node}: {unsendable!r}", answered)
            while not answers.done:
                data = sock.recv(_RECV_BYTES)
                if not data:
                    raise PipelineBroken(f"{node} closed the connection", answered)
                answers.parser.feed_data(data)
            while answers.done:
                status, body = answers.done.popleft()
                if status not in (200, 404):
                    raise PipelineBroken(f"{node} answered {status}", answered)
                yield keys[answered], body if status == 200 else None
                answered += 1
    except (OSError, httptools.HttpParserError) as e:
        raise PipelineBroken(f"{node}: {e!r}", answered) from e
    finally:
        sock.close()


def get_all(
    client: RiakClient,
    node: str,
    bucket_type: str | None,
    bucket: str,
    keys: Sequence[str],
    *,
    depth: int = 32,
    timeout_s: float = 30.0,
) -> Iterator[tuple[str, bytes | None]]:
    """Yield ``(key, value)`` for each of ``keys`` in order (``None``: not found),
    pipelined to ``node`` while that works, then through ``client``
    (:func:`pipelined_get` for ``depth`` and ``timeout_s``).

    A pipeline that breaks after answering something is opened again (a server may
    close a keep-alive connection after so many requests); one that breaks before
    answering anything hands the rest to ``client`` (its retries, other nodes, errors).

    Raises:
        RiakError: a key the client could not fetch either.
    """
    done = 0
    while done < len(keys):
        try:
            for item in pipelined_get(
                node, bucket_type, bucket, keys[done:], depth=depth, timeout_s=timeout_s
            ):
                yield item
                done += 1
            return
        except PipelineBroken as e:
            log.debug("riak-events spark: pipeline to %s broke after %d keys: %s", node, done, e)
            if e.answered == 0:
                break
    if done < len(keys):
        log.warning(
            "riak-events spark: pipelined GETs to %s failed; %d keys from %s on through the client",
            node,
            len(keys) - done,
            keys[done],
        )
    for key in keys[done:]:
        try:
            yield key, client.get(bucket_type, bucket, key, **CONFIRMED_ABSENCE).value
        except NotFound:
            yield key, None
