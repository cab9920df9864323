/* FLUX.2 [klein] text encoder (flux2-text.h): file discovery, the chat
 * format, tokens and padding on the host; the Qwen3 trunk is the LLM graph
 * builder's, with its hidden-state output, no KV cache and a key mask. */
#include "models/diffusion/flux2-text.h"

#include <ctype.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/formats/gguf.h"
#include "engine/ir/graph.h"
#include "engine/runtime/session.h"
#include "engine/template/chat-template.h"
#include "engine/text/tokenizer.h"
#include "models/llm/llm-hf.h"

/* Added to the scores of padding keys: exp() of it is exactly 0 next to any
 * real score, and it stays finite so no kernel ever sees inf - inf. */
#define PAD_KEY_BIAS (-1e30f)

/* Qwen3's template rendered for one user message, add_generation_prompt and
 * enable_thinking false: used when a model ships no template. */
static const char qwen3_prefix[] = "<|im_start|>user\n";
static const char qwen3_suffix[] = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";

struct rlx_flux2_text {
    rlx_flux2_text_params p;
    rlx_session *s;
    rlx_gguf *gguf;
    rlx_llm_hf *hf;
    rlx_llm_config cfg;
    rlx_tokenizer *tok;
    rlx_chat_template *tmpl; /* NULL: the built-in Qwen3 text */
    rlx_token pad;
    char path[1024];
};

rlx_flux2_text_params rlx_flux2_text_default_params(void)
{
    return (rlx_flux2_text_params){.device = "cpu",
                                   .max_length = 512,
                                   .pad_id = -1,
                                   .pad = true,
                                   .n_layers = 3,
                                   .layers = {9, 18, 27}};
}

static bool is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* dir + "/" + name into buf; false when it does not fit */
static bool join(char *buf, size_t cap, const char *dir, const char *name)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    int w = snprintf(buf, cap, "%.*s/%s", (int)n, dir, name);
    return w > 0 && (size_t)w < cap;
}

static bool is_gguf_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char m[4] = {0};
    size_t got = fread(m, 1, 4, f);
    fclose(f);
    return got == 4 && !memcmp(m, "GGUF", 4);
}

/* The tokenizer of a text_encoder/ folder: tokenizer.json inside, or a
 * tokenizer/ folder beside it (a diffusers layout). */
static rlx_status tok_beside(const char *dir, char *tok, size_t cap, bool need, rlx_error **err)
{
    char a[4200], b[4200];
    join(a, sizeof a, dir, "tokenizer.json");
    join(b, sizeof b, dir, "../tokenizer");
    if (is_file(a))
        snprintf(tok, cap, "%s", dir);
    else if (is_dir(b))
        snprintf(tok, cap, "%s", b);
    else if (need)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND,
                             "%s: no tokenizer.json in the text encoder's folder and no "
                             "tokenizer/ folder beside it",
                             dir);
    return RLX_OK;
}

/* Where the text encoder and its tokenizer are. te: a folder with
 * config.json (or a .safetensors file with one beside it), or a GGUF file;
 * tok: a tokenizer folder, or "" when the GGUF holds it or (need false) the
 * caller gives its own. */
static rlx_status locate(const char *path, char *te, char *tok, size_t cap, bool *gguf, bool need,
                         rlx_error **err)
{
    *gguf = false;
    tok[0] = 0;
    if (!path || !*path)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "FLUX.2 text encoder: no model path given");
    char a[4200], b[4200];
    if (is_file(path)) {
        if (is_gguf_file(path) || ends_with(path, ".gguf")) {
            *gguf = true;
            snprintf(te, cap, "%s", path);
            return RLX_OK;
        }
        if (ends_with(path, ".safetensors") && rlx_llm_hf_is_checkpoint(path)) {
            snprintf(te, cap, "%s", path);
            const char *slash = strrchr(path, '/');
            snprintf(a, sizeof a, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
            return tok_beside(a, tok, cap, need, err);
        }
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "%s: give the FLUX.2 text encoder as a diffusers folder (with "
                             "text_encoder/ and tokenizer/), its text_encoder/ folder or a Qwen3 "
                             ".gguf file",
                             path);
    }
    if (!is_dir(path))
        return rlx_error_set(err, RLX_ERR_NOT_FOUND, "%s: no such file or folder", path);
    join(a, sizeof a, path, "config.json");
    if (is_file(a)) {
        /* the text_encoder/ folder itself */
        snprintf(te, cap, "%s", path);
        return tok_beside(path, tok, cap, need, err);
    }
    join(a, sizeof a, path, "text_encoder");
    join(b, sizeof b, path, "model_index.json");
    if (!is_dir(a)) {
        if (is_file(b))
            return rlx_error_set(err, RLX_ERR_NOT_FOUND,
                                 "%s: the diffusers folder has no text_encoder/ folder (FLUX.2 "
                                 "[klein] needs its Qwen3 text encoder)",
                                 path);
        return rlx_error_set(err, RLX_ERR_NOT_FOUND,
                             "%s: neither a diffusers folder (text_encoder/, tokenizer/) nor a "
                             "text encoder folder (config.json)",
                             path);
    }
    snprintf(te, cap, "%s", a);
    join(b, sizeof b, path, "tokenizer");
    if (!is_dir(b)) {
        join(b, sizeof b, a, "tokenizer.json");
        if (is_file(b))
            snprintf(tok, cap, "%s", a);
        else if (need)
            return rlx_error_set(err, RLX_ERR_NOT_FOUND,
                                 "%s: the diffusers folder has no tokenizer/ folder", path);
        return RLX_OK;
    }
    snprintf(tok, cap, "%s", b);
    join(a, sizeof a, b, "tokenizer.json");
    if (!is_file(a) && need)
        return rlx_error_set(err, RLX_ERR_NOT_FOUND,
                             "%s: no tokenizer.json (the tokenizer is read from tokenizer.json; "
                             "vocab.json and merges.txt alone are not enough)",
                             b);
    return RLX_OK;
}

static rlx_status check_params(const rlx_flux2_text_params *p, rlx_error **err)
{
    if (p->max_length < 1 || p->max_length > RLX_FLUX2_TEXT_MAX_LENGTH)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "FLUX.2 text encoder: max_length %d is not in 1..%d", p->max_length,
                             RLX_FLUX2_TEXT_MAX_LENGTH);
    if (p->n_layers < 1 || p->n_layers > RLX_LLM_MAX_HIDDEN)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "FLUX.2 text encoder: %d hidden states asked for; 1 to %d can be "
                             "taken",
                             p->n_layers, RLX_LLM_MAX_HIDDEN);
    return RLX_OK;
}

/* The chat template: the GGUF's, else the first folder of dirs (the given
 * tokenizer's, the model's tokenizer/, the text encoder's) that has one. */
static rlx_status load_template(rlx_flux2_text *t, const char *const dirs[3], rlx_error **err)
{
    char *src = NULL;
    if (t->gguf) {
        const rlx_gguf_value *v = rlx_gguf_find(t->gguf, "tokenizer.chat_template");
        if (v && v->type == RLX_GGUF_TYPE_STRING && (src = malloc(v->v.str.len + 1))) {
            memcpy(src, v->v.str.ptr, v->v.str.len);
            src[v->v.str.len] = 0;
        }
    }
    for (int i = 0; i < 3 && !src; i++)
        if (dirs[i] && dirs[i][0] && is_dir(dirs[i]))
            src = rlx_llm_hf_chat_template_in(dirs[i]);
    if (!src)
        return RLX_OK; /* the built-in Qwen3 text */
    rlx_status st = rlx_chat_template_create(src, &t->tmpl, err);
    free(src);
    if (st != RLX_OK)
        rlx_error_prefix(err, "%s: the chat template: ", t->path);
    return st;
}

rlx_status rlx_flux2_text_open(const char *path, const rlx_flux2_text_params *p,
                               rlx_flux2_text **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_flux2_text_open: no output given");
    rlx_flux2_text_params dp = rlx_flux2_text_default_params();
    if (!p)
        p = &dp;
    rlx_status st = check_params(p, err);
    if (st != RLX_OK)
        return st;
    char te[4200], tokp[4200];
    bool gguf;
    if ((st = locate(path, te, tokp, sizeof te, &gguf, !p->tokenizer, err)) != RLX_OK)
        return st;
    /* the model's own tokenizer folder, if any, still offers its template */
    char tmpl_dir[4200];
    snprintf(tmpl_dir, sizeof tmpl_dir, "%s", tokp);
    if (p->tokenizer)
        snprintf(tokp, sizeof tokp, "%s", p->tokenizer);

    rlx_flux2_text *t = calloc(1, sizeof *t);
    if (!t)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory opening the text encoder");
    t->p = *p;
    snprintf(t->path, sizeof t->path, "%s", path);
    if (gguf) {
        if ((st = rlx_gguf_open(te, &t->gguf, err)) != RLX_OK)
            goto fail;
        if ((st = rlx_llm_config_from_gguf(t->gguf, &t->cfg, err)) != RLX_OK)
            goto fail;
    } else {
        if ((st = rlx_llm_hf_open(te, &t->hf, err)) != RLX_OK)
            goto fail;
        t->cfg = *rlx_llm_hf_config(t->hf);
    }
    if (t->cfg.arch != RLX_LLM_ARCH_QWEN3) {
        st = rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                           "%s is a %s model; the FLUX.2 [klein] text encoder is a Qwen3", te,
                           t->cfg.arch_name[0] ? t->cfg.arch_name : "non-Qwen3");
        goto fail;
    }
    for (int i = 0; i < p->n_layers; i++)
        if (p->layers[i] < 0 || p->layers[i] > t->cfg.n_layer) {
            st = rlx_error_set(err, RLX_ERR_FORMAT,
                               "%s has %d layers, but the FLUX.2 text encoder takes the hidden "
                               "state of layer %d",
                               te, t->cfg.n_layer, p->layers[i]);
            goto fail;
        }

    /* the tokenizer: the GGUF's own, or a tokenizer.json */
    if (tokp[0])
        st = rlx_tokenizer_load(tokp, &t->tok, err);
    else
        st = rlx_tokenizer_from_gguf(t->gguf, &t->tok, err);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "the text encoder's tokenizer: ");
        goto fail;
    }
    t->pad = p->pad_id >= 0 ? p->pad_id : rlx_tokenizer_pad(t->tok);
    if (t->pad == RLX_TOKEN_NULL)
        t->pad = rlx_tokenizer_find(t->tok, "<|endoftext|>", strlen("<|endoftext|>"));
    if (t->pad == RLX_TOKEN_NULL && p->pad) {
        st = rlx_error_set(err, RLX_ERR_FORMAT,
                           "%s: the tokenizer has no padding token, which the FLUX.2 text "
                           "encoder pads the prompt with",
                           tokp[0] ? tokp : te);
        goto fail;
    }
    const char *dirs[3] = {tokp, tmpl_dir, gguf ? NULL : te};
    if ((st = load_template(t, dirs, err)) != RLX_OK)
        goto fail;

    rlx_session_params sp = rlx_session_default_params();
    sp.device = p->device ? p->device : "cpu";
    sp.n_threads = p->n_threads;
    sp.memory_budget = p->memory_budget;
    if ((st = rlx_session_create(&sp, &t->s, err)) != RLX_OK)
        goto fail;
    st = t->gguf ? rlx_session_add_gguf(t->s, t->gguf, err)
                 : rlx_llm_hf_add_to_session(t->hf, t->s, err);
    if (st != RLX_OK)
        goto fail;
    *out = t;
    return RLX_OK;
fail:
    rlx_flux2_text_free(t);
    return st;
}

void rlx_flux2_text_free(rlx_flux2_text *t)
{
    if (!t)
        return;
    /* the session borrows the mapped weights: it goes first */
    rlx_session_free(t->s);
    rlx_chat_template_free(t->tmpl);
    rlx_tokenizer_free(t->tok);
    rlx_llm_hf_close(t->hf);
    rlx_gguf_close(t->gguf);
    free(t);
}

const rlx_llm_config *rlx_flux2_text_config(const rlx_flux2_text *t)
{
    return t ? &t->cfg : NULL;
}

int rlx_flux2_text_dim(const rlx_flux2_text *t)
{
    return t ? t->p.n_layers * t->cfg.n_embd : 0;
}

rlx_session *rlx_flux2_text_session(rlx_flux2_text *t)
{
    return t ? t->s : NULL;
}

static rlx_status format(rlx_flux2_text *t, const char *prompt, char **out, rlx_error **err)
{
    *out = NULL;
    if (!t->tmpl) {
        size_t n = strlen(qwen3_prefix) + strlen(prompt) + strlen(qwen3_suffix) + 1;
        char *s = malloc(n);
        if (!s)
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory formatting the prompt");
        snprintf(s, n, "%s%s%s", qwen3_prefix, prompt, qwen3_suffix);
        *out = s;
        return RLX_OK;
    }
    rlx_chat_message m = {.role = "user", .content = prompt};
    rlx_chat_render_opts o = rlx_chat_render_default_opts();
    o.add_generation_prompt = true;
    json_object *vars = json_object_new_object();
    if (!vars)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory formatting the prompt");
    json_object_object_add(vars, "enable_thinking", json_object_new_boolean(0));
    o.vars = vars;
    rlx_status st = rlx_chat_template_render(t->tmpl, &m, 1, &o, out, err);
    json_object_put(vars);
    if (st != RLX_OK)
        rlx_error_prefix(err, "formatting the prompt: ");
    return st;
}

rlx_status rlx_flux2_text_format(rlx_flux2_text *t, const char *prompt, char **out, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!t || !prompt || !out)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_flux2_text_format: missing argument");
    return format(t, prompt, out, err);
}

rlx_status rlx_flux2_text_tokenize(rlx_flux2_text *t, const char *prompt, int32_t **ids, int *n,
                                   rlx_error **err)
{
    if (ids)
        *ids = NULL;
    if (n)
        *n = 0;
    if (!t || !prompt || !ids || !n)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_flux2_text_tokenize: missing argument");
    char *text = NULL;
    rlx_status st = format(t, prompt, &text, err);
    if (st != RLX_OK)
        return st;
    rlx_tokenizer_encode_params ep = rlx_tokenizer_encode_default_params();
    /* the pipeline's tokenizer(text): no BOS for Qwen, control tokens parsed */
    ep.add_bos = 0;
    ep.add_eos = 0;
    ep.parse_special = true;
    rlx_token *tk = NULL;
    size_t nt = 0;
    st = rlx_tokenizer_encode(t->tok, text, strlen(text), ep, &tk, &nt, err);
    free(text);
    if (st != RLX_OK)
        return st;
    if (nt == 0) {
        free(tk);
        return rlx_error_set(err, RLX_ERR_INTERNAL, "the formatted prompt gave no tokens");
    }
    /* truncation=True, max_length: the tail is dropped */
    if (nt > (size_t)t->p.max_length)
        nt = (size_t)t->p.max_length;
    *ids = (int32_t *)tk;
    *n = (int)nt;
    return RLX_OK;
}

rlx_status rlx_flux2_text_encode_ids(rlx_flux2_text *t, const int32_t *ids, int n, float **out,
                                     int *n_tokens, int *dim, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (n_tokens)
        *n_tokens = 0;
    if (dim)
        *dim = 0;
    if (!t || !ids || !out || !n_tokens || !dim)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_flux2_text_encode_ids: missing argument");
    const int L = t->p.pad ? t->p.max_length : n;
    if (n < 1 || n > t->p.max_length)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the text encoder takes 1 to %d tokens, not %d", t->p.max_length, n);
    if (L > n && t->pad >= t->cfg.n_vocab)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the padding token %d is outside the text encoder's vocabulary of %d",
                             t->pad, t->cfg.n_vocab);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->cfg.n_vocab)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "token %d of the prompt is id %d, outside the text encoder's "
                                 "vocabulary of %d (is the tokenizer the model's own?)",
                                 i, ids[i], t->cfg.n_vocab);
    const int D = rlx_flux2_text_dim(t);

    rlx_llm_graph_params gp = rlx_llm_graph_default_params();
    gp.n_ctx = gp.seq_max = t->p.max_length;
    gp.kv_dtype = RLX_DTYPE_F32;
    gp.stateless = true;
    gp.key_mask = true;
    gp.n_hidden = t->p.n_layers;
    memcpy(gp.hidden_layers, t->p.layers, sizeof gp.hidden_layers);
    rlx_graph *g = NULL;
    rlx_status st;
    if (t->gguf) {
        rlx_llm_weights w = rlx_llm_weights_gguf(t->gguf);
        st = rlx_llm_build_graph_w(&t->cfg, &w, &gp, &g, err);
    } else {
        rlx_llm_weights w = rlx_llm_hf_weights(t->hf);
        st = rlx_llm_build_graph_w(&t->cfg, &w, &gp, &g, err);
    }
    if (st != RLX_OK)
        return st;
    rlx_session_program *prog = NULL;
    st = rlx_session_compile(t->s, g, &prog, err);
    rlx_graph_free(g);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "the FLUX.2 text encoder: ");
        return st;
    }
    int i_tok = rlx_session_program_input(prog, "tokens");
    int i_pos = rlx_session_program_input(prog, "pos");
    int i_mask = rlx_session_program_input(prog, "key_mask");
    int o_hid = rlx_session_program_output(prog, "hidden");
    int s_seq = rlx_session_program_symbol(prog, "SEQ");
    const rlx_lir *lir = rlx_session_program_lir(prog);
    if (i_tok < 0 || i_pos < 0 || i_mask < 0 || o_hid < 0 || s_seq < 0 || !lir ||
        lir->n_inputs != 3 || lir->n_outputs != 1)
        return rlx_error_set(err, RLX_ERR_INTERNAL,
                             "the FLUX.2 text encoder's program has unexpected bindings");

    int32_t *tok = malloc(sizeof *tok * (size_t)L), *pos = malloc(sizeof *pos * (size_t)L);
    float *mask = malloc(sizeof *mask * (size_t)L);
    float *hid = malloc(sizeof *hid * (size_t)L * (size_t)D);
    if (!tok || !pos || !mask || !hid) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory for %d x %d text features", L, D);
        goto done;
    }
    for (int i = 0; i < L; i++) {
        tok[i] = i < n ? ids[i] : t->pad;
        pos[i] = i; /* transformers' default position_ids: 0..L-1, padding included */
        mask[i] = i < n ? 0.0f : PAD_KEY_BIAS;
    }
    const void *ins[3];
    ins[i_tok] = tok;
    ins[i_pos] = pos;
    ins[i_mask] = mask;
    void *outs[1] = {hid};
    rlx_sym_values sv = {{0}};
    sv.v[s_seq] = L;
    st = rlx_session_run(t->s, prog, &sv, ins, outs, err);
    if (st != RLX_OK) {
        rlx_error_prefix(err, "the FLUX.2 text encoder: ");
        goto done;
    }
    *out = hid;
    hid = NULL;
    *n_tokens = L;
    *dim = D;
done:
    free(tok);
    free(pos);
    free(mask);
    free(hid);
    return st;
}

static rlx_status encode(rlx_flux2_text *t, const char *prompt, float **out, int *n_tokens,
                         int *dim, rlx_error **err)
{
    int32_t *ids = NULL;
    int n = 0;
    rlx_status st = rlx_flux2_text_tokenize(t, prompt, &ids, &n, err);
    if (st == RLX_OK)
        st = rlx_flux2_text_encode_ids(t, ids, n, out, n_tokens, dim, err);
    free(ids);
    return st;
}

rlx_status rlx_flux2_text_encode(rlx_flux2_text *t, const char *prompt, float **out, int *n_tokens,
                                 int *dim, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!t || !out || !n_tokens || !dim)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "rlx_flux2_text_encode: missing argument");
    bool blank = true;
    for (const char *c = prompt; c && *c && blank; c++)
        blank = isspace((unsigned char)*c) != 0;
    if (!prompt || blank)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the prompt is empty: describe the picture to make");
    return encode(t, prompt, out, n_tokens, dim, err);
}

rlx_status rlx_flux2_text_encode_negative(rlx_flux2_text *t, const char *negative, float **out,
                                          int *n_tokens, int *dim, rlx_error **err)
{
    if (out)
        *out = NULL;
    if (!t || !out || !n_tokens || !dim)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "rlx_flux2_text_encode_negative: missing argument");
    return encode(t, negative ? negative : "", out, n_tokens, dim, err);
}
