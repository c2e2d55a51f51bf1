"""Companion parts without processes: settings, statistics, the status page, and the
app driven in-process over ASGI (peers, key-group validation, health)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from companion.app import create_app
from companion.settings import CompanionSettings, load
from companion.stats import WorkerStats, merge, percentile
from companion.statuspage import render_status
from eventstore.settings import SettingsError

pytestmark = pytest.mark.unit


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
    config = tmp_path / "c.toml"
    config.write_text(text)
    with pytest.raises(SettingsError, match=message):
        load(config)


def test_statistics_merge_across_workers_with_percentiles() -> None:
    a, b = WorkerStats(), WorkerStats()
    for i in range(90):
        a.record_run("s", "ok", 0.010, key=f"k{i}")
    for i in range(10):
        b.record_run("s", "timeout", 1.0, key=f"t{i}", error="timeout: 1s")
    b.record_run("s", "shed", 0.0, key="x", error="shed: queue full")
    b.count("chunks_shed")
    merged = merge([a.snapshot(), b.snapshot()])
    s = merged["substreams"]["s"]
    # a shed result is counted apart: the plugin did not run, so it is not its failure
    assert (s["runs"], s["ok"], s["failures"], s["shed"]) == (100, 90, {"timeout": 10}, 1)
    assert s["p50_ms"] == pytest.approx(10.0)
    assert s["p99_ms"] == pytest.approx(1000.0)
    assert s["last_error"] == "timeout: 1s"
    assert merged["workers"] == 2 and merged["counters"]["chunks_shed"] == 1
    assert percentile([], 0.5) is None
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0


def test_the_status_page_shows_each_substream_its_state_and_plots() -> None:
    stats = WorkerStats()
    stats.record_run("web_5xx", "ok", 0.02, key="1:d:web::0")
    stats.record_run("slow", "timeout", 1.0, key="1:d:web::0", error="timeout: <1s>")
    for _ in range(3):
        stats.record_run("web_5xx", "shed", 0.0, key="2:d:web::0", error="shed: overload")
    page = render_status(
        node="dev1",
        merged=merge([stats.snapshot()]),
        loaded={
            "web_5xx": {"version": "v1", "types": ["web"]},
            "slow": {"version": "v2", "types": []},
        },
        load_failures=[("plugins/broken.py", "SyntaxError: bad")],
        disabled={"slow": {"version": "v2", "reason": "5 failures in a row"}},
        settings={"listen": "127.0.0.1:5001"},
    )
    assert 'data-name="web_5xx" data-state="enabled"' in page
    assert 'data-name="slow" data-state="disabled"' in page
    # issue 21: shed apart from the plugin's failures; the page reloads itself
    web = page[page.index('data-name="web_5xx"') :]
    assert '<td class="failures">none</td><td class="shed">3</td>' in web
    assert '<meta http-equiv="refresh" content="10">' in page
    assert "timeout: &lt;1s&gt;" in page  # escaped
    assert "plugins/broken.py" in page and "load failed" in page
    assert page.count('<svg class="plot') == 4
    assert 'class="ok"' in page and 'class="fail"' in page


async def _asgi(
    app: Any, method: str, path: str, body: bytes = b"", client: str = "127.0.0.1"
) -> tuple[int, bytes]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": (client, 40000),
        "server": ("127.0.0.1", 5001),
        "app": app,
    }
    sent: list[dict[str, Any]] = []
    chunks = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return chunks.pop(0) if chunks else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, payload


def test_the_app_accepts_key_groups_only_from_peers_and_only_well_formed(tmp_path: Path) -> None:
    settings = CompanionSettings(
        state_dir=tmp_path / "state",
        entry_points=False,
        check_plugins_in_child=False,
        peers=("127.0.0.1",),
    )
    app = create_app(settings)
    group = {"epoch": 1, "dc": "dc1", "keys": ["1:dc1:web::0", "1:dc1:web::1"]}

    async def scenario() -> list[tuple[int, Any]]:
        async with app.router.lifespan_context(app):
            out = []
            for method, path, body, client in [
                ("POST", "/v1/keys", group, "127.0.0.1"),
                ("POST", "/v1/keys", group, "10.9.9.9"),
                (
                    "POST",
                    "/v1/keys",
                    {"epoch": 1, "dc": "dc1", "keys": ["2:dc1:web::0"]},
                    "127.0.0.1",
                ),
                ("POST", "/v1/keys", {"epoch": "1", "dc": "dc1", "keys": []}, "127.0.0.1"),
                ("POST", "/v1/keys", {"epoch": 1, "dc": "dc1", "keys": ["nope"]}, "127.0.0.1"),
                ("POST", "/v1/substreams/nothing/enable", {}, "127.0.0.1"),
                ("GET", "/healthz", None, "10.9.9.9"),
                ("GET", "/", None, "10.9.9.9"),
                ("GET", "/", None, "127.0.0.1"),
            ]:
                raw = b"" if body is None else json.dumps(body).encode()
                status, payload = await _asgi(app, method, path, raw, client)
                out.append((status, payload))
            return out

    results = asyncio.run(scenario())
    codes = [status for status, _ in results]
    # /healthz is open to anyone; the status page only to status_peers (loopback).
    assert codes == [202, 403, 400, 400, 400, 404, 200, 403, 200]
    assert json.loads(results[0][1]) == {"accepted": 2, "shed": 0}
    assert b"is not of epoch 1" in results[2][1]
    assert json.loads(results[6][1])["status"] == "ok"
    assert b"no substreams loaded" in results[8][1]


def test_the_example_config_loads_as_documented() -> None:
    example = Path(__file__).parents[3] / "companion" / "example-config.toml"
    settings = load(example)
    assert settings.queue_max == 64 and settings.disable_after == 5
    assert settings.zk_health_interval_s == 10.0
