"""The relocator's settings: one frozen object, parsed and validated once at start.

Sources, later ones winning: ``defaults.py``; the TOML file (``--config``); the
command-line options (click also reads each from ``RIAK_EVENTS_RELOCATOR_<OPTION>``).
See ``example-config.toml`` beside this file for every key, annotated. Relative
``data_dir`` and ``spool_dir`` in the file are relative to the file's directory (as in
every riak-events config); given on the command line, to the current directory; the
default ``data_dir`` is ``var/relocator`` under the current directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from eventstore.names import Namespaces
from eventstore.options import node_url_error
from eventstore.riak.settings import RiakSettings
from eventstore.settings import SettingsError, parse_listen, read_toml, table, unknown_keys
from relocator import defaults

_COMPRESS = ("zstd", "zlib", "snappy", "none")


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


_SCALARS = {
    f.name
    for f in fields(RelocatorSettings)
    if f.name not in ("clusters", "zookeeper", "namespaces", "data_dir")
}


def _scalar(source: str, name: str, value: Any, kind: type) -> Any:
    if kind is bool:
        if not isinstance(value, bool):
            raise SettingsError(f"{source}: {name} must be true or false, not {value!r}")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise SettingsError(f"{source}: {name} must be a string, not {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SettingsError(f"{source}: {name} must be a number, not {value!r}")
    if kind is int and not isinstance(value, int):
        raise SettingsError(f"{source}: {name} must be an integer, not {value!r}")
    return kind(value)


def _relocator_table(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    known = _SCALARS | {"data_dir"}
    unknown_keys(data, known, source=f"{source} [relocator]")
    out: dict[str, Any] = {}
    for f in fields(RelocatorSettings):
        if f.name not in data:
            continue
        if f.name == "data_dir":
            out["data_dir"] = Path(_scalar(source, "data_dir", data["data_dir"], str))
        else:
            kind = type(getattr(RelocatorSettings(), f.name))
            out[f.name] = _scalar(f"{source} [relocator]", f.name, data[f.name], kind)
    return out


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


def _zookeeper(data: Mapping[str, Any], source: str) -> ZooKeeperSettings | None:
    if not data:
        return None
    unknown_keys(data, {"hosts", "root", "session_timeout_s"}, source=f"{source} [zookeeper]")
    hosts = data.get("hosts")
    if not isinstance(hosts, str) or not hosts:
        raise SettingsError(f"{source} [zookeeper]: hosts must be 'host:port[,host:port]'")
    root = data.get("root", defaults.ZK_ROOT)
    if not isinstance(root, str) or not root.startswith("/"):
        raise SettingsError(f"{source} [zookeeper]: root must be an absolute znode path")
    timeout = _scalar(source, "session_timeout_s", data.get("session_timeout_s", 10.0), float)
    return ZooKeeperSettings(hosts=hosts, root=root.rstrip("/"), session_timeout_s=timeout)


def validate(s: RelocatorSettings, source: str = "settings") -> RelocatorSettings:
    """Check ranges and forms; return ``s``.

    Raises:
        SettingsError: naming the offending key.
    """
    for name in ("udp_listen", "tcp_listen", "metrics_listen"):
        value = getattr(s, name)
        if value:
            parse_listen(value, source=f"{source}: {name}")
    if not 0 <= s.writer_id <= defaults.WRITER_ID_MAX:
        raise SettingsError(f"{source}: writer_id must be in 0..{defaults.WRITER_ID_MAX}")
    if s.compress not in _COMPRESS:
        raise SettingsError(f"{source}: compress must be one of {', '.join(_COMPRESS)}")
    positive = (
        "grace_s",
        "max_hold_s",
        "tick_s",
        "chunk_max_bytes",
        "max_event_bytes",
        "max_spool_bytes",
        "segment_max_bytes",
        "segment_max_s",
        "journal_batch_max",
        "journal_queue_max",
        "max_open_events",
        "state_map_size_bytes",
        "push_parallel_batches",
        "push_backoff_s",
        "push_backoff_max_s",
        "metadata_max_rounds",
        "spool_units",
    )
    for name in positive:
        if getattr(s, name) <= 0:
            raise SettingsError(f"{source}: {name} must be > 0")
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
    unknown_keys(data, {"relocator", "clusters", "zookeeper", "namespaces"}, source=source)
    values = _relocator_table(table(data, "relocator", source=source), source)
    if path is not None:  # the file's relative paths are relative to the file
        if "data_dir" in values:
            values["data_dir"] = path.parent / values["data_dir"]
        if values.get("spool_dir"):
            values["spool_dir"] = str(path.parent / values["spool_dir"])
    values["clusters"] = _clusters(table(data, "clusters", source=source), source)
    values["zookeeper"] = _zookeeper(table(data, "zookeeper", source=source), source)
    ns = table(data, "namespaces", source=source)
    try:
        values["namespaces"] = Namespaces(**ns)
    except TypeError as e:
        raise SettingsError(f"{source} [namespaces]: {e}") from e
    settings = RelocatorSettings(**values)
    given = {k: v for k, v in overrides.items() if v is not None and v != ()}
    if "zookeeper" in given and isinstance(given["zookeeper"], str):
        given["zookeeper"] = ZooKeeperSettings(hosts=given["zookeeper"])
    if "data_dir" in given:
        given["data_dir"] = Path(given["data_dir"])
    settings = replace(settings, **given)
    return validate(settings, source)
