/* consumer_lib._tagger: the consumer's compiled tagger (tag_events.c), bound to Python.
 *
 * consumer_lib.types.tag_chunk is the reference in Python, which this equals object
 * for object (consumer_lib/DESIGN.md). The binding boilerplate is the codec's (its
 * header only: nothing of the codec is linked in). */
#include "pymodule.h"

PyObject *srl_py_tag_events(PyObject *self, PyObject *args, PyObject *kwargs);

static PyMethodDef methods[] = {
    SRL_METHOD("tag_events", srl_py_tag_events,
        "tag_events(cls, slots, values, events) -> list\n\n"
        "A new cls per event, its slot descriptors set to values and the event (last)."),
    SRL_METHODS_END,
};

SRL_SIMPLE_MODULE(_tagger, "consumer_lib._tagger",
                  "The consumer's compiled tagger (see consumer_lib/DESIGN.md).", methods)
