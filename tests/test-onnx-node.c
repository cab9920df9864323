/* ONNX's own node test suite (Debian's libonnx-testdata: each case's
 * model.onnx with test_data_set_0/input_*.pb and the expected output_*.pb,
 * written by ONNX's reference implementation) through the importer and the
 * runner, on the CPU (argument "cpu") or on Vulkan ("devices").
 *
 * Per op it prints "N passed, N failed, N skipped", then every skipped case
 * by name with the reason (an unsupported op, attribute or type). The test
 * fails only on a WRONG result: a case the importer accepts whose outputs
 * differ from the expected ones, or a model the reader refuses. Inputs that
 * real models hold as constants (target shapes, axes, Resize scales and
 * sizes, pads; see shape_like_input) are fixed at import time
 * (rlx_onnx_import_params.consts), the data inputs are fed at run time.
 *
 * Tolerance: ONNX's backend tests' own, |got - want| <= 1e-7 + 1e-3 |want|
 * per element (rtol 1e-3, atol 1e-7); integers and booleans exactly; NaN
 * matches NaN. Errors other than "unsupported" (a compile failure, say) are
 * counted as skipped and listed separately with their message, so they
 * stay visible. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "engine/formats/onnx.h"
#include "engine/runtime/session.h"
#include "models/onnx/onnx-model.h"
#include "rlx-config.h"

#define NODE_DIR "/usr/share/libonnx-testdata/data/node"
#define MAX_IO   16

static const char *device = "cpu";

typedef struct {
    char op[64];
    int pass, fail, skip;
} op_count;

static op_count counts[512];
static int n_counts;

static op_count *count_for(const char *op)
{
    for (int i = 0; i < n_counts; i++)
        if (strcmp(counts[i].op, op) == 0)
            return &counts[i];
    if (n_counts == 512)
        return &counts[511];
    op_count *c = &counts[n_counts++];
    snprintf(c->op, sizeof c->op, "%s", op);
    return c;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_counts(const void *a, const void *b)
{
    return strcmp(((const op_count *)a)->op, ((const op_count *)b)->op);
}

/* one line per skipped / failed case, printed at the end */
static char *notes[4096];
static int n_notes;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    if (n_notes == 4096)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    notes[n_notes++] = strdup(buf);
}

/* bfloat16 outputs compared as their bit patterns */
#define RLX_DTYPE_U16_BITS RLX_DTYPE_COUNT

static double elem_at(const rlx_onnx_tensor *t, int64_t i)
{
    return rlx_onnx_elem_get(t->data, t->elem_type, i);
}

typedef enum { R_PASS, R_FAIL, R_SKIP } result;

/* Whether graph input `name` feeds a node at a position that real models
 * fill with a constant (a target shape, axes, Resize scales or sizes, pads,
 * split sizes, Range's bounds): the node tests feed those as inputs, and
 * the case is run with them fixed at import time. */
static bool shape_like_input(const rlx_onnx_model *m, const char *name)
{
    static const struct {
        const char *op;
        uint32_t mask; /* bit i: input i */
    } pos[] = {
        {"Reshape", 1u << 1},
        {"Expand", 1u << 1},
        {"Tile", 1u << 1},
        {"Unsqueeze", 1u << 1},
        {"Squeeze", 1u << 1},
        {"Slice", 0x1e},
        {"Resize", 0xe},
        {"Upsample", 1u << 1},
        {"Pad", 0xe},
        {"Split", 1u << 1},
        {"ReduceSum", 1u << 1},
        {"ReduceMean", 1u << 1},
        {"ReduceMax", 1u << 1},
        {"ReduceMin", 1u << 1},
        {"ReduceL1", 1u << 1},
        {"ReduceL2", 1u << 1},
        {"ReduceLogSum", 1u << 1},
        {"ReduceLogSumExp", 1u << 1},
        {"ReduceSumSquare", 1u << 1},
        {"ReduceProd", 1u << 1},
        {"ConstantOfShape", 1u},
        {"Range", 0x7},
        {"TopK", 1u << 1},
        {"OneHot", 1u << 1},
        {"Trilu", 1u << 1},
    };
    for (int32_t i = 0; i < rlx_onnx_n_nodes(m); i++) {
        const rlx_onnx_node *n = rlx_onnx_node_at(m, i);
        for (size_t k = 0; k < sizeof pos / sizeof pos[0]; k++) {
            if (strcmp(n->op_type, pos[k].op) != 0)
                continue;
            for (int32_t j = 0; j < n->n_inputs && j < 32; j++)
                if ((pos[k].mask >> j & 1) && !strcmp(n->inputs[j], name))
                    return true;
        }
    }
    return false;
}

/* the op a case is counted under: the last node's op ("Foo (expanded)" for
 * the function-expanded variants) */
static void case_op(const char *name, const rlx_onnx_model *m, char *op, size_t cap)
{
    int32_t n = rlx_onnx_n_nodes(m);
    const char *o = n ? rlx_onnx_node_at(m, n - 1)->op_type : "(none)";
    size_t nl = strlen(name);
    bool expanded = nl > 9 && strcmp(name + nl - 9, "_expanded") == 0;
    snprintf(op, cap, "%s%s", o, expanded ? " (expanded)" : "");
}

static result run_case(const char *dir, const char *name, char *op, size_t op_cap)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
    snprintf(op, op_cap, "(unread)");
    rlx_onnx_model *m = NULL;
    rlx_error *err = NULL;
    if (rlx_onnx_open(path, &m, &err) != RLX_OK) {
        note("FAILED %s: the reader refused it: %s", name, rlx_error_message(err));
        rlx_error_free(err);
        return R_FAIL;
    }
    case_op(name, m, op, op_cap);
    rlx_onnx_tensor_file *in[MAX_IO] = {0}, *want[MAX_IO] = {0};
    rlx_onnx_input_shape shapes[MAX_IO];
    rlx_onnx_const_input consts[MAX_IO];
    int n_consts = 0;
    int n_in = 0, n_out = 0;
    result res = R_SKIP;
    void *outs[MAX_IO] = {0};
    rlx_onnx_runner *r = NULL;
    /* the inputs in the model's order (input_<i>.pb follow graph.input,
     * initializers excluded) */
    for (int i = 0; i < MAX_IO; i++) {
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%d.pb", dir, name, i);
        struct stat sb;
        if (stat(path, &sb) != 0)
            break;
        if (rlx_onnx_tensor_file_read(path, &in[i], &err) != RLX_OK) {
            note("skipped %s: input %d is not a tensor we read (%s)", name, i,
                 rlx_error_message(err));
            rlx_error_clear(&err);
            goto done;
        }
        n_in = i + 1;
    }
    for (int i = 0; i < MAX_IO; i++) {
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/output_%d.pb", dir, name, i);
        struct stat sb;
        if (stat(path, &sb) != 0)
            break;
        if (rlx_onnx_tensor_file_read(path, &want[i], &err) != RLX_OK) {
            note("skipped %s: output %d is not a tensor we read (%s)", name, i,
                 rlx_error_message(err));
            rlx_error_clear(&err);
            goto done;
        }
        n_out = i + 1;
    }
    if (n_in != rlx_onnx_n_inputs(m) || n_out != rlx_onnx_n_outputs(m)) {
        note("skipped %s: %d input files for %d inputs, or %d outputs for %d", name, n_in,
             (int)rlx_onnx_n_inputs(m), n_out, (int)rlx_onnx_n_outputs(m));
        goto done;
    }
    for (int i = 0; i < n_in; i++) {
        const rlx_onnx_tensor *t = rlx_onnx_tensor_file_tensor(in[i]);
        if (t->rank > RLX_ONNX_IO_MAX_DIMS) {
            note("skipped %s: input %d has %d dims", name, i, t->rank);
            goto done;
        }
        if (shape_like_input(m, rlx_onnx_input_at(m, i)->name))
            consts[n_consts++] = (rlx_onnx_const_input){rlx_onnx_input_at(m, i)->name, t};
        shapes[i].name = rlx_onnx_input_at(m, i)->name;
        shapes[i].rank = t->rank;
        for (int k = 0; k < t->rank; k++)
            shapes[i].dims[k] = t->dims[k];
    }
    rlx_onnx_runner_params p = rlx_onnx_runner_default_params();
    p.device = device;
    p.n_threads = 1;
    p.import.shapes = shapes;
    p.import.n_shapes = n_in;
    p.import.consts = consts;
    p.import.n_consts = n_consts;
    rlx_status st = rlx_onnx_runner_create(&p, m, &r, &err);
    if (st != RLX_OK) {
        note("skipped %s: %s%s", name, st == RLX_ERR_UNSUPPORTED ? "" : "ERROR ",
             rlx_error_message(err));
        rlx_error_clear(&err);
        goto done;
    }
    const void *ins[MAX_IO];
    for (int j = 0; j < rlx_onnx_runner_n_inputs(r); j++) {
        const rlx_onnx_io *io = rlx_onnx_runner_input(r, j);
        int i = 0;
        while (i < n_in && strcmp(rlx_onnx_input_at(m, i)->name, io->name))
            i++;
        if (i == n_in) {
            note("FAILED %s: the runner's input '%s' is not the model's", name, io->name);
            res = R_FAIL;
            goto done;
        }
        const rlx_onnx_tensor *t = rlx_onnx_tensor_file_tensor(in[i]);
        /* ONNX 1.12 stores bfloat16 test data as uint16 bit patterns */
        bool bf16_bits =
            io && t->elem_type == RLX_ONNX_UINT16 && io->elem_type == RLX_ONNX_BFLOAT16;
        if (!io || (t->elem_type != io->elem_type && !bf16_bits) || !t->data) {
            note("skipped %s: input %d's file is %s, the model wants %s", name, i,
                 rlx_onnx_elem_type_name(t->elem_type),
                 io ? rlx_onnx_elem_type_name(io->elem_type) : "?");
            goto done;
        }
        ins[j] = t->data;
    }
    for (int i = 0; i < n_out; i++) {
        const rlx_onnx_io *io = rlx_onnx_runner_output(r, i);
        outs[i] = calloc((size_t)(io->numel ? io->numel : 1), rlx_onnx_elem_size(io->elem_type));
    }
    if (rlx_onnx_runner_run(r, ins, outs, &err) != RLX_OK) {
        note("skipped %s: ERROR running: %s", name, rlx_error_message(err));
        rlx_error_clear(&err);
        goto done;
    }
    res = R_PASS;
    for (int i = 0; i < n_out && res == R_PASS; i++) {
        const rlx_onnx_tensor *t = rlx_onnx_tensor_file_tensor(want[i]);
        const rlx_onnx_io *io = rlx_onnx_runner_output(r, i);
        bool bf16_bits = t->elem_type == RLX_ONNX_UINT16 && io->elem_type == RLX_ONNX_BFLOAT16;
        bool same_shape = t->rank == io->rank && (t->elem_type == io->elem_type || bf16_bits);
        for (int k = 0; same_shape && k < t->rank; k++)
            same_shape = t->dims[k] == io->dims[k];
        if (!same_shape) {
            note("FAILED %s: output %d is %s rank %d, expected %s rank %d (or other dims)", name, i,
                 rlx_onnx_elem_type_name(io->elem_type), io->rank,
                 rlx_onnx_elem_type_name(t->elem_type), t->rank);
            res = R_FAIL;
            break;
        }
        rlx_onnx_tensor got = *t;
        got.data = outs[i];
        if (bf16_bits)
            got.dtype = RLX_DTYPE_U16_BITS;
        bool is_float = t->dtype == RLX_DTYPE_F32 || t->dtype == RLX_DTYPE_F64 ||
                        t->dtype == RLX_DTYPE_F16 || t->dtype == RLX_DTYPE_BF16;
        for (int64_t k = 0; k < t->numel; k++) {
            double a = elem_at(&got, k), b = elem_at(t, k);
            bool ok = is_float
                          ? (isnan(b) ? isnan(a) : (a == b || fabs(a - b) <= 1e-7 + 1e-3 * fabs(b)))
                          : a == b;
            if (!ok) {
                note("FAILED %s: output %d element %lld is %.9g, expected %.9g", name, i,
                     (long long)k, a, b);
                res = R_FAIL;
                break;
            }
        }
    }
done:
    for (int i = 0; i < MAX_IO; i++) {
        rlx_onnx_tensor_file_free(in[i]);
        rlx_onnx_tensor_file_free(want[i]);
        free(outs[i]);
    }
    rlx_onnx_runner_free(r);
    rlx_onnx_close(m);
    return res;
}

static void test_node_suite(void **state)
{
    (void)state;
    DIR *d = opendir(NODE_DIR);
    if (!d) {
        print_message("no %s: install libonnx-testdata (tools/setup.sh)\n", NODE_DIR);
        fail();
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "test_", 5) != 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            names = realloc(names, cap * sizeof *names);
            assert_non_null(names);
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    int pass = 0, failc = 0, skip = 0;
    for (size_t i = 0; i < n; i++) {
        char op[96];
        result r = run_case(NODE_DIR, names[i], op, sizeof op);
        op_count *c = count_for(op);
        if (r == R_PASS) {
            c->pass++;
            pass++;
        } else if (r == R_FAIL) {
            c->fail++;
            failc++;
        } else {
            c->skip++;
            skip++;
        }
        free(names[i]);
    }
    free(names);
    qsort(counts, (size_t)n_counts, sizeof counts[0], cmp_counts);
    printf("ONNX node tests on %s (libonnx-testdata, %s):\n", device, NODE_DIR);
    for (int i = 0; i < n_counts; i++)
        printf("  %-36s %3d passed, %3d failed, %3d skipped\n", counts[i].op, counts[i].pass,
               counts[i].fail, counts[i].skip);
    printf("unsupported or not run, by case:\n");
    for (int i = 0; i < n_notes; i++)
        if (strncmp(notes[i], "FAILED", 6) != 0)
            printf("  %s\n", notes[i]);
    printf("wrong results:\n");
    for (int i = 0; i < n_notes; i++)
        if (strncmp(notes[i], "FAILED", 6) == 0)
            printf("  %s\n", notes[i]);
    printf("total: %d passed, %d failed, %d skipped\n", pass, failc, skip);
    fflush(stdout);
    for (int i = 0; i < n_notes; i++)
        free(notes[i]);
    assert_int_equal(failc, 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "devices") == 0) {
#if RLX_HAVE_VULKAN
        device = "vulkan:0";
        rlx_session_params sp = rlx_session_default_params();
        sp.device = device;
        rlx_session *s = NULL;
        rlx_error *err = NULL;
        if (rlx_session_create(&sp, &s, &err) != RLX_OK) {
            printf("no Vulkan device: %s\n", rlx_error_message(err));
            rlx_error_free(err);
            return 77;
        }
        rlx_session_free(s);
#else
        printf("no Vulkan backend in this build\n");
        return 77;
#endif
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_suite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
