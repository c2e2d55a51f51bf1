"""The hook's routing (devnode.routing) against the shared vectors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from devnode.routing import route
from eventstore.errors import InvalidKey, InvalidMetadataValue
from eventstore.names import ChunkKey
from eventstore.ring import Ring

VECTORS = json.loads((Path(__file__).parents[2] / "vectors" / "hook_routing.json").read_text())
RING = Ring(VECTORS["ring"]["nodes"], VECTORS["ring"]["ring_size"])
DATA = VECTORS["data"]
ERRORS = {"invalid_key": InvalidKey, "invalid_value": InvalidMetadataValue}


@pytest.mark.parametrize(
    "case", VECTORS["cases"], ids=lambda c: f"{c['metadata_key']}:{c['metadata_value'][:24]}"
)
def test_vector(case: dict[str, Any]) -> None:
    def run() -> Any:
        return route(
            case["metadata_key"],
            case["metadata_value"].encode(),
            RING,
            bucket_type=DATA["bucket_type"],
            bucket=DATA["bucket"],
            n_val=DATA["n_val"],
            down=case["down"],
        )

    if "error" in case:
        with pytest.raises(ERRORS[case["error"]]):
            run()
        return
    routing = run()
    assert routing.epoch == case["expect"]["epoch"]
    assert routing.dc == case["expect"]["dc"]
    assert [[n, ks] for n, ks in routing.groups.items()] == case["expect"]["groups"]


def test_vectors_cover_grouping_fallbacks_and_errors() -> None:
    cases = VECTORS["cases"]
    assert any(len(c.get("expect", {}).get("groups", [])) >= 3 for c in cases)
    assert any(c["down"] for c in cases)
    assert {c["error"] for c in cases if "error" in c} == set(ERRORS)


def test_issue_example_routes_to_position_36_owner() -> None:
    # bucket "events" (default type), key 1413813813:1:type1:subtype1:0 -> position 36.
    ring = Ring(VECTORS["ring"]["nodes"], 64)
    routing = route(
        "1413813813-1", b"type1:subtype1:0", ring, bucket_type="default", bucket="events", n_val=3
    )
    assert routing.groups == {ring.owners[36]: ["1413813813:1:type1:subtype1:0"]}


def test_bodies_are_the_companion_contract() -> None:
    routing = route(
        "1413813813-2", b"type3::0", RING, bucket_type="events", bucket="events", n_val=3
    )
    (body,) = routing.bodies().values()
    assert body == {"epoch": 1413813813, "dc": "2", "keys": ["1413813813:2:type3::0"]}


def test_all_nodes_down_is_unroutable() -> None:
    routing = route(
        "1413813813-1",
        b"t::0|t::1",
        RING,
        bucket_type="events",
        bucket="events",
        n_val=3,
        down=VECTORS["ring"]["nodes"],
    )
    assert routing.groups == {}
    assert routing.unroutable == ["1413813813:1:t::0", "1413813813:1:t::1"]


# -- the twin against riak_core's own preflists ------------------------------------------

ORACLE = json.loads((Path(__file__).parents[2] / "vectors" / "ring_preflists.json").read_text())


def _oracle_cases() -> list[dict[str, Any]]:
    """Cases whose key is a chunk key and whose preflist has an up node."""
    cases = []
    for case in ORACLE["cases"]:
        key = bytes.fromhex(case["key_hex"]).decode("utf-8", "replace")
        try:
            ChunkKey.parse(key)
        except InvalidKey:
            continue
        if case["expected"]:
            cases.append(case)
    return cases


@pytest.mark.parametrize("case", _oracle_cases(), ids=lambda c: f"{c['bucket']}:{c['key_hex']}")
def test_twin_routes_each_key_to_riak_cores_first_preflist_node(case: dict[str, Any]) -> None:
    """The Erlang hook sends a key to the first node of riak_core_apl:get_apl_ann (a
    fallback when the primary is down); the twin must pick the very same node."""
    chunk = ChunkKey.parse(bytes.fromhex(case["key_hex"]).decode())
    routing = route(
        f"{chunk.epoch}-{chunk.dc}",
        f"{chunk.type}:{chunk.subtype}:{chunk.chunk}",
        Ring(case["nodes"], case["ring_size"]),
        bucket_type=case["bucket_type"] or "default",
        bucket=case["bucket"],
        n_val=case["n_val"],
        down=case["down"],
    )
    assert dict(routing.groups) == {case["expected"][0][1]: [chunk.format()]}


def test_oracle_cases_include_fallbacks_and_typed_buckets() -> None:
    cases = _oracle_cases()
    assert any(c["down"] and not c["expected"][0][2] for c in cases)  # a fallback first
    assert any(c["bucket_type"] not in (None, "default") for c in cases)
