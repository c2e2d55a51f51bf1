"""Client-side fallback throughput: the old in-process plugin run, the sandboxed run
forked from the caller (one child per chunk), and the sandboxed run forked from the
fork server (the library's default), in the same run.

A devnode receives ``--epochs`` epochs of ``--events`` realistic events each (one dc,
grouped by type/subtype, chunked at 500 KB as relocators do). For each shipped example
plugin, two measurements, each the best of ``--repeat``:

1. **End to end**: the substream read by fallback only (``fallback="always"``:
   metadata, full chunks fetched, verified, decoded, the plugin run, results in order),
   through ``consumer_lib.substream.results`` with ``--concurrency`` threads: with an
   in-process run of the plugin (the library before issue 13: no deadline, no memory
   limit), with the child forked from the caller after its decode (``run_fallback``),
   and through the fork server (verified bytes sent; its child decodes and runs).
2. **The run alone**: the same chunks from memory, one thread: in-process (call + the
   stored form's encode + decode) against ``run_fallback`` (fork of the caller, limits,
   run, encode in the child, pipe, reap, decode) and ``run_served`` (the stored bytes
   to the fork server, its child decodes and runs): the fixed cost per chunk.

3. **A query against its Python twin** (issue 23; ``--sections queries``): each example
   that is also a query (``web_5xx`` and ``web_5xx_q``...), read by fallback only: the
   query evaluated natively in the caller (``run_native``: one walk of the stored bytes,
   no child) against the function through the fork server, end to end and the run
   alone, wall and CPU per chunk of every process but the devnode (target: the query
   >= 5x). The two give the same logic in their own shapes (``*_q.py``); both are
   checked ok on every chunk, and web_5xx's rows equal.

``--ballast-mb N`` makes the caller N MB larger first (touched memory, as a consumer or
a Spark executor holding data): forking the caller grows with it, the fork server not.
``--server-connections`` bounds the fork server's requests in flight (1: one at a time).
Each prints chunks/s, events/s and the ratio to in-process; the results of every way
are checked equal.

    .venv/bin/python bench/fallback_bench.py [--epochs 20] [--events 8000] [--repeat 3]
        [--concurrency 4] [--ballast-mb 0] [--server-connections 4]
        [--sections functions,queries] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import platform
import resource
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from events import generate_events, store_epoch
from report import best, emit, figure

import sereal_codec as sereal
from consumer_lib.fallback import FallbackRun, run_fallback, run_native, run_served
from consumer_lib.forkserver import fallback_server
from consumer_lib.ranges import EpochRange
from consumer_lib.store import Store
from consumer_lib.substream import SubstreamReader, results
from consumer_lib.types import ChunkFilter
from devnode.testing import DevnodeProcess
from eventstore.names import DEFAULT_NAMESPACES, ChunkKey
from eventstore.riak import RiakClient
from substreams.api import Context, Event, Substream
from substreams.forkserver import ForkServer
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


def cpu_s(server: ForkServer | None = None) -> float:
    """CPU seconds so far of this process, its reaped children (the sandboxed children
    forked from it) and the fork server with its reaped children (the devnode, a child
    not yet reaped, is not counted)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    pid = None if server is None else server.pid
    if pid is not None:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def cpu_per_chunk(repeat: int, server: ForkServer, read: Callable[[], Any], chunks: int) -> float:
    """CPU milliseconds per chunk of ``read`` (mean of ``repeat`` runs), all processes."""
    before = cpu_s(server)
    for _ in range(repeat):
        read()
    return (cpu_s(server) - before) * 1000 / repeat / chunks


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


def rss_mb(pid: int | None = None) -> float:
    """A process's resident set (default: this one), MB (what a fork's page tables cover)."""
    with open(f"/proc/{pid or 'self'}/status") as status:
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
    parser.add_argument("--json", action="store_true", help="headline figures as JSON, last")
    parser.add_argument("--ballast-mb", type=int, default=0, help="grow the caller first, MB")
    parser.add_argument("--server-connections", type=int, default=4)
    parser.add_argument(
        "--sections",
        type=lambda text: set(text.split(",")),
        default={"functions", "queries"},
        help="functions (the three ways of each Python example), queries (each query "
        "natively against its Python twin through the fork server)",
    )
    args = parser.parse_args()
    if not args.sections or args.sections - {"functions", "queries"}:
        parser.error("--sections: a comma-separated list of functions, queries")
    ballast = [bytearray(b"x" * 2**20) for _ in range(args.ballast_mb)]

    every = sorted((s for p in plugin_files(EXAMPLES) for s in load_file(p)), key=lambda s: s.name)
    subs = [s for s in every if s.plan is None]  # the Python plugins
    twins = [(s, q) for s in subs for q in every if q.name == f"{s.name}_q"]
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
            server = fallback_server(max_connections=args.server_connections)
            runs = [
                bench_one(store, pool, server, sub, first=first, args=args)
                for sub in (subs if "functions" in args.sections else [])
            ]
            queries = [
                bench_query(store, pool, server, twin, first=first, args=args)
                for twin in (twins if "queries" in args.sections else [])
            ]
            print(f"  (fork server: {args.server_connections} connection(s), RSS "
                  f"{rss_mb(server.pid):.0f} MB; ballast {len(ballast)} MB)")  # fmt: skip
            server.close()
            pool.shutdown()
            store.close()
            print(f"load average after: {os.getloadavg()[0]:.1f}")
            if args.json:
                headline(runs, queries)
        finally:
            devnode.stop()


def bench_one(
    store: Store,
    pool: ThreadPoolExecutor,
    server: ForkServer,
    sub: Substream,
    *,
    first: int,
    args: argparse.Namespace,
) -> dict[str, float]:
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
    served = SubstreamReader(store, sub.name, sub, fallback="always", server=server)
    old_s, old_got = best(args.repeat, lambda: read(old))
    new_s, new_got = best(args.repeat, lambda: read(new))
    srv_s, srv_got = best(args.repeat, lambda: read(served))
    assert [r.result for r in old_got] == [r.result for r in new_got], sub.name
    assert [r.result for r in old_got] == [r.result for r in srv_got], sub.name
    assert {r.served for r in new_got + srv_got} == {"fallback"}, {
        r.error for r in new_got + srv_got
    }
    keys = [r.key for r in new_got]
    del old_got, new_got, srv_got
    rss_reading = rss_mb()
    chunks = [(k, store.chunk(k).events) for k in keys]
    blobs = {k: store.chunk_blob(k).value for k in keys}
    n_events = sum(len(e) for _, e in chunks)
    print(f"\n{sub.name}: {len(keys)} chunks, {n_events} events")
    print("  end to end (fetch, verify, decode, run)")
    print(HEADER)
    print(row("in-process (before)", len(keys), n_events, old_s, None))
    print(row("fork per chunk", len(keys), n_events, new_s, old_s))
    print(row("fork server", len(keys), n_events, srv_s, old_s))
    cpu = [
        cpu_per_chunk(args.repeat, server, functools.partial(read, r), len(keys))
        for r in (old, new, served)
    ]
    print(
        f"  (caller's RSS {rss_reading:.0f} MB; CPU ms per chunk, every process but the "
        f"devnode: in-process {cpu[0]:.1f}, fork per chunk {cpu[1]:.1f}, fork server "
        f"{cpu[2]:.1f}: x {cpu[0] / cpu[2]:.2f})"
    )

    def alone(runner: Callable[[Substream, list[Event], ChunkKey], FallbackRun]) -> list[Any]:
        return [runner(sub, events, key).result for key, events in chunks]

    def sandboxed(plugin: Substream, events: list[Event], key: ChunkKey) -> FallbackRun:
        (run,) = run_fallback([plugin], events, key)
        return run

    def via_server(plugin: Substream, events: list[Event], key: ChunkKey) -> FallbackRun:
        (run,) = run_served(server, [plugin], blobs[key], key, store.decode_limits)
        return run

    inp_s, inp = best(args.repeat, lambda: alone(in_process))
    box_s, box = best(args.repeat, lambda: alone(sandboxed))
    fs_s, fs = best(args.repeat, lambda: alone(via_server))
    assert inp == box == fs, sub.name
    print("  the run alone, chunks in memory (decoded, or stored bytes for the server), 1 thread")
    print(HEADER)
    print(row("in-process (before)", len(keys), n_events, inp_s, None))
    print(row("fork per chunk", len(keys), n_events, box_s, inp_s))
    print(row("fork server", len(keys), n_events, fs_s, inp_s))
    print(
        f"  cost per chunk over in-process: fork per chunk "
        f"{(box_s - inp_s) * 1000 / len(keys):.2f} ms, fork server "
        f"{(fs_s - inp_s) * 1000 / len(keys):.2f} ms (caller's RSS {rss_mb():.0f} MB, "
        f"all {len(keys)} chunks in memory)"
    )
    return {
        "chunks": len(keys),
        "cpu_old_ms": cpu[0],
        "cpu_new_ms": cpu[1],
        "cpu_srv_ms": cpu[2],
        "old_s": old_s,
        "new_s": new_s,
        "srv_s": srv_s,
        "inp_s": inp_s,
        "box_s": box_s,
        "fs_s": fs_s,
    }


def bench_query(
    store: Store,
    pool: ThreadPoolExecutor,
    server: ForkServer,
    twin: tuple[Substream, Substream],
    *,
    first: int,
    args: argparse.Namespace,
) -> dict[str, float]:
    """One example's logic read by fallback only: as a query, natively in this process,
    and as a Python plugin through the fork server; end to end, then the run alone."""
    function, query = twin
    epoch_range = EpochRange(first, first + args.epochs)

    def read(reader: SubstreamReader) -> list[Any]:
        got = list(
            results(store, pool, reader, dc=DC, epoch_range=epoch_range, keep=ChunkFilter(),
                    prefetch_chunks=16, metadata_depth=8)
        )  # fmt: skip
        assert {r.served for r in got} == {"fallback"}, {r.error for r in got}
        return got

    native = SubstreamReader(store, query.name, query, fallback="always")
    served = SubstreamReader(store, function.name, function, fallback="always", server=server)
    nat_s, nat_got = best(args.repeat, lambda: read(native))
    srv_s, srv_got = best(args.repeat, lambda: read(served))
    keys = [r.key for r in nat_got]
    assert keys == [r.key for r in srv_got]
    if function.name == "web_5xx":  # the one twin whose result has the same shape
        assert [r.result for r in nat_got] == [r.result for r in srv_got]
    del nat_got, srv_got
    cpu = [
        cpu_per_chunk(args.repeat, server, functools.partial(read, r), len(keys))
        for r in (native, served)
    ]
    blobs = {k: store.chunk_blob(k).value for k in keys}
    limits = store.decode_limits

    def alone_native() -> None:
        for k in keys:
            (run,) = run_native([query], blobs[k], k, limits)
            assert run.ok, run.error

    def alone_served() -> None:
        for k in keys:
            (run,) = run_served(server, [function], blobs[k], k, limits)
            assert run.ok, run.error

    alone_s = [best(args.repeat, fn)[0] for fn in (alone_native, alone_served)]
    alone_cpu = [cpu_per_chunk(args.repeat, server, fn, len(keys))
                 for fn in (alone_native, alone_served)]  # fmt: skip
    print(
        f"\n{query.name} natively vs {function.name} through the fork server, fallback "
        f"only, {len(keys)} chunks:\n"
        f"  end to end: {nat_s * 1000 / len(keys):.2f} vs {srv_s * 1000 / len(keys):.2f} "
        f"ms per chunk (x {srv_s / nat_s:.2f}); CPU ms per chunk, every process but the "
        f"devnode: {cpu[0]:.2f} vs {cpu[1]:.2f} (x {cpu[1] / cpu[0]:.2f})\n"
        f"  the run alone (stored bytes from memory, 1 thread): {alone_s[0] * 1000 / len(keys):.2f}"
        f" vs {alone_s[1] * 1000 / len(keys):.2f} ms per chunk (x {alone_s[1] / alone_s[0]:.2f});"
        f" CPU {alone_cpu[0]:.2f} vs {alone_cpu[1]:.2f} ms (x {alone_cpu[1] / alone_cpu[0]:.2f}); "
        f"target x >= 5"
    )
    return {
        "chunks": len(keys),
        "nat_s": nat_s,
        "srv_s": srv_s,
        "nat_cpu_ms": cpu[0],
        "srv_cpu_ms": cpu[1],
        "alone_nat_s": alone_s[0],
        "alone_srv_s": alone_s[1],
        "alone_nat_cpu_ms": alone_cpu[0],
        "alone_srv_cpu_ms": alone_cpu[1],
    }


def headline(runs: list[dict[str, float]], queries: list[dict[str, float]]) -> None:
    """The figures bench/report.py shows: every example plugin's chunks together."""
    figures = []
    if runs:
        chunks = sum(r["chunks"] for r in runs)
        names = ("old_s", "new_s", "srv_s", "inp_s", "box_s", "fs_s")
        total = {k: sum(r[k] for r in runs) for k in names}
        # each sandbox: (how it is named, its end-to-end and its run-alone total)
        sandboxes = (("fork server", "srv_s", "fs_s"), ("fork per chunk", "new_s", "box_s"))
        for way, end_to_end, _ in sandboxes:
            figures.append(
                figure(
                    f"fallback, sandboxed ({way}), end to end, {len(runs)} plugins",
                    chunks / total[end_to_end],
                    "chunks/s",
                    anchor="in-process, same run",
                    anchor_value=chunks / total["old_s"],
                )
            )
        figures += [
            figure(
                f"fallback, sandbox cost per chunk (run alone, {way})",
                (total[alone] - total["inp_s"]) / chunks * 1000,
                "ms",
            )
            for way, _, alone in sandboxes
        ]
    if queries:
        chunks = sum(q["chunks"] for q in queries)
        nat = sum(q["nat_s"] for q in queries)
        srv = sum(q["srv_s"] for q in queries)
        figures.append(
            figure(
                f"fallback, {len(queries)} queries natively, end to end",
                chunks / nat,
                "chunks/s",
                anchor="their Python twins through the fork server, same run",
                anchor_value=chunks / srv,
                target=">= 5x",
            )
        )
        figures.append(
            figure(
                f"fallback, {len(queries)} queries natively, CPU per chunk, run alone",
                sum(q["alone_nat_cpu_ms"] * q["chunks"] for q in queries) / chunks,
                "ms",
                anchor="their Python twins through the fork server, same run",
                anchor_value=sum(q["alone_srv_cpu_ms"] * q["chunks"] for q in queries) / chunks,
                target="<= 1/5 of the anchor",
            )
        )
    emit(figures)


if __name__ == "__main__":
    main()
