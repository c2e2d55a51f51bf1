"""The key group (eventstore/keygroup.py): the one definition of the hook -> companion body,
built by the devnode's twin and the auditor, parsed by the companion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eventstore.keygroup import InvalidKeyGroup, KeyGroup

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "hook_routing.json"


def test_the_bytes_are_the_erlang_hooks() -> None:
    # riak_events_body.erl writes compact JSON with the keys in this order; the Erlang
    # EUnit suite reads the same vectors.
    cases = [c for c in json.loads(VECTORS.read_text())["cases"] if "expect" in c]
    assert cases
    for case in cases:
        expect = case["expect"]
        for _node, keys in expect["groups"]:
            group = KeyGroup.of(expect["epoch"], expect["dc"], keys)
            text = json.dumps({"epoch": expect["epoch"], "dc": expect["dc"], "keys": keys})
            assert group.encode() == text.replace(", ", ",").replace(": ", ":").encode()
            epoch, dc, parsed = KeyGroup.parse(json.loads(group.encode()), max_keys=10_000)
            assert (epoch, dc, [k.format() for k in parsed]) == (
                expect["epoch"],
                expect["dc"],
                keys,
            )


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([], "body must be a JSON object"),
        ({"epoch": True, "dc": "ams4", "keys": []}, "epoch must be an integer"),
        ({"epoch": 1, "dc": 4, "keys": []}, "dc a string"),
        ({"epoch": 1, "dc": "ams4", "keys": "x"}, "keys must be a list of at most 2"),
        ({"epoch": 1, "dc": "ams4", "keys": ["a", "b", "c"]}, "at most 2 chunk keys"),
        ({"epoch": 1, "dc": "ams4", "keys": [7]}, "keys must be strings, got int"),
        ({"epoch": 1, "dc": "ams4", "keys": ["1:ams4:web"]}, "1:ams4:web"),
        ({"epoch": 1, "dc": "ams4", "keys": ["2:ams4:web:www:0"]}, "is not of epoch 1 and dc ams4"),
    ],
)
def test_a_body_that_is_not_a_key_group_says_what_is_wrong(data: object, says: str) -> None:
    with pytest.raises(InvalidKeyGroup, match=says):
        KeyGroup.parse(data, max_keys=2)
