"""The cluster-wide registry of plugins in ZooKeeper: publish, withdraw, list.

Layout: one persistent znode per published plugin file under ``<root>/substreams``,
named by the file's stem, holding JSON::

    {"file": "web_5xx.py", "version": "<hash>", "substreams": ["web_5xx"],
     "source": "<the file's text>", "published_at": 1700000000.0,
     "signature": "<base64 Ed25519>", "signer": "<key id>"}

Who may write: ``<root>/substreams`` and every plugin znode carry the ACL
:func:`registry_acl`: ALL for the publisher's digest identity (``user:password``,
given to kazoo as ``auth_data``), READ for everyone. So a client without the
publisher's credentials can read but not create, change or delete a plugin (ZooKeeper
answers NoAuth, raised as :class:`RegistryAccessDenied`). World-readable on purpose:
plugin source is code, not a secret, and what makes a plugin run is its signature
(:mod:`substreams.signing`), checked by every node that installs it
(:mod:`substreams.mirror`). The first publish secures a registry created by an older
version with an open ACL; a registry path owned by another identity is refused.

``publish`` checks the file first (it must load, in a sandboxed child, and declare at
least one substream), signs it, and refuses to replace anything running under another
version unless ``replace=True``: another source already published under that file
name, or a substream it declares loaded at another version on a live node (read from
the companions' znodes ``<root>/companions/<node>``); the refusal says which version
runs where. A substream declared by another published file is refused always
(withdraw that file first).

Failure semantics: every write is one znode create or a versioned set, so two
publishers racing cannot both win silently (the loser gets :class:`RegistryError`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventstore import zkpaths
from substreams import defaults
from substreams.api import version_of
from substreams.errors import RegistryAccessDenied, RegistryError, ReplaceRefused
from substreams.loader import load_file
from substreams.signing import PublisherKey

log = logging.getLogger(__name__)

__all__ = [
    "Published",
    "RegistryEntry",
    "list_entries",
    "live_companions",
    "node_reports",
    "publish",
    "registry_acl",
    "registry_path",
    "withdraw",
]

_STEM_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_]{0,99}")


@dataclass(frozen=True)
class RegistryEntry:
    """One published plugin file.

    Attributes:
        file: its file name (``<stem>.py``; the znode is named by the stem).
        version: :func:`substreams.api.version_of` its source.
        substreams: the names it declares.
        source: its text.
        published_at: unix time of the publish.
        signature: base64 Ed25519 signature of :func:`substreams.signing.message`, or
            None (unsigned: no node runs it).
        signer: the id of the key that signed it.
    """

    file: str
    version: str
    substreams: tuple[str, ...]
    source: str
    published_at: float
    signature: str | None = None
    signer: str | None = None

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "file": self.file,
                "version": self.version,
                "substreams": list(self.substreams),
                "source": self.source,
                "published_at": self.published_at,
                "signature": self.signature,
                "signer": self.signer,
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> RegistryEntry:
        """Raises: ValueError, KeyError or TypeError on a malformed znode."""
        raw = json.loads(data)
        file = str(raw["file"])
        if not file.endswith(".py") or not _STEM_RE.fullmatch(file[:-3]):
            raise ValueError(f"bad file name {file!r}")
        signature, signer = raw.get("signature"), raw.get("signer")
        return cls(
            file=file,
            version=str(raw["version"]),
            substreams=tuple(str(s) for s in raw["substreams"]),
            source=str(raw["source"]),
            published_at=float(raw.get("published_at", 0.0)),
            signature=None if signature is None else str(signature),
            signer=None if signer is None else str(signer),
        )


def registry_path(root: str) -> str:
    """The znode under which plugins are published (:func:`eventstore.zkpaths.registry`)."""
    return zkpaths.registry(root)


def registry_acl(credentials: str) -> list[Any]:
    """The registry's ACL: ALL for the digest identity ``user:password``, READ for all.

    Raises:
        RegistryError: ``credentials`` is not ``user:password``.
    """
    from kazoo.security import make_acl, make_digest_acl  # noqa: PLC0415 (optional dependency)

    user, sep, password = credentials.partition(":")
    if not sep or not user or not password:
        raise RegistryError("ZooKeeper credentials must be user:password")
    return [make_digest_acl(user, password, all=True), make_acl("world", "anyone", read=True)]


@contextlib.contextmanager
def _zk_errors(what: str) -> Iterator[None]:
    from kazoo.exceptions import KazooException, NoAuthError  # noqa: PLC0415

    try:
        yield
    except NoAuthError as e:
        raise RegistryAccessDenied(
            f"{what}: ZooKeeper refused (NoAuth): only the registry's publisher identity "
            "may write; give its digest credentials (--zk-auth user:password)"
        ) from e
    except KazooException as e:
        raise RegistryError(f"{what}: {type(e).__name__}: {e}") from e


def _secure(client: Any, path: str, acl: list[Any]) -> None:
    """Create ``path`` with ``acl``, or give an existing one ``acl`` (we must hold ADMIN
    on it: true for an open legacy znode and for our own; false for someone else's)."""
    from kazoo.exceptions import NodeExistsError  # noqa: PLC0415

    with _zk_errors(f"securing {path}"):
        if client.exists(path) is None:
            with contextlib.suppress(NodeExistsError):
                client.create(path, b"", acl=acl, makepath=True)
                return
        current, _ = client.get_acls(path)
        if sorted(map(repr, current)) != sorted(map(repr, acl)):
            client.set_acls(path, acl)
            log.info("registry: %s secured (was %s)", path, current)


def live_companions(client: Any, root: str) -> dict[str, dict[str, Any]]:
    """node -> its live znode's JSON (``node``, ``endpoints.companion``,
    ``endpoints.riak``, ``health``, ``registry``); malformed znodes and those gone while
    listed are left out.

    Args:
        client: a started kazoo client.
        root: our ZooKeeper root.
    """
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415 (optional dependency)

    path = zkpaths.companions(root)
    try:
        children = sorted(client.get_children(path))
    except NoNodeError:
        return {}
    found: dict[str, dict[str, Any]] = {}
    for child in children:
        try:
            value = json.loads(client.get(f"{path}/{child}")[0])
        except (NoNodeError, ValueError):
            continue  # gone meanwhile, or not ours
        if isinstance(value, dict):
            found[child] = value
    return found


def node_reports(client: Any, *, root: str) -> dict[str, dict[str, Any]]:
    """What each live companion reports about its substreams and the registry.

    Returns:
        node -> ``{"substreams": {name: [versions its workers loaded]},
        "registry": {"installed": {file: version}, "rejected": {file: {...}}}}``,
        read from the companions' live znodes (nodes without ZooKeeper are not seen).
    """
    nodes: dict[str, dict[str, Any]] = {}
    for child, info in live_companions(client, root).items():
        try:
            health = info.get("health") or {}
            nodes[str(info.get("node", child))] = {
                "substreams": dict(health.get("substreams") or {}),
                "registry": dict(info.get("registry") or {}),
            }
        except (ValueError, TypeError, AttributeError):
            continue  # not ours
    return nodes


def _running_elsewhere(
    reports: Mapping[str, Mapping[str, Any]], names: tuple[str, ...], version: str
) -> list[str]:
    """'<substream>: <version> on <node>' for each node running another version."""
    where = []
    for name in names:
        for node, report in sorted(reports.items()):
            others = [v for v in report["substreams"].get(name, []) if v != version]
            if others:
                where.append(f"{name}: {', '.join(others)} on {node}")
    return where


@dataclass(frozen=True)
class Published:
    """What :func:`publish` did.

    Attributes:
        entry: the published entry.
        replaced: the entry it replaced (another version), or None.
        running: '<substream>: <version> on <node>' of other versions that were running
            (replaced with ``replace=True``).
    """

    entry: RegistryEntry
    replaced: RegistryEntry | None
    running: tuple[str, ...]


def publish(
    client: Any,
    path: Path,
    *,
    root: str = "/riak-events",
    key: PublisherKey | None = None,
    credentials: str | None = None,
    replace: bool = False,
) -> Published:
    """Check, sign and publish a plugin file to the whole cluster.

    Args:
        client: a started ``kazoo.client.KazooClient`` (authenticated with
            ``credentials`` as digest ``auth_data``).
        path: the plugin file.
        root: our ZooKeeper root.
        key: the publisher's signing key; None publishes unsigned (no node trusting
            keys will run it: for a registry read by nothing but tests).
        credentials: the publisher's digest identity ``user:password``: the registry's
            znodes get :func:`registry_acl`. None: leave ACLs as they are (an open
            registry; every node still checks signatures).
        replace: replace another published version, or a substream running elsewhere
            at another version.

    Returns:
        What was published and what it replaced.

    Raises:
        PluginLoadError: the file does not load or declares nothing.
        ReplaceRefused: something of that name runs at another version (the message
            says which where), and ``replace`` is false; or another published file
            declares one of its substreams.
        RegistryAccessDenied: ZooKeeper refused the write (credentials).
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
        signature=None if key is None else key.sign(path.name, source),
        signer=None if key is None else key.id,
    )
    base = registry_path(root)
    znode = f"{base}/{path.stem}"
    acl = registry_acl(credentials) if credentials else None
    if acl is not None:
        _secure(client, base, acl)
    else:
        with _zk_errors(f"creating {base}"):
            client.ensure_path(base)
    published = list_entries(client, root=root)
    for other_stem, other in published.items():
        shared = sorted(set(other.substreams) & set(entry.substreams))
        if other_stem != path.stem and shared:
            raise ReplaceRefused(
                f"{path.name}: substream {', '.join(shared)} is already published by "
                f"{other.file} (version {other.version}): withdraw it first"
            )
    previous = published.get(path.stem)
    replaced = previous if previous is not None and previous.version != entry.version else None
    with _zk_errors("reading the live companions"):
        running = _running_elsewhere(node_reports(client, root=root), entry.substreams,
                                     entry.version)  # fmt: skip
    if (replaced is not None or running) and not replace:
        what = []
        if replaced is not None:
            what.append(f"{replaced.file} is published as version {replaced.version}")
        if running:
            what.append("running now: " + "; ".join(running))
        raise ReplaceRefused(
            f"{path.name} version {entry.version} would replace another version ("
            + "; ".join(what)
            + "): pass --replace to replace it"
        )
    _write(client, znode, entry, acl)
    log.info(
        "registry: published %s version %s (%s) signer=%s replaced=%s",
        path.name,
        entry.version,
        ",".join(entry.substreams),
        entry.signer,
        replaced.version if replaced else None,
    )
    return Published(entry, replaced, tuple(running))


def _write(client: Any, znode: str, entry: RegistryEntry, acl: list[Any] | None) -> None:
    from kazoo.exceptions import BadVersionError, NodeExistsError  # noqa: PLC0415

    with _zk_errors(f"publishing {entry.file}"):
        stat = client.exists(znode)
        try:
            if stat is None:
                client.create(znode, entry.to_json(), acl=acl)
            else:
                client.set(znode, entry.to_json(), version=stat.version)
        except (BadVersionError, NodeExistsError) as e:
            raise RegistryError(
                f"publishing {entry.file}: another publish changed it meanwhile; run again"
            ) from e
        if acl is not None:
            _secure(client, znode, acl)


def list_entries(client: Any, *, root: str = "/riak-events") -> dict[str, RegistryEntry]:
    """Every published plugin: znode name -> entry (malformed ones are skipped)."""
    from kazoo.exceptions import NoNodeError  # noqa: PLC0415

    entries = {}
    try:
        children = client.get_children(registry_path(root))
    except NoNodeError:
        return {}
    for child in sorted(children):
        try:
            data, _ = client.get(f"{registry_path(root)}/{child}")
            entries[child] = RegistryEntry.from_json(data)
        except NoNodeError:
            continue
        except (ValueError, KeyError, TypeError) as e:
            log.warning("registry: znode %s is malformed, skipped: %s", child, e)
    return entries


def withdraw(client: Any, name: str, *, root: str = "/riak-events") -> str:
    """Withdraw the plugin file declaring substream ``name`` (or named ``name``).

    Returns:
        The znode name removed.

    Raises:
        RegistryAccessDenied: ZooKeeper refused (credentials).
        RegistryError: nothing published declares ``name``.
    """
    for child, entry in list_entries(client, root=root).items():
        if name in entry.substreams or child == name:
            with _zk_errors(f"withdrawing {entry.file}"):
                client.delete(f"{registry_path(root)}/{child}")
            log.info("registry: withdrew %s (%s)", entry.file, entry.substreams)
            return child
    raise RegistryError(f"no published plugin declares substream {name!r}")
