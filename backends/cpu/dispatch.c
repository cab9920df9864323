/* Picks the kernel set once per process from CPUID. */
#include <pthread.h>

#include "backends/cpu/cpu-features.h"
#include "backends/cpu/kernels-internal.h"

static rlx_cpu_table g_table;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
/* the 256 values of each FP8 format's codes, built with the table */
static float g_f8[2][256];

/* weight rows of FP8 against f32 activations: a table lookup a value
 * (FP8 files are read by products of many rows, rlx_cpu_sgemm_half_b; this
 * serves the matrix-vector ones) */
static inline float dot_lut(const float *lut, int64_t n, const uint8_t *w, const float *x)
{
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += lut[w[i + j]] * x[i + j];
    float sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; i++)
        sum += lut[w[i]] * x[i];
    return sum;
}

static void dot_f8_e4m3w(int64_t n, float *s, const void *w, const void *a)
{
    *s = dot_lut(g_f8[0], n, w, a);
}

static void dot_f8_e5m2w(int64_t n, float *s, const void *w, const void *a)
{
    *s = dot_lut(g_f8[1], n, w, a);
}

rlx_cpu_isa rlx_cpu_isa_best(void)
{
    const rlx_cpu_features *f = rlx_cpu_features_get();
    if (f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl && f->avx512vnni && f->fma &&
        f->f16c && f->avx2)
        return RLX_CPU_ISA_AVX512;
    if (f->avx2 && f->fma && f->f16c)
        return RLX_CPU_ISA_AVX2;
    return RLX_CPU_ISA_SCALAR;
}

static void build_table(rlx_cpu_isa isa, rlx_cpu_table *t)
{
    memset(t, 0, sizeof *t);
    t->isa = isa;
    t->vec = rlx_vec_ops_scalar;
    rlx_cpu_fill_dots_scalar(t);
    if (isa >= RLX_CPU_ISA_AVX2) {
        t->vec = rlx_vec_ops_avx2;
        rlx_cpu_fill_dots_avx2(t);
    }
    if (isa >= RLX_CPU_ISA_AVX512) {
        t->vec = rlx_vec_ops_avx512;
        rlx_cpu_fill_dots_avx512(t);
        rlx_cpu_fill_qgemm_avx512(t);
        rlx_cpu_fill_attn_avx512(t);
    }
    t->dot[RLX_DTYPE_F32] = t->vec.dot_f32w;
    t->dot[RLX_DTYPE_F16] = t->vec.dot_f16w;
    t->dot[RLX_DTYPE_BF16] = t->vec.dot_bf16w;
    t->dot[RLX_DTYPE_F8_E4M3] = dot_f8_e4m3w;
    t->dot[RLX_DTYPE_F8_E5M2] = dot_f8_e5m2w;
}

static void init_once(void)
{
    for (int c = 0; c < 256; c++) {
        g_f8[0][c] = rlx_f8_e4m3_to_f32((uint8_t)c);
        g_f8[1][c] = rlx_f8_e5m2_to_f32((uint8_t)c);
    }
    build_table(rlx_cpu_isa_best(), &g_table);
}

void rlx_cpu_kernels_init(void)
{
    pthread_once(&g_once, init_once);
}

const rlx_cpu_table *rlx_cpu_table_get(void)
{
    pthread_once(&g_once, init_once);
    return &g_table;
}

rlx_cpu_isa rlx_cpu_kernels_isa(void)
{
    return rlx_cpu_table_get()->isa;
}

const char *rlx_cpu_isa_name(rlx_cpu_isa isa)
{
    switch (isa) {
    case RLX_CPU_ISA_SCALAR:
        return "scalar";
    case RLX_CPU_ISA_AVX2:
        return "avx2";
    case RLX_CPU_ISA_AVX512:
        return "avx512";
    }
    return "?";
}

rlx_status rlx_cpu_kernels_set_isa(rlx_cpu_isa isa)
{
    pthread_once(&g_once, init_once);
    if (isa < RLX_CPU_ISA_SCALAR || isa > RLX_CPU_ISA_AVX512)
        return RLX_ERR_INVALID_ARG;
    if (isa > rlx_cpu_isa_best())
        return RLX_ERR_UNSUPPORTED;
    build_table(isa, &g_table);
    return RLX_OK;
}

void rlx_cpu_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n)
{
    rlx_cpu_table_get()->vec.f16_to_f32(src, dst, n);
}

void rlx_cpu_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n)
{
    rlx_cpu_table_get()->vec.f32_to_f16(src, dst, n);
}

void rlx_cpu_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n)
{
    rlx_cpu_table_get()->vec.bf16_to_f32(src, dst, n);
}

void rlx_cpu_f32_to_bf16_row(const float *src, uint16_t *dst, int64_t n)
{
    rlx_cpu_table_get()->vec.f32_to_bf16(src, dst, n);
}

const float *rlx_cpu_f8_lut(rlx_dtype t)
{
    pthread_once(&g_once, init_once);
    return t == RLX_DTYPE_F8_E4M3 ? g_f8[0] : t == RLX_DTYPE_F8_E5M2 ? g_f8[1] : NULL;
}

void rlx_cpu_f8_to_f32_row(rlx_dtype t, const uint8_t *src, float *dst, int64_t n)
{
    const float *lut = rlx_cpu_f8_lut(t);
    if (!lut)
        return;
    for (int64_t i = 0; i < n; i++)
        dst[i] = lut[src[i]];
}
