"""Type stub of the relocator's compiled frame scanner (relocator/csrc; reference in
relocator/wire.py)."""

from collections.abc import Sequence

def scan_frames(
    buffer: bytes | bytearray | memoryview, max_frame_bytes: int
) -> tuple[int, bytes, list[tuple[bytes, bytes, list[bytes]]], int, int, int, int]: ...
def event_verdicts(documents: Sequence[bytes], max_bytes: int) -> bytes: ...
def frame_positions(offsets: bytes | bytearray | memoryview, base: int) -> bytes: ...
