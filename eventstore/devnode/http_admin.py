"""Node-level requests: ``/ping``, ``/stats``, bucket props and bucket-type props.

As in riak_kv: ``GET /ping`` answers ``OK``; ``GET /stats`` a JSON object; props are
``{"props": {...}}`` documents, PUT answers 204, 400 for a malformed body, 415 unless
the body is ``application/json``, 404 for an unknown bucket type.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

import eventstore
from eventstore.devnode.errors import BadRequest, UnsupportedMediaType
from eventstore.devnode.state import Devnode


async def ping(request: Request) -> Response:
    """``GET /ping``: ``OK`` while the node serves requests."""
    return PlainTextResponse("OK")


async def stats(request: Request) -> Response:
    """``GET /stats``: the Riak stat names our components read, plus the devnode's own."""
    devnode: Devnode = request.app.state.devnode
    now = time.time()
    hook = devnode.hook.counters
    ownership = Counter(devnode.ring.owners)
    body: dict[str, Any] = {
        "nodename": devnode.settings.nodename,
        "ring_members": list(devnode.ring.nodes),
        "connected_nodes": [],
        "ring_num_partitions": devnode.ring.ring_size,
        "ring_creation_size": devnode.ring.ring_size,
        "ring_ownership": "["
        + ",".join(f"{{'{n}',{c}}}" for n, c in sorted(ownership.items()))
        + "]",
        "node_gets": devnode.gets.last_minute(now),
        "node_gets_total": devnode.gets.total,
        "node_puts": devnode.puts.last_minute(now),
        "node_puts_total": devnode.puts.total,
        "vnode_gets": devnode.gets.last_minute(now),
        "vnode_gets_total": devnode.gets.total,
        "vnode_puts": devnode.puts.last_minute(now),
        "vnode_puts_total": devnode.puts.total,
        "riak_kv_version": f"devnode-{eventstore.__version__}",
        "storage_backend": "lmdb",
        "devnode": True,
        "devnode_uptime_s": round(now - devnode.started_s, 3),
        "devnode_objects": devnode.store.entries(),
        "devnode_deletes_total": devnode.deletes.total,
        "devnode_expired_reads_total": devnode.expired_reads,
        "devnode_purged_total": devnode.purged,
        "devnode_store_commits_total": devnode.store.commits,
        "devnode_store_committed_writes_total": devnode.store.committed_ops,
        "devnode_hook_enqueued_total": hook.enqueued,
        "devnode_hook_queued": devnode.hook.queued(),
        "devnode_hook_sent_total": hook.sent,
        "devnode_hook_failed_total": hook.failed,
        "devnode_hook_dropped_total": hook.dropped,
        "devnode_hook_invalid_total": hook.invalid,
        "devnode_hook_no_companion_total": hook.no_companion,
        "devnode_hook_unroutable_keys_total": hook.unroutable_keys,
    }
    return JSONResponse(body)


async def type_props(request: Request) -> Response:
    """``GET|PUT /types/T/props``."""
    devnode: Devnode = request.app.state.devnode
    bucket_type = request.path_params["bucket_type"]
    if request.method == "PUT":
        await devnode.set_type_props(bucket_type, await _props_body(request, "bucket type"))
        return Response(status_code=204)
    return JSONResponse({"props": devnode.registry.type_props(bucket_type)})


async def bucket_props(request: Request) -> Response:
    """``GET|PUT /types/T/buckets/B/props`` and ``/buckets/B/props``."""
    devnode: Devnode = request.app.state.devnode
    bucket_type = request.path_params.get("bucket_type", "default")
    bucket = request.path_params["bucket"]
    if request.method == "PUT":
        devnode.registry.type_props(bucket_type)
        await devnode.set_bucket_props(bucket_type, bucket, await _props_body(request, "bucket"))
        return Response(status_code=204)
    return JSONResponse({"props": devnode.registry.bucket_props(bucket_type, bucket)})


async def _props_body(request: Request, what: str) -> dict[str, Any]:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise UnsupportedMediaType(f"{what} props must be sent as application/json")
    try:
        document = json.loads(await request.body())
    except ValueError:
        document = None
    if not isinstance(document, dict) or not isinstance(document.get("props"), dict):
        raise BadRequest(
            f"{what} PUT must be a JSON object of the form:\n"
            '{"props":{...bucket properties...}}'
        )
    return dict(document["props"])
