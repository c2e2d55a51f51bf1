"""The devnode's ASGI app: one routes list, one middleware list, one exception-handler
table, one lifespan.

The lifespan locks the data directory (unless the caller already holds its lock), opens
the :class:`~devnode.state.Devnode` (store, props, ring, hook workers), runs
the periodic purge of expired objects and old tombstones, and closes everything on
shutdown (queued writes are committed before the store closes, the lock is released
last).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from devnode import http_admin, http_objects, http_ops
from devnode.errors import WEBMACHINE_404_PAGE, DevnodeError, ObjectNotFound
from devnode.metrics import RequestCounts, RequestMetrics, registry_for
from devnode.settings import DevnodeSettings
from devnode.state import Devnode
from eventstore.dirlock import DirectoryLock, lock_directory

log = logging.getLogger(__name__)

_OBJECT_METHODS = ["GET", "HEAD", "PUT", "POST", "DELETE"]


async def _object(request: Request) -> Response:
    if request.method in ("GET", "HEAD"):
        return await http_objects.get_object(request)
    if request.method == "DELETE":
        return await http_objects.delete_object(request)
    return await http_objects.put_object(request)


ROUTES = [
    Route("/ping", http_admin.ping, methods=["GET", "HEAD"]),
    Route("/stats", http_admin.stats, methods=["GET"]),
    Route("/healthz", http_ops.healthz, methods=["GET"]),
    Route("/readyz", http_ops.readyz, methods=["GET"]),
    Route("/metrics", http_ops.metrics, methods=["GET"]),
    Route("/types/{bucket_type}/props", http_admin.type_props, methods=["GET", "PUT"]),
    Route(
        "/types/{bucket_type}/buckets/{bucket}/props",
        http_admin.bucket_props,
        methods=["GET", "PUT"],
    ),
    Route("/buckets/{bucket}/props", http_admin.bucket_props, methods=["GET", "PUT"]),
    Route(
        "/types/{bucket_type}/buckets/{bucket}/keys/{key:path}", _object, methods=_OBJECT_METHODS
    ),
    Route("/buckets/{bucket}/keys/{key:path}", _object, methods=_OBJECT_METHODS),
]


async def _devnode_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DevnodeError)
    # Content-Type given as a header: Starlette would add "; charset=utf-8" to text/*.
    headers = {"Content-Type": exc.content_type}
    if isinstance(exc, ObjectNotFound) and exc.tombstone_vclock is not None:
        headers |= {"X-Riak-Deleted": "true", "X-Riak-Vclock": exc.tombstone_vclock}
    if exc.status >= 500:
        log.error("request %s %s failed: %s", request.method, request.url.path, exc.message)
    return Response(exc.body(), status_code=exc.status, headers=headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        # No route: Riak's dispatcher answers webmachine's page too.
        return Response(WEBMACHINE_404_PAGE, status_code=404, headers={"Content-Type": "text/html"})
    headers = {"Content-Type": "text/plain", **(exc.headers or {})}
    return Response((exc.detail + "\n").encode(), status_code=exc.status_code, headers=headers)


EXCEPTION_HANDLERS = {DevnodeError: _devnode_error, HTTPException: _http_error}


async def _purge_forever(devnode: Devnode) -> None:
    """Reap expired objects and old tombstones every ``purge_interval_s``."""
    settings = devnode.settings
    while True:
        await asyncio.sleep(settings.purge_interval_s)
        while True:
            done = await devnode.wait(
                devnode.store.purge_due(int(time.time() * 1000), settings.purge_batch)
            )
            devnode.purged += done
            if done:
                log.info("purge: reaped %d expired objects or tombstones", done)
            if done < settings.purge_batch:
                break


def create_app(settings: DevnodeSettings, *, lock: DirectoryLock | None = None) -> Starlette:
    """The devnode app for ``settings``; its lifespan owns the store and the hook.

    Args:
        settings: the validated settings.
        lock: the data directory's lock, when the caller took it (``cli.py`` does, to
            refuse a second process before the server starts); else the lifespan takes
            it before opening the store and releases it after closing the store.

    Raises:
        DirectoryLocked: (at startup) another process holds the data directory.
    """
    requests = RequestCounts()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        own_lock = lock_directory(settings.data_dir) if lock is None else None
        try:
            devnode = Devnode(settings)
        except BaseException:
            if own_lock is not None:
                own_lock.release()
            raise
        app.state.devnode = devnode
        app.state.metrics_registry = registry_for(devnode, requests)
        purge = asyncio.create_task(_purge_forever(devnode), name="devnode-purge")
        log.info(
            "devnode: serving %s with %d bucket types, ring of %d nodes x %d partitions",
            settings.data_dir,
            len(settings.bucket_types),
            len(settings.nodes),
            settings.ring_size,
        )
        try:
            yield
        finally:
            purge.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await purge
            devnode.close()
            if own_lock is not None:
                own_lock.release()
            log.info("devnode: closed %s", settings.data_dir)

    app = Starlette(
        routes=ROUTES,
        middleware=[Middleware(RequestMetrics, counts=requests)],
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )
    # Riak's dispatcher never redirects: ".../keys" is a 404, not a 307 to ".../keys/".
    app.router.redirect_slashes = False
    return app
