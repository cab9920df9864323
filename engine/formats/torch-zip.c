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

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32);
}

static const char *path_basename(const char *p)
{
    const char *s = strrchr(p, '/');
    return s && s[1] ? s + 1 : p;
}

static char *str_ndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Bytes from the file for an error message: printable ASCII, at most 80. */
static void printable(char *buf, size_t cap, const char *s, size_t n)
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

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint32_t crc32_of(const uint8_t *p, uint64_t n)
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

static bool hash_init(tz_hash *h, uint64_t n)
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
static size_t hash_lookup(const tz_hash *h, const char *s, size_t n, tz_key_fn key_of,
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

static void entry_key(const void *base, size_t i, const char **s, size_t *n)
{
    const tz_entry *e = &((const tz_entry *)base)[i];
    *s = e->name;
    *n = e->name_len;
}

static void tensor_key(const void *base, size_t i, const char **s, size_t *n)
{
    const rlx_torch_tensor *t = &((const rlx_torch_tensor *)base)[i];
    *s = t->name;
    *n = strlen(t->name);
}

static rlx_status oom(rlx_error **err, const char *label)
{
    return rlx_error_set(err, RLX_ERR_NO_MEMORY, "%s: out of memory while reading the checkpoint",
                         label);
}

/* ---- zip --------------------------------------------------------------- */

#define SIG_LOCAL  0x04034b50u
#define SIG_CDIR   0x02014b50u
#define SIG_EOCD   0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64  0x07064b50u

/* True when [off, off + n) lies inside a file of `size` bytes. */
static bool in_file(uint64_t size, uint64_t off, uint64_t n)
{
    return off <= size && n <= size - off;
}

static rlx_status zip_entry_name_error(rlx_error **err, rlx_status code, const char *label,
                                       const tz_entry *e, const char *what)
{
    char nm[100];
    printable(nm, sizeof nm, e->name, e->name_len);
    return rlx_error_set(err, code, "%s: zip entry '%s' %s", label, nm, what);
}

static rlx_status zip_read(rlx_torch_zip *tz, rlx_error **err)
{
    const uint8_t *b = tz->base;
    uint64_t size = tz->size;
    const char *label = tz->label;
    if (size < 22)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: %" PRIu64 " bytes, too short to be a zip archive (truncated?)",
                             label, size);

    /* The end record is the last thing in the file, before a comment of at
     * most 64 KiB. */
    uint64_t eocd = UINT64_MAX;
    uint64_t lowest = size - 22 > 65535 ? size - 22 - 65535 : 0;
    for (uint64_t p = size - 22 + 1; p-- > lowest;) {
        if (rd32(b + p) == SIG_EOCD && rd16(b + p + 20) <= size - p - 22) {
            eocd = p;
            break;
        }
    }
    if (eocd == UINT64_MAX)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: no zip end-of-central-directory record: the file is not a zip "
                             "archive or was cut short",
                             label);
    uint16_t disk = rd16(b + eocd + 4), cd_disk = rd16(b + eocd + 6);
    uint64_t n_disk = rd16(b + eocd + 8), n = rd16(b + eocd + 10);
    uint64_t cd_size = rd32(b + eocd + 12), cd_off = rd32(b + eocd + 16);

    if (eocd >= 20 && rd32(b + eocd - 20) == SIG_LOC64) {
        uint64_t off64 = rd64(b + eocd - 20 + 8);
        if (!in_file(size, off64, 56) || off64 > eocd - 20 || rd32(b + off64) != SIG_EOCD64)
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: the zip64 locator points at byte %" PRIu64
                                 ", where there is no zip64 end record (truncated or damaged?)",
                                 label, off64);
        disk = (uint16_t)(rd32(b + off64 + 16) != 0);
        cd_disk = (uint16_t)(rd32(b + off64 + 20) != 0);
        n_disk = rd64(b + off64 + 24);
        n = rd64(b + off64 + 32);
        cd_size = rd64(b + off64 + 40);
        cd_off = rd64(b + off64 + 48);
    } else if (n == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu) {
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: the zip end record says a zip64 record holds the directory, "
                             "but there is none (truncated or damaged?)",
                             label);
    }
    if (disk != 0 || cd_disk != 0 || n_disk != n)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: a zip archive split over several files; rlx reads single-file "
                             "checkpoints",
                             label);
    if (n == 0)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: the zip archive is empty", label);
    if (n > RLX_TORCH_MAX_ENTRIES)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: the zip directory claims %" PRIu64
                             " entries, over the limit of %u",
                             label, n, RLX_TORCH_MAX_ENTRIES);
    if (!in_file(size, cd_off, cd_size) || cd_off + cd_size > eocd)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: the zip directory (%" PRIu64 " bytes at %" PRIu64
                             ") runs past the end of the %" PRIu64 "-byte file (truncated?)",
                             label, cd_size, cd_off, size);
    if (n > cd_size / 46)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: the zip directory claims %" PRIu64 " entries in %" PRIu64
                             " bytes, too few for them",
                             label, n, cd_size);

    tz->entries = calloc((size_t)n, sizeof *tz->entries);
    if (!tz->entries || !hash_init(&tz->entry_index, n))
        return oom(err, label);
    uint64_t p = cd_off, cd_end = cd_off + cd_size;
    for (uint64_t i = 0; i < n; i++) {
        if (cd_end - p < 46 || rd32(b + p) != SIG_CDIR)
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: zip directory entry %" PRIu64 " of %" PRIu64
                                 " at byte %" PRIu64 " is damaged",
                                 label, i, n, p);
        uint16_t flags = rd16(b + p + 8), method = rd16(b + p + 10);
        uint32_t crc = rd32(b + p + 16);
        uint64_t csize = rd32(b + p + 20), usize = rd32(b + p + 24);
        uint64_t nl = rd16(b + p + 28), xl = rd16(b + p + 30), cl = rd16(b + p + 32);
        uint64_t loff = rd32(b + p + 42);
        if (cd_end - p - 46 < nl + xl + cl)
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: zip directory entry %" PRIu64 " runs past the directory",
                                 label, i);
        tz_entry *e = &tz->entries[i];
        e->name = (const char *)b + p + 46;
        e->name_len = (size_t)nl;
        e->crc = crc;
        /* zip64: the 8-byte values of the fields set to all ones, in order. */
        const uint8_t *x = b + p + 46 + nl, *xend = x + xl;
        while (xend - x >= 4) {
            uint16_t id = rd16(x), len = rd16(x + 2);
            if (len > xend - x - 4)
                break;
            if (id == 0x0001) {
                const uint8_t *f = x + 4, *fend = x + 4 + len;
                if (usize == 0xffffffffu && fend - f >= 8) {
                    usize = rd64(f);
                    f += 8;
                }
                if (csize == 0xffffffffu && fend - f >= 8) {
                    csize = rd64(f);
                    f += 8;
                }
                if (loff == 0xffffffffu && fend - f >= 8)
                    loff = rd64(f);
            }
            x += 4 + len;
        }
        if (flags & 1)
            return zip_entry_name_error(err, RLX_ERR_UNSUPPORTED, label, e,
                                        "is encrypted; torch.save never encrypts, so this file "
                                        "is not a plain checkpoint");
        if (method != 0)
            return zip_entry_name_error(
                err, RLX_ERR_UNSUPPORTED, label, e,
                "is compressed; torch.save stores entries uncompressed so that weights can be "
                "mapped in place, so this file was repacked (re-save it with torch.save)");
        if (csize != usize)
            return zip_entry_name_error(err, RLX_ERR_FORMAT, label, e,
                                        "is stored uncompressed but its two sizes differ");
        if (!in_file(size, loff, 30) || rd32(b + loff) != SIG_LOCAL)
            return zip_entry_name_error(err, RLX_ERR_FORMAT, label, e,
                                        "has no local header where the directory says "
                                        "(truncated or damaged?)");
        uint64_t lnl = rd16(b + loff + 26), lxl = rd16(b + loff + 28);
        if (!in_file(size, loff + 30, lnl + lxl) || lnl != nl ||
            memcmp(b + loff + 30, e->name, nl) != 0)
            return zip_entry_name_error(err, RLX_ERR_FORMAT, label, e,
                                        "has a local header that does not match the directory");
        e->data_off = loff + 30 + lnl + lxl;
        e->size = usize;
        if (!in_file(size, e->data_off, usize))
            return zip_entry_name_error(err, RLX_ERR_FORMAT, label, e,
                                        "runs past the end of the file (truncated?)");
        size_t slot;
        if (hash_lookup(&tz->entry_index, e->name, e->name_len, entry_key, tz->entries, &slot) !=
            SIZE_MAX)
            return zip_entry_name_error(err, RLX_ERR_FORMAT, label, e,
                                        "appears twice in the zip directory");
        tz->entry_index.slots[slot] = (size_t)i + 1;
        tz->n_entries = i + 1;
        p += 46 + nl + xl + cl;
    }
    return RLX_OK;
}

static const tz_entry *zip_find(const rlx_torch_zip *tz, const char *name, size_t n)
{
    size_t i = hash_lookup(&tz->entry_index, name, n, entry_key, tz->entries, NULL);
    return i == SIZE_MAX ? NULL : &tz->entries[i];
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

static const struct {
    const char *module, *name;
    pv_global id;
    rlx_dtype dtype;
} allowed_globals[] = {
    {"collections", "OrderedDict", G_ORDERED_DICT, RLX_DTYPE_INVALID},
    {"torch._utils", "_rebuild_tensor_v2", G_REBUILD_TENSOR_V2, RLX_DTYPE_INVALID},
    {"torch._utils", "_rebuild_parameter", G_REBUILD_PARAMETER, RLX_DTYPE_INVALID},
    {"torch._utils", "_rebuild_parameter_with_state", G_REBUILD_PARAMETER_WITH_STATE,
     RLX_DTYPE_INVALID},
    {"torch", "DoubleStorage", G_STORAGE_TYPE, RLX_DTYPE_F64},
    {"torch", "FloatStorage", G_STORAGE_TYPE, RLX_DTYPE_F32},
    {"torch", "HalfStorage", G_STORAGE_TYPE, RLX_DTYPE_F16},
    {"torch", "BFloat16Storage", G_STORAGE_TYPE, RLX_DTYPE_BF16},
    {"torch", "LongStorage", G_STORAGE_TYPE, RLX_DTYPE_I64},
    {"torch", "IntStorage", G_STORAGE_TYPE, RLX_DTYPE_I32},
    {"torch", "ShortStorage", G_STORAGE_TYPE, RLX_DTYPE_I16},
    {"torch", "CharStorage", G_STORAGE_TYPE, RLX_DTYPE_I8},
    {"torch", "ByteStorage", G_STORAGE_TYPE, RLX_DTYPE_U8},
    {"torch", "BoolStorage", G_STORAGE_TYPE, RLX_DTYPE_BOOL},
    /* dtype objects: inert values (tensor metadata may name one) */
    {"torch", "float64", G_DTYPE, RLX_DTYPE_F64},
    {"torch", "float32", G_DTYPE, RLX_DTYPE_F32},
    {"torch", "float16", G_DTYPE, RLX_DTYPE_F16},
    {"torch", "bfloat16", G_DTYPE, RLX_DTYPE_BF16},
    {"torch", "int64", G_DTYPE, RLX_DTYPE_I64},
    {"torch", "int32", G_DTYPE, RLX_DTYPE_I32},
    {"torch", "int16", G_DTYPE, RLX_DTYPE_I16},
    {"torch", "int8", G_DTYPE, RLX_DTYPE_I8},
    {"torch", "uint8", G_DTYPE, RLX_DTYPE_U8},
    {"torch", "bool", G_DTYPE, RLX_DTYPE_BOOL},
};

static const char *global_name(const pv *g)
{
    for (size_t i = 0; i < sizeof allowed_globals / sizeof allowed_globals[0]; i++)
        if (allowed_globals[i].id == g->u.g.id &&
            ((g->u.g.id != G_STORAGE_TYPE && g->u.g.id != G_DTYPE) ||
             allowed_globals[i].dtype == g->u.g.dtype))
            return allowed_globals[i].name;
    return "?";
}

static const char *kind_name(const pv *v)
{
    switch (v->kind) {
    case V_NONE:
        return "None";
    case V_BOOL:
        return "a bool";
    case V_INT:
        return "an int";
    case V_FLOAT:
        return "a float";
    case V_STR:
        return "a string";
    case V_TUPLE:
        return "a tuple";
    case V_LIST:
        return "a list";
    case V_DICT:
        return "a dict";
    case V_GLOBAL:
        return "a global";
    case V_STORAGE:
        return "a storage";
    case V_TENSOR:
        return "a tensor";
    }
    return "a value";
}

/* The virtual machine. Every value is allocated here and freed together;
 * values are shared by reference (memo, DUP), as in Python. */
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

static bool grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return false;
        c *= 2;
    }
    void *p = realloc(*arr, c * elem);
    if (!p)
        return false;
    *arr = p;
    *cap = c;
    return true;
}

static pv *pv_new(pvm *vm, pv_kind kind)
{
    if (!grow((void **)&vm->objs, &vm->cap_objs, vm->n_objs + 1, sizeof *vm->objs))
        return NULL;
    pv *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    if (kind == V_TENSOR) {
        v->u.t = calloc(1, sizeof *v->u.t);
        if (!v->u.t) {
            free(v);
            return NULL;
        }
    }
    v->kind = kind;
    vm->objs[vm->n_objs++] = v;
    return v;
}

static void pvm_free(pvm *vm)
{
    for (size_t i = 0; i < vm->n_objs; i++) {
        pv *v = vm->objs[i];
        if (v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_DICT)
            free(v->u.seq.items);
        else if (v->kind == V_TENSOR)
            free(v->u.t);
        free(v);
    }
    free(vm->objs);
    free(vm->stack);
    free(vm->memo);
}

static bool seq_push(pv *s, pv *item)
{
    if (!grow((void **)&s->u.seq.items, &s->u.seq.cap, s->u.seq.n + 1, sizeof *s->u.seq.items))
        return false;
    s->u.seq.items[s->u.seq.n++] = item;
    return true;
}

/* ---- the pickle virtual machine ---------------------------------------- */

/* Errors say where in data.pkl they happened. */
#define VM_ERR(code, ...)                                                        \
    do {                                                                         \
        char msg_[400];                                                          \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                                \
        return rlx_error_set(err, code, "%s: data.pkl, byte %zu: %s", vm->label, \
                             (size_t)(op_at - vm->start), msg_);                 \
    } while (0)

static rlx_status vm_oom(pvm *vm, rlx_error **err)
{
    return oom(err, vm->label);
}

static bool vm_push(pvm *vm, pv *v)
{
    if (vm->n_stack >= RLX_TORCH_MAX_STACK)
        return false;
    if (!grow((void **)&vm->stack, &vm->cap_stack, vm->n_stack + 1, sizeof *vm->stack))
        return false;
    vm->stack[vm->n_stack++] = v;
    return true;
}

/* Items above the innermost mark belong to it; nothing below may be popped
 * while a mark is open. */
static size_t vm_floor(const pvm *vm)
{
    return vm->n_marks ? vm->marks[vm->n_marks - 1] : 0;
}

static rlx_status resolve_global(pvm *vm, const uint8_t *op_at, const char *mod, size_t ml,
                                 const char *name, size_t nl, pv **out, rlx_error **err)
{
    for (size_t i = 0; i < sizeof allowed_globals / sizeof allowed_globals[0]; i++) {
        if (strlen(allowed_globals[i].module) == ml &&
            memcmp(allowed_globals[i].module, mod, ml) == 0 &&
            strlen(allowed_globals[i].name) == nl &&
            memcmp(allowed_globals[i].name, name, nl) == 0) {
            pv *g = pv_new(vm, V_GLOBAL);
            if (!g)
                return vm_oom(vm, err);
            g->u.g.id = allowed_globals[i].id;
            g->u.g.dtype = allowed_globals[i].dtype;
            *out = g;
            return RLX_OK;
        }
    }
    char m[100], n[100];
    printable(m, sizeof m, mod, ml);
    printable(n, sizeof n, name, nl);
    if (ml == 5 && memcmp(mod, "torch", 5) == 0 && nl > 7 &&
        memcmp(name + nl - 7, "Storage", 7) == 0)
        VM_ERR(RLX_ERR_UNSUPPORTED,
               "the checkpoint holds a torch.%s, a storage type rlx has no dtype for", n);
    VM_ERR(RLX_ERR_UNSUPPORTED,
           "the checkpoint's pickle calls '%s.%s', which a weights file has no need of; it was "
           "not run",
           m, n);
}

static bool as_u64(const pv *v, uint64_t *out)
{
    if (v->kind != V_INT || v->u.i < 0)
        return false;
    *out = (uint64_t)v->u.i;
    return true;
}

static bool str_is(const pv *v, const char *s)
{
    return v->kind == V_STR && v->u.s.n == strlen(s) && memcmp(v->u.s.p, s, v->u.s.n) == 0;
}

static uint64_t dtype_size(rlx_dtype d)
{
    uint64_t b = 0;
    (void)rlx_dtype_row_bytes(d, 1, &b);
    return b;
}

/* ('storage', storage_type, key, location, numel) -> the zip entry's bytes. */
static rlx_status persistent_load(pvm *vm, const uint8_t *op_at, pv *pid, pv **out, rlx_error **err)
{
    if (pid->kind != V_TUPLE || pid->u.seq.n != 5 || !str_is(pid->u.seq.items[0], "storage"))
        VM_ERR(RLX_ERR_FORMAT, "a persistent id is not a ('storage', type, key, location, "
                               "size) tuple");
    pv **it = pid->u.seq.items;
    if (it[1]->kind != V_GLOBAL || it[1]->u.g.id != G_STORAGE_TYPE)
        VM_ERR(RLX_ERR_FORMAT, "a persistent id's storage type is %s, not a torch.*Storage",
               kind_name(it[1]));
    if (it[2]->kind != V_STR)
        VM_ERR(RLX_ERR_FORMAT, "a persistent id's storage key is %s, not a string",
               kind_name(it[2]));
    uint64_t numel;
    if (!as_u64(it[4], &numel))
        VM_ERR(RLX_ERR_FORMAT, "a persistent id's element count is %s, not a non-negative int",
               kind_name(it[4]));
    const char *key = it[2]->u.s.p;
    size_t kl = it[2]->u.s.n;
    char kp[100];
    printable(kp, sizeof kp, key, kl);
    size_t pl = strlen(vm->tz->prefix);
    if (kl > RLX_TORCH_MAX_NAME || memchr(key, '\0', kl) || memchr(key, '/', kl))
        VM_ERR(RLX_ERR_FORMAT, "storage key '%s' is not a plain name", kp);
    char *path = malloc(pl + 5 + kl);
    if (!path)
        return vm_oom(vm, err);
    memcpy(path, vm->tz->prefix, pl);
    memcpy(path + pl, "data/", 5);
    memcpy(path + pl + 5, key, kl);
    const tz_entry *e = zip_find(vm->tz, path, pl + 5 + kl);
    free(path);
    if (!e)
        VM_ERR(RLX_ERR_FORMAT, "storage '%s' has no entry %sdata/%s in the archive", kp,
               vm->tz->prefix, kp);
    rlx_dtype dt = it[1]->u.g.dtype;
    uint64_t es = dtype_size(dt);
    if (numel > e->size / es)
        VM_ERR(RLX_ERR_FORMAT,
               "storage '%s' holds %" PRIu64 " %s elements, but its entry has only %" PRIu64
               " bytes",
               kp, numel, rlx_dtype_name(dt), e->size);
    if (!e->key) {
        ((tz_entry *)e)->key = str_ndup(key, kl);
        if (!e->key)
            return vm_oom(vm, err);
    }
    pv *s = pv_new(vm, V_STORAGE);
    if (!s)
        return vm_oom(vm, err);
    s->u.st.entry = e;
    s->u.st.dtype = dt;
    s->u.st.numel = numel;
    *out = s;
    return RLX_OK;
}

/* _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
 * backward_hooks[, metadata]) */
static rlx_status rebuild_tensor(pvm *vm, const uint8_t *op_at, pv *args, pv **out, rlx_error **err)
{
    if (args->u.seq.n != 6 && args->u.seq.n != 7)
        VM_ERR(RLX_ERR_FORMAT, "_rebuild_tensor_v2 gets %zu arguments, not 6 or 7", args->u.seq.n);
    pv **a = args->u.seq.items;
    if (a[0]->kind != V_STORAGE)
        VM_ERR(RLX_ERR_FORMAT, "_rebuild_tensor_v2's storage is %s", kind_name(a[0]));
    uint64_t off;
    if (!as_u64(a[1], &off))
        VM_ERR(RLX_ERR_FORMAT,
               "_rebuild_tensor_v2's storage offset is %s, not a non-negative "
               "int",
               kind_name(a[1]));
    if (a[2]->kind != V_TUPLE || a[3]->kind != V_TUPLE)
        VM_ERR(RLX_ERR_FORMAT, "_rebuild_tensor_v2's size and stride are %s and %s, not tuples",
               kind_name(a[2]), kind_name(a[3]));
    size_t nd = a[2]->u.seq.n;
    if (a[3]->u.seq.n != nd)
        VM_ERR(RLX_ERR_FORMAT, "_rebuild_tensor_v2 gets %zu sizes but %zu strides", nd,
               a[3]->u.seq.n);
    if (nd > RLX_TORCH_MAX_DIMS)
        VM_ERR(RLX_ERR_UNSUPPORTED, "a tensor has %zu dims; rlx handles at most %d", nd,
               RLX_TORCH_MAX_DIMS);
    pv *v = pv_new(vm, V_TENSOR);
    if (!v)
        return vm_oom(vm, err);
    pv_tensor *t = v->u.t;
    t->entry = a[0]->u.st.entry;
    t->dtype = a[0]->u.st.dtype;
    t->n_dims = (uint32_t)nd;
    t->storage_offset = off;
    t->requires_grad = a[4]->kind == V_BOOL && a[4]->u.b;
    uint64_t numel = 1;
    bool overflow = false, zero = false;
    for (size_t d = 0; d < nd; d++) {
        if (!as_u64(a[2]->u.seq.items[d], &t->shape[d]) ||
            !as_u64(a[3]->u.seq.items[d], &t->stride[d]))
            VM_ERR(RLX_ERR_FORMAT, "a tensor's size or stride %zu is not a non-negative int", d);
        if (t->shape[d] == 0)
            zero = true;
        else if (numel > UINT64_MAX / t->shape[d])
            overflow = true;
        else
            numel *= t->shape[d];
    }
    if (zero)
        numel = 0;
    else if (overflow)
        VM_ERR(RLX_ERR_FORMAT, "a tensor's shape has more than 2^64 elements");
    t->n_elements = numel;
    uint64_t es = dtype_size(t->dtype);
    if (numel > UINT64_MAX / es)
        VM_ERR(RLX_ERR_FORMAT, "a tensor's shape needs more than 2^64 bytes");
    /* The last element it reaches must lie inside the storage. */
    uint64_t storage_numel = a[0]->u.st.numel;
    uint64_t last = off;
    if (numel > 0) {
        for (size_t d = 0; d < nd; d++) {
            uint64_t span = t->shape[d] - 1;
            if (t->stride[d] != 0 && span > (UINT64_MAX - last) / t->stride[d])
                VM_ERR(RLX_ERR_FORMAT, "a tensor's extent overflows");
            last += span * t->stride[d];
        }
    }
    uint64_t need = numel > 0 ? last : off; /* last element index, or where an empty one sits */
    if (numel > 0 ? need >= storage_numel : need > storage_numel) {
        char kp[100];
        printable(kp, sizeof kp, t->entry->key, strlen(t->entry->key));
        VM_ERR(RLX_ERR_FORMAT,
               "a tensor reaches element %" PRIu64 " of storage '%s', which holds %" PRIu64, need,
               kp, storage_numel);
    }
    uint64_t expect = 1;
    t->contiguous = true;
    for (size_t d = nd; d-- > 0;) {
        if (t->shape[d] != 1 && t->stride[d] != expect)
            t->contiguous = false;
        expect *= t->shape[d] ? t->shape[d] : 1;
    }
    *out = v;
    return RLX_OK;
}

static rlx_status vm_call(pvm *vm, const uint8_t *op_at, pv *fn, pv *args, pv **out,
                          rlx_error **err)
{
    if (fn->kind != V_GLOBAL)
        VM_ERR(RLX_ERR_FORMAT, "the pickle calls %s, which is not callable", kind_name(fn));
    if (args->kind != V_TUPLE)
        VM_ERR(RLX_ERR_FORMAT, "a call's arguments are %s, not a tuple", kind_name(args));
    switch (fn->u.g.id) {
    case G_ORDERED_DICT: {
        pv *d = pv_new(vm, V_DICT);
        if (!d)
            return vm_oom(vm, err);
        if (args->u.seq.n != 0)
            VM_ERR(RLX_ERR_FORMAT, "OrderedDict is called with arguments");
        *out = d;
        return RLX_OK;
    }
    case G_REBUILD_TENSOR_V2:
        return rebuild_tensor(vm, op_at, args, out, err);
    case G_REBUILD_PARAMETER:
    case G_REBUILD_PARAMETER_WITH_STATE: {
        size_t want = fn->u.g.id == G_REBUILD_PARAMETER ? 3 : 4;
        if (args->u.seq.n != want || args->u.seq.items[0]->kind != V_TENSOR)
            VM_ERR(RLX_ERR_FORMAT, "%s gets %zu arguments, not a tensor and %zu more",
                   global_name(fn), args->u.seq.n, want - 1);
        pv *v = pv_new(vm, V_TENSOR);
        if (!v)
            return vm_oom(vm, err);
        *v->u.t = *args->u.seq.items[0]->u.t;
        v->u.t->requires_grad = args->u.seq.items[1]->kind == V_BOOL && args->u.seq.items[1]->u.b;
        *out = v;
        return RLX_OK;
    }
    case G_STORAGE_TYPE:
    case G_DTYPE:
        break;
    }
    VM_ERR(RLX_ERR_FORMAT, "the pickle calls torch.%s, which torch.save never does",
           global_name(fn));
}

static rlx_status vm_run(pvm *vm, pv **result, rlx_error **err)
{
    *result = NULL;
    const uint8_t *op_at = vm->p;
#define NEED(n)                                                                      \
    do {                                                                             \
        if ((size_t)(vm->end - vm->p) < (size_t)(n))                                 \
            VM_ERR(RLX_ERR_FORMAT, "the pickle ends inside an opcode (truncated?)"); \
    } while (0)
#define PUSH(v)                                                                \
    do {                                                                       \
        if (!vm_push(vm, (v))) {                                               \
            if (vm->n_stack >= RLX_TORCH_MAX_STACK)                            \
                VM_ERR(RLX_ERR_FORMAT, "the pickle stack grows past %u items", \
                       (unsigned)RLX_TORCH_MAX_STACK);                         \
            return vm_oom(vm, err);                                            \
        }                                                                      \
    } while (0)
#define POP(dst)                                                             \
    do {                                                                     \
        if (vm->n_stack <= vm_floor(vm))                                     \
            VM_ERR(RLX_ERR_FORMAT, "opcode 0x%02x pops an empty stack", op); \
        (dst) = vm->stack[--vm->n_stack];                                    \
    } while (0)
#define NEW(dst, kind)                     \
    do {                                   \
        if (!((dst) = pv_new(vm, (kind)))) \
            return vm_oom(vm, err);        \
    } while (0)
/* Values live until the end, so their number bounds the memory a pickle can
 * make us use: about 100 bytes each. */
#define OBJ_LIMIT()                                                        \
    do {                                                                   \
        if (vm->n_objs >= RLX_TORCH_MAX_OBJECTS)                           \
            VM_ERR(RLX_ERR_FORMAT, "the pickle makes more than %u values", \
                   (unsigned)RLX_TORCH_MAX_OBJECTS);                       \
    } while (0)

    while (vm->p < vm->end) {
        op_at = vm->p;
        OBJ_LIMIT();
        uint8_t op = *vm->p++;
        pv *v = NULL, *a = NULL, *b = NULL;
        switch (op) {
        case 0x80: /* PROTO */
            NEED(1);
            if (*vm->p > 5)
                VM_ERR(RLX_ERR_UNSUPPORTED, "pickle protocol %u is newer than 5", *vm->p);
            vm->p++;
            break;
        case 0x95: /* FRAME: a length hint only */
            NEED(8);
            vm->p += 8;
            break;
        case '.': /* STOP */
            POP(v);
            *result = v;
            return RLX_OK;
        case '}': /* EMPTY_DICT */
            NEW(v, V_DICT);
            PUSH(v);
            break;
        case ']': /* EMPTY_LIST */
            NEW(v, V_LIST);
            PUSH(v);
            break;
        case ')': /* EMPTY_TUPLE */
            NEW(v, V_TUPLE);
            PUSH(v);
            break;
        case '(': /* MARK */
            if (vm->n_marks >= RLX_TORCH_MAX_MARKS)
                VM_ERR(RLX_ERR_FORMAT, "MARKs nest deeper than %d", RLX_TORCH_MAX_MARKS);
            vm->marks[vm->n_marks++] = vm->n_stack;
            break;
        case '1': /* POP_MARK */
            if (!vm->n_marks)
                VM_ERR(RLX_ERR_FORMAT, "POP_MARK without a MARK");
            vm->n_stack = vm->marks[--vm->n_marks];
            break;
        case '0': /* POP */
            if (vm->n_marks && vm->marks[vm->n_marks - 1] == vm->n_stack)
                vm->n_marks--; /* pops the mark itself, as CPython does */
            else
                POP(v);
            break;
        case '2': /* DUP */
            POP(v);
            PUSH(v);
            PUSH(v);
            break;
        case 't':    /* TUPLE */
        case 'l':    /* LIST */
        case 0x85:   /* TUPLE1 */
        case 0x86:   /* TUPLE2 */
        case 0x87: { /* TUPLE3 */
            size_t from;
            if (op == 't' || op == 'l') {
                if (!vm->n_marks)
                    VM_ERR(RLX_ERR_FORMAT, "opcode '%c' without a MARK", op);
                from = vm->marks[--vm->n_marks];
            } else {
                size_t k = (size_t)(op - 0x84);
                if (vm->n_stack - vm_floor(vm) < k)
                    VM_ERR(RLX_ERR_FORMAT, "TUPLE%zu with %zu items on the stack", k,
                           vm->n_stack - vm_floor(vm));
                from = vm->n_stack - k;
            }
            NEW(v, op == 'l' ? V_LIST : V_TUPLE);
            for (size_t i = from; i < vm->n_stack; i++)
                if (!seq_push(v, vm->stack[i]))
                    return vm_oom(vm, err);
            vm->n_stack = from;
            PUSH(v);
            break;
        }
        case 'X':   /* BINUNICODE */
        case 0x8c:  /* SHORT_BINUNICODE */
        case 0x8d:  /* BINUNICODE8 */
        case 'B':   /* BINBYTES */
        case 'C':   /* SHORT_BINBYTES */
        case 0x8e:  /* BINBYTES8 */
        case 'T':   /* BINSTRING */
        case 'U': { /* SHORT_BINSTRING */
            uint64_t n;
            if (op == 0x8c || op == 'C' || op == 'U') {
                NEED(1);
                n = *vm->p;
                vm->p += 1;
            } else if (op == 0x8d || op == 0x8e) {
                NEED(8);
                n = rd64(vm->p);
                vm->p += 8;
            } else {
                NEED(4);
                n = rd32(vm->p);
                vm->p += 4;
            }
            if (n > (uint64_t)(vm->end - vm->p))
                VM_ERR(RLX_ERR_FORMAT,
                       "a %" PRIu64 "-byte string runs past the end of the pickle (truncated?)", n);
            NEW(v, V_STR);
            v->u.s.p = (const char *)vm->p;
            v->u.s.n = (size_t)n;
            vm->p += n;
            PUSH(v);
            break;
        }
        case 'J': /* BININT */
            NEED(4);
            NEW(v, V_INT);
            v->u.i = (int32_t)rd32(vm->p);
            vm->p += 4;
            PUSH(v);
            break;
        case 'K': /* BININT1 */
            NEED(1);
            NEW(v, V_INT);
            v->u.i = *vm->p++;
            PUSH(v);
            break;
        case 'M': /* BININT2 */
            NEED(2);
            NEW(v, V_INT);
            v->u.i = rd16(vm->p);
            vm->p += 2;
            PUSH(v);
            break;
        case 0x8a:   /* LONG1 */
        case 0x8b: { /* LONG4 */
            uint64_t n;
            if (op == 0x8a) {
                NEED(1);
                n = *vm->p++;
            } else {
                NEED(4);
                n = rd32(vm->p);
                vm->p += 4;
            }
            if (n > 8)
                VM_ERR(RLX_ERR_UNSUPPORTED, "a %" PRIu64 "-byte integer does not fit 64 bits", n);
            NEED(n);
            uint64_t u = 0;
            for (uint64_t i = 0; i < n; i++)
                u |= (uint64_t)vm->p[i] << (8 * i);
            if (n > 0 && n < 8 && (vm->p[n - 1] & 0x80))
                u |= ~0ull << (8 * n); /* sign-extend */
            vm->p += n;
            NEW(v, V_INT);
            memcpy(&v->u.i, &u, sizeof u);
            PUSH(v);
            break;
        }
        case 'G': { /* BINFLOAT: big-endian */
            NEED(8);
            uint64_t u = 0;
            for (int i = 0; i < 8; i++)
                u = (u << 8) | vm->p[i];
            vm->p += 8;
            NEW(v, V_FLOAT);
            memcpy(&v->u.f, &u, sizeof u);
            PUSH(v);
            break;
        }
        case 0x88: /* NEWTRUE */
        case 0x89: /* NEWFALSE */
            NEW(v, V_BOOL);
            v->u.b = op == 0x88;
            PUSH(v);
            break;
        case 'N': /* NONE */
            NEW(v, V_NONE);
            PUSH(v);
            break;
        case 'c': { /* GLOBAL "module\nname\n" */
            const uint8_t *m = vm->p;
            const uint8_t *nl1 = memchr(m, '\n', (size_t)(vm->end - m));
            if (!nl1)
                VM_ERR(RLX_ERR_FORMAT, "GLOBAL runs past the end of the pickle");
            const uint8_t *nm = nl1 + 1;
            const uint8_t *nl2 = memchr(nm, '\n', (size_t)(vm->end - nm));
            if (!nl2)
                VM_ERR(RLX_ERR_FORMAT, "GLOBAL runs past the end of the pickle");
            vm->p = nl2 + 1;
            rlx_status s = resolve_global(vm, op_at, (const char *)m, (size_t)(nl1 - m),
                                          (const char *)nm, (size_t)(nl2 - nm), &v, err);
            if (s != RLX_OK)
                return s;
            PUSH(v);
            break;
        }
        case 0x93: { /* STACK_GLOBAL */
            POP(b);
            POP(a);
            if (a->kind != V_STR || b->kind != V_STR)
                VM_ERR(RLX_ERR_FORMAT, "STACK_GLOBAL's module and name are not strings");
            rlx_status s =
                resolve_global(vm, op_at, a->u.s.p, a->u.s.n, b->u.s.p, b->u.s.n, &v, err);
            if (s != RLX_OK)
                return s;
            PUSH(v);
            break;
        }
        case 'R':    /* REDUCE */
        case 0x81: { /* NEWOBJ */
            POP(b);
            POP(a);
            if (op == 0x81 && !(a->kind == V_GLOBAL && a->u.g.id == G_ORDERED_DICT))
                VM_ERR(RLX_ERR_FORMAT, "NEWOBJ on %s; torch.save only makes OrderedDicts so",
                       a->kind == V_GLOBAL ? global_name(a) : kind_name(a));
            rlx_status s = vm_call(vm, op_at, a, b, &v, err);
            if (s != RLX_OK)
                return s;
            PUSH(v);
            break;
        }
        case 'Q': { /* BINPERSID */
            POP(a);
            rlx_status s = persistent_load(vm, op_at, a, &v, err);
            if (s != RLX_OK)
                return s;
            PUSH(v);
            break;
        }
        case 'b': /* BUILD: set state; nothing of it matters for weights */
            POP(a);
            if (vm->n_stack <= vm_floor(vm))
                VM_ERR(RLX_ERR_FORMAT, "BUILD without an object");
            break;
        case 'q':    /* BINPUT */
        case 'r':    /* LONG_BINPUT */
        case 0x94: { /* MEMOIZE */
            size_t idx;
            if (op == 'q') {
                NEED(1);
                idx = *vm->p++;
            } else if (op == 'r') {
                NEED(4);
                idx = rd32(vm->p);
                vm->p += 4;
            } else {
                idx = vm->n_memo;
            }
            if (vm->n_stack <= vm_floor(vm))
                VM_ERR(RLX_ERR_FORMAT, "a memo store with an empty stack");
            /* Picklers number memo slots in order, so a slot is reused or the
             * next one: this bounds the memo by the opcodes read. */
            if (idx > vm->n_memo)
                VM_ERR(RLX_ERR_FORMAT, "memo slot %zu skips past slot %zu", idx, vm->n_memo);
            if (idx == vm->n_memo) {
                if (!grow((void **)&vm->memo, &vm->cap_memo, vm->n_memo + 1, sizeof *vm->memo))
                    return vm_oom(vm, err);
                vm->n_memo++;
            }
            vm->memo[idx] = vm->stack[vm->n_stack - 1];
            break;
        }
        case 'h':   /* BINGET */
        case 'j': { /* LONG_BINGET */
            size_t idx;
            if (op == 'h') {
                NEED(1);
                idx = *vm->p++;
            } else {
                NEED(4);
                idx = rd32(vm->p);
                vm->p += 4;
            }
            if (idx >= vm->n_memo)
                VM_ERR(RLX_ERR_FORMAT, "memo slot %zu is read before it is written", idx);
            PUSH(vm->memo[idx]);
            break;
        }
        case 's':   /* SETITEM */
        case 'u':   /* SETITEMS */
        case 'a':   /* APPEND */
        case 'e': { /* APPENDS */
            size_t from;
            if (op == 's' || op == 'a') {
                size_t k = op == 's' ? 2 : 1;
                if (vm->n_stack - vm_floor(vm) < k + 1)
                    VM_ERR(RLX_ERR_FORMAT, "opcode '%c' with too few items on the stack", op);
                from = vm->n_stack - k;
            } else {
                if (!vm->n_marks)
                    VM_ERR(RLX_ERR_FORMAT, "opcode '%c' without a MARK", op);
                from = vm->marks[--vm->n_marks];
                if (from <= vm_floor(vm) || from == 0)
                    VM_ERR(RLX_ERR_FORMAT, "opcode '%c' with nothing to add to", op);
            }
            pv *target = vm->stack[from - 1];
            bool is_dict = op == 's' || op == 'u';
            if (target->kind != (is_dict ? V_DICT : V_LIST))
                VM_ERR(RLX_ERR_FORMAT, "opcode '%c' adds to %s, not a %s", op, kind_name(target),
                       is_dict ? "dict" : "list");
            if (is_dict && (vm->n_stack - from) % 2)
                VM_ERR(RLX_ERR_FORMAT, "SETITEMS with a key and no value");
            for (size_t i = from; i < vm->n_stack; i++)
                if (!seq_push(target, vm->stack[i]))
                    return vm_oom(vm, err);
            vm->n_stack = from;
            break;
        }
        default:
            VM_ERR(RLX_ERR_FORMAT, "opcode 0x%02x is not one torch.save writes", op);
        }
    }
    VM_ERR(RLX_ERR_FORMAT, "the pickle ends without STOP (truncated?)");
#undef NEED
#undef PUSH
#undef POP
#undef NEW
#undef OBJ_LIMIT
}

/* ---- naming ------------------------------------------------------------ */

typedef struct name_buf {
    char s[RLX_TORCH_MAX_NAME + 1];
    size_t n;
} name_buf;

static rlx_status add_tensor(rlx_torch_zip *tz, const name_buf *nb, const pv_tensor *pt,
                             rlx_error **err)
{
    if (tz->n_tensors >= RLX_TORCH_MAX_TENSORS)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: more than %u tensors", tz->label,
                             RLX_TORCH_MAX_TENSORS);
    if (!grow((void **)&tz->tensors, &tz->cap_tensors, (size_t)tz->n_tensors + 1,
              sizeof *tz->tensors))
        return oom(err, tz->label);
    rlx_torch_tensor *t = &tz->tensors[tz->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = str_ndup(nb->s, nb->n);
    if (!t->name)
        return oom(err, tz->label);
    tz->n_tensors++;
    t->dtype = pt->dtype;
    t->n_dims = pt->n_dims;
    memcpy(t->shape, pt->shape, sizeof t->shape);
    memcpy(t->stride, pt->stride, sizeof t->stride);
    t->n_elements = pt->n_elements;
    t->n_bytes = pt->n_elements * dtype_size(pt->dtype); /* checked in rebuild_tensor */
    t->contiguous = pt->contiguous;
    t->requires_grad = pt->requires_grad;
    t->storage_key = pt->entry->key;
    t->storage_offset = pt->storage_offset;
    t->file_offset = pt->entry->data_off + pt->storage_offset * dtype_size(pt->dtype);
    return RLX_OK;
}

static bool holds_tensors(const pv *v)
{
    return v->kind == V_TENSOR || v->kind == V_DICT || v->kind == V_LIST || v->kind == V_TUPLE;
}

static rlx_status collect(pvm *vm, pv *v, name_buf *nb, unsigned depth, rlx_error **err);

static rlx_status collect_child(pvm *vm, pv *key, uint64_t index, pv *child, name_buf *nb,
                                unsigned depth, rlx_error **err)
{
    if (!holds_tensors(child))
        return RLX_OK;
    size_t saved = nb->n;
    char num[24];
    const char *part = num;
    size_t pl;
    if (!key) {
        pl = (size_t)snprintf(num, sizeof num, "%" PRIu64, index);
    } else if (key->kind == V_STR) {
        part = key->u.s.p;
        pl = key->u.s.n;
        if (memchr(part, '\0', pl))
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s: a dict key holds a NUL byte", vm->label);
    } else if (key->kind == V_INT) {
        pl = (size_t)snprintf(num, sizeof num, "%" PRId64, key->u.i);
    } else {
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: tensors sit under a dict key that is %s, not a name", vm->label,
                             kind_name(key));
    }
    size_t sep = nb->n > 0 ? 1 : 0;
    if (pl + sep > RLX_TORCH_MAX_NAME - nb->n)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: a tensor name is longer than %d bytes",
                             vm->label, RLX_TORCH_MAX_NAME);
    if (sep)
        nb->s[nb->n++] = '.';
    memcpy(nb->s + nb->n, part, pl);
    nb->n += pl;
    nb->s[nb->n] = '\0';
    rlx_status s = collect(vm, child, nb, depth + 1, err);
    nb->n = saved;
    nb->s[saved] = '\0';
    return s;
}

static rlx_status collect(pvm *vm, pv *v, name_buf *nb, unsigned depth, rlx_error **err)
{
    /* Shared sub-objects are visited once per reference: bound the work. */
    if (++vm->visits > 4ull * RLX_TORCH_MAX_TENSORS + vm->n_objs)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: the saved object refers to the same values too many times",
                             vm->label);
    if (depth > RLX_TORCH_MAX_DEPTH)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: the saved object nests deeper than %d levels (or refers to "
                             "itself)",
                             vm->label, RLX_TORCH_MAX_DEPTH);
    switch (v->kind) {
    case V_TENSOR:
        return add_tensor(vm->tz, nb, v->u.t, err);
    case V_DICT:
        for (size_t i = 0; i + 1 < v->u.seq.n; i += 2) {
            rlx_status s =
                collect_child(vm, v->u.seq.items[i], 0, v->u.seq.items[i + 1], nb, depth, err);
            if (s != RLX_OK)
                return s;
        }
        return RLX_OK;
    case V_LIST:
    case V_TUPLE:
        for (size_t i = 0; i < v->u.seq.n; i++) {
            rlx_status s = collect_child(vm, NULL, i, v->u.seq.items[i], nb, depth, err);
            if (s != RLX_OK)
                return s;
        }
        return RLX_OK;
    default:
        return RLX_OK;
    }
}

static rlx_status read_pickle(rlx_torch_zip *tz, const tz_entry *pkl, rlx_error **err)
{
    if (pkl->size > RLX_TORCH_MAX_PICKLE)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: data.pkl is %" PRIu64 " bytes, over the limit of %u", tz->label,
                             pkl->size, RLX_TORCH_MAX_PICKLE);
    const uint8_t *p = tz->base + pkl->data_off;
    if (crc32_of(p, pkl->size) != pkl->crc)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: data.pkl does not match its checksum (damaged file)", tz->label);
    pvm vm = {.tz = tz, .label = tz->label, .p = p, .start = p, .end = p + pkl->size};
    pv *top = NULL;
    rlx_status s = vm_run(&vm, &top, err);
    if (s == RLX_OK && top->kind != V_DICT)
        s = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                          "%s: the checkpoint holds %s, not a dict of tensors (a state dict)",
                          tz->label, kind_name(top));
    pv *root = top;
    const char *root_name = "";
    if (s == RLX_OK) {
        static const char *const wrappers[] = {"model", "state_dict"};
        for (size_t w = 0; w < 2 && root == top; w++)
            for (size_t i = 0; i + 1 < top->u.seq.n; i += 2)
                if (str_is(top->u.seq.items[i], wrappers[w]) &&
                    top->u.seq.items[i + 1]->kind == V_DICT) {
                    root = top->u.seq.items[i + 1];
                    root_name = wrappers[w];
                    break;
                }
        tz->root = str_ndup(root_name, strlen(root_name));
        if (!tz->root)
            s = oom(err, tz->label);
    }
    if (s == RLX_OK) {
        name_buf *nb = calloc(1, sizeof *nb);
        if (!nb)
            s = oom(err, tz->label);
        else
            s = collect(&vm, root, nb, 0, err);
        free(nb);
    }
    pvm_free(&vm);
    return s;
}

/* ---- open -------------------------------------------------------------- */

static rlx_status find_pickle(rlx_torch_zip *tz, const tz_entry **out, rlx_error **err)
{
    *out = NULL;
    const tz_entry *found = NULL;
    for (uint64_t i = 0; i < tz->n_entries; i++) {
        const tz_entry *e = &tz->entries[i];
        if (e->name_len < 8 || memcmp(e->name + e->name_len - 8, "data.pkl", 8) != 0)
            continue;
        size_t pl = e->name_len - 8;
        /* "data.pkl" or "<folder>/data.pkl", one level deep */
        if (pl > 0 && (e->name[pl - 1] != '/' || memchr(e->name, '/', pl - 1) || pl == 1))
            continue;
        if (found)
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: the archive holds more than one data.pkl", tz->label);
        found = e;
    }
    if (!found) {
        bool jit = false;
        for (uint64_t i = 0; i < tz->n_entries && !jit; i++)
            jit = tz->entries[i].name_len >= 13 &&
                  memcmp(tz->entries[i].name + tz->entries[i].name_len - 13, "constants.pkl", 13) ==
                      0;
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             jit ? "%s: a zip archive without data.pkl: not a torch.save checkpoint"
                                 : "%s: a zip archive without data.pkl: not a PyTorch checkpoint",
                             tz->label);
    }
    tz->prefix = str_ndup(found->name, found->name_len - 8);
    if (!tz->prefix)
        return oom(err, tz->label);
    if (memchr(tz->prefix, '\0', found->name_len - 8))
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: an entry name holds a NUL byte", tz->label);
    *out = found;
    return RLX_OK;
}

static rlx_status check_byteorder(rlx_torch_zip *tz, rlx_error **err)
{
    size_t pl = strlen(tz->prefix);
    char *name = malloc(pl + 10);
    if (!name)
        return oom(err, tz->label);
    memcpy(name, tz->prefix, pl);
    memcpy(name + pl, "byteorder", 9);
    const tz_entry *e = zip_find(tz, name, pl + 9);
    free(name);
    if (!e)
        return RLX_OK; /* written since torch 2.1; older files are little-endian */
    const char *s = (const char *)tz->base + e->data_off;
    if (e->size == 6 && memcmp(s, "little", 6) == 0)
        return RLX_OK;
    if (e->size == 3 && memcmp(s, "big", 3) == 0)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: a big-endian checkpoint; rlx reads little-endian ones",
                             tz->label);
    return rlx_error_set(err, RLX_ERR_FORMAT,
                         "%s: the byteorder entry says neither 'little' nor 'big'", tz->label);
}

static rlx_status build_index(rlx_torch_zip *tz, rlx_error **err)
{
    if (!hash_init(&tz->tensor_index, tz->n_tensors))
        return oom(err, tz->label);
    for (uint64_t i = 0; i < tz->n_tensors; i++) {
        const char *n = tz->tensors[i].name;
        size_t slot;
        if (hash_lookup(&tz->tensor_index, n, strlen(n), tensor_key, tz->tensors, &slot) !=
            SIZE_MAX) {
            char nm[100];
            printable(nm, sizeof nm, n, strlen(n));
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s: two tensors are named '%s'", tz->label,
                                 nm);
        }
        tz->tensor_index.slots[slot] = (size_t)i + 1;
    }
    return RLX_OK;
}

static rlx_status parse(rlx_torch_zip *tz, rlx_error **err)
{
    /* Before 1.6 (or with _use_new_zipfile_serialization=False) torch wrote
     * a bare pickle that starts with a magic number: PROTO 2, LONG1. */
    if (tz->size >= 3 && tz->base[0] == 0x80 && tz->base[2] == 0x8a)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: a PyTorch checkpoint in the legacy format (before torch 1.6); "
                             "re-save it with a current torch.save",
                             tz->label);
    if (tz->size < 4 || !rlx_torch_zip_sniff(tz->base, (size_t)tz->size))
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: not a PyTorch checkpoint (no zip header at the start)",
                             tz->label);
    const tz_entry *pkl = NULL;
    rlx_status s = zip_read(tz, err);
    if (s == RLX_OK)
        s = find_pickle(tz, &pkl, err);
    if (s == RLX_OK)
        s = check_byteorder(tz, err);
    if (s == RLX_OK)
        s = read_pickle(tz, pkl, err);
    if (s == RLX_OK)
        s = build_index(tz, err);
    return s;
}

static rlx_torch_zip *tz_new(const char *path)
{
    rlx_torch_zip *tz = calloc(1, sizeof *tz);
    if (!tz)
        return NULL;
    tz->path = str_ndup(path, strlen(path));
    if (!tz->path) {
        free(tz);
        return NULL;
    }
    tz->label = path_basename(tz->path);
    return tz;
}

rlx_status rlx_torch_zip_open_memory(const void *data, size_t size, const char *name,
                                     rlx_torch_zip **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out || (!data && size > 0))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_torch_zip_open_memory: data and out must not be NULL");
    rlx_torch_zip *tz = tz_new(name ? name : "<memory>");
    if (!tz)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    tz->base = data;
    tz->size = data ? size : 0;
    rlx_status s = parse(tz, err);
    if (s != RLX_OK) {
        rlx_torch_zip_close(tz);
        return s;
    }
    *out = tz;
    return RLX_OK;
}

rlx_status rlx_torch_zip_open(const char *path, rlx_torch_zip **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_torch_zip_open: path and out must not be NULL");
    rlx_torch_zip *tz = tz_new(path);
    if (!tz)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    rlx_status s = RLX_OK;
    struct stat sb;
    if (fd < 0) {
        s = rlx_error_set(err, RLX_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    } else if (fstat(fd, &sb) != 0) {
        s = rlx_error_set(err, RLX_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        s = rlx_error_set(err, RLX_ERR_IO, "%s is not a regular file", path);
    } else if ((uint64_t)sb.st_size > SIZE_MAX) {
        s = rlx_error_set(err, RLX_ERR_UNSUPPORTED, "%s is too large to map", path);
    } else if (sb.st_size < 22) {
        s = rlx_error_set(err, RLX_ERR_FORMAT,
                          "%s: %lld bytes, too short to be a PyTorch checkpoint (truncated?)",
                          tz->label, (long long)sb.st_size);
    } else {
        void *p = rlx_map_file(fd, (size_t)sb.st_size);
        if (p == MAP_FAILED) {
            s = rlx_error_set(err, RLX_ERR_IO, "cannot map %s: %s", path, strerror(errno));
        } else {
            tz->map = p;
            tz->map_size = (size_t)sb.st_size;
            tz->base = p;
            tz->size = (uint64_t)sb.st_size;
        }
    }
    if (fd >= 0)
        close(fd);
    if (s == RLX_OK)
        s = parse(tz, err);
    if (s != RLX_OK) {
        rlx_torch_zip_close(tz);
        return s;
    }
    *out = tz;
    return RLX_OK;
}

void rlx_torch_zip_close(rlx_torch_zip *tz)
{
    if (!tz)
        return;
    if (tz->map)
        munmap(tz->map, tz->map_size);
    for (uint64_t i = 0; i < tz->n_entries; i++)
        free(tz->entries[i].key);
    free(tz->entries);
    free(tz->entry_index.slots);
    for (uint64_t i = 0; i < tz->n_tensors; i++)
        free(tz->tensors[i].name);
    free(tz->tensors);
    free(tz->tensor_index.slots);
    free(tz->prefix);
    free(tz->root);
    free(tz->path);
    free(tz);
}

bool rlx_torch_zip_sniff(const void *head, size_t n)
{
    return head && n >= 4 && memcmp(head, "PK\x03\x04", 4) == 0;
}

uint64_t rlx_torch_zip_n_tensors(const rlx_torch_zip *tz)
{
    return tz ? tz->n_tensors : 0;
}

const rlx_torch_tensor *rlx_torch_zip_tensor_at(const rlx_torch_zip *tz, uint64_t i)
{
    return tz && i < tz->n_tensors ? &tz->tensors[i] : NULL;
}

const rlx_torch_tensor *rlx_torch_zip_find(const rlx_torch_zip *tz, const char *name)
{
    if (!tz || !name)
        return NULL;
    size_t i = hash_lookup(&tz->tensor_index, name, strlen(name), tensor_key, tz->tensors, NULL);
    return i == SIZE_MAX ? NULL : &tz->tensors[i];
}

const void *rlx_torch_zip_data(const rlx_torch_zip *tz, const rlx_torch_tensor *t)
{
    if (!tz || !t || !t->contiguous || t->file_offset > tz->size)
        return NULL;
    return tz->base + t->file_offset;
}

const char *rlx_torch_zip_prefix(const rlx_torch_zip *tz)
{
    return tz && tz->prefix ? tz->prefix : "";
}

const char *rlx_torch_zip_root(const rlx_torch_zip *tz)
{
    return tz && tz->root ? tz->root : "";
}
