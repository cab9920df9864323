/* Shared helpers for the cmocka tests. */
#ifndef RLX_TESTS_TEST_UTIL_H
#define RLX_TESTS_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "backends/base/lir.h"

/* Path of a file under ../shared/data (static buffer, valid until next call). */
const char *rlx_test_data(const char *rel);

/* The first words of the sentence a test prints when it skips because a file
 * of ../shared/data is absent; .ci/run fails on any skip that says it (CI
 * has the data), tests/need-data.sh says the same for the shell tests. */
#define RLX_TEST_DATA_MISSING "RLX-TEST-DATA-MISSING:"

/* Call first in main() of a test that reads ../shared/data: when one of the
 * files or folders (paths under ../shared/data, NULL-terminated) is absent,
 * prints a sentence naming it and exits 77, meson's "skipped". */
void rlx_test_need_data(const char *rel, ...) __attribute__((sentinel));
/* How many backends other than the CPU have a device here (the "devices"
 * variants of the model tests skip, exit 77, without one). */
int rlx_test_other_devices(void);
/* A fresh path in the build tree's scratch folder for this test program. */
const char *rlx_test_tmp(const char *name);
/* Read a whole file into a malloc'd buffer; NULL on failure. */
void *rlx_test_read_file(const char *path, size_t *size);
/* Write bytes to a file; 0 on success. */
int rlx_test_write_file(const char *path, const void *data, size_t size);

/* A float32 tensor for rlx_test_write_safetensors (dims row-major). */
typedef struct rlx_test_st_tensor {
    const char *name;
    int rank;
    int64_t dims[4];
    const float *data;
} rlx_test_st_tensor;
/* Write a .safetensors file of F32 tensors, in the given order; 0 on success. */
int rlx_test_write_safetensors(const char *path, const rlx_test_st_tensor *t, int n);

/* A dense row-major LIR value (F32: 4 bytes an element, else 2) and a
 * binding of that shape, for tests that write LIR by hand. */
rlx_lir_value rlx_test_val(rlx_dtype dt, int rank, const int64_t *ne, rlx_home home, int index,
                           uint64_t offset);
rlx_lir_binding rlx_test_bind(const char *name, rlx_dtype dt, int rank, const int64_t *ne,
                              uint64_t bytes);

/* A program with a weight and a state, four floats each: acc (the state
 * state_name) += x (input); y (output) = acc * w (param "w"). */
typedef struct rlx_test_acc_prog {
    rlx_lir lir;
    rlx_lir_value v[5];
    rlx_lir_instr ins[2];
    rlx_lir_binding pb, sb, ib, ob;
} rlx_test_acc_prog;
void rlx_test_make_acc(rlx_test_acc_prog *a, const char *state_name);

#endif
