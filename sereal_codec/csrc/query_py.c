/* query_evaluate: the entry point of the native query evaluator (query_eval.h). The
 * walk and the evaluation run without the GIL; the result's Python objects (the rows
 * of a SELECT, one row a group of a GROUP BY) are built after it, from the values
 * recorded in place. None: not handled (the caller decodes the chunk and runs the
 * reference evaluator, which answers). */
#include "query_eval.h"

#include "walk.h"

#include <string.h>

/* A value as the decoder builds it (decode.c's make_string and read_number). */
static PyObject *
build(const QVal *v, int binary)
{
    double d;
    switch (v->t) {
    case QV_BOOL:
        return PyBool_FromLong((long)v->i);
    case QV_INT:
        return PyLong_FromLongLong(v->i);
    case QV_UINT:
        return PyLong_FromUnsignedLongLong(v->u);
    case QV_NAN:
    case QV_FLOAT:
        switch (srl_tag_kind(v->tag)) {
        case SRL_K_FLOAT:
            return PyFloat_FromDouble(PyFloat_Unpack4((const char *)v->s, 1));
        case SRL_K_DOUBLE:
            memcpy(&d, v->s, 8);
            return PyFloat_FromDouble(d);
        default:
            return PyFloat_FromDouble(v->d); /* the wide floats, rounded as decoded */
        }
    case QV_TEXT:
        if (v->tag != SRL_STR_UTF8 && binary == SRL_BINARY_BYTES)
            return PyBytes_FromStringAndSize((const char *)v->s, v->n);
        return srl_str_from_utf8(v->s, v->n);
    default:
        return Py_NewRef(Py_None);
    }
}

static int
put(PyObject *row, PyObject *name, PyObject *value)
{
    if (value == NULL)
        return -1;
    int rc = PyDict_SetItem(row, name, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *
sum_value(const QAgg *a)
{
    if (a->sum_kind == 0)
        return Py_NewRef(Py_None);
    if (a->sum_kind == 2)
        return PyFloat_FromDouble(a->dsum);
    if (a->isum >= (__int128)INT64_MIN && a->isum <= (__int128)INT64_MAX)
        return PyLong_FromLongLong((long long)a->isum);
    return PyLong_FromUnsignedLongLong((unsigned long long)a->isum);
}

static PyObject *
aggregate_value(const QOut *o, const QAgg *a, const int64_t *cells, int binary)
{
    switch (o->fn) {
    case QF_COUNT:
        return PyLong_FromLongLong(a->count);
    case QF_SUM:
        return sum_value(a);
    case QF_MIN:
    case QF_MAX:
        return build(&a->extreme, binary);
    default: {
        PyObject *buckets = PyList_New(o->nbounds + 1);
        for (int32_t i = 0; buckets != NULL && i <= o->nbounds; i++) {
            PyObject *n = PyLong_FromLongLong(cells[o->cell + i]);
            if (n == NULL)
                Py_CLEAR(buckets);
            else
                PyList_SET_ITEM(buckets, i, n);
        }
        return buckets;
    }
    }
}

/* One row: the plan's outputs from a SELECT's values, or a group's keys and aggregates. */
static PyObject *
row(const QPlan *p, PyObject *names, PyObject *consts, const QVal *vals, const QAgg *aggs,
    const int64_t *cells, int binary)
{
    PyObject *d = PyDict_New();
    for (int32_t k = 0; d != NULL && k < p->nout; k++) {
        const QOut *o = &p->out[k];
        PyObject *name = PyTuple_GET_ITEM(names, k), *value;
        if (o->kind == QOUT_CONST)
            value = Py_NewRef(PyTuple_GET_ITEM(consts, o->index));
        else if (o->kind == QOUT_PATH)
            value = build(&vals[p->aggregate ? o->index : k], binary);
        else
            value = aggregate_value(o, &aggs[o->index], cells, binary);
        if (put(d, name, value) < 0)
            Py_CLEAR(d);
    }
    return d;
}

static PyObject *
plan_rows(const QPlan *p, const QResult *r, PyObject *names, PyObject *consts, int binary)
{
    if (r->over)
        return Py_NewRef(Py_None);
    PyObject *rows = PyList_New(0);
    Py_ssize_t n = r->nrows;
    QAgg *empty = NULL;
    int64_t *zeros = NULL;
    if (p->aggregate && n == 0 && p->nkeys == 0) { /* aggregates of no event: one row */
        empty = PyMem_Calloc((size_t)p->naggs + 1, sizeof *empty);
        zeros = PyMem_Calloc((size_t)p->ncells + 1, sizeof *zeros);
        if (empty == NULL || zeros == NULL)
            Py_CLEAR(rows);
        n = 1;
    }
    for (Py_ssize_t g = 0; rows != NULL && g < n; g++) {
        PyObject *one;
        if (!p->aggregate)
            one = row(p, names, consts, r->vals + g * p->nout, NULL, NULL, binary);
        else if (empty != NULL)
            one = row(p, names, consts, NULL, empty, zeros, binary);
        else
            one = row(p, names, consts, r->vals + g * p->nkeys, r->aggs + g * p->naggs,
                      r->cells + g * p->ncells, binary);
        if (one == NULL || PyList_Append(rows, one) < 0)
            Py_CLEAR(rows);
        Py_XDECREF(one);
    }
    PyMem_Free(empty);
    PyMem_Free(zeros);
    return rows;
}

static int
check_names(const QProg *prog, PyObject *names, PyObject *consts)
{
    if (!PyTuple_Check(names) || PyTuple_GET_SIZE(names) != prog->nplans ||
        !PyTuple_Check(consts) || PyTuple_GET_SIZE(consts) != prog->nconsts) {
        PyErr_SetString(PyExc_ValueError,
                        "query_evaluate: names must hold a tuple a plan, consts one object a "
                        "constant");
        return -1;
    }
    for (int32_t k = 0; k < prog->nplans; k++) {
        PyObject *t = PyTuple_GET_ITEM(names, k);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != prog->plans[k].nout) {
            PyErr_Format(PyExc_ValueError, "query_evaluate: plan %d needs %d column names", k,
                         prog->plans[k].nout);
            return -1;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
            if (!PyUnicode_Check(PyTuple_GET_ITEM(t, i))) {
                PyErr_SetString(PyExc_ValueError, "query_evaluate: a column name is not a str");
                return -1;
            }
    }
    return 0;
}

PyObject *
srl_py_query_evaluate(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data",  "pos",  "end",   "base",   "binary", "max_depth",
                             "max_objects", "words", "pool", "names", "consts", NULL};
    Py_buffer view, words, pool;
    Py_ssize_t pos, end, base, max_objects;
    int binary, max_depth;
    PyObject *names, *consts, *result = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nnniiny*y*OO:query_evaluate", kwlist,
                                     &view, &pos, &end, &base, &binary, &max_depth,
                                     &max_objects, &words, &pool, &names, &consts))
        return NULL;
    QProg prog = {0};
    QWalk w;
    memset(&w, 0, sizeof w);
    if (srl_check_body_args(view.len, pos, end, base, binary, max_depth) < 0)
        goto done;
    if (words.len % 8 != 0) {
        PyErr_SetString(PyExc_ValueError, "query_evaluate: words must be int64s");
        goto done;
    }
    if (srl_query_program(&prog, (const int64_t *)words.buf, words.len / 8,
                          (const uint8_t *)pool.buf, pool.len) < 0 ||
        check_names(&prog, names, consts) < 0)
        goto done;
    if (binary == SRL_BINARY_LATIN1) { /* texts read otherwise: the reference's */
        result = Py_NewRef(Py_None);
        goto done;
    }
    SRL_WALKER_AT(&w, view.buf, pos, end, base, max_depth);
    w.objects_left = max_objects < 0 ? -1 : max_objects;
    w.prog = &prog;
    w.tag_starts = PyMem_RawCalloc(srl_bits_size(end - pos), 1);
    w.vals = PyMem_RawCalloc((size_t)prog.nnodes, sizeof *w.vals);
    w.seen = PyMem_RawCalloc((size_t)prog.nnodes, sizeof *w.seen);
    w.results = PyMem_RawCalloc((size_t)prog.nplans + 1, sizeof *w.results);
    if (w.tag_starts == NULL || w.vals == NULL || w.seen == NULL || w.results == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = srl_query_walk(&w);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = PyList_New(prog.nplans);
    for (int32_t k = 0; result != NULL && k < prog.nplans; k++) {
        PyObject *rows = plan_rows(&prog.plans[k], &w.results[k], PyTuple_GET_ITEM(names, k),
                                   consts, binary);
        if (rows == NULL)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, k, rows);
    }
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&words);
    PyBuffer_Release(&pool);
    PyMem_RawFree(w.tag_starts);
    PyMem_RawFree(w.vals);
    PyMem_RawFree(w.seen);
    srl_query_results_free(w.results, prog.nplans);
    srl_query_program_free(&prog);
    return result;
}
