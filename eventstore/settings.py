"""Shared helpers for daemons' settings: read a TOML file, parse common value forms.

Each daemon owns one frozen settings dataclass, built once at start from its defaults
module, a TOML file and the command-line options (click reads the environment for
those, ``RIAK_EVENTS_<COMMAND>_<OPTION>``). Libraries never read the environment; only
CLIs do, and they pass what they read in explicitly.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from eventstore.errors import EventStoreError


class SettingsError(EventStoreError, ValueError):
    """A settings file or option is missing, unreadable or has a wrong value.

    The message names the file and the offending key.
    """


def read_toml(path: Path | None) -> dict[str, Any]:
    """Read a TOML file into a dict; ``None`` gives an empty dict.

    Raises:
        SettingsError: the file cannot be read or is not valid TOML.
    """
    if path is None:
        return {}
    try:
        with path.open("rb") as f:
            return dict(tomllib.load(f))
    except OSError as e:
        raise SettingsError(f"cannot read settings file {path}: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f"settings file {path} is not valid TOML: {e}") from e


def table(data: Mapping[str, Any], name: str, *, source: str) -> dict[str, Any]:
    """The sub-table ``name`` of ``data`` (empty if absent).

    Raises:
        SettingsError: ``name`` is present but not a table.
    """
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise SettingsError(f"{source}: [{name}] must be a table, not {type(value).__name__}")
    return value


def parse_listen(text: str, *, source: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` (``[v6addr]:PORT`` for IPv6) into host and port.

    Raises:
        SettingsError: not of that form or the port is out of range.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise SettingsError(f"{source}: listen address {text!r} is not HOST:PORT")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise SettingsError(f"{source}: port {port} out of range in {text!r}")
    return host.strip("[]"), port


def unknown_keys(data: Mapping[str, Any], known: set[str], *, source: str) -> None:
    """Refuse keys a settings table does not define (a typo should not pass silently).

    Raises:
        SettingsError: naming the unknown keys.
    """
    extra = sorted(set(data) - known)
    if extra:
        raise SettingsError(f"{source}: unknown setting(s) {', '.join(extra)}")
