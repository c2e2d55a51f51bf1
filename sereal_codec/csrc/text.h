/* Text facts the JSON writers and readers share (json_text.c, variant_scalar.c,
 * variant_sereal.c, query_rows.c): which bytes a JSON string holds as themselves, and
 * what a valid UTF-8 sequence is. */
#ifndef SRL_TEXT_H
#define SRL_TEXT_H

#include <stdint.h>
#include <string.h>

#include <Python.h>

/* 1 for a byte that stands for itself inside a JSON string: printable ASCII but '"'
 * and '\\' (json_text.c). */
extern const uint8_t srl_json_plain[256] __attribute__((visibility("hidden")));

/* Whether the eight bytes at s all stand for themselves (no control character, '"',
 * '\\' or high bit): one word at a time. */
static inline int
srl_json_plain8(const uint8_t *s)
{
    uint64_t w;
    memcpy(&w, s, 8);
    uint64_t ctl = (w - 0x2020202020202020ULL) & ~w;
    uint64_t q = w ^ 0x2222222222222222ULL, bs = w ^ 0x5c5c5c5c5c5c5c5cULL;
    uint64_t zq = (q - 0x0101010101010101ULL) & ~q, zb = (bs - 0x0101010101010101ULL) & ~bs;
    return !((w | ctl | zq | zb) & 0x8080808080808080ULL);
}

/* Length of the valid UTF-8 sequence at s (lead byte >= 0x80; by the rules of
 * Python's strict decoder: no overlongs, no surrogates, nothing above U+10FFFF), or 0. */
static inline int
srl_utf8_seq(const uint8_t *s, Py_ssize_t left)
{
    uint8_t c = s[0];
    if (c >= 0xc2 && c <= 0xdf)
        return left >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if (left < 3 || (s[2] & 0xc0) != 0x80)
            return 0;
        uint8_t lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        return s[1] >= lo && s[1] <= hi ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (left < 4 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
            return 0;
        uint8_t lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        return s[1] >= lo && s[1] <= hi ? 4 : 0;
    }
    return 0;
}

#endif
