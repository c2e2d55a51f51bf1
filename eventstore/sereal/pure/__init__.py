"""The Sereal API over the pure-Python body codec (the reference implementation).

Same functions and behaviour as :mod:`eventstore.sereal`; used for differential tests
and wherever the compiled core is not built.
"""

from __future__ import annotations

from eventstore.sereal.document import BodyCodec, Codec, Header
from eventstore.sereal.pure.decoder import decode_body
from eventstore.sereal.pure.encoder import encode_body

IMPLEMENTATION = "pure"


class _PureBodyCodec:
    decode_body = staticmethod(decode_body)
    encode_body = staticmethod(encode_body)


#: the body codec, for callers (differential tests) that need it directly
backend: BodyCodec = _PureBodyCodec()
_codec = Codec(backend)
encode = _codec.encode
decode = _codec.decode
decode_header = _codec.decode_header
looks_like_sereal = Codec.looks_like_sereal

__all__ = [
    "IMPLEMENTATION",
    "Header",
    "backend",
    "decode",
    "decode_body",
    "decode_header",
    "encode",
    "encode_body",
    "looks_like_sereal",
]
