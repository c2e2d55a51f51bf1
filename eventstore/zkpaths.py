"""Every ZooKeeper path riak-events uses, named once: the contract between the daemons
that write znodes and the tools that read them.

All live under one root (``zk_root``, default ``/riak-events``)::

    <root>/companions/<node>            ephemeral: a live companion (JSON: node, endpoints,
                                        health); written by companion/zk.py, read by the
                                        consumer's discovery, the registry, `status`
    <root>/substreams/<file stem>       persistent: a published plugin file (the registry)
    <root>/writers/<writer id>          ephemeral: the relocator holding a writer id
    <root>/relocators/<relocator id>    ephemeral: a live relocator
    <root>/owners/<unit>                ephemeral: the relocator owning a spool unit
    <root>/progress/<unit>/<name>       persistent: what of a unit has been pushed
    <root>/locks/<cluster>/<dc>         lock recipe: one metadata writer per epoch-dc

Pure string functions; no I/O. ``root`` may end in ``/``.
"""

from __future__ import annotations

__all__ = [
    "RELOCATOR_FOLDERS",
    "companion",
    "companions",
    "lock",
    "owner",
    "owners",
    "progress",
    "progress_unit",
    "registry",
    "relocator",
    "relocators",
    "writer",
]

#: The folders a relocator makes sure exist before it registers.
RELOCATOR_FOLDERS = ("writers", "relocators", "owners", "progress", "locks")


def _base(root: str) -> str:
    return root.rstrip("/")


def companions(root: str) -> str:
    """The folder of live companions."""
    return f"{_base(root)}/companions"


def companion(root: str, node: str) -> str:
    """One live companion's ephemeral znode."""
    return f"{companions(root)}/{node}"


def registry(root: str) -> str:
    """The substream registry's folder (one znode per published plugin file)."""
    return f"{_base(root)}/substreams"


def writer(root: str, writer_id: int) -> str:
    """The ephemeral znode of the relocator holding ``writer_id``."""
    return f"{_base(root)}/writers/{writer_id}"


def relocators(root: str) -> str:
    """The folder of live relocators."""
    return f"{_base(root)}/relocators"


def relocator(root: str, relocator_id: str) -> str:
    """One live relocator's ephemeral znode."""
    return f"{relocators(root)}/{relocator_id}"


def owners(root: str) -> str:
    """The folder of spool-unit ownership znodes."""
    return f"{_base(root)}/owners"


def owner(root: str, unit: int) -> str:
    """The ephemeral znode of the relocator that owns spool unit ``unit``."""
    return f"{owners(root)}/{unit}"


def progress_unit(root: str, unit: int) -> str:
    """The folder of one spool unit's progress."""
    return f"{_base(root)}/progress/{unit}"


def progress(root: str, unit: int, name: str) -> str:
    """The progress znode of one spool file of a unit."""
    return f"{progress_unit(root, unit)}/{name}"


def lock(root: str, cluster: str, dc: str) -> str:
    """The lock of the metadata writers of one cluster and dc."""
    return f"{_base(root)}/locks/{cluster}/{dc}"
