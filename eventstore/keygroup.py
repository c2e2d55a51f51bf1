"""The key group: the body the post-commit hook POSTs to a node's companion, named once.

``{"epoch": E, "dc": D, "keys": [chunk keys of that epoch and dc held by that node]}``,
compact JSON (``separators=(",", ":")``), the same bytes as the Erlang hook's
``riak_events_body`` (``tests/integration/erlang_hooks/test_erlang_hook.py`` compares
what a real erl node posts with :meth:`KeyGroup.encode`, byte for byte). Built by the
devnode's hook twin (devnode/routing.py) and the companion's auditor; parsed by
the companion's ``/v1/keys``, ``/v1/audit`` and refill endpoints.

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eventstore.errors import EventStoreError, InvalidName
from eventstore.names import ChunkKey

__all__ = ["InvalidKeyGroup", "KeyGroup"]


class InvalidKeyGroup(EventStoreError, ValueError):
    """A body that is not a key group: the message says what is wrong with it."""


@dataclass(frozen=True)
class KeyGroup:
    """One node's chunk keys of one metadata write.

    Attributes:
        epoch: the epoch of the metadata key.
        dc: its dc.
        keys: chunk keys of that epoch and dc, as the hook sends them (strings).
    """

    epoch: int
    dc: str
    keys: tuple[str, ...]

    def body(self) -> dict[str, Any]:
        """The JSON object."""
        return {"epoch": self.epoch, "dc": self.dc, "keys": list(self.keys)}

    def encode(self) -> bytes:
        """The body's bytes, as both hooks send them."""
        return json.dumps(self.body(), separators=(",", ":")).encode()

    @classmethod
    def of(cls, epoch: int, dc: str, keys: Sequence[str]) -> KeyGroup:
        return cls(epoch, dc, tuple(keys))

    @classmethod
    def parse(cls, data: object, *, max_keys: int) -> tuple[int, str, list[ChunkKey]]:
        """A decoded JSON body checked: every key parses and is of the group's epoch and dc.

        Returns:
            ``(epoch, dc, chunk keys)``.

        Raises:
            InvalidKeyGroup: naming what is wrong (a field's type, too many keys, a key
                that does not parse or belongs to another epoch or dc).
        """
        if not isinstance(data, dict):
            raise InvalidKeyGroup("body must be a JSON object")
        epoch, dc, keys = data.get("epoch"), data.get("dc"), data.get("keys")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not isinstance(dc, str):
            raise InvalidKeyGroup("epoch must be an integer and dc a string")
        if not isinstance(keys, list) or len(keys) > max_keys:
            raise InvalidKeyGroup(f"keys must be a list of at most {max_keys} chunk keys")
        parsed = []
        for text in keys:
            if not isinstance(text, str):
                raise InvalidKeyGroup(f"keys must be strings, got {type(text).__name__}")
            try:
                key = ChunkKey.parse(text)
            except InvalidName as e:
                raise InvalidKeyGroup(str(e)) from e
            if key.epoch != epoch or key.dc != dc:
                raise InvalidKeyGroup(f"key {text} is not of epoch {epoch} and dc {dc}")
            parsed.append(key)
        return epoch, dc, parsed
