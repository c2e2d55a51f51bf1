"""One full log record per failure across the processes of one node, a line elsewhere.

Pre-forked workers (the companion's gunicorn workers) meet the same failure at the same
time: a plugin that does not load, a worker that cannot start. Each would log the same
multi-line traceback. A record marked with :func:`once` is logged in full only by the
first process to claim its key in a shared directory (an ``O_EXCL`` marker file holding
its pid); every other process logs one line instead: the record's ``brief`` text and
which process logged it in full. The mark is given at the call site::

    log.warning("substream plugin not loaded: %s", failure,
                extra=once(f"plugin-load:{failure}", brief=f"plugin {path} not loaded"))

:class:`OncePerDirectory` is a handler filter; only a daemon's CLI installs it (on the
root handlers, before forking, so every worker inherits it). Without it, marked records
are logged in full as usual.

Failure semantics: the directory is emptied by the daemon at start (a new run logs its
failures again). A marker that cannot be made or read (directory gone, disk full) lets
the full record through: a repeated traceback is better than a lost one.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
from pathlib import Path

__all__ = ["OncePerDirectory", "install", "once"]

_KEY = "riak_events_once"
_BRIEF = "riak_events_once_brief"


def once(key: str, brief: str | None = None) -> dict[str, str]:
    """The ``extra`` of a record to log in full once per node.

    Args:
        key: what makes two records the same failure (include the error text, so a
            different failure of the same thing is logged in full again).
        brief: the one line other processes log (default: the message's first line).
    """
    extra = {_KEY: key}
    if brief is not None:
        extra[_BRIEF] = brief
    return extra


class OncePerDirectory(logging.Filter):
    """Lets a marked record through in full in the first process to claim its key in
    ``directory``, as one line in the others. Unmarked records pass unchanged."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory

    def filter(self, record: logging.LogRecord) -> bool:
        key = getattr(record, _KEY, None)
        if key is None:
            return True
        owner = self._claim(str(key))
        if owner is None or owner == os.getpid():
            return True
        brief = getattr(record, _BRIEF, None) or record.getMessage().splitlines()[0]
        by = f"pid {owner}" if owner else "another process"
        record.msg = f"{brief} (logged in full by {by})"
        record.args = None
        record.exc_info = record.exc_text = record.stack_info = None
        return True

    def _claim(self, key: str) -> int | None:
        """0 or the pid that claimed ``key`` (this one, if first); None: unknown."""
        marker = self.directory / hashlib.sha256(key.encode()).hexdigest()[:32]
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                text = marker.read_text()
            except OSError:
                return None
            # Empty: the owner made it and has not written its pid yet.
            return int(text) if text.strip().isdigit() else 0
        except OSError:
            return None
        with contextlib.closing(os.fdopen(fd, "w")) as f:
            f.write(str(os.getpid()))
        return os.getpid()


def install(directory: Path, logger: logging.Logger | None = None) -> OncePerDirectory:
    """Empty ``directory`` (a previous run's markers) and add the filter to every
    handler of ``logger`` (the root logger by default).

    Returns:
        The filter installed.
    """
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    flt = OncePerDirectory(directory)
    for handler in (logger or logging.getLogger()).handlers:
        handler.addFilter(flt)
    return flt
