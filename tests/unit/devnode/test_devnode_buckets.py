"""The devnode's bucket props (validation, merging) and quorum arithmetic."""

from __future__ import annotations

import pytest

from devnode.buckets import BucketRegistry, resolve_quorum, validate_props
from devnode.errors import InvalidProps, UnknownBucketType


def test_props_validation_and_merging() -> None:
    assert validate_props({"n_val": 2, "name": "x", "custom": [1]}, where="b") == {
        "n_val": 2,
        "custom": [1],
    }
    for bad in ({"w": -1}, {"w": "most"}, {"allow_mult": 1}, {"n_val": 0}, {"postcommit": ["m"]}):
        with pytest.raises(InvalidProps):
            validate_props(bad, where="b")
    registry = BucketRegistry({"events": {"n_val": 3, "r": 1}})
    assert registry.bucket_props("events", "b")["name"] == "b"
    registry.set_bucket_overrides("events", "b", {"r": 2})
    assert registry.bucket_props("events", "b")["r"] == 2
    assert registry.bucket_props("events", "c")["r"] == 1
    registry.set_type_props("events", {"n_val": 5, "r": 1})
    assert registry.bucket_props("events", "b") | {} == {"n_val": 5, "r": 2, "name": "b"}
    with pytest.raises(UnknownBucketType):
        registry.bucket_props("nope", "b")


@pytest.mark.parametrize(
    ("value", "n_val", "bucket", "expected"),
    [
        ("one", 3, 1, 1),
        ("quorum", 3, 1, 2),
        ("quorum", 5, 1, 3),
        ("all", 3, 1, 3),
        ("default", 3, 1, 1),
        ("default", 3, "all", 3),
        (2, 3, 1, 2),
    ],
)
def test_resolve_quorum(value: int | str, n_val: int, bucket: int | str, expected: int) -> None:
    assert resolve_quorum(value, n_val, bucket) == expected
