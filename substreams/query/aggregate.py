"""The aggregates of a declarative substream: a start, a step per event, a merge.

Each aggregate's state is its output value, so a chunk's partial aggregate is plain
data (Sereal-encodable, stored as the result) and partials of many chunks merge by
their values alone (:func:`combine`):

- ``count(*)``: an int, +1 for every event; combined by adding;
- ``count(path)``: an int, +1 for a value that is not NULL; combined by adding;
- ``sum(path)``: None until a NUMBER is seen, then their sum (ints exact while the sum
  stays in -2**63..2**64-1, what a result can store; beyond, a float); combined by
  adding, None-aware;
- ``min(path)``, ``max(path)``: the value (as held) or None; numbers by value before
  texts by code point, NULL and containers skipped; combined the same way;
- ``histogram(path, b1, ..., bn)``: n + 1 counts; a NUMBER counts in the first bucket
  whose bound is >= it (``bisect_left``), the last bucket holds what is above bn;
  combined bucket by bucket.

Pure logic, no I/O.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from substreams.query.plan import Aggregate
from substreams.query.values import NULL, NUMBER, order_key, scalar

__all__ = ["combine", "start", "step"]

#: The integers a stored result can hold (Sereal's range); a sum beyond is a float.
INT_MIN, INT_MAX = -(2**63), 2**64 - 1


def start(agg: Aggregate) -> Any:
    """The state of a group that has seen no event."""
    if agg.function == "count":
        return 0
    if agg.function == "histogram":
        return [0] * (len(agg.bounds) + 1)
    return None


def step(agg: Aggregate, state: Any, value: Any) -> Any:
    """The state after one more event whose value at ``agg.path`` is ``value``."""
    function = agg.function
    if function == "count":
        if agg.path is None or scalar(value)[0] != NULL:
            return state + 1
        return state
    if function in ("min", "max"):
        return _extreme(function, state, value)
    kind, number = scalar(value)
    if kind != NUMBER:
        return state
    if function == "sum":
        return _fit((0 if state is None else state) + number)
    state[bisect_left(agg.bounds, number)] += 1  # histogram
    return state


def _fit(total: Any) -> Any:
    if type(total) is int and not INT_MIN <= total <= INT_MAX:
        return float(total)
    return total


def _extreme(function: str, state: Any, value: Any) -> Any:
    key = order_key(value)
    if key is None:
        return state
    if state is None:
        return value
    held = order_key(state)
    if held is None:  # a state no step made (a hand-written partial): the value wins
        return value
    if (key < held) if function == "min" else (key > held):
        return value
    return state


def combine(agg: Aggregate, a: Any, b: Any) -> Any:
    """The state of two groups' events together, from their two states.

    Raises:
        ValueError: a state that cannot be this aggregate's (a histogram of another
            length, a count that is not an int).
    """
    function = agg.function
    if function == "count":
        if not isinstance(a, int) or not isinstance(b, int):
            raise ValueError(f"{agg.name}: a count that is not an integer")
        return a + b
    if function == "sum":
        if a is None or b is None:
            return b if a is None else a
        return _fit(a + b)
    if function in ("min", "max"):
        return a if b is None else _extreme(function, a, b)
    if (
        not isinstance(a, list)
        or not isinstance(b, list)
        or not len(a) == len(b) == len(agg.bounds) + 1
    ):
        raise ValueError(f"{agg.name}: a histogram without {len(agg.bounds) + 1} buckets")
    return [x + y for x, y in zip(a, b, strict=True)]
