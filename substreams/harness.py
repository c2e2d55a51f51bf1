"""The author's loop: run a plugin exactly as the companion would, on sample data.

The file is loaded as the companion loads it (first imported in a time-limited child);
each chunk is verified and decoded once; every substream of the file that reads the
chunk's type/subtype runs in the same sandbox with the same limits (the plugin's
declaration lowered to the platform's default caps, ``substreams.protocol.DEFAULT_CAP``)
on the same events (a query
plugin: here, natively, on the stored bytes, as the consumer's fallback runs it; no
child: :mod:`substreams.query.run`): each narrowed to the fields the substream declares
(:func:`substreams.run.run_projected`, the production road; the rule of
``sereal_codec/projection.py``); the report gives, per run, the verdict, the fields
used, wall and CPU time, peak RSS of the child, result size and the result itself. A run
reading a field it did not declare fails with ``UndeclaredField`` naming it and the
declared ones (``substreams/declared.py``), as it does in the companion and in the
consumer's fallback. The report (:func:`format_runs`) puts a summary first, then one
line per failed run; every run with ``verbose``.

This is the author's tool: nothing in production imports it
(``tests/unit/substreams/test_one_road.py``); what it shares with production lives in
:mod:`substreams.run` (``DEFAULT_CAP`` and ``run_projected`` stay importable from here).

Sample data: a blob file (as stored: Sereal + checksum postfix; its chunk key may be
given to set the context), or an epoch range ``[start, end)`` of one dc read from a
devnode or Riak (metadata first, then the chunks, as a consumer would).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventstore.blob import DecodeLimits, unpack_blob
from eventstore.names import DEFAULT_NAMESPACES, ChunkKey, MetadataKey, Namespaces, parse_metadata
from eventstore.riak import NotFound, RiakClient
from sereal_codec.projection import compile_fields
from substreams.api import Context, Event, Substream, union_fields
from substreams.loader import load_file
from substreams.protocol import DEFAULT_CAP, Limits, Outcome
from substreams.query.run import run_queries
from substreams.results import read_result, stored_value
from substreams.run import UndecodableChunk, run_projected

__all__ = [
    "DEFAULT_CAP",
    "HarnessRun",
    "chunks_from_blob",
    "chunks_from_riak",
    "format_runs",
    "result_shape",
    "run_plugin_file",
    "run_projected",
    "summarize",
    "union_fields",
]


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
        fields = self.substream.fields
        return {
            "substream": self.substream.name,
            "version": self.substream.version,
            "key": self.key.format(),
            "fields": None if fields is None else list(fields),
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
        cap: the platform caps (:data:`~substreams.protocol.DEFAULT_CAP` unless given).
        match_types: run only substreams reading each chunk's type/subtype (as the
            companion does); False runs all (for a blob without a real key).

    Raises:
        PluginLoadError: the file does not load.
        EventStoreError: a blob does not verify or decode.
    """
    subs = load_file(path, check_in_child=True)
    runs = []
    for key, blob in chunks:
        chosen = [s for s in subs if not match_types or s.matches(key.type, key.subtype)]
        fields = union_fields(chosen)  # built once for all of them, as the companion does
        events = unpack_blob(blob, key=key.format(), fields=fields)
        if not isinstance(events, list):
            raise ValueError(f"{key}: the blob holds a {type(events).__name__}, not events")
        outcomes = _run_chunk(chosen, blob, events, key=key, cap=cap, fields=fields)
        for sub, outcome in zip(chosen, outcomes, strict=True):
            value = stored_value(sub, outcome)
            record = read_result(value, key=key.format())
            runs.append(HarnessRun(sub, key, len(events), outcome, len(value), record.result))
    return runs


def _run_chunk(
    chosen: Sequence[Substream],
    blob: bytes,
    events: list[Event],
    *,
    key: ChunkKey,
    cap: Limits,
    fields: list[str] | None,
) -> list[Outcome]:
    """Each substream's outcome on one chunk: a query plugin's here, natively, on the
    stored bytes (:func:`substreams.query.run.run_queries`: a plan cannot run code, so
    no child), the others' in the sandbox on the decoded events."""
    queries = [s for s in chosen if s.plan is not None]
    functions = [s for s in chosen if s.plan is None]
    ran: dict[int, Outcome] = {}
    try:
        jobs = [(s, Limits.of(s, cap)) for s in queries]
        native = run_queries(jobs, blob, key.format(), DecodeLimits())
    except UndecodableChunk as e:  # over the companion's decode limits: what it stores
        native = [Outcome(s.name, "unreadable", error=str(e)) for s in queries]
    ran.update(zip(map(id, queries), native, strict=True))
    if functions:
        sandboxed = run_projected(
            functions, events, Context.of(key), cap=cap, decoded_with=compile_fields(fields)
        )
        ran.update(zip(map(id, functions), sandboxed, strict=True))
    return [ran[id(s)] for s in chosen]


def result_shape(result: Any) -> str:
    """What a result holds, in words: ``empty result``, ``12 rows``, ``3 keys``, or
    its kind (never its stored size: a packed empty result is still ~90 bytes)."""
    if result is None or (isinstance(result, list | tuple | dict | str | bytes) and not result):
        return "empty result"
    if isinstance(result, list | tuple):
        return f"{len(result)} row{'s' if len(result) != 1 else ''}"
    if isinstance(result, dict):
        return f"{len(result)} key{'s' if len(result) != 1 else ''}"
    return f"a {type(result).__name__}"


def _empty(result: Any) -> bool:
    return result_shape(result) == "empty result"


def summarize(runs: list[HarnessRun]) -> dict[str, Any]:
    """The report's summary: totals, then per substream (runs, ok, failures by status,
    empty results, fields, the slowest run and the largest stored result)."""
    per: dict[str, dict[str, Any]] = {}
    for r in runs:
        name = r.substream.name
        s = per.setdefault(
            name,
            {
                "version": r.substream.version,
                "fields": None if r.substream.fields is None else list(r.substream.fields),
                "runs": 0,
                "ok": 0,
                "failed": {},
                "empty_results": 0,
                "max_wall_ms": 0.0,
                "max_result_bytes": 0,
            },
        )
        s["runs"] += 1
        if r.outcome.ok:
            s["ok"] += 1
            s["empty_results"] += _empty(r.result)
        else:
            s["failed"][r.outcome.status] = s["failed"].get(r.outcome.status, 0) + 1
        s["max_wall_ms"] = max(s["max_wall_ms"], round(r.outcome.wall_s * 1000, 3))
        s["max_result_bytes"] = max(s["max_result_bytes"], r.stored_bytes)
    ok = sum(1 for r in runs if r.outcome.ok)
    return {
        "runs": len(runs),
        "chunks": len({r.key for r in runs}),
        "ok": ok,
        "failed": len(runs) - ok,
        "empty_results": sum(s["empty_results"] for s in per.values()),
        "substreams": per,
    }


def _first_line(text: str | None) -> str:
    return (text or "").split("\n", 1)[0]


def format_runs(
    runs: list[HarnessRun],
    *,
    as_json: bool = False,
    verbose: bool = False,
    max_result_chars: int = 2000,
) -> str:
    """The report of runs: the summary first, then one line per problem (a failed
    run: its first error line); with ``verbose``, every run (4 lines each). As JSON,
    ``{"summary": summarize(runs), "runs": [every run]}``."""
    summary = summarize(runs)
    if as_json:
        report = {"summary": summary, "runs": [r.as_dict() for r in runs]}
        return json.dumps(report, indent=2, default=repr, ensure_ascii=False)
    lines = [
        f"{summary['runs']} runs on {summary['chunks']} chunks: {summary['ok']} ok, "
        f"{summary['failed']} failed"
    ]
    for name, s in summary["substreams"].items():
        fields = "all" if s["fields"] is None else ", ".join(s["fields"]) or "none"
        failed = ", ".join(f"{n} {status}" for status, n in sorted(s["failed"].items()))
        empty = f"; {s['empty_results']} of {s['ok']} ok results empty" if s["ok"] else ""
        lines.append(
            f"  {name}@{s['version']}: {s['runs']} runs, {s['ok']} ok"
            f"{', ' + failed if failed else ''}{empty}; fields: {fields}; "
            f"slowest {s['max_wall_ms']} ms; largest stored value {s['max_result_bytes']} bytes"
        )
    problems = [r for r in runs if not r.outcome.ok]
    if problems and not verbose:
        lines.append(f"problems ({len(problems)}):")
        lines += [
            f"  {r.substream.name} on {r.key.format()}: {r.verdict}: {_first_line(r.outcome.error)}"
            for r in problems
        ]
    if verbose:
        lines.append("runs:")
        lines += [_run_lines(r, max_result_chars) for r in runs]
    return "\n".join(lines)


def _run_lines(r: HarnessRun, max_result_chars: int) -> str:
    d = r.as_dict()
    fields = "all" if d["fields"] is None else ", ".join(d["fields"]) or "none"
    shown = "failed" if not r.outcome.ok else result_shape(r.result)
    lines = [
        f"{d['substream']}@{d['version']} on {d['key']} ({d['events']} events): {d['verdict']}",
        f"  fields: {fields}",
        f"  time {d['wall_ms']} ms wall, {d['cpu_ms']} ms CPU; peak RSS {d['peak_rss_kb']} KiB; "
        f"{shown}, {d['result_bytes']} bytes stored (limits: {d['limits']['timeout_s']} s, "
        f"{d['limits']['memory_mb']} MiB, {d['limits']['max_result_bytes']} bytes)",
    ]
    if r.outcome.error:
        lines.append("  error: " + r.outcome.error.replace("\n", "\n         "))
    else:
        text = json.dumps(r.result, default=repr, ensure_ascii=False)
        if len(text) > max_result_chars:
            text = text[:max_result_chars] + f"... ({len(text)} chars)"
        lines.append(f"  result: {text}")
    return "\n".join(lines)
