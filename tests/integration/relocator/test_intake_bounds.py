"""Bounded cost per input (issue 12.6): an ~8 KB frame whose Sereal body inflates to
250 MB, and events that are not hashes, are refused by a real relocator process,
counted by reason, without its memory growing; the events beside them are stored."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import zstandard
from relocator_rig import Rig

import sereal_codec as sereal
from relocator.testing import RelocatorProcess, send_acked, stored_events
from relocator.wire import encode_frame
from sereal_codec import compression

INFLATED = 250 * 1024 * 1024


def _inflating_document(*, as_dict: bool) -> bytes:
    """A zstd Sereal document of ~8 KB whose body is a 250 MB string of zero bytes (in
    a one-key hash when ``as_dict``), compressed in 1 MiB steps so that this test never
    holds the 250 MB itself."""
    head = (b"\x51\x63big" if as_dict else b"") + b"\x26" + compression.varint_bytes(INFLATED)
    z = zstandard.ZstdCompressor(write_content_size=True).compressobj(size=len(head) + INFLATED)
    parts = [z.compress(head)]
    zeros = bytes(1 << 20)
    parts += [z.compress(zeros) for _ in range(INFLATED >> 20)]
    parts.append(z.flush())
    frame = b"".join(parts)
    return b"=\xf3rl" + bytes((0x44, 0)) + compression.varint_bytes(len(frame)) + frame


def _peak_rss_kib(pid: int) -> int:
    """The process's peak resident set size so far (VmHWM): a 250 MB body inflated and
    freed again between two samples of VmRSS would not show there."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


def _send(port: int, frames: list[bytes]) -> None:
    """Send frames on one connection and wait until all are acknowledged (handled)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        send_acked(sock, frames)


def _dropped(proc: RelocatorProcess, reason: str) -> float:
    for line in proc.metrics().splitlines():
        if line.startswith(f'relocator_events_dropped_total{{reason="{reason}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_inflating_frames_and_non_dicts_are_refused_with_bounded_memory(
    rig: Rig,
) -> None:
    proc, tcp = rig.relocator()
    proc.start()
    assert proc.pid is not None
    bomb, bomb_dict = _inflating_document(as_dict=False), _inflating_document(as_dict=True)
    assert len(bomb) < 9000 and len(bomb_dict) < 9000
    epoch = int(time.time())

    def frame(doc: bytes) -> bytes:
        return encode_frame(epoch, rig.dc, "web", "www", doc)

    # warm up (imports, threads, first chunk), then measure around the hostile input
    _send(tcp, [frame(sereal.encode({"id": -1}))])
    before = _peak_rss_kib(proc.pid)
    _send(
        tcp,
        [
            frame(sereal.encode({"id": 0})),
            frame(bomb),
            frame(bomb_dict),
            frame(sereal.encode({"id": 1})),
            frame(bomb_dict),
            frame(bomb),
            frame(sereal.encode("a string")),
            frame(sereal.encode([1, 2])),
            frame(sereal.encode(3)),
            frame(sereal.encode(["hidden in zstd"] * 50, compress="zstd")),
            frame(sereal.encode({"id": 2, "pad": "z" * 2000}, compress="zstd")),
        ],
    )
    want = {-1, 0, 1, 2}
    deadline = time.monotonic() + 30
    while True:
        events, unreadable = stored_events(rig.riak, rig.dc, range(epoch, epoch + 1))
        assert not unreadable
        ids = [e["id"] for e in events if isinstance(e, dict) and "id" in e]
        if set(ids) >= want or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    grown_mib = (_peak_rss_kib(proc.pid) - before) / 1024
    assert grown_mib < 100, f"peak RSS grew by {grown_mib:.0f} MiB"
    assert [e for e in events if not isinstance(e, dict) or "id" not in e] == []
    assert sorted(ids) == sorted(want)  # the neighbours, each once
    assert _dropped(proc, "too_large") == 4
    assert _dropped(proc, "not_a_dict") == 4  # three at intake, one once opened
    assert "too_large" in proc.log_text() and "not_a_dict" in proc.log_text()
