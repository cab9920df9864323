/* Word timestamps, as openai-whisper's timing.py finds them: the decoder runs
 * once more over the window's text (start of transcript, language, task,
 * no-timestamps, the text tokens, end of text) and hands back the
 * cross-attention scores of the model's alignment heads; per head a softmax
 * over the window's audio frames, normalized over the tokens, a median filter
 * of width 7 along time; the heads' mean; dynamic time warping of tokens
 * against frames; words are cut where a token starts with a space or is
 * punctuation, and each word's start and end are the frames where the warp
 * path enters its first token and the next word's.
 *
 * Left out of openai's heuristics: the clipping of words longer than twice
 * the median word duration and the "last speech" adjustments of segment
 * bounds; a segment's bounds are set from its words only where it has any. */
#include "models/whisper/whisper-internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ir/graph.h"

#define MEDFILT           7
#define TOKENS_PER_SECOND 50 /* audio frames after the encoder's stride 2 */

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* openai's dtw_cpu and backtrace over x [n][m] (the cost); path points
 * (i, j) in order into pi/pj (capacity n + m); returns their count. */
static int dtw(const float *x, int n, int m, int *pi, int *pj)
{
    size_t W = (size_t)m + 1;
    float *cost = malloc(sizeof(float) * (size_t)(n + 1) * W);
    signed char *trace = malloc((size_t)(n + 1) * W);
    if (!cost || !trace) {
        free(cost), free(trace);
        return -1;
    }
    for (size_t k = 0; k < (size_t)(n + 1) * W; k++) {
        cost[k] = INFINITY;
        trace[k] = -1;
    }
    cost[0] = 0;
    for (int j = 1; j <= m; j++)
        for (int i = 1; i <= n; i++) {
            float c0 = cost[(i - 1) * W + j - 1], c1 = cost[(i - 1) * W + j],
                  c2 = cost[i * W + j - 1], c;
            int t;
            if (c0 < c1 && c0 < c2)
                c = c0, t = 0;
            else if (c1 < c0 && c1 < c2)
                c = c1, t = 1;
            else
                c = c2, t = 2;
            cost[i * W + j] = x[(size_t)(i - 1) * m + j - 1] + c;
            trace[i * W + j] = (signed char)t;
        }
    for (int j = 0; j <= m; j++)
        trace[j] = 2;
    for (int i = 0; i <= n; i++)
        trace[i * W] = 1;
    int i = n, j = m, k = 0;
    while (i > 0 || j > 0) {
        pi[k] = i - 1;
        pj[k] = j - 1;
        k++;
        int t = trace[i * W + j];
        if (t == 0)
            i--, j--;
        else if (t == 1)
            i--;
        else
            j--;
    }
    /* reverse into order */
    for (int a = 0, b = k - 1; a < b; a++, b--) {
        int ti = pi[a], tj = pj[a];
        pi[a] = pi[b], pj[a] = pj[b];
        pi[b] = ti, pj[b] = tj;
    }
    free(cost), free(trace);
    return k;
}

/* a UTF-8 string that does not end inside a character */
static bool utf8_complete(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        if (i + len > n)
            return false;
        i += len;
    }
    return true;
}

static bool is_punct(const char *s, size_t n)
{
    while (n && s[0] == ' ')
        s++, n--;
    while (n && s[n - 1] == ' ')
        n--;
    return n == 1 && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", s[0]) != NULL;
}

/* The alignment pass over `tokens`: the heads' cross-attention scores into
 * xqk and every position's logits into logits [n * n_vocab]. */
static rlx_status run_align(rlx_whisper *w, const int32_t *heads, int n_heads,
                            const int32_t *tokens, int n, float *xqk, float *logits,
                            rlx_error **err)
{
    if (!w->align) {
        rlx_graph *g = NULL;
        rlx_status st = rlx_whisper_build_decoder(w->file, 1, RLX_WHISPER_PREFILL_SEQ, true, heads,
                                                  n_heads, &g, err);
        if (st == RLX_OK) {
            st = rlx_session_compile(w->s, g, &w->align, err);
            rlx_graph_free(g);
        }
        if (st != RLX_OK)
            return st;
    }
    rlx_session_program *p = w->align;
    rlx_sym_values sv = {{0}};
    sv.v[rlx_session_program_symbol(p, "SEQ")] = n;
    int ps = rlx_session_program_symbol(p, "PAST");
    if (ps >= 0)
        sv.v[ps] = 0;
    int32_t pos[RLX_WHISPER_PREFILL_SEQ];
    for (int i = 0; i < n; i++)
        pos[i] = i;
    const void *ins[2];
    ins[rlx_session_program_input(p, "tokens")] = tokens;
    ins[rlx_session_program_input(p, "positions")] = pos;
    void *outs[2];
    outs[rlx_session_program_output(p, "logits")] = logits;
    outs[rlx_session_program_output(p, "xqk")] = xqk;
    return rlx_session_run(w->s, p, &sv, ins, outs, err);
}

/* The alignment matrix of a window: rows of the no-timestamps token and the
 * n_text text tokens, F = n_frames / 2 columns (mat [(n_text + 1) * F]). */
rlx_status rlx_whisper_align_matrix(rlx_whisper *w, const int32_t *sot_seq, int n_sot,
                                    const int32_t *text, int n_text, int64_t n_frames, float *mat,
                                    int *out_f, float *probs, rlx_error **err)
{
    const rlx_whisper_special *sp = w->sp;
    const int A = w->hp->n_audio_ctx;
    *out_f = 0;
    /* the alignment heads, or (as openai) every head of the decoder's upper half */
    size_t n_pairs = 0;
    const int32_t *given = rlx_whisper_file_alignment_heads(w->file, &n_pairs);
    int32_t fallback[2 * 64];
    const int32_t *heads = given;
    int nh = (int)n_pairs;
    if (nh == 0) {
        for (int l = w->hp->n_text_layer / 2; l < w->hp->n_text_layer && nh < 64; l++)
            for (int h = 0; h < w->hp->n_text_head && nh < 64; h++) {
                fallback[2 * nh] = l;
                fallback[2 * nh + 1] = h;
                nh++;
            }
        heads = fallback;
    }
    if (nh > 64)
        nh = 64;
    if (n_sot + n_text + 2 > RLX_WHISPER_PREFILL_SEQ)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "word timestamps: %d tokens are too many",
                             n_text);
    int32_t tokens[RLX_WHISPER_PREFILL_SEQ];
    int n = 0;
    for (int i = 0; i < n_sot; i++)
        tokens[n++] = sot_seq[i];
    tokens[n++] = sp->no_timestamps;
    for (int i = 0; i < n_text; i++)
        tokens[n++] = text[i];
    tokens[n++] = sp->eot;
    int F = (int)(n_frames / 2);
    if (F > A)
        F = A;
    if (F < 1)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "word timestamps: no audio frames");
    const int32_t V = w->hp->n_vocab;
    float *xqk = malloc(sizeof(float) * (size_t)nh * n * A);
    float *tmp = malloc(sizeof(float) * (size_t)F);
    float *all = calloc((size_t)n * F, sizeof(float));
    float *logits = malloc(sizeof(float) * (size_t)n * V);
    rlx_status st = RLX_OK;
    if (!xqk || !tmp || !all || !logits) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for word timestamps");
        goto done;
    }
    if ((st = run_align(w, heads, nh, tokens, n, xqk, logits, err)) != RLX_OK)
        goto done;
    /* text token i is predicted at position n_sot + i (the no-timestamps
     * token's for the first), over the tokens below end-of-text */
    for (int i = 0; probs && i < n_text; i++) {
        const float *r = logits + (size_t)(n_sot + i) * V;
        int lim = sp->eot < V ? sp->eot : V;
        float m = -INFINITY;
        for (int j = 0; j < lim; j++)
            m = r[j] > m ? r[j] : m;
        double s = 0;
        for (int j = 0; j < lim; j++)
            s += exp((double)r[j] - m);
        probs[i] = text[i] < lim ? (float)(exp((double)r[text[i]] - m) / s) : 0.0f;
    }
    /* per head: softmax over the window's frames, standardize over tokens,
     * median filter along time; then the heads' mean */
    for (int h = 0; h < nh; h++) {
        float *x = xqk + (size_t)h * n * A;
        for (int t = 0; t < n; t++) {
            float *r = x + (size_t)t * A, m = -INFINITY;
            for (int j = 0; j < F; j++)
                m = r[j] > m ? r[j] : m;
            double s = 0;
            for (int j = 0; j < F; j++)
                s += (r[j] = expf(r[j] - m));
            for (int j = 0; j < F; j++)
                r[j] = (float)(r[j] / s);
        }
        for (int j = 0; j < F; j++) {
            double mean = 0, var = 0;
            for (int t = 0; t < n; t++)
                mean += x[(size_t)t * A + j];
            mean /= n;
            for (int t = 0; t < n; t++) {
                double d = x[(size_t)t * A + j] - mean;
                var += d * d;
            }
            double sd = sqrt(var / n);
            for (int t = 0; t < n; t++)
                x[(size_t)t * A + j] = (float)((x[(size_t)t * A + j] - mean) / sd);
        }
        for (int t = 0; t < n; t++) {
            float *r = x + (size_t)t * A;
            memcpy(tmp, r, sizeof(float) * (size_t)F);
            for (int j = 0; j < F; j++) {
                float win[MEDFILT];
                for (int k = 0; k < MEDFILT; k++) {
                    int q = j + k - MEDFILT / 2;
                    /* reflect padding, as openai's median_filter */
                    if (q < 0)
                        q = -q;
                    if (q >= F)
                        q = 2 * (F - 1) - q;
                    q = q < 0 ? 0 : q >= F ? F - 1 : q;
                    win[k] = tmp[q];
                }
                qsort(win, MEDFILT, sizeof(float), cmp_f);
                all[(size_t)t * F + j] += win[MEDFILT / 2] / (float)nh;
            }
        }
    }
    /* rows of the no-timestamps token and the text (not the start of
     * transcript nor the end of text) */
    memcpy(mat, all + (size_t)n_sot * F, sizeof(float) * (size_t)(n_text + 1) * F);
    *out_f = F;
done:
    free(xqk), free(tmp), free(all), free(logits);
    return st;
}

/* Words of n_text tokens from the alignment matrix [(n_text + 1) * F]: times
 * in seconds from the window's start into t0/t1, each word's first token and
 * token count into first/count; returns the word count (-1: no memory).
 * Word texts are malloc'd into texts (may be NULL). */
int rlx_whisper_words_from_matrix(const rlx_whisper *w, const int32_t *text, int n_text,
                                  const float *mat, int F, float *t0, float *t1, int *first,
                                  int *count, char **texts)
{
    int N = n_text + 1, nw = -1;
    float *cost = malloc(sizeof(float) * (size_t)N * F);
    int *pi = malloc(sizeof(int) * (size_t)(N + F + 2)),
        *pj = malloc(sizeof(int) * (size_t)(N + F + 2));
    float *jump = malloc(sizeof(float) * (size_t)(N + 1));
    char *acc = NULL;
    if (!cost || !pi || !pj || !jump)
        goto done;
    for (size_t k = 0; k < (size_t)N * F; k++)
        cost[k] = -mat[k];
    int np = dtw(cost, N, F, pi, pj);
    if (np < 0)
        goto done;
    /* the time each token row is entered */
    int nj = 0;
    for (int k = 0; k < np; k++)
        if (k == 0 || pi[k] != pi[k - 1])
            jump[nj++] = (float)pj[k] / TOKENS_PER_SECOND;
    /* words: cut where a subword (whole UTF-8) starts with a space or is
     * punctuation */
    nw = 0;
    size_t cap = 0, acc_len = 0, wlen = 0;
    int acc_first = 0;
    for (int i = 0; i < n_text; i++) {
        size_t l = 0;
        const char *b = rlx_whisper_file_token(w->file, text[i], &l);
        if (acc_len + l + 1 > cap) {
            cap = (acc_len + l + 1) * 2;
            char *na = realloc(acc, cap);
            if (!na) {
                nw = -1;
                goto done;
            }
            acc = na;
        }
        if (acc_len == 0)
            acc_first = i;
        memcpy(acc + acc_len, b ? b : "", l);
        acc_len += l;
        if (!utf8_complete(acc, acc_len) && i + 1 < n_text)
            continue;
        bool new_word = nw == 0 || acc[0] == ' ' || is_punct(acc, acc_len);
        if (new_word) {
            first[nw] = acc_first;
            count[nw] = i - acc_first + 1;
            if (texts) {
                texts[nw] = malloc(acc_len + 1);
                if (!texts[nw])
                    break;
                memcpy(texts[nw], acc, acc_len);
                texts[nw][acc_len] = 0;
                wlen = acc_len;
            }
            nw++;
        } else {
            count[nw - 1] += i - acc_first + 1;
            if (texts && texts[nw - 1]) {
                char *nt = realloc(texts[nw - 1], wlen + acc_len + 1);
                if (nt) {
                    memcpy(nt + wlen, acc, acc_len);
                    wlen += acc_len;
                    nt[wlen] = 0;
                    texts[nw - 1] = nt;
                }
            }
        }
        acc_len = 0;
    }
    /* row r predicts text token r (row 0 is the no-timestamps position): a
     * word starts where its first token's row is entered, ends where the
     * next word's is (the last: the row after the text) */
    for (int k = 0; k < nw; k++) {
        int b0 = first[k], b1 = first[k] + count[k];
        t0[k] = b0 < nj ? jump[b0] : jump[nj - 1];
        t1[k] = b1 < nj ? jump[b1] : jump[nj - 1];
    }
done:
    free(cost), free(pi), free(pj), free(jump), free(acc);
    return nw;
}

/* openai tests `word in "...marks..."` on Python strings: a substring test,
 * so an empty word is in every set */
static bool in_marks(const char *word, size_t n, const char *marks)
{
    if (n == 0)
        return true;
    char *w = strndup(word, n);
    bool in = w && strstr(marks, w) != NULL;
    free(w);
    return in;
}

static bool trimmed_in(const char *word, const char *marks)
{
    while (*word == ' ')
        word++;
    size_t n = strlen(word);
    while (n && word[n - 1] == ' ')
        n--;
    return in_marks(word, n, marks);
}

static bool exactly_in(const char *word, const char *marks)
{
    return in_marks(word, strlen(word), marks);
}

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *r = malloc(la + lb + 1);
    if (r) {
        memcpy(r, a, la);
        memcpy(r + la, b, lb + 1);
    }
    return r;
}

int rlx_whisper_merge_punctuation(char **texts, int *first, int *count, float *t0, float *t1, int n)
{
    /* openai's prepend_punctuations and append_punctuations */
    static const char pre[] = "\"'\u201c\u00bf([{-";
    static const char app[] = "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001";
    /* an opening mark (" (, with its space) joins the word after it */
    for (int i = n - 2, j = n - 1; i >= 0; i--) {
        if (texts[i][0] == ' ' && trimmed_in(texts[i], pre)) {
            char *m = join(texts[i], texts[j]);
            if (!m)
                return -1;
            free(texts[j]);
            texts[j] = m;
            texts[i][0] = 0;
            first[j] = first[i];
            count[j] += count[i];
            count[i] = 0;
        } else {
            j = i;
        }
    }
    /* a closing mark (. , ! ? ...) joins the word before it */
    for (int i = 0, j = 1; j < n; j++) {
        size_t li = strlen(texts[i]);
        if ((li == 0 || texts[i][li - 1] != ' ') && exactly_in(texts[j], app)) {
            char *m = join(texts[i], texts[j]);
            if (!m)
                return -1;
            free(texts[i]);
            texts[i] = m;
            texts[j][0] = 0;
            count[i] += count[j];
            count[j] = 0;
        } else {
            i = j;
        }
    }
    /* drop the emptied ones */
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!texts[i][0]) {
            free(texts[i]);
            continue;
        }
        texts[k] = texts[i], first[k] = first[i], count[k] = count[i];
        t0[k] = t0[i], t1[k] = t1[i];
        k++;
    }
    return k;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void rlx_whisper_clip_long_words(char *const *texts, float *t0, float *t1, int n, float *median,
                                 float *max_dur)
{
    /* the median of the words' nonzero durations, at most 0.7 s */
    double *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    int nd = 0;
    for (int i = 0; d && i < n; i++)
        if (t1[i] - t0[i] != 0)
            d[nd++] = t1[i] - t0[i];
    double med = 0;
    if (nd > 0) {
        qsort(d, (size_t)nd, sizeof *d, cmp_d);
        med = nd % 2 ? d[nd / 2] : 0.5 * (d[nd / 2 - 1] + d[nd / 2]);
    }
    free(d);
    med = med < 0.7 ? med : 0.7;
    float mx = (float)(2 * med);
    *median = (float)med;
    *max_dur = mx;
    if (nd == 0)
        return;
    /* a word at a sentence's end (or right after one) is at most twice it */
    static const char marks[] = ".\u3002!\uff01?\uff1f";
    for (int i = 1; i < n; i++)
        if (t1[i] - t0[i] > mx) {
            if (exactly_in(texts[i], marks))
                t1[i] = t0[i] + mx;
            else if (exactly_in(texts[i - 1], marks))
                t0[i] = t1[i] - mx;
        }
}

void rlx_whisper_fit_segment_words(rlx_whisper_segment *seg, float median, float max_dur,
                                   double *last_speech_s)
{
    if (seg->n_words == 0)
        return;
    rlx_whisper_word *wd = seg->words;
    const int n = seg->n_words;
    double s0 = seg->t0_ms / 1000.0, s1 = seg->t1_ms / 1000.0;
    double w0s = wd[0].t0_ms / 1000.0, w0e = wd[0].t1_ms / 1000.0;
    /* the first (and second) word after a pause at most twice the median */
    if (w0e - *last_speech_s > median * 4 &&
        (w0e - w0s > max_dur || (n > 1 && wd[1].t1_ms / 1000.0 - w0s > max_dur * 2))) {
        if (n > 1 && (wd[1].t1_ms - wd[1].t0_ms) / 1000.0 > max_dur) {
            double e1 = wd[1].t1_ms / 1000.0;
            double boundary = e1 / 2 > e1 - max_dur ? e1 / 2 : e1 - max_dur;
            w0e = boundary;
            wd[1].t0_ms = llround(boundary * 1000);
        }
        w0s = w0e - max_dur > 0 ? w0e - max_dur : 0;
    }
    /* the segment's own start where the first word is too long, else the word's */
    if (s0 < w0e && s0 - 0.5 > w0s) {
        double a = w0e - median < s0 ? w0e - median : s0;
        w0s = a > 0 ? a : 0;
    } else {
        s0 = w0s;
    }
    wd[0].t0_ms = llround(w0s * 1000);
    wd[0].t1_ms = llround(w0e * 1000);
    /* and its own end where the last word is too long */
    double ls = wd[n - 1].t0_ms / 1000.0, le = wd[n - 1].t1_ms / 1000.0;
    if (s1 > ls && s1 + 0.5 < le)
        wd[n - 1].t1_ms = llround((ls + median > s1 ? ls + median : s1) * 1000);
    else
        s1 = le;
    seg->t0_ms = llround(s0 * 1000);
    seg->t1_ms = llround(s1 * 1000);
    *last_speech_s = s1;
}

rlx_status rlx_whisper_add_words(rlx_whisper *w, const int32_t *sot_seq, int n_sot,
                                 rlx_whisper_segment *segs, int n_segs, int64_t n_frames,
                                 int64_t t_off_ms, double *last_speech_s, rlx_error **err)
{
    const rlx_whisper_special *sp = w->sp;
    int32_t text[RLX_WHISPER_PREFILL_SEQ];
    float probs[RLX_WHISPER_PREFILL_SEQ];
    int n_text = 0;
    for (int s = 0; s < n_segs; s++)
        for (int k = 0; k < segs[s].n_tokens && n_text < RLX_WHISPER_PREFILL_SEQ - n_sot - 2; k++)
            if (segs[s].tokens[k].id < sp->eot)
                text[n_text++] = segs[s].tokens[k].id;
    if (n_text == 0 || n_frames < 2)
        return RLX_OK;
    int F = 0;
    float *mat = malloc(sizeof(float) * (size_t)(n_text + 1) * (size_t)w->hp->n_audio_ctx);
    float *t0 = malloc(sizeof(float) * (size_t)n_text),
          *t1 = malloc(sizeof(float) * (size_t)n_text);
    int *first = malloc(sizeof(int) * (size_t)n_text),
        *count = malloc(sizeof(int) * (size_t)n_text);
    char **texts = calloc((size_t)n_text, sizeof(char *));
    rlx_status st = RLX_OK;
    int nw = -1;
    float median = 0, max_dur = 0;
    if (!mat || !t0 || !t1 || !first || !count || !texts) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for word timestamps");
        goto done;
    }
    if ((st = rlx_whisper_align_matrix(w, sot_seq, n_sot, text, n_text, n_frames, mat, &F, probs,
                                       err)) != RLX_OK)
        goto done;
    nw = rlx_whisper_words_from_matrix(w, text, n_text, mat, F, t0, t1, first, count, texts);
    if (nw > 0) {
        for (int k = 0; k < nw; k++)
            if (!texts[k]) {
                nw = -1;
                break;
            }
        if (nw > 0) {
            rlx_whisper_clip_long_words(texts, t0, t1, nw, &median, &max_dur);
            nw = rlx_whisper_merge_punctuation(texts, first, count, t0, t1, nw);
        }
    }
    if (nw < 0) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for word timestamps");
        goto done;
    }
    /* hand the words to their segments, by token count */
    int wi = 0, tok_seen = 0;
    for (int s = 0; s < n_segs && st == RLX_OK; s++) {
        int seg_text = 0;
        for (int k = 0; k < segs[s].n_tokens; k++)
            seg_text += segs[s].tokens[k].id < sp->eot;
        int end = tok_seen + seg_text, cnt = 0;
        for (int k = wi; k < nw && first[k] < end; k++)
            cnt++;
        if (cnt > 0) {
            segs[s].words = calloc((size_t)cnt, sizeof(rlx_whisper_word));
            if (!segs[s].words) {
                st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
                break;
            }
            for (int k = 0; k < cnt; k++) {
                rlx_whisper_word *o = &segs[s].words[k];
                o->text = texts[wi + k];
                texts[wi + k] = NULL;
                /* openai's round(time_offset + t, 2) */
                o->t0_ms = llround((t_off_ms / 1000.0 + t0[wi + k]) * 100) * 10;
                o->t1_ms = llround((t_off_ms / 1000.0 + t1[wi + k]) * 100) * 10;
                double ps = 0;
                for (int i = 0; i < count[wi + k]; i++)
                    ps += probs[first[wi + k] + i];
                o->p = (float)(ps / count[wi + k]);
            }
            segs[s].n_words = cnt;
            if (last_speech_s)
                rlx_whisper_fit_segment_words(&segs[s], median, max_dur, last_speech_s);
            /* each token of a word gets the word's span */
            int ti = 0;
            for (int k = 0; k < segs[s].n_tokens; k++) {
                if (segs[s].tokens[k].id >= sp->eot)
                    continue;
                int g = tok_seen + ti++;
                for (int q = 0; q < cnt; q++)
                    if (g >= first[wi + q] && g < first[wi + q] + count[wi + q]) {
                        segs[s].tokens[k].t0_ms = segs[s].words[q].t0_ms;
                        segs[s].tokens[k].t1_ms = segs[s].words[q].t1_ms;
                    }
            }
            wi += cnt;
        }
        tok_seen = end;
    }
done:
    if (texts)
        for (int k = 0; k < (nw > 0 ? nw : 0); k++)
            free(texts[k]);
    free(mat), free(t0), free(t1), free(first), free(count), free(texts);
    return st;
}
