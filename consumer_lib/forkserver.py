"""The consumer's fallback's fork server: :class:`substreams.forkserver.ForkServer`, the one
client of the one fork-server protocol (shared with the companion's workers;
:mod:`substreams.forkserver_process` is the server), named and counted as this
library's.

Why a fork server (``consumer_lib/DESIGN.md``): forking the caller costs its page
tables and a copy-on-write fault for every page it writes afterwards, so a fallback
forked from a large caller (a Spark executor, a consumer holding data) costs ~5 ms per
chunk at 37 MB and ~17 ms at 200 MB; forking the server costs the same whatever the
caller's size, and the chunk is decoded in the child, not in the caller (whose decode
held the GIL).

    server = fallback_server()                              # no process yet
    runs = consumer_lib.fallback.run_served(server, plugins, blob.value, key, limits)
    server.close()                                          # the process and its children end

:class:`ForkServer` is that server under the name callers have always constructed
(``ForkServer(max_connections=...)``: it adds nothing but the label and the metric);
its :meth:`ForkServer.run` is the old per-plugin-limits call, kept for callers not yet
moved to :func:`consumer_lib.fallback.run_served` or
:meth:`substreams.forkserver.ForkServer.run_chunks`.

Failure semantics: as :mod:`substreams.forkserver`; :meth:`ForkServer.run` raises
:class:`ForkServerFailed` where that raises ``ForkServerUnavailable``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

from prometheus_client import Counter

from consumer_lib.errors import ConsumerError
from eventstore.blob import DecodeLimits
from eventstore.names import ChunkKey
from substreams import forkserver
from substreams.api import Substream
from substreams.protocol import Kind, Limits, Outcome

__all__ = [
    "LABEL",
    "SERVER_STARTS_TOTAL",
    "ForkServer",
    "ForkServerFailed",
    "Reply",
    "fallback_server",
]

SERVER_STARTS_TOTAL = Counter(
    "consumer_fallback_server_starts_total",
    "Fork servers of the client-side fallback started (a restart after a death counts too)",
)
#: How the server is named in log messages.
LABEL = "the fallback's fork server"


def fallback_server(*, max_connections: int = 4) -> forkserver.ForkServer:
    """The client's fork server, lazy: no process until a run.

    Args:
        max_connections: requests in flight at once (more callers wait for one).
    """
    return forkserver.ForkServer(
        LABEL, max_connections=max_connections, on_start=SERVER_STARTS_TOTAL.inc
    )


class ForkServerFailed(ConsumerError):
    """The fork server could not run a request: not started, died, late, or refused.
    Nothing the plugin did; the next request starts a new server."""

    retriable: ClassVar[bool] = True


@dataclasses.dataclass(frozen=True)
class Reply:
    """What :meth:`ForkServer.run` says about one chunk.

    Attributes:
        decode: how the child's decode of the chunk went: ``ok``, or ``exception`` when
            the decoder refused its bytes, or how the child died decoding (its
            ``error`` says why).
        outcomes: one per plugin asked for, in order (each plugin's own run).
    """

    decode: Outcome
    outcomes: list[Outcome]


class ForkServer(forkserver.ForkServer):
    """:class:`substreams.forkserver.ForkServer` labelled and counted for this library
    (``consumer_fallback_server_starts_total``); lazy: no process until a run.

    Args:
        max_connections: requests in flight at once (more callers wait for one).
    """

    def __init__(self, *, max_connections: int = 4) -> None:
        super().__init__(LABEL, max_connections=max_connections, on_start=SERVER_STARTS_TOTAL.inc)

    def run(
        self,
        plugins: Sequence[tuple[Substream, Limits]],
        value: bytes,
        key: ChunkKey,
        decode_limits: DecodeLimits,
    ) -> Reply:
        """Deprecated (:func:`consumer_lib.fallback.run_served`): decode one stored chunk
        and run ``plugins`` on it in one sandboxed child of the server, through
        :meth:`~substreams.forkserver.ForkServer.run_chunks`.

        Args:
            plugins: each with its limits, each ``Limits.of(plugin, some cap)`` (or as
                declared): the request carries the elementwise largest of them as the
                cap, which gives each plugin exactly its own again.
            value: the chunk's stored bytes, checksum verified by the caller.
            key: the chunk.
            decode_limits: what the chunk may decode to.

        Raises:
            ForkServerFailed: the server could not run the request.
        """
        cap = Limits(
            max((lim.timeout_s for _, lim in plugins), default=0.0),
            max((lim.memory_mb for _, lim in plugins), default=0),
            max((lim.max_result_bytes for _, lim in plugins), default=0),
            max((lim.kill_grace_s for _, lim in plugins), default=0.0),
        )
        subs = [sub for sub, _ in plugins]
        try:
            served = self.run_chunks(
                [(subs, value, key)], decode_limits=decode_limits, cap=cap,
                where=f"consumer: key={key}",
            )  # fmt: skip
        except forkserver.ForkServerUnavailable as e:
            raise ForkServerFailed(str(e), epoch=key.epoch, dc=key.dc, key=key.format()) from e
        (chunk,) = served.chunks
        outcomes = [
            Outcome(sub.name, "exception", error=f"exception: {chunk.refused[i]}")
            if i in chunk.refused
            else o or Outcome(sub.name, "killed", error=f"sandbox: {served.unavailable}")
            for i, (sub, o) in enumerate(zip(subs, chunk.outcomes, strict=True))
        ]
        load_cpu_s = sum(o.load_cpu_s for o in outcomes)  # the child's decode
        unloaded = next((o for o in outcomes if o.kind == "unreadable"), None)
        if unloaded is None:
            return Reply(Outcome("decode", "ok", cpu_s=load_cpu_s), outcomes)
        kind: Kind = "exception" if unloaded.loader_raised else "killed"
        return Reply(Outcome("decode", kind, error=unloaded.error, cpu_s=load_cpu_s), outcomes)
