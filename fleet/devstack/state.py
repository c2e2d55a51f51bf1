"""The dev stack's state file: ``<data_dir>/dev-stack.json``.

Written by the supervisor (``dev up``) by rename, so a reader never sees half of it;
read by ``dev up --detach`` (to know when the stack is up), ``dev status`` and
``dev down``. It holds the supervisor's pid, a phase (``starting``, ``running``,
``stopping``), each process's pid (every one leads its own process group) and log, and
the endpoints. The supervisor removes it when everything has stopped; a file left
behind by a supervisor that was killed names the process groups ``dev down`` must
still end.

When a stack ends, its last state, with phase ``ended`` and ``ended`` = ``{at, reason,
exit_status}`` (``reason``: "companion exited with status -9", "SIGINT (Ctrl-C)",
"dev down"...), is kept in ``<data_dir>/dev-stack-ended.json`` (:func:`write_ended`),
so ``dev status`` can say why the last stack ended.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "ENDED_FILE",
    "STATE_FILE",
    "read_ended",
    "read_state",
    "remove_state",
    "write_ended",
    "write_state",
]

STATE_FILE = "dev-stack.json"
ENDED_FILE = "dev-stack-ended.json"


def _write(path: Path, value: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=2) + "\n")
    tmp.replace(path)


def _read(path: Path) -> dict[str, Any] | None:
    with contextlib.suppress(OSError, ValueError):
        value = json.loads(path.read_text())
        if isinstance(value, dict):
            return value
    return None


def write_state(data_dir: Path, state: dict[str, Any]) -> None:
    """Replace the state file with ``state`` (JSON), atomically."""
    _write(data_dir / STATE_FILE, state)


def read_state(data_dir: Path) -> dict[str, Any] | None:
    """The state file's content, or None when there is none (or it is not JSON)."""
    return _read(data_dir / STATE_FILE)


def write_ended(data_dir: Path, state: dict[str, Any]) -> None:
    """Keep ``state`` (phase ``ended``, with ``ended``) as the last stack's, atomically."""
    _write(data_dir / ENDED_FILE, state)


def read_ended(data_dir: Path) -> dict[str, Any] | None:
    """The last ended stack's state, or None."""
    return _read(data_dir / ENDED_FILE)


def remove_state(data_dir: Path) -> None:
    """Remove the state file (no error when it is gone)."""
    (data_dir / STATE_FILE).unlink(missing_ok=True)
