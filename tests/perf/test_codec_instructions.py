"""The codec's instruction-count guard: each path of the compiled core on a fixed input
must not cost more than 10% over the committed baseline (callgrind.py says how it is
counted and how to refresh the baseline on purpose)."""

from __future__ import annotations

import importlib.util

import pytest

from .callgrind import (
    Measurement,
    describe,
    environment,
    load_baseline,
    measure,
    not_comparable,
    regressions,
)

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("sereal_codec._sereal") is None,
        reason="compiled core not built; tests/unit/sereal_codec/test_core.py "
        "test_extension_is_built fails unless that was intended",
    ),
]


def test_codec_instructions_within_baseline() -> None:
    baseline = load_baseline()
    if why := not_comparable(baseline, environment()):
        pytest.skip(why)
    measured = measure()
    problems = regressions(baseline, measured)
    assert not problems, "\n".join([*problems, "", describe(baseline, measured)])


def test_a_step_over_the_tolerance_is_a_regression() -> None:
    baseline = {"instructions": {"decode": 1000, "encode": 1000}}
    counts = Measurement({"decode": 1101, "encode": 1100}, "x", {})
    (problem,) = regressions(baseline, counts)
    assert problem.startswith("decode: 1,101 instructions, baseline 1,000 (+10.1%")
