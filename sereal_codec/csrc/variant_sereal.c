/* A Sereal array body straight to Spark Variants, one per element, without the JSON
 * text in between (DESIGN.md, "Variant transcoding", "Direct walk"). The JSON path
 * (json*.c, then variant.c) stays the reference: this walker gives its bytes exactly,
 * and where it would have to reproduce more than plain data it does not try: it
 * returns None and the caller takes the JSON path, which then answers (its value or
 * its error, at its offset). None comes for
 *   - any malformed input (truncation, bad COPY, trailing bytes, not an array, too
 *     deep, a key repeated in one hash, a Variant over 128 MiB): errors are rare, and
 *     the reference names them;
 *   - the tags whose JSON depends on what was seen elsewhere: REFP, ALIAS, OBJECT(V)
 *     and their FREEZE forms (boolean classes, blessed referents, cycles), WEAKEN,
 *     REGEXP;
 *   - a body whose JSON text might exceed the transcoder's output cap (an upper
 *     bound of its length is counted as the walk goes).
 * What it handles it maps the reference's way by construction: integers as the
 * smallest integer type parse_json picks for their decimal text; floats, non-plain
 * strings and the integers above INT64_MAX written with the JSON writer's own
 * functions (json_text.c) into a scratch buffer and read back with the JSON parser's
 * (variant_scalar.c); a string of plain ASCII is its own JSON content, copied as is.
 * The nesting levels are counted as json.c counts them (an ARRAY / HASH one level,
 * REFN before one the same level, ARRAYREF / HASHREF one), so a body too deep for the
 * reference is too deep here; the JSON nesting of a value is one level less than its
 * Sereal nesting (the rows are the top-level array's elements), so parse_json's own
 * max_depth check never fires first. COPY targets are checked as json.c checks them:
 * a string tag this walk read earlier (the same tag-start bitmap). */
#include "variant.h"

#include "json.h"
#include "text.h"
#include "walk.h"

typedef struct {
    Vx v; /* the Variant writer shared with the JSON parser */
    const uint8_t *data;
    Py_ssize_t start, end, base;
    int binary, max_depth, depth;
    uint8_t *tag_starts;
    SrlBuf scratch; /* one scalar's JSON text, read back by the JSON parser */
    Py_ssize_t json_ub, json_cap; /* an upper bound of the JSON text's length; its cap */
    /* The previous row's dictionary as a template (see sv_key_id): its first `tmpl`
     * keys, ids 0..tmpl-1, are still in v.keys / key_off / key_hash / key_pfx, and
     * key_src[id] is the string tag each was read from; the hash table holds ids
     * 0..table_n-1 (table_n >= tmpl) and nothing else. */
    Py_ssize_t *key_src;
    Py_ssize_t key_src_cap, tmpl, table_n;
} Sv;

/* -1: the JSON path must answer (an exception may be set: only MemoryError is kept). */
#define SV_FALLBACK (-1)

static inline void
sv_mark(Sv *s, Py_ssize_t p)
{
    srl_bit_set(s->tag_starts, p - s->start);
}

/* Whether s[0:n] is plain ASCII: no control character, '"', '\\' or high bit, so its
 * JSON string is the bytes themselves between quotes (text.h). */
static inline int
sv_plain(const uint8_t *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8)
        if (!srl_json_plain8(p + i))
            return 0;
    for (; i < n; i++)
        if (!srl_json_plain[p[i]])
            return 0;
    return 1;
}

/* Point the JSON parser at the scratch text. */
static inline void
sv_parse_scratch(Sv *s)
{
    s->v.s = s->scratch.data;
    s->v.pos = 0;
    s->v.len = s->scratch.len;
}

/* The Variant bytes of the string payload p[0:n] of a string tag in a role (*p, *n
 * replaced): the JSON writer's choice per role is json_scalar.c's
 * srl_jx_put_string_json; plain ASCII is its own JSON content. */
static int
sv_content(Sv *s, uint8_t tag, const uint8_t **p, Py_ssize_t *n, int is_key)
{
    int latin1 = tag != SRL_STR_UTF8 && s->binary == SRL_BINARY_LATIN1;
    int base64 = tag != SRL_STR_UTF8 && s->binary == SRL_BINARY_BYTES && !is_key;
    s->json_ub += 6 * *n + 3; /* each byte escaped at worst, quotes, ':' or ',' */
    if (s->json_ub > s->json_cap)
        return SV_FALLBACK;
    if (base64 || !sv_plain(*p, *n)) {
        s->scratch.len = 0;
        int rc = base64   ? srl_json_put_base64(&s->scratch, *p, *n)
                 : latin1 ? srl_json_put_latin1(&s->scratch, *p, *n)
                          : srl_json_put_utf8(&s->scratch, *p, *n);
        if (rc < 0)
            return SV_FALLBACK;
        sv_parse_scratch(s);
        if (srl_vx_parse_string(&s->v, p, n) < 0)
            return SV_FALLBACK;
    }
    return 0;
}

/* The payload of the string tag at tagpos, checked as json_scalar.c's. */
static inline int
sv_payload(Sv *s, Py_ssize_t tagpos, const uint8_t **p, Py_ssize_t *n, Py_ssize_t *after)
{
    uint8_t tag = s->data[tagpos] & 0x7f;
    Py_ssize_t q = tagpos + 1, len;
    if (tag >= SRL_SHORT_BINARY_LOW) {
        len = tag & 0x1f;
    } else {
        uint64_t u;
        if (srl_varint(s->data, s->end, &q, &u) != SRL_VARINT_OK || u > (uint64_t)(s->end - q))
            return SV_FALLBACK;
        len = (Py_ssize_t)u;
    }
    if (len > s->end - q)
        return SV_FALLBACK;
    *p = s->data + q;
    *n = len;
    *after = q + len;
    return 0;
}

/* The string tag at tagpos as a value (*pos set past it). */
static inline int
sv_string(Sv *s, Py_ssize_t tagpos, Py_ssize_t *pos)
{
    const uint8_t *p;
    Py_ssize_t n;
    if (sv_payload(s, tagpos, &p, &n, pos) < 0 ||
        sv_content(s, s->data[tagpos] & 0x7f, &p, &n, 0) < 0)
        return SV_FALLBACK;
    return srl_vx_put_string(&s->v, p, n) < 0 ? SV_FALLBACK : 0;
}

/* Put the table in step with the row's dictionary (ids 0..nkeys-1 only), before the
 * JSON parser's srl_vx_key_id looks a key up or adds one. */
static int
sv_sync_table(Sv *s)
{
    Vx *v = &s->v;
    s->tmpl = 0;
    v->keys.len = v->key_off[v->nkeys];
    if (s->table_n != v->nkeys) {
        if (srl_vx_rehash(v, v->table_cap) < 0)
            return SV_FALLBACK;
        s->table_n = v->nkeys;
    }
    return 0;
}

/* The id in the row's dictionary of the key read from the string tag at src, whose
 * Variant bytes are p[0:n]; added if new. Rows of one stream mostly have the keys of
 * the row before, in the same order: while this row's new keys are the template's
 * next ones, they take the template's ids without hashing (the bytes, and so the
 * dictionary, are the ones srl_vx_key_id would have built: keys in order of first
 * appearance). Another key ends the template for the row: the dictionary is cut to
 * this row's keys and srl_vx_key_id goes on. */
static int
sv_key_id(Sv *s, Py_ssize_t src, const uint8_t *p, Py_ssize_t n, Py_ssize_t *id)
{
    Vx *v = &s->v;
    Py_ssize_t k = v->nkeys;
    if (k < s->tmpl) {
        Py_ssize_t a = v->key_off[k];
        if (v->key_off[k + 1] - a == n && memcmp(v->keys.data + a, p, (size_t)n) == 0) {
            s->key_src[k] = src;
            v->nkeys = k + 1;
            *id = k;
            return 0;
        }
    }
    if (sv_sync_table(s) < 0 || (*id = srl_vx_key_id(v, p, n)) < 0)
        return SV_FALLBACK;
    s->table_n = v->nkeys;
    if (*id == k) { /* new */
        if (srl_vx_grow((void **)&s->key_src, &s->key_src_cap, k + 1, sizeof *s->key_src) < 0)
            return SV_FALLBACK;
        s->key_src[k] = src;
    }
    return 0;
}

/* The key whose string tag is at src (after: past the key's own tag). */
static int
sv_key_at(Sv *s, Py_ssize_t src, Py_ssize_t *after, Py_ssize_t *id)
{
    Vx *v = &s->v;
    Py_ssize_t k = v->nkeys, end;
    const uint8_t *p;
    Py_ssize_t n;
    if (sv_payload(s, src, &p, &n, &end) < 0)
        return SV_FALLBACK;
    if (after != NULL)
        *after = end;
    if (k < s->tmpl && s->key_src[k] == src) {
        /* the template's next key, read from the very same string: nothing to read */
        s->json_ub += 6 * (v->key_off[k + 1] - v->key_off[k]) + 3; /* >= its raw bytes */
        if (s->json_ub > s->json_cap)
            return SV_FALLBACK;
        v->nkeys = k + 1;
        *id = k;
        return 0;
    }
    if (sv_content(s, s->data[src] & 0x7f, &p, &n, 1) < 0)
        return SV_FALLBACK;
    return sv_key_id(s, src, p, n, id);
}

/* The target of the COPY at tagpos: a string tag read earlier in this body
 * (json_scalar.c's check); -1 if not. *pos past the COPY. */
SRL_WALKER_COPY_TARGET(Sv, sv_copy_target, 1)

/* A key at *pos (after PADs): a string tag or a COPY of one. */
static int
sv_key(Sv *s, Py_ssize_t *pos, Py_ssize_t *id)
{
    if (srl_body_skip_pad(s->data, s->end, pos) < 0)
        return SV_FALLBACK;
    Py_ssize_t tagpos = *pos;
    sv_mark(s, tagpos);
    uint8_t tag = s->data[tagpos] & 0x7f;
    if (srl_is_string_tag(tag))
        return sv_key_at(s, tagpos, pos, id);
    Py_ssize_t target;
    if (tag != SRL_COPY || (target = sv_copy_target(s, tagpos, pos)) < 0)
        return SV_FALLBACK;
    return sv_key_at(s, target, NULL, id);
}

/* An integer as parse_json reads its decimal text: the smallest of int8..int64. */
static inline int
sv_int(Sv *s, int64_t x)
{
    s->json_ub += 21;
    if (x >= INT8_MIN && x <= INT8_MAX)
        return srl_vx_put_primitive(&s->v, 3, (uint64_t)x, 1);
    if (x >= INT16_MIN && x <= INT16_MAX)
        return srl_vx_put_primitive(&s->v, 4, (uint64_t)x, 2);
    if (x >= INT32_MIN && x <= INT32_MAX)
        return srl_vx_put_primitive(&s->v, 5, (uint64_t)x, 4);
    return srl_vx_put_primitive(&s->v, 6, (uint64_t)x, 8);
}

/* A number the Variant parser reads from the JSON writer's text of it. */
static int
sv_number_text(Sv *s, uint64_t u, double d, int is_double)
{
    s->scratch.len = 0;
    s->json_ub += 32; /* repr of a double: at most 24 bytes */
    if ((is_double ? srl_json_put_double(&s->scratch, d) : srl_json_put_u64(&s->scratch, u)) < 0)
        return SV_FALLBACK;
    if (s->scratch.data[0] == 'n') /* NaN, infinities: null */
        return srl_vx_put_primitive(&s->v, 0, 0, 0);
    sv_parse_scratch(s);
    return srl_vx_parse_number(&s->v);
}

static int
sv_number(Sv *s, Py_ssize_t *pos, uint8_t tag)
{
    const uint8_t *p = s->data + *pos;
    uint64_t u;
    double d;
    int width;
    switch (srl_tag_kind(tag)) {
    case SRL_K_POS:
        return sv_int(s, tag - SRL_POS_LOW);
    case SRL_K_NEG:
        return sv_int(s, (int64_t)tag - SRL_NEG_LOW - 16);
    case SRL_K_VARINT:
        if (srl_varint(s->data, s->end, pos, &u) != SRL_VARINT_OK)
            return SV_FALLBACK;
        return u <= INT64_MAX ? sv_int(s, (int64_t)u) : sv_number_text(s, u, 0, 0);
    case SRL_K_ZIGZAG:
        if (srl_varint(s->data, s->end, pos, &u) != SRL_VARINT_OK)
            return SV_FALLBACK;
        return sv_int(s, srl_zigzag_decode(u));
    case SRL_K_FLOAT:
        width = 4;
        break;
    case SRL_K_DOUBLE:
        width = 8;
        break;
    case SRL_K_LONG_DOUBLE:
    case SRL_K_FLOAT_128:
        width = 16;
        break;
    default:
        return SV_FALLBACK;
    }
    if (width > s->end - *pos)
        return SV_FALLBACK;
    *pos += width;
    switch (srl_tag_kind(tag)) {
    case SRL_K_FLOAT:
        d = PyFloat_Unpack4((const char *)p, 1);
        break;
    case SRL_K_DOUBLE:
        d = PyFloat_Unpack8((const char *)p, 1);
        break;
    case SRL_K_LONG_DOUBLE:
        d = srl_long_double_to_double(p);
        break;
    default:
        d = srl_float128_to_double(p);
        break;
    }
    return sv_number_text(s, 0, d, 1);
}

static int sv_item(Sv *s, Py_ssize_t *pos);

/* n elements at *pos as a Variant array (count checked as json.c's write_array). */
static int
sv_array(Sv *s, Py_ssize_t *pos, Py_ssize_t n)
{
    if (n > s->end - *pos)
        return SV_FALLBACK;
    Vx *v = &s->v;
    Py_ssize_t start = v->val.len, first = v->nelems;
    s->json_ub += 3; /* '[', ']', ',' */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (srl_vx_grow((void **)&v->elems, &v->elems_cap, v->nelems + 1, sizeof *v->elems) < 0)
            return SV_FALLBACK;
        v->elems[v->nelems++] = (int32_t)(v->val.len - start);
        if (sv_item(s, pos) < 0)
            return SV_FALLBACK;
    }
    return srl_vx_finish_array(v, start, first) < 0 ? SV_FALLBACK : 0;
}

/* n pairs at *pos as a Variant object (json.c's write_hash). */
static int
sv_hash(Sv *s, Py_ssize_t *pos, Py_ssize_t n)
{
    if (n > (s->end - *pos) / 2)
        return SV_FALLBACK;
    Vx *v = &s->v;
    Py_ssize_t start = v->val.len, first = v->nfields;
    s->json_ub += 3; /* '{', '}', ',' */
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t id;
        if (sv_key(s, pos, &id) < 0)
            return SV_FALLBACK;
        if (srl_vx_grow((void **)&v->fields, &v->fields_cap, v->nfields + 1, sizeof *v->fields) < 0)
            return SV_FALLBACK;
        v->fields[v->nfields].id = (int32_t)id;
        v->fields[v->nfields++].offset = (int32_t)(v->val.len - start);
        if (sv_item(s, pos) < 0)
            return SV_FALLBACK;
    }
    return srl_vx_finish_object(v, start, first, 0) < 0 ? SV_FALLBACK : 0;
}

/* ARRAY / HASH at tagpos with its count (json.c's srl_jx_container); `opened`: a REFN
 * has taken the level. */
static int
sv_container(Sv *s, Py_ssize_t tagpos, Py_ssize_t *pos, int opened)
{
    if (!opened && srl_body_enter(&s->depth, s->max_depth, tagpos) < 0)
        return SV_FALLBACK;
    Py_ssize_t p = tagpos + 1;
    uint64_t n;
    int rc = SV_FALLBACK;
    if (srl_varint(s->data, s->end, &p, &n) == SRL_VARINT_OK && n <= (uint64_t)(s->end - p)) {
        *pos = p;
        rc = (s->data[tagpos] & 0x7f) == SRL_ARRAY ? sv_array(s, pos, (Py_ssize_t)n)
                                                   : sv_hash(s, pos, (Py_ssize_t)n);
    }
    if (!opened)
        s->depth--;
    return rc;
}

/* One item at *pos (after PADs), as json.c's srl_jx_item for the tags handled here. */
static int
sv_item(Sv *s, Py_ssize_t *pos)
{
    if (srl_body_skip_pad(s->data, s->end, pos) < 0)
        return SV_FALLBACK;
    Py_ssize_t tagpos = *pos, target, after;
    sv_mark(s, tagpos);
    uint8_t tag = s->data[tagpos] & 0x7f;
    SrlKind kind = srl_tag_kind(tag);
    int rc = SV_FALLBACK;
    *pos = tagpos + 1;
    /* The commonest first, as json.c orders them. */
    if (tag >= SRL_SHORT_BINARY_LOW)
        return sv_string(s, tagpos, pos);
    if (tag == SRL_COPY)
        return (target = sv_copy_target(s, tagpos, pos)) < 0 ? SV_FALLBACK : sv_string(s, target, &after);
    switch (kind) {
    SRL_CASE_STRING:
        return sv_string(s, tagpos, pos);
    case SRL_K_COPY:
        return (target = sv_copy_target(s, tagpos, pos)) < 0 ? SV_FALLBACK : sv_string(s, target, &after);
    SRL_CASE_NUMBER:
        return sv_number(s, pos, tag) < 0 ? SV_FALLBACK : 0;
    case SRL_K_UNDEF:
        s->json_ub += 5;
        return srl_vx_put_primitive(&s->v, 0, 0, 0) < 0 ? SV_FALLBACK : 0;
    case SRL_K_TRUE:
        s->json_ub += 5;
        return srl_vx_put_primitive(&s->v, 1, 0, 0) < 0 ? SV_FALLBACK : 0;
    case SRL_K_FALSE:
        s->json_ub += 6;
        return srl_vx_put_primitive(&s->v, 2, 0, 0) < 0 ? SV_FALLBACK : 0;
    SRL_CASE_CONTAINER_REF:
        if (srl_body_enter(&s->depth, s->max_depth, tagpos) < 0)
            return SV_FALLBACK;
        rc = kind == SRL_K_ARRAYREF ? sv_array(s, pos, tag & 0x0f) : sv_hash(s, pos, tag & 0x0f);
        s->depth--;
        return rc;
    SRL_CASE_CONTAINER:
        return sv_container(s, tagpos, pos, 0);
    case SRL_K_REFN: {
        /* A reference is its referent (json_refs.c's srl_jx_refn); REFN ARRAY / HASH
         * one level. */
        if (srl_body_enter(&s->depth, s->max_depth, tagpos) < 0)
            return SV_FALLBACK;
        Py_ssize_t q = tagpos + 1;
        if (srl_body_skip_pad(s->data, s->end, &q) == 0) {
            uint8_t next = s->data[q] & 0x7f;
            *pos = q;
            if (next == SRL_ARRAY || next == SRL_HASH) {
                sv_mark(s, q);
                rc = sv_container(s, q, pos, 1);
            } else {
                rc = sv_item(s, pos);
            }
        }
        s->depth--;
        return rc;
    }
    /* What depends on items elsewhere (tracked targets, blessing, cycles) or is rare:
     * the JSON path's. */
    SRL_CASE_ELSEWHERE:
        return SV_FALLBACK;
    }
    return SV_FALLBACK;
}

/* The top-level array (ARRAY, ARRAYREF or REFN ARRAY): each element one row. */
static int
sv_rows(Sv *s, Py_ssize_t *pos, VBuf *meta, PyObject **voff_obj, PyObject **moff_obj)
{
    if (srl_body_skip_pad(s->data, s->end, pos) < 0)
        return SV_FALLBACK;
    Py_ssize_t tagpos = *pos, p = tagpos + 1;
    uint8_t tag = s->data[tagpos] & 0x7f;
    uint64_t n;
    sv_mark(s, tagpos);
    if (srl_body_enter(&s->depth, s->max_depth, tagpos) < 0)
        return SV_FALLBACK;
    if (tag == SRL_REFN) { /* REFN ARRAY: one level, as json_refs.c; REFN anything else
                            * is not the top-level array */
        if (srl_body_skip_pad(s->data, s->end, &p) < 0)
            return SV_FALLBACK;
        tagpos = p++;
        tag = s->data[tagpos] & 0x7f;
        sv_mark(s, tagpos);
        if (tag != SRL_ARRAY)
            return SV_FALLBACK;
    }
    if (srl_tag_kind(tag) == SRL_K_ARRAYREF) {
        n = tag & 0x0f;
    } else if (tag == SRL_ARRAY) {
        if (srl_varint(s->data, s->end, &p, &n) != SRL_VARINT_OK || n > (uint64_t)(s->end - p))
            return SV_FALLBACK;
    } else {
        return SV_FALLBACK;
    }
    if ((Py_ssize_t)n > s->end - p)
        return SV_FALLBACK;
    *voff_obj = PyBytes_FromStringAndSize(NULL, ((Py_ssize_t)n + 1) * (Py_ssize_t)sizeof(int32_t));
    *moff_obj = PyBytes_FromStringAndSize(NULL, ((Py_ssize_t)n + 1) * (Py_ssize_t)sizeof(int32_t));
    if (*voff_obj == NULL || *moff_obj == NULL)
        return SV_FALLBACK;
    int32_t *voff = (int32_t *)PyBytes_AS_STRING(*voff_obj);
    int32_t *moff = (int32_t *)PyBytes_AS_STRING(*moff_obj);
    voff[0] = moff[0] = 0;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
        Py_ssize_t start = s->v.val.len;
        s->v.row = i;
        s->tmpl = s->v.nkeys; /* the row before's dictionary, see sv_key_id */
        s->v.nkeys = 0;
        if (sv_item(s, &p) < 0)
            return SV_FALLBACK;
        s->v.keys.len = s->v.key_off[s->v.nkeys];
        if (srl_vx_end_row(&s->v, meta, start) < 0)
            return SV_FALLBACK;
        if (s->v.val.len > INT32_MAX || meta->len > INT32_MAX)
            return SV_FALLBACK;
        voff[i + 1] = (int32_t)s->v.val.len;
        moff[i + 1] = (int32_t)meta->len;
    }
    s->depth--;
    *pos = p;
    /* trailing bytes must be PADs (json.c's check_trailing) */
    for (; p < s->end; p++)
        if ((s->data[p] & 0x7f) != SRL_PAD)
            return SV_FALLBACK;
    return s->json_ub > s->json_cap ? SV_FALLBACK : 0;
}

PyObject *
srl_py_array_to_variant(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", "pos", "end", "base", "binary", "max_depth", NULL};
    Py_buffer view;
    Py_ssize_t pos, end, base;
    int binary, max_depth;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nnnii:array_to_variant_packed", kwlist,
                                     &view, &pos, &end, &base, &binary, &max_depth))
        return NULL;
    PyObject *result = NULL, *voff = NULL, *moff = NULL;
    Sv s;
    VBuf meta = {0};
    memset(&s, 0, sizeof s);
    if (srl_check_body_args(view.len, pos, end, base, binary, max_depth) < 0) {
        PyBuffer_Release(&view); /* a bad option: the JSON path's ValueError, raised here */
        return NULL;
    }
    SRL_WALKER_AT(&s, view.buf, pos, end, base, max_depth);
    s.binary = binary;
    s.json_cap = srl_json_cap(end - pos); /* json.c's */
    s.tag_starts = PyMem_Calloc(srl_bits_size(end - pos), 1);
    if (s.tag_starts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* Realistic events: values ~1.6 x and metadata ~0.8 x their Sereal body. */
    Py_ssize_t guess = 2 * (end - pos) > 64 ? 2 * (end - pos) : 64;
    if (srl_vx_open(&s.v, &meta, guess, max_depth) < 0 || srl_buf_init(&s.scratch, 64) < 0)
        goto done;
    s.v.key_off[0] = 0;
    Py_ssize_t p = pos;
    if (sv_rows(&s, &p, &meta, &voff, &moff) == 0) {
        PyObject *values = srl_vx_vbuf_finish(&s.v.val), *metadata = srl_vx_vbuf_finish(&meta);
        if (values != NULL && metadata != NULL)
            result = PyTuple_Pack(4, values, voff, metadata, moff);
        Py_XDECREF(values);
        Py_XDECREF(metadata);
    }
done:
    if (result == NULL && !(PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_MemoryError))) {
        PyErr_Clear(); /* the JSON path answers, with its own error if any */
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&view);
    Py_XDECREF(voff);
    Py_XDECREF(moff);
    srl_vx_close(&s.v, &meta);
    srl_buf_free(&s.scratch);
    PyMem_Free(s.tag_starts);
    PyMem_Free(s.key_src);
    return result;
}
