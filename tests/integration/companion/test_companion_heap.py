"""glibc's malloc thresholds of a worker (companion/heap.py), seen from a fresh
interpreter: a process of its own, so no unit test."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Run in a fresh interpreter: the thresholds are the process's, and glibc raises its
# mmap threshold by itself once a mapped block has been freed.
_PROBE = textwrap.dedent(
    """
    import ctypes, sys
    from companion import heap

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    tuned = heap.tune_malloc() if sys.argv[1] == "tuned" else None
    mapped = libc.mallinfo2().hblks
    block = bytearray(3 << 20)  # a chunk's decompressed body is ~1-1.5 MB
    print(tuned, libc.mallinfo2().hblks - mapped)
    """
)


def _probe(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_block_of_a_chunks_size_comes_from_the_arena_once_malloc_is_tuned() -> None:
    assert _probe("default") == "None 1"  # glibc's default: a block of its own, mapped
    assert _probe("tuned") == "True 0"  # under MALLOC_MMAP_THRESHOLD_BYTES: the arena's
