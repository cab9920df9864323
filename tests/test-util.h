/* Shared helpers for the cmocka tests. */
#ifndef RLX_TESTS_TEST_UTIL_H
#define RLX_TESTS_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Path of a file under ../shared/data (static buffer, valid until next call). */
const char *rlx_test_data(const char *rel);
/* A fresh path in the build tree's scratch folder for this test program. */
const char *rlx_test_tmp(const char *name);
/* Read a whole file into a malloc'd buffer; NULL on failure. */
void *rlx_test_read_file(const char *path, size_t *size);
/* Write bytes to a file; 0 on success. */
int rlx_test_write_file(const char *path, const void *data, size_t size);

#endif
