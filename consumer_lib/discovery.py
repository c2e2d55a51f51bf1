"""Where the Riak nodes are: a configured list, or ZooKeeper's live nodes.

Booking's clients read a list of live nodes kept up to date from ZooKeeper and sent
each request to a random one. Here every companion registers its node as an ephemeral
znode ``<root>/companions/<node>`` holding JSON with ``endpoints.riak`` (its node's HTTP
URLs; see ``companion/zk.py``). :func:`live_nodes` lists them and puts a random one
first: the client starts there and keeps the others for retries on another node.

Failure semantics: ZooKeeper unreachable, or no live node registered:
:class:`~consumer_lib.errors.DiscoveryFailed` (retriable). Malformed znodes are skipped
(logged). kazoo is an optional dependency (``riak-events[zookeeper]``), imported only
here and only when ZooKeeper is used.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Sequence
from typing import Any

from consumer_lib.errors import DiscoveryFailed, InvalidArgument
from eventstore import zkpaths

log = logging.getLogger(__name__)

__all__ = ["configured_nodes", "live_nodes", "zk_client"]

#: Our ZooKeeper root (the companions' ``[zookeeper] root``).
ZK_ROOT = "/riak-events"


def configured_nodes(nodes: Sequence[str]) -> tuple[str, ...]:
    """Check and normalise a configured node list (``http://host:port`` URLs).

    Raises:
        InvalidArgument: empty, or an entry that is not an http:// URL.
    """
    cleaned = tuple(dict.fromkeys(n.strip().rstrip("/") for n in nodes if n.strip()))
    if not cleaned:
        raise InvalidArgument("no Riak node given: pass nodes=[...] or a ZooKeeper ensemble")
    for node in cleaned:
        if not node.startswith("http://"):
            raise InvalidArgument(f"node {node!r} is not an http://host:port URL")
    return cleaned


def zk_client(hosts: str, *, timeout_s: float = 5.0) -> Any:
    """A started kazoo client of ``hosts``.

    Raises:
        DiscoveryFailed: kazoo is not installed, or ZooKeeper cannot be reached.
    """
    try:
        from kazoo.client import KazooClient  # noqa: PLC0415 (optional dependency)
    except ImportError as e:
        raise DiscoveryFailed(
            "ZooKeeper discovery needs kazoo: pip install 'riak-events[zookeeper]'"
        ) from e
    client = KazooClient(hosts=hosts, timeout=timeout_s)
    try:
        client.start(timeout=timeout_s)
    except Exception as e:  # kazoo's timeout and connection errors
        client.close()
        raise DiscoveryFailed(f"ZooKeeper {hosts} unreachable: {e}") from e
    return client


def live_nodes(
    client: Any, *, root: str = ZK_ROOT, rng: random.Random | None = None
) -> tuple[str, ...]:
    """The Riak URLs of the live nodes, a random one first.

    Args:
        client: a started kazoo client.
        root: our ZooKeeper root.
        rng: randomness (injected for tests).

    Raises:
        DiscoveryFailed: ZooKeeper failed, or no live node is registered.
    """
    path = zkpaths.companions(root)
    try:
        from kazoo.exceptions import KazooException, NoNodeError  # noqa: PLC0415
    except ImportError as e:  # pragma: no cover - zk_client checked it
        raise DiscoveryFailed("ZooKeeper discovery needs kazoo") from e
    try:
        children = sorted(client.get_children(path))
    except NoNodeError:
        children = []
    except KazooException as e:
        raise DiscoveryFailed(f"listing {path} failed: {e}") from e
    urls: list[str] = []
    for child in children:
        try:
            data, _ = client.get(f"{path}/{child}")
            riak = json.loads(data)["endpoints"]["riak"]
            urls.extend(u for u in ([riak] if isinstance(riak, str) else riak) if u not in urls)
        except NoNodeError:
            continue  # went away while we listed
        except (ValueError, KeyError, TypeError) as e:
            log.warning("consumer: live node znode %s/%s is malformed, skipped: %s", path, child, e)
    if not urls:
        raise DiscoveryFailed(f"no live node registered under {path}")
    (rng or random.Random()).shuffle(urls)
    return configured_nodes(urls)
