"""A whole cluster in containers on a real engine, driven from the host.

``riak-events cluster`` (fleet/cluster) builds the images and brings up a devnode
whose ring maps three logical nodes to three companion containers (each on its own
address), ZooKeeper and two relocators sharing a spool. From the host, acknowledged
events go in through a relocator's published TCP port (``TcpEmitter``) and come back
through ``consumer_lib``; then containers are killed with SIGKILL and the README's
promises are checked: acknowledged events survive a relocator kill; a companion kill
leaves gaps that the consumer fills by falling back, and that the companion's auditor
repairs once it is back.

The engine: ``DOCKER_HOST`` when set (Docker or any podman socket); else this module
starts ``podman system service`` on a socket of its own, with the project's
deploy/podman/containers.conf (runc, no default ulimits, netavark). Images are tagged
with a hash of their inputs and the base tarball is kept in ~/.cache/riak-events, so a
second run builds nothing.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from companion.testing import wait_for
from consumer_lib import EventsClient
from eventstore.riak import RiakClient
from fleet.cluster import topology as topo
from fleet.cluster.engine import PROJECT_LABEL, Cluster
from fleet.cluster.images import Builder
from relocator.producer import TcpEmitter
from tests.e2e import twins

pytestmark = [pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
DCS = ("ams1", "ams4")


@pytest.fixture(scope="module")
def cluster(engine: Any) -> Iterator[Cluster]:
    """Three logical nodes with three companions, two relocators, ZooKeeper: healthy."""
    # Clusters of earlier runs that were killed before their teardown: removed first.
    stale = {
        c.labels[PROJECT_LABEL]
        for c in engine.containers.list(all=True, filters={"label": [PROJECT_LABEL]})
        if c.labels.get(PROJECT_LABEL, "").startswith("rete2e")
    }
    for project in stale:
        Cluster(engine, topo.build(project)).down(volumes=True)
    started = time.monotonic()
    images = Builder(engine, ROOT, progress=print).all()
    built = time.monotonic()
    topology = topo.build(
        f"rete2e{os.getpid()}", nodes=3, relocators=2, dcs=DCS, audit_interval_s=2.0
    )
    running = Cluster(engine, topology)
    try:
        running.up(images, timeout_s=240, progress=print)
        print(f"images {built - started:.0f} s, up {time.monotonic() - built:.0f} s")
        yield running
    finally:
        for service in ("devnode", "companion2", "relocator1", "relocator2"):
            if running.container(service) is not None:
                print(f"--- {service} ---\n{running.logs(service, tail=40)}")
        running.down(volumes=True)


def _address(cluster: Cluster, service: str, port: str) -> tuple[str, int]:
    published = cluster.published(service, port)
    assert published is not None, f"{service} {port} is not published"
    host, _, number = published.rpartition(":")
    return host, int(number)


def _send(cluster: Cluster, relocator: str, count: int, tag: str) -> tuple[int, int]:
    """Send ``count`` acknowledged events per dc through ``relocator``; the epoch range."""
    host, port = _address(cluster, relocator, "5141/tcp")
    start = int(time.time())
    emitters = {dc: TcpEmitter(host, port, dc=dc) for dc in DCS}
    try:
        for i in range(count):
            status = 500 if i % 7 == 0 else 200
            event = {"tag": tag, "i": i, "http": {"url": f"/p{i % 5}", "status": status}}
            for emitter in emitters.values():
                # Twelve subtypes: chunk keys spread over the three nodes' companions.
                assert emitter.emit(event, "web", f"s{i % 12}")
        for dc, emitter in emitters.items():
            assert emitter.flush(60), f"{relocator} did not acknowledge everything of {dc}"
            assert emitter.acked == count
    finally:
        for emitter in emitters.values():
            emitter.close()
    return start, int(time.time()) + 1


def _client(cluster: Cluster) -> EventsClient:
    host, port = _address(cluster, "devnode", "8098/tcp")
    return EventsClient([f"http://{host}:{port}"], timeout_s=10.0)


def _tagged(client: EventsClient, start: int, end: int, tag: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for dc in DCS:
        for event in client.events(dc, start - 5, end + 30):
            if event.event.get("tag") == tag:
                found[dc] += 1
    return found


def _wait_for(what: str, check: Any, timeout_s: float = 90.0) -> Any:
    return wait_for(check, timeout_s, what, interval_s=1.0)


def _evidence(cluster: Cluster, served: Counter[str]) -> str:
    """What a failed gap check saw: the counts, companion2's state, the hook's counters."""
    host, port = _address(cluster, "devnode", "8098/tcp")
    riak = RiakClient([f"http://{host}:{port}"])
    try:
        hook = {k: v for k, v in riak.stats().items() if k.startswith("devnode_hook_")}
    finally:
        riak.close()
    return f"served {dict(served)}; companion2: {cluster.check('companion2')}; hook {hook}"


def _served(
    client: EventsClient, start: int, end: int, fallback: Literal["auto", "off"]
) -> Counter[str]:
    served: Counter[str] = Counter()
    for dc in DCS:
        for result in client.substream("event_counts", dc, start - 5, end + 30, fallback=fallback):
            served[result.served] += 1
    return served


def test_events_and_substreams_read_back_from_the_host(cluster: Cluster) -> None:
    """Acknowledged events in through a relocator, read back with every substream result
    computed by the companions: the hook reached each of the three companion containers."""
    start, end = _send(cluster, "relocator1", 300, "basic")
    with _client(cluster) as client:
        found = _wait_for(
            "every event",
            lambda: (c := _tagged(client, start, end, "basic")) == {dc: 300 for dc in DCS} and c,
        )
        assert found == {dc: 300 for dc in DCS}
        served = _wait_for(
            "every result from a companion",
            lambda: (s := _served(client, start, end, "off")) and set(s) == {"server"} and s,
        )
        assert served["server"] > 0
        totals = sum(
            r.result["total"]
            for dc in DCS
            for r in client.substream("event_counts", dc, start - 5, end + 30)
            if r.result is not None
        )
        assert totals >= 600
    stats = client_stats(cluster)
    assert stats["devnode_hook_posted_total"] > 0 and stats["devnode_hook_failed_total"] == 0
    for companion in ("companion1", "companion2", "companion3"):
        assert _key_groups(cluster, companion) > 0, f"the hook sent nothing to {companion}"


def _key_groups(cluster: Cluster, companion: str) -> float:
    """``companion_key_groups_total`` of one companion container, from its /metrics."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    host, port = _address(cluster, companion, "5000/tcp")
    text = httpx.get(f"http://{host}:{port}/metrics", timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "companion_key_groups_total"
    )


def client_stats(cluster: Cluster) -> dict[str, Any]:
    import httpx

    host, port = _address(cluster, "devnode", "8098/tcp")
    return dict(httpx.get(f"http://{host}:{port}/stats", timeout=10).json())


def test_acknowledged_events_survive_a_relocator_kill(cluster: Cluster) -> None:
    """SIGKILL right after the last acknowledgement: after a restart every event is stored."""
    start, end = _send(cluster, "relocator2", 500, "relocator-kill")
    cluster.kill("relocator2")
    cluster.start("relocator2")
    cluster.wait_healthy(timeout_s=120, services=["relocator2"])
    with _client(cluster) as client:
        found = _wait_for(
            "every acknowledged event after the kill",
            lambda: (
                (c := _tagged(client, start, end, "relocator-kill")) == {dc: 500 for dc in DCS}
                and c
            ),
        )
    assert found == {dc: 500 for dc in DCS}


def test_a_killed_companion_leaves_gaps_the_consumer_fills_and_the_auditor_repairs(
    cluster: Cluster,
) -> None:
    """With companion2 killed its chunks have no results: the consumer falls back for
    them (and the counts add up to the full stream); once it is back, its auditor
    writes them."""
    cluster.kill("companion2")
    try:
        start, end = _send(cluster, "relocator1", 300, "companion-kill")
        with _client(cluster) as client:
            _wait_for(
                "the events",
                lambda: _tagged(client, start, end, "companion-kill") == {dc: 300 for dc in DCS},
            )
            time.sleep(3)  # the hook's posts to the other companions have been answered
            gaps = _served(client, start, end, "off")
            assert gaps["gap"] > 0 and gaps["server"] > 0, _evidence(cluster, gaps)
            filled = _served(client, start, end, "auto")
            assert filled["fallback"] == gaps["gap"] and "gap" not in filled, filled
            everything = sum(1 for dc in DCS for _ in client.events(dc, start - 5, end + 30))
            counted = sum(
                r.result["total"]
                for dc in DCS
                for r in client.substream("event_counts", dc, start - 5, end + 30)
                if r.result is not None
            )
            assert counted == everything
    finally:
        cluster.start("companion2")
    cluster.wait_healthy(timeout_s=120, services=["companion2"])
    with _client(cluster) as client:
        served = _wait_for(
            "the auditor to repair every result",
            lambda: (s := _served(client, start, end, "off")) and set(s) == {"server"} and s,
            timeout_s=120,
        )
    assert served["server"] == sum(gaps.values())


def test_events_acknowledged_while_the_node_is_down_arrive_once_it_is_back(
    cluster: Cluster,
) -> None:
    """The devnode (every logical node) killed: relocators still acknowledge (their
    journal is durable), keep a backlog, and push it when the node is back; what was
    stored before the kill is still there."""
    before_start, before_end = _send(cluster, "relocator1", 100, "before-node-kill")
    with _client(cluster) as client:
        _wait_for(
            "the events stored before the kill",
            lambda: (
                _tagged(client, before_start, before_end, "before-node-kill")
                == {dc: 100 for dc in DCS}
            ),
        )
    cluster.kill("devnode")
    try:
        start, end = _send(cluster, "relocator1", 200, "node-down")
    finally:
        cluster.start("devnode")
    cluster.wait_healthy(timeout_s=120, services=["devnode"])
    with _client(cluster) as client:
        assert _tagged(client, before_start, before_end, "before-node-kill") == {
            dc: 100 for dc in DCS
        }
        found = _wait_for(
            "the backlog pushed after the node came back",
            lambda: (
                (c := _tagged(client, start, end, "node-down")) == {dc: 200 for dc in DCS} and c
            ),
            timeout_s=120,
        )
    assert found == {dc: 200 for dc in DCS}


def test_the_example_queries_give_their_python_twins_results_on_the_cluster(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Issue 23's "Done when", on the cluster: the ``*_q.py`` twins copied into each
    companion container's plugins directory (hot reloaded; the image installs only the
    functions as entry points), the load generator's events sent through a relocator,
    and each twin's results over the range, all written by the companions, equal chunk
    by chunk (the query's adapted to its function's shape; ``url_latency_q`` also
    merged over the range)."""
    companions = {
        s.name: "http://{}:{}".format(*_address(cluster, s.name, "5000/tcp"))
        for s in cluster.topology.services
        if s.role == "companion"
    }
    host, port = _address(cluster, "devnode", "8098/tcp")
    relocator = _address(cluster, "relocator1", "5141/tcp")
    nodes = [f"http://{host}:{port}"]
    twins.check_on_cluster(cluster, companions, relocator, nodes, plugins=tmp_path, dc=DCS[0])


def test_the_cluster_command_reports_every_service_and_refuses_an_unknown_one(
    cluster: Cluster,
) -> None:
    """`riak-events cluster status|kill` on the running cluster (DOCKER_HOST as set above)."""
    from click.testing import CliRunner

    from eventstore.cli import main

    project = cluster.topology.project
    status = CliRunner().invoke(main, ["cluster", "status", "--project", project])
    assert status.exit_code == 0, status.output
    rows = {line.split()[0]: line.split()[1:] for line in status.output.splitlines()}
    assert set(rows) == {s.name for s in cluster.topology.services}
    # The drills above restarted what they killed: everything runs and answers again.
    assert all(row[:2] == ["running", "healthy"] for row in rows.values()), status.output
    unknown = CliRunner().invoke(main, ["cluster", "kill", "--project", project, "riak9"])
    assert unknown.exit_code == 1
    assert "no service 'riak9' in this cluster; services: companion1" in unknown.output
