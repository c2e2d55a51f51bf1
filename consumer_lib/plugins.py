"""The plugins the client-side fallback runs: found where the companion finds them.

A thin adapter over :mod:`substreams.loader` (directories and installed entry points)
and :mod:`substreams.registry` (the ZooKeeper registry): the consumer loads the very
files the companions run, so a fallback result is the one the companion would store,
as long as the versions agree (the substream reader checks them).

Registry plugins are used only when the catalog is given ``trusted_keys``: each is
then installed as each companion's mirror installs it (:func:`substreams.mirror.install`:
signature verified under a trusted key, imported first in a sandboxed child) into a
private directory and loaded from there; one that is refused is never imported in this
process, and the reason is named when that substream is asked for. Without trusted
keys the registry is not read at all. Loading is lazy (first fallback) and refreshed
when a substream is asked for that is not loaded yet, or whose files changed.

Failure semantics: a plugin file that does not load is reported by the loader and
skipped; asking for a substream that no source declares raises
:class:`~consumer_lib.errors.PluginNotFound` naming the sources searched.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from consumer_lib.errors import DiscoveryFailed, InvalidArgument, PluginNotFound
from substreams.api import Substream
from substreams.errors import InvalidSigningKey, PluginLoadError, SignatureRejected
from substreams.loader import PluginSet
from substreams.mirror import install
from substreams.signing import TrustedKeys

log = logging.getLogger(__name__)

__all__ = ["PluginCatalog", "path_list"]


def path_list(
    paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
) -> tuple[Path, ...]:
    """``paths`` as a tuple of :class:`~pathlib.Path`: a sequence of strings or paths,
    or one string or path (not split into characters)."""
    if isinstance(paths, str | os.PathLike):
        return (Path(paths),)
    return tuple(Path(p) for p in paths)


class PluginCatalog:
    """Substream plugins by name, from directories, entry points and the registry.

    Args:
        directories: plugin directories (paths or strings; one string is one
            directory), in priority order (the companion's ``plugin_dirs``).
        use_entry_points: also the installed ``riak_events.substreams`` plugins.
        zk_client: a started kazoo client to read the ZooKeeper registry from, or None.
        zk_root: our ZooKeeper root.
        trusted_keys: public key files or base64 keys; registry plugins signed by one of
            them are used (none: the registry is not used).

    Raises:
        InvalidArgument: a trusted key that cannot be read.
    """

    def __init__(
        self,
        directories: Sequence[str | os.PathLike[str]] | str | os.PathLike[str] = (),
        *,
        use_entry_points: bool = True,
        zk_client: Any = None,
        zk_root: str = "/riak-events",
        trusted_keys: Sequence[str] = (),
    ) -> None:
        try:
            self._trust = TrustedKeys.load(trusted_keys)
        except InvalidSigningKey as e:
            raise InvalidArgument(str(e)) from e
        #: registry file -> why it was refused.
        self.rejected: dict[str, str] = {}
        self._directories = path_list(directories)
        self._use_entry_points = use_entry_points
        self._zk_client = zk_client if self._trust else None
        self._zk_names = zk_client  # names only (never code): for "known: ..." messages
        if zk_client is not None and not self._trust:
            log.info("consumer: no trusted_keys: registry plugins of %s are not used", zk_root)
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
            failures = "; ".join(
                [str(f) for f in self._plugins.report.failures]
                + [f"registry {file}: {why}" for file, why in sorted(self.rejected.items())]
            )
            raise PluginNotFound(
                f"no plugin declares substream {name!r} in {', '.join(sources) or 'nothing'}"
                + (f" (not loaded: {failures})" if failures else "")
                + "; reading a substream needs its plugin (the same file the companions run:"
                " give its directory with plugin_dirs= / --plugin-dir)"
            )
        return found

    def find(self, name: str) -> Substream | None:
        """The substream ``name``, or None when no source declares it (see :meth:`get`).

        Raises:
            DiscoveryFailed: the ZooKeeper registry could not be read.
        """
        try:
            return self.get(name)
        except PluginNotFound:
            return None

    def known_names(self) -> list[str]:
        """Every substream name a source knows, sorted: the plugin directories and entry
        points (as loaded), and, with a ZooKeeper client, the registry's published
        names and what each live companion reports loading (names only: nothing is
        imported). Bounded: one read per published plugin and per live companion; a
        ZooKeeper that fails adds nothing."""
        names: set[str] = set()
        with self._lock:
            if self._plugins is None:
                self._plugins = PluginSet(self._all_dirs(), use_entry_points=self._use_entry_points)
            self._plugins.refresh()
            names.update(self._plugins.substreams)
        if self._zk_names is not None:
            from substreams.registry import list_entries, node_reports  # noqa: PLC0415

            try:
                for entry in list_entries(self._zk_names, root=self._zk_root).values():
                    names.update(entry.substreams)
                for report in node_reports(self._zk_names, root=self._zk_root).values():
                    names.update(report["substreams"])
            except Exception as e:  # kazoo raises many kinds; names are a courtesy here
                log.debug("consumer: known substream names from %s: %s", self._zk_root, e)
        return sorted(names)

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
            try:
                signer = install(entry, target, self._trust)
            except (SignatureRejected, PluginLoadError) as e:
                reason = e.reason if isinstance(e, PluginLoadError) else str(e)
                self.rejected[entry.file] = f"version {entry.version} rejected: {reason}"
                with contextlib.suppress(OSError):
                    (target / entry.file).unlink()
                log.warning("consumer: registry plugin %s version %s rejected: %s",
                            entry.file, entry.version, reason)  # fmt: skip
                continue
            self.rejected.pop(entry.file, None)
            log.info("consumer: registry plugin %s version %s signed by %s", entry.file,
                     entry.version, signer)  # fmt: skip

    def close(self) -> None:
        """Remove the private copy of registry plugins."""
        if self._registry_dir is not None:
            with contextlib.suppress(OSError):
                self._registry_dir.cleanup()
