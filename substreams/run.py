"""The production road from a chunk to its substreams' outcomes: the chunk's events as
every caller decodes them, and the run of decoded events narrowed per declaration.

Every caller reaches the sandbox (:mod:`substreams.sandbox`) through what is here or
through the fork server (:mod:`substreams.forkserver`, whose child's loader is
:func:`decode_chunk`):

================================  =========================================================
caller                            road
================================  =========================================================
companion, shared child           fork server ``"chunk"`` request -> ``batch.run_batch`` ->
                                  ``run_substreams(loader=decode_chunk)``
companion, in its own process     ``run_substreams(loader=decode_chunk)`` (quarantine lanes,
                                  isolation ``substream``)
consumer fallback (default)       fork server ``"chunk"`` request, as the companion's
consumer fallback, caller-forked  :func:`run_projected` on the caller's decoded events
backfill                          ``run_substreams`` on the plugin's fields
``substream test``                :func:`run_projected` (``substreams/harness.py``)
================================  =========================================================

Query plugins (``Substream.plan`` set) take the native road instead
(:mod:`substreams.query.run`: no child). The caps are :data:`DEFAULT_CAP`
(``substreams.defaults.CAP_*``) unless a caller is told others.

This module is production code: the author's harness (``substreams/harness.py``) builds
on it, never the reverse (``tests/unit/substreams/test_one_road.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from eventstore.blob import DecodeLimits, unpack_blob
from eventstore.errors import BlobTooLarge, EventStoreError
from sereal_codec.projection import Tree, project_events
from substreams.api import Context, Event, Substream
from substreams.errors import SubstreamError
from substreams.protocol import DEFAULT_CAP, Isolation, Limits, Outcome
from substreams.sandbox import SandboxUnavailable, run_substreams

__all__ = ["DEFAULT_CAP", "UndecodableChunk", "decode_chunk", "run_projected"]


class UndecodableChunk(SubstreamError):
    """A chunk that cannot be decoded; the message is what every run's result says,
    starting with ``chunk_unreadable:`` or ``too_large:``."""


def decode_chunk(key: str, blob: bytes, limits: DecodeLimits, fields: Tree | None) -> list[Event]:
    """The chunk's events, verified and decoded (the loader of a child: the companion's,
    in its own child or in a fork server's, and the consumer's in the fork server's).

    Args:
        key: the chunk's key, for messages.
        blob: the stored chunk.
        limits: the decode limits (checked from the header first; the decompressor
            and the objects built are bounded by them).
        fields: the fields of each event to keep (``sereal_codec/projection.py``);
            None: all.

    Raises:
        UndecodableChunk: over the decode limits (or out of memory decoding), corrupt,
            or not an array of events.
    """
    paths = None if fields is None else list(_paths(fields, ()))
    try:
        events = unpack_blob(blob, key=key, limits=limits, fields=paths)
    except BlobTooLarge as e:
        raise UndecodableChunk(f"too_large: {e}") from e
    except EventStoreError as e:
        raise UndecodableChunk(f"chunk_unreadable: {e}") from e
    except MemoryError:
        raise UndecodableChunk(
            f"too_large: {key}: out of memory decoding {len(blob)} bytes"
        ) from None
    if not isinstance(events, list):
        raise UndecodableChunk(
            f"chunk_unreadable: {key} holds a {type(events).__name__}, not an array of events"
        )
    # Elements are whatever the producers sent; plugins treat them defensively
    # (substreams.helpers), so they are passed on as they are.
    return events


def _paths(tree: Tree, prefix: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """The fields of a compiled tree, as tuples of keys (a key may hold a dot)."""
    for key, sub in tree.items():
        if sub is None:
            yield (*prefix, key)
        else:
            yield from _paths(sub, (*prefix, key))


def run_projected(
    substreams: Sequence[Substream],
    events: list[Event],
    ctx: Context,
    *,
    cap: Limits | None = None,
    isolation: Isolation = "substream",
    max_parallel: int = 4,
    decoded_with: Tree | None = None,
) -> list[Outcome]:
    """:func:`~substreams.sandbox.run_substreams` with each substream given the events
    narrowed to its declared fields (``Substream.projection``; all of them when it
    declares none), as the companion gives them.

    Substreams that declare the same fields share one projected list and one call;
    the projection is made here, once per distinct declaration.

    Args:
        substreams: what to run (the caller has matched them to the chunk).
        events: the chunk's decoded events: whole, or built only with the fields of
            ``decoded_with``.
        ctx, cap, isolation, max_parallel: as :func:`~substreams.sandbox.run_substreams`.
        decoded_with: the projection ``events`` were decoded with (None: whole), e.g.
            :func:`~substreams.api.union_fields` of ``substreams`` compiled: the
            substreams declaring exactly that get ``events`` as they are.

    Returns:
        One outcome per substream, in the order given.

    Raises:
        SandboxUnavailable: a child could not be started; its ``outcomes`` hold every
            run that had ended, in the order given.
        ValueError: a substream wants every field of events decoded with fewer.
    """
    if decoded_with is not None and any(s.fields is None for s in substreams):
        raise ValueError("events decoded with some fields cannot give a substream all of them")
    groups: dict[str, list[int]] = {}
    for i, sub in enumerate(substreams):
        groups.setdefault(json.dumps(sub.projection, sort_keys=True), []).append(i)
    outcomes: list[Outcome | None] = [None] * len(substreams)
    for indices in groups.values():
        group = [substreams[i] for i in indices]
        tree: Tree | None = group[0].projection
        try:
            ran: Sequence[Outcome | None] = run_substreams(
                group,
                events if tree == decoded_with else project_events(events, tree),
                ctx,
                cap=cap,
                isolation=isolation,
                max_parallel=max_parallel,
            )
        except SandboxUnavailable as e:
            ran = e.outcomes or [None] * len(group)
            for i, outcome in zip(indices, ran, strict=True):
                outcomes[i] = outcome
            raise SandboxUnavailable(str(e), outcomes) from e
        for i, outcome in zip(indices, ran, strict=True):
            outcomes[i] = outcome
    done = [o for o in outcomes if o is not None]
    assert len(done) == len(substreams), "run_substreams answers every substream"
    return done
