"""Query plugins run in the caller's process: no fork, no child, no sandbox.

    outcomes = run_queries([(sub, Limits.of(sub, cap)), ...], blob, key, decode_limits)
    value = stored_value(sub, outcome)          # byte for byte the child's record
    results = read_queries([(sub, limits), ...], blob, key, decode_limits)   # a reader's

A query plugin (``Substream.plan`` set) is data, not code: its plan names paths,
literals and a closed set of operators, so evaluating it needs none of the sandbox's
protection. :func:`run_queries` evaluates every query plugin of one chunk in one walk
of its stored bytes (:func:`substreams.query.native.evaluate_body`; one
:func:`~substreams.query.native.compile_program` per set of plans and caps, cached),
and where the walk does not take the chunk or a plan, the reference evaluator over the
chunk decoded as the child decodes it (:func:`substreams.run.decode_chunk`,
the union of the plans' fields). Each plugin gets the :class:`~substreams.protocol.Outcome`
its child run would give: ``ok`` with the packed result (``results.ok_value``), or
``too_large`` with the child's message when the packed result is over the run's
``max_result_bytes``; so ``stored_value`` gives the same record either way.

:func:`read_queries` is the same walk for a caller that reads the results and stores
nothing (the consumer's fallback): each plugin's result is what the stored record would
give back (``read_result(stored_value(...)).result``, equal in value and type) with the
same status and error, without packing the record and reading it back where that cannot
change anything: rows the compiled walk built hold only scalars built as the decoder
builds them and aggregates' plain data (ints, floats, texts, booleans, None, lists of
counts), which a record gives back as they are, and the record's size is bounded
without compressing it (:func:`_surely_fits`). Rows of the reference evaluator (what a
decode builds: containers, Perl objects, references) and results the bound does not
clear take the record's road, packed and read back.

What differs from the child's road, by design: no deadline, memory limit or CPU limit
applies (a plan cannot loop or allocate beyond its output: the walk is bounded by the
chunk's size and the decode limits, the rows by ``max_result_bytes``), so a chunk whose
Python evaluation would outlive ``timeout_s`` in a child gets its result here; the time
of the one walk is shared evenly by the plugins it served (``wall_s``, ``cpu_s``: this
thread's CPU time), and ``max_rss_kb`` is 0.

The plan evaluated is the plugin's plan rebuilt from its serialised form
(``plan.to_dict``/``from_dict``), so only the plan's data reaches the evaluators, never
an object of the plugin's module.

Failure semantics: a chunk that does not verify or decode within the decode limits
raises :class:`~substreams.run.UndecodableChunk` (its message starts
``chunk_unreadable:`` or ``too_large:``, what the child's road stores); nothing else a
chunk holds raises.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

import sereal_codec as sereal
from eventstore.blob import DecodeLimits, postfix_length, verify_postfix
from eventstore.errors import EventStoreError
from sereal_codec import compression
from sereal_codec.document import DEFAULT_MAX_DEPTH, read_layout
from sereal_codec.projection import compile_fields
from substreams.api import Substream
from substreams.protocol import Limits, Outcome
from substreams.query.evaluate import Rows, evaluate
from substreams.query.native import Program, compile_program, evaluate_body
from substreams.query.plan import Plan, from_dict, to_dict
from substreams.results import RunResult, Status, ok_value, read_result
from substreams.run import decode_chunk

__all__ = ["is_query", "program_for", "read_queries", "run_queries"]


def is_query(sub: Substream) -> bool:
    """Whether ``sub`` is a query plugin, run by :func:`run_queries` (not in a child)."""
    return sub.plan is not None


@functools.lru_cache(maxsize=64)
def program_for(plans: tuple[Plan, ...], caps: tuple[int, ...]) -> Program:
    """The program of a set of plans and their result caps, compiled once (a plugin's
    version fixes its plan: the key holds the plans themselves). The program holds the
    plans rebuilt from their serialised form (``program.plans``), never the plugin's."""
    return compile_program(tuple(_data_only(plan) for plan in plans), max_result_bytes=caps)


def _data_only(plan: Plan) -> Plan:
    return from_dict(to_dict(plan))


def run_queries(
    jobs: Sequence[tuple[Substream, Limits]],
    blob: bytes,
    key: str,
    decode_limits: DecodeLimits,
) -> list[Outcome]:
    """Every query plugin of ``jobs`` on one stored chunk, in one walk.

    Args:
        jobs: query plugins (:func:`is_query`), each with the limits its child run
            would have (only ``max_result_bytes`` applies here).
        blob: the chunk as stored (Sereal document and checksum postfix).
        key: the chunk's key, for messages.
        decode_limits: what the chunk may decode to (the child's road's).

    Returns:
        One outcome per job, in order.

    Raises:
        UndecodableChunk: the chunk does not verify or decode within ``decode_limits``.
        ValueError: a job is not a query plugin.
    """
    if not jobs:
        return []
    started, cpu_started = time.monotonic(), time.thread_time()
    results, _ = _evaluate(jobs, blob, key, decode_limits)
    outcomes = [
        _outcome(sub, limits, rows) for (sub, limits), rows in zip(jobs, results, strict=True)
    ]
    wall_s = (time.monotonic() - started) / len(jobs)
    cpu_s = (time.thread_time() - cpu_started) / len(jobs)
    for outcome in outcomes:
        outcome.wall_s, outcome.cpu_s = wall_s, cpu_s
    return outcomes


def read_queries(
    jobs: Sequence[tuple[Substream, Limits]],
    blob: bytes,
    key: str,
    decode_limits: DecodeLimits,
) -> list[RunResult]:
    """As :func:`run_queries`, for a reader: each plugin's result as its stored record
    would give it back, without packing the record where that changes nothing (module).

    Returns:
        One result per job, in order.

    Raises:
        UndecodableChunk, ValueError: as :func:`run_queries`.
    """
    if not jobs:
        return []
    started, cpu_started = time.monotonic(), time.thread_time()
    results, walked = _evaluate(jobs, blob, key, decode_limits)
    read = [
        _read(sub, limits, rows, from_walk, key)
        for (sub, limits), rows, from_walk in zip(jobs, results, walked, strict=True)
    ]
    wall_s = (time.monotonic() - started) / len(jobs)
    cpu_s = (time.thread_time() - cpu_started) / len(jobs)
    return [
        RunResult(sub.name, status, result, error, wall_s, cpu_s)
        for (sub, _), (status, result, error) in zip(jobs, read, strict=True)
    ]


def _evaluate(
    jobs: Sequence[tuple[Substream, Limits]], blob: bytes, key: str, decode_limits: DecodeLimits
) -> tuple[list[Rows], list[bool]]:
    """Every job's rows, in one walk (the reference where the walk does not take the
    chunk or a plan), and for each whether the walk built them."""
    for sub, _ in jobs:
        if sub.plan is None:
            raise ValueError(f"substream {sub.name!r} is a function plugin, not a query")
    caps = tuple(lim.max_result_bytes for _, lim in jobs)
    program = program_for(tuple(sub.plan for sub, _ in jobs if sub.plan is not None), caps)
    plans = program.plans  # rebuilt from their data, once a program
    results: list[Rows | None] = [None] * len(plans)
    walked = _walk(program, blob, key, decode_limits)
    if walked is not None:
        for index, rows in zip(program.native, walked, strict=True):
            results[index] = rows
    from_walk = [rows is not None for rows in results]
    missing = [i for i, rows in enumerate(results) if rows is None]
    if missing:
        fields: list[str] = []
        for i in missing:
            fields += plans[i].fields
        events = decode_chunk(key, blob, decode_limits, compile_fields(fields))
        for i in missing:
            results[i] = evaluate(plans[i], events)
    return [rows if rows is not None else [] for rows in results], from_walk


def _walk(
    program: Program, blob: bytes, key: str, limits: DecodeLimits
) -> list[Rows | None] | None:
    """The compiled walk over the stored chunk, or None where it does not take it
    (then the reference decodes the chunk, and raises what the child's decode raises)."""
    if not program.native:
        return None
    try:
        document = bytes(verify_postfix(blob, key))
        cap = limits.check(document, len(blob), key)
        layout = read_layout(document)
        buf, pos, base = compression.unframe_body(
            document, layout.protocol, layout.doc_type, layout.body_offset, cap
        )
    except EventStoreError:
        return None
    return evaluate_body(
        program,
        buf,
        pos,
        len(buf),
        base,
        binary=0,  # the utf8 mode: the child's decode
        max_depth=DEFAULT_MAX_DEPTH,
        max_objects=limits.max_decoded_objects,
    )


def _read(
    sub: Substream, limits: Limits, rows: Rows, from_walk: bool, key: str
) -> tuple[Status, Any, str | None]:
    """``(status, result, error)`` of ``rows`` as the stored record gives them back."""
    if from_walk and _surely_fits(sub, limits, rows):
        return "ok", rows, None  # what the record would give back: plain data (module)
    outcome = _outcome(sub, limits, rows)
    if not outcome.ok:
        return outcome.status, None, outcome.error or outcome.kind
    if from_walk:
        return "ok", rows, None  # within the cap, measured exactly
    try:
        return "ok", read_result(outcome.payload, key=key).result, None
    except (EventStoreError, ValueError) as e:  # our own record: never seen
        return "error", None, f"unreadable result: {e}"


def _surely_fits(sub: Substream, limits: Limits, rows: Rows) -> bool:
    """Whether the stored record of ``rows`` is within ``max_result_bytes``, without
    compressing it: its record encoded raw and without string dedupe, plus the
    postfix, bounds the stored one (a body is compressed only when that is strictly
    shorter, ``compression.compress_body``; a string becomes a COPY only when that is
    strictly shorter, ``sereal_codec/DESIGN.md``). False when over the bound or not
    encodable: then the record itself is packed and measured."""
    record = {"status": "ok", "substream": sub.name, "version": sub.version, "result": rows}
    try:
        raw = sereal.encode(record, compress=None, dedupe_strings=False)
    except MemoryError:
        raise
    except Exception:  # the packed record then says why, in the child's words
        return False
    return len(raw) + postfix_length() <= limits.max_result_bytes


def _outcome(sub: Substream, limits: Limits, rows: Rows) -> Outcome:
    """The outcome the child would report for ``rows`` (``child._run_job``)."""
    try:
        payload = ok_value(sub.name, sub.version, rows)
    except MemoryError:
        raise
    except Exception as e:  # rows hold only codec values; kept as the child's kind
        text = f"result is not Sereal-encodable: {e}"
        return Outcome(sub.name, "unencodable", text.encode(), error=f"unencodable: {text}")
    if len(payload) > limits.max_result_bytes:
        text = (
            f"result of {len(payload)} bytes is over the limit of {limits.max_result_bytes} bytes"
        )
        return Outcome(sub.name, "too_large", text.encode(), error=f"too_large: {text}")
    return Outcome(sub.name, "ok", payload)
