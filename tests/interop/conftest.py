"""Fixtures for the interop tests: the codec implementations, and the Perl corpus
(one Perl process per session and direction)."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pytest

from .perl_runner import run_perl

IMPLEMENTATIONS = ("sereal_codec", "sereal_codec.pure")


@pytest.fixture(scope="session", params=IMPLEMENTATIONS, ids=("default", "pure"))
def codec(request: pytest.FixtureRequest) -> ModuleType:
    """Each implementation of the public API: the default (compiled core when it
    builds) and the pure-Python reference."""
    return importlib.import_module(request.param)


@dataclass
class PerlDoc:
    item: str
    protocol: int
    compression: str
    dedupe: bool
    header: bool
    data: bytes
    value: Any  # Perl's canonical form of the body
    header_value: Any  # ... of the user header, or None


@dataclass
class PerlCorpus:
    docs: list[PerlDoc] = field(default_factory=list)

    def select(self, protocol: int, compression: str, dedupe: bool, header: bool) -> list[PerlDoc]:
        return [
            d
            for d in self.docs
            if (d.protocol, d.compression, d.dedupe, d.header)
            == (protocol, compression, dedupe, header)
        ]


@pytest.fixture(scope="session")
def perl_corpus() -> PerlCorpus:
    """Every document Perl's Sereal::Encoder wrote for the corpus of
    perl/perl_to_python.pl, with Perl's own decoding of each in canonical form."""
    values: dict[int, Any] = {}
    corpus = PerlCorpus()
    for line in run_perl("perl_to_python.pl").splitlines():
        rec = json.loads(line)
        if rec["kind"] == "value":
            values[rec["id"]] = rec["canon"]
            continue
        corpus.docs.append(
            PerlDoc(
                item=rec["item"],
                protocol=rec["protocol"],
                compression=rec["compression"],
                dedupe=bool(rec["dedupe"]),
                header=bool(rec["header"]),
                data=bytes.fromhex(rec["hex"]),
                value=values[rec["value"]],
                header_value=None if rec["header_value"] is None else values[rec["header_value"]],
            )
        )
    return corpus
