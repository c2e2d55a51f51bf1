"""The companion app driven in-process over ASGI (peers, key-group validation, health);
its worker starts a fork server, so this is no unit test."""

from __future__ import annotations

import asyncio
import gc
import json
from pathlib import Path
from typing import Any

from companion.app import create_app
from companion.settings import CompanionSettings


async def _asgi(
    app: Any, method: str, path: str, body: bytes = b"", client: str = "127.0.0.1"
) -> tuple[int, bytes]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": (client, 40000),
        "server": ("127.0.0.1", 5001),
        "app": app,
    }
    sent: list[dict[str, Any]] = []
    chunks = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return chunks.pop(0) if chunks else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, payload


def test_the_app_accepts_key_groups_only_from_peers_and_only_well_formed(tmp_path: Path) -> None:
    settings = CompanionSettings(
        state_dir=tmp_path / "state",
        entry_points=False,
        check_plugins_in_child=False,
        peers=("127.0.0.1",),
    )
    app = create_app(settings)
    group = {"epoch": 1, "dc": "dc1", "keys": ["1:dc1:web::0", "1:dc1:web::1"]}

    async def scenario() -> list[tuple[int, Any]]:
        async with app.router.lifespan_context(app):
            out = []
            for method, path, body, client in [
                ("POST", "/v1/keys", group, "127.0.0.1"),
                ("POST", "/v1/keys", group, "10.9.9.9"),
                (
                    "POST",
                    "/v1/keys",
                    {"epoch": 1, "dc": "dc1", "keys": ["2:dc1:web::0"]},
                    "127.0.0.1",
                ),
                ("POST", "/v1/keys", {"epoch": "1", "dc": "dc1", "keys": []}, "127.0.0.1"),
                ("POST", "/v1/keys", {"epoch": 1, "dc": "dc1", "keys": ["nope"]}, "127.0.0.1"),
                ("POST", "/v1/substreams/nothing/enable", {}, "127.0.0.1"),
                ("GET", "/healthz", None, "10.9.9.9"),
                ("GET", "/", None, "10.9.9.9"),
                ("GET", "/", None, "127.0.0.1"),
            ]:
                raw = b"" if body is None else json.dumps(body).encode()
                status, payload = await _asgi(app, method, path, raw, client)
                out.append((status, payload))
            return out

    results = asyncio.run(scenario())
    codes = [status for status, _ in results]
    # /healthz is open to anyone; the status page only to status_peers (loopback).
    assert codes == [202, 403, 400, 400, 400, 404, 200, 403, 200]
    assert json.loads(results[0][1]) == {"accepted": 2, "shed": 0}
    assert b"is not of epoch 1" in results[2][1]
    assert json.loads(results[6][1])["status"] == "ok"
    assert b"no substreams loaded" in results[8][1]


def test_a_worker_freezes_the_heap_it_starts_with(tmp_path: Path) -> None:
    """Once its engine has started, a worker moves what it holds (modules, plugins, the
    engine) out of the cyclic collector's full collections (``gc.freeze``), which
    would otherwise walk it all every few hundred chunks."""
    settings = CompanionSettings(
        state_dir=tmp_path / "state", entry_points=False, check_plugins_in_child=False
    )
    app = create_app(settings)
    gc.unfreeze()  # whatever this process froze before: the worker's own count is seen

    async def scenario() -> tuple[int, int]:
        async with app.router.lifespan_context(app):
            return gc.get_freeze_count(), len(gc.get_objects())

    try:
        frozen, collected = asyncio.run(scenario())
    finally:
        gc.unfreeze()
    # the interpreter's modules and the app's objects, not a few stray ones
    assert frozen > 10_000 and frozen > collected
