"""The companion's status page: each substream, its state and its plots."""

from __future__ import annotations

from companion.stats import WorkerStats, merge
from companion.statuspage import render_status


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
