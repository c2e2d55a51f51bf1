"""The Riak client's URL paths and query strings."""

from __future__ import annotations

from eventstore.riak import paths


def test_paths_quote_every_reserved_character() -> None:
    assert paths.object_path("events", "events", "1413813813:1:t:s:0") == (
        "/types/events/buckets/events/keys/1413813813%3A1%3At%3As%3A0"
    )
    assert paths.object_path(None, "epochs", "1413813813-1") == "/buckets/epochs/keys/1413813813-1"
    assert paths.object_path("default", "b", "a/b c%") == "/buckets/b/keys/a%2Fb%20c%25"
    assert paths.bucket_type_props_path("events") == "/types/events/props"
    assert paths.bucket_props_path("t", "b") == "/types/t/buckets/b/props"


def test_query_keeps_riak_names_and_drops_defaults() -> None:
    assert paths.query({"r": 1, "pr": None, "notfound_ok": True, "basic_quorum": False}) == (
        "?r=1&notfound_ok=true&basic_quorum=false"
    )
    assert paths.query({"w": None}) == ""
