"""Whether a job that computes results (the backfill) may overwrite a stored one.

Pure logic: one decision per stored result, so every writer other than the companion
applies the same rule. A result of another version of the plugin is the answer another
version gave: overwriting it silently is how a name published over another plugin
turned hundreds of stored results into ``version_mismatch`` for every later reader.
So it is kept unless the caller says ``replace_version`` (``--replace-version``).
"""

from __future__ import annotations

from typing import Literal

from substreams.results import ResultRecord

__all__ = ["Decision", "decide"]

#: write: nothing usable is stored (missing, unreadable, or a "shed" of this version:
#: the plugin never ran); keep: this version's result is stored; other_version: another
#: version's result is stored and is not to be replaced.
Decision = Literal["write", "keep", "other_version"]


def decide(stored: ResultRecord | None, version: str, *, replace_version: bool) -> Decision:
    """What to do with the result stored for a chunk.

    Args:
        stored: the stored record, or None when missing or unreadable.
        version: the version of the plugin about to run.
        replace_version: overwrite results of another version.

    Returns:
        ``"write"``, ``"keep"`` or ``"other_version"`` (see :data:`Decision`).
    """
    if stored is None:
        return "write"
    if stored.version == version:
        return "write" if stored.status == "shed" else "keep"
    return "write" if replace_version else "other_version"
