/* Encoder tables (see objtable.h): open addressing, load factor below 1/2. */
#include "objtable.h"

#include <string.h>

static inline size_t
mix(uint64_t h, int bits)
{
    return (size_t)((h * 0x9E3779B97F4A7C15ULL) >> (64 - bits));
}

/* Raw content of an exact str or bytes, for equality. */
static inline const void *
content(PyObject *o, Py_ssize_t *nbytes, int *kind)
{
    if (PyUnicode_CheckExact(o)) {
        *kind = PyUnicode_KIND(o);
        *nbytes = PyUnicode_GET_LENGTH(o) * *kind;
        return PyUnicode_DATA(o);
    }
    *kind = 0;
    *nbytes = PyBytes_GET_SIZE(o);
    return PyBytes_AS_STRING(o);
}

static int
same_content(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    Py_ssize_t na, nb;
    int ka, kb;
    const void *da = content(a, &na, &ka), *db = content(b, &nb, &kb);
    return na == nb && ka == kb && memcmp(da, db, (size_t)na) == 0;
}

void
srl_strtable_init(SrlStrTable *t)
{
    t->slots = NULL;
    t->bits = 0;
    t->used = 0;
}

void
srl_strtable_free(SrlStrTable *t)
{
    if (t->slots != NULL) {
        size_t n = (size_t)1 << t->bits;
        for (size_t i = 0; i < n; i++)
            Py_XDECREF(t->slots[i].key);
    }
    PyMem_Free(t->slots);
    srl_strtable_init(t);
}

static int
strtable_resize(SrlStrTable *t, int bits)
{
    size_t n = (size_t)1 << bits;
    SrlStrEntry *slots = PyMem_Calloc(n, sizeof(SrlStrEntry));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    size_t old_n = t->slots ? (size_t)1 << t->bits : 0;
    for (size_t j = 0; j < old_n; j++) {
        SrlStrEntry *e = &t->slots[j];
        if (e->key == NULL)
            continue;
        size_t i = mix((uint64_t)e->hash, bits);
        while (slots[i].key != NULL)
            i = (i + 1) & (n - 1);
        slots[i] = *e;
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->bits = bits;
    return 0;
}

Py_ssize_t
srl_strtable_lookup_or_add(SrlStrTable *t, PyObject *key, Py_ssize_t offset)
{
    Py_hash_t hash = PyObject_Hash(key); /* cached in the object after the first call */
    if (hash == -1)
        return -1;
    if (t->slots == NULL || (t->used + 1) * 2 > ((Py_ssize_t)1 << t->bits)) {
        if (strtable_resize(t, t->slots == NULL ? 8 : t->bits + 1) < 0)
            return -1;
    }
    size_t mask = ((size_t)1 << t->bits) - 1;
    for (size_t i = mix((uint64_t)hash, t->bits);; i = (i + 1) & mask) {
        SrlStrEntry *e = &t->slots[i];
        if (e->key == NULL) {
            e->key = Py_NewRef(key);
            e->hash = hash;
            e->offset = offset;
            t->used++;
            return 0;
        }
        if (e->hash == hash && same_content(e->key, key))
            return e->offset;
    }
}

static inline size_t
ptr_slot(const void *p, int bits)
{
    return mix((uint64_t)(uintptr_t)p >> 4, bits);
}

void
srl_ptrmap_init(SrlPtrMap *m)
{
    m->slots = NULL;
    m->bits = 0;
    m->used = 0;
}

void
srl_ptrmap_free(SrlPtrMap *m)
{
    if (m->slots != NULL) {
        size_t n = (size_t)1 << m->bits;
        for (size_t i = 0; i < n; i++)
            Py_XDECREF(m->slots[i].obj);
    }
    PyMem_Free(m->slots);
    srl_ptrmap_init(m);
}

static int
ptrmap_resize(SrlPtrMap *m, int bits)
{
    size_t n = (size_t)1 << bits;
    SrlPtrEntry *slots = PyMem_Calloc(n, sizeof(SrlPtrEntry));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    size_t old_n = m->slots ? (size_t)1 << m->bits : 0;
    for (size_t j = 0; j < old_n; j++) {
        SrlPtrEntry *e = &m->slots[j];
        if (e->obj == NULL)
            continue;
        size_t i = ptr_slot(e->obj, bits);
        while (slots[i].obj != NULL)
            i = (i + 1) & (n - 1);
        slots[i] = *e;
    }
    PyMem_Free(m->slots);
    m->slots = slots;
    m->bits = bits;
    return 0;
}

SrlPtrEntry *
srl_ptrmap_add(SrlPtrMap *m, PyObject *obj, int *added)
{
    if (m->slots == NULL || (m->used + 1) * 2 > ((Py_ssize_t)1 << m->bits)) {
        if (ptrmap_resize(m, m->slots == NULL ? 8 : m->bits + 1) < 0)
            return NULL;
    }
    size_t mask = ((size_t)1 << m->bits) - 1;
    for (size_t i = ptr_slot(obj, m->bits);; i = (i + 1) & mask) {
        SrlPtrEntry *e = &m->slots[i];
        if (e->obj == obj) {
            *added = 0;
            return e;
        }
        if (e->obj == NULL) {
            e->obj = Py_NewRef(obj);
            m->used++;
            *added = 1;
            return e;
        }
    }
}

SrlPtrEntry *
srl_ptrmap_get(SrlPtrMap *m, PyObject *obj)
{
    if (m->slots == NULL)
        return NULL;
    size_t mask = ((size_t)1 << m->bits) - 1;
    for (size_t i = ptr_slot(obj, m->bits);; i = (i + 1) & mask) {
        SrlPtrEntry *e = &m->slots[i];
        if (e->obj == obj)
            return e;
        if (e->obj == NULL)
            return NULL;
    }
}
