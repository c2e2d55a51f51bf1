/* Variant transcoding (see variant.h): strings, keys and numbers, written as Spark's
 * VariantBuilder writes them. */
#include "variant.h"
#include "text.h"

/* ---- strings ---- */

static int
hex4(const uint8_t *p, uint32_t *out)
{
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t c = p[i];
        x <<= 4;
        if (c >= '0' && c <= '9')
            x |= (uint32_t)(c - '0');
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            x |= (uint32_t)((c | 0x20) - 'a' + 10);
        else
            return -1;
    }
    *out = x;
    return 0;
}

static void
put_utf8(SrlBuf *b, uint32_t cp)
{
    uint8_t *p = b->data + b->len;
    if (cp < 0x80) {
        p[0] = (uint8_t)cp;
        b->len += 1;
    }
    else if (cp < 0x800) {
        p[0] = (uint8_t)(0xc0 | cp >> 6);
        p[1] = (uint8_t)(0x80 | (cp & 0x3f));
        b->len += 2;
    }
    else if (cp < 0x10000) {
        p[0] = (uint8_t)(0xe0 | cp >> 12);
        p[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        p[2] = (uint8_t)(0x80 | (cp & 0x3f));
        b->len += 3;
    }
    else {
        p[0] = (uint8_t)(0xf0 | cp >> 18);
        p[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
        p[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        p[3] = (uint8_t)(0x80 | (cp & 0x3f));
        b->len += 4;
    }
}

/* The escape at v->pos (a backslash) into v->str. */
static int
unescape(Vx *v)
{
    Py_ssize_t at = v->pos;
    if (at + 1 >= v->len)
        return srl_vx_fail(v, v->len, "unterminated string");
    if (srl_buf_reserve(&v->str, 4) < 0)
        return -1;
    uint8_t c = v->s[at + 1];
    const char *simple = strchr("\"\\/bfnrt", c);
    if (c != 0 && simple != NULL) {
        static const uint8_t decoded[] = "\"\\/\b\f\n\r\t";
        v->str.data[v->str.len++] = decoded[simple - "\"\\/bfnrt"];
        v->pos = at + 2;
        return 0;
    }
    uint32_t cp, lo;
    if (c != 'u' || at + 6 > v->len || hex4(v->s + at + 2, &cp) < 0)
        return srl_vx_fail(v, at, "invalid escape");
    v->pos = at + 6;
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (v->pos + 6 > v->len || v->s[v->pos] != '\\' || v->s[v->pos + 1] != 'u' ||
            hex4(v->s + v->pos + 2, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
            return srl_vx_fail(v, at, "lone surrogate escape");
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        v->pos += 6;
    }
    else if (cp >= 0xdc00 && cp <= 0xdfff)
        return srl_vx_fail(v, at, "lone surrogate escape");
    put_utf8(&v->str, cp);
    return 0;
}

/* The string at v->pos (a '"'): *out / *n its UTF-8 bytes (in the text when it has no
 * escape, else in v->str); v->pos after the closing quote. */
int
srl_vx_parse_string(Vx *v, const uint8_t **out, Py_ssize_t *n)
{
    const uint8_t *s = v->s;
    Py_ssize_t start = ++v->pos, p = start;
    int escaped = 0;
    v->str.len = 0;
    for (;;) {
        while (p < v->len && srl_json_plain[s[p]])
            p++;
        if (p >= v->len)
            return srl_vx_fail(v, v->len, "unterminated string");
        uint8_t c = s[p];
        if (c == '"')
            break;
        if (c < 0x20)
            return srl_vx_fail(v, p, "control character in a string");
        if (c >= 0x80) {
            int k = srl_utf8_seq(s + p, v->len - p);
            if (k == 0)
                return srl_vx_fail(v, p, "invalid UTF-8");
            p += k;
            continue;
        }
        /* a backslash: copy what came before it, then decode it */
        if (!escaped) {
            escaped = 1;
            start = v->pos; /* v->str holds the string from here on */
        }
        if (srl_buf_put_bytes(&v->str, s + start, p - start) < 0)
            return -1;
        v->pos = p;
        if (unescape(v) < 0)
            return -1;
        start = p = v->pos;
    }
    if (escaped) {
        if (srl_buf_put_bytes(&v->str, s + start, p - start) < 0)
            return -1;
        *out = v->str.data;
        *n = v->str.len;
    }
    else {
        *out = s + v->pos;
        *n = p - v->pos;
    }
    v->pos = p + 1;
    return 0;
}

int
srl_vx_put_string(Vx *v, const uint8_t *s, Py_ssize_t n)
{
    if (vbuf_reserve(&v->val, n + 5) < 0)
        return -1;
    uint8_t *p = v->val.data + v->val.len;
    if (n <= 63) {
        *p++ = (uint8_t)(n << 2 | 1); /* short string */
    }
    else {
        *p++ = 16 << 2; /* string, 4-byte length */
        put_le(p, (uint64_t)n, 4);
        p += 4;
    }
    memcpy(p, s, (size_t)n);
    v->val.len = (p - v->val.data) + n;
    return 0;
}

/* ---- keys ---- */

/* A UTF-8 byte's rank in Java's order: EE, EF (U+E000..U+FFFF) after F0..F4. */
static inline unsigned
java_byte(uint8_t c)
{
    return (c & 0xfe) == 0xee ? c + 7u : c;
}

/* FNV-1a, bit 0 replaced by whether a byte is EE or EF (key_cmp's slow path). */
static uint32_t
key_hash(const uint8_t *s, Py_ssize_t n)
{
    uint32_t h = 2166136261u, high = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        h = (h ^ s[i]) * 16777619u;
        high |= (s[i] & 0xfe) == 0xee;
    }
    return (h & ~1u) | high;
}

int
srl_vx_rehash(Vx *v, Py_ssize_t cap)
{
    int32_t *table = PyMem_Calloc((size_t)cap, sizeof *table);
    if (table == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t id = 0; id < v->nkeys; id++) {
        Py_ssize_t i = v->key_hash[id] & (cap - 1);
        while (table[i] != 0)
            i = (i + 1) & (cap - 1);
        table[i] = (int32_t)id + 1;
    }
    PyMem_Free(v->table);
    v->table = table;
    v->table_cap = cap;
    return 0;
}

/* The key's id in the row's dictionary, added if new; -1 on error. */
Py_ssize_t
srl_vx_key_id(Vx *v, const uint8_t *s, Py_ssize_t n)
{
    uint32_t h = key_hash(s, n);
    Py_ssize_t mask = v->table_cap - 1, i = h & mask;
    for (int32_t e; (e = v->table[i]) != 0; i = (i + 1) & mask) {
        Py_ssize_t id = e - 1, a = v->key_off[id];
        if (v->key_hash[id] == h && v->key_off[id + 1] - a == n &&
            memcmp(v->keys.data + a, s, (size_t)n) == 0)
            return id;
    }
    if (v->keys.len + n > VX_SIZE_LIMIT)
        return srl_vx_fail(v, v->pos, "variant metadata larger than 128 MiB");
    if (v->nkeys + 2 > v->keys_cap) {
        Py_ssize_t cap = v->keys_cap;
        Py_ssize_t cap2 = v->keys_cap;
        if (srl_vx_grow((void **)&v->key_hash, &cap, v->nkeys + 2, sizeof *v->key_hash) < 0 ||
            srl_vx_grow((void **)&v->key_pfx, &cap2, v->nkeys + 2, sizeof *v->key_pfx) < 0 ||
            srl_vx_grow((void **)&v->key_off, &v->keys_cap, v->nkeys + 2, sizeof *v->key_off) < 0)
            return -1;
    }
    if (srl_buf_put_bytes(&v->keys, s, n) < 0)
        return -1;
    Py_ssize_t id = v->nkeys++;
    v->key_hash[id] = h;
    uint64_t pfx = 0;
    for (Py_ssize_t k = 0; k < 8; k++)
        pfx = pfx << 8 | (k < n ? java_byte(s[k]) : 0);
    v->key_pfx[id] = pfx;
    v->key_off[id + 1] = (int32_t)v->keys.len;
    v->table[i] = (int32_t)id + 1;
    if (2 * v->nkeys > v->table_cap && srl_vx_rehash(v, 2 * v->table_cap) < 0)
        return -1;
    return id;
}

/* Java's String.compareTo on UTF-8: byte order, except that U+E000..U+FFFF (lead
 * bytes EE, EF) sort after the supplementary planes (surrogate pairs in UTF-16). */
static int
key_cmp(const Vx *v, int32_t a, int32_t b)
{
    if (v->key_pfx[a] != v->key_pfx[b])
        return v->key_pfx[a] < v->key_pfx[b] ? -1 : 1;
    const uint8_t *x = v->keys.data + v->key_off[a], *y = v->keys.data + v->key_off[b];
    Py_ssize_t nx = v->key_off[a + 1] - v->key_off[a], ny = v->key_off[b + 1] - v->key_off[b];
    Py_ssize_t n = nx < ny ? nx : ny;
    if (!((v->key_hash[a] | v->key_hash[b]) & 1)) { /* byte order is Java's order */
        int c = memcmp(x, y, (size_t)n);
        return c != 0 ? c : (nx > ny) - (nx < ny);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (x[i] != y[i]) {
            return java_byte(x[i]) < java_byte(y[i]) ? -1 : 1;
        }
    }
    return nx < ny ? -1 : nx > ny;
}

/* Stable merge sort of f[0:n] by key (tmp holds n). */
void
srl_vx_sort_fields(const Vx *v, VField *f, VField *tmp, Py_ssize_t n)
{
    if (n <= 12) {
        for (Py_ssize_t i = 1; i < n; i++) {
            VField x = f[i];
            Py_ssize_t j = i;
            for (; j > 0 && key_cmp(v, f[j - 1].id, x.id) > 0; j--)
                f[j] = f[j - 1];
            f[j] = x;
        }
        return;
    }
    Py_ssize_t h = n / 2, i = 0, j = h, k = 0;
    srl_vx_sort_fields(v, f, tmp, h);
    srl_vx_sort_fields(v, f + h, tmp, n - h);
    while (i < h && j < n)
        tmp[k++] = key_cmp(v, f[j].id, f[i].id) < 0 ? f[j++] : f[i++];
    while (i < h)
        tmp[k++] = f[i++];
    memcpy(f, tmp, (size_t)k * sizeof *f);
}


int
srl_vx_put_primitive(Vx *v, int type, uint64_t bits, int n)
{
    if (vbuf_reserve(&v->val, 1 + n) < 0)
        return -1;
    v->val.data[v->val.len] = (uint8_t)(type << 2);
    put_le(v->val.data + v->val.len + 1, bits, n);
    v->val.len += 1 + n;
    return 0;
}

static int
put_double(Vx *v, Py_ssize_t start)
{
    v->str.len = 0;
    if (srl_buf_put_bytes(&v->str, v->s + start, v->pos - start) < 0 ||
        srl_buf_put_byte(&v->str, 0) < 0)
        return -1;
    double d = PyOS_string_to_double((const char *)v->str.data, NULL, NULL);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return srl_vx_put_primitive(v, 7, bits, 8);
}

/* A number: an integer as the smallest of int8..int64; else (no exponent, at most 38
 * digits and 38 fraction digits) a decimal; else a double (as parse_json). */
int
srl_vx_parse_number(Vx *v)
{
    const uint8_t *s = v->s;
    Py_ssize_t start = v->pos, p = start;
    int neg = 0;
    if (s[p] == '-') {
        neg = 1;
        p++;
    }
    if (p >= v->len || s[p] < '0' || s[p] > '9')
        return srl_vx_fail(v, start, "invalid number");
    Py_ssize_t int_start = p;
    if (s[p] == '0')
        p++;
    else
        while (p < v->len && s[p] >= '0' && s[p] <= '9')
            p++;
    Py_ssize_t int_end = p, frac_start = p, frac_end = p;
    int has_exp = 0;
    if (p < v->len && s[p] == '.') {
        frac_start = ++p;
        while (p < v->len && s[p] >= '0' && s[p] <= '9')
            p++;
        frac_end = p;
        if (frac_end == frac_start)
            return srl_vx_fail(v, start, "invalid number");
    }
    if (p < v->len && (s[p] == 'e' || s[p] == 'E')) {
        has_exp = 1;
        p++;
        if (p < v->len && (s[p] == '+' || s[p] == '-'))
            p++;
        if (p >= v->len || s[p] < '0' || s[p] > '9')
            return srl_vx_fail(v, start, "invalid number");
        while (p < v->len && s[p] >= '0' && s[p] <= '9')
            p++;
    }
    if (p < v->len && s[p] >= '0' && s[p] <= '9')
        return srl_vx_fail(v, start, "invalid number"); /* a leading zero */
    v->pos = p;
    if (has_exp)
        return put_double(v, start);
    /* significant digits of int part + fraction */
    Py_ssize_t scale = frac_end - frac_start, digits = 0;
    unsigned __int128 u = 0;
    for (Py_ssize_t i = int_start; i < frac_end; i++) {
        if (i == int_end) {
            i = frac_start - 1;
            continue;
        }
        if (digits == 0 && s[i] == '0')
            continue;
        if (++digits > 38)
            return put_double(v, start);
        u = u * 10 + (unsigned)(s[i] - '0');
    }
    if (scale == 0 && (u <= (unsigned __int128)INT64_MAX || (neg && u == (unsigned __int128)INT64_MAX + 1))) {
        int64_t x = neg ? (int64_t)(0 - (uint64_t)u) : (int64_t)u;
        if (x >= INT8_MIN && x <= INT8_MAX)
            return srl_vx_put_primitive(v, 3, (uint64_t)x, 1);
        if (x >= INT16_MIN && x <= INT16_MAX)
            return srl_vx_put_primitive(v, 4, (uint64_t)x, 2);
        if (x >= INT32_MIN && x <= INT32_MAX)
            return srl_vx_put_primitive(v, 5, (uint64_t)x, 4);
        return srl_vx_put_primitive(v, 6, (uint64_t)x, 8);
    }
    if (scale > 38)
        return put_double(v, start);
    Py_ssize_t precision = digits > 0 ? digits : 1;
    __int128 x = neg ? -(__int128)u : (__int128)u;
    int size = scale <= 9 && precision <= 9 ? 4 : scale <= 18 && precision <= 18 ? 8 : 16;
    if (vbuf_reserve(&v->val, 2 + size) < 0)
        return -1;
    uint8_t *q = v->val.data + v->val.len;
    q[0] = (uint8_t)((size == 4 ? 8 : size == 8 ? 9 : 10) << 2);
    q[1] = (uint8_t)scale;
    for (int i = 0; i < size; i++)
        q[2 + i] = (uint8_t)((unsigned __int128)x >> (8 * i));
    v->val.len += 2 + size;
    return 0;
}

int
srl_vx_literal(Vx *v, const char *word, int type)
{
    size_t n = strlen(word);
    if ((size_t)(v->len - v->pos) < n || memcmp(v->s + v->pos, word, n) != 0)
        return srl_vx_fail(v, v->pos, "expected a value");
    v->pos += (Py_ssize_t)n;
    return srl_vx_put_primitive(v, type, 0, 0);
}

