/* Live transcription: audio arrives in chunks (a microphone), and segments
 * come out once they can no longer change.
 *
 * Usage:
 *     rlx_whisper_live_params lp = rlx_whisper_live_default_params();
 *     rlx_whisper_callbacks cb = {.segment = print_segment, .user = me};
 *     rlx_whisper_live *l = NULL;
 *     if (rlx_whisper_live_create(w, &dp, &lp, &cb, &l, &err) != RLX_OK) ...
 *     while (capturing)
 *         rlx_whisper_live_push(l, chunk, n, &err); // decodes every step_s of new audio
 *     rlx_whisper_live_flush(l, &err);              // decodes the rest; everything settles
 *     rlx_whisper_save(rlx_whisper_live_result(l), RLX_WHISPER_SRT, "talk.srt", &err);
 *     rlx_whisper_live_free(l);
 *
 * How: the samples since the last settled point are kept. Every step_s of
 * new audio they are transcribed again from that point (rlx_whisper_transcribe
 * on the samples in memory). A segment settles when it ends more than settle_s
 * before the end of the audio captured so far: later audio can no longer
 * change it (Whisper only revises the words near the window's end). Settled
 * segments go to cb->segment in order, once each, with times in the whole
 * recording that never go backwards, and the settled point moves to the end
 * of the last one. When nothing settles, the kept audio is bounded anyway:
 * audio with no segment at all older than settle_s is dropped, and at
 * max_window_s every segment but the last is settled. rlx_whisper_live_flush
 * settles everything (Stop, Ctrl+C, end of input).
 *
 * Decoding: dp's options apply to every decode, except offset_ms and
 * duration_ms (ignored). With dp->language "auto" (or NULL), the language
 * detected with the first settled segment is kept for the rest, so the
 * transcript does not switch language between decodes. With
 * condition_on_previous_text, the settled text (after dp->initial_prompt) is
 * the prompt of the next decode, as openai conditions a window on the last.
 * Only cb->segment and cb->language are called.
 *
 * Stopping: rlx_whisper_cancel(w) (any thread) stops the decode in progress;
 * push or flush then returns RLX_ERR_CANCELLED and nothing from that decode
 * settles (a later push or flush decodes that audio again). A segment
 * callback returning false settles that segment, stops and returns
 * RLX_ERR_CANCELLED.
 *
 * Ownership: the live object borrows the runner (and dp's strings) for its
 * lifetime; the result belongs to the live object.
 * Thread safety: one thread at a time (push from the thread that drains a
 * capture, not from rlx_audio_capture's on_chunk, which must not block for
 * a decode), except rlx_whisper_cancel.
 */
#ifndef RLX_MODELS_WHISPER_WHISPER_LIVE_H
#define RLX_MODELS_WHISPER_WHISPER_LIVE_H

#include "models/whisper/whisper.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rlx_whisper_live rlx_whisper_live;

typedef struct rlx_whisper_live_params {
    double step_s;       /* decode after this much new audio (3) */
    double settle_s;     /* a segment settles once it ends this long before the end (2) */
    double max_window_s; /* keep at most about this much unsettled audio (24; <= 30) */
} rlx_whisper_live_params;

RLX_API rlx_whisper_live_params rlx_whisper_live_default_params(void);

/* *out is set to NULL first. dp and lp may be NULL (defaults); cb may be NULL.
 * Errors: RLX_ERR_INVALID_ARG (no runner, step_s or settle_s <= 0, max_window_s
 * not above settle_s + step_s or above 30). */
RLX_API rlx_status rlx_whisper_live_create(rlx_whisper *w, const rlx_whisper_decode_params *dp,
                                           const rlx_whisper_live_params *lp,
                                           const rlx_whisper_callbacks *cb, rlx_whisper_live **out,
                                           rlx_error **err);
/* Append n 16 kHz mono samples; decodes when step_s of new audio has come.
 * Errors: the decoder's, RLX_ERR_CANCELLED, RLX_ERR_NO_MEMORY. */
RLX_API rlx_status rlx_whisper_live_push(rlx_whisper_live *l, const float *samples, size_t n,
                                         rlx_error **err);
/* Decode what has not settled and settle all of it. Pushing may go on after. */
RLX_API rlx_status rlx_whisper_live_flush(rlx_whisper_live *l, rlx_error **err);
/* The settled segments so far (language, segments, timings.audio_s = audio
 * pushed, the decoders' timings summed); valid until the next call. */
RLX_API const rlx_whisper_result *rlx_whisper_live_result(const rlx_whisper_live *l);
/* Seconds of audio not settled yet. */
RLX_API double rlx_whisper_live_pending_s(const rlx_whisper_live *l);
RLX_API void rlx_whisper_live_free(rlx_whisper_live *l);

#ifdef __cplusplus
}
#endif
#endif
