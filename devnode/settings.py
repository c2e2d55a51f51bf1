"""The devnode's settings: one frozen object, parsed and validated once at start.

Sources, later ones winning: ``defaults.py``; the TOML file given by ``--config``;
the command-line options ``--data-dir`` and ``--listen`` (also read from
``RIAK_EVENTS_DEVNODE_DATA_DIR`` and ``RIAK_EVENTS_DEVNODE_LISTEN``). Every option (key,
type, default, bounds, help, flag, variable) is declared once, in ``options.py``; the
loader below, ``cli.py`` and ``example-config.toml`` (every table and key, annotated)
follow from it. A relative ``data_dir`` in the file is relative to the file's directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from devnode import defaults
from devnode.buckets import DEFAULT_TYPE, validate_props
from devnode.errors import InvalidProps
from devnode.options import OPTIONS
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
    breaker_failures: int = defaults.HOOK_BREAKER_FAILURES
    breaker_cooldown_ms: int = defaults.HOOK_BREAKER_COOLDOWN_MS
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


def load(
    config: Path | None = None,
    *,
    data_dir: Path | str | None = None,
    listen: str | None = None,
) -> DevnodeSettings:
    """Build the settings from the defaults, the TOML file and the CLI options.

    Every key and bound is declared once in :data:`devnode.options.OPTIONS`.

    Args:
        config: the TOML file, or ``None`` for the defaults alone.
        data_dir: overrides ``[devnode] data_dir``; one of the two is required.
        listen: overrides ``[devnode] listen`` (``HOST:PORT``).

    Raises:
        SettingsError: naming the file and key at fault.
    """
    source = str(config) if config else "settings"
    data = read_toml(config)
    values = OPTIONS.parse(data, source=source, base_dir=config.parent if config else None)
    values.update(OPTIONS.overrides({"data_dir": data_dir, "listen": listen}))

    if values.get("data_dir") is None:
        raise SettingsError(f"{source}: no data directory (--data-dir or [devnode] data_dir)")
    host, port = parse_listen(values.pop("listen", defaults.LISTEN), source=source)
    nodes = values.pop("nodes", defaults.NODES)
    down = frozenset(values.pop("down_nodes", ()))
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
    hook = {f.name: values.pop(f"hook_{f.name}") for f in fields(HookSettings)
            if f"hook_{f.name}" in values}  # fmt: skip
    if "path" in hook:
        hook["path"] = "/" + hook["path"].lstrip("/")
    return DevnodeSettings(
        data_dir=Path(values.pop("data_dir")),
        host=host,
        port=port,
        nodename=values.pop("nodename", nodes[0]),
        ring_size=values.pop("ring_size", defaults.RING_SIZE),
        nodes=tuple(nodes),
        down_nodes=down,
        companions=companions,
        bucket_types=_bucket_types(table(data, "bucket_types", source=source), source=source),
        hook=HookSettings(**hook),
        **values,
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
