/* The relocator's intake: cutting a stream of length-prefixed frames (frames.c), with
 * the codec's header and varint readers (sereal_codec/csrc, header-only). */
#ifndef SRL_FRAMES_H
#define SRL_FRAMES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* scan_frames(buffer, max_frame_bytes) -> (consumed, data, heads, malformed, oversized,
 * too_large, not_a_dict); see frames.c. */
PyObject *srl_py_scan_frames(PyObject *self, PyObject *args, PyObject *kwargs);
/* frame_positions(offsets, base) -> bytes of native uint64: base + each uint32 offset. */
PyObject *srl_py_frame_positions(PyObject *self, PyObject *args, PyObject *kwargs);

/* event_verdicts(documents, max_bytes) -> bytes: one EV_* code per document (frames.c). */
PyObject *srl_py_event_verdicts(PyObject *self, PyObject *args, PyObject *kwargs);

#endif
