"""Perl -> Python: every document Perl's Sereal writes decodes, with both of our
implementations and in every ``binary=`` mode, to what Perl's own decoder makes of it."""

from __future__ import annotations

from types import ModuleType

import pytest

from .canon import canon_decoded, first_difference, project_perl
from .conftest import PerlCorpus, PerlDoc

# What perl/perl_to_python.pl writes: (protocol, compression, dedupe, user header).
# Zlib and zstd exist from protocol 3 in Perl's encoder (the spec says zstd is v4, but
# Perl 5.x writes it at v3 too, so we must read it); user headers from protocol 2;
# "snappy_legacy" is protocol 1's non-incremental Snappy framing (document type 1).
COMPRESSIONS = {
    1: ("none", "snappy", "snappy_legacy"),
    2: ("none", "snappy"),
    3: ("none", "snappy", "zlib", "zstd"),
    4: ("none", "snappy", "zlib", "zstd"),
    5: ("none", "snappy", "zlib", "zstd"),
}
OPTION_SETS = [
    (protocol, compression, dedupe, header)
    for protocol, compressions in COMPRESSIONS.items()
    for compression in compressions
    for dedupe in (False, True)
    for header in ((False, True) if protocol >= 2 else (False,))
]
BINARY_MODES = ("utf8", "latin1", "bytes")
# A blessed value reached a second time (Perl writes REFP to the blessed referent): kept
# apart so that this one known gap shows as one failing test, not one per option set.
SHARED_BLESSED = ("blessed_shared", "shared_booleans")
# Header.compression that decode_header must report: Perl's SRL_SNAPPY is the
# incremental framing at every protocol; "snappy" is protocol 1's whole-body framing.
# Perl leaves a body uncompressed when compressing would not shrink it.
HEADER_COMPRESSION = {
    "none": "none",
    "snappy": "snappy_incr",
    "snappy_legacy": "snappy",
    "zlib": "zlib",
    "zstd": "zstd",
}


def _option_id(option_set: tuple[int, str, bool, bool]) -> str:
    protocol, compression, dedupe, header = option_set
    dedupe_id = "dedupe" if dedupe else "nodedupe"
    return f"v{protocol}-{compression}-{dedupe_id}-{'hdr' if header else 'nohdr'}"


@pytest.mark.parametrize("option_set", OPTION_SETS, ids=[_option_id(o) for o in OPTION_SETS])
def test_decode_perl_documents(
    codec: ModuleType, perl_corpus: PerlCorpus, option_set: tuple[int, str, bool, bool]
) -> None:
    docs = [d for d in perl_corpus.select(*option_set) if d.item not in SHARED_BLESSED]
    assert len(docs) >= 30, f"Perl wrote only {len(docs)} documents for {option_set}"
    failures = _mismatches(codec, docs)
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures[:40])


def test_decode_perl_shared_blessed(codec: ModuleType, perl_corpus: PerlCorpus) -> None:
    """Every reference to a blessed referent is the object (JSON::PP::true used twice
    is True twice), in every option set."""
    docs = [d for d in perl_corpus.docs if d.item in SHARED_BLESSED]
    assert len(docs) == len(SHARED_BLESSED) * len(OPTION_SETS)
    failures = _mismatches(codec, docs)
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures[:40])


def _mismatches(codec: ModuleType, docs: list[PerlDoc]) -> list[str]:
    failures: list[str] = []
    for doc in docs:
        for mode in BINARY_MODES:
            try:
                got = canon_decoded(codec.decode(doc.data, binary=mode))
            except Exception as exc:  # report every document, not just the first
                failures.append(f"{doc.item} [{mode}]: {type(exc).__name__}: {exc}")
                continue
            diff = first_difference(got, project_perl(doc.value, mode))
            if diff:
                failures.append(
                    f"v{doc.protocol} {doc.compression} {doc.item} [{mode}]: {diff}"
                    f"  (doc {doc.data.hex()[:160]})"
                )
    return failures


@pytest.mark.parametrize("option_set", OPTION_SETS, ids=[_option_id(o) for o in OPTION_SETS])
def test_decode_perl_headers(
    codec: ModuleType, perl_corpus: PerlCorpus, option_set: tuple[int, str, bool, bool]
) -> None:
    protocol, compression, _dedupe, header = option_set
    docs = perl_corpus.select(*option_set)
    assert docs, f"Perl wrote no documents for {option_set}"
    failures: list[str] = []
    compressions = set()
    for doc in docs:
        try:
            h = codec.decode_header(doc.data)
        except Exception as exc:
            failures.append(f"{doc.item}: {type(exc).__name__}: {exc}")
            continue
        compressions.add(h.compression)
        if h.protocol != protocol:
            failures.append(f"{doc.item}: protocol {h.protocol} != {protocol}")
        if doc.data[h.body_offset - 1 : h.body_offset] == b"" or h.body_offset > len(doc.data):
            failures.append(f"{doc.item}: body_offset {h.body_offset} outside the document")
        expected_header = project_perl(doc.header_value, "utf8") if header else None
        got_header = None if h.user_header is None else canon_decoded(h.user_header)
        diff = first_difference(got_header, expected_header)
        if diff:
            failures.append(f"{doc.item}: user header {diff}")
    assert compressions == {HEADER_COMPRESSION[compression], "none"} or compressions == {
        HEADER_COMPRESSION[compression]
    }, f"compressions reported: {compressions}"
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures[:40])
