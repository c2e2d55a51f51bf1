"""Running the Perl side of the interop tests.

Perl and Debian's Sereal packages are installed by ``make test``; when they are missing
the interop tests fail (never skip) with a message saying so.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PERL_DIR = Path(__file__).parent / "perl"
MISSING = (
    "Perl's Sereal (Debian packages libsereal-encoder-perl, libsereal-decoder-perl) is not "
    "installed: run `make test`, which installs it"
)
TIMEOUT_S = 300


def require_perl() -> str:
    """The perl executable, after checking that Sereal::Encoder/Decoder load."""
    perl = shutil.which("perl")
    if perl is None:
        pytest.fail(f"no perl executable. {MISSING}", pytrace=False)
    probe = subprocess.run(
        [perl, "-MSereal::Encoder", "-MSereal::Decoder", "-MJSON::PP", "-e", "1"],
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    if probe.returncode != 0:
        pytest.fail(f"{probe.stderr.decode(errors='replace').strip()}\n{MISSING}", pytrace=False)
    return perl


def run_perl(script: str, *args: str, stdin: bytes | None = None, cwd: Path | None = None) -> bytes:
    """Run ``tests/interop/perl/<script>`` and return its stdout; fail the test on a
    non-zero exit, showing stderr."""
    perl = require_perl()
    proc = subprocess.run(
        [perl, str(PERL_DIR / script), *args],
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
        cwd=cwd,
    )
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace")[-4000:]
        pytest.fail(f"{script} exited {proc.returncode}:\n{err}", pytrace=False)
    return proc.stdout
