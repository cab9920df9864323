/* rlx bench whisper: a Whisper model's speed, stage by stage, as whisper.cpp's
 * whisper-bench and whisper-cli report it: the log-mel front end and the
 * encoder per 30-s window, the decoder per token (one beam, one token per
 * step, after a prompt), the whole transcription of a file (realtime
 * factor), and the peak resident memory against the file plus the caches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "engine/audio/audio.h"
#include "engine/runtime/session.h"
#include "models/whisper/whisper-file.h"
#include "models/whisper/whisper.h"
#include "rlx-bench-ops.h"
#include "rlx-cli.h"

static const char usage[] =
    "usage: rlx bench whisper -m MODEL [-f AUDIO] [options]\n"
    "Times a Whisper model: log-mel and encoder per 30-s window, decoder tokens/s,\n"
    "and with -f the whole transcription of AUDIO (greedy, timestamps) as a realtime\n"
    "factor. Prints the median of the repetitions.\n"
    "  -m MODEL             a whisper.cpp ggml .bin file or a Hugging Face folder\n"
    "  -f AUDIO             a recording to transcribe end to end\n"
    "  -r N                 repetitions (default 3)\n"
    "  -n N                 decoder steps timed (default 256, as whisper-bench)\n"
    "  --language L         for -f (default en)\n"
    "  --device DEV         cpu (default), vulkan:N, cuda:N\n"
    "  -t THREADS           CPU threads (default: one per core)\n";

#define PROMPT 224 /* tokens of the timed prompt (the prompt program takes 232) */

static int fail_err(rlx_error *err)
{
    int rc = rlx_cli_fail("%s", rlx_error_message(err));
    rlx_error_free(err);
    return rc;
}

static uint64_t path_bytes(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
}

int rlx_bench_whisper_main(int argc, char **argv)
{
    const char *model = NULL, *audio = NULL, *lang = "en";
    rlx_whisper_params p = rlx_whisper_default_params();
    p.max_beams = 1;
    long reps = 3, steps = 256;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (i + 1 >= argc)
            return rlx_cli_fail("bench whisper: %s needs a value (see rlx bench whisper --help)",
                                a);
        const char *v = argv[++i];
        if (!strcmp(a, "-m"))
            model = v;
        else if (!strcmp(a, "-f"))
            audio = v;
        else if (!strcmp(a, "--language"))
            lang = v;
        else if (!strcmp(a, "--device"))
            p.device = v;
        else if (!strcmp(a, "-r")) {
            if (!rlx_cli_parse_long(v, 1, 100, &reps))
                return rlx_cli_fail("bench whisper: -r must be 1 to 100, not '%s'", v);
        } else if (!strcmp(a, "-n")) {
            if (!rlx_cli_parse_long(v, 1, 440, &steps))
                return rlx_cli_fail("bench whisper: -n must be 1 to 440, not '%s'", v);
        } else if (!strcmp(a, "-t")) {
            int rc = rlx_cli_parse_threads("bench whisper", a, v, &p.n_threads);
            if (rc)
                return rc;
        } else
            return rlx_cli_fail("bench whisper: unknown option '%s' (see rlx bench whisper "
                                "--help)",
                                a);
    }
    if (!model)
        return rlx_cli_fail("bench whisper: -m MODEL is required");
    rlx_error *err = NULL;
    rlx_whisper *w = NULL;
    double t0 = rlx_cli_now();
    if (rlx_whisper_create(model, &p, &w, &err) != RLX_OK)
        return fail_err(err);
    double load_s = rlx_cli_now() - t0;
    const rlx_whisper_hparams *hp = rlx_whisper_file_hparams(rlx_whisper_model_file(w));
    const rlx_whisper_special *sp = rlx_whisper_file_special(rlx_whisper_model_file(w));
    const int NM = hp->n_mels, NF = RLX_WHISPER_N_FRAMES;
    /* a 30-s window of a tone with noise, so the mel is not constant */
    int64_t ns = RLX_WHISPER_N_SAMPLES;
    float *x = malloc(sizeof(float) * (size_t)ns), *mel = malloc(sizeof(float) * (size_t)NM * NF);
    float *logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    double *tm = calloc((size_t)reps, sizeof(double)), *te = calloc((size_t)reps, sizeof(double)),
           *td = calloc((size_t)reps, sizeof(double)), *tt = calloc((size_t)reps, sizeof(double)),
           *tp = calloc((size_t)reps, sizeof(double));
    if (!x || !mel || !logits || !tm || !te || !td || !tt || !tp) {
        rlx_whisper_free(w);
        return rlx_cli_fail("bench whisper: out of memory");
    }
    uint64_t seed = 1;
    for (int64_t i = 0; i < ns; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = 0.3f * sinf(2.0f * 3.14159265f * 440.0f * (float)i / 16000.0f) +
               0.05f * ((float)(seed >> 40) / (float)(1 << 24) - 0.5f);
    }
    int rc = 0;
    double rtf = 0, audio_s = 0, wall_s = 0;
    for (long r = 0; r < reps && !rc; r++) {
        double a = rlx_cli_now();
        if (rlx_whisper_mel(w, x, ns, 0, mel, &err) != RLX_OK) {
            rc = fail_err(err);
            break;
        }
        double b = rlx_cli_now();
        if (rlx_whisper_encode(w, mel, NULL, &err) != RLX_OK) {
            rc = fail_err(err);
            break;
        }
        double c = rlx_cli_now();
        /* as whisper.cpp's whisper-bench: single-token steps at positions
         * 0, 1, ..., then a prompt of PROMPT tokens at once */
        for (long k = 0; k < steps && !rc; k++) {
            int32_t tok = k ? (int32_t)(220 + k * 37 % 5000) : sp->sot;
            if (rlx_whisper_decode(w, &tok, 1, (int32_t)k, false, logits, &err) != RLX_OK)
                rc = fail_err(err);
        }
        if (rc)
            break;
        double d = rlx_cli_now();
        int32_t prompt[PROMPT];
        for (int k = 0; k < PROMPT; k++)
            prompt[k] = k ? 220 + k * 53 % 5000 : sp->sot;
        if (rlx_whisper_decode(w, prompt, PROMPT, 0, false, logits, &err) != RLX_OK) {
            rc = fail_err(err);
            break;
        }
        double e = rlx_cli_now();
        tm[r] = (b - a) * 1e3;
        te[r] = (c - b) * 1e3;
        td[r] = (d - c) * 1e3 / (double)steps;
        tp[r] = (e - d) * 1e3 / PROMPT;
    }
    if (!rc && audio) {
        rlx_whisper_decode_params dp = rlx_whisper_decode_default_params();
        dp.language = lang;
        for (long r = 0; r < reps && !rc; r++) {
            rlx_whisper_result *res = NULL;
            double a = rlx_cli_now();
            if (rlx_whisper_transcribe_file(w, audio, &dp, NULL, &res, &err) != RLX_OK) {
                rc = fail_err(err);
                break;
            }
            tt[r] = rlx_cli_now() - a;
            audio_s = res->timings.audio_s;
            rlx_whisper_result_free(res);
        }
        if (!rc) {
            wall_s = rlx_bench_median(tt, (int)reps);
            rtf = wall_s > 0 ? audio_s / wall_s : 0;
        }
    }
    if (!rc) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        rlx_session_memory_info mi = rlx_session_memory(rlx_whisper_session(w));
        char b1[32], b2[32], b3[32], b4[32], b5[32];
        uint64_t file = path_bytes(model);
        printf("model     %s (%s), %d+%d layers, state %d, %d mels; load %.2f s\n",
               rlx_whisper_kind(w), model, hp->n_audio_layer, hp->n_text_layer, hp->n_audio_state,
               NM, load_s);
        printf("device    %s, %d repetitions (median)\n", p.device ? p.device : "cpu", (int)reps);
        printf("log-mel   %8.2f ms per 30-s window\n", rlx_bench_median(tm, (int)reps));
        printf("encoder   %8.2f ms per 30-s window\n", rlx_bench_median(te, (int)reps));
        double dms = rlx_bench_median(td, (int)reps);
        printf("decoder   %8.2f ms per token  (%.1f tokens/s; %ld single steps from position "
               "0, one beam)\n",
               dms, dms > 0 ? 1e3 / dms : 0, steps);
        printf("prompt    %8.2f ms per token  (%d tokens at once)\n",
               rlx_bench_median(tp, (int)reps), PROMPT);
        if (audio)
            printf("file      %.1f s of audio in %.2f s: %.1fx realtime\n", audio_s, wall_s, rtf);
        printf("memory    peak RSS %s; weights %s (file %s), caches %s, activations %s\n",
               rlx_format_bytes((uint64_t)ru.ru_maxrss * 1024, b1, sizeof b1),
               rlx_format_bytes(mi.weights_bytes, b2, sizeof b2),
               rlx_format_bytes(file, b3, sizeof b3),
               rlx_format_bytes(mi.state_bytes, b4, sizeof b4),
               rlx_format_bytes(mi.arena_bytes, b5, sizeof b5));
    }
    free(x), free(mel), free(logits), free(tm), free(te), free(td), free(tt), free(tp);
    rlx_whisper_free(w);
    return rc;
}
