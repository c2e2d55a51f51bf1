"""Cost of the sandbox's seccomp filter per run: sandboxed runs per second with and
without it, and the parent's and children's CPU per run.

Usage: .venv/bin/python bench/sandbox_bench.py [--runs N] [--rounds R] [--events E]

One trivial plugin (``len(events)``) on a chunk of ``--events`` small events, one
child per run (``isolation="substream"``), one child at a time: what is measured is
the fixed cost of a sandboxed run (fork, setup, filter, exit, reap), which the filter
adds to. Rounds alternate with/without so machine load hits both alike; the best
round of each is reported, with the median beside it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from report import emit, figure

from substreams.api import Context, Substream
from substreams.loader import load_file
from substreams.sandbox import run_substreams
from substreams.syscall_filter import program

PLUGIN = """
from substreams import substream

@substream(name="count")
def count(events, ctx):
    return len(events)
"""


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def one_round(sub: Substream, events: list[dict[str, Any]], runs: int, *, syscall_filter: bool):
    """Returns: (runs per second, parent CPU ms per run, children CPU ms per run)."""
    ctx = Context(1_700_000_000, "dc1", "web", "", 0)
    parent0, children0 = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    for _ in range(runs):
        (outcome,) = run_substreams([sub], events, ctx, max_parallel=1,
                                    syscall_filter=syscall_filter)  # fmt: skip
        if not outcome.ok:
            raise SystemExit(f"run failed: {outcome.error}")
    elapsed = time.perf_counter() - start
    parent = (_cpu(resource.RUSAGE_SELF) - parent0) / runs * 1e3
    children = (_cpu(resource.RUSAGE_CHILDREN) - children0) / runs * 1e3
    return runs / elapsed, parent, children


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="runs per round")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of each variant")
    parser.add_argument("--events", type=int, default=3600, help="events in the chunk")
    parser.add_argument("--json", action="store_true", help="headline figures as JSON, last")
    args = parser.parse_args()
    if program() is None:
        raise SystemExit("no seccomp filter on this machine: nothing to compare")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "count.py"
        path.write_text(PLUGIN)
        (sub,) = load_file(path)
    events = [{"i": i, "status": 200, "host": f"h{i % 7}"} for i in range(args.events)]
    results: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    one_round(sub, events, 20, syscall_filter=True)  # warm up: compile, page in
    for _ in range(args.rounds):
        for flag in (False, True):
            results[flag].append(one_round(sub, events, args.runs, syscall_filter=flag))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}, {args.events} events per chunk, "
          f"BPF program {len(program().bpf) // 8} instructions")  # type: ignore[union-attr]  # fmt: skip
    print(f"{'variant':<22}{'runs/s best':>12}{'median':>9}{'parent ms':>11}{'child ms':>10}")
    best = {}
    for flag, label in ((False, "audit hook only"), (True, "audit hook + seccomp")):
        rows = results[flag]
        top = max(rows, key=lambda r: r[0])
        best[flag] = top[0]
        median = statistics.median(r[0] for r in rows)
        print(f"{label:<22}{top[0]:>12.0f}{median:>9.0f}{top[1]:>11.3f}{top[2]:>10.3f}")
    cost_us = (1 / best[True] - 1 / best[False]) * 1e6
    print(f"seccomp cost per run (best rounds): {cost_us:+.0f} us wall")
    if args.json:
        emit(
            [
                figure(
                    "sandboxed runs, audit hook + seccomp",
                    best[True],
                    "runs/s",
                    anchor="audit hook only, same run",
                    anchor_value=best[False],
                ),
                figure("seccomp filter, cost per run", cost_us, "us"),
            ]
        )


if __name__ == "__main__":
    main()
