"""Every option of the devnode, declared once (:mod:`eventstore.optiontable`).

The loader (``settings.py``), the command line (``cli.py``), the environment variables
and ``example-config.toml`` follow from this table; the reasons for the defaults are in
``defaults.py``. Regenerate the example after a change here::

    python -m eventstore.optiontable devnode.options \\
        > devnode/example-config.toml
"""

from __future__ import annotations

from devnode import defaults
from eventstore.optiontable import Kind, Option, OptionTable, Section, check_listen

__all__ = ["OPTIONS"]

_E = "RIAK_EVENTS_DEVNODE_"


def _ring_size(value: int) -> str | None:
    return None if value & (value - 1) == 0 else "ring_size must be a power of 2 in 8..1024"


def _nodes(values: tuple[str, ...]) -> str | None:
    if not values or len(set(values)) != len(values):
        return "nodes must be a non-empty list of unique names"
    return None


def _node(name: str, kind: Kind, default: object, help: str, **kw: object) -> Option:
    return Option("devnode", name, kind, default, help, **kw)  # type: ignore[arg-type]


def _hook(name: str, kind: Kind, default: object, help: str, **kw: object) -> Option:
    return Option("hook", name, kind, default, help, field=f"hook_{name}", **kw)  # type: ignore[arg-type]


_COMPANIONS = """\
[companions]
"dev1@127.0.0.1" = "http://127.0.0.1:5000"
# "dev2@127.0.0.1" = "http://127.0.0.1:5001"
"""

_BUCKET_TYPES = """\
# [bucket_types.events]
# expiry_s = 864000
# [bucket_types.events.props]
# n_val = 3
"""

OPTIONS = OptionTable(
    "devnode",
    header=(
        "riak-events devnode: annotated example configuration (generated from "
        "devnode/options.py; every table and key optional, defaults shown).\n"
        "Run:  riak-events devnode --config devnode/example-config.toml\n"
        "Each [flag, $VARIABLE] in brackets overrides the key from the command line or "
        "the environment (--config: $RIAK_EVENTS_DEVNODE_CONFIG). Relative paths in this "
        "file are relative to its directory."
    ),
    sections=[
        Section("devnode"),
        Section("ring", help="The ring of logical nodes the hook computes preflists over."),
        Section(
            "companions",
            help="Logical node -> the base URL of its companion, where the hook posts that "
            "node's chunk keys (a node without one: its keys are not posted, counted as "
            "no_companion).",
            free_form=_COMPANIONS,
        ),
        Section("hook", help="The Python twin of the Erlang post-commit hook."),
        Section(
            "bucket_types",
            help="Merged over the built-in events, epochs and substreams types "
            "(devnode/defaults.py). expiry_s: 0, or absent for a new type: "
            "never expires; props: Riak bucket props.",
            free_form=_BUCKET_TYPES,
        ),
    ],
    options=[
        _node(
            "listen",
            "str",
            defaults.LISTEN,
            "Address to serve on, HOST:PORT. Loopback unless you mean it: no authentication.",
            check=check_listen,
            env=_E + "LISTEN",
            cli="--listen",
        ),
        _node(
            "data_dir",
            "path",
            None,
            "Directory of the LMDB store (created if missing). Required here or on the "
            "command line.",
            env=_E + "DATA_DIR",
            cli="--data-dir",
            example="/var/lib/riak-events/devnode",
            commented=True,
        ),
        _node(
            "nodename",
            "str",
            None,
            "The node name reported in /stats (default: the first of [ring] nodes).",
            example=defaults.NODENAME,
            commented=True,
        ),
        _node(
            "map_size_bytes",
            "int",
            defaults.MAP_SIZE_BYTES,
            "LMDB map size: the largest the store may grow, bytes (sparse).",
            ge=0,
        ),
        _node(
            "max_object_bytes",
            "int",
            defaults.MAX_OBJECT_BYTES,
            "Largest value accepted by PUT, bytes.",
            ge=0,
        ),
        _node(
            "max_props_bytes",
            "int",
            defaults.MAX_PROPS_BYTES,
            "Largest bucket or bucket-type props document accepted by PUT, bytes.",
            ge=0,
        ),
        _node(
            "tombstone_ttl_s",
            "float",
            defaults.TOMBSTONE_TTL_S,
            "How long a deleted key answers 404 with X-Riak-Deleted before it is reaped, seconds.",
            ge=0,
        ),
        _node(
            "purge_interval_s",
            "float",
            defaults.PURGE_INTERVAL_S,
            "Seconds between purges of expired objects and old tombstones.",
            ge=0,
        ),
        _node(
            "purge_batch",
            "int",
            defaults.PURGE_BATCH,
            "Most expired entries removed by one purge transaction.",
            ge=0,
        ),
        _node(
            "write_batch_max",
            "int",
            defaults.WRITE_BATCH_MAX,
            "Most queued writes in one LMDB transaction (group commit, one fsync).",
            ge=0,
        ),
        Option(
            "ring",
            "ring_size",
            "int",
            defaults.RING_SIZE,
            "Partitions of the ring (riak_core's ring_creation_size), a power of 2.",
            ge=8,
            le=1024,
            check=_ring_size,
        ),
        Option(
            "ring",
            "nodes",
            "strs",
            defaults.NODES,
            "The logical nodes the ring is claimed over, unique.",
            check=_nodes,
        ),
        Option(
            "ring",
            "down",
            "strs",
            (),
            "Logical nodes treated as down by the hook's preflists.",
            field="down_nodes",
        ),
        _hook("path", "str", defaults.HOOK_PATH, "The companion path the hook posts to."),
        _hook(
            "timeout_s",
            "float",
            defaults.HOOK_TIMEOUT_S,
            "Timeout of one POST to a companion, seconds.",
            ge=0,
        ),
        _hook(
            "queue_max",
            "int",
            defaults.HOOK_QUEUE_MAX,
            "Metadata writes waiting for the workers; more are dropped and counted.",
            ge=0,
        ),
        _hook("workers", "int", defaults.HOOK_WORKERS, "Concurrent POSTs.", ge=0),
        _hook(
            "breaker_failures",
            "int",
            defaults.HOOK_BREAKER_FAILURES,
            "Consecutive failed POSTs that open a companion's circuit breaker (as the "
            "Erlang hook's breaker_failures).",
            ge=1,
        ),
        _hook(
            "breaker_cooldown_ms",
            "int",
            defaults.HOOK_BREAKER_COOLDOWN_MS,
            "How long an open breaker refuses that companion's groups before one probe, "
            "milliseconds (as the Erlang hook's breaker_cooldown_ms).",
            ge=0,
        ),
        _hook(
            "module",
            "str",
            defaults.HOOK_MODULE,
            "A postcommit entry whose mod is this runs the hook.",
        ),
        _hook(
            "data_bucket_type",
            "str",
            defaults.HOOK_DATA_BUCKET_TYPE,
            "Where the hook looks up chunk keys' preflists: the events bucket type ...",
        ),
        _hook("data_bucket", "str", defaults.HOOK_DATA_BUCKET, "... and bucket."),
    ],
)
