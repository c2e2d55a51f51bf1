"""A corrupt journal record costs that record only (issue 12.1): acknowledged events in
the records after it are replayed and stored when the relocator restarts."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from relocator_rig import Rig

import sereal_codec as sereal
from devnode.testing import free_port
from relocator.journal import Gap, Record, scan_records
from relocator.testing import RelocatorProcess, send_acked, write_config
from relocator.wire import encode_frame

RECORDS = 8
PER_RECORD = 150


def _send_acked(port: int, dc: str, epoch: int) -> None:
    """RECORDS sends of PER_RECORD events on one connection, each acknowledged before
    the next is sent (so each is one journal record)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        acked = 0
        for r in range(RECORDS):
            frames = [
                encode_frame(epoch, dc, "web", "www", sereal.encode({"id": i, "r": r}))
                for i in range(r * PER_RECORD, (r + 1) * PER_RECORD)
            ]
            acked = send_acked(sock, frames, acked=acked)


def test_corrupt_first_record_loses_only_its_events(
    rig: Rig,
) -> None:
    tcp, mport = free_port(), free_port()
    data_dir = rig.tmp_path / "data"

    def config(*, hold: bool) -> Path:
        # hold: nothing is sealed (grace and hold of an hour, one journal segment)
        return write_config(
            rig.tmp_path / "r.toml",
            data_dir=data_dir,
            clusters={"a": rig.devnode.url},
            tcp_port=tcp,
            metrics_port=mport,
            grace_s=3600.0 if hold else 0.2,
            segment_max_s=3600.0 if hold else 0.3,
            extra=f"max_hold_s = {3600.0 if hold else 10.0}",
        )

    proc = RelocatorProcess(config(hold=True), metrics_port=mport, log_path=rig.tmp_path / "r.log")
    rig.relocators.append(proc)
    proc.start()
    epoch = int(time.time())
    _send_acked(tcp, rig.dc, epoch)
    proc.kill()  # kill -9: the acknowledged events are only in the journal

    (segment,) = sorted((data_dir / "journal").glob("*.blk"))
    raw = bytearray(segment.read_bytes())
    records = [r for r in scan_records(bytes(raw)) if isinstance(r, Record)]
    assert [len(r.frames) for r in records] == [PER_RECORD] * RECORDS
    raw[records[0].start + 200] ^= 0x10  # one byte of an event of the first record
    segment.write_bytes(bytes(raw))
    items = list(scan_records(bytes(raw)))
    assert isinstance(items[0], Gap) and len(items) == RECORDS

    proc.config = config(hold=False)
    proc.start()
    want = set(range(PER_RECORD, RECORDS * PER_RECORD))
    ids = rig.wait_stored(range(epoch, epoch + 1), want)
    assert sorted(ids) == sorted(want)  # all 1,050, none twice, none of the bad record
    skipped = records[1].start - 8  # the first record's bytes, header included
    assert f'relocator_journal_skipped_bytes_total{{reason="corrupt"}} {float(skipped)}' in (
        proc.metrics()
    )
    assert "corrupt bytes in segment" in proc.log_text()
