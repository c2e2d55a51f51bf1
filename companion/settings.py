"""The companion's settings: one frozen object, parsed and validated once at start.

Sources, later ones winning: ``defaults.py``; the TOML file (``--config``); the CLI
flags, each also read from ``RIAK_EVENTS_COMPANION_<OPTION>``. Relative paths in the
file are relative to the file's directory; on the command line, to the current
directory; the default state directory is ``var/companion`` under the current directory.
See ``companion/example-config.toml``::

    [companion]
    listen = "127.0.0.1:5000"
    node = "dev1@127.0.0.1"          # this node's logical name (ZooKeeper, auditor)
    workers = 2
    threads = 2
    max_parallel = 4
    isolation = "chunk"              # or "substream": see companion/defaults.py
    queue_max = 64
    max_wait_s = 2.0
    peers = ["127.0.0.1", "::1"]
    status_peers = ["127.0.0.1", "::1"]  # who may GET / and /v1/status
    metrics_peers = ["127.0.0.1", "::1"] # who may GET /metrics (default: status_peers)
    hide_addresses = false           # hide the Riak/ZooKeeper addresses on the status page
    plugin_dirs = ["plugins"]
    entry_points = true
    check_plugins_in_child = true
    state_dir = "var/companion"      # default: var/companion under the current directory
    disable_after = 5
    timeout_cap_s = 5.0
    memory_cap_mb = 1024
    max_result_bytes_cap = 1048576
    max_decoded_bytes = 67108864     # what one chunk may decode to, bytes, and
    max_decoded_ratio = 64.0         #   times its stored size (at least 16 MiB)
    audit_interval_s = 10.0          # 0: no auditor
    audit_lookback_s = 120
    audit_max_keys = 2000            # chunk keys checked per round, at most
    audit_min_keys = 200             # ... at least, even while the inbox is busy
    audit_round_max_s = 5.0          # seconds one round may take, at most
    audit_horizon_s = 3600           # older epochs are given up (counted, logged)
    audit_dcs = ["dc1"]              # audited besides the dcs of received key groups

    [ring]                           # for the auditor: which chunks are this node's
    nodes = ["dev1@127.0.0.1", "dev2@127.0.0.1"]   # empty: every chunk (one node)
    ring_size = 64
    n_val = 3                        # of the events bucket type

    [riak]                           # eventstore.riak.settings.RiakSettings
    nodes = ["http://127.0.0.1:8098"]

    [namespaces]                     # eventstore.names.Namespaces
    events_bucket_type = "events"

    [zookeeper]
    hosts = ""                       # "127.0.0.1:2181"; empty: no ZooKeeper
    root = "/riak-events"
    auth = ""                        # digest "user:password" (the registry is world-readable)
    trusted_keys = ["keys/release.pub"]  # registry plugins run only if one of these signed
    session_timeout_s = 10.0
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from companion import defaults
from eventstore.blob import DecodeLimits
from eventstore.errors import InvalidName
from eventstore.names import Namespaces
from eventstore.options import node_url_error
from eventstore.riak.settings import RiakSettings
from eventstore.settings import SettingsError, parse_listen, read_toml, table, unknown_keys
from substreams.errors import InvalidSigningKey
from substreams.sandbox import Isolation, Limits
from substreams.signing import TrustedKeys, is_inline_key

__all__ = ["CompanionSettings", "load"]


@dataclass(frozen=True)
class CompanionSettings:
    """Everything a companion needs, validated. Field meanings: ``companion/defaults.py``."""

    host: str = "127.0.0.1"
    port: int = 5000
    node: str = ""
    workers: int = defaults.WORKERS
    threads: int = defaults.THREADS
    max_parallel: int = defaults.MAX_PARALLEL
    isolation: Isolation = defaults.ISOLATION
    quarantine: bool = defaults.QUARANTINE
    queue_max: int = defaults.QUEUE_MAX
    max_wait_s: float = defaults.MAX_WAIT_S
    peers: tuple[str, ...] = defaults.PEERS
    status_peers: tuple[str, ...] = defaults.STATUS_PEERS
    metrics_peers: tuple[str, ...] = defaults.STATUS_PEERS
    hide_addresses: bool = False
    plugin_dirs: tuple[Path, ...] = ()
    entry_points: bool = True
    check_plugins_in_child: bool = True
    state_dir: Path = Path(defaults.STATE_DIR)
    disable_after: int = defaults.DISABLE_AFTER
    timeout_cap_s: float = defaults.TIMEOUT_CAP_S
    memory_cap_mb: int = defaults.MEMORY_CAP_MB
    max_result_bytes_cap: int = defaults.MAX_RESULT_BYTES_CAP
    max_decoded_bytes: int = defaults.MAX_DECODED_BYTES
    max_decoded_ratio: float = defaults.MAX_DECODED_RATIO
    reload_interval_s: float = defaults.RELOAD_INTERVAL_S
    status_interval_s: float = defaults.STATUS_INTERVAL_S
    audit_interval_s: float = defaults.AUDIT_INTERVAL_S
    audit_lookback_s: int = defaults.AUDIT_LOOKBACK_S
    audit_max_keys: int = defaults.AUDIT_MAX_KEYS
    audit_min_keys: int = defaults.AUDIT_MIN_KEYS
    audit_round_max_s: float = defaults.AUDIT_ROUND_MAX_S
    audit_horizon_s: int = defaults.AUDIT_HORIZON_S
    audit_dcs: tuple[str, ...] = ()
    ring_nodes: tuple[str, ...] = ()
    ring_size: int = 64
    n_val: int = 3
    riak: RiakSettings = field(default_factory=RiakSettings)
    namespaces: Namespaces = field(default_factory=Namespaces)
    zk_hosts: str = defaults.ZK_HOSTS
    zk_root: str = defaults.ZK_ROOT
    zk_health_interval_s: float = defaults.ZK_HEALTH_INTERVAL_S
    zk_session_timeout_s: float = defaults.ZK_SESSION_TIMEOUT_S
    zk_auth: str = ""
    trusted_keys: tuple[str, ...] = ()

    @property
    def listen(self) -> str:
        """``HOST:PORT``."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def cap(self) -> Limits:
        """The platform caps on every plugin's declared limits."""
        return Limits(self.timeout_cap_s, self.memory_cap_mb, self.max_result_bytes_cap)

    @property
    def decode_limits(self) -> DecodeLimits:
        """What one chunk may decode to (``max_decoded_bytes``, ``max_decoded_ratio``)."""
        return DecodeLimits(
            max_decoded_bytes=self.max_decoded_bytes, max_decoded_ratio=self.max_decoded_ratio
        )

    @property
    def registry_dir(self) -> Path:
        """Where plugins received from the ZooKeeper registry are written (and watched)."""
        return self.state_dir / "registry"

    @property
    def all_plugin_dirs(self) -> tuple[Path, ...]:
        """Configured directories first, then the registry's."""
        return (*self.plugin_dirs, self.registry_dir)

    def allows(self, peer: str | None, among: tuple[str, ...] | None = None) -> bool:
        """Whether ``peer`` (an IP address) is in ``among`` (default: ``peers``, who may
        send key groups; ``status_peers``, ``metrics_peers`` for the read-only pages)."""
        if peer is None:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        for allowed in self.peers if among is None else among:
            try:
                if address in ipaddress.ip_network(allowed, strict=False):
                    return True
            except ValueError:
                continue
        return False


_COMPANION_KEYS = {
    "listen",
    "node",
    "workers",
    "threads",
    "max_parallel",
    "isolation",
    "quarantine",
    "queue_max",
    "max_wait_s",
    "peers",
    "status_peers",
    "metrics_peers",
    "hide_addresses",
    "plugin_dirs",
    "entry_points",
    "check_plugins_in_child",
    "state_dir",
    "disable_after",
    "timeout_cap_s",
    "memory_cap_mb",
    "max_result_bytes_cap",
    "max_decoded_bytes",
    "max_decoded_ratio",
    "reload_interval_s",
    "status_interval_s",
    "audit_interval_s",
    "audit_lookback_s",
    "audit_max_keys",
    "audit_min_keys",
    "audit_round_max_s",
    "audit_horizon_s",
    "audit_dcs",
}
_POSITIVE_INTS = {"workers", "threads", "max_parallel", "queue_max", "disable_after"}
_POSITIVE_INTS |= {"memory_cap_mb", "max_result_bytes_cap", "audit_lookback_s", "audit_max_keys"}
_POSITIVE_INTS |= {"max_decoded_bytes", "audit_min_keys", "audit_horizon_s"}
_POSITIVE_FLOATS = {"max_wait_s", "timeout_cap_s", "reload_interval_s", "status_interval_s"}
_POSITIVE_FLOATS |= {"max_decoded_ratio", "audit_round_max_s"}


def load(config: Path | None = None, **overrides: Any) -> CompanionSettings:
    """Build the settings from defaults, the TOML file and CLI overrides.

    Args:
        config: the TOML file, or ``None`` for the defaults alone.
        overrides: values from the CLI (``None`` values are ignored): ``listen``,
            ``node``, ``workers``, ``threads``, ``state_dir``, ``plugin_dirs``,
            ``peers``, ``riak_nodes``, ``zk_hosts``.

    Raises:
        SettingsError: naming the file and key at fault.
    """
    source = str(config) if config else "settings"
    base_dir = config.parent if config else Path.cwd()
    data = read_toml(config)
    unknown_keys(data, {"companion", "riak", "namespaces", "zookeeper", "ring"}, source=source)
    ring = table(data, "ring", source=source)
    unknown_keys(ring, {"nodes", "ring_size", "n_val"}, source=f"{source} [ring]")
    section = dict(table(data, "companion", source=source))
    unknown_keys(section, _COMPANION_KEYS, source=f"{source} [companion]")
    zk = table(data, "zookeeper", source=source)
    unknown_keys(
        zk,
        {"hosts", "root", "health_interval_s", "session_timeout_s", "auth", "trusted_keys"},
        source=f"{source} [zookeeper]",
    )
    riak_table = dict(table(data, "riak", source=source))

    given = {k: v for k, v in overrides.items() if v is not None and v != ()}
    for name in ("listen", "node", "workers", "threads"):
        if name in given:
            section[name] = given[name]
    # Paths given on the command line are relative to the current directory, not the file.
    if "state_dir" in given:
        section["state_dir"] = str(Path(given["state_dir"]).absolute())
    if "plugin_dirs" in given:
        section["plugin_dirs"] = [str(Path(p).absolute()) for p in given["plugin_dirs"]]
    if "peers" in given:
        section["peers"] = list(given["peers"])
    if "riak_nodes" in given:
        riak_table["nodes"] = list(given["riak_nodes"])
    zk_hosts = str(given.get("zk_hosts", zk.get("hosts", defaults.ZK_HOSTS)))

    where = f"{source} [companion]"
    values: dict[str, Any] = {}
    host, port = parse_listen(str(section.pop("listen", defaults.LISTEN)), source=where)
    values["host"], values["port"] = host, port
    for name, value in section.items():
        if name in _POSITIVE_INTS:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SettingsError(f"{where}: {name} must be a positive integer, not {value!r}")
            values[name] = value
        elif name in _POSITIVE_FLOATS or name == "audit_interval_s":
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise SettingsError(f"{where}: {name} must be a non-negative number")
            if name in _POSITIVE_FLOATS and value == 0:
                raise SettingsError(f"{where}: {name} must be positive")
            values[name] = float(value)
        elif name in ("entry_points", "check_plugins_in_child", "hide_addresses", "quarantine"):
            if not isinstance(value, bool):
                raise SettingsError(f"{where}: {name} must be true or false")
            values[name] = value
        elif name in ("peers", "status_peers", "metrics_peers", "audit_dcs"):
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                raise SettingsError(f"{where}: {name} must be a list of strings")
            values[name] = tuple(value)
        elif name == "plugin_dirs":
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                raise SettingsError(f"{where}: plugin_dirs must be a list of paths")
            values[name] = tuple(base_dir / p for p in value)
        elif name == "state_dir":
            values[name] = base_dir / str(value)
        elif name == "node":
            values[name] = str(value)
        elif name == "isolation":
            if value not in ("substream", "chunk"):
                raise SettingsError(f'{where}: isolation must be "substream" or "chunk"')
            values[name] = value
    values.setdefault("metrics_peers", values.get("status_peers", defaults.STATUS_PEERS))
    for peer in (
        *values.get("peers", ()),
        *values.get("status_peers", ()),
        *values["metrics_peers"],
    ):
        try:
            ipaddress.ip_network(peer, strict=False)
        except ValueError as e:
            raise SettingsError(f"{where}: peer {peer!r} is not an IP address or network") from e
    values["riak"] = RiakSettings.from_mapping(riak_table, source=f"{source} [riak]")
    for url in values["riak"].nodes:  # refused here, before gunicorn forks any worker
        problem = node_url_error(url)
        if problem:
            raise SettingsError(f"{source} [riak] nodes: {problem}")
    namespaces = table(data, "namespaces", source=source)
    known = {f.name for f in fields(Namespaces)}
    unknown_keys(namespaces, known, source=f"{source} [namespaces]")
    try:
        values["namespaces"] = Namespaces(**{k: str(v) for k, v in namespaces.items()})
    except InvalidName as e:
        raise SettingsError(f"{source} [namespaces]: {e}") from e
    nodes = ring.get("nodes", [])
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        raise SettingsError(f"{source} [ring]: nodes must be a list of node names")
    values["ring_nodes"] = tuple(nodes)
    for name, default in (("ring_size", 64), ("n_val", 3)):
        value = ring.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise SettingsError(f"{source} [ring]: {name} must be a positive integer")
        values[name] = value
    if nodes and values.get("node", "") not in nodes:
        raise SettingsError(f"{source}: [companion] node must be one of [ring] nodes")
    values["zk_hosts"] = zk_hosts
    values["zk_root"] = "/" + str(zk.get("root", defaults.ZK_ROOT)).strip("/")
    interval = zk.get("health_interval_s", defaults.ZK_HEALTH_INTERVAL_S)
    if isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0:
        raise SettingsError(f"{source} [zookeeper]: health_interval_s must be a positive number")
    values["zk_health_interval_s"] = float(interval)
    session = zk.get("session_timeout_s", defaults.ZK_SESSION_TIMEOUT_S)
    if isinstance(session, bool) or not isinstance(session, int | float) or session <= 0:
        raise SettingsError(f"{source} [zookeeper]: session_timeout_s must be a positive number")
    values["zk_session_timeout_s"] = float(session)
    values.update(_registry_trust(zk, base_dir, f"{source} [zookeeper]"))
    return replace(CompanionSettings(), **values)


def _registry_trust(zk: Mapping[str, Any], base_dir: Path, where: str) -> dict[str, Any]:
    """``auth`` (digest ``user:password``) and ``trusted_keys`` (key files, relative to
    the config file, or base64 keys), each key checked now."""
    auth, keys = zk.get("auth", ""), zk.get("trusted_keys", [])
    if not isinstance(auth, str) or (auth and ":" not in auth):
        raise SettingsError(f'{where}: auth must be "user:password"')
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise SettingsError(f"{where}: trusted_keys must be a list of key files or base64 keys")
    resolved = tuple(
        k if is_inline_key(k) or Path(k).is_absolute() else str(base_dir / k) for k in keys
    )
    try:
        TrustedKeys.load(resolved)
    except InvalidSigningKey as e:
        raise SettingsError(f"{where}: {e}") from e
    return {"zk_auth": auth, "trusted_keys": resolved}


def as_mapping(settings: CompanionSettings) -> Mapping[str, Any]:
    """The settings as plain values, for the status page and logs (with
    ``hide_addresses``, the listen, Riak and ZooKeeper addresses are not shown)."""
    hidden = "(hidden)" if settings.hide_addresses else None
    return {
        "listen": hidden or settings.listen,
        "node": settings.node,
        "workers": settings.workers,
        "threads": settings.threads,
        "isolation": settings.isolation,
        "quarantine": settings.quarantine,
        "queue_max": settings.queue_max,
        "max_wait_s": settings.max_wait_s,
        "plugin_dirs": [str(p) for p in settings.plugin_dirs],
        "riak": hidden or list(settings.riak.nodes),
        "zookeeper": hidden or settings.zk_hosts or "(none)",
        "trusted_keys": len(settings.trusted_keys),
    }
