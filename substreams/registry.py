"""The cluster-wide registry of plugins in ZooKeeper, and its mirror on each companion.

Layout: one persistent znode per published plugin file under ``<root>/substreams``,
named by the file's stem, holding JSON::

    {"file": "web_5xx.py", "version": "<hash>", "substreams": ["web_5xx"],
     "source": "<the file's text>", "published_at": 1700000000.0}

``publish`` checks the file first (it must load, in a time-limited child, and declare
at least one substream), then creates or overwrites the znode. ``withdraw NAME`` deletes
the znode of the file that declares substream NAME. Every companion runs a
:class:`RegistryMirror`: a kazoo ChildrenWatch/DataWatch that writes each plugin's
source into a local directory (atomically, by rename) and removes files withdrawn; the
companion's plugin loader watches that directory like any other, so publishing is hot
reload across the cluster.

Failure semantics: while ZooKeeper is unreachable the mirror keeps the files it has
(companions keep running the last known plugins); on reconnection kazoo re-arms the
watches and the mirror converges. A znode with malformed data is logged and skipped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from substreams import defaults
from substreams.api import version_of
from substreams.errors import PluginLoadError, RegistryError
from substreams.loader import load_file

log = logging.getLogger(__name__)

__all__ = ["RegistryEntry", "RegistryMirror", "list_entries", "publish", "withdraw"]

_STEM_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_]{0,99}")


@dataclass(frozen=True)
class RegistryEntry:
    """One published plugin file."""

    file: str
    version: str
    substreams: tuple[str, ...]
    source: str
    published_at: float

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "file": self.file,
                "version": self.version,
                "substreams": list(self.substreams),
                "source": self.source,
                "published_at": self.published_at,
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> RegistryEntry:
        raw = json.loads(data)
        file = str(raw["file"])
        if not file.endswith(".py") or not _STEM_RE.fullmatch(file[:-3]):
            raise ValueError(f"bad file name {file!r}")
        return cls(
            file=file,
            version=str(raw["version"]),
            substreams=tuple(str(s) for s in raw["substreams"]),
            source=str(raw["source"]),
            published_at=float(raw.get("published_at", 0.0)),
        )


def _path(root: str) -> str:
    return root.rstrip("/") + "/substreams"


def publish(client: Any, path: Path, *, root: str = "/riak-events") -> RegistryEntry:
    """Check a plugin file and publish it to the whole cluster.

    Args:
        client: a started ``kazoo.client.KazooClient``.
        path: the plugin file.
        root: our ZooKeeper root.

    Returns:
        The published entry.

    Raises:
        PluginLoadError: the file does not load or declares nothing.
        RegistryError: bad file name, too large, or ZooKeeper failed.
    """
    if not _STEM_RE.fullmatch(path.stem) or path.suffix != ".py":
        raise RegistryError(f"{path}: plugin file names must be [A-Za-z0-9_]+.py")
    source = path.read_bytes()
    if len(source) > defaults.REGISTRY_MAX_SOURCE_BYTES:
        raise RegistryError(f"{path}: {len(source)} bytes, over the registry's limit")
    found = load_file(path, check_in_child=True)
    entry = RegistryEntry(
        file=path.name,
        version=version_of(source),
        substreams=tuple(s.name for s in found),
        source=source.decode("utf-8"),
        published_at=time.time(),
    )
    from kazoo.exceptions import KazooException  # noqa: PLC0415 (optional dependency)

    znode = f"{_path(root)}/{path.stem}"
    try:
        client.ensure_path(_path(root))
        if client.exists(znode):
            client.set(znode, entry.to_json())
        else:
            client.create(znode, entry.to_json())
    except KazooException as e:
        raise RegistryError(f"publishing {path.name}: {type(e).__name__}: {e}") from e
    log.info("registry: published %s version %s (%s)", path.name, entry.version, entry.substreams)
    return entry


def list_entries(client: Any, *, root: str = "/riak-events") -> dict[str, RegistryEntry]:
    """Every published plugin: znode name -> entry (malformed ones are skipped)."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    entries = {}
    try:
        children = client.get_children(_path(root))
    except NoNodeError:
        return {}
    for child in sorted(children):
        with contextlib.suppress(NoNodeError, ValueError, KeyError, TypeError):
            data, _ = client.get(f"{_path(root)}/{child}")
            entries[child] = RegistryEntry.from_json(data)
    return entries


def withdraw(client: Any, name: str, *, root: str = "/riak-events") -> str:
    """Withdraw the plugin file declaring substream ``name`` (or named ``name``).

    Returns:
        The znode name removed.

    Raises:
        RegistryError: nothing published declares ``name``.
    """
    for child, entry in list_entries(client, root=root).items():
        if name in entry.substreams or child == name:
            client.delete(f"{_path(root)}/{child}")
            log.info("registry: withdrew %s (%s)", entry.file, entry.substreams)
            return child
    raise RegistryError(f"no published plugin declares substream {name!r}")


class RegistryMirror:
    """Keep ``directory`` equal to the registry: one file per published plugin.

    Args:
        client: a started KazooClient.
        directory: where plugin files are written (a plugin directory of the loader).
        root: our ZooKeeper root.
    """

    def __init__(self, client: Any, directory: Path, *, root: str = "/riak-events") -> None:
        self._client = client
        self.directory = directory
        self._path = _path(root)
        self._watched: set[str] = set()

    def start(self) -> RegistryMirror:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._client.ensure_path(self._path)
        self._client.ChildrenWatch(self._path, self._on_children)
        return self

    def _on_children(self, children: list[str]) -> None:
        present = set(children)
        for child in present - self._watched:
            self._watched.add(child)
            self._client.DataWatch(f"{self._path}/{child}", self._data_watcher(child))
        for path in self.directory.glob("*.py"):
            if path.stem not in present:
                with contextlib.suppress(OSError):
                    path.unlink()
                    log.info("registry: %s withdrawn, removed from this node", path.name)

    def _data_watcher(self, child: str) -> Any:
        def on_data(data: bytes | None, stat: Any) -> bool:
            if data is None:  # deleted
                self._watched.discard(child)
                with contextlib.suppress(OSError):
                    (self.directory / f"{child}.py").unlink()
                return False
            try:
                entry = RegistryEntry.from_json(data)
            except (ValueError, KeyError, TypeError) as e:
                log.warning("registry: znode %s is malformed, skipped: %s", child, e)
                return True
            if entry.file != f"{child}.py":
                log.warning("registry: znode %s names file %s, skipped", child, entry.file)
                return True
            target = self.directory / entry.file
            tmp = self.directory / f".{entry.file}.tmp"
            tmp.write_text(entry.source, encoding="utf-8")
            tmp.replace(target)
            log.info("registry: %s version %s installed on this node", entry.file, entry.version)
            return True

        return on_data


def check_file(path: Path) -> list[str]:
    """Names the file declares, loading it in a child; raises PluginLoadError."""
    try:
        return [s.name for s in load_file(path, check_in_child=True)]
    except PluginLoadError:
        raise
