"""Pure parts of the devnode: settings, records, bucket props, quorum arithmetic, JSON
nesting and metric labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventstore.devnode import defaults, records
from eventstore.devnode.bodies import parse_json
from eventstore.devnode.buckets import BucketRegistry, resolve_quorum, validate_props
from eventstore.devnode.errors import InvalidProps, InvalidRequest, UnknownBucketType
from eventstore.devnode.metrics import path_kind
from eventstore.devnode.records import StoredObject
from eventstore.devnode.settings import load
from eventstore.settings import SettingsError

pytestmark = pytest.mark.unit


def test_defaults_bind_loopback_and_have_the_designed_types(tmp_path: Path) -> None:
    s = load(data_dir=tmp_path)
    assert (s.host, s.port) == ("127.0.0.1", 8098)
    assert set(s.bucket_types) == {"default", "events", "epochs", "substreams"}
    events = s.bucket_types["events"]
    assert events.expiry_s == 10 * 86400
    for name, value in {
        "n_val": 3,
        "allow_mult": False,
        "last_write_wins": True,
        "w": 3,
        "dw": 0,
        "pw": 0,
        "r": 1,
        "pr": 0,
        "notfound_ok": True,
        "basic_quorum": True,
    }.items():
        assert events.props[name] == value, name
    sub = s.bucket_types["substreams"]
    assert sub.props["n_val"] < 3 and sub.expiry_s is not None and sub.expiry_s < events.expiry_s
    assert s.bucket_types["epochs"].props["postcommit"] == [
        {"mod": defaults.HOOK_MODULE, "fun": defaults.HOOK_FUNCTION}
    ]
    assert s.bucket_types["default"].props["last_write_wins"] is False
    assert s.nodes == defaults.NODES and s.ring_size == 64


def test_config_file_merges_over_defaults(tmp_path: Path) -> None:
    config = tmp_path / "d.toml"
    config.write_text(
        '[devnode]\nlisten = "127.0.0.1:9000"\n'
        '[ring]\nring_size = 128\nnodes = ["a@h", "b@h"]\ndown = ["b@h"]\n'
        '[companions]\n"a@h" = "http://127.0.0.1:5001/"\n'
        "[bucket_types.events]\nexpiry_s = 0\n[bucket_types.events.props]\nn_val = 1\nw = 1\n"
        "[bucket_types.extra.props]\nallow_mult = false\n"
    )
    s = load(config, data_dir=tmp_path, listen="127.0.0.1:9100")
    assert s.port == 9100
    assert s.ring_size == 128 and s.down_nodes == {"b@h"}
    assert s.companions == {"a@h": "http://127.0.0.1:5001"}
    assert s.bucket_types["events"].expiry_s is None
    assert s.bucket_types["events"].props["n_val"] == 1
    assert s.bucket_types["events"].props["last_write_wins"] is True
    assert s.bucket_types["extra"].props["allow_mult"] is False
    assert s.bucket_types["extra"].props["dvv_enabled"] is True


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[ring]\nring_size = 60\n", "power of 2"),
        ('[ring]\nnodes = ["a", "a"]\n', "unique"),
        ('[ring]\ndown = ["zz"]\n', "unknown nodes"),
        ('[companions]\n"zz" = "http://x"\n', "unknown nodes"),
        ("[devnode]\nlisen = 1\n", "unknown setting"),
        ("[bucket_types.events.props]\nr = 'lots'\n", "r must be"),
        ("[bucket_types.x.props]\nlast_write_wins = true\n", "cannot both be true"),
        ("[hook]\ntimeout_s = -1\n", "non-negative"),
        ("not toml at all [", "not valid TOML"),
    ],
)
def test_bad_config_is_named(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "d.toml"
    config.write_text(text)
    with pytest.raises(SettingsError, match=message):
        load(config, data_dir=tmp_path)


def test_data_dir_required() -> None:
    with pytest.raises(SettingsError, match="data directory"):
        load()


def test_record_round_trip() -> None:
    obj = StoredObject(
        value=b"\x00\xff" * 1000,
        content_type="application/x-sereal",
        charset="utf-8",
        usermeta=(("x-riak-meta-a", "1"),),
        vclock="vc",
        vtag="tag",
        write_time_ms=123,
        purge_at_ms=456,
        tombstone=False,
    )
    raw = records.encode(obj)
    assert records.decode(raw) == obj
    assert records.decode(memoryview(raw)) == obj
    assert records.decode_times(raw) == (123, 456, False)
    with pytest.raises(ValueError, match="format"):
        records.decode(b"\x09" + raw[1:])


def test_location_keys() -> None:
    key = records.location_key("events", "events", "1413813813:1:t:s:0")
    assert records.split_location_key(key) == ("events", "events", "1413813813:1:t:s:0")
    assert records.location_key("a", "bc", "d") != records.location_key("ab", "c", "d")
    assert records.split_purge_key(records.purge_key(99, key)) == (99, key)
    assert records.purge_key(1, key) < records.purge_key(2, b"")
    with pytest.raises(InvalidRequest, match="limit"):
        records.location_key("t", "b", "k" * 600)


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
