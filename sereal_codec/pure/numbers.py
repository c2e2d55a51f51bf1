"""Number tags of the pure decoder: small ints, varints, zigzag, and the floats.

LONG_DOUBLE is x86 80-bit extended precision in the low 10 of 16 bytes; FLOAT_128 is
IEEE 754 binary128. Both round correctly to the nearest double (overflow: infinity),
exactly as the compiled core's floats.c does.
"""

from __future__ import annotations

import struct
from typing import Any, Protocol

from sereal_codec.errors import TruncatedInput


class _Decoder(Protocol):
    """What the handlers read of the decoder (``sereal_codec.pure.decoder``, which
    imports this module: a protocol, so this one need not import it back)."""

    data: bytes
    end: int

    def varint(self, pos: int) -> tuple[int, int]: ...


_unpack_float = struct.Struct("<f").unpack_from
_unpack_double = struct.Struct("<d").unpack_from

_unpack_u64_u16 = struct.Struct("<QH").unpack_from
_unpack_u64_u64 = struct.Struct("<QQ").unpack_from


def long_double_at(data: bytes, start: int) -> float:
    """The LONG_DOUBLE whose 16 bytes start at ``data[start]`` (bounds checked by caller)."""
    # 64-bit significand with an explicit integer bit, then sign and 15-bit exponent.
    mantissa, sign_exp = _unpack_u64_u16(data, start)
    exponent = sign_exp & 0x7FFF
    if exponent == 0x7FFF:
        value = float("nan") if mantissa & ((1 << 63) - 1) else float("inf")
    else:
        value = _scaled(mantissa, max(exponent, 1) - 16383 - 63)
    return -value if sign_exp & 0x8000 else value


def float128_at(data: bytes, start: int) -> float:
    """The FLOAT_128 whose 16 bytes start at ``data[start]`` (bounds checked by caller)."""
    # Little-endian: 112-bit fraction, 15-bit exponent, sign.
    low, high = _unpack_u64_u64(data, start)
    fraction = ((high & ((1 << 48) - 1)) << 64) | low
    exponent = (high >> 48) & 0x7FFF
    if exponent == 0x7FFF:
        value = float("nan") if fraction else float("inf")
    elif exponent == 0:
        value = _scaled(fraction, 1 - 16383 - 112)
    else:
        value = _scaled(fraction | (1 << 112), exponent - 16383 - 112)
    return -value if high >> 63 else value


def _scaled(significand: int, exp2: int) -> float:
    """``significand * 2**exp2`` correctly rounded to a double (overflow: inf)."""
    if exp2 >= 0:
        try:
            return float(significand << exp2)
        except OverflowError:
            return float("inf")
    return significand / (1 << -exp2)  # int true division rounds correctly


# -- handlers (tag byte -> value, next position) ---------------------------------


def _pos_small(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    return dec.data[pos] & 0x0F, pos + 1


def _neg_small(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    return (dec.data[pos] & 0x1F) - 32, pos + 1


def _varint(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    return dec.varint(pos + 1)


def _zigzag(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    u, p = dec.varint(pos + 1)
    return (u >> 1) ^ -(u & 1), p


def _fixed(dec: _Decoder, pos: int, size: int) -> int:
    if pos + 1 + size > dec.end:
        raise TruncatedInput(f"input ends inside a {size}-byte number", dec.end)
    return pos + 1


def _float(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    start = _fixed(dec, pos, 4)
    return _unpack_float(dec.data, start)[0], start + 4


def _double(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    start = _fixed(dec, pos, 8)
    return _unpack_double(dec.data, start)[0], start + 8


def _long_double(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    start = _fixed(dec, pos, 16)
    return long_double_at(dec.data, start), start + 16


def _float_128(dec: _Decoder, pos: int, depth: int) -> tuple[Any, int]:
    start = _fixed(dec, pos, 16)
    return float128_at(dec.data, start), start + 16
