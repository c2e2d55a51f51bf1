"""Python -> Perl: every document our encoders write (protocols 3-5, every compression,
dedupe on and off, with and without a user header) decodes in Perl's Sereal::Decoder,
with and without validate_utf8, to the Perl value the Python value maps to."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from typing import Any

import pytest

from .canon import first_difference, perl_view
from .conftest import IMPLEMENTATIONS
from .corpus import HEADER, corpus
from .perl_runner import run_perl

COMPRESSIONS = {3: ("none", "snappy", "zlib"), 4: ("none", "snappy", "zlib", "zstd")}
COMPRESSIONS[5] = COMPRESSIONS[4]
# Sharing through the Perl wrappers (a PerlRef cycle, one PerlObject used twice): kept
# apart so that a gap there shows as one failing test per implementation.
SHARED_WRAPPERS = ("self_scalar_ref", "shared_object")
OPTION_SETS = [
    (protocol, compression, dedupe, header)
    for protocol, compressions in COMPRESSIONS.items()
    for compression in compressions
    for dedupe in (False, True)
    for header in (False, True)
]


def _option_id(option_set: tuple[int, str, bool, bool]) -> str:
    protocol, compression, dedupe, header = option_set
    dedupe_id = "dedupe" if dedupe else "nodedupe"
    return f"v{protocol}-{compression}-{dedupe_id}-{'hdr' if header else 'nohdr'}"


@dataclass
class Outcome:
    expected: Any  # perl_view of the value
    expected_header: Any
    error: str | None = None  # our encoder raised
    perl: dict[str, Any] | None = None  # Perl's report


@pytest.fixture(scope="session")
def perl_decodings() -> dict[tuple[str, tuple[int, str, bool, bool], str], Outcome]:
    """(implementation, option set, item) -> what Perl made of our document."""
    outcomes: dict[tuple[str, tuple[int, str, bool, bool], str], Outcome] = {}
    frames: dict[str, list[tuple[str, tuple[int, str, bool, bool], str]]] = {}
    lines: list[bytes] = []
    for impl_name in IMPLEMENTATIONS:
        impl = importlib.import_module(impl_name)
        for option_set in OPTION_SETS:
            protocol, compression, dedupe, header = option_set
            for item, value in corpus():
                key = (impl_name, option_set, item)
                outcome = Outcome(perl_view(value), perl_view(HEADER) if header else None)
                outcomes[key] = outcome
                try:
                    data = impl.encode(
                        value,
                        compress=compression,
                        dedupe_strings=dedupe,
                        protocol=protocol,
                        user_header=HEADER if header else None,
                        compress_threshold=0,
                    )
                except Exception as exc:
                    outcome.error = f"{type(exc).__name__}: {exc}"
                    continue
                hexdoc = data.hex()
                if hexdoc not in frames:
                    frames[hexdoc] = []
                    lines.append(f"{len(lines)}\t{hexdoc}\n".encode())
                frames[hexdoc].append(key)
    out = run_perl("python_to_perl.pl", stdin=b"".join(lines))
    hex_by_index = list(frames)
    reports = [json.loads(line) for line in out.splitlines()]
    assert len(reports) == len(hex_by_index), "Perl did not answer for every document"
    for report in reports:
        hexdoc = hex_by_index[int(report["name"])]
        report["hex"] = hexdoc
        for key in frames[hexdoc]:
            outcomes[key].perl = report
    return outcomes


@pytest.mark.parametrize("impl_name", IMPLEMENTATIONS, ids=("default", "pure"))
@pytest.mark.parametrize("option_set", OPTION_SETS, ids=[_option_id(o) for o in OPTION_SETS])
def test_perl_decodes_our_documents(
    perl_decodings: dict[tuple[str, tuple[int, str, bool, bool], str], Outcome],
    impl_name: str,
    option_set: tuple[int, str, bool, bool],
) -> None:
    mine = {k[2]: o for k, o in perl_decodings.items() if k[:2] == (impl_name, option_set)}
    assert len(mine) == len(corpus())
    failures = _failures({k: o for k, o in mine.items() if k not in SHARED_WRAPPERS})
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("impl_name", IMPLEMENTATIONS, ids=("default", "pure"))
def test_perl_decodes_shared_wrappers(
    perl_decodings: dict[tuple[str, tuple[int, str, bool, bool], str], Outcome],
    impl_name: str,
) -> None:
    """A self-referencing PerlRef re-encodes as a back-reference (as Perl writes
    ``$x = \\$x``), and a PerlObject used twice stays one Perl object."""
    mine = {
        f"{_option_id(k[1])} {k[2]}": o
        for k, o in perl_decodings.items()
        if k[0] == impl_name and k[2] in SHARED_WRAPPERS
    }
    assert len(mine) == len(OPTION_SETS) * len(SHARED_WRAPPERS)
    failures = _failures(mine)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:40])


def _failures(outcomes: dict[str, Outcome]) -> list[str]:
    failures: list[str] = []
    for item, o in outcomes.items():
        if o.error is not None:
            failures.append(f"{item}: our encoder raised {o.error}")
            continue
        assert o.perl is not None
        doc = o.perl["hex"][:160]
        if o.perl["error"] is not None:
            failures.append(f"{item}: Perl could not decode: {o.perl['error'].strip()} (doc {doc})")
            continue
        diff = first_difference(o.perl["value"], o.expected)
        if diff:
            failures.append(f"{item}: {diff} (doc {doc})")
        diff = first_difference(o.perl["header"], o.expected_header)
        if diff:
            failures.append(f"{item}: user header {diff} (doc {doc})")
        if o.perl["validate_utf8"] != "same":
            failures.append(f"{item}: with validate_utf8: {o.perl['validate_utf8']} (doc {doc})")
    return failures
