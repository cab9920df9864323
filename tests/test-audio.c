/* engine/audio: reading files (formats, mixing, resampling, seeking), writing
 * WAVs, refusing bad files with sentences, and listing audio devices without
 * needing one.
 *
 * Tolerances:
 * - WAV round trip: 16-bit PCM, so within 2^-16 (half a step of 1/32768).
 * - Resampled sine: a 1 kHz sine sits far inside the pass band of
 *   libsamplerate's medium sinc filter (flat to well under 0.01 dB there), so
 *   the 16 kHz result's amplitude, measured by projecting onto sin/cos at
 *   1 kHz over whole cycles, must be within 0.2% of the written one and its
 *   frequency (zero crossings over 1.5 s) within 1 Hz; 16-bit input adds
 *   noise of ~1e-5 only.
 * - jfk.mp3 against jfk.wav: MP3 is lossy (64 kbit/s here) and decoders add a
 *   delay unless the file's gapless header is honoured, so the lengths may
 *   differ by up to two MP3 frames (2 x 1152 samples) and the signals are
 *   compared after aligning them by cross-correlation (lag within +-3000): the
 *   RMS of the difference must stay below 5% of the speech's RMS (-26 dB;
 *   this file measures -41 dB with mpg123 honouring its gapless header, and
 *   another decoder's rounding stays far inside that, while a wrong rate,
 *   channel mix or lag gives 100% and more).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sndfile.h>

#include "engine/audio/audio-device-internal.h"
#include "engine/audio/audio-device.h"
#include "engine/audio/audio.h"
#include "test-util.h"

static void expect_sentence(rlx_error **err, rlx_status want, rlx_status got, const char *must)
{
    printf("  -> %s: %s\n", rlx_status_name(got), rlx_error_message(*err));
    assert_int_equal(got, want);
    assert_non_null(*err);
    const char *msg = rlx_error_message(*err);
    assert_true(strlen(msg) > 15);
    if (must)
        assert_non_null(strstr(msg, must));
    rlx_error_clear(err);
}

static void test_jfk_wav(void **state)
{
    (void)state;
    rlx_audio_reader *r = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_audio_open(rlx_test_data("audio/jfk.wav"), 16000, &r, &err), RLX_OK);
    const rlx_audio_info *info = rlx_audio_reader_info(r);
    assert_string_equal(info->format, "WAV");
    assert_int_equal(info->sample_rate, 16000);
    assert_int_equal(info->channels, 1);
    assert_int_equal(info->frames, 176000);
    assert_true(fabs(info->seconds - 11.0) < 1e-9);
    assert_int_equal(rlx_audio_reader_length(r), 176000);

    float *x = NULL;
    int64_t n = 0;
    assert_int_equal(rlx_audio_load(rlx_test_data("audio/jfk.wav"), 16000, &x, &n, &err), RLX_OK);
    assert_int_equal(n, 176000);
    /* chunked reads of odd sizes give the same samples; the file is s16, so
     * every sample is a multiple of 1/32768 */
    float buf[777];
    int64_t pos = 0, k;
    while ((k = rlx_audio_read(r, buf, 777, &err)) > 0) {
        assert_memory_equal(buf, x + pos, (size_t)k * sizeof(float));
        pos += k;
    }
    assert_int_equal(k, 0);
    assert_int_equal(pos, n);
    for (int64_t i = 0; i < n; i += 997)
        assert_float_equal(x[i] * 32768.0f, rintf(x[i] * 32768.0f), 0.0f);
    /* seek without resampling is exact */
    assert_int_equal(rlx_audio_seek(r, 54321, &err), RLX_OK);
    assert_int_equal(rlx_audio_read(r, buf, 777, &err), 777);
    assert_memory_equal(buf, x + 54321, 777 * sizeof(float));
    assert_int_equal(rlx_audio_seek(r, n + 10, &err), RLX_OK);
    assert_int_equal(rlx_audio_read(r, buf, 777, &err), 0);
    rlx_audio_close(r);
    free(x);
}

/* The best lag (b shifted by lag against a) by normalized cross-correlation. */
static int best_lag(const float *a, int64_t na, const float *b, int64_t nb, int max_lag)
{
    double best = -1e30;
    int arg = 0;
    for (int lag = -max_lag; lag <= max_lag; lag++) {
        double s = 0.0;
        for (int64_t i = 0; i < na; i += 2) {
            int64_t j = i + lag;
            if (j >= 0 && j < nb)
                s += (double)a[i] * b[j];
        }
        if (s > best) {
            best = s;
            arg = lag;
        }
    }
    return arg;
}

static void test_jfk_mp3_matches_wav(void **state)
{
    (void)state;
    rlx_error *err = NULL;
    float *w = NULL, *m = NULL;
    int64_t nw = 0, nm = 0;
    assert_int_equal(rlx_audio_load(rlx_test_data("audio/jfk.wav"), 16000, &w, &nw, &err), RLX_OK);
    rlx_status st = rlx_audio_load(rlx_test_data("audio/jfk.mp3"), 16000, &m, &nm, &err);
    if (st != RLX_OK)
        fail_msg("jfk.mp3: %s", rlx_error_message(err));
    rlx_audio_reader *r = NULL;
    assert_int_equal(rlx_audio_open(rlx_test_data("audio/jfk.mp3"), 16000, &r, &err), RLX_OK);
    assert_string_equal(rlx_audio_reader_info(r)->format, "MP3");
    rlx_audio_close(r);
    printf("jfk.wav %lld samples, jfk.mp3 %lld\n", (long long)nw, (long long)nm);
    assert_true(llabs(nm - nw) <= 2 * 1152);
    int lag = best_lag(w, nw, m, nm, 3000);
    double e = 0.0, s = 0.0;
    for (int64_t i = 0; i < nw; i++) {
        int64_t j = i + lag;
        double b = j >= 0 && j < nm ? m[j] : 0.0;
        e += (w[i] - b) * (w[i] - b);
        s += (double)w[i] * w[i];
    }
    double rel = sqrt(e / s);
    printf("lag %d samples, RMS(mp3 - wav) / RMS(wav) = %.4f (%.1f dB)\n", lag, rel,
           20 * log10(rel));
    assert_true(rel < 0.05);
    free(w);
    free(m);
}

/* Writes a sine of `freq` at `rate` with `ch` channels (channel c scaled by
 * amp[c]) through libsndfile in the given format. */
static void write_sine(const char *path, int format, int rate, int ch, const double *amp,
                       double freq, double seconds)
{
    SF_INFO si = {.samplerate = rate, .channels = ch, .format = format};
    assert_true(sf_format_check(&si));
    SNDFILE *sf = sf_open(path, SFM_WRITE, &si);
    if (!sf)
        fail_msg("cannot write %s: %s", path, sf_strerror(NULL));
    int64_t n = (int64_t)(seconds * rate);
    float *buf = malloc((size_t)n * ch * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        for (int c = 0; c < ch; c++)
            buf[i * ch + c] = (float)(amp[c] * sin(2 * M_PI * freq * (double)i / rate));
    assert_int_equal(sf_writef_float(sf, buf, n), n);
    sf_close(sf);
    free(buf);
}

/* Amplitude of the component at freq (projection over [a, b)) and the
 * frequency from the zero crossings there. */
static void measure_sine(const float *x, int64_t a, int64_t b, int rate, double freq, double *amp,
                         double *est_freq)
{
    double sc = 0.0, cc = 0.0;
    for (int64_t i = a; i < b; i++) {
        double ph = 2 * M_PI * freq * (double)i / rate;
        sc += x[i] * sin(ph);
        cc += x[i] * cos(ph);
    }
    *amp = 2.0 * sqrt(sc * sc + cc * cc) / (double)(b - a);
    int64_t first = -1, last = -1, crossings = 0;
    for (int64_t i = a + 1; i < b; i++)
        if (x[i - 1] < 0 && x[i] >= 0) {
            if (first < 0)
                first = i;
            last = i;
            crossings++;
        }
    *est_freq = (double)(crossings - 1) * rate / (double)(last - first);
}

static void test_resample_44100_stereo(void **state)
{
    (void)state;
    const char *path = rlx_test_tmp("sine-44100-stereo.wav");
    /* left 0.6, right 0.2: the mono mix is their mean, 0.4 */
    double amp[2] = {0.6, 0.2};
    write_sine(path, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 44100, 2, amp, 1000.0, 2.0);
    rlx_audio_reader *r = NULL;
    rlx_error *err = NULL;
    assert_int_equal(rlx_audio_open(path, 16000, &r, &err), RLX_OK);
    assert_int_equal(rlx_audio_reader_info(r)->sample_rate, 44100);
    assert_int_equal(rlx_audio_reader_info(r)->channels, 2);
    assert_int_equal(rlx_audio_reader_length(r), 32000);
    float *x = NULL;
    int64_t n = 0;
    assert_int_equal(rlx_audio_load(path, 16000, &x, &n, &err), RLX_OK);
    printf("44.1 kHz stereo, 2 s -> %lld samples at 16 kHz\n", (long long)n);
    assert_true(llabs(n - 32000) <= 2);
    double a, f;
    /* 1.5 s of whole cycles away from the edges (1 kHz: 16 samples a cycle) */
    measure_sine(x, 4000, 28000, 16000, 1000.0, &a, &f);
    printf("amplitude %.5f (want 0.4), frequency %.3f Hz (want 1000)\n", a, f);
    assert_true(fabs(a - 0.4) <= 0.4 * 0.002);
    assert_true(fabs(f - 1000.0) <= 1.0);

    /* streaming in odd chunks gives what load gave */
    float buf[1001];
    int64_t pos = 0, k;
    while ((k = rlx_audio_read(r, buf, 1001, &err)) > 0) {
        assert_true(pos + k <= n);
        for (int64_t i = 0; i < k; i++)
            assert_float_equal(buf[i], x[pos + i], 1e-6);
        pos += k;
    }
    assert_int_equal(k, 0);
    assert_int_equal(pos, n);
    /* seeking lands on the same samples as a straight read */
    int64_t targets[] = {0, 1, 159, 160, 12345, 31000};
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        assert_int_equal(rlx_audio_seek(r, targets[t], &err), RLX_OK);
        int64_t want = n - targets[t] < 500 ? n - targets[t] : 500;
        assert_int_equal(rlx_audio_read(r, buf, 500, &err), want);
        double worst = 0.0;
        for (int64_t i = 0; i < want; i++)
            worst = fmax(worst, fabs(buf[i] - x[targets[t] + i]));
        if (worst > 1e-5)
            fail_msg("after seeking to %lld the samples differ by %g", (long long)targets[t],
                     worst);
    }
    rlx_audio_close(r);
    free(x);
}

static void test_resample_up_8000(void **state)
{
    (void)state;
    const char *path = rlx_test_tmp("sine-8000.wav");
    double amp[1] = {0.5};
    write_sine(path, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 8000, 1, amp, 440.0, 1.0);
    float *x = NULL;
    int64_t n = 0;
    rlx_error *err = NULL;
    assert_int_equal(rlx_audio_load(path, 16000, &x, &n, &err), RLX_OK);
    assert_true(llabs(n - 16000) <= 2);
    double a, f;
    /* 440 Hz: whole cycles over 12000 samples at 16 kHz (0.75 s = 330 cycles) */
    measure_sine(x, 2000, 14000, 16000, 440.0, &a, &f);
    printf("8 kHz -> 16 kHz: amplitude %.5f (want 0.5), frequency %.3f Hz\n", a, f);
    assert_true(fabs(a - 0.5) <= 0.5 * 0.002);
    assert_true(fabs(f - 440.0) <= 1.0);
    free(x);
}

/* FLAC, OGG/Vorbis and Opus through libsndfile (lossy ones loosely). */
static void test_other_formats(void **state)
{
    (void)state;
    struct {
        const char *name, *fmt_name;
        int format, rate;
        double tol;
    } cases[] = {
        {"s.flac", "FLAC", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 22050, 0.002},
        {"s.ogg", "OGG/Vorbis", SF_FORMAT_OGG | SF_FORMAT_VORBIS, 44100, 0.05},
        {"s.opus", "OGG/Opus", SF_FORMAT_OGG | SF_FORMAT_OPUS, 48000, 0.05},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *path = rlx_test_tmp(cases[c].name);
        double amp[2] = {0.5, 0.5};
        write_sine(path, cases[c].format, cases[c].rate, 2, amp, 1000.0, 1.0);
        rlx_audio_reader *r = NULL;
        rlx_error *err = NULL;
        assert_int_equal(rlx_audio_open(path, 16000, &r, &err), RLX_OK);
        assert_string_equal(rlx_audio_reader_info(r)->format, cases[c].fmt_name);
        rlx_audio_close(r);
        float *x = NULL;
        int64_t n = 0;
        assert_int_equal(rlx_audio_load(path, 16000, &x, &n, &err), RLX_OK);
        double a, f;
        measure_sine(x, 3200, 12800, 16000, 1000.0, &a, &f);
        printf("%s: %lld samples, amplitude %.4f, frequency %.2f Hz\n", cases[c].fmt_name,
               (long long)n, a, f);
        assert_true(llabs(n - 16000) <= 1200); /* Opus/Vorbis pre-skip and padding */
        assert_true(fabs(a - 0.5) <= 0.5 * cases[c].tol);
        assert_true(fabs(f - 1000.0) <= 1.0);
        free(x);
    }
}

static void test_write_wav_round_trip(void **state)
{
    (void)state;
    const char *path = rlx_test_tmp("round.wav");
    float x[1000];
    for (int i = 0; i < 1000; i++)
        x[i] = 0.9f * sinf(0.01f * (float)i * (float)i);
    x[10] = 1.5f; /* clipped */
    x[11] = -2.0f;
    x[12] = NAN; /* written as silence */
    rlx_error *err = NULL;
    assert_int_equal(rlx_audio_write_wav(path, x, 1000, 16000, &err), RLX_OK);
    float *y = NULL;
    int64_t n = 0;
    assert_int_equal(rlx_audio_load(path, 16000, &y, &n, &err), RLX_OK);
    assert_int_equal(n, 1000);
    for (int i = 0; i < 1000; i++) {
        float want = i == 10 ? 32767.0f / 32768.0f : i == 11 ? -1.0f : i == 12 ? 0.0f : x[i];
        assert_float_equal(y[i], want, 1.0 / 65536.0);
    }
    free(y);
}

/* A 44-byte canonical WAV header for s16 PCM. */
static void wav_header(uint8_t *h, uint32_t rate, uint16_t ch, uint32_t data_bytes)
{
    uint16_t bits = 16, align = (uint16_t)(ch * 2), fmt = 1;
    uint32_t byte_rate = rate * align, riff = 36 + data_bytes, sixteen = 16;
    memcpy(h, "RIFF", 4);
    memcpy(h + 4, &riff, 4);
    memcpy(h + 8, "WAVEfmt ", 8);
    memcpy(h + 16, &sixteen, 4);
    memcpy(h + 20, &fmt, 2);
    memcpy(h + 22, &ch, 2);
    memcpy(h + 24, &rate, 4);
    memcpy(h + 28, &byte_rate, 4);
    memcpy(h + 32, &align, 2);
    memcpy(h + 34, &bits, 2);
    memcpy(h + 36, "data", 4);
    memcpy(h + 40, &data_bytes, 4);
}

static void test_bad_files(void **state)
{
    (void)state;
    rlx_audio_reader *r = NULL;
    rlx_error *err = NULL;
    float *x = NULL;
    int64_t n = 0;

    printf("missing file\n");
    expect_sentence(&err, RLX_ERR_IO, rlx_audio_open(rlx_test_tmp("no-such.wav"), 16000, &r, &err),
                    "no-such.wav");
    assert_null(r);
    expect_sentence(&err, RLX_ERR_IO,
                    rlx_audio_load(rlx_test_tmp("no-such.wav"), 16000, &x, &n, &err), NULL);
    assert_null(x);

    printf("a folder\n");
    expect_sentence(&err, RLX_ERR_IO, rlx_audio_open(RLX_TEST_BUILD_DIR, 16000, &r, &err),
                    "folder");

    printf("a text file\n");
    const char *txt = rlx_test_tmp("notes.wav");
    const char *words = "These are words, not audio.\nAnd a second line of text.\n";
    assert_int_equal(rlx_test_write_file(txt, words, strlen(words)), 0);
    expect_sentence(&err, RLX_ERR_FORMAT, rlx_audio_open(txt, 16000, &r, &err), "not an audio");

    printf("0 bytes\n");
    const char *empty = rlx_test_tmp("empty.mp3");
    assert_int_equal(rlx_test_write_file(empty, "", 0), 0);
    expect_sentence(&err, RLX_ERR_FORMAT, rlx_audio_open(empty, 16000, &r, &err), "empty");

    printf("a WAV with 0 samples\n");
    const char *zero = rlx_test_tmp("zero.wav");
    assert_int_equal(rlx_audio_write_wav(zero, NULL, 0, 16000, &err), RLX_OK);
    expect_sentence(&err, RLX_ERR_FORMAT, rlx_audio_open(zero, 16000, &r, &err), "no audio");
    expect_sentence(&err, RLX_ERR_FORMAT, rlx_audio_load(zero, 16000, &x, &n, &err), "no audio");

    uint8_t wav[44 + 400];
    memset(wav, 0, sizeof wav);
    printf("a WAV claiming 1 Hz\n");
    wav_header(wav, 1, 1, 400);
    const char *hz1 = rlx_test_tmp("1hz.wav");
    assert_int_equal(rlx_test_write_file(hz1, wav, sizeof wav), 0);
    rlx_status st = rlx_audio_open(hz1, 16000, &r, &err);
    /* libsndfile may refuse it itself; either way a format error */
    expect_sentence(&err, RLX_ERR_FORMAT, st, NULL);
    assert_null(r);

    printf("a WAV claiming 64 channels\n");
    wav_header(wav, 16000, 64, 256);
    const char *ch64 = rlx_test_tmp("64ch.wav");
    assert_int_equal(rlx_test_write_file(ch64, wav, 44 + 256), 0);
    expect_sentence(&err, RLX_ERR_FORMAT, rlx_audio_open(ch64, 16000, &r, &err), NULL);
    assert_null(r);

    printf("a WAV claiming 10 MHz\n");
    wav_header(wav, 10000000, 1, 400);
    const char *mhz = rlx_test_tmp("10mhz.wav");
    assert_int_equal(rlx_test_write_file(mhz, wav, sizeof wav), 0);
    expect_sentence(&err, RLX_ERR_FORMAT, rlx_audio_open(mhz, 16000, &r, &err), NULL);

    printf("a WAV whose header promises more data than the file holds\n");
    wav_header(wav, 16000, 1, 1000000);
    const char *shortw = rlx_test_tmp("short.wav");
    assert_int_equal(rlx_test_write_file(shortw, wav, sizeof wav), 0);
    st = rlx_audio_load(shortw, 16000, &x, &n, &err);
    printf("  -> %s %s (%lld samples)\n", rlx_status_name(st), rlx_error_message(err),
           (long long)n);
    assert_true(st == RLX_OK || st == RLX_ERR_FORMAT);
    if (st == RLX_OK)
        assert_true(n <= 200);
    rlx_error_clear(&err);
    free(x);
    x = NULL;

    printf("a bad output rate\n");
    expect_sentence(&err, RLX_ERR_INVALID_ARG,
                    rlx_audio_open(rlx_test_data("audio/jfk.wav"), 10, &r, &err), NULL);
}

static void test_bad_mp3(void **state)
{
    (void)state;
    size_t size = 0;
    uint8_t *mp3 = rlx_test_read_file(rlx_test_data("audio/jfk.mp3"), &size);
    assert_non_null(mp3);
    rlx_error *err = NULL;
    float *x = NULL;
    int64_t n = 0;

    /* Truncated: what is there decodes, or it is refused; no crash, no garbage length. */
    size_t cuts[] = {10, 100, 1000, 5000, size / 2};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        const char *p = rlx_test_tmp("cut.mp3");
        assert_int_equal(rlx_test_write_file(p, mp3, cuts[c]), 0);
        rlx_status st = rlx_audio_load(p, 16000, &x, &n, &err);
        printf("first %zu bytes: %s, %lld samples %s\n", cuts[c], rlx_status_name(st), (long long)n,
               rlx_error_message(err));
        if (st == RLX_OK) {
            assert_true(n > 0 && n <= 176000 + 2304);
            for (int64_t i = 0; i < n; i++)
                assert_true(isfinite(x[i]) && fabsf(x[i]) <= 2.0f);
        } else {
            assert_true(st == RLX_ERR_FORMAT);
            assert_true(strlen(rlx_error_message(err)) > 15);
        }
        rlx_error_clear(&err);
        free(x);
        x = NULL;
    }

    /* Corrupt: the ID3 tag and first frames kept, the rest overwritten with
     * noise; and noise behind an MP3 frame header alone. */
    uint8_t *bad = malloc(size);
    memcpy(bad, mp3, size);
    uint32_t s = 12345;
    for (size_t i = 2000; i < size; i++) {
        s = s * 1103515245u + 12345u;
        bad[i] = (uint8_t)(s >> 16);
    }
    const char *p = rlx_test_tmp("corrupt.mp3");
    assert_int_equal(rlx_test_write_file(p, bad, size), 0);
    rlx_status st = rlx_audio_load(p, 16000, &x, &n, &err);
    printf("noise after 2000 bytes: %s, %lld samples %s\n", rlx_status_name(st), (long long)n,
           rlx_error_message(err));
    assert_true(st == RLX_OK || st == RLX_ERR_FORMAT);
    if (st == RLX_OK)
        for (int64_t i = 0; i < n; i++)
            assert_true(isfinite(x[i]));
    rlx_error_clear(&err);
    free(x);
    x = NULL;

    /* Noise from the middle on: a reader hands out the good first part, then
     * fails in words (or, should the decoder resync, ends normally). */
    memcpy(bad, mp3, size);
    for (size_t i = 30000; i < size; i++) {
        s = s * 1103515245u + 12345u;
        bad[i] = (uint8_t)(s >> 16);
    }
    p = rlx_test_tmp("corrupt-mid.mp3");
    assert_int_equal(rlx_test_write_file(p, bad, size), 0);
    rlx_audio_reader *r = NULL;
    assert_int_equal(rlx_audio_open(p, 16000, &r, &err), RLX_OK);
    float chunk[4000];
    int64_t k, got = 0;
    while ((k = rlx_audio_read(r, chunk, 4000, &err)) > 0)
        got += k;
    printf("noise after 30000 bytes: %lld samples, then %s\n", (long long)got,
           k < 0 ? rlx_error_message(err) : "the end");
    assert_true(got > 16000); /* the first seconds decoded */
    if (k < 0) {
        /* every frame decoded before the damage was handed out */
        char want[32];
        snprintf(want, sizeof want, "past %.2f s", (double)got / 16000.0);
        assert_non_null(strstr(rlx_error_message(err), want));
        assert_int_equal(rlx_error_code(err), RLX_ERR_FORMAT);
        assert_non_null(strstr(rlx_error_message(err), "corrupt"));
        rlx_error_clear(&err);
        assert_int_equal(rlx_audio_read(r, chunk, 4000, &err), -1); /* stays failed */
        rlx_error_clear(&err);
    }
    rlx_audio_close(r);

    uint8_t junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) {
        s = s * 1103515245u + 12345u;
        junk[i] = (uint8_t)(s >> 16);
    }
    junk[0] = 0xFF; /* an MPEG-2 layer III frame sync, then noise */
    junk[1] = 0xF3;
    junk[2] = 0x84;
    junk[3] = 0xC4;
    p = rlx_test_tmp("junk.mp3");
    assert_int_equal(rlx_test_write_file(p, junk, sizeof junk), 0);
    st = rlx_audio_load(p, 16000, &x, &n, &err);
    printf("frame header + noise: %s, %lld samples %s\n", rlx_status_name(st), (long long)n,
           rlx_error_message(err));
    assert_true(st == RLX_OK || st == RLX_ERR_FORMAT);
    if (st != RLX_OK)
        assert_true(strlen(rlx_error_message(err)) > 15);
    rlx_error_clear(&err);
    free(x);
    free(bad);
    free(mp3);
}

static void test_write_errors(void **state)
{
    (void)state;
    rlx_error *err = NULL;
    float x[10] = {0};
    printf("a folder that does not exist\n");
    expect_sentence(&err, RLX_ERR_IO,
                    rlx_audio_write_wav("/nonexistent-folder-rlx/out.wav", x, 10, 16000, &err),
                    "nonexistent-folder-rlx");
    printf("a folder as the file\n");
    expect_sentence(&err, RLX_ERR_IO, rlx_audio_write_wav(RLX_TEST_BUILD_DIR, x, 10, 16000, &err),
                    NULL);
    /* a full disk, where the machine has Linux's /dev/full (containers may
     * not: never create it) */
    struct stat st_full;
    if (stat("/dev/full", &st_full) == 0 && S_ISCHR(st_full.st_mode)) {
        printf("a full disk\n");
        float big[20000] = {0};
        rlx_status st = rlx_audio_write_wav("/dev/full", big, 20000, 16000, &err);
        printf("  -> %s: %s\n", rlx_status_name(st), rlx_error_message(err));
        assert_int_equal(st, RLX_ERR_IO);
        rlx_error_clear(&err);
        assert_int_equal(stat("/dev/full", &st_full), 0);
        assert_true(S_ISCHR(st_full.st_mode));
    }
    /* the same failure anywhere: a file size limit makes write(2) fail with EFBIG */
    printf("a file size limit (the disk is full)\n");
    struct rlimit old_lim, lim;
    getrlimit(RLIMIT_FSIZE, &old_lim);
    lim = old_lim;
    lim.rlim_cur = 4096;
    void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    static float many[100000];
    const char *lim_path = rlx_test_tmp("too-big.wav");
    rlx_status st2 = rlx_audio_write_wav(lim_path, many, 100000, 16000, &err);
    setrlimit(RLIMIT_FSIZE, &old_lim);
    signal(SIGXFSZ, old_sig);
    expect_sentence(&err, RLX_ERR_IO, st2, "too-big.wav");
    assert_int_not_equal(access(lim_path, F_OK), 0); /* the partial file is gone */

    printf("a read-only file\n");
    const char *ro = rlx_test_tmp("read-only.wav");
    assert_int_equal(rlx_test_write_file(ro, "x", 1), 0);
    chmod(ro, 0444);
    if (access(ro, W_OK) != 0) /* root may write anyway */
        expect_sentence(&err, RLX_ERR_IO, rlx_audio_write_wav(ro, x, 10, 16000, &err), NULL);
    printf("a rate of 0\n");
    expect_sentence(&err, RLX_ERR_INVALID_ARG,
                    rlx_audio_write_wav(rlx_test_tmp("r0.wav"), x, 10, 0, &err), NULL);
}

/* Capture without a sound card: the test plays PortAudio's callback. */
typedef struct {
    rlx_audio_capture *c;
    float *got;
    size_t n, cap;
    int chunks, short_chunks;
    double level_sum;
    int level_n;
} sink;

static void on_chunk(const float *x, size_t n, void *user)
{
    sink *k = user;
    if (k->n + n > k->cap) {
        k->cap = (k->n + n) * 2;
        k->got = realloc(k->got, k->cap * sizeof(float));
    }
    memcpy(k->got + k->n, x, n * sizeof(float));
    k->n += n;
    k->chunks++;
    if (n != 1600)
        k->short_chunks++;
    else if (k->chunks > 2) {
        /* the first chunks hold the resampler's start; the level is set before the call */
        k->level_sum += rlx_audio_capture_level_db(k->c);
        k->level_n++;
    }
}

static void test_capture_pipeline(void **state)
{
    (void)state;
    /* a 44.1 kHz stereo "microphone", 1.5 s of a 1 kHz tone: left 0.6, right 0.2 */
    rlx_audio_capture_params p = rlx_audio_capture_default_params();
    sink k;
    memset(&k, 0, sizeof k);
    p.on_chunk = on_chunk;
    p.user = &k;
    rlx_error *err = NULL;
    assert_int_equal(rlx_audio_capture_start_detached(&p, 44100, 2, &k.c, &err), RLX_OK);
    assert_int_equal(rlx_audio_capture_device_rate(k.c), 44100);
    float block[441 * 2];
    int64_t t = 0;
    for (int b = 0; b < 150; b++) {
        for (int i = 0; i < 441; i++, t++) {
            double s = sin(2 * M_PI * 1000.0 * (double)t / 44100.0);
            block[2 * i] = (float)(0.6 * s);
            block[2 * i + 1] = (float)(0.2 * s);
        }
        rlx_audio_capture_feed(k.c, block, 441);
    }
    assert_int_equal(rlx_audio_capture_dropped(k.c), 0);
    rlx_audio_capture *c = k.c;
    rlx_audio_capture_stop(c);
    printf("capture: %zu samples in %d chunks (%d short)\n", k.n, k.chunks, k.short_chunks);
    assert_true(labs((long)k.n - 24000) <= 2);
    assert_true(k.short_chunks <= 1); /* only the last */
    double a, f;
    measure_sine(k.got, 2000, 22000, 16000, 1000.0, &a, &f);
    double level = k.level_sum / k.level_n, want = 20 * log10(0.4 / sqrt(2.0));
    printf("capture: amplitude %.5f (want 0.4), %.3f Hz, level %.2f dB (want %.2f)\n", a, f, level,
           want);
    assert_true(fabs(a - 0.4) <= 0.4 * 0.002);
    assert_true(fabs(f - 1000.0) <= 1.0);
    assert_true(fabs(level - want) <= 0.1);
    free(k.got);

    /* a device already at 16 kHz mono hands the samples through untouched */
    memset(&k, 0, sizeof k);
    assert_int_equal(rlx_audio_capture_start_detached(&p, 16000, 1, &k.c, &err), RLX_OK);
    static float ramp[5000];
    for (int i = 0; i < 5000; i++)
        ramp[i] = (float)i / 5000.0f;
    rlx_audio_capture_feed(k.c, ramp, 1234);
    rlx_audio_capture_feed(k.c, ramp + 1234, 5000 - 1234);
    rlx_audio_capture_stop(k.c);
    assert_int_equal(k.n, 5000);
    assert_memory_equal(k.got, ramp, sizeof ramp);
    assert_int_equal(k.chunks, 4); /* 3 x 1600 + 200 */
    free(k.got);

    /* bad parameters */
    p.on_chunk = NULL;
    rlx_audio_capture *none = NULL;
    expect_sentence(&err, RLX_ERR_INVALID_ARG,
                    rlx_audio_capture_start_detached(&p, 16000, 1, &none, &err), NULL);
    p.on_chunk = on_chunk;
    p.chunk = 0;
    expect_sentence(&err, RLX_ERR_INVALID_ARG,
                    rlx_audio_capture_start_detached(&p, 16000, 1, &none, &err), NULL);
    assert_null(none);
}

/* Playback without a sound card: the test pulls buffers as a device would. */
static void test_playback_pipeline(void **state)
{
    (void)state;
    enum { N = 16000 };
    static float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(0.5 * sin(2 * M_PI * 440.0 * i / 16000.0));
    rlx_audio_playback *p = NULL;
    rlx_error *err = NULL;

    /* same rate, mono device, from sample 100: x[100..] then silence */
    assert_int_equal(rlx_audio_play_start_detached(x, N, 16000, 100, 16000, 1, &p, &err), RLX_OK);
    assert_int_equal(rlx_audio_playback_position(p), 100);
    float buf[512 * 2];
    int64_t at = 100;
    bool more = true;
    while (more) {
        more = rlx_audio_playback_pull(p, buf, 512);
        for (int i = 0; i < 512; i++, at++)
            assert_float_equal(buf[i], at < N ? x[at] : 0.0f, 0.0);
    }
    assert_true(rlx_audio_playback_finished(p));
    assert_int_equal(rlx_audio_playback_position(p), N);
    rlx_audio_playback_stop(p);

    /* a 48 kHz stereo device from the middle: resampled 3x, both channels */
    assert_int_equal(rlx_audio_play_start_detached(x, N, 16000, N / 2, 48000, 2, &p, &err), RLX_OK);
    float *out = malloc(sizeof(float) * 40000);
    size_t n = 0;
    more = true;
    while (more && n + 512 <= 40000) {
        more = rlx_audio_playback_pull(p, buf, 512);
        for (int i = 0; i < 512; i++) {
            assert_float_equal(buf[2 * i], buf[2 * i + 1], 0.0);
            out[n++] = buf[2 * i];
        }
        int64_t pos = rlx_audio_playback_position(p);
        assert_true(pos >= N / 2 && pos <= N);
    }
    assert_false(more);
    assert_true(rlx_audio_playback_finished(p));
    printf("playback: 8000 samples at 16 kHz -> %zu frames at 48 kHz\n", n);
    assert_true(n >= 24000 && n <= 24000 + 1024);
    double a, f;
    measure_sine(out, 2400, 21600, 48000, 440.0, &a, &f);
    printf("playback: amplitude %.5f (want 0.5), %.3f Hz\n", a, f);
    assert_true(fabs(a - 0.5) <= 0.5 * 0.002);
    assert_true(fabs(f - 440.0) <= 1.0);
    rlx_audio_playback_stop(p);
    free(out);

    /* stop before the end, and an offset past the end */
    assert_int_equal(rlx_audio_play_start_detached(x, N, 16000, 0, 44100, 1, &p, &err), RLX_OK);
    rlx_audio_playback_pull(p, buf, 512);
    rlx_audio_playback_stop(p);
    expect_sentence(&err, RLX_ERR_INVALID_ARG,
                    rlx_audio_play_start_detached(x, N, 16000, N + 1, 16000, 1, &p, &err), NULL);
    assert_null(p);
}

static void ignore_chunk(const float *x, size_t n, void *user)
{
    (void)x;
    (void)n;
    (void)user;
}

/* Devices: this may run on a machine with no sound card at all; listing must
 * then be an empty list or a clean error, and opening must fail in words. */
static void test_devices_without_needing_one(void **state)
{
    (void)state;
    rlx_audio_device_info *devs = NULL;
    int n = -1;
    rlx_error *err = NULL;
    rlx_status st = rlx_audio_devices_list(&devs, &n, &err);
    printf("device list: %s, %d devices %s\n", rlx_status_name(st), n, rlx_error_message(err));
    if (st != RLX_OK) {
        assert_int_equal(st, RLX_ERR_DEVICE);
        assert_null(devs);
        assert_int_equal(n, 0);
        assert_true(strlen(rlx_error_message(err)) > 15);
        rlx_error_clear(&err);
    } else {
        assert_true(n >= 0);
        bool any_in = false, any_out = false;
        for (int i = 0; i < n; i++) {
            printf("  %d: %s (in %d, out %d)%s%s\n", devs[i].index, devs[i].name,
                   devs[i].max_input_channels, devs[i].max_output_channels,
                   devs[i].is_default_input ? " default input" : "",
                   devs[i].is_default_output ? " default output" : "");
            assert_true(devs[i].name[0] != '\0');
            any_in |= devs[i].max_input_channels > 0;
            any_out |= devs[i].max_output_channels > 0;
        }
        free(devs);
        if (!any_in) {
            rlx_audio_capture *c = NULL;
            rlx_audio_capture_params p = rlx_audio_capture_default_params();
            p.on_chunk = ignore_chunk;
            st = rlx_audio_capture_start(&p, &c, &err);
            printf("capture with no input device: %s %s\n", rlx_status_name(st),
                   rlx_error_message(err));
            assert_true(st != RLX_OK);
            assert_null(c);
            assert_true(strlen(rlx_error_message(err)) > 15);
            rlx_error_clear(&err);
        }
        if (!any_out) {
            float x[16] = {0};
            rlx_audio_playback *pb = NULL;
            st = rlx_audio_play_start(x, 16, 16000, 0, -1, &pb, &err);
            printf("playback with no output device: %s %s\n", rlx_status_name(st),
                   rlx_error_message(err));
            assert_true(st != RLX_OK);
            assert_null(pb);
            rlx_error_clear(&err);
        }
    }
    /* a device index that cannot exist */
    rlx_audio_capture *c = NULL;
    rlx_audio_capture_params p = rlx_audio_capture_default_params();
    p.device = 100000;
    p.on_chunk = ignore_chunk;
    st = rlx_audio_capture_start(&p, &c, &err);
    assert_true(st != RLX_OK);
    assert_null(c);
    rlx_error_clear(&err);
    /* listing twice more: PortAudio's init/terminate is reference-counted */
    for (int k = 0; k < 2; k++) {
        st = rlx_audio_devices_list(&devs, &n, &err);
        free(devs);
        rlx_error_clear(&err);
    }
}

int main(void)
{
    rlx_test_need_data("audio/jfk.wav", "audio/jfk.mp3", NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jfk_wav),
        cmocka_unit_test(test_jfk_mp3_matches_wav),
        cmocka_unit_test(test_resample_44100_stereo),
        cmocka_unit_test(test_resample_up_8000),
        cmocka_unit_test(test_other_formats),
        cmocka_unit_test(test_write_wav_round_trip),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_bad_mp3),
        cmocka_unit_test(test_write_errors),
        cmocka_unit_test(test_capture_pipeline),
        cmocka_unit_test(test_playback_pipeline),
        cmocka_unit_test(test_devices_without_needing_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
