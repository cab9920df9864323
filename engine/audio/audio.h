/* Audio files in, mono float samples at a chosen rate out: decoding through
 * libsndfile (WAV, FLAC, OGG/Vorbis, OGG/Opus, MP3 and the rest libsndfile
 * reads), channels averaged to mono, resampled with libsamplerate.
 *
 * Usage:
 *     rlx_audio_reader *r = NULL;
 *     rlx_error *err = NULL;
 *     if (rlx_audio_open("talk.flac", 16000, &r, &err) != RLX_OK) { ...report err... }
 *     float buf[16000];
 *     int64_t got;
 *     while ((got = rlx_audio_read(r, buf, 16000, &err)) > 0)
 *         ...use got samples...
 *     if (got < 0) ...report err...
 *     rlx_audio_close(r);
 *
 *     // or the whole file at once (short clips, tests)
 *     float *x = NULL; int64_t n = 0;
 *     rlx_audio_load("jfk.wav", 16000, &x, &n, &err); ... free(x);
 *
 * A reader decodes and resamples window by window (a few thousand frames at a
 * time), so an hour-long file never sits in memory as floats; only
 * rlx_audio_load holds a whole file. Samples are floats in [-1, 1] (integer
 * PCM divided by 2^(bits-1), as ffmpeg's s16le/32768 does for 16-bit files).
 *
 * Files are refused with a sentence when missing or unreadable, not audio or
 * corrupt, empty (no samples), or when the header is absurd: a sample rate
 * outside RLX_AUDIO_MIN_RATE..RLX_AUDIO_MAX_RATE or more than
 * RLX_AUDIO_MAX_CHANNELS channels (hostile or broken headers, not recordings).
 *
 * Thread safety: a reader belongs to one thread at a time; different readers
 * may be used from different threads at once. rlx_audio_load and
 * rlx_audio_write_wav are reentrant.
 */
#ifndef RLX_ENGINE_AUDIO_AUDIO_H
#define RLX_ENGINE_AUDIO_AUDIO_H

#include <stdint.h>

#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sample rates outside this range, in a file or asked for, are refused. */
#define RLX_AUDIO_MIN_RATE 1000
#define RLX_AUDIO_MAX_RATE 384000
/* More channels than this is not a recording we mix to mono: refused. */
#define RLX_AUDIO_MAX_CHANNELS 8

/* What the file itself holds (before mixing and resampling). */
typedef struct rlx_audio_info {
    int64_t frames;  /* per channel; libsndfile's count (an estimate for MP3) */
    int sample_rate; /* Hz */
    int channels;
    double seconds;
    char format[32]; /* "WAV", "FLAC", "OGG/Vorbis", "OGG/Opus", "MP3", ... */
} rlx_audio_info;

typedef struct rlx_audio_reader rlx_audio_reader;

/* Opens `path` for reading mono samples at `out_rate` Hz. *out is set to NULL
 * first and owned by the caller (rlx_audio_close).
 * Errors: RLX_ERR_INVALID_ARG (NULL path, out_rate out of range),
 * RLX_ERR_IO (missing, unreadable, a folder), RLX_ERR_FORMAT (not audio,
 * corrupt, no samples, absurd rate or channel count), RLX_ERR_NO_MEMORY. */
RLX_API rlx_status rlx_audio_open(const char *path, int out_rate, rlx_audio_reader **out,
                                  rlx_error **err);
RLX_API const rlx_audio_info *rlx_audio_reader_info(const rlx_audio_reader *r);
/* The number of samples at out_rate the whole file gives: frames * out_rate /
 * in_rate rounded up; an estimate where the frame count is (MP3). */
RLX_API int64_t rlx_audio_reader_length(const rlx_audio_reader *r);
/* Reads up to n mono samples at out_rate into dst (channels averaged).
 * Returns the count (less than n only at the end), 0 at the end, -1 on a
 * decoding error (err set, the reader stays usable only for close). */
RLX_API int64_t rlx_audio_read(rlx_audio_reader *r, float *dst, int64_t n, rlx_error **err);
/* Positions the reader so that the next read starts at `sample` (at out_rate).
 * With resampling, reading resumes from a little earlier in the file and the
 * overlap is discarded, so what follows equals a straight read from the start
 * (to the resampler's float rounding). A sample past the end leaves the reader
 * at the end. Errors: RLX_ERR_INVALID_ARG (negative), RLX_ERR_IO/FORMAT when
 * the file cannot seek or decode there. */
RLX_API rlx_status rlx_audio_seek(rlx_audio_reader *r, int64_t sample, rlx_error **err);
RLX_API void rlx_audio_close(rlx_audio_reader *r);

/* The whole file as mono floats at out_rate: *samples (malloc'd, caller
 * free()s; NULL when it fails) and *n. Errors as rlx_audio_open and _read. */
RLX_API rlx_status rlx_audio_load(const char *path, int out_rate, float **samples, int64_t *n,
                                  rlx_error **err);

/* Writes x[0..n) as a mono 16-bit PCM WAV at `rate` (values clipped to
 * [-1, 1]); replaces an existing file. n may be 0 (a valid empty WAV).
 * Errors: RLX_ERR_INVALID_ARG (rate out of range, NULL x with n > 0),
 * RLX_ERR_IO (cannot create or write the file; a partial file is removed). */
RLX_API rlx_status rlx_audio_write_wav(const char *path, const float *x, int64_t n, int rate,
                                       rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
