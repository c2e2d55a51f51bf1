"""For every shipped example plugin: the result the consumer library computes by
client-side fallback is exactly the result the real companion stored.

A devnode whose post-commit hook drives a real companion (gunicorn, sandboxed plugins)
loads the examples from a plugin directory; epochs of realistic events are written
(chunks, then metadata: the hook fires); once every result is stored, the consumer reads
the substream twice: from the server only (``fallback="off"``) and by fallback only
(``fallback="always"``, loading the plugin from the same directory), and both reads
must agree chunk by chunk. The examples declare their fields (issue 16), so the
companion builds only those and both sides run on the same projected events; a plugin
reading a field it did not declare fails the same way in the companion and in the
fallback, through the fork server and forked from the caller."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from companion.testing import Stack, start_stack
from consumer_lib import EventsClient
from consumer_lib.substream import SubstreamReader
from eventstore.names import ChunkKey
from eventstore.testing import store_events
from relocator.events import generate_events
from substreams.loader import load_file, plugin_files

EXAMPLES = Path(__file__).parents[2] / "substreams" / "examples"
E0 = 1_700_000_300
DC = "dc1"
#: Reads "url" but declares only "status": the field is missing wherever it runs.
UNDECLARED = """
from substreams import substream

@substream(name="undeclared_url", types=["web"], fields=["status"])
def undeclared_url(events, ctx):
    return [e["url"] for e in events if e["status"] >= 400]
"""


def shipped() -> dict[str, str]:
    """Each example plugin's name -> its file's text."""
    found = {}
    for path in plugin_files(EXAMPLES):
        for sub in load_file(path):
            found[sub.name] = path.name
    return found


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, list[ChunkKey]]]:
    plugins = {p.name: p.read_text() for p in plugin_files(EXAMPLES)}
    plugins["undeclared_url.py"] = UNDECLARED
    # The failing plugin runs with the others and is never disabled: every chunk's
    # result is its own run's.
    settings = {"quarantine": False, "disable_after": 10_000}
    stack = start_stack(tmp_path_factory.mktemp("stack"), plugins=plugins, companion=settings)
    keys: list[ChunkKey] = []
    try:
        events = generate_events(2400, seed=7)
        for offset in range(3):
            epoch = E0 + offset
            part = events[offset * 800 : (offset + 1) * 800]
            # small chunks, so each group has several
            keys += store_events([stack.riak], epoch, DC, part, chunk_max_bytes=16_000)
        yield stack, keys
    finally:
        stack.stop()


@pytest.mark.parametrize("name", sorted(shipped()))
def test_fallback_result_is_exactly_the_stored_result(
    stack: tuple[Stack, list[ChunkKey]], name: str
) -> None:
    server, keys = stack
    with EventsClient(
        [server.devnode.url], plugin_dirs=[server.plugin_dir], use_entry_points=False
    ) as client:
        sub = client.plugins.get(name)
        matching = [k for k in keys if sub.matches(k.type, k.subtype)]
        assert len(matching) >= 3
        stored = server.wait_results(name, matching, timeout_s=60.0)
        assert all(r.ok and r.version == sub.version for r in stored.values())
        from_server = list(client.substream(name, DC, E0, E0 + 3, fallback="off"))
        by_fallback = list(client.substream(name, DC, E0, E0 + 3, fallback="always"))
    assert [r.key for r in from_server] == matching
    assert [r.key for r in by_fallback] == matching
    assert {r.served for r in from_server} == {"server"}
    assert any(r.result for r in from_server), "results must not all be empty"
    assert {r.served for r in by_fallback} == {"fallback"}
    for s, f in zip(from_server, by_fallback, strict=True):
        assert f.result == s.result == stored[s.key].result, s.key
        assert f.version == s.version


def test_a_plugin_reading_an_undeclared_field_fails_the_same_way_in_the_companion_and_the_fallback(
    stack: tuple[Stack, list[ChunkKey]],
) -> None:
    server, keys = stack
    with EventsClient(
        [server.devnode.url], plugin_dirs=[server.plugin_dir], use_entry_points=False
    ) as client:
        sub = client.plugins.get("undeclared_url")
        matching = [k for k in keys if sub.matches(k.type, k.subtype)]
        stored = server.wait_results(sub.name, matching, timeout_s=60.0)
        ways = {
            way: SubstreamReader(client.store, sub.name, sub, fallback="always", server=fs)
            for way, fs in (("fork server", client.fallback_server), ("caller", None))
        }
        for key in matching:
            record = stored[key]
            assert (record.status, record.version) == ("error", sub.version), record
            assert record.error is not None
            failure = record.error.split("\n", 1)[0]
            assert failure == (
                "exception: UndeclaredField: field 'url' is not declared "
                "(declared fields: status); add 'url' to @substream(fields=[...])"
            ), record.error
            for way, reader in ways.items():
                got = reader.resolve(key)
                assert (got.served, got.fallback_status) == ("gap", "error"), way
                assert got.error is not None, way
                assert got.error.split("\n", 1)[0] == f"fallback error: {failure}", way
