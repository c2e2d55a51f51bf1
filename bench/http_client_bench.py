"""Choose the Riak client's HTTP library by measurement.

Starts a devnode, stores 100 values of 400 KB, then for each candidate library measures
sequential GET and PUT of 400 KB values over one keep-alive connection, and a 100-key
multi-get with 16 requests in flight; and the client CPU (this thread's) of a GET of
400 KB and of a PUT of a 1.2 KB value (a companion's result: 6-7 a chunk). Candidates:
the client's own wire (``eventstore/riak/wire.py`` through its pool), http.client
pooled by hand, urllib3, httpx (sync), aiohttp (asyncio). Candidates whose package is
not installed are skipped. ``--wire FILE`` adds another version of ``wire.py`` (a copy
kept to compare with, e.g. before a change) driven by the same pool, in the same run.

    .venv/bin/python bench/http_client_bench.py [--rounds 200] [--url http://host:8098]
        [--wire /tmp/wire_before.py ...]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import importlib.util
import os
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

VALUE = os.urandom(400 * 1000)
RESULT = os.urandom(1200)
KEYS = [f"1413813813:1:bench:http:{i}" for i in range(100)]
PATH = "/types/events/buckets/events/keys/"
PUT_HEADERS = {"Content-Type": "application/octet-stream"}


class HandPool:
    """http.client connections kept in a list per thread-safe pop/append."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.idle: list[http.client.HTTPConnection] = []

    def request(self, method: str, path: str, body: bytes | None = None) -> bytes:
        try:
            conn = self.idle.pop()
        except IndexError:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
            conn.connect()
            # Headers and body go out in two send()s: without TCP_NODELAY, Nagle holds
            # the body back until the peer's delayed ACK of the headers.
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.request(method, path, body=body, headers=PUT_HEADERS if body is not None else {})
        response = conn.getresponse()
        data = response.read()
        self.idle.append(conn)
        return data


def wire_pool(url: str, wire_file: Path | None) -> Any:
    """The client's pool over ``eventstore/riak/wire.py``, or over the ``Connection`` of
    another version of that module (``wire_file``)."""
    from eventstore.riak.transport import NodePool

    if wire_file is None:
        return NodePool(url, max_idle=32, connect_timeout_s=5.0)
    spec = importlib.util.spec_from_file_location(f"bench_wire_{wire_file.stem}", wire_file)
    assert spec is not None and spec.loader is not None, wire_file
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class OtherWirePool(NodePool):
        def _connect(self) -> Any:
            return module.Connection.open(
                self.host, self.port, connect_timeout_s=self._connect_timeout_s
            )

    return OtherWirePool(url, max_idle=32, connect_timeout_s=5.0)


def candidates(
    host: str, port: int, wire_files: list[Path]
) -> dict[str, Callable[[str, str, bytes | None], bytes]]:
    found: dict[str, Callable[[str, str, bytes | None], bytes]] = {}
    for wire_file in [None, *wire_files]:
        pool_of_wire = wire_pool(f"http://{host}:{port}", wire_file)

        def wire_request(
            method: str, path: str, body: bytes | None = None, wire: Any = pool_of_wire
        ) -> bytes:
            headers = PUT_HEADERS if body is not None else {}
            return wire.request(  # type: ignore[no-any-return]
                method, path, headers=headers, body=body, timeout_s=10.0
            ).body

        name = "wire (the client's)" if wire_file is None else f"wire ({wire_file.name})"
        found[name] = wire_request
    pool = HandPool(host, port)
    found["http.client (hand pool)"] = pool.request
    try:
        import urllib3

        u3 = urllib3.HTTPConnectionPool(host, port, maxsize=32, block=False, retries=False)

        def u3_request(method: str, path: str, body: bytes | None = None) -> bytes:
            return u3.request(  # type: ignore[no-any-return, unused-ignore]
                method,
                path,
                body=body,
                headers=PUT_HEADERS if body is not None else None,
                preload_content=True,
            ).data

        found["urllib3"] = u3_request
    except ImportError:
        pass
    import httpx

    hx = httpx.Client(base_url=f"http://{host}:{port}", limits=httpx.Limits(max_connections=32))

    def hx_request(method: str, path: str, body: bytes | None = None) -> bytes:
        return hx.request(
            method, path, content=body, headers=PUT_HEADERS if body is not None else None
        ).content

    found["httpx (sync)"] = hx_request
    return found


def timed(fn: Callable[[], Any], rounds: int) -> float:
    """Median seconds per call over ``rounds`` calls (after 3 warm-up calls)."""
    for _ in range(3):
        fn()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def cpu_per_call(fn: Callable[[], Any], rounds: int) -> float:
    """This thread's CPU seconds per call over ``rounds`` calls (after 3 warm-up calls)."""
    for _ in range(3):
        fn()
    started = time.thread_time()
    for _ in range(rounds):
        fn()
    return (time.thread_time() - started) / rounds


def bench_sync(
    name: str, request: Callable[[str, str, bytes | None], bytes], rounds: int
) -> dict[str, float]:
    get = timed(lambda: request("GET", PATH + KEYS[0], None), rounds)
    put = timed(lambda: request("PUT", PATH + KEYS[1], VALUE), rounds)
    get_cpu = cpu_per_call(lambda: request("GET", PATH + KEYS[0], None), rounds)
    put_cpu = cpu_per_call(lambda: request("PUT", PATH + "result", RESULT), rounds)
    with ThreadPoolExecutor(16) as pool:
        multi = timed(
            lambda: list(pool.map(lambda k: request("GET", PATH + k, None), KEYS)),
            max(5, rounds // 20),
        )
    return {
        "get_ms": get * 1000,
        "put_ms": put * 1000,
        "multiget100_ms": multi * 1000,
        "get_cpu_us": get_cpu * 1e6,
        "put_small_cpu_us": put_cpu * 1e6,
    }


def bench_aiohttp(url: str, rounds: int) -> dict[str, float] | None:
    try:
        import aiohttp
    except ImportError:
        return None

    async def run() -> dict[str, float]:
        async with aiohttp.ClientSession(url, connector=aiohttp.TCPConnector(limit=32)) as session:

            async def one(method: str, path: str, body: bytes | None) -> bytes:
                async with session.request(
                    method, path, data=body, headers=PUT_HEADERS if body else None
                ) as r:
                    return await r.read()  # type: ignore[no-any-return, unused-ignore]

            async def atimed(factory: Callable[[], Any], n: int) -> float:
                for _ in range(3):
                    await factory()
                samples = []
                for _ in range(n):
                    t0 = time.perf_counter()
                    await factory()
                    samples.append(time.perf_counter() - t0)
                return statistics.median(samples)

            sem = asyncio.Semaphore(16)

            async def bounded(k: str) -> bytes:
                async with sem:
                    return await one("GET", PATH + k, None)

            get = await atimed(lambda: one("GET", PATH + KEYS[0], None), rounds)
            put = await atimed(lambda: one("PUT", PATH + KEYS[1], VALUE), rounds)
            multi = await atimed(
                lambda: asyncio.gather(*(bounded(k) for k in KEYS)), max(5, rounds // 20)
            )
            return {"get_ms": get * 1000, "put_ms": put * 1000, "multiget100_ms": multi * 1000}

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--url", help="an already running devnode or Riak (default: start one)")
    parser.add_argument(
        "--wire",
        type=Path,
        action="append",
        default=[],
        help="another version of eventstore/riak/wire.py to measure too (repeatable)",
    )
    args = parser.parse_args()
    from devnode.testing import DevnodeProcess

    with tempfile.TemporaryDirectory() as tmp:
        node = None
        url = args.url
        if url is None:
            node = DevnodeProcess(Path(tmp) / "data").start()
            url = node.url
        host, port = url.removeprefix("http://").rstrip("/").split(":")
        try:
            loader = HandPool(host, int(port))
            for key in KEYS:
                loader.request("PUT", PATH + key, VALUE)
            results: dict[str, dict[str, float]] = {}
            for name, request in candidates(host, int(port), args.wire).items():
                results[name] = bench_sync(name, request, args.rounds)
            aio = bench_aiohttp(url, args.rounds)
            if aio is not None:
                results["aiohttp (asyncio)"] = aio
        finally:
            if node is not None:
                node.stop()
    mb = len(VALUE) / 1e6
    print(
        f"{'library':26} {'GET 400KB ms':>13} {'MB/s':>7} {'PUT 400KB ms':>13} {'MB/s':>7} "
        f"{'100-key multi-get ms':>21} {'GET 400KB CPU us':>17} {'PUT 1.2KB CPU us':>17}"
    )
    for name, r in results.items():
        cpu = f" {r['get_cpu_us']:17.0f} {r['put_small_cpu_us']:17.0f}" if "get_cpu_us" in r else ""
        print(
            f"{name:26} {r['get_ms']:13.2f} {mb / r['get_ms'] * 1000:7.0f} {r['put_ms']:13.2f} "
            f"{mb / r['put_ms'] * 1000:7.0f} {r['multiget100_ms']:21.1f}" + cpu
        )


if __name__ == "__main__":
    main()
