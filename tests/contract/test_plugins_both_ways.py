"""Every shipped plugin, both ways, on the same decoded chunks: sandboxed as the
companion runs it (``run_substreams``: the stored value) and sandboxed as the consumer
library's fallback runs it (``consumer_lib.fallback.run_fallback``: the same sandbox,
one child per chunk, the result decoded as a consumer decodes a stored one). Both must
be exactly what a plain in-process call returns, after the same Sereal round trip a
consumer's result goes through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from consumer_lib.fallback import run_fallback
from eventstore import sereal
from eventstore.blob import pack_blob, unpack_blob
from eventstore.names import ChunkKey
from relocator.events import generate_events
from substreams.api import Context, Substream
from substreams.loader import LoadReport, load_entry_points, load_file, plugin_files
from substreams.results import read_result
from substreams.sandbox import run_substreams

pytestmark = pytest.mark.contract

EXAMPLES = Path(__file__).parents[2] / "substreams" / "examples"


def shipped() -> list[Substream]:
    found: dict[str, Substream] = {}
    for path in plugin_files(EXAMPLES):
        for sub in load_file(path):
            found[sub.name] = sub
    report = LoadReport()
    load_entry_points(report)
    assert not report.failures
    assert set(report.substreams) == set(found), "every example is installed as an entry point"
    return list(found.values())


def chunks() -> list[tuple[ChunkKey, list[dict[str, Any]]]]:
    events = generate_events(3000, seed=11)
    out = []
    for i, type_ in enumerate(("web", "lb", "cron")):
        of_type = [e for e in events if e["type"] == type_]
        for chunk, start in enumerate(range(0, len(of_type), 700)):
            key = ChunkKey(1_700_000_000 + i, "dc1", type_, "main", chunk)
            # Through the stored form, so both ways see what the companion decodes.
            decoded = unpack_blob(pack_blob(of_type[start : start + 700]), key=key.format())
            out.append((key, decoded))
    out.append((ChunkKey(1_700_000_009, "dc1", "web", "", 0), []))  # an empty chunk
    return out


@pytest.mark.parametrize("sub", shipped(), ids=lambda s: s.name)
def test_sandboxed_and_in_process_results_are_the_same(sub: Substream) -> None:
    ran = 0
    for key, events in chunks():
        if not sub.matches(key.type, key.subtype):
            continue
        ctx = Context.of(key)
        (outcome,) = run_substreams([sub], events, ctx)
        assert outcome.ok, outcome.error
        record = read_result(outcome.payload, key=key.format())
        assert (record.status, record.substream, record.version) == ("ok", sub.name, sub.version)
        plain = sub(events, ctx)
        assert record.result == sereal.decode(sereal.encode(plain))
        (fallback,) = run_fallback([sub], events, key)
        assert (fallback.status, fallback.error) == ("ok", None)
        assert fallback.result == record.result
        ran += 1
    assert ran >= 2
