"""The client's settings as a daemon's config file gives them: the ``[riak]`` table.

    [riak]
    nodes = ["http://10.0.0.1:8098", "http://10.0.0.2:8098"]
    timeout_s = 10.0
    connect_timeout_s = 2.0
    concurrency = 16
    max_idle_per_node = 32
    node_cooldown_s = 2.0
    retry_max_tries = 4
    retry_deadline_s = 15.0

Daemons parse this once into :class:`RiakSettings` and build the client with
:meth:`RiakSettings.client`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from eventstore.riak import defaults
from eventstore.riak.client import RiakClient
from eventstore.riak.retry import Retry
from eventstore.settings import SettingsError, unknown_keys


@dataclass(frozen=True)
class RiakSettings:
    """Where the cluster is and how to talk to it."""

    nodes: tuple[str, ...] = ("http://127.0.0.1:8098",)
    timeout_s: float = defaults.TIMEOUT_S
    connect_timeout_s: float = defaults.CONNECT_TIMEOUT_S
    concurrency: int = defaults.CONCURRENCY
    max_idle_per_node: int = defaults.MAX_IDLE_PER_NODE
    node_cooldown_s: float = defaults.NODE_COOLDOWN_S
    retry_max_tries: int = defaults.RETRY_MAX_TRIES
    retry_deadline_s: float = defaults.RETRY_DEADLINE_S

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "[riak]") -> RiakSettings:
        """Parse a ``[riak]`` table.

        Raises:
            SettingsError: an unknown key or a value of the wrong kind, naming it.
        """
        known = {f.name for f in fields(cls)}
        unknown_keys(data, known, source=source)
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if f.name == "nodes":
                if (
                    not isinstance(value, list)
                    or not value
                    or not all(isinstance(n, str) for n in value)
                ):
                    raise SettingsError(f"{source}: nodes must be a non-empty list of URLs")
                values["nodes"] = tuple(value)
            elif isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise SettingsError(f"{source}: {f.name} must be a positive number, not {value!r}")
            else:
                values[f.name] = type(getattr(cls, f.name))(value)
        return cls(**values)

    def client(self) -> RiakClient:
        """A client configured by these settings."""
        return RiakClient(
            self.nodes,
            timeout_s=self.timeout_s,
            connect_timeout_s=self.connect_timeout_s,
            concurrency=self.concurrency,
            max_idle_per_node=self.max_idle_per_node,
            node_cooldown_s=self.node_cooldown_s,
            retry=Retry(max_tries=self.retry_max_tries, deadline_s=self.retry_deadline_s),
        )
