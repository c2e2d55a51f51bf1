/* Body decoder, the tags that point elsewhere: REFN, REFP, ALIAS, COPY, OBJECT(V)
 * (and their FREEZE forms) and REGEXP.
 *
 * Back-references may only point backwards inside the body, at a position where a
 * tag was read (the tag_starts bitmap): REFP / ALIAS at tracked items, COPY at a
 * string, OBJECTV at a class name. A COPY is therefore one (cached) string: it can
 * never amplify work or memory. */
#include "decoder.h"

static PyObject *
tracked_at(Dec *d, Py_ssize_t tagpos, Py_ssize_t target, const char *what)
{
    intptr_t hit;
    if (srl_tracked_at(&d->tracked, tagpos, target, what, &hit) < 0)
        return NULL;
    return (PyObject *)hit; /* borrowed */
}

PyObject *
srl_dec_refn(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, const SrlTrack *track)
{
    if (srl_dec_enter(d, tagpos) < 0)
        return NULL;
    Py_ssize_t q = tagpos + 1;
    if (srl_dec_skip_pad(d, &q) < 0) {
        d->depth--;
        return NULL;
    }
    uint8_t next = d->data[q] & 0x7f;
    *pos = q;
    if (next == SRL_ARRAY || next == SRL_HASH) {
        /* A reference to an array or hash is just the list / dict: one Python
         * object, one nesting level. */
        srl_dec_mark(d, q);
        PyObject *v = srl_dec_container(d, q, pos, track, 1);
        d->depth--;
        return v;
    }
    PyObject *ref = NULL, *v;
    if (srl_dec_charge(d, tagpos, 1) < 0) /* its PerlRef */
        goto fail;
    if (track != NULL) {
        /* Registered before its target so the target may refer to it. */
        ref = PyObject_CallNoArgs(srl_state.PerlRef);
        if (ref == NULL || srl_dec_track_all(d, track, ref) < 0)
            goto fail;
        if ((v = srl_dec_item(d, pos)) == NULL)
            goto fail;
        int rc = PyObject_SetAttr(ref, srl_state.s_value, v);
        Py_DECREF(v);
        if (rc < 0)
            goto fail;
    } else {
        if ((v = srl_dec_item(d, pos)) == NULL)
            goto fail;
        ref = PyObject_CallOneArg(srl_state.PerlRef, v);
        Py_DECREF(v);
    }
    d->depth--;
    return ref;
fail:
    d->depth--;
    Py_XDECREF(ref);
    return NULL;
}

/* REFP at tagpos. plain: the reference is about to be blessed (the value of an
 * OBJECT), so an earlier blessing of its referent does not apply. */
PyObject *
srl_dec_refp(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, const SrlTrack *track, int plain)
{
    Py_ssize_t p = tagpos + 1;
    /* Only a tracked REFP may point at itself: Perl's `$x = \$x`. */
    int self_ok = d->data[tagpos] & SRL_TRACK;
    Py_ssize_t target = srl_dec_resolve(d, tagpos, &p, self_ok ? tagpos + 1 : tagpos, "REFP");
    if (target < 0)
        return NULL;
    *pos = p;
    intptr_t hit;
    PyObject *v;
    uint8_t ttag = d->data[target] & 0x7f;
    /* The target holds a tracked item, or is about to: a REFP|F naming itself, or a
     * WEAKEN|F right before it (the REFP's value is registered there too). */
    if (!srl_offtable_get(&d->tracked, target, &hit) && !srl_track_has(track, target))
        return tracked_at(d, tagpos, target, "REFP"); /* raises BadBackReference */
    if (!plain && srl_offtable_get(&d->blessed, target, &hit)) {
        /* The referent of a blessed reference: in Perl the blessing is the
         * referent's, so another reference to it is the same object. */
        v = Py_NewRef((PyObject *)hit);
    } else if (ttag == SRL_ARRAY || ttag == SRL_HASH) {
        PyObject *target_value = tracked_at(d, tagpos, target, "REFP");
        if (target_value == NULL)
            return NULL;
        v = Py_NewRef(target_value);
    } else if (srl_dec_charge(d, tagpos, 1) < 0) { /* the PerlRef made below */
        return NULL;
    } else if (track != NULL) {
        v = PyObject_CallNoArgs(srl_state.PerlRef);
        if (v == NULL)
            return NULL;
        if (srl_dec_track_all(d, track, v) < 0)
            goto fail;
        PyObject *target_value = tracked_at(d, tagpos, target, "REFP");
        if (target_value == NULL || PyObject_SetAttr(v, srl_state.s_value, target_value) < 0)
            goto fail;
        return v;
    } else {
        PyObject *target_value = tracked_at(d, tagpos, target, "REFP");
        if (target_value == NULL)
            return NULL;
        return PyObject_CallOneArg(srl_state.PerlRef, target_value);
    }
    if (srl_dec_track_all(d, track, v) < 0)
        goto fail;
    return v;
fail:
    Py_DECREF(v);
    return NULL;
}

PyObject *
srl_dec_alias(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos)
{
    Py_ssize_t p = tagpos + 1;
    Py_ssize_t target = srl_dec_resolve(d, tagpos, &p, tagpos, "ALIAS");
    if (target < 0)
        return NULL;
    PyObject *v = tracked_at(d, tagpos, target, "ALIAS");
    if (v == NULL)
        return NULL;
    *pos = p;
    return Py_NewRef(v);
}

/* Perl's truth of a scalar, or -1 when v is not a scalar. */
static int
perl_truth(PyObject *v)
{
    if (v == Py_None)
        return 0;
    if (PyBool_Check(v))
        return v == Py_True;
    if (PyLong_CheckExact(v) || PyFloat_CheckExact(v))
        return PyObject_IsTrue(v);
    if (PyUnicode_CheckExact(v))
        return !(PyUnicode_GET_LENGTH(v) == 0 ||
                 (PyUnicode_GET_LENGTH(v) == 1 && PyUnicode_READ_CHAR(v, 0) == '0'));
    if (PyBytes_CheckExact(v))
        return !(PyBytes_GET_SIZE(v) == 0 ||
                 (PyBytes_GET_SIZE(v) == 1 && PyBytes_AS_STRING(v)[0] == '0'));
    return -1;
}

/* The Python value of a decoded object: bool for a boolean class around a scalar
 * reference, the PerlRegexp for "Regexp" around REFN REGEXP, else `obj` itself. */
static PyObject *
bless(PyObject *obj, PyObject *cls, PyObject *x, int frozen)
{
    if (!frozen && Py_TYPE(x) == (PyTypeObject *)srl_state.PerlRef) {
        int is_bool = PySet_Contains(srl_state.BooleanClasses, cls);
        if (is_bool < 0)
            return NULL;
        int is_regexp = !is_bool && PyUnicode_Compare(cls, srl_state.s_regexp_class) == 0;
        if (is_bool || is_regexp) {
            PyObject *inner = PyObject_GetAttr(x, srl_state.s_value);
            if (inner == NULL)
                return NULL;
            if (is_bool) {
                int truth = perl_truth(inner);
                if (truth >= 0) {
                    Py_DECREF(inner);
                    return Py_NewRef(truth ? Py_True : Py_False);
                }
            } else if (Py_TYPE(inner) == (PyTypeObject *)srl_state.PerlRegexp) {
                return inner;
            }
            Py_DECREF(inner);
        }
    }
    return Py_NewRef(obj);
}

/* The class name of OBJECT (a string or COPY of one, remembered for OBJECTV) or
 * OBJECTV (an offset to a class name read earlier). */
static PyObject *
read_class(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t tag)
{
    if (tag == SRL_OBJECT || tag == SRL_OBJECT_FREEZE) {
        Py_ssize_t string_pos;
        PyObject *cls = srl_dec_key(d, pos, "class name", &string_pos);
        if (cls != NULL && srl_offtable_put(&d->class_names, string_pos, (intptr_t)cls) < 0)
            Py_CLEAR(cls);
        return cls;
    }
    Py_ssize_t target = srl_dec_resolve(d, tagpos, pos, tagpos, "OBJECTV");
    if (target < 0)
        return NULL;
    intptr_t hit;
    if (!srl_offtable_get(&d->class_names, target, &hit))
        return srl_raise(srl_state.BadBackReference, tagpos,
                         "OBJECTV points at position %zd, where no class name was read", target);
    return Py_NewRef((PyObject *)hit);
}

PyObject *
srl_dec_object(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t tag, const SrlTrack *track)
{
    int frozen = tag == SRL_OBJECT_FREEZE || tag == SRL_OBJECTV_FREEZE;
    if (srl_dec_enter(d, tagpos) < 0)
        return NULL;
    PyObject *cls = NULL, *x = NULL, *obj = NULL, *result = NULL;
    Py_ssize_t p = tagpos + 1;
    /* The object, and the class name when it is spelled out here (OBJECTV shares one). */
    int named = tag == SRL_OBJECT || tag == SRL_OBJECT_FREEZE;
    if (srl_dec_charge(d, tagpos, named ? 2 : 1) < 0)
        goto done;
    if ((cls = read_class(d, tagpos, &p, tag)) == NULL)
        goto done;
    obj = PyObject_CallFunctionObjArgs(srl_state.PerlObject, cls, Py_None,
                                       frozen ? Py_True : Py_False, NULL);
    /* Registered before its value: a blessed container may refer to its object. */
    if (obj == NULL || srl_dec_track_all(d, track, obj) < 0)
        goto done;
    if (srl_dec_skip_pad(d, &p) < 0)
        goto done;
    Py_ssize_t xpos = p;
    uint8_t xt = d->data[xpos];
    /* Perl blesses the referent: from here on a REFP to it is another reference to
     * this same object (JSON::PP::true written twice, say; walk.h). */
    Py_ssize_t referent = srl_body_referent(d->data, d->end, d->base, xpos);
    if ((xt & 0x7f) == SRL_REFP) {
        srl_dec_mark(d, xpos);
        SrlTrack own = {xpos, NULL};
        if ((x = srl_dec_refp(d, xpos, &p, (xt & SRL_TRACK) ? &own : NULL, 1)) == NULL)
            goto done;
    } else {
        if (referent >= 0 && srl_offtable_put(&d->blessed, referent, (intptr_t)obj) < 0)
            goto done;
        if ((x = srl_dec_item(d, &p)) == NULL)
            goto done;
    }
    if (PyObject_SetAttr(obj, srl_state.s_value, x) < 0)
        goto done;
    if ((result = bless(obj, cls, x, frozen)) == NULL)
        goto done;
    if (result != obj && srl_dec_track_all(d, track, result) < 0)
        goto fail;
    if (referent >= 0 && srl_offtable_put(&d->blessed, referent, (intptr_t)result) < 0)
        goto fail;
    *pos = p;
    goto done;
fail:
    Py_CLEAR(result);
done:
    d->depth--;
    Py_XDECREF(cls);
    Py_XDECREF(x);
    Py_XDECREF(obj);
    return result;
}

PyObject *
srl_dec_regexp(Dec *d, Py_ssize_t *pos)
{
    /* The regexp, its pattern and its flags (*pos is just past the tag). */
    if (srl_dec_charge(d, *pos - 1, 3) < 0)
        return NULL;
    Py_ssize_t string_pos;
    PyObject *pattern = srl_dec_key(d, pos, "regexp pattern", &string_pos);
    if (pattern == NULL)
        return NULL;
    PyObject *flags = srl_dec_key(d, pos, "regexp flags", &string_pos);
    if (flags == NULL) {
        Py_DECREF(pattern);
        return NULL;
    }
    PyObject *v = PyObject_CallFunctionObjArgs(srl_state.PerlRegexp, pattern, flags, NULL);
    Py_DECREF(pattern);
    Py_DECREF(flags);
    return v;
}
