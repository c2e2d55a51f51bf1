/* scan_frames: the relocator's intake hot path (the frame format is relocator/wire.py's).
 *
 * Takes every complete `length (u32 BE) | frame` from the front of `buffer`, checks each
 * frame's header as relocator.wire.parse_frame does (magic "RE", version 1, epoch below
 * 2**63, dc / type / subtype tokens, a non-empty document after them) and returns
 *   consumed:  bytes of `buffer` taken (complete frames only);
 *   data:      the good frames, each with its length prefix, back to back: the bytes
 *              the journal stores as one record;
 *   heads:     per distinct header, in order of first appearance, a tuple
 *              (header bytes, offsets, documents): `offsets` packs, as native uint32,
 *              the offset in `data` of each of its frames' length prefix, `documents`
 *              holds their event documents (bytes), in arrival order;
 *   malformed: frames whose header is not valid (left out of data);
 *   oversized: frames longer than max_frame_bytes (left out, never inspected);
 *   too_large: frames whose document claims a decompressed body above max_frame_bytes;
 *   not_a_dict: frames whose uncompressed document holds something else than a hash
 *              (both left out; see event_verdict below, nothing is decompressed).
 * A length prefix above 64 MiB raises ValueError: the stream is garbage.
 *
 * The walk over the frames and the copy into `data` run with the GIL released; only
 * the result objects are built under it (one bytes object per document). */
#include "frames.h"

#include "header.h"
#include "varint.h"

#include <stdint.h>
#include <string.h>

#define FRAME_PLAUSIBLE_MAX (64u * 1024u * 1024u)
#define HEAD_FIXED 11 /* "RE" | version | epoch (u64 BE) */

enum {
    REJECT_MALFORMED = -1,
    REJECT_OVERSIZED = -2,
    REJECT_TOO_LARGE = -3,
    REJECT_NOT_A_DICT = -4,
};

typedef struct {
    Py_ssize_t at;  /* offset of the frame's length prefix in the buffer */
    uint32_t len;   /* frame length (without the prefix) */
    uint32_t hlen;  /* header length: the document starts there */
    int32_t head;   /* index into heads, or a REJECT_* */
    uint32_t slot;  /* index among its head's frames */
} FrameInfo;

typedef struct {
    Py_ssize_t at;  /* offset of the header in the buffer */
    uint32_t hlen;
    uint64_t hash;
    uint32_t count;
    PyObject *offsets, *docs;
    uint32_t *out;  /* PyBytes_AS_STRING(offsets) */
} Head;

typedef struct {
    FrameInfo *frames;
    Py_ssize_t nframes, frames_cap;
    Head *heads;
    Py_ssize_t nheads, heads_cap;
    int32_t *table; /* open addressing over heads, -1 empty */
    Py_ssize_t table_cap;
    int nomem;
} Scan;

static inline uint32_t
be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* 1 for [A-Za-z0-9_], and '.' when dot is set. */
static inline int
token_byte(uint8_t c, int dot)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || (dot && c == '.');
}

/* event_verdict: what can be told about an event's Sereal document from its first
 * bytes, without decompressing or decoding it (relocator.wire.event_verdict is the
 * same in Python, and the oracle of the tests).
 *
 *   EV_TOO_LARGE:   compressed, and the size its body claims is above cap: the Snappy
 *                   preamble (types 1 and 2), zlib's uncompressed length (type 3), the
 *                   zstd frame's content size (type 4). Every decompressor of the
 *                   codec refuses to produce more than that claim.
 *   EV_NOT_A_DICT:  uncompressed, and its item is not a hash: after PADs (and WEAKENs,
 *                   which decode to the item they weaken) it must be HASH, HASHREF_n
 *                   or REFN [PAD...] HASH, the forms the decoder turns into a dict.
 *   EV_COMPRESSED:  compressed within the cap (or a zstd frame without a content
 *                   size, which the codec refuses to open): its item is only seen
 *                   once the body is opened.
 *   EV_UNREADABLE:  not a Sereal document we could read this far: left to the
 *                   decoder's checks, which name the fault.
 *   EV_OK:          an uncompressed hash.
 */
enum { EV_OK = 0, EV_TOO_LARGE = 1, EV_NOT_A_DICT = 2, EV_COMPRESSED = 3, EV_UNREADABLE = 4 };

static int
item_verdict(const uint8_t *d, Py_ssize_t p, Py_ssize_t n)
{
    int after_refn = 0;
    for (; p < n; p++) {
        uint8_t tag = d[p] & 0x7f;
        if (tag == SRL_PAD)
            continue;
        if (tag == SRL_HASH)
            return EV_OK;
        if (after_refn)
            return EV_NOT_A_DICT; /* a reference to something else than a hash */
        if (tag >= SRL_HASHREF_LOW && tag < SRL_SHORT_BINARY_LOW)
            return EV_OK;
        if (tag == SRL_REFN)
            after_refn = 1;
        else if (tag != SRL_WEAKEN)
            return EV_NOT_A_DICT;
    }
    return EV_UNREADABLE;
}

/* The content size a zstd frame header records at f[0:n]; -1 when it records none,
 * -2 when the header is cut short or is not a zstd frame's. */
static int64_t
zstd_content_size(const uint8_t *f, Py_ssize_t n)
{
    static const int dict_id_bytes[4] = {0, 1, 2, 4};
    if (n < 5 || f[0] != 0x28 || f[1] != 0xb5 || f[2] != 0x2f || f[3] != 0xfd)
        return -2;
    uint8_t fhd = f[4];
    int single_segment = (fhd >> 5) & 1, fcs_flag = fhd >> 6;
    int fcs_bytes = fcs_flag == 0 ? single_segment : 1 << fcs_flag;
    Py_ssize_t p = 5 + (single_segment ? 0 : 1) + dict_id_bytes[fhd & 3];
    if (fcs_bytes == 0)
        return -1;
    if (p + fcs_bytes > n)
        return -2;
    uint64_t size = 0;
    for (int i = fcs_bytes - 1; i >= 0; i--)
        size = size << 8 | f[p + i];
    if (fcs_bytes == 2)
        size += 256;
    return size > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)size;
}

static int
event_verdict(const uint8_t *d, Py_ssize_t n, Py_ssize_t cap)
{
    SrlHeader h;
    if (srl_header_start(d, n, &h) != SRL_HDR_OK || srl_header_suffix(d, n, &h) != SRL_HDR_OK)
        return EV_UNREADABLE;
    Py_ssize_t p = h.body;
    uint64_t claim, skip;
    switch (h.type) {
    case SRL_TYPE_RAW:
        return item_verdict(d, p, n);
    case SRL_TYPE_SNAPPY_INCR: /* <varint length> <Snappy block>: the block's preamble is the claim */
        if (srl_read_varint(d, &p, n, &skip) != SRL_VARINT_OK)
            return EV_UNREADABLE;
        /* fall through */
    case SRL_TYPE_SNAPPY: /* the rest of the document is one Snappy block */
    case SRL_TYPE_ZLIB: /* <varint uncompressed length> <varint compressed length> <zlib stream> */
        if (srl_read_varint(d, &p, n, &claim) != SRL_VARINT_OK)
            return EV_UNREADABLE;
        break;
    case SRL_TYPE_ZSTD: { /* <varint length> <zstd frame> */
        if (srl_read_varint(d, &p, n, &skip) != SRL_VARINT_OK)
            return EV_UNREADABLE;
        int64_t size = zstd_content_size(d + p, n - p);
        if (size == -2)
            return EV_UNREADABLE;
        if (size == -1)
            return EV_COMPRESSED; /* no claim to check: the codec refuses to open it */
        claim = (uint64_t)size;
        break;
    }
    default:
        return EV_UNREADABLE;
    }
    return claim > (uint64_t)cap ? EV_TOO_LARGE : EV_COMPRESSED;
}

/* The header length of a frame, or -1 when parse_frame would reject it. */
static Py_ssize_t
header_length(const uint8_t *f, uint32_t n)
{
    if (n < HEAD_FIXED + 3 || f[0] != 'R' || f[1] != 'E' || f[2] != 1 || f[3] & 0x80)
        return -1;
    Py_ssize_t p = HEAD_FIXED;
    for (int field = 0; field < 3; field++) { /* dc, type, subtype */
        if (p >= (Py_ssize_t)n)
            return -1;
        Py_ssize_t len = f[p];
        if (p + 1 + len > (Py_ssize_t)n || (len == 0 && field < 2))
            return -1;
        for (Py_ssize_t i = p + 1; i <= p + len; i++)
            if (!token_byte(f[i], field > 0))
                return -1;
        p += 1 + len;
    }
    return p < (Py_ssize_t)n ? p : -1;
}

static uint64_t
fnv1a(const uint8_t *p, Py_ssize_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static int
grow(void **array, Py_ssize_t *cap, size_t item)
{
    Py_ssize_t n = *cap < 64 ? 64 : *cap * 2;
    void *bigger = PyMem_RawRealloc(*array, (size_t)n * item);
    if (bigger == NULL)
        return -1;
    *array = bigger;
    *cap = n;
    return 0;
}

static int
rehash(Scan *s)
{
    Py_ssize_t cap = s->table_cap < 64 ? 64 : s->table_cap * 2;
    int32_t *t = PyMem_RawMalloc((size_t)cap * sizeof(int32_t));
    if (t == NULL)
        return -1;
    memset(t, 0xff, (size_t)cap * sizeof(int32_t));
    for (Py_ssize_t h = 0; h < s->nheads; h++) {
        size_t i = (size_t)s->heads[h].hash & (size_t)(cap - 1);
        while (t[i] >= 0)
            i = (i + 1) & (size_t)(cap - 1);
        t[i] = (int32_t)h;
    }
    PyMem_RawFree(s->table);
    s->table = t;
    s->table_cap = cap;
    return 0;
}

/* The index of the head data[at:at+hlen], added when new; -1 out of memory. */
static int32_t
head_of(Scan *s, const uint8_t *data, Py_ssize_t at, uint32_t hlen)
{
    uint64_t hash = fnv1a(data + at, hlen);
    if ((s->nheads + 1) * 2 > s->table_cap && rehash(s) < 0)
        return -1;
    size_t mask = (size_t)(s->table_cap - 1);
    size_t i = (size_t)hash & mask;
    for (; s->table[i] >= 0; i = (i + 1) & mask) {
        Head *h = &s->heads[s->table[i]];
        if (h->hash == hash && h->hlen == hlen && memcmp(data + h->at, data + at, hlen) == 0)
            return s->table[i];
    }
    if (s->nheads == s->heads_cap && grow((void **)&s->heads, &s->heads_cap, sizeof(Head)) < 0)
        return -1;
    Head *h = &s->heads[s->nheads];
    memset(h, 0, sizeof(*h));
    h->at = at;
    h->hlen = hlen;
    h->hash = hash;
    s->table[i] = (int32_t)s->nheads;
    return (int32_t)s->nheads++;
}

/* Pass 1, without the GIL: classify every complete frame. Returns the bytes consumed;
 * *bad_length gets an implausible length prefix (the scan stops there). */
static Py_ssize_t
scan(Scan *s, const uint8_t *data, Py_ssize_t end, Py_ssize_t max_frame, Py_ssize_t *good,
     Py_ssize_t counts[4], uint64_t *bad_length)
{
    Py_ssize_t pos = 0, last_head = -1;
    while (end - pos >= 4) {
        uint32_t n = be32(data + pos);
        if (n > FRAME_PLAUSIBLE_MAX) {
            *bad_length = n;
            break;
        }
        if (end - pos - 4 < (Py_ssize_t)n)
            break;
        if (s->nframes == s->frames_cap &&
            grow((void **)&s->frames, &s->frames_cap, sizeof(FrameInfo)) < 0) {
            s->nomem = 1;
            break;
        }
        FrameInfo *fi = &s->frames[s->nframes++];
        fi->at = pos;
        fi->len = n;
        fi->hlen = 0;
        const uint8_t *f = data + pos + 4;
        Py_ssize_t hlen = (Py_ssize_t)n > max_frame ? -2 : header_length(f, n);
        int verdict = hlen < 0 ? EV_OK : event_verdict(f + hlen, (Py_ssize_t)n - hlen, max_frame);
        if (hlen < 0 || verdict == EV_TOO_LARGE || verdict == EV_NOT_A_DICT) {
            fi->head = hlen == -2                ? REJECT_OVERSIZED
                       : hlen < 0                ? REJECT_MALFORMED
                       : verdict == EV_TOO_LARGE ? REJECT_TOO_LARGE
                                                 : REJECT_NOT_A_DICT;
            counts[-fi->head - 1]++;
        } else {
            fi->hlen = (uint32_t)hlen;
            /* producers send runs of one header: try the previous frame's first */
            Head *prev = last_head >= 0 ? &s->heads[last_head] : NULL;
            int32_t h;
            if (prev != NULL && prev->hlen == (uint32_t)hlen &&
                memcmp(data + prev->at, f, (size_t)hlen) == 0)
                h = (int32_t)last_head;
            else if ((h = head_of(s, data, pos + 4, (uint32_t)hlen)) < 0) {
                s->nomem = 1;
                break;
            }
            last_head = h;
            fi->head = h;
            fi->slot = s->heads[h].count++;
            *good += 4 + (Py_ssize_t)n;
        }
        pos += 4 + (Py_ssize_t)n;
    }
    return pos;
}

/* Pass 2, without the GIL: copy the good frames into out and note their offsets. */
static void
copy_good(Scan *s, const uint8_t *data, uint8_t *out)
{
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < s->nframes; i++) {
        FrameInfo *fi = &s->frames[i];
        if (fi->head < 0)
            continue;
        memcpy(out + at, data + fi->at, 4 + (size_t)fi->len);
        s->heads[fi->head].out[fi->slot] = (uint32_t)at;
        at += 4 + (Py_ssize_t)fi->len;
    }
}

static void
scan_free(Scan *s)
{
    for (Py_ssize_t h = 0; h < s->nheads; h++) {
        Py_XDECREF(s->heads[h].offsets);
        Py_XDECREF(s->heads[h].docs);
    }
    PyMem_RawFree(s->frames);
    PyMem_RawFree(s->heads);
    PyMem_RawFree(s->table);
}

/* The result tuple from a finished pass 1 (GIL held). */
static PyObject *
build(Scan *s, const uint8_t *data, Py_ssize_t consumed, Py_ssize_t good,
      const Py_ssize_t counts[4])
{
    if (good > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "scan_frames: more than 4 GiB of frames at once");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, good);
    PyObject *heads = out == NULL ? NULL : PyList_New(s->nheads);
    if (heads == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < s->nheads; i++) {
        Head *h = &s->heads[i];
        h->offsets = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)h->count * 4);
        h->docs = h->offsets == NULL ? NULL : PyList_New(h->count);
        if (h->docs == NULL)
            goto fail;
        h->out = (uint32_t *)PyBytes_AS_STRING(h->offsets);
    }
    Py_BEGIN_ALLOW_THREADS
    copy_good(s, data, (uint8_t *)PyBytes_AS_STRING(out));
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < s->nframes; i++) {
        FrameInfo *fi = &s->frames[i];
        if (fi->head < 0)
            continue;
        const char *doc = (const char *)data + fi->at + 4 + fi->hlen;
        PyObject *d = PyBytes_FromStringAndSize(doc, (Py_ssize_t)(fi->len - fi->hlen));
        if (d == NULL)
            goto fail;
        PyList_SET_ITEM(s->heads[fi->head].docs, fi->slot, d);
    }
    for (Py_ssize_t i = 0; i < s->nheads; i++) {
        Head *h = &s->heads[i];
        PyObject *hb = PyBytes_FromStringAndSize((const char *)data + h->at, h->hlen);
        PyObject *t = hb == NULL ? NULL : PyTuple_Pack(3, hb, h->offsets, h->docs);
        Py_XDECREF(hb);
        if (t == NULL)
            goto fail;
        PyList_SET_ITEM(heads, i, t);
    }
    PyObject *result = Py_BuildValue("(nNNnnnn)", consumed, out, heads, counts[0], counts[1],
                                     counts[2], counts[3]);
    return result;
fail:
    Py_XDECREF(out);
    Py_XDECREF(heads);
    return NULL;
}

PyObject *
srl_py_scan_frames(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"buffer", "max_frame_bytes", NULL};
    Py_buffer view;
    Py_ssize_t max_frame;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*n:scan_frames", kwlist, &view,
                                     &max_frame))
        return NULL;
    Scan s;
    memset(&s, 0, sizeof(s));
    const uint8_t *data = view.buf;
    Py_ssize_t consumed, good = 0;
    Py_ssize_t counts[4] = {0, 0, 0, 0}; /* by -REJECT_* - 1 */
    uint64_t bad_length = 0;
    Py_BEGIN_ALLOW_THREADS
    consumed = scan(&s, data, view.len, max_frame, &good, counts, &bad_length);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (s.nomem)
        PyErr_NoMemory();
    else if (bad_length)
        PyErr_Format(PyExc_ValueError, "length prefix %llu is not plausible",
                     (unsigned long long)bad_length);
    else
        result = build(&s, data, consumed, good, counts);
    scan_free(&s);
    PyBuffer_Release(&view);
    return result;
}

/* frame_positions(offsets, base) -> bytes: base + each native uint32 of offsets, as
 * native uint64 (the journal positions of a block's frames, no Python int per frame). */
PyObject *
srl_py_frame_positions(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"offsets", "base", NULL};
    Py_buffer view;
    unsigned long long base;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*K:frame_positions", kwlist, &view,
                                     &base))
        return NULL;
    PyObject *out = NULL;
    if (view.len % 4 != 0) {
        PyErr_Format(PyExc_ValueError, "offsets of %zd bytes is not a uint32 array", view.len);
    } else if ((out = PyBytes_FromStringAndSize(NULL, view.len * 2)) != NULL) {
        Py_ssize_t n = view.len / 4;
        uint64_t *dst = (uint64_t *)PyBytes_AS_STRING(out);
        const uint8_t *src = view.buf;
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t off;
            memcpy(&off, src + 4 * i, 4);
            dst[i] = (uint64_t)base + off;
        }
    }
    PyBuffer_Release(&view);
    return out;
}

/* event_verdicts(documents, max_bytes) -> bytes: event_verdict of each document (one
 * byte each, EV_*), with the GIL released. The sealer's check of what intake did not
 * see: frames journaled before a restart, and compressed documents once opened. */
PyObject *
srl_py_event_verdicts(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"documents", "max_bytes", NULL};
    PyObject *docs;
    Py_ssize_t cap;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "On:event_verdicts", kwlist, &docs, &cap))
        return NULL;
    /* A tuple: the documents stay alive (and in place) while the GIL is released. */
    PyObject *seq = PySequence_Tuple(docs);
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(seq, i))) {
            PyErr_Format(PyExc_TypeError, "event_verdicts: document %zd is not bytes", i);
            Py_DECREF(seq);
            return NULL;
        }
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out != NULL) {
        uint8_t *v = (uint8_t *)PyBytes_AS_STRING(out);
        PyObject **items = PySequence_Fast_ITEMS(seq);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++)
            v[i] = (uint8_t)event_verdict((const uint8_t *)PyBytes_AS_STRING(items[i]),
                                          PyBytes_GET_SIZE(items[i]), cap);
        Py_END_ALLOW_THREADS
    }
    Py_DECREF(seq);
    return out;
}
