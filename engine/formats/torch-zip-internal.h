/* engine/formats/torch-zip.c and torch-pickle.c: what the zip reader and the
 * unpickler share (the handle, its zip entries, the pickle's values). Not a
 * public header: readers use engine/formats/torch-zip.h. */
#ifndef RLX_ENGINE_FORMATS_TORCH_ZIP_INTERNAL_H
#define RLX_ENGINE_FORMATS_TORCH_ZIP_INTERNAL_H

#include "engine/formats/torch-zip.h"
#include "engine/formats/mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- small helpers ----------------------------------------------------- */

static inline uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32);
}

static inline const char *path_basename(const char *p)
{
    const char *s = strrchr(p, '/');
    return s && s[1] ? s + 1 : p;
}

static inline char *str_ndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Bytes from the file for an error message: printable ASCII, at most 80. */
static inline void printable(char *buf, size_t cap, const char *s, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < n && j + 4 < cap && i < 80; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[j++] = (c >= 0x20 && c < 0x7f && c != '\'') ? (char)c : '?';
    }
    if (n > 80 && j + 4 < cap) {
        memcpy(buf + j, "...", 3);
        j += 3;
    }
    buf[j] = '\0';
}

static inline uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static inline uint32_t crc32_of(const uint8_t *p, uint64_t n)
{
    static uint32_t table[256];
    static int ready; /* benign race: every thread writes the same values */
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    uint32_t c = 0xffffffffu;
    for (uint64_t i = 0; i < n; i++)
        c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

/* Open-addressing index over names: slots hold index + 1, 0 = empty. */
typedef struct tz_hash {
    size_t *slots;
    size_t cap;
} tz_hash;

static inline bool hash_init(tz_hash *h, uint64_t n)
{
    size_t cap = 16;
    while (cap < n * 2) {
        if (cap > SIZE_MAX / 4)
            return false;
        cap *= 2;
    }
    h->slots = calloc(cap, sizeof *h->slots);
    h->cap = h->slots ? cap : 0;
    return h->slots != NULL;
}

typedef void (*tz_key_fn)(const void *base, size_t i, const char **s, size_t *n);

/* Index of the entry named (s, n) or SIZE_MAX; *slot_out: where it would go. */
static inline size_t hash_lookup(const tz_hash *h, const char *s, size_t n, tz_key_fn key_of,
                                 const void *base, size_t *slot_out)
{
    if (slot_out)
        *slot_out = 0;
    if (h->cap == 0)
        return SIZE_MAX;
    size_t mask = h->cap - 1;
    size_t slot = (size_t)hash_bytes(s, n) & mask;
    while (h->slots[slot] != 0) {
        size_t idx = h->slots[slot] - 1;
        const char *ks;
        size_t kn;
        key_of(base, idx, &ks, &kn);
        if (kn == n && memcmp(ks, s, n) == 0) {
            if (slot_out)
                *slot_out = slot;
            return idx;
        }
        slot = (slot + 1) & mask;
    }
    if (slot_out)
        *slot_out = slot;
    return SIZE_MAX;
}

/* ---- the handle -------------------------------------------------------- */

typedef struct tz_entry {
    const char *name; /* into the file: not NUL-terminated */
    size_t name_len;
    uint64_t data_off; /* from the start of the file */
    uint64_t size;
    uint32_t crc;
    char *key; /* "<key>" of "<prefix>data/<key>", once a storage refers to it */
} tz_entry;

struct rlx_torch_zip {
    char *path;
    const char *label; /* what error messages call the file */
    void *map;
    size_t map_size;
    const uint8_t *base;
    uint64_t size;
    tz_entry *entries;
    uint64_t n_entries;
    tz_hash entry_index;
    char *prefix;
    char *root;
    rlx_torch_tensor *tensors;
    uint64_t n_tensors;
    size_t cap_tensors;
    tz_hash tensor_index;
};

static inline void entry_key(const void *base, size_t i, const char **s, size_t *n)
{
    const tz_entry *e = &((const tz_entry *)base)[i];
    *s = e->name;
    *n = e->name_len;
}

static inline void tensor_key(const void *base, size_t i, const char **s, size_t *n)
{
    const rlx_torch_tensor *t = &((const rlx_torch_tensor *)base)[i];
    *s = t->name;
    *n = strlen(t->name);
}

static inline rlx_status oom(rlx_error **err, const char *label)
{
    return rlx_error_set(err, RLX_ERR_NO_MEMORY, "%s: out of memory while reading the checkpoint",
                         label);
}

/* ---- pickle values ----------------------------------------------------- */

typedef enum {
    V_NONE,
    V_BOOL,
    V_INT,
    V_FLOAT,
    V_STR, /* unicode or bytes: only ever used as names */
    V_TUPLE,
    V_LIST,
    V_DICT, /* items hold key, value, key, value, ... */
    V_GLOBAL,
    V_STORAGE,
    V_TENSOR,
} pv_kind;

typedef enum {
    G_ORDERED_DICT,
    G_REBUILD_TENSOR_V2,
    G_REBUILD_PARAMETER,
    G_REBUILD_PARAMETER_WITH_STATE,
    G_STORAGE_TYPE,
    G_DTYPE,
} pv_global;

typedef struct pv_tensor {
    const tz_entry *entry;
    rlx_dtype dtype;
    uint32_t n_dims;
    uint64_t shape[RLX_TORCH_MAX_DIMS];
    uint64_t stride[RLX_TORCH_MAX_DIMS];
    uint64_t storage_offset;
    uint64_t n_elements;
    bool contiguous;
    bool requires_grad;
} pv_tensor;

typedef struct pv pv;
struct pv {
    pv_kind kind;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        struct {
            pv **items;
            size_t n, cap;
        } seq;
        struct {
            pv_global id;
            rlx_dtype dtype; /* of a storage type */
        } g;
        struct {
            const tz_entry *entry;
            rlx_dtype dtype;
            uint64_t numel;
        } st;
        pv_tensor *t;
    } u;
};

typedef struct pvm {
    rlx_torch_zip *tz;
    const char *label;
    const uint8_t *p, *end, *start;
    pv **objs; /* every allocation, for freeing */
    size_t n_objs, cap_objs;
    pv **stack;
    size_t n_stack, cap_stack;
    size_t marks[RLX_TORCH_MAX_MARKS];
    size_t n_marks;
    pv **memo;
    size_t n_memo, cap_memo;
    uint64_t visits; /* while naming */
} pvm;

/* torch-zip.c */
const tz_entry *tz_zip_find(const rlx_torch_zip *tz, const char *name, size_t n);
bool tz_grow(void **arr, size_t *cap, size_t need, size_t elem);

/* torch-pickle.c: run data.pkl in the handle's vm (nothing is executed: the
 * few globals a state dict needs are recognised, any other is refused by
 * name), the value's kind for messages, a string test, an element's bytes. */
rlx_status tz_pickle_run(pvm *vm, pv **result, rlx_error **err);
void tz_pvm_free(pvm *vm);
const char *tz_kind_name(const pv *v);
bool tz_str_is(const pv *v, const char *s);
uint64_t tz_dtype_size(rlx_dtype d);

#endif
