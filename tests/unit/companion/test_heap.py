"""A worker's heap (companion/heap.py): the objects of its start frozen out of the
cyclic collector's full collections (the malloc thresholds: tests/integration)."""

from __future__ import annotations

import gc
import weakref

from companion import heap


def test_freeze_startup_collects_garbage_cycles_then_freezes_the_rest() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    gc.disable()  # the cycle must still be there when freeze_startup runs
    try:
        garbage = weakref.ref(Node())  # a cycle: only the collector frees it
        assert garbage() is not None
        heap.freeze_startup()
        assert garbage() is None  # collected, not frozen for good
        assert gc.get_freeze_count() > 10_000  # the interpreter's modules at least
    finally:
        gc.unfreeze()
        gc.enable()
