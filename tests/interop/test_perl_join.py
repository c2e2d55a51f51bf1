"""The compiled ``join_bodies`` on documents Perl's Sereal::Encoder wrote (shared
containers, objects, self references, string dedupe, protocols 3-5, zstd): the joined
body decodes to the list of the parts' decodes, sharing included, in the compiled and
the pure decoder (moved from the join unit tests: running Perl makes them interop
tests)."""

from __future__ import annotations

import functools
import struct
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sereal_codec import tags
from tests.unit.sereal_codec.sereal_strategies import same_value
from tests.unit.sereal_codec.sereal_testlib import core, joined, part_of, pure_decode

from .perl_runner import TIMEOUT_S, require_perl

pytestmark = pytest.mark.skipif(
    core is None,
    reason="compiled core not built (test_core.py::test_extension_is_built fails on that)",
)

PERL_EVENTS = r"""
use strict; use warnings;
use Sereal::Encoder qw(SRL_ZSTD SRL_UNCOMPRESSED);
use JSON::PP;
my ($n) = @ARGV;
srand(7);
my @hosts = map { "web-$_.ams4.example.com" } 1..5;
binmode STDOUT;
for my $i (0 .. $n - 1) {
    my $h = $hosts[$i % 5];
    my $shared = { dc => "ams4", host => $h };
    my %e = (epoch => 1413813813, type => "web.request", host => $h, i => $i,
             tags => [$h, $h, "x" x ($i % 200)], a => $shared, b => $shared,
             ok => JSON::PP::true, no => JSON::PP::false, obj => bless({h => $h}, "Ev::Obj"),
             obj2 => bless([$h], "Ev::Obj"), n => [map { { host => $h, k => $_ } } 1 .. 3]);
    $e{self} = \%e if $i % 3 == 0;
    my $enc = Sereal::Encoder->new({ dedupe_strings => 1, protocol_version => 3 + $i % 3,
        compress => $i % 4 == 0 ? SRL_ZSTD : SRL_UNCOMPRESSED, compress_threshold => 0 });
    my $doc = $enc->encode(\%e);
    print pack("N", length $doc), $doc;
}
"""


@functools.cache
def perl_documents() -> tuple[bytes, ...]:
    proc = subprocess.run(
        [require_perl(), "-e", PERL_EVENTS, "60"],
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(proc.stderr.decode(errors="replace"))
    out, data, pos = [], proc.stdout, 0
    while pos < len(data):
        (n,) = struct.unpack_from(">I", data, pos)
        out.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return tuple(out)


def test_perl_documents_have_back_references() -> None:
    raw = [d for d in perl_documents() if d[4] >> 4 == 0]
    assert raw and all(
        any(t in d for t in (bytes((tags.COPY,)), bytes((tags.OBJECTV,)))) for d in raw
    )


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 59), max_size=30))
def test_join_of_perl_documents(picks: list[int]) -> None:
    docs = perl_documents()
    parts = [part_of(docs[i]) for i in picks]
    assert same_value(joined(parts), [pure_decode(p) for p in parts])
