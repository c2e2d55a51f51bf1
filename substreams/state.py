"""A substream's state on a node, in the one set of words the status page, ``/v1/status``
readers and ``riak-events substream status`` use (issue 21: the CLI said "ok" where the
page said "enabled"). Pure logic, no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["STATES", "state_of"]

#: Every state, in words.
STATES = ("enabled", "disabled", "not loaded")


def state_of(versions: Collection[str], disabled: Mapping[str, Any] | None) -> str:
    """A substream's state on a node, one of :data:`STATES` (the words of the status
    page and of ``substream status``).

    Args:
        versions: the versions the node's workers run (none: not loaded).
        disabled: its disabled marker (``DisabledSet.all()[name]``), if any; a marker
            of another version does not count (a new version re-enables).
    """
    if not versions:
        return "not loaded"
    if disabled is not None and disabled.get("version", next(iter(versions))) in versions:
        return "disabled"
    return "enabled"
