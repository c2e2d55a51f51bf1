/* Joining single-item Sereal bodies into one array body (join.c). */
#ifndef SRL_JOIN_H
#define SRL_JOIN_H

#include "sereal.h"

/* join_bodies: `parts` is a sequence of (data, pos, end, base) as for decode_body;
 * the result is the body REFN ARRAY n + each part's item (1-based offsets), every
 * back-reference rewritten. A part the decoder would reject (or whose item nests
 * deeper than max_depth - 1, the array taking one level) raises that SerealError
 * with "part i: " before its message and an `index` attribute. */
PyObject *srl_join_bodies(PyObject *parts, int max_depth);
/* The binding: join_bodies(parts, max_depth=512) -> bytes. */
PyObject *srl_py_join_bodies(PyObject *self, PyObject *args, PyObject *kwargs);

#endif
