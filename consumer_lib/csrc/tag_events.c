/* tag_events(cls, slots, values, events): one new instance of a slotted class per
 * event, in one call (the consumer's flat view, consumer_lib.types.tag_chunk: the
 * reference in Python, which this equals object for object).
 *
 * For each event: object.__new__(cls), then slots[i] set to values[i] and the last
 * slot to the event, as the reference does through the slots' descriptors (a frozen
 * dataclass's __setattr__ is bypassed alike). The descriptors are checked once, up
 * front: member descriptors of cls (or of a base) holding an object (T_OBJECT_EX),
 * writable, as many as the values plus one; cls a type object.__new__ can build (not
 * abstract, object's own __new__). Then the loop only allocates and stores references:
 * what a member descriptor's __set__ does on a new instance, whose slots are NULL.
 *
 * Why in the core: the consumer's events() is bound by its own thread, and building
 * the tags through six descriptor calls per event cost ~0.2 us/event there, about a
 * sixth of the decode it follows (consumer_lib/DESIGN.md, "Figures"). The instances
 * are allocated by tp_alloc, so tracked by the collector as the reference's are; a
 * collection started by an allocation in the loop sees the earlier ones complete and
 * the current one with NULL slots, which a slotted type's traverse skips. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#ifndef Py_T_OBJECT_EX /* 3.12 names it so; structmember.h's older name */
#define Py_T_OBJECT_EX T_OBJECT_EX
#define Py_READONLY READONLY
#endif

#define MAX_SLOTS 16

PyObject *srl_py_tag_events(PyObject *self, PyObject *args, PyObject *kwargs);

PyObject *
srl_py_tag_events(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"cls", "slots", "values", "events", NULL};
    PyObject *cls_obj, *slots, *values, *events;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OOO:tag_events", kwlist, &PyType_Type,
                                     &cls_obj, &slots, &values, &events))
        return NULL;
    /* Exact types: their storage is read directly, which a subclass's own iteration
     * (what the reference goes through) could disagree with. */
    if (!PyTuple_CheckExact(slots) || !PyTuple_CheckExact(values) || !PyList_CheckExact(events)) {
        PyErr_Format(PyExc_TypeError,
                     "tag_events: slots and values are tuples and events a list, not %s, %s, %s",
                     Py_TYPE(slots)->tp_name, Py_TYPE(values)->tp_name, Py_TYPE(events)->tp_name);
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)cls_obj;
    Py_ssize_t n_slots = PyTuple_GET_SIZE(slots);
    if (n_slots < 1 || n_slots > MAX_SLOTS || PyTuple_GET_SIZE(values) != n_slots - 1) {
        PyErr_Format(PyExc_ValueError,
                     "tag_events: 1 to %d slots and one value fewer, not %zd slots and %zd values",
                     MAX_SLOTS, n_slots, PyTuple_GET_SIZE(values));
        return NULL;
    }
    /* object.__new__(cls) with no arguments: refused for an abstract class; a class
     * with its own __new__ would not be built as the reference builds it. */
    if (cls->tp_new != PyBaseObject_Type.tp_new || (cls->tp_flags & Py_TPFLAGS_IS_ABSTRACT) ||
        cls->tp_alloc == NULL) {
        PyErr_Format(PyExc_TypeError, "tag_events: %s is not built by object.__new__",
                     cls->tp_name);
        return NULL;
    }
    Py_ssize_t offset[MAX_SLOTS];
    for (Py_ssize_t i = 0; i < n_slots; i++) {
        PyObject *d = PyTuple_GET_ITEM(slots, i);
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type)) {
            PyErr_Format(PyExc_TypeError, "tag_events: slot %zd is a %s, not a member descriptor",
                         i, Py_TYPE(d)->tp_name);
            return NULL;
        }
        PyMemberDescrObject *m = (PyMemberDescrObject *)d;
        PyMemberDef *def = m->d_member;
        if (!PyType_IsSubtype(cls, m->d_common.d_type) || def->type != Py_T_OBJECT_EX ||
            (def->flags & Py_READONLY)) {
            PyErr_Format(PyExc_TypeError,
                         "tag_events: slot %zd (%s) is not a writable object slot of %s", i,
                         def->name, cls->tp_name);
            return NULL;
        }
        offset[i] = def->offset;
    }
    for (Py_ssize_t i = 0; i < n_slots; i++)
        for (Py_ssize_t k = 0; k < i; k++)
            if (offset[k] == offset[i]) {
                PyErr_Format(PyExc_ValueError, "tag_events: slot %zd is slot %zd again", i, k);
                return NULL;
            }
    Py_ssize_t n = PyList_GET_SIZE(events);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    PyObject **fixed = &PyTuple_GET_ITEM(values, 0);
    Py_ssize_t last = n_slots - 1;
    /* The list is walked by index, its size read again each time: nothing run in the
     * loop can change it but a collection's finalizers, which could shrink it. */
    Py_ssize_t j = 0;
    for (; j < n && j < PyList_GET_SIZE(events); j++) {
        PyObject *obj = cls->tp_alloc(cls, 0);
        if (obj == NULL) {
            Py_DECREF(out); /* the items not built yet are NULL: list_dealloc skips them */
            return NULL;
        }
        char *base = (char *)obj;
        for (Py_ssize_t i = 0; i < last; i++)
            *(PyObject **)(base + offset[i]) = Py_NewRef(fixed[i]);
        *(PyObject **)(base + offset[last]) = Py_NewRef(PyList_GET_ITEM(events, j));
        PyList_SET_ITEM(out, j, obj);
    }
    if (j < n) { /* the list shrank meanwhile: the instances built, no NULL items */
        PyObject *built = PyList_New(j);
        if (built != NULL)
            for (Py_ssize_t k = 0; k < j; k++)
                PyList_SET_ITEM(built, k, Py_NewRef(PyList_GET_ITEM(out, k)));
        Py_SETREF(out, built);
    }
    return out;
}
