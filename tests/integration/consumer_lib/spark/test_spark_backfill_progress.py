"""``spark backfill --progress``: chunks done/total, rate and ETA on stderr, the same
final counts on stdout as without it; the run in units keeps the counts of one job.
Bounds given as ISO-8601 (issue 14)."""

from __future__ import annotations

import json
import random
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.integration.consumer_lib.spark.spark_marks import SPARK_WARNINGS

pytestmark = SPARK_WARNINGS

PLUGIN = """
from substreams import substream

@substream(name="{name}", types=["web"])
def sizes(events, ctx):
    return len(events)
"""


def iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat().replace("+00:00", "Z")


def test_backfill_progress_on_stderr_and_the_same_counts_as_without(
    spark: Any, session_devnode: Any, epoch_writer: Any, tmp_path: Path
) -> None:
    from eventstore.cli import main

    tag = random.randrange(10**9)
    name = f"sizes_{tag}"
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "sizes.py").write_text(PLUGIN.format(name=name))
    start = 1_460_000_000 + random.randrange(10**5) * 200
    # Three slices of 60 epochs, one epoch with data in each: three units, so the
    # progress is reported between them.
    web = 0
    dcs = (f"pa{tag}", f"pb{tag}")
    for dc in dcs:
        for epoch in (start, start + 60, start + 120):
            keys = epoch_writer(dc, epoch, epoch + 1, seed=epoch, web_chunks=2)
            web += sum(1 for k in keys if k.type == "web") if dc == dcs[0] else 0

    def run(dc: str, *extra: str) -> Any:
        args = ["spark", "backfill", "--node", session_devnode.url, "--dc", dc,
                "--substream", name, "--start", iso(start), "--end", iso(start + 121),
                "--plugin-dir", str(plugins), "--no-entry-points", "--max-chunks-per-s", "0",
                "--parallelism", "1", "--json", *extra]  # fmt: skip
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result

    shown = run(dcs[0], "--progress")
    quiet = run(dcs[1])
    counts = json.loads(shown.stdout)
    assert counts["start"] == start and counts["end"] == start + 121  # ISO bounds
    assert (counts["stored"], counts["chunks"]) == (web, web)
    without = json.loads(quiet.stdout)
    assert {k: v for k, v in counts.items() if k != "substream"} == {
        k: v for k, v in without.items() if k != "substream"
    }
    lines = [line for line in shown.stderr.splitlines() if line.startswith(f"backfill {name}:")]
    assert lines[0].startswith(f"backfill {name}: 0/{web} chunks, 0.0 chunks/s, ETA ?")
    assert re.fullmatch(
        rf"backfill {name}: {web}/{web} chunks, [0-9.]+ chunks/s, ETA 0s", lines[-1]
    ), lines
    assert "chunks/s" not in quiet.stderr


def test_units_cover_the_slices_in_order() -> None:
    from consumer_lib.spark.backfill import units

    slices = [(i, i + 1) for i in range(10)]
    assert units(slices, 3) == [slices[0:3], slices[3:6], slices[6:10]]
    assert units(slices, 100) == [[s] for s in slices]
    assert units(slices[:1], 0) == [slices[:1]]


def test_progress_rate_and_eta() -> None:
    from consumer_lib.spark.backfill import BackfillProgress, Pacer

    p = BackfillProgress(done=30, total=100, elapsed_s=10.0)
    assert p.rate_per_s == 3.0
    assert p.eta_s == pytest.approx(70 / 3)
    assert str(p) == "30/100 chunks, 3.0 chunks/s, ETA 23s"
    assert str(BackfillProgress(30, 10_000, 10.0)) == "30/10000 chunks, 3.0 chunks/s, ETA 55m23s"
    assert str(BackfillProgress(12, 10, 2.0)) == "12/12 chunks, 6.0 chunks/s, ETA 0s"
    # A pacer taking over from another keeps its spacing: the first call waits the debt.
    now = [0.0]
    slept: list[float] = []
    first = Pacer(2.0, clock=lambda: now[0], sleep=slept.append)
    first.wait()
    assert first.owed_s() == 0.5
    second = Pacer(2.0, clock=lambda: now[0], sleep=slept.append, first_after_s=first.owed_s())
    second.wait()
    assert slept == [0.5]
