"""The devnode's settings: the designed defaults, a config file over them, bad configs
named, the data directory required."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from devnode import defaults
from devnode.settings import load
from eventstore.settings import SettingsError
from eventstore.testing import DESIGNED_CHUNK_PROPS, config_refusal


def test_defaults_bind_loopback_and_have_the_designed_types(tmp_path: Path) -> None:
    s = load(data_dir=tmp_path)
    assert (s.host, s.port) == ("127.0.0.1", 8098)
    assert set(s.bucket_types) == {"default", "events", "epochs", "substreams"}
    events = s.bucket_types["events"]
    assert events.expiry_s == 10 * 86400
    for name, value in DESIGNED_CHUNK_PROPS.items():
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
    refusal = config_refusal(lambda path: load(path, data_dir=tmp_path), tmp_path / "d.toml", text)
    assert re.search(message, refusal)


def test_data_dir_required() -> None:
    with pytest.raises(SettingsError, match="data directory"):
        load()
