"""The example substreams and their query twins on a running system (issue 23, "Done
when"): the helpers the dev stack's and the container cluster's tests share.

The twins (``substreams/examples/*_q.py``) are not installed as entry points, so a test
drops their files into a companion's plugins directory as a plugin author would (a
directory, or a container's through the engine's archive API), waits until every
worker of every companion has loaded them, sends the shared generator's events through
a relocator, and reads each twin's results over the same range with ``fallback="off"``:
every result must be the companion's (``served == "server"``) and each query's, of
the very file the test dropped (its version), adapted to its function's shape, must
equal the function's result of the same chunk. The adapters are the differential
contract test's (``tests/contract/test_queries_match_functions.py``), whose docstring
and ``substreams/DESIGN.md`` name where the twins differ by design; the generator's
events hold none of those cases. ``url_latency_q``'s per-chunk partials are also merged
over the range with ``consumer_lib.merge_partials`` (the reader's Reduce) and checked
against the function's histograms added up.
"""

from __future__ import annotations

import functools
import io
import shutil
import tarfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from companion.testing import wait_for
from consumer_lib import EventsClient, merge_partials
from consumer_lib.types import SubstreamResult
from eventstore.names import ChunkKey
from fleet.cluster import topology as topo
from fleet.cluster.engine import Cluster
from relocator.loadgen import generate
from relocator.producer import TcpEmitter
from substreams.api import Context, Substream
from substreams.loader import load_file
from tests.contract.test_queries_match_functions import TWINS

EXAMPLES = Path(__file__).resolve().parents[2] / "substreams" / "examples"
#: Each function substream's query twin.
QUERY_OF = {name: f"{name}_q" for name, _ in TWINS}
#: The six substreams read back: each function, then its twin.
SUBSTREAMS = tuple(n for name in QUERY_OF for n in (name, QUERY_OF[name]))

Results = dict[str, dict[ChunkKey, SubstreamResult]]


def query_files() -> list[Path]:
    """The twins' plugin files in the checkout."""
    return [EXAMPLES / f"{q}.py" for q in QUERY_OF.values()]


@functools.cache
def queries() -> dict[str, Substream]:
    """The twins as loaded from the checkout's files (name -> declaration, with version)."""
    return {sub.name: sub for path in query_files() for sub in load_file(path)}


def drop_queries(directory: Path) -> None:
    """Copy the twins' files into a plugins directory (hot reloaded by its companion)."""
    for path in query_files():
        shutil.copyfile(path, directory / path.name)


def queries_tar() -> bytes:
    """The twins' files as a tar archive, for a container's plugins directory
    (``container.put_archive``): readable by the image's unprivileged user."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in query_files():
            data = path.read_bytes()
            info = tarfile.TarInfo(path.name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def loaded_by_every_worker(companion: str) -> bool:
    """Whether every worker of the companion at ``companion`` (its base URL) has loaded
    the twins at the checkout's versions (its ``/v1/status``)."""
    view = httpx.get(f"{companion}/v1/status", timeout=10).json()
    workers = int(view["workers"])
    return workers > 0 and all(
        view["loaded"].get(name, {}).get(sub.version, 0) == workers
        for name, sub in queries().items()
    )


def send(host: str, port: int, dc: str, *, events: int = 3000, seconds: float = 3.0) -> range:
    """Emit ``events`` of the load generator's stream (the shared generator's mix of web,
    lb and cron events) to the relocator at ``host:port`` for ``dc``, spread over about
    ``seconds`` so they fill a few epochs, and wait until each is acknowledged.

    Returns:
        The epoch range that holds them, ``[start, end)``.
    """
    emitter = TcpEmitter(host, port, dc=dc)
    start, began = int(time.time()), time.monotonic()
    try:
        for i, (type_, subtype, _, event) in enumerate(generate(events, seed=23, dcs=(dc,))):
            if i % 100 == 0:
                time.sleep(max(0.0, began + seconds * i / events - time.monotonic()))
            event["epoch"] = epoch = int(time.time())
            if not emitter.emit(event, type_, subtype, dc, epoch=epoch):
                raise AssertionError(f"event {i} was not sent: {dict(emitter.counts)}")
        if not emitter.flush(60.0) or emitter.acked != events:
            raise AssertionError(f"{emitter.acked} of {events} events acknowledged")
    finally:
        emitter.close()
    return range(start, int(time.time()) + 1)


def read(client: EventsClient, dc: str, epochs: range) -> Results:
    """Every result of the six substreams over ``epochs``, as stored (no fallback)."""
    return {
        name: {
            r.key: r for r in client.substream(name, dc, epochs.start, epochs.stop, fallback="off")
        }
        for name in SUBSTREAMS
    }


def served(results: Results) -> Counter[str]:
    """How the results were served, counted (``server``, ``gap``...)."""
    return Counter(r.served for by_key in results.values() for r in by_key.values())


def wait_served(
    client: EventsClient, dc: str, epochs: range, events: int, *, timeout_s: float = 90.0
) -> Results:
    """Wait until the range holds all ``events`` and every chunk's result of each of the
    six substreams was written by a companion; then the results.

    Raises:
        AssertionError: not so after ``timeout_s``, with what the last read found.
    """
    deadline = time.monotonic() + timeout_s
    found, results = 0, {}
    while time.monotonic() < deadline:
        found = sum(1 for _ in client.events(dc, epochs.start, epochs.stop))
        if found == events:
            results = read(client, dc, epochs)
            if set(served(results)) == {"server"} and all(results.values()):
                return results
        time.sleep(1.0)
    summary = {name: dict(Counter(r.served for r in rs.values())) for name, rs in results.items()}
    raise AssertionError(f"not all served in {timeout_s} s: {found}/{events} events; {summary}")


def disagreements(results: Results) -> list[str]:
    """Where the twins' results differ, one line per chunk (empty: they agree): the
    query's result, adapted to its function's shape, against the function's, chunk by
    chunk; the same chunks; each query result computed from the checkout's file."""
    versions = {name: sub.version for name, sub in queries().items()}
    out = []
    for name, adapt in TWINS:
        functions, twins = results[name], results[QUERY_OF[name]]
        for key in sorted(functions.keys() ^ twins.keys(), key=ChunkKey.format):
            out.append(f"{name} {key.format()}: one twin's result only")
        for key in functions.keys() & twins.keys():
            function, twin = functions[key].result, twins[key]
            where = f"{twin.substream} {key.format()}"
            if twin.version != versions[twin.substream]:
                out.append(f"{where}: version {twin.version}, not the file's")
            elif (adapted := adapt(twin.result, Context.of(key))) != function:
                out.append(f"{where}: {_short(adapted)} != {name}'s {_short(function)}")
    return out


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def merged_latency_disagreements(results: Results) -> list[str]:
    """``url_latency_q``'s partials merged over the range (``merge_partials``) against
    ``url_latency``'s histograms of every chunk added up: one line per URL that differs."""
    merged = merge_partials(
        queries()["url_latency_q"], [r.result for r in results["url_latency_q"].values()]
    )
    added: dict[str, dict[str, Any]] = {}
    for r in results["url_latency"].values():
        for url, h in r.result["urls"].items():
            empty = {"count": 0, "sum_ms": 0.0, "buckets": [0] * len(h["buckets"])}
            total = added.setdefault(url, empty)
            total["count"] += h["count"]
            total["sum_ms"] += h["sum_ms"]
            total["buckets"] = [a + b for a, b in zip(total["buckets"], h["buckets"], strict=True)]
    out = [] if {row["url"] for row in merged} == added.keys() else ["the URLs differ"]
    for row in merged:
        if (sums := added.get(row["url"])) is None:
            continue
        # Each chunk's sum is rounded to 3 decimals by the function: their sum, to 1e-3 each.
        close = abs(float(row["sum_ms"]) - sums["sum_ms"]) <= 1e-3 * len(results["url_latency"])
        if (row["count"], row["buckets"]) != (sums["count"], sums["buckets"]) or not close:
            out.append(f"{row['url']}: merged {row} != added {sums}")
    return out


def summary(results: Results) -> dict[str, tuple[int, int]]:
    """Per query twin: (chunks compared, rows in its results)."""
    return {
        q: (len(results[q]), sum(len(r.result) for r in results[q].values()))
        for q in QUERY_OF.values()
    }


def check_on_cluster(
    cluster: Cluster,
    companions: dict[str, str],
    relocator: tuple[str, int],
    nodes: list[str],
    *,
    plugins: Path,
    dc: str,
) -> None:
    """The done-when on a container cluster, either flavor: the twins' files copied
    into each companion container's plugins directory (hot reloaded; the images install
    only the functions as entry points), the generator's events sent through
    ``relocator`` (host, port), and every twin's results over the range, all written by
    the companions and read from ``nodes``, equal to their functions' chunk by chunk.

    Args:
        companions: each companion container's service name -> its HTTP base URL.
        plugins: an empty directory for the reader's copy of the twins.
    """
    archive = queries_tar()
    for name in companions:
        container = cluster.container(name)
        assert container is not None and container.put_archive(f"{topo.STATE}/plugins", archive)
    for name, base in companions.items():
        loaded = functools.partial(loaded_by_every_worker, base)
        wait_for(loaded, 60, f"the twins loaded by every worker of {name}", interval_s=1.0)
    epochs = send(*relocator, dc, events=3000)
    drop_queries(plugins)  # the reader has the twins' code, as a plugin author has
    with EventsClient(nodes, timeout_s=10.0, plugin_dirs=[plugins]) as client:
        results = wait_served(client, dc, epochs, 3000, timeout_s=120)
    assert disagreements(results) == []
    assert merged_latency_disagreements(results) == []
    compared = summary(results)
    print(f"twins compared, (chunks, rows) per query: {compared}")
    assert all(chunks >= 3 and rows > 0 for chunks, rows in compared.values()), compared
