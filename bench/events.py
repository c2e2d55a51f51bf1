"""The benchmarks' events: a re-export of :mod:`relocator.events` (one generator for the
product, the tests and the benchmarks), and how benchmarks store an epoch of them.

``generate_events(n, seed)`` returns ``n`` deterministic events of the realistic web /
cron / load-balancer mix (~700 bytes each as JSON); see :mod:`relocator.events`.
``store_epoch(riak, epoch, dc, events)`` stores them as a relocator does.

Run as a script to write them as JSON: ``python bench/events.py --events 20000 > ev.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from eventstore.riak import RiakClient
from eventstore.testing import relocated_blobs, store_chunks
from relocator.events import Event, generate_events

__all__ = ["Event", "generate_events", "store_epoch"]


def store_epoch(
    riak: RiakClient, epoch: int, dc: str, events: Sequence[dict[str, Any]]
) -> list[bytes]:
    """Store one epoch-dc as a relocator does: the events grouped by (type, subtype),
    chunked at 500 KB, every chunk first, the metadata last. Returns the stored blobs in
    metadata order."""
    blobs = relocated_blobs(events)
    store_chunks([riak], epoch, dc, blobs)
    return [blob for _, _, blob in blobs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()
    json.dump(generate_events(args.events, args.seed), sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
