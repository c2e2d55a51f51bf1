"""Bounded, ordered prefetch: run work ahead on a thread pool, hand results back in order.

``prefetch(items, work, executor, depth)`` keeps at most ``depth`` items submitted and
not yet handed back, so memory is bounded by ``depth`` results whatever the length of
``items``; results come back in the order of ``items`` however the work finishes.
Items for which ``work`` is ``None`` (markers) pass through without a task.

Failure semantics: an exception raised by ``work`` is re-raised when its item's turn
comes (earlier items are handed back first). When the consumer stops early (breaks,
or the generator is closed), queued tasks are cancelled; running ones finish and their
results are dropped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from typing import TypeVar

__all__ = ["prefetch"]

T = TypeVar("T")
R = TypeVar("R")


def prefetch(
    items: Iterable[T],
    work: Callable[[T], R] | None,
    executor: Executor,
    depth: int,
    *,
    is_marker: Callable[[T], bool] = lambda item: False,
) -> Iterator[tuple[T, R | None]]:
    """Yield ``(item, work(item))`` in order, with up to ``depth`` items worked ahead.

    Args:
        items: what to work on; pulled lazily, at most ``depth`` ahead of the consumer.
        work: the function run on the executor for each non-marker item.
        executor: where the work runs.
        depth: items in flight or done but not yet handed back (>= 1).
        is_marker: items that need no work (yielded with ``None``).

    Raises:
        Whatever ``work`` raised, at that item's turn.
    """
    window: deque[tuple[T, Future[R] | None]] = deque()
    depth = max(1, depth)
    working = 0  # futures in the window
    try:
        for item in items:
            if work is None or is_marker(item):
                window.append((item, None))
            else:
                window.append((item, executor.submit(work, item)))
                working += 1
            while working >= depth or (window and window[0][1] is None):
                head, future = window.popleft()
                if future is not None:
                    working -= 1
                yield head, None if future is None else future.result()
        while window:
            head, future = window.popleft()
            yield head, None if future is None else future.result()
    finally:
        for _, future in window:
            if future is not None:
                future.cancel()
