"""Installing registry plugins on a node: verified, checked in a sandboxed child, then
written where the loader looks.

:func:`install` is the one gate every registry plugin passes before a long-lived
process (a companion worker, a consumer) may import it:

1. the signature must verify under a key the node trusts
   (:meth:`substreams.signing.TrustedKeys.verify`), else :class:`SignatureRejected`;
2. the file is written into ``<directory>/.incoming/`` and imported in a sandboxed
   child (:func:`substreams.plugin_file.check_import`: time limit, rlimits, audit hook and
   the seccomp filter), so import-time code first runs where it can do no harm; it
   must load and declare the substreams the entry names, else :class:`PluginLoadError`;
3. only then is it renamed into ``directory`` (atomic: the loader never sees half a
   file).

A rejected plugin's file is removed from ``directory`` (a node stops running a name
whose current registry version it does not trust) and the reason is kept.

:class:`RegistryMirror` runs this on every companion's master process for each znode
of ``<root>/substreams`` (kazoo DataWatch + ChildrenWatch) and writes what it installed
and rejected to ``<directory>/.registry.json`` (by rename) for the status page; the
companion also puts it in its live znode for ``riak-events substream list``.

Failure semantics: while ZooKeeper is unreachable the mirror keeps the files it has; on
reconnection kazoo re-arms the watches and the mirror converges. A malformed znode is
rejected (reason shown) like an unsigned one. The registry path need not exist: the
mirror waits for it (it never creates it, so it cannot create it with an open ACL).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from substreams.errors import PluginLoadError, SignatureRejected
from substreams.loader import IMPORT_TIMEOUT_S
from substreams.plugin_file import check_import
from substreams.registry import RegistryEntry, registry_path
from substreams.signing import TrustedKeys

log = logging.getLogger(__name__)

__all__ = ["STATUS_FILE", "RegistryMirror", "install", "read_status"]

#: What the mirror installed and rejected, in the registry directory.
STATUS_FILE = ".registry.json"


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def install(entry: RegistryEntry, directory: Path, trust: TrustedKeys) -> str:
    """Verify, check in a child and install one registry plugin (module docstring).

    Returns:
        The id of the trusted key that signed it.

    Raises:
        SignatureRejected: not signed by a trusted key (nothing is written).
        PluginLoadError: it does not load in the sandboxed child, or declares other
            substreams than its entry says.
    """
    source = entry.source.encode("utf-8")
    signer = trust.verify(entry.file, source, entry.signature, entry.signer)
    target = directory / entry.file
    if target.exists() and target.read_bytes() == source:
        return signer
    incoming = directory / ".incoming"
    incoming.mkdir(parents=True, exist_ok=True)
    staged = incoming / entry.file
    _atomic_write(staged, source)
    try:
        problem = check_import(staged, timeout_s=IMPORT_TIMEOUT_S, expect=entry.substreams)
        if problem is not None:
            raise PluginLoadError(f"registry {entry.file}", problem)
        staged.replace(target)
    finally:
        with contextlib.suppress(OSError):
            staged.unlink()
    return signer


def read_status(directory: Path) -> dict[str, Any]:
    """The mirror's last status (``{"installed": ..., "rejected": ...}``), or empty."""
    try:
        data = json.loads((directory / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return {"installed": {}, "rejected": {}}
    return data if isinstance(data, dict) else {"installed": {}, "rejected": {}}


class RegistryMirror:
    """Keep ``directory`` equal to the trusted part of the registry.

    Args:
        client: a started KazooClient.
        directory: where plugin files are installed (a plugin directory of the loader).
        trust: the keys this node accepts plugins from.
        root: our ZooKeeper root.
    """

    def __init__(
        self, client: Any, directory: Path, *, trust: TrustedKeys, root: str = "/riak-events"
    ) -> None:
        self._client = client
        self.directory = directory
        self._trust = trust
        self._path = registry_path(root)
        self._watched: set[str] = set()
        self._watching_children = False
        self._lock = threading.Lock()
        #: file -> {"version", "signer"} of what is installed.
        self.installed: dict[str, dict[str, Any]] = {}
        #: file -> {"version", "signer", "reason"} of what was refused.
        self.rejected: dict[str, dict[str, Any]] = {}

    def start(self) -> RegistryMirror:
        """Start watching (returns at once; installs happen on kazoo's thread)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self._trust:
            log.warning(
                "registry: no trusted_keys configured: no plugin from %s will run here",
                self._path,
            )
        self._write_status()
        self._client.DataWatch(self._path, self._on_registry)
        return self

    def summary(self) -> dict[str, Any]:
        """What is installed and rejected (for the live znode and the status page)."""
        with self._lock:
            return {"installed": dict(self.installed), "rejected": dict(self.rejected)}

    def _write_status(self) -> None:
        status = {**self.summary(), "updated_at": time.time()}
        with contextlib.suppress(OSError):
            _atomic_write(self.directory / STATUS_FILE, json.dumps(status).encode())

    def _on_registry(self, data: bytes | None, stat: Any) -> None:
        if stat is None:  # not published yet, or removed: the children watch stopped
            self._watching_children = False
            return
        if not self._watching_children:
            self._watching_children = True
            self._client.ChildrenWatch(self._path, self._on_children)

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
        with self._lock:
            for table in (self.installed, self.rejected):
                for file in [f for f in table if f[:-3] not in present]:
                    del table[file]
        self._write_status()

    def _forget(self, file: str) -> None:
        with contextlib.suppress(OSError):
            (self.directory / file).unlink()
        with self._lock:
            self.installed.pop(file, None)

    def _data_watcher(self, child: str) -> Any:
        def on_data(data: bytes | None, stat: Any) -> bool:
            file = f"{child}.py"
            if data is None:  # deleted
                self._watched.discard(child)
                self._forget(file)
                with self._lock:
                    self.rejected.pop(file, None)
                self._write_status()
                return False
            self._on_entry(child, data)
            self._write_status()
            return True

        return on_data

    def _on_entry(self, child: str, data: bytes) -> None:
        file = f"{child}.py"
        version: str | None = None
        signer: str | None = None
        try:
            entry = RegistryEntry.from_json(data)
            version, signer = entry.version, entry.signer
            if entry.file != file:
                raise ValueError(f"znode {child} names file {entry.file}")
            signer = install(entry, self.directory, self._trust)
        except (ValueError, KeyError, TypeError, SignatureRejected, PluginLoadError) as e:
            reason = e.reason if isinstance(e, PluginLoadError) else str(e)
            if isinstance(e, ValueError | KeyError | TypeError):
                reason = f"malformed registry entry: {e}"
            self._forget(file)
            with self._lock:
                self.rejected[file] = {"version": version, "signer": signer, "reason": reason}
            log.warning("registry: %s version %s rejected on this node: %s", file, version, reason)
            return
        with self._lock:
            self.rejected.pop(file, None)
            self.installed[file] = {"version": entry.version, "signer": signer}
        log.info(
            "registry: %s version %s (signed by %s) installed on this node",
            file,
            entry.version,
            signer,
        )
