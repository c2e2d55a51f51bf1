"""The cyclic collector while a reader hands out a decoded chunk: its objects do not count.

CPython starts a young (generation 0) collection when the tracked containers allocated
and not yet freed exceed ``gc.get_threshold()[0]`` (700). A decoded chunk is
thousands of such containers (the events generator's: ~6 per event), built while
the decoder pauses the collector; so the first allocation after the decode, e.g. the
first tagged event, starts a collection that scans the whole chunk, and every tenth of
them an older generation's. The one-thread decode ceiling never pays it: it frees each
chunk before allocating anything, which takes the count back down. A reader cannot do
that (it hands the events out one by one), so while it does, :class:`Allowance` raises
the young threshold by the containers the chunk added. The caller's own allocations
still start collections as often as before (the threshold is the same above the
chunk's objects), and when the reader lets the chunk go the threshold comes back down.

The threshold is the process's, so every open allowance of every thread goes through
one lock-protected :class:`Threshold` (the one piece of module state here: the
interpreter has one collector). It raises the threshold by the sum of the open
allowances and, when the last one closes, sets back the value it found. If someone else
set the threshold meanwhile (``gc.set_threshold`` while a read is open), theirs wins:
it is never overwritten, and the allowances open then release nothing. A threshold of
0 (automatic collection off) is never raised. Thresholds 1 and 2 are never touched.
A release made while the threshold is being updated on the same thread (an allocation
in the update started a collection that closed a reader caught in a cycle) is applied
by that update before it returns, not lost and not a deadlock.

Failure semantics: the reader releases its allowance in a ``finally``, so at its end,
on an exception in it, or on its ``close()`` (a ``break`` out of a loop over it, or
its garbage collection); a reader suspended mid-chunk and kept alive keeps its
allowance (the chunk's objects are alive too) until it is resumed or closed.
"""

from __future__ import annotations

import gc
import itertools
import threading

__all__ = ["THRESHOLD", "Allowance", "Threshold", "Token"]

#: A grant's number (0: nothing granted); see :class:`Threshold`.
Token = int


class Threshold:
    """The young-generation threshold, raised by the sum of the open grants.

    Thread-safe. A grant's token is its number; releasing it twice, or after someone
    else set the threshold (which voids every open grant), releases nothing.
    """

    def __init__(self) -> None:
        # Re-entrant: an allocation in adjust() can start a collection whose finalizers
        # (a reader's generator collected in a cycle) release a grant on this thread.
        self._lock = threading.RLock()
        self._busy = False  # adjust() is running on the thread holding the lock
        self._deferred: list[Token] = []  # releases made meanwhile, for it to apply
        self._base = 0  # the threshold as found when the first open grant was made
        self._grants: dict[Token, int] = {}  # the open grants: token -> containers
        self._set: int | None = None  # what we set it to; None: nothing open
        self._numbers = itertools.count(1)

    def grant(self, containers: int) -> Token:
        """Raise the threshold by ``containers``. Returns the token to :meth:`release`
        (nothing is raised for ``containers`` <= 0 or when the threshold is 0)."""
        return self.adjust(0, containers)

    def release(self, token: Token) -> None:
        """Take back a grant; the threshold drops by it (to the base when none is left)."""
        self.adjust(token, 0)

    def adjust(self, token: Token, containers: int) -> Token:
        """Replace the grant ``token`` (0: none) by one of ``containers``, setting the
        threshold once (lowered in between, the tuple ``gc.get_threshold()`` builds
        would start the very collection this is here to spare). Returns the new token
        (0: nothing granted)."""
        with self._lock:
            if self._busy:  # re-entered from a collection adjust() itself started
                if token:
                    self._deferred.append(token)
                return 0
            self._busy = True
            try:
                return self._adjust(token, containers)
            finally:
                self._busy = False

    def _adjust(self, token: Token, containers: int) -> Token:
        new: Token = 0
        releases = [token]
        while True:
            t0, t1, t2 = gc.get_threshold()  # allocates: may defer a release
            if self._set is None:  # nothing open: from the threshold as found
                self._base = t0
            elif t0 != self._set:  # set by someone else: theirs is the base, ours void
                self._base, self._set = t0, None
                self._grants.clear()
            releases += self._deferred
            self._deferred.clear()
            changed = False
            for old in releases:
                changed |= self._grants.pop(old, 0) > 0
            if containers > 0 and self._base > 0 and not new:
                new = next(self._numbers)
                self._grants[new] = containers
                changed = True
            if changed:
                raised = sum(self._grants.values())  # allocates: may defer a release
                gc.set_threshold(self._base + raised, t1, t2)
                self._set = self._base + raised if raised else None
            if not self._deferred:
                return new
            releases = []

    @property
    def raised(self) -> int:
        """The containers the threshold is raised by now (0: as found)."""
        with self._lock:
            return sum(self._grants.values())


#: The interpreter's one collector has one threshold: one object arbitrates it.
THRESHOLD = Threshold()


class Allowance:
    """One reader's allowance for one decoded chunk (see the module).

    Open it just before decoding, with a bound on what the decode may allocate (the
    threshold is raised by that much at once: the decoder pauses the collector while it
    builds, and the first allocation after it, still inside the decode call, would
    start the collection this is here to spare); then :meth:`cover_new_objects`
    narrows the raise to the containers actually added, and :meth:`close` ends it.

    Args:
        expected: the most containers the decode may add (its object budget).
        threshold: the process's threshold (a private one in tests).
    """

    def __init__(self, expected: int, threshold: Threshold = THRESHOLD) -> None:
        self._threshold = threshold
        self._start = gc.get_count()[0]
        self._token = threshold.grant(expected)

    def cover_new_objects(self, *, also: int = 0) -> None:
        """Narrow the raise to the containers allocated (net) since this allowance was
        opened, i.e. those of the chunk just decoded, plus ``also`` (what the reader
        allocates at once while handing it out)."""
        if self._token:
            built = gc.get_count()[0] - self._start
            self._token = self._threshold.adjust(self._token, built + also if built > 0 else 0)

    def close(self) -> None:
        """Release the raise (idempotent)."""
        token, self._token = self._token, 0
        if token:
            self._threshold.release(token)
