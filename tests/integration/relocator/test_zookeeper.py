"""Two relocators sharing a spool directory through a real ZooKeeper: they never both
own a work unit, and when one is killed the other takes its units over and finishes its
files without loss or duplicates (same chunk numbering, from the progress znodes)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from relocator_rig import Rig

import sereal_codec as sereal
from relocator.testing import RelocatorProcess, ZooKeeperProcess

UNITS = 8


def _drop(spool: Path, epoch: int, dc: str, n_files: int, first: int) -> list[int]:
    ids: list[int] = []
    for f in range(n_files):
        chunk = list(range(first + f * 400, first + (f + 1) * 400))
        data = sereal.encode([{"id": i, "url": "/search", "pad": "p" * (i % 500)} for i in chunk])
        tmp = spool / f".f{first}-{f}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, spool / f"{epoch}-{dc}-web-www-f{first}x{f}.srl")
        ids += chunk
    return ids


def _owned(procs: list[RelocatorProcess]) -> list[set[int]]:
    return [set(p.status()["owned_units"] or []) for p in procs if p.running]


def test_two_relocators_never_share_a_unit_and_takeover_loses_nothing(
    rig: Rig,
    *,
    zookeeper_server: ZooKeeperProcess,
    zookeeper: str,
) -> None:
    spool = rig.spool()
    procs = []
    for w in (1, 2):
        p, _ = rig.relocator(
            name=f"r{w}",
            data_dir=rig.tmp_path / f"data{w}",
            spool_dir=spool,
            writer_id=w,
            zookeeper=(zookeeper_server.hosts, zookeeper),
            extra=f"spool_units = {UNITS}",
        )
        procs.append(p.start())
    epoch = int(time.time())
    want = _drop(spool, epoch, rig.dc, 24, 0)

    def check_disjoint() -> list[set[int]]:
        owned = _owned(procs)
        for i, a in enumerate(owned):
            for b in owned[i + 1 :]:
                assert not a & b, f"unit owned twice: {owned}"
        return owned

    # both take a fair share, never the same unit
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        owned = check_disjoint()
        if [len(o) for o in owned] == [UNITS // 2, UNITS // 2]:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"no fair split: {_owned(procs)}")

    # kill one while it works; the other takes everything over
    want += _drop(spool, epoch, rig.dc, 24, 100_000)
    time.sleep(0.3)
    procs[0].kill()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        owned = check_disjoint()
        if owned == [set(range(UNITS))]:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"no takeover: {_owned(procs)}")
    want += _drop(spool, epoch, rig.dc, 8, 200_000)

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(p.suffix == ".srl" for p in spool.iterdir()):
        time.sleep(0.2)
    left = sorted(p.name for p in spool.iterdir() if p.suffix == ".srl")
    assert not left, f"spool files never finished: {left}"
    assert not (spool / ".rejected").exists()
    ids = rig.stored_ids(range(epoch, epoch + 1))
    assert set(ids) == set(want), f"lost {len(set(want) - set(ids))}"
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} events stored twice"

    # the killed one comes back: it re-pushes its own leftovers (same keys), duplicates none
    procs[0].start()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and procs[0].status()["batches"]:
        check_disjoint()
        time.sleep(0.1)
    assert procs[0].status()["batches"] == 0
    assert sorted(rig.stored_ids(range(epoch, epoch + 1))) == sorted(want)
