"""The backfill job: one substream run over history, results stored as the companion
stores them.

Opt-in (a command an operator runs for a range), rate-limited, and run through the
companion's own sandbox (:func:`substreams.sandbox.run_substreams` with the harness's
copy of the companion's default caps): same limits, same stored value (``stored_value``:
the packed ``ok`` result or a marked failure), same place (bucket type ``substreams``,
bucket = the substream, key = the chunk key), same put options. Per Spark task::

    for each epoch of its slices, each dc: metadata; the chunks the plugin reads
        stored = GET substreams/<name>/<key>
        stored is a record of this plugin version, status not "shed"  -> kept (never
            overwritten: the companion or an earlier backfill computed it)
        else: wait for the task's share of max_chunks_per_s
              GET the chunk, verify, decode; run the plugin sandboxed; PUT the result

A "shed" result of the same version is replaced: shedding means the plugin never ran.
Unreadable and missing results are written. A result of another version is kept and
counted ``other_version`` unless ``replace_version`` (``--replace-version``): the rule
is :func:`substreams.overwrite.decide`.

Failure semantics: each result is committed by its PUT; a task that dies leaves the
results it stored, and a re-run keeps them (same version) and does the rest. A chunk
that cannot be read is counted ``unreadable`` and gets no result (the consumer falls
back for it); a plugin failing is stored as the companion stores it (marked). The
rate limit is the job's: each of the ``parallelism`` tasks paces itself at
``max_chunks_per_s / parallelism``; kept chunks (one small GET) are not paced.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from consumer_lib.plugins import PluginCatalog
from eventstore.blob import unpack_blob
from eventstore.errors import EventStoreError
from eventstore.names import DEFAULT_NAMESPACES, ChunkKey, MetadataKey, parse_metadata
from eventstore.riak import NotFound, RiakClient, RiakError
from substreams.api import Context, Substream
from substreams.harness import DEFAULT_CAP
from substreams.overwrite import decide
from substreams.results import ResultRecord, read_result
from substreams.sandbox import run_substreams, stored_value

__all__ = ["BackfillPlan", "Pacer", "backfill"]

#: Epochs per unit of work handed to a task.
EPOCHS_PER_SLICE = 60


@dataclass(frozen=True)
class BackfillPlan:
    """What a backfill task needs (picklable: sent to executors)."""

    nodes: tuple[str, ...]
    dcs: tuple[str, ...]
    substream: str
    version: str
    plugin_dirs: tuple[str, ...]
    entry_points: bool
    chunks_per_s: float  # this task's share; 0: unlimited
    timeout_s: float = 30.0
    replace_version: bool = False


class Pacer:
    """At most ``rate`` paced calls per second (0: no limit), without bursts.

    Args:
        rate: calls per second.
        clock, sleep: monotonic clock and sleep, injected for tests.
    """

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval = 0.0 if rate <= 0 else 1.0 / rate
        self._clock = clock
        self._sleep = sleep
        self.next = clock()

    def wait(self) -> None:
        """Return when the next call is allowed."""
        if not self.interval:
            return
        now = self._clock()
        if self.next > now:
            self._sleep(self.next - now)
        self.next = max(now, self.next) + self.interval


def _load(plan: BackfillPlan) -> tuple[Substream, PluginCatalog]:
    catalog = PluginCatalog([Path(d) for d in plan.plugin_dirs], use_entry_points=plan.entry_points)
    plugin = catalog.get(plan.substream)
    if plugin.version != plan.version:
        catalog.close()
        raise RuntimeError(
            f"substream {plan.substream}: version {plugin.version} on this executor, "
            f"{plan.version} on the driver: deploy the same plugin file everywhere"
        )
    return plugin, catalog


def _stored(riak: RiakClient, plugin: Substream, key: ChunkKey) -> ResultRecord | None:
    """The result stored for ``key``, or None when missing or unreadable."""
    location = DEFAULT_NAMESPACES.substream_location(plugin.name, key)
    try:
        value = riak.get(*location).value
    except NotFound:
        return None
    try:
        return read_result(value, key=key.format())
    except (EventStoreError, ValueError):
        return None


def run_slices(plan: BackfillPlan, slices: Iterable[tuple[int, int]]) -> Iterator[dict[str, int]]:
    """A task's work: the slices' chunks (see the module docstring); yields its counts.

    Raises:
        PluginNotFound: the plugin is not found on the executor.
        RuntimeError: the executor's plugin is another version than the driver's.
        eventstore.riak errors: Riak kept failing.
    """
    plugin, catalog = _load(plan)
    counts: Counter[str] = Counter()
    pacer = Pacer(plan.chunks_per_s)
    ns = DEFAULT_NAMESPACES
    try:
        with RiakClient(list(plan.nodes), timeout_s=plan.timeout_s) as riak:
            for start, stop in slices:
                metas = [MetadataKey(e, dc) for e in range(start, stop) for dc in plan.dcs]
                found = riak.multi_get(
                    ns.epochs_bucket_type, ns.epochs_bucket, [m.format() for m in metas]
                )
                for meta in metas:
                    obj = found.get(meta.format())
                    if obj is None:
                        continue
                    for ref in parse_metadata(obj.value, key=meta.format()):
                        if plugin.matches(ref.type, ref.subtype):
                            key = meta.chunk_key(ref)
                            counts[_one(riak, plugin, key, pacer, plan.replace_version)] += 1
    finally:
        catalog.close()
    yield dict(counts)


def _one(
    riak: RiakClient, plugin: Substream, key: ChunkKey, pacer: Pacer, replace_version: bool
) -> str:
    """Backfill one chunk; returns what happened: kept, other_version, stored, failed,
    unreadable."""
    decision = decide(_stored(riak, plugin, key), plugin.version, replace_version=replace_version)
    if decision != "write":
        return "kept" if decision == "keep" else "other_version"
    pacer.wait()
    try:
        blob = riak.get(*DEFAULT_NAMESPACES.chunk_location(key)).value
        events = unpack_blob(blob, key=key.format())
    except (RiakError, EventStoreError):
        return "unreadable"
    if not isinstance(events, list):
        return "unreadable"
    (outcome,) = run_substreams([plugin], events, Context.of(key), cap=DEFAULT_CAP)
    riak.put(
        *DEFAULT_NAMESPACES.substream_location(plugin.name, key), stored_value(plugin, outcome)
    )
    return "stored" if outcome.ok else "failed"


def backfill(
    spark: SparkSession,
    *,
    nodes: Sequence[str],
    dcs: Sequence[str],
    substream: str,
    start: int,
    end: int,
    plugin_dirs: Sequence[str] = (),
    entry_points: bool = True,
    max_chunks_per_s: float = 50.0,
    parallelism: int | None = None,
    replace_version: bool = False,
) -> dict[str, int]:
    """Run ``substream`` over ``[start, end)`` of ``dcs`` (see the module docstring).

    Args:
        spark: the session.
        nodes: Riak HTTP URLs.
        dcs: the dcs.
        substream: the substream's name; its plugin must be found on the driver and on
            every executor (same file: same version).
        start, end: epochs, end exclusive.
        plugin_dirs, entry_points: where the plugin is found (as the companion).
        max_chunks_per_s: chunks run per second for the whole job (0: unlimited).
        parallelism: Spark tasks (default: the session's default parallelism).
        replace_version: overwrite stored results of another plugin version (else
            they are kept and counted ``other_version``).

    Returns:
        Counts: ``chunks``, ``stored``, ``failed`` (stored as a marked failure),
        ``kept`` (a result of this version was there), ``other_version`` (a result
        of another version was there and was kept), ``unreadable``.

    Raises:
        ValueError: a bad range or rate.
        PluginNotFound: the plugin is not found on the driver.
        Py4JJavaError: a task failed (its cause names the error).
    """
    if end < start or start < 0:
        raise ValueError(f"bad epoch range [{start}, {end})")
    if max_chunks_per_s < 0:
        raise ValueError(f"max_chunks_per_s must be >= 0: {max_chunks_per_s}")
    catalog = PluginCatalog([Path(d) for d in plugin_dirs], use_entry_points=entry_points)
    try:
        version = catalog.get(substream).version
    finally:
        catalog.close()
    slices = [(s, min(s + EPOCHS_PER_SLICE, end)) for s in range(start, end, EPOCHS_PER_SLICE)]
    tasks = max(1, min(parallelism or spark.sparkContext.defaultParallelism, len(slices)))
    plan = BackfillPlan(
        tuple(nodes),
        tuple(dcs),
        substream,
        version,
        tuple(str(d) for d in plugin_dirs),
        entry_points,
        max_chunks_per_s / tasks,
        replace_version=replace_version,
    )
    totals: Counter[str] = Counter()
    if slices:
        rdd = spark.sparkContext.parallelize(slices, tasks)
        for counts in rdd.mapPartitions(lambda it: run_slices(plan, it)).collect():
            totals.update(counts)
    result = {k: totals.get(k, 0) for k in ("stored", "failed", "kept", "unreadable")}
    result["chunks"] = sum(result.values()) + totals.get("other_version", 0)
    result["other_version"] = totals.get("other_version", 0)
    return result
