/* Whisper's log-mel spectrogram, computed window by window.
 *
 * Usage:
 *     float filters[80 * 201];
 *     rlx_mel_filters_slaney(80, 400, 16000, filters);   // or the file's own filterbank
 *     rlx_mel *m = NULL;
 *     if (rlx_mel_create(80, filters, &m, &err) != RLX_OK) ...
 *     float *x = malloc(sizeof(float) * 80 * 3000);
 *     // frames [start, start + 3000) of openai-whisper's log_mel_spectrogram
 *     rlx_mel_log(m, audio, n_samples, start, 3000, x, &err);
 *     rlx_mel_normalize(x, 80 * 3000);                    // max - 8 clamp, (x + 4) / 4
 *     rlx_mel_free(m);
 *
 * The transform is openai-whisper's: 16 kHz audio with 480000 zeros appended
 * (padding=N_SAMPLES), reflect-padded by 200 at both ends (torch.stft's
 * center=True), a periodic Hann window of 400, hop 160, |STFT|^2 with the
 * last frame dropped, the filterbank applied, log10 of max(mel, 1e-10). Frame
 * t covers samples [160 t - 200, 160 t + 200), so any window of frames is
 * computed from the samples it covers alone, never the whole file.
 *
 * openai-whisper and whisper.cpp normalize with the maximum over the WHOLE
 * file's spectrogram (every 30 s window shares it); call rlx_mel_normalize
 * on one window only when that is what is wanted (live capture).
 *
 * Thread safety: an rlx_mel belongs to one thread at a time (it owns its FFT
 * buffers); separate rlx_mels may run on separate threads. Creating and
 * freeing are safe from any thread (FFTW's planner is guarded by a lock).
 * rlx_mel_filters_slaney and rlx_mel_normalize are reentrant.
 */
#ifndef RLX_ENGINE_AUDIO_MEL_H
#define RLX_ENGINE_AUDIO_MEL_H

#include <stddef.h>
#include <stdint.h>

#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_MEL_N_FFT      400
#define RLX_MEL_HOP        160
#define RLX_MEL_N_BINS     (RLX_MEL_N_FFT / 2 + 1) /* 201 */
#define RLX_MEL_RATE       16000
#define RLX_MEL_PAD        480000 /* zeros appended: 30 s at 16 kHz */
#define RLX_MEL_MAX_N_MELS 512

typedef struct rlx_mel rlx_mel;

/* librosa.filters.mel(sr=sample_rate, n_fft=n_fft, n_mels=n_mels) with its
 * defaults (fmin 0, fmax sr/2, Slaney's mel scale, Slaney area norm) into
 * out[n_mels][n_fft/2 + 1], computed in double and stored as float as librosa
 * does. Whisper's mel_filters.npz (and so the filterbank inside whisper.cpp
 * files) is this for 80 and 128 mels. RLX_ERR_INVALID_ARG on n_mels outside
 * 1..RLX_MEL_MAX_N_MELS, n_fft < 2 or > 65536, a rate <= 0, or NULL out. */
RLX_API rlx_status rlx_mel_filters_slaney(int n_mels, int n_fft, int sample_rate, float *out);

/* filters: [n_mels][201] (copied), or NULL for rlx_mel_filters_slaney(n_mels,
 * 400, 16000). *out is set to NULL first; free with rlx_mel_free. */
RLX_API rlx_status rlx_mel_create(int n_mels, const float *filters, rlx_mel **out, rlx_error **err);
RLX_API int rlx_mel_n_mels(const rlx_mel *m);

/* openai-whisper's log_mel_spectrogram(audio, padding=N_SAMPLES)[:, start_frame:
 * start_frame + n_frames], BEFORE the max-8 clamp and the (x + 4) / 4: that is,
 * log10(max(mel, 1e-10)), into out[n_mels][n_frames] (row-major: mel bin
 * major, frame minor). `audio` is the whole 16 kHz signal known so far (n
 * samples, n may be 0); samples past its end read as zeros, as openai's
 * padding does, so frames beyond n / 160 + 3000 are simply silence (-10).
 * Errors: RLX_ERR_INVALID_ARG for NULLs, negative counts or start. */
RLX_API rlx_status rlx_mel_log(rlx_mel *m, const float *audio, int64_t n, int64_t start_frame,
                               int64_t n_frames, float *out, rlx_error **err);

/* x = max(x, max(x) - 8); x = (x + 4) / 4 over the n values. Returns the
 * max used (-INFINITY when n is 0). */
RLX_API float rlx_mel_normalize(float *x, size_t n);
/* The same with a max the caller computed (the whole file's). */
RLX_API void rlx_mel_normalize_with(float *x, size_t n, float max);

RLX_API void rlx_mel_free(rlx_mel *m);

#ifdef __cplusplus
}
#endif
#endif
