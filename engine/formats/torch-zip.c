/* The PyTorch checkpoint reader (torch-zip.h): the zip directory of a torch.save
 * file, the tensors named from the unpickled state dict, and the handle. */
#include "engine/formats/torch-zip-internal.h"

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

const tz_entry *tz_zip_find(const rlx_torch_zip *tz, const char *name, size_t n)
{
    size_t i = hash_lookup(&tz->entry_index, name, n, entry_key, tz->entries, NULL);
    return i == SIZE_MAX ? NULL : &tz->entries[i];
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
    if (!tz_grow((void **)&tz->tensors, &tz->cap_tensors, (size_t)tz->n_tensors + 1,
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
    t->n_bytes = pt->n_elements * tz_dtype_size(pt->dtype); /* checked in rebuild_tensor */
    t->contiguous = pt->contiguous;
    t->requires_grad = pt->requires_grad;
    t->storage_key = pt->entry->key;
    t->storage_offset = pt->storage_offset;
    t->file_offset = pt->entry->data_off + pt->storage_offset * tz_dtype_size(pt->dtype);
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
                             tz_kind_name(key));
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
    rlx_status s = tz_pickle_run(&vm, &top, err);
    if (s == RLX_OK && top->kind != V_DICT)
        s = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                          "%s: the checkpoint holds %s, not a dict of tensors (a state dict)",
                          tz->label, tz_kind_name(top));
    pv *root = top;
    const char *root_name = "";
    if (s == RLX_OK) {
        static const char *const wrappers[] = {"model", "state_dict"};
        for (size_t w = 0; w < 2 && root == top; w++)
            for (size_t i = 0; i + 1 < top->u.seq.n; i += 2)
                if (tz_str_is(top->u.seq.items[i], wrappers[w]) &&
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
    tz_pvm_free(&vm);
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
    const tz_entry *e = tz_zip_find(tz, name, pl + 9);
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
