"""Node lists from the configuration, and the consumer CLI's JSON."""

from __future__ import annotations

import json

import pytest

from consumer_lib import InvalidArgument
from consumer_lib.cli import dumps
from consumer_lib.discovery import configured_nodes


def test_node_lists_and_cli_json() -> None:
    assert configured_nodes(["http://a:1/", "http://a:1", " http://b:2 "]) == (
        "http://a:1",
        "http://b:2",
    )
    for bad in ([], ["a:1"], [" "]):
        with pytest.raises(InvalidArgument):
            configured_nodes(bad)
    assert json.loads(dumps({"t": b"caf\xc3\xa9", "b": b"\xff", "s": (1, 2)})) == {
        "t": "café",
        "b": {"$base64": "/w=="},
        "s": [1, 2],
    }
