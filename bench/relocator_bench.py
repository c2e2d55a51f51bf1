"""Relocator benchmarks: end-to-end intake -> devnode, spool intake, epoch lag, journal.

Every run starts its own devnode and relocator processes (real processes, fsync on) in a
temporary directory, on this machine's loopback. Modes (default: all):

- ``e2e``: ``--events`` events of the realistic mix (``relocator.loadgen``) sent over
  ``--connections`` TCP connections, each with a producer id as ``TcpEmitter`` sends
  (``--no-producer-ids``: without), as fast as acknowledgements allow (frames pipelined,
  epochs stamped at send time; frame tails built before the clock, as a producer fleet
  on other hosts would spend that CPU, not this one); the clock stops when every
  acknowledged event is in the devnode, chunks and metadata (the relocator's
  ``events_pushed``). Reports events/s and raw MB/s (raw = the events' compact JSON
  size), acked-only intake rates, and the CPU seconds of the relocator, the devnode and
  this driver over the run with the load average: the machine is shared, so the CPU
  per event is the steadier figure.
- ``spool``: ``--spool-files`` blobs, written by Perl's Sereal::Encoder when available
  (zlib, dedupe) else by ours, one per epoch-dc-type, sizes cycling over 1/8, 4/8, 6/8,
  1 and 3 times ``--spool-events`` events (about 50 KB to 1.2 MB: some fit one chunk
  and are stored verbatim, the others are split); ``--spool-fit``: only ~400 KB blobs.
  The clock stops when every file is pushed and deleted. Reports spool MB/s (file
  bytes) and raw MB/s.
- ``lag``: ``--rate`` events/s for ``--seconds`` over TCP; a poller reads each epoch's
  metadata key every 20 ms and records when it first appears; lag = that time minus the
  end of the epoch (epoch + 1). Reports p50/p99 (the relocator's grace is ``--grace-s``).
- ``journal``: group commits of ``--frames`` 700-byte frames into the segment journal
  (fdatasync) against LMDB (sync commit), both in this process.

    .venv/bin/python bench/relocator_bench.py [--mode e2e|spool|lag|journal|all]

The machine has 2 cores shared by the driver, the relocator and the devnode; the driver's
own encoding is done before the clock starts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from report import emit, figure

import sereal_codec as sereal
from devnode.testing import DevnodeProcess
from eventstore.riak import NotFound, RiakClient
from relocator.loadgen import generate, raw_size
from relocator.testing import RelocatorProcess, drained, relocator_process
from relocator.wire import ACK, HELLO_REPLY, LENGTH, encode_hello, frame_head, frame_tail


def _status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as r:
        value: dict[str, Any] = json.load(r)
    return value


def _group_cpu_s(pgid: int | None) -> float:
    """CPU seconds (user + system) of every live process in process group ``pgid``."""
    if pgid is None:
        return 0.0
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after "(comm)": state ppid pgrp ... utime stime
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _cpu_figures(seconds: float, relocator: float, devnode: float, driver: float) -> dict[str, Any]:
    """CPU seconds per process over a run, as shares of the machine's cores."""
    cores = os.cpu_count() or 1
    return {
        "cpu_s": {
            "relocator": round(relocator, 2),
            "devnode": round(devnode, 2),
            "driver": round(driver, 2),
        },
        "cpu_share_of_machine": round((relocator + devnode + driver) / (seconds * cores), 2),
        "loadavg_1m": os.getloadavg()[0],
    }


def _drained(port: int) -> bool:
    return drained(_status(port))


def _setup(
    tmp: Path, grace_s: float, spool: Path | None = None
) -> tuple[DevnodeProcess, RelocatorProcess, int, int]:
    node = DevnodeProcess(tmp / "devnode" / "data").start()
    proc, tcp = relocator_process(
        tmp,
        {"dev": node.url},
        name="relocator",
        data_dir=tmp / "rdata",
        spool_dir=spool,
        grace_s=grace_s,
        tick_s=0.1,
        segment_max_s=1.0,
    )
    proc.start()
    return node, proc, tcp, proc.metrics_port


def _frames(docs: list[tuple[str, str, str, bytes]]) -> tuple[list[bytes], list[bytes]]:
    """Each event's length prefix and frame tail (all of the frame after its head)."""
    tails = [frame_tail(dc, t, s, doc) for t, s, dc, doc in docs]
    size = len(frame_head(0))
    return [LENGTH.pack(size + len(tail)) for tail in tails], tails


def _sender(
    port: int, prefixes: list[bytes], tails: list[bytes], acked: list[int], ids: bool = True
) -> None:
    """One producer connection: frames pipelined up to a window of unacknowledged ones.

    The frames' tails (dc, type, subtype, document) are built before the clock starts;
    each send stamps the current epoch into the fixed-size heads, so the relocator
    receives exactly what ``TcpEmitter`` sends, without the driver spending a core per
    event on the same machine (a producer fleet runs on other hosts). With ``ids`` (as
    ``TcpEmitter`` by default) the connection opens with a hello naming a producer id, so
    the relocator tracks and deduplicates its frames; without, the old at-least-once
    stream.
    """
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ids:
        sock.sendall(encode_hello(os.urandom(16), 0))
        reply = b""
        while len(reply) < len(HELLO_REPLY):
            chunk = sock.recv(len(HELLO_REPLY) - len(reply))
            if not chunk:
                raise RuntimeError("relocator closed the connection after the hello")
            reply += chunk
        if reply != HELLO_REPLY:
            raise RuntimeError(f"relocator does not take producer ids (answered {reply!r})")
    window = 8000
    sent = 0
    got = 0
    buf = b""
    while got < len(tails):
        if sent - got < window and sent < len(tails):
            head = frame_head(int(time.time()))
            stop = min(sent + 500, len(tails))
            frames = zip(prefixes[sent:stop], itertools.repeat(head), tails[sent:stop])
            sock.sendall(b"".join(itertools.chain.from_iterable(frames)))
            sent = stop
            continue
        data = sock.recv(65536)
        if not data:
            raise RuntimeError("relocator closed the connection")
        buf += data
        while len(buf) >= ACK.size:
            (got,) = ACK.unpack_from(buf)
            buf = buf[ACK.size :]
    acked.append(got)
    sock.close()


def bench_e2e(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    node, proc, tcp, mport = _setup(tmp, args.grace_s)
    try:
        events = list(generate(args.events, seed=7, dcs=("ams1", "ams4")))
        raw = sum(raw_size(e) for _, _, _, e in events)
        docs = [(t, s, d, sereal.encode(e)) for t, s, d, e in events]
        parts = [_frames(docs[k :: args.connections]) for k in range(args.connections)]
        acked: list[int] = []
        cpu0 = (_group_cpu_s(proc.pid), _group_cpu_s(node.pid), time.process_time())
        start = time.perf_counter()
        threads = [
            threading.Thread(target=_sender, args=(tcp, *p, acked, not args.no_producer_ids))
            for p in parts
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        intake_s = time.perf_counter() - start
        # Every acknowledged event is in the devnode, chunks and metadata (the batches'
        # own bookkeeping afterwards, journal segments freed, is not waited for).
        while _status(mport)["events_pushed"]["dev"] < len(docs):
            time.sleep(0.02)
        total_s = time.perf_counter() - start
        cpu1 = (_group_cpu_s(proc.pid), _group_cpu_s(node.pid), time.process_time())
        assert sum(acked) == len(docs)
        return {
            "events": len(docs),
            "raw_mb": round(raw / 1e6, 1),
            "intake_acked_events_per_s": round(len(docs) / intake_s),
            "intake_acked_raw_mb_per_s": round(raw / intake_s / 1e6, 1),
            "e2e_events_per_s": round(len(docs) / total_s),
            "e2e_raw_mb_per_s": round(raw / total_s / 1e6, 1),
            "e2e_seconds": round(total_s, 2),
            **_cpu_figures(total_s, *(b - a for a, b in zip(cpu0, cpu1, strict=True))),
        }
    finally:
        proc.stop()
        node.stop()


_PERL = r"""
use Sereal::Encoder qw(SRL_ZLIB); use Sereal::Decoder;
local $/; my $in = <STDIN>;
my $events = Sereal::Decoder->new->decode($in);
binmode STDOUT;
print Sereal::Encoder->new({compress => SRL_ZLIB, dedupe_strings => 1})->encode($events);
"""


def bench_spool(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    spool = tmp / "spool"
    spool.mkdir()
    node, proc, _, mport = _setup(tmp, args.grace_s, spool=spool)
    try:
        # Blob sizes as the seed describes them ("several KB to several MB"): a mix of
        # per-epoch-dc-type blobs below and above the chunk limit.
        sizes = [args.spool_events * k // 8 for k in ((7,) if args.spool_fit else (1, 4, 6, 8, 24))]
        perl = shutil.which("perl") is not None
        blobs: list[tuple[bytes, int, int]] = []  # (blob, events, raw bytes)
        for n in sizes:
            events = [e for _, _, _, e in generate(n, seed=n)]
            plain = sereal.encode(events)
            if perl:
                blob = subprocess.run(
                    ["perl", "-e", _PERL], input=plain, capture_output=True, check=True
                ).stdout
            else:
                blob = sereal.encode(events, compress="zlib", dedupe_strings=True)
            blobs.append((blob, n, sum(raw_size(e) for e in events)))
        staging = tmp / "staging"
        staging.mkdir()
        epoch = int(time.time())
        kinds = ("web-www", "web-api", "lb-haproxy", "cron-batch")
        file_bytes = raw = count = 0
        for i in range(args.spool_files):  # as aggregators write them: one per epoch-dc-type
            blob, n, r = blobs[i % len(blobs)]
            name = f"{epoch + i // len(kinds)}-ams1-{kinds[i % len(kinds)]}-b{i}.srl"
            (staging / name).write_bytes(blob)
            file_bytes += len(blob)
            raw += r
            count += n
        start = time.perf_counter()
        for p in sorted(staging.iterdir()):
            os.replace(p, spool / p.name)
        while any(p.suffix == ".srl" for p in spool.iterdir()) or not _drained(mport):
            time.sleep(0.05)
        took = time.perf_counter() - start
        return {
            "writer": "perl Sereal::Encoder (zlib, dedupe)" if perl else "sereal_codec",
            "files": args.spool_files,
            "blob_kb": [len(b) // 1000 for b, _, _ in blobs],
            "file_mb": round(file_bytes / 1e6, 1),
            "raw_mb": round(raw / 1e6, 1),
            "spool_mb_per_s": round(file_bytes / took / 1e6, 1),
            "raw_mb_per_s": round(raw / took / 1e6, 1),
            "events_per_s": round(count / took),
            "seconds": round(took, 2),
        }
    finally:
        proc.stop()
        node.stop()


def bench_lag(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    node, proc, tcp, _ = _setup(tmp, args.grace_s)
    seen: dict[int, float] = {}
    stop = threading.Event()

    def poll() -> None:
        client = RiakClient([node.url])
        while not stop.is_set():
            now = time.time()
            for epoch in range(int(now) - 10, int(now) + 1):
                if epoch in seen:
                    continue
                try:
                    client.get("epochs", "epochs", f"{epoch}-ams1")
                except NotFound:
                    continue
                seen[epoch] = time.time()
            time.sleep(0.02)
        client.close()

    try:
        from relocator.producer import TcpEmitter

        emitter = TcpEmitter("127.0.0.1", tcp, dc="ams1")
        events = list(generate(args.rate * 2, seed=5))
        poller = threading.Thread(target=poll)
        poller.start()
        start = time.monotonic()
        first_epoch = int(time.time()) + 1
        i = 0
        while time.monotonic() - start < args.seconds:
            t, s, _, e = events[i % len(events)]
            emitter.emit(e, t, s)
            i += 1
            ahead = i / args.rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
        last_epoch = int(time.time()) - 1
        emitter.flush(30)
        time.sleep(args.grace_s + 5)
        stop.set()
        poller.join()
        emitter.close()
        lags = sorted(seen[e] - (e + 1) for e in range(first_epoch, last_epoch + 1) if e in seen)
        missing = [e for e in range(first_epoch, last_epoch + 1) if e not in seen]
        return {
            "rate_events_per_s": args.rate,
            "achieved_events_per_s": round(i / args.seconds),
            "grace_s": args.grace_s,
            "epochs": len(lags),
            "missing_epochs": len(missing),
            "lag_p50_s": round(statistics.median(lags), 3),
            "lag_p99_s": round(lags[min(len(lags) - 1, int(len(lags) * 0.99))], 3),
            "lag_max_s": round(lags[-1], 3),
        }
    finally:
        proc.stop()
        node.stop()


def bench_journal(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import lmdb

    from relocator.journal import Journal

    frame = os.urandom(700)
    groups = [[frame] * args.group for _ in range(args.frames // args.group)]
    j = Journal(tmp / "journal", segment_max_bytes=64 * 1024**2)
    list(j.replay())
    start = time.perf_counter()
    for g in groups:
        j.append(g)
    jt = time.perf_counter() - start
    j.close()
    env = lmdb.open(str(tmp / "lmdb"), map_size=8 * 1024**3, sync=True, metasync=True)
    n = 0
    start = time.perf_counter()
    for g in groups:
        with env.begin(write=True) as txn:
            for f in g:
                txn.put(n.to_bytes(8, "big"), f, append=True)
                n += 1
    lt = time.perf_counter() - start
    env.close()
    total = len(groups) * args.group * len(frame)
    return {
        "frames": len(groups) * args.group,
        "group_commit": args.group,
        "segment_log_mb_per_s": round(total / jt / 1e6, 1),
        "segment_log_commits_per_s": round(len(groups) / jt),
        "lmdb_mb_per_s": round(total / lt / 1e6, 1),
        "lmdb_commits_per_s": round(len(groups) / lt),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mode", default="all", choices=["all", "e2e", "spool", "lag", "journal"])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--connections", type=int, default=4)
    p.add_argument(
        "--no-producer-ids",
        action="store_true",
        help="e2e: send without a hello (the at-least-once stream of producers without ids)",
    )
    p.add_argument("--spool-files", type=int, default=20)
    p.add_argument("--spool-events", type=int, default=8_000)
    p.add_argument(
        "--spool-fit",
        action="store_true",
        help="only blobs that fit one chunk (~7000 events, stored verbatim)",
    )
    p.add_argument("--rate", type=int, default=5000)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--grace-s", type=float, default=1.0)
    p.add_argument("--frames", type=int, default=100_000)
    p.add_argument("--group", type=int, default=256)
    p.add_argument("--json", action="store_true", help="headline figures as JSON, last")
    args = p.parse_args()
    print(
        f"# {platform.node()} {platform.processor() or platform.machine()} "
        f"cpus={os.cpu_count()} python={sys.version.split()[0]} "
        f"sereal={sereal.IMPLEMENTATION}"
    )
    modes = ["journal", "e2e", "spool", "lag"] if args.mode == "all" else [args.mode]
    results: dict[str, dict[str, Any]] = {}
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix=f"relocator-bench-{mode}-") as d:
            results[mode] = result = globals()[f"bench_{mode}"](args, Path(d))
        print(json.dumps({"mode": mode, **result}))
    if args.json:
        headline(results)


def headline(results: dict[str, dict[str, Any]]) -> None:
    """The figures bench/report.py shows, from the modes that ran."""
    figures = []
    if e2e := results.get("e2e"):
        figures.append(
            figure(
                f"relocator TCP -> devnode, {e2e['events']} events",
                e2e["e2e_raw_mb_per_s"],
                "MB/s raw",
                anchor="Booking, whole fleet",
                anchor_value=100.0,
                target=">= 150 MB/s",
            )
        )
    if spool := results.get("spool"):
        figures.append(figure("relocator spool -> devnode", spool["raw_mb_per_s"], "MB/s raw"))
    if lag := results.get("lag"):
        figures.append(
            figure(
                f"relocator epoch end -> metadata (grace {lag['grace_s']} s)",
                lag["lag_p99_s"],
                "s p99",
            )
        )
    if journal := results.get("journal"):
        figures.append(
            figure(
                "relocator journal, group commits",
                journal["segment_log_mb_per_s"],
                "MB/s",
                anchor="LMDB sync commits, same run",
                anchor_value=journal["lmdb_mb_per_s"],
            )
        )
    emit(figures, e2e["cpu_s"] if e2e else None)


if __name__ == "__main__":
    main()
