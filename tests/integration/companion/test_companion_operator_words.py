"""``riak-events substream enable|disable|status`` against a real companion (issue 21):
each takes ``--json``; a substream's state is one word everywhere (``enabled``,
``disabled``, ``not loaded``), in the CLI and on the status page alike; shed results
are shown apart from the plugin's failures."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from companion.testing import Stack

RIAK_EVENTS = str(Path(sys.executable).parent / "riak-events")

PLUGIN = """
from substreams import substream

@substream(name="words", types=["t"], fields=["i"])
def words(events, ctx):
    return len(events)
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RIAK_EVENTS, "substream", *args], capture_output=True, text=True, timeout=60, check=False
    )


def _json(*args: str) -> Any:
    done = _cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _page_state(stack: Stack, name: str) -> str:
    page = httpx.get(stack.companion.url + "/", timeout=10).text
    marker = f'data-name="{name}" data-state="'
    start = page.index(marker) + len(marker)
    return page[start : page.index('"', start)]


def test_enable_disable_and_status_speak_json_and_the_status_pages_words(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(plugins={"words.py": PLUGIN})
    url = stack.companion.url
    keys = stack.write_epoch(1_700_100_000, "dc1", {("t", "", 0): [{"i": 1}]})
    stack.wait_results("words", keys)

    status = _json("status", "words", "--companion", url)
    (node,) = status["companions"]
    assert node["state"] == "enabled" == _page_state(stack, "words")
    assert node["shed"] == 0 and node["failures"] == {}

    assert _json("disable", "words", "--companion", url) == {
        "substream": "words",
        "action": "disable",
        "companions": [{"companion": url, "done": True, "error": None}],
    }
    (node,) = _json("status", "words", "--companion", url)["companions"]
    assert node["state"] == "disabled" == _page_state(stack, "words")

    enabled = _json("enable", "words", "--companion", url)
    assert enabled["action"] == "enable" and enabled["companions"][0]["done"] is True
    (node,) = _json("status", "words", "--companion", url)["companions"]
    assert node["state"] == "enabled" == _page_state(stack, "words")
    text = _cli("status", "words", "--companion", url).stdout
    assert f"{url}: enabled  version" in text and " shed 0 " in text

    # a companion that cannot be reached: done false with why, exit 1, still JSON
    refused = _cli("enable", "words", "--companion", "http://127.0.0.1:9", "--json")
    assert refused.returncode == 1
    (answer,) = json.loads(refused.stdout)["companions"]
    assert answer["done"] is False and answer["error"].startswith("unreachable")
