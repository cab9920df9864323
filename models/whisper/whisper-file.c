/* Whisper model files: whisper.cpp ggml .bin and Hugging Face folders (whisper-file.h).
 *
 * The mel filterbank for HF folders is computed here (rlx_whisper_mel_filters_slaney) rather
 * than taken from engine/audio/mel.h, which was being written at the same time; the two follow
 * the same formula (librosa's slaney mel), and the ggml files' own filterbank (made by librosa)
 * checks this one in tests/test-whisper-file.c. */
#include "models/whisper/whisper-file.h"

#include <ctype.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "engine/formats/ggml-whisper.h"
#include "engine/formats/safetensors.h"
#include "engine/runtime/session.h"
#include "engine/text/tokenizer-internal.h"

/* ---- languages ---------------------------------------------------------- */

/* openai-whisper's LANGUAGES, in its order (the token order). */
static const char *const languages[][2] = {
    {"en", "english"},        {"zh", "chinese"},     {"de", "german"},        {"es", "spanish"},
    {"ru", "russian"},        {"ko", "korean"},      {"fr", "french"},        {"ja", "japanese"},
    {"pt", "portuguese"},     {"tr", "turkish"},     {"pl", "polish"},        {"ca", "catalan"},
    {"nl", "dutch"},          {"ar", "arabic"},      {"sv", "swedish"},       {"it", "italian"},
    {"id", "indonesian"},     {"hi", "hindi"},       {"fi", "finnish"},       {"vi", "vietnamese"},
    {"he", "hebrew"},         {"uk", "ukrainian"},   {"el", "greek"},         {"ms", "malay"},
    {"cs", "czech"},          {"ro", "romanian"},    {"da", "danish"},        {"hu", "hungarian"},
    {"ta", "tamil"},          {"no", "norwegian"},   {"th", "thai"},          {"ur", "urdu"},
    {"hr", "croatian"},       {"bg", "bulgarian"},   {"lt", "lithuanian"},    {"la", "latin"},
    {"mi", "maori"},          {"ml", "malayalam"},   {"cy", "welsh"},         {"sk", "slovak"},
    {"te", "telugu"},         {"fa", "persian"},     {"lv", "latvian"},       {"bn", "bengali"},
    {"sr", "serbian"},        {"az", "azerbaijani"}, {"sl", "slovenian"},     {"kn", "kannada"},
    {"et", "estonian"},       {"mk", "macedonian"},  {"br", "breton"},        {"eu", "basque"},
    {"is", "icelandic"},      {"hy", "armenian"},    {"ne", "nepali"},        {"mn", "mongolian"},
    {"bs", "bosnian"},        {"kk", "kazakh"},      {"sq", "albanian"},      {"sw", "swahili"},
    {"gl", "galician"},       {"mr", "marathi"},     {"pa", "punjabi"},       {"si", "sinhala"},
    {"km", "khmer"},          {"sn", "shona"},       {"yo", "yoruba"},        {"so", "somali"},
    {"af", "afrikaans"},      {"oc", "occitan"},     {"ka", "georgian"},      {"be", "belarusian"},
    {"tg", "tajik"},          {"sd", "sindhi"},      {"gu", "gujarati"},      {"am", "amharic"},
    {"yi", "yiddish"},        {"lo", "lao"},         {"uz", "uzbek"},         {"fo", "faroese"},
    {"ht", "haitian creole"}, {"ps", "pashto"},      {"tk", "turkmen"},       {"nn", "nynorsk"},
    {"mt", "maltese"},        {"sa", "sanskrit"},    {"lb", "luxembourgish"}, {"my", "myanmar"},
    {"bo", "tibetan"},        {"tl", "tagalog"},     {"mg", "malagasy"},      {"as", "assamese"},
    {"tt", "tatar"},          {"haw", "hawaiian"},   {"ln", "lingala"},       {"ha", "hausa"},
    {"ba", "bashkir"},        {"jw", "javanese"},    {"su", "sundanese"},     {"yue", "cantonese"},
};
#define N_LANGUAGES ((int)(sizeof languages / sizeof languages[0]))

/* openai's TO_LANGUAGE_CODE aliases. */
static const char *const language_aliases[][2] = {
    {"burmese", "my"},       {"valencian", "ca"}, {"flemish", "nl"},   {"haitian", "ht"},
    {"letzeburgesch", "lb"}, {"pushto", "ps"},    {"panjabi", "pa"},   {"moldavian", "ro"},
    {"moldovan", "ro"},      {"sinhalese", "si"}, {"castilian", "es"}, {"mandarin", "zh"},
};

const char *rlx_whisper_language_code(int i)
{
    return i >= 0 && i < N_LANGUAGES ? languages[i][0] : NULL;
}

const char *rlx_whisper_language_name(int i)
{
    return i >= 0 && i < N_LANGUAGES ? languages[i][1] : NULL;
}

int rlx_whisper_language_find(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < N_LANGUAGES; i++)
        if (!strcasecmp(s, languages[i][0]) || !strcasecmp(s, languages[i][1]))
            return i;
    for (size_t i = 0; i < sizeof language_aliases / sizeof language_aliases[0]; i++)
        if (!strcasecmp(s, language_aliases[i][0]))
            return rlx_whisper_language_find(language_aliases[i][1]);
    return -1;
}

/* ---- alignment heads ---------------------------------------------------- */

/* openai-whisper's _ALIGNMENT_HEADS (a base85 gzip'd bool mask per model in its
 * __init__.py), decoded into (text layer, head) pairs. */
static const int32_t ah_tiny_en[] = {1, 0, 2, 0, 2, 5, 3, 0, 3, 1, 3, 2, 3, 3, 3, 4};
static const int32_t ah_tiny[] = {2, 2, 3, 0, 3, 2, 3, 3, 3, 4, 3, 5};
static const int32_t ah_base_en[] = {3, 3, 4, 7, 5, 1, 5, 5, 5, 7};
static const int32_t ah_base[] = {3, 1, 4, 2, 4, 3, 4, 7, 5, 1, 5, 2, 5, 4, 5, 6};
static const int32_t ah_small_en[] = {6,  6, 7,  0, 7,  3, 7,  8,  8,  2,  8,  5,  8,
                                      7,  9, 0,  9, 4,  9, 8,  9,  10, 10, 0,  10, 1,
                                      10, 2, 10, 3, 10, 6, 10, 11, 11, 2,  11, 4};
static const int32_t ah_small[] = {5, 3, 5, 9, 8, 0, 8, 4, 8, 7, 8, 8, 9, 0, 9, 7, 9, 9, 10, 5};
static const int32_t ah_medium_en[] = {11, 4,  14, 1, 14, 12, 14, 14, 15, 4,  16, 0,
                                       16, 4,  16, 9, 17, 12, 17, 14, 18, 7,  18, 10,
                                       18, 15, 20, 0, 20, 3,  20, 9,  20, 14, 21, 12};
static const int32_t ah_medium[] = {13, 15, 15, 4, 15, 15, 16, 1, 20, 0, 23, 4};
static const int32_t ah_large_v1[] = {9, 19, 11, 2,  11, 4,  11, 17, 22,
                                      7, 22, 11, 22, 17, 23, 2,  23, 15};
static const int32_t ah_large_v2[] = {
    10, 12, 13, 17, 16, 11, 16, 12, 16, 13, 17, 15, 17, 16, 18, 4,  18, 11, 18, 19, 19, 11, 21,
    2,  21, 3,  22, 3,  22, 9,  22, 12, 23, 5,  23, 7,  23, 13, 25, 5,  26, 1,  26, 12, 27, 15};
static const int32_t ah_large_v3[] = {7,  0,  10, 17, 12, 18, 13, 12, 16, 1,
                                      17, 14, 19, 11, 21, 4,  24, 1,  25, 6};
static const int32_t ah_large_v3_turbo[] = {2, 4, 2, 11, 3, 3, 3, 6, 3, 11, 3, 14};

static const struct {
    const char *kind;
    const int32_t *pairs;
    size_t n;
} ah_presets[] = {
#define AH(k, a)                         \
    {                                    \
        k, a, sizeof a / sizeof a[0] / 2 \
    }
    AH("tiny.en", ah_tiny_en),     AH("tiny", ah_tiny),
    AH("base.en", ah_base_en),     AH("base", ah_base),
    AH("small.en", ah_small_en),   AH("small", ah_small),
    AH("medium.en", ah_medium_en), AH("medium", ah_medium),
    AH("large-v1", ah_large_v1),   AH("large-v2", ah_large_v2),
    AH("large-v3", ah_large_v3),   AH("large-v3-turbo", ah_large_v3_turbo),
#undef AH
};

const int32_t *rlx_whisper_alignment_heads_preset(const char *kind, size_t *n_pairs)
{
    for (size_t i = 0; kind && i < sizeof ah_presets / sizeof ah_presets[0]; i++)
        if (!strcmp(kind, ah_presets[i].kind)) {
            if (n_pairs)
                *n_pairs = ah_presets[i].n;
            return ah_presets[i].pairs;
        }
    if (n_pairs)
        *n_pairs = 0;
    return NULL;
}

/* ---- slaney mel filterbank ---------------------------------------------- */

static double hz_to_mel(double f)
{
    const double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
    const double logstep = log(6.4) / 27.0;
    return f >= min_log_hz ? min_log_mel + log(f / min_log_hz) / logstep : f / f_sp;
}

static double mel_to_hz(double m)
{
    const double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
    const double logstep = log(6.4) / 27.0;
    return m >= min_log_mel ? min_log_hz * exp(logstep * (m - min_log_mel)) : f_sp * m;
}

rlx_status rlx_whisper_mel_filters_slaney(int n_mels, int n_fft, int sample_rate, float *out,
                                          rlx_error **err)
{
    if (n_mels <= 0 || n_mels > 1024 || n_fft <= 1 || n_fft > (1 << 20) || sample_rate <= 0 || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "a mel filterbank of %d bins over a %d-point FFT at %d Hz is not "
                             "something to compute",
                             n_mels, n_fft, sample_rate);
    int n_freq = n_fft / 2 + 1;
    double *mel_f = malloc((size_t)(n_mels + 2) * sizeof *mel_f);
    if (!mel_f)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for a mel filterbank");
    double lo = hz_to_mel(0.0), hi = hz_to_mel(sample_rate / 2.0);
    for (int i = 0; i < n_mels + 2; i++)
        mel_f[i] = mel_to_hz(lo + (hi - lo) * i / (n_mels + 1));
    for (int m = 0; m < n_mels; m++) {
        double enorm = 2.0 / (mel_f[m + 2] - mel_f[m]);
        double d0 = mel_f[m + 1] - mel_f[m], d1 = mel_f[m + 2] - mel_f[m + 1];
        for (int k = 0; k < n_freq; k++) {
            double f = (double)sample_rate / 2.0 * k / (n_freq - 1);
            double lower = (f - mel_f[m]) / d0, upper = (mel_f[m + 2] - f) / d1;
            double w = lower < upper ? lower : upper;
            out[(size_t)m * n_freq + k] = (float)((w > 0 ? w : 0) * enorm);
        }
    }
    free(mel_f);
    return RLX_OK;
}

/* ---- the file ----------------------------------------------------------- */

typedef struct wf_tensor {
    char *name; /* canonical */
    rlx_dtype dt;
    int rank;
    int64_t dims[RLX_MAX_DIMS];
    const void *data;
    uint64_t bytes;
} wf_tensor;

struct rlx_whisper_file {
    char *path;
    const char *format;
    char kind[32];
    rlx_whisper_hparams hp;
    rlx_whisper_special sp;
    bool multilingual;
    float *filters; /* [n_mels][201] */
    rlx_ggml_whisper *gw;
    rlx_safetensors *st;
    rlx_tokenizer *tok; /* HF only */
    wf_tensor *tensors;
    size_t n_tensors;
    /* token bytes, n_vocab entries (into the ggml mapping or `pool`) */
    const char **tok_ptr;
    uint32_t *tok_len;
    char *pool;
    /* ggml: vocabulary bytes -> lowest id, for the greedy encoder */
    int32_t *vslots; /* id + 1, 0 empty */
    uint64_t vmask;
    size_t max_word;
    pcre2_code *split_re;
    int32_t *suppress, *begin_suppress, *aheads;
    size_t n_suppress, n_begin_suppress, n_aheads;
};

#define N_FREQ          201 /* whisper's 400-point FFT */
#define GREEDY_MAX_WORD 128

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

/* Special ids from the vocabulary size, as whisper.cpp and openai's tokenizer lay them out:
 * the text vocabulary (50256 GPT-2 tokens for English-only models, 50257 for multilingual),
 * <|endoftext|>, <|startoftranscript|>, one token per language, translate, transcribe,
 * startoflm, startofprev, nospeech, notimestamps, then 1501 timestamps. */
static rlx_status set_special(rlx_whisper_file *f, const char *label, rlx_error **err)
{
    int32_t nv = f->hp.n_vocab;
    f->multilingual = nv >= 51865;
    int32_t n_langs = nv - 51765 - (f->multilingual ? 1 : 0);
    if (n_langs < 1 || n_langs > N_LANGUAGES)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: a vocabulary of %d tokens is not a whisper vocabulary (51864 for "
                             "English-only models, 51865 multilingual, 51866 for large-v3)",
                             label, nv);
    rlx_whisper_special *s = &f->sp;
    s->eot = 50256 + (f->multilingual ? 1 : 0);
    s->sot = s->eot + 1;
    s->lang_first = s->sot + 1;
    s->n_langs = n_langs;
    s->translate = s->lang_first + n_langs;
    s->transcribe = s->translate + 1;
    s->solm = s->translate + 2;
    s->prev = s->translate + 3;
    s->no_speech = s->translate + 4;
    s->no_timestamps = s->translate + 5;
    s->timestamp_begin = s->translate + 6;
    return RLX_OK;
}

static void set_kind(rlx_whisper_file *f, const char *hint)
{
    const rlx_whisper_hparams *h = &f->hp;
    const char *base = NULL;
    if (h->n_audio_state == 384 && h->n_audio_layer == 4 && h->n_text_layer == 4)
        base = "tiny";
    else if (h->n_audio_state == 512 && h->n_audio_layer == 6 && h->n_text_layer == 6)
        base = "base";
    else if (h->n_audio_state == 768 && h->n_audio_layer == 12 && h->n_text_layer == 12)
        base = "small";
    else if (h->n_audio_state == 1024 && h->n_audio_layer == 24 && h->n_text_layer == 24)
        base = "medium";
    else if (h->n_audio_state == 1280 && h->n_audio_layer == 32 && h->n_text_layer == 32)
        base = h->n_mels == 128 ? "large-v3" : "large";
    else if (h->n_audio_state == 1280 && h->n_audio_layer == 32 && h->n_text_layer == 4 &&
             h->n_mels == 128)
        base = "large-v3-turbo";
    if (!base || (h->n_mels == 128) != (strstr(base, "large-v3") != NULL)) {
        snprintf(f->kind, sizeof f->kind, "custom");
        return;
    }
    if (!strcmp(base, "large")) {
        /* v1 and v2 have the same shapes: only a name can tell them apart */
        if (hint && strstr(hint, "large-v1"))
            base = "large-v1";
        else if (hint && strstr(hint, "large-v2"))
            base = "large-v2";
    }
    bool en = !f->multilingual && strncmp(base, "large", 5) != 0;
    snprintf(f->kind, sizeof f->kind, "%s%s", base, en ? ".en" : "");
}

static rlx_shape make_shape(int rank, const int64_t *dims)
{
    rlx_shape s = {.rank = rank};
    for (int d = 0; d < rank && d < RLX_MAX_DIMS; d++)
        s.d[d] = rlx_dim_const(dims[d]);
    return s;
}

static const wf_tensor *find_tensor(const rlx_whisper_file *f, const char *name)
{
    for (size_t i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

static rlx_status push_tensor(rlx_whisper_file *f, const char *name, rlx_dtype dt, int rank,
                              const int64_t *dims, const void *data, uint64_t bytes,
                              rlx_error **err)
{
    if (find_tensor(f, name))
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: tensor '%s' appears twice", f->path, name);
    if (rank > RLX_MAX_DIMS)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s: tensor '%s' has %d dimensions", f->path,
                             name, rank);
    wf_tensor *n = realloc(f->tensors, (f->n_tensors + 1) * sizeof *n);
    if (!n)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    f->tensors = n;
    wf_tensor t = {.dt = dt, .rank = rank, .data = data, .bytes = bytes};
    for (int d = 0; d < rank; d++)
        t.dims[d] = dims[d];
    if (!(t.name = strdup(name)))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    f->tensors[f->n_tensors++] = t;
    return RLX_OK;
}

/* The tensors the model needs and their row-major shapes. Calls fn for each; stops at the
 * first failure. */
typedef rlx_status (*expect_fn)(rlx_whisper_file *f, const char *name, int rank,
                                const int64_t *dims, rlx_error **err);

static rlx_status expect_all(rlx_whisper_file *f, expect_fn fn, rlx_error **err)
{
    const rlx_whisper_hparams *h = &f->hp;
    char nm[96];
    rlx_status s;
#define E1(name_, a)                                  \
    do {                                              \
        int64_t d_[1] = {a};                          \
        if ((s = fn(f, name_, 1, d_, err)) != RLX_OK) \
            return s;                                 \
    } while (0)
#define E2(name_, a, b)                               \
    do {                                              \
        int64_t d_[2] = {a, b};                       \
        if ((s = fn(f, name_, 2, d_, err)) != RLX_OK) \
            return s;                                 \
    } while (0)
#define E3(name_, a, b, c)                            \
    do {                                              \
        int64_t d_[3] = {a, b, c};                    \
        if ((s = fn(f, name_, 3, d_, err)) != RLX_OK) \
            return s;                                 \
    } while (0)
#define P(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
    int64_t n = h->n_audio_state, t = h->n_text_state;
    E3("encoder.conv1.weight", n, h->n_mels, 3);
    E1("encoder.conv1.bias", n);
    E3("encoder.conv2.weight", n, n, 3);
    E1("encoder.conv2.bias", n);
    E2("encoder.positional_embedding", h->n_audio_ctx, n);
    for (int side = 0; side < 2; side++) {
        const char *pre = side ? "decoder" : "encoder";
        int64_t w = side ? t : n;
        int layers = side ? h->n_text_layer : h->n_audio_layer;
        for (int i = 0; i < layers; i++) {
            for (int a = 0; a < (side ? 2 : 1); a++) {
                const char *at = a ? "cross_attn" : "attn";
                int64_t kin = a ? n : w; /* cross-attention keys/values come from the audio */
                E1(P("%s.blocks.%d.%s_ln.weight", pre, i, at), w);
                E1(P("%s.blocks.%d.%s_ln.bias", pre, i, at), w);
                E2(P("%s.blocks.%d.%s.query.weight", pre, i, at), w, w);
                E1(P("%s.blocks.%d.%s.query.bias", pre, i, at), w);
                E2(P("%s.blocks.%d.%s.key.weight", pre, i, at), w, kin);
                E2(P("%s.blocks.%d.%s.value.weight", pre, i, at), w, kin);
                E1(P("%s.blocks.%d.%s.value.bias", pre, i, at), w);
                E2(P("%s.blocks.%d.%s.out.weight", pre, i, at), w, w);
                E1(P("%s.blocks.%d.%s.out.bias", pre, i, at), w);
            }
            E1(P("%s.blocks.%d.mlp_ln.weight", pre, i), w);
            E1(P("%s.blocks.%d.mlp_ln.bias", pre, i), w);
            E2(P("%s.blocks.%d.mlp.0.weight", pre, i), 4 * w, w);
            E1(P("%s.blocks.%d.mlp.0.bias", pre, i), 4 * w);
            E2(P("%s.blocks.%d.mlp.2.weight", pre, i), w, 4 * w);
            E1(P("%s.blocks.%d.mlp.2.bias", pre, i), w);
        }
    }
    E1("encoder.ln_post.weight", n);
    E1("encoder.ln_post.bias", n);
    E2("decoder.token_embedding.weight", h->n_vocab, t);
    E2("decoder.positional_embedding", h->n_text_ctx, t);
    E1("decoder.ln.weight", t);
    E1("decoder.ln.bias", t);
#undef E1
#undef E2
#undef E3
#undef P
    return RLX_OK;
}

static void shape_text(int rank, const int64_t *d, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
}

static rlx_status check_one(rlx_whisper_file *f, const char *name, int rank, const int64_t *dims,
                            rlx_error **err)
{
    const wf_tensor *t = find_tensor(f, name);
    if (!t)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s has no tensor '%s', which a %s whisper model needs", f->path, name,
                             f->kind);
    bool same = t->rank == rank;
    for (int d = 0; same && d < rank; d++)
        same = t->dims[d] == dims[d];
    if (!same) {
        char a[96], b[96];
        shape_text(t->rank, t->dims, a, sizeof a);
        shape_text(rank, dims, b, sizeof b);
        if (!strcmp(name, "decoder.token_embedding.weight") && t->rank == 2 &&
            t->dims[1] == dims[1])
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: the token embedding has %lld rows, but the vocabulary size "
                                 "is %d",
                                 f->path, (long long)t->dims[0], f->hp.n_vocab);
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: tensor '%s' is %s, but these hyper-parameters need %s", f->path,
                             name, a, b);
    }
    return RLX_OK;
}

/* Token bytes: the text vocabulary from `word(i)` below eot, openai's names from eot on. */
typedef const char *(*word_fn)(void *ctx, int32_t i, char *buf, size_t cap, size_t *len);

static int special_name(const rlx_whisper_file *f, int32_t id, char *buf, size_t cap)
{
    const rlx_whisper_special *s = &f->sp;
    if (id == s->eot)
        return snprintf(buf, cap, "<|endoftext|>");
    if (id == s->sot)
        return snprintf(buf, cap, "<|startoftranscript|>");
    if (id >= s->lang_first && id < s->lang_first + s->n_langs)
        return snprintf(buf, cap, "<|%s|>", languages[id - s->lang_first][0]);
    if (id == s->translate)
        return snprintf(buf, cap, "<|translate|>");
    if (id == s->transcribe)
        return snprintf(buf, cap, "<|transcribe|>");
    if (id == s->solm)
        return snprintf(buf, cap, "<|startoflm|>");
    if (id == s->prev)
        return snprintf(buf, cap, "<|startofprev|>");
    if (id == s->no_speech)
        return snprintf(buf, cap, "<|nospeech|>");
    if (id == s->no_timestamps)
        return snprintf(buf, cap, "<|notimestamps|>");
    if (id >= s->timestamp_begin)
        return snprintf(buf, cap, "<|%.2f|>", (id - s->timestamp_begin) * 0.02);
    return snprintf(buf, cap, "%s", "");
}

static rlx_status build_tokens(rlx_whisper_file *f, word_fn word, void *ctx, rlx_error **err)
{
    int32_t nv = f->hp.n_vocab;
    f->tok_ptr = calloc((size_t)nv, sizeof *f->tok_ptr);
    f->tok_len = calloc((size_t)nv, sizeof *f->tok_len);
    if (!f->tok_ptr || !f->tok_len)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the vocabulary");
    char buf[512];
    size_t total = 0;
    /* two passes: sizes, then the pool */
    for (int pass = 0; pass < 2; pass++) {
        size_t pos = 0;
        for (int32_t i = 0; i < nv; i++) {
            size_t len = 0;
            const char *p = NULL;
            bool pooled = true;
            if (i >= f->sp.eot) {
                len = (size_t)special_name(f, i, buf, sizeof buf);
                p = buf;
            } else {
                p = word(ctx, i, buf, sizeof buf, &len);
                pooled = p == buf;
                if (!p)
                    p = "", len = 0;
            }
            if (pass == 0) {
                total += pooled ? len : 0;
                continue;
            }
            if (pooled) {
                memcpy(f->pool + pos, p, len);
                f->tok_ptr[i] = f->pool + pos;
                pos += len;
            } else {
                f->tok_ptr[i] = p;
            }
            f->tok_len[i] = (uint32_t)len;
        }
        if (pass == 0 && !(f->pool = malloc(total ? total : 1)))
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the vocabulary");
    }
    return RLX_OK;
}

const char *rlx_whisper_file_token(const rlx_whisper_file *f, int32_t id, size_t *len)
{
    if (!f || id < 0 || id >= f->hp.n_vocab) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = f->tok_len[id];
    return f->tok_ptr[id];
}

/* ---- encoding ----------------------------------------------------------- */

static rlx_status build_vocab_index(rlx_whisper_file *f, rlx_error **err)
{
    uint64_t cap = 16;
    while (cap < (uint64_t)f->sp.eot * 2)
        cap *= 2;
    if (!(f->vslots = calloc((size_t)cap, sizeof *f->vslots)))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the vocabulary index");
    f->vmask = cap - 1;
    for (int32_t id = 0; id < f->sp.eot; id++) {
        size_t n = f->tok_len[id];
        /* whisper's longest token is 33 bytes: longer entries (a hostile file) would only make
         * the greedy search quadratic in them */
        if (!n || n > GREEDY_MAX_WORD)
            continue;
        if (n > f->max_word)
            f->max_word = n;
        uint64_t h = hash_bytes(f->tok_ptr[id], n) & f->vmask;
        bool dup = false;
        while (f->vslots[h] && !dup) {
            int32_t o = f->vslots[h] - 1;
            dup = f->tok_len[o] == n && !memcmp(f->tok_ptr[o], f->tok_ptr[id], n);
            h = (h + 1) & f->vmask;
        }
        if (!dup) /* the lowest id keeps the entry */
            f->vslots[h] = id + 1;
    }
    int ec;
    PCRE2_SIZE eoff;
    f->split_re = pcre2_compile((PCRE2_SPTR)rlx_tok_gpt2_regex, PCRE2_ZERO_TERMINATED,
                                PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eoff, NULL);
    if (!f->split_re)
        return rlx_error_set(err, RLX_ERR_INTERNAL,
                             "the GPT-2 pre-tokenizer regex did not compile");
    return RLX_OK;
}

static int32_t vocab_find(const rlx_whisper_file *f, const char *p, size_t n)
{
    uint64_t h = hash_bytes(p, n) & f->vmask;
    while (f->vslots[h]) {
        int32_t id = f->vslots[h] - 1;
        if (f->tok_len[id] == n && !memcmp(f->tok_ptr[id], p, n))
            return id;
        h = (h + 1) & f->vmask;
    }
    return -1;
}

typedef struct id_buf {
    int32_t *v;
    size_t n, cap;
} id_buf;

static bool id_push(id_buf *b, int32_t id)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        int32_t *v = realloc(b->v, cap * sizeof *v);
        if (!v)
            return false;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = id;
    return true;
}

/* whisper.cpp's tokenizer for files without merges: greedy longest match from the left. */
static bool greedy_piece(const rlx_whisper_file *f, const char *p, size_t n, id_buf *out)
{
    size_t i = 0;
    while (i < n) {
        size_t j = n - i < f->max_word ? n - i : f->max_word;
        int32_t id = -1;
        for (; j > 0 && (id = vocab_find(f, p + i, j)) < 0; j--)
            ;
        if (id < 0) { /* no entry covers this byte (a U+FFFD-mangled byte token) */
            i++;
            continue;
        }
        if (!id_push(out, id))
            return false;
        i += j;
    }
    return true;
}

static rlx_status ggml_encode(const rlx_whisper_file *f, const char *text, size_t len, id_buf *out,
                              rlx_error **err)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(f->split_re, NULL);
    if (!md)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory tokenizing");
    size_t pos = 0, last = 0;
    rlx_status s = RLX_OK;
    while (pos < len) {
        int rc = pcre2_match(f->split_re, (PCRE2_SPTR)text, len, pos, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            s = rlx_error_set(err, RLX_ERR_INTERNAL, "the pre-tokenizer regex failed (%d)", rc);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        /* bytes the regex skipped (invalid UTF-8) are a piece of their own */
        if ((ms > last && !greedy_piece(f, text + last, ms - last, out)) ||
            (me > ms && !greedy_piece(f, text + ms, me - ms, out))) {
            s = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory tokenizing");
            break;
        }
        last = me;
        pos = me > ms ? me : ms + 1;
    }
    if (s == RLX_OK && last < len && !greedy_piece(f, text + last, len - last, out))
        s = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory tokenizing");
    pcre2_match_data_free(md);
    return s;
}

rlx_status rlx_whisper_file_encode(const rlx_whisper_file *f, const char *text, size_t len,
                                   int32_t **ids, size_t *n, rlx_error **err)
{
    if (ids)
        *ids = NULL;
    if (n)
        *n = 0;
    if (!f || !ids || !n || (!text && len))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_whisper_file_encode: bad argument");
    if (f->tok) {
        rlx_tokenizer_encode_params ep = rlx_tokenizer_encode_default_params();
        ep.add_bos = ep.add_eos = 0;
        ep.parse_special = false;
        return rlx_tokenizer_encode(f->tok, text, len, ep, ids, n, err);
    }
    id_buf b = {0};
    rlx_status s = ggml_encode(f, text, len, &b, err);
    if (s != RLX_OK || !b.n) {
        free(b.v);
        return s;
    }
    *ids = b.v;
    *n = b.n;
    return RLX_OK;
}

/* ---- suppression -------------------------------------------------------- */

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static size_t sort_unique(int32_t *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_i32);
    size_t k = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[k - 1])
            v[k++] = v[i];
    return k;
}

/* openai's tokenizer.non_speech_tokens, plus the specials its decoder adds. With no merges
 * (ggml), a symbol of the "miscellaneous" set that is not one vocabulary entry takes the entry
 * for its first two UTF-8 bytes (with the space), which is what BPE's first token is for these
 * (openai's comment: they share those bytes); where the file mangled that entry to U+FFFD it
 * cannot be found and is left out. */
static rlx_status build_suppress(rlx_whisper_file *f, json_object *gen, rlx_error **err)
{
    static const char *const symbols[] = {
        "\"",  "#",  "(",  ")",   "*",   "+",   "/",   ":",  ";",   "<",  "=",  ">",
        "@",   "[",  "\\", "]",   "^",   "_",   "`",   "{",  "|",   "}",  "~",  "「",
        "」",  "『", "』", "<<",  ">>",  "<<<", ">>>", "--", "---", "-(", "-[", "('",
        "(\"", "((", "))", "(((", ")))", "[[",  "]]",  "{{", "}}",  "♪♪", "♪♪♪"};
    static const char *const misc[] = {"♩", "♪", "♫", "♬", "♭", "♮", "♯"};
    id_buf b = {0};
    rlx_status s = RLX_OK;
    size_t ns = sizeof symbols / sizeof symbols[0], nm = sizeof misc / sizeof misc[0];
    for (size_t k = 0; k < 2 + ns + nm && s == RLX_OK; k++) {
        for (int sp = 0; sp < 2 && s == RLX_OK; sp++) {
            char text[32];
            bool is_misc = k >= 2 + ns;
            if (k < 2) {
                if (sp)
                    break;
                snprintf(text, sizeof text, "%s", k == 0 ? " -" : " '");
            } else {
                snprintf(text, sizeof text, "%s%s", sp ? " " : "",
                         is_misc ? misc[k - 2 - ns] : symbols[k - 2]);
            }
            int32_t *ids = NULL;
            size_t n = 0;
            if ((s = rlx_whisper_file_encode(f, text, strlen(text), &ids, &n, err)) != RLX_OK)
                break;
            int32_t pick = -1;
            if (k < 2 && n >= 1)
                pick = ids[0];
            else if (n == 1 && (f->tok || f->tok_len[ids[0]] == strlen(text)))
                pick = ids[0]; /* (the greedy encoder skips bytes no entry covers) */
            else if (is_misc && f->tok)
                pick = n ? ids[0] : -1;
            else if (is_misc)
                pick = vocab_find(f, text, (size_t)(sp + 2));
            free(ids);
            if (pick >= 0 && !id_push(&b, pick))
                s = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        }
    }
    const rlx_whisper_special *sp = &f->sp;
    int32_t extra[] = {sp->translate, sp->transcribe, sp->sot, sp->solm, sp->prev, sp->no_speech};
    for (size_t i = 0; i < 6 && s == RLX_OK; i++)
        if (!id_push(&b, extra[i]))
            s = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    json_object *list;
    if (s == RLX_OK && gen && json_object_object_get_ex(gen, "suppress_tokens", &list) &&
        json_object_is_type(list, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(list) && s == RLX_OK; i++) {
            json_object *e = json_object_array_get_idx(list, i);
            int64_t id = json_object_is_type(e, json_type_int) ? json_object_get_int64(e) : -1;
            if (id < 0 || id >= f->hp.n_vocab)
                s = rlx_error_set(err, RLX_ERR_FORMAT,
                                  "%s: generation_config.json's suppress_tokens holds %lld, not a "
                                  "token of the vocabulary of %d",
                                  f->path, (long long)id, f->hp.n_vocab);
            else if (!id_push(&b, (int32_t)id))
                s = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        }
    }
    if (s != RLX_OK) {
        free(b.v);
        return s;
    }
    f->suppress = b.v;
    f->n_suppress = sort_unique(b.v, b.n);

    /* begin_suppress_tokens: generation_config's, else openai's SuppressBlank [" ", eot] */
    id_buf bb = {0};
    if (gen && json_object_object_get_ex(gen, "begin_suppress_tokens", &list) &&
        json_object_is_type(list, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(list); i++) {
            json_object *e = json_object_array_get_idx(list, i);
            int64_t id = json_object_is_type(e, json_type_int) ? json_object_get_int64(e) : -1;
            if (id < 0 || id >= f->hp.n_vocab) {
                free(bb.v);
                return rlx_error_set(err, RLX_ERR_FORMAT,
                                     "%s: generation_config.json's begin_suppress_tokens holds "
                                     "%lld, outside the vocabulary",
                                     f->path, (long long)id);
            }
            if (!id_push(&bb, (int32_t)id)) {
                free(bb.v);
                return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
            }
        }
    } else {
        int32_t *ids = NULL;
        size_t n = 0;
        if ((s = rlx_whisper_file_encode(f, " ", 1, &ids, &n, err)) != RLX_OK)
            return s;
        bool ok = (n == 0 || id_push(&bb, ids[0])) && id_push(&bb, f->sp.eot);
        free(ids);
        if (!ok) {
            free(bb.v);
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        }
    }
    f->begin_suppress = bb.v;
    f->n_begin_suppress = bb.n;
    return RLX_OK;
}

const int32_t *rlx_whisper_file_suppress_tokens(const rlx_whisper_file *f, size_t *n)
{
    if (n)
        *n = f ? f->n_suppress : 0;
    return f ? f->suppress : NULL;
}

const int32_t *rlx_whisper_file_begin_suppress_tokens(const rlx_whisper_file *f, size_t *n)
{
    if (n)
        *n = f ? f->n_begin_suppress : 0;
    return f ? f->begin_suppress : NULL;
}

const int32_t *rlx_whisper_file_alignment_heads(const rlx_whisper_file *f, size_t *n_pairs)
{
    if (n_pairs)
        *n_pairs = f ? f->n_aheads : 0;
    return f ? f->aheads : NULL;
}

static rlx_status set_preset_heads(rlx_whisper_file *f, rlx_error **err)
{
    size_t n = 0;
    const int32_t *p = rlx_whisper_alignment_heads_preset(f->kind, &n);
    if (!n)
        return RLX_OK;
    if (!(f->aheads = malloc(n * 2 * sizeof *f->aheads)))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    memcpy(f->aheads, p, n * 2 * sizeof *p);
    f->n_aheads = n;
    return RLX_OK;
}

/* ---- opening ------------------------------------------------------------ */

static rlx_status check_hparams(rlx_whisper_file *f, rlx_error **err)
{
    const rlx_whisper_hparams *h = &f->hp;
    if (h->n_mels != 80 && h->n_mels != 128)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: n_mels is %d; whisper models use 80 or 128 mel bins", f->path,
                             h->n_mels);
    const int32_t v[] = {h->n_audio_ctx, h->n_audio_state, h->n_audio_head, h->n_audio_layer,
                         h->n_text_ctx,  h->n_text_state,  h->n_text_head,  h->n_text_layer};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i] <= 0 || v[i] > (1 << 20))
            return rlx_error_set(err, RLX_ERR_FORMAT,
                                 "%s: a hyper-parameter is %d, outside what a whisper model has",
                                 f->path, v[i]);
    if (h->n_audio_state % h->n_audio_head || h->n_text_state % h->n_text_head)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: the state width (%d audio, %d text) is not a multiple of the "
                             "head count (%d, %d)",
                             f->path, h->n_audio_state, h->n_text_state, h->n_audio_head,
                             h->n_text_head);
    return set_special(f, f->path, err);
}

static const char *ggml_word(void *ctx, int32_t i, char *buf, size_t cap, size_t *len)
{
    (void)buf, (void)cap;
    return rlx_ggml_whisper_word(ctx, i, len);
}

static rlx_status open_ggml(rlx_whisper_file *f, rlx_error **err)
{
    rlx_status s = rlx_ggml_whisper_open(f->path, &f->gw, err);
    if (s != RLX_OK)
        return s;
    f->format = "ggml";
    const rlx_ggml_whisper_hparams *g = rlx_ggml_whisper_get_hparams(f->gw);
    f->hp =
        (rlx_whisper_hparams){g->n_vocab,       g->n_audio_ctx, g->n_audio_state, g->n_audio_head,
                              g->n_audio_layer, g->n_text_ctx,  g->n_text_state,  g->n_text_head,
                              g->n_text_layer,  g->n_mels,      g->ftype};
    if ((s = check_hparams(f, err)) != RLX_OK)
        return s;
    int32_t n_mel, n_fft;
    const float *fb = rlx_ggml_whisper_mel_filters(f->gw, &n_mel, &n_fft);
    if (n_mel != f->hp.n_mels || n_fft != N_FREQ)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: the mel filterbank is %d x %d, but the model needs %d x %d",
                             f->path, n_mel, n_fft, f->hp.n_mels, N_FREQ);
    size_t nf = (size_t)n_mel * N_FREQ;
    if (!(f->filters = malloc(nf * sizeof(float))))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    memcpy(f->filters, fb, nf * sizeof(float));
    int32_t nw = rlx_ggml_whisper_n_words(f->gw);
    if (nw > f->hp.n_vocab)
        return rlx_error_set(err, RLX_ERR_FORMAT,
                             "%s: the vocabulary has %d words, more than n_vocab %d", f->path, nw,
                             f->hp.n_vocab);
    const char *base = strrchr(f->path, '/');
    set_kind(f, base ? base + 1 : f->path);

    for (uint64_t i = 0; i < rlx_ggml_whisper_n_tensors(f->gw); i++) {
        const rlx_ggml_whisper_tensor *t = rlx_ggml_whisper_tensor_at(f->gw, i);
        int64_t dims[RLX_GGML_WHISPER_MAX_DIMS];
        int rank = (int)t->n_dims;
        for (int d = 0; d < rank; d++)
            dims[d] = (int64_t)t->ne[rank - 1 - d];
        /* whisper.cpp stores the conv biases as [n, 1] */
        size_t nl = strlen(t->name);
        if (rank == 2 && dims[1] == 1 && nl > 5 && !strcmp(t->name + nl - 5, ".bias") &&
            !strncmp(t->name, "encoder.conv", 12))
            rank = 1;
        if ((s = push_tensor(f, t->name, t->dtype, rank, dims, rlx_ggml_whisper_data(f->gw, t),
                             t->n_bytes, err)) != RLX_OK)
            return s;
    }
    if ((s = build_tokens(f, ggml_word, f->gw, err)) != RLX_OK ||
        (s = build_vocab_index(f, err)) != RLX_OK)
        return s;
    return RLX_OK;
}

/* ---- Hugging Face folders ----------------------------------------------- */

static json_object *jget(json_object *o, const char *k)
{
    json_object *v = NULL;
    return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static bool jint(json_object *o, const char *k, int32_t *out)
{
    json_object *v = jget(o, k);
    if (!v || !json_object_is_type(v, json_type_int))
        return false;
    int64_t x = json_object_get_int64(v);
    if (x < INT32_MIN || x > INT32_MAX)
        return false;
    *out = (int32_t)x;
    return true;
}

static json_object *read_json_file(const char *dir, const char *name, bool required,
                                   rlx_error **err, bool *failed)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat sb;
    *failed = false;
    if (stat(p, &sb) != 0) {
        if (required) {
            *failed = true;
            rlx_error_set(err, RLX_ERR_FORMAT,
                          "%s has no %s: not a whisper model file or Hugging Face folder", dir,
                          name);
        }
        return NULL;
    }
    json_object *o = json_object_from_file(p);
    if (!o || !json_object_is_type(o, json_type_object)) {
        *failed = true;
        rlx_error_set(err, RLX_ERR_FORMAT, "%s is not a JSON object", p);
        if (o)
            json_object_put(o);
        return NULL;
    }
    return o;
}

/* HF transformers name -> openai name; false for names the model does not use (proj_out,
 * the output head tied to the token embedding). */
static bool hf_to_canonical(const char *hf, char *out, size_t cap)
{
    if (!strncmp(hf, "model.", 6))
        hf += 6;
    static const char *const whole[][2] = {
        {"encoder.embed_positions.weight", "encoder.positional_embedding"},
        {"decoder.embed_positions.weight", "decoder.positional_embedding"},
        {"decoder.embed_tokens.weight", "decoder.token_embedding.weight"},
        {"encoder.layer_norm.weight", "encoder.ln_post.weight"},
        {"encoder.layer_norm.bias", "encoder.ln_post.bias"},
        {"decoder.layer_norm.weight", "decoder.ln.weight"},
        {"decoder.layer_norm.bias", "decoder.ln.bias"},
        {"encoder.conv1.weight", "encoder.conv1.weight"},
        {"encoder.conv1.bias", "encoder.conv1.bias"},
        {"encoder.conv2.weight", "encoder.conv2.weight"},
        {"encoder.conv2.bias", "encoder.conv2.bias"},
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (!strcmp(hf, whole[i][0])) {
            snprintf(out, cap, "%s", whole[i][1]);
            return true;
        }
    const char *side = NULL;
    if (!strncmp(hf, "encoder.layers.", 15))
        side = "encoder";
    else if (!strncmp(hf, "decoder.layers.", 15))
        side = "decoder";
    if (!side)
        return false;
    const char *p = hf + 15;
    char *end;
    long layer = strtol(p, &end, 10);
    if (end == p || *end != '.' || layer < 0 || layer > 100000)
        return false;
    p = end + 1;
    static const char *const parts[][2] = {
        {"self_attn.q_proj.", "attn.query."},
        {"self_attn.k_proj.", "attn.key."},
        {"self_attn.v_proj.", "attn.value."},
        {"self_attn.out_proj.", "attn.out."},
        {"self_attn_layer_norm.", "attn_ln."},
        {"encoder_attn.q_proj.", "cross_attn.query."},
        {"encoder_attn.k_proj.", "cross_attn.key."},
        {"encoder_attn.v_proj.", "cross_attn.value."},
        {"encoder_attn.out_proj.", "cross_attn.out."},
        {"encoder_attn_layer_norm.", "cross_attn_ln."},
        {"fc1.", "mlp.0."},
        {"fc2.", "mlp.2."},
        {"final_layer_norm.", "mlp_ln."},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        size_t n = strlen(parts[i][0]);
        if (!strncmp(p, parts[i][0], n) && (!strcmp(p + n, "weight") || !strcmp(p + n, "bias"))) {
            snprintf(out, cap, "%s.blocks.%ld.%s%s", side, layer, parts[i][1], p + n);
            return true;
        }
    }
    return false;
}

/* vocab.json + merges.txt (+ added_tokens.json): a byte-level BPE tokenizer like GPT-2's.
 * Without merges.txt (*no_merges set) the tokenizer only names the tokens, and text is
 * encoded as a ggml file's is. */
static rlx_status load_vocab_merges(const char *dir, rlx_tokenizer **out, bool *no_merges,
                                    rlx_error **err)
{
    *no_merges = false;
    bool failed;
    json_object *vocab = read_json_file(dir, "vocab.json", true, err, &failed);
    if (!vocab)
        return rlx_error_set(err, RLX_ERR_FORMAT, "%s has neither tokenizer.json nor vocab.json",
                             dir);
    json_object *added = read_json_file(dir, "added_tokens.json", false, err, &failed);
    rlx_status s = RLX_OK;
    int64_t max_id = -1;
    json_object *srcs[2] = {vocab, added};
    for (int k = 0; k < 2; k++) {
        if (!srcs[k])
            continue;
        json_object_object_foreach(srcs[k], key, val)
        {
            (void)key;
            int64_t id = json_object_get_int64(val);
            if (!json_object_is_type(val, json_type_int) || id < 0 || id >= (1 << 24)) {
                s = rlx_error_set(err, RLX_ERR_FORMAT, "%s: vocab.json holds a bad id for '%s'",
                                  dir, key);
                goto done;
            }
            if (id > max_id)
                max_id = id;
        }
    }
    rlx_tokenizer *t = rlx_tok_alloc((int32_t)(max_id + 1));
    if (!t) {
        s = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    *out = t;
    for (int32_t i = 0; i < t->n_vocab; i++)
        t->tok[i].type = RLX_TOKEN_TYPE_UNUSED;
    for (int k = 0; k < 2 && s == RLX_OK; k++) {
        if (!srcs[k])
            continue;
        json_object_object_foreach(srcs[k], key, val)
        {
            int32_t id = (int32_t)json_object_get_int64(val);
            if ((s = rlx_tok_set_text(t, id, key, strlen(key), err)) != RLX_OK)
                break;
            t->tok[id].type = k ? RLX_TOKEN_TYPE_CONTROL : RLX_TOKEN_TYPE_NORMAL;
        }
    }
    t->kind = RLX_TOKENIZER_BPE;
    t->byte_encode = true;
    snprintf(t->pre_name, sizeof t->pre_name, "gpt2");
    if (s != RLX_OK ||
        (s = rlx_tok_add_split(t, rlx_tok_gpt2_regex, strlen(rlx_tok_gpt2_regex),
                               TOK_SPLIT_ISOLATED, false, err)) != RLX_OK ||
        (s = rlx_tok_finish(t, err)) != RLX_OK)
        goto done;
    char p[4096];
    snprintf(p, sizeof p, "%s/merges.txt", dir);
    FILE *mf = fopen(p, "r");
    if (!mf) {
        *no_merges = true;
        goto done;
    }
    char line[1024];
    size_t n_lines = 0;
    while (fgets(line, sizeof line, mf))
        n_lines++;
    rewind(mf);
    if ((s = rlx_tok_reserve_merges(t, n_lines, err)) != RLX_OK) {
        fclose(mf);
        goto done;
    }
    int32_t rank = 0;
    while (fgets(line, sizeof line, mf)) {
        size_t n = strcspn(line, "\r\n");
        line[n] = 0;
        if (rank == 0 && !strncmp(line, "#version", 8))
            continue;
        char *sp = n > 1 ? strchr(line + 1, ' ') : NULL;
        if (!sp)
            continue;
        rlx_tok_add_merge(t, line, (size_t)(sp - line), sp + 1, strlen(sp + 1), rank++);
    }
    fclose(mf);
    s = rlx_tok_finish(t, err);
done:
    json_object_put(vocab);
    if (added)
        json_object_put(added);
    return s;
}

static const char *hf_word(void *ctx, int32_t i, char *buf, size_t cap, size_t *len)
{
    const rlx_tokenizer *t = ctx;
    if (i >= rlx_tokenizer_n_vocab(t)) {
        *len = 0;
        return NULL;
    }
    size_t n = rlx_tokenizer_token_to_piece(t, i, true, buf, cap);
    *len = n < cap ? n : cap;
    return buf;
}

static rlx_status open_hf(rlx_whisper_file *f, rlx_error **err)
{
    f->format = "huggingface";
    bool failed;
    rlx_status s = RLX_OK;
    json_object *cfg = read_json_file(f->path, "config.json", true, err, &failed);
    if (!cfg)
        return RLX_ERR_FORMAT;
    json_object *gen = read_json_file(f->path, "generation_config.json", false, err, &failed);
    if (failed) {
        json_object_put(cfg);
        return RLX_ERR_FORMAT;
    }
    json_object *mt = jget(cfg, "model_type");
    if (mt && strcmp(json_object_get_string(mt), "whisper") != 0) {
        s = rlx_error_set(err, RLX_ERR_FORMAT, "%s/config.json describes a '%s' model, not whisper",
                          f->path, json_object_get_string(mt));
        goto done;
    }
    rlx_whisper_hparams *h = &f->hp;
    int32_t d_model = 0;
    const char *missing = NULL;
#define REQ(key, dst)                     \
    if (!missing && !jint(cfg, key, dst)) \
        missing = key;
    REQ("num_mel_bins", &h->n_mels);
    REQ("d_model", &d_model);
    REQ("encoder_layers", &h->n_audio_layer);
    REQ("decoder_layers", &h->n_text_layer);
    REQ("encoder_attention_heads", &h->n_audio_head);
    REQ("decoder_attention_heads", &h->n_text_head);
    REQ("max_source_positions", &h->n_audio_ctx);
    REQ("max_target_positions", &h->n_text_ctx);
    REQ("vocab_size", &h->n_vocab);
#undef REQ
    if (missing) {
        s = rlx_error_set(err, RLX_ERR_FORMAT, "%s/config.json has no integer '%s'", f->path,
                          missing);
        goto done;
    }
    h->n_audio_state = h->n_text_state = d_model;
    if ((s = check_hparams(f, err)) != RLX_OK)
        goto done;
    bool ml;
    json_object *iml = jget(gen, "is_multilingual");
    if (iml && json_object_is_type(iml, json_type_boolean) &&
        (ml = json_object_get_boolean(iml)) != f->multilingual) {
        s = rlx_error_set(err, RLX_ERR_FORMAT,
                          "%s: generation_config.json says is_multilingual %s, but a vocabulary "
                          "of %d tokens is %s",
                          f->path, ml ? "true" : "false", h->n_vocab,
                          f->multilingual ? "multilingual" : "English-only");
        goto done;
    }
    /* the special ids generation_config.json states must agree with the layout */
    const struct {
        const char *key;
        int32_t want;
    } ids[] = {{"no_timestamps_token_id", f->sp.no_timestamps},
               {"decoder_start_token_id", f->sp.sot},
               {"eos_token_id", f->sp.eot}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        int32_t v;
        if (jint(gen, ids[i].key, &v) && v != ids[i].want) {
            s = rlx_error_set(err, RLX_ERR_FORMAT,
                              "%s: generation_config.json's %s is %d, but a vocabulary of %d "
                              "tokens puts it at %d",
                              f->path, ids[i].key, v, h->n_vocab, ids[i].want);
            goto done;
        }
    }
    json_object *l2i = jget(gen, "lang_to_id"), *t2i = jget(gen, "task_to_id");
    if (l2i && json_object_is_type(l2i, json_type_object)) {
        json_object_object_foreach(l2i, key, val)
        {
            size_t kl = strlen(key);
            char code[16];
            if (kl < 5 || kl - 4 >= sizeof code) /* "<|xx|>" */
                continue;
            memcpy(code, key + 2, kl - 4);
            code[kl - 4] = 0;
            int li = rlx_whisper_language_find(code);
            if (li < 0 || li >= f->sp.n_langs ||
                json_object_get_int64(val) != f->sp.lang_first + li) {
                s = rlx_error_set(err, RLX_ERR_FORMAT,
                                  "%s: generation_config.json maps language %s to token %lld, "
                                  "which disagrees with openai's language order",
                                  f->path, key, (long long)json_object_get_int64(val));
                goto done;
            }
        }
    }
    int32_t tv;
    if ((jint(t2i, "transcribe", &tv) && tv != f->sp.transcribe) ||
        (jint(t2i, "translate", &tv) && tv != f->sp.translate)) {
        s = rlx_error_set(err, RLX_ERR_FORMAT,
                          "%s: generation_config.json's task_to_id disagrees with a vocabulary "
                          "of %d tokens",
                          f->path, h->n_vocab);
        goto done;
    }
    json_object *np = jget(cfg, "_name_or_path");
    const char *hint = np ? json_object_get_string(np) : NULL;
    set_kind(f, hint && strstr(hint, "large") ? hint : f->path);

    /* the tokenizer */
    char tp[4200];
    snprintf(tp, sizeof tp, "%s/tokenizer.json", f->path);
    struct stat sb;
    bool no_merges = false;
    if (stat(tp, &sb) == 0)
        s = rlx_tokenizer_from_hf_json(tp, &f->tok, err);
    else
        s = load_vocab_merges(f->path, &f->tok, &no_merges, err);
    if (s != RLX_OK)
        goto done;
    rlx_token e = rlx_tokenizer_find(f->tok, "<|endoftext|>", 13);
    if (e != RLX_TOKEN_NULL && e != f->sp.eot) {
        s = rlx_error_set(err, RLX_ERR_FORMAT,
                          "%s: the tokenizer has <|endoftext|> at %d, but a vocabulary of %d "
                          "tokens puts it at %d",
                          f->path, e, h->n_vocab, f->sp.eot);
        goto done;
    }
    if (rlx_tokenizer_n_vocab(f->tok) > h->n_vocab) {
        s = rlx_error_set(err, RLX_ERR_FORMAT,
                          "%s: the tokenizer has %d tokens, more than vocab_size %d", f->path,
                          rlx_tokenizer_n_vocab(f->tok), h->n_vocab);
        goto done;
    }
    if ((s = build_tokens(f, hf_word, f->tok, err)) != RLX_OK)
        goto done;
    if (no_merges) { /* greedy longest match over the vocabulary, as for ggml files */
        rlx_tokenizer_free(f->tok);
        f->tok = NULL;
        if ((s = build_vocab_index(f, err)) != RLX_OK)
            goto done;
    }

    /* mel filterbank: librosa's, as openai's mel_filters.npz was made */
    if (!(f->filters = malloc((size_t)h->n_mels * N_FREQ * sizeof(float)))) {
        s = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    if ((s = rlx_whisper_mel_filters_slaney(h->n_mels, 400, 16000, f->filters, err)) != RLX_OK)
        goto done;

    /* weights: absent is allowed (has_weights false) */
    char sp1[4200], sp2[4200];
    snprintf(sp1, sizeof sp1, "%s/model.safetensors", f->path);
    snprintf(sp2, sizeof sp2, "%s/model.safetensors.index.json", f->path);
    if (stat(sp1, &sb) == 0 || stat(sp2, &sb) == 0) {
        if ((s = rlx_safetensors_open(f->path, &f->st, err)) != RLX_OK)
            goto done;
        for (uint64_t i = 0; i < rlx_safetensors_n_tensors(f->st); i++) {
            const rlx_st_tensor *t = rlx_safetensors_tensor_at(f->st, i);
            char name[160];
            if (!hf_to_canonical(t->name, name, sizeof name))
                continue;
            int64_t dims[RLX_ST_MAX_DIMS];
            for (uint32_t d = 0; d < t->n_dims; d++)
                dims[d] = (int64_t)t->shape[d];
            if ((s = push_tensor(f, name, t->dtype, (int)t->n_dims, dims,
                                 rlx_safetensors_data(f->st, t), t->n_bytes, err)) != RLX_OK)
                goto done;
        }
        const wf_tensor *te = find_tensor(f, "decoder.token_embedding.weight");
        h->ftype = te && te->dt == RLX_DTYPE_F32 ? 0 : 1;
    }

    /* alignment heads */
    json_object *ah = jget(gen, "alignment_heads");
    if (ah && json_object_is_type(ah, json_type_array)) {
        size_t n = json_object_array_length(ah);
        if (n && !(f->aheads = malloc(n * 2 * sizeof *f->aheads))) {
            s = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            json_object *pr = json_object_array_get_idx(ah, i);
            int64_t l = -1, hd = -1;
            if (json_object_is_type(pr, json_type_array) && json_object_array_length(pr) == 2) {
                l = json_object_get_int64(json_object_array_get_idx(pr, 0));
                hd = json_object_get_int64(json_object_array_get_idx(pr, 1));
            }
            if (l < 0 || l >= h->n_text_layer || hd < 0 || hd >= h->n_text_head) {
                s = rlx_error_set(err, RLX_ERR_FORMAT,
                                  "%s: generation_config.json's alignment head %zu is not a "
                                  "(layer, head) of this %d-layer, %d-head decoder",
                                  f->path, i, h->n_text_layer, h->n_text_head);
                goto done;
            }
            f->aheads[2 * i] = (int32_t)l;
            f->aheads[2 * i + 1] = (int32_t)hd;
        }
        f->n_aheads = n;
    } else if ((s = set_preset_heads(f, err)) != RLX_OK) {
        goto done;
    }
    s = build_suppress(f, gen, err);
done:
    json_object_put(cfg);
    if (gen)
        json_object_put(gen);
    return s;
}

rlx_status rlx_whisper_file_open(const char *path, rlx_whisper_file **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!path || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_whisper_file_open: NULL argument");
    struct stat sb;
    if (stat(path, &sb) != 0)
        return rlx_error_set(err, RLX_ERR_IO, "%s: no such file or folder", path);
    rlx_whisper_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    size_t pl = strlen(f->path);
    while (pl > 1 && f->path[pl - 1] == '/')
        f->path[--pl] = 0;
    rlx_status s;
    if (S_ISDIR(sb.st_mode)) {
        s = open_hf(f, err);
    } else {
        s = open_ggml(f, err);
        if (s == RLX_OK)
            s = set_preset_heads(f, err);
        if (s == RLX_OK)
            s = build_suppress(f, NULL, err);
    }
    /* a file with weights must have every one the model needs, in the right shape */
    if (s == RLX_OK && f->n_tensors)
        s = expect_all(f, check_one, err);
    if (s != RLX_OK) {
        rlx_whisper_file_free(f);
        return s;
    }
    *out = f;
    return RLX_OK;
}

void rlx_whisper_file_free(rlx_whisper_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_tensors; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    free(f->tok_ptr);
    free(f->tok_len);
    free(f->pool);
    free(f->vslots);
    if (f->split_re)
        pcre2_code_free(f->split_re);
    free(f->suppress);
    free(f->begin_suppress);
    free(f->aheads);
    free(f->filters);
    rlx_tokenizer_free(f->tok);
    rlx_safetensors_close(f->st);
    rlx_ggml_whisper_close(f->gw);
    free(f->path);
    free(f);
}

/* ---- accessors ---------------------------------------------------------- */

const rlx_whisper_hparams *rlx_whisper_file_hparams(const rlx_whisper_file *f)
{
    return f ? &f->hp : NULL;
}

const rlx_whisper_special *rlx_whisper_file_special(const rlx_whisper_file *f)
{
    return f ? &f->sp : NULL;
}

bool rlx_whisper_file_multilingual(const rlx_whisper_file *f)
{
    return f && f->multilingual;
}

const char *rlx_whisper_file_kind(const rlx_whisper_file *f)
{
    return f ? f->kind : "custom";
}

const char *rlx_whisper_file_format(const rlx_whisper_file *f)
{
    return f ? f->format : "";
}

const float *rlx_whisper_file_mel_filters(const rlx_whisper_file *f)
{
    return f ? f->filters : NULL;
}

bool rlx_whisper_file_has_weights(const rlx_whisper_file *f)
{
    return f && f->n_tensors > 0;
}

bool rlx_whisper_file_tensor(const rlx_whisper_file *f, const char *name, rlx_dtype *dt,
                             rlx_shape *shape)
{
    const wf_tensor *t = f && name ? find_tensor(f, name) : NULL;
    if (!t)
        return false;
    if (dt)
        *dt = t->dt;
    if (shape)
        *shape = make_shape(t->rank, t->dims);
    return true;
}

size_t rlx_whisper_file_n_tensors(const rlx_whisper_file *f)
{
    return f ? f->n_tensors : 0;
}

const char *rlx_whisper_file_tensor_at(const rlx_whisper_file *f, size_t i, rlx_dtype *dt,
                                       rlx_shape *shape, uint64_t *bytes)
{
    if (!f || i >= f->n_tensors)
        return NULL;
    const wf_tensor *t = &f->tensors[i];
    if (dt)
        *dt = t->dt;
    if (shape)
        *shape = make_shape(t->rank, t->dims);
    if (bytes)
        *bytes = t->bytes;
    return t->name;
}

rlx_status rlx_whisper_file_add_to_session(const rlx_whisper_file *f, struct rlx_session *s,
                                           rlx_error **err)
{
    if (!f || !s)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_whisper_file_add_to_session: NULL argument");
    if (!f->n_tensors)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND,
                             "%s holds no weights (a vocabulary-only file): it cannot be run",
                             f->path);
    /* every needed tensor was checked at open; add them all, or none on failure */
    for (size_t i = 0; i < f->n_tensors; i++) {
        const wf_tensor *t = &f->tensors[i];
        rlx_status st =
            rlx_session_add_weight(s, t->name, t->dt, t->rank, t->dims, t->data, t->bytes, err);
        if (st != RLX_OK) {
            rlx_error_prefix(err, "%s: ", f->path);
            return st;
        }
    }
    return RLX_OK;
}
