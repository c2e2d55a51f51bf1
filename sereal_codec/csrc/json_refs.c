/* JSON transcoder, the tags that point elsewhere: REFN, REFP, ALIAS, OBJECT(V) (and
 * their FREEZE forms) and REGEXP; mirrors decode_refs.c check for check. A reference
 * writes its target's JSON again (a PerlRef is its referent, an object its value, a
 * boolean object true / false); a reference to a value still being written is a
 * cycle, which JSON cannot hold. */
#include "json.h"

/* The span tracked at target, or -1 with BadBackReference. */
static Py_ssize_t
tracked_at(Jx *j, Py_ssize_t tagpos, Py_ssize_t target, const char *what)
{
    intptr_t hit;
    if (srl_tracked_at(&j->tracked, tagpos, target, what, &hit) < 0)
        return -1;
    return (Py_ssize_t)hit;
}

int
srl_jx_refn(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, const SrlTrack *track, int top,
            JSpan *res)
{
    if (srl_jx_enter(j, tagpos) < 0)
        return -1;
    Py_ssize_t q = tagpos + 1;
    int rc = -1;
    if (srl_jx_skip_pad(j, &q) < 0)
        goto done;
    uint8_t next = j->data[q] & 0x7f;
    *pos = q;
    if (next == SRL_ARRAY || next == SRL_HASH) {
        /* REFN ARRAY is one list: one nesting level, the same JSON. */
        srl_jx_mark(j, q);
        rc = srl_jx_container(j, q, pos, track, 1, top, res);
        goto done;
    }
    /* A PerlRef, registered before its target (which may refer back to it). */
    Py_ssize_t span = -1;
    if (track != NULL) {
        span = srl_jx_new_span(j, JD_UNFINISHED, JK_OTHER, 0, 0);
        if (span < 0 || srl_jx_track_all(j, track, span) < 0)
            goto done;
    }
    JSpan inner;
    if (srl_jx_item(j, pos, NULL, &inner) < 0)
        goto done;
    *res = inner;
    res->kind = srl_jx_ref_kind(inner.kind);
    if (span >= 0)
        j->spans[span] = *res;
    rc = 0;
done:
    j->depth--;
    return rc;
}

/* Write the value at span si again, which becomes this item's value too. */
static int
reuse(Jx *j, Py_ssize_t si, JSpan *res)
{
    if (srl_jx_copy_span(j, si) < 0)
        return -1;
    *res = j->spans[si];
    return 0;
}

int
srl_jx_refp(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, const SrlTrack *track, int plain,
            JSpan *res)
{
    Py_ssize_t p = tagpos + 1;
    int self_ok = j->data[tagpos] & SRL_TRACK; /* `$x = \$x` */
    Py_ssize_t target = srl_jx_resolve(j, tagpos, &p, self_ok ? tagpos + 1 : tagpos, "REFP");
    if (target < 0)
        return -1;
    *pos = p;
    intptr_t hit;
    uint8_t ttag = j->data[target] & 0x7f;
    if (!srl_offtable_get(&j->tracked, target, &hit) && !srl_track_has(track, target))
        return tracked_at(j, tagpos, target, "REFP") < 0 ? -1 : 0; /* raises */
    Py_ssize_t si;
    if (!plain && srl_offtable_get(&j->blessed, target, &hit)) {
        si = (Py_ssize_t)hit; /* another reference to a blessed referent: the object */
    } else if (ttag == SRL_ARRAY || ttag == SRL_HASH) {
        if ((si = tracked_at(j, tagpos, target, "REFP")) < 0)
            return -1;
    } else {
        /* A new PerlRef to the tracked value (registered first: it may be that value). */
        Py_ssize_t own = -1;
        if (track != NULL) {
            own = srl_jx_new_span(j, JD_UNFINISHED, JK_OTHER, 0, 0);
            if (own < 0 || srl_jx_track_all(j, track, own) < 0)
                return -1;
        }
        if ((si = tracked_at(j, tagpos, target, "REFP")) < 0 || reuse(j, si, res) < 0)
            return -1;
        res->kind = srl_jx_ref_kind(res->kind);
        if (own >= 0)
            j->spans[own] = *res;
        return 0;
    }
    if (reuse(j, si, res) < 0)
        return -1;
    return srl_jx_track_all(j, track, si);
}

int
srl_jx_alias(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, JSpan *res)
{
    Py_ssize_t p = tagpos + 1;
    Py_ssize_t target = srl_jx_resolve(j, tagpos, &p, tagpos, "ALIAS");
    if (target < 0)
        return -1;
    Py_ssize_t si = tracked_at(j, tagpos, target, "ALIAS");
    if (si < 0 || reuse(j, si, res) < 0)
        return -1;
    *pos = p;
    return 0;
}

/* Whether the class name whose string is at string_pos is a boolean class. */
static int
boolean_class(Jx *j, Py_ssize_t string_pos)
{
    intptr_t hit;
    if (srl_offtable_get(&j->class_names, string_pos, &hit))
        return (int)hit - 1;
    uint8_t tag = j->data[string_pos] & 0x7f;
    Py_ssize_t p = string_pos + 1;
    uint64_t n;
    if (tag >= SRL_SHORT_BINARY_LOW)
        n = tag & 0x1f;
    else if (srl_jx_varint(j, &p, &n, "a string length") < 0) /* read fine before */
        return -1;
    const uint8_t *s = j->data + p;
    PyObject *cls = tag != SRL_STR_UTF8 && j->binary == SRL_BINARY_LATIN1
                        ? srl_str_from_latin1(s, (Py_ssize_t)n)
                        : srl_str_from_utf8(s, (Py_ssize_t)n);
    if (cls == NULL)
        return -1;
    int is_bool = PySet_Contains(srl_state.BooleanClasses, cls);
    Py_DECREF(cls);
    return is_bool;
}

/* Class name of OBJECT (string or COPY, remembered for OBJECTV) or OBJECTV. */
static int
read_class(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t tag)
{
    if (tag == SRL_OBJECT || tag == SRL_OBJECT_FREEZE) {
        Py_ssize_t string_pos;
        if (srl_jx_key(j, pos, "class name", 0, &string_pos) < 0)
            return -1;
        int is_bool = boolean_class(j, string_pos);
        if (is_bool < 0 ||
            srl_offtable_put(&j->class_names, string_pos, (intptr_t)(1 + is_bool)) < 0)
            return -1;
        return is_bool;
    }
    Py_ssize_t target = srl_jx_resolve(j, tagpos, pos, tagpos, "OBJECTV");
    if (target < 0)
        return -1;
    intptr_t hit;
    if (!srl_offtable_get(&j->class_names, target, &hit)) {
        srl_raise(srl_state.BadBackReference, tagpos,
                  "OBJECTV points at position %zd, where no class name was read", target);
        return -1;
    }
    return (int)hit - 1;
}

int
srl_jx_object(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t tag, const SrlTrack *track,
              JSpan *res)
{
    int frozen = tag == SRL_OBJECT_FREEZE || tag == SRL_OBJECTV_FREEZE;
    if (srl_jx_enter(j, tagpos) < 0)
        return -1;
    int rc = -1;
    Py_ssize_t p = tagpos + 1;
    int is_bool = read_class(j, tagpos, &p, tag);
    if (is_bool < 0)
        goto done;
    /* The object, registered before its value (which may refer to it). */
    Py_ssize_t span = srl_jx_new_span(j, JD_UNFINISHED, JK_OTHER, 0, 0);
    if (span < 0 || srl_jx_track_all(j, track, span) < 0 || srl_jx_skip_pad(j, &p) < 0)
        goto done;
    Py_ssize_t xpos = p, start = j->out.len;
    uint8_t xt = j->data[xpos];
    int candidate = !frozen && is_bool; /* true / false may replace the value's text */
    JSpan x;
    /* Perl blesses the referent: from here on a REFP to it is this object (see
     * decode_refs.c). */
    Py_ssize_t referent = srl_body_referent(j->data, j->end, j->base, xpos);
    if ((xt & 0x7f) == SRL_REFP) {
        srl_jx_mark(j, xpos);
        SrlTrack own = {xpos, NULL};
        j->candidates += candidate;
        rc = srl_jx_refp(j, xpos, &p, (xt & SRL_TRACK) ? &own : NULL, 1, &x);
        j->candidates -= candidate;
        if (rc < 0)
            goto done;
        rc = -1;
    } else {
        if (referent >= 0 && srl_offtable_put(&j->blessed, referent, (intptr_t)span) < 0)
            goto done;
        j->candidates += candidate;
        rc = srl_jx_item(j, &p, NULL, &x);
        j->candidates -= candidate;
        if (rc < 0)
            goto done;
        rc = -1;
    }
    if (!frozen && is_bool && (x.kind == JK_REF_FALSE || x.kind == JK_REF_TRUE)) {
        /* A boolean: its text replaces the referent's, which nothing refers to by
         * range (a scalar's span is its source position). */
        int truth = x.kind == JK_REF_TRUE;
        j->out.len = start;
        res->type = JD_CONST;
        res->kind = truth ? JK_TRUE : JK_FALSE;
        res->a = truth ? 1 : 2;
        res->b = 0;
        if (srl_buf_put_bytes(&j->out, truth ? "true" : "false", truth ? 4 : 5) < 0)
            goto done;
    } else {
        *res = x; /* the class is dropped: an object is its value */
        res->kind = JK_OTHER;
        if (srl_jx_check_cap(j) < 0) /* its text counts now */
            goto done;
    }
    j->spans[span] = *res;
    if (referent >= 0 && srl_offtable_put(&j->blessed, referent, (intptr_t)span) < 0)
        goto done;
    *pos = p;
    rc = 0;
done:
    j->depth--;
    return rc;
}

int
srl_jx_regexp(Jx *j, Py_ssize_t *pos)
{
    Py_ssize_t string_pos;
    if (srl_jx_key(j, pos, "regexp pattern", 1, &string_pos) < 0)
        return -1;
    return srl_jx_key(j, pos, "regexp flags", 0, &string_pos);
}
