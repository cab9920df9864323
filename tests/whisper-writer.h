/* A random-weight Whisper with whisper-tiny's real shapes, written as a
 * whisper.cpp ggml .bin (F32 or F16) and as a Hugging Face folder, for the
 * tests that compare models/whisper against tests/reference/whisper_reference.py.
 * Linked into tests only.
 *
 * A second layout, rlx_ww_v3, is large-v3(-turbo)'s at small widths: 128 mel
 * bins (the 128-row Slaney filterbank of tests/fixtures/mel-filters-128-ref.f32),
 * the 51,866-token vocabulary (100 languages, "yue" last, so translate,
 * transcribe, ..., the timestamps sit one id higher than tiny's), 1500 audio
 * positions, d_model 256 in 4 heads, 2 encoder and 4 decoder layers (turbo's
 * decoder depth). The rlx_ww_* functions take a layout; the
 * rlx_whisper_writer_* ones are tiny's:
 *
 *     rlx_ww_write_ggml(&rlx_ww_v3, src, "/tmp/v3.bin", false, &err);
 *     rlx_ww_write_hf(&rlx_ww_v3, src, "/tmp/v3-hf", &err);
 *
 * Usage:
 *     rlx_error *err = NULL;
 *     const char *src = rlx_test_data("whisper/for-tests-ggml-tiny.bin");
 *     if (rlx_whisper_writer_ggml(src, "/tmp/w.bin", false, &err) != RLX_OK) ...
 *     if (rlx_whisper_writer_hf(src, "/tmp/w-hf", &err) != RLX_OK) ...  // folder is created
 *     float v = rlx_whisper_writer_value(rlx_whisper_writer_find("decoder.ln.weight"), 7);
 *
 * The weights (the same in every format; F16 files hold their F16 rounding):
 *
 *   u(name, i) = 2 * (splitmix64(fnv1a64(name) + (i + 1) * 0x9e3779b97f4a7c15) >> 40) / 2^24 - 1
 *
 * uniform in [-1, 1) with 24 significant bits (exact in float32), where name is
 * the canonical openai-whisper state-dict name (whisper-spec.md, also for the HF
 * names) and i the row-major (PyTorch order) element index. splitmix64(z):
 * z ^= z >> 30; z *= 0xbf58476d1ce4e5b9; z ^= z >> 27; z *= 0x94d049bb133111eb;
 * z ^= z >> 31. fnv1a64: offset 0xcbf29ce484222325, prime 0x100000001b3, over
 * the name's bytes. The value, computed in float32:
 *
 *   weights of linears and convolutions     u * (float)(gain * sqrt(3 / fan_in))
 *       (fan_in = in_features, or in_channels * 3 for the convolutions: variance
 *       gain^2 / fan_in, so each layer keeps the scale of its input);
 *       gain = 4 for every attention's query and key weights (random attention
 *       is otherwise nearly uniform, and greedy decoding then repeats one token
 *       forever), 1/4 for decoder.blocks.*.cross_attn.out.weight (the audio
 *       context is almost the same vector at every position and would swamp
 *       the residual stream), 1 for the rest
 *   layer-norm weights                      1 + u / 8
 *   layer-norm biases, all other biases     u / 16
 *   decoder.token_embedding.weight          u / 2
 *   decoder.positional_embedding            u / 2
 *   encoder.positional_embedding            openai's sinusoids(1500, n) (n = 384
 *       for tiny): [t][k] = sin(t * exp(-k * log(10000) / (n/2 - 1))),
 *       [t][n/2 + k] = cos(same), k < n/2, computed in double and rounded to
 *       float32 (openai computes it in float32: the two differ by about one
 *       float32 ulp)
 *
 * The power-of-two scales keep every product exact, so the value does not
 * depend on whether a compiler fuses the multiply and add. With these scales
 * the activations stay O(1) through the four layers of each stack.
 * tests/reference/whisper_reference.py implements the same generator in numpy.
 *
 * Writing takes well under a second a file in a release build (~150 MB for
 * F32, ~78 MB for F16).
 *
 * Thread safety: the tensor table is built on first use, without a lock:
 * call any function once before using them from several threads; after that
 * everything is reentrant.
 */
#ifndef RLX_TESTS_WHISPER_WRITER_H
#define RLX_TESTS_WHISPER_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/base/status.h"

/* whisper-tiny's shapes (the header of for-tests-ggml-tiny.bin must agree) */
#define RLX_WW_N_VOCAB     51865
#define RLX_WW_N_AUDIO_CTX 1500
#define RLX_WW_N_STATE     384
#define RLX_WW_N_HEAD      6
#define RLX_WW_N_LAYER     4
#define RLX_WW_N_TEXT_CTX  448
#define RLX_WW_N_MELS      80

/* A layout: the ggml header's hyper-parameters (both stacks share d_model
 * and the head count, as in every Whisper). */
typedef struct rlx_ww_config {
    const char *name; /* "tiny", "v3" */
    int32_t n_vocab, n_audio_ctx, n_state, n_head, n_audio_layer, n_text_ctx, n_text_layer, n_mels;
} rlx_ww_config;

/* whisper-tiny's shapes (the RLX_WW_N_* above) */
extern const rlx_ww_config rlx_ww_tiny;
/* large-v3's vocabulary and mels at small widths: n_vocab 51866, 1500 audio
 * positions, d_model 256, 4 heads, 2 + 4 layers, 448 text positions, 128 mels */
extern const rlx_ww_config rlx_ww_v3;

typedef enum rlx_ww_kind {
    RLX_WW_MATRIX,    /* u * gain * sqrt(3 / fan_in) */
    RLX_WW_LN_WEIGHT, /* 1 + u / 8 */
    RLX_WW_BIAS,      /* u / 16 (layer-norm biases too) */
    RLX_WW_EMBEDDING, /* u / 2 */
    RLX_WW_SINUSOIDS, /* openai's sinusoids() */
} rlx_ww_kind;

typedef struct rlx_ww_tensor {
    const char *name;    /* canonical (openai / whisper.cpp) name */
    const char *hf_name; /* transformers' name */
    int rank;
    int64_t shape[3]; /* row-major (PyTorch order) */
    int64_t fan_in;   /* RLX_WW_MATRIX only */
    rlx_ww_kind kind;
} rlx_ww_tensor;

/* A layout's tensors in openai's state-dict order; the table is static and
 * immutable once built. */
size_t rlx_ww_n_tensors(const rlx_ww_config *c);
const rlx_ww_tensor *rlx_ww_tensor_at(const rlx_ww_config *c, size_t i);
/* NULL when no tensor has that canonical (or HF) name. */
const rlx_ww_tensor *rlx_ww_find(const rlx_ww_config *c, const char *name);

/* The same for tiny (167 tensors). */
size_t rlx_whisper_writer_n_tensors(void);
const rlx_ww_tensor *rlx_whisper_writer_tensor(size_t i);
/* NULL when no tensor has that canonical (or HF) name. */
const rlx_ww_tensor *rlx_whisper_writer_find(const char *name);
int64_t rlx_whisper_writer_numel(const rlx_ww_tensor *t);

/* The extra factor of a matrix's scale (4 for attention queries and keys,
 * 1/4 for the cross-attention output, 1 otherwise; see above). */
double rlx_whisper_writer_gain(const rlx_ww_tensor *t);
/* Element i (row-major) of tensor t, as float32. */
float rlx_whisper_writer_value(const rlx_ww_tensor *t, int64_t i);
/* Elements [first, first + n) into dst. */
void rlx_whisper_writer_fill(const rlx_ww_tensor *t, int64_t first, int64_t n, float *dst);

/* A whisper.cpp ggml file at out_path. The hparams, mel filterbank and
 * vocabulary are copied from header_src (for-tests-ggml-tiny.bin, which has
 * no tensors), with ftype set to 0 (F32) or 1 (F16). F16 follows whisper.cpp's
 * convert-pt-to-ggml.py: tensors of 2+ dims are F16 except the positional
 * embeddings and the conv biases; the conv biases are stored [n, 1] (ggml ne
 * {1, n}). Fails with a sentence when header_src is unreadable, malformed, or
 * not whisper-tiny's shapes, or the output cannot be written. */
rlx_status rlx_whisper_writer_ggml(const char *header_src, const char *out_path, bool f16,
                                   rlx_error **err);

/* The same for any layout. header_src is still for-tests-ggml-tiny.bin: its
 * hyper-parameters are replaced by the layout's, its 80-row filterbank by
 * tests/fixtures/mel-filters-<n_mels>-ref.f32 when n_mels is not 80, and its
 * 50,257 text words are kept (whisper.cpp's files hold only those; the
 * loader derives every special id from n_vocab). */
rlx_status rlx_ww_write_ggml(const rlx_ww_config *c, const char *header_src, const char *out_path,
                             bool f16, rlx_error **err);

/* The same with ftype 7, as whisper.cpp's quantize q8_0 writes it: every 2-D
 * matrix but the positional embeddings in Q8_0 blocks (our CPU quantizer,
 * ggml's block layout), the conv weights F16, the rest F32. as_f32: those
 * matrices as F32 holding exactly what the blocks decode to (the conv
 * weights F16 as before), so the quantized path can be checked against the
 * float path on the same weights. */
rlx_status rlx_whisper_writer_ggml_q8_0(const char *header_src, const char *out_path, bool as_f32,
                                        rlx_error **err);

/* A Hugging Face folder at out_dir (created when missing): config.json
 * (openai/whisper-tiny's WhisperConfig), generation_config.json (its
 * suppress_tokens, begin_suppress_tokens, lang_to_id, task_to_id,
 * no_timestamps_token_id, alignment_heads, ...), model.safetensors (F32,
 * transformers' names; conv biases [n]; no proj_out, it is tied), and from
 * header_src's vocabulary vocab.json (GPT-2 byte-to-unicode strings) and
 * added_tokens.json (the special and timestamp tokens). vocab.json leaves out
 * the ids header_src cannot spell (empty id 50256; the 1,480 words the test
 * file stores with U+FFFD in place of partial UTF-8). No merges.txt or tokenizer.json: the ggml
 * vocabulary does not hold the BPE merges. */
rlx_status rlx_whisper_writer_hf(const char *header_src, const char *out_dir, rlx_error **err);

/* The same for any layout: config.json with its num_mel_bins, vocab_size and
 * widths, generation_config.json and added_tokens.json with its special ids
 * (for v3: 100 languages, <|yue|> = 50358, <|translate|> = 50359, ...,
 * <|0.00|> = 50365, as openai's tokenizer.py with num_languages=100 and
 * openai/whisper-large-v3's files number them). */
rlx_status rlx_ww_write_hf(const rlx_ww_config *c, const char *header_src, const char *out_dir,
                           rlx_error **err);

/* ---- the fixtures of tests/reference/whisper_reference.py ----
 * (layouts in that script's docstring; "-f16" variants for the F16 weights) */

/* the decoder prompt of whisper-ref-logits*.f32: sot, <|en|>, <|transcribe|>,
 * <|0.00|>, then four text tokens */
#define RLX_WW_PROMPT_LEN 8
extern const int32_t rlx_ww_prompt[RLX_WW_PROMPT_LEN];
/* whisper-ref-mel*.f32: [80][RLX_WW_MEL_COLS], column j is frame
 * rlx_ww_mel_frame(j) (0..255, then 1050..1149) */
#define RLX_WW_MEL_COLS 356
int rlx_ww_mel_frame(int j);
/* whisper-ref-encoder*.f32: [RLX_WW_ENC_ROWS][384], row j is encoder position
 * rlx_ww_enc_row(j) (0..15, 740..755, 1484..1499) */
#define RLX_WW_ENC_ROWS 48
int rlx_ww_enc_row(int j);
/* whisper-ref-logits*.f32: [8][RLX_WW_LOGIT_COLS], column j is vocabulary id
 * rlx_ww_logit_col(j) (multiples of 97 below 50265, then 50265..51864) */
#define RLX_WW_LOGIT_COLS 2119
int rlx_ww_logit_col(int j);

/* A whole fixture tests/fixtures/<name> of exactly n float32s (malloc'd; the
 * caller frees), or NULL when it is missing or another size. */
float *rlx_ww_fixture_f32(const char *name, size_t n);

/* The encoder input of the encoder/decoder fixtures: the reference's normalized
 * mel of jfk.wav, [80][3000] mel-major (malloc'd; the caller frees), assembled
 * from whisper-ref-mel-input-{a,b}.f32 and the constant frames past 1101;
 * NULL when a fixture is missing. */
float *rlx_ww_fixture_mel_input(void);

/* whisper-ref-greedy*.txt */
typedef struct rlx_ww_greedy {
    int n;                 /* sampled tokens (up to 224) */
    int32_t id[224];       /* the greedy tokens after sot, <|en|>, <|transcribe|> */
    double margin[224];    /* chosen minus best other allowed logit (near tie if small) */
    double ts_margin[224]; /* log P(timestamps) - max log P(text), +-inf where one is all
                              suppressed */
    double logit[224];     /* the chosen token's raw logit */
    double lse[224];       /* logsumexp of the raw logits */
    double no_speech_prob; /* softmax at the sot position of the first step, at 50362 */
    double no_speech_logprob;
} rlx_ww_greedy;
/* false when the fixture is missing or malformed */
bool rlx_ww_fixture_greedy(const char *name, rlx_ww_greedy *out);

#endif
