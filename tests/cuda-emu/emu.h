// Compiles the CUDA backend's kernels (backends/cuda/kernels/*.cu) as C++
// for the CPU emulator of tests/cuda-emu: force-included before each file.
// A block's threads are fibers on one OS thread (emu-driver.cc); barriers
// and warp shuffles switch between them. Nothing here is fast: it checks
// the kernels' indexing and arithmetic where no GPU is.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

#define RLX_CUDA_EMU 1

using std::isnan;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__    __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__    static
#define __align__(n)  __attribute__((aligned(n)))
#define __CUDA_ARCH__ 900

struct emu_dim3 {
    unsigned x, y, z;
};
extern "C" emu_dim3 emu_threadIdx, emu_blockIdx, emu_blockDim, emu_gridDim;
#define threadIdx emu_threadIdx
#define blockIdx  emu_blockIdx
#define blockDim  emu_blockDim
#define gridDim   emu_gridDim

extern "C" void emu_sync_block(void);
extern "C" void emu_sync_warp(void);
extern "C" float *emu_warp_slots(void); /* 32 floats of the calling thread's warp */

static inline void __syncthreads(void)
{
    emu_sync_block();
}
static inline void __syncwarp(unsigned mask = 0xFFFFFFFFu)
{
    (void)mask;
    emu_sync_warp();
}
static inline float __shfl_xor_sync(unsigned mask, float v, int o)
{
    (void)mask;
    float *s = emu_warp_slots();
    unsigned lane = threadIdx.x % 32;
    s[lane] = v;
    emu_sync_warp();
    float r = s[lane ^ (unsigned)o];
    emu_sync_warp();
    return r;
}
static inline int atomicOr(int *p, int v)
{
    int old = *p;
    *p = old | v;
    return old;
}
static inline int atomicAdd(int *p, int v)
{
    int old = *p;
    *p = old + v;
    return old;
}
static inline void __threadfence(void) {}
template <class T> static inline T __ldcg(const T *p)
{
    return *p;
}
static inline float __int_as_float(int i)
{
    float f;
    memcpy(&f, &i, 4);
    return f;
}
static inline float __uint_as_float(uint32_t i)
{
    float f;
    memcpy(&f, &i, 4);
    return f;
}
static inline uint32_t __float_as_uint(float f)
{
    uint32_t i;
    memcpy(&i, &f, 4);
    return i;
}
static inline int __dp4a(int a, int b, int c)
{
    for (int i = 0; i < 4; i++)
        c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
}
static inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t sh)
{
    uint64_t v = (uint64_t)hi << 32 | lo;
    return (uint32_t)(v >> (sh & 31));
}
static inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s)
{
    uint64_t v = (uint64_t)y << 32 | x;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++)
        r |= (uint32_t)(v >> (8 * ((s >> (4 * i)) & 7)) & 0xFF) << (8 * i);
    return r;
}
static inline int __float2int_rn(float f)
{
    return (int)std::nearbyint(f);
}
static inline int min(int a, int b)
{
    return a < b ? a : b;
}
static inline int max(int a, int b)
{
    return a > b ? a : b;
}
static inline int64_t min(int64_t a, int64_t b)
{
    return a < b ? a : b;
}
static inline int64_t max(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

// cp.async as the hardware orders it, so that a kernel reading shared
// memory before waiting for the copy that fills it reads stale bytes here
// too: a thread's copies read their source when issued and land in shared
// memory only when a wait retires their group (commit closes a group;
// wait(n) retires all but the n newest, oldest first).
struct emu_cp_copy {
    uint8_t *dst;
    uint8_t v[16];
};
struct emu_cp_state {
    std::vector<emu_cp_copy> open;
    std::deque<std::vector<emu_cp_copy>> groups;
};
static inline emu_cp_state &emu_cp_mine(void)
{
    static std::vector<emu_cp_state> st; /* by thread of the block */
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    if (st.size() <= t)
        st.resize(t + 1);
    return st[t];
}
static inline void emu_cp_async(void *dst, const void *src)
{
    emu_cp_copy c;
    c.dst = (uint8_t *)dst;
    memcpy(c.v, src, 16);
    emu_cp_mine().open.push_back(c);
}
static inline void emu_cp_commit(void)
{
    emu_cp_state &s = emu_cp_mine();
    s.groups.push_back(std::move(s.open));
    s.open.clear();
}
static inline void emu_cp_wait(int n)
{
    emu_cp_state &s = emu_cp_mine();
    while ((int)s.groups.size() > n) {
        for (const emu_cp_copy &c : s.groups.front())
            memcpy(c.dst, c.v, 16);
        s.groups.pop_front();
    }
}
