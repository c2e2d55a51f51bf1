"""Optional extras are optional, and readiness is apart from liveness (issue 12.7).

The relocator starts and serves ``/healthz`` with kazoo unimportable when ZooKeeper is
not configured; configured without kazoo it refuses with one line naming the extra.
``/readyz`` follows its Riak node (stopped: 503 with the reason; back: 200) while
``/healthz`` stays 200 throughout.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from devnode.testing import DevnodeProcess, free_port
from relocator.testing import (
    RelocatorProcess,
    hiding_modules,
    relocator_process,
    run_relocator_to_exit,
    write_config,
)


def _wait_for(proc: RelocatorProcess, path: str, status: int, timeout_s: float = 20.0) -> bytes:
    deadline = time.monotonic() + timeout_s
    while True:
        code, body = proc.http(path)
        if code == status:
            return body
        assert time.monotonic() < deadline, f"{path} answered {code} {body!r}, not {status}"
        time.sleep(0.1)


def test_the_relocator_runs_without_kazoo_when_zookeeper_is_not_configured(
    *, tmp_path: Path, session_devnode: DevnodeProcess, relocators: list[RelocatorProcess]
) -> None:
    env = hiding_modules(tmp_path / "shim", "kazoo")
    proc, _ = relocator_process(tmp_path, {"a": session_devnode.url}, env=env)
    relocators.append(proc.start())
    assert proc.http("/healthz") == (200, b"ok\n")
    assert json.loads(_wait_for(proc, "/readyz", 200))["ready"] is True


def test_zookeeper_configured_without_kazoo_is_one_clear_line(
    *, tmp_path: Path, session_devnode: DevnodeProcess
) -> None:
    cfg = write_config(
        tmp_path / "r.toml",
        data_dir=tmp_path / "data",
        clusters={"a": session_devnode.url},
        tcp_port=free_port(),
        metrics_port=free_port(),
        zookeeper=("127.0.0.1:1", "/unused"),
    )
    out = run_relocator_to_exit(cfg, env=hiding_modules(tmp_path / "shim", "kazoo"))
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [
        "Error: ZooKeeper is configured (hosts 127.0.0.1:1) but kazoo is not installed: "
        "pip install 'riak-events[zookeeper]'"
    ], out.stderr


def test_readyz_follows_the_riak_node_and_healthz_does_not(
    *,
    tmp_path: Path,
    devnode_factory: type[DevnodeProcess],
    relocators: list[RelocatorProcess],
) -> None:
    node = devnode_factory(tmp_path / "devnode").start()
    proc, _ = relocator_process(tmp_path, {"only": node.url})
    relocators.append(proc.start())
    ready = json.loads(_wait_for(proc, "/readyz", 200))
    assert ready == {"ready": True, "reasons": [], "clusters": {"only": "ok"}, "zookeeper": None}

    node.stop()
    body = json.loads(_wait_for(proc, "/readyz", 503))
    assert body["reasons"] == ["no configured Riak cluster answers /ping"]
    assert body["clusters"] == {"only": "unreachable"}
    assert proc.http("/healthz") == (200, b"ok\n")

    node.start()
    assert json.loads(_wait_for(proc, "/readyz", 200))["clusters"] == {"only": "ok"}
    assert proc.http("/healthz") == (200, b"ok\n")
