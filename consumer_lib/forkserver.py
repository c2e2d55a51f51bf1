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

Failure semantics: as :mod:`substreams.forkserver`.
"""

from __future__ import annotations

from prometheus_client import Counter

from substreams import forkserver

__all__ = ["LABEL", "SERVER_STARTS_TOTAL", "fallback_server"]

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
