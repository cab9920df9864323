// One thread per rotated pair (or passed-through dim) of one row
// (rope.cuh has the record's words).
#include "rope.cuh"

extern "C" __global__ void __launch_bounds__(256) rlx_rope(const int *rec)
{
    REC_DECL;
    if (!ld_rec(R_, rec))
        return;
    int64_t n = (int64_t)P(0) * (P(1) - P(2));
    for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < n;
         it += grid_x(R_) * blockDim.x)
        rope_item<false>(R_, it);
}
