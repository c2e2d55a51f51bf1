"""Every shipped plugin, both ways, on the same decoded chunks: sandboxed as the
companion runs it (``run_substreams`` with the companion's loader: the chunk decoded in
the child with the plugin's fields; the stored value) and sandboxed as the consumer
library's fallback runs it (``consumer_lib.fallback.run_fallback``: the same sandbox,
one child per chunk, the result decoded as a consumer decodes a stored one; and
``run_served``: the fork server's child, decoding the stored bytes itself). All must
be exactly what a plain in-process call on the events narrowed to the plugin's
declared fields returns, after the same Sereal round trip a consumer's result goes
through; the shipped plugins declare their fields, so that is also what a call on the
whole events returns. A plugin reading a field it did not declare fails the same way
in every one of them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

import sereal_codec as sereal
from companion.chunks import decode_chunk
from consumer_lib.fallback import run_fallback, run_served
from eventstore.blob import DecodeLimits
from eventstore.names import ChunkKey
from eventstore.testing import stored_by_type
from relocator.events import generate_events
from sereal_codec.projection import project_events
from substreams.api import Context, Substream
from substreams.child import Loader
from substreams.forkserver import ForkServer
from substreams.loader import LoadReport, load_entry_points, load_file, plugin_files
from substreams.results import read_result
from substreams.sandbox import run_substreams

EXAMPLES = Path(__file__).parents[2] / "substreams" / "examples"


def shipped() -> list[Substream]:
    found: dict[str, Substream] = {}
    for path in plugin_files(EXAMPLES):
        for sub in load_file(path):
            found[sub.name] = sub
    report = LoadReport()
    load_entry_points(report)
    assert not report.failures
    # Every function example is installed as an entry point; their query twins are not
    # (a companion runs each example once; the README says so).
    functions = {name for name, sub in found.items() if sub.plan is None}
    assert functions == {"web_5xx", "url_latency", "event_counts"}
    assert set(report.substreams) == functions, "every function example is an entry point"
    return list(found.values())


def chunks() -> list[tuple[ChunkKey, bytes, list[dict[str, Any]]]]:
    """(key, stored blob, its events decoded whole), and an empty chunk."""
    return stored_by_type(generate_events(3000, seed=11), 700, empty=True)


def companion_loader(key: ChunkKey, blob: bytes) -> Loader:
    """The chunk as the companion hands it to its child (companion/worker.py)."""
    return functools.partial(decode_chunk, key, blob, DecodeLimits())


@pytest.mark.parametrize("sub", shipped(), ids=lambda s: s.name)
def test_sandboxed_and_in_process_results_are_the_same(
    sub: Substream, fork_server: ForkServer
) -> None:
    assert sub.fields is not None, "every shipped plugin declares its fields"
    ran = 0
    for key, blob, events in chunks():
        if not sub.matches(key.type, key.subtype):
            continue
        ctx = Context.of(key)
        projected = project_events(events, sub.projection)
        (outcome,) = run_substreams([sub], companion_loader(key, blob), ctx, isolation="chunk")
        assert outcome.ok, outcome.error
        record = read_result(outcome.payload, key=key.format())
        assert (record.status, record.substream, record.version) == ("ok", sub.name, sub.version)
        plain = sereal.decode(sereal.encode(sub(projected, ctx)))
        assert record.result == plain == sereal.decode(sereal.encode(sub(events, ctx)))
        (fallback,) = run_fallback([sub], events, key)
        assert (fallback.status, fallback.error) == ("ok", None)
        assert fallback.result == record.result
        (served,) = run_served(fork_server, [sub], blob, key, DecodeLimits())
        assert (served.status, served.error, served.result) == ("ok", None, record.result)
        ran += 1
    assert ran >= 2


UNDECLARED = """
from substreams import substream, dig

@substream(name="undeclared_url", types=["web"], fields=["status"])
def undeclared_url(events, ctx):
    return [{READ} for e in events if e["status"] >= 400]
"""


@pytest.mark.parametrize("read", ['e["url"]', 'e.get("url")', 'dig(e, "url")'])
def test_a_plugin_reading_an_undeclared_field_fails_the_same_way_in_each(
    tmp_path: Path, fork_server: ForkServer, read: str
) -> None:
    path = tmp_path / "undeclared_url.py"
    path.write_text(UNDECLARED.replace("{READ}", read))
    (sub,) = load_file(path)
    key, blob, events = next(c for c in chunks() if c[0].type == "web")
    assert sub(events, Context.of(key)), "it works on the whole events"
    loader = companion_loader(key, blob)
    (outcome,) = run_substreams([sub], loader, Context.of(key), isolation="chunk")
    (fallback,) = run_fallback([sub], events, key)
    (served,) = run_served(fork_server, [sub], blob, key, DecodeLimits())
    failure = (
        "exception: UndeclaredField: field 'url' is not declared (declared fields: status); "
        "add 'url' to @substream(fields=[...])"
    )
    assert outcome.status == "error" and (outcome.error or "").split("\n")[0] == failure
    for run in (fallback, served):
        assert run.status == "error" and (run.error or "").split("\n")[0] == failure
