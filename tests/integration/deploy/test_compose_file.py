"""deploy/compose.yaml: what the issue promises of it, read from the file, and the file
as podman-compose itself resolves it for each profile (no container is started)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "deploy" / "compose.yaml"


def _resolved(profile: str) -> dict[str, Any]:
    """The file as podman-compose resolves it with ``--profile``: anchors, merges, profiles."""
    tool = shutil.which("podman-compose", path=str(Path(sys.executable).parent))
    if tool is None:
        pytest.fail("podman-compose is missing: pip install -e '.[dev]'")
    done = subprocess.run(
        [tool, "-f", str(COMPOSE), "--profile", profile, "config"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, "CONTAINERS_CONF": str(ROOT / "deploy/podman/containers.conf")},
    )
    assert done.returncode == 0, done.stderr
    return dict(yaml.safe_load(done.stdout))


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("dev", {"zookeeper", "devnode", "companion", "relocator1", "relocator2", "loadgen"}),
        (
            "riak",
            {"zookeeper", "riak1", "riak2", "riak3", "companion1", "companion2", "companion3"}
            | {"riak-relocator1", "riak-relocator2"},
        ),
    ],
)
def test_each_profile_has_its_services_healthchecked_on_loopback_with_named_volumes(
    profile: str, expected: set[str]
) -> None:
    config = _resolved(profile)
    services = config["services"]
    assert set(services) == expected
    named = set(config.get("volumes") or {})
    for name, service in services.items():
        assert service.get("healthcheck", {}).get("test"), f"{name}: no health check"
        for port in service.get("ports", []):
            text = port if isinstance(port, str) else f"{port.get('host_ip')}:"
            assert text.startswith("127.0.0.1:"), f"{name}: port {port} not on loopback"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume["source"]
            assert source in named, f"{name}: {source} is not a named volume"


def test_each_riak_companion_shares_its_nodes_network_and_names_that_node() -> None:
    services = _resolved("riak")["services"]
    for i in (1, 2, 3):
        companion = services[f"companion{i}"]
        assert companion["network_mode"] == f"service:riak{i}"
        config = companion["environment"]["RIAK_EVENTS_CONFIG_TOML"]
        assert f'node = "riak@riak{i}.riak-events"' in config
        node = services[f"riak{i}"]
        assert node["environment"]["RIAK_NODENAME"] == f"riak@riak{i}.riak-events"
        # The dotted name (Riak's admin tools refuse a bare host) resolves on the network.
        assert f"riak{i}.riak-events" in node["networks"]["default"]["aliases"]
