/* Open-addressing hash table keyed by a byte position (>= 0).
 *
 * The decoder keeps three of these (tracked items, decoded COPY strings, blessed
 * referents) and the splitter maps old offsets to new ones. Values are either owned
 * Python objects (`owns_objects`: cleared with Py_DECREF) or plain integers. */
#ifndef SRL_OFFTABLE_H
#define SRL_OFFTABLE_H

#include "sereal.h"

typedef struct {
    Py_ssize_t key; /* -1: empty slot */
    intptr_t value;
} SrlOffEntry;

typedef struct {
    SrlOffEntry *slots; /* NULL until the first insert */
    int bits;
    Py_ssize_t used;
    int owns_objects;
} SrlOffTable;

void srl_offtable_init(SrlOffTable *t, int owns_objects);
/* Insert or replace; for owning tables the new value is INCREF'd and an old one
 * DECREF'd. -1 with MemoryError set. */
int srl_offtable_put(SrlOffTable *t, Py_ssize_t key, intptr_t value);
void srl_offtable_free(SrlOffTable *t);
/* Empty the table for reuse (small tables keep their slots). */
void srl_offtable_clear(SrlOffTable *t);

static inline size_t
srl_offtable_slot(const SrlOffTable *t, Py_ssize_t key)
{
    return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ULL) >> (64 - t->bits));
}

/* Find key; return 1 and set *value, or 0. */
static inline int
srl_offtable_get(const SrlOffTable *t, Py_ssize_t key, intptr_t *value)
{
    if (t->slots == NULL)
        return 0;
    size_t mask = ((size_t)1 << t->bits) - 1;
    for (size_t i = srl_offtable_slot(t, key);; i = (i + 1) & mask) {
        const SrlOffEntry *e = &t->slots[i];
        if (e->key == key) {
            *value = e->value;
            return 1;
        }
        if (e->key == -1)
            return 0;
    }
}

#endif
