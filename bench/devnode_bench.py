"""Devnode throughput: PUT and GET of 400 KB values, and a 100-chunk epoch multi-get.

Starts a devnode (or uses ``--url``), then for 1, 4, 8 and 32 concurrent clients
(threads sharing one RiakClient and its connection pool) runs PUTs, then GETs, of
400 KB values for ``--seconds`` each; then times ``multi_get`` of a 100-chunk epoch.
The anchor is a real Riak KV 3.2 single node (n_val 3, Bitcask) on this kind of 2-core
machine: about 150 PUT/s and 280 GET/s of 400 KiB values with 4 clients.

    .venv/bin/python bench/devnode_bench.py [--seconds 3] [--url http://127.0.0.1:8098]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from report import emit, figure

from devnode.testing import DevnodeProcess
from eventstore.riak import RiakClient

VALUE_BYTES = 400 * 1024
ANCHOR_PUT_PER_S = 150.0
ANCHOR_GET_PER_S = 280.0
CLIENTS = (1, 4, 8, 32)


def run_for(seconds: float, clients: int, op: Callable[[int, int], None]) -> float:
    """Run ``op(client, i)`` from ``clients`` threads for ``seconds``; ops per second."""
    stop = time.monotonic() + seconds
    counts = [0] * clients

    def loop(c: int) -> None:
        i = 0
        while time.monotonic() < stop:
            op(c, i)
            i += 1
        counts[c] = i

    threads = [threading.Thread(target=loop, args=(c,)) for c in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--url")
    parser.add_argument("--json", action="store_true", help="headline figures as JSON, last")
    args = parser.parse_args()
    value = os.urandom(VALUE_BYTES)
    with tempfile.TemporaryDirectory() as tmp:
        node = None if args.url else DevnodeProcess(Path(tmp) / "data").start()
        url = args.url or (node.url if node else "")
        try:
            rows = []
            with RiakClient([url], concurrency=32, max_idle_per_node=64) as riak:
                for clients in CLIENTS:
                    bucket = f"bench-{clients}"

                    def put(c: int, i: int, bucket: str = bucket) -> None:
                        riak.put("events", bucket, f"1413813813:1:bench:{c}:{i % 50}", value)

                    def get(c: int, i: int, bucket: str = bucket) -> None:
                        riak.get("events", bucket, f"1413813813:1:bench:0:{(c * 7 + i) % 50}")

                    puts = run_for(args.seconds, clients, put)
                    for i in range(50):  # every key the GETs read exists
                        put(0, i)
                    gets = run_for(args.seconds, clients, get)
                    rows.append((clients, puts, gets))
                keys = [f"1413813813:1:epoch:bench:{i}" for i in range(100)]
                for key in keys:
                    riak.put("events", "events", key, value)
                samples = []
                for _ in range(10):
                    t0 = time.perf_counter()
                    got = riak.multi_get("events", "events", keys)
                    samples.append(time.perf_counter() - t0)
                    assert all(o is not None for o in got.values())
                multi_s = statistics.median(samples)
        finally:
            if node is not None:
                node.stop()
    mb = VALUE_BYTES / 1e6
    print(f"devnode, values of {VALUE_BYTES} bytes, {args.seconds:g} s per cell")
    print(
        f"{'clients':>7} {'PUT/s':>8} {'PUT MB/s':>9} {'vs 150':>7} "
        f"{'GET/s':>8} {'GET MB/s':>9} {'vs 280':>7}"
    )
    for clients, puts, gets in rows:
        print(
            f"{clients:>7} {puts:8.0f} {puts * mb:9.1f} {puts / ANCHOR_PUT_PER_S:6.1f}x "
            f"{gets:8.0f} {gets * mb:9.1f} {gets / ANCHOR_GET_PER_S:6.1f}x"
        )
    print(
        f"multi_get of a 100-chunk epoch (16 in flight): {multi_s * 1000:.0f} ms median, "
        f"{100 * mb / multi_s:.0f} MB/s"
    )
    if args.json:
        _clients, puts, gets = next(r for r in rows if r[0] == 4)
        real_riak = "Riak KV 3.2, 1 node (bench/README.md)"
        emit(
            [
                figure(
                    "devnode PUT 400 KB, 4 clients",
                    puts,
                    "PUT/s",
                    anchor=real_riak,
                    anchor_value=ANCHOR_PUT_PER_S,
                ),
                figure(
                    "devnode GET 400 KB, 4 clients",
                    gets,
                    "GET/s",
                    anchor=real_riak,
                    anchor_value=ANCHOR_GET_PER_S,
                ),
                figure("devnode multi_get, 100 chunks", multi_s * 1000, "ms median"),
            ]
        )


if __name__ == "__main__":
    main()
