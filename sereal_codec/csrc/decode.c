/* Body decoder: the entry point, the tag dispatch, scalars, strings and containers.
 * References, COPY and objects live in decode_refs.c.
 *
 * Safety: every read is bounded by `end`; every length and count is checked against
 * the bytes left before anything is allocated; nesting is counted before recursing,
 * so max_depth (capped at SRL_MAX_DEPTH_CAP) bounds the C stack. Every function
 * returns a new reference or NULL with an exception set, and releases what it holds
 * on every error path. */
#include "decoder.h"

#include <string.h>

/* Remember the value of an F-bit item for REFP / ALIAS. */
int
srl_dec_track(Dec *d, Py_ssize_t tagpos, PyObject *v)
{
    return srl_offtable_put(&d->tracked, tagpos, (intptr_t)v);
}

/* Register v under every position of `track`. */
int
srl_dec_track_all(Dec *d, const SrlTrack *track, PyObject *v)
{
    for (; track != NULL; track = track->next)
        if (srl_dec_track(d, track->pos, v) < 0)
            return -1;
    return 0;
}

/* A str or bytes from string bytes, per DESIGN.md's mapping. */
static PyObject *
make_string(const Dec *d, const uint8_t *s, Py_ssize_t n, int utf8_tag, int is_key)
{
    if (utf8_tag)
        return srl_str_from_utf8(s, n);
    if (d->binary == SRL_BINARY_LATIN1)
        return srl_str_from_latin1(s, n);
    if (d->binary == SRL_BINARY_BYTES && !is_key)
        return PyBytes_FromStringAndSize((const char *)s, n);
    return srl_str_from_utf8(s, n);
}

/* Decode the string whose tag byte is at *pos (already known to be a string tag);
 * advance past it. */
static PyObject *
read_string(Dec *d, Py_ssize_t *pos, uint8_t tag, int is_key)
{
    Py_ssize_t p, n;
    if (srl_dec_string_bytes(d, *pos, tag, &p, &n) < 0)
        return NULL;
    PyObject *v = make_string(d, d->data + p, n, tag == SRL_STR_UTF8, is_key);
    if (v != NULL)
        *pos = p + n;
    return v;
}

/* The string a COPY / OBJECTV points at (tag at tagpos is a string tag), decoded
 * once per position and kind and then shared. Returns a new reference. */
PyObject *
srl_dec_string_at(Dec *d, Py_ssize_t tagpos, int is_key)
{
    Py_ssize_t key = srl_dec_string_key(d, tagpos, is_key);
    intptr_t hit;
    if (srl_offtable_get(&d->strings, key, &hit)) {
        Py_INCREF((PyObject *)hit);
        return (PyObject *)hit;
    }
    Py_ssize_t p = tagpos;
    PyObject *v = read_string(d, &p, d->data[tagpos] & 0x7f, is_key);
    if (v == NULL)
        return NULL;
    if (srl_offtable_put(&d->strings, key, (intptr_t)v) < 0) {
        Py_DECREF(v);
        return NULL;
    }
    return v;
}

/* As srl_dec_copy_string, but a borrowed reference (owned by the cache). */
static inline PyObject *
copy_string_borrowed(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, int is_key,
                     Py_ssize_t *target_out)
{
    Py_ssize_t p = tagpos + 1;
    uint64_t o;
    if (srl_dec_varint(d, &p, &o, "a COPY offset") < 0)
        return NULL;
    Py_ssize_t target = o > (uint64_t)(tagpos - d->base) ? -1 : d->base + (Py_ssize_t)o;
    if (target >= d->start && target < tagpos) {
        /* A cached target was validated when it was first decoded: the hot path
         * touches neither the bitmap nor the target's bytes (cache misses). */
        Py_ssize_t key = srl_dec_string_key(d, target, is_key);
        size_t slot = srl_dec_recent_slot(key);
        PyObject *v;
        intptr_t hit;
        if (d->recent[slot].key == key) {
            v = d->recent[slot].value;
        } else if (srl_offtable_get(&d->strings, key, &hit)) {
            v = (PyObject *)hit;
            d->recent[slot].key = key;
            d->recent[slot].value = v;
        } else if (srl_dec_is_tag_start(d, target) && srl_is_string_tag(d->data[target] & 0x7f)) {
            if ((v = srl_dec_string_at(d, target, is_key)) == NULL)
                return NULL;
            Py_DECREF(v); /* the cache holds it */
        } else {
            goto bad;
        }
        *pos = p;
        *target_out = target;
        return v;
    }
bad:
    return srl_raise(srl_state.BadBackReference, tagpos,
                     "COPY offset %llu does not point at a string read earlier",
                     (unsigned long long)o);
}

/* The string a COPY (tag at tagpos) stands for, advancing *pos past it; its
 * target position in *target. The target must be a string tag read earlier in this
 * body: only strings are COPY targets, so a COPY never expands to more than one
 * (cached) string: no "billion laughs", no COPY of a COPY. */
PyObject *
srl_dec_copy_string(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, int is_key,
                    Py_ssize_t *target_out)
{
    PyObject *v = copy_string_borrowed(d, tagpos, pos, is_key, target_out);
    Py_XINCREF(v);
    return v;
}

/* A string where the format demands one: hash key, class name, regexp pattern or
 * flags. A string tag or a COPY of one; always a str. The F bit means nothing here
 * (Perl never tracks these). *string_pos: where the string tag is (the COPY's
 * target for a COPY). */
PyObject *
srl_dec_key(Dec *d, Py_ssize_t *pos, const char *what, Py_ssize_t *string_pos)
{
    if (srl_dec_skip_pad(d, pos) < 0)
        return NULL;
    Py_ssize_t tagpos = *pos;
    srl_dec_mark(d, tagpos);
    uint8_t t = d->data[tagpos], tag = t & 0x7f;
    if (srl_is_string_tag(tag)) {
        *string_pos = tagpos;
        return read_string(d, pos, tag, 1);
    }
    if (tag == SRL_COPY)
        return srl_dec_copy_string(d, tagpos, pos, 1, string_pos);
    return srl_raise(srl_state.InvalidStructure, tagpos,
                     "%s must be a string, found tag 0x%02x", what, t);
}

/* Register a new container before its contents, so they can refer back to it
 * (cycles): under its own tag if tracked, and under the enclosing REFN|F / WEAKEN|F
 * positions in `also`. */
static int
track_container(Dec *d, Py_ssize_t tagpos, int track, const SrlTrack *also, PyObject *v)
{
    if (track && srl_dec_track(d, tagpos, v) < 0)
        return -1;
    return srl_dec_track_all(d, also, v);
}

static PyObject *read_array(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, Py_ssize_t n,
                            int track, const SrlTrack *also_track);
static PyObject *read_hash(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, Py_ssize_t n, int track,
                           const SrlTrack *also_track);
static PyObject *read_number(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, SrlKind kind);

/* One item of an array or hash, as srl_dec_item decodes it. The tags most of an
 * event is made of (strings, COPYs, integers, doubles, undef, booleans, small hashes
 * and arrays), when untracked, are decoded right here: two calls and the tracking
 * bookkeeping per item cost more than building a small string. Anything else, PADs
 * and F-bit tags included, goes through srl_dec_item_tracked. */
static inline PyObject *
dec_member(Dec *d, Py_ssize_t *pos)
{
    Py_ssize_t p = *pos;
    if (p >= d->end)
        return srl_dec_item_tracked(d, pos, NULL); /* raises TruncatedInput */
    uint8_t tag = d->data[p];
    if (tag >= SRL_SHORT_BINARY_LOW && tag < SRL_TRACK) {
        srl_dec_mark(d, p);
        return read_string(d, pos, tag, 0);
    }
    if (tag == SRL_COPY) {
        Py_ssize_t target;
        srl_dec_mark(d, p);
        PyObject *v = copy_string_borrowed(d, p, pos, 0, &target);
        Py_XINCREF(v);
        return v;
    }
    if (tag < SRL_NEG_LOW) {
        srl_dec_mark(d, p);
        *pos = p + 1;
        return PyLong_FromLong(tag);
    }
    if (tag >= SRL_ARRAYREF_LOW && tag < SRL_SHORT_BINARY_LOW) {
        srl_dec_mark(d, p);
        if (srl_dec_enter(d, p) < 0)
            return NULL;
        *pos = p + 1;
        PyObject *v = tag >= SRL_HASHREF_LOW ? read_hash(d, p, pos, tag & 0x0f, 0, NULL)
                                             : read_array(d, p, pos, tag & 0x0f, 0, NULL);
        d->depth--;
        return v;
    }
    switch (tag) {
    case SRL_VARINT:
        srl_dec_mark(d, p);
        *pos = p + 1;
        return read_number(d, p, pos, SRL_K_VARINT);
    case SRL_DOUBLE:
        srl_dec_mark(d, p);
        *pos = p + 1;
        return read_number(d, p, pos, SRL_K_DOUBLE);
    case SRL_UNDEF:
        srl_dec_mark(d, p);
        *pos = p + 1;
        return Py_NewRef(Py_None);
    case SRL_TRUE:
        srl_dec_mark(d, p);
        *pos = p + 1;
        return Py_NewRef(Py_True);
    case SRL_FALSE:
        srl_dec_mark(d, p);
        *pos = p + 1;
        return Py_NewRef(Py_False);
    default:
        return srl_dec_item_tracked(d, pos, NULL);
    }
}

/* The items of an array of n (the caller has opened its nesting level). */
static PyObject *
read_array(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, Py_ssize_t n, int track,
           const SrlTrack *also_track)
{
    if (n > d->end - *pos)
        return srl_raise(srl_state.TruncatedInput, d->end,
                         "array of %zd items cannot fit in the %zd bytes left", n,
                         d->end - *pos);
    if (srl_dec_charge(d, tagpos, 1 + n) < 0) /* the list and its slots, before allocating */
        return NULL;
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    if (track_container(d, tagpos, track, also_track, list) < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = dec_member(d, pos);
        if (item == NULL)
            goto fail;
        PyList_SET_ITEM(list, i, item);
    }
    return list;
fail:
    Py_DECREF(list);
    return NULL;
}

/* The pairs of a hash of n (the caller has opened its nesting level). */
static PyObject *
read_hash(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, Py_ssize_t n, int track,
          const SrlTrack *also_track)
{
    if (n > (d->end - *pos) / 2)
        return srl_raise(srl_state.TruncatedInput, d->end,
                         "hash of %zd pairs cannot fit in the %zd bytes left", n,
                         d->end - *pos);
    if (srl_dec_charge(d, tagpos, 1 + 2 * n) < 0) /* the dict, a key and a value a pair */
        return NULL;
    /* Presized, but never by more than a modest amount on a count we cannot trust yet. */
    PyObject *dict = n > 5 ? _PyDict_NewPresized(n < 65536 ? n : 65536) : PyDict_New();
    if (dict == NULL)
        return NULL;
    if (track_container(d, tagpos, track, also_track, dict) < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t key_pos, p = *pos;
        PyObject *key, *owned_key = NULL;
        if (p < d->end && d->data[p] == SRL_COPY) {
            /* Most keys: a COPY of a key seen before, shared from the cache. */
            srl_dec_mark(d, p);
            key = copy_string_borrowed(d, p, pos, 1, &key_pos);
        } else {
            key = owned_key = srl_dec_key(d, pos, "hash key", &key_pos);
        }
        if (key == NULL)
            goto fail;
        PyObject *value = dec_member(d, pos);
        if (value == NULL) {
            Py_XDECREF(owned_key);
            goto fail;
        }
        int rc = PyDict_SetItem(dict, key, value);
        Py_XDECREF(owned_key);
        Py_DECREF(value);
        if (rc < 0)
            goto fail;
    }
    return dict;
fail:
    Py_DECREF(dict);
    return NULL;
}

/* A fixed-size scalar payload of `n` bytes at *pos. */
/* A number of `kind` (VARINT, ZIGZAG, FLOAT, DOUBLE, LONG_DOUBLE, FLOAT_128) whose tag
 * is at tagpos, *pos just after the tag byte. */
static PyObject *
read_number(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, SrlKind kind)
{
    const uint8_t *s;
    uint64_t u;
    switch (kind) {
    case SRL_K_VARINT:
        if (srl_dec_varint(d, pos, &u, "a VARINT") < 0)
            return NULL;
        return PyLong_FromUnsignedLongLong(u);
    case SRL_K_ZIGZAG:
        if (srl_dec_varint(d, pos, &u, "a ZIGZAG") < 0)
            return NULL;
        return PyLong_FromLongLong(srl_zigzag_decode(u));
    case SRL_K_FLOAT:
        if ((s = srl_dec_take(d, pos, 4, "a FLOAT")) == NULL)
            return NULL;
        return PyFloat_FromDouble(PyFloat_Unpack4((const char *)s, 1));
    case SRL_K_DOUBLE:
        if ((s = srl_dec_take(d, pos, 8, "a DOUBLE")) == NULL)
            return NULL;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        {
            double v;
            memcpy(&v, s, 8); /* IEEE little-endian on the wire and in memory */
            return PyFloat_FromDouble(v);
        }
#else
        return PyFloat_FromDouble(PyFloat_Unpack8((const char *)s, 1));
#endif
    case SRL_K_LONG_DOUBLE:
        if ((s = srl_dec_take(d, pos, 16, "a LONG_DOUBLE")) == NULL)
            return NULL;
        return PyFloat_FromDouble(srl_long_double_to_double(s));
    case SRL_K_FLOAT_128:
        if ((s = srl_dec_take(d, pos, 16, "a FLOAT_128")) == NULL)
            return NULL;
        return PyFloat_FromDouble(srl_float128_to_double(s));
    default:
        return srl_raise(srl_state.UnknownTag, tagpos, "unknown tag 0x%02x", d->data[tagpos]);
    }
}

/* ARRAY or HASH (tag at tagpos, already marked). also_track: the positions of the
 * enclosing REFN|F / WEAKEN|F tags, which stand for the same container; opened: a
 * REFN right before it already opened the nesting level this container shares. */
PyObject *
srl_dec_container(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, const SrlTrack *also_track,
                  int opened)
{
    if (!opened && srl_dec_enter(d, tagpos) < 0)
        return NULL;
    uint8_t t = d->data[tagpos];
    Py_ssize_t n;
    PyObject *v = NULL;
    if (srl_dec_count(d, tagpos, pos, &n) == 0) {
        if ((t & 0x7f) == SRL_ARRAY)
            v = read_array(d, tagpos, pos, n, t & SRL_TRACK, also_track);
        else
            v = read_hash(d, tagpos, pos, n, t & SRL_TRACK, also_track);
    }
    if (!opened)
        d->depth--;
    return v;
}

/* Decode one item at *pos (after any PAD) and advance past it. */
PyObject *
srl_dec_item(Dec *d, Py_ssize_t *pos)
{
    return dec_member(d, pos);
}

/* Decode one item at *pos (after any PAD), registering its value under its own
 * position when it has the F bit and under every position in `outer` (enclosing
 * REFN|F / WEAKEN|F tags). References, containers and objects register before
 * their contents (cycles resolve to the same object), everything else once decoded. */
PyObject *
srl_dec_item_tracked(Dec *d, Py_ssize_t *pos, const SrlTrack *outer)
{
    if (srl_dec_skip_pad(d, pos) < 0)
        return NULL;
    Py_ssize_t tagpos = *pos;
    srl_dec_mark(d, tagpos);
    uint8_t t = d->data[tagpos], tag = t & 0x7f;
    SrlTrack self = {tagpos, outer};
    /* Where the value goes once decoded; NULL when the tag registers it itself. */
    const SrlTrack *track = (t & SRL_TRACK) ? &self : outer;
    PyObject *v = NULL;
    SrlKind kind = srl_tag_kind(tag);

    *pos = tagpos + 1;
    switch (kind) {
    SRL_CASE_STRING:
        *pos = tagpos;
        v = read_string(d, pos, tag, 0);
        break;
    case SRL_K_COPY: {
        Py_ssize_t target;
        v = srl_dec_copy_string(d, tagpos, pos, 0, &target);
        break;
    }
    SRL_CASE_CONTAINER_REF:
        if (srl_dec_enter(d, tagpos) < 0)
            return NULL;
        if (kind == SRL_K_HASHREF)
            v = read_hash(d, tagpos, pos, tag & 0x0f, t & SRL_TRACK, outer);
        else
            v = read_array(d, tagpos, pos, tag & 0x0f, t & SRL_TRACK, outer);
        d->depth--;
        track = NULL; /* registered on creation */
        break;
    case SRL_K_POS:
        v = PyLong_FromLong(tag - SRL_POS_LOW);
        break;
    case SRL_K_NEG:
        v = PyLong_FromLong((long)tag - SRL_NEG_LOW - 16);
        break;
    SRL_CASE_WIDE_NUMBER:
        v = read_number(d, tagpos, pos, kind);
        break;
    case SRL_K_UNDEF:
        v = Py_NewRef(Py_None);
        break;
    case SRL_K_TRUE:
        v = Py_NewRef(Py_True);
        break;
    case SRL_K_FALSE:
        v = Py_NewRef(Py_False);
        break;
    SRL_CASE_CONTAINER:
        v = srl_dec_container(d, tagpos, pos, outer, 0);
        track = NULL;
        break;
    case SRL_K_REFN:
        v = srl_dec_refn(d, tagpos, pos, track);
        track = NULL; /* registration is REFN's business */
        break;
    case SRL_K_REFP:
        v = srl_dec_refp(d, tagpos, pos, track, 0);
        track = NULL;
        break;
    case SRL_K_ALIAS:
        v = srl_dec_alias(d, tagpos, pos);
        break;
    SRL_CASE_OBJECT:
        v = srl_dec_object(d, tagpos, pos, tag, track);
        track = NULL;
        break;
    case SRL_K_WEAKEN:
        /* WEAKEN reads into the same Perl value it weakens: the item after it
         * is registered under the WEAKEN|F position (and enclosing ones) too. */
        if (srl_dec_enter(d, tagpos) < 0)
            return NULL;
        v = srl_dec_item_tracked(d, pos, track);
        d->depth--;
        track = NULL;
        break;
    case SRL_K_REGEXP:
        v = srl_dec_regexp(d, pos);
        break;
    case SRL_K_PAD: /* skipped above */
    case SRL_K_UNSUPPORTED:
        return srl_raise(srl_state.UnknownTag, tagpos, "unsupported tag 0x%02x", t);
    }
    if (v != NULL && srl_dec_track_all(d, track, v) < 0)
        Py_CLEAR(v);
    return v;
}

PyObject *srl_DecodeBudgetExceeded;

PyObject *
srl_decode_body(const uint8_t *data, Py_ssize_t len, Py_ssize_t pos, Py_ssize_t end,
                Py_ssize_t base, int binary, int max_depth)
{
    return srl_decode_body_limited(data, len, pos, end, base, binary, max_depth, -1, NULL);
}

PyObject *
srl_decode_body_limited(const uint8_t *data, Py_ssize_t len, Py_ssize_t pos, Py_ssize_t end,
                        Py_ssize_t base, int binary, int max_depth, Py_ssize_t max_objects,
                        PyObject *projection)
{
    if (srl_check_body_args(len, pos, end, base, binary, max_depth) < 0)
        return NULL;
    if (max_objects < -1) {
        PyErr_Format(PyExc_ValueError, "max_objects must be >= 0 (or -1: no limit), got %zd",
                     max_objects);
        return NULL;
    }
    Dec d;
    memset(&d, 0, sizeof d);
    d.max_objects = max_objects;
    d.objects_left = max_objects < 0 ? PY_SSIZE_T_MAX : max_objects;
    SRL_WALKER_AT(&d, data, pos, end, base, max_depth);
    d.binary = binary;
    srl_offtable_init(&d.tracked, 1);
    srl_offtable_init(&d.strings, 1);
    for (int i = 0; i < SRL_DEC_RECENT; i++)
        d.recent[i].key = -1;
    srl_offtable_init(&d.class_names, 1);
    srl_offtable_init(&d.blessed, 1);
    d.tag_starts = PyMem_Calloc(srl_bits_size(end - pos), 1);
    if (d.tag_starts == NULL)
        return PyErr_NoMemory();

    /* Everything built here is reachable from the result or freed on error: nothing
     * for the cyclic collector to find, so pausing it saves it scanning millions of
     * fresh containers mid-decode. */
    int gc_was_enabled = PyGC_Disable();
    Py_ssize_t p = pos;
    PyObject *value =
        projection == NULL ? srl_dec_item(&d, &p) : srl_dec_projected(&d, &p, projection);
    /* The result tuple too is allocated before the collector resumes: its allocation
     * would otherwise start a young collection over everything just built, as costly
     * as the decode itself. That pass is left to the caller's next allocation, and
     * never happens at all if the result is released first. */
    PyObject *result = value == NULL ? NULL : Py_BuildValue("(Nn)", value, p);
    if (gc_was_enabled)
        PyGC_Enable();

    srl_offtable_free(&d.tracked);
    srl_offtable_free(&d.strings);
    srl_offtable_free(&d.class_names);
    srl_offtable_free(&d.blessed);
    PyMem_Free(d.tag_starts);
    return result;
}
