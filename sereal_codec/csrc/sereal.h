/* Shared declarations of the compiled Sereal body codec: tag bytes, the Python
 * objects the codec needs (exception classes and value types, looked up once at
 * import from sereal_codec.errors / .types), and the entry points each
 * module implements. The contract is sereal_codec/DESIGN.md. */
#ifndef SRL_SEREAL_H
#define SRL_SEREAL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#if PY_VERSION_HEX < 0x030B0000 /* public from 3.11 */
#define PyFloat_Pack8 _PyFloat_Pack8
#define PyFloat_Unpack4 _PyFloat_Unpack4
#define PyFloat_Unpack8 _PyFloat_Unpack8
#endif

/* Tag bytes (SRL_*, low 7 bits; the high bit is SRL_TRACK), kinds and shapes: the one
 * tag table, tags.h. Mirrored by tags.py (tests/unit/sereal_codec/test_tag_table.py). */
#include "tags.h"

enum { SRL_BINARY_UTF8 = 0, SRL_BINARY_LATIN1 = 1, SRL_BINARY_BYTES = 2 };

/* Upper bound for max_depth, whatever the caller asks, in every recursive walker
 * (decoder, JSON transcoder, splitter / joiner, encoder, Variant parser): each level
 * costs C stack, and the codec must never overflow it in any thread. The costliest
 * walker measured (JSON transcoding of nested REFN HASH) takes 449 bytes a level, so
 * 1000 levels need ~450 KiB: safe with a 2.2x margin in a thread with a 1 MiB stack
 * (DESIGN.md, "Stack"; tests/fuzz/test_deep_nesting.py). sereal_codec.limits
 * holds the same number for the pure codec. */
#define SRL_MAX_DEPTH_CAP 1000

typedef struct {
    /* sereal_codec.errors */
    PyObject *TruncatedInput, *UnknownTag, *BadBackReference, *InvalidStructure;
    PyObject *DepthExceeded, *UnencodableValue, *EncodeDepthExceeded, *SizeLimitExceeded;
    /* sereal_codec.types */
    PyObject *PerlRef, *PerlObject, *PerlRegexp, *BooleanClasses;
    /* interned attribute names */
    PyObject *s_value, *s_class_name, *s_frozen, *s_pattern, *s_flags;
    PyObject *s_regexp_class; /* "Regexp" */
} SrlState;

extern SrlState srl_state;

/* Raise `cls(message, offset)` (offset < 0: None); always returns NULL. */
PyObject *srl_raise(PyObject *cls, Py_ssize_t offset, const char *fmt, ...);

/* decode.c */
PyObject *srl_decode_body(const uint8_t *data, Py_ssize_t len, Py_ssize_t pos,
                          Py_ssize_t end, Py_ssize_t base, int binary, int max_depth);

/* encode.c */
PyObject *srl_encode_body(PyObject *obj, int dedupe_strings, int max_depth);

/* split.c */
PyObject *srl_array_layout(const uint8_t *data, Py_ssize_t pos, Py_ssize_t end,
                           Py_ssize_t base);
PyObject *srl_extract_array(const uint8_t *data, Py_ssize_t pos, Py_ssize_t end,
                            Py_ssize_t base, Py_ssize_t first, Py_ssize_t stop);

/* json.c: one JSON text per element of the body's top-level array (DESIGN.md, "JSON
 * transcoding"): a list of bytes, or (bytes, int64 offsets as bytes) when packed. */
PyObject *srl_array_to_json(const uint8_t *data, Py_ssize_t len, Py_ssize_t pos,
                            Py_ssize_t end, Py_ssize_t base, int binary, int max_depth,
                            int packed);

/* strings.c: Python strings from body bytes */
PyObject *srl_str_from_utf8(const uint8_t *s, Py_ssize_t n);   /* surrogateescape */
PyObject *srl_str_from_latin1(const uint8_t *s, Py_ssize_t n);

/* floats.c: the wide float formats, rounded to double */
double srl_long_double_to_double(const uint8_t *b); /* x86 80-bit, little-endian */
double srl_float128_to_double(const uint8_t *b);    /* IEEE quad, little-endian */

#endif
