/* A Sereal document's header, read once for the C core (frames.c's event_verdict,
 * join.c's whole documents): magic string, version-type byte, header suffix. Each
 * caller turns the SRL_HDR_* result into its own answer (a verdict, an error); the
 * order of the checks is the pure reader's (sereal_codec/document.py). */
#ifndef SRL_HEADER_H
#define SRL_HEADER_H

#include "tags.h"
#include "varint.h"

#include <string.h>

enum {
    SRL_HDR_OK = 0,
    SRL_HDR_SHORT = -1,           /* fewer than 6 bytes: no header */
    SRL_HDR_BAD_MAGIC = -2,       /* neither magic string */
    SRL_HDR_BAD_VERSION = -3,     /* version 0 or above SRL_PROTOCOL_MAX, or not its magic's */
    SRL_HDR_SUFFIX_TRUNCATED = -4, /* the suffix (or its length) runs past the end */
    SRL_HDR_SUFFIX_BAD = -5,      /* the suffix length does not fit in 64 bits */
};

typedef struct {
    int version;    /* protocol, 1..SRL_PROTOCOL_MAX */
    int type;       /* document type: SRL_TYPE_* (not checked here) */
    Py_ssize_t body; /* first byte after the header (suffix included) */
} SrlHeader;

/* Magic and version-type byte of d[0:n]. */
static inline int
srl_header_start(const uint8_t *d, Py_ssize_t n, SrlHeader *h)
{
    if (n < 6)
        return SRL_HDR_SHORT;
    int v3 = memcmp(d, SRL_MAGIC_V3, 4) == 0;
    if (!v3 && memcmp(d, SRL_MAGIC_V1, 4) != 0)
        return SRL_HDR_BAD_MAGIC;
    h->version = d[4] & 0x0f;
    h->type = d[4] >> 4;
    if (h->version < 1 || h->version > SRL_PROTOCOL_MAX || v3 != (h->version >= 3))
        return SRL_HDR_BAD_VERSION;
    return SRL_HDR_OK;
}

/* The header suffix after srl_header_start: h->body just past it. */
static inline int
srl_header_suffix(const uint8_t *d, Py_ssize_t n, SrlHeader *h)
{
    Py_ssize_t p = 5;
    uint64_t suffix;
    int rc = srl_read_varint(d, &p, n, &suffix);
    if (rc == SRL_VARINT_TRUNCATED || (rc == SRL_VARINT_OK && suffix > (uint64_t)(n - p)))
        return SRL_HDR_SUFFIX_TRUNCATED;
    if (rc != SRL_VARINT_OK)
        return SRL_HDR_SUFFIX_BAD;
    h->body = p + (Py_ssize_t)suffix;
    return SRL_HDR_OK;
}

/* Where offsets count from for a raw body at h->body: protocol 1 from the document's
 * first byte, later ones 1-based from the body's. */
static inline Py_ssize_t
srl_header_base(const SrlHeader *h)
{
    return h->version == 1 ? 0 : h->body - 1;
}

#endif
