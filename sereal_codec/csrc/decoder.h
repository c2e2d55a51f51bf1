/* Decoder state shared by decode.c (dispatch, scalars, containers) and
 * decode_refs.c (REFN, REFP, ALIAS, COPY, objects). */
#ifndef SRL_DECODER_H
#define SRL_DECODER_H

#include "offtable.h"
#include "varint.h"
#include "walk.h"

/* Slots of Dec.recent: 256 missed one COPY in six on the benchmark blob (hundreds of
 * distinct value targets), 1024 one in fifty. */
#define SRL_DEC_RECENT 1024

static inline size_t
srl_dec_recent_slot(Py_ssize_t key)
{
    return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ULL) >> 54);
}

typedef struct {
    const uint8_t *data;
    Py_ssize_t start; /* first byte of the body: back-references may not go below */
    Py_ssize_t end;   /* never read at or past this */
    Py_ssize_t base;  /* offset o denotes data[base + o] */
    int binary;       /* SRL_BINARY_* */
    int max_depth;
    int depth;
    /* The object budget (DESIGN.md, "Bounded decoding"): objects still allowed, and
     * the limit, for the error. Unlimited: PY_SSIZE_T_MAX. */
    Py_ssize_t objects_left;
    Py_ssize_t max_objects;
    uint8_t *tag_starts;       /* bitmap, one bit per body byte: a tag was read there */
    SrlOffTable tracked;       /* tag position -> value of an F-bit item */
    SrlOffTable strings;       /* 2 * position + key_kind -> decoded COPY target string */
    /* Direct-mapped front of `strings` (borrowed pointers): the hash-key targets
     * every event COPYs and the deduplicated values (hosts, URLs, agents) stay in
     * cache here. key -1: empty. */
    struct { Py_ssize_t key; PyObject *value; } recent[SRL_DEC_RECENT];
    SrlOffTable class_names;   /* string position -> class name read there (OBJECTV) */
    SrlOffTable blessed;       /* referent position -> the object its blessing produced */
} Dec;

/* srl_dec_varint, _mark, _is_tag_start, _skip_pad, _enter (pair with `d->depth--`),
 * _string_key, _string_bytes, _take, _resolve: walk.h. */
SRL_WALKER_READS(Dec, srl_dec)

/* sereal_codec.errors.DecodeBudgetExceeded, set by module.c at import (kept out
 * of SrlState, which the other walkers share). */
extern PyObject *srl_DecodeBudgetExceeded;

/* Decode one body item as srl_decode_body does, building at most `max_objects`
 * objects as DESIGN.md counts them (-1: no limit); DecodeBudgetExceeded past it.
 * projection: a checked projection tree (srl_check_projection) to narrow each element
 * of a top-level array to, or NULL for everything. */
PyObject *srl_decode_body_limited(const uint8_t *data, Py_ssize_t len, Py_ssize_t pos,
                                  Py_ssize_t end, Py_ssize_t base, int binary, int max_depth,
                                  Py_ssize_t max_objects, PyObject *projection);

/* decode_project.c (DESIGN.md, "Projection"): the body item at *pos, each element of
 * a top-level array narrowed to `tree`, the rest walked and checked, not built. */
PyObject *srl_dec_projected(Dec *d, Py_ssize_t *pos, PyObject *tree);
/* 0 when `tree` is a projection tree (dicts of str -> None or a tree, at most
 * SRL_MAX_DEPTH_CAP deep); else -1 with ValueError. */
int srl_check_projection(PyObject *tree);

/* The positions a value is registered under (for REFP / ALIAS): an F-bit tag and
 * the enclosing REFN|F / WEAKEN|F tags that stand for the same Perl value. A list
 * on the C stack, innermost first; NULL: none. */
typedef struct SrlTrack {
    Py_ssize_t pos;
    const struct SrlTrack *next;
} SrlTrack;

/* Whether `target` is one of the positions in `track`. */
static inline int
srl_track_has(const SrlTrack *track, Py_ssize_t target)
{
    for (; track != NULL; track = track->next)
        if (track->pos == target)
            return 1;
    return 0;
}

/* What a REFP / ALIAS at tagpos finds at `target` in a walker's `tracked` table: 0
 * with *hit, or -1 with BadBackReference when no tracked item is there. */
static inline int
srl_tracked_at(const SrlOffTable *tracked, Py_ssize_t tagpos, Py_ssize_t target,
               const char *what, intptr_t *hit)
{
    if (srl_offtable_get(tracked, target, hit))
        return 0;
    srl_raise(srl_state.BadBackReference, tagpos,
              "%s points at position %zd, which holds no tracked item", what, target);
    return -1;
}

PyObject *srl_dec_item(Dec *d, Py_ssize_t *pos);
/* Decode one item, also registering its value under every position in `outer`. */
PyObject *srl_dec_item_tracked(Dec *d, Py_ssize_t *pos, const SrlTrack *outer);

/* decode_refs.c */
PyObject *srl_dec_refn(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, const SrlTrack *track);
PyObject *srl_dec_refp(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, const SrlTrack *track,
                       int plain);
PyObject *srl_dec_alias(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos);
PyObject *srl_dec_object(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t tag,
                         const SrlTrack *track);
PyObject *srl_dec_regexp(Dec *d, Py_ssize_t *pos);

/* decode.c helpers used by decode_refs.c */
PyObject *srl_dec_key(Dec *d, Py_ssize_t *pos, const char *what, Py_ssize_t *string_pos);
PyObject *srl_dec_container(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, const SrlTrack *also,
                            int opened);
PyObject *srl_dec_copy_string(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, int is_key,
                              Py_ssize_t *target);
PyObject *srl_dec_string_at(Dec *d, Py_ssize_t tagpos, int is_key);
int srl_dec_track(Dec *d, Py_ssize_t tagpos, PyObject *v);
int srl_dec_track_all(Dec *d, const SrlTrack *track, PyObject *v);

/* The count of the ARRAY / HASH at tagpos into *n, *pos just after it; -1 with
 * TruncatedInput set when the count cannot fit in the bytes left (every walker that
 * builds or skips a container checks it so). */
static inline int
srl_dec_count(Dec *d, Py_ssize_t tagpos, Py_ssize_t *pos, Py_ssize_t *n)
{
    Py_ssize_t p = tagpos + 1;
    uint64_t count;
    if (srl_dec_varint(d, &p, &count, "a count") < 0)
        return -1;
    if (count > (uint64_t)(d->end - p)) {
        srl_raise(srl_state.TruncatedInput, d->end, "count %llu exceeds the %zd bytes left",
                  (unsigned long long)count, d->end - p);
        return -1;
    }
    *pos = p;
    *n = (Py_ssize_t)count;
    return 0;
}

/* Charge `cost` objects to the budget before building them (tag at tagpos):
 * DecodeBudgetExceeded when they would pass it. One subtraction and one compare: the
 * charges are per container, reference, object and regexp, never per scalar. */
static inline int
srl_dec_charge(Dec *d, Py_ssize_t tagpos, Py_ssize_t cost)
{
    if ((d->objects_left -= cost) >= 0)
        return 0;
    srl_raise(srl_DecodeBudgetExceeded, tagpos, "the body builds more than max_objects=%zd objects",
              d->max_objects);
    return -1;
}

#endif
