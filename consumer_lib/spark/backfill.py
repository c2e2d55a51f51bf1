"""The backfill job: one substream run over history, results stored as the companion
stores them.

Opt-in (a command an operator runs for a range), rate-limited, and run through the
companion's own sandbox (:func:`substreams.sandbox.run_substreams` with the platform's
default caps, :data:`substreams.protocol.DEFAULT_CAP`, the companion's), or, for a
query plugin, on the native road (:func:`substreams.query.run.run_queries`: the plan
evaluated in the task's process, in one walk of the stored chunk, no fork server and no
child: a plan cannot run code): same limits, same stored value (``stored_value``:
the packed ``ok`` result or a marked failure), same place (bucket type ``substreams``,
bucket = the substream, key = the chunk key; other bucket types and buckets with
``namespaces``, as the companion's ``[namespaces]``), same put options. Per Spark task::

    for each epoch of its slices, each dc: metadata; the chunks the plugin reads
        stored = GET substreams/<name>/<key>
        stored is a record of this plugin version, status not "shed"  -> kept (never
            overwritten: the companion or an earlier backfill computed it)
        else: wait for the task's share of max_chunks_per_s
              GET the chunk; a query plugin: evaluate its plan on the stored bytes
              (verified, one native walk); a function plugin: verify, decode (only
              the plugin's declared fields, as the companion gives them), run it
              sandboxed; PUT the result

A "shed" result of the same version is replaced: shedding means the plugin never ran.
Unreadable and missing results are written. A result of another version is kept and
counted ``other_version`` unless ``replace_version`` (``--replace-version``): the rule
is :func:`substreams.overwrite.decide`.

Failure semantics: each result is committed by its PUT; a task that dies leaves the
results it stored, and a re-run keeps them (same version) and does the rest. A chunk
that cannot be read is counted ``unreadable`` and gets no result (the consumer falls
back for it); a plugin failing is stored as the companion stores it (marked).

Scheduling, rate limit and progress: the slices are grouped into *units* (at most
``UNITS_PER_TASK`` per task), and ``tasks`` driver threads (*slots*) each run one unit
at a time as a Spark job of one task, taking the next unit when it ends. So at most
``tasks`` tasks run at once, whatever the cluster's free cores, and each paces itself at
``max_chunks_per_s / tasks``: the job never exceeds the limit. A slot carries its pacing
across units (a unit returns how long until its next chunk is due, the next one waits
that long first), so a unit boundary is not a burst. Kept chunks (one small GET) are not
paced. Accumulators reach the driver only when a task ends, and so do a unit's counts:
after each unit the driver reports chunks done of the total (counted beforehand from
the metadata, by a Spark job of ``tasks`` tasks, only when progress is asked for), the
rate and the time left.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import queue
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark import InheritableThread, SparkContext
from pyspark.sql import SparkSession

from consumer_lib.plugins import PluginCatalog
from eventstore.blob import DecodeLimits, unpack_blob
from eventstore.errors import EventStoreError
from eventstore.names import (
    DEFAULT_NAMESPACES,
    ChunkKey,
    MetadataKey,
    Namespaces,
    parse_metadata,
)
from eventstore.riak import NotFound, RiakClient, RiakError
from eventstore.riak.defaults import CONFIRMED_ABSENCE
from substreams.api import Context, Substream
from substreams.overwrite import decide
from substreams.protocol import DEFAULT_CAP, Limits, Outcome
from substreams.query.run import is_query, run_queries
from substreams.results import ResultRecord, read_result, stored_value
from substreams.run import UndecodableChunk
from substreams.sandbox import run_substreams

__all__ = ["BackfillPlan", "BackfillProgress", "Pacer", "backfill"]

log = logging.getLogger(__name__)

#: Epochs whose metadata a task fetches at once.
EPOCHS_PER_SLICE = 60
#: Most units (Spark jobs of one task) per task slot: more give finer progress and let
#: a slot that drew sparse epochs take more work; each costs a job's overhead (~0.1 s).
UNITS_PER_TASK = 16


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
    first_after_s: float = 0.0  # the slot's previous unit's pacing debt
    namespaces: Namespaces = DEFAULT_NAMESPACES


@dataclass(frozen=True)
class BackfillProgress:
    """Where a backfill stands, reported after each unit.

    Attributes:
        done: chunks handled so far (stored, failed, kept, other_version, unreadable).
        total: chunks the plugin reads in the range, counted from the metadata before
            the run (chunks listed meanwhile can make ``done`` pass it).
        elapsed_s: seconds since the run started (the count excluded).
    """

    done: int
    total: int
    elapsed_s: float

    @property
    def rate_per_s(self) -> float:
        """Chunks per second so far."""
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far; None before there is a rate."""
        left = max(0, self.total - self.done)
        if not left:
            return 0.0
        rate = self.rate_per_s
        return left / rate if rate else None

    def pace(self) -> str:
        """The rate and the time left: ``3.0 chunks/s, ETA 4m05s``."""
        eta = self.eta_s
        return f"{self.rate_per_s:.1f} chunks/s, ETA {'?' if eta is None else _duration(eta)}"

    def __str__(self) -> str:
        return f"{self.done}/{max(self.total, self.done)} chunks, {self.pace()}"


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Pacer:
    """At most ``rate`` paced calls per second (0: no limit), without bursts.

    Args:
        rate: calls per second.
        clock, sleep: monotonic clock and sleep, injected for tests.
        first_after_s: the first call waits this long (an earlier pacer's
            :meth:`owed_s`, so that a run continued by a new pacer keeps the rate).
    """

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        first_after_s: float = 0.0,
    ) -> None:
        self.interval = 0.0 if rate <= 0 else 1.0 / rate
        self._clock = clock
        self._sleep = sleep
        self.next = clock() + (first_after_s if self.interval else 0.0)

    def owed_s(self) -> float:
        """Seconds until the next call is allowed (0 if it is now)."""
        return max(0.0, self.next - self._clock())

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


def _stored(
    riak: RiakClient, ns: Namespaces, plugin: Substream, key: ChunkKey
) -> ResultRecord | None:
    """The result stored for ``key``, or None when missing or unreadable."""
    location = ns.substream_location(plugin.name, key)
    try:
        value = riak.get(*location).value
    except NotFound:
        return None
    try:
        return read_result(value, key=key.format())
    except (EventStoreError, ValueError):
        return None


def _chunks(
    riak: RiakClient, plan: BackfillPlan, plugin: Substream, slices: Iterable[tuple[int, int]]
) -> Iterator[ChunkKey]:
    """The chunks of ``slices`` the plugin reads, from the metadata (one multi_get per
    slice)."""
    ns = plan.namespaces
    for start, stop in slices:
        metas = [MetadataKey(e, dc) for e in range(start, stop) for dc in plan.dcs]
        found = riak.multi_get(
            ns.epochs_bucket_type,
            ns.epochs_bucket,
            [m.format() for m in metas],
            **CONFIRMED_ABSENCE,
        )
        for meta in metas:
            obj = found.get(meta.format())
            if obj is None:
                continue
            for ref in parse_metadata(obj.value, key=meta.format()):
                if plugin.matches(ref.type, ref.subtype):
                    yield meta.chunk_key(ref)


def count_slices(plan: BackfillPlan, slices: Iterable[tuple[int, int]]) -> Iterator[int]:
    """A counting task: yields how many chunks of ``slices`` the plugin reads.

    Raises:
        as :func:`run_slices`.
    """
    plugin, catalog = _load(plan)
    try:
        with RiakClient(list(plan.nodes), timeout_s=plan.timeout_s) as riak:
            yield sum(1 for _ in _chunks(riak, plan, plugin, slices))
    finally:
        catalog.close()


def run_slices(
    plan: BackfillPlan, slices: Iterable[tuple[int, int]]
) -> Iterator[tuple[dict[str, int], float]]:
    """A task's work: the slices' chunks (see the module docstring); yields its counts
    and the seconds until its pacer would allow the next chunk.

    Raises:
        PluginNotFound: the plugin is not found on the executor.
        RuntimeError: the executor's plugin is another version than the driver's.
        eventstore.riak errors: Riak kept failing.
    """
    plugin, catalog = _load(plan)
    counts: Counter[str] = Counter()
    pacer = Pacer(plan.chunks_per_s, first_after_s=plan.first_after_s)
    try:
        with RiakClient(list(plan.nodes), timeout_s=plan.timeout_s) as riak:
            for key in _chunks(riak, plan, plugin, slices):
                counts[_one(riak, plan, plugin, key, pacer)] += 1
    finally:
        catalog.close()
    yield dict(counts), pacer.owed_s()


def _one(
    riak: RiakClient, plan: BackfillPlan, plugin: Substream, key: ChunkKey, pacer: Pacer
) -> str:
    """Backfill one chunk; returns what happened: kept, other_version, stored, failed,
    unreadable."""
    ns = plan.namespaces
    stored = _stored(riak, ns, plugin, key)
    decision = decide(stored, plugin.version, replace_version=plan.replace_version)
    if decision != "write":
        return "kept" if decision == "keep" else "other_version"
    pacer.wait()
    try:
        blob = riak.get(*ns.chunk_location(key)).value
    except RiakError:
        return "unreadable"
    outcome = _run(plugin, key, blob)
    if outcome is None:
        return "unreadable"
    riak.put(*ns.substream_location(plugin.name, key), stored_value(plugin, outcome))
    return "stored" if outcome.ok else "failed"


def _run(plugin: Substream, key: ChunkKey, blob: bytes) -> Outcome | None:
    """The plugin's outcome on one stored chunk, None when the chunk does not verify or
    decode. A query plugin is evaluated here, natively (one walk of the stored bytes;
    no fork, no child: a plan cannot run code); a function plugin runs in the sandbox on
    the chunk decoded to its declared fields."""
    if is_query(plugin):
        try:
            (outcome,) = run_queries(
                [(plugin, Limits.of(plugin, DEFAULT_CAP))], blob, key.format(), DecodeLimits()
            )
        except UndecodableChunk:
            return None
        return outcome
    try:
        events = unpack_blob(blob, key=key.format(), fields=plugin.fields)
    except EventStoreError:
        return None
    if not isinstance(events, list):
        return None
    (outcome,) = run_substreams([plugin], events, Context.of(key), cap=DEFAULT_CAP)
    return outcome


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
    progress: Callable[[BackfillProgress], None] | None = None,
    namespaces: Namespaces = DEFAULT_NAMESPACES,
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
        parallelism: Spark tasks running at once (default: the session's default
            parallelism).
        replace_version: overwrite stored results of another plugin version (else
            they are kept and counted ``other_version``).
        progress: called on the driver once the chunks are counted (``done`` 0) and
            after each unit; None: no count is made (it reads the range's metadata
            once more).
        namespaces: where the chunks, the metadata and the results are.

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
    sc = spark.sparkContext
    slices = [(s, min(s + EPOCHS_PER_SLICE, end)) for s in range(start, end, EPOCHS_PER_SLICE)]
    tasks = max(1, min(parallelism or sc.defaultParallelism, len(slices)))
    plan = BackfillPlan(
        tuple(nodes),
        tuple(dcs),
        substream,
        version,
        tuple(str(d) for d in plugin_dirs),
        entry_points,
        max_chunks_per_s / tasks,
        replace_version=replace_version,
        namespaces=namespaces,
    )
    totals: Counter[str] = Counter()
    if slices:
        on_unit: Callable[[dict[str, int]], None] = lambda counts: None  # noqa: E731
        if progress is not None:
            on_unit = _reporter(progress, _count(sc, plan, slices, tasks))
        totals = _run_units(sc, plan, units(slices, tasks * UNITS_PER_TASK), tasks, on_unit)
    result = {k: totals.get(k, 0) for k in ("stored", "failed", "kept", "unreadable")}
    result["chunks"] = sum(result.values()) + totals.get("other_version", 0)
    result["other_version"] = totals.get("other_version", 0)
    return result


def units(slices: Sequence[tuple[int, int]], most: int) -> list[list[tuple[int, int]]]:
    """``slices`` in at most ``most`` runs of consecutive slices, sizes differing by at
    most one slice."""
    count = min(len(slices), max(1, most))
    bounds = [len(slices) * i // count for i in range(count + 1)]
    return [list(slices[a:b]) for a, b in itertools.pairwise(bounds)]


def _count(sc: SparkContext, plan: BackfillPlan, slices: list[tuple[int, int]], tasks: int) -> int:
    """The chunks the plugin reads in ``slices`` (metadata only, ``tasks`` tasks)."""
    rdd = sc.parallelize(slices, tasks)
    return int(sum(rdd.mapPartitions(lambda it: count_slices(plan, it)).collect()))


def _reporter(
    progress: Callable[[BackfillProgress], None], total: int
) -> Callable[[dict[str, int]], None]:
    """Reports ``done`` 0 of ``total`` now, and returns what adds a unit's counts and
    reports again."""
    began = time.monotonic()
    done = 0
    progress(BackfillProgress(0, total, 0.0))

    def on_unit(counts: dict[str, int]) -> None:
        nonlocal done
        done += sum(counts.values())
        progress(BackfillProgress(done, total, time.monotonic() - began))

    return on_unit


def _run_units(
    sc: SparkContext,
    plan: BackfillPlan,
    work: list[list[tuple[int, int]]],
    tasks: int,
    on_unit: Callable[[dict[str, int]], None],
) -> Counter[str]:
    """Run the units on ``tasks`` slots (see the module docstring); returns the summed
    counts. The first failed unit stops the slots, cancels the running units' jobs and
    is raised."""
    todo: queue.SimpleQueue[list[tuple[int, int]]] = queue.SimpleQueue()
    for unit in work:
        todo.put(unit)
    outcomes: queue.SimpleQueue[dict[str, int] | Exception] = queue.SimpleQueue()
    stop = threading.Event()
    group = f"riak-events-backfill-{uuid.uuid4().hex}"

    def slot() -> None:
        # Job groups are per thread (pyspark's pinned threads): one to cancel on failure.
        sc.setJobGroup(group, f"riak-events backfill {plan.substream}")
        owed_s = 0.0
        while not stop.is_set():
            try:
                unit = todo.get_nowait()
            except queue.Empty:
                return
            task = functools.partial(run_slices, dataclasses.replace(plan, first_after_s=owed_s))
            try:
                ((counts, owed_s),) = sc.parallelize(unit, 1).mapPartitions(task).collect()
            except Exception as e:  # the driver's thread raises it
                outcomes.put(e)
                return
            log.debug("backfill %s: unit %s..%s: %s", plan.substream, unit[0], unit[-1], counts)
            outcomes.put(counts)

    slots = [InheritableThread(slot) for _ in range(min(tasks, len(work)))]
    for thread in slots:
        thread.start()
    totals: Counter[str] = Counter()
    try:
        for _ in work:
            outcome = outcomes.get()
            if isinstance(outcome, Exception):
                raise outcome
            totals.update(outcome)
            on_unit(outcome)
    finally:
        stop.set()
        if any(thread.is_alive() for thread in slots):
            sc.cancelJobGroup(group)
        for thread in slots:
            thread.join()
    return totals
