/* JSON transcoder (see json.h): scalars. String payloads and their JSON in each role,
 * the COPY-target cache (each target's JSON made once per role), keys, numbers, and
 * writing a finished span's value again for REFP / ALIAS. Checks as decode.c's. */
#include "json.h"

#include <string.h>

/* Payload of the string tag at tagpos (checked as decode.c's read_string). */
int
srl_jx_string_payload(Jx *j, Py_ssize_t tagpos, const uint8_t **s, Py_ssize_t *n, Py_ssize_t *after)
{
    Py_ssize_t p, len;
    if (srl_jx_string_bytes(j, tagpos, j->data[tagpos] & 0x7f, &p, &len) < 0)
        return -1;
    *s = j->data + p;
    *n = len;
    *after = p + len;
    return 0;
}

/* The JSON of string bytes in a role, per DESIGN.md's mapping. */
int
srl_jx_put_string_json(Jx *j, SrlBuf *b, uint8_t tag, const uint8_t *s, Py_ssize_t n, int is_key)
{
    if (tag == SRL_STR_UTF8 || j->binary == SRL_BINARY_UTF8)
        return srl_json_put_utf8(b, s, n);
    if (j->binary == SRL_BINARY_LATIN1)
        return srl_json_put_latin1(b, s, n);
    return is_key ? srl_json_put_utf8(b, s, n) : srl_json_put_base64(b, s, n);
}

int
srl_jx_string(Jx *j, Py_ssize_t tagpos, int is_key, Py_ssize_t *after)
{
    const uint8_t *s;
    Py_ssize_t n;
    if (srl_jx_string_payload(j, tagpos, &s, &n, after) < 0)
        return -1;
    return srl_jx_put_string_json(j, &j->out, j->data[tagpos] & 0x7f, s, n, is_key);
}

/* The cached JSON text of the string at tagpos in a role, or NULL. Only strings
 * already validated are ever cached. */
static inline JText *
cached_text(Jx *j, Py_ssize_t key, size_t slot)
{
    if (j->recent[slot].key == key)
        return &j->strs[j->recent[slot].index];
    intptr_t hit;
    if (!srl_offtable_get(&j->strings, key, &hit))
        return NULL;
    j->recent[slot].key = key;
    j->recent[slot].index = (Py_ssize_t)hit;
    return &j->strs[hit];
}

static inline size_t
recent_slot(Py_ssize_t key)
{
    return (size_t)(key ^ (key >> 8)) & 255;
}

/* The JSON text of the (validated) string at tagpos in a role, made once. */
static JText *
string_text(Jx *j, Py_ssize_t tagpos, int is_key)
{
    Py_ssize_t key = srl_jx_string_key(j, tagpos, is_key);
    size_t slot = recent_slot(key);
    JText *cached = cached_text(j, key, slot);
    if (cached != NULL)
        return cached;
    const uint8_t *s;
    Py_ssize_t n, after;
    if (srl_jx_string_payload(j, tagpos, &s, &n, &after) < 0)
        return NULL;
    if (j->nstrs == j->strs_cap) {
        Py_ssize_t cap = j->strs_cap ? 2 * j->strs_cap : 64;
        JText *strs = PyMem_Realloc(j->strs, (size_t)cap * sizeof *strs);
        if (strs == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        j->strs = strs;
        j->strs_cap = cap;
    }
    Py_ssize_t start = j->texts.len;
    /* 16 spare bytes after every text: put_text copies short ones 16 at a time */
    if (srl_jx_put_string_json(j, &j->texts, j->data[tagpos] & 0x7f, s, n, is_key) < 0 ||
        srl_buf_reserve(&j->texts, 16) < 0)
        return NULL;
    JText *t = &j->strs[j->nstrs];
    t->start = start;
    t->len = j->texts.len - start;
    t->truth = !(n == 0 || (n == 1 && s[0] == '0'));
    if (srl_offtable_put(&j->strings, key, j->nstrs) < 0)
        return NULL;
    j->recent[slot].key = key;
    j->recent[slot].index = j->nstrs++;
    return t;
}

static inline int
put_text(Jx *j, const JText *t)
{
    if (t->len <= 16) {
        if (srl_buf_reserve(&j->out, 16) < 0)
            return -1;
        memcpy(j->out.data + j->out.len, j->texts.data + t->start, 16);
        j->out.len += t->len;
        return 0;
    }
    if (srl_buf_put_bytes(&j->out, j->texts.data + t->start, t->len) < 0)
        return -1;
    return t->len > 64 ? srl_jx_check_cap(j) : 0;
}

/* COPY at tagpos (validated as decode.c's copy_string_borrowed: a string tag read
 * earlier in this body), its text written; *truth (if not NULL): Perl's truth. */
int
srl_jx_copy(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, int is_key, Py_ssize_t *target_out,
            int *truth)
{
    Py_ssize_t p = tagpos + 1;
    uint64_t o;
    if (srl_jx_varint(j, &p, &o, "a COPY offset") < 0)
        return -1;
    Py_ssize_t target = o > (uint64_t)(tagpos - j->base) ? -1 : j->base + (Py_ssize_t)o;
    if (target >= j->start && target < tagpos) {
        /* A cached target was validated when first made: the hot path touches
         * neither the bitmap nor the target's bytes. */
        Py_ssize_t key = srl_jx_string_key(j, target, is_key);
        JText *t = cached_text(j, key, recent_slot(key));
        if (t == NULL) {
            if (!srl_jx_is_tag_start(j, target) || !srl_is_string_tag(j->data[target] & 0x7f))
                goto bad;
            if ((t = string_text(j, target, is_key)) == NULL)
                return -1;
        }
        if (truth != NULL)
            *truth = t->truth;
        if (put_text(j, t) < 0)
            return -1;
        *pos = p;
        *target_out = target;
        return 0;
    }
bad:
    srl_raise(srl_state.BadBackReference, tagpos,
              "COPY offset %llu does not point at a string read earlier", (unsigned long long)o);
    return -1;
}

int
srl_jx_key(Jx *j, Py_ssize_t *pos, const char *what, int emit, Py_ssize_t *string_pos)
{
    if (srl_jx_skip_pad(j, pos) < 0)
        return -1;
    Py_ssize_t tagpos = *pos;
    srl_jx_mark(j, tagpos);
    uint8_t t = j->data[tagpos], tag = t & 0x7f;
    if (srl_is_string_tag(tag)) {
        *string_pos = tagpos;
        if (emit)
            return srl_jx_string(j, tagpos, 1, pos);
        const uint8_t *s;
        Py_ssize_t n;
        return srl_jx_string_payload(j, tagpos, &s, &n, pos);
    }
    if (tag == SRL_COPY) {
        if (emit)
            return srl_jx_copy(j, tagpos, pos, 1, string_pos, NULL);
        /* Validated as decode.c does, nothing written. */
        Py_ssize_t target = srl_jx_copy_target(j, tagpos, pos);
        if (target < 0)
            return -1;
        *string_pos = target;
        return 0;
    }
    srl_raise(srl_state.InvalidStructure, tagpos, "%s must be a string, found tag 0x%02x", what, t);
    return -1;
}

/* A number tag at tagpos (*pos just after the tag byte): its JSON, and its Perl
 * truth in *truth. */
int
srl_jx_write_number(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t tag, int *truth)
{
    const uint8_t *s;
    uint64_t u;
    double v;
    switch (srl_tag_kind(tag)) {
    case SRL_K_POS:
        *truth = tag != SRL_POS_LOW;
        return srl_json_put_u64(&j->out, tag - SRL_POS_LOW);
    case SRL_K_NEG:
        *truth = 1;
        return srl_json_put_i64(&j->out, (int64_t)tag - SRL_NEG_LOW - 16);
    case SRL_K_VARINT:
        if (srl_jx_varint(j, pos, &u, "a VARINT") < 0)
            return -1;
        *truth = u != 0;
        return srl_json_put_u64(&j->out, u);
    case SRL_K_ZIGZAG:
        if (srl_jx_varint(j, pos, &u, "a ZIGZAG") < 0)
            return -1;
        *truth = u != 0;
        return srl_json_put_i64(&j->out, srl_zigzag_decode(u));
    case SRL_K_FLOAT:
        if ((s = srl_jx_take(j, pos, 4, "a FLOAT")) == NULL)
            return -1;
        v = PyFloat_Unpack4((const char *)s, 1);
        break;
    case SRL_K_DOUBLE:
        if ((s = srl_jx_take(j, pos, 8, "a DOUBLE")) == NULL)
            return -1;
        v = PyFloat_Unpack8((const char *)s, 1);
        break;
    case SRL_K_LONG_DOUBLE:
        if ((s = srl_jx_take(j, pos, 16, "a LONG_DOUBLE")) == NULL)
            return -1;
        v = srl_long_double_to_double(s);
        break;
    case SRL_K_FLOAT_128:
        if ((s = srl_jx_take(j, pos, 16, "a FLOAT_128")) == NULL)
            return -1;
        v = srl_float128_to_double(s);
        break;
    default:
        srl_raise(srl_state.UnknownTag, tagpos, "unknown tag 0x%02x", j->data[tagpos]);
        return -1;
    }
    *truth = v != 0; /* NaN is true in Perl */
    return srl_json_put_double(&j->out, v);
}

const char *const srl_jx_constants[] = {"null", "true", "false"};

int
srl_jx_copy_span(Jx *j, Py_ssize_t span)
{
    JSpan s = j->spans[span];
    switch (s.type) {
    case JD_RANGE: {
        Py_ssize_t n = s.b - s.a;
        if (srl_buf_reserve(&j->out, n) < 0)
            return -1;
        memcpy(j->out.data + j->out.len, j->out.data + s.a, (size_t)n);
        j->out.len += n;
        return srl_jx_check_cap(j);
    }
    case JD_SOURCE: {
        uint8_t tag = j->data[s.a] & 0x7f;
        if (srl_is_string_tag(tag)) {
            JText *t = string_text(j, s.a, 0);
            if (t == NULL || srl_buf_put_bytes(&j->out, j->texts.data + t->start, t->len) < 0)
                return -1;
            return srl_jx_check_cap(j);
        }
        Py_ssize_t p = s.a + 1;
        int truth;
        return srl_jx_write_number(j, s.a, &p, tag, &truth);
    }
    case JD_CONST:
        return srl_buf_put_bytes(&j->out, srl_jx_constants[s.a], s.a == 2 ? 5 : 4);
    default: /* unfinished: the value contains itself (so no object around it is a
              * boolean, and every byte written counts) */
        if (srl_jx_check_cap_exact(j) < 0)
            return -1;
        return srl_jx_map_error(j, srl_state.InvalidStructure, "cycle cannot be represented as JSON");
    }
}
