"""``EventsClient``: the consumer's handle on a cluster, and the entry to every reader.

    from consumer_lib import EventsClient

    with EventsClient(["http://127.0.0.1:8098"]) as client:
        for epoch in client.epochs("dc1", 1700000000, 1700000060, types=["web"]):
            ...                                           # Epoch: chunks decoded, in order
        for ev in client.events("dc1", start_dt, end_dt):  # datetimes work too
            ev.epoch, ev.type, ev.event
        for res in client.substream("web_5xx", "dc1", start, end):
            res.served, res.reason, res.result             # "server" or "fallback" (why)
        with client.tail("dc1", position=Path("pos.json")) as tail:
            for epoch in tail: ...                         # seconds behind real time
        with client.tail_substream("web_5xx", "dc1", position=Path("5xx.json")) as tail:
            for epoch in tail: epoch.results               # a substream, as it comes

The client is small (kazoo-style): it holds the node list, the store reads
(:mod:`consumer_lib.store`, the one boundary where Riak errors are translated), a thread
pool for parallel fetches, and the plugin catalog for fallbacks. The readers are
recipes over it: :mod:`~consumer_lib.fullstream`, :mod:`~consumer_lib.substream`,
:mod:`~consumer_lib.tail`, each stating its failure semantics.

Ranges: ``start`` inclusive, ``end`` exclusive, as epochs or aware datetimes
(:mod:`consumer_lib.ranges`). Every error raised is a
:class:`~consumer_lib.errors.ConsumerError` naming the epoch, dc and key.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from consumer_lib import defaults, fullstream, listing, substream
from consumer_lib.discovery import configured_nodes, live_nodes, zk_client
from consumer_lib.errors import InvalidArgument, SubstreamNotFound
from consumer_lib.forkserver import fallback_server
from consumer_lib.gaps import SubstreamResults
from consumer_lib.listing import Inventory
from consumer_lib.plugins import PluginCatalog
from consumer_lib.ranges import EpochRange, When, epoch_of
from consumer_lib.store import Store
from consumer_lib.substream import FallbackMode, SubstreamReader
from consumer_lib.tail import T, Tail
from consumer_lib.types import (
    Chunk,
    ChunkFilter,
    Epoch,
    SubstreamEpoch,
    TaggedEvent,
)
from consumer_lib.unplugged import no_substream
from eventstore.errors import InvalidName
from eventstore.names import DEFAULT_NAMESPACES, MetadataKey, Namespaces
from eventstore.riak import Retry
from eventstore.riak.types import Quorum
from substreams import forkserver

__all__ = ["EventsClient"]

Filter = Iterable[str] | str | None


class EventsClient:
    """A reader of one cluster's events and substreams.

    Args:
        nodes: Riak HTTP URLs (``http://host:8098``); or None with ``zookeeper``.
        zookeeper: a ZooKeeper ensemble (``host:port,...``): the node list is the live
            nodes registered there, a random one first; with ``trusted_keys``, its
            plugin registry is also a source of fallback plugins. Needs kazoo.
        zk_root: our ZooKeeper root.
        namespaces: bucket types and buckets.
        r, notfound_ok: Riak read options (the seed's 1 and true).
        timeout_s: socket timeout of one request, seconds.
        retry_max_tries, retry_deadline_s: retries of a request on other nodes.
        concurrency: threads fetching, decoding and running fallbacks.
        prefetch: chunks fetched ahead of the consumer (bounds memory).
        metadata_depth: epochs whose metadata is read ahead.
        plugin_dirs: plugin directories for the fallback (the companions'), as paths
            or strings.
        use_entry_points: also installed ``riak_events.substreams`` plugins.
        trusted_keys: public key files or base64 keys: registry plugins signed by one
            of them may run in the fallback (none: registry plugins are never imported).

    Raises:
        InvalidArgument: no node, a bad URL, a bad option.
        DiscoveryFailed: ZooKeeper unreachable or no live node.
    """

    def __init__(
        self,
        nodes: Sequence[str] | None = None,
        *,
        zookeeper: str | None = None,
        zk_root: str = defaults.ZK_ROOT,
        namespaces: Namespaces = DEFAULT_NAMESPACES,
        r: Quorum = defaults.R,
        notfound_ok: bool = defaults.NOTFOUND_OK,
        timeout_s: float = defaults.TIMEOUT_S,
        retry_max_tries: int = defaults.RETRY_MAX_TRIES,
        retry_deadline_s: float = defaults.RETRY_DEADLINE_S,
        concurrency: int = defaults.CONCURRENCY,
        prefetch: int = defaults.PREFETCH_CHUNKS,
        metadata_depth: int = defaults.METADATA_DEPTH,
        plugin_dirs: Sequence[str | os.PathLike[str]] | str | os.PathLike[str] = (),
        use_entry_points: bool = True,
        trusted_keys: Sequence[str] = (),
    ) -> None:
        if concurrency < 1 or prefetch < 1 or metadata_depth < 1:
            raise InvalidArgument("concurrency, prefetch and metadata_depth must be >= 1")
        if isinstance(nodes, str):
            nodes = [nodes]
        self._zk: Any = None
        if nodes:
            node_list = configured_nodes(nodes)
        elif zookeeper:
            self._zk = zk_client(zookeeper)
            try:
                node_list = live_nodes(self._zk, root=zk_root)
            except BaseException:
                self._close_zk()
                raise
        else:
            raise InvalidArgument("EventsClient needs nodes=[...] or zookeeper='host:port'")
        try:
            retry = Retry(max_tries=retry_max_tries, deadline_s=retry_deadline_s)
        except ValueError as e:
            raise InvalidArgument(str(e)) from e
        self.store = Store(
            node_list,
            namespaces=namespaces,
            r=r,
            notfound_ok=notfound_ok,
            timeout_s=timeout_s,
            retry=retry,
        )
        self.plugins = PluginCatalog(
            plugin_dirs,
            use_entry_points=use_entry_points,
            zk_client=self._zk,
            zk_root=zk_root,
            trusted_keys=trusted_keys,
        )
        self._concurrency = concurrency
        self._prefetch = prefetch
        self._metadata_depth = metadata_depth
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        # Started on the first fallback; runs the fallback's sandboxed children.
        self._forkserver = fallback_server(max_connections=concurrency)

    @property
    def fallback_server(self) -> forkserver.ForkServer:
        """The fork server the fallback's sandboxed runs fork from (its ``pid`` is None
        until the first fallback, and after :meth:`close`)."""
        return self._forkserver

    @property
    def nodes(self) -> tuple[str, ...]:
        """The node list, in the order the client starts from."""
        return self.store.nodes

    # -- the full stream ---------------------------------------------------------------

    def epochs(
        self,
        dc: str,
        start: When,
        end: When,
        *,
        types: Filter = None,
        subtypes: Filter = None,
    ) -> Iterator[Epoch]:
        """Each epoch of ``[start, end)`` of ``dc`` in order, its kept chunks decoded.

        Args:
            dc: the data centre.
            start, end: epochs or aware datetimes; start inclusive, end exclusive.
            types, subtypes: names or glob patterns to keep (None: all); applied to the
                metadata, so other chunks are never fetched.

        Yields:
            :class:`Epoch` per epoch, empty ones included (``found`` false when it has
            no metadata).

        Raises:
            InvalidArgument: bad dc, range or filter (at the call).
            ChunkMissing, ChunkCorrupt, ChunkUnreadable: naming the key (in order).
            StoreUnavailable, MetadataUnreadable: naming the epoch, dc and key.
        """
        return fullstream.epochs(self._range_read(dc, start, end, types, subtypes))

    def chunks(
        self,
        dc: str,
        start: When,
        end: When,
        *,
        types: Filter = None,
        subtypes: Filter = None,
    ) -> Iterator[Chunk]:
        """Each kept chunk of ``[start, end)`` in order (as :meth:`epochs`, chunk by chunk,
        never holding a whole epoch)."""
        return fullstream.chunks(self._range_read(dc, start, end, types, subtypes))

    def events(
        self,
        dc: str,
        start: When,
        end: When,
        *,
        types: Filter = None,
        subtypes: Filter = None,
    ) -> Iterator[TaggedEvent]:
        """Each event of ``[start, end)`` in order, tagged with epoch, dc, type, subtype
        and chunk (the flat view of :meth:`epochs`; same arguments and errors)."""
        return fullstream.events(self._range_read(dc, start, end, types, subtypes))

    # -- substreams ----------------------------------------------------------------------

    def substream(
        self,
        name: str,
        dc: str,
        start: When,
        end: When,
        *,
        types: Filter = None,
        subtypes: Filter = None,
        fallback: FallbackMode = "auto",
        accept_other_versions: bool = False,
    ) -> SubstreamResults:
        """Each result of substream ``name`` over ``[start, end)``, in order, with how it
        was served (see :mod:`consumer_lib.substream`). The plugin's code is needed
        only where a result is missing or failed: without it, served results are
        returned and those chunks are gaps ``missing, no plugin to run``
        (``fallback_status`` "no_plugin"); which chunks are the substream's is then
        learned from the server's results (:mod:`consumer_lib.unplugged`).

        Args:
            name: the substream.
            dc, start, end, types, subtypes: as :meth:`epochs` (the plugin's own declared
                types/subtypes apply too).
            fallback: ``auto`` (compute missing or failed results here, in the
                companion's sandbox with the plugin's limits), ``off`` (yield gaps
                instead), ``always`` (never read server results).
            accept_other_versions: take server results of another plugin version.

        Returns:
            :class:`~consumer_lib.gaps.SubstreamResults`: an iterator of
            :class:`SubstreamResult`, one per chunk; a fallback that failed here (an
            exception, its deadline, its memory limit) is a gap whose
            ``fallback_status`` and ``error`` say why; a plugin the server disabled is
            a gap with reason ``disabled``. Its ``summary`` counts what was handed out
            (served, computed here, gaps by label with how to fill them).

        Raises:
            PluginNotFound: ``fallback="always"`` and no plugin source declares ``name``
                (at the call).
            SubstreamNotFound: no source declares or knows ``name`` (with ZooKeeper: the
                registry, the companions) and no chunk of the range has a result of it
                (after reading the range; nothing was yielded): names the known
                substreams and the closest one.
            ChunkMissing, ChunkCorrupt, StoreUnavailable: as :meth:`epochs`.
        """
        epoch_range, keep = self._args(dc, start, end, types, subtypes)
        reader = self._substream_reader(name, fallback, accept_other_versions)
        return substream.results(
            self.store,
            self._pool(),
            reader,
            dc=dc,
            epoch_range=epoch_range,
            keep=keep,
            prefetch_chunks=self._prefetch,
            metadata_depth=self._metadata_depth,
            not_found=lambda: self._no_substream(name),
        )

    def known_substreams(self) -> list[str]:
        """Every substream name the client's sources know, sorted (plugin directories,
        entry points; with ZooKeeper, the registry and what live companions run)."""
        return self.plugins.known_names()

    def _no_substream(self, name: str) -> SubstreamNotFound | None:
        """The error for a name no result was found for; None when a source knows it
        (a registry plugin not trusted here, one a companion runs)."""
        known = self.known_substreams()
        if name in known:
            return None
        return no_substream(name, known, defaults.KNOWN_NAMES_SHOWN)

    # -- what a range holds ------------------------------------------------------------

    def inventory(
        self,
        dc: str,
        start: When,
        end: When,
        *,
        substreams: Sequence[str] | None = None,
        check_substreams: bool = True,
        max_epochs: int = defaults.INVENTORY_MAX_EPOCHS,
    ) -> Inventory:
        """The types and subtypes with data in ``dc`` over ``[start, end)``, from the
        metadata only, and which substreams have results for them (see
        :mod:`consumer_lib.listing`; no key is ever listed).

        Args:
            dc, start, end: as :meth:`epochs`.
            substreams: names to check (None: :meth:`known_substreams`).
            check_substreams: probe the result of a few chunks per substream and
                type:subtype (at most ``defaults.INVENTORY_MAX_PROBES`` reads).
            max_epochs: the metadata of at most this many epochs is read; a longer
                range is sampled, evenly (``Inventory.sampled``).

        Raises:
            InvalidArgument: bad dc or range, ``max_epochs < 1``.
            MetadataUnreadable, StoreUnavailable: as :meth:`epochs`.
        """
        epoch_range, _keep = self._args(dc, start, end, None, None)
        if max_epochs < 1:
            raise InvalidArgument(f"max_epochs must be >= 1, not {max_epochs}")
        names: list[str] = []
        if check_substreams:
            names = list(substreams) if substreams is not None else self.known_substreams()
            for n in names:
                substream.load_plugin(self.plugins, n, "off")  # checks the name only
        return listing.inventory(
            self.store,
            self._pool(),
            dc,
            epoch_range,
            max_epochs=max_epochs,
            substreams=names,
            metadata_depth=self._metadata_depth,
        )

    # -- tail ------------------------------------------------------------------------------

    def tail(
        self,
        dc: str,
        *,
        position: str | os.PathLike[str] | None = None,
        start: When | None = None,
        end: When | None = None,
        types: Filter = None,
        subtypes: Filter = None,
        lag_s: float = defaults.TAIL_LAG_S,
        late_wait_s: float = defaults.TAIL_LATE_WAIT_S,
        poll_s: float = defaults.TAIL_POLL_S,
        until: When | None = None,
        **clock: Any,
    ) -> Tail[Epoch]:
        """Follow ``dc`` ``lag_s`` seconds behind real time (see :mod:`consumer_lib.tail`).

        Args:
            dc: the data centre.
            position: a position file (path or string) to resume from and save to.
            start: first epoch when there is no saved position (default: the newest
                due, ``now - lag_s - 1``: an ``end`` before it delivers nothing); an
                epoch, an aware datetime or a string (``consumer_lib.ranges``).
            end: stop before this epoch (None: forever); same forms as ``start``, the
                name :meth:`epochs` and the CLI's ``--end`` use.
            until: the former name of ``end`` (a DeprecationWarning).
            types, subtypes: as :meth:`epochs`.
            lag_s, late_wait_s, poll_s: seconds; see the module.
            clock: ``clock=`` and ``sleep=`` replacements, for tests.

        Raises:
            PositionError: the position file is unreadable or another dc's.
            InvalidArgument: both ``end`` and ``until``.
        """
        self._tail_args(dc, lag_s, late_wait_s, poll_s)
        read = fullstream.epoch_reader(
            self.store,
            self._pool(),
            dc,
            self._filter(types, subtypes),
            prefetch_chunks=self._prefetch,
        )
        pacing, last = (lag_s, late_wait_s, poll_s), _tail_end(end, until)
        return self._tail(dc, read, position, start, last, pacing=pacing, clock=clock)

    def tail_substream(
        self,
        name: str,
        dc: str,
        *,
        position: str | os.PathLike[str] | None = None,
        start: When | None = None,
        end: When | None = None,
        types: Filter = None,
        subtypes: Filter = None,
        fallback: FallbackMode = "auto",
        accept_other_versions: bool = False,
        lag_s: float = defaults.TAIL_LAG_S,
        late_wait_s: float = defaults.TAIL_LATE_WAIT_S,
        poll_s: float = defaults.TAIL_POLL_S,
        until: When | None = None,
        **clock: Any,
    ) -> Tail[SubstreamEpoch]:
        """Follow substream ``name`` of ``dc``: as :meth:`tail` (``end``, ``until``
        too), each delivered epoch holding the results of its chunks, served or by
        fallback as :meth:`substream`.

        Raises:
            PositionError, PluginNotFound, InvalidArgument: at the call.
        """
        self._tail_args(dc, lag_s, late_wait_s, poll_s)
        reader = self._substream_reader(name, fallback, accept_other_versions)
        read = substream.epoch_reader(
            self._pool(),
            reader,
            dc,
            self._filter(types, subtypes),
            prefetch_chunks=self._prefetch,
        )
        pacing, last = (lag_s, late_wait_s, poll_s), _tail_end(end, until)
        return self._tail(dc, read, position, start, last, pacing=pacing, clock=clock)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the pool, the fallback's fork server, close connections, the ZooKeeper
        session and plugin copies."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        self._forkserver.close()
        self.store.close()
        self.plugins.close()
        self._close_zk()

    def __enter__(self) -> EventsClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- helpers -----------------------------------------------------------------------------

    def _close_zk(self) -> None:
        zk, self._zk = self._zk, None
        if zk is not None:
            zk.stop()
            zk.close()

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self._concurrency, thread_name_prefix="consumer"
                )
            return self._executor

    def _tail(
        self,
        dc: str,
        read: Callable[[int, Any], T],
        position: str | os.PathLike[str] | None,
        start: When | None,
        end: int | None,
        *,
        pacing: tuple[float, float, float],
        clock: dict[str, Any],
    ) -> Tail[T]:
        lag_s, late_wait_s, poll_s = pacing
        return Tail(
            self.store,
            dc,
            read,
            position=None if position is None else Path(position),
            start=None if start is None else epoch_of(start),
            lag_s=lag_s,
            late_wait_s=late_wait_s,
            poll_s=poll_s,
            until=end,
            **clock,
        )

    def _substream_reader(
        self, name: str, fallback: FallbackMode, accept_other_versions: bool
    ) -> SubstreamReader:
        if fallback not in ("auto", "off", "always"):
            raise InvalidArgument(f"fallback must be 'auto', 'off' or 'always', not {fallback!r}")
        plugin = substream.load_plugin(self.plugins, name, fallback)
        return SubstreamReader(
            self.store,
            name,
            plugin,
            fallback=fallback,
            accept_other_versions=accept_other_versions,
            server=self._forkserver,
        )

    def _tail_args(self, dc: str, lag_s: float, late_wait_s: float, poll_s: float) -> None:
        self._check_dc(dc)
        if min(lag_s, late_wait_s) < 0 or poll_s <= 0:
            raise InvalidArgument("lag_s and late_wait_s must be >= 0 and poll_s > 0")

    @staticmethod
    def _check_dc(dc: str) -> None:
        try:
            MetadataKey(0, dc)
        except InvalidName as e:
            raise InvalidArgument(f"dc {dc!r} is not valid: {e.reason}", dc=str(dc)) from e

    @staticmethod
    def _filter(types: Filter, subtypes: Filter) -> ChunkFilter:
        return ChunkFilter.of(types, subtypes)

    def _range_read(
        self, dc: str, start: When, end: When, types: Filter, subtypes: Filter
    ) -> fullstream.RangeRead:
        epoch_range, keep = self._args(dc, start, end, types, subtypes)
        return fullstream.RangeRead(
            self.store,
            self._pool(),
            dc,
            epoch_range,
            keep,
            prefetch_chunks=self._prefetch,
            metadata_depth=self._metadata_depth,
        )

    def _args(
        self, dc: str, start: When, end: When, types: Filter, subtypes: Filter
    ) -> tuple[EpochRange, ChunkFilter]:
        self._check_dc(dc)
        return EpochRange.of(start, end), self._filter(types, subtypes)


def _tail_end(end: When | None, until: When | None) -> int | None:
    """The tail's end from ``end``, or from its former name ``until`` (deprecated)."""
    if until is not None:
        if end is not None:
            raise InvalidArgument("give end= only (until= is its former name)")
        warnings.warn(
            "EventsClient.tail(until=...) is deprecated: use end=... (as epochs(), "
            "substream() and the CLI's --end)",
            DeprecationWarning,
            stacklevel=3,
        )
        end = until
    return None if end is None else epoch_of(end, end=True)
