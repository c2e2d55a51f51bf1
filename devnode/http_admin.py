"""Node-level requests: ``/ping``, ``/stats``, bucket props and bucket-type props.

As in riak_kv: ``GET /ping`` answers ``OK``; ``GET /stats`` a JSON object; props are
``{"props": {...}}`` documents, PUT answers 204, 400 for a malformed body (or one nested
deeper than ``MAX_PROPS_DEPTH``), 415 unless the body is ``application/json``, 413 over
``max_props_bytes``. Props of an unknown bucket type answer what Riak 3.2 answers
(DESIGN.md, "Unknown bucket types"): GET 404 with webmachine's HTML page, PUT 400 with
riak_core's reason as a JSON string.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

import eventstore
from devnode.bodies import parse_json, read_body
from devnode.buckets import DEFAULT_TYPE
from devnode.defaults import MAX_PROPS_DEPTH
from devnode.errors import (
    InvalidRequest,
    PropsNotSet,
    ResourceNotFound,
    UnsupportedMediaType,
)
from devnode.state import Devnode


async def ping(request: Request) -> Response:
    """``GET /ping``: ``OK`` while the node serves requests."""
    return PlainTextResponse("OK")


async def stats(request: Request) -> Response:
    """``GET /stats``: the Riak stat names our components read, plus the devnode's own."""
    devnode: Devnode = request.app.state.devnode
    now = time.time()
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
        # The hook's counters by the Erlang hook's names (erlang_hooks/README.md).
        **{f"devnode_hook_{name}_total": n for name, n in devnode.hook.counts().items()},
        "devnode_hook_queued": devnode.hook.queued(),
        "devnode_breakers": devnode.hook.breakers(),
    }
    return JSONResponse(body)


async def type_props(request: Request) -> Response:
    """``GET|PUT /types/T/props``; an unknown type answers as riak_kv_wm_bucket_type does:
    GET 404 (webmachine's page), PUT 400 ``"undefined"``."""
    devnode: Devnode = request.app.state.devnode
    bucket_type = request.path_params["bucket_type"]
    if request.method == "PUT":
        props = await _props_body(request, "bucket type")
        if bucket_type == DEFAULT_TYPE:
            raise PropsNotSet("no_default_update", "the default bucket type's props are fixed")
        if not devnode.registry.has_type(bucket_type):
            raise PropsNotSet("undefined", f"cannot set props of unknown bucket type {bucket_type}")
        await devnode.set_type_props(bucket_type, props)
        return Response(status_code=204)
    if not devnode.registry.has_type(bucket_type):
        raise ResourceNotFound(f"props of unknown bucket type {bucket_type}")
    return JSONResponse({"props": devnode.registry.type_props(bucket_type)})


async def bucket_props(request: Request) -> Response:
    """``GET|PUT /types/T/buckets/B/props`` and ``/buckets/B/props``; an unknown type
    answers as riak_kv_wm_props does: GET 404 (webmachine's page), PUT 400 ``"no_type"``."""
    devnode: Devnode = request.app.state.devnode
    bucket_type = request.path_params.get("bucket_type", DEFAULT_TYPE)
    bucket = request.path_params["bucket"]
    if request.method == "PUT":
        props = await _props_body(request, "bucket")
        if not devnode.registry.has_type(bucket_type):
            raise PropsNotSet(
                "no_type", f"cannot set props of bucket {bucket} of unknown type {bucket_type}"
            )
        await devnode.set_bucket_props(bucket_type, bucket, props)
        return Response(status_code=204)
    if not devnode.registry.has_type(bucket_type):
        raise ResourceNotFound(f"props of bucket {bucket} of unknown bucket type {bucket_type}")
    return JSONResponse({"props": devnode.registry.bucket_props(bucket_type, bucket)})


async def _props_body(request: Request, what: str) -> dict[str, Any]:
    """The ``props`` of a PUT body, checked in webmachine's order: the body's form (400,
    Riak's ``malformed_request``) before its media type (415, at the accept stage)."""
    settings = request.app.state.devnode.settings
    raw = await read_body(request, settings.max_props_bytes, f"{what} props")
    document = parse_json(raw, max_depth=MAX_PROPS_DEPTH, what=f"{what} props")
    if not isinstance(document, dict) or not isinstance(document.get("props"), dict):
        raise InvalidRequest(
            f"{what} PUT must be a JSON object of the form:\n"
            '{"props":{...bucket properties...}}'
        )
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise UnsupportedMediaType(f"{what} props must be sent as application/json")
    return dict(document["props"])
