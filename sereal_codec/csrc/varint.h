/* Varints (little-endian base-128) and zigzag, as the Sereal format writes them.
 *
 * Readers take the whole buffer, a cursor and the end bound: they never read at or
 * past `end`. Perl pads some varints (the reserved compressed-length field), so a
 * varint may be up to 16 bytes long as long as its value fits in 64 bits. */
#ifndef SRL_VARINT_H
#define SRL_VARINT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define SRL_VARINT_MAX_BYTES 16

enum { SRL_VARINT_OK = 0, SRL_VARINT_TRUNCATED = -1, SRL_VARINT_OVERFLOW = -2 };

/* Read a varint at *pos; on success advance *pos past it. */
static inline int
srl_read_varint(const uint8_t *data, Py_ssize_t *pos, Py_ssize_t end, uint64_t *out)
{
    Py_ssize_t p = *pos;
    if (p < end && data[p] < 0x80) { /* the overwhelmingly common one-byte case */
        *out = data[p];
        *pos = p + 1;
        return SRL_VARINT_OK;
    }
    uint64_t value = 0;
    for (int i = 0; i < SRL_VARINT_MAX_BYTES; i++) {
        if (p >= end)
            return SRL_VARINT_TRUNCATED;
        uint8_t b = data[p++];
        uint64_t bits = b & 0x7f;
        if (i < 9) {
            value |= bits << (7 * i);
        } else if (i == 9) {
            if (bits > 1) /* only bit 63 is left */
                return SRL_VARINT_OVERFLOW;
            value |= bits << 63;
        } else if (bits != 0) {
            return SRL_VARINT_OVERFLOW;
        }
        if (!(b & 0x80)) {
            *out = value;
            *pos = p;
            return SRL_VARINT_OK;
        }
    }
    return SRL_VARINT_OVERFLOW; /* longer than any padding we accept */
}

/* Bytes needed to write v canonically. */
static inline int
srl_varint_len(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Write v canonically at dst (room for 10 bytes required); return bytes written. */
static inline int
srl_write_varint(uint8_t *dst, uint64_t v)
{
    int n = 0;
    while (v >= 0x80) {
        dst[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    dst[n++] = (uint8_t)v;
    return n;
}

static inline int64_t
srl_zigzag_decode(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static inline uint64_t
srl_zigzag_encode(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

#endif
