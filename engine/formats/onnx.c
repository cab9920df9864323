/* See onnx.h. The protobuf is checked by a wire-format walk of our own
 * before protobuf-c decodes it (protobuf-c recurses once per nesting level
 * and allocates a whole struct per submessage, so a deeply nested or
 * submessage-dense file would otherwise exhaust the stack or the heap),
 * then the decoded model is turned into the plain view of onnx.h. */
#include "engine/formats/onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/formats/mapfile.h"
#include "engine/formats/onnx.pb-c.h"

/* Decoded structs may take this much beyond the file's own size: a
 * submessage of 2 bytes becomes a struct of ~200. */
#define DECODE_SLACK ((uint64_t)64 << 20)

/* ---- names -> index ------------------------------------------------------ */

typedef struct {
    const char **keys;
    int32_t *vals;
    uint32_t cap; /* power of two */
} name_map;

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static bool map_init(name_map *m, size_t n)
{
    uint32_t cap = 16;
    while (cap < 2 * n + 16 && cap < (1u << 30))
        cap <<= 1;
    m->cap = cap;
    m->keys = calloc(cap, sizeof *m->keys);
    m->vals = calloc(cap, sizeof *m->vals);
    return m->keys && m->vals;
}

static void map_free(name_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static int32_t map_get(const name_map *m, const char *k)
{
    if (!m->cap)
        return -1;
    for (uint32_t i = hash_str(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i])
            return -1;
        if (strcmp(m->keys[i], k) == 0)
            return m->vals[i];
    }
}

/* false when k is already there (the old value is kept) */
static bool map_put(name_map *m, const char *k, int32_t v)
{
    for (uint32_t i = hash_str(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) {
            m->keys[i] = k;
            m->vals[i] = v;
            return true;
        }
        if (strcmp(m->keys[i], k) == 0)
            return false;
    }
}

/* ---- the model ------------------------------------------------------------ */

typedef struct {
    void *p;
    size_t size;
    char *location;
} ext_file;

struct rlx_onnx_model {
    Onnx__ModelProto *pb;
    char *what;
    char *dir; /* realpath of the folder, or NULL */
    rlx_onnx_opset *opsets;
    int32_t n_opsets;
    rlx_onnx_node *nodes;
    int32_t n_nodes;
    rlx_onnx_tensor *inits;
    int32_t n_inits;
    rlx_onnx_value *inputs, *outputs, *infos;
    int32_t n_inputs, n_outputs, n_infos;
    name_map init_map, value_map;
    /* every allocation the view makes, freed together */
    void **blocks;
    size_t n_blocks, cap_blocks;
    ext_file *ext;
    size_t n_ext, cap_ext;
};

static void *own(rlx_onnx_model *m, size_t size)
{
    if (m->n_blocks == m->cap_blocks) {
        size_t nc = m->cap_blocks ? 2 * m->cap_blocks : 64;
        void **nb = realloc(m->blocks, nc * sizeof *nb);
        if (!nb)
            return NULL;
        m->blocks = nb;
        m->cap_blocks = nc;
    }
    void *p = calloc(1, size ? size : 1);
    if (p)
        m->blocks[m->n_blocks++] = p;
    return p;
}

/* calloc(n, size) owned by the model; NULL on overflow or failure */
static void *own_array(rlx_onnx_model *m, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    return own(m, n * size);
}

#define FAIL(code, ...) rlx_error_set(err, code, __VA_ARGS__)
#define NOMEM()         FAIL(RLX_ERR_NO_MEMORY, "%s: out of memory reading the model", m->what)

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

/* ---- wire-format walk ------------------------------------------------------ */

typedef struct {
    uint64_t decoded; /* bytes of structs protobuf-c will allocate */
    const char *what;
} walk_state;

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return false;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

static rlx_status walk(const uint8_t *p, size_t n, const ProtobufCMessageDescriptor *d, int depth,
                       walk_state *ws, rlx_error **err)
{
    if (depth > RLX_ONNX_MAX_DEPTH)
        return FAIL(RLX_ERR_FORMAT,
                    "%s: messages are nested more than %d deep (a hostile or broken file)",
                    ws->what, RLX_ONNX_MAX_DEPTH);
    ws->decoded += d->sizeof_message;
    const uint8_t *end = p + n;
    while (p < end) {
        uint64_t key, len;
        if (!read_varint(&p, end, &key))
            return FAIL(RLX_ERR_FORMAT, "%s: truncated protobuf field key", ws->what);
        uint32_t wt = (uint32_t)(key & 7);
        uint64_t num = key >> 3;
        if (num == 0 || num > 0x1fffffff)
            return FAIL(RLX_ERR_FORMAT, "%s: protobuf field number %llu is invalid", ws->what,
                        (unsigned long long)num);
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field(d, (unsigned)num);
        switch (wt) {
        case 0:
            if (!read_varint(&p, end, &len))
                return FAIL(RLX_ERR_FORMAT, "%s: truncated protobuf varint", ws->what);
            if (f && f->label == PROTOBUF_C_LABEL_REPEATED)
                ws->decoded += 8;
            break;
        case 1:
            if ((size_t)(end - p) < 8)
                return FAIL(RLX_ERR_FORMAT, "%s: truncated protobuf fixed64", ws->what);
            p += 8;
            break;
        case 5:
            if ((size_t)(end - p) < 4)
                return FAIL(RLX_ERR_FORMAT, "%s: truncated protobuf fixed32", ws->what);
            p += 4;
            break;
        case 2:
            if (!read_varint(&p, end, &len) || len > (uint64_t)(end - p))
                return FAIL(RLX_ERR_FORMAT,
                            "%s: a protobuf field claims more bytes than the file has", ws->what);
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                ws->decoded += sizeof(void *);
                rlx_status st = walk(p, (size_t)len, f->descriptor, depth + 1, ws, err);
                if (st != RLX_OK)
                    return st;
            } else if (f && f->label == PROTOBUF_C_LABEL_REPEATED) {
                /* a packed run of varints decodes to up to 8 bytes each */
                ws->decoded += 8 * len + 16;
            } else {
                ws->decoded += 16;
            }
            p += len;
            break;
        default:
            return FAIL(RLX_ERR_FORMAT, "%s: protobuf wire type %u is not used by ONNX", ws->what,
                        wt);
        }
    }
    return RLX_OK;
}

static rlx_status check_wire(const void *data, size_t size, const ProtobufCMessageDescriptor *d,
                             const char *what, rlx_error **err)
{
    walk_state ws = {.decoded = 0, .what = what};
    rlx_status st = walk(data, size, d, 0, &ws, err);
    if (st != RLX_OK)
        return st;
    if (ws.decoded > 4 * (uint64_t)size + DECODE_SLACK)
        return FAIL(RLX_ERR_FORMAT,
                    "%s: %zu bytes of protobuf would decode to %llu bytes of records (a hostile "
                    "file)",
                    what, size, (unsigned long long)ws.decoded);
    return RLX_OK;
}

/* ---- dtypes ---------------------------------------------------------------- */

rlx_dtype rlx_onnx_dtype(int32_t t)
{
    switch (t) {
    case RLX_ONNX_FLOAT:
        return RLX_DTYPE_F32;
    case RLX_ONNX_UINT8:
        return RLX_DTYPE_U8;
    case RLX_ONNX_INT8:
        return RLX_DTYPE_I8;
    case RLX_ONNX_INT16:
        return RLX_DTYPE_I16;
    case RLX_ONNX_INT32:
        return RLX_DTYPE_I32;
    case RLX_ONNX_INT64:
        return RLX_DTYPE_I64;
    case RLX_ONNX_BOOL:
        return RLX_DTYPE_BOOL;
    case RLX_ONNX_FLOAT16:
        return RLX_DTYPE_F16;
    case RLX_ONNX_DOUBLE:
        return RLX_DTYPE_F64;
    case RLX_ONNX_BFLOAT16:
        return RLX_DTYPE_BF16;
    default:
        return RLX_DTYPE_INVALID;
    }
}

const char *rlx_onnx_elem_type_name(int32_t t)
{
    static const char *const names[] = {"undefined",  "float",   "uint8",  "int8",   "uint16",
                                        "int16",      "int32",   "int64",  "string", "bool",
                                        "float16",    "double",  "uint32", "uint64", "complex64",
                                        "complex128", "bfloat16"};
    if (t >= 0 && t < (int32_t)(sizeof names / sizeof names[0]))
        return names[t];
    return "unknown";
}

/* bytes per element of the element types whose data we expose */
static size_t elem_bytes(int32_t t)
{
    switch (t) {
    case RLX_ONNX_UINT16:
        return 2;
    case RLX_ONNX_UINT32:
        return 4;
    case RLX_ONNX_UINT64:
        return 8;
    default: {
        rlx_dtype dt = rlx_onnx_dtype(t);
        return dt == RLX_DTYPE_INVALID ? 0 : rlx_dtype_get(dt)->type_size;
    }
    }
}

/* ---- tensors --------------------------------------------------------------- */

/* external data: the file at `location` inside m->dir, mapped once */
static rlx_status ext_map(rlx_onnx_model *m, const char *tname, const char *location,
                          const uint8_t **base, size_t *size, rlx_error **err)
{
    *base = NULL;
    *size = 0;
    if (!m->dir)
        return FAIL(RLX_ERR_FORMAT,
                    "%s: tensor '%s' keeps its data in the external file '%s', but the model was "
                    "not read from a folder",
                    m->what, tname, location);
    for (size_t i = 0; i < m->n_ext; i++)
        if (strcmp(m->ext[i].location, location) == 0) {
            *base = m->ext[i].p;
            *size = m->ext[i].size;
            return RLX_OK;
        }
    /* only plain relative paths below the model's folder: no absolute path,
     * no "..", and after resolving symlinks still inside the folder */
    bool bad = location[0] == '\0' || location[0] == '/' || strlen(location) > 1024;
    for (const char *s = location; !bad && *s; s++)
        if (s[0] == '.' && s[1] == '.' && (s == location || s[-1] == '/') &&
            (s[2] == '/' || s[2] == '\0'))
            bad = true;
    if (bad)
        return FAIL(RLX_ERR_FORMAT,
                    "%s: tensor '%s' points to external data at '%s', which is not a file inside "
                    "the model's folder",
                    m->what, tname, location);
    size_t nl = strlen(m->dir) + strlen(location) + 2;
    char *joined = malloc(nl);
    if (!joined)
        return NOMEM();
    snprintf(joined, nl, "%s/%s", m->dir, location);
    char *real = realpath(joined, NULL);
    free(joined);
    if (!real)
        return FAIL(RLX_ERR_IO, "%s: tensor '%s': cannot open its external data file '%s': %s",
                    m->what, tname, location, strerror(errno));
    size_t dl = strlen(m->dir);
    if (strncmp(real, m->dir, dl) != 0 || (real[dl] != '/' && strcmp(m->dir, "/") != 0)) {
        free(real);
        return FAIL(RLX_ERR_FORMAT,
                    "%s: tensor '%s' points to external data at '%s', which leads outside the "
                    "model's folder",
                    m->what, tname, location);
    }
    int fd = open(real, O_RDONLY | O_CLOEXEC);
    free(real);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return FAIL(RLX_ERR_IO, "%s: tensor '%s': cannot read its external data file '%s'%s%s",
                    m->what, tname, location, fd >= 0 ? "" : ": ", fd >= 0 ? "" : strerror(e));
    }
    void *p = NULL;
    if (sb.st_size > 0) {
        p = rlx_map_file(fd, (size_t)sb.st_size);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return FAIL(RLX_ERR_IO, "%s: cannot map the external data file '%s': %s", m->what,
                        location, strerror(e));
        }
    }
    close(fd);
    if (m->n_ext == m->cap_ext) {
        size_t nc = m->cap_ext ? 2 * m->cap_ext : 4;
        ext_file *ne = realloc(m->ext, nc * sizeof *ne);
        if (!ne) {
            if (p)
                munmap(p, (size_t)sb.st_size);
            return NOMEM();
        }
        m->ext = ne;
        m->cap_ext = nc;
    }
    char *loc = strdup(location);
    if (!loc) {
        if (p)
            munmap(p, (size_t)sb.st_size);
        return NOMEM();
    }
    m->ext[m->n_ext++] = (ext_file){.p = p, .size = (size_t)sb.st_size, .location = loc};
    *base = p;
    *size = (size_t)sb.st_size;
    return RLX_OK;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

/* Fill the view `t` of the TensorProto `tp`. `m` may be a bare holder for
 * standalone tensor files (no folder). */
static rlx_status convert_tensor(rlx_onnx_model *m, const Onnx__TensorProto *tp, rlx_onnx_tensor *t,
                                 rlx_error **err)
{
    const char *name = str_or_empty(tp->name);
    memset(t, 0, sizeof *t);
    t->name = name;
    t->elem_type = tp->has_data_type ? tp->data_type : 0;
    t->dtype = rlx_onnx_dtype(t->elem_type);
    if (tp->n_dims > RLX_ONNX_MAX_RANK)
        return FAIL(RLX_ERR_FORMAT, "%s: tensor '%s' has %zu dims (at most %d are supported)",
                    m->what, name, tp->n_dims, RLX_ONNX_MAX_RANK);
    if (tp->segment)
        return FAIL(RLX_ERR_UNSUPPORTED, "%s: tensor '%s' is split into segments", m->what, name);
    t->rank = (int32_t)tp->n_dims;
    t->dims = tp->dims;
    uint64_t numel = 1;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0)
            return FAIL(RLX_ERR_FORMAT, "%s: tensor '%s' has a negative dim (%lld)", m->what, name,
                        (long long)tp->dims[i]);
        if (tp->dims[i] && numel > (uint64_t)INT64_MAX / 16 / (uint64_t)tp->dims[i])
            return FAIL(RLX_ERR_FORMAT, "%s: tensor '%s' has more elements than can exist", m->what,
                        name);
        numel *= (uint64_t)tp->dims[i];
    }
    t->numel = (int64_t)numel;
    size_t es = elem_bytes(t->elem_type);
    if (!es)
        return RLX_OK; /* strings etc.: described, no data */
    uint64_t need = numel * es;
    t->n_bytes = need;
    bool external =
        tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (external) {
        const char *loc = NULL;
        uint64_t off = 0, len = UINT64_MAX;
        bool has_len = false;
        for (size_t i = 0; i < tp->n_external_data; i++) {
            const Onnx__StringStringEntryProto *e = tp->external_data[i];
            const char *k = str_or_empty(e->key), *v = str_or_empty(e->value);
            if (strcmp(k, "location") == 0)
                loc = v;
            else if (strcmp(k, "offset") == 0 && !parse_u64(v, &off))
                return FAIL(RLX_ERR_FORMAT, "%s: tensor '%s': external offset '%s' is not a number",
                            m->what, name, v);
            else if (strcmp(k, "length") == 0) {
                if (!parse_u64(v, &len))
                    return FAIL(RLX_ERR_FORMAT,
                                "%s: tensor '%s': external length '%s' is not a number", m->what,
                                name, v);
                has_len = true;
            }
        }
        if (!loc)
            return FAIL(RLX_ERR_FORMAT, "%s: tensor '%s' is external but names no location",
                        m->what, name);
        const uint8_t *base;
        size_t fsize;
        rlx_status st = ext_map(m, name, loc, &base, &fsize, err);
        if (st != RLX_OK)
            return st;
        if (!has_len)
            len = need;
        if (len != need)
            return FAIL(RLX_ERR_FORMAT,
                        "%s: tensor '%s' needs %llu bytes but its external length is %llu", m->what,
                        name, (unsigned long long)need, (unsigned long long)len);
        if (off > fsize || len > fsize - off)
            return FAIL(RLX_ERR_FORMAT,
                        "%s: tensor '%s' reads bytes %llu..%llu of '%s', which has %zu", m->what,
                        name, (unsigned long long)off, (unsigned long long)(off + len), loc, fsize);
        t->data = need ? base + off : NULL;
        t->external = true;
        return RLX_OK;
    }
    if (tp->has_raw_data) {
        if (tp->raw_data.len != need)
            return FAIL(RLX_ERR_FORMAT,
                        "%s: tensor '%s' is %s of %llu elements (%llu bytes) but holds %zu bytes",
                        m->what, name, rlx_onnx_elem_type_name(t->elem_type),
                        (unsigned long long)numel, (unsigned long long)need, tp->raw_data.len);
        t->data = need ? tp->raw_data.data : NULL;
        return RLX_OK;
    }
    /* typed fields: which one holds which elem type is fixed by onnx.proto */
    size_t have = 0;
    switch (t->elem_type) {
    case RLX_ONNX_FLOAT:
        have = tp->n_float_data;
        break;
    case RLX_ONNX_INT64:
        have = tp->n_int64_data;
        break;
    case RLX_ONNX_DOUBLE:
        have = tp->n_double_data;
        break;
    case RLX_ONNX_UINT32:
    case RLX_ONNX_UINT64:
        have = tp->n_uint64_data;
        break;
    default:
        have = tp->n_int32_data;
        break;
    }
    if (have != numel)
        return FAIL(RLX_ERR_FORMAT, "%s: tensor '%s' is %s of %llu elements but holds %zu values",
                    m->what, name, rlx_onnx_elem_type_name(t->elem_type), (unsigned long long)numel,
                    have);
    if (!numel)
        return RLX_OK;
    uint8_t *buf = own(m, (size_t)need);
    if (!buf)
        return NOMEM();
    switch (t->elem_type) {
    case RLX_ONNX_FLOAT:
        memcpy(buf, tp->float_data, (size_t)need);
        break;
    case RLX_ONNX_INT64:
        memcpy(buf, tp->int64_data, (size_t)need);
        break;
    case RLX_ONNX_DOUBLE:
        memcpy(buf, tp->double_data, (size_t)need);
        break;
    case RLX_ONNX_UINT64:
        memcpy(buf, tp->uint64_data, (size_t)need);
        break;
    case RLX_ONNX_UINT32:
        for (size_t i = 0; i < numel; i++) {
            uint32_t v = (uint32_t)tp->uint64_data[i];
            memcpy(buf + 4 * i, &v, 4);
        }
        break;
    default:
        /* int32_data holds int32, int16, int8, uint8, bool and the 16-bit
         * float bit patterns, one per entry */
        for (size_t i = 0; i < numel; i++) {
            int32_t v = tp->int32_data[i];
            if (es == 4)
                memcpy(buf + 4 * i, &v, 4);
            else if (es == 2) {
                uint16_t h = (uint16_t)v;
                memcpy(buf + 2 * i, &h, 2);
            } else
                buf[i] = (uint8_t)v;
        }
        break;
    }
    t->data = buf;
    return RLX_OK;
}

/* ---- values (graph inputs/outputs, value_info) --------------------------- */

static rlx_status convert_value(rlx_onnx_model *m, const Onnx__ValueInfoProto *vp,
                                rlx_onnx_value *v, rlx_error **err)
{
    memset(v, 0, sizeof *v);
    v->name = str_or_empty(vp->name);
    v->rank = -1;
    const Onnx__TypeProto *tp = vp->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return RLX_OK;
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    v->elem_type = tt->has_elem_type ? tt->elem_type : 0;
    v->dtype = rlx_onnx_dtype(v->elem_type);
    if (!tt->shape)
        return RLX_OK;
    if (tt->shape->n_dim > RLX_ONNX_MAX_RANK)
        return FAIL(RLX_ERR_FORMAT, "%s: value '%s' has %zu dims (at most %d are supported)",
                    m->what, v->name, tt->shape->n_dim, RLX_ONNX_MAX_RANK);
    size_t r = tt->shape->n_dim;
    int64_t *dims = own_array(m, r, sizeof *dims);
    const char **params = own_array(m, r, sizeof *params);
    if (!dims || !params)
        return NOMEM();
    for (size_t i = 0; i < r; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        dims[i] = -1;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            d->dim_value >= 0)
            dims[i] = d->dim_value;
        else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            params[i] = str_or_empty(d->dim_param);
    }
    v->rank = (int32_t)r;
    v->dims = dims;
    v->dim_params = params;
    return RLX_OK;
}

/* ---- nodes ----------------------------------------------------------------- */

static rlx_status convert_node(rlx_onnx_model *m, const Onnx__NodeProto *np, rlx_onnx_node *n,
                               rlx_error **err)
{
    memset(n, 0, sizeof *n);
    n->name = str_or_empty(np->name);
    n->op_type = str_or_empty(np->op_type);
    n->domain = str_or_empty(np->domain);
    if (strcmp(n->domain, "ai.onnx") == 0)
        n->domain = "";
    if (!n->op_type[0])
        return FAIL(RLX_ERR_FORMAT, "%s: node '%s' has no op type", m->what, n->name);
    if (np->n_input > INT32_MAX || np->n_output > INT32_MAX || np->n_attribute > INT32_MAX)
        return FAIL(RLX_ERR_FORMAT, "%s: node '%s' is too large", m->what, n->name);
    n->n_inputs = (int32_t)np->n_input;
    n->inputs = (const char *const *)np->input;
    n->n_outputs = (int32_t)np->n_output;
    n->outputs = (const char *const *)np->output;
    n->n_attrs = (int32_t)np->n_attribute;
    rlx_onnx_attr *as = own_array(m, np->n_attribute, sizeof *as);
    if (!as)
        return NOMEM();
    n->attrs = as;
    for (size_t i = 0; i < np->n_attribute; i++) {
        const Onnx__AttributeProto *ap = np->attribute[i];
        rlx_onnx_attr *a = &as[i];
        a->name = str_or_empty(ap->name);
        if (ap->n_floats > INT32_MAX || ap->n_ints > INT32_MAX)
            return FAIL(RLX_ERR_FORMAT, "%s: node '%s': attribute '%s' is too large", m->what,
                        n->name, a->name);
        a->f = ap->f;
        a->i = ap->i;
        a->n_floats = (int32_t)ap->n_floats;
        a->floats = ap->floats;
        a->n_ints = (int32_t)ap->n_ints;
        a->ints = ap->ints;
        int type = ap->has_type ? (int)ap->type : 0;
        switch (type) {
        case RLX_ONNX_ATTR_FLOAT:
        case RLX_ONNX_ATTR_INT:
        case RLX_ONNX_ATTR_FLOATS:
        case RLX_ONNX_ATTR_INTS:
        case RLX_ONNX_ATTR_GRAPH:
        case RLX_ONNX_ATTR_STRINGS:
        case RLX_ONNX_ATTR_TENSORS:
        case RLX_ONNX_ATTR_GRAPHS:
            a->type = (rlx_onnx_attr_type)type;
            break;
        case RLX_ONNX_ATTR_STRING: {
            a->type = RLX_ONNX_ATTR_STRING;
            char *s = own(m, ap->s.len + 1);
            if (!s)
                return NOMEM();
            if (ap->s.len)
                memcpy(s, ap->s.data, ap->s.len);
            a->s = s;
            break;
        }
        case RLX_ONNX_ATTR_TENSOR: {
            a->type = RLX_ONNX_ATTR_TENSOR;
            if (!ap->t)
                return FAIL(RLX_ERR_FORMAT, "%s: node '%s': tensor attribute '%s' has no tensor",
                            m->what, n->name, a->name);
            rlx_onnx_tensor *t = own(m, sizeof *t);
            if (!t)
                return NOMEM();
            rlx_status st = convert_tensor(m, ap->t, t, err);
            if (st != RLX_OK)
                return st;
            a->t = t;
            break;
        }
        case RLX_ONNX_ATTR_UNDEFINED:
            a->type = RLX_ONNX_ATTR_UNDEFINED;
            break;
        default:
            a->type = RLX_ONNX_ATTR_OTHER;
            break;
        }
    }
    return RLX_OK;
}

/* Order the nodes so that every input is produced before it is read
 * (Kahn's algorithm); a cycle or an undefined name is an error. */
static rlx_status sort_nodes(rlx_onnx_model *m, const Onnx__GraphProto *g, rlx_onnx_node *tmp,
                             rlx_error **err)
{
    int32_t n = m->n_nodes;
    name_map producer = {0};
    rlx_status st = RLX_OK;
    int32_t *pending = calloc((size_t)n + 1, sizeof *pending);
    int32_t *queue = calloc((size_t)n + 1, sizeof *queue);
    /* consumers as CSR lists: edge e goes from producer to node */
    size_t n_edges = 0;
    for (int32_t i = 0; i < n; i++)
        n_edges += (size_t)tmp[i].n_inputs;
    int32_t *first = calloc((size_t)n + 2, sizeof *first);
    int32_t *adj = calloc(n_edges + 1, sizeof *adj);
    size_t outs = 0;
    for (int32_t i = 0; i < n; i++)
        outs += (size_t)tmp[i].n_outputs;
    if (!pending || !queue || !first || !adj || !map_init(&producer, outs)) {
        st = NOMEM();
        goto done;
    }
    for (int32_t i = 0; i < n; i++)
        for (int32_t k = 0; k < tmp[i].n_outputs; k++) {
            const char *o = tmp[i].outputs[k];
            if (!o[0])
                continue;
            if (map_get(&m->init_map, o) >= 0 || !map_put(&producer, o, i)) {
                st = FAIL(RLX_ERR_FORMAT, "%s: the value '%s' is produced twice (by node '%s' %s)",
                          m->what, o, tmp[i].name, tmp[i].op_type);
                goto done;
            }
        }
    for (size_t i = 0; i < g->n_input; i++) {
        const char *nm = str_or_empty(g->input[i]->name);
        if (map_get(&producer, nm) >= 0) {
            st = FAIL(RLX_ERR_FORMAT, "%s: '%s' is both a graph input and a node's output", m->what,
                      nm);
            goto done;
        }
    }
    /* count edges per producer */
    for (int32_t i = 0; i < n; i++)
        for (int32_t k = 0; k < tmp[i].n_inputs; k++) {
            const char *in = tmp[i].inputs[k];
            if (!in[0])
                continue;
            int32_t p = map_get(&producer, in);
            if (p >= 0) {
                first[p + 1]++;
                pending[i]++;
            } else if (map_get(&m->value_map, in) < 0 && map_get(&m->init_map, in) < 0) {
                st = FAIL(RLX_ERR_FORMAT,
                          "%s: node '%s' (%s) reads '%s', which no input, initializer or node "
                          "defines",
                          m->what, tmp[i].name, tmp[i].op_type, in);
                goto done;
            }
        }
    for (int32_t i = 0; i < n; i++)
        first[i + 1] += first[i];
    {
        int32_t *fill = calloc((size_t)n + 1, sizeof *fill);
        if (!fill) {
            st = NOMEM();
            goto done;
        }
        for (int32_t i = 0; i < n; i++)
            for (int32_t k = 0; k < tmp[i].n_inputs; k++) {
                const char *in = tmp[i].inputs[k];
                int32_t p = in[0] ? map_get(&producer, in) : -1;
                if (p >= 0)
                    adj[first[p] + fill[p]++] = i;
            }
        free(fill);
    }
    int32_t qh = 0, qt = 0;
    for (int32_t i = 0; i < n; i++)
        if (!pending[i])
            queue[qt++] = i;
    while (qh < qt) {
        int32_t i = queue[qh++];
        for (int32_t e = first[i]; e < first[i + 1]; e++)
            if (--pending[adj[e]] == 0)
                queue[qt++] = adj[e];
    }
    if (qt != n) {
        int32_t stuck = 0;
        while (stuck < n && !pending[stuck])
            stuck++;
        st = FAIL(RLX_ERR_FORMAT, "%s: the graph has a cycle (through node '%s', %s)", m->what,
                  stuck < n ? tmp[stuck].name : "?", stuck < n ? tmp[stuck].op_type : "?");
        goto done;
    }
    for (int32_t i = 0; i < n; i++)
        m->nodes[i] = tmp[queue[i]];
done:
    free(pending);
    free(queue);
    free(first);
    free(adj);
    map_free(&producer);
    return st;
}

static rlx_status build_view(rlx_onnx_model *m, rlx_error **err)
{
    const Onnx__ModelProto *pb = m->pb;
    const Onnx__GraphProto *g = pb->graph;
    if (!g)
        return FAIL(RLX_ERR_FORMAT, "%s: the file has no graph (is it an ONNX model?)", m->what);
    if (pb->n_opset_import > 1024 || g->n_node > INT32_MAX / 4 ||
        g->n_initializer > INT32_MAX / 4 || g->n_input > INT32_MAX / 4 ||
        g->n_output > INT32_MAX / 4 || g->n_value_info > INT32_MAX / 4)
        return FAIL(RLX_ERR_FORMAT, "%s: the graph is too large", m->what);
    if (g->n_sparse_initializer)
        return FAIL(RLX_ERR_UNSUPPORTED, "%s: sparse initializers are not supported", m->what);
    m->n_opsets = (int32_t)pb->n_opset_import;
    m->opsets = own_array(m, pb->n_opset_import, sizeof *m->opsets);
    if (!m->opsets)
        return NOMEM();
    for (size_t i = 0; i < pb->n_opset_import; i++) {
        const char *d = str_or_empty(pb->opset_import[i]->domain);
        m->opsets[i].domain = strcmp(d, "ai.onnx") == 0 ? "" : d;
        m->opsets[i].version = pb->opset_import[i]->has_version ? pb->opset_import[i]->version : 0;
    }

    /* initializers */
    m->n_inits = (int32_t)g->n_initializer;
    m->inits = own_array(m, g->n_initializer, sizeof *m->inits);
    if (!m->inits || !map_init(&m->init_map, g->n_initializer))
        return NOMEM();
    for (size_t i = 0; i < g->n_initializer; i++) {
        rlx_status st = convert_tensor(m, g->initializer[i], &m->inits[i], err);
        if (st != RLX_OK)
            return st;
        if (!m->inits[i].name[0])
            return FAIL(RLX_ERR_FORMAT, "%s: initializer %zu has no name", m->what, i);
        if (!map_put(&m->init_map, m->inits[i].name, (int32_t)i))
            return FAIL(RLX_ERR_FORMAT, "%s: two initializers are named '%s'", m->what,
                        m->inits[i].name);
    }

    /* values: inputs (initializers excluded), outputs, value_info */
    m->inputs = own_array(m, g->n_input, sizeof *m->inputs);
    m->outputs = own_array(m, g->n_output, sizeof *m->outputs);
    m->infos = own_array(m, g->n_value_info, sizeof *m->infos);
    if (!m->inputs || !m->outputs || !m->infos ||
        !map_init(&m->value_map, g->n_input + g->n_output + g->n_value_info))
        return NOMEM();
    for (size_t i = 0; i < g->n_input; i++) {
        rlx_onnx_value v;
        rlx_status st = convert_value(m, g->input[i], &v, err);
        if (st != RLX_OK)
            return st;
        if (map_get(&m->init_map, v.name) >= 0)
            continue; /* IR < 4 lists initializers as inputs too */
        if (!v.name[0])
            return FAIL(RLX_ERR_FORMAT, "%s: graph input %zu has no name", m->what, i);
        m->inputs[m->n_inputs] = v;
        if (!map_put(&m->value_map, v.name, m->n_inputs))
            return FAIL(RLX_ERR_FORMAT, "%s: two graph inputs are named '%s'", m->what, v.name);
        m->n_inputs++;
    }
    for (size_t i = 0; i < g->n_output; i++) {
        rlx_status st = convert_value(m, g->output[i], &m->outputs[i], err);
        if (st != RLX_OK)
            return st;
        if (!m->outputs[i].name[0])
            return FAIL(RLX_ERR_FORMAT, "%s: graph output %zu has no name", m->what, i);
    }
    m->n_outputs = (int32_t)g->n_output;
    for (size_t i = 0; i < g->n_value_info; i++) {
        rlx_status st = convert_value(m, g->value_info[i], &m->infos[i], err);
        if (st != RLX_OK)
            return st;
    }
    m->n_infos = (int32_t)g->n_value_info;

    /* nodes, then their order */
    m->n_nodes = (int32_t)g->n_node;
    m->nodes = own_array(m, g->n_node, sizeof *m->nodes);
    rlx_onnx_node *tmp = calloc(g->n_node + 1, sizeof *tmp);
    if (!m->nodes || !tmp) {
        free(tmp);
        return NOMEM();
    }
    rlx_status st = RLX_OK;
    for (size_t i = 0; i < g->n_node && st == RLX_OK; i++)
        st = convert_node(m, g->node[i], &tmp[i], err);
    if (st == RLX_OK)
        st = sort_nodes(m, g, tmp, err);
    free(tmp);
    if (st != RLX_OK)
        return st;
    for (int32_t i = 0; i < m->n_outputs; i++) {
        const char *o = m->outputs[i].name;
        bool found = map_get(&m->value_map, o) >= 0 || map_get(&m->init_map, o) >= 0;
        for (int32_t k = 0; !found && k < m->n_nodes; k++)
            for (int32_t j = 0; !found && j < m->nodes[k].n_outputs; j++)
                found = strcmp(m->nodes[k].outputs[j], o) == 0;
        if (!found)
            return FAIL(RLX_ERR_FORMAT, "%s: graph output '%s' is not computed by any node",
                        m->what, o);
    }
    return RLX_OK;
}

void rlx_onnx_close(rlx_onnx_model *m)
{
    if (!m)
        return;
    if (m->pb)
        onnx__model_proto__free_unpacked(m->pb, NULL);
    for (size_t i = 0; i < m->n_blocks; i++)
        free(m->blocks[i]);
    free(m->blocks);
    for (size_t i = 0; i < m->n_ext; i++) {
        if (m->ext[i].p)
            munmap(m->ext[i].p, m->ext[i].size);
        free(m->ext[i].location);
    }
    free(m->ext);
    map_free(&m->init_map);
    map_free(&m->value_map);
    free(m->what);
    free(m->dir);
    free(m);
}

rlx_status rlx_onnx_open_memory(const void *data, size_t size, const char *dir, const char *what,
                                rlx_onnx_model **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out || (!data && size))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_onnx_open_memory: bad argument");
    rlx_onnx_model *m = calloc(1, sizeof *m);
    if (!m)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory reading an ONNX model");
    m->what = strdup(what ? what : "the ONNX model");
    if (dir)
        m->dir = realpath(dir, NULL);
    if (!m->what || (dir && !m->dir)) {
        rlx_status st = dir && m->what ? FAIL(RLX_ERR_IO, "%s: cannot resolve its folder '%s': %s",
                                              m->what, dir, strerror(errno))
                                       : FAIL(RLX_ERR_NO_MEMORY, "out of memory");
        rlx_onnx_close(m);
        return st;
    }
    rlx_status st = RLX_OK;
    if (size == 0)
        st = FAIL(RLX_ERR_FORMAT, "%s: the file is empty", m->what);
    if (st == RLX_OK)
        st = check_wire(data, size, &onnx__model_proto__descriptor, m->what, err);
    if (st == RLX_OK) {
        m->pb = onnx__model_proto__unpack(NULL, size, data);
        if (!m->pb)
            st =
                FAIL(RLX_ERR_FORMAT, "%s: not a valid ONNX protobuf (it does not decode)", m->what);
    }
    if (st == RLX_OK)
        st = build_view(m, err);
    if (st != RLX_OK) {
        rlx_onnx_close(m);
        return st;
    }
    *out = m;
    return RLX_OK;
}

/* the whole file, mapped */
static rlx_status map_whole(const char *path, void **out, size_t *size, rlx_error **err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rlx_error_set(err, RLX_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_IO, "%s is not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s is empty", path);
    }
    void *p = rlx_map_file(fd, (size_t)sb.st_size);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return rlx_error_set(err, RLX_ERR_IO, "cannot map %s: %s", path, strerror(e));
    *out = p;
    *size = (size_t)sb.st_size;
    return RLX_OK;
}

rlx_status rlx_onnx_open(const char *path, rlx_onnx_model **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_onnx_open: bad argument");
    size_t size = 0;
    void *p = NULL;
    rlx_status mst = map_whole(path, &p, &size, err);
    if (mst != RLX_OK)
        return mst;
    char *dcopy = strdup(path);
    if (!dcopy) {
        munmap(p, size);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    char *slash = strrchr(dcopy, '/');
    const char *dir = ".";
    if (slash) {
        *slash = '\0';
        dir = slash == dcopy ? "/" : dcopy;
    }
    /* protobuf-c copies what it keeps, so the mapping can go afterwards */
    rlx_status st = rlx_onnx_open_memory(p, size, dir, path, out, err);
    munmap(p, size);
    free(dcopy);
    return st;
}

/* ---- accessors ------------------------------------------------------------ */

int64_t rlx_onnx_ir_version(const rlx_onnx_model *m)
{
    return m && m->pb->has_ir_version ? m->pb->ir_version : 0;
}

const char *rlx_onnx_producer(const rlx_onnx_model *m)
{
    return m ? str_or_empty(m->pb->producer_name) : "";
}

const char *rlx_onnx_graph_name(const rlx_onnx_model *m)
{
    return m ? str_or_empty(m->pb->graph->name) : "";
}

int32_t rlx_onnx_n_opsets(const rlx_onnx_model *m)
{
    return m ? m->n_opsets : 0;
}

const rlx_onnx_opset *rlx_onnx_opset_at(const rlx_onnx_model *m, int32_t i)
{
    return m && i >= 0 && i < m->n_opsets ? &m->opsets[i] : NULL;
}

int64_t rlx_onnx_opset_version(const rlx_onnx_model *m, const char *domain)
{
    if (!m)
        return -1;
    if (!domain || strcmp(domain, "ai.onnx") == 0)
        domain = "";
    for (int32_t i = 0; i < m->n_opsets; i++)
        if (strcmp(m->opsets[i].domain, domain) == 0)
            return m->opsets[i].version;
    return -1;
}

int32_t rlx_onnx_n_nodes(const rlx_onnx_model *m)
{
    return m ? m->n_nodes : 0;
}

const rlx_onnx_node *rlx_onnx_node_at(const rlx_onnx_model *m, int32_t i)
{
    return m && i >= 0 && i < m->n_nodes ? &m->nodes[i] : NULL;
}

const rlx_onnx_attr *rlx_onnx_node_attr(const rlx_onnx_node *n, const char *name)
{
    if (!n || !name)
        return NULL;
    for (int32_t i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0)
            return &n->attrs[i];
    return NULL;
}

int32_t rlx_onnx_n_initializers(const rlx_onnx_model *m)
{
    return m ? m->n_inits : 0;
}

const rlx_onnx_tensor *rlx_onnx_initializer_at(const rlx_onnx_model *m, int32_t i)
{
    return m && i >= 0 && i < m->n_inits ? &m->inits[i] : NULL;
}

const rlx_onnx_tensor *rlx_onnx_find_initializer(const rlx_onnx_model *m, const char *name)
{
    if (!m || !name)
        return NULL;
    int32_t i = map_get(&m->init_map, name);
    return i >= 0 ? &m->inits[i] : NULL;
}

int32_t rlx_onnx_n_inputs(const rlx_onnx_model *m)
{
    return m ? m->n_inputs : 0;
}

const rlx_onnx_value *rlx_onnx_input_at(const rlx_onnx_model *m, int32_t i)
{
    return m && i >= 0 && i < m->n_inputs ? &m->inputs[i] : NULL;
}

int32_t rlx_onnx_n_outputs(const rlx_onnx_model *m)
{
    return m ? m->n_outputs : 0;
}

const rlx_onnx_value *rlx_onnx_output_at(const rlx_onnx_model *m, int32_t i)
{
    return m && i >= 0 && i < m->n_outputs ? &m->outputs[i] : NULL;
}

const rlx_onnx_value *rlx_onnx_find_value(const rlx_onnx_model *m, const char *name)
{
    if (!m || !name)
        return NULL;
    int32_t i = map_get(&m->value_map, name);
    if (i >= 0)
        return &m->inputs[i];
    for (int32_t k = 0; k < m->n_outputs; k++)
        if (strcmp(m->outputs[k].name, name) == 0)
            return &m->outputs[k];
    for (int32_t k = 0; k < m->n_infos; k++)
        if (strcmp(m->infos[k].name, name) == 0)
            return &m->infos[k];
    return NULL;
}

/* ---- standalone tensors ---------------------------------------------------- */

struct rlx_onnx_tensor_file {
    rlx_onnx_model holder; /* owns the blocks; no folder, so no external data */
    Onnx__TensorProto *pb;
    rlx_onnx_tensor t;
};

rlx_status rlx_onnx_tensor_file_read(const char *path, rlx_onnx_tensor_file **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_onnx_tensor_file_read: bad argument");
    size_t size = 0;
    void *p = NULL;
    rlx_status mst = map_whole(path, &p, &size, err);
    if (mst != RLX_OK)
        return mst;
    rlx_onnx_tensor_file *f = calloc(1, sizeof *f);
    rlx_onnx_model *m = f ? &f->holder : NULL;
    rlx_status st = RLX_OK;
    if (!f || !(f->holder.what = strdup(path)))
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    if (st == RLX_OK)
        st = check_wire(p, size, &onnx__tensor_proto__descriptor, path, err);
    if (st == RLX_OK && !(f->pb = onnx__tensor_proto__unpack(NULL, size, p)))
        st = FAIL(RLX_ERR_FORMAT, "%s: not a serialized ONNX tensor", path);
    if (st == RLX_OK)
        st = convert_tensor(m, f->pb, &f->t, err);
    munmap(p, size);
    if (st != RLX_OK) {
        rlx_onnx_tensor_file_free(f);
        return st;
    }
    *out = f;
    return RLX_OK;
}

const rlx_onnx_tensor *rlx_onnx_tensor_file_tensor(const rlx_onnx_tensor_file *f)
{
    return f ? &f->t : NULL;
}

void rlx_onnx_tensor_file_free(rlx_onnx_tensor_file *f)
{
    if (!f)
        return;
    if (f->pb)
        onnx__tensor_proto__free_unpacked(f->pb, NULL);
    for (size_t i = 0; i < f->holder.n_blocks; i++)
        free(f->holder.blocks[i]);
    free(f->holder.blocks);
    free(f->holder.what);
    free(f);
}
