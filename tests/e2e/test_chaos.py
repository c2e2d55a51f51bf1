"""A short seeded run of the chaos campaign (``bench/chaos.py``): one fault of every kind
injected while events flow through the whole stack (ZooKeeper, the devnode in its own
network namespace, a companion under gunicorn, two relocators sharing a spool, two
acknowledged TCP producers with ids and a legacy one, each behind an ack-cutting proxy,
and a spool writer), among them an overlap (a relocator killed while the store is
stopped while ZooKeeper restarts) and an acknowledgement swallowed after the
relocator's fdatasync with the connection cut;
then everything read back through consumer_lib: nothing acknowledged is lost, nothing
of a producer with an id or of the spool is stored twice, no metadata entry names a
missing chunk, every chunk has a result per matching substream, a spool file with an
event no chunk holds is refused whole and kept, every fault recovered, and a chunk the
campaign corrupted in the store reads as a checksum error, never as other events.

Needs root (``ip netns``, a tmpfs mount), Java with ZooKeeper, and fails (does not skip)
without them. About two minutes on two cores.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from chaos import Campaign, render, run  # noqa: E402
from chaos_faults import KINDS  # noqa: E402
from chaos_stack import StackOptions  # noqa: E402
from chaos_system import system_support  # noqa: E402

from relocator.testing import zookeeper_available  # noqa: E402


@pytest.mark.timeout(600)
def test_short_seeded_campaign_loses_nothing(tmp_path: Path) -> None:
    if why := system_support():
        pytest.fail(f"the chaos campaign needs root with iproute2 and mount: {why}")
    if not zookeeper_available():
        pytest.fail("ZooKeeper is not installed: apt-get install zookeeper default-jre-headless")
    campaign = Campaign(
        seed=12,
        faults=len(KINDS),
        duration_s=60.0,
        stack=StackOptions(rate=200.0, tmpfs_mb=32, seed=12),
        drain_timeout_s=120.0,
        results_timeout_s=60.0,
        recovery_timeout_s=30.0,
    )
    report = run(campaign, tmp_path)
    print(render(report))  # shown when the test fails
    readback = report["readback"]
    injected = {k.split()[0] for k, v in report["faults_by_kind"].items() if v["injected"]}
    assert injected == set(KINDS), report["faults"]
    assert report["not_recovered"] == [], report["faults"]
    assert sum(report["run"]["ack_cuts"].values()) >= 1, report["run"]
    # the first overlap of a plan: a relocator killed while the store is stopped while
    # ZooKeeper restarts
    overlap = next(f for f in report["faults"] if f["kind"] == "overlap")
    assert {p["kind"] for p in overlap["parts"]} == {"zk_restart", "store_stop", "kill"}, overlap
    assert readback["acknowledged"] > 10_000
    assert readback["lost"] == 0, readback["lost_sample"]
    assert readback["duplicated"] == 0, readback["duplicated_by_source"]
    assert readback["refused"] > 0, report["faults"]
    assert readback["refused_found"] == 0
    assert readback["refused_not_kept"] == []
    assert readback["dangling"] == 0, readback["dangling_sample"]
    assert readback["without_result"] == 0, readback["without_result_sample"]
    # each chunk the campaign corrupted and nothing rewrote reads as a checksum error
    assert readback["corrupt_other"] == 0, readback["corrupt_other_sample"]
    corrupted = [f for f in report["faults"] if f["kind"] == "chunk_corrupt"]
    assert 0 < readback["corrupt_injected"] <= len(corrupted)
    assert (
        readback["found"] + readback["lost_injected_journal"] + readback["lost_injected_store"]
        == readback["acknowledged"]
    )
