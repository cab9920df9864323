/* rlx perplexity: llama.cpp's perplexity method on a text file.
 *
 * The whole file is tokenized (BOS as the model says) and cut into
 * non-overlapping windows of n_ctx tokens (a tail shorter than a window is
 * dropped). For each window the cache is reset, its first token replaced by
 * BOS when the model adds one, all n_ctx tokens evaluated (in --batch chunks,
 * every position's logits), and only the second half is scored: the
 * negative log-likelihood of token i + 1 from the logits at i, for i from
 * n_ctx / 2 to n_ctx - 2, so every scored token has at least n_ctx / 2 tokens
 * of context. The running perplexity is printed after each window as
 * "[1]12.3456,[2]..." and the final estimate as "PPL = X +/- Y", the
 * uncertainty being the standard error of the mean NLL carried through exp
 * (as llama.cpp reports it). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/llm/llm.h"
#include "rlx-cli.h"

static const char ppl_usage[] =
    "usage: rlx perplexity -m MODEL -f TEXT_FILE [options]\n"
    "  --ctx N          window length in tokens (default 512, at most the model's)\n"
    "  --batch N        tokens evaluated per run (default: the window)\n"
    "  -t THREADS       CPU threads, 1 to the CPUs this process may use (default: one\n"
    "                   per core)\n"
    "  --device DEV     cpu (default), vulkan:N, cuda:N\n"
    "  --kv-type f16|f32|q8_0  KV cache type (default f16)\n"
    "Running perplexity per window goes to stdout, then the final estimate.\n";

/* The whole file, NUL-terminated; NULL with errno set on failure. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *p = realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                buf = NULL;
                errno = ENOMEM;
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        n += k;
        if (k == 0) {
            if (ferror(f)) {
                free(buf);
                buf = NULL;
                errno = EIO;
            }
            break;
        }
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = n;
    }
    return buf;
}

/* -log softmax(logits)[target], in double. */
static double nll_of(const float *logits, int32_t n_vocab, rlx_token target)
{
    float mx = logits[0];
    for (int32_t v = 1; v < n_vocab; v++)
        mx = logits[v] > mx ? logits[v] : mx;
    double sum = 0;
    for (int32_t v = 0; v < n_vocab; v++)
        sum += exp((double)logits[v] - mx);
    return log(sum) + mx - (double)logits[target];
}

int rlx_cmd_perplexity(int argc, char **argv)
{
    const char *model = NULL, *text_path = NULL;
    long ctx = 512, batch = 0;
    rlx_llm_params lp = rlx_llm_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(ppl_usage, stdout);
            return 0;
        }
        static const char *const known[] = {"-m",    "--model",   "-f",       "--file",
                                            "--ctx", "-c",        "--batch",  "-b",
                                            "-t",    "--threads", "--device", "--kv-type"};
        bool is_known = false;
        for (size_t k = 0; k < sizeof known / sizeof *known; k++)
            is_known |= !strcmp(a, known[k]);
        if (!is_known)
            return rlx_cli_fail("perplexity: %s '%s' (see rlx perplexity --help)",
                                a[0] == '-' ? "unknown option" : "unexpected argument", a);
        if (i + 1 >= argc)
            return rlx_cli_fail("perplexity: %s needs a value (see rlx perplexity --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file"))
            text_path = v;
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
            if (!rlx_cli_parse_long(v, 4, INT32_MAX, &ctx))
                return rlx_cli_fail("perplexity: --ctx wants a number of tokens (>= 4), not '%s'",
                                    v);
        } else if (!strcmp(a, "--batch") || !strcmp(a, "-b")) {
            if (!rlx_cli_parse_long(v, 1, 65536, &batch))
                return rlx_cli_fail("perplexity: --batch wants a number of tokens, not '%s'", v);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            int rc = rlx_cli_parse_threads("perplexity", a, v, &lp.n_threads);
            if (rc)
                return rc;
        } else if (!strcmp(a, "--device"))
            lp.device = v;
        else if (!strcmp(a, "--kv-type")) {
            if (!strcmp(v, "f16"))
                lp.kv_dtype = RLX_DTYPE_F16;
            else if (!strcmp(v, "f32"))
                lp.kv_dtype = RLX_DTYPE_F32;
            else if (!strcmp(v, "q8_0"))
                lp.kv_dtype = RLX_DTYPE_Q8_0;
            else
                return rlx_cli_fail("perplexity: --kv-type is f16, f32 or q8_0, not '%s'", v);
        }
    }
    if (!model)
        return rlx_cli_fail("perplexity: no model; use -m MODEL.gguf (see rlx perplexity --help)");
    if (!text_path)
        return rlx_cli_fail("perplexity: no text; use -f TEXT_FILE (see rlx perplexity --help)");

    size_t text_len = 0;
    char *text = read_file(text_path, &text_len);
    if (!text)
        return rlx_cli_fail("perplexity: cannot read '%s': %s", text_path, strerror(errno));
    if (memchr(text, 0, text_len)) {
        free(text);
        return rlx_cli_fail("perplexity: '%s' is not a text file (it holds NUL bytes)", text_path);
    }

    int rc = 0;
    rlx_error *err = NULL;
    rlx_llm *m = NULL;
    rlx_token *toks = NULL;
    float *logits = NULL;
    size_t n_tok = 0;
    if (batch <= 0 || batch > ctx)
        batch = ctx;
    /* The runner's programs take a batch at positions up to n_ctx - n_batch
     * (and n_batch < n_ctx): room for the window's last batch to start at
     * last_start. */
    long last_start = batch * ((ctx - 1) / batch);
    long runner_ctx = last_start + batch > batch + 1 ? last_start + batch : batch + 1;
    lp.n_ctx = (int32_t)(runner_ctx > ctx ? runner_ctx : ctx);
    lp.n_batch = (int32_t)batch;
    if (rlx_llm_load(model, &lp, &m, &err) != RLX_OK) {
        rc = rlx_cli_fail("perplexity: %s", rlx_error_message(err));
        goto done;
    }
    const rlx_tokenizer *tk = rlx_llm_get_tokenizer(m);
    if (!tk) {
        rc = rlx_cli_fail("perplexity: '%s' has no tokenizer", model);
        goto done;
    }
    if (rlx_llm_tokenize(m, text, true, false, &toks, &n_tok, &err) != RLX_OK) {
        rc =
            rlx_cli_fail("perplexity: cannot tokenize '%s': %s", text_path, rlx_error_message(err));
        goto done;
    }
    if (n_tok < (size_t)(2 * ctx)) {
        rc = rlx_cli_fail("perplexity: '%s' is %zu tokens; --ctx %ld needs at least %ld (two "
                          "windows)",
                          text_path, n_tok, ctx, 2 * ctx);
        goto done;
    }
    const int32_t n_vocab = rlx_llm_get_config(m)->n_vocab;
    const bool add_bos = rlx_tokenizer_adds_bos(tk);
    const rlx_token bos = rlx_tokenizer_bos(tk);
    const long n_chunk = (long)(n_tok / (size_t)ctx), first = ctx / 2;
    logits = malloc((size_t)batch * (size_t)n_vocab * sizeof *logits);
    rlx_token *window = malloc((size_t)ctx * sizeof *window);
    if (!logits || !window) {
        free(window);
        rc = rlx_cli_fail("perplexity: out of memory");
        goto done;
    }
    fprintf(stderr,
            "perplexity: %zu tokens, %ld windows of %ld (batch %ld), scoring %ld tokens each\n",
            n_tok, n_chunk, ctx, batch, ctx - 1 - first);
    double nll = 0, nll2 = 0, t0 = rlx_cli_now();
    long count = 0;
    for (long c = 0; c < n_chunk; c++) {
        memcpy(window, toks + (size_t)c * (size_t)ctx, (size_t)ctx * sizeof *window);
        if (add_bos && bos >= 0)
            window[0] = bos;
        rlx_llm_reset(m);
        for (long j = 0; j < ctx; j += batch) {
            long nb = ctx - j < batch ? ctx - j : batch;
            if (rlx_llm_eval_all(m, window + j, (size_t)nb, logits, &err) != RLX_OK) {
                free(window);
                rc = rlx_cli_fail("perplexity: window %ld: %s", c + 1, rlx_error_message(err));
                goto done;
            }
            for (long k = 0; k < nb; k++) {
                long i = j + k;
                if (i < first || i > ctx - 2)
                    continue;
                double v = nll_of(logits + (size_t)k * (size_t)n_vocab, n_vocab, window[i + 1]);
                nll += v;
                nll2 += v * v;
                count++;
            }
        }
        printf("[%ld]%.4f,", c + 1, exp(nll / (double)count));
        fflush(stdout);
    }
    free(window);
    double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
    double ppl = exp(mean);
    double unc = var > 0 && count > 1 ? ppl * sqrt(var / (double)(count - 1)) : 0.0;
    printf("\nFinal estimate: PPL = %.6f +/- %.6f\n", ppl, unc);
    fprintf(stderr, "perplexity: %ld tokens scored in %.2f s\n", count, rlx_cli_now() - t0);

done:
    rlx_error_free(err);
    free(logits);
    free(toks);
    free(text);
    rlx_llm_free(m);
    return rc;
}
