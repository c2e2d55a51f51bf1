/* JSON text for the transcoder: strings (UTF-8 with U+FFFD for stray bytes, latin-1,
 * base64) escaped exactly as Python's json.dumps(..., ensure_ascii=False) escapes
 * them, integers, and floats in Python's repr form. */
#include "json.h"
#include "text.h"

#include <math.h>
#include <string.h>

const uint8_t srl_json_plain[256] = {
#define P16 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
    [0x20] = 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* '"' */
    P16, P16,
    [0x50] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* '\\' */
    P16, P16,
#undef P16
};

static const char hexdigits[] = "0123456789abcdef";

/* Escape of an ASCII control character, '"' or '\\' (at most 6 bytes). */
static inline void
put_escape(SrlBuf *b, uint8_t c)
{
    uint8_t *o = b->data + b->len;
    o[0] = '\\';
    switch (c) {
    case '"': o[1] = '"'; b->len += 2; return;
    case '\\': o[1] = '\\'; b->len += 2; return;
    case '\n': o[1] = 'n'; b->len += 2; return;
    case '\r': o[1] = 'r'; b->len += 2; return;
    case '\t': o[1] = 't'; b->len += 2; return;
    case '\b': o[1] = 'b'; b->len += 2; return;
    case '\f': o[1] = 'f'; b->len += 2; return;
    default:
        o[1] = 'u';
        o[2] = '0';
        o[3] = '0';
        o[4] = (uint8_t)hexdigits[c >> 4];
        o[5] = (uint8_t)hexdigits[c & 15];
        b->len += 6;
    }
}

int
srl_json_put_utf8(SrlBuf *b, const uint8_t *s, Py_ssize_t n)
{
    if (srl_buf_reserve(b, n + 2) < 0)
        return -1;
    b->data[b->len++] = '"';
    Py_ssize_t i = 0, run = 0;
    while (i < n) {
        /* Eight plain bytes at a time: no control, '"', '\\' or high bit. */
        while (i + 8 <= n && srl_json_plain8(s + i))
            i += 8;
        if (i >= n)
            break;
        uint8_t c = s[i];
        if (srl_json_plain[c]) {
            i++;
            continue;
        }
        if (c >= 0x80) {
            int k = srl_utf8_seq(s + i, n - i);
            if (k > 0) {
                i += k; /* valid: part of the run */
                continue;
            }
        }
        Py_ssize_t len = i - run;
        if (srl_buf_reserve(b, len + 6 + (n - i) + 1) < 0)
            return -1;
        memcpy(b->data + b->len, s + run, (size_t)len);
        b->len += len;
        if (c >= 0x80) { /* a byte surrogateescape would escape: U+FFFD */
            b->data[b->len++] = 0xef;
            b->data[b->len++] = 0xbf;
            b->data[b->len++] = 0xbd;
        } else {
            put_escape(b, c);
        }
        run = ++i;
    }
    Py_ssize_t len = n - run;
    if (srl_buf_reserve(b, len + 1) < 0)
        return -1;
    memcpy(b->data + b->len, s + run, (size_t)len);
    b->len += len;
    b->data[b->len++] = '"';
    return 0;
}

int
srl_json_put_latin1(SrlBuf *b, const uint8_t *s, Py_ssize_t n)
{
    if (srl_buf_reserve(b, 2 * n + 2) < 0)
        return -1;
    b->data[b->len++] = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (srl_json_plain[c]) {
            b->data[b->len++] = c;
        } else if (c >= 0x80) {
            b->data[b->len++] = (uint8_t)(0xc0 | (c >> 6));
            b->data[b->len++] = (uint8_t)(0x80 | (c & 0x3f));
        } else {
            if (srl_buf_reserve(b, 6 + 2 * (n - i)) < 0)
                return -1;
            put_escape(b, c);
        }
    }
    b->data[b->len++] = '"';
    return 0;
}

int
srl_json_put_base64(SrlBuf *b, const uint8_t *s, Py_ssize_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (srl_buf_reserve(b, (n + 2) / 3 * 4 + 2) < 0)
        return -1;
    uint8_t *o = b->data + b->len;
    *o++ = '"';
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = (uint8_t)alphabet[v >> 18];
        *o++ = (uint8_t)alphabet[(v >> 12) & 63];
        *o++ = (uint8_t)alphabet[(v >> 6) & 63];
        *o++ = (uint8_t)alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *o++ = (uint8_t)alphabet[v >> 18];
        *o++ = (uint8_t)alphabet[(v >> 12) & 63];
        *o++ = '=';
        *o++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *o++ = (uint8_t)alphabet[v >> 18];
        *o++ = (uint8_t)alphabet[(v >> 12) & 63];
        *o++ = (uint8_t)alphabet[(v >> 6) & 63];
        *o++ = '=';
    }
    *o++ = '"';
    b->len = o - b->data;
    return 0;
}

int
srl_json_put_u64(SrlBuf *b, uint64_t v)
{
    if (srl_buf_reserve(b, 20) < 0)
        return -1;
    if (v < 10) {
        b->data[b->len++] = (uint8_t)('0' + v);
        return 0;
    }
    char tmp[20];
    int n = 0;
    while (v > 0) {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    }
    while (n > 0)
        b->data[b->len++] = (uint8_t)tmp[--n];
    return 0;
}

int
srl_json_put_i64(SrlBuf *b, int64_t v)
{
    if (v >= 0)
        return srl_json_put_u64(b, (uint64_t)v);
    if (srl_buf_put_byte(b, '-') < 0)
        return -1;
    return srl_json_put_u64(b, (uint64_t)0 - (uint64_t)v);
}

/* repr(v) without the general algorithm when v is exactly what a decimal of up to 8
 * fractional digits parses to, as most floats in events are (0.25, 199.99). repr is
 * the shortest digit string that reads back as v; with |m| < 2**50 at most one m can
 * read back for a given k (10**-k is over twice the spacing of doubles near v), the
 * rounding of |v| * 10**k is off by less than one, so trying m - 1, m, m + 1 for each
 * k from 1 up finds the shortest one. repr uses exponents below 1e-4 and from 1e16:
 * outside that, and when nothing fits, 1 is returned for the general path. */
static int
put_short_decimal(SrlBuf *b, double v)
{
    static const double pow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8};
    double a = fabs(v);
    if (!(a >= 1e-4 && a < 1e15))
        return 1;
    for (int k = 1; k <= 8; k++) {
        double scaled = a * pow10[k];
        if (scaled >= 1125899906842624.0) /* 2**50 */
            return 1;
        int64_t m0 = (int64_t)(scaled + 0.5);
        for (int64_t m = m0 - 1; m <= m0 + 1; m++) {
            if (m <= 0 || (double)m / pow10[k] != a)
                continue;
            if (m % 10 == 0) /* k - 1 digits would have done: not expected, be safe */
                return 1;
            char digits[24];
            int n = 0;
            for (int64_t r = m; r > 0; r /= 10)
                digits[n++] = (char)('0' + r % 10);
            while (n <= k)
                digits[n++] = '0'; /* at least one digit before the point */
            if (srl_buf_reserve(b, n + 2) < 0)
                return -1;
            if (v < 0)
                b->data[b->len++] = '-';
            for (int i = n - 1; i >= 0; i--) {
                b->data[b->len++] = (uint8_t)digits[i];
                if (i == k)
                    b->data[b->len++] = '.';
            }
            return 0;
        }
    }
    return 1;
}

int
srl_json_put_double(SrlBuf *b, double v)
{
    if (!isfinite(v))
        return srl_buf_put_bytes(b, "null", 4);
    /* Integral values below 2**53 print as "<int>.0" in repr: no need for the
     * general shortest-repr machinery (and its allocation). */
    if (fabs(v) < 9007199254740992.0 && v == (double)(int64_t)v && !(v == 0 && signbit(v))) {
        if (srl_json_put_i64(b, (int64_t)v) < 0)
            return -1;
        return srl_buf_put_bytes(b, ".0", 2);
    }
    int rc = put_short_decimal(b, v);
    if (rc <= 0)
        return rc;
    char *repr = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (repr == NULL)
        return -1;
    rc = srl_buf_put_bytes(b, repr, (Py_ssize_t)strlen(repr));
    PyMem_Free(repr);
    return rc;
}
