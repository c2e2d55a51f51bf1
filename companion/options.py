"""Every option of the companion, declared once (:mod:`eventstore.optiontable`).

The loader (``settings.py``), the command line (``cli.py``), the environment variables
and ``example-config.toml`` follow from this table; the reasons for the defaults are in
``defaults.py``. Regenerate the example after a change here::

    python -m eventstore.optiontable companion.options > companion/example-config.toml
"""

from __future__ import annotations

import ipaddress

from companion import defaults
from eventstore.optiontable import Option, OptionTable, Section
from eventstore.riak.settings import RiakSettings
from eventstore.settings import SettingsError, parse_listen

__all__ = ["OPTIONS"]

_E = "RIAK_EVENTS_COMPANION_"


def _listen(value: str) -> str | None:
    try:
        parse_listen(value, source="listen")
    except SettingsError:
        return "not HOST:PORT"
    return None


def _networks(values: tuple[str, ...]) -> str | None:
    for peer in values:
        try:
            ipaddress.ip_network(peer, strict=False)
        except ValueError:
            return f"peer {peer!r} is not an IP address or network"
    return None


def _auth(value: str) -> str | None:
    return None if not value or ":" in value else 'must be "user:password"'


def _option(name: str, kind: str, default: object, help: str, **kw: object) -> Option:
    return Option("companion", name, kind, default, help, **kw)  # type: ignore[arg-type]


OPTIONS = OptionTable(
    "companion",
    header=(
        "riak-events companion: annotated example settings (generated from "
        "companion/options.py; every key optional, defaults shown).\n"
        "Run:  riak-events companion --config companion/example-config.toml\n"
        "Each [flag, $VARIABLE] in brackets overrides the key from the command line or "
        "the environment. Relative paths in this file are relative to its directory."
    ),
    sections=[
        Section("companion"),
        Section("ring", help="For the auditor: which chunks are this node's."),
        Section(
            "riak",
            help="The local Riak node (eventstore.riak.settings.RiakSettings: nodes, "
            "timeout_s, ...). nodes: --node http://HOST:PORT (repeatable), "
            f"${_E}NODE.",
            free_form='[riak]\nnodes = ["http://127.0.0.1:8098"]\ntimeout_s = 10.0\n',
        ),
        Section(
            "namespaces",
            help="Where chunks are read and results written (eventstore.names.Namespaces).",
            free_form='[namespaces]\nevents_bucket_type = "events"\nevents_bucket = "events"\n'
            'substreams_bucket_type = "substreams"\n',
        ),
        Section("zookeeper", help="Live-node znode and plugin registry (optional)."),
    ],
    options=[
        _option(
            "listen",
            "str",
            defaults.LISTEN,
            "Address to serve on, HOST:PORT. The hook posts here (its default port); in a "
            "cluster use the node's address and list every Riak node under peers.",
            check=_listen,
            env=_E + "LISTEN",
            cli="--listen",
        ),
        _option(
            "node",
            "str",
            "",
            "This node's logical name (ZooKeeper, status page, auditor).",
            env=_E + "NODE_NAME",
            cli="--node-name",
            example="dev1@127.0.0.1",
        ),
        _option(
            "workers",
            "int",
            defaults.WORKERS,
            "gunicorn worker processes (-k asgi), pre-forked.",
            ge=1,
            le=256,
            env=_E + "WORKERS",
            cli="--workers",
        ),
        _option(
            "threads",
            "int",
            defaults.THREADS,
            "Chunk threads per worker.",
            ge=1,
            le=256,
            env=_E + "THREADS",
            cli="--threads",
        ),
        _option(
            "max_parallel",
            "int",
            defaults.MAX_PARALLEL,
            "Sandboxed children alive at once per chunk.",
            ge=1,
        ),
        _option(
            "isolation",
            "str",
            defaults.ISOLATION,
            '"chunk": one child per chunk runs the plugins in turn, each with its own '
            "limits (about half the CPU; plugins share the event dicts and module state: "
            'read-only by contract); "substream": one child per plugin run (nothing shared).',
            choices=("chunk", "substream"),
        ),
        _option(
            "quarantine",
            "bool",
            defaults.QUARANTINE,
            "A plugin new to a worker, or failing since its last ok run, runs apart (own "
            "child, one chunk at a time): it costs only its own results. false: every "
            "plugin runs in the shared child.",
        ),
        _option(
            "queue_max",
            "int",
            defaults.QUEUE_MAX,
            "Chunks waiting per worker: the node's inbox, shared by the workers, holds "
            "queue_max * workers; above, arrivals are shed.",
            ge=1,
        ),
        _option(
            "max_wait_s",
            "float",
            defaults.MAX_WAIT_S,
            "A chunk that cannot start within this many seconds of arrival is shed.",
            gt=0,
        ),
        _option(
            "peers",
            "strs",
            defaults.PEERS,
            "Addresses or networks allowed to POST key groups.",
            check=_networks,
            env=_E + "PEERS",
            cli="--peer",
        ),
        _option(
            "status_peers",
            "strs",
            defaults.STATUS_PEERS,
            "Addresses or networks allowed to GET the status page and /v1/status.",
            check=_networks,
        ),
        _option(
            "metrics_peers",
            "strs",
            None,
            "Addresses or networks allowed to GET /metrics (default: status_peers).",
            check=_networks,
            example=defaults.STATUS_PEERS,
            commented=True,
        ),
        _option(
            "hide_addresses",
            "bool",
            False,
            "Leave the Riak and ZooKeeper addresses out of the status page.",
        ),
        _option(
            "plugin_dirs",
            "paths",
            (),
            "Plugin directories, watched (hot reload). On the command line: one "
            "directory per flag, replacing the file's.",
            env=_E + "PLUGIN_DIRS",
            cli="--plugin-dir",
            example=("plugins",),
        ),
        _option(
            "entry_points",
            "bool",
            True,
            "Also load the installed plugins (entry points riak_events.substreams).",
        ),
        _option(
            "check_plugins_in_child",
            "bool",
            True,
            "Import each new plugin first in a time-limited child.",
        ),
        _option(
            "state_dir",
            "path",
            defaults.STATE_DIR,
            "Metrics, status snapshots, disabled markers, registry plugins. Default: "
            "var/companion under the current directory (never next to this file).",
            env=_E + "STATE_DIR",
            cli="--state-dir",
            example="/var/lib/riak-events/companion",
            commented=True,
        ),
        _option(
            "disable_after",
            "int",
            defaults.DISABLE_AFTER,
            "Failed runs in a row on this node (all workers) before a substream is disabled here.",
            ge=1,
        ),
        _option(
            "timeout_cap_s",
            "float",
            defaults.TIMEOUT_CAP_S,
            "Platform cap on every plugin's declared timeout, seconds.",
            gt=0,
        ),
        _option(
            "memory_cap_mb",
            "int",
            defaults.MEMORY_CAP_MB,
            "Platform cap on every plugin's declared memory, MiB.",
            ge=1,
        ),
        _option(
            "max_result_bytes_cap",
            "int",
            defaults.MAX_RESULT_BYTES_CAP,
            "Platform cap on every plugin's declared result size, bytes.",
            ge=1,
        ),
        _option(
            "max_decoded_bytes",
            "int",
            defaults.MAX_DECODED_BYTES,
            "What one chunk may decode to, bytes (and at most max_decoded_ratio times its "
            "stored size; always at least 16 MiB). Over it: an error result 'too_large:'.",
            ge=1,
        ),
        _option(
            "max_decoded_ratio",
            "float",
            defaults.MAX_DECODED_RATIO,
            "What one chunk may decode to, times its stored size.",
            gt=0,
        ),
        _option(
            "reload_interval_s",
            "float",
            defaults.RELOAD_INTERVAL_S,
            "Seconds between checks of the plugin directories for changes.",
            gt=0,
        ),
        _option(
            "status_interval_s",
            "float",
            defaults.STATUS_INTERVAL_S,
            "Seconds between writes of a worker's statistics for the status page.",
            gt=0,
        ),
        _option(
            "audit_interval_s",
            "float",
            defaults.AUDIT_INTERVAL_S,
            "Look for owned chunks without results this often, seconds (0: no auditor).",
            ge=0,
        ),
        _option(
            "audit_lookback_s",
            "int",
            defaults.AUDIT_LOOKBACK_S,
            "... in the epochs of the last this many seconds.",
            ge=1,
        ),
        _option(
            "audit_max_keys",
            "int",
            defaults.AUDIT_MAX_KEYS,
            "... checking at most this many chunk keys per round.",
            ge=1,
        ),
        _option(
            "audit_min_keys",
            "int",
            defaults.AUDIT_MIN_KEYS,
            "... and at least this many, even while the inbox is busy.",
            ge=1,
        ),
        _option(
            "audit_round_max_s",
            "float",
            defaults.AUDIT_ROUND_MAX_S,
            "Seconds one audit round may take, at most.",
            gt=0,
        ),
        _option(
            "audit_horizon_s",
            "int",
            defaults.AUDIT_HORIZON_S,
            "Older epochs are given up by the auditor (counted, logged).",
            ge=1,
        ),
        _option(
            "audit_dcs",
            "strs",
            (),
            "dcs audited besides those of received key groups.",
        ),
        Option(
            "ring",
            "nodes",
            "strs",
            (),
            'The ring\'s logical nodes, e.g. ["dev1@127.0.0.1", "dev2@127.0.0.1"]; '
            "empty: every chunk is this node's. [companion] node must be one of them.",
            field="ring_nodes",
        ),
        Option("ring", "ring_size", "int", 64, "Partitions of the ring.", ge=1),
        Option("ring", "n_val", "int", 3, "n_val of the events bucket type.", ge=1),
        Option(
            "riak",
            "nodes",
            "strs",
            RiakSettings().nodes,
            "This node's Riak HTTP URL, http://HOST:PORT (repeatable; replaces [riak] nodes).",
            field="riak_nodes",
            env=_E + "NODE",
            cli="--node",
            cli_aliases=("--riak",),
            alias_envs=(_E + "RIAK_NODES",),
        ),
        Option(
            "zookeeper",
            "hosts",
            "str",
            defaults.ZK_HOSTS,
            'ZooKeeper hosts HOST:PORT[,...], e.g. "127.0.0.1:2181"; empty: no live '
            "znode, no registry.",
            field="zk_hosts",
            env=_E + "ZOOKEEPER",
            cli="--zookeeper",
            cli_aliases=("--zk-hosts",),
            alias_envs=(_E + "ZK_HOSTS",),
        ),
        Option(
            "zookeeper", "root", "str", defaults.ZK_ROOT, "Root of our znodes.", field="zk_root"
        ),
        Option(
            "zookeeper",
            "health_interval_s",
            "float",
            defaults.ZK_HEALTH_INTERVAL_S,
            "Refresh of this node's live znode and of the other nodes' versions, seconds.",
            field="zk_health_interval_s",
            gt=0,
        ),
        Option(
            "zookeeper",
            "session_timeout_s",
            "float",
            defaults.ZK_SESSION_TIMEOUT_S,
            "The live znode outlives a silent companion this long, seconds.",
            field="zk_session_timeout_s",
            gt=0,
        ),
        Option(
            "zookeeper",
            "auth",
            "str",
            "",
            'Digest "user:password" for the registry (which is world-readable).',
            field="zk_auth",
            check=_auth,
        ),
        Option(
            "zookeeper",
            "trusted_keys",
            "strs",
            (),
            "Registry plugins run only if one of these keys signed them: key files "
            "(relative to this file) or base64 keys.",
            example=("keys/release.pub",),
            commented=True,
        ),
    ],
)
