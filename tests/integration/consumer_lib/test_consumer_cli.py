"""`riak-events read` and `riak-events tail` as a user runs them, against a real devnode."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from consumer_helpers import sample_spec, write_epoch

from devnode.testing import DevnodeProcess
from eventstore.riak import RiakClient

E0 = 1_700_000_400
CLI = [str(Path(sys.executable).parent / "riak-events")]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, check=False)


def test_read_full_stream_and_substream_as_json_lines_and_text(
    session_devnode: DevnodeProcess, riak: RiakClient, dc: str
) -> None:
    for e in (E0, E0 + 1):
        write_epoch([riak], e, dc, sample_spec(e, web_chunks=2))
    url = session_devnode.url
    common = ["--node", url, "--dc", dc, "--start", str(E0), "--end", str(E0 + 2)]
    done = run("read", *common, "--type", "lb", "--progress")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(x["epoch"], x["type"], x["subtype"], x["event"]["i"]) for x in lines] == [
        (E0, "lb", "edge", 0),
        (E0, "lb", "edge", 1),
        (E0 + 1, "lb", "edge", 0),
        (E0 + 1, "lb", "edge", 1),
    ]
    assert "epochs" in done.stderr  # the progress bar
    text = run("read", *common, "--subtype", "", "--format", "text")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0].startswith(f"{E0} {dc} cron::0 ")
    # a shipped substream, computed by fallback (no companion runs here)
    sub = run("read", *common, "--substream", "event_counts", "--type", "cron")
    assert sub.returncode == 0, sub.stderr
    records = [json.loads(line) for line in sub.stdout.splitlines()]
    assert [(r["epoch"], r["served"], r["reason"]) for r in records] == [
        (E0, "fallback", "missing"),
        (E0 + 1, "fallback", "missing"),
    ]
    assert records[0]["result"]["total"] == 1


def test_errors_are_one_line_naming_the_key(
    session_devnode: DevnodeProcess, riak: RiakClient, dc: str
) -> None:
    write_epoch([riak], E0, dc, sample_spec(E0, web_chunks=1))
    riak.delete("events", "events", f"{E0}:{dc}:lb:edge:0")
    node = session_devnode.url
    done = run("read", "--node", node, "--dc", dc, "--start", str(E0), "--end", str(E0 + 1))
    assert done.returncode == 1
    assert f"key={E0}:{dc}:lb:edge:0" in done.stderr
    assert "Traceback" not in done.stderr


def test_read_refuses_a_node_that_is_not_riak_and_names_an_empty_range(
    session_devnode: DevnodeProcess, riak: RiakClient, dc: str, tmp_path: Path
) -> None:
    write_epoch([riak], E0, dc, sample_spec(E0, web_chunks=1))
    span = ["--start", str(E0), "--end", str(E0 + 1)]
    # Not Riak: an HTTP server that answers 404 on /ping (as a companion's port does).
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "0", "-d", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = server.stdout.readline().split("port ")[1].split()[0]
        wrong = run("read", "--node", f"http://127.0.0.1:{port}", "--dc", dc, *span)
    finally:
        server.kill()
        server.wait()
        assert server.stdout is not None
        server.stdout.close()
    assert wrong.returncode == 1
    assert "does not answer as Riak: GET /ping answered HTTP 404" in wrong.stderr
    assert "Traceback" not in wrong.stderr and wrong.stdout == ""
    # A dc with no data: said, not silent.
    node = session_devnode.url
    empty = run("read", "--node", node, "--dc", dc + "x", *span)
    assert empty.returncode == 3, empty.stderr
    assert empty.stdout == ""
    assert f"no epochs with data for dc {dc}x in [{E0}, {E0 + 1})" in empty.stderr
    backwards = run("read", "--node", node, "--dc", dc, "--start", str(E0 + 1), "--end", str(E0))
    assert backwards.returncode == 2  # bad input: a usage error, as in every command
    assert "ends before it starts" in backwards.stderr


def test_tail_command_follows_and_saves_its_position(
    session_devnode: DevnodeProcess, riak: RiakClient, dc: str, tmp_path: Path
) -> None:
    base = int(time.time()) - 30
    for e in (base, base + 2):
        write_epoch([riak], e, dc, sample_spec(e, web_chunks=1))
    position = tmp_path / "pos.json"
    args = ["tail", "--node", session_devnode.url, "--dc", dc, "--position", str(position)]
    args += ["--start", str(base), "--until", str(base + 3), "--lag", "0", "--late-wait", "0"]
    done = run(*args, "--type", "cron")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["epoch"] for line in done.stdout.splitlines()] == [base, base + 2]
    # One summary line per dc, not one per epoch; and a line at start saying what it awaits.
    assert f"dc={dc}: no metadata for 1 epoch(s) in [{base + 1}, {base + 1}]" in done.stderr
    assert f"dc={dc}: waiting for epoch {base} (lag 0 s" in done.stderr
    assert json.loads(position.read_text())["next_epoch"] == base + 3
    position.unlink()
    done = run(*args, "--substream", "event_counts", "--type", "lb", "--format", "text")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and "[fallback (missing)]" in lines[0] and '"total":2' in lines[0]
