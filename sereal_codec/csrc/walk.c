/* The walkers' shared skeleton (walk.h): what is not inline. */
#include "walk.h"

int
srl_varint_slow(const uint8_t *data, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out)
{
    Py_ssize_t p = *pos;
    if (end - p >= 9) {
        const uint8_t *s = data + p;
        uint64_t v = 0;
        for (int i = 0; i < 9; i++) {
            v |= (uint64_t)(s[i] & 0x7f) << (7 * i);
            if (!(s[i] & 0x80)) {
                *out = v;
                *pos = p + i + 1;
                return SRL_VARINT_OK;
            }
        }
    }
    return srl_read_varint(data, pos, end, out);
}

int
srl_raise_varint(int rc, Py_ssize_t pos, Py_ssize_t end, const char *what)
{
    if (rc == SRL_VARINT_TRUNCATED)
        srl_raise(srl_state.TruncatedInput, end, "input ends inside %s", what);
    else
        srl_raise(srl_state.InvalidStructure, pos, "%s does not fit in 64 bits", what);
    return -1;
}

int
srl_check_body_args(Py_ssize_t len, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base, int binary,
                    int max_depth)
{
    if (pos < 0 || end < pos || end > len) {
        PyErr_Format(PyExc_ValueError, "need 0 <= pos <= end <= len(data), got %zd, %zd, %zd",
                     pos, end, len);
        return -1;
    }
    /* Keeps base + offset arithmetic far from overflow. */
    if (base < -(PY_SSIZE_T_MAX / 4) || base > PY_SSIZE_T_MAX / 4) {
        PyErr_Format(PyExc_ValueError, "base %zd out of range", base);
        return -1;
    }
    if (binary < SRL_BINARY_UTF8 || binary > SRL_BINARY_BYTES) {
        PyErr_Format(PyExc_ValueError, "binary must be 0, 1 or 2, got %d", binary);
        return -1;
    }
    if (max_depth < 0 || max_depth > SRL_MAX_DEPTH_CAP) {
        PyErr_Format(PyExc_ValueError, "max_depth must be in 0..%d, got %d", SRL_MAX_DEPTH_CAP,
                     max_depth);
        return -1;
    }
    return 0;
}
