"""Projected decoding (sereal_codec/DESIGN.md, "Projection") of bodies Perl's
Sereal::Encoder wrote, with what ours never writes the same way: dedupe (COPY keys and
values), shared refs, booleans. In each implementation, ``decode(doc, fields=...)`` is
the projection of the full decode, sharing included (moved from the projection unit
tests: running Perl makes it an interop test)."""

from __future__ import annotations

import json
import subprocess
from types import ModuleType

from relocator.events import generate_events
from sereal_codec import document
from sereal_codec.projection import compile_fields, project_events
from tests.unit.sereal_codec.sereal_strategies import same_value

from .perl_runner import TIMEOUT_S, require_perl

#: What a typical web substream reads: a third of a web event's 25 keys (8), one nested.
WEB_FIELDS = ["type", "status", "url", "method", "duration_ms", "host", "dc", "search.city"]

PERL_ENCODE = r"""
use strict; use warnings; use Sereal::Encoder; use JSON::PP ();
local $/; my $events = JSON::PP->new->decode(<STDIN>);
my $shared = { deep => [1, 2, 3] };
for my $i (0 .. $#$events) {
    $events->[$i]{shared} = $shared if $i % 3 == 0;
    $events->[$i]{flag} = $i % 2 ? JSON::PP::true : JSON::PP::false;
}
binmode STDOUT;
print Sereal::Encoder->new({ dedupe_strings => 1, protocol_version => 4 })->encode($events);
"""


def test_bodies_from_perls_encoder(codec: ModuleType) -> None:
    events = generate_events(120, seed=6)
    proc = subprocess.run(
        [require_perl(), "-e", PERL_ENCODE],
        input=json.dumps(events).encode(),
        capture_output=True,
        check=False,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    doc = proc.stdout
    buf, pos, _base = document.open_document(doc)
    assert buf[pos:].count(b"\x2f") > 100  # COPY keys and values
    full = codec.decode(doc)
    assert isinstance(full[1]["flag"], bool) and full[0]["shared"] is full[3]["shared"]
    for fields in (WEB_FIELDS, ["flag", "shared.deep"], ["shared"], ["user_agent"], []):
        tree = compile_fields(fields)
        assert tree is not None
        assert same_value(codec.decode(doc, fields=fields), project_events(full, tree))
