"""Requests to a running supervisor: ``riak-events dev stop|start|restart PROCESS``.

The supervisor owns every process of the stack (it started them and reaps them), so
another command does not signal a daemon itself: it asks the supervisor, through files
in ``<data_dir>/control/``::

    dev stop companion:  write control/<id>.request.json  {"id", "action", "process"}
                         (by rename: the supervisor never reads half of it)
    supervisor (every 0.5 s of its watch loop): take each request (read, remove it),
                         do it, write control/<id>.reply.json  {"ok", "message"}
    dev stop companion:  wait for the reply, print its message, remove it

Failure semantics: a supervisor that is gone, or does not answer within the timeout
(a start waits for the process's health check), leaves the request unanswered: the
command removes its request (so a later supervisor does not act on it) and says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["ACTIONS", "CONTROL_DIR", "reply", "send", "take_requests"]

CONTROL_DIR = "control"

#: What ``dev`` can ask of one process.
ACTIONS = ("stop", "start", "restart")


def _write(path: Path, value: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value))
    tmp.replace(path)


def send(
    data_dir: Path,
    action: str,
    process: str,
    *,
    timeout_s: float,
    alive: Callable[[], bool] = lambda: True,
) -> dict[str, Any] | None:
    """Ask the supervisor of ``data_dir`` to ``action`` ``process`` and wait.

    Args:
        data_dir: the stack's data directory.
        action: one of :data:`ACTIONS`.
        process: ``"companion"``, ``"relocator"``...
        timeout_s: how long to wait for the reply, seconds.
        alive: whether the supervisor still runs (checked while waiting).

    Returns:
        The reply ``{"ok": bool, "message": str}``, or None when none came (the request
        is withdrawn).
    """
    request_id = uuid.uuid4().hex
    directory = data_dir / CONTROL_DIR
    request = directory / f"{request_id}.request.json"
    answer = directory / f"{request_id}.reply.json"
    _write(request, {"id": request_id, "action": action, "process": process})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (alive() or answer.exists()):
        with contextlib.suppress(OSError, ValueError):
            value = json.loads(answer.read_text())
            answer.unlink(missing_ok=True)
            if isinstance(value, dict):
                return value
        time.sleep(0.2)
    request.unlink(missing_ok=True)
    return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def take_requests(data_dir: Path) -> list[dict[str, Any]]:
    """The requests waiting, oldest first; each is removed as it is taken (malformed
    ones are dropped)."""
    directory = data_dir / CONTROL_DIR
    found = []
    for path in sorted(directory.glob("*.request.json"), key=_mtime):
        with contextlib.suppress(OSError, ValueError):
            value = json.loads(path.read_text())
            if isinstance(value, dict) and {"id", "action", "process"} <= set(value):
                found.append(value)
        path.unlink(missing_ok=True)
    return found


def reply(data_dir: Path, request_id: str, *, ok: bool, message: str) -> None:
    """Answer request ``request_id``."""
    _write(data_dir / CONTROL_DIR / f"{request_id}.reply.json", {"ok": ok, "message": message})
