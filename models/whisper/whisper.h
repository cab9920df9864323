/* The Whisper runner: a whisper.cpp ggml .bin or a Hugging Face
 * openai/whisper-* folder on a session, turning 16 kHz audio into
 * timestamped segments.
 *
 * Usage:
 *     rlx_whisper_params p = rlx_whisper_default_params();
 *     p.device = "cpu";
 *     rlx_whisper *w = NULL;
 *     if (rlx_whisper_create("ggml-base.bin", &p, &w, &err) != RLX_OK) ...
 *     rlx_whisper_decode_params dp = rlx_whisper_decode_default_params();
 *     dp.language = "auto";
 *     rlx_whisper_callbacks cb = {.segment = on_segment, .user = ui};
 *     rlx_whisper_result *r = NULL;
 *     rlx_whisper_transcribe_file(w, "talk.mp3", &dp, &cb, &r, &err);
 *     rlx_whisper_write(r, RLX_WHISPER_SRT, stdout);
 *     rlx_whisper_result_free(r);
 *     rlx_whisper_free(w);
 *
 * The network runs on the session's device as two compiled programs: the
 * encoder (log-mel window -> audio features, and every decoder layer's
 * cross-attention keys and values, which stay on the device as state for the
 * whole 30-s window) and the decoder (tokens -> next-token logits, with its
 * self-attention KV cache on the device). The host computes the log-mel
 * front end (FFTW3), the logit filters (suppression, timestamp rules) and the
 * search (greedy or beam), as openai-whisper does.
 *
 * Long recordings are read window by window (engine/audio): only the 30-s
 * window being decoded and the next one are held as samples.
 *
 * Stopping: rlx_whisper_cancel (any thread), or a callback returning false,
 * ends the transcription after the current step; the segments already
 * reported stay in the result, and the call returns RLX_ERR_CANCELLED.
 *
 * Ownership: the runner owns its session and model file; a result belongs to
 * the caller (rlx_whisper_result_free). Segments handed to callbacks are
 * valid during the call only.
 * Thread safety: a runner is used by one thread at a time, except
 * rlx_whisper_cancel, which any thread may call.
 */
#ifndef RLX_MODELS_WHISPER_WHISPER_H
#define RLX_MODELS_WHISPER_WHISPER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backends/base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rlx_session;
struct rlx_whisper_file;
typedef struct rlx_whisper rlx_whisper;

#define RLX_WHISPER_SAMPLE_RATE 16000
#define RLX_WHISPER_N_FFT       400
#define RLX_WHISPER_HOP         160
#define RLX_WHISPER_CHUNK_S     30
#define RLX_WHISPER_N_SAMPLES   (RLX_WHISPER_SAMPLE_RATE * RLX_WHISPER_CHUNK_S) /* 480000 */
#define RLX_WHISPER_N_FRAMES    (RLX_WHISPER_N_SAMPLES / RLX_WHISPER_HOP)       /* 3000 */

/* Return false to abort loading (RLX_ERR_CANCELLED). */
typedef bool (*rlx_whisper_progress_fn)(void *user, const char *stage, double fraction);

typedef struct rlx_whisper_params {
    const char *device;     /* "cpu", "vulkan:0", "cuda:0"; NULL = "cpu" */
    int n_threads;          /* CPU threads; 0 = one per core the process may use */
    uint64_t memory_budget; /* bytes; 0 = the device's (see rlx_session_params) */
    int max_beams;          /* the largest beam size decodes will ask for (1, up to 16): its
                             * programs and caches are made, and budgeted, at load */
    rlx_whisper_progress_fn progress; /* loading progress, or NULL */
    void *progress_user;
} rlx_whisper_params;

RLX_API rlx_whisper_params rlx_whisper_default_params(void);

/* Open the model (a ggml .bin file or a Hugging Face folder), check it, add
 * its weights to a new session and compile the programs. *out is set to NULL
 * first. Errors: the file's (RLX_ERR_IO, RLX_ERR_FORMAT, RLX_ERR_UNSUPPORTED),
 * RLX_ERR_BUDGET when the model does not fit, the device's. */
RLX_API rlx_status rlx_whisper_create(const char *model_path, const rlx_whisper_params *p,
                                      rlx_whisper **out, rlx_error **err);
RLX_API void rlx_whisper_free(rlx_whisper *w);
/* Any thread: stop the running transcription after its current step. */
RLX_API void rlx_whisper_cancel(rlx_whisper *w);

RLX_API const struct rlx_whisper_file *rlx_whisper_model_file(const rlx_whisper *w);
RLX_API struct rlx_session *rlx_whisper_session(rlx_whisper *w);
/* "tiny", "base.en", "large-v3", ... */
RLX_API const char *rlx_whisper_kind(const rlx_whisper *w);
RLX_API bool rlx_whisper_is_multilingual(const rlx_whisper *w);

typedef struct rlx_whisper_decode_params {
    const char *language;  /* "auto" or NULL: detect (English-only models: "en"); "en", "de", ... */
    bool translate;        /* translate to English instead of transcribing */
    bool no_timestamps;    /* one segment per window, no timestamp tokens */
    int beam_size;         /* <= 1: greedy (best_of samples when falling back); else beam search */
    int best_of;           /* candidates sampled at temperature > 0 (5) */
    float temperature;     /* the first temperature (0) */
    float temperature_inc; /* fallback step (0.2); 0 or no_fallback: no fallback */
    bool no_fallback;
    float compression_ratio_threshold; /* 2.4; fall back above it */
    float logprob_threshold;           /* -1.0; fall back below it */
    float no_speech_threshold;         /* 0.6; skip a window above it (with low logprob) */
    bool condition_on_previous_text;   /* true */
    const char *initial_prompt;        /* or NULL */
    int64_t offset_ms;                 /* start this far into the audio */
    int64_t duration_ms;               /* 0 = to the end */
    bool word_timestamps;              /* per-word times from the alignment heads */
    int max_tokens_per_window;         /* 224 (openai's sample_len) */
    uint64_t seed;                     /* for temperature > 0 */
} rlx_whisper_decode_params;

RLX_API rlx_whisper_decode_params rlx_whisper_decode_default_params(void);

typedef struct rlx_whisper_token {
    int32_t id;
    float p;       /* its probability when it was chosen */
    int64_t t0_ms; /* word timestamps only (else -1) */
    int64_t t1_ms;
} rlx_whisper_token;

typedef struct rlx_whisper_word {
    char *text;
    int64_t t0_ms, t1_ms;
    float p;
} rlx_whisper_word;

typedef struct rlx_whisper_segment {
    int32_t index;
    int64_t t0_ms, t1_ms; /* in the whole recording */
    char *text;           /* UTF-8, as decoded (leading space kept) */
    int32_t n_tokens;     /* text and timestamp tokens, no specials */
    rlx_whisper_token *tokens;
    int32_t n_words; /* word_timestamps only */
    rlx_whisper_word *words;
    float avg_logprob;
    float no_speech_prob;
    float temperature;
    float compression_ratio;
} rlx_whisper_segment;

typedef struct rlx_whisper_timings {
    double audio_s;    /* seconds of audio transcribed */
    double load_ms;    /* reading and resampling */
    double mel_ms;     /* log-mel front end */
    double encode_ms;  /* encoder runs (all windows) */
    int32_t n_windows; /* encoder runs: the windows, and a clip shorter than one detecting its
                          language once more (openai detects on the padded log-mel) */
    double decode_ms;  /* decoder runs */
    int64_t n_decode_tokens;
    double total_ms;
} rlx_whisper_timings;

typedef struct rlx_whisper_result {
    char language[16]; /* the code used or detected */
    float language_p;  /* its probability when detected, else 1 */
    int32_t n_segments;
    rlx_whisper_segment *segments;
    rlx_whisper_timings timings;
    bool cancelled;
} rlx_whisper_result;

typedef struct rlx_whisper_callbacks {
    /* A segment settled (also stored in the result). false: stop. */
    bool (*segment)(void *user, const rlx_whisper_segment *seg);
    /* Position in the audio. false: stop. */
    bool (*progress)(void *user, double done_s, double total_s);
    /* The language, once known (detected or given). */
    void (*language)(void *user, const char *code, float p);
    void *user;
} rlx_whisper_callbacks;

/* Transcribe a file (any format engine/audio reads). cb may be NULL. On
 * RLX_ERR_CANCELLED, *out still holds what was decoded. */
RLX_API rlx_status rlx_whisper_transcribe_file(rlx_whisper *w, const char *path,
                                               const rlx_whisper_decode_params *dp,
                                               const rlx_whisper_callbacks *cb,
                                               rlx_whisper_result **out, rlx_error **err);
/* The same on 16 kHz mono samples in memory. */
RLX_API rlx_status rlx_whisper_transcribe(rlx_whisper *w, const float *samples, int64_t n,
                                          const rlx_whisper_decode_params *dp,
                                          const rlx_whisper_callbacks *cb, rlx_whisper_result **out,
                                          rlx_error **err);
RLX_API void rlx_whisper_result_free(rlx_whisper_result *r);

/* Language detection on the first 30 s of samples: probs[i] for language i
 * (rlx_whisper_language_code(i)), n_probs entries written (the model's
 * language count). */
RLX_API rlx_status rlx_whisper_detect_language(rlx_whisper *w, const float *samples, int64_t n,
                                               float *probs, int32_t cap, int32_t *n_probs,
                                               rlx_error **err);

/* ---- lower level, for tests and benchmarks ---- */

/* Run the encoder on one normalized log-mel window [n_mels][3000]; the
 * cross-attention keys/values stay on the device for rlx_whisper_decode.
 * enc_out (or NULL): [n_audio_ctx][n_audio_state]. */
RLX_API rlx_status rlx_whisper_encode(rlx_whisper *w, const float *mel, float *enc_out,
                                      rlx_error **err);
/* Decode n tokens at positions past..past+n-1 of beam 0 (the self-attention
 * cache holds positions < past); logits [n][n_vocab] for every position
 * when all is true, else [n_vocab] for the last. */
RLX_API rlx_status rlx_whisper_decode(rlx_whisper *w, const int32_t *tokens, int32_t n,
                                      int32_t past, bool all, float *logits, rlx_error **err);
/* Decode the window rlx_whisper_encode left on the device once, at
 * dp->temperature, without fallback or previous text: the tokens after the
 * initial ones up to (not including) the end of text, with the language
 * (detected when dp->language is "auto"), the average log-probability and
 * the no-speech probability, as openai-whisper's DecodingResult. */
RLX_API rlx_status rlx_whisper_decode_window(rlx_whisper *w, const rlx_whisper_decode_params *dp,
                                             int32_t *tokens, int32_t cap, int32_t *n,
                                             float *avg_logprob, float *no_speech_prob,
                                             rlx_error **err);
/* The normalized log-mel of window [start, start+3000) frames of samples. */
RLX_API rlx_status rlx_whisper_mel(rlx_whisper *w, const float *samples, int64_t n,
                                   int64_t start_frame, float *mel, rlx_error **err);

/* ---- output formats ---- */
typedef enum rlx_whisper_format {
    RLX_WHISPER_TXT,
    RLX_WHISPER_SRT,
    RLX_WHISPER_VTT,
    RLX_WHISPER_JSON,
} rlx_whisper_format;

/* The format a path's extension names (.txt .srt .vtt .json); -1 if none. */
RLX_API int rlx_whisper_format_from_path(const char *path);
/* Write all segments in a format; RLX_ERR_IO when the stream fails. */
RLX_API rlx_status rlx_whisper_write(const rlx_whisper_result *r, rlx_whisper_format fmt, FILE *f,
                                     rlx_error **err);
/* "00:01:02,345" (SRT, comma) or "00:01:02.345" (VTT, dot) into buf. */
RLX_API char *rlx_whisper_format_time(int64_t ms, bool comma, char *buf, size_t cap);
/* Write atomically to a path (temporary file + rename). */
RLX_API rlx_status rlx_whisper_save(const rlx_whisper_result *r, rlx_whisper_format fmt,
                                    const char *path, rlx_error **err);

#ifdef __cplusplus
}
#endif
#endif
