"""The chaos campaign's corruptions: what each one does to which file, and why a daemon
must come through it (the promise it tests is named with each).

Every corruption is made while its daemon is down (killed -9 first): it stands for what
a crash, a full file system, a careless tool or bit rot leaves behind, read by the next
start. What "corrupt" means here, kind by kind:

``journal_corrupt`` (relocator/DESIGN.md, scenario 15, "a journal record"): one bit
    flipped in one record of the newest journal segment that has records after it. The
    record's frames are "lost by injected journal corruption" (the design gives them
    up); nothing else may go with them.

``relocator_state_corrupt`` (scenarios 2, 20 and LMDB's own promise): one of
    - ``torn_tail``: 1 B - 4 KiB of random bytes appended to the newest journal
      segment: a record being written when the process died (never acknowledged:
      a record is acknowledged after its fdatasync); the replay truncates it;
    - ``torn_record``: a record header whose length runs past the end of the file,
      followed by part of a real record (a write cut short), appended likewise;
    - ``lock_garbage`` / ``lock_truncated``: the state store's ``lock.mdb`` (LMDB's
      reader table, which the first process to open the environment rebuilds; the
      relocator's directory lock makes it that first process) overwritten with random
      bytes of its size, or cut to a random length;
    - ``dirlock_garbage``: the data directory's ``.lock`` file (an ``flock`` target;
      its content, the holder's pid, is informational) overwritten with garbage.
    Nothing acknowledged may be lost, nothing stored twice.

``companion_state_corrupt`` (companion/DESIGN.md, "The auditor" and scenarios 4, 9):
    each regular file the companion keeps across restarts in its state directory (the
    auditor's ``audit/cursors.json`` always, then each of ``dcs/*``, ``disabled/*``,
    ``cluster.json``, ``logged-once`` with probability 1/2) cut to a random length,
    overwritten with random bytes (for the cursor file, half the time bytes that are not
    UTF-8: see ``cursor_not_utf8``), or filled with NUL bytes of its length (what a file system
    that lost its data blocks in a crash shows), and a half-written temporary file
    left beside the cursor file. The design: a corrupt cursor file is moved aside
    with one error and the node starts again from its horizon; markers that do not parse are
    ignored; ``held/``, ``status/`` and ``prometheus/`` are emptied at start. Every
    chunk must still get its results.

``chunk_corrupt`` (shared design, checksums): one bit of a stored chunk flipped through
    the store's HTTP API; it must read as a checksum error, never as other events.

Not in the default campaign (``EXTRA_KINDS``: drawn only when named; bench/README.md,
"chaos.py", issue 24's findings):

``state_store_emptied``: the relocator's ``data.mdb`` cut to 0 bytes. It used to open as a
    new store (batches numbered from 0 again, stored chunks overwritten: acknowledged
    events lost); since the store's identity check the relocator refuses to start with
    one line (``StateStoreLost``), as relocator/DESIGN.md scenario 15 says: the fault is
    then not recovered by design (an operator restores the store or moves the data
    directory aside), so it stays out of the default draw.
``cursor_not_utf8``: ``companion_state_corrupt`` with the cursor file always overwritten
    by random bytes that are not UTF-8 (it ended the companion at every start until
    ``CursorFile.load`` took it as corrupt; now also drawn half the time by
    ``companion_state_corrupt``).
"""

from __future__ import annotations

import contextlib
import os
import random
import zlib
from pathlib import Path

from chaos_load import ID_KEY

import sereal_codec as sereal
from relocator.wire import LENGTH, parse_frame

__all__ = [
    "RELOCATOR_STATE_VARIANTS",
    "corrupt_companion_state",
    "corrupt_relocator_state",
    "empty_state_store",
    "flip_journal_record",
    "journal_records",
]

_JOURNAL_RECORD = 8  # u32 length + u32 crc32, then the block (relocator/journal.py)
RELOCATOR_STATE_VARIANTS = (
    "torn_tail",
    "torn_record",
    "lock_garbage",
    "lock_truncated",
    "dirlock_garbage",
)


def journal_records(path: Path) -> list[tuple[int, int, list[int]]]:
    """The intact records of a journal segment: (start, end, chaos ids of its events),
    read with the record layout of relocator/DESIGN.md; stops at the first bad one."""
    data = path.read_bytes()
    records = []
    pos = 0
    while pos + _JOURNAL_RECORD <= len(data):
        n, crc = LENGTH.unpack_from(data, pos)[0], LENGTH.unpack_from(data, pos + 4)[0]
        block = data[pos + _JOURNAL_RECORD : pos + _JOURNAL_RECORD + n]
        if len(block) != n or zlib.crc32(block) != crc:
            break
        ids, at = [], 0
        while at + LENGTH.size <= len(block):
            (size,) = LENGTH.unpack_from(block, at)
            frame = block[at + LENGTH.size : at + LENGTH.size + size]
            # a frame intake refused, or a producer's range trailer / table: no id
            with contextlib.suppress(Exception):
                ids.append(int(sereal.decode(parse_frame(frame).document)[ID_KEY]))
            at += LENGTH.size + size
        records.append((pos, pos + _JOURNAL_RECORD + n, ids))
        pos += _JOURNAL_RECORD + n
    return records


def _segments(data_dir: Path) -> list[Path]:
    """Journal segments, newest first."""
    return sorted((data_dir / "journal").glob("*.blk"), reverse=True)


def flip_journal_record(data_dir: Path, rng: random.Random) -> tuple[str, list[int]] | None:
    """Flip one bit in a record (not the last) of the newest segment with two records or
    more; (what was done, the chaos ids of the damaged record), None: no such segment."""
    for segment in _segments(data_dir):
        records = journal_records(segment)
        if len(records) < 2:
            continue
        start, end, ids = records[rng.randrange(len(records) - 1)]
        at = rng.randrange(start, end)
        with segment.open("r+b") as f:
            f.seek(at)
            byte = f.read(1)[0]
            f.seek(at)
            f.write(bytes([byte ^ (1 << rng.randrange(8))]))
        return (
            f"{segment.name} offset {at} (record {start}-{end} of {len(records)} "
            f"records, {len(ids)} events)",
            ids,
        )
    return None


def corrupt_relocator_state(data_dir: Path, rng: random.Random) -> str:
    """One of ``RELOCATOR_STATE_VARIANTS`` (module docstring) on a stopped relocator's
    data directory; what was done."""
    variant = rng.choice(RELOCATOR_STATE_VARIANTS)
    segments = _segments(data_dir)
    if variant in ("torn_tail", "torn_record") and not segments:
        variant = "lock_garbage"
    if variant == "torn_tail":
        garbage = rng.randbytes(rng.randint(1, 4096))
        with segments[0].open("ab") as f:
            f.write(garbage)
        return f"torn_tail: {len(garbage)} random bytes appended to {segments[0].name}"
    if variant == "torn_record":
        records = journal_records(segments[0])
        part = b""
        if records:  # the first bytes of a real record, its length promising more
            start, end, _ = records[-1]
            part = segments[0].read_bytes()[start:end][: rng.randint(9, max(9, end - start - 1))]
            part = LENGTH.pack(len(part) + rng.randint(1, 1 << 16)) + part[4:]
        else:
            part = LENGTH.pack(1 << 20) + rng.randbytes(64)
        with segments[0].open("ab") as f:
            f.write(part)
        return f"torn_record: {len(part)} bytes of a cut record appended to {segments[0].name}"
    if variant in ("lock_garbage", "lock_truncated"):
        lock = data_dir / "state" / "lock.mdb"
        size = lock.stat().st_size if lock.exists() else 8192
        if variant == "lock_garbage":
            lock.write_bytes(rng.randbytes(size))
            return f"lock_garbage: state/lock.mdb overwritten with {size} random bytes"
        cut = rng.randrange(size)
        with contextlib.suppress(FileNotFoundError):
            os.truncate(lock, cut)
        return f"lock_truncated: state/lock.mdb cut from {size} to {cut} bytes"
    (data_dir / ".lock").write_bytes(rng.randbytes(rng.randint(1, 64)))
    return "dirlock_garbage: .lock overwritten with random bytes"


def empty_state_store(data_dir: Path) -> str:
    """Cut the relocator's LMDB ``data.mdb`` to 0 bytes (``state_store_emptied``)."""
    path = data_dir / "state" / "data.mdb"
    size = path.stat().st_size
    os.truncate(path, 0)
    return f"state/data.mdb cut from {size} to 0 bytes"


def _damage(path: Path, rng: random.Random, *, text: bool = False) -> str:
    size = path.stat().st_size
    how = rng.choice(("truncated", "garbage", "zeros"))
    if how == "truncated":
        os.truncate(path, rng.randrange(size) if size else 0)
    elif how == "garbage" and text:
        path.write_bytes(bytes(rng.randrange(32, 127) for _ in range(max(size, 16))))
    elif how == "garbage":
        path.write_bytes(rng.randbytes(max(size, 16)))
    else:
        path.write_bytes(b"\0" * max(size, 16))
    return how


def corrupt_companion_state(
    state_dir: Path, rng: random.Random, *, cursor_not_utf8: bool = False
) -> str:
    """Damage a stopped companion's state directory (module docstring); what was done.

    Args:
        cursor_not_utf8: the cursor file's garbage is always random bytes that are not
            UTF-8 (``cursor_not_utf8``); otherwise half the time.
    """
    done = []
    cursor = state_dir / "audit" / "cursors.json"
    if cursor.is_file() and (cursor_not_utf8 or rng.random() < 0.5):
        cursor.write_bytes(b"\xa1" + rng.randbytes(max(cursor.stat().st_size, 16)))
        done.append("audit/cursors.json overwritten with random bytes that are not UTF-8")
    elif cursor.is_file():
        done.append(f"audit/cursors.json {_damage(cursor, rng, text=True)}")
        tmp = cursor.with_name(f".{cursor.name}.tmp")
        tmp.write_bytes(b'{"ams1": {"next": 17')  # a save cut short
    for pattern in ("dcs/*", "disabled/*", "cluster.json", "logged-once"):
        for path in sorted(state_dir.glob(pattern)):
            if path.is_file() and rng.random() < 0.5:
                done.append(f"{path.relative_to(state_dir)} {_damage(path, rng)}")
    return ", ".join(done) or "no state file yet"
