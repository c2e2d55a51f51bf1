/* Array splitter, the tag walk (see split.c for what the splitter does): one
 * recursive walk over items that, by mode, validates like the decoder (tag starts,
 * tracked items, class names), marks which positions of the extracted range are
 * back-reference targets, or copies the range out with back-references rewritten.
 * Every read is bounded by `end`; nesting is capped at SRL_MAX_DEPTH_CAP (the
 * splitter) or below (join_bodies' max_depth), which bounds the C stack. */
#include "split.h"

#include <string.h>


_Thread_local int srl_walk_quiet;

int
srl_walk_fail(PyObject *cls, Py_ssize_t offset, const char *msg)
{
    if (!srl_walk_quiet)
        srl_raise(cls, offset, "%s", msg);
    return -1;
}

/* srl_offtable_put; quiet: -1 instead of allocating (the caller retries with the GIL). */
static int
walk_put(SrlOffTable *t, Py_ssize_t key, intptr_t value)
{
    if (srl_walk_quiet && (t->slots == NULL || (t->used + 1) * 2 > ((Py_ssize_t)1 << t->bits)))
        return -1;
    return srl_offtable_put(t, key, value);
}

/* Room for n more output bytes; quiet: -1 instead of growing the buffer. */
static int
out_room(Walk *w, Py_ssize_t n)
{
    if (w->out.cap - w->out.len >= n)
        return 0;
    return srl_walk_quiet ? -1 : srl_buf_grow(&w->out, n);
}

int
srl_walk_varint(Walk *w, Py_ssize_t *pos, uint64_t *out)
{
    int rc = srl_varint(w->data, w->end, pos, out);
    if (rc == SRL_VARINT_OK)
        return 0;
    if (rc == SRL_VARINT_TRUNCATED)
        return srl_walk_fail(srl_state.TruncatedInput, w->end, "input ends inside a varint");
    return srl_walk_fail(srl_state.InvalidStructure, *pos, "varint does not fit in 64 bits");
}

static inline int
marked(const Walk *w, Py_ssize_t p)
{
    return srl_bit_get(w->tag_starts, p - w->start);
}

/* Copy the pending run of unchanged input bytes to the output. */
int
srl_walk_flush(Walk *w)
{
    if (w->run_to > w->run_from &&
        (out_room(w, w->run_to - w->run_from) < 0 ||
         srl_buf_put_bytes(&w->out, w->data + w->run_from, w->run_to - w->run_from) < 0))
        return -1;
    w->run_from = w->run_to = -1;
    return 0;
}

/* Offset (1-based) in the new body of the next byte written. */
static inline Py_ssize_t
next_offset(const Walk *w)
{
    return w->out.len + (w->run_to - w->run_from) + 1;
}

/* Input bytes [from, to) go out unchanged: extend the pending run when contiguous. */
static int
emit_raw(Walk *w, Py_ssize_t from, Py_ssize_t to)
{
    if (w->mode != WALK_EMIT)
        return 0;
    if (from != w->run_to) {
        if (srl_walk_flush(w) < 0)
            return -1;
        w->run_from = from;
    }
    w->run_to = to;
    return 0;
}

static int
out_byte(Walk *w, uint8_t b)
{
    return srl_walk_flush(w) < 0 || out_room(w, 1) < 0 ? -1 : srl_buf_put_byte(&w->out, b);
}

static int
out_tag_varint(Walk *w, uint8_t tag, uint64_t v)
{
    return srl_walk_flush(w) < 0 || out_room(w, 11) < 0 ? -1
                                                       : srl_buf_put_tag_varint(&w->out, tag, v);
}

/* Start of a tag: when copying, remember where a back-reference target lands. */
static int
begin_tag(Walk *w, Py_ssize_t tagpos)
{
    mark(w, tagpos);
    if (w->mode == WALK_EMIT) {
        Py_ssize_t i = tagpos - w->range_start;
        if ((w->targets[i >> 3] >> (i & 7)) & 1)
            return walk_put(&w->new_offset, tagpos, (intptr_t)next_offset(w));
    }
    return 0;
}

/* Note that an in-range position is a back-reference target (whenever a targets
 * bitmap is kept: WALK_MARK, and WALK_VALIDATE for join_bodies). */
static inline void
note_target(Walk *w, Py_ssize_t target)
{
    if (w->targets != NULL && target >= w->range_start) {
        Py_ssize_t i = target - w->range_start;
        w->targets[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
}

/* End of the string whose tag is at p (bounds-checked). */
static Py_ssize_t
string_end(Walk *w, Py_ssize_t p)
{
    uint8_t tag = w->data[p] & 0x7f;
    Py_ssize_t q = p + 1;
    uint64_t n;
    if (tag >= SRL_SHORT_BINARY_LOW)
        n = tag & 0x1f;
    else if (srl_walk_varint(w, &q, &n) < 0)
        return -1;
    if (n > (uint64_t)(w->end - q)) {
        srl_walk_fail(srl_state.TruncatedInput, w->end, "string runs past the end of the input");
        return -1;
    }
    return q + (Py_ssize_t)n;
}

/* The target of the offset after the tag at tagpos: inside [start, limit), noted
 * (note_target); *pos past the offset. */
static Py_ssize_t
target_of(Walk *w, Py_ssize_t tagpos, Py_ssize_t *pos, Py_ssize_t limit)
{
    Py_ssize_t p = tagpos + 1;
    uint64_t o;
    if (srl_walk_varint(w, &p, &o) < 0)
        return -1;
    Py_ssize_t target = o > (uint64_t)(limit - w->base) ? -1 : w->base + (Py_ssize_t)o;
    if (target < w->start || target >= limit ||
        (w->mode == WALK_VALIDATE && !marked(w, target))) {
        srl_walk_fail(srl_state.BadBackReference, tagpos, "offset does not point at an earlier tag");
        return -1;
    }
    *pos = p;
    note_target(w, target);
    return target;
}

/* Write the string tag at old position p (before the range) as a fresh literal,
 * without its F bit; return its new offset. */
static Py_ssize_t
emit_literal(Walk *w, Py_ssize_t p)
{
    if (!srl_is_string_tag(w->data[p] & 0x7f)) {
        srl_walk_fail(srl_state.BadBackReference, p, "back-reference to a string that is not one");
        return -1;
    }
    Py_ssize_t stop = string_end(w, p);
    if (stop < 0)
        return -1;
    if (srl_walk_flush(w) < 0)
        return -1;
    Py_ssize_t offset = w->out.len + 1;
    if (out_room(w, stop - p) < 0 || srl_buf_put_byte(&w->out, w->data[p] & 0x7f) < 0 ||
        srl_buf_put_bytes(&w->out, w->data + p + 1, stop - p - 1) < 0)
        return -1;
    return offset;
}

/* The new offset of an in-range target, which must be a tag copied before. */
static Py_ssize_t
moved(Walk *w, Py_ssize_t tagpos, Py_ssize_t target)
{
    intptr_t off;
    if (!srl_offtable_get(&w->new_offset, target, &off)) {
        srl_walk_fail(srl_state.BadBackReference, tagpos, "offset does not point at an earlier tag");
        return -1;
    }
    return (Py_ssize_t)off;
}

/* COPY at tagpos (as a value, key or class name). */
static int
walk_copy(Walk *w, Py_ssize_t tagpos, Py_ssize_t *pos, int as_class)
{
    Py_ssize_t target = target_of(w, tagpos, pos, tagpos);
    if (target < 0)
        return -1;
    if (w->mode == WALK_SKIP || w->mode == WALK_MARK)
        return 0;
    if (!srl_is_string_tag(w->data[target] & 0x7f))
        return srl_walk_fail(srl_state.BadBackReference, tagpos, "COPY of something not a string");
    if (w->mode == WALK_VALIDATE)
        return as_class ? walk_put(&w->class_names, target, 1) : 0;
    if (target >= w->range_start) {
        Py_ssize_t off = moved(w, tagpos, target);
        return off < 0 ? -1 : out_tag_varint(w, SRL_COPY, (uint64_t)off);
    }
    intptr_t off;
    if (srl_offtable_get(&w->copy_literal, target, &off))
        return out_tag_varint(w, SRL_COPY, (uint64_t)off);
    Py_ssize_t lit = emit_literal(w, target);
    if (lit < 0 || walk_put(&w->copy_literal, target, lit) < 0)
        return -1;
    return as_class ? walk_put(&w->class_literal, target, lit) : 0;
}

/* A hash key, class name or regexp part: a string or a COPY of one. */
static int
walk_key(Walk *w, Py_ssize_t *pos, int as_class)
{
    if (skip_pad(w, pos) < 0)
        return -1;
    Py_ssize_t tagpos = *pos;
    uint8_t tag = w->data[tagpos] & 0x7f;
    if (begin_tag(w, tagpos) < 0)
        return -1;
    if (tag == SRL_COPY)
        return walk_copy(w, tagpos, pos, as_class);
    if (!srl_is_string_tag(tag))
        return srl_walk_fail(srl_state.InvalidStructure, tagpos, "hash key or class name is not a string");
    Py_ssize_t stop = string_end(w, tagpos);
    if (stop < 0 || emit_raw(w, tagpos, stop) < 0)
        return -1;
    *pos = stop;
    if (as_class && w->mode == WALK_VALIDATE)
        return walk_put(&w->class_names, tagpos, 1);
    return 0;
}

/* REFP / ALIAS at tagpos (t: its byte). */
static int
walk_ref(Walk *w, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t t)
{
    int self_ok = (t & 0x7f) == SRL_REFP && (t & SRL_TRACK);
    Py_ssize_t target = target_of(w, tagpos, pos, self_ok ? tagpos + 1 : tagpos);
    if (target < 0)
        return -1;
    intptr_t hit;
    if (w->mode == WALK_VALIDATE && target != tagpos &&
        !srl_offtable_get(&w->tracked, target, &hit))
        return srl_walk_fail(srl_state.BadBackReference, tagpos, "REFP / ALIAS to an untracked item");
    if (w->mode != WALK_EMIT)
        return 0;
    if (target < w->range_start) {
        if (srl_walk_quiet)
            return -1;
        srl_raise(srl_state.InvalidStructure, tagpos,
                  "element %zd refers to an item before the extracted range: it cannot "
                  "be cut out on its own", w->element);
        return -1;
    }
    if (!(w->data[target] & SRL_TRACK))
        return srl_walk_fail(srl_state.BadBackReference, tagpos, "REFP / ALIAS to an untracked item");
    Py_ssize_t off = moved(w, tagpos, target);
    return off < 0 ? -1 : out_tag_varint(w, t, (uint64_t)off);
}

/* OBJECTV / OBJECTV_FREEZE at tagpos (t: its byte), then its value. */
static int
walk_objectv(Walk *w, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t t)
{
    Py_ssize_t p;
    Py_ssize_t target = target_of(w, tagpos, &p, tagpos);
    if (target < 0)
        return -1;
    intptr_t off;
    if (w->mode == WALK_VALIDATE && !srl_offtable_get(&w->class_names, target, &off))
        return srl_walk_fail(srl_state.BadBackReference, tagpos, "OBJECTV to a string no class name");
    if (w->mode == WALK_EMIT) {
        int rc;
        if (target >= w->range_start) {
            Py_ssize_t moved_off = moved(w, tagpos, target);
            rc = moved_off < 0 ? -1 : out_tag_varint(w, t, (uint64_t)moved_off);
        } else if (srl_offtable_get(&w->class_literal, target, &off)) {
            rc = out_tag_varint(w, t, (uint64_t)off);
        } else {
            /* The class was named before the range: name it here. */
            uint8_t object = (t & 0x7f) == SRL_OBJECTV ? SRL_OBJECT : SRL_OBJECT_FREEZE;
            Py_ssize_t lit = -1;
            rc = out_byte(w, (uint8_t)((t & SRL_TRACK) | object));
            if (rc == 0 && (lit = emit_literal(w, target)) < 0)
                rc = -1;
            if (rc == 0 && (walk_put(&w->class_literal, target, lit) < 0 ||
                            (!srl_offtable_get(&w->copy_literal, target, &off) &&
                             walk_put(&w->copy_literal, target, lit) < 0)))
                rc = -1;
        }
        if (rc < 0)
            return -1;
    }
    *pos = p;
    return srl_walk_item(w, pos);
}

/* n items (hash: n key/value pairs) after a container's header. */
static int
walk_children(Walk *w, Py_ssize_t *pos, uint64_t n, int is_hash)
{
    if (n > (uint64_t)((w->end - *pos) / (is_hash ? 2 : 1)))
        return srl_walk_fail(srl_state.TruncatedInput, w->end, "count exceeds the bytes left");
    for (uint64_t i = 0; i < n; i++) {
        if (is_hash && walk_key(w, pos, 0) < 0)
            return -1;
        if (srl_walk_item(w, pos) < 0)
            return -1;
    }
    return 0;
}

static int
enter(Walk *w, Py_ssize_t tagpos)
{
    if (++w->depth > w->max_depth) {
        w->depth--;
        if (srl_walk_quiet)
            return -1;
        srl_raise(srl_state.DepthExceeded, tagpos, "nesting deeper than %d levels",
                  w->max_depth);
        return -1;
    }
    return 0;
}

static int
walk_nested(Walk *w, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t tag)
{
    Py_ssize_t p = tagpos + 1;
    uint64_t n;
    int rc = 0;
    if (tag == SRL_ARRAY || tag == SRL_HASH) {
        rc = srl_walk_varint(w, &p, &n);
        if (rc == 0 && (rc = emit_raw(w, tagpos, p)) == 0) {
            *pos = p;
            rc = walk_children(w, pos, n, tag == SRL_HASH);
        }
    } else if (tag >= SRL_ARRAYREF_LOW) {
        if ((rc = emit_raw(w, tagpos, p)) == 0) {
            *pos = p;
            rc = walk_children(w, pos, tag & 0x0f, tag >= SRL_HASHREF_LOW);
        }
    } else if (tag == SRL_REFN || tag == SRL_WEAKEN) {
        if ((rc = emit_raw(w, tagpos, p)) == 0) {
            *pos = p;
            if (tag == SRL_REFN)
                w->refn_child = p;
            rc = srl_walk_item(w, pos);
        }
    } else { /* OBJECT, OBJECT_FREEZE: class name, then the value */
        if ((rc = emit_raw(w, tagpos, p)) == 0) {
            *pos = p;
            rc = walk_key(w, pos, 1);
            if (rc == 0)
                rc = srl_walk_item(w, pos);
        }
    }
    return rc;
}

int
srl_walk_item(Walk *w, Py_ssize_t *pos)
{
    int after_refn = *pos == w->refn_child;
    if (skip_pad(w, pos) < 0)
        return -1;
    Py_ssize_t tagpos = *pos;
    uint8_t t = w->data[tagpos], tag = t & 0x7f;
    if (begin_tag(w, tagpos) < 0)
        return -1;
    if ((t & SRL_TRACK) && w->mode == WALK_VALIDATE &&
        walk_put(&w->tracked, tagpos, 1) < 0)
        return -1;
    Py_ssize_t stop;
    int rc;
    /* Short strings and small integers, the commonest items, by comparison before the
     * kind's jump (which mispredicts more than this: callgrind --branch-sim). */
    if (tag >= SRL_SHORT_BINARY_LOW) {
        if ((stop = string_end(w, tagpos)) < 0)
            return -1;
        goto scalar;
    }
    if (tag < SRL_VARINT) {
        stop = tagpos + 1;
        goto scalar;
    }
    switch (srl_tag_kind(tag)) {
    case SRL_K_REFP:
    case SRL_K_ALIAS:
        return walk_ref(w, tagpos, pos, t);
    case SRL_K_COPY:
        return walk_copy(w, tagpos, pos, 0);
    case SRL_K_OBJECTV:
        if (enter(w, tagpos) < 0)
            return -1;
        rc = walk_objectv(w, tagpos, pos, t);
        w->depth--;
        return rc;
    SRL_CASE_CONTAINER:
        if (after_refn) /* REFN ARRAY is one level, as the decoder counts */
            return walk_nested(w, tagpos, pos, tag);
        /* fall through */
    case SRL_K_REFN:
    case SRL_K_WEAKEN:
    case SRL_K_OBJECT:
    SRL_CASE_CONTAINER_REF:
        if (enter(w, tagpos) < 0)
            return -1;
        rc = walk_nested(w, tagpos, pos, tag);
        w->depth--;
        return rc;
    case SRL_K_REGEXP:
        if (emit_raw(w, tagpos, tagpos + 1) < 0)
            return -1;
        *pos = tagpos + 1;
        return walk_key(w, pos, 0) < 0 ? -1 : walk_key(w, pos, 0);
    case SRL_K_VARINT:
    case SRL_K_ZIGZAG:
        stop = tagpos + 1;
        {
            uint64_t ignored;
            if (srl_walk_varint(w, &stop, &ignored) < 0)
                return -1;
        }
        break;
    case SRL_K_FLOAT:
    case SRL_K_DOUBLE:
    case SRL_K_LONG_DOUBLE:
    case SRL_K_FLOAT_128:
        stop = tagpos + 1 + srl_shape_size(srl_tag_shapes[tag]);
        break;
    SRL_CASE_CONSTANT:
    case SRL_K_POS:
    case SRL_K_NEG:
        stop = tagpos + 1;
        break;
    SRL_CASE_STRING:
        if ((stop = string_end(w, tagpos)) < 0)
            return -1;
        break;
    case SRL_K_PAD: /* skipped above */
    case SRL_K_UNSUPPORTED:
        return srl_walk_fail(srl_state.UnknownTag, tagpos, "unknown or unsupported tag");
    }
scalar:
    if (stop > w->end)
        return srl_walk_fail(srl_state.TruncatedInput, w->end, "input ends inside a number");
    *pos = stop;
    return emit_raw(w, tagpos, stop);
}

