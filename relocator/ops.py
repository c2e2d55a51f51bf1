"""The operations endpoint: ``/metrics`` (Prometheus), ``/status`` (JSON), ``/healthz``
(liveness) and ``/readyz`` (readiness).

``/healthz`` says whether the process should be restarted: 200 while it runs and its
journal writer works. ``/readyz`` says whether it can do its job now: 200 when a
configured Riak cluster answers ``/ping`` and, with ZooKeeper, its writer id is
registered; otherwise 503 with a JSON body naming each reason. A relocator that is not
ready still accepts and journals events.

A small threaded HTTP server of the standard library: four read-only routes, no
framework needed. Binds to loopback by default (``metrics_listen``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class OpsServer:
    """Serves the registry and a status callback on ``host:port``."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        registry: CollectorRegistry,
        status: Callable[[], dict[str, object]],
        healthy: Callable[[], bool],
        ready: Callable[[], tuple[bool, dict[str, object]]] | None = None,
    ) -> None:
        """Args: ``status()`` is ``/status``'s JSON; ``healthy()`` decides ``/healthz``;
        ``ready()`` returns ``/readyz``'s (ready, JSON details) (None: same as healthz)."""

        def readyz() -> tuple[int, str, bytes]:
            details: dict[str, object] = {}
            if ready is None:
                ok = healthy()
            else:
                ok, details = ready()
            return (200 if ok else 503), "application/json", json.dumps(details).encode()

        routes: dict[str, Callable[[], tuple[int, str, bytes]]] = {
            "/metrics": lambda: (200, CONTENT_TYPE_LATEST, generate_latest(registry)),
            "/status": lambda: (200, "application/json", json.dumps(status()).encode()),
            "/healthz": lambda: (
                (200, "text/plain", b"ok\n") if healthy() else (503, "text/plain", b"unhealthy\n")
            ),
            "/readyz": readyz,
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                route = routes.get(self.path.split("?", 1)[0])
                code, ctype, body = route() if route else (404, "text/plain", b"not found\n")
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="ops-http", daemon=True
        )

    def start(self) -> None:
        """Start serving."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
