/* Capture and playback through PortAudio. The realtime callbacks never lock,
 * allocate or call back into the application: capture hands samples to a
 * thread of ours through a single-producer single-consumer ring. */
#include "engine/audio/audio-device.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <portaudio.h>
#include <samplerate.h>

#include "engine/audio/audio-device-internal.h"
#include "engine/audio/audio.h"

/* ---- PortAudio lifetime: one Pa_Initialize for all users ---- */

static pthread_mutex_t pa_lock = PTHREAD_MUTEX_INITIALIZER;
static int pa_refs;

static rlx_status pa_acquire(rlx_error **err)
{
    pthread_mutex_lock(&pa_lock);
    if (pa_refs == 0) {
        PaError e = Pa_Initialize();
        if (e != paNoError) {
            pthread_mutex_unlock(&pa_lock);
            return rlx_error_set(err, RLX_ERR_DEVICE,
                                 "The audio system (PortAudio) could not start: %s.",
                                 Pa_GetErrorText(e));
        }
    }
    pa_refs++;
    pthread_mutex_unlock(&pa_lock);
    return RLX_OK;
}

static void pa_release(void)
{
    pthread_mutex_lock(&pa_lock);
    if (pa_refs > 0 && --pa_refs == 0)
        Pa_Terminate();
    pthread_mutex_unlock(&pa_lock);
}

rlx_status rlx_audio_devices_list(rlx_audio_device_info **out, int *n, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (n)
        *n = 0;
    if (!out || !n)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_audio_devices_list needs out and n.");
    rlx_status st = pa_acquire(err);
    if (st != RLX_OK)
        return st;
    int count = Pa_GetDeviceCount();
    if (count < 0) {
        st = rlx_error_set(err, RLX_ERR_DEVICE, "The audio devices could not be listed: %s.",
                           Pa_GetErrorText(count));
        pa_release();
        return st;
    }
    rlx_audio_device_info *d = count > 0 ? calloc((size_t)count, sizeof *d) : NULL;
    if (count > 0 && !d) {
        pa_release();
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory listing audio devices.");
    }
    PaDeviceIndex def_in = Pa_GetDefaultInputDevice(), def_out = Pa_GetDefaultOutputDevice();
    int k = 0;
    for (int i = 0; i < count; i++) {
        const PaDeviceInfo *di = Pa_GetDeviceInfo(i);
        if (!di)
            continue;
        const PaHostApiInfo *hi = Pa_GetHostApiInfo(di->hostApi);
        d[k].index = i;
        snprintf(d[k].name, sizeof d[k].name, "%s", di->name ? di->name : "(unnamed)");
        snprintf(d[k].host_api, sizeof d[k].host_api, "%s", hi && hi->name ? hi->name : "");
        d[k].max_input_channels = di->maxInputChannels;
        d[k].max_output_channels = di->maxOutputChannels;
        d[k].default_rate = di->defaultSampleRate;
        d[k].is_default_input = i == def_in;
        d[k].is_default_output = i == def_out;
        k++;
    }
    pa_release();
    if (k == 0) {
        free(d);
        d = NULL;
    }
    *out = d;
    *n = k;
    return RLX_OK;
}

/* Picks the device (default or by index) that has channels in the wanted
 * direction; PortAudio must be acquired. */
static rlx_status pick_device(int device, bool input, PaDeviceIndex *out, rlx_error **err)
{
    const char *what = input ? "input" : "output";
    int count = Pa_GetDeviceCount();
    if (count < 0)
        return rlx_error_set(err, RLX_ERR_DEVICE, "The audio devices could not be listed: %s.",
                             Pa_GetErrorText(count));
    PaDeviceIndex i;
    if (device < 0) {
        i = input ? Pa_GetDefaultInputDevice() : Pa_GetDefaultOutputDevice();
        if (i == paNoDevice)
            return rlx_error_set(err, RLX_ERR_NOT_FOUND,
                                 input ? "No microphone or other audio input device was found."
                                       : "No speakers or other audio output device were found.");
    } else {
        if (device >= count)
            return rlx_error_set(err, RLX_ERR_NOT_FOUND,
                                 "There is no audio device number %d (this machine has %d).",
                                 device, count);
        i = device;
    }
    const PaDeviceInfo *di = Pa_GetDeviceInfo(i);
    if (!di)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "Audio device %d has gone away.", (int)i);
    if ((input ? di->maxInputChannels : di->maxOutputChannels) < 1)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "\"%s\" has no %s channels.", di->name,
                             what);
    *out = i;
    return RLX_OK;
}

/* Opens a stream on `dev` at `want_rate` if the device takes it, else at its
 * own default rate; mono if it takes it, else stereo. */
static rlx_status open_stream(PaDeviceIndex dev, bool input, int want_rate, PaStreamCallback *cb,
                              void *user, unsigned long frames, PaStream **stream, int *rate,
                              int *channels, rlx_error **err)
{
    const PaDeviceInfo *di = Pa_GetDeviceInfo(dev);
    int max_ch = input ? di->maxInputChannels : di->maxOutputChannels;
    double rates[2] = {want_rate, di->defaultSampleRate};
    int chans[2] = {1, max_ch >= 2 ? 2 : 1};
    PaError last = paNoError;
    for (int ri = 0; ri < 2; ri++) {
        if (ri == 1 && (rates[1] < RLX_AUDIO_MIN_RATE || rates[1] > RLX_AUDIO_MAX_RATE ||
                        rates[1] == rates[0]))
            continue;
        for (int ci = 0; ci < 2; ci++) {
            if (ci == 1 && chans[1] == chans[0])
                continue;
            PaStreamParameters sp;
            memset(&sp, 0, sizeof sp);
            sp.device = dev;
            sp.channelCount = chans[ci];
            sp.sampleFormat = paFloat32;
            sp.suggestedLatency =
                input ? di->defaultHighInputLatency : di->defaultHighOutputLatency;
            PaError e = Pa_IsFormatSupported(input ? &sp : NULL, input ? NULL : &sp, rates[ri]);
            if (e == paDeviceUnavailable) {
                last = e;
                goto failed; /* busy: another rate or channel count will not help */
            }
            if (e != paFormatIsSupported) {
                last = e;
                continue;
            }
            e = Pa_OpenStream(stream, input ? &sp : NULL, input ? NULL : &sp, rates[ri], frames,
                              paClipOff, cb, user);
            if (e == paNoError) {
                *rate = (int)rates[ri];
                *channels = chans[ci];
                return RLX_OK;
            }
            last = e;
            if (e == paDeviceUnavailable)
                goto failed;
        }
    }
failed:
    if (last == paDeviceUnavailable)
        return rlx_error_set(err, RLX_ERR_DEVICE,
                             "The audio device \"%s\" is busy or unavailable (another program may "
                             "be using it).",
                             di->name);
    return rlx_error_set(err, RLX_ERR_DEVICE, "The audio device \"%s\" could not be opened: %s.",
                         di->name, Pa_GetErrorText(last));
}

/* ---- capture ---- */

struct rlx_audio_capture {
    rlx_audio_capture_params p;
    PaStream *stream;
    int dev_rate, dev_channels;
    /* ring of mono samples at dev_rate: the PortAudio callback writes, the
     * delivery thread reads; positions only grow (masked to index) */
    float *ring;
    size_t ring_mask;
    _Atomic size_t wpos, rpos;
    _Atomic int64_t dropped;
    _Atomic bool stop;
    _Atomic float level_db;
    pthread_t thread;
    bool thread_started;
    bool uses_pa; /* PortAudio acquired (false for detached test captures) */
    SRC_STATE *src;
    double ratio;
    float *in, *out; /* drain and resampler buffers */
    size_t out_cap;
    float *chunk;
    size_t fill;
};

#define DRAIN 4096

static int capture_cb(const void *input, void *output, unsigned long frames,
                      const PaStreamCallbackTimeInfo *ti, PaStreamCallbackFlags flags, void *user)
{
    (void)output;
    (void)ti;
    (void)flags;
    rlx_audio_capture *c = user;
    const float *x = input;
    if (!x)
        return paContinue;
    size_t w = atomic_load_explicit(&c->wpos, memory_order_relaxed);
    size_t r = atomic_load_explicit(&c->rpos, memory_order_acquire);
    size_t space = c->ring_mask + 1 - (w - r);
    size_t take = frames < space ? frames : space;
    int ch = c->dev_channels;
    for (size_t i = 0; i < take; i++) {
        float s = x[i * ch];
        for (int k = 1; k < ch; k++)
            s += x[i * ch + k];
        c->ring[(w + i) & c->ring_mask] = s / (float)ch;
    }
    atomic_store_explicit(&c->wpos, w + take, memory_order_release);
    if (take < frames)
        atomic_fetch_add_explicit(&c->dropped, (int64_t)(frames - take), memory_order_relaxed);
    return paContinue;
}

static void deliver(rlx_audio_capture *c, const float *x, size_t n, bool last)
{
    size_t want = (size_t)c->p.chunk;
    while (n > 0 || (last && c->fill > 0)) {
        size_t take = want - c->fill < n ? want - c->fill : n;
        memcpy(c->chunk + c->fill, x, take * sizeof(float));
        c->fill += take;
        x += take;
        n -= take;
        if (c->fill == want || (last && n == 0)) {
            double e = 0.0;
            for (size_t i = 0; i < c->fill; i++)
                e += (double)c->chunk[i] * c->chunk[i];
            double rms = c->fill ? sqrt(e / (double)c->fill) : 0.0;
            float db = rms > 1e-6 ? (float)(20.0 * log10(rms)) : -120.0f;
            atomic_store(&c->level_db, db);
            c->p.on_chunk(c->chunk, c->fill, c->p.user);
            c->fill = 0;
        }
    }
}

/* Resamples (or passes) n device-rate samples and delivers them. */
static void process(rlx_audio_capture *c, const float *x, size_t n, bool last)
{
    if (!c->src) {
        deliver(c, x, n, last);
        return;
    }
    for (;;) {
        SRC_DATA d;
        memset(&d, 0, sizeof d);
        d.data_in = x;
        d.input_frames = (long)n;
        d.data_out = c->out;
        d.output_frames = (long)c->out_cap;
        d.end_of_input = last;
        d.src_ratio = c->ratio;
        if (src_process(c->src, &d) != 0)
            return; /* cannot happen with a valid state; drop rather than spin */
        x += d.input_frames_used;
        n -= (size_t)d.input_frames_used;
        bool done = n == 0 && (!last || d.output_frames_gen == 0);
        deliver(c, c->out, (size_t)d.output_frames_gen, last && done);
        if (done || (d.input_frames_used == 0 && d.output_frames_gen == 0))
            return;
    }
}

static void *capture_thread(void *arg)
{
    rlx_audio_capture *c = arg;
    for (;;) {
        bool stopping = atomic_load(&c->stop);
        size_t r = atomic_load_explicit(&c->rpos, memory_order_relaxed);
        size_t w = atomic_load_explicit(&c->wpos, memory_order_acquire);
        size_t avail = w - r;
        if (avail == 0) {
            if (stopping) {
                process(c, c->in, 0, true);
                return NULL;
            }
            /* 10 ms: a tenth of a chunk; no lock shared with the callback */
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        size_t take = avail < DRAIN ? avail : DRAIN;
        for (size_t i = 0; i < take; i++)
            c->in[i] = c->ring[(r + i) & c->ring_mask];
        atomic_store_explicit(&c->rpos, r + take, memory_order_release);
        process(c, c->in, take, false);
    }
}

rlx_audio_capture_params rlx_audio_capture_default_params(void)
{
    rlx_audio_capture_params p;
    memset(&p, 0, sizeof p);
    p.device = -1;
    p.rate = 16000;
    p.chunk = 1600;
    return p;
}

static void capture_free(rlx_audio_capture *c)
{
    if (c->src)
        src_delete(c->src);
    free(c->ring);
    free(c->in);
    free(c->out);
    free(c->chunk);
    free(c);
}

static rlx_status check_capture_params(const rlx_audio_capture_params *p, rlx_audio_capture **out,
                                       rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!p || !out || !p->on_chunk)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "Starting a capture needs parameters with an on_chunk callback.");
    if (p->rate < RLX_AUDIO_MIN_RATE || p->rate > RLX_AUDIO_MAX_RATE || p->chunk < 1 ||
        p->chunk > p->rate * 10)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "A capture at %d Hz in chunks of %d samples cannot be delivered.",
                             p->rate, p->chunk);
    return RLX_OK;
}

/* The ring, buffers, resampler and delivery thread for a device running at
 * c->dev_rate with c->dev_channels (set by the caller). */
static rlx_status capture_prepare(rlx_audio_capture *c, rlx_error **err)
{
    const rlx_audio_capture_params *p = &c->p;
    atomic_store(&c->level_db, -120.0f);
    size_t cap = 1;
    while (cap < (size_t)c->dev_rate * 2)
        cap <<= 1;
    c->ring = malloc(cap * sizeof(float));
    c->ring_mask = cap - 1;
    c->in = malloc(DRAIN * sizeof(float));
    c->chunk = malloc((size_t)p->chunk * sizeof(float));
    if (c->dev_rate != p->rate) {
        int e = 0;
        c->ratio = (double)p->rate / c->dev_rate;
        c->out_cap = (size_t)(DRAIN * c->ratio) + 64;
        c->out = malloc(c->out_cap * sizeof(float));
        c->src = src_new(SRC_SINC_MEDIUM_QUALITY, 1, &e);
    }
    if (!c->ring || !c->in || !c->chunk || (c->dev_rate != p->rate && (!c->out || !c->src)))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory starting a capture.");
    if (pthread_create(&c->thread, NULL, capture_thread, c) != 0)
        return rlx_error_set(err, RLX_ERR_INTERNAL, "The capture thread could not start.");
    c->thread_started = true;
    return RLX_OK;
}

rlx_status rlx_audio_capture_start(const rlx_audio_capture_params *p, rlx_audio_capture **out,
                                   rlx_error **err)
{
    rlx_status st = check_capture_params(p, out, err);
    if (st != RLX_OK)
        return st;
    st = pa_acquire(err);
    if (st != RLX_OK)
        return st;
    PaDeviceIndex dev;
    st = pick_device(p->device, true, &dev, err);
    if (st != RLX_OK) {
        pa_release();
        return st;
    }
    rlx_audio_capture *c = calloc(1, sizeof *c);
    if (!c) {
        pa_release();
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory starting a capture.");
    }
    c->p = *p;
    c->uses_pa = true;
    st = open_stream(dev, true, p->rate, capture_cb, c, paFramesPerBufferUnspecified, &c->stream,
                     &c->dev_rate, &c->dev_channels, err);
    if (st != RLX_OK) {
        capture_free(c);
        pa_release();
        return st;
    }
    st = capture_prepare(c, err);
    if (st != RLX_OK) {
        rlx_audio_capture_stop(c);
        return st;
    }
    PaError e = Pa_StartStream(c->stream);
    if (e != paNoError) {
        const PaDeviceInfo *di = Pa_GetDeviceInfo(dev);
        st = rlx_error_set(err, RLX_ERR_DEVICE,
                           e == paDeviceUnavailable
                               ? "The audio input \"%s\" is busy or unavailable (%s)."
                               : "The audio input \"%s\" could not start: %s.",
                           di ? di->name : "?", Pa_GetErrorText(e));
        rlx_audio_capture_stop(c);
        return st;
    }
    *out = c;
    return RLX_OK;
}

rlx_status rlx_audio_capture_start_detached(const rlx_audio_capture_params *p, int dev_rate,
                                            int dev_channels, rlx_audio_capture **out,
                                            rlx_error **err)
{
    rlx_status st = check_capture_params(p, out, err);
    if (st != RLX_OK)
        return st;
    if (dev_rate < RLX_AUDIO_MIN_RATE || dev_rate > RLX_AUDIO_MAX_RATE || dev_channels < 1 ||
        dev_channels > RLX_AUDIO_MAX_CHANNELS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "A device at %d Hz with %d channels?",
                             dev_rate, dev_channels);
    rlx_audio_capture *c = calloc(1, sizeof *c);
    if (!c)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory starting a capture.");
    c->p = *p;
    c->dev_rate = dev_rate;
    c->dev_channels = dev_channels;
    st = capture_prepare(c, err);
    if (st != RLX_OK) {
        rlx_audio_capture_stop(c);
        return st;
    }
    *out = c;
    return RLX_OK;
}

void rlx_audio_capture_feed(rlx_audio_capture *c, const float *interleaved, size_t frames)
{
    capture_cb(interleaved, NULL, frames, NULL, 0, c);
}

float rlx_audio_capture_level_db(const rlx_audio_capture *c)
{
    return c ? atomic_load(&((rlx_audio_capture *)c)->level_db) : -120.0f;
}

int64_t rlx_audio_capture_dropped(const rlx_audio_capture *c)
{
    return c ? atomic_load(&((rlx_audio_capture *)c)->dropped) : 0;
}

int rlx_audio_capture_device_rate(const rlx_audio_capture *c)
{
    return c ? c->dev_rate : 0;
}

void rlx_audio_capture_stop(rlx_audio_capture *c)
{
    if (!c)
        return;
    /* Pa_StopStream returns after the last callback: the ring is final */
    if (c->stream)
        Pa_StopStream(c->stream);
    atomic_store(&c->stop, true);
    if (c->thread_started)
        pthread_join(c->thread, NULL);
    if (c->stream)
        Pa_CloseStream(c->stream);
    bool pa = c->uses_pa;
    capture_free(c);
    if (pa)
        pa_release();
}

/* ---- playback ---- */

#define PLAY_FRAMES 512

struct rlx_audio_playback {
    PaStream *stream;
    const float *x;
    int64_t n;
    _Atomic int64_t pos;
    _Atomic bool finished;
    bool uses_pa; /* PortAudio acquired (false for detached test playback) */
    int dev_rate, channels;
    SRC_STATE *src;
    double ratio;
    float tmp[PLAY_FRAMES];
};

static int play_cb(const void *input, void *output, unsigned long frames,
                   const PaStreamCallbackTimeInfo *ti, PaStreamCallbackFlags flags, void *user)
{
    (void)input;
    (void)ti;
    (void)flags;
    rlx_audio_playback *p = user;
    float *o = output;
    int64_t pos = atomic_load_explicit(&p->pos, memory_order_relaxed);
    size_t got = 0;
    bool end = false;
    if (frames > PLAY_FRAMES)
        frames = PLAY_FRAMES; /* the stream is opened with this size; be safe */
    if (!p->src) {
        int64_t left = p->n - pos;
        got = left < (int64_t)frames ? (size_t)left : frames;
        memcpy(p->tmp, p->x + pos, got * sizeof(float));
        pos += (int64_t)got;
        end = pos >= p->n;
    } else {
        SRC_DATA d;
        memset(&d, 0, sizeof d);
        d.data_in = p->x + pos;
        d.input_frames = (long)(p->n - pos);
        d.data_out = p->tmp;
        d.output_frames = (long)frames;
        d.end_of_input = 1; /* every remaining sample is given each time */
        d.src_ratio = p->ratio;
        if (src_process(p->src, &d) != 0) {
            end = true;
        } else {
            pos += d.input_frames_used;
            got = (size_t)d.output_frames_gen;
            end = got < frames;
        }
    }
    for (size_t i = 0; i < frames; i++) {
        float s = i < got ? p->tmp[i] : 0.0f;
        for (int c = 0; c < p->channels; c++)
            o[i * p->channels + c] = s;
    }
    atomic_store_explicit(&p->pos, pos, memory_order_relaxed);
    if (end) {
        atomic_store(&p->finished, true);
        return paComplete;
    }
    return paContinue;
}

static rlx_status check_play_args(const float *x, int64_t n, int rate, int64_t offset,
                                  rlx_audio_playback **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out || (!x && n > 0) || n < 0 || offset < 0 || offset > n)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "Playback needs samples and a start between 0 and their count.");
    if (rate < RLX_AUDIO_MIN_RATE || rate > RLX_AUDIO_MAX_RATE)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "Cannot play audio at %d Hz.", rate);
    return RLX_OK;
}

/* The resampler when the device runs at another rate than the samples. */
static rlx_status play_prepare(rlx_audio_playback *p, int rate, rlx_error **err)
{
    if (p->dev_rate == rate)
        return RLX_OK;
    int e = 0;
    p->ratio = (double)p->dev_rate / rate;
    p->src = src_new(SRC_SINC_MEDIUM_QUALITY, 1, &e);
    if (!p->src)
        return rlx_error_set(err, RLX_ERR_INTERNAL, "The resampler could not start: %s.",
                             src_strerror(e));
    return RLX_OK;
}

rlx_status rlx_audio_play_start(const float *x, int64_t n, int rate, int64_t offset, int device,
                                rlx_audio_playback **out, rlx_error **err)
{
    rlx_status st = check_play_args(x, n, rate, offset, out, err);
    if (st != RLX_OK)
        return st;
    st = pa_acquire(err);
    if (st != RLX_OK)
        return st;
    PaDeviceIndex dev;
    st = pick_device(device, false, &dev, err);
    if (st != RLX_OK) {
        pa_release();
        return st;
    }
    rlx_audio_playback *p = calloc(1, sizeof *p);
    if (!p) {
        pa_release();
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory starting playback.");
    }
    p->x = x;
    p->n = n;
    p->uses_pa = true;
    atomic_store(&p->pos, offset);
    st = open_stream(dev, false, rate, play_cb, p, PLAY_FRAMES, &p->stream, &p->dev_rate,
                     &p->channels, err);
    if (st != RLX_OK) {
        free(p);
        pa_release();
        return st;
    }
    st = play_prepare(p, rate, err);
    if (st != RLX_OK) {
        rlx_audio_playback_stop(p);
        return st;
    }
    PaError e = Pa_StartStream(p->stream);
    if (e != paNoError) {
        st =
            rlx_error_set(err, RLX_ERR_DEVICE, "Playback could not start: %s.", Pa_GetErrorText(e));
        rlx_audio_playback_stop(p);
        return st;
    }
    *out = p;
    return RLX_OK;
}

rlx_status rlx_audio_play_start_detached(const float *x, int64_t n, int rate, int64_t offset,
                                         int dev_rate, int dev_channels, rlx_audio_playback **out,
                                         rlx_error **err)
{
    rlx_status st = check_play_args(x, n, rate, offset, out, err);
    if (st != RLX_OK)
        return st;
    if (dev_rate < RLX_AUDIO_MIN_RATE || dev_rate > RLX_AUDIO_MAX_RATE || dev_channels < 1 ||
        dev_channels > RLX_AUDIO_MAX_CHANNELS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "A device at %d Hz with %d channels?",
                             dev_rate, dev_channels);
    rlx_audio_playback *p = calloc(1, sizeof *p);
    if (!p)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "Out of memory starting playback.");
    p->x = x;
    p->n = n;
    p->dev_rate = dev_rate;
    p->channels = dev_channels;
    atomic_store(&p->pos, offset);
    st = play_prepare(p, rate, err);
    if (st != RLX_OK) {
        rlx_audio_playback_stop(p);
        return st;
    }
    *out = p;
    return RLX_OK;
}

bool rlx_audio_playback_pull(rlx_audio_playback *p, float *out, size_t frames)
{
    if (frames > PLAY_FRAMES)
        frames = PLAY_FRAMES;
    return play_cb(NULL, out, frames, NULL, 0, p) == paContinue;
}

int64_t rlx_audio_playback_position(const rlx_audio_playback *p)
{
    return p ? atomic_load(&((rlx_audio_playback *)p)->pos) : 0;
}

bool rlx_audio_playback_finished(const rlx_audio_playback *p)
{
    return p ? atomic_load(&((rlx_audio_playback *)p)->finished) : true;
}

void rlx_audio_playback_stop(rlx_audio_playback *p)
{
    if (!p)
        return;
    if (p->stream) {
        Pa_AbortStream(p->stream);
        Pa_CloseStream(p->stream);
    }
    if (p->src)
        src_delete(p->src);
    bool pa = p->uses_pa;
    free(p);
    if (pa)
        pa_release();
}
