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

int rlx_bench_ops_main(int argc, char **argv);

#endif
