/* A query's semantics on the values the walk read (query_eval.h), without the GIL: the
 * WHERE (three-valued), a SELECT's rows (their values recorded, built later by
 * query_py.c), a GROUP BY's groups and aggregates. The rules are those of the
 * reference (substreams/query/values.py, aggregate.py, evaluate.py), restated for
 * values in place:
 *   - classes: NULL (missing, undef, NaN), NUMBER (bool, int, float), TEXT, OTHER;
 *   - numbers compare by value, int against float exactly (as Python does);
 *   - texts are the bytes' UTF-8 reading with surrogateescape (the codec's default
 *     mode, whatever mode the chunk is built in): equal when their bytes are (that
 *     reading is one-to-one), ordered by code point (a byte not in a valid sequence is
 *     U+DC80..U+DCFF, as surrogateescape makes it);
 *   - group keys keep their kind (bool, integer, float, text); NULL and containers are
 *     the NULL group; -0.0 and 0.0 one group. */
#include "query_eval.h"
#include "text.h"

#include <math.h>
#include <string.h>

#define QW_NO (-1)
enum { Q_FALSE = 0, Q_TRUE = 1, Q_UNKNOWN = 2 };

static const QVal missing = {.t = QV_MISSING};

static inline const QVal *
at(const QWalk *w, int32_t node)
{
    return w->seen[node] == w->event ? &w->vals[node] : &missing;
}

int
srl_query_class(const QVal *v)
{
    switch (v->t) {
    case QV_MISSING:
    case QV_UNDEF:
    case QV_NAN:
        return QC_NULL;
    case QV_BOOL:
    case QV_INT:
    case QV_UINT:
    case QV_FLOAT:
        return QC_NUMBER;
    case QV_TEXT:
        return QC_TEXT;
    default:
        return QC_OTHER;
    }
}

/* An integer (i, or u above INT64_MAX) against a double that is not NaN, exactly. */
static int
int_vs_double(const QVal *a, double d)
{
    if (a->t == QV_UINT) {
        if (d >= 18446744073709551616.0)
            return -1;
        if (d < 9223372036854775808.0)
            return 1;
        double t = trunc(d);
        uint64_t tu = (uint64_t)t;
        if (a->u != tu)
            return a->u < tu ? -1 : 1;
        return d > t ? -1 : 0;
    }
    if (d >= 9223372036854775808.0)
        return -1;
    if (d < -9223372036854775808.0)
        return 1;
    double t = trunc(d);
    int64_t ti = (int64_t)t;
    if (a->i != ti)
        return a->i < ti ? -1 : 1;
    return d > t ? -1 : d < t ? 1 : 0;
}

static int
num_cmp(const QVal *a, const QVal *b)
{
    int fa = a->t == QV_FLOAT, fb = b->t == QV_FLOAT;
    if (fa && fb)
        return (a->d > b->d) - (a->d < b->d);
    if (fa)
        return -int_vs_double(b, a->d);
    if (fb)
        return int_vs_double(a, b->d);
    int ua = a->t == QV_UINT, ub = b->t == QV_UINT;
    if (ua || ub) {
        if (ua && ub)
            return (a->u > b->u) - (a->u < b->u);
        return ua ? 1 : -1; /* above INT64_MAX against an int64 */
    }
    return (a->i > b->i) - (a->i < b->i);
}

/* The next code point of s[0:n] at *i, as Python's UTF-8 decoder with surrogateescape
 * reads it: a valid sequence its code point, any other byte U+DC00 + the byte. */
static inline uint32_t
next_cp(const uint8_t *s, Py_ssize_t n, Py_ssize_t *i)
{
    Py_ssize_t k = *i;
    uint8_t b = s[k];
    if (b < 0x80) {
        *i = k + 1;
        return b;
    }
    int len = srl_utf8_seq(s + k, n - k);
    if (len == 0) {
        *i = k + 1;
        return 0xdc00 + b;
    }
    uint32_t cp = b & (0x7f >> len);
    for (int j = 1; j < len; j++)
        cp = cp << 6 | (s[k + j] & 0x3f);
    *i = k + len;
    return cp;
}

static int
ascii(const uint8_t *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] >= 0x80)
            return 0;
    return 1;
}

static int
text_cmp(const QVal *a, const QVal *b)
{
    if (ascii(a->s, a->n) && ascii(b->s, b->n)) {
        Py_ssize_t m = a->n < b->n ? a->n : b->n;
        int c = m ? memcmp(a->s, b->s, (size_t)m) : 0;
        if (c)
            return c < 0 ? -1 : 1;
        return (a->n > b->n) - (a->n < b->n);
    }
    Py_ssize_t i = 0, j = 0;
    while (i < a->n && j < b->n) {
        uint32_t x = next_cp(a->s, a->n, &i), y = next_cp(b->s, b->n, &j);
        if (x != y)
            return x < y ? -1 : 1;
    }
    return (i < a->n) - (j < b->n);
}

int
srl_query_cmp(const QVal *a, const QVal *b)
{
    return a->t == QV_TEXT ? text_cmp(a, b) : num_cmp(a, b);
}

static inline int
text_eq(const QVal *a, const QVal *b)
{
    return a->n == b->n && (a->n == 0 || memcmp(a->s, b->s, (size_t)a->n) == 0);
}

/* Same class (NUMBER or TEXT): equal by value. */
static inline int
equal(const QVal *a, const QVal *b)
{
    return a->t == QV_TEXT ? text_eq(a, b) : num_cmp(a, b) == 0;
}

static const char *const kind_names[] = {
    [QV_MISSING] = "null", [QV_UNDEF] = "null", [QV_NAN] = "null",   [QV_BOOL] = "boolean",
    [QV_INT] = "integer",  [QV_UINT] = "integer", [QV_FLOAT] = "float", [QV_TEXT] = "text",
    [QV_LIST] = "list",    [QV_MAP] = "map",    [QV_OTHER] = "other",
};

static inline const QVal *
operand(const QWalk *w, const int64_t *o, QVal *tmp)
{
    if (o[0] == QO_CONST)
        return &w->prog->consts[o[1]];
    const QVal *v = at(w, (int32_t)o[1]);
    if (o[0] == QO_PATH)
        return v;
    tmp->t = QV_TEXT; /* typeof(path) */
    tmp->tag = SRL_STR_UTF8;
    tmp->s = (const uint8_t *)kind_names[v->t];
    tmp->n = (Py_ssize_t)strlen(kind_names[v->t]);
    return tmp;
}

static int
like(const QVal *v, const QVal *prefix, int exact)
{
    Py_ssize_t i = 0, j = 0;
    while (j < prefix->n) {
        if (i >= v->n)
            return Q_FALSE;
        uint32_t p = next_cp(prefix->s, prefix->n, &j), c = next_cp(v->s, v->n, &i);
        if (p != '_' && p != c)
            return Q_FALSE;
    }
    return exact && i < v->n ? Q_FALSE : Q_TRUE;
}

/* The predicate at p: Q_TRUE, Q_FALSE or Q_UNKNOWN (a NULL was compared). */
static int
eval(const QWalk *w, const int64_t *p)
{
    QVal ta, tb;
    const QVal *a, *b;
    int r, unknown = 0, ca;
    switch (p[0]) {
    case QP_AND:
    case QP_OR: {
        const int64_t *q = p + 3;
        int stop = p[0] == QP_AND ? Q_FALSE : Q_TRUE;
        for (int64_t k = 0; k < p[2]; k++, q += q[1]) {
            r = eval(w, q);
            if (r == stop)
                return stop;
            unknown |= r == Q_UNKNOWN;
        }
        return unknown ? Q_UNKNOWN : !stop;
    }
    case QP_NOT:
        r = eval(w, p + 2);
        return r == Q_UNKNOWN ? r : !r;
    case QP_CMP: {
        a = operand(w, p + 3, &ta);
        b = operand(w, p + 5, &tb);
        ca = srl_query_class(a);
        int cb = srl_query_class(b);
        if (ca == QC_NULL || cb == QC_NULL)
            return Q_UNKNOWN;
        if (ca != cb || ca == QC_OTHER)
            return p[2] == QCMP_NE; /* other kinds: not equal, not ordered */
        if (p[2] == QCMP_EQ || p[2] == QCMP_NE)
            return equal(a, b) == (p[2] == QCMP_EQ);
        int c = srl_query_cmp(a, b);
        switch (p[2]) {
        case QCMP_LT:
            return c < 0;
        case QCMP_LE:
            return c <= 0;
        case QCMP_GT:
            return c > 0;
        default:
            return c >= 0;
        }
    }
    case QP_IN:
        a = operand(w, p + 2, &ta);
        ca = srl_query_class(a);
        if (ca == QC_NULL)
            return Q_UNKNOWN;
        if (ca == QC_OTHER)
            return Q_FALSE;
        for (int64_t k = 0; k < p[4]; k++) {
            b = &w->prog->consts[p[5 + k]];
            if (srl_query_class(b) == ca && equal(a, b))
                return Q_TRUE;
        }
        return Q_FALSE;
    case QP_ISNULL:
        return srl_query_class(operand(w, p + 2, &ta)) == QC_NULL;
    default: /* QP_LIKE */
        a = operand(w, p + 2, &ta);
        ca = srl_query_class(a);
        if (ca == QC_NULL)
            return Q_UNKNOWN;
        if (ca != QC_TEXT)
            return Q_FALSE;
        return like(a, &w->prog->consts[p[4]], (int)p[5]);
    }
}

/* *array resized to n items of size bytes (at least one). */
static int
resize(void **array, Py_ssize_t n, size_t size)
{
    void *a = PyMem_RawRealloc(*array, (size_t)(n > 0 ? n : 1) * size);
    if (a == NULL)
        return QW_NO;
    *array = a;
    return 0;
}

/* Room for one more row or group in r (cap: rows or groups). */
static int
room(const QPlan *p, QResult *r)
{
    if (r->nrows < r->cap)
        return 0;
    Py_ssize_t cap = r->cap ? 2 * r->cap : 16;
    if (!p->aggregate)
        return resize((void **)&r->vals, cap * p->nout, sizeof(QVal)) < 0 ? QW_NO
                                                                          : (r->cap = cap, 0);
    if (resize((void **)&r->hash, cap, sizeof *r->hash) < 0 ||
        resize((void **)&r->vals, cap * p->nkeys, sizeof(QVal)) < 0 ||
        resize((void **)&r->aggs, cap * p->naggs, sizeof(QAgg)) < 0 ||
        resize((void **)&r->cells, cap * p->ncells, sizeof(int64_t)) < 0)
        return QW_NO;
    r->cap = cap;
    return 0;
}

/* An estimate of what a value adds to the stored result (its tag and payload). */
static inline int64_t
value_bytes(const QVal *v)
{
    return v->t == QV_TEXT ? v->n + 2 : v->t == QV_MISSING || v->t == QV_UNDEF ? 1 : 9;
}

static int
select_row(const QWalk *w, const QPlan *p, QResult *r)
{
    if (r->over)
        return 0;
    if (room(p, r) < 0)
        return QW_NO;
    QVal *row = r->vals + r->nrows * p->nout;
    r->bytes += 1;
    for (int32_t k = 0; k < p->nout; k++) {
        if (p->out[k].kind != QOUT_PATH) {
            row[k] = missing;
            continue;
        }
        const QVal *v = at(w, p->out[k].node);
        if (srl_query_class(v) == QC_OTHER)
            return QW_NO; /* a container as a column: the reference builds it */
        row[k] = *v;
        r->bytes += value_bytes(v) + 1;
    }
    r->nrows++;
    if (r->bytes > p->max_result_bytes) { /* over its cap: the reference answers it */
        r->over = 1;
        PyMem_RawFree(r->vals);
        r->vals = NULL;
        r->nrows = r->cap = 0;
    }
    return 0;
}

static inline uint64_t
mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

/* The group a value falls in: 0 the NULL group, else its kind (values.group_key). */
static inline int
group_kind(const QVal *v)
{
    switch (v->t) {
    case QV_BOOL:
        return 1;
    case QV_INT:
    case QV_UINT:
        return 2;
    case QV_FLOAT:
        return 3;
    case QV_TEXT:
        return 4;
    default:
        return 0;
    }
}

static uint64_t
key_hash(const QVal *v)
{
    int kind = group_kind(v);
    uint64_t h = (uint64_t)kind, x = 0;
    if (kind == 4) {
        h = 1469598103934665603ULL;
        for (Py_ssize_t i = 0; i < v->n; i++)
            h = (h ^ v->s[i]) * 1099511628211ULL;
        return mix(h, 4);
    }
    if (kind == 3) {
        double d = v->d == 0 ? 0.0 : v->d;
        memcpy(&x, &d, 8);
    } else if (kind) {
        x = v->u; /* the same bits for i */
    }
    return mix(h, x);
}

static inline int
key_eq(const QVal *a, const QVal *b)
{
    int ka = group_kind(a);
    if (ka != group_kind(b))
        return 0;
    switch (ka) {
    case 0:
        return 1;
    case 3:
        return a->d == b->d;
    case 4:
        return text_eq(a, b);
    default:
        return a->t == b->t && a->u == b->u;
    }
}

static Py_ssize_t
find_group(const QWalk *w, const QPlan *p, QResult *r)
{
    uint64_t h = 0x5bd1e995;
    for (int32_t k = 0; k < p->nkeys; k++)
        h = mix(h, key_hash(at(w, p->keys[k])));
    if (2 * (r->nrows + 1) > r->table_cap) { /* rehash at half full */
        Py_ssize_t cap = r->table_cap ? 2 * r->table_cap : 64;
        int32_t *t = PyMem_RawCalloc((size_t)cap, sizeof *t);
        if (t == NULL)
            return QW_NO;
        for (Py_ssize_t g = 0; g < r->nrows; g++) {
            Py_ssize_t s = (Py_ssize_t)(r->hash[g] & (uint64_t)(cap - 1));
            while (t[s])
                s = (s + 1) & (cap - 1);
            t[s] = (int32_t)g + 1;
        }
        PyMem_RawFree(r->table);
        r->table = t;
        r->table_cap = cap;
    }
    Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(r->table_cap - 1));
    for (; r->table[s]; s = (s + 1) & (r->table_cap - 1)) {
        Py_ssize_t g = r->table[s] - 1;
        if (r->hash[g] != h)
            continue;
        const QVal *keys = r->vals + g * p->nkeys;
        int32_t k = 0;
        while (k < p->nkeys && key_eq(&keys[k], at(w, p->keys[k])))
            k++;
        if (k == p->nkeys)
            return g;
    }
    /* a new group: its keys' first values, empty aggregates */
    Py_ssize_t g = r->nrows;
    if (g >= INT32_MAX - 1 || room(p, r) < 0)
        return QW_NO;
    r->hash[g] = h;
    for (int32_t k = 0; k < p->nkeys; k++) {
        const QVal *v = at(w, p->keys[k]);
        r->vals[g * p->nkeys + k] = group_kind(v) ? *v : missing;
    }
    memset(r->aggs + g * p->naggs, 0, (size_t)p->naggs * sizeof(QAgg));
    memset(r->cells + g * p->ncells, 0, (size_t)p->ncells * sizeof(int64_t));
    r->nrows = g + 1;
    r->table[s] = (int32_t)g + 1;
    return g;
}

/* sum: None until a NUMBER, then ints exact while in -2**63..2**64-1, else a float
 * (aggregate._fit); an int meeting a float becomes a float as Python adds them. */
static void
sum_step(QAgg *a, const QVal *v)
{
    if (a->sum_kind == 0) {
        a->sum_kind = 1;
        a->isum = 0;
    }
    if (a->sum_kind == 1) {
        if (v->t == QV_FLOAT) {
            a->dsum = (double)a->isum + v->d;
            a->sum_kind = 2;
            return;
        }
        a->isum += v->t == QV_UINT ? (__int128)v->u : (__int128)v->i;
        if (a->isum < (__int128)INT64_MIN || a->isum > (__int128)UINT64_MAX) {
            a->dsum = (double)a->isum;
            a->sum_kind = 2;
        }
        return;
    }
    a->dsum += v->t == QV_FLOAT ? v->d : v->t == QV_UINT ? (double)v->u : (double)v->i;
}

/* min / max: numbers by value before texts by code point; the first of equals kept. */
static void
extreme_step(QAgg *a, const QVal *v, int is_min)
{
    int c = srl_query_class(v);
    if (c != QC_NUMBER && c != QC_TEXT)
        return;
    if (a->extreme.t == QV_MISSING) {
        a->extreme = *v;
        return;
    }
    int held = srl_query_class(&a->extreme);
    int order = c != held ? (c < held ? -1 : 1) : srl_query_cmp(v, &a->extreme);
    if (is_min ? order < 0 : order > 0)
        a->extreme = *v;
}

static int
group_step(const QWalk *w, const QPlan *p, QResult *r)
{
    Py_ssize_t g = find_group(w, p, r);
    if (g < 0)
        return QW_NO;
    QAgg *aggs = r->aggs + g * p->naggs;
    int64_t *cells = r->cells + g * p->ncells;
    for (int32_t k = 0; k < p->nout; k++) {
        const QOut *o = &p->out[k];
        if (o->kind != QOUT_AGG)
            continue;
        QAgg *a = &aggs[o->index];
        const QVal *v = o->node >= 0 ? at(w, o->node) : &missing;
        int c = srl_query_class(v);
        switch (o->fn) {
        case QF_COUNT:
            a->count += o->node < 0 || c != QC_NULL;
            break;
        case QF_SUM:
            if (c == QC_NUMBER)
                sum_step(a, v);
            break;
        case QF_MIN:
        case QF_MAX:
            extreme_step(a, v, o->fn == QF_MIN);
            break;
        default: /* QF_HISTOGRAM: bisect_left */
            if (c == QC_NUMBER) {
                const int64_t *bounds = w->prog->words + o->bounds;
                int32_t i = 0;
                while (i < o->nbounds && srl_query_cmp(&w->prog->consts[bounds[i]], v) < 0)
                    i++;
                cells[o->cell + i]++;
            }
            break;
        }
    }
    return 0;
}

int
srl_query_event(QWalk *w)
{
    for (int32_t k = 0; k < w->prog->nplans; k++) {
        const QPlan *p = &w->prog->plans[k];
        if (p->where != NULL && eval(w, p->where) != Q_TRUE)
            continue;
        if ((p->aggregate ? group_step(w, p, &w->results[k]) : select_row(w, p, &w->results[k])) < 0)
            return QW_NO;
    }
    return 0;
}

void
srl_query_results_free(QResult *r, Py_ssize_t n)
{
    for (Py_ssize_t k = 0; r != NULL && k < n; k++) {
        PyMem_RawFree(r[k].vals);
        PyMem_RawFree(r[k].hash);
        PyMem_RawFree(r[k].aggs);
        PyMem_RawFree(r[k].cells);
        PyMem_RawFree(r[k].table);
    }
    PyMem_RawFree(r);
}
