"""Fixtures of the container tests: a Docker Engine API client (Docker, or podman's
API service started here with the project's deploy/podman/containers.conf)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet.cluster.engine import connect

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A docker SDK client: DOCKER_HOST, else a podman API service started here."""
    if os.environ.get("DOCKER_HOST"):
        yield connect()
        return
    if shutil.which("podman") is None:
        pytest.fail("no container engine: apt-get install podman runc netavark aardvark-dns")
    folder = tmp_path_factory.mktemp("podman")
    socket = folder / "podman.sock"
    env = {**os.environ, "CONTAINERS_CONF": str(ROOT / "deploy/podman/containers.conf")}
    log = (folder / "service.log").open("w")
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket}"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while not socket.exists() and time.monotonic() < deadline and service.poll() is None:
        time.sleep(0.1)
    os.environ["DOCKER_HOST"] = f"unix://{socket}"
    try:
        yield connect()
    finally:
        del os.environ["DOCKER_HOST"]
        service.terminate()
        service.wait(timeout=30)
        log.close()
