"""The auditor's durable progress: one cursor per dc in ``<state_dir>/audit/cursors.json``.

A dc's cursor is ``(next, pending, given_up)``:

- ``next``: every epoch before it was visited (confirmed complete, pending, or given
  up); the forward scan goes on from it, oldest first;
- ``pending``: epochs visited whose missing results were sent to be repaired, not yet
  confirmed complete (checked again at every round, oldest first);
- ``given_up``: how many epochs were given up on this node (older than the horizon, or
  metadata that can never be parsed), for ``/v1/status``.

The oldest epoch not yet confirmed is ``min(pending + [next])``: the cursor. Only the
master's auditor writes the file (one per node: the master holds the state directory's
lock); the workers read it for ``/v1/status`` and ``companion_audit_lag_seconds``.

Written atomically (a temporary file, fsynced, renamed over the old one, the directory
fsynced), so a kill -9 at any point leaves the old file or the new one, never a mix.
A file that cannot be parsed is moved aside (``cursors.json.corrupt``) and logged with
why; the auditor then starts as on a new node (each dc ``audit_lookback_s`` back).
A dc's lag is how far its cursor is behind ``now - audit_lookback_s`` (0: caught up).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["CURSOR_FILE", "CursorFile", "DcCursor", "read_audit_status"]

#: The file under ``<state_dir>``.
CURSOR_FILE = "audit/cursors.json"
_VERSION = 1


@dataclass
class DcCursor:
    """One dc's progress (see the module docstring).

    Attributes:
        next: the first epoch not yet visited by the forward scan (unix seconds).
        pending: visited epochs whose repairs are not yet confirmed, ascending.
        given_up: epochs given up on this node, ever.
    """

    next: int
    pending: list[int] = field(default_factory=list)
    given_up: int = 0

    def oldest(self) -> int:
        """The oldest epoch not yet confirmed complete: the cursor."""
        return min(self.pending[0], self.next) if self.pending else self.next

    def to_json(self) -> dict[str, Any]:
        return {"next": self.next, "pending": list(self.pending), "given_up": self.given_up}

    @classmethod
    def from_json(cls, value: Any) -> DcCursor:
        """Parse one dc's entry.

        Raises:
            ValueError: naming the field that is wrong.
        """
        if not isinstance(value, dict):
            raise ValueError(f"a cursor must be an object, not {type(value).__name__}")
        nxt, pending, given_up = (
            value.get("next"),
            value.get("pending", []),
            value.get("given_up", 0),
        )
        if isinstance(nxt, bool) or not isinstance(nxt, int) or nxt < 0:
            raise ValueError(f"'next' must be an epoch (a non-negative integer), not {nxt!r}")
        if not isinstance(pending, list) or not all(
            isinstance(e, int) and not isinstance(e, bool) and e >= 0 for e in pending
        ):
            raise ValueError(f"'pending' must be a list of epochs, not {pending!r}")
        if isinstance(given_up, bool) or not isinstance(given_up, int) or given_up < 0:
            raise ValueError(f"'given_up' must be a non-negative integer, not {given_up!r}")
        if any(e >= nxt for e in pending):
            raise ValueError(f"'pending' epochs must be older than 'next' ({nxt})")
        return cls(nxt, sorted(set(pending)), given_up)


class CursorFile:
    """The cursors of every dc, in one file.

    Args:
        state_dir: the companion's state directory.
    """

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / CURSOR_FILE
        #: The last :meth:`load` found a file it could not read or parse.
        self.lost = False

    def load(self) -> dict[str, DcCursor]:
        """The stored cursors; ``{}`` when there is no file yet.

        A file that cannot be read or parsed (bad JSON, wrong fields, not UTF-8) is moved
        aside to ``<file>.corrupt`` and logged at ERROR with the reason; the previous
        good file (``<file>.prev``, the cursors before the last save: older, so nothing
        is skipped, a few epochs are visited again) stands in for it. When that one is
        gone or bad too, ``{}`` and :attr:`lost` set: what the cursors had not confirmed
        is gone, and the auditor starts from its horizon."""
        self.lost = False
        prev = self.path.with_name(self.path.name + ".prev")
        if not self.path.exists() and not prev.exists():
            return {}  # a new node
        found = self._read(self.path)
        if found is not None:
            return found
        older = self._read(prev)
        if older is not None:
            log.error("auditor: using the previous cursor file %s", prev)
            return older
        self.lost = True
        log.error("auditor: no readable cursor file in %s, starting from the horizon", prev.parent)
        return {}

    def _read(self, path: Path) -> dict[str, DcCursor] | None:
        """The cursors of ``path``; None when it is absent, unreadable or corrupt (then
        moved aside to ``<name>.corrupt``, with one ERROR naming it and why)."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.error("auditor: cursor file %s unreadable: %s", path, e)
            return None
        try:
            # Not UTF-8 is corrupt like bad JSON (UnicodeDecodeError is a ValueError); it
            # used to escape and end the companion at every start.
            return parse_cursors(data.decode())
        except ValueError as e:
            aside = path.with_name(path.name + ".corrupt")
            with contextlib.suppress(OSError):
                path.replace(aside)
            log.error("auditor: cursor file %s is corrupt (%s); moved to %s", path, e, aside)
            return None

    def save(self, cursors: dict[str, DcCursor]) -> None:
        """Replace the file atomically with ``cursors``.

        Raises:
            OSError: the directory or the file could not be written (the old file stays).
        """
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        body = {
            "version": _VERSION,
            "updated_at": time.time(),
            "dcs": {dc: c.to_json() for dc, c in sorted(cursors.items())},
        }
        tmp = directory / f".{self.path.name}.{os.getpid()}.tmp"
        with tmp.open("w") as f:
            json.dump(body, f)
            f.flush()
            os.fsync(f.fileno())
        # The file saved before becomes the previous one (load falls back to it when
        # this one is damaged); a crash between the two renames leaves only that one.
        with contextlib.suppress(FileNotFoundError):
            self.path.replace(self.path.with_name(self.path.name + ".prev"))
        tmp.replace(self.path)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rename itself survives a crash
        finally:
            os.close(fd)


def parse_cursors(text: str) -> dict[str, DcCursor]:
    """Parse a cursor file's text.

    Raises:
        ValueError: not JSON, another version, or a dc's entry naming what is wrong.
    """
    body = json.loads(text)  # json.JSONDecodeError is a ValueError
    if not isinstance(body, dict) or body.get("version") != _VERSION:
        raise ValueError(f"not a version {_VERSION} cursor file")
    dcs = body.get("dcs")
    if not isinstance(dcs, dict):
        raise ValueError("'dcs' must be an object")
    out = {}
    for dc, value in dcs.items():
        try:
            out[dc] = DcCursor.from_json(value)
        except ValueError as e:
            raise ValueError(f"dc {dc!r}: {e}") from e
    return out


def read_audit_status(state_dir: Path, *, settled: float) -> dict[str, dict[str, Any]]:
    """Each dc's cursor as ``/v1/status`` shows it: ``{dc: {"cursor", "lag_s",
    "pending", "given_up"}}``; ``{}`` without a (readable) file. Never raises.

    Args:
        state_dir: the companion's state directory.
        settled: the newest epoch the cursor may pass now (now - audit_lookback_s);
            ``lag_s`` is how far the cursor is behind it (0 when caught up).
    """
    try:
        cursors = parse_cursors((state_dir / CURSOR_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {
        dc: {
            "cursor": c.oldest(),
            "lag_s": max(0.0, round(settled - c.oldest(), 1)),
            "pending": len(c.pending),
            "given_up": c.given_up,
        }
        for dc, c in cursors.items()
    }
