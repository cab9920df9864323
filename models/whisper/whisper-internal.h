/* Shared between the Whisper runner's files; not installed. */
#ifndef RLX_MODELS_WHISPER_WHISPER_INTERNAL_H
#define RLX_MODELS_WHISPER_WHISPER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/status.h"
#include "engine/audio/mel.h"
#include "engine/runtime/session.h"
#include "models/whisper/whisper-file.h"
#include "models/whisper/whisper.h"

struct rlx_graph;

#define RLX_WHISPER_MAX_BEAMS 16
/* Decoder programs: steps of up to STEP_SEQ tokens anywhere in the context,
 * and prompts of up to PREFILL_SEQ tokens from its start (PAST + SEQ must fit
 * the 448 positions at both symbols' bounds). */
#define RLX_WHISPER_STEP_SEQ    8
#define RLX_WHISPER_PREFILL_SEQ 232

/* The name of beam-count nb's self-attention cache of layer il (v: values). */
void rlx_whisper_cache_name(char *buf, size_t cap, int v, int nb, int il);
rlx_status rlx_whisper_build_encoder(const rlx_whisper_file *f, bool with_output,
                                     struct rlx_graph **out, rlx_error **err);
/* heads: n_heads (layer, head) pairs whose cross-attention scores come out
 * as "xqk" [1, n, SEQ, n_audio_ctx] (word timestamps); NULL/0: none. */
rlx_status rlx_whisper_build_decoder(const rlx_whisper_file *f, int nb, int seq_max, bool all,
                                     const int32_t *heads, int n_heads, struct rlx_graph **out,
                                     rlx_error **err);
rlx_status rlx_whisper_build_reorder(const rlx_whisper_file *f, int nb, struct rlx_graph **out,
                                     rlx_error **err);

struct rlx_whisper {
    rlx_whisper_file *file;
    rlx_session *s;
    const rlx_whisper_hparams *hp;
    const rlx_whisper_special *sp;
    rlx_session_program *enc, *enc_out, *dec_all, *align;
    /* decoder and beam-reorder programs by beam count, compiled on first use */
    rlx_session_program *dec[RLX_WHISPER_MAX_BEAMS + 1], *pre[RLX_WHISPER_MAX_BEAMS + 1],
        *reorder[RLX_WHISPER_MAX_BEAMS + 1];
    /* one token at a time at the context's last RLX_WHISPER_STEP_SEQ - 1
     * positions, which dec's bound (n_text_ctx - STEP_SEQ) leaves out */
    rlx_session_program *tail[RLX_WHISPER_MAX_BEAMS + 1];
    int max_beams;
    rlx_mel *mel;
    volatile int cancel;
    float *logits;               /* [RLX_WHISPER_MAX_BEAMS][n_vocab] */
    rlx_whisper_timings *timing; /* of the transcription running, or NULL */
};

/* Run the decoder program for nb beams (1..RLX_WHISPER_MAX_BEAMS) with seq
 * tokens per beam at positions past..; logits [nb][n_vocab] of each beam's
 * last token. */
rlx_status rlx_whisper_run_decoder(rlx_whisper *w, int nb, const int32_t *tokens, int32_t seq,
                                   int32_t past, float *logits, rlx_error **err);
/* Beam i's cache <- beam src[i]'s, for nb beams. */
rlx_status rlx_whisper_run_reorder(rlx_whisper *w, int nb, const int32_t *src, rlx_error **err);

double rlx_whisper_now_ms(void);

/* openai's logit filters (SuppressBlank, SuppressTokens, ApplyTimestampRules)
 * on one step's logits [n_vocab], in place; sampled: the n tokens after the
 * initial ones; scratch: [n_vocab] floats. For tests. */
void rlx_whisper_filter_logits(rlx_whisper *w, const rlx_whisper_decode_params *dp,
                               const int32_t *sampled, int n, float *logits, float *scratch);
/* openai's temperature-fallback decision and no-speech skip for one window's
 * compression ratio, average log-probability and no-speech probability. */
bool rlx_whisper_needs_fallback(const rlx_whisper_decode_params *dp, float compression_ratio,
                                double avg_logprob, float no_speech_prob);
bool rlx_whisper_should_skip(const rlx_whisper_decode_params *dp, double avg_logprob,
                             float no_speech_prob);
/* the compression ratio of a window's sampled tokens, as openai's fallback
 * measures repetition */
float rlx_whisper_compression_ratio(rlx_whisper *w, const int32_t *tok, int n);

/* Word timestamps for the n_segs segments one window just gave (whisper-words.c):
 * sot_seq the window's start-of-transcript sequence (sot[, language, task]),
 * n_frames the window's audio frames, t_off_ms its start. Fills each
 * segment's words and its tokens' times. */
rlx_status rlx_whisper_add_words(rlx_whisper *w, const int32_t *sot_seq, int n_sot,
                                 rlx_whisper_segment *segs, int n_segs, int64_t n_frames,
                                 int64_t t_off_ms, double *last_speech_s, rlx_error **err);
/* openai's add_word_timestamps heuristics. Before the punctuation merge: the
 * median of the words' nonzero durations (at most 0.7 s) into *median, twice
 * it into *max_dur, and a word longer than that at a sentence's end (or just
 * after one) cut to it. Per segment (last_speech_s in/out, seconds): the
 * first words after a pause cut to max_dur, and the segment's start and end
 * taken from its words unless a word is too long, then the word's from the
 * segment. A NULL last_speech_s in rlx_whisper_add_words skips the latter. */
void rlx_whisper_clip_long_words(char *const *texts, float *t0, float *t1, int n, float *median,
                                 float *max_dur);
void rlx_whisper_fit_segment_words(rlx_whisper_segment *seg, float median, float max_dur,
                                   double *last_speech_s);
/* Its two halves, for tests: the alignment heads' filtered, averaged
 * cross-attention over the no-timestamps and text tokens' rows
 * ([(n_text + 1) * F], F = n_frames / 2 into *out_f), and (probs, n_text,
 * may be NULL) each text token's probability in that same pass, as openai's
 * find_alignment takes them: the softmax over the tokens below end-of-text
 * at the position before it ... */
rlx_status rlx_whisper_align_matrix(rlx_whisper *w, const int32_t *sot_seq, int n_sot,
                                    const int32_t *text, int n_text, int64_t n_frames, float *mat,
                                    int *out_f, float *probs, rlx_error **err);
/* ... and the words that dynamic time warping of -mat gives: start/end
 * seconds, first token and count per word, texts (malloc'd) if not NULL;
 * the word count, or -1 when out of memory. */
/* openai's merge_punctuations on n words (texts malloc'd, changed in place):
 * an opening mark with its space joins the next word, a closing mark the
 * word before; the merged word keeps its own times and gains the mark's
 * tokens. Returns the words left (-1: no memory). */
int rlx_whisper_merge_punctuation(char **texts, int *first, int *count, float *t0, float *t1,
                                  int n);
int rlx_whisper_words_from_matrix(const rlx_whisper *w, const int32_t *text, int n_text,
                                  const float *mat, int F, float *t0, float *t1, int *first,
                                  int *count, char **texts);

#endif
