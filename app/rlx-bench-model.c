/* `rlx bench -m MODEL`: prompt-processing and generation speed of a GGUF
 * model, measured as llama.cpp's llama-bench measures it.
 *
 *   pp P: a prompt of P tokens evaluated from an empty cache in one batch
 *         (the runner is loaded with n_batch = P);
 *   tg N: N tokens decoded one at a time from an empty cache.
 *
 * The tokens are seeded pseudo-random valid ids. Each test runs once to warm
 * up, then r times; the table gives tokens per second as mean +/- standard
 * deviation over the r runs. Below it: generation against the bandwidth
 * floor (weight bytes read per generated token over a streaming-read
 * bandwidth measured in the same run), peak RSS against file + KV cache, and
 * on a GPU device (or with --ops) the time per op kind and where it ran. */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "app/rlx-bench-ops.h"
#include "backends/base/op.h"
#include "backends/cpu/cpu-features.h"
#include "engine/formats/gguf.h"
#include "engine/runtime/session.h"
#include "models/llm/llm.h"
#include "rlx-cli.h"
#include "rlx-threads.h"

static const char bench_usage[] =
    "usage: rlx bench -m MODEL [options]     a model's speed (llama-bench's pp/tg)\n"
    "       rlx bench ops [options]          the kernels' speed (rlx bench ops --help)\n"
    "       rlx bench whisper -m MODEL [-f AUDIO]   a Whisper model's speed (--help)\n"
    "       rlx bench sam -m MODEL [-i IMAGE]   a SAM model's encoder and clicks (--help)\n"
    "  -p N             prompt tokens of the pp test (default 512)\n"
    "  -n N             generated tokens of the tg test (default 128)\n"
    "  -r N             repetitions after one warm-up (default 3)\n"
    "  -t THREADS       CPU threads, 1 to the CPUs this process may use (default: one\n"
    "                   per core)\n"
    "  --device DEV     cpu (default), vulkan:N, cuda:N\n"
    "  --ctx N          context length (default: max(p + 1, n))\n"
    "  --kv-type f16|f32|q8_0  KV cache type (default f16)\n"
    "  --ops            time every op kind (default on a GPU device)\n"
    "  --unfused        CUDA: one launch per instruction, without the launch fusions\n"
    "                   (to time what they gain)\n"
    "  --plain-matvec   CUDA: every quantized matrix-vector product in its plain form,\n"
    "                   not the streamed one large products take (to time it)\n"
    "  --json           one JSON object instead of the table\n";

typedef struct {
    const char *model, *device;
    long p, n, r, threads, ctx;
    rlx_dtype kv;
    bool json, ops, unfused, plain_matvec;
} bench_opts;

/* Returns 0, -1 for --help, or the exit code after printing the error. */
static int parse(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){.p = 512, .n = 128, .r = 3, .kv = RLX_DTYPE_F16};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(bench_usage, stdout);
            return -1;
        }
        if (!strcmp(a, "--json")) {
            o->json = true;
            continue;
        }
        if (!strcmp(a, "--ops")) {
            o->ops = true;
            continue;
        }
        if (!strcmp(a, "--unfused")) {
            o->unfused = true;
            continue;
        }
        if (!strcmp(a, "--plain-matvec")) {
            o->plain_matvec = true;
            continue;
        }
        static const char *const known[] = {
            "-m", "--model",   "-p",       "--n-prompt", "-n", "--n-gen",  "-r", "--repetitions",
            "-t", "--threads", "--device", "--ctx",      "-c", "--kv-type"};
        bool is_known = false;
        for (size_t k = 0; k < sizeof known / sizeof *known; k++)
            is_known |= !strcmp(a, known[k]);
        if (!is_known)
            return rlx_cli_fail("bench: %s '%s' (see rlx bench --help)",
                                a[0] == '-' ? "unknown option" : "unexpected argument", a);
        if (i + 1 >= argc)
            return rlx_cli_fail("bench: %s needs a value (see rlx bench --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) {
            if (!rlx_cli_parse_long(v, 1, 1 << 20, &o->p))
                return rlx_cli_fail("bench: -p wants a number of prompt tokens >= 1, not '%s'", v);
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) {
            if (!rlx_cli_parse_long(v, 1, 1 << 20, &o->n))
                return rlx_cli_fail("bench: -n wants a number of tokens >= 1, not '%s'", v);
        } else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) {
            if (!rlx_cli_parse_long(v, 1, 1000, &o->r))
                return rlx_cli_fail("bench: -r wants a repetition count >= 1, not '%s'", v);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            int t, rc = rlx_cli_parse_threads("bench", a, v, &t);
            if (rc)
                return rc;
            o->threads = t;
        } else if (!strcmp(a, "--device"))
            o->device = v;
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
            if (!rlx_cli_parse_long(v, 2, INT32_MAX, &o->ctx))
                return rlx_cli_fail("bench: --ctx wants a number of tokens (>= 2), not '%s'", v);
        } else if (!strcmp(a, "--kv-type")) {
            if (!strcmp(v, "f16"))
                o->kv = RLX_DTYPE_F16;
            else if (!strcmp(v, "f32"))
                o->kv = RLX_DTYPE_F32;
            else if (!strcmp(v, "q8_0"))
                o->kv = RLX_DTYPE_Q8_0;
            else
                return rlx_cli_fail("bench: --kv-type is f16, f32 or q8_0, not '%s'", v);
        }
    }
    if (!o->model)
        return rlx_cli_fail("bench: no model; use -m MODEL.gguf (see rlx bench --help)");
    if (o->unfused && (!o->device || strncmp(o->device, "cuda", 4)))
        return rlx_cli_fail("bench: --unfused is for a CUDA device (--device cuda:N)");
    if (o->plain_matvec && (!o->device || strncmp(o->device, "cuda", 4)))
        return rlx_cli_fail("bench: --plain-matvec is for a CUDA device (--device cuda:N)");
    /* the runner's batch must be shorter than its context */
    long need = o->p + 1 > o->n ? o->p + 1 : o->n;
    if (o->ctx && o->ctx < need)
        return rlx_cli_fail("bench: --ctx %ld is too small for -p %ld / -n %ld (needs %ld)", o->ctx,
                            o->p, o->n, need);
    return 0;
}

/* ---- what the file holds ------------------------------------------------ */

typedef struct {
    uint64_t file_bytes, n_params, weight_bytes, token_bytes;
    char name[128], types[256];
    bool tied;
} model_facts;

static void fmt_types(const rlx_gguf *g, char *out, size_t cap)
{
    int count[RLX_DTYPE_COUNT] = {0};
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        if ((int)t->dtype >= 0 && t->dtype < RLX_DTYPE_COUNT)
            count[t->dtype]++;
    }
    out[0] = 0;
    size_t o = 0;
    /* most tensors first */
    for (;;) {
        int best = -1;
        for (int d = 0; d < RLX_DTYPE_COUNT; d++)
            if (count[d] > 0 && (best < 0 || count[d] > count[best]))
                best = d;
        if (best < 0)
            break;
        int k =
            snprintf(out + o, cap - o, "%s%s:%d", o ? " " : "", rlx_dtype_name(best), count[best]);
        if (k < 0 || (size_t)k >= cap - o)
            break;
        o += (size_t)k;
        count[best] = 0;
    }
}

/* Bytes of weights one generated token reads: every tensor once, except the
 * token embedding, of which the lookup reads one row, unless it is also the
 * output matrix (tied: no output.weight), which reads it whole. */
static rlx_status read_facts(const char *path, model_facts *f, rlx_error **err)
{
    memset(f, 0, sizeof *f);
    struct stat stb;
    if (stat(path, &stb) != 0)
        return rlx_error_set(err, RLX_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    f->file_bytes = (uint64_t)stb.st_size;
    rlx_gguf *g = NULL;
    rlx_status s = rlx_gguf_open(path, &g, err);
    if (s != RLX_OK)
        return s;
    f->tied = rlx_gguf_find_tensor(g, "output.weight") == NULL;
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        f->n_params += t->n_elements;
        f->weight_bytes += t->n_bytes;
        uint64_t read = t->n_bytes;
        if (!strcmp(t->name, "token_embd.weight") && t->n_dims >= 2 && t->ne[1] > 0) {
            uint64_t row = t->n_bytes / t->ne[1];
            read = f->tied ? t->n_bytes + row : row;
        }
        f->token_bytes += read;
    }
    const char *base = strrchr(path, '/');
    snprintf(f->name, sizeof f->name, "%s", base ? base + 1 : path);
    fmt_types(g, f->types, sizeof f->types);
    rlx_gguf_close(g);
    return RLX_OK;
}

/* ---- the tests ---------------------------------------------------------- */

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

static rlx_token rand_token(int32_t n_vocab)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (rlx_token)(g_rng % (uint64_t)n_vocab);
}

typedef struct {
    char name[32];
    int n_tokens;
    double mean, sd; /* tokens per second */
    double *samples; /* r of them */
} test_result;

static void summarize(test_result *t, int r)
{
    double sum = 0, sq = 0;
    for (int i = 0; i < r; i++)
        sum += t->samples[i];
    t->mean = sum / r;
    for (int i = 0; i < r; i++)
        sq += (t->samples[i] - t->mean) * (t->samples[i] - t->mean);
    t->sd = r > 1 ? sqrt(sq / (r - 1)) : 0.0;
}

/* One pp run: reset, then the whole prompt as one batch. */
static rlx_status run_pp(rlx_llm *m, const rlx_token *toks, int n, float *logits, double *secs,
                         rlx_error **err)
{
    rlx_llm_reset(m);
    double t0 = rlx_cli_now();
    rlx_status s = rlx_llm_eval(m, toks, (size_t)n, logits, err);
    *secs = rlx_cli_now() - t0;
    return s;
}

/* One tg run: reset, then n single-token evaluations. */
static rlx_status run_tg(rlx_llm *m, const rlx_token *toks, int n, float *logits, double *secs,
                         rlx_error **err)
{
    rlx_llm_reset(m);
    double t0 = rlx_cli_now();
    for (int i = 0; i < n; i++) {
        rlx_status s = rlx_llm_eval(m, toks + i, 1, logits, err);
        if (s != RLX_OK)
            return s;
    }
    *secs = rlx_cli_now() - t0;
    return RLX_OK;
}

/* One op kind's total on one device (a split model has two). */
typedef struct {
    rlx_session_op_profile p;
    const char *device;
} op_row;

static int cmp_prof(const void *a, const void *b)
{
    double x = ((const op_row *)a)->p.ms, y = ((const op_row *)b)->p.ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Append a session's profile to rows, labelled with its device. */
static int32_t add_profile(const rlx_session *s, const char *device, op_row *rows, int32_t n)
{
    rlx_session_op_profile p[RLX_OP_COUNT];
    int32_t k = rlx_session_profile(s, p, RLX_OP_COUNT);
    for (int32_t i = 0; i < k && i < RLX_OP_COUNT; i++)
        rows[n++] = (op_row){.p = p[i], .device = device};
    return n;
}

static double mib(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0);
}

int rlx_bench_model_main(int argc, char **argv)
{
    bench_opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;

    rlx_error *err = NULL;
    model_facts f;
    if (read_facts(o.model, &f, &err) != RLX_OK) {
        rc = rlx_cli_fail("bench: %s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    rlx_llm_params lp = rlx_llm_default_params();
    lp.device = o.device;
    lp.n_threads = (int)o.threads;
    lp.n_batch = (int32_t)o.p;
    lp.n_ctx = (int32_t)(o.ctx ? o.ctx : (o.p + 1 > o.n ? o.p + 1 : o.n));
    lp.kv_dtype = o.kv;
    lp.cuda_unfused = o.unfused;
    lp.cuda_plain_matvec = o.plain_matvec;
    rlx_llm *m = NULL;
    if (rlx_llm_load(o.model, &lp, &m, &err) != RLX_OK) {
        rc = rlx_cli_fail("bench: %s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    rlx_session *s = rlx_llm_session(m);
    rlx_device_info di;
    memset(&di, 0, sizeof di);
    if (rlx_session_device_info(s, &di, &err) != RLX_OK) {
        rlx_error_free(err);
        err = NULL;
        snprintf(di.id, sizeof di.id, "%s", o.device ? o.device : "cpu");
    }
    bool on_cpu = !strcmp(di.backend, "cpu") || !strcmp(di.id, "cpu");
    int threads = di.n_threads > 0 ? di.n_threads : (int)o.threads;
    rlx_cli_thread_note("bench", m, (int)o.threads, false);
    const int32_t n_vocab = rlx_llm_get_config(m)->n_vocab;

    rlx_token *prompt = malloc((size_t)o.p * sizeof *prompt);
    rlx_token *gen = malloc((size_t)o.n * sizeof *gen);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    test_result tests[2] = {{.n_tokens = (int)o.p}, {.n_tokens = (int)o.n}};
    tests[0].samples = calloc((size_t)o.r, sizeof(double));
    tests[1].samples = calloc((size_t)o.r, sizeof(double));
    if (!prompt || !gen || !logits || !tests[0].samples || !tests[1].samples) {
        rc = rlx_cli_fail("bench: out of memory");
        goto done;
    }
    for (long i = 0; i < o.p; i++)
        prompt[i] = rand_token(n_vocab);
    for (long i = 0; i < o.n; i++)
        gen[i] = rand_token(n_vocab);
    snprintf(tests[0].name, sizeof tests[0].name, "pp%ld", o.p);
    snprintf(tests[1].name, sizeof tests[1].name, "tg%ld", o.n);

    rlx_llm_decode_info dec0 = {0}, dec1 = {0};
    for (int t = 0; t < 2; t++)
        for (long r = -1; r < o.r; r++) { /* r = -1: the warm-up */
            if (t == 1 && r == 0)
                rlx_llm_decode_stats(m, &dec0);
            double secs = 0;
            rlx_status st = t == 0 ? run_pp(m, prompt, (int)o.p, logits, &secs, &err)
                                   : run_tg(m, gen, (int)o.n, logits, &secs, &err);
            if (st != RLX_OK) {
                rc = rlx_cli_fail("bench: %s: %s", tests[t].name, rlx_error_message(err));
                rlx_error_free(err);
                goto done;
            }
            if (r >= 0)
                tests[t].samples[r] = secs > 0 ? tests[t].n_tokens / secs : 0;
        }
    rlx_llm_decode_stats(m, &dec1);
    summarize(&tests[0], (int)o.r);
    summarize(&tests[1], (int)o.r);
    /* what the runs took: one thread where a step's work is below the cost
     * of waking the pool (a small model's decode) */
    int used[2] = {0, 0};
    rlx_llm_threads(m, &used[1], &used[0]);

    /* peak RSS before the bandwidth buffer below adds to it */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t peak_rss = (uint64_t)ru.ru_maxrss * 1024;
    rlx_session_memory_info mem = rlx_session_memory(s);

    /* per-op times: one more pp and tg run with profiling on, in the
     * device's session and, for a model split across it and the CPU, in the
     * CPU part's */
    rlx_session *cpu_part = rlx_llm_cpu_session(m);
    op_row prof[2 * RLX_OP_COUNT];
    int32_t n_prof = 0;
    if (o.ops || !on_cpu) {
        rlx_session_set_profiling(s, true);
        if (cpu_part)
            rlx_session_set_profiling(cpu_part, true);
        double secs;
        rlx_status st = run_pp(m, prompt, (int)o.p, logits, &secs, &err);
        if (st == RLX_OK)
            st = run_tg(m, gen, (int)o.n, logits, &secs, &err);
        if (st != RLX_OK) {
            rc = rlx_cli_fail("bench: timing the ops: %s", rlx_error_message(err));
            rlx_error_free(err);
            goto done;
        }
        n_prof = add_profile(s, di.id, prof, 0);
        rlx_session_set_profiling(s, false);
        if (cpu_part) {
            n_prof = add_profile(cpu_part, "cpu", prof, n_prof);
            rlx_session_set_profiling(cpu_part, false);
        }
        qsort(prof, (size_t)n_prof, sizeof *prof, cmp_prof);
    }

    /* The bandwidth floor: the memory bandwidth of a shared machine moves
     * by tens of percent within seconds, so after the timed runs (and the
     * peak RSS, which the read buffer would add to) each of r more tg runs
     * is put beside a streaming read with the same thread count just
     * before and just after it; the fraction is the median over those runs
     * of tok/s over (bandwidth / bytes per token), the bandwidth printed is
     * the median of the reads. */
    double bw = 0, floor_frac = 0;
    if (on_cpu) {
        rlx_threadpool *pool = NULL;
        const size_t bw_bytes = (size_t)256 << 20;
        uint64_t *bw_buf = rlx_bench_big_alloc(bw_bytes);
        double *bws = calloc((size_t)o.r, sizeof(double));
        double *fracs = calloc((size_t)o.r, sizeof(double));
        if (bw_buf && bws && fracs && rlx_threadpool_create(threads, &pool) == RLX_OK) {
            memset(bw_buf, 1, bw_bytes);
            (void)rlx_bench_read_bandwidth(pool, bw_buf, bw_bytes); /* warm-up */
            long done_runs = 0;
            for (long r = 0; r < o.r; r++) {
                double b0 = rlx_bench_read_bandwidth(pool, bw_buf, bw_bytes), secs = 0;
                if (run_tg(m, gen, (int)o.n, logits, &secs, &err) != RLX_OK || secs <= 0) {
                    rlx_error_free(err);
                    err = NULL;
                    break;
                }
                double b1 = rlx_bench_read_bandwidth(pool, bw_buf, bw_bytes);
                bws[r] = 0.5 * (b0 + b1);
                fracs[r] = (double)o.n / secs / (bws[r] * 1e9 / (double)f.token_bytes);
                done_runs++;
            }
            if (done_runs == o.r) {
                bw = rlx_bench_median(bws, (int)o.r);
                floor_frac = rlx_bench_median(fracs, (int)o.r);
            }
        }
        rlx_threadpool_free(pool);
        free(bw_buf);
        free(bws);
        free(fracs);
    }
    double floor_tps = bw > 0 ? bw * 1e9 / (double)f.token_bytes : 0;

    if (o.json) {
        json_object *j = json_object_new_object();
        json_object_object_add(j, "model", json_object_new_string(f.name));
        json_object_object_add(j, "file_bytes", json_object_new_int64((int64_t)f.file_bytes));
        json_object_object_add(j, "n_params", json_object_new_int64((int64_t)f.n_params));
        json_object_object_add(j, "types", json_object_new_string(f.types));
        json_object_object_add(j, "device", json_object_new_string(di.id));
        json_object_object_add(j, "device_name", json_object_new_string(di.name));
        json_object_object_add(j, "threads", json_object_new_int(threads));
        json_object_object_add(j, "usable_cores", json_object_new_int(rlx_cpu_usable_cores()));
        json_object_object_add(j, "n_ctx", json_object_new_int(rlx_llm_n_ctx(m)));
        json_object_object_add(j, "kv_type", json_object_new_string(rlx_dtype_name(o.kv)));
        if (o.unfused)
            json_object_object_add(j, "unfused", json_object_new_boolean(true));
        if (o.plain_matvec)
            json_object_object_add(j, "plain_matvec", json_object_new_boolean(true));
        json_object *arr = json_object_new_array();
        for (int t = 0; t < 2; t++) {
            json_object *e = json_object_new_object();
            json_object_object_add(e, "test", json_object_new_string(tests[t].name));
            json_object_object_add(e, "n_tokens", json_object_new_int(tests[t].n_tokens));
            if (used[t] > 0)
                json_object_object_add(e, "threads_used", json_object_new_int(used[t]));
            json_object_object_add(e, "tps_mean", json_object_new_double(tests[t].mean));
            json_object_object_add(e, "tps_sd", json_object_new_double(tests[t].sd));
            json_object *sa = json_object_new_array();
            for (long r = 0; r < o.r; r++)
                json_object_array_add(sa, json_object_new_double(tests[t].samples[r]));
            json_object_object_add(e, "tps_samples", sa);
            json_object_array_add(arr, e);
        }
        json_object_object_add(j, "tests", arr);
        json_object_object_add(j, "bytes_per_token", json_object_new_int64((int64_t)f.token_bytes));
        if (bw > 0) {
            json_object_object_add(j, "bandwidth_gbs", json_object_new_double(bw));
            json_object_object_add(j, "tg_floor_fraction", json_object_new_double(floor_frac));
        }
        if (!on_cpu && dec1.runs > dec0.runs) {
            /* a decode step on the GPU: device and host microseconds, launches */
            double n = (double)(dec1.runs - dec0.runs);
            json_object_object_add(
                j, "tg_device_us",
                json_object_new_double((double)(dec1.device_ns - dec0.device_ns) / n / 1e3));
            json_object_object_add(
                j, "tg_host_us",
                json_object_new_double((double)(dec1.prep_ns - dec0.prep_ns) / n / 1e3));
            json_object_object_add(
                j, "tg_host_submit_us",
                json_object_new_double((double)(dec1.submit_ns - dec0.submit_ns) / n / 1e3));
            json_object_object_add(j, "tg_launches", json_object_new_int64((int64_t)dec1.launches));
        }
        json_object_object_add(j, "peak_rss_bytes", json_object_new_int64((int64_t)peak_rss));
        json_object_object_add(j, "kv_bytes", json_object_new_int64((int64_t)mem.state_bytes));
        json_object_object_add(j, "arena_bytes", json_object_new_int64((int64_t)mem.arena_bytes));
        if (n_prof > 0) {
            json_object *ops = json_object_new_array();
            for (int32_t i = 0; i < n_prof; i++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "op", json_object_new_string(rlx_op_name(prof[i].p.op)));
                json_object_object_add(e, "count", json_object_new_int64(prof[i].p.count));
                json_object_object_add(e, "ms", json_object_new_double(prof[i].p.ms));
                json_object_object_add(e, "device", json_object_new_string(prof[i].device));
                json_object_array_add(ops, e);
            }
            json_object_object_add(j, "ops", ops);
        }
        puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY));
        json_object_put(j);
        goto done;
    }

    /* the table, llama-bench's columns plus the type mix */
    char size[32], params[32], thr[2][16], tps[2][48];
    if (f.file_bytes >= (1ull << 30))
        snprintf(size, sizeof size, "%.2f GiB", (double)f.file_bytes / (1ull << 30));
    else
        snprintf(size, sizeof size, "%.2f MiB", mib(f.file_bytes));
    if (f.n_params >= 1000000000ull)
        snprintf(params, sizeof params, "%.2f B", (double)f.n_params / 1e9);
    else if (f.n_params >= 1000000ull)
        snprintf(params, sizeof params, "%.2f M", (double)f.n_params / 1e6);
    else
        snprintf(params, sizeof params, "%.2f K", (double)f.n_params / 1e3);
    /* a run that took fewer threads than the device has shows "1/2" */
    for (int t = 0; t < 2; t++)
        if (used[t] > 0 && used[t] < threads)
            snprintf(thr[t], sizeof thr[t], "%d/%d", used[t], threads);
        else if (threads > 0)
            snprintf(thr[t], sizeof thr[t], "%d", threads);
        else
            snprintf(thr[t], sizeof thr[t], "-");
    for (int t = 0; t < 2; t++)
        snprintf(tps[t], sizeof tps[t], "%.2f ± %.2f", tests[t].mean, tests[t].sd);
    int wm = (int)strlen(f.name), wt = (int)strlen(f.types), wd = (int)strlen(di.id);
    wm = wm < 5 ? 5 : wm;
    wt = wt < 5 ? 5 : wt;
    wd = wd < 6 ? 6 : wd;
    printf("| %-*s | %10s | %10s | %-*s | %-*s | %7s | %8s | %20s |\n", wm, "model", "size",
           "params", wt, "types", wd, "device", "threads", "test", "t/s");
    printf("| ");
    for (int i = 0; i < wm; i++)
        putchar('-');
    printf(" | ---------: | ---------: | ");
    for (int i = 0; i < wt; i++)
        putchar('-');
    printf(" | ");
    for (int i = 0; i < wd; i++)
        putchar('-');
    printf(" | ------: | -------: | -------------------: |\n");
    for (int t = 0; t < 2; t++)
        /* "±" is two bytes and one column: one more byte of width */
        printf("| %-*s | %10s | %10s | %-*s | %-*s | %7s | %8s | %21s |\n", wm, f.name, size,
               params, wt, f.types, wd, di.id, thr[t], tests[t].name, tps[t]);
    printf("\n");
    printf("device: %s (%s), context %d, KV cache %s, runs: %ld after a warm-up%s%s\n", di.id,
           di.name, rlx_llm_n_ctx(m), rlx_dtype_name(o.kv), o.r,
           o.unfused ? ", unfused (one launch per instruction)" : "",
           o.plain_matvec ? ", plain matrix-vector products" : "");
    if (on_cpu) {
        rlx_cpu_budget b;
        rlx_cpu_budget_get(&b);
        printf("threads: %d of %d usable cores (affinity %d of %d CPUs on %d cores", threads,
               b.usable_cores, b.affinity_cpus, b.online_cpus, b.affinity_cores);
        if (b.quota_cpus > 0)
            printf(", cgroup quota %.2f CPUs", b.quota_cpus);
        printf(")");
        for (int t = 0; t < 2; t++)
            if (used[t] > 0 && used[t] < threads)
                printf("; %s ran on %d: its work per op is below what waking the pool costs",
                       tests[t].name, used[t]);
        printf("\n");
    }
    int32_t n_gpu = 0, n_layers = 0;
    if (!on_cpu) {
        rlx_llm_placement(m, &n_gpu, &n_layers);
        printf("placement: %d of %d decoder layers on %s%s\n", n_gpu, n_layers, di.id,
               n_gpu < n_layers ? ", the others on the CPU" : "");
    }
    if (!on_cpu && dec1.runs > dec0.runs && dec1.device_ns > dec0.device_ns && tests[1].mean > 0) {
        double n = (double)(dec1.runs - dec0.runs);
        double tok = 1e6 / tests[1].mean, dev = (double)(dec1.device_ns - dec0.device_ns) / n / 1e3,
               prep = (double)(dec1.prep_ns - dec0.prep_ns) / n / 1e3,
               sub = (double)(dec1.submit_ns - dec0.submit_ns) / n / 1e3;
        printf("%s per token: %.1f us, of which the device ran %.1f us (first to last command) "
               "and the host prepared the run for %.1f us (records %.1f, launch or replay call "
               "%.1f); %llu kernel launches\n",
               tests[1].name, tok, dev, prep, prep - sub, sub, (unsigned long long)dec1.launches);
        /* (with layers on the CPU, their time is in the rest too) */
        if (tok > dev + prep && n_gpu == n_layers)
            printf("  the other %.1f us of a token: the wait past the device's last command, the "
                   "logits read back, sampling\n",
                   tok - dev - prep);
    }
    if (bw > 0)
        printf("%s is %.0f%% of the bandwidth floor (%.3f GB/token, %.2f GB/s read beside "
               "%ld more runs; floor %.2f t/s)\n",
               tests[1].name, 100.0 * floor_frac, (double)f.token_bytes / 1e9, bw, o.r, floor_tps);
    else
        printf("bandwidth floor: not measured on %s (%.3f GB of weights read per token; divide "
               "the GPU's memory bandwidth by it)\n",
               di.id, (double)f.token_bytes / 1e9);
    uint64_t base = f.file_bytes + mem.state_bytes;
    char kvb[32], actb[32];
    printf("memory: peak RSS %.1f MiB; file %.1f MiB + KV cache %s = %.1f MiB (peak RSS is "
           "%.1f%% of it; activations %s)\n",
           mib(peak_rss), mib(f.file_bytes), rlx_format_bytes(mem.state_bytes, kvb, sizeof kvb),
           mib(base), 100.0 * (double)peak_rss / (double)base,
           rlx_format_bytes(mem.arena_bytes, actb, sizeof actb));
    if (n_prof > 0) {
        double total = 0;
        for (int32_t i = 0; i < n_prof; i++)
            total += prof[i].p.ms;
        printf("\nop times over one %s and one %s run (device each ran on):\n", tests[0].name,
               tests[1].name);
        printf("  %-16s %9s %12s %7s  %s\n", "op", "count", "total ms", "share", "device");
        for (int32_t i = 0; i < n_prof; i++)
            printf("  %-16s %9" PRId64 " %12.3f %6.1f%%  %s\n", rlx_op_name(prof[i].p.op),
                   prof[i].p.count, prof[i].p.ms, total > 0 ? 100.0 * prof[i].p.ms / total : 0.0,
                   prof[i].device);
        printf("  %-16s %9s %12.3f\n", "total", "", total);
    }

done:
    free(prompt);
    free(gen);
    free(logits);
    free(tests[0].samples);
    free(tests[1].samples);
    rlx_llm_free(m);
    return rc;
}
