"""Substream reads through a real devnode: server results used when good, client-side
fallback (and why) when missing, shed, timed out, failed or of another version; gaps
when fallback is off; every fallback counted by reason.

Results are written here exactly as the companion writes them (substreams.results), so
each case is set up deterministically; tests/contract/test_fallback_matches_server.py
runs the real companion."""

from __future__ import annotations

from pathlib import Path

import pytest
from consumer_helpers import write_epoch
from prometheus_client import REGISTRY

from consumer_lib import EventsClient, InvalidArgument, PluginNotFound, SubstreamNotFound
from eventstore.names import ChunkKey
from eventstore.riak import RiakClient
from substreams.api import Context
from substreams.results import error_value, ok_value
from substreams.testing import plugin_dir as write_plugin_dir

E0 = 1_700_000_200

PLUGIN = """
from substreams import substream

@substream(name="{name}", types=["web"])
def count(events, ctx):
    return {{"n": len(events), "ids": tuple(e["i"] for e in events), "chunk": ctx.chunk}}

@substream(name="{name}_boom", types=["web"])
def boom(events, ctx):
    raise RuntimeError("plugin bug")

@substream(name="{name}_odd", types=["web"])
def odd(events, ctx):
    return object()
"""


def fallbacks(reason: str) -> float:
    return REGISTRY.get_sample_value("consumer_fallback_total", {"reason": reason}) or 0.0


@pytest.fixture
def plugin_dir(tmp_path: Path, dc: str) -> tuple[Path, str]:
    name = f"count_{dc}"
    return write_plugin_dir(tmp_path, "count.py", PLUGIN.format(name=name)), name


def test_each_chunk_is_served_by_the_server_or_by_fallback_with_its_reason(
    session_devnode: object, riak: RiakClient, dc: str, plugin_dir: tuple[Path, str]
) -> None:
    directory, name = plugin_dir
    spec = {
        ("web", "app"): [[{"i": c * 10 + i} for i in range(3)] for c in range(6)],
        ("lb", "edge"): [[{"i": 99}]],  # not read by the plugin: never fetched
    }
    write_epoch([riak], E0, dc, spec)
    url = riak.nodes.nodes[0]
    with EventsClient([url], plugin_dirs=[directory], use_entry_points=False) as client:
        sub = client.plugins.get(name)
        web = [ChunkKey(E0, dc, "web", "app", c) for c in range(6)]

        def expected(c: int) -> dict[str, object]:
            events = spec[("web", "app")][c]
            return {"n": 3, "ids": [e["i"] for e in events], "chunk": c}

        def put(key: ChunkKey, value: bytes) -> None:
            riak.put("substreams", name, key.format(), value)

        put(web[0], ok_value(name, sub.version, expected(0)))  # good: served
        # web[1]: no result at all -> missing
        put(web[2], error_value("shed", name, sub.version, "shed: queue full"))
        put(web[3], error_value("timeout", name, sub.version, "timeout: 0.5 s"))
        put(web[4], error_value("error", name, sub.version, "exception: KeyError"))
        put(web[5], ok_value(name, "0123456789abcdef", {"stale": True}))  # other version
        before = {r: fallbacks(r) for r in ("missing", "shed", "timeout", "error")}

        got = list(client.substream(name, dc, E0, E0 + 1))
        assert [r.key for r in got] == web
        assert [(r.served, r.reason) for r in got] == [
            ("server", None),
            ("fallback", "missing"),
            ("fallback", "shed"),
            ("fallback", "timeout"),
            ("fallback", "error"),
            ("fallback", "version_mismatch"),
        ]
        assert [r.result for r in got] == [expected(c) for c in range(6)]
        assert all(r.version == sub.version for r in got)
        assert got[2].error == "shed: queue full"
        assert all(r.size_bytes > 0 for r in got)
        assert fallbacks("missing") == before["missing"] + 1
        assert fallbacks("shed") == before["shed"] + 1

        # fallback off: gaps, with the server's reason
        off = list(client.substream(name, dc, E0, E0 + 1, fallback="off"))
        assert [(r.served, r.reason) for r in off][:3] == [
            ("server", None),
            ("gap", "missing"),
            ("gap", "shed"),
        ]
        assert off[1].result is None
        # another version accepted when asked
        stale = list(client.substream(name, dc, E0, E0 + 1, accept_other_versions=True))[5]
        assert (stale.served, stale.result) == ("server", {"stale": True})
        # always: never read server results
        forced = list(client.substream(name, dc, E0, E0 + 1, fallback="always"))
        assert {(r.served, r.reason) for r in forced} == {("fallback", "forced")}
        assert [r.result for r in forced] == [expected(c) for c in range(6)]
        assert sub(spec[("web", "app")][0], Context.of(web[0]))["chunk"] == 0


def test_a_plugin_failing_in_the_fallback_yields_gaps_not_a_crash(
    riak: RiakClient, dc: str, plugin_dir: tuple[Path, str]
) -> None:
    directory, name = plugin_dir
    write_epoch([riak], E0, dc, {("web", "app"): [[{"i": 1}]]})
    with EventsClient(riak.nodes.nodes, plugin_dirs=[directory], use_entry_points=False) as c:
        (res,) = c.substream(f"{name}_boom", dc, E0, E0 + 1)
        (odd,) = c.substream(f"{name}_odd", dc, E0, E0 + 1)
    assert (res.served, res.reason, res.result) == ("gap", "missing", None)
    assert res.error is not None and "exception: RuntimeError: plugin bug" in res.error
    assert odd.served == "gap" and odd.error is not None and "unencodable" in odd.error


def test_an_unknown_name_is_refused_with_the_known_names_unless_the_server_has_it(
    riak: RiakClient, dc: str
) -> None:
    write_epoch([riak], E0, dc, {("web", "app"): [[{"i": 1}]]})
    with EventsClient(riak.nodes.nodes, use_entry_points=True) as c:
        for fallback in ("auto", "off"):  # no plugin and no result: most likely a typo
            with pytest.raises(SubstreamNotFound) as info:
                list(c.substream("web5xx", dc, E0, E0 + 1, fallback=fallback))
            assert str(info.value).startswith("no substream web5xx; known: event_counts, ")
            assert str(info.value).endswith("(did you mean web_5xx?)")
            assert isinstance(info.value, PluginNotFound)
        with pytest.raises(PluginNotFound):  # "always" cannot go without the code
            c.substream("nope", dc, E0, E0 + 1, fallback="always")
        with pytest.raises(InvalidArgument):
            c.substream("bad/name", dc, E0, E0 + 1)
