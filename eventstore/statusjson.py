"""GET a daemon's JSON status endpoint, with the failure in words instead of raised.

Every daemon serves its state as JSON (the companion ``/v1/status``, the relocator
``/status``, the devnode ``/stats``); the tools that ask several of them at once (``status``,
``substream status``) must go on when one is down, so this answers ``(value, None)`` or
``(None, "why")`` and never raises for the network or the answer.
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["get_json"]


def get_json(url: str, *, timeout_s: float) -> tuple[Any, str | None]:
    """GET ``url``; returns (decoded JSON or None, error in words or None)."""
    try:
        answer = httpx.get(url, timeout=timeout_s)
    except httpx.HTTPError as e:
        return None, f"unreachable ({type(e).__name__})"
    if answer.status_code != 200:
        return None, f"HTTP {answer.status_code} from {url}"
    try:
        return answer.json(), None
    except ValueError:
        return None, f"{url} did not answer JSON"
