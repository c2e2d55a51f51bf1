"""The Sereal API over the pure-Python body codec (the reference implementation).

Same functions and behaviour as :mod:`sereal_codec`; used for differential tests
and wherever the compiled core is not built.
"""

from __future__ import annotations

from sereal_codec.codec import Codec
from sereal_codec.document import BodyCodec, Header
from sereal_codec.pure.encoder import encode_body
from sereal_codec.pure.json import array_to_json_lines, array_to_json_packed
from sereal_codec.pure.project import decode_body
from sereal_codec.pure.variant import json_to_variant_packed

IMPLEMENTATION = "pure"


class _PureBodyCodec:
    decode_body = staticmethod(decode_body)
    encode_body = staticmethod(encode_body)
    array_to_json_lines = staticmethod(array_to_json_lines)
    array_to_json_packed = staticmethod(array_to_json_packed)
    json_to_variant_packed = staticmethod(json_to_variant_packed)


#: the body codec, for callers (differential tests) that need it directly
backend: BodyCodec = _PureBodyCodec()
_codec = Codec(backend)
encode = _codec.encode
decode = _codec.decode
decode_header = _codec.decode_header
decode_json_lines = _codec.decode_json_lines
decode_json_packed = _codec.decode_json_packed
decode_variant_packed = _codec.decode_variant_packed
looks_like_sereal = Codec.looks_like_sereal

__all__ = [
    "IMPLEMENTATION",
    "Header",
    "backend",
    "decode",
    "decode_body",
    "decode_header",
    "decode_json_lines",
    "decode_json_packed",
    "decode_variant_packed",
    "encode",
    "encode_body",
    "looks_like_sereal",
]
