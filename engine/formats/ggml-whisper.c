/* whisper.cpp ggml .bin reader: see ggml-whisper.h for the layout. */
#include "engine/formats/ggml-whisper.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/formats/mapfile.h"

typedef struct word_ref {
    uint64_t off;
    uint32_t len;
} word_ref;

struct rlx_ggml_whisper {
    char *path;
    const uint8_t *data;
    size_t size;
    void *map; /* our mapping; NULL for a memory image */
    rlx_ggml_whisper_hparams hp;
    float *filters;
    int32_t n_mel, n_fft;
    word_ref *words;
    int32_t n_words;
    rlx_ggml_whisper_tensor *tensors;
    uint64_t n_tensors, cap_tensors;
    uint32_t *slots; /* name hash -> index + 1; 0 = empty */
    uint64_t slot_mask;
};

/* A cursor over the image: every read checks what is left first. */
typedef struct cursor {
    const uint8_t *p;
    size_t size, pos;
    const char *label;
} cursor;

static bool rd_i32(cursor *c, int32_t *v)
{
    if (c->size - c->pos < 4)
        return false;
    uint32_t u = (uint32_t)c->p[c->pos] | (uint32_t)c->p[c->pos + 1] << 8 |
                 (uint32_t)c->p[c->pos + 2] << 16 | (uint32_t)c->p[c->pos + 3] << 24;
    memcpy(v, &u, 4);
    c->pos += 4;
    return true;
}

static rlx_status truncated(rlx_error **err, const cursor *c, const char *what)
{
    return rlx_error_set(err, RLX_ERR_FORMAT,
                         "%s: the file ends at byte %zu, inside %s (truncated or not a whisper.cpp "
                         "ggml file)",
                         c->label, c->size, what);
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static const char *hparam_names[11] = {
    "n_vocab",      "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx",
    "n_text_state", "n_text_head", "n_text_layer",  "n_mels",       "ftype"};

static rlx_status read_header(rlx_ggml_whisper *w, cursor *c, rlx_error **err)
{
    int32_t magic;
    if (!rd_i32(c, &magic))
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: %zu bytes is too short for a whisper.cpp ggml file", c->label,
                             c->size);
    if ((uint32_t)magic != RLX_GGML_WHISPER_MAGIC) {
        if (c->size >= 4 && !memcmp(c->p, "GGUF", 4))
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s is a GGUF file, not a whisper.cpp ggml .bin model", c->label);
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s is not a whisper.cpp ggml file (magic 0x%08x, expected "
                             "0x%08x)",
                             c->label, (uint32_t)magic, RLX_GGML_WHISPER_MAGIC);
    }
    int32_t v[11];
    for (int i = 0; i < 11; i++)
        if (!rd_i32(c, &v[i]))
            return truncated(err, c, "the hyper-parameters");
    for (int i = 0; i < 10; i++)
        if (v[i] <= 0 || v[i] > (1 << 24))
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: hyper-parameter %s is %d; a whisper model has a positive "
                                 "value there (is this a ggml file of another model?)",
                                 c->label, hparam_names[i], v[i]);
    if (v[10] < 0)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: ftype is %d, negative", c->label, v[10]);
    w->hp = (rlx_ggml_whisper_hparams){
        .n_vocab = v[0],
        .n_audio_ctx = v[1],
        .n_audio_state = v[2],
        .n_audio_head = v[3],
        .n_audio_layer = v[4],
        .n_text_ctx = v[5],
        .n_text_state = v[6],
        .n_text_head = v[7],
        .n_text_layer = v[8],
        .n_mels = v[9],
        .ftype = v[10] % RLX_GGML_QNT_VERSION_FACTOR,
        .qnt_version = v[10] / RLX_GGML_QNT_VERSION_FACTOR,
    };
    return RLX_OK;
}

static rlx_status read_filters(rlx_ggml_whisper *w, cursor *c, rlx_error **err)
{
    int32_t n_mel, n_fft;
    if (!rd_i32(c, &n_mel) || !rd_i32(c, &n_fft))
        return truncated(err, c, "the mel filterbank's size");
    if (n_mel < 0 || n_fft < 0)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: the mel filterbank is %d x %d, negative",
                             c->label, n_mel, n_fft);
    uint64_t n = (uint64_t)n_mel * (uint64_t)n_fft;
    if (n > (c->size - c->pos) / 4)
        return truncated(err, c, "the mel filterbank");
    w->n_mel = n_mel;
    w->n_fft = n_fft;
    if (n) {
        w->filters = malloc((size_t)n * sizeof(float));
        if (!w->filters)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory reading %s", c->label);
        for (uint64_t i = 0; i < n; i++) {
            int32_t bits = 0;
            rd_i32(c, &bits);
            memcpy(&w->filters[i], &bits, 4);
        }
    }
    return RLX_OK;
}

static rlx_status read_vocab(rlx_ggml_whisper *w, cursor *c, rlx_error **err)
{
    int32_t n;
    if (!rd_i32(c, &n))
        return truncated(err, c, "the vocabulary's size");
    /* each word takes at least its 4-byte length */
    if (n < 0 || (uint64_t)n > (c->size - c->pos) / 4)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: the vocabulary claims %d words, more than the %zu bytes left "
                             "can hold",
                             c->label, n, c->size - c->pos);
    w->words = calloc(n ? (size_t)n : 1, sizeof *w->words);
    if (!w->words)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory reading %s", c->label);
    for (int32_t i = 0; i < n; i++) {
        int32_t len;
        if (!rd_i32(c, &len))
            return truncated(err, c, "the vocabulary");
        if (len < 0 || len > RLX_GGML_WHISPER_MAX_WORD)
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s: vocabulary word %d has length %d",
                                 c->label, i, len);
        if ((size_t)len > c->size - c->pos)
            return truncated(err, c, "the vocabulary");
        w->words[i] = (word_ref){.off = c->pos, .len = (uint32_t)len};
        c->pos += (size_t)len;
    }
    w->n_words = n;
    return RLX_OK;
}

static rlx_status add_tensor(rlx_ggml_whisper *w, rlx_ggml_whisper_tensor *t, rlx_error **err)
{
    if (w->n_tensors == w->cap_tensors) {
        uint64_t cap = w->cap_tensors ? w->cap_tensors * 2 : 64;
        rlx_ggml_whisper_tensor *n = realloc(w->tensors, (size_t)cap * sizeof *n);
        if (!n)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory reading tensors");
        w->tensors = n;
        w->cap_tensors = cap;
    }
    /* the name table stays at most half full */
    if ((w->n_tensors + 1) * 2 > w->slot_mask + 1 || !w->slots) {
        uint64_t ns = w->slots ? (w->slot_mask + 1) * 2 : 128;
        uint32_t *s = calloc((size_t)ns, sizeof *s);
        if (!s)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory reading tensors");
        for (uint64_t i = 0; i < w->n_tensors; i++) {
            uint64_t h = hash_name(w->tensors[i].name) & (ns - 1);
            while (s[h])
                h = (h + 1) & (ns - 1);
            s[h] = (uint32_t)(i + 1);
        }
        free(w->slots);
        w->slots = s;
        w->slot_mask = ns - 1;
    }
    uint64_t h = hash_name(t->name) & w->slot_mask;
    while (w->slots[h]) {
        if (!strcmp(w->tensors[w->slots[h] - 1].name, t->name))
            return rlx_error_set(err, RLX_ERR_FORMAT, "%s: tensor '%s' appears twice", w->path,
                                 t->name);
        h = (h + 1) & w->slot_mask;
    }
    w->slots[h] = (uint32_t)(w->n_tensors + 1);
    w->tensors[w->n_tensors++] = *t;
    return RLX_OK;
}

static rlx_status read_tensors(rlx_ggml_whisper *w, cursor *c, rlx_error **err)
{
    while (c->pos < c->size) {
        size_t start = c->pos;
        int32_t n_dims, name_len, ttype;
        if (!rd_i32(c, &n_dims) || !rd_i32(c, &name_len) || !rd_i32(c, &ttype))
            return truncated(err, c, "a tensor header");
        if (n_dims < 1 || n_dims > RLX_GGML_WHISPER_MAX_DIMS)
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: the tensor at byte %zu has %d dimensions (1 to %d allowed)",
                                 c->label, start, n_dims, RLX_GGML_WHISPER_MAX_DIMS);
        if (name_len < 1 || name_len > RLX_GGML_WHISPER_MAX_NAME)
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: the tensor at byte %zu has a name of %d bytes", c->label,
                                 start, name_len);
        rlx_ggml_whisper_tensor t = {.ggml_type = ttype, .n_dims = (uint32_t)n_dims};
        uint64_t n_el = 1;
        for (int d = 0; d < RLX_GGML_WHISPER_MAX_DIMS; d++)
            t.ne[d] = 1;
        for (int d = 0; d < n_dims; d++) {
            int32_t ne;
            if (!rd_i32(c, &ne))
                return truncated(err, c, "a tensor's shape");
            if (ne <= 0)
                return rlx_error_set(err, RLX_ERR_FORMAT,
                                     "%s: the tensor at byte %zu has dimension %d of size %d",
                                     c->label, start, d, ne);
            t.ne[d] = (uint64_t)ne;
            n_el *= (uint64_t)ne; /* at most 4 factors below 2^31: no overflow */
        }
        if ((size_t)name_len > c->size - c->pos)
            return truncated(err, c, "a tensor's name");
        const char *nm = (const char *)c->p + c->pos;
        if (memchr(nm, 0, (size_t)name_len))
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: the tensor name at byte %zu holds a NUL byte", c->label,
                                 c->pos);
        c->pos += (size_t)name_len;
        t.dtype = ttype < 0 ? RLX_DTYPE_INVALID : rlx_dtype_from_ggml((uint32_t)ttype);
        if (t.dtype == RLX_DTYPE_INVALID)
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "%s: tensor '%.*s' has ggml type %d, which rlx does not read",
                                 c->label, name_len, nm, ttype);
        const rlx_dtype_info *ti = rlx_dtype_get(t.dtype);
        if (t.ne[0] % ti->block_size)
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: tensor '%.*s' is %s with rows of %llu elements, not a "
                                 "multiple of its block of %u",
                                 c->label, name_len, nm, ti->name, (unsigned long long)t.ne[0],
                                 ti->block_size);
        uint64_t bytes;
        if (rlx_dtype_row_bytes(t.dtype, n_el, &bytes) != RLX_OK || bytes > c->size - c->pos) {
            char what[128 + RLX_GGML_WHISPER_MAX_NAME];
            snprintf(what, sizeof what, "the data of tensor '%.*s'", name_len, nm);
            return truncated(err, c, what);
        }
        /* ggml's quantization version 2 (May 2023) gave Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 the block
         * layouts rlx reads; older files pack them differently */
        bool legacy = t.dtype == RLX_DTYPE_Q4_0 || t.dtype == RLX_DTYPE_Q4_1 ||
                      t.dtype == RLX_DTYPE_Q5_0 || t.dtype == RLX_DTYPE_Q5_1 ||
                      t.dtype == RLX_DTYPE_Q8_0;
        if (legacy && w->hp.qnt_version < 2)
            return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                                 "%s: tensor '%.*s' is %s in ggml's quantization version %d, an "
                                 "older block layout than rlx reads (version 2); quantize the "
                                 "model again with a current whisper.cpp",
                                 c->label, name_len, nm, ti->name, w->hp.qnt_version);
        t.n_elements = n_el;
        t.n_bytes = bytes;
        t.offset = c->pos;
        c->pos += (size_t)bytes;
        t.name = strndup(nm, (size_t)name_len);
        if (!t.name)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory reading tensors");
        rlx_status s = add_tensor(w, &t, err);
        if (s != RLX_OK) {
            free(t.name);
            return s;
        }
    }
    return RLX_OK;
}

static rlx_status parse(rlx_ggml_whisper *w, rlx_error **err)
{
    cursor c = {.p = w->data, .size = w->size, .pos = 0, .label = w->path};
    rlx_status s;
    if ((s = read_header(w, &c, err)) != RLX_OK || (s = read_filters(w, &c, err)) != RLX_OK ||
        (s = read_vocab(w, &c, err)) != RLX_OK || (s = read_tensors(w, &c, err)) != RLX_OK)
        return s;
    return RLX_OK;
}

rlx_status rlx_ggml_whisper_open_memory(const void *data, size_t size, const char *name,
                                        rlx_ggml_whisper **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out || (!data && size))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_ggml_whisper_open_memory: bad argument");
    rlx_ggml_whisper *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(name ? name : "(memory)"))) {
        free(w);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    w->data = data;
    w->size = size;
    rlx_status s = parse(w, err);
    if (s != RLX_OK) {
        rlx_ggml_whisper_close(w);
        return s;
    }
    *out = w;
    return RLX_OK;
}

rlx_status rlx_ggml_whisper_open(const char *path, rlx_ggml_whisper **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_ggml_whisper_open: NULL argument");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rlx_error_set(err, RLX_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_IO, "%s is not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED, "%s is too large to map", path);
    }
    size_t size = (size_t)sb.st_size;
    if (size < 4) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: %zu bytes is too short for a whisper.cpp ggml file", path, size);
    }
    void *p = rlx_map_file(fd, size);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return rlx_error_set(err, RLX_ERR_IO, "cannot map %s: %s", path, strerror(e));
    rlx_ggml_whisper *w = NULL;
    rlx_status s = rlx_ggml_whisper_open_memory(p, size, path, &w, err);
    if (s != RLX_OK) {
        munmap(p, size);
        return s;
    }
    w->map = p;
    *out = w;
    return RLX_OK;
}

void rlx_ggml_whisper_close(rlx_ggml_whisper *w)
{
    if (!w)
        return;
    for (uint64_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->tensors);
    free(w->slots);
    free(w->words);
    free(w->filters);
    if (w->map)
        munmap(w->map, w->size);
    free(w->path);
    free(w);
}

const char *rlx_ggml_whisper_path(const rlx_ggml_whisper *w)
{
    return w ? w->path : NULL;
}

const rlx_ggml_whisper_hparams *rlx_ggml_whisper_get_hparams(const rlx_ggml_whisper *w)
{
    return w ? &w->hp : NULL;
}

const float *rlx_ggml_whisper_mel_filters(const rlx_ggml_whisper *w, int32_t *n_mel, int32_t *n_fft)
{
    if (n_mel)
        *n_mel = w ? w->n_mel : 0;
    if (n_fft)
        *n_fft = w ? w->n_fft : 0;
    return w ? w->filters : NULL;
}

int32_t rlx_ggml_whisper_n_words(const rlx_ggml_whisper *w)
{
    return w ? w->n_words : 0;
}

const char *rlx_ggml_whisper_word(const rlx_ggml_whisper *w, int32_t i, size_t *len)
{
    if (!w || i < 0 || i >= w->n_words) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = w->words[i].len;
    return (const char *)w->data + w->words[i].off;
}

uint64_t rlx_ggml_whisper_n_tensors(const rlx_ggml_whisper *w)
{
    return w ? w->n_tensors : 0;
}

const rlx_ggml_whisper_tensor *rlx_ggml_whisper_tensor_at(const rlx_ggml_whisper *w, uint64_t i)
{
    return w && i < w->n_tensors ? &w->tensors[i] : NULL;
}

const rlx_ggml_whisper_tensor *rlx_ggml_whisper_find(const rlx_ggml_whisper *w, const char *name)
{
    if (!w || !name || !w->slots)
        return NULL;
    uint64_t h = hash_name(name) & w->slot_mask;
    while (w->slots[h]) {
        const rlx_ggml_whisper_tensor *t = &w->tensors[w->slots[h] - 1];
        if (!strcmp(t->name, name))
            return t;
        h = (h + 1) & w->slot_mask;
    }
    return NULL;
}

const void *rlx_ggml_whisper_data(const rlx_ggml_whisper *w, const rlx_ggml_whisper_tensor *t)
{
    return w && t ? w->data + t->offset : NULL;
}

uint64_t rlx_ggml_whisper_size(const rlx_ggml_whisper *w)
{
    return w ? w->size : 0;
}
