/* rlx transcribe: speech to timestamped text with a Whisper model.
 *
 * Segments print to stdout as they settle; timing goes to stderr. Ctrl+C
 * stops after the current step, keeps what was printed, writes the output
 * file with it and exits 130. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/audio/audio.h"
#include "engine/runtime/session.h"
#include "models/whisper/whisper-file.h"
#include "models/whisper/whisper.h"
#include "rlx-cli.h"

static const char usage[] =
    "usage: rlx transcribe -m MODEL -f AUDIO [options]\n"
    "Transcribes (or translates) speech. Segments print as they are decoded:\n"
    "  [00:00.000 --> 00:04.120] text\n"
    "Ctrl+C stops and keeps what was printed (exit 130).\n"
    "  -m MODEL             a whisper.cpp ggml .bin file or a Hugging Face\n"
    "                       openai/whisper-* folder\n"
    "  -f AUDIO             WAV, FLAC, OGG/Vorbis, Opus or MP3, any rate and channels\n"
    "  -o OUT               also write the transcript: .txt, .srt, .vtt or .json\n"
    "  --language L         auto (default: detect), or a code such as en, de, ja\n"
    "  --translate          translate into English\n"
    "  --no-timestamps      no timestamp tokens: one segment per 30-s window\n"
    "  --beam-size N        beam search with N beams (1 to 16; default greedy)\n"
    "  --best-of N          candidates sampled when falling back (default 5)\n"
    "  --temperature T      first temperature (default 0)\n"
    "  --temperature-inc T  fallback step (default 0.2)\n"
    "  --no-fallback        never retry a window at a higher temperature\n"
    "  --no-speech-threshold P  skip windows whose no-speech probability is above P\n"
    "                       (default 0.6)\n"
    "  --no-context         do not condition a window on the previous window's text\n"
    "  --word-timestamps    time every word (from the cross-attention alignment heads and\n"
    "                       dynamic time warping, as openai-whisper); in -o .json\n"
    "  --prompt TEXT        initial prompt (names, spelling, style)\n"
    "  --offset S           start S seconds into the audio\n"
    "  --duration S         transcribe S seconds only\n"
    "  --seed N             seed for sampling at temperatures above 0\n"
    "  --device DEV         cpu (default), vulkan:N, cuda:N\n"
    "  --memory-budget SIZE e.g. 2G, 512M\n"
    "  -t THREADS           CPU threads (default: one per core)\n"
    "  --detect-language    print the five likeliest languages and exit\n"
    "  -q, --quiet          no segments on stdout (with -o)\n";

static rlx_whisper *running;

static void on_sigint(int sig)
{
    (void)sig;
    if (running)
        rlx_whisper_cancel(running); /* an atomic store: safe in a handler */
}

static bool quiet;

static bool print_segment(void *user, const rlx_whisper_segment *s)
{
    (void)user;
    if (quiet)
        return true;
    char a[32], b[32];
    bool hours = s->t1_ms >= 3600000;
    rlx_whisper_format_time(s->t0_ms, false, a, sizeof a);
    rlx_whisper_format_time(s->t1_ms, false, b, sizeof b);
    printf("[%s --> %s] %s\n", hours ? a : a + 3, hours ? b : b + 3, s->text);
    fflush(stdout);
    return true;
}

static void print_language(void *user, const char *code, float p)
{
    (void)user;
    if (p < 1.0f)
        fprintf(stderr, "rlx: detected language: %s (%.0f%%)\n", code, 100.0 * p);
}

static bool load_progress(void *user, const char *stage, double f)
{
    (void)user;
    (void)stage;
    (void)f;
    return true;
}

static bool parse_float(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s)
        return false;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_size(const char *s, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v <= 0)
        return false;
    double m = 1;
    if (*end == 'K' || *end == 'k')
        m = 1024.0, end++;
    else if (*end == 'M' || *end == 'm')
        m = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        m = 1024.0 * 1024 * 1024, end++;
    if (*end == 'i' || *end == 'B')
        end += *end == 'i' && end[1] == 'B' ? 2 : 1;
    if (*end)
        return false;
    *out = (uint64_t)(v * m);
    return true;
}

static int detect(rlx_whisper *w, const char *path)
{
    rlx_error *err = NULL;
    float *x = NULL;
    int64_t n = 0;
    if (rlx_audio_load(path, RLX_WHISPER_SAMPLE_RATE, &x, &n, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    float probs[128];
    int32_t np = 0;
    rlx_status st = rlx_whisper_detect_language(w, x, n, probs, 128, &np, &err);
    free(x);
    if (st != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    for (int k = 0; k < 5 && k < np; k++) {
        int best = -1;
        for (int i = 0; i < np; i++)
            if (probs[i] >= 0 && (best < 0 || probs[i] > probs[best]))
                best = i;
        printf("%-4s %-12s %6.2f%%\n", rlx_whisper_language_code(best),
               rlx_whisper_language_name(best), 100.0 * probs[best]);
        probs[best] = -1;
    }
    return 0;
}

int rlx_cmd_transcribe(int argc, char **argv)
{
    rlx_whisper_params p = rlx_whisper_default_params();
    rlx_whisper_decode_params dp = rlx_whisper_decode_default_params();
    const char *model = NULL, *audio = NULL, *out = NULL;
    bool detect_only = false;
    quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        bool flag = true;
        if (!strcmp(a, "--translate"))
            dp.translate = true;
        else if (!strcmp(a, "--no-timestamps"))
            dp.no_timestamps = true;
        else if (!strcmp(a, "--no-fallback"))
            dp.no_fallback = true;
        else if (!strcmp(a, "--no-context"))
            dp.condition_on_previous_text = false;
        else if (!strcmp(a, "--word-timestamps"))
            dp.word_timestamps = true;
        else if (!strcmp(a, "--detect-language"))
            detect_only = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
            quiet = true;
        else
            flag = false;
        if (flag)
            continue;
        if (a[0] != '-')
            return rlx_cli_fail("transcribe: unexpected argument '%s' (see rlx transcribe --help)",
                                a);
        if (i + 1 >= argc)
            return rlx_cli_fail("transcribe: %s needs a value (see rlx transcribe --help)", a);
        const char *v = argv[++i];
        long l;
        double d;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file"))
            audio = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (rlx_whisper_format_from_path(v) < 0)
                return rlx_cli_fail("transcribe: -o %s: the name must end in .txt, .srt, .vtt "
                                    "or .json",
                                    v);
            out = v;
        } else if (!strcmp(a, "--language") || !strcmp(a, "-l")) {
            if (strcmp(v, "auto") && rlx_whisper_language_find(v) < 0)
                return rlx_cli_fail("transcribe: --language %s: not a Whisper language (use a "
                                    "code such as en, de, ja, or auto)",
                                    v);
            dp.language = v;
        } else if (!strcmp(a, "--beam-size")) {
            if (!rlx_cli_parse_long(v, 1, 16, &l))
                return rlx_cli_fail("transcribe: --beam-size must be 1 to 16, not '%s'", v);
            dp.beam_size = (int)l;
            if (p.max_beams < l)
                p.max_beams = (int)l;
        } else if (!strcmp(a, "--best-of")) {
            if (!rlx_cli_parse_long(v, 1, 16, &l))
                return rlx_cli_fail("transcribe: --best-of must be 1 to 16, not '%s'", v);
            dp.best_of = (int)l;
        } else if (!strcmp(a, "--temperature")) {
            if (!parse_float(v, 0, 1, &d))
                return rlx_cli_fail("transcribe: --temperature must be 0 to 1, not '%s'", v);
            dp.temperature = (float)d;
        } else if (!strcmp(a, "--temperature-inc")) {
            if (!parse_float(v, 0, 1, &d))
                return rlx_cli_fail("transcribe: --temperature-inc must be 0 to 1, not '%s'", v);
            dp.temperature_inc = (float)d;
        } else if (!strcmp(a, "--no-speech-threshold")) {
            if (!parse_float(v, 0, 1, &d))
                return rlx_cli_fail("transcribe: --no-speech-threshold must be 0 to 1, not '%s'",
                                    v);
            dp.no_speech_threshold = (float)d;
        } else if (!strcmp(a, "--prompt"))
            dp.initial_prompt = v;
        else if (!strcmp(a, "--offset")) {
            if (!parse_float(v, 0, 1e7, &d))
                return rlx_cli_fail("transcribe: --offset must be seconds >= 0, not '%s'", v);
            dp.offset_ms = (int64_t)(d * 1000);
        } else if (!strcmp(a, "--duration")) {
            if (!parse_float(v, 0.001, 1e7, &d))
                return rlx_cli_fail("transcribe: --duration must be seconds > 0, not '%s'", v);
            dp.duration_ms = (int64_t)(d * 1000);
        } else if (!strcmp(a, "--seed")) {
            if (!rlx_cli_parse_long(v, 0, 0x7fffffffL, &l))
                return rlx_cli_fail("transcribe: --seed must be a whole number >= 0");
            dp.seed = (uint64_t)l;
        } else if (!strcmp(a, "--device"))
            p.device = v;
        else if (!strcmp(a, "--memory-budget")) {
            if (!parse_size(v, &p.memory_budget))
                return rlx_cli_fail("transcribe: --memory-budget %s: give a size such as 2G or "
                                    "512M",
                                    v);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            int rc = rlx_cli_parse_threads("transcribe", a, v, &p.n_threads);
            if (rc)
                return rc;
        } else
            return rlx_cli_fail("transcribe: unknown option '%s' (see rlx transcribe --help)", a);
    }
    if (!model)
        return rlx_cli_fail("transcribe: -m MODEL is required (see rlx transcribe --help)");
    if (!audio)
        return rlx_cli_fail("transcribe: -f AUDIO is required (see rlx transcribe --help)");

    rlx_error *err = NULL;
    /* the cheap checks first: the audio opens, the output's folder takes files */
    rlx_audio_reader *probe = NULL;
    if (rlx_audio_open(audio, RLX_WHISPER_SAMPLE_RATE, &probe, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    rlx_audio_close(probe);
    if (out) {
        char *dir = strdup(out);
        char *slash = dir ? strrchr(dir, '/') : NULL;
        const char *d = !dir ? "." : slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
        bool ok = access(d, W_OK) == 0;
        int e = errno;
        free(dir);
        if (!ok)
            return rlx_cli_fail("transcribe: cannot write %s: %s", out, strerror(e));
    }
    rlx_whisper *w = NULL;
    p.progress = load_progress;
    double t0 = rlx_cli_now();
    if (rlx_whisper_create(model, &p, &w, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    double load_s = rlx_cli_now() - t0;
    if (detect_only) {
        int rc = detect(w, audio);
        rlx_whisper_free(w);
        return rc;
    }
    running = w;
    struct sigaction sa = {.sa_handler = on_sigint}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    rlx_whisper_callbacks cb = {.segment = print_segment, .language = print_language};
    rlx_whisper_result *r = NULL;
    rlx_status st = rlx_whisper_transcribe_file(w, audio, &dp, &cb, &r, &err);
    sigaction(SIGINT, &old, NULL);
    running = NULL;
    int rc = 0;
    if (st != RLX_OK && st != RLX_ERR_CANCELLED) {
        rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        rlx_whisper_free(w);
        return rc;
    }
    if (st == RLX_ERR_CANCELLED) {
        fprintf(stderr, "rlx: stopped; %d segments kept\n", r ? r->n_segments : 0);
        rlx_error_free(err);
        err = NULL;
        rc = 130;
    }
    if (r && out) {
        if (rlx_whisper_save(r, (rlx_whisper_format)rlx_whisper_format_from_path(out), out, &err) !=
            RLX_OK) {
            rc = rlx_cli_fail("%s", rlx_error_message(err));
            rlx_error_free(err);
        }
    }
    if (r) {
        const rlx_whisper_timings *t = &r->timings;
        double wall = t->total_ms / 1000;
        fprintf(stderr,
                "rlx: %s model (%s), %.1f s of audio in %.2f s (%.1fx realtime); load %.2f s\n"
                "rlx: read %.0f ms, log-mel %.0f ms, encoder %.0f ms/window (%d), decoder %.1f "
                "tokens/s (%lld)\n",
                rlx_whisper_kind(w), r->language, t->audio_s, wall,
                wall > 0 ? t->audio_s / wall : 0, load_s, t->load_ms, t->mel_ms,
                t->n_windows ? t->encode_ms / t->n_windows : 0, t->n_windows,
                t->decode_ms > 0 ? t->n_decode_tokens / (t->decode_ms / 1000) : 0,
                (long long)t->n_decode_tokens);
    }
    rlx_whisper_result_free(r);
    rlx_whisper_free(w);
    return rc;
}
