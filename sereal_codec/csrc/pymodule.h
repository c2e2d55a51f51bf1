/* The binding boilerplate the compiled modules share (sereal_codec._sereal,
 * relocator._frames, consumer_lib._tagger): single-phase init, no module state, every
 * function taking positional and keyword arguments. */
#ifndef SRL_PYMODULE_H
#define SRL_PYMODULE_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>

/* One PyMethodDef entry: name, the C function, its docstring. */
#define SRL_METHOD(name, fn, doc)                                                      \
    {(name), (PyCFunction)(void (*)(void))(fn), METH_VARARGS | METH_KEYWORDS, (doc)}
#define SRL_METHODS_END {NULL, NULL, 0, NULL}

/* `static struct PyModuleDef var` for module `name` with its docstring and methods. */
#define SRL_MODULE_DEF(var, name, doc, methods)                                        \
    static struct PyModuleDef var = {                                                  \
        PyModuleDef_HEAD_INIT, (name), (doc), -1, (methods), NULL, NULL, NULL, NULL,   \
    }

/* A module that is only its methods: its definition and PyInit_<init>. */
#define SRL_SIMPLE_MODULE(init, name, doc, methods)                                    \
    SRL_MODULE_DEF(init##_def, name, doc, methods);                                    \
    PyMODINIT_FUNC PyInit_##init(void) { return PyModule_Create(&init##_def); }

#endif
