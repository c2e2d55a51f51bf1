/* Body encoder, the scalars: ints, floats and strings (literal or COPY of an equal
 * earlier literal when strictly shorter; see DESIGN.md, "String dedupe"). Containers,
 * sharing and objects live in encode.c. */
#include "encoder.h"

#include <string.h>

int
srl_enc_unencodable(PyObject *obj, const char *what)
{
    srl_raise(srl_state.UnencodableValue, -1, "cannot encode %s of type %s", what,
              Py_TYPE(obj)->tp_name);
    return -1;
}

int
srl_enc_int(Enc *e, PyObject *obj)
{
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(obj);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            srl_raise(srl_state.UnencodableValue, -1, "int beyond 2**64-1");
            return -1;
        }
        return srl_buf_put_tag_varint(&e->out, SRL_VARINT, u);
    }
    if (overflow < 0) {
        srl_raise(srl_state.UnencodableValue, -1, "int below -2**63");
        return -1;
    }
    if (v >= 0) {
        if (v < 16)
            return srl_buf_put_byte(&e->out, (uint8_t)(SRL_POS_LOW + v));
        return srl_buf_put_tag_varint(&e->out, SRL_VARINT, (uint64_t)v);
    }
    if (v >= -16)
        return srl_buf_put_byte(&e->out, (uint8_t)(SRL_VARINT + v)); /* NEG_16..NEG_1 */
    return srl_buf_put_tag_varint(&e->out, SRL_ZIGZAG, srl_zigzag_encode(v));
}

int
srl_enc_double(Enc *e, double v)
{
    if (srl_buf_reserve(&e->out, 9) < 0)
        return -1;
    srl_buf_put_byte_unchecked(&e->out, SRL_DOUBLE);
    if (PyFloat_Pack8(v, (char *)e->out.data + e->out.len, 1) < 0)
        return -1;
    e->out.len += 8;
    return 0;
}

/* Bytes of a literal string with this payload. */
static inline Py_ssize_t
literal_size(Py_ssize_t n, int utf8)
{
    return (!utf8 && n < 32) ? 1 + n : 1 + srl_varint_len((uint64_t)n) + n;
}

static int
put_literal(Enc *e, const char *s, Py_ssize_t n, int utf8)
{
    if (srl_buf_reserve(&e->out, n + 11) < 0)
        return -1;
    if (!utf8 && n < 32) {
        srl_buf_put_byte_unchecked(&e->out, (uint8_t)(SRL_SHORT_BINARY_LOW + n));
    } else {
        srl_buf_put_byte_unchecked(&e->out, utf8 ? SRL_STR_UTF8 : SRL_BINARY);
        srl_buf_put_varint_unchecked(&e->out, (uint64_t)n);
    }
    memcpy(e->out.data + e->out.len, s, (size_t)n);
    e->out.len += n;
    return 0;
}

/* Write a literal, or a COPY of the first literal of an equal string when that is
 * strictly shorter. `table` NULL: never dedupe (and do not record). */
static int
put_string(Enc *e, SrlStrTable *table, PyObject *key, const char *s, Py_ssize_t n, int utf8)
{
    if (table != NULL) {
        Py_ssize_t first = srl_strtable_lookup_or_add(table, key, e->out.len + 1);
        if (first < 0)
            return -1;
        if (first > 0 && 1 + srl_varint_len((uint64_t)first) < literal_size(n, utf8))
            return srl_buf_put_tag_varint(&e->out, SRL_COPY, (uint64_t)first);
    }
    return put_literal(e, s, n, utf8);
}

/* An exact str: ASCII as (SHORT_)BINARY, other valid Unicode as STR_UTF8, lone
 * surrogates from surrogateescape as the BINARY they came from, other lone
 * surrogates as STR_UTF8 via surrogatepass. */
int
srl_enc_str(Enc *e, PyObject *s, int dedupe)
{
    SrlStrTable *table = dedupe ? &e->strs : NULL;
    if (PyUnicode_IS_ASCII(s))
        return put_string(e, table, s, (const char *)PyUnicode_1BYTE_DATA(s),
                          PyUnicode_GET_LENGTH(s), 0);
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(s, &n);
    if (utf8 != NULL)
        return put_string(e, table, s, utf8, n, 1);
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
        return -1;
    PyErr_Clear();
    int is_utf8 = 0;
    PyObject *raw = PyUnicode_AsEncodedString(s, "utf-8", "surrogateescape");
    if (raw == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            return -1;
        PyErr_Clear();
        is_utf8 = 1;
        raw = PyUnicode_AsEncodedString(s, "utf-8", "surrogatepass");
        if (raw == NULL)
            return -1;
    }
    int rc = put_string(e, table, s, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), is_utf8);
    Py_DECREF(raw);
    return rc;
}

/* bytes or bytearray (a bytearray dedupes as the equal bytes). */
static int
enc_bytes(Enc *e, PyObject *obj, int dedupe)
{
    if (PyBytes_CheckExact(obj))
        return put_string(e, dedupe ? &e->bytes : NULL, obj, PyBytes_AS_STRING(obj),
                          PyBytes_GET_SIZE(obj), 0);
    PyObject *b = PyBytes_FromObject(obj); /* snapshot: exact bytes, hashable */
    if (b == NULL)
        return -1;
    int rc = put_string(e, dedupe ? &e->bytes : NULL, b, PyBytes_AS_STRING(b),
                        PyBytes_GET_SIZE(b), 0);
    Py_DECREF(b);
    return rc;
}

/* A str or bytes-like where the format needs a string; the str made exact. */
int
srl_enc_text(Enc *e, PyObject *obj, int dedupe, const char *what)
{
    if (PyUnicode_CheckExact(obj))
        return srl_enc_str(e, obj, dedupe);
    if (PyUnicode_Check(obj)) {
        PyObject *exact = PyUnicode_FromObject(obj);
        if (exact == NULL)
            return -1;
        int rc = srl_enc_str(e, exact, dedupe);
        Py_DECREF(exact);
        return rc;
    }
    if (PyBytes_Check(obj) || PyByteArray_Check(obj))
        return enc_bytes(e, obj, dedupe);
    return srl_enc_unencodable(obj, what);
}
