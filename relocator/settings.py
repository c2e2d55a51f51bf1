"""The relocator's settings: one frozen object, parsed and validated once at start.

Sources, later ones winning: ``defaults.py``; the TOML file (``--config``); the
command-line options (each also read from the environment variable declared with it).
Every option (key, type, default, bounds, help, flag, variable) is declared once, in
``relocator/options.py``; the loader below, ``cli.py`` and ``example-config.toml`` (every
key, annotated) follow from it. Relative
``data_dir`` and ``spool_dir`` in the file are relative to the file's directory (as in
every riak-events config); given on the command line, to the current directory; the
default ``data_dir`` is ``var/relocator`` under the current directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eventstore.names import Namespaces
from eventstore.options import node_url_error
from eventstore.riak.settings import RiakSettings
from eventstore.settings import SettingsError, read_toml, table
from relocator import defaults
from relocator.options import OPTIONS


@dataclass(frozen=True)
class ClusterSettings:
    """One Riak cluster every event goes to: a name, its client settings, write options."""

    name: str
    riak: RiakSettings
    w: int | str | None = None  # None: the bucket's own (events: w 3)


@dataclass(frozen=True)
class ZooKeeperSettings:
    """Optional coordination of several relocators."""

    hosts: str
    root: str = defaults.ZK_ROOT
    session_timeout_s: float = defaults.ZK_SESSION_TIMEOUT_S


@dataclass(frozen=True)
class RelocatorSettings:
    """Everything one relocator process needs; see ``defaults.py`` for meanings."""

    data_dir: Path = Path(defaults.DATA_DIR)
    udp_listen: str = defaults.UDP_LISTEN
    tcp_listen: str = defaults.TCP_LISTEN
    metrics_listen: str = defaults.METRICS_LISTEN
    spool_dir: str = defaults.SPOOL_DIR
    writer_id: int = defaults.WRITER_ID
    grace_s: float = defaults.GRACE_S
    max_hold_s: float = defaults.MAX_HOLD_S
    tick_s: float = defaults.TICK_S
    chunk_max_bytes: int = defaults.CHUNK_MAX_BYTES
    compress: str = defaults.COMPRESS
    max_event_bytes: int = defaults.MAX_EVENT_BYTES
    max_spool_bytes: int = defaults.MAX_SPOOL_BYTES
    segment_max_bytes: int = defaults.SEGMENT_MAX_BYTES
    segment_max_s: float = defaults.SEGMENT_MAX_S
    journal_batch_max: int = defaults.JOURNAL_BATCH_MAX
    journal_queue_max: int = defaults.JOURNAL_QUEUE_MAX
    max_open_events: int = defaults.MAX_OPEN_EVENTS
    producer_idle_s: float = defaults.PRODUCER_IDLE_S
    max_producers: int = defaults.MAX_PRODUCERS
    fsync: bool = defaults.FSYNC
    state_map_size_bytes: int = defaults.STATE_MAP_SIZE_BYTES
    push_parallel_batches: int = defaults.PUSH_PARALLEL_BATCHES
    push_backoff_s: float = defaults.PUSH_BACKOFF_S
    push_backoff_max_s: float = defaults.PUSH_BACKOFF_MAX_S
    metadata_max_rounds: int = defaults.METADATA_MAX_ROUNDS
    spool_units: int = defaults.SPOOL_UNITS
    clusters: tuple[ClusterSettings, ...] = ()
    zookeeper: ZooKeeperSettings | None = None
    namespaces: Namespaces = field(default_factory=Namespaces)

    @property
    def compression(self) -> str | None:
        """The Sereal compression name, ``None`` for none."""
        return None if self.compress == "none" else self.compress


def _clusters(data: Mapping[str, Any], source: str) -> tuple[ClusterSettings, ...]:
    out = []
    for name, raw in data.items():
        if not isinstance(raw, dict):
            raise SettingsError(f"{source}: [clusters.{name}] must be a table")
        body = dict(raw)
        w = body.pop("w", None)
        if w is not None and not (
            (isinstance(w, int) and not isinstance(w, bool) and w >= 0)
            or w in ("one", "quorum", "all", "default")
        ):
            raise SettingsError(f"{source}: [clusters.{name}] w must be an int or quorum word")
        riak = RiakSettings.from_mapping(body, source=f"{source} [clusters.{name}]")
        out.append(ClusterSettings(name=name, riak=riak, w=w))
    return tuple(out)


def _zookeeper(values: dict[str, Any], source: str) -> ZooKeeperSettings | None:
    """``[zookeeper]`` (or ``--zookeeper``): ``None`` when neither is given."""
    hosts = values.pop("zk_hosts", None)
    root = values.pop("zk_root", defaults.ZK_ROOT)
    timeout = values.pop("zk_session_timeout_s", defaults.ZK_SESSION_TIMEOUT_S)
    if hosts is None:
        if (root, timeout) != (defaults.ZK_ROOT, defaults.ZK_SESSION_TIMEOUT_S):
            raise SettingsError(f"{source} [zookeeper]: hosts must be 'host:port[,host:port]'")
        return None
    return ZooKeeperSettings(hosts=hosts, root=root.rstrip("/"), session_timeout_s=timeout)


def validate(s: RelocatorSettings, source: str = "settings") -> RelocatorSettings:
    """Check every option's bounds (:data:`relocator.options.OPTIONS`) and the
    clusters; return ``s``.

    Raises:
        SettingsError: naming the offending key.
    """
    OPTIONS.check_object(s, source=source)
    if not s.clusters:
        raise SettingsError(f"{source}: at least one [clusters.NAME] with nodes is required")
    names = [c.name for c in s.clusters]
    if len(set(names)) != len(names):
        raise SettingsError(f"{source}: duplicate cluster names {names}")
    for cluster in s.clusters:
        for url in cluster.riak.nodes:
            problem = node_url_error(url)
            if problem:
                raise SettingsError(f"{source}: cluster {cluster.name}: {problem}")
    return s


def parse_cluster_option(text: str) -> ClusterSettings:
    """``NAME=URL[,URL...]`` from ``--cluster``.

    Raises:
        SettingsError: not of that form.
    """
    name, sep, urls = text.partition("=")
    if not sep or not name or not urls:
        raise SettingsError(f"--cluster {text!r} is not NAME=URL[,URL...]")
    return ClusterSettings(name=name, riak=RiakSettings(nodes=tuple(urls.split(","))))


def load(path: Path | None, **overrides: Any) -> RelocatorSettings:
    """Build the settings from defaults, the TOML file at ``path`` and ``overrides``
    (options given on the command line; ``None`` values are ignored; ``clusters`` given
    there replace the file's).

    Raises:
        SettingsError: unreadable file, unknown key, or a bad value, naming it.
    """
    source = str(path) if path else "settings"
    data = read_toml(path)
    # The file's relative paths are relative to the file.
    values = OPTIONS.parse(data, source=source, base_dir=path.parent if path else None)
    clusters = overrides.pop("clusters", ())
    values.update(OPTIONS.overrides(overrides))
    values["clusters"] = clusters or _clusters(table(data, "clusters", source=source), source)
    values["zookeeper"] = _zookeeper(values, f"{source}")
    if "data_dir" in values:
        values["data_dir"] = Path(values["data_dir"])
    ns = table(data, "namespaces", source=source)
    try:
        values["namespaces"] = Namespaces(**ns)
    except TypeError as e:
        raise SettingsError(f"{source} [namespaces]: {e}") from e
    return validate(RelocatorSettings(**values), source)
