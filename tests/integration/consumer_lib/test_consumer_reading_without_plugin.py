"""Issue 21 (reader side), through a real devnode: a substream read needs the plugin's
code only where a result is missing; a mistyped name gets the known names; a read with
gaps says so and exits 4; ``read --limit``; ``ls``; ``tail`` says where a fresh position
starts; ``tail(end=)``; no routine INFO line; epochs named with their UTC instant.

Results are written as the companion writes them (substreams.results)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from consumer_helpers import sample_spec, write_epoch

from consumer_lib import EventsClient, SubstreamNotFound
from devnode.testing import DevnodeProcess
from eventstore.names import ChunkKey
from eventstore.riak import RiakClient
from substreams.results import error_value, ok_value

E0 = 1_700_000_600
CLI = [str(Path(sys.executable).parent / "riak-events")]
NAME = "slow_requests"  # declared by no plugin here, as on a user's machine
VERSION = "0123456789abcdef"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, check=False)


def run_ls(*args: str) -> subprocess.CompletedProcess[str]:
    """``riak-events ls``: the console script once the entry point is installed, else the
    same root group with the command added as the entry point would add it."""
    if any(ep.name == "ls" for ep in entry_points(group="riak_events.commands")):
        return run("ls", *args)
    boot = (
        "from eventstore.cli import main; from consumer_lib.ls_cli import ls; "
        "main.add_command(ls); main(prog_name='riak-events')"
    )
    return subprocess.run(
        [sys.executable, "-c", boot, "ls", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def served_but_one(riak: RiakClient, dc: str) -> list[ChunkKey]:
    """Two epochs of web:app (2 chunks), lb:edge and cron:; the companion stored a result
    of NAME for every web chunk but the second epoch's chunk 1; returns the web keys."""
    web = []
    for e in (E0, E0 + 1):
        for key in write_epoch([riak], e, dc, sample_spec(e, web_chunks=2)):
            if key.type == "web":
                web.append(key)
                if (key.epoch, key.chunk) != (E0 + 1, 1):
                    riak.put("substreams", NAME, key.format(), ok_value(NAME, VERSION, {"n": 1}))
    return web


def test_served_results_need_no_plugin_and_missing_ones_are_marked(
    riak: RiakClient, dc: str
) -> None:
    web = served_but_one(riak, dc)
    with EventsClient(riak.nodes.nodes, use_entry_points=False) as client:
        results = client.substream(NAME, dc, E0, E0 + 2)  # fallback "auto": no raise
        got = [(r.key, r.served, r.reason, r.fallback_status, r.result) for r in results]
    assert got == [
        (web[0], "server", None, None, {"n": 1}),
        (web[1], "server", None, None, {"n": 1}),
        (web[2], "server", None, None, {"n": 1}),
        (web[3], "gap", "missing", "no_plugin", None),
    ]
    # lb and cron have no result of it at all: taken as types it does not read
    summary = results.summary
    assert (summary.served, summary.gap_count) == (3, 1)
    assert dict(summary.gaps) == {"missing, no plugin to run": 1}
    assert dict(summary.not_read) == {"cron:": 2, "lb:edge": 2}


def test_read_cli_without_plugin_prints_served_results_and_a_gap_summary_exit_4(
    session_devnode: DevnodeProcess, riak: RiakClient, dc: str
) -> None:
    served_but_one(riak, dc)
    common = ["--node", session_devnode.url, "--dc", dc, "--start", str(E0), "--end", str(E0 + 2)]
    done = run("read", *common, "--substream", NAME)
    assert done.returncode == 4, done.stderr  # completed, with gaps
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["served"] for r in records] == ["server", "server", "server", "gap"]
    assert "1 gap(s) missing, no plugin to run" in done.stderr
    assert "--plugin-dir DIR" in done.stderr and "--fallback off" in done.stderr
    assert "entry point" in done.stderr
    # no routine INFO line (plugins loaded, fallback per chunk, fork server started)
    assert " INFO " not in done.stderr, done.stderr
    # fallback off: gaps too, said and exit 4
    off = run("read", *common, "--substream", "event_counts", "--type", "cron", "--fallback", "off")
    assert off.returncode == 4, off.stderr
    assert "2 gap(s) missing, fallback off: --fallback auto" in off.stderr
    # --limit: N results, N events
    limited = run("read", *common, "--substream", NAME, "--limit", "2")
    assert limited.returncode == 0, limited.stderr  # the gap was not reached
    assert len(limited.stdout.splitlines()) == 2
    events = run("read", *common, "--limit", "5")
    assert events.returncode == 0, events.stderr
    assert len(events.stdout.splitlines()) == 5


def test_a_mistyped_name_gets_the_known_names_and_the_closest_one(
    session_devnode: DevnodeProcess, riak: RiakClient, dc: str
) -> None:
    write_epoch([riak], E0, dc, sample_spec(E0, web_chunks=1))
    span = ["--dc", dc, "--start", str(E0), "--end", str(E0 + 1)]
    done = run("read", "--node", session_devnode.url, *span, "--substream", "web5xx")
    assert done.returncode == 3, done.stderr
    assert done.stdout == ""
    line = "no substream web5xx; known: event_counts, url_latency, web_5xx (did you mean web_5xx?)"
    assert done.stderr.strip().splitlines() == [line]
    # the library says the same, after finding no result of it in the range
    with (
        EventsClient([session_devnode.url]) as client,
        pytest.raises(SubstreamNotFound, match="did you mean web_5xx"),
    ):
        list(client.substream("web5xx", dc, E0, E0 + 1))


def test_ls_lists_types_with_data_and_substreams_with_results(
    session_devnode: DevnodeProcess, riak: RiakClient, dc: str
) -> None:
    served_but_one(riak, dc)
    key = ChunkKey(E0, dc, "lb", "edge", 0)  # a stored failure counts: the companion ran it
    riak.put(
        "substreams",
        "event_counts",
        key.format(),
        error_value("shed", "event_counts", "x", "shed: q"),
    )
    span = ["--node", session_devnode.url, "--dc", dc, "--start", str(E0), "--end", str(E0 + 10)]
    done = run_ls(*span, "--substream", NAME, "--substream", "event_counts", "--json")
    assert done.returncode == 0, done.stderr
    (listing,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert (listing["epochs_read"], listing["epochs_with_data"], listing["sampled"]) == (
        10,
        2,
        False,
    )
    groups = {(g["type"], g["subtype"]): g for g in listing["groups"]}
    assert sorted(groups) == [("cron", ""), ("lb", "edge"), ("web", "app")]
    assert (groups[("web", "app")]["epochs"], groups[("web", "app")]["chunks"]) == (2, 4)
    assert groups[("web", "app")]["first_utc"] == "2023-11-14T22:23:20Z"
    assert groups[("web", "app")]["substreams"] == {"event_counts": False, NAME: True}
    assert groups[("lb", "edge")]["substreams"] == {"event_counts": True, NAME: False}
    # a long range is sampled, and says so; text form
    text = run_ls(*span, "--max-epochs", "5", "--no-substream-check")
    assert text.returncode == 0, text.stderr
    assert "hold data, sampled: 5 of 10 epochs read" in text.stdout
    assert f"  web:app  1 epochs, 2 chunks, {E0} (2023-11-14T22:23:20Z)" in text.stdout
    # dcs cannot be listed: the help says so; an empty dc is "not found"
    assert "list keys" in run_ls("--help").stdout
    empty = run_ls(*span[:2], "--dc", dc + "x", *span[4:])
    assert empty.returncode == 3
    assert (
        f"no data for dc {dc}x in [{E0}, {E0 + 10}) = [{E0} (2023-11-14T22:23:20Z)" in empty.stderr
    )


def test_tail_says_where_a_fresh_position_starts_when_it_printed_nothing(
    session_devnode: DevnodeProcess, riak: RiakClient, dc: str, tmp_path: Path
) -> None:
    base = int(time.time()) - 60
    write_epoch([riak], base, dc, sample_spec(base, web_chunks=1))
    node = ["--node", session_devnode.url, "--dc", dc, "--late-wait", "0", "--lag", "0"]
    fresh = run("tail", *node, "--end", "now-30s")  # the README's old example
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout == ""
    assert "nothing printed: a fresh position starts at the newest due epoch" in fresh.stderr
    assert "--start now-2m --end now-30s" in fresh.stderr
    both = run("tail", *node, "--start", str(base), "--end", str(base + 1), "--type", "cron")
    assert both.returncode == 0, both.stderr
    assert len(both.stdout.splitlines()) == 1


def test_tail_takes_end_and_until_is_deprecated(
    client: EventsClient, riak: RiakClient, dc: str
) -> None:
    base = int(time.time()) - 60
    write_epoch([riak], base, dc, sample_spec(base, web_chunks=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with client.tail(dc, start=base, end=base + 1, lag_s=0, late_wait_s=0) as tail:
            assert [e.epoch for e in tail] == [base]
    with (
        pytest.warns(DeprecationWarning, match=r"use end="),
        client.tail(dc, start=base, until=base + 1, lag_s=0, late_wait_s=0) as tail,
    ):
        assert [e.epoch for e in tail] == [base]


def test_messages_name_epochs_with_their_utc_instant(
    session_devnode: DevnodeProcess, riak: RiakClient, dc: str
) -> None:
    write_epoch([riak], E0, dc, sample_spec(E0, web_chunks=1))
    riak.delete("events", "events", f"{E0}:{dc}:lb:edge:0")
    node = ["--node", session_devnode.url]
    broken = run("read", *node, "--dc", dc, "--start", str(E0), "--end", str(E0 + 1))
    assert broken.returncode == 1
    assert f"epoch={E0} (2023-11-14T22:23:20Z)" in broken.stderr
    empty = run("read", *node, "--dc", dc + "x", "--start", str(E0), "--end", str(E0 + 1))
    assert empty.returncode == 3
    assert f"[{E0} (2023-11-14T22:23:20Z), {E0 + 1} (2023-11-14T22:23:21Z))" in empty.stderr
