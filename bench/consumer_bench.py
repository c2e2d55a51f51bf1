"""Consumer library benchmarks: full-stream reads and substreams served vs fallback.

A devnode whose post-commit hook drives a real companion (the example plugins in a
plugin directory) receives ``--epochs`` epochs (default 60) of ``--events`` realistic
events each (one dc, grouped by type/subtype, chunked at 500 KB as relocators do).
When every substream result is stored:

1. **Full stream**: ``EventsClient.events`` over the whole range (metadata, filtered,
   parallel bounded prefetch of verified bytes, each chunk decoded just before its
   events are handed out): events/s and MB/s (stored bytes), against the decode
   ceiling: verify + decode of the same blobs already in memory, one thread (the
   codec's own speed on this data, no network), and against the same decode keeping
   the last ``--prefetch`` chunks alive (the collector's scans and cold frees the
   ceiling does not pay; what the reader paid when it decoded ahead). "Python
   tagging": ``events`` with the reference tagger (``types.tag_events_py``) instead of
   the Sereal core's ``tag_events``, as before issue 16's point 4a. "before": the
   reader as it was before issue 16 (each chunk decoded on the pool, ``--prefetch``
   ahead), rebuilt here from the library's parts. The variants run interleaved,
   ``--repeat`` rounds; each round's ratio to its own ceiling is printed (the machine
   is shared: compare within a round), with CPU and the collector's passes per event.
2. **Substream served vs fallback**: the same range read as a substream from the
   server's stored results (``fallback="auto"``; chunks the companion shed under the
   write burst are handed to it again first, so all are served by the server) and by
   client-side fallback only (``fallback="always"``: full chunks fetched and the plugin
   run here): bytes read and wall time, and their ratios.
3. **Tail lag**: a real relocator (grace 0.3 s) stores what a producer sends over TCP
   for ``--tail-s`` seconds, the companion running; ``tail`` follows with
   ``--tail-lag`` seconds of lag: seconds from each epoch's end to its delivery,
   p50/p99/max, and whether every acknowledged event was delivered once.

    .venv/bin/python bench/consumer_bench.py [--epochs 60] [--events 8000] [--repeat 3]
                                             [--tail-s 20] [--tail-lag 1.0]
                                             [--sections full,substream,tail]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import tempfile
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from events import generate_events, store_epoch
from report import best, emit, figure

import sereal_codec as sereal
from companion.testing import Stack, start_stack
from consumer_lib import EventsClient, defaults, fullstream, types
from consumer_lib.pipeline import prefetch
from consumer_lib.ranges import EpochRange
from consumer_lib.store import FetchedBlob, FetchedChunk, Store
from consumer_lib.types import Chunk, ChunkFilter, tag_chunk
from eventstore.blob import unpack_blob
from eventstore.chunking import chunk_events
from eventstore.names import DEFAULT_NAMESPACES, ChunkKey, ChunkRef
from relocator.testing import AckedSender, relocator_process
from substreams.loader import load_file, plugin_files

EXAMPLES = Path(__file__).parents[1] / "substreams" / "examples"
DC = "dc1"
T = TypeVar("T")


def write_range(stack: Stack, first: int, epochs: int, per_epoch: int) -> tuple[int, list[bytes]]:
    """Write the epochs (chunks, then metadata). Returns (events, the stored blobs)."""
    events = generate_events(per_epoch * 4, seed=3)
    blobs: list[bytes] = []
    total = 0
    for i in range(epochs):
        start = (i * per_epoch) % (len(events) - per_epoch)
        blobs += store_epoch(stack.riak, first + i, DC, events[start : start + per_epoch])
        total += per_epoch
    return total, blobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--events", type=int, default=8000, help="events per epoch")
    parser.add_argument("--tail-s", type=int, default=20, help="seconds of tail lag bench")
    parser.add_argument("--tail-lag", type=float, default=1.0, help="tail's lag_s")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--prefetch", type=int, default=16)
    parser.add_argument("--json", action="store_true", help="headline figures as JSON, last")
    parser.add_argument(
        "--sections", default="full,substream,tail", help="which to run (comma-separated)"
    )
    parser.add_argument(
        "--caller",
        choices=CALLER_MODES,
        help="no devnode: one read of 80,000 events from memory on this thread, for "
        "valgrind (see caller_only)",
    )
    args = parser.parse_args()
    if args.caller:
        print(args.caller, caller_only(args.caller))
        return
    sections = set(args.sections.split(","))

    plugins = {p.name: p.read_text() for p in plugin_files(EXAMPLES)}
    names = sorted(s.name for p in plugin_files(EXAMPLES) for s in load_file(p))
    first = int(time.time()) - 3600
    with tempfile.TemporaryDirectory(prefix="consumer-bench-") as tmp:
        stack = start_stack(Path(tmp), plugins=plugins, companion={"queue_max": 4096})
        try:
            t0 = time.perf_counter()
            n_events, blobs = write_range(stack, first, args.epochs, args.events)
            stored = sum(len(b) for b in blobs)
            print(
                f"wrote {args.epochs} epochs, {n_events} events, {len(blobs)} chunks, "
                f"{stored / 1e6:.2f} MB stored in {time.perf_counter() - t0:.1f}s "
                f"(codec: {sereal.IMPLEMENTATION}; {platform.processor() or platform.machine()},"
                f" {os.cpu_count()} cores)"
            )
            with EventsClient(
                [stack.devnode.url],
                plugin_dirs=[stack.plugin_dir],
                use_entry_points=False,
                concurrency=args.concurrency,
                prefetch=args.prefetch,
            ) as client:
                # always: a companion still at work would share the cores with the reads
                wait_for_companion(stack, client, names, first, args.epochs)
                read_s = dec_s = 0.0
                if "full" in sections:
                    read_s, dec_s = bench_full(
                        client,
                        blobs,
                        server_pid=stack.devnode.pid,
                        first=first,
                        n_events=n_events,
                        stored=stored,
                        args=args,
                    )
                if "substream" in sections:
                    print("\n2. substream served by the server vs by client-side fallback")
                    print(
                        f"{'substream':14} {'results':>7} {'served KB':>10} {'fallback KB':>12} "
                        f"{'bytes x':>8} {'served s':>9} {'fallback s':>10} {'time x':>7}"
                    )
                    for name in names:
                        rng = (DC, first, first + args.epochs)
                        srv_s, served = best(
                            args.repeat, lambda n=name, r=rng: list(client.substream(n, *r))
                        )
                        fb_s, forced = best(
                            args.repeat,
                            lambda n=name, r=rng: list(client.substream(n, *r, fallback="always")),
                        )
                        how = Counter(r.served if r.reason is None else r.reason for r in served)
                        assert [r.result for r in served] == [r.result for r in forced]
                        srv_b = sum(r.size_bytes for r in served)
                        fb_b = sum(r.size_bytes for r in forced)
                        print(
                            f"{name:14} {len(served):7} {srv_b / 1e3:10.1f} {fb_b / 1e3:12.1f} "
                            f"{fb_b / srv_b:8.1f} {srv_s:9.3f} {fb_s:10.3f} {fb_s / srv_s:7.1f}"
                            + ("" if set(how) == {"server"} else f"  (served: {dict(how)})")
                        )
                tail_p99 = float("nan")
                if "tail" in sections:
                    tail_p99 = bench_tail_lag(stack, client, Path(tmp), args.tail_s, args.tail_lag)
                if args.json:
                    figures = []
                    if "full" in sections:
                        figures.append(
                            figure(
                                f"EventsClient.events, {n_events} events",
                                n_events / read_s,
                                "events/s",
                                anchor="decode ceiling, 1 thread, same round (the median round)",
                                anchor_value=n_events / dec_s,
                                target=">= 0.8x",
                            )
                        )
                    if "tail" in sections:
                        figures.append(
                            figure(
                                f"tail, epoch end -> delivery (lag_s {args.tail_lag})",
                                tail_p99,
                                "s p99",
                            )
                        )
                    emit(figures)
        finally:
            stack.stop()


CALLER_MODES = ("none", "ceiling", "events", "python-tags", "chunks")


def caller_only(mode: str) -> int:
    """The caller's work alone, for an instruction count that the shared machine does
    not disturb: 30 chunks of ``web`` events (80,000) held in memory, read once through
    ``fullstream.events`` / ``chunks`` with an executor that runs each fetch at submit
    (``events`` with the core's tagger, ``python-tags`` with the reference), or decoded
    by ``unpack_blob`` one by one (``ceiling``); ``none`` builds the input and reads
    nothing (subtract it). Returns the events read.

        PYTHONHASHSEED=0 valgrind --tool=callgrind .venv/bin/python \
            bench/consumer_bench.py --caller events      # then: none, ceiling, ...
    """
    epoch = 1_700_000_000
    web = [e for e in generate_events(16_000, seed=3) if e["type"] == "web"][:8_000]
    blobs = [c.data for c in chunk_events(web)] * 10
    store = Store(("http://127.0.0.1:1",), namespaces=DEFAULT_NAMESPACES)  # never asked
    refs = tuple(ChunkRef("web", "app", i) for i in range(len(blobs)))

    def metadata(epoch: int, dc: str) -> tuple[ChunkRef, ...] | None:
        return refs

    def chunk_blob(key: ChunkKey) -> FetchedBlob:
        return FetchedBlob(key, blobs[key.chunk], len(blobs[key.chunk]), "memory", ())

    store.metadata = metadata  # type: ignore[method-assign]
    store.chunk_blob = chunk_blob  # type: ignore[method-assign]

    class Inline(Executor):
        def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
            done: Future[T] = Future()
            done.set_result(fn(*args, **kwargs))
            return done

    rng, keep = EpochRange(epoch, epoch + 1), ChunkFilter()
    read = fullstream.RangeRead(store, Inline(), DC, rng, keep, prefetch_chunks=4, metadata_depth=1)
    if mode == "none":
        return 0
    if mode == "ceiling":
        return sum(len(unpack_blob(b)) for b in blobs)
    if mode == "chunks":
        return sum(len(c.events) for c in fullstream.chunks(read))
    if mode == "python-tags":
        types.TAGGER = types.tag_events_py
    return sum(1 for _ in fullstream.events(read))


def wait_for_companion(
    stack: Stack, client: EventsClient, names: list[str], first: int, epochs: int
) -> None:
    """Wait until the companion stored every result (not timed); chunks it shed under
    the write burst are handed to it again, so the served path is the server's only."""
    t0 = time.perf_counter()
    for _round in range(10):
        lacking: dict[int, set[str]] = defaultdict(set)
        for name in names:
            got = list(client.substream(name, DC, first, first + epochs, fallback="off"))
            stack.wait_results(name, [r.key for r in got], timeout_s=600)
            for r in client.substream(name, DC, first, first + epochs, fallback="off"):
                if r.served != "server":
                    lacking[r.key.epoch].add(r.key.format())
        if not lacking:
            break
        for epoch, keys in sorted(lacking.items()):
            body = {"epoch": epoch, "dc": DC, "keys": sorted(keys)}
            stack.companion.request("POST", "/v1/keys", body)
        time.sleep(2.0)
    print(f"companion results stored for {names} in {time.perf_counter() - t0:.1f}s")


class Run(NamedTuple):
    """One run of a variant."""

    wall_s: float
    cpu_s: float  # the process's, every thread
    caller_cpu_s: float  # the calling thread's: what the GIL serialises
    server_cpu_s: float  # the devnode's, serving the reads
    gc_passes: int
    events: int


def process_cpu_s(pid: int | None) -> float:
    """CPU seconds so far of process ``pid`` (0.0 when it is not there)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:13]) / os.sysconf("SC_CLK_TCK")


def counted(run: Callable[[], int], server_pid: int | None) -> Run:
    """Run once, counting the collector's passes and the server's CPU."""
    passes = [0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        passes[0] += phase == "start"

    gc.callbacks.append(on_gc)
    try:
        s0 = process_cpu_s(server_pid)
        t0, c0, th0 = time.perf_counter(), time.process_time(), time.thread_time()
        out = run()
        return Run(
            time.perf_counter() - t0,
            time.process_time() - c0,
            time.thread_time() - th0,
            process_cpu_s(server_pid) - s0,
            passes[0],
            out,
        )
    finally:
        gc.callbacks.remove(on_gc)


def bench_full(
    client: EventsClient,
    blobs: list[bytes],
    *,
    server_pid: int | None,
    first: int,
    n_events: int,
    stored: int,
    args: argparse.Namespace,
) -> tuple[float, float]:
    """Section 1; returns the seconds of EventsClient.events and of the ceiling in the
    round whose ratio of the two is the median."""
    end = first + args.epochs

    def ceiling() -> int:
        return sum(len(unpack_blob(b)) for b in blobs)

    def ceiling_kept() -> int:
        # A reader decoding ahead keeps up to `prefetch` decoded chunks alive: the
        # collector scans them and their memory is freed cold. The ceiling above
        # frees each chunk at once and pays neither.
        window: deque[list[Any]] = deque(maxlen=args.prefetch)
        n = 0
        for b in blobs:
            window.append(unpack_blob(b))
            n += len(window[-1])
        return n

    def full() -> int:
        return sum(1 for _ in client.events(DC, first, end))

    def by_chunk() -> int:
        return sum(len(c.events) for c in client.chunks(DC, first, end))

    def python_tags() -> int:
        # EventsClient.events tagging in Python (the reference tagger, as before the
        # core's tag_events): the same read otherwise.
        core, types.TAGGER = types.TAGGER, types.tag_events_py
        try:
            return full()
        finally:
            types.TAGGER = core

    pool = ThreadPoolExecutor(args.concurrency)

    def before() -> int:
        # EventsClient.events before issue 16: fetch, verify and decode on the pool,
        # `prefetch` chunks ahead, then tag.
        store = client.store
        meta = fullstream.epoch_metadata(
            store, pool, DC, EpochRange(first, end), defaults.METADATA_DEPTH
        )
        items = fullstream.marks(DC, meta, ChunkFilter.of(None, None))

        def decoded(item: fullstream.EpochMark | ChunkKey) -> FetchedChunk:
            assert isinstance(item, ChunkKey)
            return store.chunk(item)

        n = 0
        for _key, got in prefetch(
            items,
            decoded,
            pool,
            args.prefetch,
            is_marker=lambda i: isinstance(i, fullstream.EpochMark),
        ):
            if got is not None:
                chunk = Chunk(got.key, got.events, got.size_bytes, got.node, got.bad_nodes)
                n += sum(1 for _ in tag_chunk(chunk))
        return n

    runs: dict[str, Callable[[], int]] = {
        "decode ceiling (1 thread)": ceiling,
        "EventsClient.events": full,
        "EventsClient.chunks": by_chunk,
        "events, Python tagging": python_tags,
        f"decode, {args.prefetch} chunks kept": ceiling_kept,
        "events, before (decode ahead)": before,
    }
    load = os.getloadavg()
    rounds: dict[str, list[Run]] = {name: [] for name in runs}
    try:
        for _ in range(args.repeat):  # interleaved: every variant once per round
            for name, run in runs.items():
                rounds[name].append(counted(run, server_pid))
    finally:
        pool.shutdown()
    for name, got in rounds.items():
        assert all(r.events == n_events for r in got), (name, [r.events for r in got], n_events)
    print(f"\n1. full stream, {args.epochs}-epoch range (best of {args.repeat} interleaved rounds)")
    print(
        f"{'':32} {'events/s':>10} {'MB/s':>7} {'seconds':>8} {'CPU us/ev':>9} "
        f"{'caller':>7} {'devnode':>7} {'gc':>5}  wall / ceiling, each round"
    )
    anchor = rounds["decode ceiling (1 thread)"]
    for name, got in rounds.items():
        secs = min(r.wall_s for r in got)
        ratios = " ".join(f"{c.wall_s / r.wall_s:.2f}" for c, r in zip(anchor, got, strict=True))
        print(
            f"{name:32} {n_events / secs:10,.0f} {stored / 1e6 / secs:7.2f} {secs:8.3f} "
            f"{min(r.cpu_s for r in got) / n_events * 1e6:9.2f} "
            f"{min(r.caller_cpu_s for r in got) / n_events * 1e6:7.2f} "
            f"{min(r.server_cpu_s for r in got) / n_events * 1e6:7.2f} "
            f"{min(r.gc_passes for r in got):5}  {ratios}"
        )
    dec_s = min(r.wall_s for r in anchor)
    for name in ("EventsClient.events", "events, Python tagging", "events, before (decode ahead)"):
        got = rounds[name]
        walls = [c.wall_s / r.wall_s for c, r in zip(anchor, got, strict=True)]
        callers = [c.caller_cpu_s / r.caller_cpu_s for c, r in zip(anchor, got, strict=True)]
        print(
            f"{name} / ceiling: wall {min(walls):.2f}-{max(walls):.2f} "
            f"(median {statistics.median(walls):.2f}, best / best "
            f"{dec_s / min(r.wall_s for r in got):.2f}); the caller's CPU "
            f"{statistics.median(callers):.2f} (median)"
        )
    print(f"load average {load[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    # The headline: the round whose read / ceiling ratio is the median (both from it).
    pairs = sorted(
        zip(anchor, rounds["EventsClient.events"], strict=True),
        key=lambda pair: pair[0].wall_s / pair[1].wall_s,
    )
    median_anchor, median_read = pairs[len(pairs) // 2]
    return median_read.wall_s, median_anchor.wall_s


def bench_tail_lag(
    stack: Stack, client: EventsClient, tmp: Path, seconds: int, lag_s: float
) -> float:
    """Section 3: seconds from an epoch's end to its delivery by tail; returns the p99."""
    dc = "taillag"
    relocator, tcp = relocator_process(
        tmp, {"a": stack.devnode.url}, name="relocator", data_dir=tmp / "relocator"
    )
    relocator.start()
    start = int(time.time())  # before the first event is sent: every event is in range
    sender = AckedSender(tcp, dc, first_id=0).start()
    lags: list[float] = []
    ids: list[int] = []
    try:
        with client.tail(
            dc, start=start, end=start + seconds, lag_s=lag_s, late_wait_s=10.0, poll_s=0.05
        ) as tail:
            for epoch in tail:
                if epoch.found:
                    lags.append(time.time() - (epoch.epoch + 1))
                    ids += [e["id"] for e in epoch.events]
                if epoch.epoch == start + seconds - 3:
                    sender.stop()  # the last epochs are complete before tail reads them
        skipped = len(tail.skipped)
    finally:
        sender.stop()
        relocator.stop()
    lags.sort()
    acked = set(sender.acked)
    print(f"\n3. tail lag (relocator + companion running, lag_s={lag_s}, {seconds} epochs)")
    print(
        f"p50 {statistics.median(lags):.2f} s, p99 {lags[int(0.99 * (len(lags) - 1))]:.2f} s, "
        f"max {lags[-1]:.2f} s from epoch end to delivery; {len(lags)} epochs delivered, "
        f"{skipped} skipped; {len(acked)} events acknowledged, "
        f"{len(acked - set(ids))} not delivered, {len(ids) - len(set(ids))} delivered twice"
    )
    return lags[int(0.99 * (len(lags) - 1))]


if __name__ == "__main__":
    main()
