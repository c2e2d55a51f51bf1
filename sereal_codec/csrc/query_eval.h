/* The native evaluator of declarative substreams' plans (sereal_codec/DESIGN.md,
 * "Query evaluation"; substreams/DESIGN.md, "Declarative substreams"): one walk of a
 * chunk's array body evaluates every plan of the program, comparing values in place.
 *
 *   query_program.c  the program (a flat array of int64 words and a byte pool, built
 *                    by substreams/query/native.py) checked and read into QProg;
 *   query_walk.c     the walk: each event's values at the program's paths (QVal), no
 *                    Python object, no GIL; anything it does not take: "not handled";
 *   query_rows.c     WHERE, the SELECT rows and the groups and aggregates (no GIL);
 *   query_py.c       the entry point and the result's Python objects (GIL).
 *
 * The program (all words int64; node 0 is the event itself, never written):
 *   QPROG_MAGIC, nnodes, nconsts, nplans,
 *   nodes 1..nnodes-1: parent, key offset in the pool, key length, index (QNO_INDEX:
 *       the part is no decimal number); a parent comes before its children;
 *   consts: kind (QK_*), a, b: BOOL a = 0 / 1, INT a, UINT a (bits), FLOAT a (the
 *       double's bits), TEXT pool offset a, length b (UTF-8);
 *   plans: aggregate, max_result_bytes, nout, nkeys, where_len, then where_len words
 *       of the predicate (QP_*, below; 0: none), nkeys group key nodes, and nout
 *       outputs of 4 words: QOUT_PATH node key_index(-1 for a SELECT) 0;
 *       QOUT_CONST const 0 0; QOUT_AGG fn node(-1: count(*)) nbounds, then nbounds
 *       constants (numbers).
 * A predicate node is [op, size (its words, these two included), ...]:
 *   QP_AND / QP_OR n items...; QP_NOT item; QP_CMP cmp operand operand;
 *   QP_IN operand n consts...; QP_ISNULL operand; QP_LIKE operand const(text) exact;
 *   an operand is two words: QO_PATH node, QO_CONST const, QO_TYPEOF node.
 *
 * "Not handled" is never an error of the walk's own: the caller then decodes the chunk
 * and runs the reference evaluator (substreams/query/evaluate.py), which answers with
 * its rows or the decoder's error. */
#ifndef SRL_QUERY_H
#define SRL_QUERY_H

#include "sereal.h"

/* A value as the walk found it at a path. */
enum {
    QV_MISSING, /* no such path */
    QV_UNDEF,   /* None */
    QV_NAN,     /* a float NaN (NULL to a query; built as the float it is) */
    QV_BOOL,    /* i: 0 / 1 */
    QV_INT,     /* i */
    QV_UINT,    /* u > INT64_MAX */
    QV_FLOAT,   /* d, not NaN */
    QV_TEXT,    /* s[0:n]; tag: SRL_STR_UTF8 or SRL_BINARY (how it is built) */
    QV_LIST,
    QV_MAP,
    QV_OTHER, /* a PerlRef (REFN to a scalar or a reference) */
};

/* Comparison classes (substreams/query/values.py). */
enum { QC_NULL, QC_NUMBER, QC_TEXT, QC_OTHER };

typedef struct {
    uint8_t t;   /* QV_* */
    uint8_t tag; /* QV_TEXT: its string tag; floats: the float tag (how it is built) */
    Py_ssize_t n;
    const uint8_t *s; /* QV_TEXT: the bytes; floats: the payload */
    union {
        int64_t i;
        uint64_t u;
        double d;
    };
} QVal;

/* A node of the paths' trie: node 0 is the event; a node's key is one part of a path,
 * which also indexes a list when it is a decimal number (has_index, index). */
typedef struct {
    int32_t parent, first_child, next_sibling;
    int32_t has_index;
    int64_t index;
    const uint8_t *key;
    Py_ssize_t key_len;
} QNode;

#define QPROG_MAGIC 0x51505230 /* "QPR0" */
#define QNO_INDEX INT64_MIN
enum { QK_UNDEF, QK_BOOL, QK_INT, QK_UINT, QK_FLOAT, QK_TEXT };
enum { QP_AND = 1, QP_OR, QP_NOT, QP_CMP, QP_IN, QP_ISNULL, QP_LIKE };
enum { QO_PATH, QO_CONST, QO_TYPEOF };
enum { QCMP_EQ, QCMP_NE, QCMP_LT, QCMP_LE, QCMP_GT, QCMP_GE };
/* Deepest predicate nesting a program may have (the evaluator recurses). */
#define QP_MAX_DEPTH 64

enum { QOUT_PATH, QOUT_CONST, QOUT_AGG };
enum { QF_COUNT, QF_SUM, QF_MIN, QF_MAX, QF_HISTOGRAM };

typedef struct {
    int32_t kind;   /* QOUT_* */
    int32_t node;   /* QOUT_PATH, QOUT_AGG: the path's node (-1: count(*)) */
    int32_t index;  /* QOUT_CONST: the constant; QOUT_PATH of a group: the key index;
                     * QOUT_AGG: the aggregate's index */
    int32_t fn;     /* QOUT_AGG: QF_* */
    int32_t nbounds, bounds; /* QF_HISTOGRAM: its bounds, constants bounds.. */
    int32_t cell;   /* QF_HISTOGRAM: first bucket in a group's bucket cells */
} QOut;

typedef struct {
    int aggregate;
    int64_t max_result_bytes;
    int32_t nout, nkeys, naggs, ncells;
    const int64_t *where; /* NULL: every event */
    QOut *out;
    int32_t *keys; /* the group keys' nodes */
} QPlan;

typedef struct {
    int32_t nnodes, nconsts, nplans;
    const int64_t *words; /* the program (histogram bounds are read from it) */
    QNode *nodes;
    QVal *consts;
    QPlan *plans;
    void *mem; /* one block holding the arrays above */
} QProg;

/* query_program.c: read and check a program (0, or -1 with ValueError). The QProg
 * points into words and pool, which must outlive it. */
int srl_query_program(QProg *prog, const int64_t *words, Py_ssize_t nwords,
                      const uint8_t *pool, Py_ssize_t npool);
void srl_query_program_free(QProg *prog);

/* One aggregate's state in one group. */
typedef struct {
    int64_t count;
    int sum_kind; /* 0 None, 1 int (isum), 2 float (dsum) */
    __int128 isum;
    double dsum;
    QVal extreme; /* min / max: QV_MISSING until a value */
} QAgg;

/* One plan's result while the walk goes: rows (SELECT) or groups. */
typedef struct {
    int over;              /* past max_result_bytes: the reference answers this plan */
    int64_t bytes;         /* an estimate of the stored result's size */
    Py_ssize_t nrows, cap; /* SELECT: rows x nout values; groups: groups */
    QVal *vals;            /* SELECT: the rows' values; GROUP BY: each group's keys */
    uint64_t *hash;        /* GROUP BY: each group's hash */
    QAgg *aggs;            /* GROUP BY: naggs a group */
    int64_t *cells;        /* GROUP BY: ncells histogram buckets a group */
    int32_t *table;        /* GROUP BY: open addressing, group index + 1 */
    Py_ssize_t table_cap;
} QResult;

/* The walk's state. */
typedef struct {
    const uint8_t *data;
    Py_ssize_t start, end, base;
    int max_depth, depth;
    Py_ssize_t objects_left; /* -1: no budget */
    uint8_t *tag_starts;
    const QProg *prog;
    QVal *vals;     /* one a node, this event's */
    uint32_t *seen; /* the event a node's value is from */
    uint32_t event;
    QResult *results; /* one a plan */
} QWalk;

/* query_walk.c: walk the array body; after each event, srl_query_event. 0, or -1: not
 * handled. No Python API: runs without the GIL. */
int srl_query_walk(QWalk *w);

/* query_rows.c */
int srl_query_event(QWalk *w);
void srl_query_results_free(QResult *r, Py_ssize_t n);
int srl_query_class(const QVal *v);
/* -1, 0, 1: two numbers by value, two texts by code point (the same class). */
int srl_query_cmp(const QVal *a, const QVal *b);

#endif
