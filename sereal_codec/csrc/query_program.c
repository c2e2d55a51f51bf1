/* A query program read and checked (query_eval.h has its layout). A program is data:
 * every index, count and size in it is checked here, once per call, so the walk and
 * the evaluator trust it; nothing in it names code. A bad program is a ValueError
 * naming what is wrong (substreams/query/native.py never writes one). */
#include "query_eval.h"

#include <string.h>

typedef struct {
    const int64_t *w;
    Py_ssize_t n, i;
    const uint8_t *pool;
    Py_ssize_t npool;
    QProg *prog;
} Reader;

static int
bad(const char *what, Py_ssize_t at)
{
    PyErr_Format(PyExc_ValueError, "not a query program: %s (word %zd)", what, at);
    return -1;
}

static int
word(Reader *r, int64_t lo, int64_t hi, int64_t *out, const char *what)
{
    if (r->i >= r->n)
        return bad("it ends early", r->i);
    int64_t v = r->w[r->i];
    if (v < lo || v > hi)
        return bad(what, r->i);
    r->i++;
    *out = v;
    return 0;
}

static int
operand(Reader *r)
{
    int64_t type, x;
    if (word(r, QO_PATH, QO_TYPEOF, &type, "an operand's type") < 0)
        return -1;
    if (type == QO_CONST)
        return word(r, 0, r->prog->nconsts - 1, &x, "an operand's constant");
    return word(r, 0, r->prog->nnodes - 1, &x, "an operand's path");
}

static int
predicate(Reader *r, int depth)
{
    Py_ssize_t at = r->i;
    int64_t op, size, n, x;
    if (depth > QP_MAX_DEPTH)
        return bad("a predicate nested too deep", at);
    if (word(r, QP_AND, QP_LIKE, &op, "a predicate's operator") < 0 ||
        word(r, 2, r->n - at, &size, "a predicate's size") < 0)
        return -1;
    switch (op) {
    case QP_AND:
    case QP_OR:
        if (word(r, 1, size, &n, "a count of items") < 0)
            return -1;
        for (int64_t k = 0; k < n; k++)
            if (predicate(r, depth + 1) < 0)
                return -1;
        break;
    case QP_NOT:
        if (predicate(r, depth + 1) < 0)
            return -1;
        break;
    case QP_CMP:
        if (word(r, QCMP_EQ, QCMP_GE, &x, "a comparison") < 0 || operand(r) < 0 || operand(r) < 0)
            return -1;
        break;
    case QP_IN:
        if (operand(r) < 0 || word(r, 1, size, &n, "a count of values") < 0)
            return -1;
        for (int64_t k = 0; k < n; k++)
            if (word(r, 0, r->prog->nconsts - 1, &x, "an IN value") < 0)
                return -1;
        break;
    case QP_ISNULL:
        if (operand(r) < 0)
            return -1;
        break;
    default: /* QP_LIKE */
        if (operand(r) < 0 || word(r, 0, r->prog->nconsts - 1, &x, "a LIKE prefix") < 0)
            return -1;
        if (r->prog->consts[x].t != QV_TEXT)
            return bad("a LIKE prefix that is not text", r->i - 1);
        if (word(r, 0, 1, &x, "LIKE's exact flag") < 0)
            return -1;
        break;
    }
    if (r->i - at != size)
        return bad("a predicate's size is not its words", at);
    return 0;
}

static int
pool_slice(Reader *r, int64_t off, int64_t len, const uint8_t **out)
{
    if (off < 0 || len < 0 || off > r->npool || len > r->npool - off)
        return bad("a string outside the pool", r->i);
    *out = r->pool + off;
    return 0;
}

static int
read_plan(Reader *r, QPlan *p, QOut *out, int32_t *keys, int64_t nout, int64_t nkeys)
{
    int64_t x, wlen;
    p->out = out;
    p->keys = keys;
    p->nout = (int32_t)nout;
    p->nkeys = (int32_t)nkeys;
    if (word(r, 0, r->n - r->i, &wlen, "a WHERE's length") < 0)
        return -1;
    p->where = NULL;
    if (wlen > 0) {
        Py_ssize_t at = r->i;
        p->where = r->w + at;
        if (predicate(r, 0) < 0)
            return -1;
        if (r->i - at != wlen)
            return bad("a WHERE's length is not its predicate's", at);
    }
    for (int64_t k = 0; k < nkeys; k++) {
        if (word(r, 1, r->prog->nnodes - 1, &x, "a group key's path") < 0)
            return -1;
        keys[k] = (int32_t)x;
    }
    for (int64_t k = 0; k < nout; k++) {
        QOut *o = &out[k];
        int64_t kind, a, b, c;
        memset(o, 0, sizeof *o);
        if (word(r, QOUT_PATH, QOUT_AGG, &kind, "an output's kind") < 0 ||
            word(r, -1, INT32_MAX, &a, "an output's word") < 0 ||
            word(r, -1, INT32_MAX, &b, "an output's word") < 0 ||
            word(r, 0, INT32_MAX, &c, "an output's word") < 0)
            return -1;
        o->kind = (int32_t)kind;
        if (kind == QOUT_PATH) {
            if (a < 1 || a >= r->prog->nnodes)
                return bad("an output's path", r->i - 3);
            if (p->aggregate ? (b < 0 || b >= nkeys || keys[b] != a) : b != -1)
                return bad("an output path that is not its group key", r->i - 2);
            o->node = (int32_t)a;
            o->index = (int32_t)b;
        } else if (kind == QOUT_CONST) {
            if (a < 0 || a >= r->prog->nconsts)
                return bad("an output's constant", r->i - 3);
            o->index = (int32_t)a;
        } else {
            if (!p->aggregate || a < QF_COUNT || a > QF_HISTOGRAM || b >= r->prog->nnodes ||
                b == 0 || (b < 0 && a != QF_COUNT) || (c > 0 && a != QF_HISTOGRAM))
                return bad("an aggregate", r->i - 3);
            o->fn = (int32_t)a;
            o->node = (int32_t)b;
            o->index = p->naggs++;
            o->nbounds = (int32_t)c;
            o->bounds = (int32_t)r->i;
            o->cell = p->ncells;
            for (int64_t j = 0; j < c; j++) {
                if (word(r, 0, r->prog->nconsts - 1, &x, "a histogram bound") < 0)
                    return -1;
                int t = r->prog->consts[x].t;
                if (t != QV_INT && t != QV_UINT && t != QV_FLOAT && t != QV_BOOL)
                    return bad("a histogram bound that is not a number", r->i - 1);
            }
            if (a == QF_HISTOGRAM)
                p->ncells += (int32_t)c + 1;
        }
    }
    return 0;
}

int
srl_query_program(QProg *prog, const int64_t *words, Py_ssize_t nwords, const uint8_t *pool,
                  Py_ssize_t npool)
{
    Reader r = {words, nwords, 0, pool, npool, prog};
    int64_t magic, nnodes, nconsts, nplans, x;
    memset(prog, 0, sizeof *prog);
    if (word(&r, QPROG_MAGIC, QPROG_MAGIC, &magic, "no magic") < 0 ||
        word(&r, 1, nwords, &nnodes, "a count of paths") < 0 ||
        word(&r, 0, nwords, &nconsts, "a count of constants") < 0 ||
        word(&r, 0, nwords, &nplans, "a count of plans") < 0)
        return -1;
    /* Every output and key takes a word at least: nwords bounds their counts. */
    size_t size = (size_t)nnodes * sizeof(QNode) + (size_t)nconsts * sizeof(QVal) +
                  (size_t)nplans * sizeof(QPlan) + (size_t)nwords * (sizeof(QOut) + 4);
    char *mem = PyMem_Calloc(1, size);
    if (mem == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    prog->mem = mem;
    prog->words = words;
    prog->nodes = (QNode *)mem;
    prog->consts = (QVal *)(prog->nodes + nnodes);
    prog->plans = (QPlan *)(prog->consts + nconsts);
    QOut *outs = (QOut *)(prog->plans + nplans);
    int32_t *keys = (int32_t *)(outs + nwords);
    prog->nnodes = (int32_t)nnodes;
    prog->nconsts = (int32_t)nconsts;
    prog->nplans = (int32_t)nplans;
    for (int32_t k = 0; k < prog->nnodes; k++)
        prog->nodes[k].parent = prog->nodes[k].first_child = prog->nodes[k].next_sibling = -1;
    for (int64_t k = 1; k < nnodes; k++) {
        QNode *node = &prog->nodes[k];
        int64_t parent, off, len, index;
        if (word(&r, 0, k - 1, &parent, "a path's parent") < 0 ||
            word(&r, 0, npool, &off, "a key's offset") < 0 ||
            word(&r, 0, npool, &len, "a key's length") < 0 ||
            word(&r, INT64_MIN, INT64_MAX, &index, "an index") < 0 ||
            pool_slice(&r, off, len, &node->key) < 0)
            return -1;
        node->key_len = (Py_ssize_t)len;
        node->has_index = index != QNO_INDEX;
        node->index = index;
        node->parent = (int32_t)parent;
        /* children in order: append */
        int32_t *link = &prog->nodes[parent].first_child;
        while (*link >= 0)
            link = &prog->nodes[*link].next_sibling;
        *link = (int32_t)k;
    }
    for (int64_t k = 0; k < nconsts; k++) {
        QVal *c = &prog->consts[k];
        int64_t kind, a, b;
        if (word(&r, QK_UNDEF, QK_TEXT, &kind, "a constant's kind") < 0 ||
            word(&r, INT64_MIN, INT64_MAX, &a, "a constant") < 0 ||
            word(&r, INT64_MIN, INT64_MAX, &b, "a constant") < 0)
            return -1;
        switch (kind) {
        case QK_UNDEF:
            c->t = QV_UNDEF;
            break;
        case QK_BOOL:
            c->t = QV_BOOL;
            c->i = a != 0;
            break;
        case QK_INT:
            c->t = QV_INT;
            c->i = a;
            break;
        case QK_UINT:
            c->t = QV_UINT;
            c->u = (uint64_t)a;
            if (c->u <= INT64_MAX)
                return bad("a UINT constant within int64", r.i - 2);
            break;
        case QK_FLOAT:
            c->t = QV_FLOAT;
            memcpy(&c->d, &a, 8);
            if (c->d != c->d)
                return bad("a NaN constant", r.i - 2);
            break;
        default:
            c->t = QV_TEXT;
            c->tag = SRL_STR_UTF8;
            if (pool_slice(&r, a, b, &c->s) < 0)
                return -1;
            c->n = (Py_ssize_t)b;
            break;
        }
    }
    for (int64_t k = 0; k < nplans; k++) {
        QPlan *p = &prog->plans[k];
        int64_t agg, cap, nout, nkeys;
        if (word(&r, 0, 1, &agg, "a plan's kind") < 0 ||
            word(&r, 0, INT64_MAX, &cap, "a plan's max_result_bytes") < 0 ||
            word(&r, 0, nwords, &nout, "a plan's count of outputs") < 0 ||
            word(&r, 0, agg ? nwords : 0, &nkeys, "a plan's count of keys") < 0)
            return -1;
        p->aggregate = (int)agg;
        p->max_result_bytes = cap;
        if (read_plan(&r, p, outs, keys, nout, nkeys) < 0)
            return -1;
        outs += nout;
        keys += nkeys;
    }
    if (r.i != nwords)
        return bad("words after the last plan", r.i);
    (void)x;
    return 0;
}

void
srl_query_program_free(QProg *prog)
{
    PyMem_Free(prog->mem);
    prog->mem = NULL;
}
