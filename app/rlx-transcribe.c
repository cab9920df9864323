/* rlx transcribe: speech to timestamped text with a Whisper model.
 *
 * Segments print to stdout as they settle; timing goes to stderr. Ctrl+C
 * stops after the current step, keeps what was printed, writes the output
 * file with it and exits 130. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/audio/audio-device-internal.h"
#include "engine/audio/audio-device.h"
#include "engine/audio/audio.h"
#include "engine/runtime/session.h"
#include "models/whisper/whisper-file.h"
#include "models/whisper/whisper-live.h"
#include "models/whisper/whisper.h"
#include "rlx-cli.h"

static const char usage[] =
    "usage: rlx transcribe -m MODEL (-f AUDIO | --mic) [options]\n"
    "       rlx transcribe --list-devices\n"
    "Transcribes (or translates) speech. Segments print as they are decoded:\n"
    "  [00:00.000 --> 00:04.120] text\n"
    "Ctrl+C stops and keeps what was printed (exit 130).\n"
    "  -m MODEL             a whisper.cpp ggml .bin file or a Hugging Face\n"
    "                       openai/whisper-* folder\n"
    "  -f AUDIO             WAV, FLAC, OGG/Vorbis, Opus or MP3, any rate and channels\n"
    "  --mic                transcribe the microphone live: every ~3 s of new audio is\n"
    "                       decoded, and a segment prints once it ends more than ~2 s\n"
    "                       before the end of the captured audio; Ctrl+C stops, prints\n"
    "                       the rest, writes -o and exits 130\n"
    "  --device-index N     the input device for --mic (default: the system's default;\n"
    "                       see --list-devices)\n"
    "  --list-devices       list the audio input devices (index, name, default) and exit\n"
    "  --mic-file AUDIO     --mic with AUDIO standing in for the microphone, fed through\n"
    "                       the same capture path at 8x real time (tests, demos)\n"
    "  -o OUT               also write the transcript: .txt, .srt, .vtt or .json\n"
    "                       (the extension says which; -o may be given several times)\n"
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
    "  -q, --quiet          no segments on stdout (with -o)\n"
    "  -v, --verbose        let the audio libraries print their own messages\n"
    "                       (libmpg123 on damaged MP3 frames, ALSA, JACK)\n";

static rlx_whisper *running;
/* set by Ctrl+C; read by the callbacks and the live loop */
static volatile sig_atomic_t stop_requested;

static void on_sigint(int sig)
{
    (void)sig;
    stop_requested = 1;
    if (running)
        rlx_whisper_cancel(running); /* an atomic store: safe in a handler */
}

static bool quiet;

/* Audio libraries print to stderr on their own: libmpg123 (inside libsndfile)
 * about every bad MP3 frame, ALSA and JACK (inside PortAudio) about every
 * sound card a machine lacks. Their failures come back to us as sentences,
 * so while they run, fd 2 points at /dev/null (unless --verbose) and our own
 * messages are printed with it restored. Single-threaded use only: the
 * command's main thread mutes and unmutes. */
static bool verbose;
static int saved_stderr = -1;

static void mute_libs(void)
{
    if (verbose || saved_stderr >= 0)
        return;
    fflush(stderr);
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0)
        return;
    saved_stderr = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (saved_stderr >= 0)
        dup2(null, 2);
    close(null);
}

static void unmute_libs(void)
{
    if (saved_stderr < 0)
        return;
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    saved_stderr = -1;
}

static bool print_segment(void *user, const rlx_whisper_segment *s)
{
    (void)user;
    if (!quiet) {
        char a[32], b[32];
        bool hours = s->t1_ms >= 3600000;
        rlx_whisper_format_time(s->t0_ms, false, a, sizeof a);
        rlx_whisper_format_time(s->t1_ms, false, b, sizeof b);
        /* Whisper's text starts with the space its first token carries */
        const char *t = s->text;
        while (*t == ' ')
            t++;
        printf("[%s --> %s] %s\n", hours ? a : a + 3, hours ? b : b + 3, t);
        fflush(stdout);
    }
    /* a Ctrl+C that came before the runner could see it stops here */
    return !stop_requested;
}

static bool keep_going(void *user, double done_s, double total_s)
{
    (void)user;
    (void)done_s;
    (void)total_s;
    return !stop_requested;
}

static void print_language(void *user, const char *code, float p)
{
    (void)user;
    if (p < 1.0f) {
        bool muted = saved_stderr >= 0;
        unmute_libs();
        fprintf(stderr, "rlx: detected language: %s (%.0f%%)\n", code, 100.0 * p);
        if (muted)
            mute_libs();
    }
}

static bool load_progress(void *user, const char *stage, double f)
{
    (void)user;
    (void)stage;
    (void)f;
    return !stop_requested;
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

static int detect(rlx_whisper *w, const char *path)
{
    rlx_error *err = NULL;
    float *x = NULL;
    int64_t n = 0;
    mute_libs();
    rlx_status lst = rlx_audio_load(path, RLX_WHISPER_SAMPLE_RATE, &x, &n, &err);
    unmute_libs();
    if (lst != RLX_OK) {
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

/* The input devices, or NULL with *n = 0 (and *why set when PortAudio itself
 * could not start: a machine without sound is normal). */
static rlx_audio_device_info *input_devices(int *n, char **why)
{
    rlx_audio_device_info *all = NULL;
    int na = 0;
    rlx_error *err = NULL;
    *n = 0;
    *why = NULL;
    mute_libs();
    rlx_status st = rlx_audio_devices_list(&all, &na, &err);
    unmute_libs();
    if (st != RLX_OK) {
        *why = strdup(rlx_error_message(err));
        rlx_error_free(err);
        return NULL;
    }
    int k = 0;
    for (int i = 0; i < na; i++)
        if (all[i].max_input_channels > 0)
            all[k++] = all[i];
    if (k == 0) {
        free(all);
        return NULL;
    }
    *n = k;
    return all;
}

static int list_devices(void)
{
    int n = 0;
    char *why = NULL;
    rlx_audio_device_info *d = input_devices(&n, &why);
    if (n == 0) {
        printf("no audio input devices%s%s\n", why ? ": " : "", why ? why : "");
        free(why);
        return 0;
    }
    printf("index  input device\n");
    for (int i = 0; i < n; i++)
        printf("%5d  %s (%s, %d ch, %.0f Hz)%s\n", d[i].index, d[i].name, d[i].host_api,
               d[i].max_input_channels, d[i].default_rate,
               d[i].is_default_input ? "  [default]" : "");
    free(d);
    return 0;
}

/* The capture thread hands chunks over; the main thread decodes. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    float *x;
    size_t n, cap;
    bool lost;      /* out of memory: samples were dropped */
    uint64_t total; /* samples delivered since t0 */
    struct timespec t0;
    bool runaway; /* more sound than time passed: not a microphone */
    bool paced;   /* a real input, whose pace is checked (not --mic-file) */
} mic = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static double mic_elapsed(void)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - mic.t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - mic.t0.tv_nsec);
}

static void on_chunk(const float *x, size_t n, void *user)
{
    (void)user;
    pthread_mutex_lock(&mic.mu);
    if (mic.n + n > mic.cap) {
        size_t cap = mic.cap ? mic.cap : 16000;
        while (cap < mic.n + n)
            cap *= 2;
        float *nx = realloc(mic.x, sizeof(float) * cap);
        if (nx) {
            mic.x = nx;
            mic.cap = cap;
        }
    }
    mic.total += n;
    /* an input that gives sound much faster than time passes is no
     * microphone (ALSA's null device, the default of a machine without a
     * sound card): its samples are dropped, and the loop stops */
    if (mic.paced && (double)mic.total > (4.0 * mic_elapsed() + 2.0) * RLX_WHISPER_SAMPLE_RATE)
        mic.runaway = true;
    if (mic.runaway) {
        pthread_cond_signal(&mic.cv);
        pthread_mutex_unlock(&mic.mu);
        return;
    }
    if (mic.n + n <= mic.cap) {
        memcpy(mic.x + mic.n, x, sizeof(float) * n);
        mic.n += n;
    } else {
        mic.lost = true;
    }
    pthread_cond_signal(&mic.cv);
    pthread_mutex_unlock(&mic.mu);
}

/* Move what the capture delivered into the live loop; waits up to 100 ms for
 * something to come (so Ctrl+C is seen quickly). */
static rlx_status drain_mic(rlx_whisper_live *l, float **tmp, size_t *tmp_cap, bool wait,
                            rlx_error **err)
{
    pthread_mutex_lock(&mic.mu);
    if (wait && mic.n == 0 && !stop_requested) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&mic.cv, &mic.mu, &ts);
    }
    /* swap buffers: the capture thread keeps appending while we decode */
    float *x = mic.x;
    size_t n = mic.n, cap = mic.cap;
    mic.x = *tmp;
    mic.cap = *tmp_cap;
    mic.n = 0;
    pthread_mutex_unlock(&mic.mu);
    *tmp = x;
    *tmp_cap = cap;
    return n ? rlx_whisper_live_push(l, x, n, err) : RLX_OK;
}

/* --mic-file: a file stands in for the microphone, fed by this thread into
 * the same capture path (ring, delivery thread, chunks) at 8x real time. */
typedef struct {
    rlx_audio_capture *cap;
    const float *x;
    int64_t n;
    volatile int stop; /* atomic: set by the main thread */
    volatile int done; /* atomic: set by the feeder */
} feeder;

static void *feed_thread(void *arg)
{
    feeder *f = arg;
    const int64_t block = 1600; /* 0.1 s, every 12.5 ms */
    for (int64_t i = 0; i < f->n && !__atomic_load_n(&f->stop, __ATOMIC_RELAXED); i += block) {
        int64_t k = f->n - i < block ? f->n - i : block;
        rlx_audio_capture_feed(f->cap, f->x + i, (size_t)k);
        nanosleep(&(struct timespec){.tv_nsec = 12500000L}, NULL);
    }
    __atomic_store_n(&f->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Live transcription from an input device (or fake_file) until Ctrl+C (or
 * the file's end: *interrupted false). *out_live holds the settled segments. */
static rlx_status run_mic(rlx_whisper *w, int device, const char *fake_file,
                          const rlx_whisper_decode_params *dp, rlx_whisper_live **out_live,
                          bool *interrupted, rlx_error **err)
{
    *interrupted = false;
    rlx_whisper_callbacks cb = {.segment = print_segment, .language = print_language};
    rlx_status st = rlx_whisper_live_create(w, dp, NULL, &cb, out_live, err);
    if (st != RLX_OK)
        return st;
    rlx_whisper_live *l = *out_live;
    rlx_audio_capture_params cp = rlx_audio_capture_default_params();
    cp.device = device;
    cp.rate = RLX_WHISPER_SAMPLE_RATE;
    cp.on_chunk = on_chunk;
    rlx_audio_capture *cap = NULL;
    feeder fd = {0};
    float *fake = NULL;
    pthread_t feed_tid;
    bool feeding = false;
    pthread_mutex_lock(&mic.mu);
    clock_gettime(CLOCK_MONOTONIC, &mic.t0);
    mic.total = 0;
    mic.runaway = false;
    mic.paced = !fake_file;
    pthread_mutex_unlock(&mic.mu);
    mute_libs();
    if (fake_file) {
        st = rlx_audio_load(fake_file, RLX_WHISPER_SAMPLE_RATE, &fake, &fd.n, err);
        if (st == RLX_OK)
            st = rlx_audio_capture_start_detached(&cp, RLX_WHISPER_SAMPLE_RATE, 1, &cap, err);
    } else {
        st = rlx_audio_capture_start(&cp, &cap, err);
    }
    unmute_libs();
    if (st != RLX_OK) {
        free(fake);
        return st;
    }
    if (fake_file) {
        fd.cap = cap;
        fd.x = fake;
        feeding = pthread_create(&feed_tid, NULL, feed_thread, &fd) == 0;
        if (!feeding)
            fd.done = 1;
        fprintf(stderr, "rlx: listening to %s as a microphone; Ctrl+C stops\n", fake_file);
    } else {
        fprintf(stderr, "rlx: listening (device rate %d Hz); Ctrl+C stops\n",
                rlx_audio_capture_device_rate(cap));
    }
    mute_libs();
    float *tmp = NULL;
    size_t tmp_cap = 0;
    while (!stop_requested) {
        bool fed_all = fake_file && __atomic_load_n(&fd.done, __ATOMIC_ACQUIRE);
        pthread_mutex_lock(&mic.mu);
        bool runaway = mic.runaway;
        double got = (double)mic.total / RLX_WHISPER_SAMPLE_RATE, el = mic_elapsed();
        pthread_mutex_unlock(&mic.mu);
        if (runaway) {
            st = rlx_error_set(err, RLX_ERR_DEVICE,
                               "the input device gave %.0f s of sound in %.1f s, so it is not a "
                               "microphone; choose one with --device-index (see --list-devices)",
                               got, el);
            break;
        }
        st = drain_mic(l, &tmp, &tmp_cap, true, err);
        if (st == RLX_ERR_CANCELLED && stop_requested) {
            /* Ctrl+C stopped a decode: the flush below decodes that audio again */
            rlx_error_free(*err);
            *err = NULL;
            st = RLX_OK;
        }
        if (st != RLX_OK || fed_all)
            break;
    }
    *interrupted = stop_requested != 0;
    if (feeding) {
        __atomic_store_n(&fd.stop, 1, __ATOMIC_RELAXED);
        pthread_join(feed_tid, NULL);
    }
    int64_t dropped = rlx_audio_capture_dropped(cap);
    int dev_rate = rlx_audio_capture_device_rate(cap);
    rlx_audio_capture_stop(cap); /* delivers the last, shorter chunk */
    unmute_libs();
    free(fake);
    if (dropped > 0 && dev_rate > 0 && !mic.runaway)
        fprintf(stderr, "rlx: %.1f s of audio were lost (the system was too busy)\n",
                (double)dropped / dev_rate);
    if (st == RLX_OK) {
        /* the rest without a decode step in between, then everything settles;
         * a second Ctrl+C stops the flush (what settled is kept) */
        stop_requested = 0;
        pthread_mutex_lock(&mic.mu);
        bool lost = mic.lost;
        pthread_mutex_unlock(&mic.mu);
        if (lost)
            fprintf(stderr, "rlx: out of memory: some audio was not transcribed\n");
        st = drain_mic(l, &tmp, &tmp_cap, false, err);
        if (st == RLX_OK)
            st = rlx_whisper_live_flush(l, err);
        if (stop_requested)
            *interrupted = true;
    }
    free(tmp);
    pthread_mutex_lock(&mic.mu);
    free(mic.x);
    mic.x = NULL;
    mic.n = mic.cap = 0;
    mic.lost = false;
    pthread_mutex_unlock(&mic.mu);
    return st;
}

int rlx_cmd_transcribe(int argc, char **argv)
{
    rlx_whisper_params p = rlx_whisper_default_params();
    rlx_whisper_decode_params dp = rlx_whisper_decode_default_params();
    const char *model = NULL, *audio = NULL, *mic_file = NULL;
    const char *outs[8];
    int n_outs = 0;
    bool detect_only = false, use_mic = false, list_only = false;
    int device_index = -1;
    quiet = false;
    verbose = false;
    stop_requested = 0;
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
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
            verbose = true;
        else if (!strcmp(a, "--mic"))
            use_mic = true;
        else if (!strcmp(a, "--list-devices"))
            list_only = true;
        else
            flag = false;
        if (flag)
            continue;
        if (a[0] != '-')
            return rlx_cli_fail("transcribe: unexpected argument '%s' (see rlx transcribe --help)",
                                a);
        static const char *const with_value[] = {"-m",
                                                 "--model",
                                                 "-f",
                                                 "--file",
                                                 "-o",
                                                 "--output",
                                                 "--language",
                                                 "-l",
                                                 "--beam-size",
                                                 "--best-of",
                                                 "--temperature",
                                                 "--temperature-inc",
                                                 "--no-speech-threshold",
                                                 "--prompt",
                                                 "--offset",
                                                 "--duration",
                                                 "--seed",
                                                 "--device",
                                                 "--device-index",
                                                 "--mic-file",
                                                 "--memory-budget",
                                                 "-t",
                                                 "--threads"};
        bool known = false;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value && !known; k++)
            known = !strcmp(a, with_value[k]);
        if (!known)
            return rlx_cli_fail("transcribe: unknown option '%s' (see rlx transcribe --help)", a);
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
            if (n_outs == 8)
                return rlx_cli_fail("transcribe: at most 8 -o files");
            outs[n_outs++] = v;
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
        else if (!strcmp(a, "--mic-file")) {
            mic_file = v;
            use_mic = true;
        } else if (!strcmp(a, "--device-index")) {
            if (!rlx_cli_parse_long(v, 0, 100000, &l))
                return rlx_cli_fail("transcribe: --device-index must be a device number from "
                                    "--list-devices, not '%s'",
                                    v);
            device_index = (int)l;
        } else if (!strcmp(a, "--memory-budget")) {
            if (!rlx_cli_parse_size(v, &p.memory_budget) || p.memory_budget == 0)
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
    if (list_only)
        return list_devices();
    if (!model)
        return rlx_cli_fail("transcribe: -m MODEL is required (see rlx transcribe --help)");
    if (use_mic && audio)
        return rlx_cli_fail("transcribe: give -f AUDIO or --mic, not both");
    if (!audio && !use_mic)
        return rlx_cli_fail("transcribe: -f AUDIO or --mic is required (see rlx transcribe "
                            "--help)");
    if (!use_mic && device_index >= 0)
        return rlx_cli_fail("transcribe: --device-index goes with --mic");
    if (use_mic && detect_only)
        return rlx_cli_fail("transcribe: --detect-language needs -f AUDIO");

    rlx_error *err = NULL;
    /* the cheap checks first: the audio opens (or an input device exists), the
     * output's folder takes files */
    if (use_mic && !mic_file) {
        int n = 0;
        char *why = NULL;
        rlx_audio_device_info *d = input_devices(&n, &why);
        bool found = n > 0 && device_index < 0;
        for (int i = 0; i < n && !found; i++)
            found = d[i].index == device_index;
        free(d);
        if (n == 0) {
            int rc = rlx_cli_fail("transcribe: --mic: there is no audio input device%s%s%s",
                                  why ? " (" : "", why ? why : "", why ? ")" : "");
            free(why);
            return rc;
        }
        if (!found)
            return rlx_cli_fail("transcribe: --device-index %d is not an input device (see rlx "
                                "transcribe --list-devices)",
                                device_index);
    } else {
        rlx_audio_reader *probe = NULL;
        mute_libs();
        rlx_status pst =
            rlx_audio_open(mic_file ? mic_file : audio, RLX_WHISPER_SAMPLE_RATE, &probe, &err);
        rlx_audio_close(probe);
        unmute_libs();
        if (pst != RLX_OK) {
            int rc = rlx_cli_fail("%s", rlx_error_message(err));
            rlx_error_free(err);
            return rc;
        }
    }
    for (int k = 0; k < n_outs; k++) {
        const char *out = outs[k];
        char *dir = strdup(out);
        char *slash = dir ? strrchr(dir, '/') : NULL;
        const char *d = !dir ? "." : slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
        struct stat db;
        bool ok = stat(d, &db) == 0 && (S_ISDIR(db.st_mode) || (errno = ENOTDIR, false)) &&
                  access(d, W_OK) == 0;
        int e = errno;
        free(dir);
        if (!ok)
            return rlx_cli_fail("transcribe: cannot write %s: %s", out, strerror(e));
        struct stat sb;
        if (stat(out, &sb) == 0 && S_ISDIR(sb.st_mode))
            return rlx_cli_fail("transcribe: cannot write %s: it is a folder", out);
    }
    /* Ctrl+C from here on stops cleanly (also while the model loads) */
    struct sigaction sa = {.sa_handler = on_sigint}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    rlx_whisper *w = NULL;
    p.progress = load_progress;
    double t0 = rlx_cli_now();
    rlx_status cst = rlx_whisper_create(model, &p, &w, &err);
    if (cst != RLX_OK) {
        int rc = cst == RLX_ERR_CANCELLED ? 130 : rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        sigaction(SIGINT, &old, NULL);
        return rc;
    }
    double load_s = rlx_cli_now() - t0;
    if (detect_only) {
        int rc = detect(w, audio);
        rlx_whisper_free(w);
        sigaction(SIGINT, &old, NULL);
        return rc;
    }
    running = w;
    rlx_whisper_callbacks cb = {
        .segment = print_segment, .progress = keep_going, .language = print_language};
    rlx_whisper_result *r = NULL;
    rlx_whisper_live *live = NULL;
    rlx_status st;
    if (use_mic) {
        bool interrupted = false;
        st = run_mic(w, device_index, mic_file, &dp, &live, &interrupted, &err);
        if (st == RLX_OK && interrupted)
            st = rlx_error_set(&err, RLX_ERR_CANCELLED, "the transcription was stopped");
    } else if (stop_requested) {
        st = rlx_error_set(&err, RLX_ERR_CANCELLED, "the transcription was stopped");
    } else {
        mute_libs();
        st = rlx_whisper_transcribe_file(w, audio, &dp, &cb, &r, &err);
        unmute_libs();
    }
    running = NULL;
    sigaction(SIGINT, &old, NULL);
    const rlx_whisper_result *res = live ? rlx_whisper_live_result(live) : r;
    int rc = 0;
    if (st != RLX_OK && st != RLX_ERR_CANCELLED) {
        rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        err = NULL;
        if (!live || res->n_segments == 0) {
            rlx_whisper_live_free(live);
            rlx_whisper_free(w);
            return rc;
        }
        /* keep what settled before the capture failed */
    }
    if (st == RLX_ERR_CANCELLED) {
        fprintf(stderr, "rlx: stopped; %d segments kept\n", res ? res->n_segments : 0);
        rlx_error_free(err);
        err = NULL;
        rc = 130;
    }
    for (int k = 0; res && k < n_outs; k++) {
        if (rlx_whisper_save(res, (rlx_whisper_format)rlx_whisper_format_from_path(outs[k]),
                             outs[k], &err) != RLX_OK) {
            int wrc = rlx_cli_fail("%s", rlx_error_message(err));
            rlx_error_free(err);
            err = NULL;
            if (rc == 0)
                rc = wrc;
        }
    }
    if (res) {
        const rlx_whisper_timings *t = &res->timings;
        double wall = live ? rlx_cli_now() - t0 - load_s : t->total_ms / 1000;
        fprintf(stderr,
                "rlx: %s model (%s), %.1f s of audio in %.2f s (%.1fx realtime); load %.2f s\n"
                "rlx: read %.0f ms, log-mel %.0f ms, encoder %.0f ms/window (%d), decoder %.1f "
                "tokens/s (%lld)\n",
                rlx_whisper_kind(w), res->language[0] ? res->language : "-", t->audio_s, wall,
                wall > 0 ? t->audio_s / wall : 0, load_s, t->load_ms, t->mel_ms,
                t->n_windows ? t->encode_ms / t->n_windows : 0, t->n_windows,
                t->decode_ms > 0 ? t->n_decode_tokens / (t->decode_ms / 1000) : 0,
                (long long)t->n_decode_tokens);
    }
    rlx_whisper_result_free(r);
    rlx_whisper_live_free(live);
    rlx_whisper_free(w);
    return rc;
}
