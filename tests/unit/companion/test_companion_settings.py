"""The companion's settings: a file with CLI overrides, bad keys named, the example config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from companion.settings import load
from eventstore.testing import config_refusal


def test_settings_from_a_file_with_cli_overrides(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[companion]\nlisten = "127.0.0.1:6000"\nworkers = 3\npeers = ["10.0.0.0/8"]\n'
        'plugin_dirs = ["plugins"]\nstate_dir = "st"\n'
        '[riak]\nnodes = ["http://10.0.0.1:8098"]\n[zookeeper]\nhosts = "z:2181"\n'
    )
    settings = load(config, workers=5, listen=None)
    assert (settings.host, settings.port, settings.workers) == ("127.0.0.1", 6000, 5)
    assert settings.plugin_dirs == (tmp_path / "plugins",)
    assert settings.state_dir == tmp_path / "st"
    assert settings.riak.nodes == ("http://10.0.0.1:8098",)
    assert settings.zk_hosts == "z:2181"
    assert settings.zk_health_interval_s == 10.0
    assert settings.allows("10.1.2.3") and not settings.allows("127.0.0.1")
    assert not settings.allows("testclient") and not settings.allows(None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[companion]\nworkers = 0\n", "workers"),
        ("[companion]\nqueue_max = 'many'\n", "queue_max"),
        ("[companion]\npeers = ['not-an-ip']\n", "peer"),
        ("[companion]\nlisten = 'nowhere'\n", "listen"),
        ("[companion]\ntypo = 1\n", "typo"),
        ("[other]\n", "other"),
        ("[namespaces]\nevents_bucket = 'bad name'\n", "namespaces"),
        ("[companion]\nisolation = 'none'\n", "isolation"),
        ("[companion]\nnode = 'x'\n[ring]\nnodes = ['a', 'b']\n", "node must be one of"),
        ("[ring]\nring_size = 0\n", "ring_size"),
        ("[zookeeper]\nhealth_interval_s = 0\n", "health_interval_s"),
    ],
)
def test_bad_settings_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    assert re.search(message, config_refusal(load, tmp_path / "c.toml", text))


def test_the_example_config_loads_as_documented() -> None:
    example = Path(__file__).parents[3] / "companion" / "example-config.toml"
    settings = load(example)
    assert settings.queue_max == 64 and settings.disable_after == 5
    assert settings.zk_health_interval_s == 10.0
