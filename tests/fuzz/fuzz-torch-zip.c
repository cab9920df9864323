/* libFuzzer target: the PyTorch zip reader and its restricted unpickler on
 * arbitrary bytes. An input that starts with "PK" is read as the whole file;
 * any other input is taken as data.pkl and wrapped here in a stored zip
 * (with its right checksum) beside sixteen 256-byte storages "0".."15", so
 * that mutations reach the unpickler instead of stopping at the CRC. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/formats/torch-zip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t crc32_ref(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xffffffffu;
}

static uint8_t *put(uint8_t *p, uint32_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

/* local header + data, and the matching directory record */
static void add_entry(uint8_t *buf, size_t *pos, uint8_t *cd, size_t *cd_pos, const char *name,
                      const uint8_t *data, size_t n)
{
    size_t nl = strlen(name);
    uint32_t crc = crc32_ref(data, n), off = (uint32_t)*pos;
    uint8_t *p = buf + *pos;
    p = put(p, 0x04034b50, 4);
    p = put(p, 20, 2);
    p = put(p, 0, 4);
    p = put(p, 0, 4);
    p = put(p, crc, 4);
    p = put(p, (uint32_t)n, 4);
    p = put(p, (uint32_t)n, 4);
    p = put(p, (uint32_t)nl, 2);
    p = put(p, 0, 2);
    memcpy(p, name, nl);
    p += nl;
    memcpy(p, data, n);
    *pos = (size_t)(p + n - buf);
    uint8_t *c = cd + *cd_pos;
    c = put(c, 0x02014b50, 4);
    c = put(c, 20, 2);
    c = put(c, 20, 2);
    c = put(c, 0, 4);
    c = put(c, 0, 4);
    c = put(c, crc, 4);
    c = put(c, (uint32_t)n, 4);
    c = put(c, (uint32_t)n, 4);
    c = put(c, (uint32_t)nl, 2);
    c = put(c, 0, 4);
    c = put(c, 0, 4);
    c = put(c, 0, 4);
    c = put(c, off, 4);
    memcpy(c, name, nl);
    *cd_pos = (size_t)(c + nl - cd);
}

static uint8_t *wrap_pickle(const uint8_t *pkl, size_t n, size_t *out_size)
{
    enum { N_ST = 16, ST_BYTES = 256 };
    static uint8_t storage[ST_BYTES];
    for (int i = 0; i < ST_BYTES; i++)
        storage[i] = (uint8_t)(i * 37 + 1);
    size_t cap = n + (N_ST + 1) * (ST_BYTES + 128) + 64;
    uint8_t *buf = malloc(cap), *cd = malloc((N_ST + 1) * 128);
    if (!buf || !cd) {
        free(buf);
        free(cd);
        return NULL;
    }
    size_t pos = 0, cd_pos = 0;
    add_entry(buf, &pos, cd, &cd_pos, "a/data.pkl", pkl, n);
    for (int i = 0; i < N_ST; i++) {
        char name[32];
        snprintf(name, sizeof name, "a/data/%d", i);
        add_entry(buf, &pos, cd, &cd_pos, name, storage, ST_BYTES);
    }
    uint32_t cd_off = (uint32_t)pos;
    memcpy(buf + pos, cd, cd_pos);
    pos += cd_pos;
    uint8_t *p = buf + pos;
    p = put(p, 0x06054b50, 4);
    p = put(p, 0, 4);
    p = put(p, N_ST + 1, 2);
    p = put(p, N_ST + 1, 2);
    p = put(p, (uint32_t)cd_pos, 4);
    p = put(p, cd_off, 4);
    p = put(p, 0, 2);
    free(cd);
    *out_size = (size_t)(p - buf);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *wrapped = NULL;
    if (!(size >= 2 && data[0] == 'P' && data[1] == 'K')) {
        wrapped = wrap_pickle(data, size, &size);
        if (!wrapped)
            return 0;
        data = wrapped;
    }
    rlx_torch_zip *tz = NULL;
    rlx_error *err = NULL;
    if (rlx_torch_zip_open_memory(data, size, "fuzz.pt", &tz, &err) != RLX_OK) {
        /* every failure carries a message */
        if (!err || rlx_error_message(err)[0] == '\0')
            __builtin_trap();
        rlx_error_free(err);
        free(wrapped);
        return 0;
    }
    volatile uint8_t sink = 0;
    uint64_t n = rlx_torch_zip_n_tensors(tz);
    for (uint64_t i = 0; i < n; i++) {
        const rlx_torch_tensor *t = rlx_torch_zip_tensor_at(tz, i);
        if (rlx_torch_zip_find(tz, t->name) != t)
            __builtin_trap();
        sink ^= (uint8_t)strlen(t->storage_key);
        const uint8_t *p = rlx_torch_zip_data(tz, t);
        if (!t->contiguous) {
            if (p)
                __builtin_trap();
            continue;
        }
        /* touch both ends of the tensor's bytes: ASan checks they are in the input */
        if (t->n_bytes > 0)
            sink ^= p[0] ^ p[t->n_bytes - 1];
        if (p < data || (size_t)(p - data) > size || t->n_bytes > size - (size_t)(p - data))
            __builtin_trap();
    }
    sink ^= (uint8_t)strlen(rlx_torch_zip_prefix(tz)) ^ (uint8_t)strlen(rlx_torch_zip_root(tz));
    (void)sink;
    rlx_torch_zip_close(tz);
    free(wrapped);
    return 0;
}
