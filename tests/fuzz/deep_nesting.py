"""Deeply nested inputs for every recursive walker, run in a thread of a given stack size.

Used two ways:

* by ``test_deep_nesting.py``, which runs :func:`main` in a subprocess (a stack overflow
  is a signal that kills the process: it must end a child, never pytest itself);
* by hand, to measure a walker's C stack cost per nesting level (the numbers in
  ``sereal_codec/DESIGN.md``, "Stack")::

      .venv/bin/python tests/fuzz/deep_nesting.py measure

Child protocol: ``deep_nesting.py batch STACK_KIB CASES_JSON`` runs each case
``[walker, shape, depth, max_depth]`` in a new thread with that stack and prints one
line per case, ``ok`` or the exception's class name and message; a crash is a signal.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

# One nesting level of each shape, as the decoder counts levels (DESIGN.md, "Depth").
# The last item of a document is POS_1.
BODY_LEVELS: dict[str, list[bytes]] = {
    "arrayref": [b"\x41"],  # ARRAYREF_1
    "refn": [b"\x28"],  # REFN -> PerlRef
    "refn_tracked": [b"\xa8"],  # REFN|F: the PerlRef is made and registered first
    "weaken_tracked": [b"\xb0"],  # WEAKEN|F: the positions pile up on the track list
    "refn_array": [b"\x28\x2b\x01"],  # REFN ARRAY 1: one level
    "array": [b"\x2b\x01"],  # ARRAY 1
    "hashref": [b"\x51\x61k"],  # HASHREF_1 "k"
    "hash_tracked": [b"\x28\xaa\x01\x61k"],  # REFN HASH|F 1 "k"
    "object": [b"\x2c\x61C"],  # OBJECT "C" <value>
    "refn_hash": [b"\x28\x2a\x01\x61k"],  # REFN HASH 1 "k"
    "refn_array_tracked": [b"\x28\xab\x01"],  # REFN ARRAY|F 1
    "weaken_refn_array": [b"\xb0", b"\x28\x2b\x01"],  # WEAKEN|F, REFN ARRAY 1
    "object_refn_hash": [b"\x2c\x61C", b"\x28\xaa\x01\x61k"],  # OBJECT "C" REFN HASH|F
    "object_freeze": [b"\x32\x61C"],  # OBJECT_FREEZE "C" <value>
    "mixed": [b"\x41", b"\x28", b"\x51\x61k", b"\x30", b"\x2c\x61C", b"\x28\x2b\x01", b"\xa8"],
}

ENCODE_SHAPES = ("list", "tuple", "dict", "perlref", "perlobject", "shared", "mixed")

JSON_SHAPES = {"array": (b"[", b"]"), "object": (b'{"k":', b"}")}

# project: a projected decode skipping every key; project_keep: keeping key "k" at
# every level (a projection tree as deep as the cap allows).
WALKERS = (
    "decode", "json", "split", "split_blob", "join", "encode", "variant", "project",
    "project_keep", "variant_direct",
)  # fmt: skip
PURE_WALKERS = (
    "pure_decode", "pure_json", "pure_encode", "pure_variant", "pure_project",
    "pure_project_keep",
)  # fmt: skip


def shapes_of(walker: str) -> list[str]:
    """The input shapes that exercise ``walker``."""
    kind = walker.removeprefix("pure_")
    if kind == "encode":
        return list(ENCODE_SHAPES)
    if kind == "variant":
        return list(JSON_SHAPES)
    if kind == "variant_direct":  # the shapes it walks (the others: the JSON path's)
        return [s for s in BODY_LEVELS if not any(x in s for x in ("weaken", "object", "mixed"))]
    return list(BODY_LEVELS)


def body(shape: str, depth: int) -> bytes:
    """A body nesting ``depth`` levels deep (the decoder's count) around POS_1."""
    levels = BODY_LEVELS[shape]
    return b"".join(levels[i % len(levels)] for i in range(depth)) + b"\x01"


def array_body(shape: str, depth: int) -> bytes:
    """A body whose top-level array holds one element; ``depth`` levels in all."""
    return b"\x41" + body(shape, depth - 1)


def value(shape: str, depth: int) -> Any:
    """A Python value nesting ``depth`` levels, as the encoder counts them."""
    from sereal_codec.types import PerlObject, PerlRef

    wraps: dict[str, Callable[[Any], Any]] = {
        "list": lambda v: [v],
        "tuple": lambda v: (v,),
        "dict": lambda v: {"k": v},
        "perlref": PerlRef,
        "perlobject": lambda v: PerlObject("C", [v]),  # two levels: OBJECT, the list
        "shared": lambda v: [v, v],  # second occurrence: a REFP
    }
    order = [wraps[shape]] if shape != "mixed" else [wraps[k] for k in sorted(wraps)]
    v: Any = 1
    level, i = 0, 0
    while level < depth:
        wrap = order[i % len(order)]
        i += 1
        cost = 2 if wrap is wraps["perlobject"] else 1
        if level + cost > depth:
            wrap, cost = wraps["list"], 1
        v = wrap(v)
        level += cost
    return v


def json_text(shape: str, depth: int) -> bytes:
    opening, closing = JSON_SHAPES[shape]
    return opening * depth + b"1" + closing * depth


def run(walker: str, shape: str, depth: int, max_depth: int) -> None:
    """Run one walker over a ``depth``-deep input with ``max_depth``; raises what it raises."""
    from sereal_codec import _sereal
    from sereal_codec.pure import backend as pure

    core: Any = pure if walker.startswith("pure_") else _sereal
    walker = walker.removeprefix("pure_")
    if walker == "decode":
        data = body(shape, depth)
        core.decode_body(data, 0, len(data), -1, 0, max_depth)
    elif walker in ("project", "project_keep"):
        from sereal_codec.limits import MAX_DEPTH_CAP

        tree: dict[str, Any] = {}
        node = tree
        for _ in range(MAX_DEPTH_CAP - 1 if walker == "project_keep" else 0):
            node["k"] = node = {}
        data = array_body(shape, depth)
        core.decode_body(data, 0, len(data), -1, 0, max_depth, -1, tree)
    elif walker == "json":
        data = array_body(shape, depth)
        core.array_to_json_lines(data, 0, len(data), -1, 0, max_depth)
    elif walker == "split":
        data = array_body(shape, depth)
        core.array_layout(data, 0, len(data), -1)
        core.extract_array(data, 0, len(data), -1, 0, 1)
    elif walker == "split_blob":  # the public path: document, decompression, postfix
        from eventstore.blob import add_postfix
        from eventstore.chunking import split_blob
        from sereal_codec.document import wrap_body

        doc = wrap_body(array_body(shape, depth), compress="zstd", compress_threshold=0)
        split_blob(add_postfix(doc))
    elif walker == "join":
        data = body(shape, depth)
        core.join_bodies([(data, 0, len(data), -1)], max_depth=max_depth)
    elif walker == "encode":
        core.encode_body(value(shape, depth), True, max_depth)
    elif walker == "variant":
        text = json_text(shape, depth)
        offsets = (0).to_bytes(8, sys.byteorder) + len(text).to_bytes(8, sys.byteorder)
        core.json_to_variant_packed(text, offsets, max_depth)
    elif walker == "variant_direct":  # None: it leaves the body to the JSON path
        data = array_body(shape, depth)
        if core.array_to_variant_packed(data, 0, len(data), -1, 0, max_depth) is None:
            raise LookupError("left to the JSON path")
    else:
        raise ValueError(f"unknown walker {walker!r}")


def in_thread(stack_bytes: int, work: Callable[[], None]) -> str:
    """Run ``work`` in a new thread with a ``stack_bytes`` stack: "ok" or the error."""
    outcome = ["did not finish"]

    def target() -> None:
        try:
            work()
            outcome[0] = "ok"
        except Exception as e:  # reported to the parent as text
            outcome[0] = f"{type(e).__name__}: {e}"

    threading.stack_size(stack_bytes)
    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    return outcome[0]


def child(walker: str, shape: str, depth: int, stack_kib: int, max_depth: int) -> str:
    """Run one case in a subprocess: its outcome line, or ``signal N``."""
    return batch([(walker, shape, depth, max_depth)], stack_kib)[0]


Case = tuple[str, str, int, int]  # walker, shape, depth, max_depth


def batch(cases: list[Case], stack_kib: int) -> list[str]:
    """Run cases one after the other in one subprocess, each in a fresh thread with a
    ``stack_kib`` stack. Returns one outcome per case: ``ok``, ``<Error>: <message>``,
    or, for the case that crashed the process and every case after it, ``signal N``."""
    proc = subprocess.run(
        [sys.executable, __file__, "batch", str(stack_kib), json.dumps(cases)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": _ROOT},
        check=False,
    )
    lines = proc.stdout.splitlines()
    if proc.returncode < 0:
        return lines + [f"signal {-proc.returncode}"] * (len(cases) - len(lines))
    if proc.returncode != 0 or len(lines) != len(cases):
        raise RuntimeError(f"child failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return lines


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def min_stack_kib(walker: str, shape: str, depth: int) -> int:
    """Smallest thread stack (KiB, 4 KiB steps) in which the walker survives ``depth``."""
    lo, hi = 32, 64 * 1024  # lo crashes (or is the minimum), hi survives
    if child(walker, shape, depth, lo, depth + 1).startswith(("ok", "Depth", "Encode")):
        return lo
    while hi - lo > 4:
        mid = (lo + hi) // 2 // 4 * 4
        if child(walker, shape, depth, mid, depth + 1).startswith("signal"):
            lo = mid
        else:
            hi = mid
    return hi


def measure(walkers: list[str], low: int, high: int) -> dict[str, dict[str, float]]:
    """Bytes of stack per level (slope between two depths) for each walker and shape."""
    out: dict[str, dict[str, float]] = {}
    for walker in walkers:
        for shape in shapes_of(walker):
            a, b = min_stack_kib(walker, shape, low), min_stack_kib(walker, shape, high)
            per_level = (b - a) * 1024 / (high - low)
            out.setdefault(walker, {})[shape] = round(per_level, 1)
            print(f"{walker:12} {shape:15} {a:6} KiB @{low}  {b:6} KiB @{high}  "
                  f"{per_level:7.1f} B/level", flush=True)  # fmt: skip
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["batch"]:
        stack = int(argv[1]) * 1024
        for case in json.loads(argv[2]):
            outcome = in_thread(stack, functools.partial(run, *case))
            print(outcome.replace("\n", " ")[:500], flush=True)
        return 0
    if argv[:1] == ["measure"]:
        walkers = argv[1:] or list(WALKERS)
        result = measure(walkers, 300, 900)
        print(json.dumps(result, indent=1))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
