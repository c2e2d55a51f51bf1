"""The Riak client: objects, bucket props, ping and stats over Riak's HTTP API.

Failure semantics: every request goes through one boundary, :meth:`RiakClient._call`,
which sends it to a node, translates transport failures and non-success statuses into
:mod:`eventstore.riak.errors` (via :func:`~eventstore.riak.errors.error_for`), and lets
the :class:`~eventstore.riak.retry.Retry` policy try again on ANOTHER node when the
error is ``retriable`` (connection failures, timeouts, 503 quorum/overload, 5xx).
Non-retriable answers (404, 400, 300, 412) are raised at once. All our requests are
idempotent (PUT with last_write_wins, GET, DELETE), so repeating one is safe.

``multi_get`` and ``multi_put`` run requests on the client's thread pool, at most
``concurrency`` in flight; they wait for every request and then raise
:class:`~eventstore.riak.errors.PartialFailure` if any failed (after its own retries),
so a caller knows that every request has been tried before it acts on the outcome.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from eventstore.ratelog import LogSummary
from eventstore.riak import defaults, paths
from eventstore.riak.errors import (
    ConnectionFailed,
    NotFound,
    PartialFailure,
    RequestTimeout,
    RiakError,
    error_for,
)
from eventstore.riak.nodes import NodeSet
from eventstore.riak.retry import Retry
from eventstore.riak.transport import HttpResponse, Transport
from eventstore.riak.types import Location, PutItem, Quorum, RiakObject, location

log = logging.getLogger(__name__)

_META_PREFIX = "x-riak-meta-"


class RiakClient:
    """A client of one Riak cluster (or devnode), reached over HTTP at ``nodes``.

    Args:
        nodes: base URLs of the cluster's nodes, e.g. ``["http://10.0.0.1:8098"]``.
        timeout_s: socket timeout of one request, seconds (Riak's own per-request
            ``timeout`` option, in milliseconds, is separate).
        connect_timeout_s: connect timeout, seconds.
        max_idle_per_node: keep-alive connections kept per node.
        concurrency: requests in flight at once in multi_get / multi_put.
        retry: the retry policy (default: :class:`Retry` with its defaults).
        node_cooldown_s: how long a node that failed is avoided.

    Raises:
        ValueError: no nodes, duplicate nodes, or a node URL that is not http://host:port.
    """

    def __init__(
        self,
        nodes: Sequence[str],
        *,
        timeout_s: float = defaults.TIMEOUT_S,
        connect_timeout_s: float = defaults.CONNECT_TIMEOUT_S,
        max_idle_per_node: int = defaults.MAX_IDLE_PER_NODE,
        concurrency: int = defaults.CONCURRENCY,
        retry: Retry | None = None,
        node_cooldown_s: float = defaults.NODE_COOLDOWN_S,
    ) -> None:
        self.nodes = NodeSet([n.rstrip("/") for n in nodes], cooldown_s=node_cooldown_s)
        self._transport = Transport(
            self.nodes.nodes, max_idle=max_idle_per_node, connect_timeout_s=connect_timeout_s
        )
        self._timeout_s = timeout_s
        self._retry = retry or Retry()
        self._concurrency = max(1, concurrency)
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        # Each failed try is logged at DEBUG; a node that keeps failing gets one WARNING
        # line a minute with the count (a node down must not flood the log).
        self._failed_tries = LogSummary(
            log,
            "riak: %(count)d failed tries on node %(key)s in the last %(seconds).0f s "
            "(retried on another node while tries remain); last error: %(last)s",
        )
        self._headers = {
            "User-Agent": defaults.USER_AGENT,
            # Riak unquotes path segments only with http_url_encoding on or this header;
            # with it, every key (':' '-' '/' '%' spaces) means the same on every cluster.
            "X-Riak-URL-Encoding": "on",
        }

    # -- objects ---------------------------------------------------------------------

    def get(
        self,
        bucket_type: str | None,
        bucket: str,
        key: str,
        *,
        r: Quorum | None = None,
        pr: Quorum | None = None,
        notfound_ok: bool | None = None,
        basic_quorum: bool | None = None,
        timeout: int | None = None,
    ) -> RiakObject:
        """Fetch one object.

        Args:
            bucket_type: the bucket type; ``None`` or ``"default"`` for the default type.
            bucket, key: the object's name.
            r, pr, notfound_ok, basic_quorum: Riak's read options (``None``: the
                bucket's own).
            timeout: Riak's server-side timeout, milliseconds.

        Returns:
            The object.

        Raises:
            NotFound: no such object, deleted (``deleted`` true) or expired.
            Siblings: the object has siblings.
            RiakError: any other failure, after retries.
        """
        loc = location(bucket_type, bucket, key)
        target = paths.object_path(bucket_type, bucket, key) + paths.query(
            {
                "r": r,
                "pr": pr,
                "notfound_ok": notfound_ok,
                "basic_quorum": basic_quorum,
                "timeout": timeout,
            }
        )
        node, response = self._call("GET", target, location=loc, ok=(200,))
        return _object(loc, node, response)

    def put(
        self,
        bucket_type: str | None,
        bucket: str,
        key: str,
        value: bytes,
        *,
        content_type: str = "application/octet-stream",
        usermeta: Mapping[str, str] | None = None,
        vclock: str | None = None,
        w: Quorum | None = None,
        dw: Quorum | None = None,
        pw: Quorum | None = None,
        returnbody: bool = False,
        timeout: int | None = None,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> RiakObject | None:
        """Store one object.

        Args:
            bucket_type, bucket, key: where.
            value: the bytes to store.
            content_type: its media type (Riak requires one).
            usermeta: user metadata, sent as ``X-Riak-Meta-<name>`` headers.
            vclock: the vclock read with the object, when updating it.
            w, dw, pw: Riak's write options (``None``: the bucket's own).
            returnbody: ask Riak to answer with the stored object.
            timeout: Riak's server-side timeout, milliseconds.
            if_match: store only if the object's ETag (``RiakObject.etag``) is this
                one, or ``"*"``: only if there is an object.
            if_none_match: ``"*"``: store only if there is no object (or an ETag:
                only if the object's is another). Riak checks these on the
                coordinating node: not atomic against a concurrent PUT, but a request
                that arrives late (a retry, a stalled node) cannot overwrite what was
                written since its read.

        Returns:
            The stored object when ``returnbody``, else ``None``.

        Raises:
            PreconditionFailed: ``if_match``/``if_none_match`` did not hold (412; also
                when a retried try finds the first one's write: read again to know).
            BadRequest: Riak refused the request (e.g. a quorum above n_val).
            RiakError: any other failure, after retries.
        """
        loc = location(bucket_type, bucket, key)
        headers = {"Content-Type": content_type}
        for name, meta_value in (usermeta or {}).items():
            if not name or not all(c.isalnum() or c in "-_" for c in name):
                raise ValueError(f"usermeta name {name!r} for {loc} is not an HTTP token")
            headers[f"X-Riak-Meta-{name}"] = meta_value
        if vclock is not None:
            headers["X-Riak-Vclock"] = vclock
        for header, tag in (("If-Match", if_match), ("If-None-Match", if_none_match)):
            if tag is not None:
                headers[header] = tag if tag == "*" else f'"{tag}"'
        target = paths.object_path(bucket_type, bucket, key) + paths.query(
            {
                "w": w,
                "dw": dw,
                "pw": pw,
                "returnbody": True if returnbody else None,
                "timeout": timeout,
            }
        )
        node, response = self._call(
            "PUT", target, location=loc, ok=(200, 204), headers=headers, body=value
        )
        return _object(loc, node, response) if returnbody and response.status == 200 else None

    def delete(
        self,
        bucket_type: str | None,
        bucket: str,
        key: str,
        *,
        vclock: str | None = None,
        rw: Quorum | None = None,
        r: Quorum | None = None,
        w: Quorum | None = None,
        pr: Quorum | None = None,
        pw: Quorum | None = None,
        dw: Quorum | None = None,
        timeout: int | None = None,
    ) -> bool:
        """Delete one object.

        Returns:
            True if Riak deleted it, False if there was nothing to delete (404).

        Raises:
            RiakError: any failure other than not found, after retries.
        """
        loc = location(bucket_type, bucket, key)
        headers = {} if vclock is None else {"X-Riak-Vclock": vclock}
        target = paths.object_path(bucket_type, bucket, key) + paths.query(
            {"rw": rw, "r": r, "w": w, "pr": pr, "pw": pw, "dw": dw, "timeout": timeout}
        )
        try:
            self._call("DELETE", target, location=loc, ok=(204, 200), headers=headers)
        except NotFound:
            return False
        return True

    def multi_get(
        self,
        bucket_type: str | None,
        bucket: str,
        keys: Iterable[str],
        **options: Any,
    ) -> dict[str, RiakObject | None]:
        """Fetch many objects, at most ``concurrency`` requests in flight.

        Args:
            bucket_type, bucket: where the keys are.
            keys: the keys (duplicates are fetched once).
            options: :meth:`get`'s options, applied to every key.

        Returns:
            key -> object, or ``None`` for a key not found; in the order of ``keys``.

        Raises:
            PartialFailure: some keys failed otherwise; ``results`` holds the rest.
        """
        unique = list(dict.fromkeys(keys))
        futures = {
            key: self._pool().submit(self.get, bucket_type, bucket, key, **options)
            for key in unique
        }
        results: dict[str, RiakObject | None] = {}
        failures: dict[str, RiakError] = {}
        for key, future in futures.items():
            try:
                results[key] = future.result()
            except NotFound:
                results[key] = None
            except RiakError as e:
                failures[key] = e
        if failures:
            raise PartialFailure.of(failures, results, what=f"multi_get of {len(unique)} keys")
        return results

    def multi_put(
        self,
        bucket_type: str | None,
        bucket: str,
        items: Iterable[PutItem],
        **options: Any,
    ) -> None:
        """Store many objects, at most ``concurrency`` requests in flight.

        Every item is tried (with retries) before this returns or raises.

        Args:
            bucket_type, bucket: where.
            items: the objects.
            options: :meth:`put`'s write options (w, dw, pw, timeout).

        Raises:
            PartialFailure: some puts failed; ``results`` names the keys that were stored.
        """
        futures: dict[str, Future[RiakObject | None]] = {}
        for item in items:
            futures[item.key] = self._pool().submit(
                self.put,
                bucket_type,
                bucket,
                item.key,
                item.value,
                content_type=item.content_type,
                usermeta=item.usermeta,
                vclock=item.vclock,
                **options,
            )
        stored: dict[str, RiakObject | None] = {}
        failures: dict[str, RiakError] = {}
        for key, future in futures.items():
            try:
                stored[key] = future.result()
            except RiakError as e:
                failures[key] = e
        if failures:
            raise PartialFailure.of(failures, stored, what=f"multi_put of {len(futures)} keys")

    # -- bucket props, ping, stats ---------------------------------------------------

    def get_bucket_props(self, bucket_type: str | None, bucket: str) -> dict[str, Any]:
        """The effective props of a bucket.

        Raises:
            BucketTypeNotFound: no such (active) bucket type.
        """
        return self._json_get(paths.bucket_props_path(bucket_type, bucket), bucket_type)

    def set_bucket_props(
        self, bucket_type: str | None, bucket: str, props: Mapping[str, Any]
    ) -> None:
        """Set props on one bucket (merged over its type's).

        Raises:
            BucketTypeNotFound: no such (active) bucket type.
            BadRequest: Riak refused a prop.
        """
        self._json_put(paths.bucket_props_path(bucket_type, bucket), bucket_type, props)

    def get_bucket_type_props(self, bucket_type: str) -> dict[str, Any]:
        """The props of a bucket type.

        Raises:
            BucketTypeNotFound: no such (active) bucket type.
        """
        return self._json_get(paths.bucket_type_props_path(bucket_type), bucket_type)

    def set_bucket_type_props(self, bucket_type: str, props: Mapping[str, Any]) -> None:
        """Change props of an existing bucket type.

        Raises:
            BucketTypeNotFound: no such (active) bucket type.
            BadRequest: Riak refused a prop, or the type is ``default`` (its props are
                fixed by the node's configuration).
        """
        self._json_put(paths.bucket_type_props_path(bucket_type), bucket_type, props)

    def ping(self, node: str | None = None) -> bool:
        """Whether ``node`` (default: any node, with retries) answers ``/ping``."""
        if node is None:
            try:
                self._call("GET", "/ping", location=None, ok=(200,))
            except RiakError:
                return False
            return True
        try:
            response = self._transport.request(
                node, "GET", "/ping", headers=self._headers, timeout_s=self._timeout_s
            )
        except (OSError, http.client.HTTPException):
            return False
        return response.status == 200

    def stats(self, node: str | None = None) -> dict[str, Any]:
        """``/stats`` of ``node`` (default: any node) as a dict."""
        if node is None:
            _, response = self._call("GET", "/stats", location=None, ok=(200,))
        else:
            response = self._transport.request(
                node, "GET", "/stats", headers=self._headers, timeout_s=self._timeout_s
            )
            if response.status != 200:
                raise error_for(
                    response.status, response.body, response.headers, location=None, node=node
                )
        return dict(json.loads(response.body))

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Stop the thread pool and close pooled connections."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        self._transport.close()
        self._failed_tries.flush()

    def __enter__(self) -> RiakClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the one boundary ------------------------------------------------------------

    def _call(
        self,
        method: str,
        target: str,
        *,
        location: Location | None,
        ok: tuple[int, ...],
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        props_of: str | None = None,
    ) -> tuple[str, HttpResponse]:
        """Send a request with retries on other nodes; translate every failure.

        ``props_of`` names the bucket type of a props request (see ``error_for``).
        """
        all_headers = {**self._headers, **(headers or {})}
        last_failed: list[str] = []

        def attempt(remaining_s: float) -> tuple[str, HttpResponse]:
            node = self.nodes.pick(exclude=last_failed[-1] if last_failed else None)
            error: RiakError
            try:
                response = self._transport.request(
                    node,
                    method,
                    target,
                    headers=all_headers,
                    body=body,
                    timeout_s=min(self._timeout_s, remaining_s),
                )
            except TimeoutError as e:
                error = RequestTimeout(f"{method} timed out: {e}", location=location, node=node)
            except (OSError, http.client.HTTPException) as e:
                error = ConnectionFailed(
                    f"{method} failed: {type(e).__name__}: {e}", location=location, node=node
                )
            else:
                if response.status in ok:
                    self.nodes.succeeded(node)
                    return node, response
                error = error_for(
                    response.status,
                    response.body,
                    response.headers,
                    location=location,
                    node=node,
                    props_of=props_of,
                )
            if error.retriable:
                self.nodes.failed(node)
                last_failed.append(node)
                log.debug("riak: %s %s on %s: %s", method, location or target, node, error.message)
                self._failed_tries.note(node, f"{method} {location or target}: {error.message}")
            raise error

        return self._retry(attempt)

    def _json_get(self, target: str, bucket_type: str | None) -> dict[str, Any]:
        _, response = self._call(
            "GET", target, location=None, ok=(200,), props_of=bucket_type or "default"
        )
        return dict(json.loads(response.body)["props"])

    def _json_put(self, target: str, bucket_type: str | None, props: Mapping[str, Any]) -> None:
        body = json.dumps({"props": dict(props)}).encode()
        self._call(
            "PUT",
            target,
            location=None,
            ok=(200, 204),
            headers={"Content-Type": "application/json"},
            body=body,
            props_of=bucket_type or "default",
        )

    def _pool(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self._concurrency, thread_name_prefix="riak-client"
                )
            return self._executor


def _object(loc: Location, node: str, response: HttpResponse) -> RiakObject:
    """Build a :class:`RiakObject` from a 200 answer carrying the object."""
    headers = response.headers
    media, _, params = headers.get("content-type", "application/octet-stream").partition(";")
    charset = None
    for param in params.split(";"):
        name, _, value = param.strip().partition("=")
        if name.lower() == "charset":
            charset = value.strip('"')
    etag = headers.get("etag")
    return RiakObject(
        location=loc,
        value=response.body,
        content_type=media.strip(),
        charset=charset,
        usermeta={
            name[len(_META_PREFIX) :]: value
            for name, value in headers.items()
            if name.startswith(_META_PREFIX)
        },
        vclock=headers.get("x-riak-vclock"),
        etag=etag.strip('"') if etag else None,
        last_modified=headers.get("last-modified"),
        node=node,
    )
