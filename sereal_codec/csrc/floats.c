/* The wide float formats Sereal can carry (x86 80-bit LONG_DOUBLE, IEEE quad
 * FLOAT_128), converted to a correctly rounded double with integer arithmetic, so
 * the result does not depend on the C compiler's `long double` and matches the
 * pure-Python reference's exact rounding (round half to even, subnormals included). */
#include "sereal.h"

#include <math.h>
#include <string.h>

typedef unsigned __int128 u128;

static int
top_bit(u128 m)
{
    uint64_t hi = (uint64_t)(m >> 64);
    if (hi)
        return 127 - __builtin_clzll(hi);
    return 63 - __builtin_clzll((uint64_t)m);
}

/* m * 2**e, rounded to the nearest double (ties to even). */
static double
scaled_to_double(u128 m, int e, int negative)
{
    double r;
    if (m == 0) {
        r = 0.0;
    } else {
        int top = top_bit(m) + e; /* exponent of the leading bit */
        if (top > 1023) {
            r = HUGE_VAL;
        } else {
            int keep_exp = top - 52; /* weight of the last bit a double keeps */
            if (keep_exp < -1074)
                keep_exp = -1074; /* subnormal: fixed grid */
            int shift = keep_exp - e;
            if (shift > 0) {
                if (shift > 128) {
                    m = 0;
                } else if (shift == 128) {
                    u128 half = (u128)1 << 127;
                    m = m > half ? 1 : 0;
                } else {
                    u128 mask = ((u128)1 << shift) - 1;
                    u128 rem = m & mask, half = (u128)1 << (shift - 1);
                    m >>= shift;
                    if (rem > half || (rem == half && (m & 1)))
                        m++;
                }
                e += shift;
            }
            /* m < 2**54 now and m * 2**e lies on the double grid: ldexp is exact,
             * or overflows to inf when rounding carried past the largest double. */
            r = ldexp((double)(uint64_t)m, e);
        }
    }
    return negative ? -r : r;
}

double
srl_long_double_to_double(const uint8_t *b)
{
    uint64_t mant;
    memcpy(&mant, b, 8);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    mant = __builtin_bswap64(mant);
#endif
    unsigned se = (unsigned)b[8] | ((unsigned)b[9] << 8);
    int negative = (se & 0x8000) != 0;
    int exp = (int)(se & 0x7fff);
    if (exp == 0x7fff) {
        if ((mant & 0x7fffffffffffffffULL) == 0)
            return negative ? -HUGE_VAL : HUGE_VAL;
        return NAN;
    }
    /* The integer bit is explicit: take the mantissa at face value, which also gives
     * the x87 meaning of denormals and pseudo-denormals. */
    int e = (exp == 0 ? 1 : exp) - 16383 - 63;
    return scaled_to_double((u128)mant, e, negative);
}

double
srl_float128_to_double(const uint8_t *b)
{
    uint64_t lo, hi;
    memcpy(&lo, b, 8);
    memcpy(&hi, b + 8, 8);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    lo = __builtin_bswap64(lo);
    hi = __builtin_bswap64(hi);
#endif
    int negative = (hi >> 63) != 0;
    int exp = (int)((hi >> 48) & 0x7fff);
    u128 frac = ((u128)(hi & 0xffffffffffffULL) << 64) | lo;
    if (exp == 0x7fff)
        return frac == 0 ? (negative ? -HUGE_VAL : HUGE_VAL) : NAN;
    if (exp == 0)
        return scaled_to_double(frac, 1 - 16383 - 112, negative);
    return scaled_to_double(frac | ((u128)1 << 112), exp - 16383 - 112, negative);
}
