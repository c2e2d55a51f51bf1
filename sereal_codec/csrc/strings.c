/* Python str objects from body bytes, fast.
 *
 * Almost every string in an event is ASCII; for those we allocate a compact ASCII
 * str and memcpy, skipping the UTF-8 decoder's per-character work. Only strings
 * with a byte >= 0x80 go through the codec machinery. */
#include "sereal.h"

#include <string.h>

/* True when all n bytes are < 0x80. Checks eight bytes at a time. */
static inline int
is_ascii(const uint8_t *s, Py_ssize_t n)
{
    uint64_t acc = 0;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        acc |= w;
    }
    for (; i < n; i++)
        acc |= s[i];
    return (acc & 0x8080808080808080ULL) == 0;
}

static PyObject *
ascii_str(const uint8_t *s, Py_ssize_t n)
{
    PyObject *u = PyUnicode_New(n, 127);
    if (u != NULL && n > 0)
        memcpy(PyUnicode_1BYTE_DATA(u), s, (size_t)n);
    return u;
}

/* Invalid UTF-8 decodes with surrogateescape, so it re-encodes to the same bytes. */
PyObject *
srl_str_from_utf8(const uint8_t *s, Py_ssize_t n)
{
    if (n == 0 || is_ascii(s, n))
        return ascii_str(s, n);
    return PyUnicode_DecodeUTF8((const char *)s, n, "surrogateescape");
}

PyObject *
srl_str_from_latin1(const uint8_t *s, Py_ssize_t n)
{
    if (n == 0 || is_ascii(s, n))
        return ascii_str(s, n);
    return PyUnicode_DecodeLatin1((const char *)s, n, NULL);
}
