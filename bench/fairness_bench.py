"""Fairness: what a set of hostile plugins costs a well-behaved one beside it (issue 13.2).

A real companion (``companion.testing.start_stack``: devnode + hook + gunicorn
companion) with the companion's default settings (``max_wait_s``, ``disable_after``,
workers, threads, isolation) runs one good plugin beside the hostile set: an infinite
loop, a sleep that swallows SIGALRM, a 10 GB list, ``os._exit``, a segfault, an
exception, a 100 MB result, 50 forks, a socket PUT into the store and a file write.
``--chunks`` small chunks are written in epochs of ``--per-epoch`` chunks, one epoch
every ``--interval-s`` seconds; then it waits until every chunk has a result of every
plugin and prints:

- the good plugin's ok rate (and its other results, by status and reason);
- each hostile plugin's results by status (and kind, read from the error text);
- shed results by reason (overload vs quarantine);
- the companion's CPU seconds (its gunicorn master, workers and their reaped sandboxed
  children, from /proc) and the children's CPU by plugin (the companion's own
  ``companion_substream_cpu_seconds_total``).

``--quarantine on|off`` sets the companion's ``quarantine`` setting (off: the old
scheduling, every plugin of a chunk in one shared child); ``both`` runs the two one
after the other on the same chunks; ``default`` leaves it unset (for code without it).

    .venv/bin/python bench/fairness_bench.py [--chunks 60] [--per-epoch 6]
        [--interval-s 0.5] [--quarantine both|on|off|default] [--hostile-timeout-s 1.0]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from companion.testing import Stack, hostile_plugins, start_stack
from eventstore.names import ChunkKey
from substreams.results import ResultRecord

sys.path.insert(0, str(Path(__file__).parent))
from companion_bench import tree_cpu_s  # the bench directory, added above

GOOD = """
from substreams import substream

@substream(name="good", types=["t"])
def good(events, ctx):
    return {"n": len(events), "sum": sum(e.get("i", 0) for e in events)}
"""


HOSTILE_NAMES = (
    "h_loop", "h_sleep", "h_10gb", "h_exit", "h_segv",
    "h_raise", "h_100mb", "h_forks", "h_put", "h_write",
)  # fmt: skip


def plugin_sources(timeout_s: float) -> dict[str, str]:
    return {"good.py": GOOD, "hostile.py": hostile_plugins(timeout_s)}


def why(record: ResultRecord) -> str:
    """A result's status and the first words of its error (kind, shed reason)."""
    if record.status == "ok":
        return "ok"
    text = (record.error or "").replace("\n", " ")
    if record.status == "shed":
        # "shed: overload: queue full", "shed: quarantined: ...": up to the second colon
        return "shed: " + text.removeprefix("shed: ").split(":")[0]
    if "disabled" in text:
        return f"{record.status}: disabled"
    return f"{record.status}: {text.split(':')[0]}"


def substream_cpu_s(stack: Stack) -> dict[str, float]:
    """The children's CPU seconds by plugin, from the companion's /metrics."""
    status, body = stack.companion.request("GET", "/metrics")
    if status != 200:
        return {}
    cpu: dict[str, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        if family.name == "companion_substream_cpu_seconds":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    name = sample.labels["substream"]
                    cpu[name] = cpu.get(name, 0.0) + sample.value
    return cpu


def run(args: argparse.Namespace, quarantine: str) -> dict[str, Any]:
    companion: dict[str, Any] = {}
    if quarantine != "default":
        companion["quarantine"] = quarantine == "on"
    with tempfile.TemporaryDirectory(prefix="fairness-bench-") as tmp:
        stack = start_stack(
            Path(tmp) / "stack",
            plugins=plugin_sources(args.hostile_timeout_s),
            companion={
                **companion,
                # the production defaults, not the test stack's faster polling
                "reload_interval_s": 1.0,
                "status_interval_s": 1.0,
            },
        )
        try:
            return measure(args, stack, quarantine)
        finally:
            stack.stop()


def measure(args: argparse.Namespace, stack: Stack, quarantine: str) -> dict[str, Any]:
    pid = stack.companion.pid or 0
    cpu0, t0 = tree_cpu_s(pid), time.monotonic()
    keys: list[ChunkKey] = []
    epoch = 1_800_000_000
    while len(keys) < args.chunks:
        n = min(args.per_epoch, args.chunks - len(keys))
        chunks = {("t", "", c): [{"i": i, "c": c} for i in range(50)] for c in range(n)}
        keys += stack.write_epoch(epoch, "dc1", chunks)
        epoch += 1
        time.sleep(args.interval_s)
    names = ("good", *HOSTILE_NAMES)
    results: dict[str, dict[ChunkKey, ResultRecord]] = {}
    for name in names:
        results[name] = stack.wait_results(name, keys, timeout_s=120.0)
    wall_s = time.monotonic() - t0
    cpu_s = tree_cpu_s(pid) - cpu0
    by_plugin = substream_cpu_s(stack)
    alive = stack.companion.request("GET", "/healthz")[0] == 200
    good = collections.Counter(why(r) for r in results["good"].values())
    ok = good.get("ok", 0)
    print(
        f"quarantine {quarantine}: {len(keys)} chunks in epochs of {args.per_epoch} every "
        f"{args.interval_s} s, hostile loops' timeout_s {args.hostile_timeout_s}; "
        f"load {os.getloadavg()[0]:.2f}"
    )
    print(f"  good: ok {ok}/{len(keys)} = {ok / len(keys):.1%}  {dict(good)}")
    shed: collections.Counter[str] = collections.Counter()
    for name in HOSTILE_NAMES:
        got = collections.Counter(why(r) for r in results[name].values())
        print(f"  {name:8} {dict(sorted(got.items()))}  CPU {by_plugin.get(name, 0.0):.2f} s")
    for name in names:
        shed.update(why(r) for r in results[name].values() if r.status == "shed")
    hostile_cpu = sum(by_plugin.get(n, 0.0) for n in HOSTILE_NAMES)
    print(f"  shed results by reason: {dict(shed) or 'none'}")
    print(
        f"  companion CPU {cpu_s:.2f} s (master, workers, children) in {wall_s:.1f} s; "
        f"children of the hostile plugins {hostile_cpu:.2f} s, of the good one "
        f"{by_plugin.get('good', 0.0):.2f} s; healthy {alive}"
    )
    return {"ok": ok, "chunks": len(keys), "cpu_s": cpu_s, "hostile_cpu_s": hostile_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=60)
    parser.add_argument("--per-epoch", type=int, default=6)
    parser.add_argument("--interval-s", type=float, default=0.5)
    parser.add_argument("--hostile-timeout-s", type=float, default=1.0)
    parser.add_argument("--quarantine", choices=["both", "on", "off", "default"], default="both")
    args = parser.parse_args()
    modes = ["off", "on"] if args.quarantine == "both" else [args.quarantine]
    for mode in modes:
        run(args, mode)


if __name__ == "__main__":
    main()
