/* consumer_lib._tagger: the consumer's compiled tagger (tag_events.c), bound to Python.
 *
 * consumer_lib.types.tag_chunk is the reference in Python, which this equals object
 * for object (consumer_lib/DESIGN.md). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *srl_py_tag_events(PyObject *self, PyObject *args, PyObject *kwargs);

static PyMethodDef methods[] = {
    {"tag_events", (PyCFunction)(void (*)(void))srl_py_tag_events, METH_VARARGS | METH_KEYWORDS,
     "tag_events(cls, slots, values, events) -> list\n\n"
     "A new cls per event, its slot descriptors set to values and the event (last)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "consumer_lib._tagger",
    "The consumer's compiled tagger (see consumer_lib/DESIGN.md).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__tagger(void)
{
    return PyModule_Create(&module_def);
}
