"""One identity, one directory (issue 12.4), with real relocator processes.

A second relocator with a writer id that a live relocator holds in ZooKeeper is refused
(one line, exit 1) and the first one's znode is left alone; once the first is killed -9
and its session has expired, the second starts. A second relocator on a data directory
in use is refused too.
"""

from __future__ import annotations

import time
from pathlib import Path

from devnode.testing import DevnodeProcess, free_port
from relocator.testing import (
    RelocatorProcess,
    ZooKeeperProcess,
    run_relocator_to_exit,
    write_config,
    writer_session,
)

WRITER = 7


def _config(
    tmp_path: Path,
    name: str,
    devnode: DevnodeProcess,
    *,
    writer_id: int,
    data_dir: Path | None = None,
    zookeeper: tuple[str, str] | None = None,
) -> tuple[Path, int]:
    mport = free_port()
    cfg = write_config(
        tmp_path / f"{name}.toml",
        data_dir=data_dir or tmp_path / f"data-{name}",
        clusters={"a": devnode.url},
        tcp_port=free_port(),
        metrics_port=mport,
        writer_id=writer_id,
        zookeeper=zookeeper,
    )
    return cfg, mport


def test_a_second_relocator_with_a_live_writer_id_is_refused(
    *,
    tmp_path: Path,
    session_devnode: DevnodeProcess,
    zookeeper_server: ZooKeeperProcess,
    zookeeper: str,
    relocators: list[RelocatorProcess],
) -> None:
    zk = (zookeeper_server.hosts, zookeeper)
    cfg1, m1 = _config(tmp_path, "first", session_devnode, writer_id=WRITER, zookeeper=zk)
    first = RelocatorProcess(cfg1, metrics_port=m1, log_path=tmp_path / "first.log").start()
    relocators.append(first)
    assert first.status()["zookeeper"]["registered"]
    holder = writer_session(*zk, WRITER)

    cfg2, m2 = _config(tmp_path, "second", session_devnode, writer_id=WRITER, zookeeper=zk)
    refused = run_relocator_to_exit(cfg2, timeout_s=60)
    assert refused.returncode == 1, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, refused.stderr
    assert f"writer id {WRITER} is held by relocator" in errors[0]
    assert f"0x{holder:x}" in errors[0]
    assert "Traceback" not in refused.stderr
    # the live holder kept its znode and its registration
    assert writer_session(*zk, WRITER) == holder
    assert first.status()["zookeeper"]["registered"]

    # killed -9: its session expires (2 s) and the second one takes the writer id over
    first.kill()
    second = RelocatorProcess(cfg2, metrics_port=m2, log_path=tmp_path / "second.log")
    relocators.append(second.start(wait_s=30))
    deadline = time.monotonic() + 10
    while not second.status()["zookeeper"]["registered"]:
        assert time.monotonic() < deadline, second.status()
        time.sleep(0.1)
    assert writer_session(*zk, WRITER) not in (0, holder)


def test_a_second_relocator_on_a_data_directory_in_use_is_refused(
    *,
    tmp_path: Path,
    session_devnode: DevnodeProcess,
    relocators: list[RelocatorProcess],
) -> None:
    data = tmp_path / "data"
    cfg1, m1 = _config(tmp_path, "first", session_devnode, data_dir=data, writer_id=1)
    first = RelocatorProcess(cfg1, metrics_port=m1, log_path=tmp_path / "first.log").start()
    relocators.append(first)

    cfg2, _ = _config(tmp_path, "second", session_devnode, data_dir=data, writer_id=2)
    refused = run_relocator_to_exit(cfg2, timeout_s=60)
    assert refused.returncode == 1, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [
        f"Error: data directory {str(data)!r} is in use by process {first.pid}; "
        "stop it first or give this process its own directory"
    ], refused.stderr
    assert "Traceback" not in refused.stderr
    assert first.status()["batches"] == 0  # the first one runs on, untouched

    # the lock goes with the process, even killed -9: the directory is usable again
    first.kill()
    cfg3, m3 = _config(tmp_path, "third", session_devnode, data_dir=data, writer_id=2)
    third = RelocatorProcess(cfg3, metrics_port=m3, log_path=tmp_path / "third.log")
    relocators.append(third.start())
