"""The systemd units in deploy/systemd: valid for systemd itself, hardened, and pointing at
commands that exist.

``systemd-analyze verify`` loads each unit as systemd would (unknown keys, bad values,
an ExecStart that is not executable); the install prefix ``/opt/riak-events/venv`` is
replaced by this checkout's virtualenv so the commands are real. ``systemd-analyze
security --offline`` scores the sandboxing; the companion keeps fork and rlimits for
its plugin sandbox, which costs it a little.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))
PREFIX = "/opt/riak-events/venv"
MAX_EXPOSURE = 3.0


def _analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.fail("systemd-analyze not found: install Debian's systemd package (make test does)")
    return found


def _installed_copy(unit: Path, tmp_path: Path) -> Path:
    venv = Path(sys.executable).parent.parent
    text = unit.read_text().replace(PREFIX, str(venv))
    copy = tmp_path / unit.name
    copy.write_text(text)
    return copy


def test_every_daemon_has_a_unit() -> None:
    names = {u.name for u in UNITS}
    assert names == {
        "riak-events-companion.service",
        "riak-events-devnode.service",
        "riak-events-relocator.service",
    }


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_unit_verifies_without_a_warning(unit: Path, tmp_path: Path) -> None:
    copy = _installed_copy(unit, tmp_path)
    proc = subprocess.run(
        [_analyze(), "verify", "--man=no", copy.name],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout + proc.stderr == "", proc.stdout + proc.stderr


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_unit_is_hardened(unit: Path, tmp_path: Path) -> None:
    text = unit.read_text()
    for line in (
        "User=riak-events",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "CapabilityBoundingSet=",
        "Restart=on-failure",
    ):
        assert re.search(rf"^{re.escape(line)}$", text, re.MULTILINE), f"{unit.name}: {line}"
    assert re.search(r"^StateDirectory=riak-events/\w+$", text, re.MULTILINE)
    assert "fleet.waitready" in text, "readiness: ExecStartPost waits for the daemon"
    copy = _installed_copy(unit, tmp_path)
    proc = subprocess.run(
        [_analyze(), "security", "--offline=true", "--no-pager", f"./{copy.name}"],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        text=True,
    )
    found = re.search(r"Overall exposure level for \S+: ([0-9.]+)", proc.stdout)
    assert found, proc.stdout + proc.stderr
    assert float(found.group(1)) <= MAX_EXPOSURE, proc.stdout


def test_waitready_exits_1_naming_the_failure() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleet.waitready",
            "http://127.0.0.1:9/x",
            "--timeout-s",
            "0.5",
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "not ready after 0.5 s: http://127.0.0.1:9/x: ConnectError" in proc.stderr
