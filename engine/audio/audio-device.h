/* Microphones and speakers through PortAudio: list devices, capture mono
 * float chunks at 16 kHz, play a mono float buffer.
 *
 * Usage:
 *     rlx_audio_device_info *devs = NULL; int n = 0;
 *     if (rlx_audio_devices_list(&devs, &n, &err) == RLX_OK) { ...; free(devs); }
 *
 *     static void on_chunk(const float *x, size_t n, void *user) { ...append x... }
 *     rlx_audio_capture_params p = rlx_audio_capture_default_params();
 *     p.on_chunk = on_chunk; p.user = me;           // p.device = -1: the default input
 *     rlx_audio_capture *c = NULL;
 *     if (rlx_audio_capture_start(&p, &c, &err) != RLX_OK) ...show the sentence...
 *     ... rlx_audio_capture_level_db(c) for a level meter ...
 *     rlx_audio_capture_stop(c);                     // delivers the rest, then frees
 *
 *     rlx_audio_playback *pb = NULL;
 *     rlx_audio_play_start(x, n, 16000, from_sample, -1, &pb, &err);
 *     ... rlx_audio_playback_position(pb), rlx_audio_playback_finished(pb) ...
 *     rlx_audio_playback_stop(pb);                   // stops now, then frees
 *
 * Capture: PortAudio's realtime callback only mixes to mono and copies into a
 * lock-free ring; a plain thread of ours drains the ring, resamples to the
 * asked rate with libsamplerate when the device would not open at it, and
 * calls on_chunk with fixed-size chunks. on_chunk may therefore block a
 * little (append to a buffer, signal a condition) but not for long: if the
 * ring (2 s) fills, samples are dropped and counted.
 *
 * A machine with no sound card is normal (servers, CI): listing then gives an
 * empty list (or RLX_ERR_DEVICE when PortAudio cannot start at all), and
 * starting a capture or playback fails with a sentence.
 *
 * Thread safety: every function may be called from any thread. A capture or
 * playback object belongs to the thread that started it for _stop; its
 * level/position/finished readers may be called from any thread meanwhile.
 * PortAudio is initialized on first use and terminated when the last user
 * stops (reference-counted). on_chunk runs on the capture's own thread.
 */
#ifndef RLX_ENGINE_AUDIO_AUDIO_DEVICE_H
#define RLX_ENGINE_AUDIO_AUDIO_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlx_audio_device_info {
    int index; /* what rlx_audio_capture_params.device / play_start take */
    char name[256];
    char host_api[64]; /* "ALSA", "PulseAudio", "JACK Audio Connection Kit", ... */
    int max_input_channels;
    int max_output_channels;
    double default_rate;
    bool is_default_input;
    bool is_default_output;
} rlx_audio_device_info;

/* Every input and output device: *out (malloc'd array, caller free()s; NULL
 * when there are none) and *n. Errors: RLX_ERR_DEVICE when PortAudio cannot
 * start or enumerate. */
RLX_API rlx_status rlx_audio_devices_list(rlx_audio_device_info **out, int *n, rlx_error **err);

/* n mono samples at params.rate; the pointer is valid during the call only. */
typedef void (*rlx_audio_chunk_fn)(const float *samples, size_t n, void *user);

typedef struct rlx_audio_capture_params {
    int device; /* a device index, or -1 for the default input */
    int rate;   /* delivered rate, 16000 by default */
    int chunk;  /* samples per on_chunk call, 1600 (0.1 s) by default */
    rlx_audio_chunk_fn on_chunk;
    void *user;
} rlx_audio_capture_params;

typedef struct rlx_audio_capture rlx_audio_capture;

RLX_API rlx_audio_capture_params rlx_audio_capture_default_params(void);
/* Opens and starts the input; *out is set to NULL first.
 * Errors: RLX_ERR_INVALID_ARG (no on_chunk, rate or chunk out of range, the
 * device has no inputs), RLX_ERR_NOT_FOUND (no input device at all, or no
 * device with that index), RLX_ERR_DEVICE (PortAudio failed to start, the
 * device is busy or refused every rate and channel count). */
RLX_API rlx_status rlx_audio_capture_start(const rlx_audio_capture_params *p,
                                           rlx_audio_capture **out, rlx_error **err);
/* The RMS level of the last delivered chunk in dB relative to full scale
 * (0 dB: a full-scale square wave; -120 for silence). */
RLX_API float rlx_audio_capture_level_db(const rlx_audio_capture *c);
/* Input samples lost because on_chunk did not keep up. */
RLX_API int64_t rlx_audio_capture_dropped(const rlx_audio_capture *c);
/* The rate the device actually runs at (resampled to params.rate). */
RLX_API int rlx_audio_capture_device_rate(const rlx_audio_capture *c);
/* Stops the input, delivers what remains (a last, shorter chunk), joins the
 * capture thread and frees c. Do not call from inside on_chunk. */
RLX_API void rlx_audio_capture_stop(rlx_audio_capture *c);

typedef struct rlx_audio_playback rlx_audio_playback;

/* Plays x[offset..n) (mono, at `rate`) on `device` (-1: the default output).
 * x is NOT copied: it must stay valid and unchanged until
 * rlx_audio_playback_stop returns. When the device will not run at `rate`,
 * its own rate is used and the samples are resampled on the fly.
 * Errors: RLX_ERR_INVALID_ARG (offset outside 0..n, bad rate, NULL x),
 * RLX_ERR_NOT_FOUND (no output device), RLX_ERR_DEVICE (busy, refused). */
RLX_API rlx_status rlx_audio_play_start(const float *x, int64_t n, int rate, int64_t offset,
                                        int device, rlx_audio_playback **out, rlx_error **err);
/* The sample of x being handed to the device now (at `rate`). */
RLX_API int64_t rlx_audio_playback_position(const rlx_audio_playback *p);
/* True once every sample has been handed to the device. */
RLX_API bool rlx_audio_playback_finished(const rlx_audio_playback *p);
/* Stops at once (even mid-buffer) and frees p. */
RLX_API void rlx_audio_playback_stop(rlx_audio_playback *p);

#ifdef __cplusplus
}
#endif
#endif
