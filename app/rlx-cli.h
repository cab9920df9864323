/* Subcommands of the `rlx` command-line tool. Each takes the arguments after
 * its own name (argv[0] is the subcommand) and returns the process exit code. */
#ifndef RLX_APP_RLX_CLI_H
#define RLX_APP_RLX_CLI_H

#include <stdbool.h>
#include <stdint.h>

int rlx_cmd_info(int argc, char **argv);
int rlx_cmd_tokenize(int argc, char **argv);
int rlx_cmd_generate(int argc, char **argv);
int rlx_cmd_chat(int argc, char **argv);
int rlx_cmd_quantize(int argc, char **argv);
int rlx_cmd_make_model(int argc, char **argv);
int rlx_cmd_perplexity(int argc, char **argv);
int rlx_cmd_transcribe(int argc, char **argv);
int rlx_cmd_segment(int argc, char **argv);
/* rlx run MODEL.onnx --input NAME=FILE.npy ... --output DIR */
int rlx_cmd_run(int argc, char **argv);
/* rlx info for an .onnx file (app/rlx-info-onnx.c) */
int rlx_info_onnx(const char *path, bool with_tensors, bool as_json);
int rlx_cmd_imagine(int argc, char **argv);
/* rlx bench whisper (argv[0] is "whisper"). */
int rlx_bench_whisper_main(int argc, char **argv);
/* rlx bench flux2 (argv[0] is "flux2"). */
int rlx_bench_flux2_main(int argc, char **argv);
/* rlx bench sam (argv[0] is "sam"). */
int rlx_bench_sam_main(int argc, char **argv);
/* rlx bench onnx MODEL.onnx (rlx-bench-onnx.c); argv[0] is "onnx". */
int rlx_bench_onnx_main(int argc, char **argv);

/* Print a one-line error "rlx: <message>" to stderr and return 1. */
int rlx_cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A whole decimal number in [lo, hi] (nothing else in s) into *out. */
bool rlx_cli_parse_long(const char *s, long lo, long hi, long *out);

/* A size such as 6G, 512M, 1.5GiB, 4096 (bytes; K/M/G/T are powers of 1024)
 * into *out. */
bool rlx_cli_parse_size(const char *s, uint64_t *out);

/* The CPUs this process may run on (its affinity mask), at least 1. */
int rlx_cli_usable_cpus(void);

/* The value of a thread-count flag: a whole number from 1 to the usable CPUs.
 * 0 with *out set, else the exit code after a one-line error naming cmd and
 * flag. Leaving the flag out is how a person asks for the default. */
int rlx_cli_parse_threads(const char *cmd, const char *flag, const char *v, int *out);

/* Seconds on the monotonic clock. */
double rlx_cli_now(void);

#endif
