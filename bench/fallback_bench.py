"""Client-side fallback throughput: the old in-process plugin run against the sandboxed
run (the companion's sandbox, one forked child per chunk), in the same run.

A devnode receives ``--epochs`` epochs of ``--events`` realistic events each (one dc,
grouped by type/subtype, chunked at 500 KB as relocators do). For each shipped example
plugin, two measurements, each the best of ``--repeat``:

1. **End to end**: the substream read by fallback only (``fallback="always"``:
   metadata, full chunks fetched, verified, decoded, the plugin run, results in order),
   through ``consumer_lib.substream.results`` with ``--concurrency`` threads, once with
   an in-process run of the plugin (the library before issue 13: no deadline, no memory
   limit) and once with the library's sandboxed run.
2. **The run alone**: the same decoded chunks from memory, one thread, the plugin run
   in-process (call + the stored form's encode + decode) against ``run_fallback``
   (fork, limits, run, encode in the child, pipe, reap, decode): the fixed cost per
   chunk of the sandbox.

Both print chunks/s and events/s, and the ratio sandboxed / in-process; the results of
both ways are checked equal.

    .venv/bin/python bench/fallback_bench.py [--epochs 20] [--events 8000] [--repeat 3]
                                             [--concurrency 4]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from events import generate_events, store_epoch

from consumer_lib.fallback import FallbackRun, run_fallback
from consumer_lib.ranges import EpochRange
from consumer_lib.store import Store
from consumer_lib.substream import SubstreamReader, results
from consumer_lib.types import ChunkFilter
from eventstore import sereal
from eventstore.devnode.testing import DevnodeProcess
from eventstore.names import DEFAULT_NAMESPACES, ChunkKey
from eventstore.riak import RiakClient
from substreams.api import Context, Event, Substream
from substreams.loader import load_file, plugin_files
from substreams.results import ok_value, read_result

EXAMPLES = Path(__file__).parents[1] / "substreams" / "examples"
DC = "dc1"


def in_process(plugin: Substream, events: list[Event], key: ChunkKey) -> FallbackRun:
    """The fallback as it was: the plugin called here, without limits."""
    raw = plugin(events, Context.of(key))
    result = read_result(ok_value(plugin.name, plugin.version, raw)).result
    return FallbackRun(plugin.name, "ok", result)


class InProcessReader(SubstreamReader):
    """The baseline: the reader with the unbounded in-process run."""

    def run(self, plugin: Substream, events: list[Event], key: ChunkKey) -> FallbackRun:
        return in_process(plugin, events, key)


def best(repeat: int, run: Callable[[], Any]) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - t0)
    return min(times), out


def row(label: str, chunks: int, events: int, secs: float, base: float | None) -> str:
    ratio = "" if base is None else f"{base / secs:8.2f}"
    return (
        f"  {label:22} {chunks / secs:10,.1f} {events / secs:12,.0f} "
        f"{secs * 1000 / chunks:9.2f} {ratio}"
    )


HEADER = f"  {'':22} {'chunks/s':>10} {'events/s':>12} {'ms/chunk':>9} {'x':>8}"


def write_range(url: str, first: int, epochs: int, per_epoch: int) -> None:
    """Store the epochs; the events are freed on return (the fork cost of the sandbox
    grows with the caller's heap: the bench should not carry what a consumer would not)."""
    events = generate_events(per_epoch * 4, seed=3)
    with RiakClient([url]) as riak:
        for i in range(epochs):
            start = (i * per_epoch) % (len(events) - per_epoch)
            store_epoch(riak, first + i, DC, events[start : start + per_epoch])


def rss_mb() -> float:
    """This process's resident set, MB (what each fork's page tables cover)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--events", type=int, default=8000, help="events per epoch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()

    subs = sorted((s for p in plugin_files(EXAMPLES) for s in load_file(p)), key=lambda s: s.name)
    first = 1_700_100_000
    with tempfile.TemporaryDirectory(prefix="fallback-bench-") as tmp:
        devnode = DevnodeProcess(Path(tmp) / "devnode").start()
        try:
            write_range(devnode.url, first, args.epochs, args.events)
            store = Store((devnode.url,), namespaces=DEFAULT_NAMESPACES)
            pool = ThreadPoolExecutor(args.concurrency, thread_name_prefix="bench")
            load = os.getloadavg()[0]
            print(
                f"{args.epochs} epochs x {args.events} events (codec {sereal.IMPLEMENTATION}; "
                f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                f"load {load:.1f}); best of {args.repeat}"
            )
            for sub in subs:
                bench_one(store, pool, sub, first, args)
            pool.shutdown()
            store.close()
            print(f"load average after: {os.getloadavg()[0]:.1f}")
        finally:
            devnode.stop()


def bench_one(
    store: Store, pool: ThreadPoolExecutor, sub: Substream, first: int, args: argparse.Namespace
) -> None:
    epoch_range = EpochRange(first, first + args.epochs)

    def read(reader: SubstreamReader) -> list[Any]:
        return list(
            results(
                store,
                pool,
                reader,
                dc=DC,
                epoch_range=epoch_range,
                keep=ChunkFilter(),
                prefetch_chunks=16,
                metadata_depth=8,
            )
        )

    old = InProcessReader(store, sub.name, sub, fallback="always")
    new = SubstreamReader(store, sub.name, sub, fallback="always")
    old_s, old_got = best(args.repeat, lambda: read(old))
    new_s, new_got = best(args.repeat, lambda: read(new))
    assert [r.result for r in old_got] == [r.result for r in new_got], sub.name
    assert {r.served for r in new_got} == {"fallback"}, {r.error for r in new_got}
    keys = [r.key for r in new_got]
    del old_got, new_got
    rss_reading = rss_mb()
    chunks = [(k, store.chunk(k).events) for k in keys]
    n_events = sum(len(e) for _, e in chunks)
    print(f"\n{sub.name}: {len(keys)} chunks, {n_events} events")
    print("  end to end (fetch, verify, decode, run)")
    print(HEADER)
    print(row("in-process (before)", len(keys), n_events, old_s, None))
    print(row("sandboxed (after)", len(keys), n_events, new_s, old_s))
    print(f"  (caller's RSS {rss_reading:.0f} MB)")

    def alone(runner: Callable[[Substream, list[Event], ChunkKey], FallbackRun]) -> list[Any]:
        return [runner(sub, events, key).result for key, events in chunks]

    def sandboxed(plugin: Substream, events: list[Event], key: ChunkKey) -> FallbackRun:
        (run,) = run_fallback([plugin], events, key)
        return run

    inp_s, inp = best(args.repeat, lambda: alone(in_process))
    box_s, box = best(args.repeat, lambda: alone(sandboxed))
    assert inp == box, sub.name
    print("  the run alone, decoded chunks in memory, 1 thread")
    print(HEADER)
    print(row("in-process (before)", len(keys), n_events, inp_s, None))
    print(row("sandboxed (after)", len(keys), n_events, box_s, inp_s))
    print(
        f"  sandbox cost per chunk: {(box_s - inp_s) * 1000 / len(keys):.2f} ms "
        f"(caller's RSS {rss_mb():.0f} MB, all {len(keys)} chunks decoded in memory)"
    )


if __name__ == "__main__":
    main()
