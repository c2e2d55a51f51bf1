"""The benchmarks' events: a re-export of :mod:`relocator.events` (one generator for the
product, the tests and the benchmarks).

``generate_events(n, seed)`` returns ``n`` deterministic events of the realistic web /
cron / load-balancer mix (~700 bytes each as JSON); see :mod:`relocator.events`.

Run as a script to write them as JSON: ``python bench/events.py --events 20000 > ev.json``.
"""

from __future__ import annotations

import argparse
import json
import sys

from relocator.events import Event, generate_events

__all__ = ["Event", "generate_events"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()
    json.dump(generate_events(args.events, args.seed), sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
