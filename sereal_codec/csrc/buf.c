/* Growable output buffer (see buf.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "buf.h"

int
srl_buf_init(SrlBuf *b, Py_ssize_t cap)
{
    b->len = 0;
    b->cap = cap < 64 ? 64 : cap;
    b->data = PyMem_Malloc((size_t)b->cap);
    if (b->data == NULL) {
        b->cap = 0;
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

int
srl_buf_grow(SrlBuf *b, Py_ssize_t need)
{
    if (need > PY_SSIZE_T_MAX - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t want = b->len + need;
    Py_ssize_t cap = b->cap;
    while (cap < want)
        cap = cap > PY_SSIZE_T_MAX / 2 ? want : cap * 2;
    uint8_t *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

void
srl_buf_free(SrlBuf *b)
{
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
