"""Substreams: small transformations run next to the data on every chunk, once.

Plugin authors need only this module::

    from substreams import substream, dig, pick, where, count_by

See ``substreams/DESIGN.md`` for the platform (loading, registry, sandbox, results).
"""

from __future__ import annotations

from substreams.api import Context, Event, Substream, declaration_of, substream, version_of
from substreams.helpers import MISSING, count_by, dig, pick, where

__all__ = [
    "MISSING",
    "Context",
    "Event",
    "Substream",
    "count_by",
    "declaration_of",
    "dig",
    "pick",
    "substream",
    "version_of",
    "where",
]
