"""What the companion imports before gunicorn forks its workers."""

from __future__ import annotations

import subprocess
import sys


def test_the_idna_codec_is_imported_before_gunicorn_forks() -> None:
    # A worker that imports it late and fails once can never resolve a host name again
    # (the codec registry caches the miss): it is imported with the app, in the master.
    code = "import sys, companion.app; print('encodings.idna' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "True"
