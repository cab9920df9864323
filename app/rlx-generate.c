/* rlx generate / rlx chat: run a GGUF language model from the terminal.
 *
 * Generation runs as a job on the engine's worker thread (engine/runtime/
 * worker.h, as in the app); this thread waits for it with SIGINT unblocked
 * only while it waits, so Ctrl+C cancels the reply within a token: rlx chat
 * goes back to its prompt, rlx generate prints its figures and exits 130.
 * Ctrl+C at the chat prompt ends the chat. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/runtime/worker.h"
#include "engine/template/chat-template.h"
#include "models/llm/llm.h"
#include "rlx-cli.h"
#include "rlx-threads.h"

/* The options generate and chat share; each command's help adds its own. */
#define COMMON_OPTIONS                                                                       \
    "  --temp T             temperature, >= 0 (0 = greedy; default %g)\n"                    \
    "  --top-k K --top-p P --min-p P  (defaults %d, %g, %g) --seed S\n"                      \
    "  --typical P --top-nsigma N\n"                                                         \
    "  --repeat-penalty R --repeat-last-n N (-1 = all) --frequency-penalty F\n"              \
    "  --presence-penalty P --dynatemp-range R --dynatemp-exp E\n"                           \
    "  --xtc-probability P --xtc-threshold T\n"                                              \
    "  --mirostat 0|1|2 --mirostat-ent TAU --mirostat-lr ETA\n"                              \
    "  --logit-bias ID+B    add B to token ID's logit (ID-B subtracts; ID-inf bans it;\n"    \
    "                       repeatable)\n"                                                   \
    "  --stop TEXT          stop when TEXT is generated (repeatable)\n"                      \
    "  --device DEV         cpu (default), vulkan:N, cuda:N\n"                               \
    "  --ctx N              context length (default min(model, 4096))\n"                     \
    "  --batch N            prefill chunk (default 64)\n"                                    \
    "  --kv-type f16|f32|q8_0  KV cache type (default f16)\n"                                \
    "  --memory-budget SIZE e.g. 6G, 512M\n"                                                 \
    "  --gpu-layers N       decoder layers on a GPU device: N >= 1 at most N, 0 none (the\n" \
    "                       embedding and output only), -1 as many as the budget holds\n"    \
    "                       (the default); the rest run on the CPU\n"                        \
    "  -t THREADS           CPU threads, 1 to the CPUs this process may use (default: one\n" \
    "                       per core)\n"                                                     \
    "  -v, --verbose        also print the CPU threads chosen and why\n"                     \
    "  --dry-multiplier M --dry-base B --dry-allowed-length N --dry-penalty-last-n N\n"      \
    "  --dry-breaker TEXT   DRY sequence breaker (repeatable; default \\n : \" *)\n"

static const char generate_usage[] =
    "usage: rlx generate -m MODEL -p TEXT [options]\n"
    "Continues TEXT. The generated text goes to stdout as it streams; timing goes to\n"
    "stderr. Ctrl+C stops it (exit 130).\n"
    "  -m MODEL             a .gguf file or a Hugging Face checkpoint folder\n"
    "  -p TEXT              the prompt\n"
    "  -n N                 tokens to generate (default %d; 0 or -1: until the model\n"
    "                       ends the text or the context is full)\n" COMMON_OPTIONS
    "  --no-bos             do not add BOS before the prompt\n"
    "  --context-shift      when the context is full, drop the oldest tokens and go on\n"
    "  --keep N             tokens at the start a context shift keeps\n";

static const char chat_usage[] =
    "usage: rlx chat -m MODEL [options]\n"
    "Chats over stdin with the model's own chat template: each line is a turn, the\n"
    "reply streams to stdout. Commands: /reset, /system TEXT, /stats, /quit.\n"
    "Ctrl+C stops a reply; at the prompt it ends the chat.\n"
    "  -m MODEL             a .gguf file or a Hugging Face checkpoint folder\n"
    "  -n N                 most tokens in one reply (default %d; 0 or -1: until the\n"
    "                       model ends it or the context is full)\n" COMMON_OPTIONS
    "  --context-shift      when the conversation outgrows the context, drop the oldest\n"
    "                       turns (the system prompt stays) and go on\n";

#define MAX_STOP 16
#define MAX_DRY  16
#define MAX_BIAS 64

typedef struct {
    const char *model, *prompt, *device;
    rlx_llm_params lp;
    rlx_llm_generate_params gp;
    const char *stop[MAX_STOP];
    const char *dry[MAX_DRY];
    rlx_sampler_logit_bias bias[MAX_BIAS];
    bool no_bos, verbose;
} options;

static bool parse_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end)
        return false;
    *out = v;
    return true;
}

/* The sampler's numeric fields, by llama.cpp's flag names, with the ranges
 * rlx_sampler_create accepts (temperature: >= 0 here, as a negative one
 * would only mean greedy), so that a bad value is refused before the model
 * loads, in the flag's own name. */
static const struct {
    const char *flag;
    size_t offset;
    bool is_int;
    double lo, hi; /* NAN: no bound on that side; an int's NAN hi: the sampler's history */
    bool lo_open, hi_open;
    const char *meaning; /* of the special values, or NULL */
} sampler_flags[] = {
#define F(flag, field, lo, lo_open, hi, hi_open, meaning)                                   \
    {                                                                                       \
        flag, offsetof(rlx_sampler_params, field), false, lo, hi, lo_open, hi_open, meaning \
    }
#define I(flag, field, lo, hi, meaning)                                                \
    {                                                                                  \
        flag, offsetof(rlx_sampler_params, field), true, lo, hi, false, false, meaning \
    }
    F("--temp", temperature, 0, false, NAN, false, "0 = greedy"),
    F("--dynatemp-range", dynatemp_range, 0, false, NAN, false, "0 = off"),
    F("--dynatemp-exp", dynatemp_exponent, 0, true, NAN, false, NULL),
    I("--top-k", top_k, 0, INT32_MAX, "0 = off"),
    F("--typical", typical_p, 0, true, 1, false, "1 = off"),
    F("--top-p", top_p, 0, true, 1, false, "1 = off"),
    F("--min-p", min_p, 0, false, 1, false, "0 = off"),
    F("--top-nsigma", top_n_sigma, NAN, false, NAN, false, "<= 0 = off"),
    F("--xtc-probability", xtc_probability, 0, false, 1, false, "0 = off"),
    F("--xtc-threshold", xtc_threshold, 0, true, 1, false, NULL),
    I("--repeat-last-n", penalty_last_n, -1, NAN, "-1 = all, 0 = off"),
    F("--repeat-penalty", repeat_penalty, 0, true, NAN, false, "1 = off"),
    F("--frequency-penalty", frequency_penalty, NAN, false, NAN, false, "0 = off"),
    F("--presence-penalty", presence_penalty, NAN, false, NAN, false, "0 = off"),
    F("--dry-multiplier", dry_multiplier, 0, false, NAN, false, "0 = off"),
    F("--dry-base", dry_base, 1, false, NAN, false, NULL),
    I("--dry-allowed-length", dry_allowed_length, 1, INT32_MAX, NULL),
    I("--dry-penalty-last-n", dry_penalty_last_n, -1, NAN, "-1 = all, 0 = off"),
    I("--mirostat", mirostat, 0, 2, "0 = off"),
    F("--mirostat-ent", mirostat_tau, 0, true, NAN, false, NULL),
    F("--mirostat-lr", mirostat_eta, 0, true, NAN, false, NULL),
#undef F
#undef I
};

/* "from 0", "above 0", "in (0, 1]", or "" when any number goes. */
static void describe_range(size_t i, double lo, double hi, char *buf, size_t cap)
{
    if (hi >= INT32_MAX)
        hi = NAN; /* an int field's "no upper bound" */
    if (!isnan(lo) && !isnan(hi))
        snprintf(buf, cap, " in %c%g, %g%c", sampler_flags[i].lo_open ? '(' : '[', lo, hi,
                 sampler_flags[i].hi_open ? ')' : ']');
    else if (!isnan(lo))
        snprintf(buf, cap, " %s %g", sampler_flags[i].lo_open ? ">" : ">=", lo);
    else
        buf[0] = 0;
}

/* -1 when flag is not a sampler field, 0 when v was stored, else the exit
 * code after printing the error. */
static int parse_sampler_flag(const char *cmd, const char *flag, const char *v,
                              rlx_sampler_params *sp)
{
    for (size_t i = 0; i < sizeof sampler_flags / sizeof *sampler_flags; i++) {
        if (strcmp(flag, sampler_flags[i].flag))
            continue;
        double lo = sampler_flags[i].lo, hi = sampler_flags[i].hi;
        if (sampler_flags[i].is_int && isnan(hi))
            hi = sp->history_size; /* the windows reach back at most this far */
        char range[64], meaning[64] = "";
        describe_range(i, lo, hi, range, sizeof range);
        if (sampler_flags[i].meaning)
            snprintf(meaning, sizeof meaning, " (%s)", sampler_flags[i].meaning);
        char *field = (char *)sp + sampler_flags[i].offset;
        if (sampler_flags[i].is_int) {
            long n;
            if (!rlx_cli_parse_long(v, (long)lo, (long)hi, &n))
                return rlx_cli_fail("%s: %s wants a whole number%s%s, not '%s'", cmd, flag, range,
                                    meaning, v);
            int32_t n32 = (int32_t)n;
            memcpy(field, &n32, sizeof n32);
        } else {
            float f;
            if (!parse_float(v, &f) || !isfinite(f))
                return rlx_cli_fail("%s: %s wants a number%s%s, not '%s'", cmd, flag, range,
                                    meaning, v);
            bool ok = (isnan(lo) || (sampler_flags[i].lo_open ? f > lo : f >= lo)) &&
                      (isnan(hi) || (sampler_flags[i].hi_open ? f < hi : f <= hi));
            if (!ok)
                return rlx_cli_fail("%s: %s %s is out of range: it must be%s%s", cmd, flag, v,
                                    range, meaning);
            memcpy(field, &f, sizeof f);
        }
        return 0;
    }
    return -1;
}

/* "ID+BIAS" or "ID-BIAS" (llama.cpp's --logit-bias form; "ID-inf" bans). */
static bool parse_logit_bias(const char *v, rlx_sampler_logit_bias *out)
{
    char *end;
    errno = 0;
    long id = strtol(v, &end, 10);
    if (errno || end == v || id < 0 || id > INT32_MAX || (*end != '+' && *end != '-'))
        return false;
    float b;
    if (!parse_float(end, &b) || isnan(b) || b == INFINITY)
        return false;
    out->token = (int32_t)id;
    out->bias = b;
    return true;
}

/* The options that take a value (the sampler's are in sampler_flags). */
static const char *const value_flags[] = {
    "-m",
    "--model",
    "-p",
    "--prompt",
    "-n",
    "--n-predict",
    "--seed",
    "--stop",
    "--keep",
    "--logit-bias",
    "--dry-breaker",
    "--device",
    "--gpu-layers",
    "--ctx",
    "-c",
    "--batch",
    "-b",
    "--kv-type",
    "--memory-budget",
    "-t",
    "--threads",
};

static bool takes_value(const char *a)
{
    for (size_t i = 0; i < sizeof value_flags / sizeof *value_flags; i++)
        if (!strcmp(a, value_flags[i]))
            return true;
    for (size_t i = 0; i < sizeof sampler_flags / sizeof *sampler_flags; i++)
        if (!strcmp(a, sampler_flags[i].flag))
            return true;
    return false;
}

/* Returns 0 on success, -1 after printing the help, else the exit code
 * (after printing the error). */
static int parse_args(const char *cmd, int argc, char **argv, options *o)
{
    bool chat = !strcmp(cmd, "chat");
    memset(o, 0, sizeof *o);
    o->lp = rlx_llm_default_params();
    o->gp = chat ? rlx_llm_chat_default_params() : rlx_llm_generate_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            /* the defaults shown are the engine's own, as the app's settings are */
            rlx_llm_generate_params d =
                chat ? rlx_llm_chat_default_params() : rlx_llm_generate_default_params();
            printf(chat ? chat_usage : generate_usage, (int)d.max_tokens,
                   (double)d.sampler.temperature, (int)d.sampler.top_k, (double)d.sampler.top_p,
                   (double)d.sampler.min_p);
            return -1;
        }
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            o->verbose = true;
            continue;
        }
        if (!strcmp(a, "--context-shift")) {
            o->gp.context_shift = true;
            continue;
        }
        if (chat && (!strcmp(a, "-p") || !strcmp(a, "--prompt") || !strcmp(a, "--no-bos") ||
                     !strcmp(a, "--keep")))
            return rlx_cli_fail("chat: %s is an option of rlx generate; chat reads its turns from "
                                "stdin (see rlx chat --help)",
                                a);
        if (!strcmp(a, "--no-bos")) {
            o->no_bos = true;
            continue;
        }
        if (a[0] != '-' || !a[1])
            return rlx_cli_fail("%s: unexpected argument '%s' (see rlx %s --help)", cmd, a, cmd);
        if (!takes_value(a))
            return rlx_cli_fail("%s: unknown option '%s' (see rlx %s --help)", cmd, a, cmd);
        if (i + 1 >= argc)
            return rlx_cli_fail("%s: %s needs a value (see rlx %s --help)", cmd, a, cmd);
        const char *v = argv[++i];
        long n;
        int rc;
        uint64_t sz;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt"))
            o->prompt = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (!rlx_cli_parse_long(v, -1, INT32_MAX, &n))
                return rlx_cli_fail("%s: -n wants a number of tokens (0 or -1: until the end of "
                                    "the text or a full context), not '%s'",
                                    cmd, v);
            o->gp.max_tokens = (int32_t)n;
        } else if ((rc = parse_sampler_flag(cmd, a, v, &o->gp.sampler)) >= 0) {
            if (rc)
                return rc;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-')
                return rlx_cli_fail("%s: --seed wants a whole number >= 0, not '%s'", cmd, v);
            o->gp.sampler.seed = s;
        } else if (!strcmp(a, "--stop")) {
            if (o->gp.n_stop >= MAX_STOP)
                return rlx_cli_fail("%s: at most %d --stop strings", cmd, MAX_STOP);
            if (!*v)
                return rlx_cli_fail("%s: --stop wants a text, not an empty one", cmd);
            o->stop[o->gp.n_stop++] = v;
        } else if (!strcmp(a, "--keep")) {
            if (!rlx_cli_parse_long(v, 0, INT32_MAX, &n))
                return rlx_cli_fail("%s: --keep wants a number of tokens >= 0, not '%s'", cmd, v);
            o->gp.n_keep = (int32_t)n;
        } else if (!strcmp(a, "--logit-bias")) {
            if (o->gp.sampler.n_logit_bias >= MAX_BIAS)
                return rlx_cli_fail("%s: at most %d --logit-bias values", cmd, MAX_BIAS);
            if (!parse_logit_bias(v, &o->bias[o->gp.sampler.n_logit_bias]))
                return rlx_cli_fail("%s: --logit-bias wants TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. "
                                    "15043+1, 2-inf), not '%s'",
                                    cmd, v);
            o->gp.sampler.n_logit_bias++;
        } else if (!strcmp(a, "--dry-breaker")) {
            if (o->gp.n_dry_breakers >= MAX_DRY)
                return rlx_cli_fail("%s: at most %d --dry-breaker strings", cmd, MAX_DRY);
            o->dry[o->gp.n_dry_breakers++] = v;
        } else if (!strcmp(a, "--device"))
            o->lp.device = v;
        else if (!strcmp(a, "--gpu-layers")) {
            /* the engine's 0 is "as many as fit" and < 0 is "none": the flag
             * follows llama.cpp's -ngl, where 0 is none */
            if (!rlx_cli_parse_long(v, -1, INT32_MAX, &n))
                return rlx_cli_fail("%s: --gpu-layers wants a layer count: N >= 1, 0 (none) or "
                                    "-1 (as many as the budget holds), not '%s'",
                                    cmd, v);
            o->lp.gpu_layers = n == 0 ? -1 : n == -1 ? 0 : (int32_t)n;
        } else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
            if (!rlx_cli_parse_long(v, 2, INT32_MAX, &n))
                return rlx_cli_fail("%s: --ctx wants a number of tokens >= 2, not '%s'", cmd, v);
            o->lp.n_ctx = (int32_t)n;
        } else if (!strcmp(a, "--batch") || !strcmp(a, "-b")) {
            if (!rlx_cli_parse_long(v, 1, 65536, &n))
                return rlx_cli_fail("%s: --batch wants a number of tokens from 1 to 65536, not "
                                    "'%s'",
                                    cmd, v);
            o->lp.n_batch = (int32_t)n;
        } else if (!strcmp(a, "--kv-type")) {
            if (!strcmp(v, "f16"))
                o->lp.kv_dtype = RLX_DTYPE_F16;
            else if (!strcmp(v, "f32"))
                o->lp.kv_dtype = RLX_DTYPE_F32;
            else if (!strcmp(v, "q8_0"))
                o->lp.kv_dtype = RLX_DTYPE_Q8_0;
            else
                return rlx_cli_fail("%s: --kv-type is f16, f32 or q8_0, not '%s'", cmd, v);
        } else if (!strcmp(a, "--memory-budget")) {
            if (!rlx_cli_parse_size(v, &sz) || !sz)
                return rlx_cli_fail("%s: --memory-budget wants a size like 6G or 512M, not '%s'",
                                    cmd, v);
            o->lp.memory_budget = sz;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if ((rc = rlx_cli_parse_threads(cmd, a, v, &o->lp.n_threads)))
                return rc;
        }
    }
    o->gp.stop = o->stop;
    if (o->gp.sampler.n_logit_bias)
        o->gp.sampler.logit_bias = o->bias;
    if (o->gp.n_dry_breakers)
        o->gp.dry_breakers = o->dry;
    if (!o->model)
        return rlx_cli_fail("%s: no model; use -m MODEL.gguf (see rlx %s --help)", cmd, cmd);
    return 0;
}

static bool print_piece(void *user, const rlx_llm_piece *p)
{
    FILE *f = user;
    fwrite(p->text, 1, p->len, f);
    fflush(f);
    return true;
}

/* ---- generation on the worker thread, Ctrl+C to stop ------------------- */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

typedef struct {
    rlx_worker *w;
    int done_pipe[2]; /* on_done writes a byte: the waiting thread wakes */
    rlx_status status;
    char *message;
    sigset_t sigint;
} runner;

typedef struct {
    rlx_llm *m;
    const rlx_token *ids;
    size_t n;
    const rlx_llm_generate_params *gp;
    rlx_llm_token_fn cb;
    void *user;
    rlx_llm_stats *stats;
} gen_job;

static rlx_status gen_job_run(rlx_worker *w, void *data, rlx_error **err)
{
    (void)w;
    gen_job *j = data;
    return rlx_llm_generate(j->m, j->ids, j->n, j->gp, j->cb, j->user, j->stats, NULL, NULL, err);
}

static void runner_done(void *user, uint64_t job, rlx_status status, const char *message)
{
    (void)job;
    runner *r = user;
    r->status = status;
    r->message = message ? strdup(message) : NULL;
    ssize_t k;
    do
        k = write(r->done_pipe[1], "", 1);
    while (k < 0 && errno == EINTR);
}

/* SIGINT goes to our handler (no SA_RESTART, so a read at the chat prompt
 * returns) and is blocked in this thread, and so in the worker it starts,
 * except while waiting. */
static int runner_start(runner *r)
{
    memset(r, 0, sizeof *r);
    if (pipe(r->done_pipe))
        return rlx_cli_fail("cannot create a pipe: %s", strerror(errno));
    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigemptyset(&r->sigint);
    sigaddset(&r->sigint, SIGINT);
    pthread_sigmask(SIG_BLOCK, &r->sigint, NULL);
    rlx_worker_callbacks cb = {.on_done = runner_done, .user = r};
    rlx_error *err = NULL;
    if (rlx_worker_create(NULL, &cb, &r->w, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    return 0;
}

static void runner_stop(runner *r)
{
    rlx_worker_free(r->w);
    close(r->done_pipe[0]);
    close(r->done_pipe[1]);
    pthread_sigmask(SIG_UNBLOCK, &r->sigint, NULL);
    signal(SIGINT, SIG_DFL);
}

/* Runs the job and waits for it; a Ctrl+C meanwhile cancels it (the reply
 * ends early with stats->stop RLX_LLM_STOP_CANCELLED) and sets *stopped. */
static rlx_status runner_generate(runner *r, gen_job *j, bool *stopped, rlx_error **err)
{
    *stopped = false;
    interrupted = 0;
    uint64_t id = rlx_worker_submit(r->w, gen_job_run, j, NULL);
    if (!id)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "cannot queue the generation");
    sigset_t waiting;
    pthread_sigmask(SIG_BLOCK, NULL, &waiting);
    sigdelset(&waiting, SIGINT);
    struct pollfd pf = {.fd = r->done_pipe[0], .events = POLLIN};
    for (;;) {
        int k = ppoll(&pf, 1, NULL, &waiting);
        if (k > 0 || (k < 0 && errno != EINTR))
            break; /* done (or ppoll failed: the read below waits) */
        if (interrupted && !*stopped) {
            *stopped = true;
            rlx_llm_cancel(j->m);
            rlx_worker_cancel(r->w, id);
        }
    }
    char byte;
    while (read(r->done_pipe[0], &byte, 1) < 0 && errno == EINTR)
        ;
    interrupted = 0; /* this Ctrl+C was for the reply, not for the prompt after it */
    rlx_status st = r->status;
    if (st != RLX_OK)
        rlx_error_set(err, st, "%s", r->message ? r->message : "generation failed");
    free(r->message);
    r->message = NULL;
    return st;
}

/* fgets with SIGINT let through: NULL at end of input or on Ctrl+C. */
static char *read_line(runner *r, char *line, int cap)
{
    pthread_sigmask(SIG_UNBLOCK, &r->sigint, NULL);
    char *got = interrupted ? NULL : fgets(line, cap, stdin);
    pthread_sigmask(SIG_BLOCK, &r->sigint, NULL);
    return interrupted ? NULL : got;
}

static int load(const char *cmd, options *o, rlx_llm **m)
{
    rlx_error *err = NULL;
    if (rlx_llm_load(o->model, &o->lp, m, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s: %s", cmd, rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    rlx_llm_placement_info pl = rlx_llm_get_placement(*m);
    rlx_cli_thread_note(cmd, *m, o->lp.n_threads, o->verbose);
    if (pl.on_gpu && pl.n_gpu_layers < pl.n_layers)
        fprintf(stderr, "%s: %d of %d layers on the GPU (%.1f MB), the rest on the CPU (%.1f MB)\n",
                pl.device, pl.n_gpu_layers, pl.n_layers, pl.device_bytes / 1e6, pl.cpu_bytes / 1e6);
    else if (pl.on_gpu)
        fprintf(stderr, "%s: all %d layers on the GPU (%.1f MB)\n", pl.device, pl.n_layers,
                pl.device_bytes / 1e6);
    return 0;
}

static bool g_verbose; /* -v: print_stats adds the threads the runs used */

static void print_stats(const rlx_llm *m, const rlx_llm_stats *st)
{
    fprintf(stderr,
            "prompt: %d tokens (%d reused) in %.1f ms (%.1f tok/s); generated %d tokens in %.1f "
            "ms (%.1f tok/s); context %d/%d",
            st->n_prompt, st->n_reused, st->prefill_ms, st->prefill_tps, st->n_generated,
            st->decode_ms, st->decode_tps, st->n_past, rlx_llm_n_ctx(m));
    if (st->n_shifts)
        fprintf(stderr, " (%d context shifts dropped %d tokens)", st->n_shifts, st->n_dropped);
    fputc('\n', stderr);
    if (g_verbose)
        rlx_cli_thread_use(m);
}

int rlx_cmd_generate(int argc, char **argv)
{
    options o;
    int rc = parse_args("generate", argc, argv, &o);
    g_verbose = o.verbose;
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!o.prompt)
        return rlx_cli_fail("generate: no prompt; use -p TEXT");
    rlx_llm *m = NULL;
    if ((rc = load("generate", &o, &m)))
        return rc;
    rlx_error *err = NULL;
    rlx_token *ids = NULL;
    size_t n = 0;
    if (rlx_llm_tokenize(m, o.prompt, !o.no_bos, false, &ids, &n, &err) != RLX_OK) {
        rc = rlx_cli_fail("generate: %s", rlx_error_message(err));
        goto out;
    }
    rlx_llm_stats st;
    runner r;
    if ((rc = runner_start(&r)))
        goto out;
    gen_job j = {
        .m = m, .ids = ids, .n = n, .gp = &o.gp, .cb = print_piece, .user = stdout, .stats = &st};
    bool stopped;
    rlx_status gs = runner_generate(&r, &j, &stopped, &err);
    runner_stop(&r);
    fputc('\n', stdout);
    fflush(stdout);
    if (gs != RLX_OK) {
        rc = rlx_cli_fail("generate: %s", rlx_error_message(err));
        goto out;
    }
    print_stats(m, &st);
    if (!stopped && st.stop == RLX_LLM_STOP_CONTEXT)
        fprintf(stderr,
                "(stopped: the context of %d tokens is full; a larger --ctx or --context-shift "
                "goes on)\n",
                rlx_llm_n_ctx(m));
    if (stopped) {
        fprintf(stderr, "(stopped by Ctrl+C)\n");
        rc = 130;
    }
out:
    rlx_error_free(err);
    free(ids);
    rlx_llm_free(m);
    return rc;
}

/* ---- chat --------------------------------------------------------------- */

typedef struct {
    char *text;
    size_t len, cap;
} strbuf;

static bool collect(void *user, const rlx_llm_piece *pc)
{
    strbuf *b = user;
    const char *piece = pc->text;
    size_t len = pc->len;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    if (b->len + len + 1 > b->cap) {
        size_t cap = (b->len + len + 1) * 2;
        char *p = realloc(b->text, cap);
        if (!p)
            return false;
        b->text = p;
        b->cap = cap;
    }
    memcpy(b->text + b->len, piece, len);
    b->len += len;
    b->text[b->len] = 0;
    return true;
}

#define MAX_MSGS 1024

static rlx_status render(rlx_llm *m, const char *system, const rlx_chat_message *msgs, size_t n,
                         bool gen, rlx_token **ids, size_t *n_ids, rlx_error **err)
{
    rlx_chat_message all[MAX_MSGS];
    size_t n_all = 0;
    if (system)
        all[n_all++] = (rlx_chat_message){.role = "system", .content = system};
    for (size_t i = 0; i < n; i++)
        all[n_all++] = msgs[i];
    return rlx_llm_chat_prompt(m, all, n_all, gen, ids, n_ids, err);
}

/* The prompt of the conversation. With --context-shift, the oldest
 * user/assistant pairs are dropped from the message list (the system prompt
 * and the latest user turn stay) until the prompt leaves room for a reply
 * (a quarter of the context, or -n when smaller); o->gp.n_keep is set to the
 * system prompt's tokens so a shift during the reply keeps them too. */
static rlx_status chat_fit(rlx_llm *m, options *o, const char *system, rlx_chat_message *msgs,
                           size_t *n_msgs, rlx_token **ids, size_t *n, rlx_error **err)
{
    rlx_status st = render(m, system, msgs, *n_msgs, true, ids, n, err);
    size_t ctx = (size_t)rlx_llm_n_ctx(m);
    if (st == RLX_OK && !o->gp.context_shift && *n >= ctx) {
        /* no room left for even one token of the reply: say what fills the
         * context and what to do, and let the chat go on */
        rlx_token *hist = NULL;
        size_t n_hist = 0;
        if (render(m, system, msgs, *n_msgs - 1, false, &hist, &n_hist, NULL) != RLX_OK)
            n_hist = 0;
        free(hist);
        free(*ids);
        *ids = NULL;
        if (*n_msgs == 1) /* nothing to drop: only a larger context helps */
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "this message does not fit: in the chat template%s it is %zu "
                                 "tokens, and the context holds %zu; a larger --ctx or a shorter "
                                 "message",
                                 system ? ", with the system prompt" : "", *n, ctx);
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "this turn does not fit: with the %zu earlier messages (%zu tokens%s) "
                             "the prompt is %zu tokens, and the context holds %zu; /reset to "
                             "start over, or run rlx chat with --context-shift to drop the "
                             "oldest turns",
                             *n_msgs - 1, n_hist, system ? ", the system prompt included" : "", *n,
                             ctx);
    }
    if (st != RLX_OK || !o->gp.context_shift)
        return st;
    size_t reserve = ctx / 4;
    if (o->gp.max_tokens > 0 && (size_t)o->gp.max_tokens < reserve)
        reserve = (size_t)o->gp.max_tokens;
    size_t dropped = 0;
    while (*n + reserve > ctx && *n_msgs > 1) {
        /* the oldest turn: a user message and the assistant's reply to it */
        size_t k = *n_msgs >= 3 && !strcmp(msgs[1].role, "assistant") ? 2 : 1;
        for (size_t i = 0; i < k; i++)
            free((char *)msgs[i].content);
        memmove(msgs, msgs + k, (*n_msgs - k) * sizeof *msgs);
        *n_msgs -= k;
        dropped += k;
        free(*ids);
        *ids = NULL;
        if ((st = render(m, system, msgs, *n_msgs, true, ids, n, err)) != RLX_OK)
            return st;
    }
    if (dropped)
        fprintf(stderr, "(context full: dropped the oldest %zu messages)\n", dropped);
    o->gp.n_keep = 0;
    if (system) {
        rlx_token *sys = NULL;
        size_t ns = 0, common = 0;
        if (render(m, system, NULL, 0, false, &sys, &ns, err) != RLX_OK) {
            rlx_error_clear(err);
            return RLX_OK;
        }
        while (common < ns && common < *n && sys[common] == (*ids)[common])
            common++;
        free(sys);
        o->gp.n_keep = (int32_t)common;
    }
    return RLX_OK;
}

int rlx_cmd_chat(int argc, char **argv)
{
    options o;
    int rc = parse_args("chat", argc, argv, &o);
    g_verbose = o.verbose;
    if (rc)
        return rc < 0 ? 0 : rc;
    rlx_llm *m = NULL;
    if ((rc = load("chat", &o, &m)))
        return rc;
    rlx_error *err = NULL;
    rlx_chat_message *msgs = calloc(MAX_MSGS, sizeof *msgs);
    char *system = NULL;
    size_t n_msgs = 0;
    rlx_llm_stats last = {0};
    char line[16384];
    runner r;
    bool running = false;
    if (!msgs) {
        rc = rlx_cli_fail("chat: out of memory");
        goto out;
    }
    if ((rc = runner_start(&r)))
        goto out;
    running = true;
    fprintf(stderr,
            "%s loaded; context %d tokens. /reset, /system TEXT, /stats, /quit; Ctrl+C stops a "
            "reply\n",
            o.model, rlx_llm_n_ctx(m));
    for (;;) {
        fputs("> ", stderr);
        fflush(stderr);
        if (!read_line(&r, line, sizeof line)) {
            fputc('\n', stderr);
            break;
        }
        size_t L = strlen(line);
        while (L && (line[L - 1] == '\n' || line[L - 1] == '\r'))
            line[--L] = 0;
        if (!L)
            continue;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit"))
            break;
        if (!strcmp(line, "/reset")) {
            for (size_t i = 0; i < n_msgs; i++)
                free((char *)msgs[i].content);
            n_msgs = 0;
            rlx_llm_reset(m);
            fprintf(stderr, "(conversation cleared)\n");
            continue;
        }
        if (!strcmp(line, "/stats")) {
            print_stats(m, &last);
            continue;
        }
        if (!strncmp(line, "/system", 7) && (line[7] == ' ' || !line[7])) {
            free(system);
            system = line[7] ? strdup(line + 8) : NULL;
            fprintf(stderr, "(system prompt %s)\n", system ? "set" : "cleared");
            continue;
        }
        if (n_msgs + 2 >= MAX_MSGS - 1) {
            fprintf(stderr,
                    "rlx: chat: the conversation has %zu messages, the most one chat "
                    "holds; /reset to start over\n",
                    n_msgs);
            continue;
        }
        msgs[n_msgs].role = "user";
        msgs[n_msgs].content = strdup(line);
        n_msgs++;

        rlx_token *ids = NULL;
        size_t n = 0;
        rlx_status st = chat_fit(m, &o, system, msgs, &n_msgs, &ids, &n, &err);
        strbuf reply = {0};
        bool stopped = false;
        if (st == RLX_OK) {
            gen_job j = {.m = m,
                         .ids = ids,
                         .n = n,
                         .gp = &o.gp,
                         .cb = collect,
                         .user = &reply,
                         .stats = &last};
            st = runner_generate(&r, &j, &stopped, &err);
        }
        free(ids);
        fputc('\n', stdout);
        fflush(stdout);
        if (stopped)
            fprintf(stderr, "(reply stopped; what was written stays in the conversation)\n");
        else if (st == RLX_OK && last.stop == RLX_LLM_STOP_CONTEXT)
            fprintf(stderr,
                    "(the reply was cut: the context of %d tokens is full; /reset to start "
                    "over, or run rlx chat with --context-shift to drop the oldest turns)\n",
                    rlx_llm_n_ctx(m));
        if (st != RLX_OK) {
            fprintf(stderr, "rlx: chat: %s\n", rlx_error_message(err));
            rlx_error_clear(&err);
            free((char *)msgs[--n_msgs].content);
            free(reply.text);
            continue;
        }
        msgs[n_msgs].role = "assistant";
        msgs[n_msgs].content = reply.text ? reply.text : strdup("");
        n_msgs++;
    }
out:
    if (running)
        runner_stop(&r);
    for (size_t i = 0; msgs && i < n_msgs; i++)
        free((char *)msgs[i].content);
    free(msgs);
    free(system);
    rlx_llm_free(m);
    return rc;
}
