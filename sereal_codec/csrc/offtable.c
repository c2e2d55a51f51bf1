/* Offset-keyed hash table (see offtable.h). Load factor stays below 1/2. */
#include "offtable.h"

void
srl_offtable_init(SrlOffTable *t, int owns_objects)
{
    t->slots = NULL;
    t->bits = 0;
    t->used = 0;
    t->owns_objects = owns_objects;
}

static int
resize(SrlOffTable *t, int bits)
{
    size_t n = (size_t)1 << bits;
    SrlOffEntry *slots = PyMem_Malloc(n * sizeof(SrlOffEntry));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        slots[i].key = -1;
    SrlOffEntry *old = t->slots;
    size_t old_n = old ? (size_t)1 << t->bits : 0;
    t->slots = slots;
    t->bits = bits;
    size_t mask = n - 1;
    for (size_t j = 0; j < old_n; j++) {
        if (old[j].key == -1)
            continue;
        size_t i = srl_offtable_slot(t, old[j].key);
        while (slots[i].key != -1)
            i = (i + 1) & mask;
        slots[i] = old[j];
    }
    PyMem_Free(old);
    return 0;
}

int
srl_offtable_put(SrlOffTable *t, Py_ssize_t key, intptr_t value)
{
    if (t->slots == NULL) {
        if (resize(t, 6) < 0)
            return -1;
    } else if ((t->used + 1) * 2 > ((Py_ssize_t)1 << t->bits)) {
        if (resize(t, t->bits + 1) < 0)
            return -1;
    }
    size_t mask = ((size_t)1 << t->bits) - 1;
    size_t i = srl_offtable_slot(t, key);
    while (t->slots[i].key != -1 && t->slots[i].key != key)
        i = (i + 1) & mask;
    SrlOffEntry *e = &t->slots[i];
    if (t->owns_objects)
        Py_INCREF((PyObject *)value);
    if (e->key == key) {
        if (t->owns_objects)
            Py_DECREF((PyObject *)e->value);
    } else {
        e->key = key;
        t->used++;
    }
    e->value = value;
    return 0;
}

void
srl_offtable_free(SrlOffTable *t)
{
    if (t->slots != NULL && t->owns_objects) {
        size_t n = (size_t)1 << t->bits;
        for (size_t i = 0; i < n; i++)
            if (t->slots[i].key != -1)
                Py_DECREF((PyObject *)t->slots[i].value);
    }
    PyMem_Free(t->slots);
    t->slots = NULL;
    t->bits = 0;
    t->used = 0;
}

void
srl_offtable_clear(SrlOffTable *t)
{
    if (t->used == 0)
        return;
    if (t->owns_objects || t->bits > 12) { /* big: give the memory back */
        srl_offtable_free(t);
        return;
    }
    size_t n = (size_t)1 << t->bits;
    for (size_t i = 0; i < n; i++)
        t->slots[i].key = -1;
    t->used = 0;
}
