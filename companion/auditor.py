"""The auditor: find this node's chunks that lack results, and have the missing ones
written (a hook may fire twice or not at all; a worker may die with a chunk in hand; a
result write may fail while the store is down). On by default; one per node, in the
gunicorn master (which holds the state directory's lock).

Two parts, every ``audit_interval_s``:

- the **window**: the epochs between ``audit_lookback_s`` and ``AUDIT_MIN_AGE_S`` old
  (younger ones are still the hook's), visited at every round, newest first, as far as
  the round's budget goes: fresh failures are repaired within a round or two, and
  metadata written late (a relocator recovering) is still seen;
- the **cursor** (``audit_cursor.py``, persisted per dc): every epoch once it is older
  than the window (settled: no more metadata expected), oldest first, and it moves
  past an epoch only when a visit confirmed it complete. So no epoch is skipped,
  whatever the load, the outages or the restarts; the window only makes repairs fast.

One round::

    now; settled = now - audit_lookback_s; newest = now - AUDIT_MIN_AGE_S
    dcs = audit_dcs + dcs of key groups received within audit_horizon_s (SeenDcs)
          + dcs whose cursor still has pending epochs
    a dc without a cursor starts at `settled` (a new node audits the window back)
    give up (counted companion_audit_given_up_total{dc}, logged) every epoch older
        than now - audit_horizon_s: pending ones, and those the cursor never reached
    budget = audit_max_keys, or audit_min_keys (if less) while the inbox holds >=
             queue_max chunks (the hook's work goes first; the audit still progresses)
    1. cursor, oldest first across dcs, with 3/4 of the budget: each dc's pending
       epochs (each once a round), then its epochs from `next` up to `settled`
    2. window, newest first, from `newest` down to `settled`, with what is left;
       these visits never move the cursor
    a visit of (epoch, dc):
        metadata GET  404 -> nothing there: confirmed
                      store error -> the round ends; the cursor stays (next round)
                      unparseable -> given up (counted, logged at ERROR)
        mine = keys whose first preflist node is this node (all without a ring)
        none of mine -> confirmed
        budget spent (and something sent this round) -> the round ends here
        POST {"epoch", "dc", "keys": mine} to /v1/audit (audit_check.py) ->
            {"missing", "unreadable", "accepted", "shed"}
            no answer, or unreadable > 0 -> the round ends; the cursor stays
            missing == 0 -> confirmed (removed from pending / next moves past it)
            missing > 0 -> repairs admitted; the epoch is pending until a later
                           visit finds nothing missing (not posted again before
                           max_wait_s + timeout_cap_s + 5 s: admitted once, done or
                           shed by then)
    the round also ends after audit_round_max_s (between two visits, after one)
    the cursors are saved (atomic rename) at the end of the round, and at most
    every second during it

Committed when: a cursor moves past an epoch only after a visit confirmed it (or gave it
up, counted); it is saved after that, so a kill -9 can only make the next process visit
an epoch again, never skip one. Idempotent: a stored result is never overwritten, only
missing ones are written; visiting an epoch twice costs reads only.
Bounded: keys per round (``audit_max_keys``; ``audit_min_keys`` while busy), time per
round (``audit_round_max_s``), pending epochs per dc (``MAX_PENDING``), state (one
small file). Failure semantics: every error is logged and ends the round; it never
blocks the master's main loop (own thread).
Not covered: metadata first written for an epoch already older than the window after
the cursor passed it (the hook still delivers it, at most once).
"""

from __future__ import annotations

import contextlib
import enum
import http.client
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from companion import metrics
from companion.audit_check import AuditAnswer
from companion.audit_cursor import CursorFile, DcCursor
from companion.errors import CompanionError
from companion.ownership import Ownership
from companion.settings import CompanionSettings
from eventstore.errors import EventStoreError
from eventstore.keygroup import KeyGroup
from eventstore.names import ChunkKey, MetadataKey, parse_metadata
from eventstore.riak import NotFound, RiakClient, RiakError
from eventstore.riak.defaults import CONFIRMED_ABSENCE

log = logging.getLogger(__name__)

__all__ = ["AUDIT_MIN_AGE_S", "MAX_PENDING", "Auditor", "SeenDcs", "http_post"]

#: Epochs younger than this are left to the hook, seconds.
AUDIT_MIN_AGE_S = 10
#: Most dcs learned from key groups that are audited (the most recently seen).
MAX_SEEN_DCS = 64
#: Most pending epochs per dc; at the limit the forward scan of that dc waits.
MAX_PENDING = 512
#: A worker touches a dc's file at most this often, seconds.
_NOTE_EVERY_S = 30.0
#: The cursors are saved at most this often during a round, seconds.
_SAVE_EVERY_S = 1.0
#: Beyond max_wait_s + timeout_cap_s, how long admitted repairs may take to be stored
#: (a chunk's fetch, decode and result writes with their retries), seconds.
_REPAIR_MARGIN_S = 5.0


class SeenDcs:
    """The dcs this node received key groups for, shared by the workers and the master
    through files: ``<directory>/<dc>``, touched when a key group of that dc arrives.

    dc names are tokens (``[A-Za-z0-9_]+``, checked by ``ChunkKey.parse`` before they
    get here), so each is a safe file name.

    Args:
        directory: usually ``<state_dir>/dcs``.
        clock: unix time (injected for tests).
    """

    def __init__(self, directory: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.directory = directory
        self._clock = clock
        self._noted: dict[str, float] = {}

    def note(self, dc: str) -> None:
        """Record that a key group of ``dc`` arrived (a file touch at most every 30 s)."""
        now = self._clock()
        if now - self._noted.get(dc, float("-inf")) < _NOTE_EVERY_S:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / dc
            path.touch()
            os.utime(path, (now, now))
        except OSError as e:
            log.warning("auditor: dc=%s could not be recorded: %s", dc, e)
            return
        self._noted[dc] = now

    def recent(self, max_age_s: float) -> list[str]:
        """The dcs seen within ``max_age_s`` (at most ``MAX_SEEN_DCS``, newest first);
        older files are removed."""
        now = self._clock()
        seen: list[tuple[float, str]] = []
        with contextlib.suppress(OSError):
            for path in self.directory.iterdir():
                with contextlib.suppress(OSError):
                    mtime = path.stat().st_mtime
                    if now - mtime > max_age_s + _NOTE_EVERY_S:
                        path.unlink()
                    else:
                        seen.append((mtime, path.name))
        return [dc for _, dc in sorted(seen, reverse=True)[:MAX_SEEN_DCS]]


#: Sends ``(epoch, dc, keys)`` to this node's ``/v1/audit``; ``None``: no answer.
Post = Callable[[int, str, list[str]], AuditAnswer | None]


class _Outcome(enum.Enum):
    CONFIRMED = "confirmed"  # nothing there, none of ours, or nothing missing
    REPAIRING = "repairing"  # missing results admitted for repair
    GIVEN_UP = "given up"  # metadata that can never be parsed
    OVER_BUDGET = "over budget"  # not visited: the round's keys are spent


class _RoundEnds(CompanionError):
    """The store (or this node's workers) could not answer: end the round here."""


@dataclass
class _Round:
    budget: int
    deadline: float
    sent: int = 0
    visits: int = 0
    checked: dict[str, set[int]] = field(default_factory=dict)  # pending ones seen

    def time_up(self) -> bool:
        return self.visits > 0 and time.monotonic() >= self.deadline


class Auditor:
    """One node's auditor.

    Args:
        settings: the companion's settings (ring, node, dcs, lookback, horizon, caps).
        riak: a client of the local node.
        post: sends ``(epoch, dc, keys)`` to this node's ``/v1/audit``.
        seen: the dcs learned from key groups (default: ``<state_dir>/dcs``).
        clock: unix time (injected for tests).
        busy: whether the hook's work fills the inbox now (then a round checks only
            ``audit_min_keys`` keys); default: never.
        cursors: where the cursors persist (default: ``<state_dir>/audit/cursors.json``).
    """

    def __init__(
        self,
        settings: CompanionSettings,
        riak: RiakClient,
        post: Post,
        *,
        seen: SeenDcs | None = None,
        clock: Callable[[], float] = time.time,
        busy: Callable[[], bool] | None = None,
        cursors: CursorFile | None = None,
    ) -> None:
        self.settings = settings
        self._riak = riak
        self._post = post
        self._clock = clock
        self._busy = busy or (lambda: False)
        self._seen = seen or SeenDcs(settings.state_dir / "dcs", clock=clock)
        self._ownership = Ownership(settings)
        self._file = cursors or CursorFile(settings.state_dir)
        self.cursors: dict[str, DcCursor] = self._file.load()
        # A cursor file that was there but unreadable held epochs not yet confirmed
        # complete: the dcs start again from the horizon, not from audit_lookback_s
        # back as on a new node, so none of those epochs is skipped.
        self._start_back_s = self._horizon_s() if self._file.lost else None
        self._saved_at = 0.0
        # (epoch, dc) -> when its admitted repairs are done at the latest (monotonic):
        # not posted again before (they would be admitted twice), then checked.
        self._repairing: dict[tuple[int, str], float] = {}
        self._repair_s = settings.max_wait_s + settings.timeout_cap_s + _REPAIR_MARGIN_S
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def owned(self, key: ChunkKey) -> bool:
        """Whether this node is the first primary of ``key`` (always, without a ring;
        :class:`companion.ownership.Ownership`)."""
        return self._ownership.owned(key)

    def dcs(self) -> list[str]:
        """The configured ``audit_dcs``, the dcs seen in key groups within the horizon,
        and the dcs whose cursor has pending epochs."""
        seen = self._seen.recent(self._horizon_s())
        pending = [dc for dc, c in sorted(self.cursors.items()) if c.pending]
        return list(dict.fromkeys([*self.settings.audit_dcs, *seen, *pending]))

    def _horizon_s(self) -> int:
        return max(self.settings.audit_horizon_s, self.settings.audit_lookback_s)

    # -- one round ---------------------------------------------------------------------

    def run_once(self) -> int:
        """One round; returns how many owned keys were sent to be checked (at most the
        round's budget, or one epoch-dc's keys when a single one holds more)."""
        now = int(self._clock())
        settled, newest = now - self.settings.audit_lookback_s, now - AUDIT_MIN_AGE_S
        dcs = self.dcs()
        # Cursors of dcs no longer audited (and with nothing pending) are dropped: such
        # a dc, when it comes back, starts audit_lookback_s back like a new one.
        self.cursors = {dc: c for dc, c in self.cursors.items() if dc in dcs}
        start = settled if self._start_back_s is None else now - self._start_back_s
        self._start_back_s = None  # the dcs of this first round only
        for dc in dcs:
            cursor = self.cursors.setdefault(dc, DcCursor(start))
            self._give_up_old(dc, cursor, now - self._horizon_s())
        busy = self._busy()
        budget = self.settings.audit_max_keys
        if busy:
            budget = min(budget, self.settings.audit_min_keys)
        state = _Round(budget, time.monotonic() + self.settings.audit_round_max_s)
        self._repairing = {k: t for k, t in self._repairing.items() if t > time.monotonic()}
        try:
            state.budget = budget - budget // 4
            self._forward(dcs, settled, state)
            state.budget = budget
            self._window(dcs, settled, newest, state)
        except _RoundEnds:
            pass
        finally:
            self._save(force=True)
        if busy:
            log.debug("auditor: inbox busy: round cut to %d keys", budget)
        return state.sent

    def _give_up_old(self, dc: str, cursor: DcCursor, horizon: int) -> None:
        """Give up (count, log) the epochs of ``dc`` older than ``horizon``."""
        old_pending = [e for e in cursor.pending if e < horizon]
        skipped = max(0, horizon - cursor.next)
        if not old_pending and not skipped:
            return
        n = len(old_pending) + skipped
        log.warning(
            "auditor: dc=%s: %d epochs older than audit_horizon_s=%ds given up "
            "(%d pending repair: %s; never reached: %s)",
            dc,
            n,
            self._horizon_s(),
            len(old_pending),
            old_pending[:10],
            f"{cursor.next}..{horizon - 1}" if skipped else "none",
        )
        cursor.pending = [e for e in cursor.pending if e >= horizon]
        cursor.next = max(cursor.next, horizon)
        self._count_given_up(dc, cursor, n)

    @staticmethod
    def _count_given_up(dc: str, cursor: DcCursor, n: int) -> None:
        cursor.given_up += n
        metrics.AUDIT_GIVEN_UP.labels(dc).inc(n)

    def _forward(self, dcs: list[str], settled: int, state: _Round) -> None:
        """Phase 1: oldest first across dcs, pending epochs then the scan from ``next``
        up to ``settled``."""
        while not state.time_up():
            candidates = []
            for dc in dcs:
                cursor = self.cursors[dc]
                checked = state.checked.setdefault(dc, set())
                pending = [e for e in cursor.pending if e not in checked]
                if pending:
                    candidates.append((pending[0], dc))
                elif cursor.next <= settled and len(cursor.pending) < MAX_PENDING:
                    candidates.append((cursor.next, dc))
            if not candidates:
                return
            epoch, dc = min(candidates)
            cursor = self.cursors[dc]
            outcome = self._visit(epoch, dc, state)
            if outcome is _Outcome.OVER_BUDGET:
                return
            if epoch in cursor.pending:
                state.checked[dc].add(epoch)
                if outcome is not _Outcome.REPAIRING:
                    cursor.pending.remove(epoch)
            else:  # epoch == cursor.next: every pending one is older
                if outcome is _Outcome.REPAIRING:
                    cursor.pending.append(epoch)
                    state.checked[dc].add(epoch)  # once a round
                cursor.next = epoch + 1
            self._save()

    def _window(self, dcs: list[str], settled: int, newest: int, state: _Round) -> None:
        """Phase 2: the epochs younger than ``settled``, newest first; the cursors do
        not move (they confirm these epochs once settled)."""
        for epoch in range(newest, settled, -1):
            for dc in dcs:
                if epoch < self.cursors[dc].next:
                    continue
                if state.time_up() or self._visit(epoch, dc, state) is _Outcome.OVER_BUDGET:
                    return

    def _visit(self, epoch: int, dc: str, state: _Round) -> _Outcome:
        """Check one epoch-dc (see the module docstring).

        Raises:
            _RoundEnds: the metadata or a result could not be read, or no answer.
        """
        if (epoch, dc) in self._repairing:  # admitted lately: not twice
            return _Outcome.REPAIRING
        ns = self.settings.namespaces
        meta = MetadataKey(epoch, dc)
        try:
            value = self._riak.get(*ns.metadata_location(meta), **CONFIRMED_ABSENCE).value
        except NotFound:
            state.visits += 1
            return _Outcome.CONFIRMED
        except RiakError as e:
            log.warning(
                "auditor: epoch=%d dc=%s: metadata unreadable, round ends here "
                "(the cursor stays; tried again next round): %s",
                epoch,
                dc,
                e,
            )
            raise _RoundEnds from e
        state.visits += 1
        try:
            refs = parse_metadata(value, key=meta.format())
        except EventStoreError as e:
            log.error("auditor: epoch=%d dc=%s: metadata given up, not parseable: %s", epoch, dc, e)
            self._count_given_up(dc, self.cursors[dc], 1)
            return _Outcome.GIVEN_UP
        mine = [k.format() for k in map(meta.chunk_key, refs) if self.owned(k)]
        if not mine:
            return _Outcome.CONFIRMED
        if state.sent and state.sent + len(mine) > state.budget:
            log.info("auditor: cap of %d keys reached at epoch=%d dc=%s", state.sent, epoch, dc)
            return _Outcome.OVER_BUDGET
        answer = self._post(epoch, dc, mine)
        state.sent += len(mine)
        if answer is None or answer.unreadable:
            log.warning(
                "auditor: epoch=%d dc=%s: results not all readable (%s), round ends here",
                epoch,
                dc,
                answer,
            )
            raise _RoundEnds
        if answer.complete:
            return _Outcome.CONFIRMED
        self._repairing[(epoch, dc)] = time.monotonic() + self._repair_s
        return _Outcome.REPAIRING

    def _save(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._saved_at < _SAVE_EVERY_S:
            return
        try:
            self._file.save(self.cursors)
        except OSError as e:  # the old file stays: epochs are visited again, not skipped
            log.warning("auditor: cursors not saved to %s: %s", self._file.path, e)
        self._saved_at = now

    # -- the thread --------------------------------------------------------------------

    def start(self) -> Auditor:
        self._thread = threading.Thread(target=self._loop, name="companion-auditor", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.audit_interval_s):
            try:
                sent = self.run_once()
                log.debug("auditor: %d owned keys checked", sent)
            except Exception:  # the next round starts from the saved cursors
                log.exception("auditor: round failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)


def http_post(host: str, port: int, *, timeout_s: float = 30.0) -> Post:
    """A ``post`` that sends to a companion's ``/v1/audit`` over HTTP; ``None`` when
    it could not be sent or the answer is not a 200 with an audit answer."""

    def post(epoch: int, dc: str, keys: list[str]) -> AuditAnswer | None:
        connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
        try:
            body = KeyGroup.of(epoch, dc, keys).encode()
            connection.request(
                "POST", "/v1/audit", body=body, headers={"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            raw = response.read()
            if response.status != 200:
                log.warning(
                    "auditor: epoch=%d dc=%s: HTTP %d %r", epoch, dc, response.status, raw[:200]
                )
                return None
            answer = AuditAnswer.from_json(json.loads(raw))
            if answer.missing:
                log.info("auditor: epoch=%d dc=%s: %s", epoch, dc, raw.decode())
            return answer
        except (OSError, http.client.HTTPException, ValueError) as e:
            log.warning("auditor: epoch=%d dc=%s: POST /v1/audit failed: %s", epoch, dc, e)
            return None
        finally:
            connection.close()

    return post
