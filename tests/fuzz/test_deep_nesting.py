"""Every recursive walker of the codec is stack-safe at every depth it accepts.

Each walker (compiled: decode, JSON transcoding, the splitter's walk, ``split_blob``,
``join_bodies``, the encoder, the Variant parser, the direct Sereal -> Variant walk; and
the pure reference's) runs over deeply nested inputs of every shape in a thread created with
``threading.stack_size(1 << 20)``, in a subprocess (``deep_nesting.py``): a C stack
overflow kills that child with a signal, which fails the test instead of pytest.

* At the cap (``MAX_DEPTH_CAP`` levels, the most any walker accepts): decodes.
* 200,000 levels with ``max_depth`` at the cap: the "too deep" error naming the limit.
* The old documented maximum (``max_depth=10_000``, which crashed such a thread; the
  Variant parser had no cap, so 200,000 there): refused with a ValueError naming the
  cap (the splitter, which takes no ``max_depth``, stops at the cap).
"""

from __future__ import annotations

import re

import pytest
from deep_nesting import PURE_WALKERS, WALKERS, Case, batch, shapes_of

from sereal_codec.limits import MAX_DEPTH_CAP

STACK_KIB = 1024
HOSTILE_DEPTH = 200_000
OLD_MAXIMUM = 10_000

# The "too deep" error of each walker: its class and the limit it names.
TOO_DEEP = {
    "decode": rf"DepthExceeded: nesting deeper than max_depth={MAX_DEPTH_CAP} at byte \d+",
    "project": rf"DepthExceeded: nesting deeper than max_depth={MAX_DEPTH_CAP} at byte \d+",
    "project_keep": (rf"DepthExceeded: nesting deeper than max_depth={MAX_DEPTH_CAP} at byte \d+"),
    "json": rf"DepthExceeded: nesting deeper than max_depth={MAX_DEPTH_CAP} at byte \d+",
    "split": rf"DepthExceeded: nesting deeper than {MAX_DEPTH_CAP} levels at byte \d+",
    "split_blob": rf"NotAnArrayBlob: .*nesting deeper than {MAX_DEPTH_CAP} levels at byte \d+",
    # join_bodies keeps one level for the array it wraps the parts in
    "join": rf"DepthExceeded: part 0: nesting deeper than {MAX_DEPTH_CAP - 1} levels at byte \d+",
    "encode": rf"EncodeDepthExceeded: value nests deeper than max_depth={MAX_DEPTH_CAP}",
    "variant": (
        rf"ValueError: JSON text 0: nesting deeper than max_depth={MAX_DEPTH_CAP} at byte \d+"
    ),
    # the direct Sereal -> Variant walk stops and leaves the body to the JSON path
    "variant_direct": r"LookupError: left to the JSON path",
}
REFUSED = rf"ValueError: max_depth must be (in 0\.\.|1 to ){MAX_DEPTH_CAP}, got \d+"


def cases(walker: str) -> list[tuple[Case, str]]:
    """(case, expected outcome as a regex) for every shape the walker reads."""
    kind = walker.removeprefix("pure_")
    at_cap = MAX_DEPTH_CAP - 1 if kind == "join" else MAX_DEPTH_CAP
    # The splitter takes no max_depth: the old maximum is simply too deep for it.
    old = TOO_DEEP[kind] if kind in ("split", "split_blob") else REFUSED
    out: list[tuple[Case, str]] = []
    for shape in shapes_of(walker):
        out.append(((walker, shape, at_cap, MAX_DEPTH_CAP), "ok"))
        out.append(((walker, shape, HOSTILE_DEPTH, MAX_DEPTH_CAP), TOO_DEEP[kind]))
        if kind == "variant":  # had no cap at all
            out.append(((walker, shape, HOSTILE_DEPTH, HOSTILE_DEPTH), old))
        else:
            out.append(((walker, shape, 2 * OLD_MAXIMUM, OLD_MAXIMUM), old))
    return out


@pytest.mark.parametrize("walker", WALKERS + PURE_WALKERS)
def test_walker_is_stack_safe_in_a_1mib_thread(walker: str) -> None:
    expected = cases(walker)
    outcomes = batch([case for case, _ in expected], STACK_KIB)
    wrong = [
        f"{case}: {outcome}"
        for (case, pattern), outcome in zip(expected, outcomes, strict=True)
        if not re.fullmatch(pattern, outcome)
    ]
    assert not wrong, "\n".join(wrong)
