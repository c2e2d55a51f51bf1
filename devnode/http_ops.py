"""Operations endpoints, the devnode's own (Riak has none of them): ``/healthz``,
``/readyz`` and ``/metrics``.

- ``GET /healthz`` (liveness): ``ok`` whenever the process answers HTTP at all.
- ``GET /readyz`` (readiness): ``ok`` while the store's writer thread runs and a read
  transaction opens; 503 ``store not ready`` otherwise (a dead writer would leave every
  PUT waiting forever). The devnode depends on nothing else.
- ``GET /metrics``: Prometheus text exposition (``metrics.py``).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from devnode.metrics import exposition
from devnode.state import Devnode


async def healthz(request: Request) -> Response:
    """``GET /healthz``: liveness."""
    return PlainTextResponse("ok\n")


async def readyz(request: Request) -> Response:
    """``GET /readyz``: readiness (the store accepts reads and writes)."""
    devnode: Devnode = request.app.state.devnode
    if devnode.store.healthy():
        return PlainTextResponse("ok\n")
    return PlainTextResponse("store not ready\n", status_code=503)


async def metrics(request: Request) -> Response:
    """``GET /metrics``: the Prometheus exposition."""
    body, content_type = exposition(request.app.state.metrics_registry)
    return Response(body, headers={"Content-Type": content_type})
