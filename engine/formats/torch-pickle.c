/* The restricted unpickler of torch-zip.h: a pickle VM over data.pkl that builds
 * values (dicts, tuples, storages, tensors) and executes nothing; only the
 * globals a state dict needs are recognised, any other is refused by name. */
#include "engine/formats/torch-zip-internal.h"

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

const char *tz_kind_name(const pv *v)
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
bool tz_grow(void **arr, size_t *cap, size_t need, size_t elem)
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
    if (!tz_grow((void **)&vm->objs, &vm->cap_objs, vm->n_objs + 1, sizeof *vm->objs))
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

void tz_pvm_free(pvm *vm)
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
    if (!tz_grow((void **)&s->u.seq.items, &s->u.seq.cap, s->u.seq.n + 1, sizeof *s->u.seq.items))
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
    if (!tz_grow((void **)&vm->stack, &vm->cap_stack, vm->n_stack + 1, sizeof *vm->stack))
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

bool tz_str_is(const pv *v, const char *s)
{
    return v->kind == V_STR && v->u.s.n == strlen(s) && memcmp(v->u.s.p, s, v->u.s.n) == 0;
}

uint64_t tz_dtype_size(rlx_dtype d)
{
    uint64_t b = 0;
    (void)rlx_dtype_row_bytes(d, 1, &b);
    return b;
}

/* ('storage', storage_type, key, location, numel) -> the zip entry's bytes. */
static rlx_status persistent_load(pvm *vm, const uint8_t *op_at, pv *pid, pv **out, rlx_error **err)
{
    if (pid->kind != V_TUPLE || pid->u.seq.n != 5 || !tz_str_is(pid->u.seq.items[0], "storage"))
        VM_ERR(RLX_ERR_FORMAT, "a persistent id is not a ('storage', type, key, location, "
                               "size) tuple");
    pv **it = pid->u.seq.items;
    if (it[1]->kind != V_GLOBAL || it[1]->u.g.id != G_STORAGE_TYPE)
        VM_ERR(RLX_ERR_FORMAT, "a persistent id's storage type is %s, not a torch.*Storage",
               tz_kind_name(it[1]));
    if (it[2]->kind != V_STR)
        VM_ERR(RLX_ERR_FORMAT, "a persistent id's storage key is %s, not a string",
               tz_kind_name(it[2]));
    uint64_t numel;
    if (!as_u64(it[4], &numel))
        VM_ERR(RLX_ERR_FORMAT, "a persistent id's element count is %s, not a non-negative int",
               tz_kind_name(it[4]));
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
    const tz_entry *e = tz_zip_find(vm->tz, path, pl + 5 + kl);
    free(path);
    if (!e)
        VM_ERR(RLX_ERR_FORMAT, "storage '%s' has no entry %sdata/%s in the archive", kp,
               vm->tz->prefix, kp);
    rlx_dtype dt = it[1]->u.g.dtype;
    uint64_t es = tz_dtype_size(dt);
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
        VM_ERR(RLX_ERR_FORMAT, "_rebuild_tensor_v2's storage is %s", tz_kind_name(a[0]));
    uint64_t off;
    if (!as_u64(a[1], &off))
        VM_ERR(RLX_ERR_FORMAT,
               "_rebuild_tensor_v2's storage offset is %s, not a non-negative "
               "int",
               tz_kind_name(a[1]));
    if (a[2]->kind != V_TUPLE || a[3]->kind != V_TUPLE)
        VM_ERR(RLX_ERR_FORMAT, "_rebuild_tensor_v2's size and stride are %s and %s, not tuples",
               tz_kind_name(a[2]), tz_kind_name(a[3]));
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
    uint64_t es = tz_dtype_size(t->dtype);
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
        VM_ERR(RLX_ERR_FORMAT, "the pickle calls %s, which is not callable", tz_kind_name(fn));
    if (args->kind != V_TUPLE)
        VM_ERR(RLX_ERR_FORMAT, "a call's arguments are %s, not a tuple", tz_kind_name(args));
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

rlx_status tz_pickle_run(pvm *vm, pv **result, rlx_error **err)
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
                       a->kind == V_GLOBAL ? global_name(a) : tz_kind_name(a));
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
                if (!tz_grow((void **)&vm->memo, &vm->cap_memo, vm->n_memo + 1, sizeof *vm->memo))
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
                VM_ERR(RLX_ERR_FORMAT, "opcode '%c' adds to %s, not a %s", op, tz_kind_name(target),
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
