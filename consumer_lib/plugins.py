"""The plugins the client-side fallback runs: found where the companion finds them.

A thin adapter over :mod:`substreams.loader` (directories and installed entry points)
and :mod:`substreams.registry` (the ZooKeeper registry): the consumer loads the very
files the companions run, so a fallback result is the one the companion would store,
as long as the versions agree (the substream reader checks them).

Registry plugins are copied once into a private directory (as each companion's mirror
does) and loaded from there. Loading is lazy (first fallback) and refreshed when a
substream is asked for that is not loaded yet, or whose files changed.

Failure semantics: a plugin file that does not load is reported by the loader and
skipped; asking for a substream that no source declares raises
:class:`~consumer_lib.errors.PluginNotFound` naming the sources searched.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from consumer_lib.errors import DiscoveryFailed, PluginNotFound
from substreams.api import Substream
from substreams.loader import PluginSet

log = logging.getLogger(__name__)

__all__ = ["PluginCatalog"]


class PluginCatalog:
    """Substream plugins by name, from directories, entry points and the registry.

    Args:
        directories: plugin directories, in priority order (the companion's
            ``plugin_dirs``).
        use_entry_points: also the installed ``riak_events.substreams`` plugins.
        zk_client: a started kazoo client to read the ZooKeeper registry from, or None.
        zk_root: our ZooKeeper root.
    """

    def __init__(
        self,
        directories: Sequence[Path] = (),
        *,
        use_entry_points: bool = True,
        zk_client: Any = None,
        zk_root: str = "/riak-events",
    ) -> None:
        self._directories = tuple(directories)
        self._use_entry_points = use_entry_points
        self._zk_client = zk_client
        self._zk_root = zk_root
        self._registry_dir: tempfile.TemporaryDirectory[str] | None = None
        self._plugins: PluginSet | None = None
        self._lock = threading.Lock()

    def get(self, name: str) -> Substream:
        """The substream ``name``, loading or refreshing the plugins as needed.

        Raises:
            PluginNotFound: no source declares it.
            DiscoveryFailed: the ZooKeeper registry could not be read.
        """
        with self._lock:
            if self._plugins is None:
                self._plugins = PluginSet(self._all_dirs(), use_entry_points=self._use_entry_points)
            self._plugins.refresh()
            found = self._plugins.substreams.get(name)
            if found is None and self._zk_client is not None:
                self._copy_registry()
                self._plugins.refresh()
                found = self._plugins.substreams.get(name)
        if found is None:
            sources = [str(d) for d in self._directories]
            if self._use_entry_points:
                sources.append("entry points")
            if self._zk_client is not None:
                sources.append(f"ZooKeeper registry {self._zk_root}")
            failures = "; ".join(str(f) for f in self._plugins.report.failures)
            raise PluginNotFound(
                f"no plugin declares substream {name!r} in {', '.join(sources) or 'nothing'}"
                + (f" (not loaded: {failures})" if failures else "")
            )
        return found

    def _all_dirs(self) -> tuple[Path, ...]:
        if self._zk_client is None:
            return self._directories
        self._registry_dir = tempfile.TemporaryDirectory(prefix="riak-events-plugins-")
        self._copy_registry()
        return (*self._directories, Path(self._registry_dir.name))

    def _copy_registry(self) -> None:
        from substreams.registry import list_entries  # noqa: PLC0415 (needs kazoo)

        assert self._registry_dir is not None
        target = Path(self._registry_dir.name)
        try:
            entries = list_entries(self._zk_client, root=self._zk_root)
        except Exception as e:  # kazoo raises many kinds of errors
            raise DiscoveryFailed(f"reading the plugin registry failed: {e}") from e
        for entry in entries.values():
            path = target / entry.file
            if path.exists() and path.read_text(encoding="utf-8") == entry.source:
                continue
            tmp = target / f".{entry.file}.tmp"
            tmp.write_text(entry.source, encoding="utf-8")
            tmp.replace(path)
            log.info("consumer: registry plugin %s version %s", entry.file, entry.version)

    def close(self) -> None:
        """Remove the private copy of registry plugins."""
        if self._registry_dir is not None:
            with contextlib.suppress(OSError):
                self._registry_dir.cleanup()
