/* Projected decoding (DESIGN.md, "Projection"; the rule: sereal_codec/projection.py).
 *
 * The events of an array body are read key by key: a key the projection tree names is
 * decoded (whole, or narrowed by its subtree), any other value is walked by skip(),
 * which reads lengths and counts and builds nothing. The result is
 * project_events(full decode, tree) and the errors are a full decode's, in class and
 * offset: skip() makes every check srl_dec_item would make, in the same order, and
 * marks the same tag starts. Two kinds of item are decoded in full even where they are
 * skipped, because later back-references may need them as a full decode left them: an
 * item with the F bit (REFP / ALIAS targets, registered) and an object (OBJECT*: it
 * registers its class name for OBJECTV and the blessing of its referent). A value
 * that is not an untracked hash (a tracked one, a REFP, a WEAKEN, ...) is decoded in
 * full and then narrowed by project_obj(), so sharing is what projecting a full
 * decode gives. sereal_codec/pure/project.py is the same walk in Python. */
#include "decoder.h"

#include <string.h>

static int skip(Dec *d, Py_ssize_t *pos);

/* The first non-PAD position at or after p (maybe d->end); raises nothing. */
static inline Py_ssize_t
past_pad(const Dec *d, Py_ssize_t p)
{
    while (p < d->end && (d->data[p] & 0x7f) == SRL_PAD)
        p++;
    return p;
}

static int
check_tree(PyObject *tree, int depth)
{
    if (!PyDict_Check(tree)) {
        PyErr_Format(PyExc_ValueError, "a projection tree is a dict, not %.80s",
                     Py_TYPE(tree)->tp_name);
        return -1;
    }
    if (depth > SRL_MAX_DEPTH_CAP) {
        PyErr_Format(PyExc_ValueError, "projection tree deeper than %d", SRL_MAX_DEPTH_CAP);
        return -1;
    }
    Py_ssize_t i = 0;
    PyObject *key, *sub;
    while (PyDict_Next(tree, &i, &key, &sub)) {
        if (!PyUnicode_CheckExact(key)) {
            PyErr_Format(PyExc_ValueError, "projection keys are str, not %.80s",
                         Py_TYPE(key)->tp_name);
            return -1;
        }
        if (sub != Py_None && check_tree(sub, depth + 1) < 0)
            return -1;
    }
    return 0;
}

int
srl_check_projection(PyObject *tree)
{
    return check_tree(tree, 1);
}

/* projection.project() on a decoded value (steals v): a dict narrowed to `tree` (a new
 * dict sharing the kept values), anything else as is. Not charged to the budget: it
 * is at most the size of what the full decode of v was charged for. */
static PyObject *
project_obj(PyObject *v, PyObject *tree)
{
    if (v == NULL || !PyDict_Check(v))
        return v;
    PyObject *out = PyDict_New();
    Py_ssize_t i = 0;
    PyObject *key, *item;
    while (out != NULL && PyDict_Next(v, &i, &key, &item)) {
        PyObject *sub = PyDict_GetItemWithError(tree, key);
        if (sub == NULL) {
            if (PyErr_Occurred())
                Py_CLEAR(out);
            continue;
        }
        PyObject *kept = sub == Py_None ? Py_NewRef(item) : project_obj(Py_NewRef(item), sub);
        if (kept == NULL || PyDict_SetItem(out, key, kept) < 0)
            Py_CLEAR(out);
        Py_XDECREF(kept);
    }
    Py_DECREF(v);
    return out;
}

/* A REFP or ALIAS (no F bit) at tagpos, checked as decode_refs.c checks it. */
static int
skip_backref(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, const char *what)
{
    Py_ssize_t p = tagpos + 1;
    Py_ssize_t target = srl_dec_resolve(d, tagpos, &p, tagpos, what);
    intptr_t hit;
    if (target < 0)
        return -1;
    if (srl_tracked_at(&d->tracked, tagpos, target, what, &hit) < 0)
        return -1;
    *pos = p;
    return 0;
}

/* A COPY at tagpos, checked as decode.c's copy_string_borrowed checks it: a string tag
 * read earlier in this body (what its cache holds is such a string too). */
static int
skip_copy(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos)
{
    return srl_dec_copy_target(d, tagpos, pos) < 0 ? -1 : 0;
}

/* The string tag at tagpos (any string tag), its length checked as read_string does. */
static int
skip_string(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t tag)
{
    Py_ssize_t p, n;
    if (srl_dec_string_bytes(d, tagpos, tag, &p, &n) < 0)
        return -1;
    *pos = p + n;
    return 0;
}

/* A hash key, class name or regexp part, checked as srl_dec_key checks it. */
static int
skip_key(Dec *d, Py_ssize_t *pos, const char *what)
{
    if (srl_dec_skip_pad(d, pos) < 0)
        return -1;
    Py_ssize_t tagpos = *pos;
    srl_dec_mark(d, tagpos);
    uint8_t t = d->data[tagpos], tag = t & 0x7f;
    if (srl_is_string_tag(tag))
        return skip_string(d, tagpos, pos, tag);
    if (tag == SRL_COPY)
        return skip_copy(d, tagpos, pos);
    srl_raise(srl_state.InvalidStructure, tagpos, "%s must be a string, found tag 0x%02x", what,
              t);
    return -1;
}

/* skip() with the commonest values (small integers, short strings, COPYs) inline. */
static inline int
skip_value(Dec *d, Py_ssize_t *pos)
{
    Py_ssize_t p = *pos;
    if (p < d->end) {
        uint8_t t = d->data[p];
        if (t < SRL_VARINT) {
            srl_dec_mark(d, p);
            *pos = p + 1;
            return 0;
        }
        if (t >= SRL_SHORT_BINARY_LOW && t < SRL_TRACK && (t & 0x1f) < d->end - p) {
            srl_dec_mark(d, p);
            *pos = p + 1 + (t & 0x1f);
            return 0;
        }
        if (t == SRL_COPY) { /* a deduplicated string: hosts, URLs, agents */
            srl_dec_mark(d, p);
            return skip_copy(d, p, pos);
        }
    }
    return skip(d, pos);
}

/* n items (pairs: n keys and values) at *pos; the caller has opened the level. */
static int
skip_items(Dec *d, Py_ssize_t *pos, Py_ssize_t n, int pairs)
{
    if (pairs ? n > (d->end - *pos) / 2 : n > d->end - *pos) {
        srl_raise(srl_state.TruncatedInput, d->end,
                  "%s of %zd cannot fit in the %zd bytes left", pairs ? "hash" : "array", n,
                  d->end - *pos);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (pairs && skip_key(d, pos, "hash key") < 0)
            return -1;
        if (skip_value(d, pos) < 0)
            return -1;
    }
    return 0;
}

/* The count of the ARRAY / HASH at tagpos (the caller has opened its level), checked
 * as srl_dec_container checks it; then its items. */
static int
skip_container(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos)
{
    Py_ssize_t n;
    if (srl_dec_count(d, tagpos, pos, &n) < 0)
        return -1;
    return skip_items(d, pos, n, (d->data[tagpos] & 0x7f) == SRL_HASH);
}

/* Fully decode the item at *pos and drop it (the tables keep what later items need). */
static int
decode_and_drop(Dec *d, Py_ssize_t *pos)
{
    PyObject *v = srl_dec_item(d, pos);
    if (v == NULL)
        return -1;
    Py_DECREF(v);
    return 0;
}

/* Walk the item at *pos (after any PAD) as srl_dec_item would read it, building only
 * tracked items and objects; advance past it. */
static int
skip(Dec *d, Py_ssize_t *pos)
{
    if (srl_dec_skip_pad(d, pos) < 0)
        return -1;
    Py_ssize_t tagpos = *pos;
    uint8_t t = d->data[tagpos], tag = t & 0x7f;
    if (t & SRL_TRACK)
        return decode_and_drop(d, pos);
    srl_dec_mark(d, tagpos);
    SrlKind kind = srl_tag_kind(tag);
    int rc;
    uint64_t u;
    *pos = tagpos + 1;
    switch (kind) {
    SRL_CASE_STRING:
        return skip_string(d, tagpos, pos, tag);
    SRL_CASE_CONTAINER_REF:
        if (srl_dec_enter(d, tagpos) < 0)
            return -1;
        rc = skip_items(d, pos, tag & 0x0f, kind == SRL_K_HASHREF);
        d->depth--;
        return rc;
    SRL_CASE_CONSTANT:
    case SRL_K_POS:
    case SRL_K_NEG:
        return 0;
    case SRL_K_COPY:
        return skip_copy(d, tagpos, pos);
    case SRL_K_VARINT:
        return srl_dec_varint(d, pos, &u, "a VARINT");
    case SRL_K_ZIGZAG:
        return srl_dec_varint(d, pos, &u, "a ZIGZAG");
    case SRL_K_FLOAT:
    case SRL_K_DOUBLE:
    case SRL_K_LONG_DOUBLE:
    case SRL_K_FLOAT_128: {
        Py_ssize_t n = srl_shape_size(srl_tag_shapes[tag]);
        if (n > d->end - *pos) {
            srl_raise(srl_state.TruncatedInput, d->end, "input ends inside a number");
            return -1;
        }
        *pos += n;
        return 0;
    }
    SRL_CASE_CONTAINER:
        if (srl_dec_enter(d, tagpos) < 0)
            return -1;
        rc = skip_container(d, tagpos, pos);
        d->depth--;
        return rc;
    case SRL_K_REFN: {
        if (srl_dec_enter(d, tagpos) < 0)
            return -1;
        Py_ssize_t q = tagpos + 1;
        if (srl_dec_skip_pad(d, &q) < 0) {
            d->depth--;
            return -1;
        }
        *pos = q;
        uint8_t next = d->data[q];
        if ((next & 0x7f) == SRL_ARRAY || (next & 0x7f) == SRL_HASH) {
            srl_dec_mark(d, q);
            if (next & SRL_TRACK) { /* tracked: decoded in full, as decode_refs.c does */
                PyObject *v = srl_dec_container(d, q, pos, NULL, 1);
                rc = v == NULL ? -1 : 0;
                Py_XDECREF(v);
            } else {
                rc = skip_container(d, q, pos);
            }
        } else {
            rc = skip(d, pos);
        }
        d->depth--;
        return rc;
    }
    case SRL_K_REFP:
        return skip_backref(d, tagpos, pos, "REFP");
    case SRL_K_ALIAS:
        return skip_backref(d, tagpos, pos, "ALIAS");
    SRL_CASE_OBJECT:
        *pos = tagpos;
        return decode_and_drop(d, pos);
    case SRL_K_WEAKEN:
        if (srl_dec_enter(d, tagpos) < 0)
            return -1;
        rc = skip(d, pos);
        d->depth--;
        return rc;
    case SRL_K_REGEXP:
        if (skip_key(d, pos, "regexp pattern") < 0)
            return -1;
        return skip_key(d, pos, "regexp flags");
    case SRL_K_PAD: /* skipped above */
    case SRL_K_UNSUPPORTED:
        break;
    }
    srl_raise(srl_state.UnknownTag, tagpos, "unsupported tag 0x%02x", t);
    return -1;
}

/* The walk's state: the decoder's, and which COPY key targets each tree node keeps
 * (almost every key of an event is a COPY of one of a few dozen strings, so after the
 * first event a key is matched without a string or a dict lookup). */
typedef struct {
    Dec *d;
    struct {
        Py_ssize_t target; /* -1: empty */
        PyObject *tree;    /* borrowed: the trees outlive the walk */
        PyObject *sub;     /* borrowed from tree; NULL: the key is not in it */
        PyObject *key;     /* the key (owned), when kept */
    } keys[512];
    /* The same for keys spelled out in up to 7 bytes (encoders write short keys
     * rather than a COPY as long as themselves), by their bytes: a SHORT_BINARY's
     * bytes make one str throughout a decode (its binary mode is fixed). */
    struct {
        uint64_t bytes; /* (length + 1) << 56 | the bytes; 0: empty */
        PyObject *tree;
        PyObject *sub;
        PyObject *key;
    } shorts[256];
} Proj;

/* The short key at p (past PADs) packed as Proj.shorts keys it, or 0 (not short). */
static inline uint64_t
short_key_bytes(const Dec *d, Py_ssize_t p)
{
    if (p >= d->end)
        return 0;
    uint8_t t = d->data[p] & 0x7f;
    Py_ssize_t n = t & 0x1f;
    if (t < SRL_SHORT_BINARY_LOW || n > 7 || n >= d->end - p)
        return 0;
    uint64_t v = (uint64_t)(n + 1) << 56;
    for (Py_ssize_t i = 0; i < n; i++)
        v |= (uint64_t)d->data[p + 1 + i] << (8 * i);
    return v;
}

static PyObject *project_value(Proj *pr, Py_ssize_t *pos, PyObject *tree);

/* The key at *pos of a hash narrowed to `tree`: a new reference to it (NULL: not
 * kept, *pos past it) and its subtree in *sub, or NULL with *sub = NULL on error.
 * Reads and checks the key as read_hash does. */
static PyObject *
project_key(Proj *pr, Py_ssize_t *pos, PyObject *tree, PyObject **sub)
{
    Dec *d = pr->d;
    Py_ssize_t key_pos, p = *pos;
    PyObject *key, *found;
    *sub = NULL;
    if (p < d->end && d->data[p] == SRL_COPY) {
        srl_dec_mark(d, p);
        Py_ssize_t q = p + 1;
        uint64_t o;
        if (srl_dec_varint(d, &q, &o, "a COPY offset") < 0)
            return NULL;
        Py_ssize_t target = o > (uint64_t)(p - d->base) ? -1 : d->base + (Py_ssize_t)o;
        size_t slot = ((size_t)target * 0x9E3779B1u ^ ((size_t)tree >> 4)) & 511;
        if (target >= d->start && target < p && pr->keys[slot].target == target &&
            pr->keys[slot].tree == tree) {
            /* Seen under this tree: a string read earlier, checked then. */
            *pos = q;
            if ((found = pr->keys[slot].sub) == NULL)
                return NULL;
            *sub = found;
            return Py_NewRef(pr->keys[slot].key);
        }
        if ((key = srl_dec_copy_string(d, p, pos, 1, &key_pos)) == NULL)
            return NULL;
        found = PyDict_GetItemWithError(tree, key); /* borrowed */
        if (found != NULL || !PyErr_Occurred()) {
            pr->keys[slot].target = key_pos;
            pr->keys[slot].tree = tree;
            pr->keys[slot].sub = found;
            Py_XSETREF(pr->keys[slot].key, found == NULL ? NULL : Py_NewRef(key));
        }
    } else {
        Py_ssize_t kp = past_pad(d, p);
        uint64_t bytes = short_key_bytes(d, kp);
        size_t slot = (size_t)(((bytes ^ ((uint64_t)(uintptr_t)tree >> 4)) *
                                0x9E3779B97F4A7C15ULL) >> 56);
        if (bytes != 0 && pr->shorts[slot].bytes == bytes && pr->shorts[slot].tree == tree) {
            /* Read as srl_dec_key reads it: PADs, the tag marked, the bytes. */
            srl_dec_mark(d, kp);
            *pos = kp + 1 + (Py_ssize_t)(bytes >> 56) - 1;
            if ((found = pr->shorts[slot].sub) == NULL)
                return NULL;
            *sub = found;
            return Py_NewRef(pr->shorts[slot].key);
        }
        if ((key = srl_dec_key(d, pos, "hash key", &key_pos)) == NULL)
            return NULL;
        found = PyDict_GetItemWithError(tree, key);
        if (bytes != 0 && (found != NULL || !PyErr_Occurred())) {
            pr->shorts[slot].bytes = bytes;
            pr->shorts[slot].tree = tree;
            pr->shorts[slot].sub = found;
            Py_XSETREF(pr->shorts[slot].key, found == NULL ? NULL : Py_NewRef(key));
        }
    }
    if (found == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    *sub = found;
    return key;
}

/* The n pairs at *pos of the untracked hash at tagpos (its level open), only the keys
 * in `tree` built. Charges the dict at its tag, then a key and a value per kept pair. */
static PyObject *
project_hash(Proj *pr, Py_ssize_t tagpos, Py_ssize_t *pos, Py_ssize_t n, PyObject *tree)
{
    Dec *d = pr->d;
    if (n > (d->end - *pos) / 2)
        return srl_raise(srl_state.TruncatedInput, d->end,
                         "hash of %zd pairs cannot fit in the %zd bytes left", n,
                         d->end - *pos);
    if (srl_dec_charge(d, tagpos, 1) < 0)
        return NULL;
    Py_ssize_t most = PyDict_GET_SIZE(tree) < n ? PyDict_GET_SIZE(tree) : n;
    PyObject *dict = most > 5 ? _PyDict_NewPresized(most) : PyDict_New();
    if (dict == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *sub;
        PyObject *key = project_key(pr, pos, tree, &sub);
        if (key == NULL) {
            if (PyErr_Occurred() || skip_value(d, pos) < 0)
                goto fail;
            continue;
        }
        PyObject *value = NULL;
        if (srl_dec_charge(d, tagpos, 2) == 0)
            value = sub == Py_None ? srl_dec_item(d, pos) : project_value(pr, pos, sub);
        int rc = value == NULL ? -1 : PyDict_SetItem(dict, key, value);
        Py_DECREF(key);
        Py_XDECREF(value);
        if (rc < 0)
            goto fail;
    }
    return dict;
fail:
    Py_DECREF(dict);
    return NULL;
}

/* The count of the untracked HASH at tagpos (its level open), as srl_dec_container
 * reads it, then its pairs narrowed to `tree`. */
static PyObject *
project_counted_hash(Proj *pr, Py_ssize_t tagpos, Py_ssize_t *pos, PyObject *tree)
{
    Py_ssize_t n;
    if (srl_dec_count(pr->d, tagpos, pos, &n) < 0)
        return NULL;
    return project_hash(pr, tagpos, pos, n, tree);
}

/* The item at *pos narrowed to `tree`: an untracked hash (HASH, HASHREF_n, REFN HASH)
 * is read key by key; anything else is decoded in full, then narrowed if a dict. */
static PyObject *
project_value(Proj *pr, Py_ssize_t *pos, PyObject *tree)
{
    Dec *d = pr->d;
    Py_ssize_t p = past_pad(d, *pos);
    if (p < d->end) {
        uint8_t t = d->data[p];
        PyObject *v;
        if (t == SRL_HASH || (t >= SRL_HASHREF_LOW && t < SRL_SHORT_BINARY_LOW)) {
            srl_dec_mark(d, p);
            if (srl_dec_enter(d, p) < 0)
                return NULL;
            if (t == SRL_HASH) {
                v = project_counted_hash(pr, p, pos, tree);
            } else {
                *pos = p + 1;
                v = project_hash(pr, p, pos, t & 0x0f, tree);
            }
            d->depth--;
            return v;
        }
        if (t == SRL_REFN) {
            Py_ssize_t q = past_pad(d, p + 1);
            if (q < d->end && d->data[q] == SRL_HASH) {
                srl_dec_mark(d, p);
                if (srl_dec_enter(d, p) < 0)
                    return NULL;
                srl_dec_mark(d, q);
                v = project_counted_hash(pr, q, pos, tree);
                d->depth--;
                return v;
            }
        }
    }
    return project_obj(srl_dec_item(d, pos), tree);
}

/* The elements of the untracked array at tagpos (its level open, n checked against
 * nothing yet), each narrowed to `tree`; charged as read_array charges. */
static PyObject *
project_events(Proj *pr, Py_ssize_t tagpos, Py_ssize_t *pos, Py_ssize_t n, PyObject *tree)
{
    Dec *d = pr->d;
    if (n > d->end - *pos)
        return srl_raise(srl_state.TruncatedInput, d->end,
                         "array of %zd items cannot fit in the %zd bytes left", n,
                         d->end - *pos);
    if (srl_dec_charge(d, tagpos, 1 + n) < 0)
        return NULL;
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = project_value(pr, pos, tree);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

PyObject *
srl_dec_projected(Dec *d, Py_ssize_t *pos, PyObject *tree)
{
    Py_ssize_t p = past_pad(d, *pos);
    if (p < d->end) {
        uint8_t t = d->data[p];
        PyObject *v = NULL;
        Py_ssize_t q = t == SRL_REFN ? past_pad(d, p + 1) : p;
        if (t == SRL_ARRAY || (t >= SRL_ARRAYREF_LOW && t < SRL_HASHREF_LOW) ||
            (t == SRL_REFN && q < d->end && d->data[q] == SRL_ARRAY)) {
            srl_dec_mark(d, p);
            if (srl_dec_enter(d, p) < 0)
                return NULL;
            Proj *pr = PyMem_Malloc(sizeof *pr);
            if (pr == NULL)
                return PyErr_NoMemory();
            pr->d = d;
            for (int i = 0; i < 512; i++) {
                pr->keys[i].target = -1;
                pr->keys[i].key = NULL;
            }
            for (int i = 0; i < 256; i++) {
                pr->shorts[i].bytes = 0;
                pr->shorts[i].key = NULL;
            }
            if (t >= SRL_ARRAYREF_LOW) {
                *pos = p + 1;
                v = project_events(pr, p, pos, t & 0x0f, tree);
            } else {
                Py_ssize_t n;
                srl_dec_mark(d, q);
                if (srl_dec_count(d, q, pos, &n) == 0)
                    v = project_events(pr, q, pos, n, tree);
            }
            for (int i = 0; i < 512; i++)
                Py_XDECREF(pr->keys[i].key);
            for (int i = 0; i < 256; i++)
                Py_XDECREF(pr->shorts[i].key);
            PyMem_Free(pr);
            d->depth--;
            return v;
        }
    }
    PyObject *v = srl_dec_item(d, pos);
    if (v == NULL || !PyList_Check(v))
        return v;
    Py_ssize_t n = PyList_GET_SIZE(v);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *e = project_obj(Py_NewRef(PyList_GET_ITEM(v, i)), tree);
        if (e == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, e);
    }
    Py_DECREF(v);
    return out;
}
