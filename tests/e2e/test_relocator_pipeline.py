"""End to end: devnode + ``riak-events relocator`` + ``riak-events loadgen``, plus a spool
blob written by Perl's Sereal::Encoder (as the external aggregator writes them)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from devnode.testing import DevnodeProcess
from eventstore.riak import RiakClient
from relocator.testing import relocator_process, run_loadgen, stored_events

_PERL = r"""
use Sereal::Encoder qw(SRL_ZLIB);
my $enc = Sereal::Encoder->new({compress => SRL_ZLIB, dedupe_strings => 1});
my @events = map { {id => $_, job => "billing.reconcile", host => "cron-001.ams1",
                    n => [$_, "x"]} } 1 .. 3000;
binmode STDOUT; print $enc->encode(\@events);
"""


def test_loadgen_through_relocator_to_devnode(
    tmp_path: Path, session_devnode: DevnodeProcess, riak: RiakClient
) -> None:
    if shutil.which("perl") is None:
        pytest.fail("perl with Sereal::Encoder (libsereal-perl) is required")
    spool = tmp_path / "spool"
    spool.mkdir()
    proc, tcp = relocator_process(
        tmp_path, {"dev": session_devnode.url}, spool_dir=spool, grace_s=0.5
    )
    proc.start()
    try:
        dcs = f"e2e{int(time.time()) % 100000}a,e2e{int(time.time()) % 100000}b"
        start = int(time.time())
        report = run_loadgen(tcp, rate=3000, seconds=2, dcs=dcs.split(","))
        blob = subprocess.run(["perl", "-e", _PERL], capture_output=True, check=True).stdout
        (spool / ".tmp").write_bytes(blob)
        first_dc = dcs.split(",", maxsplit=1)[0]
        (spool / ".tmp").rename(spool / f"{start}-{first_dc}-cron-batch-perl.srl")
        end = int(time.time()) + 2
        deadline = time.monotonic() + 30
        while True:
            stored = []
            for dc in dcs.split(","):
                events, unreadable = stored_events(riak, dc, range(start, end))
                assert not unreadable
                stored += events
            web = [e for e in stored if "seq" in e]
            cron_spool = [e for e in stored if "job" in e and "seq" not in e]
            if (
                len(web) >= report["sent"] and len(cron_spool) >= 3000
            ) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert len(web) == report["sent"] > 3000
        assert sorted(e["seq"] for e in web) == list(range(report["sent"]))
        assert sorted(e["id"] for e in cron_spool) == list(range(1, 3001))
        metrics = proc.metrics()
        assert f'relocator_events_received_total{{intake="tcp"}} {float(report["sent"])}' in metrics
        assert 'relocator_events_received_total{intake="spool"} 3000.0' in metrics
        assert 'relocator_spool_files_total{outcome="pushed"} 1.0' in metrics
    finally:
        assert proc.stop() == 0, proc.log_text()[-5000:]
