"""Every path the consumer library takes may be a string: plugin directories (one or
many) and a tail's position file, as the README passes them."""

from __future__ import annotations

from pathlib import Path

from consumer_lib import EventsClient
from consumer_lib.plugins import PluginCatalog, path_list

PLUGIN = """
from substreams import substream

@substream(name="answer")
def answer(events, ctx):
    return 42
"""


def test_path_list_takes_strings_paths_and_one_string() -> None:
    assert path_list(["a", Path("b")]) == (Path("a"), Path("b"))
    assert path_list("plugins") == (Path("plugins"),)  # one directory, not 7 letters
    assert path_list(Path("p")) == (Path("p"),)


def test_a_plugin_directory_given_as_a_string_is_searched(tmp_path: Path) -> None:
    (tmp_path / "answer.py").write_text(PLUGIN)
    for given in ([str(tmp_path)], str(tmp_path)):
        catalog = PluginCatalog(given, use_entry_points=False)
        assert catalog.get("answer").name == "answer"


def test_events_client_takes_string_plugin_dirs(tmp_path: Path) -> None:
    (tmp_path / "answer.py").write_text(PLUGIN)
    with EventsClient(["http://127.0.0.1:1"], plugin_dirs=[str(tmp_path)]) as client:
        assert client.plugins.get("answer").name == "answer"
