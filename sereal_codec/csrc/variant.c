/* JSON texts to Spark's Variant binary encoding (DESIGN.md, "Variant transcoding"):
 * the entry point, containers and rows (strings, keys and numbers: variant_scalar.c).
 *
 * Each text becomes a (value, metadata) pair byte for byte as Spark 4's parse_json
 * builds it (org.apache.spark.types.variant.VariantBuilder): keys in the metadata
 * dictionary in order of first appearance (not flagged sorted); object values in
 * document order, field ids and offsets sorted by key in Java's String order (UTF-16
 * code units); the smallest integer type that holds an integer; a number with a '.'
 * and no exponent as a decimal (4, 8 or 16 bytes by precision and scale) when it has
 * at most 38 digits and 38 fraction digits, else a double; strings of up to 63 bytes
 * as short strings. A key repeated in one object is an error, as in parse_json.
 *
 * The pure reference (pure/variant.py) gives the same bytes and the same errors. */
#include "variant.h"

static int
vbuf_init(VBuf *b, Py_ssize_t cap)
{
    b->obj = PyBytes_FromStringAndSize(NULL, cap);
    if (b->obj == NULL)
        return -1;
    b->data = (uint8_t *)PyBytes_AS_STRING(b->obj);
    b->len = 0;
    b->cap = cap;
    return 0;
}

int
srl_vx_vbuf_grow(VBuf *b, Py_ssize_t n)
{
    Py_ssize_t cap = b->cap;
    while (cap - b->len < n) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    if (_PyBytes_Resize(&b->obj, cap) < 0) /* on failure obj is freed and NULL */
        return -1;
    b->data = (uint8_t *)PyBytes_AS_STRING(b->obj);
    b->cap = cap;
    return 0;
}

/* The bytes object, cut to its length (the buffer gives it up). */
PyObject *
srl_vx_vbuf_finish(VBuf *b)
{
    if (_PyBytes_Resize(&b->obj, b->len) < 0)
        return NULL;
    PyObject *obj = b->obj;
    b->obj = NULL;
    return obj;
}

int
srl_vx_fail(Vx *v, Py_ssize_t pos, const char *what)
{
    PyErr_Format(PyExc_ValueError, "JSON text %zd: %s at byte %zd", v->row, what, pos);
    return -1;
}

/* The nesting error, naming the limit ("nesting deeper than max_depth=N"). */
static int
srl_vx_fail_depth(Vx *v)
{
    PyErr_Format(PyExc_ValueError, "JSON text %zd: nesting deeper than max_depth=%d at byte %zd",
                 v->row, v->max_depth, v->pos);
    return -1;
}

int
srl_vx_grow(void **items, Py_ssize_t *cap, Py_ssize_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *p = PyMem_Realloc(*items, (size_t)n * size);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = p;
    *cap = n;
    return 0;
}

/* ---- values ---- */

static int parse_value(Vx *v);

/* Move the values written since `start` right by `hsize` bytes; returns the header. */
static uint8_t *
open_header(Vx *v, Py_ssize_t start, Py_ssize_t hsize)
{
    if (vbuf_reserve(&v->val, hsize) < 0)
        return NULL;
    uint8_t *p = v->val.data + start;
    memmove(p + hsize, p, (size_t)(v->val.len - start));
    v->val.len += hsize;
    return p;
}

int
srl_vx_finish_object(Vx *v, Py_ssize_t start, Py_ssize_t first, Py_ssize_t close_pos)
{
    Py_ssize_t n = v->nfields - first, size = v->val.len - start;
    VField *f = v->fields + first;
    if (srl_vx_grow((void **)&v->tmp, &v->tmp_cap, n, sizeof *v->tmp) < 0)
        return -1;
    srl_vx_sort_fields(v, f, v->tmp, n);
    int32_t max_id = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i > 0 && f[i].id == f[i - 1].id) {
            Py_ssize_t a = v->key_off[f[i].id];
            PyObject *key = PyUnicode_DecodeUTF8((const char *)v->keys.data + a,
                                                 v->key_off[f[i].id + 1] - a, "strict");
            if (key != NULL) {
                PyErr_Format(PyExc_ValueError, "JSON text %zd: duplicate key %R at byte %zd",
                             v->row, key, close_pos);
                Py_DECREF(key);
            }
            return -1;
        }
        max_id = f[i].id > max_id ? f[i].id : max_id;
    }
    int large = n > 255, id_size = int_size(max_id), off_size = int_size(size);
    Py_ssize_t hsize = 1 + (large ? 4 : 1) + n * id_size + (n + 1) * off_size;
    uint8_t *p = open_header(v, start, hsize);
    if (p == NULL)
        return -1;
    *p++ = (uint8_t)((large << 4 | (id_size - 1) << 2 | (off_size - 1)) << 2 | 2);
    put_le(p, (uint64_t)n, large ? 4 : 1);
    p += large ? 4 : 1;
    for (Py_ssize_t i = 0; i < n; i++, p += id_size)
        put_le(p, (uint64_t)f[i].id, id_size);
    for (Py_ssize_t i = 0; i < n; i++, p += off_size)
        put_le(p, (uint64_t)f[i].offset, off_size);
    put_le(p, (uint64_t)size, off_size);
    v->nfields = first;
    return 0;
}

/* Past the opening bracket at v->pos and the spaces after it: 1 when `closer` follows
 * at once (an empty container; v->pos past it), else 0. */
static inline int
open_container(Vx *v, uint8_t closer)
{
    v->pos++;
    skip_ws(v);
    if (v->pos < v->len && v->s[v->pos] == closer) {
        v->pos++;
        return 1;
    }
    return 0;
}

static int
parse_object(Vx *v)
{
    Py_ssize_t start = v->val.len, first = v->nfields;
    if (open_container(v, '}'))
        return srl_vx_finish_object(v, start, first, v->pos - 1);
    for (;;) {
        if (v->pos >= v->len || v->s[v->pos] != '"')
            return srl_vx_fail(v, v->pos, "expected a key");
        const uint8_t *key;
        Py_ssize_t n;
        if (srl_vx_parse_string(v, &key, &n) < 0)
            return -1;
        Py_ssize_t id = srl_vx_key_id(v, key, n);
        if (id < 0)
            return -1;
        if (srl_vx_grow((void **)&v->fields, &v->fields_cap, v->nfields + 1, sizeof *v->fields) < 0)
            return -1;
        v->fields[v->nfields].id = (int32_t)id;
        v->fields[v->nfields++].offset = (int32_t)(v->val.len - start);
        skip_ws(v);
        if (v->pos >= v->len || v->s[v->pos] != ':')
            return srl_vx_fail(v, v->pos, "expected ':'");
        v->pos++;
        if (parse_value(v) < 0)
            return -1;
        skip_ws(v);
        uint8_t c = v->pos < v->len ? v->s[v->pos] : 0;
        if (c == '}') {
            v->pos++;
            return srl_vx_finish_object(v, start, first, v->pos - 1);
        }
        if (c != ',')
            return srl_vx_fail(v, v->pos, "expected ',' or '}'");
        v->pos++;
        skip_ws(v);
    }
}

int
srl_vx_finish_array(Vx *v, Py_ssize_t start, Py_ssize_t first)
{
    Py_ssize_t n = v->nelems - first, size = v->val.len - start;
    int large = n > 255, off_size = int_size(size);
    Py_ssize_t hsize = 1 + (large ? 4 : 1) + (n + 1) * off_size;
    uint8_t *p = open_header(v, start, hsize);
    if (p == NULL)
        return -1;
    *p++ = (uint8_t)((large << 2 | (off_size - 1)) << 2 | 3);
    put_le(p, (uint64_t)n, large ? 4 : 1);
    p += large ? 4 : 1;
    for (Py_ssize_t i = first; i < v->nelems; i++, p += off_size)
        put_le(p, (uint64_t)v->elems[i], off_size);
    put_le(p, (uint64_t)size, off_size);
    v->nelems = first;
    return 0;
}

static int
parse_array(Vx *v)
{
    Py_ssize_t start = v->val.len, first = v->nelems;
    if (open_container(v, ']'))
        return srl_vx_finish_array(v, start, first);
    for (;;) {
        if (srl_vx_grow((void **)&v->elems, &v->elems_cap, v->nelems + 1, sizeof *v->elems) < 0)
            return -1;
        v->elems[v->nelems++] = (int32_t)(v->val.len - start);
        if (parse_value(v) < 0)
            return -1;
        skip_ws(v);
        uint8_t c = v->pos < v->len ? v->s[v->pos] : 0;
        if (c == ']') {
            v->pos++;
            return srl_vx_finish_array(v, start, first);
        }
        if (c != ',')
            return srl_vx_fail(v, v->pos, "expected ',' or ']'");
        v->pos++;
    }
}

static int
parse_value(Vx *v)
{
    skip_ws(v);
    if (v->pos >= v->len)
        return srl_vx_fail(v, v->pos, "expected a value");
    uint8_t c = v->s[v->pos];
    if (c == '"') {
        const uint8_t *s;
        Py_ssize_t n;
        return srl_vx_parse_string(v, &s, &n) < 0 ? -1 : srl_vx_put_string(v, s, n);
    }
    if (c == '{' || c == '[') {
        if (++v->depth > v->max_depth)
            return srl_vx_fail_depth(v);
        int rc = c == '{' ? parse_object(v) : parse_array(v);
        v->depth--;
        return rc;
    }
    if (c == '-' || (c >= '0' && c <= '9'))
        return srl_vx_parse_number(v);
    if (c == 'n')
        return srl_vx_literal(v, "null", 0);
    if (c == 't')
        return srl_vx_literal(v, "true", 1);
    if (c == 'f')
        return srl_vx_literal(v, "false", 2);
    return srl_vx_fail(v, v->pos, "expected a value");
}


/* ---- one text, all texts ---- */

static int
put_metadata(Vx *v, VBuf *meta)
{
    Py_ssize_t nk = v->nkeys, strings = v->keys.len;
    int off_size = int_size(strings > nk ? strings : nk);
    if (vbuf_reserve(meta, 1 + (nk + 2) * off_size + strings) < 0)
        return -1;
    uint8_t *p = meta->data + meta->len;
    *p++ = (uint8_t)(1 | (off_size - 1) << 6);
    put_le(p, (uint64_t)nk, off_size);
    p += off_size;
    for (Py_ssize_t i = 0; i <= nk; i++, p += off_size)
        put_le(p, (uint64_t)v->key_off[i], off_size);
    memcpy(p, v->keys.data, (size_t)strings);
    meta->len = (p - meta->data) + strings;
    return 0;
}

void
srl_vx_begin_row(Vx *v)
{
    v->pos = 0;
    v->depth = 0;
    v->nkeys = 0;
    v->keys.len = 0;
    v->key_off[0] = 0;
    memset(v->table, 0, (size_t)v->table_cap * sizeof *v->table);
}

int
srl_vx_end_row(Vx *v, VBuf *meta, Py_ssize_t start)
{
    if (v->val.len - start > VX_SIZE_LIMIT)
        return srl_vx_fail(v, v->len, "variant value larger than 128 MiB");
    return put_metadata(v, meta);
}

static int
one_text(Vx *v, VBuf *meta)
{
    Py_ssize_t start = v->val.len;
    srl_vx_begin_row(v);
    if (parse_value(v) < 0)
        return -1;
    skip_ws(v);
    if (v->pos != v->len)
        return srl_vx_fail(v, v->pos, "trailing characters");
    return srl_vx_end_row(v, meta, start);
}

int
srl_vx_open(Vx *v, VBuf *meta, Py_ssize_t guess, int max_depth)
{
    v->max_depth = max_depth;
    v->table = PyMem_Calloc(64, sizeof *v->table);
    v->table_cap = 64;
    if (v->table == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (vbuf_init(&v->val, guess) < 0 || vbuf_init(meta, guess / 2) < 0 ||
        srl_buf_init(&v->keys, 256) < 0 || srl_buf_init(&v->str, 256) < 0 ||
        srl_vx_grow((void **)&v->key_hash, &v->keys_cap, 64, sizeof *v->key_hash) < 0)
        return -1;
    v->key_off = PyMem_Malloc((size_t)v->keys_cap * sizeof *v->key_off);
    v->key_pfx = PyMem_Malloc((size_t)v->keys_cap * sizeof *v->key_pfx);
    if (v->key_off == NULL || v->key_pfx == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

void
srl_vx_close(Vx *v, VBuf *meta)
{
    Py_XDECREF(v->val.obj);
    Py_XDECREF(meta->obj);
    srl_buf_free(&v->keys);
    srl_buf_free(&v->str);
    PyMem_Free(v->key_off);
    PyMem_Free(v->key_hash);
    PyMem_Free(v->table);
    PyMem_Free(v->fields);
    PyMem_Free(v->tmp);
    PyMem_Free(v->elems);
    PyMem_Free(v->key_pfx);
}

PyObject *
srl_py_json_to_variant(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"text", "offsets", "max_depth", NULL};
    Py_buffer text, offs;
    int max_depth = 512;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*y*|i:json_to_variant_packed", kwlist,
                                     &text, &offs, &max_depth))
        return NULL;
    PyObject *result = NULL;
    Vx v = {0};
    VBuf meta = {0};
    PyObject *voff_obj = NULL, *moff_obj = NULL;
    int32_t *voff, *moff;
    const int64_t *bounds = offs.buf;
    Py_ssize_t n = offs.len / 8 - 1;
    if (offs.len % 8 != 0 || n < 0) {
        PyErr_SetString(PyExc_ValueError, "offsets must be n + 1 native int64 (8n + 8 bytes)");
        goto done;
    }
    for (Py_ssize_t i = 0; i <= n; i++) {
        if (bounds[i] < (i ? bounds[i - 1] : 0) || bounds[i] > text.len) {
            PyErr_Format(PyExc_ValueError,
                         "offsets[%zd] = %lld is out of order or past the text's %zd bytes", i,
                         (long long)bounds[i], text.len);
            goto done;
        }
    }
    /* The parser recurses once per level: the codec-wide cap bounds its C stack. */
    if (max_depth < 0 || max_depth > SRL_MAX_DEPTH_CAP) {
        PyErr_Format(PyExc_ValueError, "max_depth must be in 0..%d, got %d", SRL_MAX_DEPTH_CAP,
                     max_depth);
        goto done;
    }
    voff_obj = PyBytes_FromStringAndSize(NULL, (n + 1) * (Py_ssize_t)sizeof(int32_t));
    moff_obj = PyBytes_FromStringAndSize(NULL, (n + 1) * (Py_ssize_t)sizeof(int32_t));
    if (voff_obj == NULL || moff_obj == NULL)
        goto done;
    voff = (int32_t *)PyBytes_AS_STRING(voff_obj);
    moff = (int32_t *)PyBytes_AS_STRING(moff_obj);
    /* Realistic events: values ~60 % and metadata ~35 % of their JSON text. */
    if (srl_vx_open(&v, &meta, text.len > 64 ? text.len : 64, max_depth) < 0)
        goto done;
    voff[0] = moff[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        v.row = i;
        v.s = (const uint8_t *)text.buf + bounds[i];
        v.len = (Py_ssize_t)(bounds[i + 1] - bounds[i]);
        if (one_text(&v, &meta) < 0)
            goto done;
        if (v.val.len > INT32_MAX || meta.len > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "more than 2 GiB of variant data in one call");
            goto done;
        }
        voff[i + 1] = (int32_t)v.val.len;
        moff[i + 1] = (int32_t)meta.len;
    }
    PyObject *values = srl_vx_vbuf_finish(&v.val), *metadata = srl_vx_vbuf_finish(&meta);
    if (values != NULL && metadata != NULL)
        result = PyTuple_Pack(4, values, voff_obj, metadata, moff_obj);
    Py_XDECREF(values);
    Py_XDECREF(metadata);
done:
    PyBuffer_Release(&text);
    PyBuffer_Release(&offs);
    Py_XDECREF(voff_obj);
    Py_XDECREF(moff_obj);
    srl_vx_close(&v, &meta);
    return result;
}
