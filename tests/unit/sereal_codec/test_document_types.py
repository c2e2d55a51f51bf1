"""Every document type (compression) ``tags.py`` names goes through every Python path
that opens or writes documents, or is refused there with a named error: a type added
to the table but not to the document layer (its framing in ``compression.py``: opening,
size claim, writing) fails here, as does one the splitter cannot read or write.

The types are taken from ``tags.py`` (held to the C core's ``tags.h`` by
``test_tag_table.py``, and its first protocols by the test below), not listed here.
"""

from __future__ import annotations

import re
from types import ModuleType

import pytest
from tags_h import TAGS_H, entries

from eventstore import chunking
from eventstore.blob import verify_postfix
from eventstore.errors import NotAnArrayBlob
from sereal_codec import compression, tags
from sereal_codec import document as sereal_document
from sereal_codec.errors import SizeLimitExceeded, UnsupportedVersion

#: Every ``tags.TYPE_*`` value, by name.
DOC_TYPES = {name: value for name, value in vars(tags).items() if name.startswith("TYPE_")}
#: A value no encoder shortens to nothing: ``[1, "aaaa...", {"k": "aaaa..."}]`` (no
#: back-references, so the same body bytes are valid in every protocol).
VALUE = [1, "a" * 300, {"k": "a" * 300}]
_STR = bytes((tags.BINARY,)) + compression.varint_bytes(300) + b"a" * 300
BODY = (
    bytes((tags.REFN, tags.ARRAY, 3, tags.POS_LOW + 1))
    + _STR
    + bytes((tags.REFN, tags.HASH, 1, tags.SHORT_BINARY_LOW + 1))
    + b"k"
    + _STR
)


def _document(doc_type: int, protocol: int, body: bytes = BODY) -> bytes:
    """A document of ``doc_type`` built from the magic and framing, not the encoder."""
    magic = tags.MAGIC_V3 if protocol >= 3 else tags.MAGIC_V1
    level = compression.DOC_TYPES[doc_type].default_level
    framed = compression.frame_body(doc_type, body, level)
    return magic + bytes(((doc_type << 4) | protocol, 0)) + framed


def _readable(doc_type: int, protocol: int) -> bool:
    if doc_type == tags.TYPE_SNAPPY:  # the protocol 1 framing only
        return protocol == 1
    return protocol >= tags.DOC_TYPE_MIN_PROTOCOL[doc_type]


def test_first_protocols_and_versions_agree_with_tags_h() -> None:
    first = {name: int(protocol) for name, _, protocol in entries("SRL_DOC_TYPES", 3)}
    assert first == {
        name.removeprefix("TYPE_"): tags.DOC_TYPE_MIN_PROTOCOL[value]
        for name, value in DOC_TYPES.items()
    }
    top = re.search(r"#define SRL_PROTOCOL_MAX (\d+)", TAGS_H.read_text())
    assert top and range(1, int(top[1]) + 1) == tags.PROTOCOLS


def test_every_document_type_has_a_framing() -> None:
    assert sorted(compression.DOC_TYPES) == sorted(DOC_TYPES.values())
    assert sorted(tags.DOC_TYPE_MIN_PROTOCOL) == sorted(DOC_TYPES.values())
    names = [f.name for f in compression.DOC_TYPES.values()]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("name", sorted(DOC_TYPES))
def test_each_type_opens_in_each_protocol_or_is_refused(name: str, sereal: ModuleType) -> None:
    doc_type = DOC_TYPES[name]
    for protocol in tags.PROTOCOLS:
        doc = _document(doc_type, protocol)
        if not _readable(doc_type, protocol):
            with pytest.raises(UnsupportedVersion, match=f"document type {doc_type} in protocol"):
                sereal_document.read_layout(doc)
            with pytest.raises(UnsupportedVersion):
                sereal.decode(doc)
            continue
        layout = sereal_document.read_layout(doc)
        assert (layout.protocol, layout.doc_type) == (protocol, doc_type)
        buf, pos, _ = sereal_document.open_document(doc)
        assert buf[pos:] == BODY, (name, protocol)
        assert sereal_document.body_size(doc) == len(BODY)
        assert sereal.decode(doc) == VALUE
        header = sereal.decode_header(doc)
        assert header.compression == compression.DOC_TYPES[doc_type].name
        raw = sereal_document.decompressed_document(doc, max_decompressed_size=len(BODY))
        assert sereal_document.read_layout(raw).doc_type == tags.TYPE_RAW
        assert sereal.decode(raw) == VALUE
        if doc_type != tags.TYPE_RAW:  # the cap holds before anything is inflated
            with pytest.raises(SizeLimitExceeded):
                sereal_document.open_document(doc, max_decompressed_size=len(BODY) - 1)
            with pytest.raises(SizeLimitExceeded):
                sereal_document.decompressed_document(doc, max_decompressed_size=len(BODY) - 1)


@pytest.mark.parametrize("name", sorted(DOC_TYPES))
def test_each_written_type_round_trips_through_the_encoder(name: str, sereal: ModuleType) -> None:
    framing = compression.DOC_TYPES[DOC_TYPES[name]]
    if framing.method is None:  # read only (SNAPPY: protocol 1)
        assert DOC_TYPES[name] not in compression.METHODS.values()
        return
    protocol = max(3, framing.write_protocol)
    doc = sereal.encode(VALUE, compress=framing.method, protocol=protocol, compress_threshold=0)
    assert sereal_document.read_layout(doc).doc_type == DOC_TYPES[name]
    assert sereal.decode(doc) == VALUE
    wrapped = sereal_document.wrap_body(
        BODY, compress=framing.method, protocol=protocol, compress_threshold=0
    )
    assert sereal.decode(wrapped) == VALUE
    if framing.write_protocol > 3:
        with pytest.raises(ValueError, match=f"needs protocol {framing.write_protocol}"):
            sereal.encode(VALUE, compress=framing.method, protocol=3)


@pytest.mark.parametrize("name", sorted(DOC_TYPES))
def test_the_splitter_reads_and_writes_each_type(name: str) -> None:
    """split_blob opens each type through the document layer (protocol 2+) and writes
    each the encoder writes, keeping the header suffix."""
    if not chunking.splitter_available():
        pytest.skip("the compiled splitter is not built")
    codec = pytest.importorskip("sereal_codec")
    doc_type = DOC_TYPES[name]
    method = compression.DOC_TYPES[doc_type].method
    for protocol in tags.PROTOCOLS:
        doc = _document(doc_type, protocol)
        if protocol < 2 or not _readable(doc_type, protocol):
            with pytest.raises(NotAnArrayBlob):
                chunking.split_blob(doc)
            continue
        chunks = chunking.split_blob(doc, chunk_max_bytes=1_000, compress=method)
        parts = [codec.decode(bytes(verify_postfix(c.data))) for c in chunks]
        assert [e for part in parts for e in part] == VALUE, (name, protocol)
        for c in chunks:
            layout = sereal_document.read_layout(bytes(verify_postfix(c.data)))
            assert layout.doc_type == (tags.TYPE_RAW if method is None else doc_type)
            assert layout.protocol >= protocol
