/* A growable output buffer with amortised (doubling) growth, for the encoder and
 * the splitter. Every writer reserves first, so the hot paths are plain stores. */
#ifndef SRL_BUF_H
#define SRL_BUF_H

#include "varint.h"

#include <string.h>

typedef struct {
    uint8_t *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} SrlBuf;

int srl_buf_init(SrlBuf *b, Py_ssize_t cap);
int srl_buf_grow(SrlBuf *b, Py_ssize_t need); /* -1 with MemoryError set */
void srl_buf_free(SrlBuf *b);

/* Make room for `n` more bytes. */
static inline int
srl_buf_reserve(SrlBuf *b, Py_ssize_t n)
{
    if (b->cap - b->len >= n)
        return 0;
    return srl_buf_grow(b, n);
}

static inline void
srl_buf_put_byte_unchecked(SrlBuf *b, uint8_t c)
{
    b->data[b->len++] = c;
}

static inline void
srl_buf_put_varint_unchecked(SrlBuf *b, uint64_t v)
{
    b->len += srl_write_varint(b->data + b->len, v);
}

static inline int
srl_buf_put_byte(SrlBuf *b, uint8_t c)
{
    if (srl_buf_reserve(b, 1) < 0)
        return -1;
    b->data[b->len++] = c;
    return 0;
}

/* A tag followed by a varint (COPY o, REFP o, ARRAY n, ...). */
static inline int
srl_buf_put_tag_varint(SrlBuf *b, uint8_t tag, uint64_t v)
{
    if (srl_buf_reserve(b, 11) < 0)
        return -1;
    b->data[b->len++] = tag;
    b->len += srl_write_varint(b->data + b->len, v);
    return 0;
}

static inline int
srl_buf_put_bytes(SrlBuf *b, const void *src, Py_ssize_t n)
{
    if (srl_buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

#endif
