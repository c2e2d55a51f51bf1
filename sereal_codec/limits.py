"""Limits both body codecs enforce identically (compiled core and pure reference).

``MAX_DEPTH_CAP`` is the largest ``max_depth`` any walker accepts: the compiled
walkers recurse once per nesting level, and 1000 levels of the costliest one take
~450 KiB of C stack, so every walker is safe in a thread with a 1 MiB stack
(DESIGN.md, "Stack", has the measurements). The pure codec refuses the same values so
that the two never disagree about what decodes. ``_sereal.MAX_DEPTH_CAP`` is the C
constant; ``tests/unit/sereal_codec/test_limits.py`` holds them equal.
"""

from __future__ import annotations

__all__ = ["MAX_DEPTH_CAP", "check_max_depth"]

#: Largest ``max_depth`` accepted anywhere in the codec (nesting levels).
MAX_DEPTH_CAP = 1000


def check_max_depth(max_depth: int, minimum: int = 0) -> int:
    """Returns: ``max_depth`` when it is an int in ``minimum..MAX_DEPTH_CAP``.

    Raises:
        ValueError: otherwise, with the compiled core's message.
    """
    if (
        not isinstance(max_depth, int)
        or isinstance(max_depth, bool)
        or not minimum <= max_depth <= MAX_DEPTH_CAP
    ):
        raise ValueError(f"max_depth must be in {minimum}..{MAX_DEPTH_CAP}, got {max_depth!r}")
    return max_depth
