"""Errors of ``riak-events dev``: one root, leaves named for what happened.

Every error the dev stack raises on purpose is a :class:`DevStackError` (a
``eventstore.errors.RiakEventsError``); ``fleet.devstack.cli`` turns each into one line and a
non-zero exit status. ``retriable`` (the root's class attribute) says whether running
the same command again later may help.
"""

from __future__ import annotations

from pathlib import Path

from fleet.errors import FleetError

__all__ = ["DevStackError", "PortsInUse", "StackRunning", "StartFailed"]


class DevStackError(FleetError):
    """Root of the errors of ``riak-events dev``."""


class StartFailed(DevStackError):
    """A process of the stack did not start.

    Args:
        name: which one (``"companion"``...).
        reason: the first line of why (exit code, or not healthy in time).
        log: its log file.
    """

    def __init__(self, name: str, reason: str, log: Path | None) -> None:
        self.name = name
        self.reason = reason
        self.log = log
        where = f" (log: {log})" if log is not None else ""
        super().__init__(f"{name} did not start: {reason}{where}")


class StackRunning(DevStackError):
    """A stack already runs from this data directory."""


class PortsInUse(DevStackError):
    """Ports the stack needs are taken."""
