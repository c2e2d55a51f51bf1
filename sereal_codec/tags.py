"""Sereal tag bytes, header constants and document types (from the format spec)."""

from __future__ import annotations

# Header
MAGIC_V1 = b"=srl"  # protocol 1 and 2
MAGIC_V3 = b"=\xf3rl"  # protocol 3 and later
TYPE_RAW = 0
TYPE_SNAPPY = 1  # protocol 1 only: the rest of the document is one Snappy block
TYPE_SNAPPY_INCR = 2  # <varint length><snappy block>
TYPE_ZLIB = 3  # <varint uncompressed length><varint compressed length><zlib stream>; v3+
TYPE_ZSTD = 4  # <varint length><zstd frame>; v4+ (Perl also writes it at v3)
#: Lowest protocol at which each document type is read (tags.h, SRL_DOC_TYPES). The spec
#: defines zstd from 4, but Perl's encoder writes it at 3 too (and Perl reads it). The
#: framing of each is compression.py's (``compression.DOC_TYPES``).
DOC_TYPE_MIN_PROTOCOL = {
    TYPE_RAW: 1,
    TYPE_SNAPPY: 1,
    TYPE_SNAPPY_INCR: 1,
    TYPE_ZLIB: 3,
    TYPE_ZSTD: 3,
}
#: The protocol versions (tags.h: 1 to SRL_PROTOCOL_MAX)
PROTOCOLS = range(1, 6)
HEADER_BIT_USER_META = 0x01

# Body tags (low 7 bits; the high bit is the "track" flag)
TRACK_FLAG = 0x80
POS_LOW = 0x00  # 0x00-0x0f: 0..15
NEG_LOW = 0x10  # 0x10-0x1f: -16..-1
VARINT = 0x20
ZIGZAG = 0x21
FLOAT = 0x22
DOUBLE = 0x23
LONG_DOUBLE = 0x24
UNDEF = 0x25
BINARY = 0x26
STR_UTF8 = 0x27
REFN = 0x28
REFP = 0x29
HASH = 0x2A
ARRAY = 0x2B
OBJECT = 0x2C
OBJECTV = 0x2D
ALIAS = 0x2E
COPY = 0x2F
WEAKEN = 0x30
REGEXP = 0x31
OBJECT_FREEZE = 0x32
OBJECTV_FREEZE = 0x33
NO = 0x34  # protocol 5
YES = 0x35  # protocol 5
RESERVED_0 = 0x36
RESERVED_1 = 0x37
FLOAT_128 = 0x38  # protocol 5
CANONICAL_UNDEF = 0x39
FALSE = 0x3A
TRUE = 0x3B
MANY = 0x3C  # never implemented by any encoder; rejected
PACKET_START = 0x3D
EXTEND = 0x3E  # never implemented by any encoder; rejected
PAD = 0x3F
ARRAYREF_LOW = 0x40  # 0x40-0x4f: ref to array of 0..15 items
HASHREF_LOW = 0x50  # 0x50-0x5f: ref to hash of 0..15 pairs
SHORT_BINARY_LOW = 0x60  # 0x60-0x7f: binary string of 0..31 bytes

#: ``binary=`` modes, as passed to a body codec
BINARY_UTF8 = 0
BINARY_LATIN1 = 1
BINARY_BYTES = 2
