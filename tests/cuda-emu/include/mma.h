// The CUDA emulator's stand-in for <mma.h>: each emulated thread holds the
// whole 16x16 tile of a fragment and computes the whole product, which
// gives the warp-wide result the real fragments hold between them.
#pragma once
#include "cuda_fp16.h"

namespace nvcuda
{
namespace wmma
{
struct matrix_a {
};
struct matrix_b {
};
struct accumulator {
};
struct row_major {
};
struct col_major {
};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    float v[16 * 16];
};

template <class Use, class T, class L>
static inline void fill_fragment(fragment<Use, 16, 16, 16, T, L> &f, float x)
{
    for (int i = 0; i < 256; i++)
        f.v[i] = x;
}

// a: row-major (element (r, c) at p[r * ldm + c]); b: col-major (element
// (k, n) at p[n * ldm + k]); v[] row-major in both
static inline void load_matrix_sync(fragment<matrix_a, 16, 16, 16, __half, row_major> &f,
                                    const __half *p, unsigned ldm)
{
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.v[r * 16 + c] = __half2float(p[r * ldm + c]);
}
static inline void load_matrix_sync(fragment<matrix_b, 16, 16, 16, __half, col_major> &f,
                                    const __half *p, unsigned ldm)
{
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 16; n++)
            f.v[k * 16 + n] = __half2float(p[n * ldm + k]);
}
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                            const fragment<matrix_a, 16, 16, 16, __half, row_major> &a,
                            const fragment<matrix_b, 16, 16, 16, __half, col_major> &b,
                            const fragment<accumulator, 16, 16, 16, float> &c)
{
    float t[256];
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 16; n++) {
            float s = c.v[r * 16 + n];
            for (int k = 0; k < 16; k++)
                s += a.v[r * 16 + k] * b.v[k * 16 + n];
            t[r * 16 + n] = s;
        }
    for (int i = 0; i < 256; i++)
        d.v[i] = t[i];
}
static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                                     unsigned ldm, layout_t)
{
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            p[r * ldm + c] = f.v[r * 16 + c];
}
} // namespace wmma
} // namespace nvcuda
