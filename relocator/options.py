"""Every option of the relocator, declared once (:mod:`eventstore.optiontable`).

The loader (``settings.py``), the command line (``cli.py``), the environment variables
and ``example-config.toml`` follow from this table; the reasons for the defaults are in
``defaults.py``. Regenerate the example after a change here::

    python -m eventstore.optiontable relocator.options > relocator/example-config.toml
"""

from __future__ import annotations

from eventstore.optiontable import Kind, Option, OptionTable, Section, check_listen_or_empty
from relocator import defaults

__all__ = ["OPTIONS"]

_E = "RIAK_EVENTS_RELOCATOR_"


def _znode(value: str) -> str | None:
    return None if value.startswith("/") else "must be an absolute znode path"


def _hosts(value: str) -> str | None:
    return None if value else "must be 'host:port[,host:port]'"


def _option(name: str, kind: Kind, default: object, help: str, **kw: object) -> Option:
    return Option("relocator", name, kind, default, help, **kw)  # type: ignore[arg-type]


_CLUSTERS = """\
[clusters.dc1]
nodes = ["http://127.0.0.1:8098"]
concurrency = 16
timeout_s = 10.0
connect_timeout_s = 2.0
retry_max_tries = 4
retry_deadline_s = 15.0
# w = 3

# [clusters.dc2]
# nodes = ["http://10.2.0.1:8098", "http://10.2.0.2:8098"]
"""

_NAMESPACES = """\
# [namespaces]
# events_bucket_type = "events"
# events_bucket = "events"
# epochs_bucket_type = "epochs"
# epochs_bucket = "epochs"
"""

OPTIONS = OptionTable(
    "relocator",
    header=(
        "riak-events relocator: annotated example configuration (generated from "
        "relocator/options.py).\n"
        "Run:  riak-events relocator --config relocator/example-config.toml\n"
        "Every key is optional except at least one [clusters.NAME]. Each [flag, "
        "$VARIABLE] in brackets overrides the key from the command line or the "
        "environment. Relative paths in this file are relative to its directory. "
        "Defaults and their reasons are in relocator/defaults.py."
    ),
    sections=[
        Section("relocator"),
        Section(
            "clusters",
            help="Every cluster receives every event (no cross-DC replication). Keys are "
            "those of eventstore's [riak] table, plus w (default: the events bucket's own "
            "w, 3). On the command line: --cluster NAME=URL[,URL] (repeatable, replaces "
            f"the file's), ${_E}CLUSTER.",
            free_form=_CLUSTERS,
        ),
        Section(
            "zookeeper",
            help="Optional: several relocators sharing a spool directory, and ZooKeeper "
            "locks around metadata writes (the guarantee is in relocator/DESIGN.md, "
            "'Metadata merge'). Needs the extra: pip install 'riak-events[zookeeper]'. A "
            "relocator waits up to twice session_timeout_s for the session of a killed "
            "predecessor with its writer id to expire.",
            commented=True,
        ),
        Section(
            "namespaces",
            help="Optional: bucket types and buckets (defaults: events/events, epochs/epochs).",
            free_form=_NAMESPACES,
        ),
    ],
    options=[
        _option(
            "data_dir",
            "path",
            defaults.DATA_DIR,
            "Journal (write-ahead log of every accepted event) and state store. Must "
            "survive reboots: events acknowledged to producers live here until every "
            "cluster holds them. Default: var/relocator under the current directory.",
            env=_E + "DATA_DIR",
            cli="--data-dir",
            example="/var/lib/riak-events/relocator",
            commented=True,
        ),
        _option(
            "udp_listen",
            "str",
            defaults.UDP_LISTEN,
            'HOST:PORT for UDP events (fire and forget), "" for none.',
            check=check_listen_or_empty,
            env=_E + "UDP_LISTEN",
            cli="--udp-listen",
        ),
        _option(
            "tcp_listen",
            "str",
            defaults.TCP_LISTEN,
            'HOST:PORT for TCP events, acknowledged once fdatasync\'ed in the journal; "" '
            "for none.",
            check=check_listen_or_empty,
            env=_E + "TCP_LISTEN",
            cli="--tcp-listen",
        ),
        _option(
            "metrics_listen",
            "str",
            defaults.METRICS_LISTEN,
            'HOST:PORT of /metrics, /status, /healthz and /readyz; "" for none.',
            check=check_listen_or_empty,
            env=_E + "METRICS_LISTEN",
            cli="--metrics-listen",
        ),
        _option(
            "spool_dir",
            "path",
            defaults.SPOOL_DIR,
            "Directory where an external aggregator drops per-epoch blobs named "
            "<epoch>-<dc>-<type>-<subtype>[-<tag>].srl (write a dotfile, then rename); "
            '"" for none.',
            env=_E + "SPOOL_DIR",
            cli="--spool-dir",
        ),
        _option(
            "writer_id",
            "int",
            defaults.WRITER_ID,
            "Unique id of this relocator among all writing to the same clusters: part of "
            "every chunk number (writer_id * 10^15 + batch_seq * 10^4 + index).",
            ge=0,
            le=defaults.WRITER_ID_MAX,
            env=_E + "WRITER_ID",
            cli="--writer-id",
        ),
        _option(
            "grace_s",
            "float",
            defaults.GRACE_S,
            "Seconds after an epoch ends before it is closed and pushed. Later events are "
            "not lost: they become extra chunks of their epoch (relocator_events_late_total).",
            gt=0,
            env=_E + "GRACE_S",
            cli="--grace-s",
        ),
        _option(
            "max_hold_s",
            "float",
            defaults.MAX_HOLD_S,
            "A group is pushed at the latest this long after its first event arrived, "
            "whatever the producer's clock says.",
            gt=0,
        ),
        _option("tick_s", "float", defaults.TICK_S, "How often the coordinator loop runs.", gt=0),
        _option(
            "chunk_max_bytes",
            "int",
            defaults.CHUNK_MAX_BYTES,
            "Largest stored chunk (compressed Sereal document + checksum), bytes.",
            gt=0,
        ),
        _option(
            "compress",
            "str",
            defaults.COMPRESS,
            "Compression of stored chunks.",
            choices=("zstd", "zlib", "snappy", "none"),
        ),
        _option(
            "max_event_bytes",
            "int",
            defaults.MAX_EVENT_BYTES,
            'Larger event frames are dropped and counted (reason="oversized"), bytes.',
            gt=0,
        ),
        _option(
            "max_spool_bytes",
            "int",
            defaults.MAX_SPOOL_BYTES,
            "Larger spool files are moved to .rejected/ and counted, bytes.",
            gt=0,
        ),
        _option(
            "segment_max_bytes",
            "int",
            defaults.SEGMENT_MAX_BYTES,
            "The journal rolls to a new segment after this many bytes ...",
            gt=0,
        ),
        _option("segment_max_s", "float", defaults.SEGMENT_MAX_S, "... or seconds.", gt=0),
        _option(
            "journal_batch_max",
            "int",
            defaults.JOURNAL_BATCH_MAX,
            "Most frames in one journal write + fdatasync (group commit).",
            gt=0,
        ),
        _option(
            "journal_queue_max",
            "int",
            defaults.JOURNAL_QUEUE_MAX,
            "Submissions (TCP reads, UDP bursts; not frames) waiting for the journal "
            "writer before intake pushes back (TCP) or drops (UDP).",
            gt=0,
        ),
        _option(
            "max_open_events",
            "int",
            defaults.MAX_OPEN_EVENTS,
            "Events received but not yet sealed above which intake waits (TCP) or drops (UDP).",
            gt=0,
        ),
        _option(
            "producer_idle_s",
            "float",
            defaults.PRODUCER_IDLE_S,
            "A TCP producer id's high mark (what recognises its resent frames) is "
            "forgotten this long after its last frame, seconds.",
            gt=0,
        ),
        _option(
            "max_producers",
            "int",
            defaults.MAX_PRODUCERS,
            "Most producer ids tracked; the least recently seen is forgotten first.",
            gt=0,
        ),
        _option(
            "fsync",
            "bool",
            defaults.FSYNC,
            "fdatasync each journal group commit. Never false in production: acks would "
            "not mean durable (off only for benchmarks).",
            env=_E + "FSYNC",
            cli="--fsync",
        ),
        _option(
            "state_map_size_bytes",
            "int",
            defaults.STATE_MAP_SIZE_BYTES,
            "LMDB map size of the state store, bytes (sparse).",
            gt=0,
        ),
        _option(
            "push_parallel_batches",
            "int",
            defaults.PUSH_PARALLEL_BATCHES,
            "Batches in flight per cluster (each batch's chunks use the cluster client's "
            "pool of `concurrency` connections).",
            gt=0,
        ),
        _option(
            "push_backoff_s",
            "float",
            defaults.PUSH_BACKOFF_S,
            "Back-off after a failed push to a cluster, seconds, doubling ...",
            gt=0,
        ),
        _option(
            "push_backoff_max_s",
            "float",
            defaults.PUSH_BACKOFF_MAX_S,
            "... up to this.",
            gt=0,
        ),
        _option(
            "metadata_max_rounds",
            "int",
            defaults.METADATA_MAX_ROUNDS,
            "Read-merge-write-verify rounds of one metadata update before it is retried later.",
            gt=0,
        ),
        _option(
            "spool_units",
            "int",
            defaults.SPOOL_UNITS,
            "Spool work units shared through ZooKeeper (file -> crc32(name) % spool_units).",
            gt=0,
        ),
        Option(
            "zookeeper",
            "hosts",
            "str",
            "",
            "ZooKeeper hosts 'h:p[,h:p]' to share spool work with other relocators "
            "(needs riak-events[zookeeper]).",
            field="zk_hosts",
            check=_hosts,
            env=_E + "ZOOKEEPER",
            cli="--zookeeper",
            example="127.0.0.1:2181",
        ),
        Option(
            "zookeeper",
            "root",
            "str",
            defaults.ZK_ROOT,
            "Root of the relocators' znodes.",
            field="zk_root",
            check=_znode,
        ),
        Option(
            "zookeeper",
            "session_timeout_s",
            "float",
            defaults.ZK_SESSION_TIMEOUT_S,
            "ZooKeeper session timeout, seconds.",
            field="zk_session_timeout_s",
            gt=0,
        ),
    ],
)
