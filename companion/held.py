"""Chunks a worker took from the node's inbox beyond the one each thread runs: put back
into the inbox by the master if the worker dies before they are done.

A chunk thread may take several chunks at once and run them in one child
(``defaults.BATCH_CHUNKS``, ``substreams/batch.py``). The promise of failure scenario 4
stays: a worker that dies loses at most the one chunk each thread was running; the
others of its batch are written to ``<state_dir>/held/<pid>-<thread>.json`` before the
run and removed once their results are stored, and the master's ``child_exit`` puts
whatever a dead worker still held back into the inbox (each with its own arrival and
deadline: one that waited too long is shed as if it had stayed queued). A chunk put
back after its results were partly stored is processed again; results overwrite
themselves (scenario 5).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from companion.inbox import Inbox, InboxItem
from eventstore.names import ChunkKey

log = logging.getLogger(__name__)

__all__ = ["hold", "release", "requeue"]


def hold(directory: Path, items: Sequence[InboxItem]) -> Path | None:
    """Note ``items`` as held by this process's calling thread; returns the note (None:
    nothing to note, or it could not be written: logged, the batch runs anyway)."""
    if not items:
        return None
    path = directory / f"{os.getpid()}-{threading.get_ident()}.json"
    records = [[i.key.format(), i.arrived, i.deadline, i.audit] for i in items]
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(records))
        tmp.replace(path)
    except OSError as e:
        log.warning("companion: could not note %d held chunks in %s: %s", len(items), path, e)
        return None
    return path


def release(path: Path | None) -> None:
    """The held chunks are done (their results stored, or marked)."""
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def requeue(directory: Path, pid: int, inbox: Inbox) -> int:
    """Put the chunks a dead worker ``pid`` still held back into ``inbox``; returns how
    many (one that does not fit is left to the auditor, logged)."""
    count = 0
    for path in directory.glob(f"{pid}-*.json"):
        try:
            records = json.loads(path.read_text())
            path.unlink()
        except (OSError, ValueError) as e:
            log.warning("companion: held chunks of worker %d unreadable in %s: %s", pid, path, e)
            continue
        for key, arrived, deadline, audit in records:
            item = InboxItem(ChunkKey.parse(key), float(arrived), float(deadline), bool(audit))
            if inbox.put(item):
                count += 1
            else:
                log.warning("companion: key=%s held by dead worker %d: inbox full", key, pid)
    if count:
        log.warning("companion: %d chunks held by dead worker %d put back in the inbox", count, pid)
    return count
