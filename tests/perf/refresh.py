"""Refresh the codec's instruction-count baseline on purpose.

    .venv/bin/python -m tests.perf.refresh

Counts the workload twice under callgrind, fails unless both runs agree exactly (the
guard relies on it), then writes ``tests/perf/codec_instructions.json``. Commit it with
the change that explains the new counts.
"""

from __future__ import annotations

import sys

from .callgrind import BASELINE, measure, write_baseline


def main() -> int:
    first, second = measure(), measure()
    for step, count in first.instructions.items():
        print(f"{step:<12}{count:>16,}{second.instructions[step]:>16,}")
    if first.instructions != second.instructions:
        print("the two runs differ: the count is not deterministic here", file=sys.stderr)
        return 1
    write_baseline(first)
    print(f"wrote {BASELINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
