/* The encoder's two tables.
 *
 * SrlStrTable: string -> offset of its first literal, for dedupe. Keyed by content
 * (the object's cached hash, then length, kind and bytes), holding a reference to
 * each key so its bytes stay alive. One table holds str, another bytes, so a str and
 * an equal bytes never match.
 *
 * SrlPtrMap: identity of a container, PerlRef or PerlObject -> sharing state, filled
 * by the encoder's pre-pass. Holds a reference to each object so an address cannot
 * be reused mid-encode. */
#ifndef SRL_OBJTABLE_H
#define SRL_OBJTABLE_H

#include "sereal.h"

typedef struct {
    PyObject *key; /* NULL: empty slot */
    Py_hash_t hash;
    Py_ssize_t offset;
} SrlStrEntry;

typedef struct {
    SrlStrEntry *slots;
    int bits;
    Py_ssize_t used;
} SrlStrTable;

void srl_strtable_init(SrlStrTable *t);
void srl_strtable_free(SrlStrTable *t);
/* `key` is an exact str or bytes. Return the recorded offset (> 0) if an equal key
 * is present; else record `offset` for it and return 0. -1 on error. */
Py_ssize_t srl_strtable_lookup_or_add(SrlStrTable *t, PyObject *key, Py_ssize_t offset);

typedef struct {
    PyObject *obj; /* NULL: empty slot */
    /* Body offset a later occurrence is written as REFP to, once known, else 0: a
     * container's ARRAY/HASH tag, a PerlRef's referent, a PerlObject's blessed
     * referent. */
    Py_ssize_t offset;
    Py_ssize_t own; /* a shared object: body offset of its own first tag, else 0 */
    int shared;     /* reachable more than once */
} SrlPtrEntry;

typedef struct {
    SrlPtrEntry *slots;
    int bits;
    Py_ssize_t used;
} SrlPtrMap;

void srl_ptrmap_init(SrlPtrMap *m);
void srl_ptrmap_free(SrlPtrMap *m);
/* Add obj if absent. Return its entry and set *added; NULL on error. The entry
 * pointer is valid until the next insertion. */
SrlPtrEntry *srl_ptrmap_add(SrlPtrMap *m, PyObject *obj, int *added);
SrlPtrEntry *srl_ptrmap_get(SrlPtrMap *m, PyObject *obj);

#endif
