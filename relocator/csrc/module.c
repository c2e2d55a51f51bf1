/* relocator._frames: the relocator's compiled intake (frames.c), bound to Python.
 *
 * The frame scanner cuts a stream of length-prefixed Sereal documents and checks each
 * one's header; relocator/wire.py holds the reference in Python, which this equals
 * (relocator/DESIGN.md). It reads headers with the codec's header-only readers. */
#include "frames.h"

static PyMethodDef methods[] = {
    {"scan_frames", (PyCFunction)(void (*)(void))srl_py_scan_frames,
     METH_VARARGS | METH_KEYWORDS,
     "scan_frames(buffer, max_frame_bytes) -> (consumed, data, heads, malformed, oversized,"
     " too_large, not_a_dict)\n\n"
     "The relocator's intake: complete length-prefixed frames, checked and grouped by header."},
    {"event_verdicts", (PyCFunction)(void (*)(void))srl_py_event_verdicts,
     METH_VARARGS | METH_KEYWORDS,
     "event_verdicts(documents, max_bytes) -> bytes\n\n"
     "One code per event document, from its first bytes: 0 a hash, 1 too large, 2 not a hash,"
     " 3 compressed, 4 unreadable."},
    {"frame_positions", (PyCFunction)(void (*)(void))srl_py_frame_positions,
     METH_VARARGS | METH_KEYWORDS,
     "frame_positions(offsets, base) -> bytes\n\n"
     "base + each native uint32 of offsets, as native uint64."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "relocator._frames",
    "The relocator's compiled frame scanner (see relocator/DESIGN.md).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__frames(void)
{
    return PyModule_Create(&module_def);
}
