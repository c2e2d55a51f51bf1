"""Which node the next request goes to: round robin, avoiding nodes that just failed.

A node that fails a request is "cooling" for ``cooldown_s``: picks prefer other nodes
meanwhile. A retry passes the node that just failed as ``exclude`` so it goes elsewhere
whenever there is an elsewhere. With every node cooling, picks still go round robin
(the cluster may have recovered; refusing to try would turn a blip into an outage).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence


class NodeSet:
    """The configured nodes (base URLs) and their recent failures. Thread-safe."""

    def __init__(
        self,
        nodes: Sequence[str],
        *,
        cooldown_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Raises:
        ValueError: no nodes, or a node twice.
        """
        if not nodes:
            raise ValueError("a Riak client needs at least one node URL")
        if len(set(nodes)) != len(nodes):
            raise ValueError(f"node URLs must be unique: {list(nodes)}")
        self.nodes: tuple[str, ...] = tuple(nodes)
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._cooling_until: dict[str, float] = {}
        self._next = 0
        self._lock = threading.Lock()

    def pick(self, exclude: str | None = None) -> str:
        """The next node to use: not ``exclude`` if avoidable, not cooling if avoidable."""
        with self._lock:
            now = self._clock()
            count = len(self.nodes)
            order = [self.nodes[(self._next + i) % count] for i in range(count)]
            self._next = (self._next + 1) % count
            others = [n for n in order if n != exclude] or order
            for node in others:
                if self._cooling_until.get(node, 0.0) <= now:
                    return node
            return others[0]

    def failed(self, node: str) -> None:
        """Record that ``node`` just failed a request."""
        with self._lock:
            self._cooling_until[node] = self._clock() + self._cooldown_s

    def succeeded(self, node: str) -> None:
        """Record that ``node`` just answered."""
        if node in self._cooling_until:
            with self._lock:
                self._cooling_until.pop(node, None)

    def cooling(self) -> list[str]:
        """Nodes currently avoided."""
        now = self._clock()
        with self._lock:
            return [n for n, until in self._cooling_until.items() if until > now]
