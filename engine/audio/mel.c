/* Whisper's log-mel spectrogram on FFTW3 (single precision). */
#include "engine/audio/mel.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <fftw3.h>

/* FFTW's planner keeps global state: plan creation and destruction must not
 * run on two threads at once (executing a plan is thread-safe). */
static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;

struct rlx_mel {
    int n_mels;
    float *filters; /* [n_mels][201] */
    int *lo, *hi;   /* per mel bin, the range of FFT bins whose weight is non-zero */
    float window[RLX_MEL_N_FFT];
    float *in;           /* fftwf_malloc'd, 400 */
    fftwf_complex *spec; /* 201 */
    fftwf_plan plan;
    float power[RLX_MEL_N_BINS];
};

/* librosa's Slaney mel scale (htk=False): linear below 1 kHz, logarithmic above. */
#define F_SP        (200.0 / 3.0)
#define MIN_LOG_HZ  1000.0
#define MIN_LOG_MEL (MIN_LOG_HZ / F_SP)

static double logstep(void)
{
    return log(6.4) / 27.0;
}

static double hz_to_mel(double f)
{
    if (f >= MIN_LOG_HZ)
        return MIN_LOG_MEL + log(f / MIN_LOG_HZ) / logstep();
    return f / F_SP;
}

static double mel_to_hz(double m)
{
    if (m >= MIN_LOG_MEL)
        return MIN_LOG_HZ * exp(logstep() * (m - MIN_LOG_MEL));
    return F_SP * m;
}

rlx_status rlx_mel_filters_slaney(int n_mels, int n_fft, int sample_rate, float *out)
{
    if (n_mels < 1 || n_mels > RLX_MEL_MAX_N_MELS || n_fft < 2 || n_fft > 65536 ||
        sample_rate <= 0 || !out)
        return RLX_ERR_INVALID_ARG;
    int n_bins = n_fft / 2 + 1;
    int n_pts = n_mels + 2;
    double *mel_f = malloc((size_t)n_pts * sizeof(double));
    if (!mel_f)
        return RLX_ERR_NO_MEMORY;
    /* np.linspace(hz_to_mel(0), hz_to_mel(sr / 2), n_mels + 2), then to Hz;
     * linspace computes start + i * step and sets the last point exactly. */
    double m0 = hz_to_mel(0.0), m1 = hz_to_mel((double)sample_rate / 2.0);
    double step = (m1 - m0) / (double)(n_pts - 1);
    for (int i = 0; i < n_pts; i++)
        mel_f[i] = mel_to_hz(i == n_pts - 1 ? m1 : (double)i * step + m0);
    /* np.fft.rfftfreq(n_fft, 1 / sr): k * (1 / (n_fft * (1 / sr))) */
    double fstep = 1.0 / ((double)n_fft * (1.0 / (double)sample_rate));
    for (int i = 0; i < n_mels; i++) {
        double d0 = mel_f[i + 1] - mel_f[i], d1 = mel_f[i + 2] - mel_f[i + 1];
        double enorm = 2.0 / (mel_f[i + 2] - mel_f[i]);
        for (int k = 0; k < n_bins; k++) {
            double f = (double)k * fstep;
            double lower = -(mel_f[i] - f) / d0;
            double upper = (mel_f[i + 2] - f) / d1;
            double w = fmax(0.0, fmin(lower, upper));
            /* librosa stores the triangle as float32, then scales that
             * float32 array by the float64 norm and rounds again */
            out[(size_t)i * n_bins + k] = (float)((double)(float)w * enorm);
        }
    }
    free(mel_f);
    return RLX_OK;
}

rlx_status rlx_mel_create(int n_mels, const float *filters, rlx_mel **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out || n_mels < 1 || n_mels > RLX_MEL_MAX_N_MELS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "A mel spectrogram needs 1 to %d mel bins, not %d.",
                             RLX_MEL_MAX_N_MELS, n_mels);
    rlx_mel *m = calloc(1, sizeof *m);
    if (!m)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory for the mel spectrogram.");
    m->n_mels = n_mels;
    size_t nf = (size_t)n_mels * RLX_MEL_N_BINS;
    m->filters = malloc(nf * sizeof(float));
    m->lo = malloc((size_t)n_mels * sizeof(int));
    m->hi = malloc((size_t)n_mels * sizeof(int));
    m->in = fftwf_malloc(RLX_MEL_N_FFT * sizeof(float));
    m->spec = fftwf_malloc(RLX_MEL_N_BINS * sizeof(fftwf_complex));
    if (!m->filters || !m->lo || !m->hi || !m->in || !m->spec) {
        rlx_mel_free(m);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory for the mel spectrogram.");
    }
    if (filters)
        memcpy(m->filters, filters, nf * sizeof(float));
    else
        rlx_mel_filters_slaney(n_mels, RLX_MEL_N_FFT, RLX_MEL_RATE, m->filters);
    for (int i = 0; i < n_mels; i++) {
        const float *f = m->filters + (size_t)i * RLX_MEL_N_BINS;
        int lo = 0, hi = RLX_MEL_N_BINS;
        while (lo < hi && f[lo] == 0.0f)
            lo++;
        while (hi > lo && f[hi - 1] == 0.0f)
            hi--;
        m->lo[i] = lo;
        m->hi[i] = hi;
    }
    /* torch.hann_window(400), periodic: 0.5 - 0.5 cos(2 pi n / 400) */
    for (int i = 0; i < RLX_MEL_N_FFT; i++)
        m->window[i] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * (double)i / RLX_MEL_N_FFT));
    pthread_mutex_lock(&plan_lock);
    m->plan = fftwf_plan_dft_r2c_1d(RLX_MEL_N_FFT, m->in, m->spec, FFTW_ESTIMATE);
    pthread_mutex_unlock(&plan_lock);
    if (!m->plan) {
        rlx_mel_free(m);
        return rlx_error_set(err, RLX_ERR_INTERNAL, "FFTW could not plan a %d-point FFT.",
                             RLX_MEL_N_FFT);
    }
    *out = m;
    return RLX_OK;
}

int rlx_mel_n_mels(const rlx_mel *m)
{
    return m ? m->n_mels : 0;
}

/* Sample idx of the zero-padded, reflect-padded signal: reflect at the start
 * (torch.stft center=True), zeros past the known audio (openai's padding). */
static inline float sample_at(const float *audio, int64_t n, int64_t idx)
{
    if (idx < 0)
        idx = -idx;
    return idx < n ? audio[idx] : 0.0f;
}

rlx_status rlx_mel_log(rlx_mel *m, const float *audio, int64_t n, int64_t start_frame,
                       int64_t n_frames, float *out, rlx_error **err)
{
    if (!m || (!audio && n > 0) || n < 0 || start_frame < 0 || n_frames < 0 ||
        (!out && n_frames > 0))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_mel_log needs a mel, the audio, a start frame and a count of 0 "
                             "or more, and an output buffer.");
    if (start_frame > (INT64_MAX - n_frames) / RLX_MEL_HOP - 1)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "Frame %lld is out of range.",
                             (long long)start_frame);
    const int half = RLX_MEL_N_FFT / 2;
    for (int64_t t = 0; t < n_frames; t++) {
        int64_t s = (start_frame + t) * RLX_MEL_HOP - half;
        if (s >= 0 && s + RLX_MEL_N_FFT <= n) {
            const float *a = audio + s;
            for (int k = 0; k < RLX_MEL_N_FFT; k++)
                m->in[k] = m->window[k] * a[k];
        } else {
            for (int k = 0; k < RLX_MEL_N_FFT; k++)
                m->in[k] = m->window[k] * sample_at(audio, n, s + k);
        }
        fftwf_execute_dft_r2c(m->plan, m->in, m->spec);
        for (int k = 0; k < RLX_MEL_N_BINS; k++) {
            float re = m->spec[k][0], im = m->spec[k][1];
            m->power[k] = re * re + im * im;
        }
        for (int i = 0; i < m->n_mels; i++) {
            const float *f = m->filters + (size_t)i * RLX_MEL_N_BINS;
            /* double accumulation costs nothing at this size and keeps the
             * sum's rounding out of the comparison with the reference */
            double acc = 0.0;
            for (int k = m->lo[i]; k < m->hi[i]; k++)
                acc += (double)f[k] * (double)m->power[k];
            double v = acc > 1e-10 ? acc : 1e-10;
            out[(size_t)i * (size_t)n_frames + (size_t)t] = (float)log10(v);
        }
    }
    return RLX_OK;
}

void rlx_mel_normalize_with(float *x, size_t n, float max)
{
    float floor_v = max - 8.0f;
    for (size_t i = 0; i < n; i++) {
        float v = x[i] > floor_v ? x[i] : floor_v;
        x[i] = (v + 4.0f) / 4.0f;
    }
}

float rlx_mel_normalize(float *x, size_t n)
{
    if (!x || n == 0)
        return -INFINITY;
    float mx = x[0];
    for (size_t i = 1; i < n; i++)
        if (x[i] > mx)
            mx = x[i];
    rlx_mel_normalize_with(x, n, mx);
    return mx;
}

void rlx_mel_free(rlx_mel *m)
{
    if (!m)
        return;
    if (m->plan) {
        pthread_mutex_lock(&plan_lock);
        fftwf_destroy_plan(m->plan);
        pthread_mutex_unlock(&plan_lock);
    }
    fftwf_free(m->in);
    fftwf_free(m->spec);
    free(m->filters);
    free(m->lo);
    free(m->hi);
    free(m);
}
