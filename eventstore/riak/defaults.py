"""Every default of the Riak client, documented in one place."""

from __future__ import annotations

from typing import TypedDict


class ReadOptions(TypedDict, total=False):
    """Riak read options given to :meth:`RiakClient.get` as keywords."""

    notfound_ok: bool
    basic_quorum: bool


#: Socket timeout of one HTTP request (connect, send, each read), seconds.
TIMEOUT_S = 10.0
#: Connect timeout, seconds: a dead node fails fast and the retry moves on.
CONNECT_TIMEOUT_S = 2.0
#: Idle keep-alive connections kept per node.
MAX_IDLE_PER_NODE = 32
#: Requests in flight at once for multi_get / multi_put (threads of the client's pool).
CONCURRENCY = 16
#: After a node fails, other nodes are preferred for this long.
NODE_COOLDOWN_S = 2.0

#: Retry: tries per request (first try included), first delay, growth, cap, jitter.
RETRY_MAX_TRIES = 4
RETRY_DELAY_S = 0.01
RETRY_BACKOFF = 2.0
RETRY_MAX_DELAY_S = 1.0
#: Each delay is multiplied by a random factor in [1 - jitter, 1 + jitter].
RETRY_JITTER = 0.5
#: No retry starts after this many seconds since the first try.
RETRY_DEADLINE_S = 15.0

USER_AGENT = "riak-events"

#: Read options for a key whose absence must be confirmed: a value from any replica is
#: taken at once, but "not found" only when a quorum of replicas says so. With the
#: design's bucket props (r=1, notfound_ok=true) Riak believes the first "not found", and
#: while a primary is down its empty fallback replica answers first: on a real 3-node
#: cluster with one node killed, a whole dc's epochs vanished for readers that way.
#: Used for metadata and chunk reads (consumer, Spark, companion, the relocator's merge).
CONFIRMED_ABSENCE: ReadOptions = {"notfound_ok": False, "basic_quorum": True}
