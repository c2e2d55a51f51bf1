"""The author's loop: run a plugin exactly as the companion would, on sample data.

The file is loaded as the companion loads it (first imported in a time-limited child);
each chunk is verified and decoded once; every substream of the file that reads the
chunk's type/subtype runs in the same sandbox with the same limits (the plugin's
declaration lowered to the companion's default caps); the report gives, per run, the
verdict, wall and CPU time, peak RSS of the child, result size and the result itself.

Sample data: a blob file (as stored: Sereal + checksum postfix; its chunk key may be
given to set the context), or an epoch range ``[start, end)`` of one dc read from a
devnode or Riak (metadata first, then the chunks, as a consumer would).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventstore.blob import unpack_blob
from eventstore.names import DEFAULT_NAMESPACES, ChunkKey, MetadataKey, Namespaces, parse_metadata
from eventstore.riak import NotFound, RiakClient
from substreams.api import Context, Substream
from substreams.loader import load_file
from substreams.results import read_result
from substreams.sandbox import Limits, Outcome, run_substreams, stored_value

__all__ = ["HarnessRun", "chunks_from_blob", "chunks_from_riak", "run_plugin_file"]

#: The companion's default caps (companion/defaults.py), repeated here so the harness
#: does not import the daemon.
DEFAULT_CAP = Limits(timeout_s=5.0, memory_mb=1024, max_result_bytes=1024 * 1024)


@dataclass
class HarnessRun:
    """One run of one substream on one chunk."""

    substream: Substream
    key: ChunkKey
    events: int
    outcome: Outcome
    stored_bytes: int
    result: Any

    @property
    def verdict(self) -> str:
        return "ok" if self.outcome.ok else f"{self.outcome.status} ({self.outcome.kind})"

    def as_dict(self) -> dict[str, Any]:
        limits = Limits.of(self.substream, DEFAULT_CAP)
        return {
            "substream": self.substream.name,
            "version": self.substream.version,
            "key": self.key.format(),
            "events": self.events,
            "verdict": self.verdict,
            "status": self.outcome.status,
            "wall_ms": round(self.outcome.wall_s * 1000, 3),
            "cpu_ms": round(self.outcome.cpu_s * 1000, 3),
            "peak_rss_kb": self.outcome.max_rss_kb,
            "result_bytes": self.stored_bytes,
            "limits": {
                "timeout_s": limits.timeout_s,
                "memory_mb": limits.memory_mb,
                "max_result_bytes": limits.max_result_bytes,
            },
            "error": self.outcome.error,
            "result": self.result,
        }


def chunks_from_blob(path: Path, key: ChunkKey | None = None) -> Iterator[tuple[ChunkKey, bytes]]:
    """One chunk from a blob file; without ``key`` the context is ``0:dc:sample::0``."""
    yield (key or ChunkKey(0, "dc", "sample", "", 0)), path.read_bytes()


def chunks_from_riak(
    url: str,
    dc: str,
    start: int,
    end: int,
    *,
    namespaces: Namespaces = DEFAULT_NAMESPACES,
) -> Iterator[tuple[ChunkKey, bytes]]:
    """Every chunk of the epochs ``[start, end)`` (end exclusive, as every range) of
    ``dc``, read from ``url``: metadata first, then its chunks; a missing epoch or
    chunk is skipped."""
    with RiakClient([url]) as riak:
        for epoch in range(start, end):
            meta = MetadataKey(epoch, dc)
            try:
                value = riak.get(*namespaces.metadata_location(meta)).value
            except NotFound:
                continue
            for ref in parse_metadata(value, key=meta.format()):
                key = meta.chunk_key(ref)
                try:
                    yield key, riak.get(*namespaces.chunk_location(key)).value
                except NotFound:
                    continue


def run_plugin_file(
    path: Path,
    chunks: Iterator[tuple[ChunkKey, bytes]],
    *,
    cap: Limits = DEFAULT_CAP,
    match_types: bool = True,
) -> list[HarnessRun]:
    """Run every substream of ``path`` on ``chunks`` in the sandbox.

    Args:
        path: the plugin file.
        chunks: (chunk key, stored blob) pairs.
        cap: the platform caps (the companion's defaults unless given).
        match_types: run only substreams reading each chunk's type/subtype (as the
            companion does); False runs all (for a blob without a real key).

    Raises:
        PluginLoadError: the file does not load.
        EventStoreError: a blob does not verify or decode.
    """
    subs = load_file(path, check_in_child=True)
    runs = []
    for key, blob in chunks:
        events = unpack_blob(blob, key=key.format())
        if not isinstance(events, list):
            raise ValueError(f"{key}: the blob holds a {type(events).__name__}, not events")
        chosen = [s for s in subs if not match_types or s.matches(key.type, key.subtype)]
        outcomes = run_substreams(chosen, events, Context.of(key), cap=cap)
        for sub, outcome in zip(chosen, outcomes, strict=True):
            value = stored_value(sub, outcome)
            record = read_result(value, key=key.format())
            runs.append(HarnessRun(sub, key, len(events), outcome, len(value), record.result))
    return runs


def format_runs(
    runs: list[HarnessRun], *, as_json: bool = False, max_result_chars: int = 2000
) -> str:
    """The human (or JSON) report of runs."""
    if as_json:
        return json.dumps([r.as_dict() for r in runs], indent=2, default=repr, ensure_ascii=False)
    lines = []
    for r in runs:
        d = r.as_dict()
        lines.append(
            f"{d['substream']}@{d['version']} on {d['key']} ({d['events']} events): "
            f"{d['verdict']}\n"
            f"  time {d['wall_ms']} ms wall, {d['cpu_ms']} ms CPU; "
            f"peak RSS {d['peak_rss_kb']} KiB; "
            f"result {d['result_bytes']} bytes (limits: {d['limits']['timeout_s']} s, "
            f"{d['limits']['memory_mb']} MiB, {d['limits']['max_result_bytes']} bytes)"
        )
        if r.outcome.error:
            lines.append("  error: " + r.outcome.error.replace("\n", "\n         "))
        else:
            text = json.dumps(r.result, default=repr, ensure_ascii=False)
            if len(text) > max_result_chars:
                text = text[:max_result_chars] + f"... ({len(text)} chars)"
            lines.append(f"  result: {text}")
    ok = sum(1 for r in runs if r.outcome.ok)
    lines.append(f"{len(runs)} runs: {ok} ok, {len(runs) - ok} failed")
    return "\n".join(lines)
