/* The array splitter's walker, shared by split.c (entry points) and split_walk.c
 * (the tag walk that validates, marks back-reference targets and copies). */
#ifndef SRL_SPLIT_H
#define SRL_SPLIT_H

#include "sereal.h"

#include "buf.h"
#include "offtable.h"
#include "varint.h"
#include "walk.h"

/* VALIDATE: array_layout's full check. SKIP: pass over elements before the range.
 * MARK: first pass over the range, noting which of its positions are targets of
 * back-references. EMIT: second pass, writing the range out. */
enum { WALK_VALIDATE, WALK_SKIP, WALK_MARK, WALK_EMIT };

typedef struct {
    const uint8_t *data;
    Py_ssize_t start, end, base;
    int mode;
    int depth;
    int max_depth;            /* nesting levels allowed (the decoder's rule) */
    Py_ssize_t refn_child;    /* where the item right after a REFN starts: an ARRAY or
                               * HASH there shares the REFN's level */
    /* WALK_VALIDATE: what the decoder would know at each point */
    uint8_t *tag_starts;      /* one bit per body byte: a tag was read there */
    SrlOffTable tracked;      /* positions of F-bit tags read as values */
    SrlOffTable class_names;  /* positions of strings read as class names */
    /* WALK_MARK, WALK_EMIT */
    Py_ssize_t range_start;   /* where the first extracted element begins */
    Py_ssize_t element;       /* index of the element being copied, for errors */
    uint8_t *targets;         /* one bit per byte from range_start: a back-reference
                               * target (only those need their new offset recorded) */
    SrlBuf out;
    Py_ssize_t run_from, run_to; /* unchanged input bytes not yet copied to `out` */
    SrlOffTable new_offset;   /* old position of a target in the range -> new offset */
    SrlOffTable copy_literal; /* old string position before the range -> new literal */
    SrlOffTable class_literal; /* same, for literals that were read as class names */
} Walk;

/* Set up a walk of data[pos:end) (offsets base + o) in `mode`; -1 with an error set
 * (free it with srl_walk_free either way). */
int srl_walk_init(Walk *w, const uint8_t *data, Py_ssize_t pos, Py_ssize_t end,
                  Py_ssize_t base, int mode);
void srl_walk_free(Walk *w);
/* Walk one item at *pos (after PADs) in w->mode; -1 with a SerealError set. */
int srl_walk_item(Walk *w, Py_ssize_t *pos);
int srl_walk_varint(Walk *w, Py_ssize_t *pos, uint64_t *out);
int srl_walk_fail(PyObject *cls, Py_ssize_t offset, const char *msg);
/* Set (per thread) while a walk runs without the GIL (join_bodies): srl_walk_fail
 * then raises nothing, and a table or output buffer that would have to grow makes
 * the walk fail instead; the caller redoes that part with the GIL, which gives the
 * real error or does the allocation. */
extern _Thread_local int srl_walk_quiet;
/* Copy the pending run of unchanged bytes to w->out. */
int srl_walk_flush(Walk *w);

/* Skip PADs; -1 (TruncatedInput) when the input ends first. */
static inline int
skip_pad(Walk *w, Py_ssize_t *pos)
{
    while (*pos < w->end && (w->data[*pos] & 0x7f) == SRL_PAD)
        (*pos)++;
    if (*pos >= w->end)
        return srl_walk_fail(srl_state.TruncatedInput, w->end, "input ends where a tag was expected");
    return 0;
}

/* Record a tag start (validation only). */
static inline void
mark(Walk *w, Py_ssize_t p)
{
    if (w->mode == WALK_VALIDATE)
        srl_bit_set(w->tag_starts, p - w->start);
}

#endif
