/* JSON transcoder: the body of a Sereal array straight to one compact JSON text per
 * element, without Python objects (DESIGN.md, "JSON transcoding"). It is a decoder:
 * json.c (entry point, dispatch, containers), json_scalar.c (strings, COPY,
 * numbers) and json_refs.c (REFN, REFP, ALIAS, objects, REGEXP) mirror decode.c and
 * decode_refs.c check for check, so the same bytes raise the same errors at the same
 * offsets; json_text.c writes JSON strings and numbers.
 *
 * Instead of Python objects, every value the decoder would register for REFP / ALIAS
 * is a "span": how to write its JSON text again. A container's text is a range of
 * the output (copied on reference, so sharing cannot cost more than the output it
 * produces, and the output is capped); a scalar's is its source position (written
 * again from the input, never from the output: a blessed boolean replaces the text of
 * its referent in place, so the referent's range would not survive). A span is
 * unfinished while its item is being written: a reference to it is a cycle. */
#ifndef SRL_JSON_H
#define SRL_JSON_H

#include "sereal.h"

#include "buf.h"
#include "decoder.h" /* SrlTrack, srl_is_string_tag */
#include "offtable.h"
#include "varint.h"
#include "walk.h"

/* The output cap is max(SRL_JSON_MIN_CAP, 64 x body size) bytes. */
#define SRL_JSON_MIN_CAP ((Py_ssize_t)64 << 20)

static inline Py_ssize_t
srl_json_cap(Py_ssize_t body_size)
{
    return body_size > SRL_JSON_MIN_CAP / 64 ? 64 * body_size : SRL_JSON_MIN_CAP;
}

/* What the decoder's value would be, as far as blessing cares (DESIGN.md: a boolean
 * class around a PerlRef to a plain scalar is a bool with that scalar's Perl truth). */
enum {
    JK_FALSE = 0,     /* a plain scalar, false in Perl */
    JK_TRUE = 1,      /* a plain scalar, true in Perl */
    JK_REF_FALSE = 2, /* a PerlRef to a false plain scalar */
    JK_REF_TRUE = 3,  /* a PerlRef to a true plain scalar */
    JK_OTHER = 4,     /* list, dict, other PerlRef, PerlObject, PerlRegexp */
};

/* How to write a value's JSON again. */
enum {
    JD_UNFINISHED = 0, /* being written: a reference to it is a cycle */
    JD_RANGE = 1,      /* out[a:b] */
    JD_SOURCE = 2,     /* the scalar item at position a, as a value */
    JD_CONST = 3,      /* a = 0: null, 1: true, 2: false */
};

typedef struct {
    uint8_t type; /* JD_* */
    uint8_t kind; /* JK_* */
    Py_ssize_t a, b;
} JSpan;

typedef struct {
    Py_ssize_t start, len; /* in Jx.texts */
    int truth;             /* Perl's truth of the string */
} JText;

typedef struct {
    const uint8_t *data;
    Py_ssize_t start, end, base;
    int binary;
    int max_depth;
    int depth;
    uint8_t *tag_starts;     /* bitmap: a tag was read there (as decode.c) */
    SrlOffTable tracked;     /* tag position -> span index (REFP / ALIAS targets) */
    SrlOffTable blessed;     /* referent position -> span index of its object */
    SrlOffTable class_names; /* string position -> 1 + (class is a boolean class) */
    SrlOffTable strings;     /* 2 * position + key_kind -> index into `strs` */
    struct { Py_ssize_t key, index; } recent[256]; /* direct-mapped front of `strings` */
    JSpan *spans;
    Py_ssize_t nspans, spans_cap;
    JText *strs;
    Py_ssize_t nstrs, strs_cap;
    SrlBuf texts;            /* JSON text of COPY targets, by role */
    SrlBuf out;              /* the elements' JSON, back to back */
    Py_ssize_t cap;          /* most output bytes allowed */
    /* Inside the value of an object of a boolean class, whose text a true / false
     * may yet replace, the output may run over the cap by one scalar's text. */
    int candidates;
    Py_ssize_t slack;
    int top;                 /* the next item is the body's top-level value */
    Py_ssize_t *bounds;      /* top-level array: n + 1 element boundaries in `out` */
    Py_ssize_t nbounds;
    /* A JSON-only failure (cycle, output cap): reported after the decoder has had
     * its say on the whole body, see srl_array_to_json. */
    PyObject *map_error_cls;
    const char *map_error_msg;
} Jx;

/* srl_jx_varint, _mark, _is_tag_start, _skip_pad, _enter, _string_key, _string_bytes,
 * _take, _resolve: walk.h, as the decoder's. */
SRL_WALKER_READS(Jx, srl_jx)

/* json.c (dispatch, containers, spans) and json_scalar.c (strings, COPY, numbers) */
int srl_jx_item(Jx *j, Py_ssize_t *pos, const SrlTrack *outer, JSpan *res);
int srl_jx_container(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, const SrlTrack *also,
                     int opened, int top, JSpan *res);
Py_ssize_t srl_jx_new_span(Jx *j, uint8_t type, uint8_t kind, Py_ssize_t a, Py_ssize_t b);
int srl_jx_track_all(Jx *j, const SrlTrack *track, Py_ssize_t span);
int srl_jx_map_error(Jx *j, PyObject *cls, const char *msg);
int srl_jx_check_cap(Jx *j);
/* The same, counting every byte written (no object around may turn boolean). */
int srl_jx_check_cap_exact(Jx *j);
/* Write the JSON of the string tag at tagpos (is_key: in a key's role); *after: the
 * position after it. */
int srl_jx_string(Jx *j, Py_ssize_t tagpos, int is_key, Py_ssize_t *after);
/* A key, class name or regexp part at *pos (string tag or COPY of one); written
 * when `emit`; *string_pos: where the string tag is. */
int srl_jx_key(Jx *j, Py_ssize_t *pos, const char *what, int emit, Py_ssize_t *string_pos);
/* Write a finished span's JSON again (a cycle when unfinished). */
int srl_jx_copy_span(Jx *j, Py_ssize_t span);
/* json_scalar.c helpers of the dispatch */
extern const char *const srl_jx_constants[]; /* "null", "true", "false" */
int srl_jx_string_payload(Jx *j, Py_ssize_t tagpos, const uint8_t **s, Py_ssize_t *n,
                          Py_ssize_t *after);
int srl_jx_put_string_json(Jx *j, SrlBuf *b, uint8_t tag, const uint8_t *s, Py_ssize_t n,
                           int is_key);
/* A number tag at tagpos (*pos just after the tag byte): its JSON; *truth: Perl's. */
int srl_jx_write_number(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t tag, int *truth);

/* json_refs.c */
int srl_jx_refn(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, const SrlTrack *track, int top,
                JSpan *res);
int srl_jx_refp(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, const SrlTrack *track, int plain,
                JSpan *res);
int srl_jx_alias(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, JSpan *res);
int srl_jx_copy(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, int is_key, Py_ssize_t *target,
                int *truth);
int srl_jx_object(Jx *j, Py_ssize_t tagpos, Py_ssize_t *pos, uint8_t tag, const SrlTrack *track,
                  JSpan *res);
int srl_jx_regexp(Jx *j, Py_ssize_t *pos);

/* json_text.c: JSON text into a buffer; each returns 0 or -1 (MemoryError). */
/* UTF-8 bytes as a JSON string: valid sequences verbatim, every byte that is not part
 * of one as U+FFFD (exactly the bytes Python's surrogateescape would escape). */
int srl_json_put_utf8(SrlBuf *b, const uint8_t *s, Py_ssize_t n);
int srl_json_put_latin1(SrlBuf *b, const uint8_t *s, Py_ssize_t n);
int srl_json_put_base64(SrlBuf *b, const uint8_t *s, Py_ssize_t n);
int srl_json_put_u64(SrlBuf *b, uint64_t v);
int srl_json_put_i64(SrlBuf *b, int64_t v);
/* repr(v) (Python's shortest round-trip form); NaN and infinities as null. */
int srl_json_put_double(SrlBuf *b, double v);

/* Result of a value that writes itself again from the output. */
static inline void
srl_jx_range(JSpan *res, uint8_t kind, Py_ssize_t a, Py_ssize_t b)
{
    res->type = JD_RANGE;
    res->kind = kind;
    res->a = a;
    res->b = b;
}

/* The kind of a PerlRef to a value of kind k. */
static inline uint8_t
srl_jx_ref_kind(uint8_t k)
{
    return k <= JK_TRUE ? (uint8_t)(JK_REF_FALSE + k) : JK_OTHER;
}

#endif
