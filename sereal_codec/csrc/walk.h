/* The skeleton the body walkers share (sereal_codec/DESIGN.md, "C core: one tag
 * table"): the decoder (decode.c, decode_refs.c, decode_project.c), the JSON transcoder
 * (json*.c) and the splitter / joiner (split*.c, join.c). What a tag is and what follows
 * it comes from tags.h; here are the reads every walker makes the same way: varints,
 * PADs, nesting levels, the tag-start bitmap and the entry points' argument checks.
 * Each walker keeps its own per-tag actions (and the splitter its own error texts). */
#ifndef SRL_WALK_H
#define SRL_WALK_H

#include "sereal.h"
#include "varint.h"

/* srl_varint past its inline cases: nine bytes of room need no bound or overflow check
 * per byte (nine bytes hold 63 bits); longer or near the end, the checked reader. */
int srl_varint_slow(const uint8_t *data, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out);

/* The varint at *pos, never reading at or past end: SRL_VARINT_OK with *pos past it, or
 * SRL_VARINT_TRUNCATED / SRL_VARINT_OVERFLOW with *pos unchanged. Up to three bytes
 * inline (counts, COPY offsets into a body of up to 2 MiB, most integers): a call per
 * varint cost more than the decoding. */
static inline int
srl_varint(const uint8_t *data, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out)
{
    Py_ssize_t p = *pos;
    if (end - p >= 3) {
        const uint8_t *s = data + p;
        if (s[0] < 0x80) {
            *out = s[0];
            *pos = p + 1;
            return SRL_VARINT_OK;
        }
        if (s[1] < 0x80) {
            *out = (uint64_t)(s[0] & 0x7f) | (uint64_t)s[1] << 7;
            *pos = p + 2;
            return SRL_VARINT_OK;
        }
        if (s[2] < 0x80) {
            *out = (uint64_t)(s[0] & 0x7f) | (uint64_t)(s[1] & 0x7f) << 7 | (uint64_t)s[2] << 14;
            *pos = p + 3;
            return SRL_VARINT_OK;
        }
    } else if (p < end && data[p] < 0x80) {
        *out = data[p];
        *pos = p + 1;
        return SRL_VARINT_OK;
    }
    return srl_varint_slow(data, end, pos, out);
}

/* Raise the error of a failed srl_varint (rc) at pos, the decoder's way: TruncatedInput
 * at end ("input ends inside <what>") or InvalidStructure at pos; returns -1. */
int srl_raise_varint(int rc, Py_ssize_t pos, Py_ssize_t end, const char *what);

/* srl_varint, raising the decoder's errors: 0, or -1 with the error set. */
static inline int
srl_body_varint(const uint8_t *data, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out,
                const char *what)
{
    int rc = srl_varint(data, end, pos, out);
    return rc == SRL_VARINT_OK ? 0 : srl_raise_varint(rc, *pos, end, what);
}

/* Skip PAD bytes; *pos then holds a tag byte. -1 (TruncatedInput) at the end. */
static inline int
srl_body_skip_pad(const uint8_t *data, Py_ssize_t end, Py_ssize_t *pos)
{
    Py_ssize_t p = *pos;
    while (p < end && (data[p] & 0x7f) == SRL_PAD)
        p++;
    *pos = p;
    if (p >= end) {
        srl_raise(srl_state.TruncatedInput, p, "input ends where a tag was expected");
        return -1;
    }
    return 0;
}

/* Open one nesting level at the tag at tagpos (DepthExceeded past max_depth); pair
 * with `(*depth)--`. */
static inline int
srl_body_enter(int *depth, int max_depth, Py_ssize_t tagpos)
{
    if (++*depth > max_depth) {
        --*depth;
        srl_raise(srl_state.DepthExceeded, tagpos, "nesting deeper than max_depth=%d", max_depth);
        return -1;
    }
    return 0;
}

/* One bit per body byte (i: from the body's start): a tag was read there. */
static inline void
srl_bit_set(uint8_t *bits, Py_ssize_t i)
{
    bits[i >> 3] |= (uint8_t)(1u << (i & 7));
}

static inline int
srl_bit_get(const uint8_t *bits, Py_ssize_t i)
{
    return (bits[i >> 3] >> (i & 7)) & 1;
}

/* An entry point's buffer and options, as decode_body takes them: 0, or -1 with
 * ValueError naming the bad one. */
int srl_check_body_args(Py_ssize_t len, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base,
                        int binary, int max_depth);

#endif
