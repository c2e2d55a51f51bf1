"""A chunk that inflates far beyond its stored size is answered, not decoded (issue 12.6).

A real companion (gunicorn, two workers) gets a stored chunk of ~8 KB whose body
decompresses to 250 MB, beside a normal chunk. Every matching substream must get an
``error`` result whose text starts with ``too_large:`` (naming the key, the size and the
cap: the size was refused from the header, before anything was decompressed; a child
that had tried would have hit the sandbox's memory limit and given another error), the
normal chunk an ``ok`` one, and no worker's peak RSS (``VmHWM`` in /proc/<pid>/status)
may grow by anything near the inflated size: a resource bound, not a timing. (The
decode runs in the children of each worker's fork server; the RSS check keeps any
decode out of the workers.)

The same for a chunk whose body is within the byte cap but made of 16 million empty
hashes (1 byte each, ~72 bytes each decoded: over 1 GB): the decoder's object budget
(``DecodeLimits.max_decoded_objects``) stops it, with the same ``too_large:`` result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from companion.testing import Stack, children_of
from eventstore.blob import DECODED_FLOOR_BYTES, MAX_DECODED_OBJECTS, add_postfix, pack_blob
from eventstore.testing import store_chunks
from relocator.events import generate_events
from sereal_codec.document import wrap_body
from sereal_codec.testing import inflating_document, object_bomb_body
from substreams.examples import event_counts

EPOCH = 1_700_000_500
INFLATED = 250_000_000


def peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


def started(stack_factory: Callable[..., Stack]) -> tuple[Stack, list[int]]:
    """A companion running ``event_counts``, and its two gunicorn workers."""
    source = Path(event_counts.__file__).read_text()
    stack = stack_factory(plugins={"event_counts.py": source})
    master = stack.companion.pid
    assert master is not None
    deadline = time.monotonic() + 20
    while len(workers := children_of(master)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # gunicorn forks its workers one after the other
    assert len(workers) == 2
    return stack, workers


def test_a_chunk_inflating_to_250_mb_gets_too_large_results_and_no_worker_grows(
    stack_factory: Callable[..., Stack],
) -> None:
    stack, workers = started(stack_factory)
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


def test_a_chunk_of_16_million_empty_hashes_gets_too_large_results_and_bounded_growth(
    stack_factory: Callable[..., Stack],
) -> None:
    stack, workers = started(stack_factory)
    before = {pid: peak_rss_bytes(pid) for pid in workers}

    body = object_bomb_body("empty_hashes", 16_000_000)
    assert len(body) < DECODED_FLOOR_BYTES  # within the byte cap of any chunk
    bomb = add_postfix(wrap_body(body, compress="zstd"))
    assert len(bomb) < 100_000
    del body
    normal = pack_blob([e for e in generate_events(300, seed=4) if e["type"] == "web"])
    blobs = [("web", "main", bomb), ("web", "main", normal)]
    keys = store_chunks([stack.riak], EPOCH + 1, "dc1", blobs)
    results = stack.wait_results("event_counts", keys)

    refused = results[keys[0]]
    assert refused.status == "error"
    assert refused.error is not None and refused.error.startswith("too_large: "), refused.error
    assert keys[0].format() in refused.error and str(MAX_DECODED_OBJECTS) in refused.error
    assert results[keys[1]].status == "ok", results[keys[1]].error

    # The decoder stops at the budget: ~2 million dicts (~150 MB) and the 16 MB body,
    # where decoding them all would take ~1.2 GB.
    grown = {pid: peak_rss_bytes(pid) - before[pid] for pid in workers}
    assert max(grown.values()) < 256 * 2**20, grown
