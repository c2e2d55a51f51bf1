"""The devnode's HTTP helpers: bounded metric labels, JSON nesting counted without
recursion."""

from __future__ import annotations

import pytest

from devnode.bodies import parse_json
from devnode.errors import InvalidRequest
from devnode.metrics import path_kind


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/types/events/buckets/events/keys/1413813813:1:t:s:0", "object"),
        ("/types/events/buckets/b/keys/with/slash", "object"),
        ("/buckets/b/keys/k", "object"),
        ("/types/events/buckets/b/props", "bucket_props"),
        ("/buckets/b/props", "bucket_props"),
        ("/types/events/props", "type_props"),
        ("/ping", "ping"),
        ("/metrics", "metrics"),
        ("/types/events/buckets/b/keys", "other"),
        ("/buckets/b/props/extra", "other"),
        ("/anything/at/all", "other"),
    ],
)
def test_path_kind_is_a_bounded_label(path: str, kind: str) -> None:
    assert path_kind(path) == kind


def test_parse_json_counts_nesting_without_recursing() -> None:
    assert parse_json(b'{"props":{"a":[{"b":1}]}}', max_depth=4, what="x") == {
        "props": {"a": [{"b": 1}]}
    }
    assert parse_json(b"not json", max_depth=4, what="x") is None
    assert parse_json(b"7", max_depth=0, what="x") == 7
    with pytest.raises(InvalidRequest, match="x JSON nests deeper than 4 levels"):
        parse_json(b'{"props":{"a":[{"b":[]}]}}', max_depth=4, what="x")
    with pytest.raises(InvalidRequest, match="deeper than 4 levels"):
        parse_json(b"[" * 200_000 + b"]" * 200_000, max_depth=4, what="x")
