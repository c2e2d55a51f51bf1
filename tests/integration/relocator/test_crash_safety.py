"""kill -9 of the relocator at random points, many times in one test: nothing that was
acknowledged (TCP) or spooled is lost, nothing is stored twice, and at every moment the
metadata lists only chunks that can be read."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from relocator_rig import Rig

import sereal_codec as sereal
from relocator.testing import AckedSender, stored_events

ROUNDS = 14


def _spool(directory: Path, epoch: int, dc: str, tag: str, ids: list[int]) -> None:
    data = sereal.encode([{"id": i, "job": "cleanup", "rows": i * 7} for i in ids])
    tmp = directory / f".{tag}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, directory / f"{epoch}-{dc}-cron-batch-{tag}.srl")


def test_kill9_at_random_points_loses_nothing(
    rig: Rig,
) -> None:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    spool = rig.spool()
    proc, tcp = rig.relocator(spool_dir=spool)
    first_epoch = int(time.time()) - 1
    acked: list[int] = []
    spooled: list[int] = []
    next_id = 0
    for round_ in range(ROUNDS):
        proc.start()
        ids = list(range(10**7 + round_ * 1000, 10**7 + round_ * 1000 + 300))
        _spool(spool, int(time.time()), rig.dc, f"r{round_}", ids)
        spooled += ids
        sender = AckedSender(tcp, rig.dc, first_id=next_id).start()
        time.sleep(rng.uniform(0.0, 2.5))
        proc.kill()
        sender.stop()
        acked += sender.acked
        next_id = sender.next_id
        # after every crash: whatever metadata exists lists only readable chunks
        _, unreadable = stored_events(rig.riak, rig.dc, range(first_epoch, int(time.time()) + 2))
        assert not unreadable, f"round {round_}: {unreadable}"
    assert len(acked) > 1000, "the sender got too few acknowledgements to test anything"
    proc.start()
    epochs = range(first_epoch, int(time.time()) + 2)
    want = set(acked) | set(spooled)
    ids = rig.wait_stored(epochs, want, timeout_s=30)
    missing = want - set(ids)
    assert not missing, (
        f"{len(missing)} acknowledged/spooled events lost, e.g. {sorted(missing)[:10]}"
    )
    dupes = len(ids) - len(set(ids))
    assert dupes == 0, f"{dupes} events stored twice"
    assert proc.stop() == 0
    assert not [p for p in spool.iterdir() if p.suffix == ".srl"], "spool files left behind"
    assert not (spool / ".rejected").exists()
