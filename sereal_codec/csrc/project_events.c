/* project_events(events, tree): sereal_codec.projection.project_events compiled
 * (the rule and the reference: sereal_codec/projection.py).
 *
 * The companion's child decodes a chunk once with the union of its substreams' fields
 * and narrows the events per substream with this (companion/DESIGN.md, "Performance");
 * the consumer's fallback and `substream test` call it too. The result equals the
 * Python reference's: a dict (PyDict_Check, as isinstance) becomes a new plain dict of
 * the keys the tree names, in the dict's own order; a kept value is the same object
 * (or, under a subtree, narrowed in turn); anything else is returned as is.
 *
 * Loop: each item of the event, in order, is looked up in a table of the tree's key
 * hashes (events have ~10-25 keys, trees a few: a miss is a few compares of the hash
 * the event's str key has cached), and the walk stops once every key of the tree is
 * kept. Measured with callgrind (3.6k bench events x the companion bench's 10 trees,
 * companion/DESIGN.md, "Performance"): 103M instructions in the call with a dict lookup
 * per event key, 57M this way. The other loop, each tree key looked up in the event,
 * was not built: a lookup gives the value but not the event's own key object (which
 * the result holds, as the reference's does) nor its position, so the event would be
 * walked all the same; the early stop is what that loop would have saved.
 * An exact dict is walked with PyDict_Next; a subclass through its items(), as the
 * reference does (an OrderedDict's order is not its storage's).
 *
 * The tree is checked first (srl_check_projection: dicts of str to None or a tree, at
 * most SRL_MAX_DEPTH_CAP deep; ValueError otherwise, as the decoders' check), so the
 * recursion is bounded by the tree's depth: at most 1000 small C frames, as the
 * compiled decoder's own recursion (no Py_EnterRecursiveCall, whose Python-level limit
 * would refuse a tree the check admits).
 *
 * Strict (project_events(events, tree, strict=refuse), issue 21): each dict the tree
 * narrows is made as a StrictDict, a dict subclass (below) on which reading a key the
 * tree does not name at that level, d[k], d.get(k) or k in d, raises the exception
 * refuse(path, k) returns (path: the keys from the event down to that dict); a key
 * the tree names that the dict lacks reads as on a plain dict. Made here in the same
 * walk, it costs what a plain dict costs: one allocation per narrowed dict, and its
 * get, in and [] are C (a Python subclass, which the substreams' first version built
 * by copying each narrowed event, cost one more allocation per event and a Python
 * call per get or in: +17% of the companion child's CPU; substreams/DESIGN.md). */
#include "decoder.h"

#include <string.h>

/* A tree of at most NODE_KEYS keys is looked up in a table of its keys' hashes (a
 * miss, the common case, is a few compares of a hash already cached in the event's str
 * key); a larger one through its dict. The table holds references to its keys and
 * subtrees: a key's __eq__, run on a hash match, could change the tree. */
#define NODE_KEYS 16

typedef struct Node {
    PyObject *tree;                /* the subtree (dict), for a large one's lookups */
    PyObject *level;               /* strict: owned (declared, path, refuse); else NULL */
    Py_ssize_t n;                  /* keys in the table; -1: a large tree */
    Py_hash_t hash[NODE_KEYS];
    PyObject *key[NODE_KEYS];      /* owned */
    PyObject *sub[NODE_KEYS];      /* owned: Py_None or the subtree */
    struct Node *child[NODE_KEYS]; /* the subtree's node, or NULL for Py_None */
} Node;

static void
node_free(Node *node)
{
    if (node == NULL)
        return;
    Py_XDECREF(node->level);
    for (Py_ssize_t j = 0; j < node->n; j++) {
        Py_DECREF(node->key[j]);
        Py_DECREF(node->sub[j]);
        node_free(node->child[j]);
    }
    PyMem_Free(node);
}

/* strict: the (declared keys, path, refuse) of the level `tree` narrows, at `path` (a
 * new reference). The keys are copied: a caller changing its tree afterwards does not
 * change what its events refuse. */
static PyObject *
level_new(PyObject *tree, PyObject *path, PyObject *refuse)
{
    PyObject *declared = PyFrozenSet_New(tree);
    if (declared == NULL)
        return NULL;
    PyObject *level = PyTuple_Pack(3, declared, path, refuse);
    Py_DECREF(declared);
    return level;
}

/* parent's path + (key,): a new reference. */
static PyObject *
path_join(PyObject *level, PyObject *key)
{
    PyObject *path = PyTuple_GET_ITEM(level, 1);
    Py_ssize_t n = PyTuple_GET_SIZE(path);
    PyObject *out = PyTuple_New(n + 1);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(out, i, Py_NewRef(PyTuple_GET_ITEM(path, i)));
    PyTuple_SET_ITEM(out, n, Py_NewRef(key));
    return out;
}

static Node *child_new(Node *parent, PyObject *key, PyObject *sub);

/* The node of a checked tree (as deep as the tree: at most SRL_MAX_DEPTH_CAP); strict
 * when `level` (stolen, may be NULL) is its level. */
static Node *
node_new(PyObject *tree, PyObject *level)
{
    Node *node = PyMem_Malloc(sizeof(Node));
    if (node == NULL) {
        Py_XDECREF(level);
        return (Node *)PyErr_NoMemory();
    }
    node->tree = tree;
    node->level = level;
    node->n = 0;
    if (PyDict_GET_SIZE(tree) > NODE_KEYS) {
        node->n = -1;
        return node;
    }
    Py_ssize_t i = 0;
    PyObject *key, *sub;
    while (PyDict_Next(tree, &i, &key, &sub)) {
        Py_ssize_t j = node->n;
        if (j == NODE_KEYS) /* grew under us (a str key cannot, but be safe) */
            break;
        Py_hash_t h = PyObject_Hash(key);
        if (h == -1) {
            node_free(node);
            return NULL;
        }
        node->hash[j] = h;
        node->key[j] = Py_NewRef(key);
        node->sub[j] = Py_NewRef(sub);
        node->child[j] = NULL;
        node->n = j + 1;
        if (sub != Py_None && (node->child[j] = child_new(node, key, sub)) == NULL) {
            node_free(node);
            return NULL;
        }
    }
    return node;
}

/* The node of `sub`, the subtree of `parent`'s `key`: strict as its parent is. */
static Node *
child_new(Node *parent, PyObject *key, PyObject *sub)
{
    PyObject *level = NULL;
    if (parent->level != NULL) {
        PyObject *path = path_join(parent->level, key);
        if (path == NULL)
            return NULL;
        level = level_new(sub, path, PyTuple_GET_ITEM(parent->level, 2));
        Py_DECREF(path);
        if (level == NULL)
            return NULL;
    }
    return node_new(sub, level);
}

/* StrictDict: a dict whose level (declared keys, path, refuse) says which keys it may
 * be asked for. Only a miss looks at it: a hit of d[k], d.get(k) or k in d costs what
 * it costs on a plain dict. A StrictDict made by its type or by a copy of one without
 * a level (level NULL) answers as a plain dict. */
typedef struct {
    PyDictObject dict;
    PyObject *level; /* (frozenset of the declared keys, path tuple, refuse) or NULL */
} Strict;

static PyTypeObject StrictType;

/* 0 when `key` is declared at `self`'s level (or it has none); else -1 with the
 * exception refuse(path, key) returned (or raised) set. */
static int
strict_check(PyObject *self, PyObject *key)
{
    PyObject *level = ((Strict *)self)->level;
    if (level == NULL)
        return 0;
    int declared = PySet_Contains(PyTuple_GET_ITEM(level, 0), key);
    if (declared != 0)
        return declared > 0 ? 0 : -1;
    PyObject *exc = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(level, 2),
                                                 PyTuple_GET_ITEM(level, 1), key, NULL);
    if (exc == NULL)
        return -1;
    if (PyExceptionInstance_Check(exc))
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    else
        PyErr_Format(PyExc_TypeError, "strict(path, key) returns an exception, not %.100s",
                     Py_TYPE(exc)->tp_name);
    Py_DECREF(exc);
    return -1;
}

static PyObject *
strict_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "get expected 1 or 2 arguments, got %zd", nargs);
        return NULL;
    }
    PyObject *value = PyDict_GetItemWithError(self, args[0]);
    if (value != NULL)
        return Py_NewRef(value);
    if (PyErr_Occurred() || strict_check(self, args[0]) < 0)
        return NULL;
    return Py_NewRef(nargs == 2 ? args[1] : Py_None);
}

static int
strict_contains(PyObject *self, PyObject *key)
{
    int found = PyDict_Contains(self, key);
    if (found != 0)
        return found;
    return strict_check(self, key);
}

/* d[key] missed (dict's subscript calls this): KeyError(key) if declared. */
static PyObject *
strict_missing(PyObject *self, PyObject *key)
{
    if (strict_check(self, key) < 0)
        return NULL;
    PyObject *error = PyObject_CallOneArg(PyExc_KeyError, key);
    if (error != NULL) {
        PyErr_SetObject(PyExc_KeyError, error);
        Py_DECREF(error);
    }
    return NULL;
}

/* An empty StrictDict at `level` (borrowed; NULL: none). Made untracked by the
 * collector, as an empty plain dict is: inserting a value that may hold a cycle tracks
 * it (dict's own rule), so a narrowed event of scalars stays out of the collector's
 * sight as a plain one does (dict_new tracks every subclass instance). */
static PyObject *
strict_new(PyObject *level)
{
    static PyObject *no_args = NULL;
    if (no_args == NULL && (no_args = PyTuple_New(0)) == NULL)
        return NULL;
    PyObject *out = PyDict_Type.tp_new(&StrictType, no_args, NULL);
    if (out != NULL) {
        PyObject_GC_UnTrack(out);
        ((Strict *)out)->level = Py_XNewRef(level);
    }
    return out;
}

static PyObject *
strict_rebuild(PyObject *level, PyObject *unused)
{
    return strict_new(level == Py_None ? NULL : level);
}

static PyMethodDef strict_rebuild_def = {"StrictDict", strict_rebuild, METH_NOARGS, NULL};

/* copy.copy and copy.deepcopy keep the level (pickle cannot: refuse is the caller's). */
static PyObject *
strict_reduce(PyObject *self, PyObject *unused)
{
    PyObject *level = ((Strict *)self)->level;
    PyObject *rebuild = PyCFunction_New(&strict_rebuild_def, level ? level : Py_None);
    if (rebuild == NULL)
        return NULL;
    PyObject *items = PyObject_CallMethod(self, "items", NULL);
    PyObject *it = items == NULL ? NULL : PyObject_GetIter(items);
    Py_XDECREF(items);
    if (it == NULL) {
        Py_DECREF(rebuild);
        return NULL;
    }
    return Py_BuildValue("(N()OON)", rebuild, Py_None, Py_None, it);
}

static int
strict_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((Strict *)self)->level);
    return PyDict_Type.tp_traverse(self, visit, arg);
}

static int
strict_clear(PyObject *self)
{
    Py_CLEAR(((Strict *)self)->level);
    return PyDict_Type.tp_clear(self);
}

static void
strict_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(((Strict *)self)->level);
    PyDict_Type.tp_dealloc(self); /* frees through tp_free, as for any dict subclass */
}

static PySequenceMethods strict_as_sequence = {.sq_contains = strict_contains};

static PyMethodDef strict_methods[] = {
    {"get", (PyCFunction)(void (*)(void))strict_get, METH_FASTCALL,
     "get(key, default=None): as dict.get; a key not declared at this level raises."},
    {"__missing__", strict_missing, METH_O,
     "d[key] missed: KeyError if declared at this level, else the refusal."},
    {"__reduce__", strict_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StrictType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sereal_codec._sereal.StrictDict",
    .tp_basicsize = sizeof(Strict),
    .tp_dealloc = strict_dealloc,
    .tp_as_sequence = &strict_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A dict narrowed by a strict projection: reading a key the projection does\n"
              "not name at this level raises (project_events(..., strict=refuse)).",
    .tp_traverse = strict_traverse,
    .tp_clear = strict_clear,
    .tp_methods = strict_methods,
};

static int
strict_ready(void)
{
    if (StrictType.tp_base != NULL)
        return 0;
    StrictType.tp_base = &PyDict_Type;
    if (PyType_Ready(&StrictType) < 0) {
        StrictType.tp_base = NULL;
        return -1;
    }
    return 0;
}

static PyObject *project_value(PyObject *value, Node *node);

/* a == b for two exact str (what a dict of str keys compares: length, kind, bytes). */
static inline int
str_eq(PyObject *a, PyObject *b)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    return n == PyUnicode_GET_LENGTH(b) && PyUnicode_KIND(a) == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), n * PyUnicode_KIND(a)) == 0;
}

/* The tree's entry for key: 1 with *sub (borrowed) and *child set, 0 none, -1 raised.
 * The same match as `key in tree`: identity, then equal hashes and ==. */
static inline int
lookup(Node *node, PyObject *key, PyObject **sub, Node **child)
{
    if (node->n < 0) {
        *child = NULL;
        *sub = PyDict_GetItemWithError(node->tree, key);
        if (*sub == NULL)
            return PyErr_Occurred() ? -1 : 0;
        return 1;
    }
    Py_hash_t h;
    if (!PyUnicode_CheckExact(key) || (h = ((PyASCIIObject *)key)->hash) == -1) {
        h = PyObject_Hash(key);
        if (h == -1)
            return -1;
    }
    for (Py_ssize_t j = 0; j < node->n; j++) {
        if (node->hash[j] != h)
            continue;
        int eq = node->key[j] == key         ? 1
                 : PyUnicode_CheckExact(key) ? str_eq(node->key[j], key)
                                             : PyObject_RichCompareBool(node->key[j], key, Py_EQ);
        if (eq < 0)
            return -1;
        if (eq) {
            *sub = node->sub[j];
            *child = node->child[j];
            return 1;
        }
    }
    return 0;
}

/* out[key] = item narrowed by the tree's entry for key, if any: 1 kept, 0 not, -1
 * raised. */
static inline int
keep(PyObject *out, Node *node, PyObject *key, PyObject *item)
{
    PyObject *sub;
    Node *child;
    int found = lookup(node, key, &sub, &child);
    if (found <= 0)
        return found;
    if (sub == Py_None)
        return PyDict_SetItem(out, key, item) < 0 ? -1 : 1;
    Py_INCREF(sub); /* a large tree's entry is borrowed: keep it while it is used */
    Node *made = NULL;
    if (child == NULL && (child = made = child_new(node, key, sub)) == NULL) {
        Py_DECREF(sub);
        return -1;
    }
    PyObject *kept = project_value(item, child); /* as deep as the tree: checked */
    node_free(made);
    Py_DECREF(sub);
    if (kept == NULL)
        return -1;
    int rc = PyDict_SetItem(out, key, kept);
    Py_DECREF(kept);
    return rc < 0 ? -1 : 1;
}

/* A dict subclass, walked through value.items() as the reference walks it. */
static int
keep_items(PyObject *out, Node *node, PyObject *value)
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
        rc = keep(out, node, PySequence_Fast_GET_ITEM(seq, 0), PySequence_Fast_GET_ITEM(seq, 1));
        rc = rc < 0 ? -1 : 0;
        Py_DECREF(seq);
    }
    Py_DECREF(it);
    return rc == 0 && PyErr_Occurred() ? -1 : rc;
}

/* projection.project(value, tree) for a checked tree's node: a new reference. */
static PyObject *
project_value(PyObject *value, Node *node)
{
    if (!PyDict_Check(value))
        return Py_NewRef(value);
    PyObject *out = node->level == NULL ? PyDict_New() : strict_new(node->level);
    if (out == NULL)
        return NULL;
    if (!PyDict_CheckExact(value)) {
        if (keep_items(out, node, value) < 0)
            Py_CLEAR(out);
        return out;
    }
    /* Once each key of the tree is kept the rest of the event cannot match (its keys
     * are distinct, and == is an equivalence, as a dict assumes): stop there. */
    Py_ssize_t i = 0, left = node->n < 0 ? PY_SSIZE_T_MAX : node->n;
    PyObject *key, *item;
    while (left > 0 && PyDict_Next(value, &i, &key, &item)) {
        /* Borrowed from value: a key's __eq__ run by the lookup could change it. */
        Py_INCREF(key);
        Py_INCREF(item);
        int rc = keep(out, node, key, item);
        Py_DECREF(key);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(out);
            return NULL;
        }
        left -= rc;
    }
    return out;
}

PyObject *
srl_py_project_events(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"events", "tree", "strict", NULL};
    PyObject *events, *tree, *refuse = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$O:project_events", kwlist, &events,
                                     &tree, &refuse))
        return NULL;
    if (tree == Py_None)
        return Py_NewRef(events);
    if (srl_check_projection(tree) < 0)
        return NULL;
    PyObject *level = NULL;
    if (refuse != Py_None) {
        if (!PyCallable_Check(refuse)) {
            PyErr_Format(PyExc_TypeError, "strict is None or a callable, not %.100s",
                         Py_TYPE(refuse)->tp_name);
            return NULL;
        }
        PyObject *path = PyTuple_New(0);
        if (path == NULL || strict_ready() < 0 || (level = level_new(tree, path, refuse)) == NULL) {
            Py_XDECREF(path);
            return NULL;
        }
        Py_DECREF(path);
    }
    Node *node = node_new(tree, level);
    if (node == NULL)
        return NULL;
    PyObject *seq = PySequence_Fast(events, "project_events takes an iterable of events");
    if (seq == NULL) {
        node_free(node);
        return NULL;
    }
    PyObject *out = PyList_New(0);
    /* The size read each step, as a list comprehension's iterator reads it: a key's
     * __eq__ run by a lookup could change the list. */
    for (Py_ssize_t j = 0; out != NULL && j < PySequence_Fast_GET_SIZE(seq); j++) {
        PyObject *e = Py_NewRef(PySequence_Fast_GET_ITEM(seq, j));
        PyObject *p = project_value(e, node);
        Py_DECREF(e);
        if (p == NULL || PyList_Append(out, p) < 0)
            Py_CLEAR(out);
        Py_XDECREF(p);
    }
    Py_DECREF(seq);
    node_free(node);
    return out;
}
