"""Every compiled module is built where the codec's is (setup.py builds them alike, each
optional): a module that failed to build would otherwise leave its package on the
Python reference without a word."""

from __future__ import annotations

import importlib

import pytest

import sereal_codec
from consumer_lib import types
from relocator import wire

pytestmark = pytest.mark.skipif(
    sereal_codec.IMPLEMENTATION != "c", reason="the compiled codec is not built here"
)


@pytest.mark.parametrize("name", ["relocator._frames", "consumer_lib._tagger"])
def test_each_package_s_compiled_module_imports(name: str) -> None:
    importlib.import_module(name)


def test_the_relocator_and_the_consumer_use_their_compiled_modules() -> None:
    assert wire._scan_c is not None
    assert types.TAGGER is not types.tag_events_py


def test_the_codec_s_extension_exports_only_codec_functions() -> None:
    core = importlib.import_module("sereal_codec._sereal")
    strays = {"scan_frames", "event_verdicts", "frame_positions", "tag_events"}
    assert strays.isdisjoint(dir(core))
