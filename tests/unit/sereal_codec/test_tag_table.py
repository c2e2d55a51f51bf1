"""The C core's one tag table (``sereal_codec/csrc/tags.h``) and the Python side
(``sereal_codec.tags``, the pure reference's decoder) name the same tags, kinds and
document types: a tag or compression added on one side only fails here.

The header is parsed as text (its X-macro lines), so this runs without the compiled core.
"""

from __future__ import annotations

import re

from tags_h import TAGS_H, c_kind_of_byte, c_ranges, c_tags, entries, python_tags

from sereal_codec import tags
from sereal_codec.pure import decoder as pure_decoder


def test_every_tag_byte_has_one_kind_in_the_c_table() -> None:
    singles = [byte for byte, _ in c_tags().values()]
    ranged = [b for low, count, _ in c_ranges().values() for b in range(low, low + count)]
    assert sorted(singles + ranged) == list(range(0x80))
    kinds = {kind for kind, *_ in entries("SRL_KINDS", 5)}
    assert set(c_kind_of_byte().values()) == kinds, "a kind no tag has, or a tag of no kind"


def test_tags_py_names_the_tags_of_the_c_table() -> None:
    expected = {name: byte for name, (byte, _) in c_tags().items()}
    expected |= {f"{name}_LOW": low for name, (low, _, _) in c_ranges().items()}
    assert python_tags() == expected
    assert tags.TRACK_FLAG == 0x80


def test_document_types_and_magic_agree() -> None:
    types = {name: int(value) for name, value, _ in entries("SRL_DOC_TYPES", 3)}
    assert types == {
        name.removeprefix("TYPE_"): value
        for name, value in vars(tags).items()
        if name.startswith("TYPE_")
    }
    text = TAGS_H.read_text()
    magic = dict(re.findall(r'#define SRL_(MAGIC_V\d) "([^"]*)"', text))
    assert magic["MAGIC_V1"].encode() == tags.MAGIC_V1
    assert magic["MAGIC_V3"].replace("\\xf3", "\xf3").encode("latin-1") == tags.MAGIC_V3
    bit = re.search(r"#define SRL_HEADER_BIT_USER_META (0x\w+)", text)
    assert bit and int(bit[1], 0) == tags.HEADER_BIT_USER_META


def test_the_pure_decoder_handles_exactly_the_supported_tags() -> None:
    """Where the C table says UNSUPPORTED the pure reference raises UnknownTag, and it
    has a handler for every other byte (with and without the F bit)."""
    handlers = pure_decoder._HANDLERS
    for byte, kind in c_kind_of_byte().items():
        for tag in (byte, byte | 0x80):
            unknown = handlers[tag] is pure_decoder._unknown
            assert unknown == (kind == "UNSUPPORTED"), (hex(tag), kind)
