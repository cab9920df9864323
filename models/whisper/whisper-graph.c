/* Whisper's encoder and decoder as graphs of the IR (engine/ir/graph.h).
 *
 * Encoder: conv1d(k3, p1) + GELU, conv1d(k3, s2, p1) + GELU, + positional
 * embedding, pre-LN blocks (self-attention without mask, MLP 4x with GELU),
 * ln_post. The same program writes each decoder layer's cross-attention keys
 * and values into states ("whisper.xk.L" / "whisper.xv.L", [1, H, n_audio_ctx,
 * D]), so the decoder reads them from the device for every token of the window.
 *
 * Decoder: NB beams of SEQ tokens each at positions PAST.., token + learned
 * position embedding, pre-LN blocks (causal self-attention over the beam's own
 * cache "whisper.k<NB>.L" / "whisper.v<NB>.L" [NB, H, n_text_ctx, D], one per beam
 * count so the greedy and the beam programs do not share it, cross-attention,
 * MLP), ln, logits against the token embedding (tied head). Cross-attention has
 * no mask, so the beams' queries are folded into one sequence against the one
 * window's keys instead of copying those per beam.
 *
 * Reorder: for beam search, cache rows of beam i <- beam src[i], as a gather
 * and a scatter on the device.
 */
#include "models/whisper/whisper-internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/ir/graph.h"

void rlx_whisper_cache_name(char *buf, size_t cap, int v, int nb, int il)
{
    snprintf(buf, cap, "whisper.%c%d.%d", v ? 'v' : 'k', nb, il);
}

typedef struct {
    rlx_graph *g;
    const rlx_whisper_file *f;
    char missing[160];
} wb;

/* A parameter by canonical name, checked against the expected shape (a
 * dim of 0 is not checked); its dtype is the file's. */
static rlx_node param(wb *b, const char *name, int rank, const int64_t *dims)
{
    rlx_dtype dt;
    rlx_shape sh;
    if (!rlx_whisper_file_tensor(b->f, name, &dt, &sh)) {
        if (!b->missing[0])
            snprintf(b->missing, sizeof b->missing, "the tensor '%s' is missing", name);
        return RLX_NODE_INVALID;
    }
    bool ok = sh.rank == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = rlx_dim_is_const(sh.d[i]) && (dims[i] == 0 || sh.d[i].k == dims[i]);
    if (!ok) {
        if (!b->missing[0]) {
            char want[64] = "", *p = want;
            for (int i = 0; i < rank; i++)
                p += snprintf(p, (size_t)(want + sizeof want - p), "%s%lld", i ? ", " : "",
                              (long long)dims[i]);
            snprintf(b->missing, sizeof b->missing, "the tensor '%s' has another shape than [%s]",
                     name, want);
        }
        return RLX_NODE_INVALID;
    }
    return rlx_graph_param(b->g, name, dt, sh);
}

static rlx_node reshape(rlx_graph *g, rlx_node x, int rank, const rlx_dim *d)
{
    return rlx_graph_reshape(g, NULL, x, rlx_shape_make_dims(rank, d));
}

static rlx_dim C(int64_t k)
{
    return rlx_dim_const(k);
}

static rlx_node layer_norm(wb *b, rlx_node x, const char *pre, int il, int64_t n)
{
    char w[96], bias[96];
    snprintf(w, sizeof w, pre, il);
    snprintf(bias, sizeof bias, pre, il);
    strncat(w, ".weight", sizeof w - strlen(w) - 1);
    strncat(bias, ".bias", sizeof bias - strlen(bias) - 1);
    return rlx_graph_layer_norm(b->g, NULL, x, param(b, w, 1, (int64_t[]){n}),
                                param(b, bias, 1, (int64_t[]){n}), 1e-5f);
}

/* x [S, n] -> linear of "<pre>.{query,key,value,out}" */
static rlx_node proj(wb *b, rlx_node x, const char *pre, int il, const char *which, int64_t n,
                     bool bias)
{
    char w[112], bn[112];
    snprintf(w, sizeof w, pre, il);
    snprintf(bn, sizeof bn, pre, il);
    size_t l = strlen(w);
    snprintf(w + l, sizeof w - l, ".%s.weight", which);
    snprintf(bn + l, sizeof bn - l, ".%s.bias", which);
    return rlx_graph_linear(b->g, NULL, x, param(b, w, 2, (int64_t[]){n, n}),
                            bias ? param(b, bn, 1, (int64_t[]){n}) : RLX_NODE_INVALID);
}

static rlx_node mlp(wb *b, rlx_node x, const char *pre, int il, int64_t n)
{
    char name[96];
    snprintf(name, sizeof name, "%s.blocks.%d", pre, il);
    char w0[128], b0[128], w2[128], b2[128];
    snprintf(w0, sizeof w0, "%s.mlp.0.weight", name);
    snprintf(b0, sizeof b0, "%s.mlp.0.bias", name);
    snprintf(w2, sizeof w2, "%s.mlp.2.weight", name);
    snprintf(b2, sizeof b2, "%s.mlp.2.bias", name);
    rlx_graph *g = b->g;
    rlx_node h = rlx_graph_linear(g, NULL, x, param(b, w0, 2, (int64_t[]){4 * n, n}),
                                  param(b, b0, 1, (int64_t[]){4 * n}));
    h = rlx_graph_gelu(g, NULL, h, RLX_GELU_ERF);
    return rlx_graph_linear(g, NULL, h, param(b, w2, 2, (int64_t[]){n, 4 * n}),
                            param(b, b2, 1, (int64_t[]){n}));
}

static rlx_status finish(wb *b, rlx_graph **out, rlx_error **err)
{
    if (b->missing[0]) {
        rlx_graph_free(b->g);
        return rlx_error_set(err, RLX_ERR_FORMAT, "this Whisper model cannot be used: %s",
                             b->missing);
    }
    if (rlx_graph_status(b->g) != RLX_OK) {
        rlx_status st = rlx_graph_take_error(b->g, err);
        rlx_error_prefix(err, "whisper graph: ");
        rlx_graph_free(b->g);
        return st;
    }
    *out = b->g;
    return RLX_OK;
}

rlx_status rlx_whisper_build_encoder(const rlx_whisper_file *f, bool with_output, rlx_graph **out,
                                     rlx_error **err)
{
    *out = NULL;
    const rlx_whisper_hparams *hp = rlx_whisper_file_hparams(f);
    const int64_t n = hp->n_audio_state, H = hp->n_audio_head, D = n / H, A = hp->n_audio_ctx;
    const int64_t HT = hp->n_text_head, DT = hp->n_text_state / hp->n_text_head;
    wb b = {.g = rlx_graph_create(), .f = f};
    if (!b.g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory building the encoder");
    rlx_graph *g = b.g;
    rlx_node mel = rlx_graph_input(g, "mel", RLX_DTYPE_F32,
                                   rlx_shape_make(3, (int64_t[]){1, hp->n_mels, 2 * A}));
    rlx_node x = rlx_graph_conv1d(
        g, "conv1", mel, param(&b, "encoder.conv1.weight", 3, (int64_t[]){n, hp->n_mels, 3}),
        param(&b, "encoder.conv1.bias", 1, (int64_t[]){n}), 1, 1, 1, 1);
    x = rlx_graph_gelu(g, NULL, x, RLX_GELU_ERF);
    x = rlx_graph_conv1d(g, "conv2", x, param(&b, "encoder.conv2.weight", 3, (int64_t[]){n, n, 3}),
                         param(&b, "encoder.conv2.bias", 1, (int64_t[]){n}), 2, 1, 1, 1);
    x = rlx_graph_gelu(g, NULL, x, RLX_GELU_ERF);
    x = reshape(g, rlx_graph_transpose(g, NULL, x, 1, 2), 2, (rlx_dim[]){C(A), C(n)});
    x = rlx_graph_add(g, NULL, x, param(&b, "encoder.positional_embedding", 2, (int64_t[]){A, n}));
    const int perm[3] = {1, 0, 2};
    for (int il = 0; il < hp->n_audio_layer; il++) {
        rlx_node h = layer_norm(&b, x, "encoder.blocks.%d.attn_ln", il, n);
        rlx_node q = proj(&b, h, "encoder.blocks.%d.attn", il, "query", n, true);
        rlx_node k = proj(&b, h, "encoder.blocks.%d.attn", il, "key", n, false);
        rlx_node v = proj(&b, h, "encoder.blocks.%d.attn", il, "value", n, true);
        rlx_node hd[3] = {q, k, v};
        for (int i = 0; i < 3; i++) {
            hd[i] = reshape(g, hd[i], 3, (rlx_dim[]){C(A), C(H), C(D)});
            hd[i] = reshape(g, rlx_graph_permute(g, NULL, hd[i], perm), 4,
                            (rlx_dim[]){C(1), C(H), C(A), C(D)});
        }
        rlx_attention_params ap = {.mask = RLX_MASK_NONE};
        rlx_node a = rlx_graph_attention(g, NULL, hd[0], hd[1], hd[2], RLX_NODE_INVALID, ap);
        a = reshape(g, a, 3, (rlx_dim[]){C(H), C(A), C(D)});
        a = reshape(g, rlx_graph_permute(g, NULL, a, perm), 2, (rlx_dim[]){C(A), C(n)});
        x = rlx_graph_add(g, NULL, x, proj(&b, a, "encoder.blocks.%d.attn", il, "out", n, true));
        h = layer_norm(&b, x, "encoder.blocks.%d.mlp_ln", il, n);
        x = rlx_graph_add(g, NULL, x, mlp(&b, h, "encoder", il, n));
    }
    x = rlx_graph_layer_norm(g, "ln_post", x,
                             param(&b, "encoder.ln_post.weight", 1, (int64_t[]){n}),
                             param(&b, "encoder.ln_post.bias", 1, (int64_t[]){n}), 1e-5f);
    /* a program needs an output; the runner's own encoder hands back one row,
     * the states are what it is for */
    if (with_output)
        rlx_graph_output(g, "enc", x);
    else
        rlx_graph_output(g, "enc0", rlx_graph_slice(g, NULL, x, 0, C(0), C(1)));

    /* cross-attention keys and values of every decoder layer */
    const int64_t nt = hp->n_text_state;
    for (int il = 0; il < hp->n_text_layer; il++) {
        rlx_node kv[2] = {proj(&b, x, "decoder.blocks.%d.cross_attn", il, "key", nt, false),
                          proj(&b, x, "decoder.blocks.%d.cross_attn", il, "value", nt, true)};
        for (int i = 0; i < 2; i++) {
            char name[48];
            snprintf(name, sizeof name, "whisper.x%c.%d", i ? 'v' : 'k', il);
            rlx_node st = rlx_graph_state(g, name, RLX_DTYPE_F32,
                                          rlx_shape_make(4, (int64_t[]){1, HT, A, DT}));
            rlx_node t = reshape(g, kv[i], 3, (rlx_dim[]){C(A), C(HT), C(DT)});
            t = reshape(g, rlx_graph_permute(g, NULL, t, perm), 4,
                        (rlx_dim[]){C(1), C(HT), C(A), C(DT)});
            rlx_graph_scatter(g, NULL, st, t, 2, C(0));
        }
    }
    return finish(&b, out, err);
}

rlx_status rlx_whisper_build_decoder(const rlx_whisper_file *f, int nb, int seq_max, bool all,
                                     const int32_t *heads, int n_heads, rlx_graph **out,
                                     rlx_error **err)
{
    *out = NULL;
    const rlx_whisper_hparams *hp = rlx_whisper_file_hparams(f);
    const int64_t n = hp->n_text_state, H = hp->n_text_head, D = n / H, A = hp->n_audio_ctx,
                  V = hp->n_vocab, CTX = hp->n_text_ctx;
    wb b = {.g = rlx_graph_create(), .f = f};
    if (!b.g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory building the decoder");
    rlx_graph *g = b.g;
    int seq = rlx_graph_add_symbol(g, "SEQ", seq_max);
    int past = rlx_graph_add_symbol(g, "PAST", CTX - seq_max);
    rlx_dim S = rlx_dim_sym(seq), P = rlx_dim_sym(past), T, NS = rlx_dim_scale(S, nb);
    rlx_dim_add(P, S, &T);
    rlx_node tokens =
        rlx_graph_input(g, "tokens", RLX_DTYPE_I32, rlx_shape_make_dims(2, (rlx_dim[]){C(nb), S}));
    rlx_node emb = param(&b, "decoder.token_embedding.weight", 2, (int64_t[]){V, n});
    rlx_node pos = param(&b, "decoder.positional_embedding", 2, (int64_t[]){CTX, n});
    /* positions PAST.. as an input: a slice of the table at a symbolic offset
     * would have to fit at both symbols' bounds at once */
    rlx_node posid =
        rlx_graph_input(g, "positions", RLX_DTYPE_I32, rlx_shape_make_dims(1, (rlx_dim[]){S}));
    rlx_node x = rlx_graph_gather(g, "embed", emb, tokens); /* [NB, S, n] */
    x = rlx_graph_add(g, NULL, x, rlx_graph_gather(g, "pos", pos, posid));
    x = reshape(g, x, 2, (rlx_dim[]){NS, C(n)});
    const int perm3[3] = {1, 0, 2}, perm4[4] = {0, 2, 1, 3};
    rlx_node qks[64];
    int n_qk = 0;
    for (int il = 0; il < hp->n_text_layer; il++) {
        /* self-attention over the beam's cache */
        rlx_node h = layer_norm(&b, x, "decoder.blocks.%d.attn_ln", il, n);
        rlx_node q = proj(&b, h, "decoder.blocks.%d.attn", il, "query", n, true);
        rlx_node k = proj(&b, h, "decoder.blocks.%d.attn", il, "key", n, false);
        rlx_node v = proj(&b, h, "decoder.blocks.%d.attn", il, "value", n, true);
        rlx_node hd[3] = {q, k, v};
        for (int i = 0; i < 3; i++) {
            hd[i] = reshape(g, hd[i], 4, (rlx_dim[]){C(nb), S, C(H), C(D)});
            hd[i] = rlx_graph_permute(g, NULL, hd[i], perm4); /* [NB, H, S, D] */
        }
        rlx_node cache[2];
        for (int i = 0; i < 2; i++) {
            char name[48];
            rlx_whisper_cache_name(name, sizeof name, i, nb, il);
            rlx_node st = rlx_graph_state(g, name, RLX_DTYPE_F32,
                                          rlx_shape_make(4, (int64_t[]){nb, H, CTX, D}));
            st = rlx_graph_scatter(g, NULL, st, hd[1 + i], 2, P);
            cache[i] = rlx_graph_slice(g, NULL, st, 2, C(0), T);
        }
        rlx_attention_params ap = {.mask = RLX_MASK_CAUSAL};
        rlx_node a = rlx_graph_attention(g, NULL, hd[0], cache[0], cache[1], RLX_NODE_INVALID, ap);
        a = reshape(g, rlx_graph_permute(g, NULL, a, perm4), 2, (rlx_dim[]){NS, C(n)});
        x = rlx_graph_add(g, NULL, x, proj(&b, a, "decoder.blocks.%d.attn", il, "out", n, true));

        /* cross-attention: every beam's queries against the window's keys */
        h = layer_norm(&b, x, "decoder.blocks.%d.cross_attn_ln", il, n);
        q = proj(&b, h, "decoder.blocks.%d.cross_attn", il, "query", n, true);
        q = reshape(g, q, 3, (rlx_dim[]){NS, C(H), C(D)});
        q = reshape(g, rlx_graph_permute(g, NULL, q, perm3), 4, (rlx_dim[]){C(1), C(H), NS, C(D)});
        rlx_node xkv[2];
        for (int i = 0; i < 2; i++) {
            char name[48];
            snprintf(name, sizeof name, "whisper.x%c.%d", i ? 'v' : 'k', il);
            xkv[i] =
                rlx_graph_state(g, name, RLX_DTYPE_F32, rlx_shape_make(4, (int64_t[]){1, H, A, D}));
        }
        /* the alignment heads' cross-attention scores (before the softmax),
         * for word timestamps */
        for (int ah = 0; ah < n_heads; ah++) {
            if (heads[2 * ah] != il || heads[2 * ah + 1] < 0 || heads[2 * ah + 1] >= H)
                continue;
            rlx_node qh = rlx_graph_slice(g, NULL, q, 1, C(heads[2 * ah + 1]), C(1));
            rlx_node kh = rlx_graph_slice(g, NULL, xkv[0], 1, C(heads[2 * ah + 1]), C(1));
            rlx_node qk = rlx_graph_matmul(g, NULL, qh, kh, false, true); /* [1, 1, NS, A] */
            qk = rlx_graph_scale(g, NULL, qk, 1.0f / sqrtf((float)D), 0.0f);
            n_qk = n_qk < 64 ? n_qk : 63;
            qks[n_qk++] = qk;
        }
        rlx_attention_params xp = {.mask = RLX_MASK_NONE};
        a = rlx_graph_attention(g, NULL, q, xkv[0], xkv[1], RLX_NODE_INVALID, xp);
        a = reshape(g, a, 3, (rlx_dim[]){C(H), NS, C(D)});
        a = reshape(g, rlx_graph_permute(g, NULL, a, perm3), 2, (rlx_dim[]){NS, C(n)});
        x = rlx_graph_add(g, NULL, x,
                          proj(&b, a, "decoder.blocks.%d.cross_attn", il, "out", n, true));

        h = layer_norm(&b, x, "decoder.blocks.%d.mlp_ln", il, n);
        x = rlx_graph_add(g, NULL, x, mlp(&b, h, "decoder", il, n));
    }
    if (!all) {
        rlx_dim last;
        rlx_dim_sub(S, C(1), &last);
        x = reshape(g, x, 3, (rlx_dim[]){C(nb), S, C(n)});
        x = rlx_graph_slice(g, "last", x, 1, last, C(1));
        x = reshape(g, x, 2, (rlx_dim[]){C(nb), C(n)});
    }
    x = rlx_graph_layer_norm(g, "ln", x, param(&b, "decoder.ln.weight", 1, (int64_t[]){n}),
                             param(&b, "decoder.ln.bias", 1, (int64_t[]){n}), 1e-5f);
    rlx_graph_output(g, "logits", rlx_graph_matmul(g, "head", x, emb, false, true));
    if (n_qk > 0)
        rlx_graph_output(g, "xqk", n_qk == 1 ? qks[0] : rlx_graph_concat(g, NULL, n_qk, qks, 1));
    return finish(&b, out, err);
}

rlx_status rlx_whisper_build_reorder(const rlx_whisper_file *f, int nb, rlx_graph **out,
                                     rlx_error **err)
{
    *out = NULL;
    const rlx_whisper_hparams *hp = rlx_whisper_file_hparams(f);
    const int64_t n = hp->n_text_state, H = hp->n_text_head, D = n / H, CTX = hp->n_text_ctx;
    wb b = {.g = rlx_graph_create(), .f = f};
    if (!b.g)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    rlx_graph *g = b.g;
    rlx_node src = rlx_graph_input(g, "src", RLX_DTYPE_I32, rlx_shape_make(1, (int64_t[]){nb}));
    for (int il = 0; il < hp->n_text_layer; il++)
        for (int i = 0; i < 2; i++) {
            char name[48];
            rlx_whisper_cache_name(name, sizeof name, i, nb, il);
            rlx_node st = rlx_graph_state(g, name, RLX_DTYPE_F32,
                                          rlx_shape_make(4, (int64_t[]){nb, H, CTX, D}));
            rlx_node rows = reshape(g, st, 2, (rlx_dim[]){C(nb), C(H * CTX * D)});
            rlx_node moved = rlx_graph_gather(g, NULL, rows, src);
            if (il == 0 && i == 0) /* a program needs an output: one value per beam */
                rlx_graph_output(g, "probe", rlx_graph_slice(g, NULL, moved, 1, C(0), C(1)));
            moved = reshape(g, moved, 4, (rlx_dim[]){C(nb), C(H), C(CTX), C(D)});
            rlx_graph_scatter(g, NULL, st, moved, 0, C(0));
        }
    return finish(&b, out, err);
}
