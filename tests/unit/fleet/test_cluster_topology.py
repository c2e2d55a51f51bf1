"""The topology `riak-events cluster up` runs: every generated config is accepted by the
daemon's own settings loader, and the devnode's ring sends each logical node's chunk
keys to a companion container of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from companion import settings as companion_settings
from devnode import settings as devnode_settings
from fleet.cluster import images
from fleet.cluster import topology as topo
from relocator import settings as relocator_settings


def _config(tmp_path: Path, service: topo.Service) -> Path:
    path = tmp_path / f"{service.name}.toml"
    path.write_text(service.env["RIAK_EVENTS_CONFIG_TOML"])
    return path


def test_devnode_flavor_maps_each_logical_node_to_its_own_companion(tmp_path: Path) -> None:
    t = topo.build("rx", nodes=3, relocators=2)
    devnode = t.get("devnode")
    assert devnode is not None
    loaded = devnode_settings.load(_config(tmp_path, devnode), data_dir=tmp_path / "d")
    assert loaded.companions == {
        "dev1@rx-devnode": "http://rx-companion1:5000",
        "dev2@rx-devnode": "http://rx-companion2:5000",
        "dev3@rx-devnode": "http://rx-companion3:5000",
    }
    for i in (1, 2, 3):
        companion = t.get(f"companion{i}")
        assert companion is not None and companion.share_network_of is None
        c = companion_settings.load(_config(tmp_path, companion))
        assert c.node == f"dev{i}@rx-devnode"
        assert list(c.ring_nodes) == list(loaded.nodes)


def test_relocators_share_the_spool_with_distinct_writer_ids(tmp_path: Path) -> None:
    t = topo.build("rx", relocators=2)
    loaded = []
    for name in ("relocator1", "relocator2"):
        service = t.get(name)
        assert service is not None
        assert service.volumes["spool"] == f"{topo.STATE}/spool"
        loaded.append(relocator_settings.load(_config(tmp_path, service)))
    assert {s.writer_id for s in loaded} == {1, 2}
    assert loaded[0].spool_dir == loaded[1].spool_dir


def test_riak_flavor_runs_each_companion_in_its_nodes_network(tmp_path: Path) -> None:
    t = topo.build("rx", flavor="riak", nodes=3)
    for i in (1, 2, 3):
        companion = t.get(f"companion{i}")
        node = t.get(f"riak{i}")
        assert companion is not None and node is not None
        assert companion.share_network_of == f"riak{i}" and not companion.ports
        c = companion_settings.load(_config(tmp_path, companion))
        assert c.node == node.env["RIAK_NODENAME"] == f"riak@rx-riak{i}.rx"
        # The dotted name resolves on the cluster's network: Riak's admin tools refuse
        # a node name without a dot, and the hook posts to http://<its host>:5000.
        assert node.aliases == (f"rx-riak{i}.rx",)
        assert "." in c.node.split("@", 1)[1]
    assert "RIAK_CLUSTER_SIZE" in t.services[1].env
    assert t.services[2].env["RIAK_JOIN"] == "riak@rx-riak1.rx"


def test_every_port_is_published_on_loopback_only() -> None:
    for flavor in topo.FLAVORS:
        for service in topo.build("rx", flavor=flavor).services:
            assert service.health, service.name
            for host_port in service.ports.values():
                assert host_port is None  # the engine picks a free port on 127.0.0.1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 0}, "nodes must be 1..8"),
        ({"flavor": "cassandra"}, "flavor must be one of"),
        ({"relocators": 9}, "relocators must be 0..8"),
    ],
)
def test_bad_arguments_name_what_is_wrong(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        topo.build("rx", **kwargs)  # type: ignore[arg-type]


def test_no_engine_is_one_line_naming_docker_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from eventstore.cli import main

    where = f"unix://{tmp_path}/no-engine.sock"
    monkeypatch.setenv("DOCKER_HOST", where)
    result = CliRunner().invoke(main, ["cluster", "status"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"Error: no container engine at DOCKER_HOST={where}: start Docker")


@pytest.mark.parametrize(
    ("dockerfile", "inputs"),
    [
        ("deploy/images/riak.Dockerfile", images.RIAK_INPUTS),
        ("deploy/images/project.Dockerfile", images.PROJECT_INPUTS),
        ("deploy/images/zookeeper.Dockerfile", images.ZOOKEEPER_INPUTS),
    ],
)
def test_every_file_an_image_copies_is_in_its_hash(
    dockerfile: str, inputs: tuple[str, ...]
) -> None:
    # An image is rebuilt only when the hash of its inputs changes: a file it copies but
    # the hash leaves out (the Riak health script, once) ships stale in a reused image.
    root = Path(__file__).resolve().parents[3]
    text = (root / dockerfile).read_text().replace("\\\n", " ")
    sources = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0] != "COPY" or any(w.startswith("--from") for w in words):
            continue
        sources += [w for w in words[1:-1] if not w.startswith("${")]
    assert sources, dockerfile
    uncovered = [
        s for s in sources if not any(s == i or s.startswith(i.rstrip("/") + "/") for i in inputs)
    ]
    assert uncovered == []


def test_the_project_image_copies_every_package_the_runtime_imports() -> None:
    # A package moved to the top level but not copied (devnode, once) is missing from
    # the wheel the image installs: every daemon in it fails at import (fleet: the
    # readiness probe the health checks run, python -m fleet.waitready).
    root = Path(__file__).resolve().parents[3]
    text = (root / "deploy/images/project.Dockerfile").read_text()
    copied = {line.split()[1] for line in text.splitlines() if line.startswith("COPY ")}
    runtime = {"eventstore", "devnode", "relocator", "companion", "substreams", "consumer_lib"}
    runtime |= {"fleet", "sereal_codec"}
    assert runtime <= copied, sorted(runtime - copied)
    assert runtime <= set(images.PROJECT_INPUTS)
    # ... and the build context lets it through (.dockerignore ignores everything else).
    ignore = (root / ".dockerignore").read_text().splitlines()
    assert "*" in ignore
    let_through = {line[1:] for line in ignore if line.startswith("!")}
    sources = [
        source
        for line in text.splitlines()
        if line.startswith("COPY ") and "--from" not in line
        for source in line.split()[1:-1]
    ]
    blocked = [s for s in sources if s.split("/")[0] not in let_through]
    assert sources
    assert blocked == []
