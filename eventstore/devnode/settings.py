"""The devnode's settings: one frozen object, parsed and validated once at start.

Sources, later ones winning: ``defaults.py``; the TOML file given by ``--config``;
the command-line options ``--data-dir`` and ``--listen`` (click also reads them from
``RIAK_EVENTS_DEVNODE_DATA_DIR`` and ``RIAK_EVENTS_DEVNODE_LISTEN``).

The TOML file (every table and key optional)::

    [devnode]
    listen = "127.0.0.1:8098"
    data_dir = "var/devnode"
    nodename = "dev1@127.0.0.1"
    map_size_bytes = 68719476736
    max_object_bytes = 52428800
    max_props_bytes = 1048576
    tombstone_ttl_s = 3.0
    purge_interval_s = 30.0

    [ring]
    ring_size = 64
    nodes = ["dev1@127.0.0.1", "dev2@127.0.0.1", "dev3@127.0.0.1", "dev4@127.0.0.1"]
    down = []                      # logical nodes treated as down by the hook's preflists

    [companions]                   # logical node -> its companion's base URL
    "dev1@127.0.0.1" = "http://127.0.0.1:5001"

    [hook]
    path = "/v1/keys"
    timeout_s = 2.0
    queue_max = 1024
    workers = 4
    module = "riak_events_hook"
    data_bucket_type = "events"
    data_bucket = "events"

    [bucket_types.events]          # merged over the built-in events/epochs/substreams
    expiry_s = 864000              # 0 or absent for a new type: never expires
    [bucket_types.events.props]
    n_val = 3
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventstore.devnode import defaults
from eventstore.devnode.buckets import DEFAULT_TYPE, validate_props
from eventstore.devnode.errors import InvalidProps
from eventstore.settings import SettingsError, parse_listen, read_toml, table, unknown_keys


@dataclass(frozen=True)
class BucketTypeSettings:
    """One bucket type: its full props and its expiry (``None``: never expires)."""

    name: str
    props: Mapping[str, Any]
    expiry_s: float | None


@dataclass(frozen=True)
class HookSettings:
    """The post-commit hook twin's settings."""

    path: str = defaults.HOOK_PATH
    timeout_s: float = defaults.HOOK_TIMEOUT_S
    queue_max: int = defaults.HOOK_QUEUE_MAX
    workers: int = defaults.HOOK_WORKERS
    module: str = defaults.HOOK_MODULE
    data_bucket_type: str = defaults.HOOK_DATA_BUCKET_TYPE
    data_bucket: str = defaults.HOOK_DATA_BUCKET


@dataclass(frozen=True)
class DevnodeSettings:
    """Everything the devnode needs to run, validated."""

    data_dir: Path
    host: str
    port: int
    nodename: str
    ring_size: int
    nodes: tuple[str, ...]
    down_nodes: frozenset[str]
    companions: Mapping[str, str]
    bucket_types: Mapping[str, BucketTypeSettings]
    hook: HookSettings
    map_size_bytes: int = defaults.MAP_SIZE_BYTES
    max_object_bytes: int = defaults.MAX_OBJECT_BYTES
    max_props_bytes: int = defaults.MAX_PROPS_BYTES
    tombstone_ttl_s: float = defaults.TOMBSTONE_TTL_S
    purge_interval_s: float = defaults.PURGE_INTERVAL_S
    purge_batch: int = defaults.PURGE_BATCH
    write_batch_max: int = defaults.WRITE_BATCH_MAX


_DEVNODE_KEYS = {
    "listen",
    "data_dir",
    "nodename",
    "map_size_bytes",
    "max_object_bytes",
    "max_props_bytes",
    "tombstone_ttl_s",
    "purge_interval_s",
    "purge_batch",
    "write_batch_max",
}
_HOOK_KEYS = {
    "path",
    "timeout_s",
    "queue_max",
    "workers",
    "module",
    "data_bucket_type",
    "data_bucket",
}


def load(
    config: Path | None = None,
    *,
    data_dir: Path | None = None,
    listen: str | None = None,
) -> DevnodeSettings:
    """Build the settings from the defaults, the TOML file and the CLI options.

    Args:
        config: the TOML file, or ``None`` for the defaults alone.
        data_dir: overrides ``[devnode] data_dir``; one of the two is required.
        listen: overrides ``[devnode] listen`` (``HOST:PORT``).

    Raises:
        SettingsError: naming the file and key at fault.
    """
    source = str(config) if config else "settings"
    data = read_toml(config)
    unknown_keys(data, {"devnode", "ring", "companions", "hook", "bucket_types"}, source=source)
    node = table(data, "devnode", source=source)
    unknown_keys(node, _DEVNODE_KEYS, source=f"{source} [devnode]")
    ring = table(data, "ring", source=source)
    unknown_keys(ring, {"ring_size", "nodes", "down"}, source=f"{source} [ring]")
    hook = table(data, "hook", source=source)
    unknown_keys(hook, _HOOK_KEYS, source=f"{source} [hook]")

    chosen_dir = data_dir if data_dir is not None else node.get("data_dir")
    if chosen_dir is None:
        raise SettingsError(f"{source}: no data directory (--data-dir or [devnode] data_dir)")
    host, port = parse_listen(str(listen or node.get("listen", defaults.LISTEN)), source=source)

    ring_size = _int(ring, "ring_size", defaults.RING_SIZE, source=f"{source} [ring]")
    if ring_size < 8 or ring_size > 1024 or ring_size & (ring_size - 1):
        raise SettingsError(f"{source} [ring]: ring_size must be a power of 2 in 8..1024")
    nodes = tuple(str(n) for n in ring.get("nodes", defaults.NODES))
    if not nodes or len(set(nodes)) != len(nodes):
        raise SettingsError(f"{source} [ring]: nodes must be a non-empty list of unique names")
    down = frozenset(str(n) for n in ring.get("down", ()))
    if down - set(nodes):
        raise SettingsError(
            f"{source} [ring]: down names unknown nodes {sorted(down - set(nodes))}"
        )

    companions = {
        str(k): str(v).rstrip("/") for k, v in table(data, "companions", source=source).items()
    }
    if set(companions) - set(nodes):
        raise SettingsError(
            f"{source} [companions]: unknown nodes {sorted(set(companions) - set(nodes))}"
        )

    return DevnodeSettings(
        data_dir=Path(chosen_dir),
        host=host,
        port=port,
        nodename=str(node.get("nodename", nodes[0])),
        ring_size=ring_size,
        nodes=nodes,
        down_nodes=down,
        companions=companions,
        bucket_types=_bucket_types(table(data, "bucket_types", source=source), source=source),
        hook=HookSettings(
            path="/" + str(hook.get("path", defaults.HOOK_PATH)).lstrip("/"),
            timeout_s=_float(hook, "timeout_s", defaults.HOOK_TIMEOUT_S, source=source),
            queue_max=_int(hook, "queue_max", defaults.HOOK_QUEUE_MAX, source=source),
            workers=_int(hook, "workers", defaults.HOOK_WORKERS, source=source),
            module=str(hook.get("module", defaults.HOOK_MODULE)),
            data_bucket_type=str(hook.get("data_bucket_type", defaults.HOOK_DATA_BUCKET_TYPE)),
            data_bucket=str(hook.get("data_bucket", defaults.HOOK_DATA_BUCKET)),
        ),
        map_size_bytes=_int(node, "map_size_bytes", defaults.MAP_SIZE_BYTES, source=source),
        max_object_bytes=_int(node, "max_object_bytes", defaults.MAX_OBJECT_BYTES, source=source),
        max_props_bytes=_int(node, "max_props_bytes", defaults.MAX_PROPS_BYTES, source=source),
        tombstone_ttl_s=_float(node, "tombstone_ttl_s", defaults.TOMBSTONE_TTL_S, source=source),
        purge_interval_s=_float(node, "purge_interval_s", defaults.PURGE_INTERVAL_S, source=source),
        purge_batch=_int(node, "purge_batch", defaults.PURGE_BATCH, source=source),
        write_batch_max=_int(node, "write_batch_max", defaults.WRITE_BATCH_MAX, source=source),
    )


def _bucket_types(config: Mapping[str, Any], *, source: str) -> dict[str, BucketTypeSettings]:
    """The built-in types merged with the configured ones, plus ``default``."""
    merged: dict[str, BucketTypeSettings] = {
        DEFAULT_TYPE: BucketTypeSettings(DEFAULT_TYPE, dict(defaults.DEFAULT_TYPE_PROPS), None)
    }
    names = list(defaults.BUCKET_TYPES) + [n for n in config if n not in defaults.BUCKET_TYPES]
    for name in names:
        builtin = defaults.BUCKET_TYPES.get(name, {})
        given = config.get(name, {})
        where = f"{source} [bucket_types.{name}]"
        if not isinstance(given, dict):
            raise SettingsError(f"{where} must be a table")
        unknown_keys(given, {"expiry_s", "props"}, source=where)
        base = (
            defaults.DEFAULT_TYPE_PROPS if name == DEFAULT_TYPE else defaults.CUSTOM_TYPE_BASE_PROPS
        )
        try:
            props = {
                **base,
                **builtin.get("props", {}),
                **validate_props(table(given, "props", source=where), where=where),
            }
        except InvalidProps as e:
            raise SettingsError(str(e)) from e
        if props.get("last_write_wins") and props.get("allow_mult"):
            raise SettingsError(f"{where}: last_write_wins and allow_mult cannot both be true")
        expiry = _float(given, "expiry_s", float(builtin.get("expiry_s", 0)), source=where)
        merged[name] = BucketTypeSettings(name, props, expiry if expiry > 0 else None)
    return merged


def _int(data: Mapping[str, Any], key: str, default: int, *, source: str) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SettingsError(f"{source}: {key} must be a non-negative integer, not {value!r}")
    return value


def _float(data: Mapping[str, Any], key: str, default: float, *, source: str) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise SettingsError(f"{source}: {key} must be a non-negative number, not {value!r}")
    return float(value)
