"""Every default of the relocator, documented in one place (rq's ``defaults.py``).

``settings.py`` starts from these, applies the TOML file, then the command-line options
(each of which click also reads from a ``RIAK_EVENTS_RELOCATOR_*`` environment variable).
"""

from __future__ import annotations

#: Where producers send single events over UDP (fire and forget). Empty: no listener.
UDP_LISTEN = "127.0.0.1:5140"
#: Where producers send events over TCP and get acknowledgements. Empty: no listener.
TCP_LISTEN = "127.0.0.1:5141"
#: Prometheus ``/metrics``, ``/status``, ``/healthz`` and ``/readyz``. Empty: no HTTP server.
METRICS_LISTEN = "127.0.0.1:9141"
#: Everything the relocator keeps on disk: the journal and the state store.
DATA_DIR = "var/relocator"
#: Directory where an external aggregator drops whole per-epoch blobs. Empty: none.
SPOOL_DIR = ""

#: This relocator's writer id, part of every chunk number it allocates
#: (``chunk = writer_id * 10**15 + batch_seq * 10**4 + index``): two relocators with
#: different ids can never write the same chunk key. Must be unique among relocators.
WRITER_ID = 0
#: Largest writer id (keeps chunk numbers below 2**63).
WRITER_ID_MAX = 9000
#: Chunk-number arithmetic (see WRITER_ID).
WRITER_STRIDE = 10**15
SEQ_STRIDE = 10**4

#: Seconds after the end of an epoch (epoch + 1) before it is closed and pushed.
GRACE_S = 2.0
#: A group is closed at the latest this long after its first event arrived, whatever its
#: epoch says (a producer clock far in the future must not pin the journal).
MAX_HOLD_S = 10.0
#: How often the coordinator loop runs (close epochs, scan the spool, collect).
TICK_S = 0.2

#: Largest stored chunk (compressed Sereal document + checksum postfix), bytes.
CHUNK_MAX_BYTES = 500_000
#: Compression of stored chunks: "zstd", "zlib", "snappy" or "none".
COMPRESS = "zstd"
#: Largest single event frame accepted at intake, bytes (bigger: dropped, counted).
MAX_EVENT_BYTES = 450_000
#: Largest spool file accepted, bytes (bigger: moved to .rejected/, counted).
MAX_SPOOL_BYTES = 256 * 1024**2

#: The journal rolls to a new segment after this many bytes or seconds; a segment is
#: deleted once every record in it is inside a durable batch.
SEGMENT_MAX_BYTES = 64 * 1024**2
SEGMENT_MAX_S = 1.0
#: Most frames the journal writer takes into one write + fdatasync (group commit).
JOURNAL_BATCH_MAX = 4096
#: Submissions (one per TCP read of up to 1 MiB, or per UDP burst) waiting for the
#: journal writer before intake pushes back (TCP blocks its reader) or drops (UDP).
JOURNAL_QUEUE_MAX = 256
#: Events held in open groups (received, not yet sealed) above which the journal writer
#: pauses: its queue fills, TCP readers block (back-pressure to producers) and UDP
#: drops with reason "overload". Bounds memory when sealing falls behind intake.
MAX_OPEN_EVENTS = 2_000_000
#: A TCP producer's high mark (the number below which every frame of it is held, what
#: recognises its resends) is forgotten this long after its last frame, seconds. A
#: producer resends within seconds of a lost connection; an hour also covers a
#: relocator restart. A producer forgotten and then resending is stored twice.
PRODUCER_IDLE_S = 3600.0
#: Most producers with ids tracked (the least recently seen is forgotten first); about
#: 150 bytes each in memory, 24 in each journal segment's table record.
MAX_PRODUCERS = 100_000
#: fdatasync each group commit. Off only for benchmarks of everything else.
FSYNC = True

#: LMDB map size of the state store (batches waiting to be pushed). Sparse.
STATE_MAP_SIZE_BYTES = 64 * 1024**3

#: Batches pushed in parallel to one cluster; each batch's chunks go through the
#: cluster client's own pool (``[clusters.X] concurrency``).
PUSH_PARALLEL_BATCHES = 4
#: Back-off after a failed push to a cluster, doubling up to the max, seconds.
PUSH_BACKOFF_S = 0.5
PUSH_BACKOFF_MAX_S = 10.0
#: Read-merge-write-verify rounds of one metadata update before giving up (retried later).
METADATA_MAX_ROUNDS = 5

#: Spool work units (files are assigned by crc32(name) % units); with ZooKeeper each
#: unit is owned by one relocator at a time.
SPOOL_UNITS = 8

#: ZooKeeper: root path, session timeout.
ZK_ROOT = "/riak-events/relocator"
ZK_SESSION_TIMEOUT_S = 10.0
