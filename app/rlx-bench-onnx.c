/* rlx bench onnx MODEL.onnx: an ONNX model's run time, after a first run
 * (which compiles its program and faults its arena in), as the median and
 * the fastest of the repetitions; tools/bench-isnet.sh puts the figures
 * beside ONNX Runtime's on the same input and threads. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/formats/onnx.h"
#include "engine/runtime/session.h"
#include "models/onnx/onnx-model.h"
#include "rlx-bench-ops.h"
#include "rlx-cli.h"
#include "rlx-npy.h"

#define MAX_INPUTS 16
#define MAX_REPS   1000

static const char usage[] =
    "usage: rlx bench onnx MODEL.onnx [--input NAME=FILE.npy ...] [options]\n"
    "Times an ONNX model on the CPU or a GPU: one run that compiles it, then N timed runs;\n"
    "prints each run's time, the median and the fastest.\n"
    "  --input NAME=FILE   a graph input (NumPy .npy); an input not given is filled with\n"
    "                      fixed pseudo-random values in [0, 1) at the model's own shape\n"
    "                      (which must then be fixed)\n"
    "  -r N                timed runs (default 3)\n"
    "  -t THREADS          CPU threads (default: one per core)\n"
    "  --device DEV        cpu (default), vulkan:N, cuda:N\n"
    "  --ops               one more run with the time per op kind\n"
    "  --json              the figures as one JSON object on stdout\n";

/* splitmix64: the same fill on every machine */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* CPU seconds of the whole process (every thread): on a shared machine the
 * wall time moves with the other jobs, this much less. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int rlx_bench_onnx_main(int argc, char **argv)
{
    const char *model = NULL, *device = "cpu";
    const char *in_names[MAX_INPUTS], *in_files[MAX_INPUTS];
    char in_buf[MAX_INPUTS][256];
    int n_in = 0, threads = 0;
    long reps = 3;
    bool json = false, ops = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool more = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--input") && more) {
            const char *v = argv[++i], *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1] || (size_t)(eq - v) >= sizeof in_buf[0])
                return rlx_cli_fail("bench onnx: --input takes NAME=FILE.npy, not '%s'", v);
            if (n_in == MAX_INPUTS)
                return rlx_cli_fail("bench onnx: at most %d --input", MAX_INPUTS);
            memcpy(in_buf[n_in], v, (size_t)(eq - v));
            in_buf[n_in][eq - v] = 0;
            in_names[n_in] = in_buf[n_in];
            in_files[n_in++] = eq + 1;
        } else if (!strcmp(a, "-r") && more) {
            if (!rlx_cli_parse_long(argv[++i], 1, MAX_REPS, &reps))
                return rlx_cli_fail("bench onnx: -r takes 1 to %d, not '%s'", MAX_REPS, argv[i]);
        } else if (!strcmp(a, "-t") && more) {
            if (rlx_cli_parse_threads("bench onnx", "-t", argv[++i], &threads))
                return 1;
        } else if (!strcmp(a, "--device") && more) {
            device = argv[++i];
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--ops")) {
            ops = true;
        } else if (a[0] == '-') {
            return rlx_cli_fail("bench onnx: unknown option '%s' (see rlx bench onnx --help)", a);
        } else if (!model) {
            model = a;
        } else {
            return rlx_cli_fail("bench onnx: more than one model given ('%s' and '%s')", model, a);
        }
    }
    if (!model)
        return rlx_cli_fail("bench onnx: no model given (see rlx bench onnx --help)");

    rlx_onnx_model *m = NULL;
    rlx_error *err = NULL;
    if (rlx_onnx_open(model, &m, &err) != RLX_OK) {
        int rc = rlx_cli_fail("bench onnx: %s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    int rc = 0;
    int32_t ni = rlx_onnx_n_inputs(m), no = 0;
    rlx_npy npys[MAX_INPUTS];
    memset(npys, 0, sizeof npys);
    rlx_onnx_input_shape shapes[MAX_INPUTS];
    const void *ins[MAX_INPUTS];
    void **outs = NULL;
    rlx_onnx_runner *r = NULL;
    double *times = NULL;
    char msg[1024];
    if (ni > MAX_INPUTS) {
        rc = rlx_cli_fail("bench onnx: the model has %d inputs; at most %d are supported", (int)ni,
                          MAX_INPUTS);
        goto done;
    }
    for (int32_t i = 0; i < ni; i++) {
        const rlx_onnx_value *v = rlx_onnx_input_at(m, i);
        int k = 0;
        while (k < n_in && strcmp(in_names[k], v->name))
            k++;
        if (k < n_in) {
            if (rlx_npy_read(in_files[k], &npys[i], msg, sizeof msg)) {
                rc = rlx_cli_fail("bench onnx: %s", msg);
                goto done;
            }
            if (npys[i].elem_type != v->elem_type || npys[i].rank > RLX_ONNX_IO_MAX_DIMS) {
                rc = rlx_cli_fail("bench onnx: %s does not hold the model's input '%s' (%s)",
                                  in_files[k], v->name, rlx_onnx_elem_type_name(v->elem_type));
                goto done;
            }
        } else {
            /* the model's own fixed shape, filled here */
            bool fixed = v->rank >= 0 && v->rank <= RLX_ONNX_IO_MAX_DIMS;
            int64_t n = 1;
            for (int d = 0; fixed && d < v->rank; d++) {
                fixed = v->dims[d] > 0 && v->dims[d] <= (int64_t)1 << 31 && n <= (int64_t)1 << 31;
                n *= v->dims[d];
            }
            size_t es = rlx_onnx_elem_size(v->elem_type);
            if (!fixed || n > (int64_t)1 << 31 || es == 0) {
                rc = rlx_cli_fail("bench onnx: the model's input '%s' has no fixed shape (or an "
                                  "element type this fill lacks): give it with --input %s=FILE.npy",
                                  v->name, v->name);
                goto done;
            }
            npys[i].elem_type = v->elem_type;
            npys[i].rank = v->rank;
            for (int d = 0; d < v->rank; d++)
                npys[i].dims[d] = v->dims[d];
            npys[i].numel = n;
            npys[i].n_bytes = (size_t)n * es;
            npys[i].data = calloc((size_t)(n ? n : 1), es);
            if (!npys[i].data) {
                rc = rlx_cli_fail("bench onnx: out of memory");
                goto done;
            }
            if (v->elem_type == RLX_ONNX_FLOAT) {
                uint64_t s = 0x5eed + (uint64_t)i;
                float *f = npys[i].data;
                for (int64_t e = 0; e < n; e++)
                    f[e] = (float)(mix(&s) >> 40) / (float)(1 << 24);
            }
        }
        shapes[i].name = v->name;
        shapes[i].rank = npys[i].rank;
        memcpy(shapes[i].dims, npys[i].dims, sizeof shapes[i].dims);
        ins[i] = npys[i].data;
    }
    rlx_onnx_runner_params p = rlx_onnx_runner_default_params();
    p.device = device;
    p.n_threads = threads;
    p.import.shapes = shapes;
    p.import.n_shapes = ni;
    double t0 = rlx_cli_now();
    if (rlx_onnx_runner_create(&p, m, &r, &err) != RLX_OK) {
        rc = rlx_cli_fail("bench onnx: %s: %s", model, rlx_error_message(err));
        goto done;
    }
    double t1 = rlx_cli_now();
    no = rlx_onnx_runner_n_outputs(r);
    outs = calloc((size_t)no + 1, sizeof *outs);
    times = calloc((size_t)reps, sizeof *times);
    for (int32_t i = 0; outs && i < no; i++) {
        const rlx_onnx_io *io = rlx_onnx_runner_output(r, i);
        outs[i] = calloc((size_t)(io->numel ? io->numel : 1), rlx_onnx_elem_size(io->elem_type));
        if (!outs[i]) {
            rc = rlx_cli_fail("bench onnx: out of memory");
            goto done;
        }
    }
    if (!outs || !times) {
        rc = rlx_cli_fail("bench onnx: out of memory");
        goto done;
    }
    double first = 0, cpu0 = 0;
    for (long k = -1; k < reps; k++) {
        if (k == 0)
            cpu0 = cpu_now();
        double a = rlx_cli_now();
        if (rlx_onnx_runner_run(r, ins, (void *const *)outs, &err) != RLX_OK) {
            rc = rlx_cli_fail("bench onnx: %s: %s", model, rlx_error_message(err));
            goto done;
        }
        double b = rlx_cli_now() - a;
        if (k < 0)
            first = b;
        else
            times[k] = b;
        if (!json && k >= 0)
            printf("run %ld: %.3f s\n", k + 1, b);
    }
    double cpu = (cpu_now() - cpu0) / (double)reps;
    qsort(times, (size_t)reps, sizeof *times, cmp_d);
    double med = reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "model", json_object_new_string(model));
        json_object_object_add(o, "device", json_object_new_string(device));
        json_object_object_add(o, "threads", json_object_new_int(threads));
        json_object_object_add(o, "runs", json_object_new_int64(reps));
        json_object_object_add(o, "compile_s", json_object_new_double(t1 - t0));
        json_object_object_add(o, "first_s", json_object_new_double(first));
        json_object_object_add(o, "median_s", json_object_new_double(med));
        json_object_object_add(o, "min_s", json_object_new_double(times[0]));
        json_object_object_add(o, "cpu_s_per_run", json_object_new_double(cpu));
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
    } else
        printf("rlx %s (%s, %d threads): compile %.2f s, first run %.3f s, median %.3f s, "
               "fastest %.3f s of %ld, CPU time %.3f s per run\n",
               model, device, threads, t1 - t0, first, med, times[0], reps, cpu);
    if (ops && !json) {
        rlx_session *s = rlx_onnx_runner_session(r);
        rlx_session_set_profiling(s, true);
        if (rlx_onnx_runner_run(r, ins, (void *const *)outs, &err) != RLX_OK) {
            rc = rlx_cli_fail("bench onnx: %s: %s", model, rlx_error_message(err));
            goto done;
        }
        rlx_session_op_profile prof[RLX_OP_COUNT];
        int32_t np = rlx_session_profile(s, prof, RLX_OP_COUNT);
        rlx_session_set_profiling(s, false);
        double total = 0;
        for (int32_t k = 0; k < np && k < RLX_OP_COUNT; k++)
            total += prof[k].ms;
        printf("time per op kind (one run, %.1f ms in all):\n", total);
        for (int32_t k = 0; k < np && k < RLX_OP_COUNT; k++)
            printf("  %-20s %5lld x %10.1f ms %5.1f%%\n", rlx_op_name(prof[k].op),
                   (long long)prof[k].count, prof[k].ms,
                   total > 0 ? 100.0 * prof[k].ms / total : 0.0);
    }
done:
    rlx_error_free(err);
    if (outs)
        for (int32_t i = 0; i < no; i++)
            free(outs[i]);
    free(outs);
    free(times);
    rlx_onnx_runner_free(r);
    for (int i = 0; i < MAX_INPUTS; i++)
        rlx_npy_free(&npys[i]);
    rlx_onnx_close(m);
    return rc;
}
