"""The context: where the system is, read by every command as its defaults.

A context holds the addresses an operator would otherwise give on every command:

=============  ===============  =========================  ==========================
key            option           global variable            value
=============  ===============  =========================  ==========================
``nodes``      ``--node``       ``RIAK_EVENTS_NODE``       Riak HTTP URLs (a list)
``zookeeper``  ``--zookeeper``  ``RIAK_EVENTS_ZOOKEEPER``  ``host:port[,host:port]``
``zk_root``    ``--zk-root``    ``RIAK_EVENTS_ZK_ROOT``    the root znode
``companions`` ``--companion``  ``RIAK_EVENTS_COMPANION``  companion URLs (a list)
``relocators`` ``--relocator``  ``RIAK_EVENTS_RELOCATOR``  relocator ops URLs (a list)
=============  ===============  =========================  ==========================

Precedence, per option: the command's flag > the command's own variable
(``RIAK_EVENTS_READ_NODE``...) > the global variable (comma-separated for a list) >
the context file > the option's built-in default. The context file is TOML with the keys
above; its path is ``$RIAK_EVENTS_CONTEXT`` (empty: no context file), else
``$XDG_CONFIG_HOME/riak-events/context.toml`` (``~/.config/...``). ``riak-events dev up``
writes it for the stack it started (with ``dev_stack = DATA_DIR``) and removes it when
that stack ends; a file without ``dev_stack`` is the operator's own and is never
overwritten.

The environment is passed in (``environ``), never read here: the CLI's root gives
``os.environ``. Failure semantics: a context file that is not TOML, or holds an unknown
key or a value of the wrong shape, raises :class:`ContextError` naming the file and the
key; a missing file is an empty context.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from eventstore.errors import EventStoreError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover (Python 3.10)
    import tomli as tomllib

__all__ = [
    "CONTEXT_ENV",
    "GLOBAL_ENV",
    "KEYS",
    "ContextError",
    "Setting",
    "context_path",
    "read_context_file",
    "remove_context",
    "resolve",
    "write_context",
]

#: The variable naming the context file (empty: none).
CONTEXT_ENV = "RIAK_EVENTS_CONTEXT"

#: Context key -> the option it is the default of.
KEYS = {
    "nodes": "--node",
    "zookeeper": "--zookeeper",
    "zk_root": "--zk-root",
    "companions": "--companion",
    "relocators": "--relocator",
}

#: Context key -> its global environment variable.
GLOBAL_ENV = {
    "nodes": "RIAK_EVENTS_NODE",
    "zookeeper": "RIAK_EVENTS_ZOOKEEPER",
    "zk_root": "RIAK_EVENTS_ZK_ROOT",
    "companions": "RIAK_EVENTS_COMPANION",
    "relocators": "RIAK_EVENTS_RELOCATOR",
}

#: The keys holding a list (a single-valued option takes the first entry).
LISTS = frozenset({"nodes", "companions", "relocators"})

#: Keys of the file that are not addresses.
_META = frozenset({"dev_stack", "written_at"})


class ContextError(EventStoreError):
    """The context file cannot be used (not TOML, an unknown key, a wrong value)."""


@dataclass(frozen=True)
class Setting:
    """One context value and where it came from.

    Attributes:
        value: a tuple of strings for the list keys, a string otherwise.
        source: ``"env"`` (a global variable) or ``"context"`` (the file).
        origin: the variable's name or the file's path.
    """

    value: tuple[str, ...] | str
    source: str
    origin: str


def context_path(environ: Mapping[str, str]) -> Path | None:
    """The context file's path (it may not exist), or None when ``RIAK_EVENTS_CONTEXT``
    is set empty."""
    given = environ.get(CONTEXT_ENV)
    if given is not None:
        return Path(given).expanduser() if given.strip() else None
    config = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME", "~")) / ".config")
    return Path(config).expanduser() / "riak-events" / "context.toml"


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def read_context_file(path: Path) -> dict[str, object]:
    """The file's keys (addresses and ``dev_stack``); ``{}`` when it does not exist.

    Raises:
        ContextError: not TOML, an unknown key, or a value of the wrong type.
    """
    try:
        with path.open("rb") as f:
            data: dict[str, object] = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ContextError(f"context file {path}: {e}") from None
    for key, value in data.items():
        if key not in KEYS and key not in _META:
            known = ", ".join(sorted({*KEYS, *_META}))
            raise ContextError(f"context file {path}: unknown key {key!r} (known: {known})")
        ok = (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
            if key in LISTS
            else isinstance(value, str)
        )
        if not ok:
            shape = "a list of strings" if key in LISTS else "a string"
            raise ContextError(f"context file {path}: {key} must be {shape}, not {value!r}")
    return data


def resolve(environ: Mapping[str, str]) -> dict[str, Setting]:
    """Every context key that is set, from the global variables over the file.

    Raises:
        ContextError: the context file cannot be used.
    """
    found: dict[str, Setting] = {}
    path = context_path(environ)
    if path is not None:
        for key, value in read_context_file(path).items():
            if key in KEYS:
                text = tuple(value) if isinstance(value, list) else str(value)
                found[key] = Setting(text, "context", str(path))
    for key, name in GLOBAL_ENV.items():
        raw = environ.get(name, "").strip()
        if raw:
            found[key] = Setting(_split(raw) if key in LISTS else raw, "env", name)
    return found


def _toml(value: object) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(json.dumps(str(v)) for v in value) + "]"
    return json.dumps(str(value))


def write_context(path: Path, values: Mapping[str, object], *, dev_stack: str) -> bool:
    """Write a context for the dev stack of ``dev_stack`` (its data directory).

    Returns:
        False (nothing written) when ``path`` is the operator's own file (it has no
        ``dev_stack``, or is not readable as a context).
    """
    with contextlib.suppress(ContextError):
        existing = read_context_file(path)
        if existing and "dev_stack" not in existing:
            return False
        lines = [
            "# written by `riak-events dev up`; removed by `dev down` (eventstore/context.py)",
            f"dev_stack = {_toml(dev_stack)}",
            f"written_at = {_toml(time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()))}",
        ]
        lines += [f"{k} = {_toml(v)}" for k, v in values.items() if k in KEYS and v]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(path)
        return True
    return False


def remove_context(path: Path, *, dev_stack: str) -> bool:
    """Remove the context file if the dev stack of ``dev_stack`` wrote it.

    Returns:
        Whether it was removed.
    """
    with contextlib.suppress(ContextError):
        if read_context_file(path).get("dev_stack") == dev_stack:
            path.unlink(missing_ok=True)
            return True
    return False
