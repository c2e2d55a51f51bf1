"""Sereal: the binary format of every document this system stores.

Our own implementation of the format (protocol 1 to 5, see ``DESIGN.md`` beside this
file): :func:`encode`, :func:`decode`, :func:`decode_header`, :func:`looks_like_sereal`, and
:func:`decode_json_lines` / :func:`decode_json_packed` (an array body straight to JSON
texts, for Spark) and :func:`decode_variant_packed` (the same events as Spark Variants).
The body codec is the compiled core when ``sereal_codec._sereal`` was built, else
the pure-Python reference (``IMPLEMENTATION`` says which); ``sereal_codec.pure``
always uses the reference.
"""

from __future__ import annotations

import importlib
from typing import cast

from sereal_codec.codec import Codec
from sereal_codec.document import BodyCodec, Header
from sereal_codec.errors import (
    BadBackReference,
    BadHeader,
    DecodeBudgetExceeded,
    DecompressionError,
    DepthExceeded,
    EncodeDepthExceeded,
    InvalidStructure,
    SerealDecodeError,
    SerealEncodeError,
    SerealError,
    SizeLimitExceeded,
    TruncatedInput,
    UnencodableValue,
    UnknownTag,
    UnsupportedVersion,
)
from sereal_codec.types import PerlObject, PerlRef, PerlRegexp

_backend: BodyCodec
try:
    _backend = cast(BodyCodec, importlib.import_module("sereal_codec._sereal"))
    IMPLEMENTATION = "c"
except ImportError:  # not built: the pure reference behaves the same, only slower
    from sereal_codec.pure import backend as _backend

    IMPLEMENTATION = "pure"

_codec = Codec(_backend)
encode = _codec.encode
decode = _codec.decode
decode_header = _codec.decode_header
decode_json_lines = _codec.decode_json_lines
decode_json_packed = _codec.decode_json_packed
decode_variant_packed = _codec.decode_variant_packed
looks_like_sereal = Codec.looks_like_sereal

__all__ = [
    "IMPLEMENTATION",
    "BadBackReference",
    "BadHeader",
    "DecodeBudgetExceeded",
    "DecompressionError",
    "DepthExceeded",
    "EncodeDepthExceeded",
    "Header",
    "InvalidStructure",
    "PerlObject",
    "PerlRef",
    "PerlRegexp",
    "SerealDecodeError",
    "SerealEncodeError",
    "SerealError",
    "SizeLimitExceeded",
    "TruncatedInput",
    "UnencodableValue",
    "UnknownTag",
    "UnsupportedVersion",
    "decode",
    "decode_header",
    "decode_json_lines",
    "decode_json_packed",
    "decode_variant_packed",
    "encode",
    "looks_like_sereal",
]
