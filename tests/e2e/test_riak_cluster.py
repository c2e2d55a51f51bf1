"""A real Riak KV 3.2 cluster in containers (opt-in): ``cluster up --flavor riak --nodes 3``.

Riak is in no package registry the project reaches, so this module runs only when
``RIAK_EVENTS_RIAK_RELEASE`` names a Riak KV 3.2 release: a ``make rel`` tarball (one
top-level ``riak/`` directory) or a ``.deb``. It builds the Riak node image from it
(deploy/images/riak.Dockerfile), brings up three nodes with a companion sidecar each,
ZooKeeper and a relocator, and checks from the host what the README promises of it:

- the three nodes form one cluster with the bucket types, and each is healthy only then;
- events go in through the relocator and come back from the nodes, every substream
  result computed by the companions (the Erlang hook routed every key group);
- the example substreams' query twins give their Python functions' results;
- one Riak container killed with SIGKILL: the data stays readable from the other two;
  started again, it rejoins as the member it was, with no first-start step run again.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx
import pytest

from companion.testing import wait_for as harness_wait_for
from consumer_lib import EventsClient
from fleet.cluster import topology as topo
from fleet.cluster.engine import Cluster
from fleet.cluster.errors import ServiceExited
from fleet.cluster.images import Builder
from relocator.producer import TcpEmitter
from tests.e2e import twins

RELEASE_ENV = "RIAK_EVENTS_RIAK_RELEASE"
RELEASE = os.environ.get(RELEASE_ENV, "")

pytestmark = [
    pytest.mark.timeout(2400),
    pytest.mark.skipif(
        not RELEASE,
        reason=f"opt-in: set {RELEASE_ENV} to a Riak KV 3.2 release tarball or .deb",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
DCS = ("ams1", "ams4")
NODES = ("riak1", "riak2", "riak3")
T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster(engine: Any) -> Iterator[Cluster]:
    release = Path(RELEASE)
    assert release.is_file(), f"{RELEASE_ENV}={RELEASE}: no such file"
    images = Builder(engine, ROOT, progress=print).all(riak_package=release)
    topology = topo.build(
        f"rkre2e{os.getpid()}", flavor="riak", nodes=3, relocators=1, dcs=DCS,
        audit_interval_s=2.0,
    )  # fmt: skip
    running = Cluster(engine, topology)
    started = time.monotonic()
    try:
        running.up(images, timeout_s=900, progress=print)
        print(f"up in {time.monotonic() - started:.0f} s")
        yield running
    finally:
        for service in (*NODES, "companion1", "relocator1"):
            if running.container(service) is not None:
                print(f"--- {service} ---\n{running.logs(service, tail=60)}")
        running.down(volumes=True)


def url(cluster: Cluster, service: str, port: str = "8098/tcp") -> str:
    published = cluster.published(service, port)
    assert published is not None, f"{service} {port} is not published"
    return f"http://{published}"


def wait_for(what: str, check: Callable[[], T | None], timeout_s: float = 180.0) -> T:
    return cast(T, harness_wait_for(check, timeout_s, what, interval_s=2.0))


def riak_admin(cluster: Cluster, service: str, *args: str) -> str:
    container = cluster.container(service)
    assert container is not None
    command = "riak admin " + " ".join(args)
    code, output = container.exec_run(["su", "-s", "/bin/bash", "riak", "-c", command])
    text = bytes(output or b"").decode(errors="replace")
    assert code == 0, f"{command} in {service}: exit {code}: {text}"
    return text


def send(cluster: Cluster, count: int, tag: str) -> tuple[int, int]:
    host, _, port = url(cluster, "relocator1", "5141/tcp")[len("http://") :].rpartition(":")
    start = int(time.time())
    emitters = {dc: TcpEmitter(host, int(port), dc=dc) for dc in DCS}
    try:
        for i in range(count):
            event = {"tag": tag, "i": i, "url": f"/p{i % 5}", "status": 503 if i % 7 else 200}
            for emitter in emitters.values():
                assert emitter.emit(event, "web", f"s{i % 12}")  # chunks on every node
        for dc, emitter in emitters.items():
            assert emitter.flush(60), f"the relocator did not acknowledge everything of {dc}"
    finally:
        for emitter in emitters.values():
            emitter.close()
    return start - 5, int(time.time()) + 30


def tagged(client: EventsClient, start: int, end: int, tag: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for dc in DCS:
        for event in client.events(dc, start, end):
            if event.event.get("tag") == tag:
                found[dc] += 1
    return found


def test_three_nodes_form_one_cluster_with_the_bucket_types(cluster: Cluster) -> None:
    for service in NODES:
        answer = httpx.get(url(cluster, service) + "/types/epochs/props", timeout=10)
        assert answer.status_code == 200, f"{service}: {answer.status_code} {answer.text}"
        hooks = answer.json()["props"]["postcommit"]
        assert any(h.get("mod") == "riak_events_hook" for h in hooks), hooks
        assert cluster.check(service) is None
    members = riak_admin(cluster, "riak1", "member-status")
    valid = [line for line in members.splitlines() if line.lstrip().startswith("valid")]
    assert len(valid) == 3, members


def test_events_come_back_with_every_result_computed_by_the_companions(
    cluster: Cluster,
) -> None:
    start, end = send(cluster, 400, "in")
    nodes = [url(cluster, service) for service in NODES]
    with EventsClient(nodes, timeout_s=10.0) as client:
        expected = {dc: 400 for dc in DCS}
        wait_for("every event", lambda: tagged(client, start, end, "in") == expected)

        def served() -> Counter[str] | None:
            counts: Counter[str] = Counter()
            for dc in DCS:
                for r in client.substream("event_counts", dc, start, end, fallback="off"):
                    counts[r.served] += 1
            return counts if counts and set(counts) == {"server"} else None

        assert wait_for("every substream result from a companion", served)["server"] > 0
    for service in NODES:
        companion = "companion" + service.removeprefix("riak")
        metrics = httpx.get(url(cluster, service, "5000/tcp") + "/metrics", timeout=10).text
        groups = [
            line for line in metrics.splitlines() if line.startswith("companion_key_groups_total")
        ]
        assert groups and float(groups[0].split()[-1]) > 0, f"the hook sent {companion} nothing"


def test_the_example_queries_give_their_python_twins_results_on_real_riak(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Issue 23's "Done when" on real Riak: the query twins, hot loaded by the three
    companion sidecars, give their Python functions' results chunk by chunk, every
    result routed to its node's companion by the Erlang hook."""
    companions = {
        "companion" + node.removeprefix("riak"): url(cluster, node, "5000/tcp") for node in NODES
    }
    host, _, port = url(cluster, "relocator1", "5141/tcp").removeprefix("http://").rpartition(":")
    nodes = [url(cluster, node) for node in NODES]
    twins.check_on_cluster(
        cluster, companions, (host, int(port)), nodes, plugins=tmp_path, dc=DCS[0]
    )


def test_a_killed_node_leaves_the_data_readable_and_rejoins_as_it_was(cluster: Cluster) -> None:
    start, end = send(cluster, 300, "kill")
    everyone = [url(cluster, service) for service in NODES]
    expected = {dc: 300 for dc in DCS}
    with EventsClient(everyone, timeout_s=10.0) as client:
        wait_for("every event", lambda: tagged(client, start, end, "kill") == expected)
    cluster.kill("riak3")
    survivors = [url(cluster, service) for service in ("riak1", "riak2")]
    with EventsClient(survivors, timeout_s=10.0) as client:
        assert tagged(client, start, end, "kill") == expected
    cluster.start("riak3")
    cluster.wait_healthy(timeout_s=300, services=["riak3"])
    wait_for(
        "riak3's entrypoint to skip its first-start steps",
        lambda: "first-start steps done before" in cluster.logs("riak3", tail=20),
    )
    members = riak_admin(cluster, "riak1", "member-status")
    assert sum(line.lstrip().startswith("valid") for line in members.splitlines()) == 3


def test_a_first_start_step_that_fails_stops_the_node_and_up_says_why(
    engine: Any, cluster: Cluster
) -> None:
    """A node told to join a node that does not exist: its entrypoint gives up after
    RIAK_SETUP_TIMEOUT_S with one line, the container exits 1, and `up` fails at once
    with that line (ServiceExited) instead of waiting out its timeout or looping."""
    images = Builder(engine, ROOT).all(riak_package=Path(RELEASE))
    topology = topo.build(f"rkfail{os.getpid()}", flavor="riak", nodes=2, relocators=0)
    joiner = topology.get("riak2")
    assert joiner is not None
    env = {**joiner.env, "RIAK_JOIN": "riak@nowhere.invalid", "RIAK_SETUP_TIMEOUT_S": "20"}
    services = tuple(
        dataclasses.replace(s, env=env) if s.name == "riak2" else s for s in topology.services
    )
    failing = Cluster(engine, dataclasses.replace(topology, services=services))
    started = time.monotonic()
    try:
        with pytest.raises(ServiceExited) as raised:
            failing.up(images, timeout_s=600)
        assert time.monotonic() - started < 300
        message = str(raised.value)
        assert "riak2 exited with status 1" in message
        assert "FAILED: cluster join riak@nowhere.invalid" in message
    finally:
        failing.down(volumes=True)
