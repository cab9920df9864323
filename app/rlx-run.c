/* rlx run MODEL.onnx --input NAME=FILE.npy ... --output DIR: any ONNX model
 * through the importer, each output written as DIR/<name>.npy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/rlx-cli.h"
#include "app/rlx-npy.h"
#include "engine/formats/onnx.h"
#include "models/onnx/onnx-model.h"

#define MAX_INPUTS 64

static const char run_usage[] =
    "usage: rlx run MODEL.onnx --input NAME=FILE.npy ... --output DIR [--device DEV]\n"
    "Runs an ONNX model on the inputs (NumPy .npy files, one per graph input; their\n"
    "shapes fix the model's symbolic dims) and writes every output to DIR/NAME.npy.\n"
    "  --device DEV    cpu (default), vulkan:N, cuda:N\n"
    "  --threads N     CPU threads (default: one per core)\n";

/* an output name as a file name: path separators and odd bytes replaced */
static void safe_name(const char *in, char *out, size_t cap)
{
    size_t k = 0;
    for (; *in && k + 1 < cap; in++) {
        char ch = *in;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.';
        out[k++] = ok ? ch : '_';
    }
    out[k] = '\0';
    if (k == 0 || out[0] == '.')
        snprintf(out, cap, "output");
}

int rlx_cmd_run(int argc, char **argv)
{
    const char *model = NULL, *outdir = NULL, *device = "cpu";
    const char *in_names[MAX_INPUTS], *in_files[MAX_INPUTS];
    int n_in = 0, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(run_usage, stdout);
            return 0;
        }
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "--input") || !strcmp(a, "-i")) {
            if (!has_val)
                return rlx_cli_fail("run: %s needs NAME=FILE.npy", a);
            char *eq = strchr(argv[++i], '=');
            if (!eq || eq == argv[i] || !eq[1])
                return rlx_cli_fail("run: '%s' is not NAME=FILE.npy", argv[i]);
            if (n_in == MAX_INPUTS)
                return rlx_cli_fail("run: more than %d inputs", MAX_INPUTS);
            *eq = '\0';
            in_names[n_in] = argv[i];
            in_files[n_in++] = eq + 1;
        } else if (!strcmp(a, "--output") || !strcmp(a, "-o")) {
            if (!has_val)
                return rlx_cli_fail("run: %s needs a folder", a);
            outdir = argv[++i];
        } else if (!strcmp(a, "--device")) {
            if (!has_val)
                return rlx_cli_fail("run: --device needs a device (cpu, vulkan:0, ...)");
            device = argv[++i];
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            if (!has_val)
                return rlx_cli_fail("run: %s needs a number", a);
            int rc = rlx_cli_parse_threads("run", a, argv[++i], &threads);
            if (rc)
                return rc;
        } else if (a[0] == '-' && a[1]) {
            return rlx_cli_fail("run: unknown option '%s' (see rlx run --help)", a);
        } else if (!model) {
            model = a;
        } else {
            return rlx_cli_fail("run: more than one model given ('%s' and '%s')", model, a);
        }
    }
    if (!model)
        return rlx_cli_fail("run: no model given (see rlx run --help)");
    if (!outdir)
        return rlx_cli_fail("run: no --output folder given (see rlx run --help)");

    rlx_onnx_model *m = NULL;
    rlx_error *err = NULL;
    if (rlx_onnx_open(model, &m, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    int rc = 0;
    int32_t ni = rlx_onnx_n_inputs(m);
    rlx_npy npys[MAX_INPUTS];
    memset(npys, 0, sizeof npys);
    rlx_onnx_input_shape shapes[MAX_INPUTS];
    const void *ins[MAX_INPUTS];
    void **outs = NULL;
    rlx_onnx_runner *r = NULL;
    char msg[1024];
    if (ni > MAX_INPUTS) {
        rc = rlx_cli_fail("run: the model has %d inputs; at most %d are supported", (int)ni,
                          MAX_INPUTS);
        goto done;
    }
    for (int k = 0; k < n_in; k++) {
        bool known = false;
        for (int32_t i = 0; i < ni; i++)
            known |= !strcmp(rlx_onnx_input_at(m, i)->name, in_names[k]);
        if (!known) {
            rc = rlx_cli_fail("run: the model has no input '%s'", in_names[k]);
            goto done;
        }
    }
    for (int32_t i = 0; i < ni; i++) {
        const rlx_onnx_value *v = rlx_onnx_input_at(m, i);
        int k = 0;
        while (k < n_in && strcmp(in_names[k], v->name))
            k++;
        if (k == n_in) {
            rc = rlx_cli_fail("run: no --input given for the model's input '%s'", v->name);
            goto done;
        }
        if (rlx_npy_read(in_files[k], &npys[i], msg, sizeof msg)) {
            rc = rlx_cli_fail("%s", msg);
            goto done;
        }
        if (npys[i].elem_type != v->elem_type) {
            rc = rlx_cli_fail("run: input '%s' is %s but %s holds %s", v->name,
                              rlx_onnx_elem_type_name(v->elem_type), in_files[k],
                              rlx_onnx_elem_type_name(npys[i].elem_type));
            goto done;
        }
        if (npys[i].rank > RLX_ONNX_IO_MAX_DIMS) {
            rc = rlx_cli_fail("run: %s has %d dims; at most %d are supported", in_files[k],
                              npys[i].rank, RLX_ONNX_IO_MAX_DIMS);
            goto done;
        }
        bool fits = v->rank < 0 || v->rank == npys[i].rank;
        for (int d = 0; fits && v->rank >= 0 && d < v->rank; d++)
            fits = v->dims[d] < 0 || v->dims[d] == npys[i].dims[d];
        if (!fits) {
            rc = rlx_cli_fail("run: %s's shape does not match the model's input '%s'", in_files[k],
                              v->name);
            goto done;
        }
        shapes[i].name = v->name;
        shapes[i].rank = npys[i].rank;
        memcpy(shapes[i].dims, npys[i].dims, sizeof shapes[i].dims);
        ins[i] = npys[i].data;
    }
    if (mkdir(outdir, 0777) != 0 && errno != EEXIST) {
        rc = rlx_cli_fail("run: cannot create %s: %s", outdir, strerror(errno));
        goto done;
    }
    rlx_onnx_runner_params p = rlx_onnx_runner_default_params();
    p.device = device;
    p.n_threads = threads;
    p.import.shapes = shapes;
    p.import.n_shapes = ni;
    double t0 = rlx_cli_now();
    if (rlx_onnx_runner_create(&p, m, &r, &err) != RLX_OK) {
        rc = rlx_cli_fail("%s: %s", model, rlx_error_message(err));
        goto done;
    }
    double t1 = rlx_cli_now();
    int32_t no = rlx_onnx_runner_n_outputs(r);
    outs = calloc((size_t)no + 1, sizeof *outs);
    for (int32_t i = 0; outs && i < no; i++) {
        const rlx_onnx_io *io = rlx_onnx_runner_output(r, i);
        outs[i] = calloc((size_t)(io->numel ? io->numel : 1), rlx_onnx_elem_size(io->elem_type));
        if (!outs[i]) {
            rc = rlx_cli_fail("run: out of memory");
            goto done;
        }
    }
    if (!outs) {
        rc = rlx_cli_fail("run: out of memory");
        goto done;
    }
    if (rlx_onnx_runner_run(r, ins, (void *const *)outs, &err) != RLX_OK) {
        rc = rlx_cli_fail("%s: %s", model, rlx_error_message(err));
        goto done;
    }
    double t2 = rlx_cli_now();
    for (int32_t i = 0; i < no; i++) {
        const rlx_onnx_io *io = rlx_onnx_runner_output(r, i);
        char fname[256], path[4096];
        safe_name(io->name, fname, sizeof fname);
        snprintf(path, sizeof path, "%s/%s.npy", outdir, fname);
        if (rlx_npy_write(path, io->elem_type, io->rank, io->dims, outs[i], msg, sizeof msg)) {
            rc = rlx_cli_fail("%s", msg);
            goto done;
        }
        printf("%s: %s [", path, rlx_onnx_elem_type_name(io->elem_type));
        for (int d = 0; d < io->rank; d++)
            printf("%s%lld", d ? ", " : "", (long long)io->dims[d]);
        printf("]\n");
    }
    fprintf(stderr, "rlx run: compiled in %.2f s, ran in %.3f s on %s\n", t1 - t0, t2 - t1, device);
done:
    rlx_error_free(err);
    if (outs)
        for (int32_t i = 0; i < rlx_onnx_runner_n_outputs(r); i++)
            free(outs[i]);
    free(outs);
    rlx_onnx_runner_free(r);
    for (int i = 0; i < MAX_INPUTS; i++)
        rlx_npy_free(&npys[i]);
    rlx_onnx_close(m);
    return rc;
}
