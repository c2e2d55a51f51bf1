/* project_events(events, tree): eventstore.sereal.projection.project_events compiled
 * (the rule and the reference: eventstore/sereal/projection.py).
 *
 * The companion's child decodes a chunk once with the union of its substreams' fields
 * and narrows the events per substream with this (companion/DESIGN.md, "Performance");
 * the consumer's fallback and `substream test` call it too. The result equals the
 * Python reference's: a dict (PyDict_Check, as isinstance) becomes a new plain dict of
 * the keys the tree names, in the dict's own order; a kept value is the same object
 * (or, under a subtree, narrowed in turn); anything else is returned as is.
 *
 * Loop: each item of the event is looked up in the tree (events have ~25 keys, trees a
 * few; a miss in a small dict of str is a hash already cached and one empty slot).
 * The other way (each tree key looked up in the event, then the event's order
 * restored) was measured with callgrind and did not pay: DESIGN.md, "Performance".
 * An exact dict is walked with PyDict_Next; a subclass through its items(), as the
 * reference does (an OrderedDict's order is not its storage's).
 *
 * The tree is checked first (srl_check_projection: dicts of str to None or a tree, at
 * most SRL_MAX_DEPTH_CAP deep; ValueError otherwise, as the decoders' check), so the
 * recursion is bounded by the tree's depth: at most 1000 small C frames, as the
 * compiled decoder's own recursion (no Py_EnterRecursiveCall, whose Python-level limit
 * would refuse a tree the check admits). */
#include "decoder.h"

static PyObject *project_value(PyObject *value, PyObject *tree);

/* out[key] = item narrowed by tree[key], when the tree names key; 0, or -1 raised. */
static inline int
keep(PyObject *out, PyObject *tree, PyObject *key, PyObject *item)
{
    PyObject *sub = PyDict_GetItemWithError(tree, key);
    if (sub == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (sub == Py_None)
        return PyDict_SetItem(out, key, item);
    PyObject *kept = project_value(item, sub); /* as deep as the tree: checked */
    if (kept == NULL)
        return -1;
    int rc = PyDict_SetItem(out, key, kept);
    Py_DECREF(kept);
    return rc;
}

/* A dict subclass, walked through value.items() as the reference walks it. */
static int
keep_items(PyObject *out, PyObject *tree, PyObject *value)
{
    PyObject *items = PyObject_CallMethod(value, "items", NULL);
    if (items == NULL)
        return -1;
    PyObject *it = PyObject_GetIter(items);
    Py_DECREF(items);
    if (it == NULL)
        return -1;
    PyObject *pair;
    int rc = 0;
    while (rc == 0 && (pair = PyIter_Next(it)) != NULL) {
        PyObject *seq = PySequence_Fast(pair, "items() yields (key, value) pairs");
        Py_DECREF(pair);
        if (seq == NULL || PySequence_Fast_GET_SIZE(seq) != 2) {
            if (seq != NULL)
                PyErr_SetString(PyExc_ValueError, "items() yields (key, value) pairs");
            Py_XDECREF(seq);
            rc = -1;
            break;
        }
        rc = keep(out, tree, PySequence_Fast_GET_ITEM(seq, 0),
                  PySequence_Fast_GET_ITEM(seq, 1));
        Py_DECREF(seq);
    }
    Py_DECREF(it);
    return rc == 0 && PyErr_Occurred() ? -1 : rc;
}

/* projection.project(value, tree) for a checked tree: a new reference. */
static PyObject *
project_value(PyObject *value, PyObject *tree)
{
    if (!PyDict_Check(value))
        return Py_NewRef(value);
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    if (!PyDict_CheckExact(value)) {
        if (keep_items(out, tree, value) < 0)
            Py_CLEAR(out);
        return out;
    }
    Py_ssize_t i = 0;
    PyObject *key, *item;
    while (PyDict_Next(value, &i, &key, &item)) {
        /* Borrowed from value: a key's __eq__ run by the lookup could mutate it. */
        Py_INCREF(key);
        Py_INCREF(item);
        int rc = keep(out, tree, key, item);
        Py_DECREF(key);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

PyObject *
srl_py_project_events(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"events", "tree", NULL};
    PyObject *events, *tree;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:project_events", kwlist, &events,
                                     &tree))
        return NULL;
    if (tree == Py_None)
        return Py_NewRef(events);
    if (srl_check_projection(tree) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(events, "project_events takes an iterable of events");
    if (seq == NULL)
        return NULL;
    PyObject *out = PyList_New(0);
    /* The size read each step, as a list comprehension's iterator reads it: a key's
     * __eq__ run by a lookup could change the list. */
    for (Py_ssize_t j = 0; out != NULL && j < PySequence_Fast_GET_SIZE(seq); j++) {
        PyObject *e = Py_NewRef(PySequence_Fast_GET_ITEM(seq, j));
        PyObject *p = project_value(e, tree);
        Py_DECREF(e);
        if (p == NULL || PyList_Append(out, p) < 0)
            Py_CLEAR(out);
        Py_XDECREF(p);
    }
    Py_DECREF(seq);
    return out;
}
