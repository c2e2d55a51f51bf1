"""Throughput of the blob checksum (xxh3_64) against zlib.crc32 as a reference.

Usage: .venv/bin/python bench/checksum_bench.py [--size-bytes N] [--seconds S]
Prints GB/s (10**9 bytes per second) per algorithm over a 400 KB value (a typical chunk),
and exits non-zero if the blob checksum verifies slower than 1 GB/s.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import zlib
from collections.abc import Callable

import xxhash
from report import emit, figure

from eventstore.blob import add_postfix, verify_postfix

MIN_GB_S = 1.0


def rate_gb_s(fn: Callable[[], object], size_bytes: int, seconds: float) -> float:
    """Best-of-5 bytes per second of ``fn`` over ``size_bytes``, in GB/s."""
    best = 0.0
    for _ in range(5):
        n = 0
        start = time.perf_counter()
        deadline = start + seconds / 5
        while True:
            fn()
            n += 1
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, n * size_bytes / (now - start) / 1e9)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-bytes", type=int, default=400_000)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--json", action="store_true", help="headline figures as JSON, last")
    args = parser.parse_args()
    data = os.urandom(args.size_bytes)
    blob = add_postfix(data)
    rows = [
        (
            "xxh3_64 (raw digest)",
            rate_gb_s(lambda: xxhash.xxh3_64_intdigest(data), len(data), args.seconds),
        ),
        (
            "verify_postfix (xxh3_64)",
            rate_gb_s(lambda: verify_postfix(blob, "k"), len(data), args.seconds),
        ),
        ("zlib.crc32 (reference)", rate_gb_s(lambda: zlib.crc32(data), len(data), args.seconds)),
    ]
    print(f"value size: {args.size_bytes} bytes")
    print(f"{'algorithm':<28} {'GB/s':>8}")
    for name, gbs in rows:
        print(f"{name:<28} {gbs:>8.2f}")
    verify = rows[1][1]
    if args.json:
        emit(
            [
                figure(
                    "blob checksum, verify_postfix (xxh3_64)",
                    verify,
                    "GB/s",
                    anchor="zlib.crc32, same run",
                    anchor_value=rows[2][1],
                    target=f">= {MIN_GB_S} GB/s",
                )
            ]
        )
    if verify < MIN_GB_S:
        print(
            f"FAIL: verify_postfix at {verify:.2f} GB/s is below {MIN_GB_S} GB/s", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
