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
 * would refuse a tree the check admits). */
#include "decoder.h"

#include <string.h>

/* A tree of at most NODE_KEYS keys is looked up in a table of its keys' hashes (a
 * miss, the common case, is a few compares of a hash already cached in the event's str
 * key); a larger one through its dict. The table holds references to its keys and
 * subtrees: a key's __eq__, run on a hash match, could change the tree. */
#define NODE_KEYS 16

typedef struct Node {
    PyObject *tree;                /* the subtree (dict), for a large one's lookups */
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
    for (Py_ssize_t j = 0; j < node->n; j++) {
        Py_DECREF(node->key[j]);
        Py_DECREF(node->sub[j]);
        node_free(node->child[j]);
    }
    PyMem_Free(node);
}

/* The node of a checked tree (as deep as the tree: at most SRL_MAX_DEPTH_CAP). */
static Node *
node_new(PyObject *tree)
{
    Node *node = PyMem_Malloc(sizeof(Node));
    if (node == NULL)
        return (Node *)PyErr_NoMemory();
    node->tree = tree;
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
        if (sub != Py_None && (node->child[j] = node_new(sub)) == NULL) {
            node_free(node);
            return NULL;
        }
    }
    return node;
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
    if (child == NULL && (child = made = node_new(sub)) == NULL) {
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
    PyObject *out = PyDict_New();
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
    static char *kwlist[] = {"events", "tree", NULL};
    PyObject *events, *tree;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:project_events", kwlist, &events,
                                     &tree))
        return NULL;
    if (tree == Py_None)
        return Py_NewRef(events);
    if (srl_check_projection(tree) < 0)
        return NULL;
    Node *node = node_new(tree);
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
