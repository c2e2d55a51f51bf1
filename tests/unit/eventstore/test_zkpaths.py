"""The ZooKeeper paths: one module names them (eventstore/zkpaths.py), and they stay what
running clusters already hold."""

from __future__ import annotations

import re
from pathlib import Path

from eventstore import zkpaths

ROOT = Path(__file__).resolve().parents[3]


def test_the_paths_are_those_running_clusters_hold() -> None:
    root = "/riak-events/"
    assert zkpaths.companion(root, "riak@a.b") == "/riak-events/companions/riak@a.b"
    assert zkpaths.registry(root) == "/riak-events/substreams"
    assert zkpaths.writer(root, 3) == "/riak-events/writers/3"
    assert zkpaths.relocator(root, "r-1") == "/riak-events/relocators/r-1"
    assert zkpaths.owner(root, 7) == "/riak-events/owners/7"
    assert zkpaths.progress(root, 7, "f.blob") == "/riak-events/progress/7/f.blob"
    assert zkpaths.lock(root, "dc1", "ams4") == "/riak-events/locks/dc1/ams4"
    assert set(zkpaths.RELOCATOR_FOLDERS) == {
        "writers",
        "relocators",
        "owners",
        "progress",
        "locks",
    }


def test_no_daemon_or_tool_spells_a_zookeeper_path_itself() -> None:
    # A path spelled in two places drifts (the companions' folder was spelled in five).
    spelled = re.compile(
        r"""f["'][^"']*\}/(companions|writers|relocators|owners|progress|locks)\b"""
    )
    found = []
    for package in (
        "companion",
        "relocator",
        "substreams",
        "consumer_lib",
        "eventstore",
        "devnode",
        "fleet",
    ):
        assert (ROOT / package / "__init__.py").is_file(), package  # not a moved folder
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "zkpaths.py":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if spelled.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
