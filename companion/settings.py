"""The companion's settings: one frozen object, parsed and validated once at start.

Sources, later ones winning: ``defaults.py``; the TOML file (``--config``); the CLI
flags, each also read from the environment variable declared with it. Every option
(key, type, default, bounds, help, flag, variable) is declared once, in
``companion/options.py``; the loader below, ``cli.py`` and ``example-config.toml`` (every
key, annotated) follow from it. Relative paths in the file are relative to the file's
directory; on the command line, to the current directory; the default state directory
is ``var/companion`` under the current directory.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from companion import defaults
from companion.options import OPTIONS
from eventstore.blob import DecodeLimits
from eventstore.errors import InvalidName
from eventstore.names import Namespaces
from eventstore.options import node_url_error
from eventstore.riak.settings import RiakSettings
from eventstore.settings import SettingsError, parse_listen, read_toml, table, unknown_keys
from substreams.errors import InvalidSigningKey
from substreams.protocol import Isolation, Limits
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


def load(config: Path | None = None, **overrides: Any) -> CompanionSettings:
    """Build the settings from defaults, the TOML file and CLI overrides.

    Every key and bound is declared once in :data:`companion.options.OPTIONS`.

    Args:
        config: the TOML file, or ``None`` for the defaults alone.
        overrides: values from the CLI, by option ``dest`` (``None`` and ``()`` are
            ignored): ``listen``, ``node``, ``workers``, ``threads``, ``state_dir``,
            ``plugin_dirs``, ``peers``, ``riak_nodes``, ``zk_hosts``.

    Raises:
        SettingsError: naming the file (or flag) and key at fault.
    """
    source = str(config) if config else "settings"
    base_dir = config.parent if config else Path.cwd()
    data = read_toml(config)
    values = OPTIONS.parse(data, source=source, base_dir=base_dir)
    riak_table = dict(table(data, "riak", source=source))

    values.update(OPTIONS.overrides(overrides))
    if "riak_nodes" in values:
        riak_table["nodes"] = list(values.pop("riak_nodes"))

    where = f"{source} [companion]"
    host, port = parse_listen(str(values.pop("listen", defaults.LISTEN)), source=where)
    values["host"], values["port"] = host, port
    if "plugin_dirs" in values:
        values["plugin_dirs"] = tuple(Path(p) for p in values["plugin_dirs"])
    if "state_dir" in values:
        values["state_dir"] = Path(values["state_dir"])
    values.setdefault("metrics_peers", values.get("status_peers", defaults.STATUS_PEERS))
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
    nodes = values.get("ring_nodes", ())
    if nodes and values.get("node", "") not in nodes:
        raise SettingsError(f"{source}: [companion] node must be one of [ring] nodes")
    values["zk_root"] = "/" + str(values.get("zk_root", defaults.ZK_ROOT)).strip("/")
    values["trusted_keys"] = _trusted_keys(
        values.get("trusted_keys", ()), base_dir, f"{source} [zookeeper]"
    )
    return replace(CompanionSettings(), **values)


def _trusted_keys(keys: tuple[str, ...], base_dir: Path, where: str) -> tuple[str, ...]:
    """``trusted_keys`` (key files, relative to the config file, or base64 keys), each
    key checked now."""
    resolved = tuple(
        k if is_inline_key(k) or Path(k).is_absolute() else str(base_dir / k) for k in keys
    )
    try:
        TrustedKeys.load(resolved)
    except InvalidSigningKey as e:
        raise SettingsError(f"{where}: {e}") from e
    return resolved


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
