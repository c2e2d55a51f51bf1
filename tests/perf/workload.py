"""The fixed codec workload the instruction-count guard runs under callgrind.

    python tests/perf/workload.py INPUT.pickle

Not a test module: ``callgrind.py`` writes the input (seeded events, their blob, one
document per event) and runs this under valgrind. Each step calls the codec once, right
after :func:`mark` (a tiny compiled call whose exit starts the step's count); the step's
count ends when its last compiled entry function returns (``callgrind.STEPS``). Keep
the order and the calls, or the baseline no longer compares (refresh it on purpose:
``callgrind.py``).
"""

from __future__ import annotations

import gc
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sereal_codec as sereal
from eventstore.chunking import split_blob
from relocator._frames import frame_positions
from relocator.events import WEB_SUBSTREAM_FIELDS
from sereal_codec._sereal import join_bodies
from sereal_codec.projection import compile_fields, project_events

#: Small enough that the blob is cut in a few chunks.
SPLIT_CHUNK_MAX_BYTES = 64 * 1024
#: A projected decode's fields (what a web substream reads, a third of the events' keys).
FIELDS = list(WEB_SUBSTREAM_FIELDS)


def encode(events: list[dict[str, Any]]) -> bytes:
    """As relocators write chunks (and as bench/sereal_bench.py encodes)."""
    return sereal.encode(events, compress="zstd", level=3, dedupe_strings=True, protocol=4)


def refuse(path: tuple[str, ...], key: str) -> LookupError:
    """A strict projection's refusal (never called: the workload reads nothing)."""
    return LookupError(key)


def mark() -> None:
    """The boundary before a step (``callgrind.MARKER``)."""
    frame_positions(b"", 0)


def main(path: str) -> None:
    events, blob, documents = pickle.loads(Path(path).read_bytes())
    tree = compile_fields(FIELDS)
    steps: list[Callable[[], object]] = [
        lambda: encode(events),
        lambda: sereal.decode(blob),
        lambda: sereal.decode_json_lines(blob),
        lambda: sereal.decode_variant_packed(blob),  # the direct walk
        lambda: sereal.decode_variant_packed(blob, via_json=True),  # its reference
        # no compression of the parts: zstd's cost is not the walker's
        lambda: split_blob(blob, chunk_max_bytes=SPLIT_CHUNK_MAX_BYTES, compress=None),
        lambda: join_bodies(documents),
        lambda: sereal.decode(blob, fields=FIELDS),
        # the events narrowed as a substream's are (substreams/child.py), plain and
        # strict (its declared fields enforced: substreams/declared.py)
        lambda: project_events(events, tree),
        lambda: project_events(events, tree, strict=refuse),
    ]
    # The cyclic collector would run wherever allocation counts happen to cross its
    # threshold, moving millions of instructions between steps on unrelated changes.
    gc.collect()
    gc.disable()
    for step in steps:
        mark()
        step()


if __name__ == "__main__":
    main(sys.argv[1])
