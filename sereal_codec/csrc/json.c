/* JSON transcoder (see json.h): the entry point, the tag dispatch and containers
 * (scalars, strings and COPY are in json_scalar.c). Mirrors decode.c check for check (same errors, same
 * offsets, same order), writing JSON where decode.c builds Python objects. */
#include "json.h"

#include <string.h>

Py_ssize_t
srl_jx_new_span(Jx *j, uint8_t type, uint8_t kind, Py_ssize_t a, Py_ssize_t b)
{
    if (j->nspans == j->spans_cap) {
        Py_ssize_t cap = j->spans_cap ? 2 * j->spans_cap : 64;
        JSpan *spans = PyMem_Realloc(j->spans, (size_t)cap * sizeof *spans);
        if (spans == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        j->spans = spans;
        j->spans_cap = cap;
    }
    JSpan *s = &j->spans[j->nspans];
    s->type = type;
    s->kind = kind;
    s->a = a;
    s->b = b;
    return j->nspans++;
}

int
srl_jx_track_all(Jx *j, const SrlTrack *track, Py_ssize_t span)
{
    for (; track != NULL; track = track->next)
        if (srl_offtable_put(&j->tracked, track->pos, (intptr_t)span) < 0)
            return -1;
    return 0;
}

/* Stop the walk for a reason JSON alone has (no exception set: the entry point
 * first lets the decoder look for an error it would report instead). */
int
srl_jx_map_error(Jx *j, PyObject *cls, const char *msg)
{
    j->map_error_cls = cls;
    j->map_error_msg = msg;
    return -1;
}

int
srl_jx_check_cap(Jx *j)
{
    if (j->out.len > (j->candidates > 0 ? j->cap + j->slack : j->cap))
        return srl_jx_check_cap_exact(j);
    return 0;
}

int
srl_jx_check_cap_exact(Jx *j)
{
    if (j->out.len > j->cap)
        return srl_jx_map_error(j, srl_state.SizeLimitExceeded,
                                "JSON text exceeds the output limit (shared values repeated)");
    return 0;
}

/* Register a container (unfinished) before its contents. Returns the span or -1
 * for none needed; -2 on error. */
static Py_ssize_t
open_span(Jx *j, Py_ssize_t tagpos, int track, const SrlTrack *also)
{
    if (!track && also == NULL)
        return -1;
    Py_ssize_t span = srl_jx_new_span(j, JD_UNFINISHED, JK_OTHER, 0, 0);
    if (span < 0)
        return -2;
    if ((track && srl_offtable_put(&j->tracked, tagpos, (intptr_t)span) < 0) ||
        srl_jx_track_all(j, also, span) < 0)
        return -2;
    return span;
}

/* Close a container's text with `closer` (none: 0): its range is the result, and the
 * value of its span when one was registered. */
static inline int
close_span(Jx *j, Py_ssize_t start, Py_ssize_t span, uint8_t closer, JSpan *res)
{
    if (closer && srl_buf_put_byte(&j->out, closer) < 0)
        return -1;
    srl_jx_range(res, JK_OTHER, start, j->out.len);
    if (span >= 0)
        j->spans[span] = *res;
    return 0;
}

static int
write_array(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, Py_ssize_t n, int track,
            const SrlTrack *also, int top, JSpan *res)
{
    if (n > j->end - *pos) {
        srl_raise(srl_state.TruncatedInput, j->end,
                  "array of %zd items cannot fit in the %zd bytes left", n, j->end - *pos);
        return -1;
    }
    Py_ssize_t start = j->out.len, span = open_span(j, tagpos, track, also);
    if (span == -2)
        return -1;
    JSpan item;
    if (top) { /* the lines: elements back to back, their bounds noted */
        j->bounds = PyMem_Malloc((size_t)(n + 1) * sizeof *j->bounds);
        if (j->bounds == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        j->nbounds = n + 1;
        for (Py_ssize_t i = 0; i < n; i++) {
            j->bounds[i] = j->out.len;
            if (srl_jx_item(j, pos, NULL, &item) < 0)
                return -1;
        }
        j->bounds[n] = j->out.len;
    } else {
        if (srl_buf_put_byte(&j->out, '[') < 0)
            return -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (i > 0 && srl_buf_put_byte(&j->out, ',') < 0)
                return -1;
            if (srl_jx_item(j, pos, NULL, &item) < 0)
                return -1;
        }
    }
    return close_span(j, start, span, top ? 0 : ']', res);
}

static int
write_hash(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, Py_ssize_t n, int track,
           const SrlTrack *also, JSpan *res)
{
    if (n > (j->end - *pos) / 2) {
        srl_raise(srl_state.TruncatedInput, j->end,
                  "hash of %zd pairs cannot fit in the %zd bytes left", n, j->end - *pos);
        return -1;
    }
    Py_ssize_t start = j->out.len, span = open_span(j, tagpos, track, also);
    if (span == -2)
        return -1;
    if (srl_buf_put_byte(&j->out, '{') < 0)
        return -1;
    JSpan item;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t key_pos, p = *pos;
        if (i > 0 && srl_buf_put_byte(&j->out, ',') < 0)
            return -1;
        int rc;
        if (p < j->end && j->data[p] == SRL_COPY) {
            srl_jx_mark(j, p); /* most keys: a COPY of a key seen before */
            rc = srl_jx_copy(j, p, pos, 1, &key_pos, NULL);
        } else {
            rc = srl_jx_key(j, pos, "hash key", 1, &key_pos);
        }
        if (rc < 0 || srl_buf_put_byte(&j->out, ':') < 0 || srl_jx_item(j, pos, NULL, &item) < 0)
            return -1;
    }
    return close_span(j, start, span, '}', res);
}

int
srl_jx_container(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, const SrlTrack *also, int opened,
                 int top, JSpan *res)
{
    if (!opened && srl_jx_enter(j, tagpos) < 0)
        return -1;
    uint8_t t = j->data[tagpos];
    Py_ssize_t p = tagpos + 1;
    uint64_t n;
    int rc = -1;
    if (srl_jx_varint(j, &p, &n, "a count") == 0) {
        if (n > (uint64_t)(j->end - p)) {
            srl_raise(srl_state.TruncatedInput, j->end, "count %llu exceeds the %zd bytes left",
                      (unsigned long long)n, j->end - p);
        } else {
            *pos = p;
            if ((t & 0x7f) == SRL_ARRAY)
                rc = write_array(j, tagpos, pos, (Py_ssize_t)n, t & SRL_TRACK, also, top, res);
            else
                rc = write_hash(j, tagpos, pos, (Py_ssize_t)n, t & SRL_TRACK, also, res);
        }
    }
    if (!opened)
        j->depth--;
    return rc;
}

static inline void
source(JSpan *res, Py_ssize_t pos, int truth)
{
    res->type = JD_SOURCE;
    res->kind = truth ? JK_TRUE : JK_FALSE;
    res->a = pos;
    res->b = 0;
}

static inline int
constant(Jx *j, JSpan *res, int which, int truth)
{
    res->type = JD_CONST;
    res->kind = truth ? JK_TRUE : JK_FALSE;
    res->a = which;
    res->b = 0;
    return srl_buf_put_bytes(&j->out, srl_jx_constants[which], which == 2 ? 5 : 4);
}

/* A string item at tagpos (*pos just past the tag byte), as a value. */
static inline int
string_item(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t tag, JSpan *res)
{
    const uint8_t *s;
    Py_ssize_t n;
    int rc = srl_jx_string_payload(j, tagpos, &s, &n, pos);
    if (rc == 0) {
        rc = srl_jx_put_string_json(j, &j->out, tag, s, n, 0);
        source(res, tagpos, !(n == 0 || (n == 1 && s[0] == '0')));
    }
    return rc;
}

/* A COPY item at tagpos, as a value. */
static inline int
copy_item(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, JSpan *res)
{
    Py_ssize_t target;
    int truth = 0;
    int rc = srl_jx_copy(j, tagpos, pos, 0, &target, &truth);
    if (rc == 0)
        source(res, target, truth);
    return rc;
}

/* A number item at tagpos (*pos just past the tag byte). */
static inline int
number_item(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t tag, JSpan *res)
{
    int truth = 0;
    int rc = srl_jx_write_number(j, tagpos, pos, tag, &truth);
    source(res, tagpos, truth);
    return rc;
}

/* One item at *pos (after PADs), as decode.c's srl_dec_item_tracked: registered
 * under its own position when it has the F bit and under every position in `outer`;
 * references, containers and objects before their contents, the rest once written. */
int
srl_jx_item(Jx *j, Py_ssize_t *pos, const SrlTrack *outer, JSpan *res)
{
    int top = j->top;
    j->top = 0;
    if (srl_jx_skip_pad(j, pos) < 0)
        return -1;
    Py_ssize_t tagpos = *pos;
    srl_jx_mark(j, tagpos);
    uint8_t t = j->data[tagpos], tag = t & 0x7f;
    SrlTrack self = {tagpos, outer};
    const SrlTrack *track = (t & SRL_TRACK) ? &self : outer;
    int rc = -1;
    SrlKind kind = srl_tag_kind(tag);

    *pos = tagpos + 1;
    /* The commonest values (short strings, COPYs, small integers) by comparisons
     * before the kind's jump: every item of the body comes through here, and the
     * indirect jump alone mispredicts more than this chain (callgrind --branch-sim). */
    if (tag >= SRL_SHORT_BINARY_LOW)
        rc = string_item(j, tagpos, pos, tag, res);
    else if (tag == SRL_COPY)
        rc = copy_item(j, tagpos, pos, res);
    else if (tag < SRL_VARINT)
        rc = number_item(j, tagpos, pos, tag, res);
    else {
        switch (kind) {
        SRL_CASE_STRING:
            rc = string_item(j, tagpos, pos, tag, res);
            break;
        case SRL_K_COPY:
            rc = copy_item(j, tagpos, pos, res);
            break;
        SRL_CASE_CONTAINER_REF:
            if (srl_jx_enter(j, tagpos) < 0)
                return -1;
            if (kind == SRL_K_HASHREF)
                rc = write_hash(j, tagpos, pos, tag & 0x0f, t & SRL_TRACK, outer, res);
            else
                rc = write_array(j, tagpos, pos, tag & 0x0f, t & SRL_TRACK, outer, top, res);
            j->depth--;
            track = NULL; /* registered on creation */
            break;
        SRL_CASE_NUMBER:
            rc = number_item(j, tagpos, pos, tag, res);
            break;
        case SRL_K_UNDEF:
            rc = constant(j, res, 0, 0);
            break;
        case SRL_K_TRUE:
            rc = constant(j, res, 1, 1);
            break;
        case SRL_K_FALSE:
            rc = constant(j, res, 2, 0);
            break;
        SRL_CASE_CONTAINER:
            rc = srl_jx_container(j, tagpos, pos, outer, 0, top, res);
            track = NULL;
            break;
        case SRL_K_REFN:
            rc = srl_jx_refn(j, tagpos, pos, track, top, res);
            track = NULL;
            break;
        case SRL_K_REFP:
            rc = srl_jx_refp(j, tagpos, pos, track, 0, res);
            track = NULL;
            break;
        case SRL_K_ALIAS:
            rc = srl_jx_alias(j, tagpos, pos, res);
            break;
        SRL_CASE_OBJECT:
            rc = srl_jx_object(j, tagpos, pos, tag, track, res);
            track = NULL;
            break;
        case SRL_K_WEAKEN:
            if (srl_jx_enter(j, tagpos) < 0)
                return -1;
            j->top = top; /* WEAKEN of the top-level array is that array */
            rc = srl_jx_item(j, pos, track, res);
            j->depth--;
            track = NULL;
            break;
        case SRL_K_REGEXP: {
            Py_ssize_t start = j->out.len;
            rc = srl_jx_regexp(j, pos);
            srl_jx_range(res, JK_OTHER, start, j->out.len);
            break;
        }
        case SRL_K_PAD: /* skipped above */
        case SRL_K_UNSUPPORTED:
            srl_raise(srl_state.UnknownTag, tagpos, "unsupported tag 0x%02x", t);
            return -1;
        }
    }
    if (rc == 0 && track != NULL) {
        Py_ssize_t span = srl_jx_new_span(j, res->type, res->kind, res->a, res->b);
        if (span < 0 || srl_jx_track_all(j, track, span) < 0)
            return -1;
    }
    return rc;
}

static void
jx_free(Jx *j)
{
    srl_offtable_free(&j->tracked);
    srl_offtable_free(&j->blessed);
    srl_offtable_free(&j->class_names);
    srl_offtable_free(&j->strings);
    srl_buf_free(&j->texts);
    srl_buf_free(&j->out);
    PyMem_Free(j->spans);
    PyMem_Free(j->strs);
    PyMem_Free(j->bounds);
    PyMem_Free(j->tag_starts);
}

/* The result: a list of bytes, or (bytes, int64 offsets as bytes) when packed. */
static PyObject *
lines_result(Jx *j, int packed)
{
    Py_ssize_t n = j->nbounds - 1;
    if (packed) {
        PyObject *offsets = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(j->nbounds * 8));
        if (offsets == NULL)
            return NULL;
        int64_t *o = (int64_t *)PyBytes_AS_STRING(offsets);
        for (Py_ssize_t i = 0; i <= n; i++)
            o[i] = (int64_t)j->bounds[i];
        return Py_BuildValue("(y#N)", (const char *)j->out.data, j->bounds[n], offsets);
    }
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *line = PyBytes_FromStringAndSize((const char *)j->out.data + j->bounds[i],
                                                   j->bounds[i + 1] - j->bounds[i]);
        if (line == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, line);
    }
    return list;
}

static int
check_trailing(const uint8_t *data, Py_ssize_t p, Py_ssize_t end)
{
    for (; p < end; p++) {
        if ((data[p] & 0x7f) != SRL_PAD) {
            srl_raise(srl_state.InvalidStructure, p, "trailing bytes after the body");
            return -1;
        }
    }
    return 0;
}

PyObject *
srl_array_to_json(const uint8_t *data, Py_ssize_t len, Py_ssize_t pos, Py_ssize_t end,
                  Py_ssize_t base, int binary, int max_depth, int packed)
{
    if (srl_check_body_args(len, pos, end, base, binary, max_depth) < 0)
        return NULL;
    Jx j;
    memset(&j, 0, sizeof j);
    SRL_WALKER_AT(&j, data, pos, end, base, max_depth);
    j.binary = binary;
    j.cap = srl_json_cap(end - pos);
    j.slack = 6 * (end - pos) + 64; /* the longest text of one scalar */
    srl_offtable_init(&j.tracked, 0);
    srl_offtable_init(&j.blessed, 0);
    srl_offtable_init(&j.class_names, 0);
    srl_offtable_init(&j.strings, 0);
    for (int i = 0; i < 256; i++)
        j.recent[i].key = -1;
    PyObject *result = NULL;
    j.tag_starts = PyMem_Calloc(srl_bits_size(end - pos), 1);
    if (j.tag_starts == NULL || srl_buf_init(&j.out, 3 * (end - pos) + 64) < 0 ||
        srl_buf_init(&j.texts, 1024) < 0) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        jx_free(&j);
        return NULL;
    }
    j.top = 1;
    JSpan res;
    Py_ssize_t p = pos;
    if (srl_jx_item(&j, &p, NULL, &res) == 0) {
        if (check_trailing(data, p, end) < 0)
            goto done;
        if (j.bounds == NULL) {
            srl_raise(srl_state.InvalidStructure, pos, "the body is not an array");
            goto done;
        }
        if (srl_jx_check_cap_exact(&j) == 0)
            result = lines_result(&j, packed);
    }
    if (j.map_error_cls != NULL && !PyErr_Occurred()) {
        /* JSON cannot hold this value; but when the body is also malformed further
         * on, that is the error, as the decoder reports it (decode errors first). */
        PyObject *decoded = srl_decode_body(data, len, pos, end, base, binary, max_depth);
        if (decoded != NULL) {
            Py_ssize_t after = PyLong_AsSsize_t(PyTuple_GET_ITEM(decoded, 1));
            int is_list = PyList_Check(PyTuple_GET_ITEM(decoded, 0));
            Py_DECREF(decoded);
            /* then, as the pure reference orders them: trailing bytes, no array, JSON */
            if (check_trailing(data, after, end) == 0) {
                if (!is_list)
                    srl_raise(srl_state.InvalidStructure, pos, "the body is not an array");
                else
                    srl_raise(j.map_error_cls, -1, "%s", j.map_error_msg);
            }
        }
    }
done:
    jx_free(&j);
    return result;
}
