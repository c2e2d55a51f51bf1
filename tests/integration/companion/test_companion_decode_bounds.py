"""A chunk that inflates far beyond its stored size is answered, not decoded (issue 12.6).

A real companion (gunicorn, two workers) gets a stored chunk of ~8 KB whose body
decompresses to 250 MB, beside a normal chunk. Every matching substream must get an
``error`` result whose text starts with ``too_large:`` (naming the key, the size and the
cap), the normal chunk an ``ok`` one, and no worker's peak RSS (``VmHWM`` in
/proc/<pid>/status) may grow by anything near the inflated size: a resource bound, not
a timing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from companion.testing import Stack, children_of
from eventstore.blob import DECODED_FLOOR_BYTES, add_postfix, pack_blob
from eventstore.sereal.testing import inflating_document
from eventstore.testing import store_chunks
from relocator.events import generate_events
from substreams.examples import event_counts

pytestmark = pytest.mark.integration

EPOCH = 1_700_000_500
INFLATED = 250_000_000


def peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


def test_a_chunk_inflating_to_250_mb_gets_too_large_results_and_no_worker_grows(
    stack_factory: Callable[..., Stack],
) -> None:
    source = Path(event_counts.__file__).read_text()
    stack = stack_factory(plugins={"event_counts.py": source})
    master = stack.companion.pid
    assert master is not None
    deadline = time.monotonic() + 20
    while len(workers := children_of(master)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # gunicorn forks its workers one after the other
    assert len(workers) == 2
    before = {pid: peak_rss_bytes(pid) for pid in workers}

    bomb = add_postfix(inflating_document(INFLATED))
    assert len(bomb) < 10_000
    normal = pack_blob([e for e in generate_events(300, seed=3) if e["type"] == "web"])
    blobs = [("web", "main", bomb), ("web", "main", normal)]
    keys = store_chunks([stack.riak], EPOCH, "dc1", blobs)
    results = stack.wait_results("event_counts", keys)

    refused = results[keys[0]]
    assert refused.status == "error"
    assert refused.error is not None and refused.error.startswith("too_large: "), refused.error
    assert keys[0].format() in refused.error
    assert str(INFLATED) in refused.error and str(DECODED_FLOOR_BYTES) in refused.error
    assert results[keys[1]].status == "ok", results[keys[1]].error

    grown = {pid: peak_rss_bytes(pid) - before[pid] for pid in workers}
    assert max(grown.values()) < 64 * 2**20, grown  # the body alone would be 250 MB
