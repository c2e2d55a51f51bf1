"""The loader: files, directories, duplicates, failures reported, entry points."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from substreams.errors import PluginLoadError
from substreams.loader import LoadReport, PluginSet, load_entry_points, load_file
from substreams.testing import plugin_source as plugin


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("def broken(:\n", "SyntaxError"),
        ("raise RuntimeError('at import')\n", "RuntimeError: at import"),
        ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
        ("x = 1\n", "declares no @substream"),
        (
            "from substreams import substream\n@substream(name='bad name')\ndef f(e, c): pass\n",
            "InvalidDeclaration",
        ),
        ("import not_a_module_anywhere\n", "ModuleNotFoundError"),
    ],
)
def test_a_plugin_that_does_not_load_is_reported(tmp_path: Path, source: str, reason: str) -> None:
    path = tmp_path / "p.py"
    path.write_text(source)
    with pytest.raises(PluginLoadError, match=reason) as info:
        load_file(path)
    assert info.value.origin == str(path)


def test_one_bad_file_never_stops_the_others_and_duplicates_are_reported(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(plugin("alpha"))
    (tmp_path / "b.py").write_text("def broken(:\n")
    (tmp_path / "c.py").write_text(plugin("alpha", "return 0") + plugin("gamma"))
    (tmp_path / "_private.py").write_text("raise RuntimeError")
    (tmp_path / "notes.txt").write_text("not a plugin")
    plugins = PluginSet([tmp_path], use_entry_points=False)
    assert plugins.refresh()
    assert sorted(plugins.substreams) == ["alpha", "gamma"]
    assert plugins.substreams["alpha"].origin == str(tmp_path / "a.py")
    reasons = sorted(str(f) for f in plugins.report.failures)
    assert len(reasons) == 2
    assert "SyntaxError" in reasons[0] or "SyntaxError" in reasons[1]
    assert any("already declared" in r for r in reasons)


def test_refresh_reloads_only_what_changed(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text(plugin("alpha"))
    plugins = PluginSet([tmp_path], use_entry_points=False)
    plugins.refresh()
    first = plugins.substreams["alpha"]
    assert not plugins.refresh()
    path.write_text(plugin("alpha", "return -1"))
    os.utime(path, ns=(1, 1))
    assert plugins.refresh()
    second = plugins.substreams["alpha"]
    assert second.version != first.version
    assert second([{}], None) == -1  # type: ignore[arg-type]
    path.unlink()
    assert plugins.refresh()
    assert plugins.substreams == {}


def test_the_installed_examples_load_through_their_entry_points() -> None:
    report = LoadReport()
    load_entry_points(report)
    assert {"web_5xx", "url_latency", "event_counts"} <= set(report.substreams)
    assert all(len(s.version) == 16 for s in report.substreams.values())
