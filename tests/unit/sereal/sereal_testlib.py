"""Helpers shared by the Sereal unit tests (hand-built documents)."""

from __future__ import annotations

V4 = b"=\xf3rl\x04\x00"  # protocol 4, raw, no suffix: the body starts at offset 6
BODY = len(V4)


def doc(body_hex: str, header: bytes = V4) -> bytes:
    """A document: ``header`` followed by a body written as spaced hex."""
    return header + bytes.fromhex(body_hex)


def body_of(document: bytes) -> str:
    """The body of a raw protocol 3-5 document without suffix, as spaced hex."""
    assert document[:4] == b"=\xf3rl", document[:6]
    assert document[4] >> 4 == 0 and document[5] == 0, document[:6]
    return document[6:].hex(" ")
