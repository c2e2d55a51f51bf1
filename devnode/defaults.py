"""Every default of the devnode, documented in one place.

The settings loader (``settings.py``) starts from these and applies the TOML config file
and then the command-line options (which click also reads from ``RIAK_EVENTS_DEVNODE_*``
environment variables).
"""

from __future__ import annotations

from typing import Any

#: Where the devnode listens. Loopback only unless the operator says otherwise.
LISTEN = "127.0.0.1:8098"

#: Partitions of the ring of logical nodes (riak_core's ring_creation_size).
RING_SIZE = 64

#: The logical nodes the ring is claimed over, as a fresh 4-node dev cluster names them.
NODES: tuple[str, ...] = (
    "dev1@127.0.0.1",
    "dev2@127.0.0.1",
    "dev3@127.0.0.1",
    "dev4@127.0.0.1",
)

#: The node name the devnode reports as its own in /stats (``nodename``).
NODENAME = NODES[0]

#: LMDB's map size: the largest the store may grow. Sparse; costs nothing until used.
MAP_SIZE_BYTES = 64 * 1024**3

#: Largest value accepted by PUT (Riak's default ``object.size.maximum`` is 50 MB).
MAX_OBJECT_BYTES = 50 * 1024**2

#: Largest bucket or bucket-type props document accepted by PUT. A real one is ~1 KB;
#: the limit only keeps a hostile body out of memory.
MAX_PROPS_BYTES = 1024**2

#: Deepest nesting of arrays and objects in a props document. A real one nests 4 deep
#: (``{"props": {"postcommit": [{"mod": ...}]}}``); deeper is refused with a 400.
MAX_PROPS_DEPTH = 32

#: How long a deleted key answers 404 with ``X-Riak-Deleted`` before it is reaped
#: (Riak's default ``delete_mode`` keeps tombstones 3 seconds).
TOMBSTONE_TTL_S = 3.0

#: How often the background purge of expired objects and old tombstones runs.
PURGE_INTERVAL_S = 30.0

#: Most expired entries removed by one purge transaction (keeps write latency bounded).
PURGE_BATCH = 2000

#: Most queued writes the group-commit writer puts into one LMDB transaction (one fsync).
WRITE_BATCH_MAX = 128

#: The post-commit hook twin: companion path, per-POST timeout, queue and workers.
HOOK_PATH = "/v1/keys"
HOOK_TIMEOUT_S = 2.0
HOOK_QUEUE_MAX = 1024
HOOK_WORKERS = 4

#: The hook's circuit breaker per companion, as the Erlang hook's defaults
#: (deploy/riak/advanced.config): this many consecutive failed POSTs open it ...
HOOK_BREAKER_FAILURES = 5
#: ... and it stays open this long before one probe POST, milliseconds.
HOOK_BREAKER_COOLDOWN_MS = 10_000

#: A postcommit entry whose ``mod`` is this runs the Python twin of the Erlang hook.
HOOK_MODULE = "riak_events_hook"
HOOK_FUNCTION = "postcommit"

#: Where the hook looks up chunk keys' preflists: the events bucket type and bucket.
HOOK_DATA_BUCKET_TYPE = "events"
HOOK_DATA_BUCKET = "events"

#: Riak's built-in defaults for the ``default`` bucket type (plain ``/buckets/B``).
DEFAULT_TYPE_PROPS: dict[str, Any] = {
    "allow_mult": False,
    "basic_quorum": False,
    "big_vclock": 50,
    "chash_keyfun": {"mod": "riak_core_util", "fun": "chash_std_keyfun"},
    "dvv_enabled": False,
    "dw": "quorum",
    "last_write_wins": False,
    "linkfun": {"mod": "riak_kv_wm_link_walker", "fun": "mapreduce_linkfun"},
    "n_val": 3,
    "notfound_ok": True,
    "old_vclock": 86400,
    "postcommit": [],
    "pr": 0,
    "precommit": [],
    "pw": 0,
    "r": "quorum",
    "rw": "quorum",
    "small_vclock": 50,
    "w": "quorum",
    "write_once": False,
    "young_vclock": 20,
}

#: What ``riak admin bucket-type create`` gives a new type before its own props apply.
CUSTOM_TYPE_BASE_PROPS: dict[str, Any] = {
    **DEFAULT_TYPE_PROPS,
    "allow_mult": True,
    "dvv_enabled": True,
    "active": True,
    "claimant": NODENAME,
}

_IMMUTABLE_CHUNK_PROPS: dict[str, Any] = {
    "n_val": 3,
    "allow_mult": False,
    "last_write_wins": True,
    "dvv_enabled": False,
    "w": 3,
    "dw": 0,
    "pw": 0,
    "r": 1,
    "pr": 0,
    "rw": "quorum",
    "notfound_ok": True,
    "basic_quorum": True,
}

#: The bucket types of ../shared/DESIGN.md section 3, present unless the config says
#: otherwise. ``expiry_s`` is not a Riak bucket prop (Bitcask expiry is per backend);
#: the devnode keeps it per type and reports it nowhere in props.
BUCKET_TYPES: dict[str, dict[str, Any]] = {
    "events": {"expiry_s": 10 * 86400, "props": dict(_IMMUTABLE_CHUNK_PROPS)},
    "epochs": {
        "expiry_s": 10 * 86400,
        "props": {
            **_IMMUTABLE_CHUNK_PROPS,
            "postcommit": [{"mod": HOOK_MODULE, "fun": HOOK_FUNCTION}],
        },
    },
    "substreams": {
        "expiry_s": 3 * 86400,
        "props": {**_IMMUTABLE_CHUNK_PROPS, "n_val": 2, "w": 2},
    },
}
