/* Body encoder: Python value -> Sereal body with 1-based offsets, byte for byte as
 * DESIGN.md ("Encoding") prescribes, identical to the pure-Python encoder.
 *
 * Two passes: a pre-pass over containers, PerlRefs and PerlObjects (by identity)
 * finds the ones reachable more than once, so a shared container's first occurrence
 * can carry the track flag; then one recursive write into a growable buffer, where a
 * later occurrence of a shared object is a REFP (which sets the track flag on its
 * target, as Perl's encoder does). Both passes count nesting the same way (list,
 * tuple, dict, PerlRef and PerlObject each open a level; the top-level value is
 * level 1) and stop at max_depth, which also bounds the C stack. Scalars and the
 * string writers are in encode_scalar.c. */
#include "encoder.h"

static int enc_value(Enc *e, PyObject *obj, int level);
static int enc_perl_ref(Enc *e, PyObject *obj, int level, SrlPtrEntry *owner);

static int
too_deep(Enc *e)
{
    srl_raise(srl_state.EncodeDepthExceeded, -1, "value nests deeper than max_depth=%d",
              e->max_depth);
    return -1;
}

/* ---- pre-pass: which containers, PerlRefs and PerlObjects are shared ---- */

/* An object whose only reference is the slot we reached it through cannot be reached
 * twice (a second path, or a cycle, needs a second reference), so it need not be
 * recorded; most containers in a value are like that. Only called while no Python
 * code can run, so the count cannot change under us. */
static inline int
maybe_reached_twice(PyObject *obj)
{
    return Py_REFCNT(obj) > 1;
}

static int prescan(Enc *e, PyObject *obj, int level);

/* Prescan one child. Builtin containers and scalars run no Python code, so a
 * borrowed reference will do (and keeps the refcount test above meaningful); anything
 * else (a wrapper, whose attribute lookup might run Python code that mutates the
 * parent) is held for the duration. */
static inline int
prescan_child(Enc *e, PyObject *child, int level)
{
    PyTypeObject *t = Py_TYPE(child);
    if (t == &PyDict_Type || t == &PyList_Type || t == &PyTuple_Type || t == &PyUnicode_Type ||
        t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type || child == Py_None)
        return prescan(e, child, level);
    Py_INCREF(child);
    int rc = prescan(e, child, level);
    Py_DECREF(child);
    return rc;
}

static int
prescan_children(Enc *e, PyObject *obj, int is_list, int is_dict, int level)
{
    if (is_dict) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(obj, &pos, &key, &value)) {
            if (prescan_child(e, value, level + 1) < 0)
                return -1;
        }
        return 0;
    }
    /* Size and items re-read each time: a child may have run Python code. */
    for (Py_ssize_t i = 0; i < Py_SIZE(obj); i++) {
        PyObject *item = is_list ? PyList_GET_ITEM(obj, i) : PyTuple_GET_ITEM(obj, i);
        if (prescan_child(e, item, level + 1) < 0)
            return -1;
    }
    return 0;
}

/* The pre-pass meets a container, PerlRef or PerlObject: 1 to descend into it, 0 when
 * it was met before (now known shared; not descended again, so cycles terminate), -1
 * on error. A second visit is checked before the depth: it does not descend (the
 * write pass decides whether its REFP is too deep), as in the pure pre-pass. */
static inline int
visit(Enc *e, PyObject *obj, int level)
{
    if (maybe_reached_twice(obj)) {
        int added;
        SrlPtrEntry *entry = srl_ptrmap_add(&e->containers, obj, &added);
        if (entry == NULL)
            return -1;
        if (!added) {
            entry->shared = 1;
            e->any_shared = 1;
            return 0;
        }
    }
    return level > e->max_depth ? too_deep(e) : 1;
}

/* Find the containers, PerlRefs and PerlObjects reachable more than once. Visits list / tuple / dict items and
 * PerlRef / PerlObject values depth-first, each object once. Runs no Python code
 * for the builtin containers, so borrowed references stay valid; a wrapper's value
 * is fetched with a new reference. */
static int
prescan(Enc *e, PyObject *obj, int level)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (type == &PyUnicode_Type || type == &PyLong_Type || type == &PyFloat_Type ||
        type == &PyBool_Type || type == &PyBytes_Type || obj == Py_None)
        return 0;
    int is_list = PyList_Check(obj), is_tuple = !is_list && PyTuple_Check(obj);
    int is_dict = !is_list && !is_tuple && PyDict_Check(obj);
    if (is_list || is_tuple || is_dict) {
        int rc = visit(e, obj, level);
        return rc <= 0 ? rc : prescan_children(e, obj, is_list, is_dict, level);
    }
    if (PyObject_TypeCheck(obj, (PyTypeObject *)srl_state.PerlRef) ||
        PyObject_TypeCheck(obj, (PyTypeObject *)srl_state.PerlObject)) {
        /* Descended once, like containers, so a cycle through them ends here. */
        int rc = visit(e, obj, level);
        if (rc <= 0)
            return rc;
        PyObject *value = PyObject_GetAttr(obj, srl_state.s_value);
        if (value == NULL)
            return -1;
        rc = prescan(e, value, level + 1);
        Py_DECREF(value);
        return rc;
    }
    return 0;
}

/* ---- back-references ---- */

/* REFP offset, setting the track flag on the tag there (the REFP itself when it
 * names its own offset: `$x = \$x`). */
static int
put_refp(Enc *e, Py_ssize_t offset)
{
    if (srl_buf_put_tag_varint(&e->out, SRL_REFP, (uint64_t)offset) < 0)
        return -1;
    e->out.data[offset - 1] |= SRL_TRACK;
    return 0;
}

/* The pre-pass's entry for obj (NULL: not reachable twice). */
static inline SrlPtrEntry *
sharing_of(Enc *e, PyObject *obj)
{
    return e->any_shared ? srl_ptrmap_get(&e->containers, obj) : NULL;
}

/* ---- containers ---- */

/* Opening of a list/tuple (is_hash 0) or dict of n entries. owner: the shared
 * PerlObject this container is the value of (it is then written as a shared
 * container is, and is that object's blessed referent), or NULL. Returns 1 when the
 * container was already written and a REFP was emitted instead (skip the body). */
static int
open_container(Enc *e, PyObject *obj, Py_ssize_t n, int is_hash, SrlPtrEntry *owner)
{
    SrlPtrEntry *entry = sharing_of(e, obj);
    uint8_t big = is_hash ? SRL_HASH : SRL_ARRAY;
    if ((entry != NULL && entry->shared) || owner != NULL) {
        if (entry != NULL && entry->offset > 0) {
            if (put_refp(e, entry->offset) < 0)
                return -1;
            if (owner != NULL)
                owner->offset = entry->offset;
            return 1;
        }
        if (entry != NULL && entry->shared)
            entry->own = e->out.len + 1;
        if (srl_buf_put_byte(&e->out, SRL_REFN) < 0)
            return -1;
        Py_ssize_t offset = e->out.len + 1;
        if (entry != NULL)
            entry->offset = offset;
        if (owner != NULL)
            owner->offset = offset;
        return srl_buf_put_tag_varint(&e->out, big | SRL_TRACK, (uint64_t)n);
    }
    if (n <= 15)
        return srl_buf_put_byte(&e->out, (uint8_t)((is_hash ? SRL_HASHREF_LOW : SRL_ARRAYREF_LOW) + n));
    if (srl_buf_put_byte(&e->out, SRL_REFN) < 0)
        return -1;
    return srl_buf_put_tag_varint(&e->out, big, (uint64_t)n);
}

static int
changed_size(void)
{
    PyErr_SetString(PyExc_RuntimeError, "container changed size during encoding");
    return -1;
}

static int
enc_sequence(Enc *e, PyObject *obj, int is_list, int level, SrlPtrEntry *owner)
{
    Py_ssize_t n = Py_SIZE(obj);
    int rc = open_container(e, obj, n, 0, owner);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (Py_SIZE(obj) != n)
            return changed_size();
        PyObject *item = is_list ? PyList_GET_ITEM(obj, i) : PyTuple_GET_ITEM(obj, i);
        Py_INCREF(item);
        rc = enc_value(e, item, level + 1);
        Py_DECREF(item);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int
enc_dict(Enc *e, PyObject *obj, int level, SrlPtrEntry *owner)
{
    Py_ssize_t n = PyDict_GET_SIZE(obj);
    int rc = open_container(e, obj, n, 1, owner);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    Py_ssize_t pos = 0, written = 0;
    PyObject *key, *value;
    while (PyDict_Next(obj, &pos, &key, &value)) {
        if (++written > n)
            return changed_size();
        Py_INCREF(key);
        Py_INCREF(value);
        /* Hash keys are always deduped, as Perl does. */
        if (PyUnicode_CheckExact(key))
            rc = srl_enc_str(e, key, 1);
        else if (PyUnicode_Check(key) || PyBytes_Check(key))
            rc = srl_enc_text(e, key, 1, "a dict key");
        else
            rc = srl_enc_unencodable(key, "a dict key");
        if (rc == 0)
            rc = enc_value(e, value, level + 1);
        Py_DECREF(key);
        Py_DECREF(value);
        if (rc < 0)
            return -1;
    }
    return written == n ? 0 : changed_size();
}

/* OBJECT cls / OBJECTV offset-of-cls (or the FREEZE forms). */
static int
enc_class(Enc *e, PyObject *cls, int frozen)
{
    if (!PyUnicode_Check(cls))
        return srl_enc_unencodable(cls, "a class name");
    PyObject *exact = PyUnicode_FromObject(cls);
    if (exact == NULL)
        return -1;
    Py_ssize_t first = srl_strtable_lookup_or_add(&e->classes, exact, e->out.len + 2);
    int rc;
    if (first < 0)
        rc = -1;
    else if (first > 0)
        rc = srl_buf_put_tag_varint(&e->out, frozen ? SRL_OBJECTV_FREEZE : SRL_OBJECTV,
                                    (uint64_t)first);
    else if (srl_buf_put_byte(&e->out, frozen ? SRL_OBJECT_FREEZE : SRL_OBJECT) < 0)
        rc = -1;
    else
        rc = srl_enc_str(e, exact, 0); /* class names are deduped by OBJECTV, never COPY */
    Py_DECREF(exact);
    return rc;
}

static int
is_nesting(PyObject *obj)
{
    return PyList_Check(obj) || PyTuple_Check(obj) || PyDict_Check(obj) ||
           PyObject_TypeCheck(obj, (PyTypeObject *)srl_state.PerlRef) ||
           PyObject_TypeCheck(obj, (PyTypeObject *)srl_state.PerlObject);
}

/* A PerlRef: REFN + its referent, or REFP to the referent when that is already
 * written. owner: the shared PerlObject whose value this is (that object's blessed
 * referent is this reference's referent), or NULL. */
static int
enc_perl_ref(Enc *e, PyObject *obj, int level, SrlPtrEntry *owner)
{
    if (level > e->max_depth)
        return too_deep(e);
    SrlPtrEntry *entry = sharing_of(e, obj);
    if (entry != NULL && entry->offset > 0) {
        /* Written before: another reference to its referent. */
        if (put_refp(e, entry->offset) < 0)
            return -1;
        if (owner != NULL)
            owner->offset = entry->offset;
        return 0;
    }
    int shared = entry != NULL && entry->shared;
    if (shared)
        entry->own = e->out.len + 1;
    PyObject *value = PyObject_GetAttr(obj, srl_state.s_value);
    if (value == NULL)
        return -1;
    SrlPtrEntry *target = sharing_of(e, value);
    int written = target != NULL && target->own > 0;
    Py_ssize_t referent;
    int rc;
    if (written) { /* the referent is written (or being written) already */
        referent = target->own;
        rc = put_refp(e, referent);
    } else {
        rc = srl_buf_put_byte(&e->out, SRL_REFN);
        referent = e->out.len + 1;
    }
    if (rc == 0 && (shared || owner != NULL)) {
        /* Later occurrences are REFPs to the referent. */
        if (entry != NULL)
            entry->offset = referent;
        if (owner != NULL)
            owner->offset = referent;
    }
    if (rc == 0 && !written) {
        if ((shared || owner != NULL) && !is_nesting(value)) {
            /* A scalar referent that a later REFP will track: a literal, neither a
             * COPY nor a COPY target (Perl would track a COPY's target again). */
            int dedupe = e->dedupe_strings;
            e->dedupe_strings = 0;
            rc = enc_value(e, value, level + 1);
            e->dedupe_strings = dedupe;
        } else {
            rc = enc_value(e, value, level + 1);
        }
    }
    Py_DECREF(value);
    return rc;
}

/* OBJECT cls value. A shared object whose value is a list, tuple, dict or PerlRef
 * is written as Perl writes a blessed referent reachable twice: the referent
 * tracked, later occurrences REFP to it (which decodes to this same object). */
static int
enc_perl_object(Enc *e, PyObject *obj, int level)
{
    if (level > e->max_depth)
        return too_deep(e);
    SrlPtrEntry *entry = sharing_of(e, obj);
    if (entry != NULL && entry->offset > 0)
        return put_refp(e, entry->offset);
    int shared = entry != NULL && entry->shared;
    if (shared)
        entry->own = e->out.len + 1;
    PyObject *value = NULL, *cls = NULL, *frozen = NULL;
    int rc = -1;
    if ((cls = PyObject_GetAttr(obj, srl_state.s_class_name)) == NULL ||
        (value = PyObject_GetAttr(obj, srl_state.s_value)) == NULL ||
        (frozen = PyObject_GetAttr(obj, srl_state.s_frozen)) == NULL)
        goto done;
    int is_frozen = PyObject_IsTrue(frozen);
    if (is_frozen < 0 || enc_class(e, cls, is_frozen) < 0)
        goto done;
    int inner = level + 1;
    if (shared && (PyList_Check(value) || PyTuple_Check(value)))
        rc = inner > e->max_depth ? too_deep(e)
                                  : enc_sequence(e, value, PyList_Check(value), inner, entry);
    else if (shared && PyDict_Check(value))
        rc = inner > e->max_depth ? too_deep(e) : enc_dict(e, value, inner, entry);
    else if (shared && PyObject_TypeCheck(value, (PyTypeObject *)srl_state.PerlRef))
        rc = enc_perl_ref(e, value, inner, entry);
    else
        rc = enc_value(e, value, inner);
done:
    Py_XDECREF(value);
    Py_XDECREF(cls);
    Py_XDECREF(frozen);
    return rc;
}

static int
enc_wrapper(Enc *e, PyObject *obj, int level)
{
    PyObject *value = NULL, *frozen = NULL;
    int rc = -1;
    if (PyObject_TypeCheck(obj, (PyTypeObject *)srl_state.PerlRef)) {
        return enc_perl_ref(e, obj, level, NULL);
    } else if (PyObject_TypeCheck(obj, (PyTypeObject *)srl_state.PerlObject)) {
        return enc_perl_object(e, obj, level);
    } else if (PyObject_TypeCheck(obj, (PyTypeObject *)srl_state.PerlRegexp)) {
        /* As Perl writes qr//: OBJECT "Regexp" REFN REGEXP pattern flags (two
         * levels, as the decoder counts them), pattern and flags always literal. */
        if ((value = PyObject_GetAttr(obj, srl_state.s_pattern)) == NULL ||
            (frozen = PyObject_GetAttr(obj, srl_state.s_flags)) == NULL)
            goto done;
        if (!PyUnicode_Check(value) || !PyUnicode_Check(frozen)) {
            srl_raise(srl_state.UnencodableValue, -1, "PerlRegexp pattern and flags must be str");
            goto done;
        }
        if (level + 1 > e->max_depth) {
            too_deep(e);
            goto done;
        }
        if (enc_class(e, srl_state.s_regexp_class, 0) < 0 ||
            srl_buf_put_byte(&e->out, SRL_REFN) < 0 ||
            srl_buf_put_byte(&e->out, SRL_REGEXP) < 0 ||
            srl_enc_text(e, value, 0, "a regexp pattern") < 0 ||
            srl_enc_text(e, frozen, 0, "regexp flags") < 0)
            goto done;
        rc = 0;
    } else {
        rc = srl_enc_unencodable(obj, "a value");
    }
done:
    Py_XDECREF(value);
    Py_XDECREF(frozen);
    return rc;
}

static int
enc_value(Enc *e, PyObject *obj, int level)
{
    PyTypeObject *type = Py_TYPE(obj);
    /* Exact types first: they are nearly everything an event holds. */
    if (type == &PyUnicode_Type)
        return srl_enc_str(e, obj, e->dedupe_strings);
    if (type == &PyLong_Type)
        return srl_enc_int(e, obj);
    if (type == &PyDict_Type)
        return level > e->max_depth ? too_deep(e) : enc_dict(e, obj, level, NULL);
    if (type == &PyList_Type)
        return level > e->max_depth ? too_deep(e) : enc_sequence(e, obj, 1, level, NULL);
    if (obj == Py_None)
        return srl_buf_put_byte(&e->out, SRL_UNDEF);
    if (type == &PyBool_Type)
        return srl_buf_put_byte(&e->out, obj == Py_True ? SRL_TRUE : SRL_FALSE);
    if (PyFloat_Check(obj))
        return srl_enc_double(e, PyFloat_AS_DOUBLE(obj));
    if (PyLong_Check(obj))
        return srl_enc_int(e, obj);
    if (PyUnicode_Check(obj) || PyBytes_Check(obj) || PyByteArray_Check(obj))
        return srl_enc_text(e, obj, e->dedupe_strings, "a value");
    if (PyList_Check(obj) || PyTuple_Check(obj))
        return level > e->max_depth ? too_deep(e)
                                    : enc_sequence(e, obj, PyList_Check(obj), level, NULL);
    if (PyDict_Check(obj))
        return level > e->max_depth ? too_deep(e) : enc_dict(e, obj, level, NULL);
    return enc_wrapper(e, obj, level);
}

PyObject *
srl_encode_body(PyObject *obj, int dedupe_strings, int max_depth)
{
    if (max_depth < 0 || max_depth > SRL_MAX_DEPTH_CAP) {
        PyErr_Format(PyExc_ValueError, "max_depth must be in 0..%d, got %d",
                     SRL_MAX_DEPTH_CAP, max_depth);
        return NULL;
    }
    Enc e;
    e.dedupe_strings = dedupe_strings;
    e.max_depth = max_depth;
    e.any_shared = 0;
    srl_strtable_init(&e.strs);
    srl_strtable_init(&e.bytes);
    srl_strtable_init(&e.classes);
    srl_ptrmap_init(&e.containers);
    PyObject *result = NULL;
    if (srl_buf_init(&e.out, 4096) < 0)
        return NULL;
    if (prescan(&e, obj, 1) == 0 && enc_value(&e, obj, 1) == 0)
        result = PyBytes_FromStringAndSize((const char *)e.out.data, e.out.len);
    srl_buf_free(&e.out);
    srl_strtable_free(&e.strs);
    srl_strtable_free(&e.bytes);
    srl_strtable_free(&e.classes);
    srl_ptrmap_free(&e.containers);
    return result;
}
