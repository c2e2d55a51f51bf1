"""The client-side fallback's run: plugins on one chunk, in the companion's sandbox
(a query plugin: in the caller, natively).

Three ways, the same results. A query plugin (``Substream.plan`` set) is data, not
code: :func:`run_native` evaluates it here, in the caller's process, on the chunk's
verified stored bytes (one walk of the compiled core, the reference evaluator where
the walk does not take the chunk: :mod:`substreams.query.run`), without the fork
server or a child, and gives the result the record the child would have packed gives
back, without packing it and reading it back where that changes nothing
(:func:`substreams.query.run.read_queries`: the walk's rows, handed over). A function
plugin runs in the sandbox, two ways: :func:`run_served` (the default of
``EventsClient`` and the Spark source) hands the chunk's verified stored bytes to the
client's fork server (:mod:`consumer_lib.forkserver`: the one fork-server client,
:class:`substreams.forkserver.ForkServer`, sending the companion's own ``"chunk"``
request), a small process that forks the per-chunk child, which decodes the chunk as
the companion's child does (:func:`substreams.run.decode_chunk`) and runs the plugins;
:func:`run_fallback`
forks the child from the caller after the caller decoded the chunk (a plugin the server
cannot load itself; a caller without a server). What follows holds for both; forking
from the caller is what costs more the larger the caller is.

The consumer library, the Spark substream source (through
:class:`~consumer_lib.substream.SubstreamReader`) and the backfill job never call plugin
code in their own process: :func:`run_fallback` hands the decoded chunk to
:func:`substreams.sandbox.run_substreams`, the very function the companion calls. Each
plugin sees the events narrowed to the fields it declares (``@substream(fields=...)``;
:func:`substreams.run.run_projected` here, the server's child as the companion's), as
in the companion and in ``substream test``, so a result is the same wherever it is
computed, and a plugin reading a field it did not declare fails the same way
everywhere. One forked child per chunk runs every plugin asked for, in turn; each run
has the plugin's declared limits, lowered to the platform's default caps
(:data:`substreams.protocol.DEFAULT_CAP`, the companion's defaults): a wall-clock
deadline (SIGALRM, then SIGKILL of the child's process group ``kill_grace_s`` later),
``RLIMIT_AS`` and ``RLIMIT_CPU``, and the result cap. The child packs the result exactly
as the companion stores it; the parent decodes it as a server result is decoded, so a
fallback result equals the stored one.

Forking from a process with threads (the consumer's prefetch pool, Spark's Python
worker, pyarrow's pools): only the forking thread exists in the child, which runs
nothing but the plugin and the result's encoding, then ``os._exit`` (no atexit, no
flush of inherited buffers, no finalizers). CPython re-creates its own locks after a
fork (the GIL, the import lock, ``logging``'s), glibc its allocator's. What remains: a
lock held by another thread at the instant of the fork stays held in the child (e.g.
``sys.stdout``'s buffer while another thread prints, or a C library's own lock the
plugin then takes); a plugin that blocks on one blocks only its child, which the
deadline kills: the run ends ``timeout``, never a hang. Each call must run its child
from one thread (the sandbox's rule); any number of threads may each call. The caller
must leave SIGCHLD at its default disposition (``SIG_IGN`` makes the kernel reap the
child before the sandbox can: every run is then an ``error`` naming ECHILD; pyspark's
worker restores the default before a task runs) and not reap children it did not start
(``waitpid(-1)``).

Failure semantics: never raises for anything a plugin does; a run that fails is a
:class:`FallbackRun` whose ``status`` is ``timeout``, ``killed`` or ``error`` and whose
``error`` says why (the sandbox's classification: ``timeout:``, ``memory:``,
``killed:``, ``exception:``, ``too_large:``, ``unencodable:``). A sandbox that cannot be
started or reaped (no fork, no pipe, no child to wait for: the OS refused) is an
``error`` run naming the OS error.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from consumer_lib.errors import ConsumerError
from eventstore.blob import DecodeLimits
from eventstore.errors import EventStoreError
from eventstore.names import ChunkKey
from substreams.api import Context, Event, Substream
from substreams.forkserver import ForkServer, ForkServerUnavailable
from substreams.protocol import DEFAULT_CAP, Limits, Outcome
from substreams.query.run import read_queries
from substreams.results import RunResult, read_result
from substreams.run import UndecodableChunk, run_projected

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_CAP",
    "FallbackRun",
    "UndecodedChunk",
    "run_fallback",
    "run_native",
    "run_served",
]


class UndecodedChunk(ConsumerError):
    """The sandboxed child could not decode the chunk (its codec raised): the caller
    reads it itself to raise the store's own error (``ChunkUnreadable``...)."""


#: One plugin's run on one chunk here, sandboxed or native (the fallback's name for
#: :class:`substreams.results.RunResult`).
FallbackRun = RunResult


def run_fallback(
    plugins: Sequence[Substream],
    events: list[Event],
    key: ChunkKey,
    *,
    cap: Limits | None = DEFAULT_CAP,
) -> list[FallbackRun]:
    """Run ``plugins`` on one chunk's decoded events in one sandboxed child.

    Args:
        plugins: what to run (each already known to read ``key``'s type/subtype).
        events: the chunk's fully decoded events (shared with the child copy-on-write;
            each plugin gets them narrowed to its declared fields, or its own shallow
            copy of the list when it declares none).
        key: the chunk, for the plugins' context.
        cap: platform caps lowering each plugin's declared limits (None: the declared
            limits as they are); the companion's defaults unless given.

    Returns:
        One run per plugin, in order.
    """
    if not plugins:
        return []
    try:
        outcomes = run_projected(
            plugins, events, Context.of(key), cap=cap, max_parallel=1, isolation="chunk"
        )
    except OSError as e:  # fork or pipe refused (EAGAIN, EMFILE, ENOMEM); ECHILD
        log.error("consumer: key=%s: the fallback sandbox failed: %s", key, e)
        return [FallbackRun(p.name, "error", error=f"sandbox: {e}") for p in plugins]
    return [_run_of(p, o, key) for p, o in zip(plugins, outcomes, strict=True)]


def run_served(
    server: ForkServer,
    plugins: Sequence[Substream],
    value: bytes,
    key: ChunkKey,
    decode_limits: DecodeLimits,
    *,
    cap: Limits | None = DEFAULT_CAP,
) -> list[FallbackRun]:
    """Run ``plugins`` on one stored chunk in one child of the fork server.

    Args:
        server: the client's fork server (started on first use).
        plugins: what to run (each one :meth:`ForkServer.can_run`).
        value: the chunk's stored bytes, checksum verified (``Store.chunk_blob``).
        key: the chunk.
        decode_limits: what the chunk may decode to (``Store.decode_limits``).
        cap: as :func:`run_fallback`.

    Returns:
        One run per plugin, in order; every plugin ``error`` when the server failed
        (started, died, late) or the child died or overran decoding the chunk; a plugin
        the server could not load (its file changed) ``error`` naming why.

    Raises:
        UndecodedChunk: the chunk's bytes do not decode to a list of events (the
            child's loader refused them: ``Outcome.loader_raised``).
    """
    if not plugins:
        return []
    try:
        served = server.run_chunks(
            [(plugins, value, key)], decode_limits=decode_limits, cap=cap,
            where=f"consumer: key={key}",
        )  # fmt: skip
    except ForkServerUnavailable as e:
        return [FallbackRun(p.name, "error", error=f"sandbox: {e}") for p in plugins]
    (chunk,) = served.chunks
    unloaded = next((o for o in chunk.outcomes if o is not None and o.kind == "unreadable"), None)
    if unloaded is not None and unloaded.loader_raised:
        raise UndecodedChunk(
            f"chunk does not decode: {unloaded.error}",
            epoch=key.epoch,
            dc=key.dc,
            key=key.format(),
        )
    if unloaded is not None:  # the child died or overran decoding it
        error = f"sandbox: decoding the chunk: {unloaded.error}"
        return [FallbackRun(p.name, "error", error=error, wall_s=unloaded.wall_s) for p in plugins]
    runs = []
    for i, (plugin, outcome) in enumerate(zip(plugins, chunk.outcomes, strict=True)):
        if i in chunk.refused:  # its file changed since this process loaded it
            runs.append(FallbackRun(plugin.name, "error", error=f"exception: {chunk.refused[i]}"))
        elif outcome is None:  # no child could be started for it
            error = f"sandbox: fork server: {served.unavailable}"
            runs.append(FallbackRun(plugin.name, "error", error=error))
        else:
            runs.append(_run_of(plugin, outcome, key))
    return runs


def run_native(
    plugins: Sequence[Substream],
    value: bytes,
    key: ChunkKey,
    decode_limits: DecodeLimits,
    *,
    cap: Limits | None = DEFAULT_CAP,
) -> list[FallbackRun]:
    """Run query plugins on one stored chunk here, natively: no fork server, no child.

    Args:
        plugins: query plugins (``plan`` set), each reading ``key``'s type/subtype.
        value, key, decode_limits, cap: as :func:`run_served` (of the limits, only
            ``max_result_bytes`` applies: a plan cannot loop nor allocate beyond its
            rows).

    Returns:
        One run per plugin, in order; the result (equal in value and type), status and
        error the sandboxed child's record gives, the record itself neither packed nor
        read back where the rows are plain data within the cap.

    Raises:
        UndecodedChunk: the chunk's bytes do not verify or decode within the limits.
    """
    jobs = [(p, Limits.of(p, cap)) for p in plugins]
    try:
        read = read_queries(jobs, value, key.format(), decode_limits)
    except UndecodableChunk as e:
        raise UndecodedChunk(
            f"chunk does not decode: {e}", epoch=key.epoch, dc=key.dc, key=key.format()
        ) from e
    return read


def _run_of(plugin: Substream, outcome: Outcome, key: ChunkKey) -> FallbackRun:
    wall_s, cpu_s = outcome.wall_s, outcome.cpu_s
    if not outcome.ok:
        error = outcome.error or outcome.kind
        return FallbackRun(plugin.name, outcome.status, None, error, wall_s, cpu_s)
    try:
        # The companion's stored form, decoded as a server result is: the same value.
        result = read_result(outcome.payload, key=key.format()).result
    except (EventStoreError, ValueError) as e:
        return FallbackRun(plugin.name, "error", None, f"unreadable result: {e}", wall_s, cpu_s)
    return FallbackRun(plugin.name, "ok", result, None, wall_s, cpu_s)
