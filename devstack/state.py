"""The dev stack's state file: ``<data_dir>/dev-stack.json``.

Written by the supervisor (``dev up``) by rename, so a reader never sees half of it;
read by ``dev up --detach`` (to know when the stack is up), ``dev status`` and
``dev down``. It holds the supervisor's pid, a phase (``starting``, ``running``,
``stopping``), each process's pid (every one leads its own process group) and log, and
the endpoints. The supervisor removes it when everything has stopped; a file left
behind by a supervisor that was killed names the process groups ``dev down`` must
still end.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["STATE_FILE", "read_state", "remove_state", "write_state"]

STATE_FILE = "dev-stack.json"


def write_state(data_dir: Path, state: dict[str, Any]) -> None:
    """Replace the state file with ``state`` (JSON), atomically."""
    path = data_dir / STATE_FILE
    tmp = data_dir / f".{STATE_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)


def read_state(data_dir: Path) -> dict[str, Any] | None:
    """The state file's content, or None when there is none (or it is not JSON)."""
    with contextlib.suppress(OSError, ValueError):
        value = json.loads((data_dir / STATE_FILE).read_text())
        if isinstance(value, dict):
            return value
    return None


def remove_state(data_dir: Path) -> None:
    """Remove the state file (no error when it is gone)."""
    (data_dir / STATE_FILE).unlink(missing_ok=True)
