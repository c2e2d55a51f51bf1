"""The companion's status page as a person sees it, in Debian's headless Chromium.

A devnode drives a real companion with the example plugins plus one that always fails
and one that times out; after a few epochs the page is loaded in Chromium, which runs
the page's script (it records each plot's drawn size), dumps the DOM and saves a
screenshot under the test's tmp dir (not committed). The test reads what is shown:
one row per substream with its state, runs and failures, and plots drawn with bars.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from companion.testing import start_stack
from relocator.events import generate_events
from substreams.examples import web_5xx

CHROMIUM = "/usr/bin/chromium"

FAILING = """
import time
from substreams import substream

@substream(name="always_fails", types=["web"])
def always_fails(events, ctx):
    raise ValueError("no such field: price")

@substream(name="too_slow", types=["lb"], timeout_s=0.2)
def too_slow(events, ctx):
    time.sleep(5)
"""


class Rows(HTMLParser):
    """Collects each substream row: its data attributes, cell texts and plots."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, object]] = {}
        self._row: dict[str, object] | None = None
        self._cell: str | None = None
        self.rendered = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "body" and a.get("data-rendered") == "yes":
            self.rendered = True
        if tag == "tr" and "substream" in (a.get("class") or ""):
            self._row = {"state": a.get("data-state"), "plots": [], "bars": 0}
            self.rows[str(a.get("data-name"))] = self._row
        elif self._row is not None and tag == "td":
            self._cell = (a.get("class") or "").split(" ")[0] or None
            if self._cell:
                self._row[self._cell] = ""
        elif self._row is not None and tag == "svg":
            plots = self._row["plots"]
            assert isinstance(plots, list)
            plots.append((a.get("data-drawn-width"), a.get("data-drawn-height")))
        elif self._row is not None and tag == "rect":
            self._row["bars"] = int(self._row["bars"]) + 1  # type: ignore[call-overload]

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        elif tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._row is not None and self._cell:
            self._row[self._cell] = str(self._row[self._cell]) + data


def chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1400,900",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)


def test_status_page_shows_each_substream_with_state_and_plots(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        pytest.fail("needs Debian's chromium package (apt-get install chromium); see Makefile")
    examples = Path(web_5xx.__file__).parent
    plugins = {p.name: p.read_text() for p in examples.glob("[!_]*.py")}
    plugins["failing.py"] = FAILING
    plugins["broken.py"] = "def nope(:\n"
    stack = start_stack(
        tmp_path / "stack", plugins=plugins, companion={"disable_after": 2, "workers": 2}
    )
    try:
        events = generate_events(900, seed=5)
        for i in range(4):
            keys = stack.write_epoch(
                1_700_001_000 + i,
                "dc1",
                {
                    ("web", "main", 0): [e for e in events if e["type"] == "web"],
                    ("lb", "main", 0): [e for e in events if e["type"] == "lb"],
                },
            )
            stack.wait_results("event_counts", keys)
            stack.wait_results("always_fails", [k for k in keys if k.type == "web"])
        time.sleep(0.6)  # one more status snapshot from every worker

        profile = tmp_path / "chromium-profile"
        dom = chromium(["--virtual-time-budget=3000", "--dump-dom", stack.companion.url], profile)
        assert dom.returncode == 0, dom.stderr[-3000:]
        screenshot = tmp_path / "status-page.png"
        shot = chromium([f"--screenshot={screenshot}", stack.companion.url], profile)
        assert shot.returncode == 0, shot.stderr[-3000:]
    finally:
        stack.stop()

    page = Rows()
    page.feed(dom.stdout)
    assert page.rendered, "the page's script ran"
    rows = page.rows
    assert {"web_5xx", "url_latency", "event_counts", "always_fails", "too_slow"} <= set(rows)
    assert rows["event_counts"]["state"] == "enabled"
    assert int(str(rows["event_counts"]["runs"])) == 8
    assert rows["event_counts"]["failures"] == "none"
    assert re.fullmatch(r"[\d.]+ ms", str(rows["event_counts"]["p99"]))
    # The failing substream was disabled after 2 failures in a row on the node (counted
    # across both workers; the runs already under way when it was disabled also
    # failed), and says why.
    assert rows["always_fails"]["state"] == "disabled"
    assert re.fullmatch(r"exception [234]", str(rows["always_fails"]["failures"]))
    assert "no such field: price" in str(rows["always_fails"]["err"])
    assert "timeout" in str(rows["too_slow"]["failures"])
    # The broken plugin file is listed as not loaded, with its error.
    broken = next(r for name, r in rows.items() if name.endswith("broken.py"))
    assert broken["state"] == "load failed" and "SyntaxError" in str(broken["err"])
    # Two plots per substream, laid out by the browser with their full size, with bars.
    for name in ("event_counts", "always_fails", "too_slow"):
        plots = rows[name]["plots"]
        assert isinstance(plots, list) and len(plots) == 2, name
        assert all(int(w) >= 240 and int(h) >= 40 for w, h in plots), (name, plots)
        assert int(str(rows[name]["bars"])) >= 1, name
    # The screenshot exists and is a real PNG of some size (it stays in tmp, for people).
    data = screenshot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    print(f"status page screenshot: {screenshot}")
