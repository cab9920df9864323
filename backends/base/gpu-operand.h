/* Operand facts the GPU backends share (Vulkan and CUDA read operands the
 * same way: plain dtypes loaded or stored as such, block formats read in
 * place, symbolic dims evaluated per run). Internal to backends/; not
 * installed. Thread safety: pure functions. */
#ifndef RLX_BASE_GPU_OPERAND_H
#define RLX_BASE_GPU_OPERAND_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/base/dtype.h"
#include "backends/base/op.h"

/* An operand as a kernel sees it: dims and element strides (already
 * broadcast / permuted / sliced for this op), plus bytes past the value's
 * own start. */
typedef struct vt {
    int32_t val;
    rlx_dtype dt;
    int rank;
    int64_t ne[RLX_MAX_DIMS], st[RLX_MAX_DIMS];
    int64_t extra;
} vt;

/* A matmul's bias as the kernels read it: [N], broadcast (stride 0) where
 * it has one element along its last dim. */
static inline vt bias_view(vt bias, int64_t N)
{
    vt b = bias;
    b.rank = 1;
    b.ne[0] = N;
    b.st[0] = bias.ne[bias.rank - 1] == 1 ? 0 : bias.st[bias.rank - 1];
    return b;
}

static inline bool ld_ok(rlx_dtype dt)
{
    switch (dt) {
    case RLX_DTYPE_F32:
    case RLX_DTYPE_F16:
    case RLX_DTYPE_BF16:
    case RLX_DTYPE_F8_E4M3:
    case RLX_DTYPE_F8_E5M2:
    case RLX_DTYPE_I32:
    case RLX_DTYPE_I16:
    case RLX_DTYPE_I8:
    case RLX_DTYPE_U8:
    case RLX_DTYPE_BOOL:
        return true;
    default:
        return false;
    }
}

/* FP8 is read (FLUX.2's FP8 weights), never written */
static inline bool st_ok(rlx_dtype dt)
{
    return (ld_ok(dt) && dt != RLX_DTYPE_F8_E4M3 && dt != RLX_DTYPE_F8_E5M2) || dt == RLX_DTYPE_I64;
}

static inline bool is_int(rlx_dtype dt)
{
    return dt == RLX_DTYPE_I32 || dt == RLX_DTYPE_I16 || dt == RLX_DTYPE_I8 || dt == RLX_DTYPE_U8 ||
           dt == RLX_DTYPE_BOOL || dt == RLX_DTYPE_I64;
}

static inline bool quant_ok(rlx_dtype dt)
{
    switch (dt) {
    case RLX_DTYPE_Q4_0:
    case RLX_DTYPE_Q4_1:
    case RLX_DTYPE_Q5_0:
    case RLX_DTYPE_Q5_1:
    case RLX_DTYPE_Q8_0:
    case RLX_DTYPE_Q4_K:
    case RLX_DTYPE_Q5_K:
    case RLX_DTYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

static inline int64_t esize(rlx_dtype dt)
{
    switch (dt) {
    case RLX_DTYPE_I64:
    case RLX_DTYPE_F64:
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

static inline int64_t dim_eval(rlx_dim d, const int64_t *sv)
{
    int64_t v = d.k;
    for (int t = 0; t < RLX_DIM_TERMS; t++)
        if (d.sym[t] >= 0 && d.sym[t] < RLX_MAX_SYMBOLS)
            v += (int64_t)d.mul[t] * sv[d.sym[t]];
    return v;
}

static inline int norm_axis(int axis, int rank)
{
    return axis < 0 ? axis + rank : axis;
}

static inline bool is_elementwise(rlx_op op)
{
    return (op >= RLX_OP_NEG && op <= RLX_OP_WHERE) || op == RLX_OP_FUSED_ELEMENTWISE;
}

static inline bool int_capable(rlx_op op)
{
    switch (op) {
    case RLX_OP_NEG:
    case RLX_OP_ABS:
    case RLX_OP_RELU:
    case RLX_OP_SQUARE:
    case RLX_OP_CAST:
    case RLX_OP_ADD:
    case RLX_OP_SUB:
    case RLX_OP_MUL:
    case RLX_OP_MAX:
    case RLX_OP_MIN:
    case RLX_OP_CMP:
    case RLX_OP_WHERE:
    case RLX_OP_COPY:
    case RLX_OP_RESHAPE:
    case RLX_OP_PERMUTE:
    case RLX_OP_SLICE:
    case RLX_OP_CONCAT:
    case RLX_OP_PAD:
    case RLX_OP_SCATTER:
        return true;
    default:
        return false;
    }
}

static inline int min_inputs(rlx_op op)
{
    switch (op) {
    case RLX_OP_ADD:
    case RLX_OP_SUB:
    case RLX_OP_MUL:
    case RLX_OP_DIV:
    case RLX_OP_MAX:
    case RLX_OP_MIN:
    case RLX_OP_POW:
    case RLX_OP_CMP:
    case RLX_OP_MATMUL:
    case RLX_OP_ROPE:
    case RLX_OP_CONV1D:
    case RLX_OP_CONV2D:
    case RLX_OP_CONV_TRANSPOSE2D:
    case RLX_OP_GATHER:
    case RLX_OP_SCATTER:
        return 2;
    case RLX_OP_WHERE:
    case RLX_OP_ATTENTION:
    case RLX_OP_ADD_RMS_NORM:
        return 3;
    default:
        return 1;
    }
}

#endif
