"""Declared fields in the client-side fallback and in ``substream test`` (issue 16),
through a real devnode: a plugin declaring ``fields=[...]`` sees each event narrowed to
them in the fork server's child, in a child forked from the caller and in ``substream
test``, so its result is the same in all three (and the one a plain call on the
projected events gives); a plugin reading a field it did not declare fails the same
way in all three, whichever accessor it uses, with an error naming the field. Each
plugin of one run sees its own fields. The backfill job stores what the companion
would: the run on the plugin's fields."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from consumer_helpers import client_with_plugin, write_epoch

import sereal_codec as sereal
from consumer_lib import EventsClient
from consumer_lib.fallback import run_fallback, run_served
from consumer_lib.spark import backfill
from consumer_lib.substream import SubstreamReader
from eventstore.blob import unpack_blob
from eventstore.names import ChunkKey
from eventstore.riak import RiakClient
from relocator.events import generate_events
from sereal_codec.projection import project_events
from substreams.api import Context, Substream
from substreams.harness import chunks_from_riak, run_plugin_file
from substreams.protocol import DEFAULT_CAP
from substreams.results import read_result

E0 = 1_700_001_600
RIAK_EVENTS = str(Path(sys.executable).parent / "riak-events")

PLUGIN = """
from substreams import count_by, dig, substream

@substream(name="{name}_shape", types=["web"],
           fields=["status", "search.city", "timings", "trace"])
def shape(events, ctx):
    # What each event holds, and values read through each kind of declared path.
    return {{
        "keys": sorted({{k for e in events for k in e}}),
        "search": sorted({{k for e in events for k in e["search"]}}),
        "cities": count_by(events, "search.city"),
        "timings": round(sum(sum(e["timings"]) for e in events), 3),
        "spans": len({{dig(e, "trace.span") for e in events}}),
        "errors": sum(1 for e in events if e["status"] >= 500),
    }}

@substream(name="{name}_urls", types=["web"], fields=["url"])
def urls(events, ctx):
    return {{"keys": sorted({{k for e in events for k in e}}), "n": len(events)}}

@substream(name="{name}_undeclared_item", types=["web"], fields=["status"])
def undeclared_item(events, ctx):
    return [e["url"] for e in events if e["status"] >= 500]

@substream(name="{name}_undeclared_get", types=["web"], fields=["status"])
def undeclared_get(events, ctx):
    return [e.get("url") for e in events]

@substream(name="{name}_undeclared_dig", types=["web"], fields=["status"])
def undeclared_dig(events, ctx):
    return [dig(e, "url") for e in events]
"""

Setup = tuple[EventsClient, str, list[ChunkKey], Path]


@pytest.fixture
def setup(tmp_path: Path, riak: RiakClient, dc: str) -> Iterator[Setup]:
    name = f"fields_{dc}"
    web = [e for e in generate_events(1200, seed=16) if e["type"] == "web"]
    keys = write_epoch([riak], E0, dc, {("web", "app"): [web[:300], web[300:600]]})
    source = PLUGIN.format(name=name)
    with client_with_plugin(tmp_path, riak, "fields.py", source, concurrency=2) as (client, path):
        yield client, name, keys, path


def full_chunk(client: EventsClient, key: ChunkKey) -> list[dict[str, Any]]:
    events = unpack_blob(client.store.chunk_blob(key).value, key=key.format())
    assert isinstance(events, list)
    return events


def readers(client: EventsClient, plugin: Substream) -> dict[str, SubstreamReader]:
    """The fallback both ways: through the client's fork server, forked from here."""
    return {
        way: SubstreamReader(client.store, plugin.name, plugin, fallback="always", server=server)
        for way, server in (("fork server", client.fallback_server), ("caller", None))
    }


def test_a_plugin_with_fields_gives_one_result_in_both_fallbacks_and_substream_test(
    setup: Setup, dc: str
) -> None:
    client, name, keys, path = setup
    plugin = client.plugins.get(f"{name}_shape")
    assert plugin.fields == ("status", "search.city", "timings", "trace")
    tested = {
        run.key: run
        for run in run_plugin_file(path, chunks_from_riak(client.store.nodes[0], dc, E0, E0 + 1))
        if run.substream.name == plugin.name
    }
    for key in keys:
        full = full_chunk(client, key)
        plain = plugin(project_events(full, plugin.projection), Context.of(key))
        expected = sereal.decode(sereal.encode(plain))
        assert expected["keys"] == ["search", "status", "timings", "trace"]
        assert expected["search"] == ["city"]
        assert expected != sereal.decode(sereal.encode(plugin(full, Context.of(key))))
        for way, reader in readers(client, plugin).items():
            got = reader.resolve(key)
            assert (got.served, got.fallback_status, got.error) == ("fallback", "ok", None), way
            assert got.result == expected, way
        assert tested[key].outcome.ok, tested[key].outcome.error
        assert tested[key].result == expected
        assert tested[key].as_dict()["fields"] == ["status", "search.city", "timings", "trace"]


@pytest.mark.parametrize("accessor", ["item", "get", "dig"])
def test_a_plugin_reading_an_undeclared_field_fails_the_same_way_everywhere(
    setup: Setup, dc: str, accessor: str
) -> None:
    """Whichever accessor it reads with (``e["url"]``, ``e.get("url")``, ``dig``): an
    error naming the field and the declared ones, never a silent None (issue 21)."""
    client, name, keys, path = setup
    plugin = client.plugins.get(f"{name}_undeclared_{accessor}")
    key = keys[0]
    assert plugin(full_chunk(client, key), Context.of(key)), "it works on the whole events"
    failure = (
        "exception: UndeclaredField: field 'url' is not declared (declared fields: status); "
        "add 'url' to @substream(fields=[...])"
    )
    for way, reader in readers(client, plugin).items():
        got = reader.resolve(key)
        assert (got.served, got.fallback_status) == ("gap", "error"), way
        assert got.error is not None and got.error.startswith(f"fallback error: {failure}\n"), way
        # the plugin's frames only: no frame of the platform's (issue 21)
        assert "forkserver_process.py" not in got.error and "child.py" not in got.error, way
        assert "fields.py:" in got.error, way
    (tested,) = [
        run
        for run in run_plugin_file(path, chunks_from_riak(client.store.nodes[0], dc, E0, E0 + 1))
        if run.substream.name == plugin.name and run.key == key
    ]
    assert tested.outcome.status == "error"
    assert tested.outcome.error is not None and tested.outcome.error.startswith(failure + "\n")
    done = subprocess.run(
        [RIAK_EVENTS, "substream", "test", str(path), "--node", client.store.nodes[0],
         "--dc", dc, "--start", str(E0)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    # one problem line per failed run, after the summary
    assert f"  {plugin.name} on {key}: error (exception): {failure}\n" in done.stdout + "\n"


def test_each_plugin_of_one_run_sees_its_own_fields(setup: Setup) -> None:
    client, name, keys, _ = setup
    plugins = [client.plugins.get(f"{name}_{p}") for p in ("shape", "urls", "shape")]
    key = keys[1]
    blob = client.store.chunk_blob(key)
    served = run_served(
        client.fallback_server, plugins, blob.value, key, client.store.decode_limits
    )
    forked = run_fallback(plugins, full_chunk(client, key), key, cap=DEFAULT_CAP)
    for runs in (served, forked):
        assert [r.status for r in runs] == ["ok"] * 3, [r.error for r in runs]
        shape, urls, again = (r.result for r in runs)
        assert shape["keys"] == ["search", "status", "timings", "trace"]
        assert urls == {"keys": ["url"], "n": 300}
        assert again == shape
    assert [r.result for r in served] == [r.result for r in forked]


def test_the_backfill_stores_the_run_on_the_plugins_fields(setup: Setup, riak: RiakClient) -> None:
    client, name, keys, _ = setup
    plugin = client.plugins.get(f"{name}_shape")
    fallback = readers(client, plugin)["fork server"]
    plan = backfill.BackfillPlan(
        nodes=(), dcs=(), substream=plugin.name, version=plugin.version, plugin_dirs=(),
        entry_points=False, chunks_per_s=0.0, namespaces=client.store.namespaces,
    )  # fmt: skip
    for key in keys:
        assert backfill._one(riak, plan, plugin, key, backfill.Pacer(0)) == "stored"
        stored = riak.get(*client.store.namespaces.substream_location(plugin.name, key))
        record = read_result(stored.value, key=key.format())
        assert (record.status, record.version) == ("ok", plugin.version)
        assert record.result["keys"] == ["search", "status", "timings", "trace"]
        assert record.result == fallback.resolve(key).result
