from __future__ import annotations

import re
from pathlib import Path

import pytest

from eventstore.testing import config_refusal
from relocator.intake.spool import parse_name
from relocator.settings import load


def test_load_file_then_overrides(tmp_path: Path) -> None:
    cfg = tmp_path / "r.toml"
    cfg.write_text(
        '[relocator]\ndata_dir = "/x"\ngrace_s = 3\nwriter_id = 4\n'
        '[clusters.ams]\nnodes = ["http://a:8098"]\nw = 2\n'
        '[clusters.lhr]\nnodes = ["http://b:8098"]\n'
        '[zookeeper]\nhosts = "z:2181"\n'
    )
    s = load(cfg, writer_id=5, grace_s=None)
    assert s.data_dir == Path("/x")
    assert s.grace_s == 3.0 and s.writer_id == 5
    assert [(c.name, c.w, c.riak.nodes) for c in s.clusters] == [
        ("ams", 2, ("http://a:8098",)),
        ("lhr", None, ("http://b:8098",)),
    ]
    assert s.zookeeper is not None and s.zookeeper.root == "/riak-events/relocator"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[relocator]\ngrace = 1\n[clusters.a]\nnodes=['http://a:1']\n", "unknown"),
        ("[relocator]\ngrace_s = 'x'\n[clusters.a]\nnodes=['http://a:1']\n", "grace_s"),
        ("[relocator]\nwriter_id = 9001\n[clusters.a]\nnodes=['http://a:1']\n", "writer_id"),
        ("[relocator]\ncompress = 'lz4'\n[clusters.a]\nnodes=['http://a:1']\n", "compress"),
        ("[relocator]\n", "at least one"),
        ("[clusters.a]\nnodes=['http://a:1']\nw = 'most'\n", " w "),
        ("[clusters.a]\nnodes=['http://a:1']\n[zookeeper]\nhosts = 'h:1'\nroot = 'x'\n", "root"),
        ("[bogus]\n", "unknown"),
    ],
)
def test_bad_settings_name_the_key(tmp_path: Path, text: str, match: str) -> None:
    assert re.search(match, config_refusal(load, tmp_path / "r.toml", text))


def test_example_config_is_valid() -> None:
    s = load(Path(__file__).parents[3] / "relocator" / "example-config.toml")
    assert s.clusters


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("1413813813-1-web-www.srl", (1413813813, "1", "web", "www")),
        ("1413813813-ams_4-web.x--host7.srl", (1413813813, "ams_4", "web.x", "")),
        ("5-d-t-s-tag.1.srl", (5, "d", "t", "s")),
    ],
)
def test_spool_names(name: str, parsed: tuple[int, str, str, str]) -> None:
    f = parse_name(name, 8)
    assert (f.epoch, f.dc, f.type, f.subtype) == parsed
    assert 0 <= f.unit < 8


@pytest.mark.parametrize("name", ["x.srl", "01-d-t-s.srl", "1-d-t.srl", "1-d:x-t-s.srl"])
def test_bad_spool_names(name: str) -> None:
    from relocator.errors import BadSpoolFile

    with pytest.raises(BadSpoolFile):
        parse_name(name, 8)
