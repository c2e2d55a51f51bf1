"""Room on the Python stack for the recursive pure-Python codec.

The decoder and encoder recurse once per nesting level (a few frames each), so the
default ``max_depth=512`` needs more than the interpreter's default limit of 1000
frames. :func:`room_for` raises the limit for the duration of one call and restores
it when the last concurrent user leaves; it never lowers a limit someone else set.
The interpreter-wide limit is shared by all threads, hence the lock and the count.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["room_for"]

_HEADROOM = 1000  # frames left for the caller, as the interpreter's default allows
_lock = threading.Lock()
_users = 0
_saved_limit = 0


@contextmanager
def room_for(frames: int) -> Iterator[None]:
    """Make sure ``frames`` more Python frames fit while the block runs."""
    global _users, _saved_limit
    needed = frames + _HEADROOM
    with _lock:
        if _users == 0:
            _saved_limit = sys.getrecursionlimit()
        _users += 1
        if sys.getrecursionlimit() < needed:
            sys.setrecursionlimit(needed)
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and sys.getrecursionlimit() != _saved_limit:
                sys.setrecursionlimit(_saved_limit)
