/* join_bodies: N single-item Sereal bodies -> one body REFN ARRAY N holding the items,
 * without building Python objects (the relocator's sealer: events arrive one per
 * document and are stored many per chunk).
 *
 * Each part goes through the array splitter's walker (split.h) twice:
 *   1. WALK_VALIDATE over the whole part: the decoder's checks (lengths, counts, tag
 *      starts, REFP / ALIAS at tracked items, COPY at strings read earlier, OBJECTV at
 *      class names read earlier, known tags, depth), plus only PADs after the item;
 *      meanwhile every back-reference target is noted in a bitmap.
 *   2. WALK_EMIT into the joined buffer: bytes are copied in runs; at each noted
 *      target the walker records its new offset, and every REFP / ALIAS / COPY /
 *      OBJECTV is written again with the new offset of its target (a canonical
 *      varint: the new offset can be longer or shorter than the old one, later
 *      positions follow the bytes actually written).
 * A part without any back-reference is copied with one memcpy. One walk (its bitmaps
 * and tables) serves every part, cleared in between: parts are small and many.
 *
 * A part is a tuple (data, pos, end, base) as for decode_body, or a whole document as
 * bytes, which must be uncompressed (protocol 1-5, any header suffix): the producers'
 * common case, located here without any Python code per part.
 *
 * Runs of whole documents are joined with the GIL released (add_quietly): the walk
 * raises nothing and allocates nothing then (srl_walk_quiet); a part that would need
 * either is dropped from the output and joined again with the GIL, which allocates or
 * raises exactly as before. Parts given as tuples are joined with the GIL held.
 *
 * Depth: the joined body's REFN ARRAY takes one level, so a part may nest at most
 * max_depth - 1 levels (counted as the decoder counts them): whatever join_bodies
 * returns decodes with max_depth. */
#include "join.h"

#include "header.h"
#include "split.h"

#include <string.h>

/* Re-raise the pending SerealError as the same class with "part i: " in front of its
 * message, the same offset, and an `index` attribute. Other errors pass unchanged. */
static void
name_part(Py_ssize_t index)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value == NULL || !PyObject_HasAttrString(value, "offset") ||
        !PyObject_HasAttrString(value, "message")) {
        PyErr_Restore(type, value, tb);
        return;
    }
    PyObject *msg = PyObject_GetAttrString(value, "message");
    PyObject *off = PyObject_GetAttrString(value, "offset");
    PyObject *text = msg == NULL ? NULL : PyUnicode_FromFormat("part %zd: %S", index, msg);
    PyObject *exc = text == NULL || off == NULL
                        ? NULL
                        : PyObject_CallFunctionObjArgs(type, text, off, NULL);
    PyObject *idx = exc == NULL ? NULL : PyLong_FromSsize_t(index);
    if (idx != NULL && PyObject_SetAttrString(exc, "index", idx) == 0) {
        PyErr_SetObject(type, exc);
    } else if (!PyErr_Occurred()) {
        PyErr_Restore(type, value, tb);
        type = value = tb = NULL;
    }
    Py_XDECREF(idx);
    Py_XDECREF(exc);
    Py_XDECREF(text);
    Py_XDECREF(off);
    Py_XDECREF(msg);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/* Scratch shared by the parts of one join. */
typedef struct {
    Walk w;
    Py_ssize_t bitmap_cap; /* bytes allocated for w.tag_starts and w.targets */
} Joiner;

static int
joiner_reset(Joiner *j, const uint8_t *data, Py_ssize_t pos, Py_ssize_t end,
             Py_ssize_t base, int max_depth)
{
    Walk *w = &j->w;
    if (base < -(PY_SSIZE_T_MAX / 4) || base > PY_SSIZE_T_MAX / 4) {
        if (!srl_walk_quiet)
            PyErr_SetString(PyExc_ValueError, "base out of range");
        return -1;
    }
    Py_ssize_t need = (end - pos) / 8 + 1;
    /* Without the GIL: no allocation, and no table big enough to be freed on clear. */
    if (srl_walk_quiet && (need > j->bitmap_cap || w->tracked.bits > 12 ||
                           w->class_names.bits > 12 || w->new_offset.bits > 12))
        return -1;
    if (need > j->bitmap_cap) {
        PyMem_Free(w->tag_starts);
        PyMem_Free(w->targets);
        w->targets = NULL;
        Py_ssize_t cap = need < 256 ? 256 : need;
        w->tag_starts = PyMem_Malloc((size_t)cap);
        w->targets = w->tag_starts == NULL ? NULL : PyMem_Malloc((size_t)cap);
        if (w->targets == NULL) {
            j->bitmap_cap = 0;
            PyErr_NoMemory();
            return -1;
        }
        j->bitmap_cap = cap;
    }
    memset(w->tag_starts, 0, (size_t)need);
    memset(w->targets, 0, (size_t)need);
    srl_offtable_clear(&w->tracked);
    srl_offtable_clear(&w->class_names);
    srl_offtable_clear(&w->new_offset);
    w->data = data;
    w->start = w->range_start = pos;
    w->end = end;
    w->base = base;
    w->mode = WALK_VALIDATE;
    w->depth = 0;
    w->max_depth = max_depth - 1;
    w->refn_child = -1;
    w->run_from = w->run_to = -1;
    return 0;
}

/* Validate one part and append its item to `out`. */
static int
join_part(Joiner *j, SrlBuf *out, const uint8_t *data, Py_ssize_t pos, Py_ssize_t end,
          Py_ssize_t base, int max_depth)
{
    Walk *w = &j->w;
    if (joiner_reset(j, data, pos, end, base, max_depth) < 0)
        return -1;
    Py_ssize_t p = pos;
    if (srl_walk_item(w, &p) < 0)
        return -1;
    Py_ssize_t item_end = p;
    while (p < end && (data[p] & 0x7f) == SRL_PAD)
        p++;
    if (p < end)
        return srl_walk_fail(srl_state.InvalidStructure, p, "trailing bytes after the body");
    /* No back-references: nothing moves relative to anything, copy the bytes. */
    int any = 0;
    for (Py_ssize_t i = 0; i <= (end - pos) / 8 && !any; i++)
        any = w->targets[i] != 0;
    if (!any) {
        Py_ssize_t from = pos;
        while ((data[from] & 0x7f) == SRL_PAD)
            from++;
        if (srl_walk_quiet && out->cap - out->len < item_end - from)
            return -1;
        return srl_buf_put_bytes(out, data + from, item_end - from);
    }
    /* Emit straight into `out`: the walker's offsets are its output length + 1. */
    w->mode = WALK_EMIT;
    w->refn_child = -1;
    w->depth = 0;
    w->out = *out;
    p = pos;
    int rc = srl_walk_item(w, &p) < 0 || srl_walk_flush(w) < 0 ? -1 : 0;
    *out = w->out;
    w->out.data = NULL;
    return rc;
}

/* BadHeader from sereal_codec.errors (looked up on this error path only). */
static int
bad_header(const char *msg)
{
    if (srl_walk_quiet)
        return -1;
    PyObject *errors = PyImport_ImportModule("sereal_codec.errors");
    PyObject *cls = errors == NULL ? NULL : PyObject_GetAttrString(errors, "BadHeader");
    Py_XDECREF(errors);
    if (cls != NULL) {
        srl_raise(cls, 0, "%s", msg);
        Py_DECREF(cls);
    }
    return -1;
}

/* The body of an uncompressed document: pos and base as open_body gives them. */
static int
document_body(const uint8_t *d, Py_ssize_t n, Py_ssize_t *pos, Py_ssize_t *base)
{
    SrlHeader h;
    switch (srl_header_start(d, n, &h)) {
    case SRL_HDR_SHORT:
        return srl_walk_fail(srl_state.TruncatedInput, n, "input ends inside the header");
    case SRL_HDR_BAD_MAGIC:
        return bad_header("not a Sereal document (bad magic string)");
    case SRL_HDR_BAD_VERSION:
        return bad_header("bad protocol version for its magic string");
    }
    if (h.type != SRL_TYPE_RAW)
        return bad_header("compressed document: give join_bodies its opened body");
    switch (srl_header_suffix(d, n, &h)) {
    case SRL_HDR_SUFFIX_TRUNCATED:
        return srl_walk_fail(srl_state.TruncatedInput, n, "input ends inside the header suffix");
    case SRL_HDR_SUFFIX_BAD:
        return srl_walk_fail(srl_state.InvalidStructure, 5, "bad header suffix length");
    }
    *pos = h.body;
    *base = srl_header_base(&h);
    return 0;
}

/* Join part i into out; -1 with the error set (not yet named). */
static int
add_part(Joiner *j, SrlBuf *out, PyObject *part, Py_ssize_t i, int max_depth)
{
    if (PyBytes_Check(part)) {
        const uint8_t *d = (const uint8_t *)PyBytes_AS_STRING(part);
        Py_ssize_t n = PyBytes_GET_SIZE(part), pos = 0, base = 0;
        if (document_body(d, n, &pos, &base) < 0)
            return -1;
        return join_part(j, out, d, pos, n, base, max_depth);
    }
    if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 4) {
        PyErr_Format(PyExc_TypeError, "part %zd is neither bytes nor (data, pos, end, base)", i);
        return -2;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(PyTuple_GET_ITEM(part, 1));
    Py_ssize_t end = PyLong_AsSsize_t(PyTuple_GET_ITEM(part, 2));
    Py_ssize_t base = PyLong_AsSsize_t(PyTuple_GET_ITEM(part, 3));
    if (PyErr_Occurred())
        return -2;
    Py_buffer view;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(part, 0), &view, PyBUF_SIMPLE) < 0)
        return -2;
    int rc;
    if (pos < 0 || end < pos || end > view.len) {
        PyErr_Format(PyExc_ValueError, "part %zd: need 0 <= pos <= end <= len(data)", i);
        rc = -2;
    } else {
        rc = join_part(j, out, view.buf, pos, end, base, max_depth);
    }
    PyBuffer_Release(&view);
    return rc;
}

/* Join parts from i on without the GIL while they are whole documents (bytes) and
 * need nothing from Python: no allocation (the bitmaps and the output buffer are
 * sized first, with the GIL), no error. Returns the index of the first part not
 * joined (n: all); its partial output is dropped, the caller redoes it with the GIL. */
static Py_ssize_t
add_quietly(Joiner *j, SrlBuf *out, PyObject **items, Py_ssize_t i, Py_ssize_t n,
            int max_depth)
{
    Py_ssize_t stop = i, longest = 0, total = 0;
    while (stop < n && PyBytes_CheckExact(items[stop])) {
        Py_ssize_t len = PyBytes_GET_SIZE(items[stop]);
        longest = len > longest ? len : longest;
        total += len;
        stop++;
    }
    if (stop == i || joiner_reset(j, (const uint8_t *)"", 0, longest, 0, max_depth) < 0 ||
        srl_buf_reserve(out, total + total / 8 + 64) < 0) {
        PyErr_Clear(); /* the part is done again with the GIL, which raises if need be */
        return i;
    }
    Py_BEGIN_ALLOW_THREADS
    srl_walk_quiet = 1;
    for (; i < stop; i++) {
        const uint8_t *d = (const uint8_t *)PyBytes_AS_STRING(items[i]);
        Py_ssize_t len = PyBytes_GET_SIZE(items[i]), pos = 0, base = 0, mark = out->len;
        if (document_body(d, len, &pos, &base) < 0 ||
            join_part(j, out, d, pos, len, base, max_depth) < 0) {
            out->len = mark;
            break;
        }
    }
    srl_walk_quiet = 0;
    Py_END_ALLOW_THREADS
    return i;
}

/* The output buffer is kept from one join to the next (up to SCRATCH_KEEP bytes): a
 * fresh multi-megabyte buffer per chunk costs a page fault per 4 KB, about as much as
 * the walk. Used under the GIL; a nested join (a buffer exporter calling back) takes a
 * buffer of its own. */
#define SCRATCH_KEEP (16 * 1024 * 1024)
static SrlBuf scratch;
static int scratch_busy;

static int
out_acquire(SrlBuf *out, Py_ssize_t total, int *from_scratch)
{
    *from_scratch = 0;
    if (!scratch_busy && scratch.data != NULL) {
        *out = scratch;
        out->len = 0;
        scratch.data = NULL;
        scratch_busy = *from_scratch = 1;
        return srl_buf_reserve(out, total);
    }
    if (!scratch_busy)
        scratch_busy = *from_scratch = 1;
    return srl_buf_init(out, total);
}

static void
out_release(SrlBuf *out, int from_scratch)
{
    if (from_scratch)
        scratch_busy = 0;
    if (out->data == NULL)
        return;
    if (from_scratch && out->cap <= SCRATCH_KEEP)
        scratch = *out;
    else
        srl_buf_free(out);
    out->data = NULL;
}

PyObject *
srl_join_bodies(PyObject *parts, int max_depth)
{
    if (max_depth < 1 || max_depth > SRL_MAX_DEPTH_CAP) {
        PyErr_Format(PyExc_ValueError, "max_depth must be 1 to %d, got %d", SRL_MAX_DEPTH_CAP,
                     max_depth);
        return NULL;
    }
    /* A tuple: the parts stay alive (and in place) while the GIL is released. */
    PyObject *seq = PySequence_Tuple(parts);
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *result = NULL;
    SrlBuf out;
    out.data = NULL;
    Joiner j;
    j.bitmap_cap = 0;
    int ok = srl_walk_init(&j.w, (const uint8_t *)"", 0, 0, 0, WALK_SKIP) == 0;
    Py_ssize_t total = 16;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = items[i];
        if (PyBytes_Check(t))
            total += PyBytes_GET_SIZE(t);
        else if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 4 &&
                 PyBytes_Check(PyTuple_GET_ITEM(t, 0)))
            total += PyBytes_GET_SIZE(PyTuple_GET_ITEM(t, 0));
    }
    int from_scratch = 0;
    if (!ok || out_acquire(&out, total, &from_scratch) < 0 ||
        srl_buf_put_byte(&out, SRL_REFN) < 0 ||
        srl_buf_put_tag_varint(&out, SRL_ARRAY, (uint64_t)n) < 0)
        goto done;
    Py_ssize_t i = 0;
    while (i < n) {
        i = add_quietly(&j, &out, items, i, n, max_depth);
        if (i == n)
            break;
        /* part i: not a whole document, or it needs an allocation or an error raised */
        int rc = add_part(&j, &out, items[i], i, max_depth);
        if (rc < 0) {
            if (rc == -1)
                name_part(i);
            goto done;
        }
        i++;
    }
    result = PyBytes_FromStringAndSize((const char *)out.data, out.len);
done:
    out_release(&out, from_scratch);
    srl_walk_free(&j.w);
    Py_DECREF(seq);
    return result;
}

PyObject *
srl_py_join_bodies(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"parts", "max_depth", NULL};
    PyObject *parts;
    int max_depth = 512;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|i:join_bodies", kwlist, &parts,
                                     &max_depth))
        return NULL;
    return srl_join_bodies(parts, max_depth);
}
