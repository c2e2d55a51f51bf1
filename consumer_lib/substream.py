"""Reading a substream, with per-chunk client-side fallback (seed: "Back-pressure
management strategy").

For each epoch of the range, in order, and each chunk the substream reads (its
declared types/subtypes, and the caller's filter)::

    fallback == "always": compute it here                          reason "forced"
    record = GET substreams/<name>/<chunk key>
        404                                   -> fallback, reason "missing"
        unreadable (bad checksum, not a record) -> fallback, reason "unreadable"
        status error "disabled: ..." of the local plugin's version
                                              -> gap, reason "disabled" (not re-run)
        status shed | timeout | error | killed  -> fallback, reason = the status
        ok, but another version than the local plugin's
                                              -> fallback, reason "version_mismatch"
                                                 (unless accept_other_versions)
        ok                                    -> served "server"
    fallback: GET the full chunk (verified, retried on other nodes like the full stream),
              run the SAME plugin on it in the companion's sandbox
              (:mod:`consumer_lib.fallback`: a forked child with the plugin's declared
              limits: deadline, memory, CPU, result size), its result packed by the
              child as the companion stores it and decoded here as a server result is;
              with a fork server (the client's), the verified bytes go to it and its
              child decodes them; else the chunk is decoded here and the child forked
              from this process; a query plugin (``plan`` set) is evaluated here
              instead, on the verified bytes, with no child (``run_native``: a plan
              cannot run code), giving what the child's record would read back as;
                  ok                           -> served "fallback"
                  timeout | killed | error     -> "gap", ``fallback_status`` and
                                                  ``error`` say why
    fallback == "off": no fallback; a record with served "gap" and the reason
    no plugin code here (fallback "auto"): no fallback; a "gap" with the reason and
              ``fallback_status`` "no_plugin" ("missing, no plugin to run"); which
              chunks are the substream's is then learned from the server's results
              (:mod:`consumer_lib.unplugged`), and a name no source knows whose range
              holds no result at all raises ``SubstreamNotFound`` naming the closest
              known name

Results are resolved on the pool up to ``prefetch`` chunks ahead and yielded in order.
Each fallback is counted in ``consumer_fallback_total{reason}`` and how it ended in
``consumer_fallback_runs_total{status}``.

Failure semantics: a plugin that raises, sleeps past its deadline, exceeds its memory
limit, crashes or returns something too large or not Sereal-encodable in the fallback
yields a "gap" naming the failure, within its deadline plus the kill grace; it does not
stop the read nor hurt the caller's process. A plugin the server disabled is not run
here (the runs that disabled it failed; re-running each chunk would cost every reader
the same). A chunk that cannot be read for the fallback (missing, no good copy) raises
like the full stream.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import KW_ONLY, dataclass
from typing import Literal

from prometheus_client import Counter

from consumer_lib import defaults
from consumer_lib.errors import InvalidArgument, SubstreamNotFound
from consumer_lib.fallback import (
    DEFAULT_CAP,
    FallbackRun,
    UndecodedChunk,
    run_fallback,
    run_native,
    run_served,
)
from consumer_lib.fullstream import EpochMark, epoch_metadata, marks
from consumer_lib.gaps import NO_PLUGIN, ReadSummary, SubstreamResults
from consumer_lib.pipeline import prefetch
from consumer_lib.plugins import PluginCatalog
from consumer_lib.ranges import EpochRange
from consumer_lib.store import Store
from consumer_lib.types import ChunkFilter, SubstreamEpoch, SubstreamResult
from consumer_lib.unplugged import served_groups_only
from eventstore.errors import InvalidName
from eventstore.names import ChunkKey, ChunkRef, check_bucket_name
from substreams.api import Event, Substream
from substreams.forkserver import ForkServer
from substreams.protocol import Limits
from substreams.results import DISABLED, ResultRecord

log = logging.getLogger(__name__)

__all__ = [
    "FALLBACK_RUNS_TOTAL",
    "FALLBACK_TOTAL",
    "FallbackMode",
    "SubstreamReader",
    "epoch_reader",
    "results",
]

#: ``auto``: fall back when the server has no usable result; ``off``: yield gaps;
#: ``always``: never read server results (verification, benchmarks).
FallbackMode = Literal["auto", "off", "always"]

FALLBACK_TOTAL = Counter(
    "consumer_fallback_total",
    "Substream results computed by the client-side fallback, by reason",
    ["reason"],
)
FALLBACK_RUNS_TOTAL = Counter(
    "consumer_fallback_runs_total",
    "Sandboxed client-side fallback runs, by how they ended (ok, timeout, killed, error)",
    ["status"],
)
RESULTS_TOTAL = Counter(
    "consumer_substream_results_total",
    "Substream results yielded, by how they were served",
    ["served"],
)


@dataclass(frozen=True)
class SubstreamReader:
    """Resolves the results of one substream, chunk by chunk (see module docstring).

    Args:
        store: the reads.
        name: the substream's name.
        plugin: the local plugin (None: unknown here; then every chunk the filter keeps
            is asked for, and no fallback is possible).
        fallback: ``auto``, ``off`` or ``always``.
        accept_other_versions: take server results computed by another plugin version.
        cap: caps lowering the plugin's declared limits in the fallback (the
            companion's defaults; None: the declared limits as they are).
        server: the fork server to run fallbacks in (None, or a plugin it cannot load:
            forked from this process after the chunk is decoded here).
    """

    store: Store
    name: str
    plugin: Substream | None
    _: KW_ONLY
    fallback: FallbackMode
    accept_other_versions: bool = False
    cap: Limits | None = DEFAULT_CAP
    server: ForkServer | None = None

    def resolve(self, key: ChunkKey) -> SubstreamResult:
        """The result for one chunk, from the server or by fallback."""
        if self.fallback == "always":
            return self._fall_back(key, "forced", None, 0)
        fetched = self.store.result(self.name, key)
        server_error: str | None = None
        read_bytes = 0 if fetched is None else fetched.size_bytes
        if fetched is None:
            reason = "missing"
        elif fetched.record is None:
            reason, server_error = "unreadable", fetched.unreadable
        elif not fetched.record.ok:
            reason, server_error = fetched.record.status, fetched.record.error
            if _disabled(fetched.record):
                reason = "disabled"
                if self.plugin is None or fetched.record.version == self.plugin.version:
                    return self._gap(key, reason, server_error, read_bytes)
        elif (
            self.plugin is not None
            and not self.accept_other_versions
            and fetched.record.version != self.plugin.version
        ):
            reason = "version_mismatch"
            server_error = f"server version {fetched.record.version}, local {self.plugin.version}"
        else:
            RESULTS_TOTAL.labels("server").inc()
            record = fetched.record
            return SubstreamResult(
                self.name, key, "server", None, record.result, record.version, None, read_bytes
            )
        if self.fallback == "off":
            return self._gap(key, reason, server_error, read_bytes)
        if self.plugin is None:
            return self._gap(key, reason, server_error, read_bytes, NO_PLUGIN)
        return self._fall_back(key, reason, server_error, read_bytes)

    def _gap(
        self,
        key: ChunkKey,
        reason: str,
        server_error: str | None,
        read_bytes: int,
        fallback_status: str | None = None,
    ) -> SubstreamResult:
        """No result and no run here: the server's reason and error (and
        ``fallback_status`` "no_plugin" when there was no code to run)."""
        RESULTS_TOTAL.labels("gap").inc()
        if reason == "disabled":
            log.debug(
                "consumer: substream=%s key=%s: disabled on the server, not run here (%s)",
                self.name,
                key,
                server_error,
            )
        version = "" if self.plugin is None else self.plugin.version
        return SubstreamResult(
            self.name, key, "gap", reason, None, version, server_error, read_bytes, fallback_status
        )

    def _fall_back(
        self, key: ChunkKey, reason: str, server_error: str | None, read_bytes: int
    ) -> SubstreamResult:
        plugin = self.plugin
        assert plugin is not None
        FALLBACK_TOTAL.labels(reason).inc()
        log.debug(  # per chunk: counted, and summed up at the end of a CLI read
            "consumer: substream=%s epoch=%d dc=%s key=%s: fallback (%s)",
            self.name,
            key.epoch,
            key.dc,
            key,
            reason,
        )
        size, run = self._run_chunk(plugin, key)
        size += read_bytes
        FALLBACK_RUNS_TOTAL.labels(run.status).inc()
        if not run.ok:
            RESULTS_TOTAL.labels("gap").inc()
            # The result says why (fallback_status, error) and a read's summary counts
            # it: one warning per chunk would bury a terminal.
            log.debug(
                "consumer: substream=%s key=%s: fallback %s in %.3fs: %s",
                self.name,
                key,
                run.status,
                run.wall_s,
                run.error,
            )
            error = f"fallback {run.status}: {run.error}"
            return SubstreamResult(
                self.name, key, "gap", reason, None, plugin.version, error, size, run.status
            )
        RESULTS_TOTAL.labels("fallback").inc()
        return SubstreamResult(
            self.name, key, "fallback", reason, run.result, plugin.version, server_error, size, "ok"
        )

    def _run_chunk(self, plugin: Substream, key: ChunkKey) -> tuple[int, FallbackRun]:
        """Read the chunk and run the plugin on it; returns (stored size, run)."""
        server = self.server
        if plugin.plan is not None:  # a query: evaluated here, no child (run_native)
            blob = self.store.chunk_blob(key)
            try:
                (run,) = run_native(
                    [plugin], blob.value, key, self.store.decode_limits, cap=self.cap
                )
                return blob.size_bytes, run
            except UndecodedChunk as e:
                # The store's own error (ChunkUnreadable...) from decoding it here.
                log.warning("consumer: key=%s: %s; reading it here", key, e.message)
        elif server is not None and server.can_run(plugin):
            blob = self.store.chunk_blob(key)
            try:
                (run,) = run_served(
                    server, [plugin], blob.value, key, self.store.decode_limits, cap=self.cap
                )
                return blob.size_bytes, run
            except UndecodedChunk as e:
                # The store's own error (ChunkUnreadable...) from decoding it here.
                log.warning("consumer: key=%s: %s; reading it here", key, e.message)
        chunk = self.store.chunk(key)
        return chunk.size_bytes, self.run(plugin, chunk.events, key)

    def run(self, plugin: Substream, events: list[Event], key: ChunkKey) -> FallbackRun:
        """The plugin's run on one chunk: in the sandbox, with the plugin's limits
        lowered to ``cap`` (the benchmark's unbounded baseline overrides this)."""
        (run,) = run_fallback([plugin], events, key, cap=self.cap)
        return run


def _disabled(record: ResultRecord) -> bool:
    """Whether a stored failure says the plugin is disabled on that node (the companion
    stores ``error`` of kind ``disabled`` instead of running it)."""
    return record.kind == DISABLED


def load_plugin(catalog: PluginCatalog, name: str, fallback: FallbackMode) -> Substream | None:
    """The local plugin of ``name``, or None when no source declares it (the served
    results are read without it); ``fallback="always"`` requires it.

    Raises:
        InvalidArgument: ``name`` is not a valid substream name.
        PluginNotFound: ``fallback`` is ``always`` and no source declares it.
    """
    try:
        check_bucket_name(name, "substream")
    except InvalidName as e:
        raise InvalidArgument(str(e)) from e
    if fallback == "always":
        return catalog.get(name)
    return catalog.find(name)


def results(
    store: Store,
    executor: Executor,
    reader: SubstreamReader,
    *,
    dc: str,
    epoch_range: EpochRange,
    keep: ChunkFilter,
    prefetch_chunks: int,
    metadata_depth: int,
    not_found: Callable[[], SubstreamNotFound | None] | None = None,
    window_epochs: int = defaults.UNPLUGGED_WINDOW_EPOCHS,
) -> SubstreamResults:
    """Every result of the range in order (epoch, then chunk order); see module.

    Without the plugin (``reader.plugin`` None) the chunks of types the server holds no
    result for are left out (:func:`consumer_lib.unplugged.served_groups_only`), and
    ``not_found`` (when given) is raised at the end if no chunk had a result."""
    plugin = reader.plugin
    summary = ReadSummary(reader.name)
    metadata = epoch_metadata(store, executor, dc, epoch_range, metadata_depth)
    items = marks(dc, metadata, keep, None if plugin is None else plugin.matches)

    def resolve(item: EpochMark | ChunkKey) -> SubstreamResult:
        assert isinstance(item, ChunkKey)
        return reader.resolve(item)

    resolved: Iterator[SubstreamResult] = (
        result
        for _item, result in prefetch(
            items, resolve, executor, prefetch_chunks, is_marker=lambda i: isinstance(i, EpochMark)
        )
        if result is not None
    )
    if plugin is None:
        resolved = served_groups_only(
            resolved, summary, window_epochs=window_epochs, not_found=not_found
        )
    return SubstreamResults(resolved, summary)


def epoch_reader(
    executor: Executor,
    reader: SubstreamReader,
    dc: str,
    keep: ChunkFilter,
    *,
    prefetch_chunks: int,
) -> Callable[[int, tuple[ChunkRef, ...] | None], SubstreamEpoch]:
    """For ``tail_substream``: one epoch's results from its metadata (None: skipped).

    Without the plugin, a chunk without a result is kept (a gap) only when its
    type:subtype had a result in this epoch or an earlier one of the tail (a tail cannot
    wait for later epochs as a range read does: :mod:`consumer_lib.unplugged`)."""
    plugin = reader.plugin
    covered: set[str] = set()

    def read(epoch: int, refs: tuple[ChunkRef, ...] | None) -> SubstreamEpoch:
        if refs is None:
            return SubstreamEpoch(epoch, dc, (), found=False, skipped=True)
        items = marks(dc, [(epoch, refs)], keep, None if plugin is None else plugin.matches)

        def resolve(item: EpochMark | ChunkKey) -> SubstreamResult:
            assert isinstance(item, ChunkKey)
            return reader.resolve(item)

        done = prefetch(
            items, resolve, executor, prefetch_chunks, is_marker=lambda i: isinstance(i, EpochMark)
        )
        got = tuple(r for _, r in done if r is not None)
        if plugin is None:  # no code here: only the type:subtypes with results so far
            covered.update(f"{r.type}:{r.subtype}" for r in got if r.reason != "missing")
            got = tuple(r for r in got if f"{r.type}:{r.subtype}" in covered)
        return SubstreamEpoch(epoch, dc, got)

    return read
