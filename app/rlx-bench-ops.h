/* `rlx bench ops`: CPU kernel micro-benchmarks (memory bandwidth, f32 GEMM
 * against OpenBLAS, quantized matvec, attention). Prints to stdout.
 *
 * Usage (from the CLI dispatcher):
 *     if (!strcmp(argv[1], "bench") && argc > 2 && !strcmp(argv[2], "ops"))
 *         return rlx_bench_ops_main(argc - 2, argv + 2);
 *
 * argv[0] is "ops"; options: -t THREADS (default: physical cores),
 * -r REPEATS (default 3), --section all|bw|gemm|matvec|attn.
 * Thread safety: runs its own thread pool; call from one thread.
 */
#ifndef RLX_APP_RLX_BENCH_OPS_H
#define RLX_APP_RLX_BENCH_OPS_H

#include <stddef.h>

#include "backends/cpu/threadpool.h"

int rlx_bench_ops_main(int argc, char **argv);

/* Streaming-read bandwidth in GB/s: `bytes` summed over the pool's threads
 * (16 tasks per thread), best of `repeats` runs after one warm-up. The
 * buffer is allocated and freed here. Exits on out of memory. */
double rlx_bench_measure_bandwidth(rlx_threadpool *pool, int repeats, size_t bytes);

/* A buffer of `bytes` for streaming reads: 2 MiB aligned, huge pages
 * asked for (see rlx-bench-ops.c); release with free(). Exits on out of
 * memory. */
void *rlx_bench_big_alloc(size_t bytes);

/* The f32 GEMM rate in GFLOP/s at 1024 x 1024 x 1024: the best of our
 * kernels, OpenBLAS and the dispatcher (as `rlx bench ops` times them), best
 * of `repeats` runs after a warm-up. The yardstick of the benchmarks' GEMM
 * shares. */
double rlx_bench_gemm_peak(rlx_threadpool *pool, int repeats);

/* The median of v[0..n), n >= 1 (sorts v). */
double rlx_bench_median(double *v, int n);

/* One streaming read of buf[0..bytes) (8-byte aligned, filled by the
 * caller) over the pool, in GB/s: for reads taken beside other work. */
double rlx_bench_read_bandwidth(rlx_threadpool *pool, const void *buf, size_t bytes);

/* `rlx bench -m MODEL ...`: llama-bench's pp/tg test on a GGUF model;
 * argv[0] is "bench". */
int rlx_bench_model_main(int argc, char **argv);

#endif
