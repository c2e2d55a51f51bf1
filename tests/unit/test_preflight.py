"""The preflight list (scripts/preflight.py): complete, installed by make, and clear."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_preflight() -> ModuleType:
    spec = importlib.util.spec_from_file_location("preflight", ROOT / "scripts/preflight.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["preflight"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


preflight = load_preflight()


def makefile_packages() -> set[str]:
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    found = re.search(r"^APT_PACKAGES\s*:=\s*(.+)$", text, re.MULTILINE)
    assert found, "the Makefile has no APT_PACKAGES line"
    return set(found.group(1).split())


def test_every_package_the_list_names_is_installed_by_make() -> None:
    # iptables was missing from the Makefile while netavark needed it: a fresh machine
    # failed the container tests. Every package of the list must be in APT_PACKAGES.
    assert preflight.packages() - makefile_packages() == set()


def test_every_program_the_code_looks_up_is_in_the_list() -> None:
    # A test or daemon that looks a program up on PATH relies on it being installed; the
    # preflight list must know it, so a missing one is named first. (A lookup with its own
    # path=, such as podman-compose in the virtualenv, is a Python package, not apt's.)
    listed = {Path(t.program).name for t in preflight.TOOLS}
    looked_up: dict[str, str] = {}
    folders = ("tests", "bench", "scripts", "eventstore", "devnode", "relocator", "companion")
    for folder in (*folders, "substreams", "consumer_lib", "fleet"):
        assert (ROOT / folder).is_dir(), folder  # not a moved folder
        for path in (ROOT / folder).rglob("*.py"):
            for name in re.findall(r"shutil\.which\(\"([\w.-]+)\"\)", path.read_text()):
                looked_up.setdefault(name, str(path.relative_to(ROOT)))
    looked_up.pop("sudo", None)  # only when not root, and then the user knows
    unknown = {name: where for name, where in looked_up.items() if name not in listed}
    assert unknown == {}


def test_a_machine_without_the_programs_gets_one_line_each_naming_the_package(
    tmp_path: Path,
) -> None:
    # An empty PATH: every program looked up by name is missing (absolute paths may exist).
    lacking = preflight.missing(path=str(tmp_path))
    names = {t.name for t in lacking}
    assert {"podman", "erl", "erlc", "java", "valgrind", "perl with Sereal"} <= names
    text = preflight.report(lacking)
    assert "missing: podman (Debian: podman), needed by" in text
    assert "missing: perl with Sereal (Debian: libsereal-encoder-perl" in text
    last = text.splitlines()[-1]
    assert last.startswith("install them with: sudo apt-get install ")
    assert set(last.split("apt-get install ", 1)[1].split()) == {
        p for t in lacking for p in t.packages
    }


def test_main_names_what_is_missing_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert preflight.main([]) == 2
    assert "missing: erlc (Debian: erlang-nox)" in capsys.readouterr().err
    assert preflight.main(["test"]) == 2  # no arguments taken
