"""The one realistic event generator: deterministic, ~700 bytes, the fields the example
substreams read, and the loadgen stream routed by the events' own type/subtype/dc."""

from __future__ import annotations

import collections
import itertools

from relocator.events import EPOCH, generate_events, iter_events
from relocator.loadgen import generate, raw_size
from substreams.api import Context
from substreams.examples import web_5xx


def test_deterministic_per_seed() -> None:
    assert generate_events(300, seed=5) == generate_events(300, seed=5)
    assert generate_events(300, seed=5) != generate_events(300, seed=6)
    assert generate_events(300, seed=5)[:100] == generate_events(100, seed=5)


def test_the_mix_and_its_size() -> None:
    events = generate_events(5000)
    kinds = collections.Counter(e["type"] for e in events)
    assert set(kinds) == {"web", "lb", "cron"}
    assert kinds["web"] > kinds["lb"] > kinds["cron"]
    average = sum(raw_size(e) for e in events) / len(events)
    assert 600 < average < 800
    assert all(e["epoch"] == EPOCH for e in events)
    assert any(not e["search"]["city"].isascii() for e in events if e["type"] == "web")


def test_web_events_carry_what_the_example_substreams_read() -> None:
    events = [e for e in generate_events(3000, seed=2) if e["type"] == "web"]
    assert all(e["host"].startswith("web-") for e in events)
    errors = web_5xx.web_5xx(events, Context(EPOCH, "ams1", "web", "www", 0))
    assert errors
    for row in errors:
        assert isinstance(row["ms"], float)
        assert row["host"].startswith("web-")
        assert isinstance(row["url"], str)
        assert isinstance(row["request_id"], str)


def test_loadgen_routes_by_the_events_own_fields() -> None:
    stream = list(generate(500, seed=3, dcs=("ams1", "lhr2")))
    assert [e["seq"] for _, _, _, e in stream] == list(range(500))
    for type_, subtype, dc, e in stream:
        assert (type_, subtype, dc) == (e["type"], e["subtype"], e["dc"])
        assert dc in ("ams1", "lhr2")
        assert e["host"].startswith(f"{type_}-") and e["host"].endswith(f".{dc}.example.com")
        assert "epoch" not in e  # stamped when emitted
    unstamped = list(itertools.islice(iter_events(3, epoch=None, dcs=("ams1", "lhr2")), 500))
    assert unstamped == [{k: v for k, v in e.items() if k != "seq"} for _, _, _, e in stream]
