"""`riak-events substream test/check`: the author's loop, as a real command, on a blob
file and on an epoch range read from a real devnode."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from devnode.testing import DevnodeProcess
from eventstore.blob import pack_blob
from eventstore.names import ChunkKey, format_metadata
from eventstore.riak import RiakClient
from substreams.examples import web_5xx

RIAK_EVENTS = str(Path(sys.executable).parent / "riak-events")
WEB = [
    {"type": "web", "url": "/a", "status": 503, "duration_ms": 12.5, "host": "h1"},
    {"type": "web", "url": "/b", "status": 200, "duration_ms": 3.0, "host": "h2"},
]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RIAK_EVENTS, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_plugin_on_a_blob_file_reports_result_time_memory_size_and_verdict(
    tmp_path: Path,
) -> None:
    blob = tmp_path / "chunk.blob"
    blob.write_bytes(pack_blob(WEB))
    done = run("substream", "test", web_5xx.__file__, "--blob", str(blob),
               "--key", "1700000000:dc1:web:main:0", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert output["summary"]["runs"] == output["summary"]["ok"] == 1
    (report,) = output["runs"]
    assert report["verdict"] == "ok"
    assert report["result"] == [
        {"url": "/a", "status": 503, "ms": 12.5, "host": "h1", "request_id": None}
    ]
    assert report["wall_ms"] > 0 and report["peak_rss_kb"] > 0 and report["result_bytes"] > 0
    assert report["limits"] == {"timeout_s": 0.5, "memory_mb": 256, "max_result_bytes": 262144}
    human = run("substream", "test", web_5xx.__file__, "--blob", str(blob))
    assert human.stdout.startswith("1 runs on 1 chunks: 1 ok, 0 failed\n  web_5xx@")
    assert "peak RSS" not in human.stdout  # every run only with --verbose
    verbose = run("substream", "test", web_5xx.__file__, "--blob", str(blob), "--verbose")
    assert ": ok\n" in verbose.stdout and "peak RSS" in verbose.stdout
    assert "1 row, " in verbose.stdout


def test_a_failing_plugin_exits_non_zero_with_its_verdict(tmp_path: Path) -> None:
    plugin = tmp_path / "slow.py"
    plugin.write_text(
        "import time\nfrom substreams import substream\n"
        "@substream(name='slow', timeout_s=0.2)\ndef slow(events, ctx):\n    time.sleep(5)\n"
    )
    blob = tmp_path / "chunk.blob"
    blob.write_bytes(pack_blob(WEB))
    done = run("substream", "test", str(plugin), "--blob", str(blob))
    assert done.returncode == 1
    assert "timeout (timeout)" in done.stdout and "wall-clock limit of 0.2s" in done.stdout


def test_an_epoch_range_from_a_devnode(
    devnode_factory: Callable[..., DevnodeProcess], tmp_path: Path
) -> None:
    node = devnode_factory(tmp_path / "data").start()
    with RiakClient([node.url]) as riak:
        for epoch in (1700000000, 1700000001):
            keys = [ChunkKey(epoch, "dc1", "web", "main", 0), ChunkKey(epoch, "dc1", "lb", "", 0)]
            for key in keys:
                riak.put("events", "events", key.format(), pack_blob(WEB))
            riak.put("epochs", "epochs", f"{epoch}-dc1", format_metadata(keys).encode(),
                     content_type="text/plain")  # fmt: skip
    done = run("substream", "test", web_5xx.__file__, "--devnode", node.url, "--dc", "dc1",
               "--start", "1700000000", "--end", "1700000002", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    reports = json.loads(done.stdout)["runs"]
    # Only the web chunks: the harness matches types as the companion does.
    assert [r["key"] for r in reports] == ["1700000000:dc1:web:main:0", "1700000001:dc1:web:main:0"]
    assert all(r["verdict"] == "ok" and len(r["result"]) == 1 for r in reports)


def test_check_reports_each_file(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(
        "from substreams import substream\n@substream(name='good')\ndef good(e, c):\n    return 1\n"
    )
    (tmp_path / "bad.py").write_text("def oops(:\n")
    done = run("substream", "check", str(tmp_path))
    assert done.returncode == 1
    assert "ok      good@" in done.stdout and "FAILED  plugin" in done.stdout
    assert "bad.py" in done.stdout and "SyntaxError" in done.stdout
