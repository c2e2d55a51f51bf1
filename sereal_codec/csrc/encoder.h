/* Encoder state shared by encode.c (pre-pass, containers, sharing, objects, the
 * entry point) and encode_scalar.c (ints, floats and the string writers with their
 * COPY dedupe). */
#ifndef SRL_ENCODER_H
#define SRL_ENCODER_H

#include "sereal.h"

#include "buf.h"
#include "objtable.h"

typedef struct {
    SrlBuf out;
    int dedupe_strings;
    int max_depth;
    int any_shared;     /* the pre-pass found a shared container, PerlRef or PerlObject */
    SrlStrTable strs;   /* str -> offset of its first literal */
    SrlStrTable bytes;  /* bytes -> offset of its first literal */
    SrlStrTable classes; /* class name -> offset of its string tag (for OBJECTV) */
    SrlPtrMap containers;
} Enc;

/* encode_scalar.c; each returns 0, or -1 with an exception set. */
/* UnencodableValue naming `what` and obj's type; always -1. */
int srl_enc_unencodable(PyObject *obj, const char *what);
/* int: POS / NEG / VARINT / ZIGZAG (UnencodableValue beyond uint64 / int64). */
int srl_enc_int(Enc *e, PyObject *obj);
int srl_enc_double(Enc *e, double v);
/* An exact str (dedupe: through e->strs, COPY when shorter). */
int srl_enc_str(Enc *e, PyObject *s, int dedupe);
/* A str (any subclass), bytes or bytearray where the format needs a string;
 * anything else is UnencodableValue naming `what`. */
int srl_enc_text(Enc *e, PyObject *obj, int dedupe, const char *what);

#endif
