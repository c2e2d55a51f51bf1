"""The companion's HTTP app: Starlette, declared as data (routes, middleware, handlers,
lifespan), one instance per gunicorn worker process.

Routes:

- ``POST /v1/keys``: a key group from the hook, ``{"epoch": E, "dc": D, "keys": [...]}``;
  only from configured peers; answered ``202 {"accepted": n, "shed": m}`` at once (the
  work happens on the engine's threads).
- ``POST /v1/audit``: same body; the keys lacking a result are admitted (the auditor).
- ``POST /v1/substreams/{name}/enable``: an operator re-enables a disabled substream.
- ``POST /v1/substreams/{name}/disable``: an operator disables a loaded substream on this
  node (its chunks get ``error: disabled: ...`` results, as after repeated failures).
- ``POST /v1/substreams/{name}/refill``: ``{"epoch", "dc", "keys", "dry_run"}``: the
  substream's missing, ``shed`` and ``disabled`` results among this node's keys run
  again (``refill.py``); 409 while it is disabled here.
- ``GET /healthz``: liveness: 200 while the engine runs, 503 otherwise.
- ``GET /readyz``: readiness: 200 when, besides, the local Riak node answers and (when
  configured) the node's ZooKeeper session is connected; 503 naming what is not.
- ``GET /metrics``: Prometheus exposition of every worker; only to ``metrics_peers``.
- ``GET /v1/status``: the node's merged statistics as JSON; only to ``status_peers``.
- ``GET /``: the status page (HTML); only to ``status_peers``. Both show registry
  plugins the node rejected, with why; ``hide_addresses`` leaves out the Riak and
  ZooKeeper addresses.

Failure semantics: domain code raises :mod:`companion.errors`; the one exception-handler
table below turns each into a JSON answer with its status code. Nothing a plugin does
reaches a request handler: plugins run on the engine's threads, in sandboxed children.
Bodies are read chunk by chunk and refused (413) as soon as they pass the size limit;
JSON nested too deeply for the parser is a 400, like any other malformed body.
"""

from __future__ import annotations

import contextlib

# Imported here, before gunicorn forks its workers, so that no worker ever imports it
# later: socket.getaddrinfo() looks the idna codec up on the first request to a host
# name, and a failed lookup is cached by the codec registry for the life of the
# process (seen in the chaos campaign: a worker whose first lookup failed could reach
# no Riak node for minutes). A module already imported cannot fail that way.
import encodings.idna  # noqa: F401
import json
import logging
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from companion import defaults, heap, metrics
from companion.audit_check import audit_keys
from companion.audit_cursor import read_audit_status
from companion.errors import (
    BadKeyGroup,
    BodyTooLarge,
    CompanionError,
    PeerNotAllowed,
    SubstreamDisabled,
    UnknownSubstream,
)
from companion.inbox import Inbox
from companion.ownership import Ownership
from companion.refill import refill_keys
from companion.settings import CompanionSettings, as_mapping
from companion.signals import EngineSignals
from companion.stats import (
    WorkerStats,
    merge,
    read_cluster_view,
    read_snapshots,
    version_conflicts,
    write_snapshot,
)
from companion.statuspage import render_status
from companion.worker import Engine
from companion.zkstate import read_zookeeper_state
from eventstore.errors import InvalidName
from eventstore.keygroup import InvalidKeyGroup, KeyGroup
from eventstore.names import ChunkKey
from substreams.loader import PluginSet
from substreams.mirror import read_status

log = logging.getLogger(__name__)

__all__ = ["create_app"]


#: Read-only paths served only to some peers: path -> the setting naming them. The
#: others (/healthz, /readyz) are open: probes come from wherever the orchestrator is.
_READ_ONLY_PEERS = {"/": "status_peers", "/v1/status": "status_peers", "/metrics": "metrics_peers"}


class PeerAllowlist:
    """Refuse, with 403 before any parsing, POSTs from addresses not in
    ``settings.peers`` and GETs of the status page, ``/v1/status`` and ``/metrics``
    from addresses not in ``settings.status_peers`` / ``metrics_peers``."""

    def __init__(self, app: ASGIApp, settings: CompanionSettings) -> None:
        self.app = app
        self.settings = settings

    def _allowed_peers(self, method: str, path: str) -> tuple[str, ...] | None:
        """The peers allowed for this request, or None when it is open to all."""
        if method == "POST":
            return self.settings.peers
        setting = _READ_ONLY_PEERS.get(path)
        return None if setting is None else tuple(getattr(self.settings, setting))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            allowed = self._allowed_peers(scope["method"], scope["path"])
            client = scope.get("client")
            peer = client[0] if client else None
            if allowed is not None and not self.settings.allows(peer, allowed):
                log.warning("companion: refused %s %s from %s", scope["method"], scope["path"],
                            peer)  # fmt: skip
                response = JSONResponse(
                    {"error": "PeerNotAllowed", "message": f"{peer} is not a configured peer"},
                    status_code=PeerNotAllowed.status_code,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _read_body(request: Request, limit: int = defaults.MAX_BODY_BYTES) -> bytes:
    """The request body, read as it arrives; 413 as soon as it passes ``limit`` bytes.

    Raises:
        BodyTooLarge: the declared ``Content-Length`` or the bytes received so far are
            over ``limit`` (nothing more is read).
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"body of {declared} bytes is over the limit of {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge(f"body is over the limit of {limit} bytes")
    return bytes(body)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError as e:
        raise BadKeyGroup(f"body is not JSON: {e}") from e
    except RecursionError as e:  # the parser's own depth guard: not a server fault
        raise BadKeyGroup("body is not a key group: JSON nested too deeply") from e
    if not isinstance(data, dict):
        raise BadKeyGroup("body must be a JSON object")
    return data


def _parse_key_group(body: bytes) -> tuple[int, str, list[ChunkKey]]:
    return _key_group(_json_object(body))


def _key_group(data: dict[str, Any]) -> tuple[int, str, list[ChunkKey]]:
    try:
        return KeyGroup.parse(data, max_keys=defaults.MAX_KEYS)
    except InvalidKeyGroup as e:
        raise BadKeyGroup(str(e)) from e


async def post_keys(request: Request) -> Response:
    epoch, dc, keys = _parse_key_group(await _read_body(request))
    engine: Engine = request.app.state.engine
    accepted, shed = engine.submit(epoch, dc, keys)
    return JSONResponse({"accepted": accepted, "shed": shed}, status_code=202)


async def post_audit(request: Request) -> Response:
    epoch, dc, keys = _parse_key_group(await _read_body(request))
    engine: Engine = request.app.state.engine
    answer = await run_in_threadpool(audit_keys, engine, epoch, dc, keys)
    return JSONResponse(answer.to_json())


async def enable_substream(request: Request) -> Response:
    name = request.path_params["name"]
    engine: Engine = request.app.state.engine
    try:
        removed = engine.disabled.enable(name)
    except InvalidName as e:
        raise UnknownSubstream(str(e)) from e
    if not removed and name not in engine.plugins.substreams:
        raise UnknownSubstream(f"no substream {name!r} on this node")
    log.info("companion: substream=%s re-enabled by an operator", name)
    return JSONResponse({"substream": name, "enabled": True})


async def disable_substream(request: Request) -> Response:
    name = request.path_params["name"]
    engine: Engine = request.app.state.engine
    sub = engine.plugins.substreams.get(name)
    if sub is None:
        raise UnknownSubstream(f"no substream {name!r} loaded on this node")
    changed = engine.disabled.disable(name, sub.version, "disabled by an operator")
    if changed:
        log.warning("companion: substream=%s version=%s disabled by an operator", name, sub.version)
    return JSONResponse({"substream": name, "version": sub.version, "enabled": False})


async def refill_substream(request: Request) -> Response:
    name = request.path_params["name"]
    data = _json_object(await _read_body(request))
    epoch, dc, keys = _key_group(data)
    dry_run = data.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise BadKeyGroup("dry_run must be true or false")
    engine: Engine = request.app.state.engine
    sub = engine.plugins.substreams.get(name)
    if sub is None:
        raise UnknownSubstream(f"no substream {name!r} loaded on this node")
    if engine.disabled.is_disabled(sub.name, sub.version, fresh=True):
        raise SubstreamDisabled(
            f"substream {name} is disabled on this node: enable it first "
            f"(riak-events substream enable {name})"
        )
    owned = request.app.state.ownership.owned
    answer = await run_in_threadpool(
        refill_keys, engine, sub, owned, epoch, dc, keys, dry_run=dry_run
    )
    return JSONResponse(answer.to_json())


async def healthz(request: Request) -> Response:
    engine: Engine = request.app.state.engine
    alive = engine.alive()
    body = {
        "status": "ok" if alive else "engine stopped",
        "queue_depth": engine.queue_depth(),
        "substreams": sorted(engine.plugins.substreams),
        "load_failures": len(engine.plugins.report.failures),
    }
    return JSONResponse(body, status_code=200 if alive else 503)


async def readyz(request: Request) -> Response:
    state = request.app.state
    settings: CompanionSettings = state.settings
    engine: Engine = state.engine
    riak_node = settings.riak.nodes[0].rstrip("/") if settings.riak.nodes else None
    riak_ok = riak_node is not None and await run_in_threadpool(engine.riak.ping, riak_node)
    zk = read_zookeeper_state(settings)
    zk_ok = zk is None or bool(zk.get("connected"))
    problems = [
        what
        for what, ok in (
            ("engine stopped", engine.alive()),
            (
                f"riak node {'(hidden)' if settings.hide_addresses else riak_node} unreachable",
                riak_ok,
            ),
            ("zookeeper not connected", zk_ok),
        )
        if not ok
    ]
    body = {
        "status": "ready" if not problems else "; ".join(problems),
        "riak": riak_ok,
        "zookeeper": None if zk is None else zk_ok,
    }
    return JSONResponse(body, status_code=503 if problems else 200)


def _audit_status(settings: CompanionSettings) -> dict[str, dict[str, Any]]:
    """The auditor's cursors (dc -> cursor, lag_s, pending, given_up)."""
    return read_audit_status(settings.state_dir, settled=time.time() - settings.audit_lookback_s)


async def metrics_endpoint(request: Request) -> Response:
    engine: Engine = request.app.state.engine
    metrics.set_queue_depth(engine.queue_depth())
    zk = read_zookeeper_state(request.app.state.settings)
    if zk is not None:
        metrics.set_zookeeper_connected(bool(zk.get("connected")))
    audit = _audit_status(request.app.state.settings)
    metrics.set_audit_lag({dc: cursor["lag_s"] for dc, cursor in audit.items()})
    body = metrics.render(request.app.state.metrics_dir)
    return Response(body, media_type=metrics.CONTENT_TYPE_LATEST)


def _node_view(request: Request) -> dict[str, Any]:
    state = request.app.state
    settings: CompanionSettings = state.settings
    state.publish_stats()
    view = merge(read_snapshots(settings.state_dir / "status"))
    stale_s = max(60.0, 5 * settings.zk_health_interval_s)
    view["cluster"] = read_cluster_view(settings.state_dir, stale_s=stale_s)
    view["version_conflicts"] = version_conflicts(
        view["loaded"], settings.node or settings.listen, view["cluster"]
    )
    view["zookeeper"] = read_zookeeper_state(settings) or {"configured": False}
    # What the registry mirror installed and rejected (unsigned, untrusted key, bad
    # signature, does not load in the sandbox), with why.
    view["registry"] = read_status(settings.registry_dir)
    # The plugin files and entry points that did not load, with why (`riak-events status`).
    view["load_failed"] = [
        {"origin": f.origin, "reason": f.reason} for f in state.engine.plugins.report.failures
    ]
    # Substreams disabled on this node (name -> version, reason, at): `substream status`.
    view["disabled"] = state.engine.disabled.all()
    # The auditor's cursor per dc (the oldest epoch not yet confirmed complete, its lag).
    view["audit"] = _audit_status(settings)
    if settings.hide_addresses:
        view["zookeeper"].pop("hosts", None)
    return view


async def status_json(request: Request) -> Response:
    return JSONResponse(_node_view(request))


async def status_page(request: Request) -> Response:
    state = request.app.state
    engine: Engine = state.engine
    loaded = {
        s.name: {
            "version": s.version,
            "types": list(s.types),
            "subtypes": list(s.subtypes),
            "origin": s.origin,
        }
        for s in engine.plugins.substreams.values()
    }
    failures = [(f.origin, f.reason) for f in engine.plugins.report.failures]
    view = _node_view(request)
    failures += [
        (f"registry {file}", f"rejected (version {info.get('version')}): {info.get('reason')}")
        for file, info in sorted(view["registry"].get("rejected", {}).items())
    ]
    page = render_status(
        node=state.settings.node or state.settings.listen,
        merged=view,
        loaded=loaded,
        load_failures=failures,
        disabled=engine.disabled.all(),
        settings=as_mapping(state.settings),
    )
    return HTMLResponse(page)


async def companion_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CompanionError)
    return JSONResponse(
        {"error": type(exc).__name__, "message": str(exc)}, status_code=exc.status_code
    )


def _connect_stats(signals: EngineSignals, stats: WorkerStats) -> None:
    def run_finished(*, substream: str, key: ChunkKey, kind: str, wall_s: float,
                     error: str | None, **_: Any) -> None:  # fmt: skip
        stats.record_run(substream, kind, wall_s, key=key.format(), error=error)

    def chunk_shed(*, key: ChunkKey, substreams: list[str], reason: str, **_: Any) -> None:
        stats.count("chunks_shed")
        for name in substreams:
            stats.record_run(name, "shed", 0.0, key=key.format(), error=f"shed: {reason}")

    def key_group(*, accepted: int, **_: Any) -> None:
        stats.count("key_groups")
        stats.count("chunks_accepted", accepted)

    signals.run_finished.connect(run_finished)
    signals.chunk_shed.connect(chunk_shed)
    signals.key_group.connect(key_group)
    signals.chunk_unreadable.connect(lambda **_: stats.count("chunks_unreadable"))

    def chunk_processed(
        *, stages: dict[str, float], stages_cpu: dict[str, float], **_: Any
    ) -> None:
        stats.count("chunks_processed")
        stats.add_stages(stages, stages_cpu)

    signals.chunk_processed.connect(chunk_processed)
    signals.result_stored.connect(lambda **_: stats.count("results_stored"))
    signals.result_not_stored.connect(lambda **_: stats.count("results_not_stored"))
    signals.chunk_failed.connect(lambda **_: stats.count("chunks_failed"))


def create_app(
    settings: CompanionSettings, *, metrics_dir: Path | None = None, inbox: Inbox | None = None
) -> Starlette:
    """Build the app. Resources (Riak client, engine, threads) open in the lifespan, so
    each gunicorn worker builds its own after the fork.

    Args:
        settings: the companion's settings.
        metrics_dir: prometheus-client's multiprocess directory, when under gunicorn.
        inbox: the node's queue shared by the workers (made in the master before the
            fork); default: the engine's own.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        riak = settings.riak.client()
        plugins = PluginSet(
            settings.all_plugin_dirs,
            use_entry_points=settings.entry_points,
            check_in_child=settings.check_plugins_in_child,
        )
        signals = EngineSignals()
        stats = WorkerStats()
        metrics.connect(signals)
        _connect_stats(signals, stats)
        heap.tune_malloc()  # before the chunk threads allocate (heap.py)
        engine = Engine(settings, riak, plugins, signals=signals, inbox=inbox).start()
        heap.freeze_startup()
        status_dir = settings.state_dir / "status"
        stop = threading.Event()

        written = [-1, 0.0]  # changes count and time of the last snapshot written

        def publish_stats() -> None:
            stats.queue_depth = engine.queue_depth()
            stats.set_loaded(
                {n: s.version for n, s in plugins.substreams.items()}, len(plugins.report.failures)
            )
            with contextlib.suppress(OSError):
                write_snapshot(status_dir, stats.snapshot())
            written[:] = [stats.changes, time.monotonic()]

        def publisher() -> None:
            while not stop.wait(settings.status_interval_s):
                stats.set_loaded(
                    {n: s.version for n, s in plugins.substreams.items()},
                    len(plugins.report.failures),
                )
                # Unchanged snapshots are rewritten only every few seconds, to stay fresh
                # (read_snapshots ignores stale files of workers that are gone).
                if stats.changes != written[0] or time.monotonic() - written[1] > 5.0:
                    publish_stats()

        thread = threading.Thread(target=publisher, name="companion-status", daemon=True)
        thread.start()
        app.state.settings = settings
        app.state.engine = engine
        app.state.ownership = Ownership(settings)
        app.state.metrics_dir = metrics_dir
        app.state.publish_stats = publish_stats
        log.info(
            "companion worker ready: node=%s substreams=%s",
            settings.node,
            ",".join(sorted(plugins.substreams)),
        )
        try:
            yield
        finally:
            stop.set()
            engine.stop()
            thread.join(2.0)
            with contextlib.suppress(OSError):
                (status_dir / f"{stats.snapshot()['pid']}.json").unlink()
            riak.close()

    return Starlette(
        routes=[
            Route("/v1/keys", post_keys, methods=["POST"]),
            Route("/v1/audit", post_audit, methods=["POST"]),
            Route("/v1/substreams/{name}/enable", enable_substream, methods=["POST"]),
            Route("/v1/substreams/{name}/disable", disable_substream, methods=["POST"]),
            Route("/v1/substreams/{name}/refill", refill_substream, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/v1/status", status_json, methods=["GET"]),
            Route("/", status_page, methods=["GET"]),
        ],
        middleware=[Middleware(PeerAllowlist, settings=settings)],
        exception_handlers={CompanionError: companion_error},
        lifespan=lifespan,
    )
