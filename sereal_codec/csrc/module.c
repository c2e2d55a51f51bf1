/* sereal_codec._sereal: the compiled Sereal body codec.
 *
 * This file only binds Python to C: argument parsing, the exception classes and
 * value types (looked up in sereal_codec.errors / .types at import, so the
 * compiled and pure codecs raise and build the very same classes), and errors.
 * The contract is sereal_codec/DESIGN.md. */
#include "sereal.h"
#include "decoder.h"
#include "pymodule.h"
#include "join.h"
#include "variant.h"

#include <stdarg.h>

SrlState srl_state;

/* project_events.c */
PyObject *srl_py_project_events(PyObject *self, PyObject *args, PyObject *kwargs);
/* query_py.c */
PyObject *srl_py_query_evaluate(PyObject *self, PyObject *args, PyObject *kwargs);

PyObject *
srl_raise(PyObject *cls, Py_ssize_t offset, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    if (msg == NULL)
        return NULL;
    PyObject *off = offset < 0 ? Py_NewRef(Py_None) : PyLong_FromSsize_t(offset);
    if (off == NULL) {
        Py_DECREF(msg);
        return NULL;
    }
    PyObject *exc = PyObject_CallFunctionObjArgs(cls, msg, off, NULL);
    Py_DECREF(msg);
    Py_DECREF(off);
    if (exc != NULL) {
        PyErr_SetObject(cls, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

static PyObject *
decode_body(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", "pos", "end", "base", "binary", "max_depth",
                             "max_objects", "projection", NULL};
    Py_buffer view;
    Py_ssize_t pos, end, base, max_objects = -1;
    int binary, max_depth;
    PyObject *projection = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nnnii|nO:decode_body", kwlist, &view,
                                     &pos, &end, &base, &binary, &max_depth, &max_objects,
                                     &projection))
        return NULL;
    if (projection == Py_None)
        projection = NULL;
    else if (srl_check_projection(projection) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *result = srl_decode_body_limited(view.buf, view.len, pos, end, base, binary,
                                               max_depth, max_objects, projection);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
encode_body(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"obj", "dedupe_strings", "max_depth", NULL};
    PyObject *obj;
    int dedupe, max_depth;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Opi:encode_body", kwlist, &obj, &dedupe,
                                     &max_depth))
        return NULL;
    return srl_encode_body(obj, dedupe, max_depth);
}

static PyObject *
array_layout(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", "pos", "end", "base", NULL};
    Py_buffer view;
    Py_ssize_t pos, end, base;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nnn:array_layout", kwlist, &view, &pos,
                                     &end, &base))
        return NULL;
    PyObject *result = NULL;
    if (pos < 0 || end < pos || end > view.len)
        PyErr_SetString(PyExc_ValueError, "need 0 <= pos <= end <= len(data)");
    else
        result = srl_array_layout(view.buf, pos, end, base);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
extract_array(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"data", "pos", "end", "base", "first", "stop", NULL};
    Py_buffer view;
    Py_ssize_t pos, end, base, first, stop;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nnnnn:extract_array", kwlist, &view,
                                     &pos, &end, &base, &first, &stop))
        return NULL;
    PyObject *result = NULL;
    if (pos < 0 || end < pos || end > view.len)
        PyErr_SetString(PyExc_ValueError, "need 0 <= pos <= end <= len(data)");
    else
        result = srl_extract_array(view.buf, pos, end, base, first, stop);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
to_json(PyObject *args, PyObject *kwargs, const char *format, int packed)
{
    static char *kwlist[] = {"data", "pos", "end", "base", "binary", "max_depth", NULL};
    Py_buffer view;
    Py_ssize_t pos, end, base;
    int binary, max_depth;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist, &view, &pos, &end, &base,
                                     &binary, &max_depth))
        return NULL;
    PyObject *result =
        srl_array_to_json(view.buf, view.len, pos, end, base, binary, max_depth, packed);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
array_to_json_lines(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return to_json(args, kwargs, "y*nnnii:array_to_json_lines", 0);
}

static PyObject *
array_to_json_packed(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return to_json(args, kwargs, "y*nnnii:array_to_json_packed", 1);
}

static PyMethodDef methods[] = {
    SRL_METHOD("decode_body", decode_body,
        "decode_body(data, pos, end, base, binary, max_depth, max_objects=-1, projection=None)"
        " -> (value, end_pos)\n\n"
        "Decode one tagged item at data[pos] (never reading at or past end), building at most\n"
        "max_objects objects as DESIGN.md counts them (-1: no limit); with a projection tree,\n"
        "each element of a top-level array narrowed to it; see DESIGN.md."),
    SRL_METHOD("encode_body", encode_body,
        "encode_body(obj, dedupe_strings, max_depth) -> bytes\n\n"
        "The Sereal body (1-based offsets) for obj; see DESIGN.md."),
    SRL_METHOD("array_layout", array_layout,
        "array_layout(data, pos, end, base) -> list[int]\n\n"
        "Start of each element of the body's top-level array, then the array's end."),
    SRL_METHOD("extract_array", extract_array,
        "extract_array(data, pos, end, base, first, stop) -> bytes\n\n"
        "A standalone body holding elements [first, stop) of the body's top-level array."),
    SRL_METHOD("join_bodies", srl_py_join_bodies,
        "join_bodies(parts, max_depth=512) -> bytes\n\n"
        "One body REFN ARRAY n holding the item of each (data, pos, end, base) part."),
    SRL_METHOD("array_to_json_lines", array_to_json_lines,
        "array_to_json_lines(data, pos, end, base, binary, max_depth) -> list[bytes]\n\n"
        "One compact JSON text (UTF-8) per element of the body's top-level array."),
    SRL_METHOD("array_to_json_packed", array_to_json_packed,
        "array_to_json_packed(data, pos, end, base, binary, max_depth) -> (bytes, bytes)\n\n"
        "The same texts back to back, and n + 1 native int64 offsets (as bytes) bounding them."),
    SRL_METHOD("array_to_variant_packed", srl_py_array_to_variant,
        "array_to_variant_packed(data, pos, end, base, binary, max_depth) -> tuple | None\n\n"
        "An array body straight to json_to_variant_packed's four buffers, or None where the\n"
        "JSON path must answer."),
    SRL_METHOD("json_to_variant_packed", srl_py_json_to_variant,
        "json_to_variant_packed(text, offsets, max_depth=512) -> (bytes, bytes, bytes, bytes)\n\n"
        "Packed JSON texts to Spark Variant values and metadata, each with n + 1 int32 offsets."),
    SRL_METHOD("project_events", srl_py_project_events,
        "project_events(events, tree, strict=None) -> list\n\n"
        "sereal_codec.projection.project_events: each event narrowed to the tree."),
    SRL_METHOD("query_evaluate", srl_py_query_evaluate,
        "query_evaluate(data, pos, end, base, binary, max_depth, max_objects, words, pool, names,"
        " consts) -> list | None\n\n"
        "Every plan of a query program (substreams/query/native.py) over an array body in one\n"
        "walk: each plan's rows (None: over its max_result_bytes), or None where the reference\n"
        "evaluator must answer."),
    SRL_METHODS_END,
};

SRL_MODULE_DEF(module_def, "sereal_codec._sereal",
               "Compiled Sereal body codec (see sereal_codec/DESIGN.md).", methods);

static int
load(PyObject *module, const char *name, PyObject **slot)
{
    *slot = PyObject_GetAttrString(module, name);
    return *slot == NULL ? -1 : 0;
}

static int
intern(const char *s, PyObject **slot)
{
    *slot = PyUnicode_InternFromString(s);
    return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC
PyInit__sereal(void)
{
    PyObject *errors = PyImport_ImportModule("sereal_codec.errors");
    if (errors == NULL)
        return NULL;
    PyObject *types = PyImport_ImportModule("sereal_codec.types");
    if (types == NULL) {
        Py_DECREF(errors);
        return NULL;
    }
    SrlState *s = &srl_state;
    int rc = load(errors, "TruncatedInput", &s->TruncatedInput) |
             load(errors, "UnknownTag", &s->UnknownTag) |
             load(errors, "BadBackReference", &s->BadBackReference) |
             load(errors, "InvalidStructure", &s->InvalidStructure) |
             load(errors, "DepthExceeded", &s->DepthExceeded) |
             load(errors, "UnencodableValue", &s->UnencodableValue) |
             load(errors, "EncodeDepthExceeded", &s->EncodeDepthExceeded) |
             load(errors, "SizeLimitExceeded", &s->SizeLimitExceeded) |
             load(errors, "DecodeBudgetExceeded", &srl_DecodeBudgetExceeded) |
             load(types, "PerlRef", &s->PerlRef) | load(types, "PerlObject", &s->PerlObject) |
             load(types, "PerlRegexp", &s->PerlRegexp) |
             load(types, "BOOLEAN_CLASSES", &s->BooleanClasses) |
             intern("value", &s->s_value) | intern("class_name", &s->s_class_name) |
             intern("frozen", &s->s_frozen) | intern("pattern", &s->s_pattern) |
             intern("flags", &s->s_flags) | intern("Regexp", &s->s_regexp_class);
    Py_DECREF(errors);
    Py_DECREF(types);
    if (rc != 0)
        return NULL;
    if (!PyType_Check(s->PerlRef) || !PyType_Check(s->PerlObject) ||
        !PyType_Check(s->PerlRegexp) || !PyAnySet_Check(s->BooleanClasses)) {
        PyErr_SetString(PyExc_ImportError, "sereal_codec.types is not what _sereal expects");
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module != NULL &&
        PyModule_AddIntConstant(module, "MAX_DEPTH_CAP", SRL_MAX_DEPTH_CAP) < 0)
        Py_CLEAR(module);
    return module;
}
