/* Op conformance: every op of op.h, on every backend in the registry,
 * against a float64 reference written here.
 *
 * Each case builds a one-instruction LIR by hand (inputs are INPUT homes,
 * the result is OUTPUT 0), runs it on every backend, decodes the output to
 * double and compares with |got - ref| <= atol + rtol*|ref| (or an op's own
 * bound, stated at the case). Inputs are rounded to their dtype first, so
 * the reference sees exactly the values the backend sees. Shapes cover size
 * 1, odd sizes, non-multiples of 8/16 and one large case per op family;
 * layouts cover contiguous, padded rows and transposed views.
 *
 * Every backend present must take every case: a decline fails, unless the
 * case is marked CPU-only (cpu_only) with the reason.
 *
 * The GPU backends run twice: with their default kernels (Vulkan: the f16
 * variant on a device with 16-bit storage and float16 arithmetic), then
 * forced to their f32 kernels (rlx_device_opts.force_f32).
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "f8-ref.h"
#include "backends/backend.h"
#include "backends/base/dtype.h"
#include "backends/base/lir.h"
#include "test-util.h"

/* ---- deterministic random numbers --------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static void rng_seed(uint64_t s)
{
    rng_state = s * 0x9E3779B97F4A7C15ull + 1;
}

static uint32_t rng_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static double rng_uniform(double lo, double hi)
{
    return lo + (hi - lo) * ((double)rng_u32() / 4294967296.0);
}

/* ---- test tensors -------------------------------------------------------- */

enum { L_CONTIG, L_PADDED, L_TRANSPOSED };

#define MAXD 6

typedef struct tt {
    rlx_dtype dt;
    int rank;
    int64_t ne[MAXD];
    int64_t st[MAXD]; /* elements */
    int64_t n;        /* logical elements */
    double *v;        /* logical values, dense row-major */
    uint8_t *raw;     /* bytes as the backend sees them */
    size_t raw_bytes;
} tt;

static size_t esize(rlx_dtype dt)
{
    switch (dt) {
    case RLX_DTYPE_F64:
    case RLX_DTYPE_I64:
        return 8;
    case RLX_DTYPE_F32:
    case RLX_DTYPE_I32:
        return 4;
    case RLX_DTYPE_F16:
    case RLX_DTYPE_BF16:
    case RLX_DTYPE_I16:
        return 2;
    default:
        return 1;
    }
}

static bool is_quant(rlx_dtype dt)
{
    return rlx_dtype_get(dt)->quantized;
}

static tt *tt_new(rlx_dtype dt, int rank, const int64_t *ne, int layout)
{
    tt *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->dt = dt;
    t->rank = rank;
    t->n = 1;
    for (int d = 0; d < rank; d++) {
        t->ne[d] = ne[d];
        t->n *= ne[d];
    }
    t->v = calloc((size_t)(t->n ? t->n : 1), sizeof(double));
    assert_non_null(t->v);
    if (is_quant(dt)) {
        const rlx_dtype_info *ti = rlx_dtype_get(dt);
        assert_int_equal(ne[rank - 1] % ti->block_size, 0);
        t->st[rank - 1] = 1;
        for (int d = rank - 2; d >= 0; d--)
            t->st[d] = t->st[d + 1] * ne[d + 1];
        t->raw_bytes = (size_t)(t->n / ti->block_size * ti->type_size);
    } else {
        /* physical dims: for TRANSPOSED, the last two are swapped in memory */
        int64_t pne[MAXD];
        int perm[MAXD];
        for (int d = 0; d < rank; d++) {
            pne[d] = ne[d];
            perm[d] = d;
        }
        if (layout == L_TRANSPOSED && rank >= 2) {
            perm[rank - 1] = rank - 2;
            perm[rank - 2] = rank - 1;
            pne[rank - 1] = ne[rank - 2];
            pne[rank - 2] = ne[rank - 1];
        }
        int64_t pst[MAXD], s = 1;
        for (int d = rank - 1; d >= 0; d--) {
            pst[d] = s;
            s *= pne[d] + (layout == L_PADDED && d == rank - 1 ? 5 : 0);
        }
        for (int d = 0; d < rank; d++)
            t->st[perm[d]] = pst[d];
        int64_t last = 0;
        for (int d = 0; d < rank; d++)
            last += (ne[d] > 0 ? ne[d] - 1 : 0) * t->st[d];
        t->raw_bytes = (size_t)(last + 1) * esize(dt);
    }
    t->raw = calloc(t->raw_bytes + 64, 1);
    assert_non_null(t->raw);
    return t;
}

static void tt_free(tt *t)
{
    if (!t)
        return;
    free(t->v);
    free(t->raw);
    free(t);
}

static int64_t phys_off(const tt *t, int64_t lin)
{
    int64_t off = 0;
    for (int d = t->rank - 1; d >= 0; d--) {
        off += (lin % t->ne[d]) * t->st[d];
        lin /= t->ne[d];
    }
    return off;
}

static uint8_t f8_code(rlx_dtype dt, double x)
{
    return dt == RLX_DTYPE_F8_E4M3 ? rlx_f32_to_f8_e4m3((float)x) : rlx_f32_to_f8_e5m2((float)x);
}

static double round_to(rlx_dtype dt, double x)
{
    switch (dt) {
    case RLX_DTYPE_F8_E4M3:
    case RLX_DTYPE_F8_E5M2:
        return rlx_test_f8_value(dt, f8_code(dt, x));
    case RLX_DTYPE_F32:
        return (float)x;
    case RLX_DTYPE_F16:
        return rlx_f16_to_f32(rlx_f32_to_f16((float)x));
    case RLX_DTYPE_BF16:
        return rlx_bf16_to_f32(rlx_f32_to_bf16((float)x));
    case RLX_DTYPE_I32:
    case RLX_DTYPE_I64:
    case RLX_DTYPE_I16:
    case RLX_DTYPE_I8:
        return floor(x);
    case RLX_DTYPE_U8:
        return floor(x < 0 ? 0 : x);
    default:
        return x;
    }
}

static void put(uint8_t *p, rlx_dtype dt, double x)
{
    switch (dt) {
    case RLX_DTYPE_F64:
        memcpy(p, &x, 8);
        break;
    case RLX_DTYPE_F32: {
        float f = (float)x;
        memcpy(p, &f, 4);
        break;
    }
    case RLX_DTYPE_F16: {
        uint16_t h = rlx_f32_to_f16((float)x);
        memcpy(p, &h, 2);
        break;
    }
    case RLX_DTYPE_BF16: {
        uint16_t h = rlx_f32_to_bf16((float)x);
        memcpy(p, &h, 2);
        break;
    }
    case RLX_DTYPE_I32: {
        int32_t i = (int32_t)x;
        memcpy(p, &i, 4);
        break;
    }
    case RLX_DTYPE_I64: {
        int64_t i = (int64_t)x;
        memcpy(p, &i, 8);
        break;
    }
    case RLX_DTYPE_I8: {
        int8_t i = (int8_t)x;
        memcpy(p, &i, 1);
        break;
    }
    case RLX_DTYPE_U8:
    case RLX_DTYPE_BOOL:
        *p = (uint8_t)x;
        break;
    case RLX_DTYPE_F8_E4M3:
    case RLX_DTYPE_F8_E5M2:
        *p = f8_code(dt, x);
        break;
    default:
        fail_msg("put: dtype %s", rlx_dtype_name(dt));
    }
}

static double get(const uint8_t *p, rlx_dtype dt)
{
    switch (dt) {
    case RLX_DTYPE_F64: {
        double x;
        memcpy(&x, p, 8);
        return x;
    }
    case RLX_DTYPE_F32: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    case RLX_DTYPE_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return rlx_f16_to_f32(h);
    }
    case RLX_DTYPE_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return rlx_bf16_to_f32(h);
    }
    case RLX_DTYPE_I32: {
        int32_t i;
        memcpy(&i, p, 4);
        return i;
    }
    case RLX_DTYPE_I8: {
        int8_t i;
        memcpy(&i, p, 1);
        return i;
    }
    case RLX_DTYPE_I64: {
        int64_t i;
        memcpy(&i, p, 8);
        return (double)i;
    }
    case RLX_DTYPE_U8:
    case RLX_DTYPE_BOOL:
        return *p;
    case RLX_DTYPE_F8_E4M3:
    case RLX_DTYPE_F8_E5M2:
        return rlx_test_f8_value(dt, *p);
    default:
        fail_msg("get: dtype %s", rlx_dtype_name(dt));
        return 0;
    }
}

static void tt_encode(tt *t)
{
    for (int64_t i = 0; i < t->n; i++)
        put(t->raw + phys_off(t, i) * (int64_t)esize(t->dt), t->dt, t->v[i]);
}

static double deq_elem(rlx_dtype dt, const uint8_t *b, int i);

static void tt_decode(tt *t)
{
    if (is_quant(t->dt)) { /* contiguous blocks (a Q8_0 KV cache written by scatter) */
        const rlx_dtype_info *ti = rlx_dtype_get(t->dt);
        for (int64_t i = 0; i < t->n; i++)
            t->v[i] = deq_elem(t->dt, t->raw + (i / ti->block_size) * ti->type_size,
                               (int)(i % ti->block_size));
        return;
    }
    for (int64_t i = 0; i < t->n; i++)
        t->v[i] = get(t->raw + phys_off(t, i) * (int64_t)esize(t->dt), t->dt);
}

/* ---- block formats: a float64 decoder written from ggml's layouts -------- */

static double f16at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return rlx_f16_to_f32(h);
}

/* 6-bit scale and min j (0..7) of a Q4_K/Q5_K block's 12 scale bytes */
static void kq_scale(const uint8_t *s, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Element i (0..block-1) of one block. */
static double deq_elem(rlx_dtype dt, const uint8_t *b, int i)
{
    switch (dt) {
    case RLX_DTYPE_Q4_0: {
        int q = i < 16 ? (b[2 + i] & 15) : (b[2 + i - 16] >> 4);
        return f16at(b) * (q - 8);
    }
    case RLX_DTYPE_Q4_1: {
        int q = i < 16 ? (b[4 + i] & 15) : (b[4 + i - 16] >> 4);
        return f16at(b) * q + f16at(b + 2);
    }
    case RLX_DTYPE_Q5_0:
    case RLX_DTYPE_Q5_1: {
        int off = dt == RLX_DTYPE_Q5_1 ? 4 : 2;
        uint32_t qh = (uint32_t)b[off] | (uint32_t)b[off + 1] << 8 | (uint32_t)b[off + 2] << 16 |
                      (uint32_t)b[off + 3] << 24;
        const uint8_t *qs = b + off + 4;
        int lo = i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4);
        int q = lo | (int)((qh >> i) & 1) << 4;
        if (dt == RLX_DTYPE_Q5_0)
            return f16at(b) * (q - 16);
        return f16at(b) * q + f16at(b + 2);
    }
    case RLX_DTYPE_Q8_0:
        return f16at(b) * (int8_t)b[2 + i];
    case RLX_DTYPE_Q4_K:
    case RLX_DTYPE_Q5_K: {
        /* 8 sub-blocks of 32; pairs of sub-blocks share 32 bytes of nibbles */
        int sub = i / 32, l = i % 32, pair = sub / 2;
        int sc, mn;
        kq_scale(b + 4, sub, &sc, &mn);
        int q;
        if (dt == RLX_DTYPE_Q4_K) {
            uint8_t byte = b[16 + pair * 32 + l];
            q = sub % 2 ? byte >> 4 : byte & 15;
        } else {
            uint8_t byte = b[48 + pair * 32 + l];
            q = sub % 2 ? byte >> 4 : byte & 15;
            q += ((b[16 + l] >> sub) & 1) * 16;
        }
        return f16at(b) * sc * q - f16at(b + 2) * mn;
    }
    case RLX_DTYPE_Q6_K: {
        /* two halves of 128; in each, 4 rows of 32 */
        int half = i / 128, r = (i % 128) / 32, l = i % 32;
        const uint8_t *ql = b + half * 64, *qh = b + 128 + half * 32;
        const int8_t *sc = (const int8_t *)(b + 192) + half * 8;
        int lo = r == 0   ? ql[l] & 15
                 : r == 1 ? ql[l + 32] & 15
                 : r == 2 ? ql[l] >> 4
                          : ql[l + 32] >> 4;
        int hi = (qh[l] >> (2 * r)) & 3;
        int q = (lo | hi << 4) - 32;
        return f16at(b + 208) * sc[l / 16 + 2 * r] * q;
    }
    default:
        fail_msg("deq_elem: %s", rlx_dtype_name(dt));
        return 0;
    }
}

static void put_f16(uint8_t *p, double x)
{
    uint16_t h = rlx_f32_to_f16((float)x);
    memcpy(p, &h, 2);
}

/* Random blocks with sane scales; v = their decoded values. */
static void tt_fill_quant(tt *t)
{
    const rlx_dtype_info *ti = rlx_dtype_get(t->dt);
    size_t nb = t->raw_bytes / ti->type_size;
    for (size_t i = 0; i < t->raw_bytes; i++)
        t->raw[i] = (uint8_t)rng_u32();
    for (size_t k = 0; k < nb; k++) {
        uint8_t *b = t->raw + k * ti->type_size;
        switch (t->dt) {
        case RLX_DTYPE_Q4_0:
        case RLX_DTYPE_Q5_0:
        case RLX_DTYPE_Q8_0:
            put_f16(b, rng_uniform(0.002, 0.05));
            break;
        case RLX_DTYPE_Q4_1:
        case RLX_DTYPE_Q5_1:
            put_f16(b, rng_uniform(0.002, 0.05));
            put_f16(b + 2, rng_uniform(-0.3, 0.1));
            break;
        case RLX_DTYPE_Q4_K:
        case RLX_DTYPE_Q5_K:
            put_f16(b, rng_uniform(0.0005, 0.003));
            put_f16(b + 2, rng_uniform(0.0005, 0.003));
            break;
        case RLX_DTYPE_Q6_K:
            put_f16(b + 208, rng_uniform(0.0001, 0.001));
            break;
        default:
            fail_msg("tt_fill_quant: %s", rlx_dtype_name(t->dt));
        }
    }
    for (int64_t i = 0; i < t->n; i++)
        t->v[i] = deq_elem(t->dt, t->raw + (i / ti->block_size) * ti->type_size,
                           (int)(i % ti->block_size));
}

static tt *tt_rand(rlx_dtype dt, int rank, const int64_t *ne, int layout, double lo, double hi)
{
    tt *t = tt_new(dt, rank, ne, layout);
    if (is_quant(dt)) {
        tt_fill_quant(t);
        return t;
    }
    for (int64_t i = 0; i < t->n; i++)
        t->v[i] = round_to(dt, rng_uniform(lo, hi));
    tt_encode(t);
    return t;
}

/* ---- one-instruction LIRs and running them -------------------------------- */

static const char *const in_names[] = {"in0", "in1", "in2", "in3", "in4", "in5"};

static rlx_lir_value value_of(const tt *t, rlx_home home, int index)
{
    rlx_lir_value v;
    memset(&v, 0, sizeof v);
    v.dtype = t->dt;
    v.shape.rank = t->rank;
    bool contig = true;
    int64_t s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        v.shape.d[d] = rlx_dim_const(t->ne[d]);
        v.stride[d] = rlx_dim_const(t->st[d]);
        if (t->ne[d] != 1 && t->st[d] != s)
            contig = false;
        s *= t->ne[d];
    }
    v.home = home;
    v.index = index;
    v.view_of = -1;
    v.offset = 0;
    v.max_bytes = t->raw_bytes;
    v.contiguous = contig;
    return v;
}

static rlx_lir_binding binding_of(const tt *t, const char *name)
{
    rlx_lir_binding b;
    memset(&b, 0, sizeof b);
    b.name = name;
    b.dtype = t->dt;
    b.shape.rank = t->rank;
    for (int d = 0; d < t->rank; d++)
        b.shape.d[d] = rlx_dim_const(t->ne[d]);
    b.max_bytes = t->raw_bytes;
    return b;
}

typedef struct one_lir {
    rlx_lir lir;
    rlx_lir_value values[RLX_MAX_INPUTS + 1];
    rlx_lir_instr instr;
    rlx_lir_binding inputs[RLX_MAX_INPUTS], outputs[1];
} one_lir;

static void make_lir(one_lir *L, rlx_op op, const rlx_op_params *p, tt **in, int n_in, tt *out)
{
    memset(L, 0, sizeof *L);
    for (int i = 0; i < n_in; i++) {
        L->values[i] = value_of(in[i], RLX_HOME_INPUT, i);
        L->inputs[i] = binding_of(in[i], in_names[i]);
    }
    L->values[n_in] = value_of(out, RLX_HOME_OUTPUT, 0);
    L->outputs[0] = binding_of(out, "out");
    L->instr.op = op;
    if (p)
        L->instr.p = *p;
    L->instr.n_in = n_in;
    for (int i = 0; i < n_in; i++)
        L->instr.in[i] = i;
    L->instr.out = n_in;
    L->lir.n_values = n_in + 1;
    L->lir.values = L->values;
    L->lir.n_instrs = 1;
    L->lir.instrs = &L->instr;
    L->lir.n_inputs = n_in;
    L->lir.inputs = L->inputs;
    L->lir.n_outputs = 1;
    L->lir.outputs = L->outputs;
}

/* The second pass: GPU backends forced to their f32 kernels, the CPU
 * (which has one kind) skipped. */
static bool pass_f32 = false;
/* CUDA's first tensor-core kernel for quantized prompt products
 * (rlx_device_opts.cuda_convert_a_in_tiles): test_matmul_quant_tc */
static bool pass_tc = false;
/* The third and fourth passes: GPU backends with their binding limit
 * lowered to this many bytes (rlx_device_opts.max_binding_bytes), so the
 * larger cases run split into chunks over windows. A split changes no
 * arithmetic, so those results must equal the unsplit run's bit for bit. */
static uint64_t pass_bind = 0;
static uint64_t split_total = 0; /* dispatches added by splits in those passes */
/* Set by cases that must split at pass_bind itself (no doubling of it). */
static bool must_split = false;

/* Every backend must take every case the CPU runs: a GPU backend that
 * declines one fails the suite (legalize would otherwise have to move that
 * op to another device). A case that is the CPU's alone sets cpu_only to
 * the reason, which is printed where another backend declines it. */
static const char *cpu_only = NULL;

/* Run on backend `be`; false when the backend has no device here, or
 * declines a case marked cpu_only. */
static bool run_on(const rlx_backend_i *be, rlx_op op, const rlx_op_params *p, tt **in, int n_in,
                   tt *out)
{
    one_lir L;
    make_lir(&L, op, p, in, n_in, out);
    rlx_error *err = NULL;
    rlx_device *dev = NULL;
    rlx_device_opts opts = {.n_threads = 2,
                            .force_f32 = pass_f32,
                            .max_binding_bytes = pass_bind,
                            .cuda_convert_a_in_tiles = pass_tc};
    if (be->device_open(0, &opts, &dev, &err) != RLX_OK) {
        print_message("  %s: no device (%s), skipped\n", be->name, rlx_error_message(err));
        rlx_error_free(err);
        return false;
    }
    if (!be->supports_op(dev, &L.lir, &L.instr)) {
        be->device_close(dev);
        if (strcmp(be->name, "cpu") == 0 || !cpu_only)
            fail_msg("%s does not support op %s (%s)", be->name, rlx_op_name(op),
                     rlx_dtype_name(in[n_in > 1 ? 1 : 0]->dt));
        print_message("  %s declines %s (%s): CPU only, %s\n", be->name, rlx_op_name(op),
                      rlx_dtype_name(out->dt), cpu_only ? cpu_only : "");
        return false;
    }
    rlx_program *prog = NULL;
    rlx_status st = be->program_create(dev, &L.lir, &prog, &err);
    /* An op splits along its independent axes only (rows, heads, columns of
     * a weight), never inside one row of a reduction or one head of keys;
     * where such a unit is larger than the lowered limit, the smallest
     * doubling of it that the case fits is used. */
    if (st != RLX_OK && pass_bind && must_split)
        fail_msg("%s %s does not split to bindings of %llu bytes: %s", be->name, rlx_op_name(op),
                 (unsigned long long)pass_bind, rlx_error_message(err));
    for (uint64_t lim = pass_bind; st == RLX_ERR_UNSUPPORTED && pass_bind && lim < (1ull << 30);) {
        rlx_error_free(err);
        err = NULL;
        be->device_close(dev);
        lim *= 2;
        opts.max_binding_bytes = lim;
        assert_int_equal(be->device_open(0, &opts, &dev, &err), RLX_OK);
        st = be->program_create(dev, &L.lir, &prog, &err);
        if (st == RLX_OK)
            print_message("  %s %s: bindings of %llu bytes\n", be->name, rlx_op_name(op),
                          (unsigned long long)lim);
    }
    if (st != RLX_OK)
        fail_msg("%s program_create: %s", be->name, rlx_error_message(err));
    rlx_buffer *ib[RLX_MAX_INPUTS] = {0}, *ob = NULL;
    rlx_buffer_ref iref[RLX_MAX_INPUTS], oref;
    for (int i = 0; i < n_in; i++) {
        assert_int_equal(be->buffer_from_host(dev, in[i]->raw, in[i]->raw_bytes, &ib[i], &err),
                         RLX_OK);
        iref[i] = (rlx_buffer_ref){.buf = ib[i], .offset = 0};
    }
    assert_int_equal(be->buffer_alloc(dev, out->raw_bytes, &ob, &err), RLX_OK);
    oref = (rlx_buffer_ref){.buf = ob, .offset = 0};
    rlx_program_bindings bind = {.inputs = iref, .outputs = &oref};
    rlx_sym_values sv = {{0}};
    st = be->program_run(prog, &bind, &sv, &err);
    if (st != RLX_OK)
        fail_msg("%s program_run: %s", be->name, rlx_error_message(err));
    if (pass_bind && be->program_stats) {
        rlx_program_stats ps;
        be->program_stats(prog, &ps);
        split_total += ps.split_dispatches;
    }
    assert_int_equal(be->synchronize(dev, &err), RLX_OK);
    assert_int_equal(be->buffer_read(ob, 0, out->raw, out->raw_bytes, &err), RLX_OK);
    tt_decode(out);
    for (int i = 0; i < n_in; i++)
        be->buffer_free(ib[i]);
    be->buffer_free(ob);
    be->program_free(prog);
    be->device_close(dev);
    return true;
}

/* Compare out->v with ref: |d| <= atol + rtol*|ref| (NaN matches NaN). */
static void check_close(const char *what, const char *backend, const tt *out, const double *ref,
                        double atol, double rtol)
{
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < out->n; i++) {
        double g = out->v[i], r = ref[i];
        if (isnan(r) && isnan(g))
            continue;
        if (isinf(r) && g == r)
            continue;
        double d = fabs(g - r), tol = atol + rtol * fabs(r);
        if (!(d <= tol)) {
            if (first < 0)
                first = i;
            bad++;
        }
        if (d > worst)
            worst = d;
    }
    if (bad)
        fail_msg("%s on %s: %lld of %lld elements off; first at %lld: got %.9g, want %.9g "
                 "(atol %.3g rtol %.3g, worst diff %.3g)",
                 what, backend, (long long)bad, (long long)out->n, (long long)first, out->v[first],
                 ref[first], atol, rtol, worst);
}

/* Per-element bound variant (tol[i]). */
static void check_bound(const char *what, const char *backend, const tt *out, const double *ref,
                        const double *tol)
{
    for (int64_t i = 0; i < out->n; i++) {
        double d = fabs(out->v[i] - ref[i]);
        if (!(d <= tol[i]))
            fail_msg("%s on %s: element %lld of %lld: got %.9g, want %.9g (bound %.3g)", what,
                     backend, (long long)i, (long long)out->n, out->v[i], ref[i], tol[i]);
    }
}

/* Run on every backend and compare. */
static void run_all(const char *what, rlx_op op, const rlx_op_params *p, tt **in, int n_in, tt *out,
                    const double *ref, double atol, double rtol, const double *tol)
{
    for (int b = 0; b < rlx_backend_count(); b++) {
        const rlx_backend_i *be = rlx_backend_at(b);
        if ((pass_f32 || pass_bind) && strcmp(be->name, "cpu") == 0)
            continue;
#ifdef RLX_TEST_CUDA_EMU
        if (strcmp(be->name, "vulkan") == 0) /* test-conformance's job */
            continue;
#endif
        void *whole = NULL;
        if (pass_bind) {
            /* the same device unsplit first */
            uint64_t keep = pass_bind;
            pass_bind = 0;
            memset(out->raw, 0xCD, out->raw_bytes);
            bool ran = run_on(be, op, p, in, n_in, out);
            pass_bind = keep;
            if (!ran)
                continue;
            whole = malloc(out->raw_bytes);
            assert_non_null(whole);
            memcpy(whole, out->raw, out->raw_bytes);
        }
        memset(out->raw, 0xCD, out->raw_bytes); /* poison: every element must be written */
        if (!run_on(be, op, p, in, n_in, out)) {
            free(whole);
            continue;
        }
        if (whole) {
            bool same = memcmp(whole, out->raw, out->raw_bytes) == 0;
            free(whole);
            if (!same)
                fail_msg("%s on %s: bindings of %llu bytes change the result", what, be->name,
                         (unsigned long long)pass_bind);
        }
        if (tol)
            check_bound(what, be->name, out, ref, tol);
        else
            check_close(what, be->name, out, ref, atol, rtol);
    }
}

/* index helpers over dense row-major logical arrays */
static void unravel(int64_t lin, int rank, const int64_t *ne, int64_t *idx)
{
    for (int d = rank - 1; d >= 0; d--) {
        idx[d] = lin % ne[d];
        lin /= ne[d];
    }
}

static int64_t ravel(int rank, const int64_t *ne, const int64_t *idx)
{
    int64_t l = 0;
    for (int d = 0; d < rank; d++)
        l = l * ne[d] + idx[d];
    return l;
}

/* Value of t at out-index idx under numpy broadcasting. */
static double bget(const tt *t, int out_rank, const int64_t *idx)
{
    int64_t ti[MAXD];
    int off = out_rank - t->rank;
    for (int d = 0; d < t->rank; d++)
        ti[d] = t->ne[d] == 1 ? 0 : idx[d + off];
    return t->v[ravel(t->rank, t->ne, ti)];
}

static double *dalloc(int64_t n)
{
    double *p = calloc((size_t)(n ? n : 1), sizeof(double));
    assert_non_null(p);
    return p;
}

#define DIMS(...)  ((const int64_t[]){__VA_ARGS__})
#define NDIMS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

/* ---- elementwise -------------------------------------------------------- */

static double gelu_ref(double x, bool tanh_form)
{
    if (tanh_form)
        return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}

static double unary_ref(rlx_op op, const rlx_op_params *p, double x)
{
    switch (op) {
    case RLX_OP_NEG:
        return -x;
    case RLX_OP_ABS:
        return fabs(x);
    case RLX_OP_EXP:
        return exp(x);
    case RLX_OP_LOG:
        return log(x);
    case RLX_OP_SQRT:
        return sqrt(x);
    case RLX_OP_RSQRT:
        return 1 / sqrt(x);
    case RLX_OP_TANH:
        return tanh(x);
    case RLX_OP_SIGMOID:
        return 1 / (1 + exp(-x));
    case RLX_OP_RELU:
        return x > 0 ? x : 0;
    case RLX_OP_GELU:
        return gelu_ref(x, p->gelu.approx == RLX_GELU_TANH);
    case RLX_OP_SILU:
        return x / (1 + exp(-x));
    case RLX_OP_SIN:
        return sin(x);
    case RLX_OP_COS:
        return cos(x);
    case RLX_OP_SQUARE:
        return x * x;
    case RLX_OP_CLAMP:
        return x < p->clamp.lo ? p->clamp.lo : x > p->clamp.hi ? p->clamp.hi : x;
    case RLX_OP_SCALE:
        return x * p->scale.mul + p->scale.add;
    default:
        fail_msg("unary_ref %d", (int)op);
        return 0;
    }
}

static double binary_ref(rlx_op op, int aux, double a, double b)
{
    switch (op) {
    case RLX_OP_ADD:
        return a + b;
    case RLX_OP_SUB:
        return a - b;
    case RLX_OP_MUL:
        return a * b;
    case RLX_OP_DIV:
        return a / b;
    case RLX_OP_MAX:
        return a > b ? a : b;
    case RLX_OP_MIN:
        return a < b ? a : b;
    case RLX_OP_POW:
        return pow(a, b);
    case RLX_OP_CMP:
        switch (aux) {
        case RLX_CMP_EQ:
            return a == b;
        case RLX_CMP_NE:
            return a != b;
        case RLX_CMP_LT:
            return a < b;
        case RLX_CMP_LE:
            return a <= b;
        case RLX_CMP_GT:
            return a > b;
        default:
            return a >= b;
        }
    default:
        fail_msg("binary_ref %d", (int)op);
        return 0;
    }
}

/* Output tolerance of a dtype's rounding on top of f32 compute. */
static double out_rtol(rlx_dtype dt, double f32_rtol)
{
    if (dt == RLX_DTYPE_F16)
        return f32_rtol + 1.0 / 1024;
    if (dt == RLX_DTYPE_BF16)
        return f32_rtol + 1.0 / 128;
    return f32_rtol;
}

static void test_unary(void **state)
{
    (void)state;
    static const rlx_op ops[] = {RLX_OP_NEG,  RLX_OP_ABS,    RLX_OP_EXP,   RLX_OP_LOG,
                                 RLX_OP_SQRT, RLX_OP_RSQRT,  RLX_OP_TANH,  RLX_OP_SIGMOID,
                                 RLX_OP_RELU, RLX_OP_GELU,   RLX_OP_SILU,  RLX_OP_SIN,
                                 RLX_OP_COS,  RLX_OP_SQUARE, RLX_OP_CLAMP, RLX_OP_SCALE};
    static const struct {
        int rank;
        int64_t ne[3];
    } shapes[] = {{1, {1}}, {1, {7}}, {2, {3, 17}}, {3, {2, 3, 33}}, {2, {5, 16}}};
    static const rlx_dtype in_dt[] = {RLX_DTYPE_F32, RLX_DTYPE_F16, RLX_DTYPE_BF16};
    rng_seed(1);
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        rlx_op op = ops[o];
        for (int variant = 0; variant < (op == RLX_OP_GELU ? 2 : 1); variant++) {
            rlx_op_params p;
            memset(&p, 0, sizeof p);
            p.gelu.approx = variant ? RLX_GELU_TANH : RLX_GELU_ERF;
            if (op == RLX_OP_CLAMP) {
                p.clamp.lo = -0.5f;
                p.clamp.hi = 0.75f;
            }
            if (op == RLX_OP_SCALE) {
                p.scale.mul = 1.5f;
                p.scale.add = -0.25f;
            }
            bool pos = op == RLX_OP_LOG || op == RLX_OP_SQRT || op == RLX_OP_RSQRT;
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (size_t di = 0; di < 3; di++)
                    for (int layout = 0; layout < 2; layout++) {
                        rlx_dtype odt = (s % 2) ? RLX_DTYPE_F16 : RLX_DTYPE_F32;
                        tt *x = tt_rand(in_dt[di], shapes[s].rank, shapes[s].ne,
                                        layout ? L_PADDED : L_CONTIG, pos ? 0.05 : -4, 4);
                        tt *y = tt_new(odt, shapes[s].rank, shapes[s].ne, L_CONTIG);
                        double *ref = dalloc(y->n);
                        for (int64_t i = 0; i < y->n; i++)
                            ref[i] = unary_ref(op, &p, x->v[i]);
                        char what[96];
                        snprintf(what, sizeof what, "op %d %s->%s shape#%zu layout %d", (int)op,
                                 rlx_dtype_name(in_dt[di]), rlx_dtype_name(odt), s, layout);
                        /* libm f32 functions are within a few ulp; exp of |x| <= 4 and
                         * the rational ones like rsqrt lose at most ~4 eps */
                        run_all(what, op, &p, &x, 1, y, ref, 1e-6, out_rtol(odt, 8 * FLT_EPSILON),
                                NULL);
                        free(ref);
                        tt_free(x);
                        tt_free(y);
                    }
        }
    }
}

static void test_unary_large(void **state)
{
    (void)state;
    rng_seed(2);
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    tt *x = tt_rand(RLX_DTYPE_F32, 2, DIMS(257, 1031), L_CONTIG, -6, 6);
    tt *y = tt_new(RLX_DTYPE_F32, 2, DIMS(257, 1031), L_CONTIG);
    double *ref = dalloc(y->n);
    for (int64_t i = 0; i < y->n; i++)
        ref[i] = x->v[i] / (1 + exp(-x->v[i]));
    run_all("silu large", RLX_OP_SILU, &p, &x, 1, y, ref, 1e-6, 8 * FLT_EPSILON, NULL);
    free(ref);
    tt_free(x);
    tt_free(y);
}

static void binary_case(rlx_op op, int aux, rlx_dtype adt, rlx_dtype bdt, rlx_dtype odt, int ra,
                        const int64_t *an, int rb, const int64_t *bn, int layout_a)
{
    int ro = ra > rb ? ra : rb;
    int64_t on[MAXD];
    for (int d = 0; d < ro; d++) {
        int da = d - (ro - ra), db = d - (ro - rb);
        int64_t x = da >= 0 ? an[da] : 1, y = db >= 0 ? bn[db] : 1;
        on[d] = x > y ? x : y;
    }
    bool pos = op == RLX_OP_POW;
    tt *a = tt_rand(adt, ra, an, layout_a, pos ? 0.1 : -3, 3);
    tt *b = tt_rand(bdt, rb, bn, L_CONTIG, pos ? -2 : -3, 3);
    if (op == RLX_OP_DIV)
        for (int64_t i = 0; i < b->n; i++)
            if (fabs(b->v[i]) < 0.25) {
                b->v[i] = 0.5;
                tt_encode(b);
            }
    if (op == RLX_OP_CMP) /* make ties happen */
        for (int64_t i = 0; i < b->n && i < a->n; i += 3) {
            b->v[i] = round_to(bdt, a->v[i]);
            a->v[i] = b->v[i];
        }
    tt_encode(a);
    tt_encode(b);
    tt *y = tt_new(odt, ro, on, L_CONTIG);
    double *ref = dalloc(y->n);
    int64_t idx[MAXD];
    for (int64_t i = 0; i < y->n; i++) {
        unravel(i, ro, on, idx);
        ref[i] = round_to(odt, binary_ref(op, aux, bget(a, ro, idx), bget(b, ro, idx)));
    }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.cmp.kind = (rlx_cmp)aux;
    char what[96];
    snprintf(what, sizeof what, "op %d (aux %d) %s,%s->%s rank %d/%d layout %d", (int)op, aux,
             rlx_dtype_name(adt), rlx_dtype_name(bdt), rlx_dtype_name(odt), ra, rb, layout_a);
    tt *in[2] = {a, b};
    /* one f32 rounding of an exact op (pow: libm's powf, a few ulp) */
    run_all(what, op, &p, in, 2, y, ref, 1e-6, out_rtol(odt, 8 * FLT_EPSILON), NULL);
    free(ref);
    tt_free(a);
    tt_free(b);
    tt_free(y);
}

static void test_binary(void **state)
{
    (void)state;
    static const rlx_op ops[] = {RLX_OP_ADD, RLX_OP_SUB, RLX_OP_MUL, RLX_OP_DIV,
                                 RLX_OP_MAX, RLX_OP_MIN, RLX_OP_POW};
    rng_seed(3);
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        rlx_op op = ops[o];
        binary_case(op, 0, RLX_DTYPE_F32, RLX_DTYPE_F32, RLX_DTYPE_F32, 1, DIMS(1), 1, DIMS(1),
                    L_CONTIG);
        binary_case(op, 0, RLX_DTYPE_F32, RLX_DTYPE_F32, RLX_DTYPE_F32, 2, DIMS(3, 17), 2,
                    DIMS(3, 17), L_PADDED);
        binary_case(op, 0, RLX_DTYPE_F32, RLX_DTYPE_F16, RLX_DTYPE_F32, 3, DIMS(3, 1, 17), 2,
                    DIMS(5, 17), L_CONTIG);
        binary_case(op, 0, RLX_DTYPE_BF16, RLX_DTYPE_F32, RLX_DTYPE_F16, 2, DIMS(9, 33), 1, DIMS(1),
                    L_TRANSPOSED);
        binary_case(op, 0, RLX_DTYPE_F32, RLX_DTYPE_F32, RLX_DTYPE_F32, 4, DIMS(2, 3, 4, 5), 4,
                    DIMS(2, 1, 4, 1), L_CONTIG);
    }
    /* integer arithmetic stays exact */
    binary_case(RLX_OP_ADD, 0, RLX_DTYPE_I32, RLX_DTYPE_I32, RLX_DTYPE_I32, 1, DIMS(19), 1,
                DIMS(19), L_CONTIG);
    binary_case(RLX_OP_MUL, 0, RLX_DTYPE_I32, RLX_DTYPE_I32, RLX_DTYPE_I32, 2, DIMS(4, 7), 1,
                DIMS(7), L_PADDED);
    /* large */
    binary_case(RLX_OP_ADD, 0, RLX_DTYPE_F32, RLX_DTYPE_F32, RLX_DTYPE_F32, 2, DIMS(511, 515), 1,
                DIMS(515), L_CONTIG);
    for (int k = RLX_CMP_EQ; k <= RLX_CMP_GE; k++) {
        binary_case(RLX_OP_CMP, k, RLX_DTYPE_F32, RLX_DTYPE_F32, RLX_DTYPE_U8, 2, DIMS(3, 17), 2,
                    DIMS(3, 17), L_CONTIG);
        binary_case(RLX_OP_CMP, k, RLX_DTYPE_I32, RLX_DTYPE_I32, RLX_DTYPE_U8, 2, DIMS(5, 1), 1,
                    DIMS(9), L_CONTIG);
    }
}

static void test_where(void **state)
{
    (void)state;
    rng_seed(4);
    static const struct {
        int rank;
        int64_t ne[3];
    } shapes[] = {{1, {1}}, {2, {3, 17}}, {3, {2, 5, 33}}};
    for (size_t s = 0; s < 3; s++) {
        tt *c = tt_rand(RLX_DTYPE_U8, shapes[s].rank, shapes[s].ne, L_CONTIG, 0, 2);
        tt *a = tt_rand(RLX_DTYPE_F32, shapes[s].rank, shapes[s].ne, L_PADDED, -2, 2);
        tt *b = tt_rand(RLX_DTYPE_F16, 1, DIMS(1), L_CONTIG, -2, 2);
        tt *y = tt_new(RLX_DTYPE_F32, shapes[s].rank, shapes[s].ne, L_CONTIG);
        double *ref = dalloc(y->n);
        for (int64_t i = 0; i < y->n; i++)
            ref[i] = c->v[i] != 0 ? a->v[i] : b->v[0];
        tt *in[3] = {c, a, b};
        run_all("where", RLX_OP_WHERE, NULL, in, 3, y, ref, 0, 0, NULL);
        free(ref);
        tt_free(c);
        tt_free(a);
        tt_free(b);
        tt_free(y);
    }
}

static void test_cast_copy(void **state)
{
    (void)state;
    rng_seed(5);
    static const struct {
        rlx_dtype from, to;
    } pairs[] = {
        {RLX_DTYPE_F32, RLX_DTYPE_F16}, {RLX_DTYPE_F32, RLX_DTYPE_BF16},
        {RLX_DTYPE_F16, RLX_DTYPE_F32}, {RLX_DTYPE_BF16, RLX_DTYPE_F32},
        {RLX_DTYPE_F32, RLX_DTYPE_I32}, {RLX_DTYPE_I32, RLX_DTYPE_F32},
        {RLX_DTYPE_U8, RLX_DTYPE_F32},  {RLX_DTYPE_I32, RLX_DTYPE_I64},
        {RLX_DTYPE_F32, RLX_DTYPE_F32}, {RLX_DTYPE_I8, RLX_DTYPE_F32},
        {RLX_DTYPE_F32, RLX_DTYPE_I8},  {RLX_DTYPE_I8, RLX_DTYPE_I32},
    };
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
        for (int layout = 0; layout < 3; layout++)
            for (int op = 0; op < 2; op++) {
                int64_t ne[3] = {3, 7, 33};
                tt *x = tt_rand(pairs[k].from, 3, ne, layout, -100, 100);
                tt *y = tt_new(pairs[k].to, 3, ne, L_CONTIG);
                double *ref = dalloc(y->n);
                for (int64_t i = 0; i < y->n; i++) {
                    double v = x->v[i];
                    /* float -> int truncates toward zero (the values, in
                     * [-100, 100), fit every integer type here) */
                    bool to_int = pairs[k].to == RLX_DTYPE_I32 || pairs[k].to == RLX_DTYPE_I64 ||
                                  pairs[k].to == RLX_DTYPE_I8;
                    if (to_int)
                        v = trunc(v);
                    ref[i] = to_int ? v : round_to(pairs[k].to, v);
                }
                char what[96];
                snprintf(what, sizeof what, "%s %s->%s layout %d", op ? "copy" : "cast",
                         rlx_dtype_name(pairs[k].from), rlx_dtype_name(pairs[k].to), layout);
                /* conversions are exact or one rounding to the target dtype */
                run_all(what, op ? RLX_OP_COPY : RLX_OP_CAST, NULL, &x, 1, y, ref, 0, 0, NULL);
                free(ref);
                tt_free(x);
                tt_free(y);
            }
    /* a large strided copy (a transposed view materialized) */
    tt *x = tt_rand(RLX_DTYPE_F32, 2, DIMS(300, 513), L_TRANSPOSED, -1, 1);
    tt *y = tt_new(RLX_DTYPE_F32, 2, DIMS(300, 513), L_CONTIG);
    run_all("copy large transposed", RLX_OP_COPY, NULL, &x, 1, y, x->v, 0, 0, NULL);
    tt_free(x);
    tt_free(y);
}

static void test_fused(void **state)
{
    (void)state;
    rng_seed(6);
    /* y = silu(a) * b * 0.5 + 1, clamped to [-2, 2]; then where(a > b, y, b) */
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.fused.n_steps = 6;
    p.fused.steps[0] = (rlx_fused_step){.op = RLX_OP_SILU, .dst = 2, .a = 0};
    p.fused.steps[1] = (rlx_fused_step){.op = RLX_OP_MUL, .dst = 3, .a = 2, .b = 1};
    p.fused.steps[2] = (rlx_fused_step){.op = RLX_OP_SCALE, .dst = 3, .a = 3, .p0 = 0.5f, .p1 = 1};
    p.fused.steps[3] = (rlx_fused_step){.op = RLX_OP_CLAMP, .dst = 4, .a = 3, .p0 = -2, .p1 = 2};
    p.fused.steps[4] =
        (rlx_fused_step){.op = RLX_OP_CMP, .dst = 5, .a = 0, .b = 1, .aux = RLX_CMP_GT};
    p.fused.steps[5] = (rlx_fused_step){.op = RLX_OP_WHERE, .dst = 6, .a = 5, .b = 4, .c = 1};
    static const struct {
        int rank;
        int64_t ne[3];
    } shapes[] = {{1, {1}}, {2, {3, 17}}, {3, {4, 9, 131}}, {2, {64, 1000}}};
    for (size_t s = 0; s < 4; s++) {
        tt *a = tt_rand(RLX_DTYPE_F32, shapes[s].rank, shapes[s].ne, L_PADDED, -3, 3);
        int64_t bn = shapes[s].ne[shapes[s].rank - 1];
        tt *b = tt_rand(RLX_DTYPE_F16, 1, &bn, L_CONTIG, -3, 3);
        tt *y = tt_new(RLX_DTYPE_F32, shapes[s].rank, shapes[s].ne, L_CONTIG);
        double *ref = dalloc(y->n);
        for (int64_t i = 0; i < y->n; i++) {
            double av = a->v[i], bv = b->v[i % bn];
            double t = av / (1 + exp(-av)) * bv * 0.5 + 1;
            t = t < -2 ? -2 : t > 2 ? 2 : t;
            ref[i] = av > bv ? t : bv;
        }
        tt *in[2] = {a, b};
        run_all("fused", RLX_OP_FUSED_ELEMENTWISE, &p, in, 2, y, ref, 1e-6, 8 * FLT_EPSILON, NULL);
        free(ref);
        tt_free(a);
        tt_free(b);
        tt_free(y);
    }
}

/* ---- matmul -------------------------------------------------------------- */

static double act_ref(rlx_act a, double x)
{
    switch (a) {
    case RLX_ACT_RELU:
        return x > 0 ? x : 0;
    case RLX_ACT_GELU_ERF:
        return gelu_ref(x, false);
    case RLX_ACT_GELU_TANH:
        return gelu_ref(x, true);
    case RLX_ACT_SILU:
        return x / (1 + exp(-x));
    case RLX_ACT_SIGMOID:
        return 1 / (1 + exp(-x));
    case RLX_ACT_TANH:
        return tanh(x);
    default:
        return x;
    }
}

/* a [batch.., M, K] (or [.., K, M] with trans_a), b [K, N] (or [N, K]). */
static void matmul_case(int64_t batch, int64_t M, int64_t K, int64_t N, rlx_dtype adt,
                        rlx_dtype bdt, bool ta, bool tb, int layout_a, bool bias, rlx_act act,
                        float alpha)
{
    int ra = batch > 1 ? 3 : 2;
    int64_t an[3], bnn[2] = {tb ? N : K, tb ? K : N}, on[3];
    int o = 0;
    if (batch > 1) {
        an[o] = batch;
        on[o] = batch;
        o++;
    }
    an[o] = ta ? K : M;
    an[o + 1] = ta ? M : K;
    on[o] = M;
    on[o + 1] = N;
    tt *a = tt_rand(adt, ra, an, layout_a, -1, 1);
    tt *b = tt_rand(bdt, 2, bnn, L_CONTIG, -1, 1);
    tt *bi = bias ? tt_rand(RLX_DTYPE_F32, 1, &N, L_CONTIG, -1, 1) : NULL;
    tt *y = tt_new(RLX_DTYPE_F32, ra, on, L_CONTIG);
    double *ref = dalloc(y->n), *tol = dalloc(y->n);
    double al = alpha == 0 ? 1 : alpha;
    for (int64_t bt = 0; bt < batch; bt++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    double av = a->v[bt * M * K + (ta ? k * M + m : m * K + k)];
                    double bv = b->v[tb ? n * K + k : k * N + n];
                    s += av * bv;
                    mag += fabs(av * bv);
                }
                double v = al * s + (bi ? bi->v[n] : 0);
                int64_t i = (bt * M + m) * N + n;
                ref[i] = act_ref(act, v);
                /* f32 accumulation: error grows like sqrt(K) eps times the sum of
                 * |a_k b_k| (pairwise/blocked sums stay well inside this bound) */
                tol[i] = 4 * sqrt((double)K) * FLT_EPSILON * (fabs(al) * mag + 1) + 1e-6;
                if (is_quant(bdt)) {
                    /* with block weights a backend may round the activations to
                     * 8-bit blocks first, as ggml does (Q8_0 per 32, Q8_K per 256):
                     * each a_k moves by at most amax(block)/254, plus the f16
                     * rounding of the block scale (amax/2048); bound by amax/200 */
                    int64_t qb = rlx_dtype_get(bdt)->block_size;
                    double qerr = 0;
                    for (int64_t k0 = 0; k0 < K; k0 += qb) {
                        double amax = 0, bsum = 0;
                        for (int64_t k = k0; k < k0 + qb && k < K; k++) {
                            double av = a->v[bt * M * K + (ta ? k * M + m : m * K + k)];
                            amax = fmax(amax, fabs(av));
                            bsum += fabs(b->v[tb ? n * K + k : k * N + n]);
                        }
                        qerr += amax / 200 * bsum;
                    }
                    tol[i] += fabs(al) * qerr;
                }
            }
    tt *in[3] = {a, b, bi};
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.matmul.trans_a = ta;
    p.matmul.trans_b = tb;
    p.matmul.has_bias = bias;
    p.matmul.act = act;
    p.matmul.alpha = alpha;
    char what[160];
    snprintf(what, sizeof what, "matmul %lldx[%lld,%lld]x[%lld,%lld] %s x %s ta %d tb %d layout %d",
             (long long)batch, (long long)M, (long long)K, (long long)K, (long long)N,
             rlx_dtype_name(adt), rlx_dtype_name(bdt), ta, tb, layout_a);
    run_all(what, RLX_OP_MATMUL, &p, in, bias ? 3 : 2, y, ref, 0, 0, tol);
    free(ref);
    free(tol);
    tt_free(a);
    tt_free(b);
    tt_free(bi);
    tt_free(y);
}

static void test_matmul_float(void **state)
{
    (void)state;
    rng_seed(7);
    static const int64_t mkn[][3] = {{1, 1, 1}, {1, 7, 5}, {5, 16, 3}, {17, 33, 9}, {3, 64, 31}};
    static const rlx_dtype bdts[] = {RLX_DTYPE_F32, RLX_DTYPE_F16, RLX_DTYPE_BF16};
    for (size_t s = 0; s < sizeof mkn / sizeof mkn[0]; s++)
        for (size_t bd = 0; bd < 3; bd++)
            for (int tb = 0; tb < 2; tb++)
                for (int layout = 0; layout < 3; layout++)
                    matmul_case(1, mkn[s][0], mkn[s][1], mkn[s][2], RLX_DTYPE_F32, bdts[bd], false,
                                tb, layout, false, RLX_ACT_NONE, 0);
    /* trans_a, f16 activations, batches broadcasting over a 2-D weight */
    matmul_case(1, 6, 10, 7, RLX_DTYPE_F32, RLX_DTYPE_F32, true, false, L_CONTIG, false,
                RLX_ACT_NONE, 0);
    matmul_case(1, 6, 10, 7, RLX_DTYPE_F16, RLX_DTYPE_F32, false, true, L_PADDED, false,
                RLX_ACT_NONE, 0);
    matmul_case(3, 4, 24, 5, RLX_DTYPE_F32, RLX_DTYPE_F16, false, true, L_CONTIG, false,
                RLX_ACT_NONE, 0);
    /* batches of many rows (Vulkan's tiled kernel, a tile per batch and
     * 64 x 64 outputs), f32 weights stored [K, N] too */
    matmul_case(3, 70, 40, 24, RLX_DTYPE_F32, RLX_DTYPE_F16, false, true, L_CONTIG, true,
                RLX_ACT_RELU, 0);
    matmul_case(2, 20, 33, 70, RLX_DTYPE_F32, RLX_DTYPE_F32, false, false, L_PADDED, false,
                RLX_ACT_NONE, 0.25f);
    /* epilogues: bias, alpha and every activation */
    for (int act = RLX_ACT_NONE; act <= RLX_ACT_TANH; act++)
        matmul_case(1, 3, 20, 11, RLX_DTYPE_F32, RLX_DTYPE_F32, false, true, L_CONTIG, true,
                    (rlx_act)act, 0.5f);
    /* large */
    matmul_case(1, 67, 300, 129, RLX_DTYPE_F32, RLX_DTYPE_F32, false, false, L_CONTIG, true,
                RLX_ACT_NONE, 0);
    /* large without an epilogue (CUDA runs these in cuBLAS): f16 weights with
     * alpha, f32 weights stored [K, N] under padded activations */
    matmul_case(1, 67, 300, 129, RLX_DTYPE_F32, RLX_DTYPE_F16, false, true, L_CONTIG, false,
                RLX_ACT_NONE, 0.5f);
    matmul_case(1, 40, 64, 48, RLX_DTYPE_F32, RLX_DTYPE_F32, false, false, L_PADDED, false,
                RLX_ACT_NONE, 0);
    /* and f16 activations with f16 weights (cuBLAS takes both as they are) */
    matmul_case(1, 33, 64, 40, RLX_DTYPE_F16, RLX_DTYPE_F16, false, true, L_PADDED, false,
                RLX_ACT_NONE, 0);
}

/* FP8 weights ([N, K] rows, as FLUX.2's FP8 checkpoints store them): one
 * row (the matrix-vector kernels), a few, and a product of many rows with
 * K not a multiple of 16 (the CPU widens panels of 16 into its GEMM); the
 * files' per-tensor scale as alpha, a bias and an activation. The values
 * are exact in f32, so the f32 tolerance holds. */
static void test_matmul_fp8(void **state)
{
    (void)state;
    rng_seed(8);
    static const rlx_dtype f8[] = {RLX_DTYPE_F8_E4M3, RLX_DTYPE_F8_E5M2};
    for (int q = 0; q < 2; q++) {
        matmul_case(1, 1, 64, 7, RLX_DTYPE_F32, f8[q], false, true, L_CONTIG, false, RLX_ACT_NONE,
                    0);
        matmul_case(1, 3, 40, 9, RLX_DTYPE_F32, f8[q], false, true, L_PADDED, false, RLX_ACT_NONE,
                    0.0625f);
        matmul_case(1, 67, 300, 129, RLX_DTYPE_F32, f8[q], false, true, L_CONTIG, true,
                    RLX_ACT_SILU, 0.5f);
        matmul_case(2, 20, 48, 33, RLX_DTYPE_F32, f8[q], false, true, L_CONTIG, false, RLX_ACT_NONE,
                    0);
    }
}

static void test_matmul_quant(void **state)
{
    (void)state;
    rng_seed(8);
    static const rlx_dtype q32[] = {RLX_DTYPE_Q4_0, RLX_DTYPE_Q4_1, RLX_DTYPE_Q5_0, RLX_DTYPE_Q5_1,
                                    RLX_DTYPE_Q8_0};
    static const rlx_dtype qk[] = {RLX_DTYPE_Q4_K, RLX_DTYPE_Q5_K, RLX_DTYPE_Q6_K};
    /* reference: a float64 matmul of the weights as the test decodes them */
    for (size_t q = 0; q < 5; q++) {
        matmul_case(1, 1, 32, 1, RLX_DTYPE_F32, q32[q], false, true, L_CONTIG, false, RLX_ACT_NONE,
                    0);
        matmul_case(1, 3, 96, 17, RLX_DTYPE_F32, q32[q], false, true, L_PADDED, false, RLX_ACT_NONE,
                    0);
        matmul_case(2, 5, 64, 9, RLX_DTYPE_F32, q32[q], false, true, L_CONTIG, true, RLX_ACT_SILU,
                    0);
    }
    for (size_t q = 0; q < 3; q++) {
        matmul_case(1, 1, 256, 3, RLX_DTYPE_F32, qk[q], false, true, L_CONTIG, false, RLX_ACT_NONE,
                    0);
        matmul_case(1, 7, 512, 13, RLX_DTYPE_F32, qk[q], false, true, L_TRANSPOSED, false,
                    RLX_ACT_NONE, 0);
    }
    /* decode shapes (CUDA: the integer matrix-vector kernels with 32, 64
     * and 128 threads a column, several rows, a bias and an activation) */
    matmul_case(1, 4, 2048, 40, RLX_DTYPE_F32, RLX_DTYPE_Q4_K, false, true, L_CONTIG, false,
                RLX_ACT_NONE, 0);
    matmul_case(1, 1, 4096, 21, RLX_DTYPE_F32, RLX_DTYPE_Q4_K, false, true, L_CONTIG, true,
                RLX_ACT_SILU, 0.5f);
    matmul_case(1, 2, 4096, 33, RLX_DTYPE_F32, RLX_DTYPE_Q6_K, false, true, L_CONTIG, false,
                RLX_ACT_NONE, 0);
    matmul_case(1, 8, 1024, 20, RLX_DTYPE_F32, RLX_DTYPE_Q8_0, false, true, L_PADDED, false,
                RLX_ACT_NONE, 0);
    matmul_case(1, 1, 4096, 16, RLX_DTYPE_F32, RLX_DTYPE_Q4_0, false, true, L_CONTIG, true,
                RLX_ACT_NONE, 0);
    matmul_case(1, 3, 1536, 12, RLX_DTYPE_F32, RLX_DTYPE_Q6_K, false, true, L_TRANSPOSED, false,
                RLX_ACT_NONE, 0);
    matmul_case(1, 3, 2048, 24, RLX_DTYPE_F32, RLX_DTYPE_Q5_K, false, true, L_CONTIG, true,
                RLX_ACT_NONE, 0);
    /* CUDA: products of more column tiles than the SMs hold blocks take the
     * streamed form (weights staged through shared memory, each block
     * striding over the tiles with 2 to 4 of them in flight): on the
     * emulator (4 SMs of 2 blocks) these, with a partial last tile, and
     * (K of 33 blocks) tiles that start inside a 16-byte word; on a real
     * GPU the wide ones after them */
    matmul_case(1, 1, 2048, 77, RLX_DTYPE_F32, RLX_DTYPE_Q4_K, false, true, L_CONTIG, true,
                RLX_ACT_SILU, 0.5f);
    matmul_case(1, 3, 256, 301, RLX_DTYPE_F32, RLX_DTYPE_Q6_K, false, true, L_CONTIG, false,
                RLX_ACT_NONE, 0);
    matmul_case(1, 2, 1056, 70, RLX_DTYPE_F32, RLX_DTYPE_Q8_0, false, true, L_PADDED, false,
                RLX_ACT_NONE, 0);
    matmul_case(1, 1, 1056, 45, RLX_DTYPE_F32, RLX_DTYPE_Q4_0, false, true, L_CONTIG, true,
                RLX_ACT_NONE, 0);
    matmul_case(1, 2, 1280, 70, RLX_DTYPE_F32, RLX_DTYPE_Q5_K, false, true, L_CONTIG, false,
                RLX_ACT_SILU, 0.5f);
    matmul_case(1, 1, 8448, 11, RLX_DTYPE_F32, RLX_DTYPE_Q6_K, false, true, L_CONTIG, false,
                RLX_ACT_NONE, 0);
    matmul_case(1, 1, 256, 24001, RLX_DTYPE_F32, RLX_DTYPE_Q4_K, false, true, L_CONTIG, false,
                RLX_ACT_NONE, 0);
    matmul_case(1, 2, 1024, 20003, RLX_DTYPE_F32, RLX_DTYPE_Q6_K, false, true, L_CONTIG, false,
                RLX_ACT_NONE, 0);
    /* Vulkan's matrix-vector kernel for the other weight types: its per-type
     * paths (Q4_1) and its value-at-a-time one (Q5_0, Q5_1, Q5_K), plain
     * weights (f32, f16, bf16) */
    static const rlx_dtype mvt[] = {RLX_DTYPE_Q4_1, RLX_DTYPE_Q5_0, RLX_DTYPE_Q5_1, RLX_DTYPE_Q5_K,
                                    RLX_DTYPE_F32,  RLX_DTYPE_F16,  RLX_DTYPE_BF16};
    for (size_t q = 0; q < sizeof mvt / sizeof mvt[0]; q++)
        matmul_case(1, 3, 512, 9, RLX_DTYPE_F32, mvt[q], false, true, L_CONTIG, true,
                    RLX_ACT_GELU_TANH, 0.5f);
    /* large */
    matmul_case(1, 33, 1024, 96, RLX_DTYPE_F32, RLX_DTYPE_Q4_K, false, true, L_CONTIG, false,
                RLX_ACT_NONE, 0);
    matmul_case(1, 16, 1024, 64, RLX_DTYPE_F32, RLX_DTYPE_Q8_0, false, true, L_CONTIG, false,
                RLX_ACT_NONE, 0);
    /* enough output tiles that CUDA takes its 128x128 tensor-core kernel
     * (the emulator has 4 SMs: 8 tiles and more), the 64x128 one below */
    matmul_case(1, 256, 32, 520, RLX_DTYPE_F32, RLX_DTYPE_Q8_0, false, true, L_CONTIG, true,
                RLX_ACT_NONE, 0);
    /* prompt shapes of every weight type (CUDA: rlx_mm_tq's per-type
     * dequantization, K in steps of 32 through two stages, partial tiles;
     * 64-row tiles for the small ones, 128-row ones where the tiles are
     * many), a transposed `a`, a bias and an activation */
    static const rlx_dtype all[] = {RLX_DTYPE_Q4_K, RLX_DTYPE_Q6_K, RLX_DTYPE_Q8_0,
                                    RLX_DTYPE_Q4_0, RLX_DTYPE_Q5_K, RLX_DTYPE_Q4_1};
    for (size_t q = 0; q < sizeof all / sizeof all[0]; q++) {
        int64_t K = rlx_dtype_get(all[q])->block_size == 256 ? 512 : 96;
        matmul_case(1, 70, K, 150, RLX_DTYPE_F32, all[q], false, true, L_CONTIG, true, RLX_ACT_SILU,
                    0.5f);
        matmul_case(1, 200, K, 600, RLX_DTYPE_F32, all[q], false, true, L_TRANSPOSED, false,
                    RLX_ACT_NONE, 0);
    }
    /* one output tile over a long K (CUDA: rlx_mm_tq splits K where the
     * tiles leave SMs idle; on the emulator's 4 SMs of 2 blocks, 4 parts
     * of 320, the last 96: 3 steps), with a bias and an activation applied
     * once the parts are summed (the 200 x 600 products above with K = 512
     * are 10 tiles of 128 rows there, in 2 parts) */
    matmul_case(1, 40, 1056, 100, RLX_DTYPE_F32, RLX_DTYPE_Q8_0, false, true, L_CONTIG, true,
                RLX_ACT_GELU_TANH, 0.5f);
}

/* ---- reductions ----------------------------------------------------------- */

static void reduce_case(rlx_op op, int rank, const int64_t *ne, int axis, bool keepdim, int layout,
                        int k, bool largest, bool indices)
{
    tt *x = tt_rand(RLX_DTYPE_F32, rank, ne, layout, -5, 5);
    int ax = axis < 0 ? axis + rank : axis;
    int64_t on[MAXD];
    int orank = 0;
    for (int d = 0; d < rank; d++) {
        if (d == ax) {
            if (op == RLX_OP_TOPK)
                on[orank++] = k;
            else if (keepdim)
                on[orank++] = 1;
        } else {
            on[orank++] = ne[d];
        }
    }
    if (orank == 0)
        on[orank++] = 1;
    bool int_out = op == RLX_OP_ARGMAX || (op == RLX_OP_TOPK && indices);
    tt *y = tt_new(int_out ? RLX_DTYPE_I32 : RLX_DTYPE_F32, orank, on, L_CONTIG);
    double *ref = dalloc(y->n);
    int64_t L = ne[ax];
    int64_t outer = x->n / L;
    /* iterate over x with the axis collapsed */
    int64_t cne[MAXD];
    for (int d = 0; d < rank; d++)
        cne[d] = d == ax ? 1 : ne[d];
    double *vals = dalloc(L);
    int64_t *ids = calloc((size_t)L, sizeof *ids);
    for (int64_t o = 0; o < outer; o++) {
        int64_t idx[MAXD];
        unravel(o, rank, cne, idx);
        for (int64_t j = 0; j < L; j++) {
            idx[ax] = j;
            vals[j] = x->v[ravel(rank, ne, idx)];
            ids[j] = j;
        }
        idx[ax] = 0;
        /* the output element(s): out index = idx with the axis removed/kept */
        int64_t oidx[MAXD] = {0};
        int od = 0;
        for (int d = 0; d < rank; d++)
            if (d != ax || op == RLX_OP_TOPK || keepdim)
                oidx[od++] = idx[d];
        if (od == 0)
            oidx[od++] = 0;
        int64_t base = ravel(orank, on, oidx);
        if (op == RLX_OP_TOPK) {
            /* stable selection sort: ties keep the lower index */
            for (int64_t q = 0; q < k; q++) {
                int64_t best = q;
                for (int64_t j = q + 1; j < L; j++)
                    if (largest ? vals[j] > vals[best] : vals[j] < vals[best])
                        best = j;
                double tv = vals[best];
                int64_t ti = ids[best];
                memmove(vals + q + 1, vals + q, (size_t)(best - q) * sizeof *vals);
                memmove(ids + q + 1, ids + q, (size_t)(best - q) * sizeof *ids);
                vals[q] = tv;
                ids[q] = ti;
                int64_t stride = 1;
                for (int d = ax + 1; d < orank; d++)
                    stride *= on[d];
                ref[base + q * stride] = indices ? (double)ids[q] : vals[q];
            }
            continue;
        }
        double s = 0, mx = -INFINITY;
        int64_t am = 0;
        for (int64_t j = 0; j < L; j++) {
            s += vals[j];
            if (vals[j] > mx) {
                mx = vals[j];
                am = j;
            }
        }
        ref[base] = op == RLX_OP_REDUCE_SUM    ? s
                    : op == RLX_OP_REDUCE_MEAN ? s / (double)L
                    : op == RLX_OP_REDUCE_MAX  ? mx
                                               : (double)am;
    }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    if (op == RLX_OP_TOPK) {
        p.topk.axis = axis;
        p.topk.k = k;
        p.topk.largest = largest;
        p.topk.indices = indices;
    } else {
        p.reduce.axis = axis;
        p.reduce.keepdim = keepdim;
    }
    char what[96];
    snprintf(what, sizeof what, "reduce op %d axis %d keep %d rank %d k %d", (int)op, axis, keepdim,
             rank, k);
    /* sums of L terms with |x| <= 5: an f32 accumulation (pairwise or
     * blocked) stays within ~sqrt(L) eps of the sum of |x|; max/argmax are
     * exact */
    double atol = 0;
    if (op == RLX_OP_REDUCE_SUM)
        atol = 4 * sqrt((double)L) * FLT_EPSILON * 5 * (double)L + 1e-6;
    else if (op == RLX_OP_REDUCE_MEAN)
        atol = 4 * sqrt((double)L) * FLT_EPSILON * 5 + 1e-6;
    run_all(what, op, &p, &x, 1, y, ref, atol, FLT_EPSILON, NULL);
    free(vals);
    free(ids);
    free(ref);
    tt_free(x);
    tt_free(y);
}

static void test_reduce(void **state)
{
    (void)state;
    rng_seed(9);
    static const rlx_op ops[] = {RLX_OP_REDUCE_SUM, RLX_OP_REDUCE_MEAN, RLX_OP_REDUCE_MAX,
                                 RLX_OP_ARGMAX};
    for (size_t o = 0; o < 4; o++) {
        reduce_case(ops[o], 1, DIMS(1), 0, false, L_CONTIG, 0, 0, 0);
        reduce_case(ops[o], 1, DIMS(37), 0, true, L_CONTIG, 0, 0, 0);
        reduce_case(ops[o], 2, DIMS(3, 17), -1, false, L_PADDED, 0, 0, 0);
        reduce_case(ops[o], 2, DIMS(3, 17), 0, true, L_TRANSPOSED, 0, 0, 0);
        reduce_case(ops[o], 3, DIMS(4, 9, 5), 1, false, L_CONTIG, 0, 0, 0);
        reduce_case(ops[o], 2, DIMS(64, 4099), 1, false, L_CONTIG, 0, 0, 0);
    }
    for (int lg = 0; lg < 2; lg++)
        for (int ind = 0; ind < 2; ind++) {
            reduce_case(RLX_OP_TOPK, 1, DIMS(1), 0, false, L_CONTIG, 1, lg, ind);
            reduce_case(RLX_OP_TOPK, 2, DIMS(3, 17), 1, false, L_PADDED, 5, lg, ind);
            reduce_case(RLX_OP_TOPK, 2, DIMS(9, 4), 0, false, L_CONTIG, 9, lg, ind);
            reduce_case(RLX_OP_TOPK, 2, DIMS(2, 32000), 1, false, L_CONTIG, 40, lg, ind);
        }
}

/* ---- softmax and norms ------------------------------------------------------ */

static void softmax_case(int rank, const int64_t *ne, int layout, float scale, float softcap,
                         bool mask, rlx_dtype odt)
{
    tt *x = tt_rand(RLX_DTYPE_F32, rank, ne, layout, -6, 6);
    int64_t L = ne[rank - 1];
    tt *m = NULL;
    if (mask) {
        /* a [rows, L] additive mask broadcast over leading dims, with -inf holes
         * and one fully masked row */
        int64_t mn[2] = {ne[rank - 2 >= 0 ? rank - 2 : 0], L};
        if (rank < 2)
            mn[0] = 1;
        m = tt_rand(RLX_DTYPE_F32, 2, mn, L_CONTIG, -1, 1);
        for (int64_t i = 0; i < m->n; i += 3)
            m->v[i] = -INFINITY;
        for (int64_t j = 0; j < L; j++)
            m->v[j] = -INFINITY;
        tt_encode(m);
    }
    tt *y = tt_new(odt, rank, ne, L_CONTIG);
    double *ref = dalloc(y->n);
    double sc = scale == 0 ? 1 : scale;
    for (int64_t r = 0; r < x->n / L; r++) {
        double mx = -INFINITY;
        double *row = dalloc(L);
        int64_t mrow = m ? r % (m->n / L) : 0;
        for (int64_t j = 0; j < L; j++) {
            double v = x->v[r * L + j] * sc;
            if (softcap != 0)
                v = softcap * tanh(v / softcap);
            if (m)
                v += m->v[mrow * L + j];
            row[j] = v;
            mx = v > mx ? v : mx;
        }
        double s = 0;
        for (int64_t j = 0; j < L; j++) {
            row[j] = mx == -INFINITY ? 0 : exp(row[j] - mx);
            s += row[j];
        }
        for (int64_t j = 0; j < L; j++)
            ref[r * L + j] = s > 0 ? row[j] / s : 0;
        free(row);
    }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.softmax.scale = scale;
    p.softmax.softcap = softcap;
    p.softmax.has_mask = mask;
    tt *in[2] = {x, m};
    char what[96];
    snprintf(what, sizeof what, "softmax rank %d L %lld mask %d cap %g", rank, (long long)L, mask,
             softcap);
    /* probabilities in [0, 1]: exp in f32 (a few ulp) and one normalization */
    run_all(what, RLX_OP_SOFTMAX, &p, in, mask ? 2 : 1, y, ref, 1e-6,
            out_rtol(odt, 16 * FLT_EPSILON), NULL);
    free(ref);
    tt_free(x);
    tt_free(m);
    tt_free(y);
}

static void test_softmax(void **state)
{
    (void)state;
    rng_seed(10);
    softmax_case(1, DIMS(1), L_CONTIG, 0, 0, false, RLX_DTYPE_F32);
    softmax_case(2, DIMS(3, 17), L_PADDED, 0.5f, 0, false, RLX_DTYPE_F32);
    softmax_case(3, DIMS(2, 5, 33), L_CONTIG, 1, 0, true, RLX_DTYPE_F32);
    softmax_case(2, DIMS(4, 31), L_TRANSPOSED, 2, 3.0f, true, RLX_DTYPE_F16);
    softmax_case(2, DIMS(8, 32003), L_CONTIG, 1, 0, false, RLX_DTYPE_F32);
}

enum { N_LAYER, N_RMS, N_ADD_RMS, N_ADD_RMS_KEEP };

static void norm_case(int kind, int rank, const int64_t *ne, int layout, bool w, bool b,
                      rlx_dtype wdt)
{
    int64_t L = ne[rank - 1];
    tt *x = tt_rand(RLX_DTYPE_F32, rank, ne, layout, -3, 5);
    bool keep = kind == N_ADD_RMS_KEEP;
    tt *x2 = kind >= N_ADD_RMS ? tt_rand(RLX_DTYPE_F32, rank, ne, L_CONTIG, -1, 1) : NULL;
    tt *wt = w ? tt_rand(wdt, 1, &L, L_CONTIG, 0.5, 1.5) : NULL;
    tt *bt = b ? tt_rand(wdt, 1, &L, L_CONTIG, -1, 1) : NULL;
    /* keep_sum: [..., 2, L]: per row the sum a + b, then the norm */
    int64_t kne[RLX_MAX_DIMS];
    for (int d = 0; d + 1 < rank; d++)
        kne[d] = ne[d];
    kne[rank - 1] = 2;
    kne[rank] = L;
    tt *y = keep ? tt_new(RLX_DTYPE_F32, rank + 1, kne, L_CONTIG)
                 : tt_new(RLX_DTYPE_F32, rank, ne, L_CONTIG);
    double *ref = dalloc(y->n);
    int64_t rs = keep ? 2 * L : L, nrm = keep ? L : 0; /* ref row stride, norm offset */
    float eps = 1e-5f;
    for (int64_t r = 0; r < x->n / L; r++) {
        double s = 0, s2 = 0;
        for (int64_t j = 0; j < L; j++) {
            double v = x->v[r * L + j] + (x2 ? x2->v[r * L + j] : 0);
            s += v;
            s2 += v * v;
        }
        double mean = kind == N_LAYER ? s / (double)L : 0;
        double var = kind == N_LAYER ? s2 / (double)L - mean * mean : s2 / (double)L;
        double inv = 1 / sqrt(var + eps);
        for (int64_t j = 0; j < L; j++) {
            double v = x->v[r * L + j] + (x2 ? x2->v[r * L + j] : 0);
            ref[r * rs + nrm + j] = (v - mean) * inv * (wt ? wt->v[j] : 1) + (bt ? bt->v[j] : 0);
            if (keep)
                ref[r * rs + j] = v;
        }
    }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.norm.eps = eps;
    p.norm.has_weight = w;
    p.norm.has_bias = b;
    p.norm.keep_sum = keep;
    tt *in[4];
    int n = 0;
    in[n++] = x;
    if (x2)
        in[n++] = x2;
    if (wt)
        in[n++] = wt;
    if (bt)
        in[n++] = bt;
    rlx_op op = kind == N_LAYER ? RLX_OP_LAYER_NORM
                : kind == N_RMS ? RLX_OP_RMS_NORM
                                : RLX_OP_ADD_RMS_NORM;
    char what[96];
    snprintf(what, sizeof what, "norm %d rank %d L %lld w %d b %d", kind, rank, (long long)L, w, b);
    /* outputs O(1..10); statistics in f32 or better over L terms */
    run_all(what, op, &p, in, n, y, ref, 2e-5, 2e-5, NULL);
    free(ref);
    tt_free(x);
    tt_free(x2);
    tt_free(wt);
    tt_free(bt);
    tt_free(y);
}

static void test_norms(void **state)
{
    (void)state;
    rng_seed(11);
    for (int kind = 0; kind < 4; kind++) {
        bool hasb = kind == N_LAYER;
        norm_case(kind, 1, DIMS(1), L_CONTIG, true, hasb, RLX_DTYPE_F32);
        norm_case(kind, 2, DIMS(3, 17), L_PADDED, true, hasb, RLX_DTYPE_F16);
        norm_case(kind, 3, DIMS(2, 5, 33), L_CONTIG, true, false, RLX_DTYPE_F32);
        norm_case(kind, 2, DIMS(4, 64), L_TRANSPOSED, true, hasb, RLX_DTYPE_F32);
        norm_case(kind, 2, DIMS(32, 4096), L_CONTIG, true, hasb, RLX_DTYPE_F32);
        /* decode shapes: per-head norms (a warp a row on CUDA) and one
         * token's row of 2048 (a block a row) */
        norm_case(kind, 2, DIMS(9, 128), L_CONTIG, true, hasb, RLX_DTYPE_F32);
        norm_case(kind, 2, DIMS(1, 2048), L_CONTIG, true, hasb, RLX_DTYPE_F32);
        if (kind < N_ADD_RMS)
            norm_case(kind, 2, DIMS(3, 17), L_CONTIG, false, false, RLX_DTYPE_F32);
    }
}

static void group_norm_case(int64_t N, int64_t C, int64_t H, int64_t W, int G, bool affine)
{
    int64_t ne[4] = {N, C, H, W};
    tt *x = tt_rand(RLX_DTYPE_F32, 4, ne, L_CONTIG, -2, 3);
    tt *w = affine ? tt_rand(RLX_DTYPE_F32, 1, &C, L_CONTIG, 0.5, 1.5) : NULL;
    tt *b = affine ? tt_rand(RLX_DTYPE_F32, 1, &C, L_CONTIG, -1, 1) : NULL;
    tt *y = tt_new(RLX_DTYPE_F32, 4, ne, L_CONTIG);
    double *ref = dalloc(y->n);
    int64_t cg = C / G, S = H * W;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            double s = 0, s2 = 0;
            for (int64_t c = g * cg; c < (g + 1) * cg; c++)
                for (int64_t i = 0; i < S; i++) {
                    double v = x->v[(n * C + c) * S + i];
                    s += v;
                    s2 += v * v;
                }
            double mean = s / (double)(cg * S), var = s2 / (double)(cg * S) - mean * mean;
            for (int64_t c = g * cg; c < (g + 1) * cg; c++)
                for (int64_t i = 0; i < S; i++) {
                    int64_t k = (n * C + c) * S + i;
                    ref[k] =
                        (x->v[k] - mean) / sqrt(var + 1e-6) * (w ? w->v[c] : 1) + (b ? b->v[c] : 0);
                }
        }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.norm.eps = 1e-6f;
    p.norm.groups = G;
    p.norm.has_weight = affine;
    p.norm.has_bias = affine;
    tt *in[3] = {x, w, b};
    run_all("group_norm", RLX_OP_GROUP_NORM, &p, in, affine ? 3 : 1, y, ref, 2e-5, 2e-5, NULL);
    free(ref);
    tt_free(x);
    tt_free(w);
    tt_free(b);
    tt_free(y);
}

static void test_group_norm(void **state)
{
    (void)state;
    rng_seed(12);
    group_norm_case(1, 1, 1, 1, 1, false);
    group_norm_case(2, 6, 3, 5, 3, true);
    group_norm_case(1, 32, 17, 9, 8, true);
    group_norm_case(1, 64, 32, 32, 32, true);
}

/* ---- rope -------------------------------------------------------------------- */

static void rope_case(int seq_axis, int64_t B, int64_t S, int64_t H, int64_t D, int n_rot,
                      rlx_rope_mode mode, bool ff, int layout)
{
    int64_t ne[4] = {B, seq_axis == 1 ? S : H, seq_axis == 1 ? H : S, D};
    tt *x = tt_rand(RLX_DTYPE_F32, 4, ne, layout, -2, 2);
    tt *pos = tt_new(RLX_DTYPE_I32, 1, &S, L_CONTIG);
    for (int64_t s = 0; s < S; s++)
        pos->v[s] = (double)((s * 7 + 3) % 1000);
    tt_encode(pos);
    int64_t nr = n_rot ? n_rot : D, half = nr / 2;
    tt *f = ff ? tt_rand(RLX_DTYPE_F32, 1, &half, L_CONTIG, 1, 8) : NULL;
    tt *y = tt_new(RLX_DTYPE_F32, 4, ne, L_CONTIG);
    double *ref = dalloc(y->n);
    float base = 10000, fscale = 0.5f;
    for (int64_t i = 0; i < y->n; i += D) {
        int64_t idx[4];
        unravel(i, 4, ne, idx);
        double p = pos->v[idx[seq_axis]];
        for (int64_t j = 0; j < D; j++)
            ref[i + j] = x->v[i + j];
        for (int64_t k = 0; k < half; k++) {
            double th = p * fscale * pow(base, -2.0 * (double)k / (double)nr);
            if (f)
                th /= f->v[k];
            int64_t i0 = mode == RLX_ROPE_NEOX ? k : 2 * k;
            int64_t i1 = mode == RLX_ROPE_NEOX ? k + half : 2 * k + 1;
            double x0 = x->v[i + i0], x1 = x->v[i + i1];
            ref[i + i0] = x0 * cos(th) - x1 * sin(th);
            ref[i + i1] = x0 * sin(th) + x1 * cos(th);
        }
    }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.rope.mode = mode;
    p.rope.n_rot = n_rot;
    p.rope.freq_base = base;
    p.rope.freq_scale = fscale;
    p.rope.has_freq_factors = ff;
    p.rope.seq_axis = seq_axis;
    tt *in[3] = {x, pos, f};
    /* angles up to ~500 rad computed in f32: |theta| * eps of phase error */
    run_all("rope", RLX_OP_ROPE, &p, in, ff ? 3 : 2, y, ref, 2e-4, 1e-5, NULL);
    free(ref);
    tt_free(x);
    tt_free(pos);
    tt_free(f);
    tt_free(y);
}

static void test_rope(void **state)
{
    (void)state;
    rng_seed(13);
    for (int mode = 0; mode < 2; mode++) {
        rope_case(1, 1, 1, 1, 2, 0, (rlx_rope_mode)mode, false, L_CONTIG);
        rope_case(1, 1, 5, 3, 16, 0, (rlx_rope_mode)mode, false, L_PADDED);
        rope_case(2, 2, 7, 3, 64, 32, (rlx_rope_mode)mode, true, L_CONTIG);
        rope_case(1, 1, 9, 4, 24, 16, (rlx_rope_mode)mode, false, L_CONTIG);
        rope_case(2, 1, 128, 8, 128, 0, (rlx_rope_mode)mode, true, L_CONTIG);
    }
}

/* ---- attention --------------------------------------------------------------- */

/* k and v live in a cache of `cap` >= T positions (strided views) when
 * cap > T; F16 caches when kv_dt is F16. */
/* grid_w > 0: the bias is decomposed over a key grid of grid_w columns
 * ([S, T / grid_w + grid_w]: row terms, then column terms). */
static void attn_case_grid(int64_t B, int64_t Hq, int64_t Hkv, int64_t S, int64_t T, int64_t D,
                           int64_t Dv, rlx_mask_kind mask, int window, float softcap, bool bias,
                           rlx_dtype kv_dt, int64_t cap, int64_t grid_w)
{
    int64_t qn[4] = {B, Hq, S, D}, on[4] = {B, Hq, S, Dv};
    tt *q = tt_rand(RLX_DTYPE_F32, 4, qn, L_CONTIG, -1, 1);
    /* the cache [B, Hkv, cap, D]; the value is its first T positions */
    int64_t kc[4] = {B, Hkv, cap, D}, vc[4] = {B, Hkv, cap, Dv};
    tt *kcache = tt_rand(kv_dt, 4, kc, L_CONTIG, -1, 1);
    tt *vcache = tt_rand(kv_dt, 4, vc, L_CONTIG, -1, 1);
    tt *k = tt_new(kv_dt, 4, (int64_t[]){B, Hkv, T, D}, L_CONTIG);
    tt *v = tt_new(kv_dt, 4, (int64_t[]){B, Hkv, T, Dv}, L_CONTIG);
    /* view k, v onto the cache bytes */
    free(k->raw);
    free(v->raw);
    k->raw = kcache->raw;
    v->raw = vcache->raw;
    k->raw_bytes = kcache->raw_bytes;
    v->raw_bytes = vcache->raw_bytes;
    memcpy(k->st, kcache->st, sizeof k->st);
    memcpy(v->st, vcache->st, sizeof v->st);
    for (int64_t i = 0; i < k->n; i++) {
        int64_t idx[4];
        unravel(i, 4, k->ne, idx);
        k->v[i] = kcache->v[ravel(4, kc, idx)];
    }
    for (int64_t i = 0; i < v->n; i++) {
        int64_t idx[4];
        unravel(i, 4, v->ne, idx);
        v->v[i] = vcache->v[ravel(4, vc, idx)];
    }
    const int64_t gh = grid_w > 0 ? T / grid_w : 0, bw = grid_w > 0 ? gh + grid_w : T;
    tt *bt = bias ? tt_rand(RLX_DTYPE_F32, 2, (int64_t[]){S, bw}, L_CONTIG, -1, 1) : NULL;
    tt *y = tt_new(RLX_DTYPE_F32, 4, on, L_CONTIG);
    double *ref = dalloc(y->n), *sc = dalloc(T);
    double scale = 1 / sqrt((double)D);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            int64_t hk = h / (Hq / Hkv);
            for (int64_t s = 0; s < S; s++) {
                int64_t p = T - S + s;
                double mx = -INFINITY;
                for (int64_t t = 0; t < T; t++) {
                    bool ok = mask == RLX_MASK_NONE ||
                              (t <= p && (mask != RLX_MASK_WINDOW || t > p - window));
                    if (!ok) {
                        sc[t] = -INFINITY;
                        continue;
                    }
                    double d = 0;
                    for (int64_t j = 0; j < D; j++)
                        d += q->v[((b * Hq + h) * S + s) * D + j] *
                             k->v[((b * Hkv + hk) * T + t) * D + j];
                    d *= scale;
                    if (softcap != 0)
                        d = softcap * tanh(d / softcap);
                    if (bt && grid_w > 0)
                        d += bt->v[s * bw + t / grid_w] + bt->v[s * bw + gh + t % grid_w];
                    else if (bt)
                        d += bt->v[s * T + t];
                    sc[t] = d;
                    mx = d > mx ? d : mx;
                }
                double sum = 0;
                for (int64_t t = 0; t < T; t++) {
                    sc[t] = mx == -INFINITY || sc[t] == -INFINITY ? 0 : exp(sc[t] - mx);
                    sum += sc[t];
                }
                for (int64_t j = 0; j < Dv; j++) {
                    double acc = 0;
                    for (int64_t t = 0; t < T; t++)
                        acc += sc[t] * v->v[((b * Hkv + hk) * T + t) * Dv + j];
                    ref[((b * Hq + h) * S + s) * Dv + j] = sum > 0 ? acc / sum : 0;
                }
            }
        }
    rlx_op_params pr;
    memset(&pr, 0, sizeof pr);
    pr.attn.mask = mask;
    pr.attn.window = window;
    pr.attn.softcap = softcap;
    pr.attn.has_bias = bias;
    pr.attn.bias_grid_w = (int32_t)grid_w;
    tt *in[4] = {q, k, v, bt};
    char what[160];
    snprintf(what, sizeof what,
             "attention B%lld Hq%lld Hkv%lld S%lld T%lld D%lld mask %d %s grid %lld", (long long)B,
             (long long)Hq, (long long)Hkv, (long long)S, (long long)T, (long long)D, (int)mask,
             rlx_dtype_name(kv_dt), (long long)grid_w);
    /* outputs are convex combinations of |v| <= 1: absolute error of an f32
     * dot of D terms, an f32 softmax and an f32 weighted sum */
    run_all(what, RLX_OP_ATTENTION, &pr, in, bias ? 4 : 3, y, ref, 2e-5 + 1e-6 * sqrt((double)T), 0,
            NULL);
    free(ref);
    free(sc);
    k->raw = v->raw = NULL;
    tt_free(q);
    tt_free(k);
    tt_free(v);
    tt_free(kcache);
    tt_free(vcache);
    tt_free(bt);
    tt_free(y);
}

static void attn_case(int64_t B, int64_t Hq, int64_t Hkv, int64_t S, int64_t T, int64_t D,
                      int64_t Dv, rlx_mask_kind mask, int window, float softcap, bool bias,
                      rlx_dtype kv_dt, int64_t cap)
{
    attn_case_grid(B, Hq, Hkv, S, T, D, Dv, mask, window, softcap, bias, kv_dt, cap, 0);
}

/* Attention over a token-major Q8_0 KV cache [cap, Hkv * D] (the llm
 * graph's layout): k / v are [1, Hkv, T, D] views with ld_tok = Hkv * D and
 * ld_head = D, so with D < 32 a head's row starts inside a block. The
 * reference reads the float64 decode of the same blocks (deq_elem, written
 * from ggml's layout), so only the kernel's f32 arithmetic differs. */
static void attn_q8_case(int64_t Hq, int64_t Hkv, int64_t S, int64_t T, int64_t D,
                         rlx_mask_kind mask, int window, int64_t cap)
{
    int64_t W = Hkv * D;
    tt *q = tt_rand(RLX_DTYPE_F32, 4, (int64_t[]){1, Hq, S, D}, L_CONTIG, -1, 1);
    tt *kc = tt_rand(RLX_DTYPE_Q8_0, 2, (int64_t[]){cap, W}, L_CONTIG, 0, 0);
    tt *vc = tt_rand(RLX_DTYPE_Q8_0, 2, (int64_t[]){cap, W}, L_CONTIG, 0, 0);
    tt *kv[2];
    for (int i = 0; i < 2; i++) {
        tt *c = i ? vc : kc;
        tt *t = tt_new(RLX_DTYPE_F32, 4, (int64_t[]){1, Hkv, T, D}, L_CONTIG);
        free(t->raw);
        t->dt = RLX_DTYPE_Q8_0;
        t->raw = c->raw;
        t->raw_bytes = c->raw_bytes;
        int64_t st[4] = {T * W, D, W, 1};
        memcpy(t->st, st, sizeof st);
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t tk = 0; tk < T; tk++)
                for (int64_t j = 0; j < D; j++)
                    t->v[(h * T + tk) * D + j] = c->v[tk * W + h * D + j];
        kv[i] = t;
    }
    tt *y = tt_new(RLX_DTYPE_F32, 4, (int64_t[]){1, Hq, S, D}, L_CONTIG);
    double *ref = dalloc(y->n), *sc = dalloc(T);
    double scale = 1 / sqrt((double)D);
    for (int64_t h = 0; h < Hq; h++) {
        int64_t hk = h / (Hq / Hkv);
        for (int64_t s = 0; s < S; s++) {
            int64_t p = T - S + s;
            double mx = -INFINITY, sum = 0;
            for (int64_t t = 0; t < T; t++) {
                bool ok = mask == RLX_MASK_NONE ||
                          (t <= p && (mask != RLX_MASK_WINDOW || t > p - window));
                double d = 0;
                for (int64_t j = 0; j < D && ok; j++)
                    d += q->v[(h * S + s) * D + j] * kv[0]->v[(hk * T + t) * D + j];
                sc[t] = ok ? d * scale : -INFINITY;
                mx = sc[t] > mx ? sc[t] : mx;
            }
            for (int64_t t = 0; t < T; t++) {
                sc[t] = sc[t] == -INFINITY ? 0 : exp(sc[t] - mx);
                sum += sc[t];
            }
            for (int64_t j = 0; j < D; j++) {
                double acc = 0;
                for (int64_t t = 0; t < T; t++)
                    acc += sc[t] * kv[1]->v[(hk * T + t) * D + j];
                ref[(h * S + s) * D + j] = acc / sum;
            }
        }
    }
    rlx_op_params pr;
    memset(&pr, 0, sizeof pr);
    pr.attn.mask = mask;
    pr.attn.window = window;
    tt *in[3] = {q, kv[0], kv[1]};
    char what[128];
    snprintf(what, sizeof what, "attention Q8_0 cache Hq%lld Hkv%lld S%lld T%lld D%lld",
             (long long)Hq, (long long)Hkv, (long long)S, (long long)T, (long long)D);
    /* the blocks hold |v| <= 127 * 0.05: the f32 error bound of the float
     * cases scaled by that range */
    run_all(what, RLX_OP_ATTENTION, &pr, in, 3, y, ref, 7 * (2e-5 + 1e-6 * sqrt((double)T)), 0,
            NULL);
    free(ref);
    free(sc);
    kv[0]->raw = kv[1]->raw = NULL;
    tt_free(kv[0]);
    tt_free(kv[1]);
    tt_free(kc);
    tt_free(vc);
    tt_free(q);
    tt_free(y);
}

static void test_attention(void **state)
{
    (void)state;
    rng_seed(14);
    attn_case(1, 1, 1, 1, 1, 1, 1, RLX_MASK_NONE, 0, 0, false, RLX_DTYPE_F32, 1);
    attn_case(1, 2, 2, 3, 3, 8, 8, RLX_MASK_CAUSAL, 0, 0, false, RLX_DTYPE_F32, 3);
    /* decode step over a KV cache with room to spare (strided k/v), GQA */
    attn_case(1, 8, 2, 1, 17, 64, 64, RLX_MASK_CAUSAL, 0, 0, false, RLX_DTYPE_F32, 40);
    /* decode-sized steps (up to 4 query rows of a KV head per task in the
     * AVX-512 kernel): one head per KV head over three key tiles, the last
     * one partial; two (Qwen3's 16/8); three queries sliding; two heads x
     * two queries at head dim 256; four queries at the start of the cache */
    attn_case(1, 4, 4, 1, 150, 128, 128, RLX_MASK_CAUSAL, 0, 0, false, RLX_DTYPE_F16, 160);
    attn_case(1, 16, 8, 1, 200, 128, 128, RLX_MASK_CAUSAL, 0, 0, false, RLX_DTYPE_F16, 256);
    attn_case(1, 4, 4, 3, 70, 32, 32, RLX_MASK_WINDOW, 20, 0, false, RLX_DTYPE_F32, 80);
    attn_case(1, 8, 2, 2, 90, 256, 256, RLX_MASK_CAUSAL, 0, 0, false, RLX_DTYPE_F16, 96);
    attn_case(1, 2, 2, 4, 4, 16, 16, RLX_MASK_CAUSAL, 0, 0, false, RLX_DTYPE_F32, 8);
    attn_case(2, 4, 4, 5, 12, 16, 24, RLX_MASK_WINDOW, 4, 0, false, RLX_DTYPE_F16, 20);
    attn_case(1, 4, 1, 7, 7, 32, 32, RLX_MASK_NONE, 0, 30.0f, true, RLX_DTYPE_F32, 9);
    attn_case(1, 6, 3, 9, 9, 17, 5, RLX_MASK_CAUSAL, 0, 0, true, RLX_DTYPE_F16, 9);
    /* large prefill */
    attn_case(1, 8, 8, 128, 128, 64, 64, RLX_MASK_CAUSAL, 0, 0, false, RLX_DTYPE_F32, 256);
    /* prompt chunks (the AVX-512 prefill takes blocks of four 16-query
     * tiles, each K/V tile widened once for the block): 70 queries after 30
     * cached keys, heads in pairs, the last block one partial tile; sliding
     * windows shorter than a block, so its tiles see different key ranges
     * (f32 keys: partial key blocks read the cache rows themselves); head
     * dim 256 */
    attn_case(1, 4, 2, 70, 100, 64, 64, RLX_MASK_CAUSAL, 0, 0, false, RLX_DTYPE_F16, 128);
    attn_case(1, 2, 2, 90, 90, 32, 32, RLX_MASK_WINDOW, 20, 0, false, RLX_DTYPE_F32, 96);
    attn_case(1, 8, 4, 64, 80, 256, 256, RLX_MASK_WINDOW, 24, 0, false, RLX_DTYPE_F16, 80);
    /* a bias decomposed over the key grid (SAM's relative positions): 14 x
     * 14 windows (rows of 28 terms, permuted in registers), a 16 x 32 grid
     * (one row term and 16 column terms per 16 keys), 12 x 24 (lane by
     * lane), and head dims off 16 (the portable tile). Only the CPU adds it
     * per key; the compiler builds the full bias for the others. */
    cpu_only = "a grid-decomposed bias is expanded by the compiler for other devices";
    attn_case_grid(2, 2, 2, 196, 196, 64, 64, RLX_MASK_NONE, 0, 0, true, RLX_DTYPE_F32, 196, 14);
    attn_case_grid(1, 2, 2, 70, 512, 32, 32, RLX_MASK_NONE, 0, 0, true, RLX_DTYPE_F32, 512, 32);
    attn_case_grid(1, 1, 1, 40, 288, 16, 16, RLX_MASK_NONE, 0, 0, true, RLX_DTYPE_F16, 288, 24);
    attn_case_grid(1, 3, 1, 9, 12, 17, 5, RLX_MASK_NONE, 0, 0, true, RLX_DTYPE_F32, 12, 4);
    cpu_only = NULL;
    /* a Q8_0 KV cache: heads of 8 (4 per block), of 32, of 64 (2 blocks) */
    attn_q8_case(8, 4, 1, 17, 8, RLX_MASK_CAUSAL, 0, 40);
    attn_q8_case(4, 2, 5, 70, 32, RLX_MASK_CAUSAL, 0, 96);
    attn_q8_case(4, 4, 9, 9, 64, RLX_MASK_WINDOW, 4, 12);
}

/* The append into a Q8_0 cache: rows [off, off + S) of a [cap, W] Q8_0 state
 * receive the f32 rows of src, quantized as ggml's reference does (d = max|x|
 * / 127 stored as f16, q = round(x / d) with the f32 d); the other rows keep
 * their blocks. The reference quantizes in float64 from that description
 * and the output blocks are decoded by deq_elem. */
static void scatter_q8_case(int64_t cap, int64_t W, int64_t S, int64_t off)
{
    tt *state = tt_rand(RLX_DTYPE_Q8_0, 2, (int64_t[]){cap, W}, L_CONTIG, 0, 0);
    tt *src = tt_rand(RLX_DTYPE_F32, 2, (int64_t[]){S, W}, L_CONTIG, -2, 2);
    if (S > 1) /* an all-zero block: d = 0, every q = 0 */
        for (int64_t j = 0; j < 32; j++)
            src->v[W + j] = 0;
    tt_encode(src);
    tt *y = tt_new(RLX_DTYPE_Q8_0, 2, (int64_t[]){cap, W}, L_CONTIG);
    double *ref = dalloc(y->n), *tol = dalloc(y->n);
    memcpy(ref, state->v, sizeof *ref * (size_t)y->n);
    for (int64_t r = 0; r < S; r++)
        for (int64_t b0 = 0; b0 < W; b0 += 32) {
            const double *x = src->v + r * W + b0;
            double amax = 0;
            for (int j = 0; j < 32; j++)
                amax = fabs(x[j]) > amax ? fabs(x[j]) : amax;
            float d = (float)(amax / 127);
            double d16 = rlx_f16_to_f32(rlx_f32_to_f16(d)), id = d != 0 ? 1.0 / d : 0;
            for (int j = 0; j < 32; j++) {
                int64_t o = (off + r) * W + b0 + j;
                ref[o] = d16 * round(x[j] * id);
                tol[o] = 1e-3 * d16; /* the same integer q */
            }
        }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.scatter.axis = 0;
    p.scatter.offset = rlx_dim_const(off);
    tt *in[2] = {state, src};
    char what[96];
    snprintf(what, sizeof what, "scatter into Q8_0 [%lld, %lld] at %lld", (long long)cap,
             (long long)W, (long long)off);
    run_all(what, RLX_OP_SCATTER, &p, in, 2, y, ref, 0, 0, tol);
    free(ref);
    free(tol);
    tt_free(state);
    tt_free(src);
    tt_free(y);
}

static void test_scatter_q8_0(void **state)
{
    (void)state;
    rng_seed(41);
    scatter_q8_case(8, 32, 1, 3);
    scatter_q8_case(20, 96, 5, 15);
    scatter_q8_case(6, 64, 6, 0);
}

/* ---- convolution, resize, pool ------------------------------------------------ */

/* the activation the conv cases fuse */
static rlx_act conv_act = RLX_ACT_NONE;

static void conv_case(bool is1d, bool transpose, int64_t N, int64_t C, int64_t H, int64_t W,
                      int64_t OC, int64_t KH, int64_t KW, int s, int pad, int dil, int groups,
                      int out_pad, bool bias, rlx_dtype wdt)
{
    if (is1d)
        H = KH = 1;
    int64_t sh = is1d ? 1 : s, ph = is1d ? 0 : pad, dh = is1d ? 1 : dil, oph = is1d ? 0 : out_pad;
    int64_t OH, OW;
    if (!transpose) {
        OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1;
        OW = (W + 2 * pad - dil * (KW - 1) - 1) / s + 1;
    } else {
        OH = (H - 1) * sh - 2 * ph + dh * (KH - 1) + oph + 1;
        OW = (W - 1) * s - 2 * pad + dil * (KW - 1) + out_pad + 1;
    }
    int64_t xn4[4] = {N, C, H, W}, on4[4] = {N, OC, OH, OW};
    int64_t wn4[4] = {transpose ? C : OC, transpose ? OC / groups : C / groups, KH, KW};
    tt *x, *w, *y;
    if (is1d) {
        x = tt_rand(RLX_DTYPE_F32, 3, (int64_t[]){N, C, W}, L_CONTIG, -1, 1);
        w = tt_rand(wdt, 3, (int64_t[]){wn4[0], wn4[1], KW}, L_CONTIG, -1, 1);
        y = tt_new(RLX_DTYPE_F32, 3, (int64_t[]){N, OC, OW}, L_CONTIG);
    } else {
        x = tt_rand(RLX_DTYPE_F32, 4, xn4, L_PADDED, -1, 1);
        w = tt_rand(wdt, 4, wn4, L_CONTIG, -1, 1);
        y = tt_new(RLX_DTYPE_F32, 4, on4, L_CONTIG);
    }
    tt *bt = bias ? tt_rand(RLX_DTYPE_F32, 1, &OC, L_CONTIG, -1, 1) : NULL;
    double *ref = dalloc(y->n), *tol = dalloc(y->n);
    int64_t icg = C / groups, ocg = OC / groups;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oc = 0; oc < OC; oc++)
            for (int64_t oy = 0; oy < OH; oy++)
                for (int64_t ox = 0; ox < OW; ox++) {
                    int64_t g = oc / ocg;
                    double acc = bt ? bt->v[oc] : 0, mag = 0;
                    int64_t terms = 0;
                    for (int64_t ic = g * icg; ic < (g + 1) * icg; ic++)
                        for (int64_t ky = 0; ky < KH; ky++)
                            for (int64_t kx = 0; kx < KW; kx++) {
                                int64_t iy, ix;
                                if (!transpose) {
                                    iy = oy * sh - ph + ky * dh;
                                    ix = ox * s - pad + kx * dil;
                                } else {
                                    int64_t ty = oy + ph - ky * dh, tx = ox + pad - kx * dil;
                                    if (ty < 0 || tx < 0 || ty % sh || tx % s)
                                        continue;
                                    iy = ty / sh;
                                    ix = tx / s;
                                }
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                    continue;
                                double xv = x->v[((n * C + ic) * H + iy) * W + ix];
                                double wv =
                                    transpose
                                        ? w->v[((ic * (OC / groups) + (oc - g * ocg)) * KH + ky) *
                                                   KW +
                                               kx]
                                        : w->v[((oc * icg + (ic - g * icg)) * KH + ky) * KW + kx];
                                acc += xv * wv;
                                mag += fabs(xv * wv);
                                terms++;
                            }
                    int64_t i = ((n * OC + oc) * OH + oy) * OW + ox;
                    ref[i] = acc;
                    /* sequential f32 sum of `terms` products */
                    tol[i] = (double)(terms + 1) * FLT_EPSILON * (mag + 1) + 1e-6;
                    if (conv_act == RLX_ACT_RELU) {
                        ref[i] = acc > 0 ? acc : 0; /* 1-Lipschitz: the same bound */
                    } else if (conv_act == RLX_ACT_SILU) {
                        /* |silu'| < 1.1, and the kernel's exp is good to 2e-7 */
                        ref[i] = acc / (1 + exp(-acc));
                        tol[i] = 1.1 * tol[i] + 1e-6 * fabs(ref[i]);
                    }
                }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    if (is1d) {
        p.conv.stride[0] = s;
        p.conv.pad[0] = pad;
        p.conv.dilation[0] = dil;
    } else {
        p.conv.stride[0] = p.conv.stride[1] = s;
        p.conv.pad[0] = p.conv.pad[1] = pad;
        p.conv.dilation[0] = p.conv.dilation[1] = dil;
        p.conv.out_pad[0] = p.conv.out_pad[1] = out_pad;
    }
    p.conv.groups = groups;
    p.conv.has_bias = bias;
    p.conv.act = conv_act;
    tt *in[3] = {x, w, bt};
    rlx_op op = is1d ? RLX_OP_CONV1D : transpose ? RLX_OP_CONV_TRANSPOSE2D : RLX_OP_CONV2D;
    char what[128];
    snprintf(what, sizeof what,
             "conv op %d N%lld C%lld %lldx%lld OC%lld k%lldx%lld s%d p%d d%d g%d", (int)op,
             (long long)N, (long long)C, (long long)H, (long long)W, (long long)OC, (long long)KH,
             (long long)KW, s, pad, dil, groups);
    run_all(what, op, &p, in, bias ? 3 : 2, y, ref, 0, 0, tol);
    free(ref);
    free(tol);
    tt_free(x);
    tt_free(w);
    tt_free(bt);
    tt_free(y);
}

static void test_conv(void **state)
{
    (void)state;
    rng_seed(15);
    /* conv1d (whisper's front end is k=3, s=1 then s=2, pad 1) */
    conv_case(true, false, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, false, RLX_DTYPE_F32);
    conv_case(true, false, 1, 5, 1, 17, 7, 1, 3, 1, 1, 1, 1, 0, true, RLX_DTYPE_F16);
    conv_case(true, false, 2, 6, 1, 33, 4, 1, 3, 2, 1, 2, 2, 0, true, RLX_DTYPE_F32);
    /* conv2d */
    conv_case(false, false, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, false, RLX_DTYPE_F32);
    conv_case(false, false, 1, 3, 9, 7, 5, 3, 3, 1, 1, 1, 1, 0, true, RLX_DTYPE_F32);
    conv_case(false, false, 2, 4, 11, 13, 6, 3, 2, 2, 1, 2, 2, 0, true, RLX_DTYPE_F16);
    conv_case(false, false, 1, 8, 16, 16, 8, 3, 3, 1, 1, 1, 8, 0, false, RLX_DTYPE_F32);
    /* patch embedding (SAM: 16x16, stride 16) */
    conv_case(false, false, 1, 3, 64, 48, 32, 16, 16, 16, 0, 1, 1, 0, true, RLX_DTYPE_F32);
    conv_case(false, false, 2, 3, 32, 32, 9, 16, 16, 16, 0, 1, 1, 0, false, RLX_DTYPE_F16);
    /* kernels past 49 taps (the Vulkan kernel stages them in chunks): 9x9
     * padded and dilated, a depthwise 11x11, a long 1-D kernel */
    conv_case(false, false, 1, 5, 13, 17, 10, 9, 9, 1, 4, 1, 1, 0, true, RLX_DTYPE_F32);
    conv_case(false, false, 1, 6, 12, 12, 6, 7, 8, 2, 3, 2, 1, 0, false, RLX_DTYPE_F16);
    conv_case(false, false, 1, 8, 15, 14, 8, 11, 11, 1, 5, 1, 8, 0, true, RLX_DTYPE_F32);
    conv_case(true, false, 1, 3, 1, 100, 4, 1, 60, 3, 2, 1, 1, 0, true, RLX_DTYPE_F32);
    /* transposed conv (SAM's mask upscaling: k2 s2) */
    conv_case(false, true, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, false, RLX_DTYPE_F32);
    conv_case(false, true, 1, 4, 5, 7, 3, 2, 2, 2, 0, 1, 1, 0, true, RLX_DTYPE_F32);
    conv_case(false, true, 2, 6, 4, 3, 4, 3, 3, 2, 1, 1, 2, 1, true, RLX_DTYPE_F16);
    conv_case(false, true, 1, 4, 5, 6, 3, 8, 8, 4, 2, 1, 1, 0, true, RLX_DTYPE_F32);
    /* the Vulkan blocked kernel (conv-gemm.comp: 8 output channels x 512
     * pixels a workgroup) on channel counts that are not multiples of its
     * block, several pixel tiles with a partial last one, ISNet's RSU
     * blocks' dilated 3x3 convs (padding = dilation 2, 4, 8), a strided
     * one, 1x1 and single-channel (side output) convs, F16 weights, bias,
     * and groups whose channels fill whole blocks (taken by it too) */
    conv_case(false, false, 1, 5, 19, 23, 11, 3, 3, 2, 1, 1, 1, 0, true, RLX_DTYPE_F16);
    conv_case(false, false, 1, 6, 33, 30, 9, 3, 3, 1, 2, 2, 1, 0, true, RLX_DTYPE_F32);
    conv_case(false, false, 1, 7, 29, 31, 10, 3, 3, 1, 4, 4, 1, 0, true, RLX_DTYPE_F16);
    conv_case(false, false, 2, 4, 26, 25, 17, 3, 3, 1, 8, 8, 1, 0, false, RLX_DTYPE_F16);
    conv_case(false, false, 1, 17, 25, 27, 20, 1, 1, 1, 0, 1, 1, 0, true, RLX_DTYPE_F32);
    conv_case(false, false, 1, 12, 40, 40, 1, 3, 3, 1, 1, 1, 1, 0, true, RLX_DTYPE_F16);
    conv_case(false, false, 1, 6, 21, 22, 16, 3, 3, 1, 1, 1, 2, 0, true, RLX_DTYPE_F32);
    conv_case(false, false, 1, 3, 37, 35, 8, 3, 3, 2, 1, 1, 1, 0, true, RLX_DTYPE_F16);
    /* a map of 64 x 70 (the CPU's Winograd path, F16 weights widened into
     * the same kernel scratch), then fused activations: ReLU on that path,
     * the implicit GEMM (stride 2), a pointwise conv without a bias, and a
     * transposed conv; SiLU after the kernel */
    conv_case(false, false, 1, 16, 64, 70, 24, 3, 3, 1, 1, 1, 1, 0, true, RLX_DTYPE_F16);
    conv_act = RLX_ACT_RELU;
    conv_case(false, false, 1, 16, 64, 70, 24, 3, 3, 1, 1, 1, 1, 0, true, RLX_DTYPE_F16);
    conv_case(false, false, 1, 8, 40, 36, 12, 3, 3, 2, 1, 1, 1, 0, true, RLX_DTYPE_F32);
    conv_case(false, false, 1, 8, 20, 18, 10, 1, 1, 1, 0, 1, 1, 0, false, RLX_DTYPE_F32);
    conv_case(false, true, 1, 4, 5, 7, 3, 2, 2, 2, 0, 1, 1, 0, true, RLX_DTYPE_F32);
    conv_act = RLX_ACT_SILU;
    conv_case(false, false, 1, 16, 64, 70, 24, 3, 3, 1, 1, 1, 1, 0, true, RLX_DTYPE_F32);
    conv_case(true, false, 1, 5, 1, 17, 7, 1, 3, 1, 1, 1, 1, 0, true, RLX_DTYPE_F16);
    conv_act = RLX_ACT_NONE;
    /* inputs and outputs of tens of KiB, which at bindings of 16 KiB must
     * split (ISNet's 128-channel 512x512 input is 128 MiB, lavapipe's whole
     * binding): over output channels and over output rows, whose input
     * windows carry the kernel's halo (padded, strided, dilated), and over
     * the batch; a transposed conv over its output channels. An input
     * window spans every input channel (the sum runs over them), so these
     * inputs have few channels of many rows. */
    must_split = true;
    conv_case(false, false, 1, 3, 40, 36, 10, 3, 3, 1, 1, 1, 1, 0, true, RLX_DTYPE_F32);
    conv_case(false, false, 2, 2, 60, 40, 7, 3, 3, 2, 2, 2, 1, 0, true, RLX_DTYPE_F16);
    conv_case(false, false, 1, 2, 47, 45, 12, 5, 5, 1, 2, 1, 1, 0, false, RLX_DTYPE_F32);
    conv_case(false, false, 1, 2, 50, 40, 4, 1, 1, 1, 0, 1, 1, 0, true, RLX_DTYPE_F32);
    conv_case(false, true, 1, 4, 20, 20, 6, 2, 2, 2, 0, 1, 1, 0, true, RLX_DTYPE_F32);
    must_split = false;
}

static void resize_case(int64_t N, int64_t C, int64_t IH, int64_t IW, int64_t OH, int64_t OW,
                        rlx_resize_mode mode, bool ac)
{
    tt *x = tt_rand(RLX_DTYPE_F32, 4, (int64_t[]){N, C, IH, IW}, L_PADDED, -1, 1);
    tt *y = tt_new(RLX_DTYPE_F32, 4, (int64_t[]){N, C, OH, OW}, L_CONTIG);
    double *ref = dalloc(y->n);
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                const double *src = x->v + nc * IH * IW;
                double v;
                if (mode == RLX_RESIZE_NEAREST) {
                    int64_t iy = (int64_t)floor((double)oy * (double)IH / (double)OH);
                    int64_t ix = (int64_t)floor((double)ox * (double)IW / (double)OW);
                    v = src[(iy < IH ? iy : IH - 1) * IW + (ix < IW ? ix : IW - 1)];
                } else {
                    double fy, fx;
                    if (ac) {
                        fy = OH > 1 ? (double)oy * (double)(IH - 1) / (double)(OH - 1) : 0;
                        fx = OW > 1 ? (double)ox * (double)(IW - 1) / (double)(OW - 1) : 0;
                    } else {
                        fy = fmax(0, ((double)oy + 0.5) * (double)IH / (double)OH - 0.5);
                        fx = fmax(0, ((double)ox + 0.5) * (double)IW / (double)OW - 0.5);
                    }
                    int64_t y0 = (int64_t)floor(fy), x0 = (int64_t)floor(fx);
                    if (y0 > IH - 1)
                        y0 = IH - 1;
                    if (x0 > IW - 1)
                        x0 = IW - 1;
                    int64_t y1 = y0 + 1 < IH ? y0 + 1 : IH - 1, x1 = x0 + 1 < IW ? x0 + 1 : IW - 1;
                    double ly = fy - (double)y0, lx = fx - (double)x0;
                    v = (1 - ly) * ((1 - lx) * src[y0 * IW + x0] + lx * src[y0 * IW + x1]) +
                        ly * ((1 - lx) * src[y1 * IW + x0] + lx * src[y1 * IW + x1]);
                }
                ref[(nc * OH + oy) * OW + ox] = v;
            }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.resize.mode = mode;
    p.resize.align_corners = ac;
    /* a weighted mean of 4 values of |x| <= 1 in f32 */
    run_all("resize", RLX_OP_RESIZE, &p, &x, 1, y, ref, 1e-6, 1e-6, NULL);
    free(ref);
    tt_free(x);
    tt_free(y);
}

static void test_resize(void **state)
{
    (void)state;
    rng_seed(16);
    for (int m = 0; m < 2; m++)
        for (int ac = 0; ac < 2; ac++) {
            resize_case(1, 1, 1, 1, 1, 1, (rlx_resize_mode)m, ac);
            resize_case(1, 2, 3, 5, 7, 9, (rlx_resize_mode)m, ac);
            resize_case(2, 3, 17, 13, 5, 6, (rlx_resize_mode)m, ac);
            resize_case(1, 4, 64, 64, 256, 256, (rlx_resize_mode)m, ac);
        }
}

static void pool_case(int64_t N, int64_t C, int64_t H, int64_t W, int k, int s, int pad,
                      rlx_pool_mode mode)
{
    int64_t OH = (H + 2 * pad - k) / s + 1, OW = (W + 2 * pad - k) / s + 1;
    tt *x = tt_rand(RLX_DTYPE_F32, 4, (int64_t[]){N, C, H, W}, L_PADDED, -1, 1);
    tt *y = tt_new(RLX_DTYPE_F32, 4, (int64_t[]){N, C, OH, OW}, L_CONTIG);
    double *ref = dalloc(y->n);
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                double acc = mode == RLX_POOL_MAX ? -INFINITY : 0;
                int64_t hs = oy * s - pad, ws = ox * s - pad;
                int64_t he = hs + k < H + pad ? hs + k : H + pad;
                int64_t we = ws + k < W + pad ? ws + k : W + pad;
                for (int64_t iy = hs; iy < hs + k; iy++)
                    for (int64_t ix = ws; ix < ws + k; ix++) {
                        if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                            continue;
                        double v = x->v[(nc * H + iy) * W + ix];
                        acc = mode == RLX_POOL_MAX ? fmax(acc, v) : acc + v;
                    }
                /* average counts the padding (PyTorch's count_include_pad) */
                if (mode == RLX_POOL_AVG)
                    acc /= (double)((he - hs) * (we - ws));
                ref[(nc * OH + oy) * OW + ox] = acc;
            }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.pool.mode = mode;
    p.pool.kernel[0] = p.pool.kernel[1] = k;
    p.pool.stride[0] = p.pool.stride[1] = s;
    p.pool.pad[0] = p.pool.pad[1] = pad;
    run_all("pool2d", RLX_OP_POOL2D, &p, &x, 1, y, ref, 1e-6, 1e-6, NULL);
    free(ref);
    tt_free(x);
    tt_free(y);
}

static void test_pool(void **state)
{
    (void)state;
    rng_seed(17);
    for (int m = 0; m < 2; m++) {
        pool_case(1, 1, 1, 1, 1, 1, 0, (rlx_pool_mode)m);
        pool_case(1, 3, 7, 9, 2, 2, 0, (rlx_pool_mode)m);
        pool_case(2, 2, 11, 13, 3, 2, 1, (rlx_pool_mode)m);
        pool_case(1, 16, 64, 64, 3, 1, 1, (rlx_pool_mode)m);
        /* 2x2 of stride 2 over rows of 70 (the CPU's row kernel: 32 outputs
         * in vectors, 3 after them; an odd height leaves a row unused) */
        pool_case(1, 2, 9, 70, 2, 2, 0, (rlx_pool_mode)m);
    }
}

/* ---- data movement ----------------------------------------------------------- */

static void test_reshape_permute(void **state)
{
    (void)state;
    rng_seed(18);
    /* reshape: same elements in row-major order, from a strided input */
    for (int layout = 0; layout < 3; layout++) {
        tt *x = tt_rand(RLX_DTYPE_F32, 3, DIMS(3, 4, 10), layout, -1, 1);
        tt *y = tt_new(RLX_DTYPE_F32, 2, DIMS(12, 10), L_CONTIG);
        run_all("reshape", RLX_OP_RESHAPE, NULL, &x, 1, y, x->v, 0, 0, NULL);
        tt_free(y);
        y = tt_new(RLX_DTYPE_F32, 3, DIMS(5, 1, 24), L_CONTIG);
        run_all("reshape 2", RLX_OP_RESHAPE, NULL, &x, 1, y, x->v, 0, 0, NULL);
        tt_free(y);
        tt_free(x);
    }
    /* a strided reshape larger than the split passes' bindings (a window
     * partition materialized): the GPU backends cut both operands' dims
     * into common axes to split it */
    {
        tt *x = tt_rand(RLX_DTYPE_F32, 3, DIMS(16, 24, 40), L_TRANSPOSED, -1, 1);
        tt *y = tt_new(RLX_DTYPE_F32, 2, DIMS(384, 40), L_CONTIG);
        run_all("reshape strided large", RLX_OP_RESHAPE, NULL, &x, 1, y, x->v, 0, 0, NULL);
        tt_free(y);
        y = tt_new(RLX_DTYPE_F32, 2, DIMS(32, 480), L_CONTIG);
        run_all("reshape strided large 2", RLX_OP_RESHAPE, NULL, &x, 1, y, x->v, 0, 0, NULL);
        tt_free(y);
        tt_free(x);
    }
    /* permute [2,3,4,5] by (0,2,1,3) and (3,1,0,2) */
    static const int perms[][4] = {{0, 2, 1, 3}, {3, 1, 0, 2}, {0, 1, 2, 3}};
    int64_t ne[4] = {2, 3, 4, 5};
    for (int k = 0; k < 3; k++)
        for (int layout = 0; layout < 2; layout++) {
            tt *x = tt_rand(RLX_DTYPE_F16, 4, ne, layout, -1, 1);
            int64_t on[4];
            for (int d = 0; d < 4; d++)
                on[d] = ne[perms[k][d]];
            tt *y = tt_new(RLX_DTYPE_F16, 4, on, L_CONTIG);
            double *ref = dalloc(y->n);
            for (int64_t i = 0; i < y->n; i++) {
                int64_t oi[4], xi[4];
                unravel(i, 4, on, oi);
                for (int d = 0; d < 4; d++)
                    xi[perms[k][d]] = oi[d];
                ref[i] = x->v[ravel(4, ne, xi)];
            }
            rlx_op_params p;
            memset(&p, 0, sizeof p);
            for (int d = 0; d < 4; d++)
                p.permute.perm[d] = perms[k][d];
            run_all("permute", RLX_OP_PERMUTE, &p, &x, 1, y, ref, 0, 0, NULL);
            free(ref);
            tt_free(x);
            tt_free(y);
        }
    /* large: [B, S, H, D] -> [B, H, S, D] */
    tt *x = tt_rand(RLX_DTYPE_F32, 4, DIMS(1, 128, 16, 64), L_CONTIG, -1, 1);
    tt *y = tt_new(RLX_DTYPE_F32, 4, DIMS(1, 16, 128, 64), L_CONTIG);
    double *ref = dalloc(y->n);
    for (int64_t i = 0; i < y->n; i++) {
        int64_t oi[4];
        unravel(i, 4, y->ne, oi);
        ref[i] = x->v[ravel(4, x->ne, (int64_t[]){oi[0], oi[2], oi[1], oi[3]})];
    }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.permute.perm[0] = 0;
    p.permute.perm[1] = 2;
    p.permute.perm[2] = 1;
    p.permute.perm[3] = 3;
    run_all("permute large", RLX_OP_PERMUTE, &p, &x, 1, y, ref, 0, 0, NULL);
    free(ref);
    tt_free(x);
    tt_free(y);
}

static void test_slice_concat_pad(void **state)
{
    (void)state;
    rng_seed(19);
    /* slice axis 1 of [3, 17, 5]: start 4, step 1 and 3 */
    for (int step = 1; step <= 3; step += 2)
        for (int layout = 0; layout < 2; layout++) {
            tt *x = tt_rand(RLX_DTYPE_F32, 3, DIMS(3, 17, 5), layout, -1, 1);
            int64_t len = step == 1 ? 9 : 4;
            tt *y = tt_new(RLX_DTYPE_F32, 3, (int64_t[]){3, len, 5}, L_CONTIG);
            double *ref = dalloc(y->n);
            for (int64_t i = 0; i < y->n; i++) {
                int64_t oi[3];
                unravel(i, 3, y->ne, oi);
                oi[1] = 4 + oi[1] * step;
                ref[i] = x->v[ravel(3, x->ne, oi)];
            }
            rlx_op_params p;
            memset(&p, 0, sizeof p);
            p.slice.axis = 1;
            p.slice.start = rlx_dim_const(4);
            p.slice.step = step;
            run_all("slice", RLX_OP_SLICE, &p, &x, 1, y, ref, 0, 0, NULL);
            free(ref);
            tt_free(x);
            tt_free(y);
        }
    /* concat of three along axis 1 (and axis 0), with a strided input */
    for (int axis = 0; axis < 2; axis++) {
        int64_t sz[3] = {1, 7, 16};
        tt *in[3];
        int64_t total = 0;
        for (int k = 0; k < 3; k++) {
            int64_t ne[2] = {axis == 0 ? sz[k] : 4, axis == 1 ? sz[k] : 4};
            in[k] = tt_rand(k == 1 ? RLX_DTYPE_F16 : RLX_DTYPE_F32, 2, ne,
                            k == 2 ? L_TRANSPOSED : L_CONTIG, -1, 1);
            total += sz[k];
        }
        int64_t on[2] = {axis == 0 ? total : 4, axis == 1 ? total : 4};
        tt *y = tt_new(RLX_DTYPE_F32, 2, on, L_CONTIG);
        double *ref = dalloc(y->n);
        for (int64_t i = 0; i < y->n; i++) {
            int64_t oi[2];
            unravel(i, 2, on, oi);
            int k = 0;
            int64_t at = oi[axis];
            while (at >= sz[k])
                at -= sz[k++];
            oi[axis] = at;
            ref[i] = in[k]->v[ravel(2, in[k]->ne, oi)];
        }
        rlx_op_params p;
        memset(&p, 0, sizeof p);
        p.concat.axis = axis;
        run_all("concat", RLX_OP_CONCAT, &p, in, 3, y, ref, 0, 0, NULL);
        free(ref);
        for (int k = 0; k < 3; k++)
            tt_free(in[k]);
        tt_free(y);
    }
    /* pad [3, 5] by (1, 2) rows and (0, 3) cols with 0.5, and a crop (-1) */
    static const int64_t pads[][4] = {{1, 2, 0, 3}, {0, 0, 1, 1}, {-1, 1, 2, -2}};
    for (int k = 0; k < 3; k++) {
        tt *x = tt_rand(RLX_DTYPE_F32, 2, DIMS(3, 5), L_PADDED, -1, 1);
        int64_t on[2] = {3 + pads[k][0] + pads[k][1], 5 + pads[k][2] + pads[k][3]};
        tt *y = tt_new(RLX_DTYPE_F32, 2, on, L_CONTIG);
        double *ref = dalloc(y->n);
        for (int64_t i = 0; i < y->n; i++) {
            int64_t r = i / on[1] - pads[k][0], c = i % on[1] - pads[k][2];
            ref[i] = (r >= 0 && r < 3 && c >= 0 && c < 5) ? x->v[r * 5 + c] : 0.5;
        }
        rlx_op_params p;
        memset(&p, 0, sizeof p);
        p.pad.before[0] = pads[k][0];
        p.pad.after[0] = pads[k][1];
        p.pad.before[1] = pads[k][2];
        p.pad.after[1] = pads[k][3];
        p.pad.value = 0.5f;
        run_all("pad", RLX_OP_PAD, &p, &x, 1, y, ref, 0, 0, NULL);
        free(ref);
        tt_free(x);
        tt_free(y);
    }
}

static void gather_case(rlx_dtype tdt, int64_t V, int64_t D, int id_rank, const int64_t *id_ne)
{
    tt *tab = tt_rand(tdt, 2, (int64_t[]){V, D}, L_CONTIG, -1, 1);
    tt *ids = tt_new(RLX_DTYPE_I32, id_rank, id_ne, L_CONTIG);
    for (int64_t i = 0; i < ids->n; i++)
        ids->v[i] = (double)(rng_u32() % (uint32_t)V);
    if (ids->n > 1)
        ids->v[ids->n - 1] = (double)(V - 1);
    tt_encode(ids);
    int64_t on[MAXD];
    for (int d = 0; d < id_rank; d++)
        on[d] = id_ne[d];
    on[id_rank] = D;
    tt *y = tt_new(RLX_DTYPE_F32, id_rank + 1, on, L_CONTIG);
    double *ref = dalloc(y->n);
    for (int64_t i = 0; i < ids->n; i++)
        for (int64_t j = 0; j < D; j++)
            ref[i * D + j] = tab->v[(int64_t)ids->v[i] * D + j];
    tt *in[2] = {tab, ids};
    char what[64];
    snprintf(what, sizeof what, "gather %s V%lld D%lld", rlx_dtype_name(tdt), (long long)V,
             (long long)D);
    /* rows are copied or dequantized: exact up to the f32 of a block decode */
    run_all(what, RLX_OP_GATHER, NULL, in, 2, y, ref, 1e-7, 1e-6, NULL);
    free(ref);
    tt_free(tab);
    tt_free(ids);
    tt_free(y);
}

static void test_gather(void **state)
{
    (void)state;
    rng_seed(20);
    gather_case(RLX_DTYPE_F32, 1, 1, 1, DIMS(1));
    gather_case(RLX_DTYPE_F32, 17, 9, 1, DIMS(5));
    gather_case(RLX_DTYPE_F16, 33, 24, 2, DIMS(2, 3));
    gather_case(RLX_DTYPE_BF16, 10, 7, 1, DIMS(10));
    gather_case(RLX_DTYPE_Q8_0, 40, 64, 1, DIMS(7));
    gather_case(RLX_DTYPE_Q4_0, 40, 32, 1, DIMS(3));
    gather_case(RLX_DTYPE_Q4_K, 9, 256, 1, DIMS(4));
    gather_case(RLX_DTYPE_Q6_K, 9, 512, 1, DIMS(4));
    gather_case(RLX_DTYPE_F32, 32000, 64, 1, DIMS(512));
}

static void test_scatter(void **state)
{
    (void)state;
    rng_seed(21);
    /* write src [1, 2, 3, 8] into a [1, 2, 10, 8] state along axis 2 at 4 */
    int64_t sn[4] = {1, 2, 10, 8}, rn[4] = {1, 2, 3, 8};
    tt *st = tt_rand(RLX_DTYPE_F32, 4, sn, L_CONTIG, -1, 1);
    tt *src = tt_rand(RLX_DTYPE_F32, 4, rn, L_PADDED, -1, 1);
    tt *y = tt_new(RLX_DTYPE_F32, 4, sn, L_CONTIG);
    double *ref = dalloc(y->n);
    for (int64_t i = 0; i < y->n; i++) {
        int64_t idx[4];
        unravel(i, 4, sn, idx);
        if (idx[2] >= 4 && idx[2] < 7) {
            idx[2] -= 4;
            ref[i] = src->v[ravel(4, rn, idx)];
        } else {
            ref[i] = st->v[i];
        }
    }
    rlx_op_params p;
    memset(&p, 0, sizeof p);
    p.scatter.axis = 2;
    p.scatter.offset = rlx_dim_const(4);
    tt *in[2] = {st, src};
    run_all("scatter", RLX_OP_SCATTER, &p, in, 2, y, ref, 0, 0, NULL);
    /* an F16 cache written from f32 values */
    tt *st16 = tt_rand(RLX_DTYPE_F16, 4, sn, L_CONTIG, -1, 1);
    tt *y16 = tt_new(RLX_DTYPE_F16, 4, sn, L_CONTIG);
    for (int64_t i = 0; i < y->n; i++) {
        int64_t idx[4];
        unravel(i, 4, sn, idx);
        ref[i] = idx[2] >= 4 && idx[2] < 7 ? round_to(RLX_DTYPE_F16, ref[i]) : st16->v[i];
    }
    in[0] = st16;
    run_all("scatter f16", RLX_OP_SCATTER, &p, in, 2, y16, ref, 0, 0, NULL);
    free(ref);
    tt_free(st);
    tt_free(st16);
    tt_free(src);
    tt_free(y);
    tt_free(y16);
}

/* Symbolic dims: one program, run at two sequence lengths. */
static void test_symbolic(void **state)
{
    (void)state;
    const rlx_backend_i *be = rlx_backend_find("cpu");
    rlx_device *dev = NULL;
    assert_int_equal(be->device_open(0, NULL, &dev, NULL), RLX_OK);
    /* y[SEQ, 8] = x[SEQ, 8] * 2 */
    rlx_lir_value vals[2];
    memset(vals, 0, sizeof vals);
    for (int i = 0; i < 2; i++) {
        vals[i].dtype = RLX_DTYPE_F32;
        vals[i].shape.rank = 2;
        vals[i].shape.d[0] = rlx_dim_sym(0);
        vals[i].shape.d[1] = rlx_dim_const(8);
        vals[i].stride[0] = rlx_dim_const(8);
        vals[i].stride[1] = rlx_dim_const(1);
        vals[i].home = i ? RLX_HOME_OUTPUT : RLX_HOME_INPUT;
        vals[i].view_of = -1;
        vals[i].max_bytes = 16 * 8 * 4;
        vals[i].contiguous = true;
    }
    rlx_lir_instr ins;
    memset(&ins, 0, sizeof ins);
    ins.op = RLX_OP_SCALE;
    ins.p.scale.mul = 2;
    ins.n_in = 1;
    ins.in[0] = 0;
    ins.out = 1;
    rlx_lir_binding bi = {.name = "x", .dtype = RLX_DTYPE_F32}, bo = {.name = "y"};
    rlx_lir lir;
    memset(&lir, 0, sizeof lir);
    lir.n_values = 2;
    lir.values = vals;
    lir.n_instrs = 1;
    lir.instrs = &ins;
    lir.n_symbols = 1;
    lir.symbols[0] = (rlx_lir_symbol){.name = "SEQ", .max = 16};
    lir.n_inputs = lir.n_outputs = 1;
    lir.inputs = &bi;
    lir.outputs = &bo;
    rlx_program *prog = NULL;
    rlx_error *err = NULL;
    assert_int_equal(be->program_create(dev, &lir, &prog, &err), RLX_OK);
    float x[16 * 8], y[16 * 8];
    for (int i = 0; i < 16 * 8; i++)
        x[i] = (float)i;
    for (int seq = 1; seq <= 16; seq += 15) {
        memset(y, 0, sizeof y);
        rlx_buffer *bx = NULL, *by = NULL;
        /* buffers exactly as large as this run needs */
        be->buffer_from_host(dev, x, (uint64_t)seq * 32, &bx, NULL);
        be->buffer_from_host(dev, y, (uint64_t)seq * 32, &by, NULL);
        rlx_buffer_ref ri = {bx, 0}, ro = {by, 0};
        rlx_program_bindings b = {.inputs = &ri, .outputs = &ro};
        rlx_sym_values sv = {{seq}};
        assert_int_equal(be->program_run(prog, &b, &sv, &err), RLX_OK);
        for (int i = 0; i < seq * 8; i++)
            assert_true(y[i] == 2.0f * (float)i);
        if (seq * 8 < 16 * 8) /* nothing past this run's rows was touched */
            assert_true(y[seq * 8] == 0.0f);
        be->buffer_free(bx);
        be->buffer_free(by);
    }
    /* beyond the bound: a clear error, nothing run */
    rlx_sym_values sv = {{17}};
    rlx_buffer_ref none = {0};
    rlx_program_bindings b = {.inputs = &none, .outputs = &none};
    assert_int_equal(be->program_run(prog, &b, &sv, &err), RLX_ERR_INVALID_ARG);
    assert_non_null(strstr(rlx_error_message(err), "SEQ = 17"));
    rlx_error_clear(&err);
    /* a too-small buffer is refused, not overrun */
    rlx_buffer *bx = NULL, *by = NULL;
    be->buffer_from_host(dev, x, 8 * 32, &bx, NULL);
    be->buffer_from_host(dev, y, 16 * 32, &by, NULL);
    rlx_buffer_ref ri = {bx, 0}, ro = {by, 0};
    b = (rlx_program_bindings){.inputs = &ri, .outputs = &ro};
    sv.v[0] = 16;
    assert_int_equal(be->program_run(prog, &b, &sv, &err), RLX_ERR_INVALID_ARG);
    rlx_error_clear(&err);
    be->buffer_free(bx);
    be->buffer_free(by);
    be->program_free(prog);
    be->device_close(dev);
}

/* The KV-cache pattern with symbolic offsets: SCATTER src [H, SEQ, D] into
 * a state [H, CAP, D] at PAST, then SLICE [H, PAST+SEQ, D] back out. */
static void test_symbolic_offsets(void **state)
{
    (void)state;
    enum { H = 2, CAP = 8, D = 3 };
    const rlx_backend_i *be = rlx_backend_find("cpu");
    rlx_device *dev = NULL;
    assert_int_equal(be->device_open(0, NULL, &dev, NULL), RLX_OK);
    /* symbols: 0 = PAST (<= 5), 1 = SEQ (<= 3) */
    rlx_dim past = rlx_dim_sym(0), seq = rlx_dim_sym(1), total;
    assert_true(rlx_dim_add(past, seq, &total));
    rlx_lir_value v[4];
    memset(v, 0, sizeof v);
    rlx_dim dims[4][3] = {{rlx_dim_const(H), rlx_dim_const(CAP), rlx_dim_const(D)},
                          {rlx_dim_const(H), seq, rlx_dim_const(D)},
                          {rlx_dim_const(H), rlx_dim_const(CAP), rlx_dim_const(D)},
                          {rlx_dim_const(H), total, rlx_dim_const(D)}};
    rlx_home homes[4] = {RLX_HOME_STATE, RLX_HOME_INPUT, RLX_HOME_STATE, RLX_HOME_OUTPUT};
    for (int i = 0; i < 4; i++) {
        v[i].dtype = RLX_DTYPE_F32;
        v[i].shape.rank = 3;
        for (int d = 0; d < 3; d++)
            v[i].shape.d[d] = dims[i][d];
        /* the state keeps CAP rows per head; src and out are contiguous */
        v[i].stride[2] = rlx_dim_const(1);
        v[i].stride[1] = rlx_dim_const(D);
        if (i == 1) {
            v[i].stride[0] = rlx_dim_sym(1);
            v[i].stride[0].mul[0] = D;
        } else if (i == 3) {
            rlx_dim s0 = total;
            s0.k *= D;
            for (int t = 0; t < RLX_DIM_TERMS; t++)
                s0.mul[t] = (int16_t)(s0.mul[t] * D);
            v[i].stride[0] = s0;
        } else {
            v[i].stride[0] = rlx_dim_const(CAP * D);
        }
        v[i].home = homes[i];
        v[i].view_of = -1;
    }
    rlx_lir_instr ins[2];
    memset(ins, 0, sizeof ins);
    ins[0].op = RLX_OP_SCATTER;
    ins[0].p.scatter.axis = 1;
    ins[0].p.scatter.offset = past;
    ins[0].n_in = 2;
    ins[0].in[0] = 0;
    ins[0].in[1] = 1;
    ins[0].out = 2;
    ins[0].in_place = true;
    ins[1].op = RLX_OP_SLICE;
    ins[1].p.slice.axis = 1;
    ins[1].p.slice.start = rlx_dim_const(0);
    ins[1].p.slice.step = 1;
    ins[1].n_in = 1;
    ins[1].in[0] = 2;
    ins[1].out = 3;
    rlx_lir_binding sb = {.name = "kv"}, ib = {.name = "x"}, ob = {.name = "y"};
    rlx_lir lir;
    memset(&lir, 0, sizeof lir);
    lir.n_values = 4;
    lir.values = v;
    lir.n_instrs = 2;
    lir.instrs = ins;
    lir.n_symbols = 2;
    lir.symbols[0] = (rlx_lir_symbol){.name = "PAST", .max = 5};
    lir.symbols[1] = (rlx_lir_symbol){.name = "SEQ", .max = 3};
    lir.n_states = lir.n_inputs = lir.n_outputs = 1;
    lir.states = &sb;
    lir.inputs = &ib;
    lir.outputs = &ob;
    rlx_program *prog = NULL;
    rlx_error *err = NULL;
    if (be->program_create(dev, &lir, &prog, &err) != RLX_OK)
        fail_msg("%s", rlx_error_message(err));
    float kv[H * CAP * D] = {0}, x[H * 3 * D], y[H * CAP * D];
    /* three steps: 3 tokens, then 1, then 2: the cache fills up to 6 */
    int steps[3] = {3, 1, 2}, at = 0;
    for (int k = 0; k < 3; k++) {
        int n = steps[k];
        for (int h = 0; h < H; h++)
            for (int t = 0; t < n; t++)
                for (int d = 0; d < D; d++)
                    x[(h * n + t) * D + d] = (float)(100 * h + 10 * (at + t) + d);
        rlx_buffer *bk, *bx, *by;
        be->buffer_from_host(dev, kv, sizeof kv, &bk, NULL);
        be->buffer_from_host(dev, x, (uint64_t)H * n * D * 4, &bx, NULL);
        be->buffer_from_host(dev, y, (uint64_t)H * (at + n) * D * 4, &by, NULL);
        rlx_buffer_ref rk = {bk, 0}, rx = {bx, 0}, ry = {by, 0};
        rlx_program_bindings b = {.states = &rk, .inputs = &rx, .outputs = &ry};
        rlx_sym_values sv = {{at, n}};
        if (be->program_run(prog, &b, &sv, &err) != RLX_OK)
            fail_msg("step %d: %s", k, rlx_error_message(err));
        at += n;
        for (int h = 0; h < H; h++)
            for (int t = 0; t < at; t++)
                for (int d = 0; d < D; d++)
                    assert_true(y[(h * at + t) * D + d] == (float)(100 * h + 10 * t + d));
        be->buffer_free(bk);
        be->buffer_free(bx);
        be->buffer_free(by);
    }
    be->program_free(prog);
    be->device_close(dev);
}

/* the op tests, run with the default kernels and again with the GPU
 * backends' f32 kernels */
// clang-format off
#define OP_TESTS \
    cmocka_unit_test(test_unary), \
    cmocka_unit_test(test_unary_large), \
    cmocka_unit_test(test_binary), \
    cmocka_unit_test(test_where), \
    cmocka_unit_test(test_cast_copy), \
    cmocka_unit_test(test_fused), \
    cmocka_unit_test(test_matmul_float), \
    cmocka_unit_test(test_matmul_quant), \
    cmocka_unit_test(test_matmul_fp8), \
    cmocka_unit_test(test_reduce), \
    cmocka_unit_test(test_softmax), \
    cmocka_unit_test(test_norms), \
    cmocka_unit_test(test_group_norm), \
    cmocka_unit_test(test_rope), \
    cmocka_unit_test(test_attention), \
    cmocka_unit_test(test_conv), \
    cmocka_unit_test(test_resize), \
    cmocka_unit_test(test_pool), \
    cmocka_unit_test(test_reshape_permute), \
    cmocka_unit_test(test_slice_concat_pad), \
    cmocka_unit_test(test_gather), \
    cmocka_unit_test(test_scatter), \
    cmocka_unit_test(test_scatter_q8_0),
// clang-format on

#ifdef RLX_TEST_CUDA_EMU
#include "backends/cuda/cuda-internal.h"
#endif

int main(void)
{
#ifdef RLX_TEST_CUDA_EMU
    /* the CUDA backend on the CPU emulator of its driver (tests/cuda-emu) */
    cu_driver_use(RLX_TEST_CUDA_EMU);
    cu_blas_use(RLX_TEST_CUDA_EMU);
#endif
    // clang-format off
    const struct CMUnitTest tests[] = {
        OP_TESTS
        cmocka_unit_test(test_symbolic),
        cmocka_unit_test(test_symbolic_offsets),
    };
    // clang-format on
    int rc = cmocka_run_group_tests_name("default kernels", tests, NULL, NULL);
    /* again on the GPU backends with their f32 kernels */
    bool gpu = false;
    for (int b = 0; b < rlx_backend_count(); b++)
        gpu |= strcmp(rlx_backend_at(b)->name, "cpu") != 0 && rlx_backend_at(b)->device_count() > 0;
    if (!gpu)
        return rc;
    pass_f32 = true;
    const struct CMUnitTest gpu_tests[] = {OP_TESTS};
    rc |= cmocka_run_group_tests_name("GPU f32 kernels", gpu_tests, NULL, NULL);
    pass_f32 = false;
    /* CUDA's other tensor-core kernel for quantized prompt products (the
     * activations converted in the tiles); the others run them as before */
    pass_tc = true;
    const struct CMUnitTest tc_tests[] = {cmocka_unit_test(test_matmul_quant)};
    rc |= cmocka_run_group_tests_name("quantized products, a converted in the tiles", tc_tests,
                                      NULL, NULL);
    pass_tc = false;
#ifndef RLX_TEST_CUDA_EMU /* CUDA has no binding limit: nothing splits */
    /* both kernel variants again with bindings of 16 KiB: the large cases
     * split (and must give the unsplit bits) */
    pass_bind = 16384;
    pass_f32 = false;
    rc |= cmocka_run_group_tests_name("GPU bindings of 16 KiB", gpu_tests, NULL, NULL);
    pass_f32 = true;
    rc |= cmocka_run_group_tests_name("GPU f32 kernels, bindings of 16 KiB", gpu_tests, NULL, NULL);
    print_message("dispatches added by splits: %llu\n", (unsigned long long)split_total);
    if (split_total == 0) {
        print_message("no case was split at bindings of 16 KiB\n");
        rc |= 1;
    }
#endif
    return rc;
}
