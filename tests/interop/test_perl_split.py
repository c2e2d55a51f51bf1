"""Blobs Perl's Sereal::Encoder wrote, split by our compiled splitter (eventstore.chunking):
each chunk decodes to its slice, in our decoder and in Perl's (an independent decoder).
Moved from the chunking unit tests: running Perl makes them interop tests."""

from __future__ import annotations

import importlib
import json
import subprocess
from typing import Any

import pytest

from eventstore import chunking
from eventstore.blob import verify_postfix
from eventstore.chunking import split_blob
from eventstore.errors import EventTooLarge
from eventstore.testing import unpacked_events

from .perl_runner import TIMEOUT_S, require_perl


def _codec() -> Any:
    return importlib.import_module("sereal_codec")


def _need_splitter() -> None:
    assert chunking.splitter_available(), "the compiled splitter is missing: run make test"


def _perl(script: str, *args: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(
        [require_perl(), "-e", script, *args],
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(proc.stderr.decode(errors="replace"))
    return proc.stdout


PERL_ENCODE = r"""
use strict; use warnings;
use Sereal::Encoder qw(SRL_ZSTD SRL_ZLIB SRL_SNAPPY SRL_UNCOMPRESSED);
my ($n, $comp, $seed, $pad) = @ARGV;
my %c = (zstd => SRL_ZSTD, zlib => SRL_ZLIB, snappy => SRL_SNAPPY, none => SRL_UNCOMPRESSED);
srand($seed);
my @hosts = map { "web-$_.ams4.example.com" } 1..20;
my @ev;
for my $i (0 .. $n - 1) {
    my %e = (epoch => 1413813813, type => "web.request", host => $hosts[int(rand(20))],
             url => "/hotel/nl/" . int(rand(50)) . ".html", ms => int(rand(5000)), i => $i,
             tags => ["a", "b", $hosts[$i % 20]],
             nested => { dc => "ams4", host => $hosts[$i % 20] });
    $e{pad} = join("", map { chr(65 + int(rand(26))) } 1 .. $pad) if $pad;
    push @ev, \%e;
}
my $enc = Sereal::Encoder->new({ compress => $c{$comp}, dedupe_strings => 1 });
binmode STDOUT; print $enc->encode(\@ev);
"""

PERL_DECODE_CHECK = r"""
use strict; use warnings;
use Sereal::Decoder; use JSON::PP;
binmode STDIN; local $/; my $d = <STDIN>;
my $v = Sereal::Decoder->new->decode($d);
print JSON::PP->new->canonical->encode($v);
"""


@pytest.mark.parametrize("compress", ["zstd", "zlib", "snappy", "none"])
@pytest.mark.parametrize(("n", "pad", "limit"), [(3000, 0, 20_000), (400, 300, 30_000)])
def test_split_perl_blob_is_exact(compress: str, n: int, pad: int, limit: int) -> None:
    codec = _codec()
    _need_splitter()
    blob = _perl(PERL_ENCODE, str(n), compress, "42", str(pad))
    whole = codec.decode(blob)
    chunks = split_blob(blob, key="1413813813:1:web.request::0", chunk_max_bytes=limit)
    assert len(chunks) > 1
    assert all(len(c.data) <= limit for c in chunks)
    assert chunks[0].start == 0 and chunks[-1].stop == n
    assert unpacked_events(chunks) == whole
    # each chunk is a standalone document for Perl too (an independent decoder)
    for c in chunks[:3]:
        doc = bytes(verify_postfix(c.data))
        assert json.loads(_perl(PERL_DECODE_CHECK, stdin=doc)) == json.loads(
            json.dumps(whole[c.start : c.stop])
        )


def test_split_perl_blob_single_element_too_large() -> None:
    _codec()
    _need_splitter()
    blob = _perl(PERL_ENCODE, "5", "none", "1", "5000")
    with pytest.raises(EventTooLarge) as e:
        split_blob(blob, chunk_max_bytes=2_000)
    assert e.value.index == 0
