/* An FP8 code's value, written in the tests from the OCP 8-bit floating
 * point formats rather than taken from the library's decoder (so that the
 * tests hold the library to the specification): E4M3 has bias 7 and no
 * infinities (x111 1111 is NaN, not handled here), E5M2 bias 15. */
#ifndef RLX_TESTS_F8_REF_H
#define RLX_TESTS_F8_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/base/dtype.h"

static inline double rlx_test_f8_value(rlx_dtype dt, uint8_t c)
{
    bool e4 = dt == RLX_DTYPE_F8_E4M3;
    int mb = e4 ? 3 : 2, bias = e4 ? 7 : 15;
    int e = (c & 0x7F) >> mb, m = c & ((1 << mb) - 1);
    double v = e ? ldexp(1.0 + m / (double)(1 << mb), e - bias) : ldexp(m, 1 - bias - mb);
    return (c & 0x80) ? -v : v;
}

#endif
