/* JSON texts to Spark's Variant binary encoding (DESIGN.md, "Variant transcoding"):
 * variant.c (entry point, containers, rows) and variant_scalar.c (strings, keys,
 * numbers). */
#ifndef SRL_VARIANT_H
#define SRL_VARIANT_H

#include "sereal.h"

#include "buf.h"

#include <string.h>

#define VX_SIZE_LIMIT ((Py_ssize_t)128 << 20) /* Spark's VariantUtil.SIZE_LIMIT */

/* An output buffer that is the bytes object returned (no copy at the end). */
typedef struct {
    uint8_t *data;
    Py_ssize_t len, cap;
    PyObject *obj;
} VBuf;

typedef struct {
    int32_t id;     /* key id in the row's dictionary */
    int32_t offset; /* of the value, from the start of the object's values */
} VField;

typedef struct {
    const uint8_t *s; /* the current text */
    Py_ssize_t pos, len, row;
    int depth, max_depth;
    VBuf val;             /* the values of all rows, back to back */
    SrlBuf keys;          /* the current row's keys, back to back */
    int32_t *key_off;     /* nkeys + 1 offsets into keys */
    uint32_t *key_hash;   /* per key; bit 0: the key has a byte EE or EF (see key_cmp) */
    uint64_t *key_pfx;    /* per key: its first 8 bytes in Java order, big-endian */
    Py_ssize_t nkeys, keys_cap;
    int32_t *table;       /* open addressing: key id + 1, 0 empty */
    Py_ssize_t table_cap; /* a power of two */
    VField *fields, *tmp; /* fields of the open objects (a stack); sort scratch */
    Py_ssize_t nfields, fields_cap, tmp_cap;
    int32_t *elems; /* element offsets of the open arrays (a stack) */
    Py_ssize_t nelems, elems_cap;
    SrlBuf str; /* an unescaped string or a number's text */
} Vx;

/* json_to_variant_packed(text, offsets, max_depth) -> (values, value_offsets,
 * metadata, metadata_offsets); see variant.c. */
PyObject *srl_py_json_to_variant(PyObject *self, PyObject *args, PyObject *kwargs);

/* variant.c */
int srl_vx_fail(Vx *v, Py_ssize_t pos, const char *what); /* ValueError; returns -1 */
int srl_vx_grow(void **items, Py_ssize_t *cap, Py_ssize_t need, size_t size);
int srl_vx_vbuf_grow(VBuf *b, Py_ssize_t n);
/* The pieces the direct Sereal walker (variant_sereal.c) shares with the JSON parser:
 * setting up and freeing a Vx and the metadata buffer (open: values and metadata
 * presized from `guess` bytes), a row's start and end (value size check, metadata
 * dictionary written), containers closed (fields sorted, header put in front), the
 * finished buffer as its bytes object. */
int srl_vx_open(Vx *v, VBuf *meta, Py_ssize_t guess, int max_depth);
void srl_vx_close(Vx *v, VBuf *meta);
void srl_vx_begin_row(Vx *v);
int srl_vx_end_row(Vx *v, VBuf *meta, Py_ssize_t start);
int srl_vx_finish_object(Vx *v, Py_ssize_t start, Py_ssize_t first, Py_ssize_t close_pos);
int srl_vx_finish_array(Vx *v, Py_ssize_t start, Py_ssize_t first);
PyObject *srl_vx_vbuf_finish(VBuf *b);

/* variant_sereal.c: array_to_variant_packed(data, pos, end, base, binary, max_depth)
 * -> the four buffers of json_to_variant_packed, or None where the JSON path must
 * answer (see there). */
PyObject *srl_py_array_to_variant(PyObject *self, PyObject *args, PyObject *kwargs);

/* variant_scalar.c: each returns 0 (-1 on error) unless said otherwise */
int srl_vx_parse_string(Vx *v, const uint8_t **out, Py_ssize_t *n);
int srl_vx_put_string(Vx *v, const uint8_t *s, Py_ssize_t n);
Py_ssize_t srl_vx_key_id(Vx *v, const uint8_t *s, Py_ssize_t n); /* the id, or -1 */
int srl_vx_rehash(Vx *v, Py_ssize_t cap); /* the table anew (cap slots) for ids < nkeys */
void srl_vx_sort_fields(const Vx *v, VField *f, VField *tmp, Py_ssize_t n);
int srl_vx_parse_number(Vx *v);
int srl_vx_literal(Vx *v, const char *word, int type);
int srl_vx_put_primitive(Vx *v, int type, uint64_t bits, int n); /* type << 2, n LE bytes */

static inline int
vbuf_reserve(VBuf *b, Py_ssize_t n)
{
    return b->cap - b->len >= n ? 0 : srl_vx_vbuf_grow(b, n);
}


static inline int
int_size(Py_ssize_t v)
{
    return v <= 0xff ? 1 : v <= 0xffff ? 2 : v <= 0xffffff ? 3 : 4;
}

static inline void
put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void
skip_ws(Vx *v)
{
    while (v->pos < v->len) {
        uint8_t c = v->s[v->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        v->pos++;
    }
}

#endif
