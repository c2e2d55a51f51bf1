/* The query walk (query_eval.h): a chunk's array body once, each event's values at the
 * program's paths read in place (QVal: a class, a number, a pointer to a string's bytes),
 * everything else skipped; after each event, every plan is evaluated (query_rows.c).
 * No Python API, so it runs without the GIL.
 *
 * It takes what plain events are made of: strings, COPY, numbers, undef, booleans,
 * arrays and hashes (also REFN ARRAY / HASH), REFN to a scalar, PAD. Anything else is
 * "not handled" (-1) and the caller decodes the chunk for the reference evaluator, which
 * answers with its rows or the decoder's error, exactly as variant_sereal.c leaves the
 * JSON path to answer:
 *   - malformed input (truncation, a bad COPY, a key that is not a string, trailing
 *     bytes, a body that is not an array, nesting past max_depth, more objects than the
 *     decoder's budget would build, counted as decode.c charges them);
 *   - REFP, ALIAS, OBJECT(V) and their FREEZE forms, WEAKEN, REGEXP (what they decode to
 *     depends on items elsewhere: shared containers, booleans of a class, cycles);
 *   - a key read twice in one hash on a path (the decoder keeps the last value), and two
 *     paths indexing one list element from both ends ("0" and "-1" of a 1-list).
 * Checks are those of the other walkers: COPY targets against the tag-start bitmap
 * (a string tag this walk read earlier), counts against the bytes left. */
#include "query_eval.h"

#include "walk.h"

#include <string.h>

#define QW_NO (-1)

/* Which child of a node a key names, remembered by the key string's position: with
 * deduplicated strings an event's keys are COPYs of the first event's, so after that
 * event the children are not scanned again (the key's bytes fixed by its position).
 * Direct-mapped; a miss scans. Kept beside the caller's QWalk (srl_query_walk), so
 * the header's walk state is unchanged. */
#define QW_MEMO 512

typedef struct {
    Py_ssize_t src; /* the key string's tag position; -1: empty */
    int32_t first;  /* the node's first child (the node, for the scan) */
    int32_t match;  /* the child it names, or -1 */
} QKeyMemo;

typedef struct {
    QWalk w; /* first: a QWalk * of the walk is a QWalkMemo * */
    QKeyMemo memo[QW_MEMO];
} QWalkMemo;

/* The child of first's node (first: its first child) named by the key s[0:n] at src. */
static inline int32_t
child_named(QWalk *w, Py_ssize_t src, int32_t first, const uint8_t *s, Py_ssize_t n)
{
    if (first < 0)
        return -1;
    QKeyMemo *m = &((QWalkMemo *)w)->memo[((size_t)src * 31u + (size_t)first) & (QW_MEMO - 1)];
    if (m->src == src && m->first == first)
        return m->match;
    const QNode *nodes = w->prog->nodes;
    int32_t match = -1;
    for (int32_t c = first; c >= 0; c = nodes[c].next_sibling) {
        if (nodes[c].key_len == n && memcmp(nodes[c].key, s, (size_t)n) == 0) {
            match = c;
            break;
        }
    }
    m->src = src;
    m->first = first;
    m->match = match;
    return match;
}

static inline int
skip_pad(QWalk *w, Py_ssize_t *pos)
{
    Py_ssize_t p = *pos;
    while (p < w->end && (w->data[p] & 0x7f) == SRL_PAD)
        p++;
    *pos = p;
    return p < w->end ? 0 : QW_NO;
}

static inline int
charge(QWalk *w, uint64_t n)
{
    if (w->objects_left < 0)
        return 0;
    if (n > (uint64_t)w->objects_left)
        return QW_NO;
    w->objects_left -= (Py_ssize_t)n;
    return 0;
}

static inline int
enter(QWalk *w)
{
    return ++w->depth > w->max_depth ? QW_NO : 0;
}

/* The payload of the string tag at tagpos: s[0:n], *after past it. */
static inline int
payload(QWalk *w, Py_ssize_t tagpos, const uint8_t **s, Py_ssize_t *n, Py_ssize_t *after)
{
    uint8_t tag = w->data[tagpos] & 0x7f;
    Py_ssize_t q = tagpos + 1;
    uint64_t len;
    if (tag >= SRL_SHORT_BINARY_LOW) {
        len = tag & 0x1f;
    } else if (srl_varint(w->data, w->end, &q, &len) != SRL_VARINT_OK) {
        return QW_NO;
    }
    if (len > (uint64_t)(w->end - q))
        return QW_NO;
    *s = w->data + q;
    *n = (Py_ssize_t)len;
    *after = q + (Py_ssize_t)len;
    return 0;
}

/* The COPY at tagpos: its target, a string tag read earlier (*pos past the COPY). */
SRL_WALKER_COPY_TARGET(QWalk, copy_target, 1)

/* A string tag (or the COPY's target) as a text value. */
static inline int
text(QWalk *w, Py_ssize_t src, QVal *v, Py_ssize_t *after)
{
    v->t = QV_TEXT;
    v->tag = (w->data[src] & 0x7f) == SRL_STR_UTF8 ? SRL_STR_UTF8 : SRL_BINARY;
    return payload(w, src, &v->s, &v->n, after);
}

static inline void
set_float(QVal *v, double d, uint8_t tag, const uint8_t *s)
{
    v->t = d != d ? QV_NAN : QV_FLOAT;
    v->d = d;
    v->tag = tag;
    v->s = s;
}

static int item(QWalk *w, Py_ssize_t *pos, int32_t node);

/* The children of node matched to the keys of a hash of n pairs at *pos. */
static int
hash_pairs(QWalk *w, Py_ssize_t *pos, uint64_t n, int32_t node)
{
    const QNode *nodes = w->prog->nodes;
    int32_t first = node >= 0 ? nodes[node].first_child : -1;
    for (uint64_t k = 0; k < n; k++) {
        if (skip_pad(w, pos) < 0)
            return QW_NO;
        Py_ssize_t tagpos = *pos, src = tagpos, after;
        srl_bit_set(w->tag_starts, tagpos - w->start);
        uint8_t tag = w->data[tagpos] & 0x7f;
        const uint8_t *s;
        Py_ssize_t len;
        if (tag == SRL_COPY) {
            if ((src = copy_target(w, tagpos, pos)) < 0 || payload(w, src, &s, &len, &after) < 0)
                return QW_NO;
        } else if (!srl_is_string_tag(tag) || payload(w, tagpos, &s, &len, pos) < 0) {
            return QW_NO;
        }
        int32_t match = child_named(w, src, first, s, len);
        if (match >= 0 && w->seen[match] == w->event)
            return QW_NO; /* the key again: the decoder keeps the last value */
        if (item(w, pos, match) < 0)
            return QW_NO;
    }
    return 0;
}

/* The children of node matched to the n elements of a list at *pos, by index. */
static int
array_items(QWalk *w, Py_ssize_t *pos, uint64_t n, int32_t node)
{
    const QNode *nodes = w->prog->nodes;
    int32_t first = node >= 0 ? nodes[node].first_child : -1;
    for (uint64_t k = 0; k < n; k++) {
        int32_t match = -1;
        for (int32_t c = first; c >= 0; c = nodes[c].next_sibling) {
            if (!nodes[c].has_index)
                continue;
            int64_t i = nodes[c].index;
            if (i == (int64_t)k || (i < 0 && (uint64_t)(-(i + 1)) + 1 == n - k)) {
                if (match >= 0)
                    return QW_NO; /* one element read by two paths */
                match = c;
            }
        }
        if (item(w, pos, match) < 0)
            return QW_NO;
        /* An event that is a list: a path of one part is missing there, a longer one
         * steps into it (values.getter's rule). */
        if (match >= 0 && node == 0)
            w->seen[match] = 0;
    }
    return 0;
}

/* A container of n items at *pos (its level opened by the caller). */
static int
container(QWalk *w, Py_ssize_t *pos, uint64_t n, int is_hash, int32_t node, QVal *v)
{
    if (n > (uint64_t)(w->end - *pos) / (is_hash ? 2 : 1) || charge(w, 1 + (is_hash ? 2 : 1) * n) < 0)
        return QW_NO;
    v->t = is_hash ? QV_MAP : QV_LIST;
    if (node >= 0 && w->prog->nodes[node].first_child < 0)
        node = -1; /* nothing below is read */
    return is_hash ? hash_pairs(w, pos, n, node) : array_items(w, pos, n, node);
}

/* ARRAY / HASH at tagpos with its count. */
static int
counted(QWalk *w, Py_ssize_t tagpos, Py_ssize_t *pos, int32_t node, QVal *v)
{
    uint64_t n;
    *pos = tagpos + 1;
    if (srl_varint(w->data, w->end, pos, &n) != SRL_VARINT_OK)
        return QW_NO;
    return container(w, pos, n, (w->data[tagpos] & 0x7f) == SRL_HASH, node, v);
}

/* One item at *pos (after PADs); node >= 0: its value is that path's. */
static int
item(QWalk *w, Py_ssize_t *pos, int32_t node)
{
    QVal scratch, *v = node >= 0 ? &w->vals[node] : &scratch;
    if (skip_pad(w, pos) < 0)
        return QW_NO;
    Py_ssize_t tagpos = *pos, p = tagpos + 1, target;
    const uint8_t *data = w->data;
    srl_bit_set(w->tag_starts, tagpos - w->start);
    uint8_t tag = data[tagpos] & 0x7f;
    uint64_t u;
    int rc = 0;
    if (node >= 0)
        w->seen[node] = w->event;
    if (tag >= SRL_SHORT_BINARY_LOW)
        return text(w, tagpos, v, pos);
    if (tag == SRL_COPY) {
        Py_ssize_t after;
        return (target = copy_target(w, tagpos, pos)) < 0 ? QW_NO : text(w, target, v, &after);
    }
    *pos = p;
    switch (srl_tag_kind(tag)) {
    SRL_CASE_STRING:
        return text(w, tagpos, v, pos);
    case SRL_K_COPY: {
        Py_ssize_t after;
        return (target = copy_target(w, tagpos, pos)) < 0 ? QW_NO : text(w, target, v, &after);
    }
    case SRL_K_POS:
        v->t = QV_INT;
        v->i = tag - SRL_POS_LOW;
        return 0;
    case SRL_K_NEG:
        v->t = QV_INT;
        v->i = (int64_t)tag - SRL_NEG_LOW - 16;
        return 0;
    case SRL_K_VARINT:
        if (srl_varint(data, w->end, pos, &u) != SRL_VARINT_OK)
            return QW_NO;
        if (u <= INT64_MAX) {
            v->t = QV_INT;
            v->i = (int64_t)u;
        } else {
            v->t = QV_UINT;
            v->u = u;
        }
        return 0;
    case SRL_K_ZIGZAG:
        if (srl_varint(data, w->end, pos, &u) != SRL_VARINT_OK)
            return QW_NO;
        v->t = QV_INT;
        v->i = srl_zigzag_decode(u);
        return 0;
    case SRL_K_FLOAT: {
        float f;
        if (w->end - p < 4)
            return QW_NO;
        memcpy(&f, data + p, 4);
        set_float(v, (double)f, tag, data + p);
        *pos = p + 4;
        return 0;
    }
    case SRL_K_DOUBLE: {
        double d;
        if (w->end - p < 8)
            return QW_NO;
        memcpy(&d, data + p, 8);
        set_float(v, d, tag, data + p);
        *pos = p + 8;
        return 0;
    }
    case SRL_K_LONG_DOUBLE:
    case SRL_K_FLOAT_128:
        if (w->end - p < 16)
            return QW_NO;
        set_float(v,
                  srl_tag_kind(tag) == SRL_K_LONG_DOUBLE ? srl_long_double_to_double(data + p)
                                                         : srl_float128_to_double(data + p),
                  tag, data + p);
        *pos = p + 16;
        return 0;
    case SRL_K_UNDEF:
        v->t = QV_UNDEF;
        return 0;
    case SRL_K_TRUE:
    case SRL_K_FALSE:
        v->t = QV_BOOL;
        v->i = srl_tag_kind(tag) == SRL_K_TRUE;
        return 0;
    SRL_CASE_CONTAINER_REF:
        if (enter(w) < 0)
            return QW_NO;
        rc = container(w, pos, tag & 0x0f, srl_tag_kind(tag) == SRL_K_HASHREF, node, v);
        w->depth--;
        return rc;
    SRL_CASE_CONTAINER:
        if (enter(w) < 0)
            return QW_NO;
        rc = counted(w, tagpos, pos, node, v);
        w->depth--;
        return rc;
    case SRL_K_REFN:
        /* REFN ARRAY / HASH: the list or dict, one level; REFN anything else: a
         * PerlRef (OTHER), its target skipped one level down. */
        if (enter(w) < 0 || skip_pad(w, pos) < 0)
            return QW_NO;
        target = *pos;
        if ((data[target] & 0x7f) == SRL_ARRAY || (data[target] & 0x7f) == SRL_HASH) {
            srl_bit_set(w->tag_starts, target - w->start);
            rc = counted(w, target, pos, node, v);
        } else {
            rc = charge(w, 1) < 0 || item(w, pos, -1) < 0 ? QW_NO : 0;
            v->t = QV_OTHER;
        }
        w->depth--;
        return rc;
    /* What depends on items elsewhere (tracked targets, blessing, cycles) or is rare:
     * the reference's. */
    SRL_CASE_ELSEWHERE:
        return QW_NO;
    }
    return QW_NO;
}

static int walk_body(QWalk *w);

int
srl_query_walk(QWalk *caller)
{
    QWalkMemo *m = PyMem_RawMalloc(sizeof *m);
    if (m == NULL)
        return QW_NO; /* the reference answers */
    m->w = *caller;
    for (int i = 0; i < QW_MEMO; i++)
        m->memo[i].src = -1;
    int rc = walk_body(&m->w);
    *caller = m->w; /* the counters the walk moved */
    PyMem_RawFree(m);
    return rc;
}

static int
walk_body(QWalk *w)
{
    Py_ssize_t p = w->start;
    if (skip_pad(w, &p) < 0 || enter(w) < 0)
        return QW_NO;
    Py_ssize_t tagpos = p;
    uint8_t tag = w->data[tagpos] & 0x7f;
    uint64_t n;
    srl_bit_set(w->tag_starts, tagpos - w->start);
    p = tagpos + 1;
    if (tag == SRL_REFN) { /* REFN ARRAY: one level */
        if (skip_pad(w, &p) < 0)
            return QW_NO;
        tagpos = p++;
        tag = w->data[tagpos] & 0x7f;
        srl_bit_set(w->tag_starts, tagpos - w->start);
        if (tag != SRL_ARRAY)
            return QW_NO;
    }
    if (srl_tag_kind(tag) == SRL_K_ARRAYREF)
        n = tag & 0x0f;
    else if (tag != SRL_ARRAY || srl_varint(w->data, w->end, &p, &n) != SRL_VARINT_OK)
        return QW_NO;
    if (n > (uint64_t)(w->end - p) || n >= UINT32_MAX - 1 || charge(w, 1 + n) < 0)
        return QW_NO;
    for (uint64_t k = 0; k < n; k++) {
        w->event++;
        if (item(w, &p, 0) < 0)
            return QW_NO;
        if (srl_query_event(w) < 0)
            return QW_NO;
    }
    w->depth--;
    for (; p < w->end; p++) /* trailing bytes must be PADs */
        if ((w->data[p] & 0x7f) != SRL_PAD)
            return QW_NO;
    return 0;
}
