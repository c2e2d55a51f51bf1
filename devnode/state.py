"""The devnode's running state: settings, store, bucket registry, ring, hook, counters.

One :class:`Devnode` per process, created by the app's lifespan and reached by handlers
as ``request.app.state.devnode``. No module-level mutable state.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from concurrent.futures import Future
from typing import Any, TypeVar

from devnode.buckets import BucketRegistry, validate_props
from devnode.errors import InvalidProps
from devnode.hook import HookDispatcher
from devnode.settings import DevnodeSettings
from devnode.store import ObjectStore
from eventstore.ring import Ring

log = logging.getLogger(__name__)

T = TypeVar("T")

_TYPE_PREFIX = b"type\x00"
_BUCKET_PREFIX = b"bucket\x00"


class MinuteCounter:
    """A count over the last 60 seconds (Riak's ``node_gets``) plus a lifetime total."""

    def __init__(self) -> None:
        self.total = 0
        self._slots = [0] * 60
        self._stamps = [0] * 60

    def add(self, now_s: float) -> None:
        """Count one event at ``now_s``."""
        second = int(now_s)
        slot = second % 60
        if self._stamps[slot] != second:
            self._stamps[slot] = second
            self._slots[slot] = 0
        self._slots[slot] += 1
        self.total += 1

    def last_minute(self, now_s: float) -> int:
        """Events in the 60 seconds up to ``now_s``."""
        second = int(now_s)
        return sum(c for c, s in zip(self._slots, self._stamps, strict=True) if second - s < 60)


class Devnode:
    """Everything a request handler needs, opened and closed by the lifespan."""

    def __init__(self, settings: DevnodeSettings) -> None:
        self.settings = settings
        self.started_s = time.time()
        self.store = ObjectStore(
            settings.data_dir / "lmdb",
            map_size_bytes=settings.map_size_bytes,
            write_batch_max=settings.write_batch_max,
        )
        self.registry = BucketRegistry({n: t.props for n, t in settings.bucket_types.items()})
        self._load_persisted_props()
        self.ring = Ring(settings.nodes, settings.ring_size)
        data_type = settings.hook.data_bucket_type
        n_val = (
            int(self.registry.bucket_props(data_type, settings.hook.data_bucket)["n_val"])
            if (self.registry.has_type(data_type))
            else 3
        )
        self.hook = HookDispatcher(
            settings.hook,
            self.ring,
            companions=dict(settings.companions),
            down=settings.down_nodes,
            n_val=n_val,
        )
        self.gets = MinuteCounter()
        self.puts = MinuteCounter()
        self.deletes = MinuteCounter()
        self.object_bytes_written = 0
        self.expired_reads = 0
        self.purged = 0

    def expiry_s(self, bucket_type: str) -> float | None:
        """How long objects of the bucket type live; ``None``: forever."""
        configured = self.settings.bucket_types.get(bucket_type)
        return configured.expiry_s if configured else None

    async def set_type_props(self, bucket_type: str, given: dict[str, Any]) -> None:
        """Validate, persist, then apply props set on a bucket type over HTTP."""
        self.registry.type_props(bucket_type)
        clean = validate_props(given, where=f"bucket type {bucket_type}")
        delta = {**self._persisted_delta(_TYPE_PREFIX + bucket_type.encode()), **clean}
        merged = {**self.settings.bucket_types[bucket_type].props, **delta}
        _check_combination(merged, f"bucket type {bucket_type}")
        await self.wait(
            self.store.save_props(_TYPE_PREFIX + bucket_type.encode(), json.dumps(delta).encode())
        )
        self.registry.set_type_props(bucket_type, merged)

    async def set_bucket_props(self, bucket_type: str, bucket: str, given: dict[str, Any]) -> None:
        """Validate, persist, then apply props set on one bucket over HTTP."""
        clean = validate_props(given, where=f"bucket {bucket_type}/{bucket}")
        overrides = {**self.registry.bucket_overrides(bucket_type, bucket), **clean}
        _check_combination(
            {**self.registry.type_props(bucket_type), **overrides}, f"bucket {bucket_type}/{bucket}"
        )
        key = _BUCKET_PREFIX + bucket_type.encode() + b"\x00" + bucket.encode()
        await self.wait(self.store.save_props(key, json.dumps(overrides).encode()))
        self.registry.set_bucket_overrides(bucket_type, bucket, overrides)

    @staticmethod
    async def wait(future: Future[T]) -> T:
        """Await a store future from the event loop."""
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop the hook workers and the store's writer, flushing queued writes."""
        self.hook.close()
        self.store.close()

    def _persisted_delta(self, props_key: bytes) -> dict[str, Any]:
        raw = self.store.load_props().get(props_key)
        return {} if raw is None else dict(json.loads(raw))

    def _load_persisted_props(self) -> None:
        for key, raw in sorted(self.store.load_props().items()):
            delta = json.loads(raw)
            if key.startswith(_TYPE_PREFIX):
                name = key[len(_TYPE_PREFIX) :].decode()
                if self.registry.has_type(name):
                    self.registry.set_type_props(
                        name, {**self.settings.bucket_types[name].props, **delta}
                    )
                else:
                    log.warning(
                        "props: persisted props of unconfigured bucket type %s ignored", name
                    )
            elif key.startswith(_BUCKET_PREFIX):
                type_name, _, bucket = key[len(_BUCKET_PREFIX) :].decode().partition("\x00")
                if self.registry.has_type(type_name):
                    self.registry.set_bucket_overrides(type_name, bucket, delta)


def _check_combination(props: dict[str, Any], where: str) -> None:
    if props.get("last_write_wins") and props.get("allow_mult"):
        raise InvalidProps(f"{where}: last_write_wins and allow_mult cannot both be true")
