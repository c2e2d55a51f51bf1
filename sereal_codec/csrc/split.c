/* Array splitter: cut the body of a Sereal array (REFN ARRAY n, ARRAY n or
 * ARRAYREF_n) at element boundaries without building Python objects.
 *
 * array_layout walks and validates the whole body and returns where each element
 * starts. extract_array writes a standalone body holding a range of elements, every
 * back-reference rewritten for its new home:
 *   - targets inside the range move with their tags (offsets follow a map built
 *     while the range is copied, tag by tag, since an inlined literal changes sizes);
 *   - a COPY of a string before the range becomes that literal the first time and a
 *     COPY of the new literal afterwards;
 *   - an OBJECTV naming a class before the range becomes OBJECT + the class name
 *     literal the first time, an OBJECTV of the new literal afterwards;
 *   - a REFP / ALIAS to a tracked item before the range cannot be expressed in a
 *     standalone body: InvalidStructure naming the element. Events never share
 *     references across elements in practice (Perl's encoder only tracks values
 *     reachable twice, and separate events do not share values), so cuts never meet it.
 * extract_array assumes a body that array_layout accepted (it re-walks only what it
 * needs); on any other input it still never reads out of bounds, and the result is
 * checked again by whoever decodes it. Walks are bounded by SRL_MAX_DEPTH_CAP. */
#include "split.h"

#include <string.h>

int
srl_walk_init(Walk *w, const uint8_t *data, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base, int mode)
{
    memset(w, 0, sizeof *w);
    w->data = data;
    w->start = pos;
    w->end = end;
    w->base = base;
    w->mode = mode;
    w->run_from = w->run_to = -1;
    w->refn_child = -1;
    w->max_depth = SRL_MAX_DEPTH_CAP;
    srl_offtable_init(&w->tracked, 0);
    srl_offtable_init(&w->class_names, 0);
    srl_offtable_init(&w->new_offset, 0);
    srl_offtable_init(&w->copy_literal, 0);
    srl_offtable_init(&w->class_literal, 0);
    if (base < -(PY_SSIZE_T_MAX / 4) || base > PY_SSIZE_T_MAX / 4) {
        PyErr_SetString(PyExc_ValueError, "base out of range");
        return -1;
    }
    if (mode == WALK_VALIDATE) {
        w->tag_starts = PyMem_Calloc(srl_bits_size(end - pos), 1);
        if (w->tag_starts == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

void
srl_walk_free(Walk *w)
{
    PyMem_Free(w->tag_starts);
    PyMem_Free(w->targets);
    srl_offtable_free(&w->tracked);
    srl_offtable_free(&w->class_names);
    srl_offtable_free(&w->new_offset);
    srl_offtable_free(&w->copy_literal);
    srl_offtable_free(&w->class_literal);
    if (w->out.data != NULL)
        srl_buf_free(&w->out);
}

/* The array at the top of the body: its element count, *pos after its header. */
static int
array_header(Walk *w, Py_ssize_t *pos, uint64_t *count)
{
    if (skip_pad(w, pos) < 0)
        return -1;
    Py_ssize_t tagpos = *pos;
    uint8_t t = w->data[tagpos], tag = t & 0x7f;
    mark(w, tagpos);
    if ((t & SRL_TRACK) && w->mode == WALK_VALIDATE && srl_offtable_put(&w->tracked, tagpos, 1) < 0)
        return -1;
    if (tag >= SRL_ARRAYREF_LOW && tag < SRL_HASHREF_LOW) {
        *count = tag & 0x0f;
        *pos = tagpos + 1;
    } else {
        Py_ssize_t p = tagpos;
        if (tag == SRL_REFN) {
            p = tagpos + 1;
            if (skip_pad(w, &p) < 0)
                return -1;
            t = w->data[p];
            mark(w, p);
            if ((t & SRL_TRACK) && w->mode == WALK_VALIDATE && srl_offtable_put(&w->tracked, p, 1) < 0)
                return -1;
        }
        if ((t & 0x7f) != SRL_ARRAY)
            return srl_walk_fail(srl_state.InvalidStructure, p, "the body is not an array");
        p++;
        if (srl_walk_varint(w, &p, count) < 0)
            return -1;
        *pos = p;
    }
    if (*count > (uint64_t)(w->end - *pos))
        return srl_walk_fail(srl_state.TruncatedInput, w->end, "array count exceeds the bytes left");
    return 0;
}

PyObject *
srl_array_layout(const uint8_t *data, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base)
{
    Walk w;
    PyObject *starts = NULL;
    uint64_t n;
    Py_ssize_t p = pos;
    if (srl_walk_init(&w, data, pos, end, base, WALK_VALIDATE) < 0 || array_header(&w, &p, &n) < 0)
        goto done;
    if ((starts = PyList_New((Py_ssize_t)n + 1)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i <= (Py_ssize_t)n; i++) {
        PyObject *at = PyLong_FromSsize_t(p);
        if (at == NULL)
            goto error;
        PyList_SET_ITEM(starts, i, at);
        if (i < (Py_ssize_t)n && srl_walk_item(&w, &p) < 0)
            goto error;
    }
    while (p < end && (data[p] & 0x7f) == SRL_PAD)
        p++;
    if (p < end) {
        srl_walk_fail(srl_state.InvalidStructure, p, "trailing bytes after the array");
        goto error;
    }
    goto done;
error:
    Py_CLEAR(starts);
done:
    srl_walk_free(&w);
    return starts;
}

/* Skip `count` items (the elements before the range). Only where they end matters,
 * so a count of items still to read replaces the recursive walk: no stack, a few
 * instructions per tag. Every pending item needs at least one byte, which bounds the
 * count and catches truncation early. */
static int
skip_items(Walk *w, Py_ssize_t *pos, uint64_t count)
{
    const uint8_t *d = w->data;
    Py_ssize_t p = *pos, end = w->end;
    uint64_t pending = count, n;
    while (pending > 0) {
        if (p > end || pending > (uint64_t)(end - p))
            return srl_walk_fail(srl_state.TruncatedInput, end, "input ends inside an element");
        uint8_t tag = d[p++] & 0x7f;
        uint32_t shape = srl_tag_shapes[tag];
        switch (srl_shape_payload(shape)) {
        case SRL_P_PAD:
            continue;
        case SRL_P_NONE:
            break;
        case SRL_P_INLINE:
            p += tag & 0x1f;
            break;
        case SRL_P_NIBBLE:
            pending += (uint64_t)srl_shape_per(shape) * (tag & 0x0f);
            break;
        case SRL_P_FIXED:
            p += srl_shape_size(shape);
            break;
        case SRL_P_VARINT:
            if (srl_walk_varint(w, &p, &n) < 0)
                return -1;
            break;
        case SRL_P_LEN:
            if (srl_walk_varint(w, &p, &n) < 0)
                return -1;
            if (n > (uint64_t)(end - p))
                return srl_walk_fail(srl_state.TruncatedInput, end, "string runs past the end");
            p += (Py_ssize_t)n;
            break;
        case SRL_P_COUNT:
            if (srl_walk_varint(w, &p, &n) < 0)
                return -1;
            if (n > (uint64_t)(end - p))
                return srl_walk_fail(srl_state.TruncatedInput, end, "count exceeds the bytes left");
            pending += (uint64_t)srl_shape_per(shape) * n;
            break;
        default: /* SRL_P_BAD */
            return srl_walk_fail(srl_state.UnknownTag, p - 1, "unknown or unsupported tag");
        }
        /* the item read, and what it holds after its payload */
        pending += (uint64_t)srl_shape_items(shape) - 1;
    }
    if (p > end)
        return srl_walk_fail(srl_state.TruncatedInput, end, "input ends inside an element");
    *pos = p;
    return 0;
}

PyObject *
srl_extract_array(const uint8_t *data, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base,
                  Py_ssize_t first, Py_ssize_t stop)
{
    Walk w;
    PyObject *result = NULL;
    uint64_t n;
    Py_ssize_t p = pos;
    if (srl_walk_init(&w, data, pos, end, base, WALK_SKIP) < 0 || array_header(&w, &p, &n) < 0)
        goto done;
    if (first < 0 || stop < first || (uint64_t)stop > n) {
        PyErr_Format(PyExc_ValueError, "need 0 <= first <= stop <= %llu, got %zd, %zd",
                     (unsigned long long)n, first, stop);
        goto done;
    }
    if (skip_items(&w, &p, (uint64_t)first) < 0)
        goto done;
    /* Two passes over the range: note the back-reference targets, then copy. */
    w.range_start = p;
    w.targets = PyMem_Calloc(srl_bits_size(end - p), 1);
    if (w.targets == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    w.mode = WALK_MARK;
    Py_ssize_t q = p;
    for (Py_ssize_t i = first; i < stop; i++)
        if (srl_walk_item(&w, &q) < 0)
            goto done;
    if (srl_buf_init(&w.out, q - p + 16) < 0)
        goto done;
    w.mode = WALK_EMIT;
    if (srl_buf_put_byte(&w.out, SRL_REFN) < 0 ||
        srl_buf_put_tag_varint(&w.out, SRL_ARRAY, (uint64_t)(stop - first)) < 0)
        goto done;
    for (Py_ssize_t i = first; i < stop; i++) {
        w.element = i;
        if (srl_walk_item(&w, &p) < 0)
            goto done;
    }
    if (srl_walk_flush(&w) < 0)
        goto done;
    result = PyBytes_FromStringAndSize((const char *)w.out.data, w.out.len);
done:
    srl_walk_free(&w);
    return result;
}
