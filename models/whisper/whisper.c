/* The Whisper runner: loading, the compiled programs and their runs. The
 * search and the segmenting are in whisper-decode.c, the output formats in
 * whisper-output.c. */
#include "models/whisper/whisper-internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/ir/graph.h"

double rlx_whisper_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

rlx_whisper_params rlx_whisper_default_params(void)
{
    return (rlx_whisper_params){.device = "cpu", .max_beams = 1};
}

static rlx_status compile(rlx_whisper *w, rlx_graph *g, rlx_session_program **out, const char *what,
                          rlx_error **err)
{
    rlx_status st = rlx_session_compile(w->s, g, out, err);
    rlx_graph_free(g);
    if (st != RLX_OK)
        rlx_error_prefix(err, "whisper %s: ", what);
    return st;
}

static rlx_status load_encoder(rlx_whisper *w, bool with_output, rlx_session_program **out,
                               rlx_error **err)
{
    if (*out)
        return RLX_OK;
    rlx_graph *g = NULL;
    rlx_status st = rlx_whisper_build_encoder(w->file, with_output, &g, err);
    return st ? st : compile(w, g, out, "encoder", err);
}

static rlx_status load_decoder(rlx_whisper *w, int nb, int seq_max, bool all,
                               rlx_session_program **out, rlx_error **err)
{
    if (*out)
        return RLX_OK;
    rlx_graph *g = NULL;
    rlx_status st = rlx_whisper_build_decoder(w->file, nb, seq_max, all, NULL, 0, &g, err);
    return st ? st : compile(w, g, out, "decoder", err);
}

rlx_status rlx_whisper_create(const char *model_path, const rlx_whisper_params *p,
                              rlx_whisper **out, rlx_error **err)
{
    *out = NULL;
    rlx_whisper_params dp = rlx_whisper_default_params();
    if (!p)
        p = &dp;
    rlx_whisper *w = calloc(1, sizeof *w);
    if (!w)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    w->max_beams = p->max_beams < 1                       ? 1
                   : p->max_beams > RLX_WHISPER_MAX_BEAMS ? RLX_WHISPER_MAX_BEAMS
                                                          : p->max_beams;
    rlx_status st = rlx_whisper_file_open(model_path, &w->file, err);
    if (st != RLX_OK)
        goto fail;
    w->hp = rlx_whisper_file_hparams(w->file);
    w->sp = rlx_whisper_file_special(w->file);
    if (w->hp->n_text_ctx > 448 || w->hp->n_text_ctx < 8) {
        st = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                           "%s: a text context of %d positions is not Whisper's (448)", model_path,
                           w->hp->n_text_ctx);
        goto fail;
    }
    if (!rlx_whisper_file_has_weights(w->file)) {
        st = rlx_error_set(err, RLX_ERR_FORMAT,
                           "%s holds a Whisper header, filterbank and vocabulary but no weights, "
                           "so it cannot transcribe",
                           model_path);
        goto fail;
    }
    rlx_session_params sp = rlx_session_default_params();
    sp.device = p->device;
    sp.n_threads = p->n_threads;
    sp.memory_budget = p->memory_budget;
    if ((st = rlx_session_create(&sp, &w->s, err)) != RLX_OK)
        goto fail;
    rlx_session_set_cancel_flag(w->s, &w->cancel);
    if (p->progress)
        rlx_session_set_progress(w->s, p->progress, p->progress_user);
    if ((st = rlx_whisper_file_add_to_session(w->file, w->s, err)) != RLX_OK)
        goto fail;
    if ((st = load_encoder(w, false, &w->enc, err)) != RLX_OK ||
        (st = load_decoder(w, 1, RLX_WHISPER_STEP_SEQ, false, &w->dec[1], err)) != RLX_OK ||
        (st = load_decoder(w, 1, RLX_WHISPER_PREFILL_SEQ, false, &w->pre[1], err)) != RLX_OK)
        goto fail;
    /* the beam programs (and their caches, max_beams times one beam's) now, so
     * the memory budget is checked before anything is transcribed */
    if (w->max_beams > 1 && ((st = load_decoder(w, w->max_beams, RLX_WHISPER_STEP_SEQ, false,
                                                &w->dec[w->max_beams], err)) != RLX_OK ||
                             (st = load_decoder(w, w->max_beams, RLX_WHISPER_PREFILL_SEQ, false,
                                                &w->pre[w->max_beams], err)) != RLX_OK))
        goto fail;
    rlx_session_set_progress(w->s, NULL, NULL);
    if ((st = rlx_mel_create(w->hp->n_mels, rlx_whisper_file_mel_filters(w->file), &w->mel, err)) !=
        RLX_OK)
        goto fail;
    size_t rows = RLX_WHISPER_MAX_BEAMS;
    w->logits = malloc(sizeof(float) * rows * (size_t)w->hp->n_vocab);
    if (!w->logits) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for the logits");
        goto fail;
    }
    *out = w;
    return RLX_OK;
fail:
    rlx_whisper_free(w);
    return st;
}

void rlx_whisper_free(rlx_whisper *w)
{
    if (!w)
        return;
    rlx_session_free(w->s);
    rlx_whisper_file_free(w->file);
    rlx_mel_free(w->mel);
    free(w->logits);
    free(w);
}

void rlx_whisper_cancel(rlx_whisper *w)
{
    if (w)
        __atomic_store_n(&w->cancel, 1, __ATOMIC_RELAXED);
}

const rlx_whisper_file *rlx_whisper_model_file(const rlx_whisper *w)
{
    return w->file;
}

rlx_session *rlx_whisper_session(rlx_whisper *w)
{
    return w->s;
}

const char *rlx_whisper_kind(const rlx_whisper *w)
{
    return rlx_whisper_file_kind(w->file);
}

bool rlx_whisper_is_multilingual(const rlx_whisper *w)
{
    return rlx_whisper_file_multilingual(w->file);
}

rlx_status rlx_whisper_encode(rlx_whisper *w, const float *mel, float *enc_out, rlx_error **err)
{
    rlx_session_program **prog = enc_out ? &w->enc_out : &w->enc;
    rlx_status st = load_encoder(w, enc_out != NULL, prog, err);
    if (st != RLX_OK)
        return st;
    double t0 = rlx_whisper_now_ms();
    rlx_sym_values sv = {{0}};
    const void *ins[1] = {mel};
    void *outs[1] = {enc_out ? enc_out : w->logits}; /* one row of features, unread */
    st = rlx_session_run(w->s, *prog, &sv, ins, outs, err);
    if (w->timing) {
        w->timing->encode_ms += rlx_whisper_now_ms() - t0;
        w->timing->n_windows++;
    }
    if (st != RLX_OK && st != RLX_ERR_CANCELLED)
        rlx_error_prefix(err, "whisper encoder: ");
    return st;
}

static rlx_status run_dec(rlx_whisper *w, rlx_session_program *prog, const int32_t *tokens,
                          int32_t seq, int32_t past, float *logits, rlx_error **err)
{
    if (seq < 1 || past < 0 || past + seq > w->hp->n_text_ctx)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "whisper decoder: %d tokens after %d do not fit its %d positions", seq,
                             past, w->hp->n_text_ctx);
    double t0 = rlx_whisper_now_ms();
    rlx_sym_values sv = {{0}};
    sv.v[rlx_session_program_symbol(prog, "SEQ")] = seq;
    int ps = rlx_session_program_symbol(prog, "PAST");
    if (ps >= 0)
        sv.v[ps] = past;
    int32_t pos[448];
    for (int32_t i = 0; i < seq; i++)
        pos[i] = past + i;
    int ti = rlx_session_program_input(prog, "tokens"),
        pi = rlx_session_program_input(prog, "positions");
    if (ti < 0 || pi < 0 || ti + pi != 1)
        return rlx_error_set(err, RLX_ERR_INTERNAL, "whisper decoder: unexpected inputs");
    const void *ins[2];
    ins[ti] = tokens;
    ins[pi] = pos;
    void *outs[1] = {logits};
    rlx_status st = rlx_session_run(w->s, prog, &sv, ins, outs, err);
    if (w->timing) {
        w->timing->decode_ms += rlx_whisper_now_ms() - t0;
        w->timing->n_decode_tokens += seq;
    }
    if (st != RLX_OK && st != RLX_ERR_CANCELLED)
        rlx_error_prefix(err, "whisper decoder: ");
    return st;
}

rlx_status rlx_whisper_run_decoder(rlx_whisper *w, int nb, const int32_t *tokens, int32_t seq,
                                   int32_t past, float *logits, rlx_error **err)
{
    if (nb < 1 || nb > RLX_WHISPER_MAX_BEAMS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "whisper decoder: %d beams asked for; 1 to %d are possible", nb,
                             RLX_WHISPER_MAX_BEAMS);
    int ctx = w->hp->n_text_ctx;
    bool step = seq <= RLX_WHISPER_STEP_SEQ && past <= ctx - RLX_WHISPER_STEP_SEQ;
    /* a window that runs to the end of the text context (openai stops at
     * its last position) feeds its last tokens one at a time */
    bool tail = !step && seq == 1 && past >= 0 && past < ctx;
    if (!step && !tail && (seq > RLX_WHISPER_PREFILL_SEQ || past > ctx - RLX_WHISPER_PREFILL_SEQ))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "whisper decoder: %d tokens after %d: at most %d at once starting "
                             "by position %d, %d starting by position %d, or one at a time up "
                             "to position %d",
                             seq, past, RLX_WHISPER_PREFILL_SEQ, ctx - RLX_WHISPER_PREFILL_SEQ,
                             RLX_WHISPER_STEP_SEQ, ctx - RLX_WHISPER_STEP_SEQ, ctx - 1);
    rlx_session_program **prog = step ? &w->dec[nb] : tail ? &w->tail[nb] : &w->pre[nb];
    rlx_status st = load_decoder(w, nb,
                                 step   ? RLX_WHISPER_STEP_SEQ
                                 : tail ? 1
                                        : RLX_WHISPER_PREFILL_SEQ,
                                 false, prog, err);
    return st ? st : run_dec(w, *prog, tokens, seq, past, logits, err);
}

rlx_status rlx_whisper_run_reorder(rlx_whisper *w, int nb, const int32_t *src, rlx_error **err)
{
    if (nb < 2 || nb > RLX_WHISPER_MAX_BEAMS)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "whisper: no reorder for %d beams", nb);
    if (!w->reorder[nb]) {
        rlx_graph *g = NULL;
        rlx_status st = rlx_whisper_build_reorder(w->file, nb, &g, err);
        if (st != RLX_OK || (st = compile(w, g, &w->reorder[nb], "beam reorder", err)) != RLX_OK)
            return st;
    }
    rlx_sym_values sv = {{0}};
    const void *ins[1] = {src};
    float probe[RLX_WHISPER_MAX_BEAMS];
    void *outs[1] = {probe};
    return rlx_session_run(w->s, w->reorder[nb], &sv, ins, outs, err);
}

rlx_status rlx_whisper_decode(rlx_whisper *w, const int32_t *tokens, int32_t n, int32_t past,
                              bool all, float *logits, rlx_error **err)
{
    if (!all)
        return rlx_whisper_run_decoder(w, 1, tokens, n, past, logits, err);
    if (past != 0)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "whisper decoder: every position's logits start at position 0");
    rlx_status st = load_decoder(w, 1, RLX_WHISPER_PREFILL_SEQ, true, &w->dec_all, err);
    return st ? st : run_dec(w, w->dec_all, tokens, n, past, logits, err);
}

rlx_status rlx_whisper_mel(rlx_whisper *w, const float *samples, int64_t n, int64_t start_frame,
                           float *mel, rlx_error **err)
{
    double t0 = rlx_whisper_now_ms();
    rlx_status st = rlx_mel_log(w->mel, samples, n, start_frame, RLX_WHISPER_N_FRAMES, mel, err);
    if (st == RLX_OK)
        rlx_mel_normalize(mel, (size_t)w->hp->n_mels * RLX_WHISPER_N_FRAMES);
    if (w->timing)
        w->timing->mel_ms += rlx_whisper_now_ms() - t0;
    return st;
}
