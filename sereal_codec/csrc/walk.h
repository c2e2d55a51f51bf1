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

/* Bytes of the tag-start bitmap of a body of n bytes. */
static inline size_t
srl_bits_size(Py_ssize_t n)
{
    return (size_t)(n / 8 + 1);
}

/* Point a walker (a struct with the fields data, start, end, base and max_depth) at
 * the body data[start:end], offsets from base, nesting at most max_depth levels. */
#define SRL_WALKER_AT(w, data_, start_, end_, base_, max_depth_)                        \
    ((w)->data = (data_), (w)->start = (start_), (w)->end = (end_), (w)->base = (base_),  \
     (w)->max_depth = (max_depth_))

/* The bytes of the string tag `tag` (F bit off) at tagpos: their position *at and
 * length *n, checked against end as a decode reads them (TruncatedInput); 0 or -1. */
static inline int
srl_body_string(const uint8_t *data, Py_ssize_t end, Py_ssize_t tagpos, uint8_t tag,
                Py_ssize_t *at, Py_ssize_t *n)
{
    Py_ssize_t p = tagpos + 1;
    Py_ssize_t len;
    if (tag >= SRL_SHORT_BINARY_LOW) {
        len = tag & 0x1f;
    } else {
        uint64_t u;
        if (srl_body_varint(data, end, &p, &u, "a string length") < 0)
            return -1;
        if (u > (uint64_t)(end - p)) {
            srl_raise(srl_state.TruncatedInput, end,
                      "string of %llu bytes runs past the end of the input",
                      (unsigned long long)u);
            return -1;
        }
        len = (Py_ssize_t)u;
    }
    if (len > end - p) {
        srl_raise(srl_state.TruncatedInput, end, "string runs past the end of the input");
        return -1;
    }
    *at = p;
    *n = len;
    return 0;
}

/* n payload bytes at *pos (then past them), or NULL with TruncatedInput naming what. */
static inline const uint8_t *
srl_body_take(const uint8_t *data, Py_ssize_t end, Py_ssize_t *pos, Py_ssize_t n,
              const char *what)
{
    if (n > end - *pos) {
        srl_raise(srl_state.TruncatedInput, end, "input ends inside %s", what);
        return NULL;
    }
    const uint8_t *s = data + *pos;
    *pos += n;
    return s;
}

/* The offset of a REFP / ALIAS / OBJECTV at *pos (tag at tagpos): the position it
 * denotes, a tag start in [start, limit); -1 with BadBackReference otherwise. */
static inline Py_ssize_t
srl_body_resolve(const uint8_t *data, Py_ssize_t start, Py_ssize_t end, Py_ssize_t base,
                 const uint8_t *tag_starts, Py_ssize_t tagpos, Py_ssize_t *pos,
                 Py_ssize_t limit, const char *what)
{
    uint64_t o;
    if (srl_body_varint(data, end, pos, &o, "an offset") < 0)
        return -1;
    Py_ssize_t target = o > (uint64_t)(limit - base) ? -1 : base + (Py_ssize_t)o;
    if (target < start || target >= limit || !srl_bit_get(tag_starts, target - start)) {
        srl_raise(srl_state.BadBackReference, tagpos,
                  "%s offset %llu does not point at an earlier tag of this body", what,
                  (unsigned long long)o);
        return -1;
    }
    return target;
}

/* Defines `static inline Py_ssize_t name(Type *w, Py_ssize_t tagpos, Py_ssize_t *pos)`
 * for a walker state `Type` (data, start, end, base, tag_starts): the COPY at tagpos,
 * its target (a string tag read earlier in this body) with *pos past the offset, or
 * -1: quiet (the fast walks hand what they cannot read to their full walker), or
 * checked as the decoder checks it, with the offset's varint error or
 * BadBackReference set. A definition per walker, not a function taking the fields:
 * the fields are read only where needed (five loads up front cost the Variant walk
 * 0.6% of its instructions). */
#define SRL_WALKER_COPY_TARGET(Type, name, quiet)                                       \
    static inline Py_ssize_t name(Type *w, Py_ssize_t tagpos, Py_ssize_t *pos)         \
    {                                                                                   \
        Py_ssize_t p = tagpos + 1;                                                      \
        uint64_t o;                                                                     \
        int rc = srl_varint(w->data, w->end, &p, &o);                                   \
        if (rc != SRL_VARINT_OK)                                                        \
            return (quiet) ? -1 : srl_raise_varint(rc, p, w->end, "a COPY offset");     \
        Py_ssize_t target =                                                             \
            o > (uint64_t)(tagpos - w->base) ? -1 : w->base + (Py_ssize_t)o;            \
        if (target < w->start || target >= tagpos ||                                    \
            !srl_bit_get(w->tag_starts, target - w->start) ||                           \
            !srl_is_string_tag(w->data[target] & 0x7f)) {                               \
            if (!(quiet))                                                               \
                srl_raise(srl_state.BadBackReference, tagpos,                           \
                          "COPY offset %llu does not point at a string read earlier",   \
                          (unsigned long long)o);                                       \
            return -1;                                                                  \
        }                                                                               \
        *pos = p;                                                                       \
        return target;                                                                  \
    }

/* The referent the value at xpos of an object blesses (Perl blesses the referent, so
 * a later REFP to it is another reference to the same object): the target of a REFP
 * (meaningful once the REFP is read and checked), or the tracked item a REFN (after
 * PADs) points at, known before its contents are read, which may refer to it; else
 * -1. */
static inline Py_ssize_t
srl_body_referent(const uint8_t *data, Py_ssize_t end, Py_ssize_t base, Py_ssize_t xpos)
{
    Py_ssize_t q = xpos + 1;
    if ((data[xpos] & 0x7f) == SRL_REFP) {
        uint64_t o;
        if (srl_varint(data, end, &q, &o) != SRL_VARINT_OK || o > (uint64_t)(end - base))
            return -1;
        return base + (Py_ssize_t)o;
    }
    if ((data[xpos] & 0x7f) != SRL_REFN)
        return -1;
    while (q < end && (data[q] & 0x7f) == SRL_PAD)
        q++;
    return q < end && (data[q] & SRL_TRACK) ? q : -1;
}

/* The reads above for one walker's state `Type` (a struct with the fields data, start,
 * end, base, binary, max_depth, depth and tag_starts), named prefix_varint, _mark,
 * _is_tag_start, _skip_pad, _enter (pair with `w->depth--`), _string_key (the key of a
 * COPY-target cache: hash keys differ from values only in "bytes" mode), _string_bytes,
 * _take, _copy_target (checked) and _resolve. The decoder (decoder.h) and the JSON
 * transcoder (json.h) are walkers of this shape, so each check is written once for
 * both; the fast walks (query_walk.c, variant_sereal.c) use the srl_body_* forms. */
#define SRL_WALKER_READS(Type, prefix)                                                  \
    static inline int prefix##_varint(Type *w, Py_ssize_t *pos, uint64_t *out,          \
                                      const char *what)                                 \
    {                                                                                   \
        return srl_body_varint(w->data, w->end, pos, out, what);                        \
    }                                                                                   \
    static inline void prefix##_mark(Type *w, Py_ssize_t p)                             \
    {                                                                                   \
        srl_bit_set(w->tag_starts, p - w->start);                                       \
    }                                                                                   \
    static inline int prefix##_is_tag_start(const Type *w, Py_ssize_t p)                \
    {                                                                                   \
        return srl_bit_get(w->tag_starts, p - w->start);                                \
    }                                                                                   \
    static inline int prefix##_skip_pad(Type *w, Py_ssize_t *pos)                       \
    {                                                                                   \
        return srl_body_skip_pad(w->data, w->end, pos);                                 \
    }                                                                                   \
    static inline int prefix##_enter(Type *w, Py_ssize_t tagpos)                        \
    {                                                                                   \
        return srl_body_enter(&w->depth, w->max_depth, tagpos);                         \
    }                                                                                   \
    static inline Py_ssize_t prefix##_string_key(const Type *w, Py_ssize_t target,      \
                                                 int is_key)                            \
    {                                                                                   \
        return 2 * target + (is_key && w->binary == SRL_BINARY_BYTES);                  \
    }                                                                                   \
    static inline int prefix##_string_bytes(Type *w, Py_ssize_t tagpos, uint8_t tag,    \
                                      Py_ssize_t *at, Py_ssize_t *n)                    \
    {                                                                                   \
        return srl_body_string(w->data, w->end, tagpos, tag, at, n);                    \
    }                                                                                   \
    static inline const uint8_t *prefix##_take(Type *w, Py_ssize_t *pos, Py_ssize_t n,  \
                                               const char *what)                        \
    {                                                                                   \
        return srl_body_take(w->data, w->end, pos, n, what);                            \
    }                                                                                   \
    static inline Py_ssize_t prefix##_resolve(Type *w, Py_ssize_t tagpos,               \
                                              Py_ssize_t *pos, Py_ssize_t limit,        \
                                              const char *what)                         \
    {                                                                                   \
        return srl_body_resolve(w->data, w->start, w->end, w->base, w->tag_starts,      \
                                tagpos, pos, limit, what);                              \
    }                                                                                   \
    SRL_WALKER_COPY_TARGET(Type, prefix##_copy_target, 0)

/* An entry point's buffer and options, as decode_body takes them: 0, or -1 with
 * ValueError naming the bad one. */
int srl_check_body_args(Py_ssize_t len, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base,
                        int binary, int max_depth);

#endif
