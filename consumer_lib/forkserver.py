"""The consumer's fallback's fork server: a small helper process, started once per client
on the first fallback, that forks the sandboxed child of each chunk
(:mod:`substreams.forkserver`, shared with the companion's workers;
:mod:`substreams.forkserver_process` is the server).

Why: forking the caller costs its page tables and a copy-on-write fault for every page
it writes afterwards, so a fallback forked from a large caller (a Spark executor, a
consumer holding data) costs ~5 ms per chunk at 37 MB and ~17 ms at 200 MB
(``consumer_lib/DESIGN.md``); forking the server costs the same whatever the caller's
size, and the chunk is decoded in the child, not in the caller (whose decode held the
GIL).

    server = ForkServer()                                   # no process yet
    reply = server.run(plugins, blob.value, key, decode_limits)
    server.close()                                          # the process and its children end

Each request's deadline: every plugin's ``timeout_s`` plus its kill grace, the decode's,
and a margin (the server's own sandbox kills a late child well before).

Failure semantics: :meth:`ForkServer.run` raises :class:`ForkServerFailed` (never
hangs) when the server cannot be started, dies during the request (killed, crashed),
does not answer within the deadline (then it is killed), or refuses (no fork, no pipe);
the caller marks the chunk ``error`` with that reason. The next request starts a new
server. Nothing a plugin does reaches the server or the caller.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any, ClassVar

from prometheus_client import Counter

from consumer_lib.errors import ConsumerError
from eventstore.blob import DecodeLimits
from eventstore.names import ChunkKey
from substreams import forkserver
from substreams.api import Substream
from substreams.forkserver_process import DECODE_LIMITS, outcome_from
from substreams.protocol import Limits
from substreams.sandbox import Outcome

log = logging.getLogger(__name__)

__all__ = ["SERVER_STARTS_TOTAL", "ForkServer", "ForkServerFailed", "Reply"]

SERVER_STARTS_TOTAL = Counter(
    "consumer_fallback_server_starts_total",
    "Fork servers of the client-side fallback started (a restart after a death counts too)",
)

#: Allowance per request on top of the runs' own deadlines (server and child setup), s.
_MARGIN_S = 10.0


class ForkServerFailed(ConsumerError):
    """The fork server could not run a request: not started, died, late, or refused.
    Nothing the plugin did; the next request starts a new server."""

    retriable: ClassVar[bool] = True


@dataclasses.dataclass(frozen=True)
class Reply:
    """What the server says about one chunk.

    Attributes:
        decode: how the child's decode of the chunk ended (its ``error`` says why not).
        outcomes: one per plugin asked for, in order (each plugin's own run).
    """

    decode: Outcome
    outcomes: list[Outcome]


class ForkServer(forkserver.ForkServer):
    """The fallback's fork server (module docstring); lazy: no process until a run.

    Args:
        max_connections: requests in flight at once (more callers wait for one).
    """

    def __init__(self, *, max_connections: int = 4) -> None:
        super().__init__(
            "the fallback's fork server",
            max_connections=max_connections,
            on_start=SERVER_STARTS_TOTAL.inc,
        )

    def run(
        self,
        plugins: Sequence[tuple[Substream, Limits]],
        value: bytes,
        key: ChunkKey,
        decode_limits: DecodeLimits,
    ) -> Reply:
        """Decode one stored chunk and run ``plugins`` on it in one sandboxed child of
        the server.

        Args:
            plugins: each with its limits (already lowered to the caller's caps).
            value: the chunk's stored bytes, checksum verified by the caller.
            key: the chunk.
            decode_limits: what the chunk may decode to (the caller's store's).

        Returns:
            The decode's outcome and each plugin's.

        Raises:
            ForkServerFailed: see the module docstring.
        """
        header = {
            "plugins": [
                {
                    "origin": sub.origin,
                    "name": sub.name,
                    "version": sub.version,
                    "limits": [
                        lim.timeout_s,
                        lim.memory_mb,
                        lim.max_result_bytes,
                        lim.kill_grace_s,
                    ],
                }
                for sub, lim in plugins
            ],
            "ctx": [key.epoch, key.dc, key.type, key.subtype, key.chunk],
            "decode_limits": dataclasses.asdict(decode_limits),
        }
        deadline_s = _MARGIN_S + sum(
            lim.timeout_s + lim.kill_grace_s for lim in [DECODE_LIMITS, *(pl[1] for pl in plugins)]
        )
        where: dict[str, Any] = {"epoch": key.epoch, "dc": key.dc, "key": key.format()}
        try:
            reply, payloads = self.request(header, [value], deadline_s, f"consumer: key={key}")
        except forkserver.ForkServerUnavailable as e:
            raise ForkServerFailed(str(e), **where) from e
        if "unavailable" in reply:
            raise ForkServerFailed(f"fork server: {reply['unavailable']}", **where)
        outcomes = [
            outcome_from(sub.name, o, p)
            for (sub, _), o, p in zip(plugins, reply["outcomes"], payloads, strict=True)
        ]
        decode = outcome_from("decode", reply["decode"], reply.get("decode_message", "").encode())
        return Reply(decode, outcomes)
