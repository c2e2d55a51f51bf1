"""Every default of the companion, documented, in one place (the rq/defaults.py pattern).

The settings file, environment variables (``RIAK_EVENTS_COMPANION_<OPTION>``) and CLI
flags override these; nothing else reads them.
"""

from __future__ import annotations

from typing import Final

from substreams import defaults as platform

#: Where the companion serves. Loopback by default (safe on a dev machine); in a cluster the
#: hook on whichever node coordinated a write posts here, so listen on the node's address
#: and list the Riak nodes as peers. Port 5000 is the Erlang hook's default too.
LISTEN = "127.0.0.1:5000"
#: gunicorn worker processes (pre-forked). The seed ran "around 10 forks" per node.
WORKERS = 2
#: Chunk-processing threads per worker process; each runs the sandboxed children of one
#: chunk at a time.
THREADS = 2
#: "chunk": one sandboxed child per chunk runs the substreams in turn, each with its own
#: deadline, memory limit and result cap; a run that kills or times out its child costs
#: only itself (the runs after it go to a fresh child); each run gets its own list of
#: the events, but the event dicts and module state are shared (plugins must not mutate
#: them). One fork and one copy-on-write of the events per chunk instead of per
#: substream: about half the CPU of "substream" (bench/companion_bench.py).
#: "substream": one child per substream and chunk (nothing shared between plugins).
ISOLATION: Final = "chunk"
#: With isolation "chunk", a chunk thread takes up to this many chunks from the inbox at
#: once while the other threads still have some to take, and the worker's fork server
#: runs them in one child (substreams/batch.py): one fork, setup and exit, and one warm
#: heap for all of them (a fresh child pays a page fault for every page it builds in).
#: Children's CPU per chunk (bench chunks): 18.2 ms one per child, 15.0 two, 13.0 four.
BATCH_CHUNKS: Final = 4
#: Quarantine (companion/quarantine.py): a substream that has not yet run ok in this
#: worker (new, or a new version), or that failed since its last ok run on the node,
#: runs apart: its own child, one chunk at a time per worker, on a thread of its own,
#: so the shared child of the others is never killed or held up because of it. False:
#: every matching substream of a chunk runs in the shared child (the old scheduling).
QUARANTINE = True
#: Chunks that may wait for a failing substream's run, per worker; more are marked
#: ``shed`` with a reason starting ``quarantined:``. Each holds the chunk's decoded events.
QUARANTINE_DEPTH = 4
#: A chunk thread waits this long at most (and never over half of ``max_wait_s``) for
#: the first runs of plugins new to its worker: as long as a good one's run, as
#: before, but a new plugin that hangs holds it only this long, once.
QUARANTINE_NEW_WAIT_S = 1.0
#: Ok runs in a row, apart, that bring back to the shared child a substream that
#: failed in this worker (one ok run for a substream that never failed here).
QUARANTINE_REJOIN_AFTER = 3
#: Added to the nice value of a quarantined run's child: a plugin that keeps looping
#: gets the CPU the others leave.
QUARANTINE_NICE = 10
#: Sandboxed children alive at once per chunk.
MAX_PARALLEL = 4
#: Chunks waiting per worker process: the node's inbox, shared by every worker (any free
#: chunk thread of any worker takes the next chunk), holds ``queue_max * workers``.
#: Above this, arrivals are shed at once.
QUEUE_MAX = 64
#: Concurrent result writes per chunk thread: a chunk's results are stored at once.
RESULT_WRITERS = 8
#: A chunk that cannot start within this many seconds of arrival is shed: its results
#: would be late anyway and consumers will have fallen back.
MAX_WAIT_S = 2.0
#: Peers (IP addresses) allowed to POST key groups.
PEERS = ("127.0.0.1", "::1")
#: Peers allowed to GET the status page and ``/v1/status`` (they show the node's
#: substreams, errors and, unless ``hide_addresses``, its Riak and ZooKeeper addresses),
#: and, unless ``metrics_peers`` says otherwise, ``/metrics``. ``/healthz`` and
#: ``/readyz`` are open to anyone: a probe must work from wherever the orchestrator is,
#: and they show no addresses.
STATUS_PEERS = ("127.0.0.1", "::1")
#: Consecutive failed runs (error, timeout, killed) after which a substream is disabled
#: on this node until a new version arrives or an operator re-enables it.
DISABLE_AFTER = 5
#: Platform caps on every plugin's declared limits: the platform's defaults, defined once
#: in substreams (``substreams.defaults.CAP_*``, ``substreams.protocol.DEFAULT_CAP``), so
#: the consumer's fallback, the backfill and ``substream test`` give the same limits.
TIMEOUT_CAP_S = platform.CAP_TIMEOUT_S
MEMORY_CAP_MB = platform.CAP_MEMORY_MB
MAX_RESULT_BYTES_CAP = platform.CAP_MAX_RESULT_BYTES
#: What one chunk may decode to (its decompressed body), at most this many bytes and at
#: most this many times its stored size, but always 16 MiB (eventstore.blob.DecodeLimits:
#: our writers keep chunk bodies under 8 MiB; realistic 500 KB chunks hold ~1.3 MB).
#: A chunk over it is not decoded: each matching substream gets an ``error`` result
#: whose text starts with ``too_large:``.
MAX_DECODED_BYTES = 64 * 2**20
MAX_DECODED_RATIO = 64.0
#: Seconds between checks of the plugin directories for changes (hot reload).
RELOAD_INTERVAL_S = 1.0
#: Seconds between writes of a worker's statistics for the status page.
STATUS_INTERVAL_S = 1.0
#: Time-series resolution and length of the status page's plots.
SERIES_STEP_S = 10
SERIES_POINTS = 60
#: Durations kept per substream for p50/p99.
RECENT_RUNS = 512
#: Largest accepted POST /v1/keys body, bytes (413 as soon as more arrives), and most
#: keys in one group.
MAX_BODY_BYTES = 1024 * 1024
MAX_KEYS = 10000
#: State directory: metrics of the workers, status snapshots, disabled markers,
#: plugins received from the registry.
STATE_DIR = "var/companion"
#: gunicorn: seconds to finish requests on shutdown; worker silent-timeout.
GRACEFUL_TIMEOUT_S = 10
WORKER_TIMEOUT_S = 30
#: ZooKeeper (empty hosts: no ZooKeeper), the root of our znodes.
ZK_HOSTS = ""
ZK_ROOT = "/riak-events"
#: ZooKeeper session timeout asked for, seconds (the server clamps it to its own
#: bounds): how long the live znode outlives a companion that stopped answering.
ZK_SESSION_TIMEOUT_S = 10.0
#: Reconnection to ZooKeeper: first delay and most delay between tries, seconds; it
#: never gives up (a companion started while ZooKeeper is down joins when it returns).
ZK_RETRY_DELAY_S = 0.2
ZK_RETRY_MAX_DELAY_S = 5.0
#: Seconds between updates of the live-node znode's health (and reads of the other
#: nodes' znodes, for the status page's version comparison).
ZK_HEALTH_INTERVAL_S = 10.0
#: Auditor: how often and how far back it looks for chunks without results (interval
#: 0: off), and most chunk keys it checks per round (one GET per key and substream at
#: most). On by default: the hook delivers at most once.
AUDIT_INTERVAL_S = 10.0
AUDIT_LOOKBACK_S = 120
AUDIT_MAX_KEYS = 2000
#: Keys checked per round, at least, even while the inbox is busy (then the round is
#: cut to this: the auditor yields to the hook's work but never stops progressing).
AUDIT_MIN_KEYS = 200
#: Most seconds one round spends (it stops between two epochs; at least one is visited).
AUDIT_ROUND_MAX_S = 5.0
#: Epochs older than this are given up by the persisted cursor, counted
#: (``companion_audit_given_up_total``) and logged; far above any store outage, far
#: below the buckets' expiry (days). ``audit_lookback_s`` is the window visited at
#: every round (newest first); the cursor confirms each epoch once it is older, and a
#: node without a cursor starts there.
AUDIT_HORIZON_S = 3600

#: glibc's malloc in a worker (``heap.py``): blocks up to this size come from the
#: threads' arenas instead of an mmap of their own (a chunk's blob, ~0.4 MB, and its
#: decompressed body, ~1-1.5 MB, were mapped, touched and unmapped chunk after chunk)...
MALLOC_MMAP_THRESHOLD_BYTES: Final = 4 << 20
#: ...and an arena keeps up to this much free memory at its top instead of handing it
#: back at once (then faulting it in again for the next chunk). The price: up to this
#: much more resident memory per arena in use (the chunk threads').
MALLOC_TRIM_THRESHOLD_BYTES: Final = 8 << 20
