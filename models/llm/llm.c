/* The LLM runner: programs, KV-cache bookkeeping, prefix reuse and the
 * generation loop. Host code here only moves token ids in and the last
 * logits out, samples, and detokenizes; the network runs in the programs. */
#include "models/llm/llm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu-features.h"
#include "engine/compile/compile.h"
#include "engine/formats/gguf.h"
#include "models/llm/llm-hf.h"
#include "engine/ir/graph.h"
#include "engine/runtime/session.h"

#define DEFAULT_CTX   4096
#define DEFAULT_BATCH 64

#define MAX_PARTS 3 /* GPU prefix, CPU layers, GPU output (partial offload) */
#define MAX_IO    8

enum { IO_TOKENS = 1, IO_POS, IO_LOGITS, IO_CROSS };

/* One program on one session; a split model runs its parts in order, each
 * cut's hidden state going through a host buffer (one transfer per cut). */
typedef struct {
    rlx_session *s; /* borrowed: the runner's GPU or CPU session */
    rlx_session_program *prog;
    int sym_seq, sym_past;
    int32_t n_inputs, n_outputs;
    uint8_t in_kind[MAX_IO], out_kind[MAX_IO];
    int8_t in_cross[MAX_IO], out_cross[MAX_IO]; /* index into program.cross */
} part;

typedef struct {
    part parts[MAX_PARTS];
    int n_parts;
    int32_t seq_max;
    rlx_lir **lirs; /* a split: the LIRs its sessions borrow */
    int32_t n_lirs;
    char *cross_name[MAX_IO];
    void *cross[MAX_IO]; /* host buffers for the values crossing cuts */
    int n_cross;
    bool alias; /* prefill == decode: owns nothing */
} program;

struct rlx_llm {
    rlx_gguf *gguf;    /* a GGUF file, or */
    rlx_llm_hf *hf;    /* a Hugging Face checkpoint */
    rlx_llm_weights w; /* the graph builder's view of either */
    rlx_llm_config cfg;
    rlx_tokenizer *tok;
    char *chat_template;
    rlx_chat_template *tmpl; /* parsed on first use */
    char *bos_text, *eos_text;
    rlx_session *s;       /* the chosen device's */
    rlx_session *cpu;     /* a split: the CPU part's session, else NULL */
    int32_t n_gpu_layers; /* a split: decoder layers on s's device */
    rlx_llm_placement_info place;
    program prefill, decode, all;
    int32_t n_ctx, n_batch;
    rlx_dtype kv_dtype;
    rlx_token *hist; /* the tokens in the cache, n_ctx long */
    int32_t n_past;
    volatile int cancel;
    int32_t *pos; /* scratch, n_ctx */
};

rlx_llm_params rlx_llm_default_params(void)
{
    return (rlx_llm_params){.device = NULL, .kv_dtype = RLX_DTYPE_F16, .gpu_layers = 0};
}

rlx_llm_generate_params rlx_llm_generate_default_params(void)
{
    return (rlx_llm_generate_params){.sampler = rlx_sampler_default_params(), .max_tokens = 256};
}

rlx_llm_generate_params rlx_llm_chat_default_params(void)
{
    rlx_llm_generate_params gp = rlx_llm_generate_default_params();
    gp.max_tokens = RLX_LLM_CHAT_MAX_TOKENS;
    return gp;
}

/* The CPU thread count for p: as asked, or by default the usable cores
 * less the caller's busy threads, keeping two. On two cores the app keeps
 * both: the pool takes over a worker's tasks when the UI thread holds its
 * core, and runs alone for a while when that keeps happening. */
static int cpu_threads(const rlx_llm_params *p)
{
    if (p->n_threads > 0 || p->busy_threads <= 0)
        return p->n_threads;
    int usable = rlx_cpu_usable_cores();
    int n = usable - p->busy_threads;
    int keep = usable < 2 ? usable : 2;
    return n > keep ? n : keep;
}

static rlx_status add_weights(rlx_llm *m, rlx_session *s, rlx_error **err)
{
    return m->hf ? rlx_llm_hf_add_to_session(m->hf, s, err) : rlx_session_add_gguf(s, m->gguf, err);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static rlx_status build_graph(rlx_llm *m, int32_t seq_max, bool all_logits, int32_t split,
                              rlx_graph **g, rlx_error **err)
{
    rlx_llm_graph_params gp = rlx_llm_graph_default_params();
    gp.n_ctx = m->n_ctx;
    gp.seq_max = seq_max;
    gp.kv_dtype = m->kv_dtype;
    gp.all_logits = all_logits;
    gp.split = split >= 0;
    gp.split_layer = split;
    return rlx_llm_build_graph_w(&m->cfg, &m->w, &gp, g, err);
}

static void program_free(program *pr)
{
    if (!pr->alias) {
        for (int i = 0; i < pr->n_cross; i++) {
            free(pr->cross_name[i]);
            free(pr->cross[i]);
        }
    }
    memset(pr, 0, sizeof *pr);
}

/* Find the bindings of part `pt` by name: tokens, pos, logits, and values
 * crossing a cut ("seg<i>:<node>"), whose host buffers are made here for
 * their largest size. */
static rlx_status bind_part(program *pr, part *pt, rlx_error **err)
{
    const rlx_lir *lir = rlx_session_program_lir(pt->prog);
    pt->n_inputs = lir->n_inputs;
    pt->n_outputs = lir->n_outputs;
    pt->sym_seq = rlx_session_program_symbol(pt->prog, "SEQ");
    pt->sym_past = rlx_session_program_symbol(pt->prog, "PAST");
    if (lir->n_inputs > MAX_IO || lir->n_outputs > MAX_IO || pt->sym_seq < 0)
        return rlx_error_set(err, RLX_ERR_INTERNAL,
                             "llm: a compiled program has %d inputs and %d outputs", lir->n_inputs,
                             lir->n_outputs);
    rlx_sym_values most = {{0}};
    for (int i = 0; i < lir->n_symbols; i++)
        most.v[i] = lir->symbols[i].max;
    for (int32_t i = 0; i < lir->n_inputs; i++) {
        const char *nm = lir->inputs[i].name ? lir->inputs[i].name : "";
        pt->in_cross[i] = -1;
        if (!strcmp(nm, "tokens"))
            pt->in_kind[i] = IO_TOKENS;
        else if (!strcmp(nm, "pos"))
            pt->in_kind[i] = IO_POS;
        else {
            for (int c = 0; c < pr->n_cross; c++)
                if (!strcmp(pr->cross_name[c], nm))
                    pt->in_cross[i] = (int8_t)c;
            if (pt->in_cross[i] < 0)
                return rlx_error_set(err, RLX_ERR_INTERNAL,
                                     "llm: program input '%s' comes from no earlier part", nm);
            pt->in_kind[i] = IO_CROSS;
        }
    }
    for (int32_t i = 0; i < lir->n_outputs; i++) {
        const char *nm = lir->outputs[i].name ? lir->outputs[i].name : "";
        pt->out_cross[i] = -1;
        if (!strcmp(nm, "logits")) {
            pt->out_kind[i] = IO_LOGITS;
            continue;
        }
        if (pr->n_cross == MAX_IO)
            return rlx_error_set(err, RLX_ERR_INTERNAL, "llm: too many values cross the cuts");
        uint64_t bytes = rlx_session_program_output_bytes(pt->prog, (int)i, &most);
        int c = pr->n_cross;
        pr->cross_name[c] = strdup(nm);
        pr->cross[c] = malloc(bytes ? bytes : 1);
        if (!pr->cross_name[c] || !pr->cross[c]) {
            free(pr->cross_name[c]);
            free(pr->cross[c]);
            return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        }
        pr->n_cross++;
        pt->out_kind[i] = IO_CROSS;
        pt->out_cross[i] = (int8_t)c;
    }
    return RLX_OK;
}

static rlx_status check_program(program *pr, rlx_error **err)
{
    bool tokens = false, logits = false;
    for (int k = 0; k < pr->n_parts; k++) {
        const part *pt = &pr->parts[k];
        for (int32_t i = 0; i < pt->n_inputs; i++)
            tokens |= pt->in_kind[i] == IO_TOKENS;
        for (int32_t i = 0; i < pt->n_outputs; i++)
            logits |= pt->out_kind[i] == IO_LOGITS;
    }
    if (!tokens || !logits)
        return rlx_error_set(err, RLX_ERR_INTERNAL,
                             "llm: the compiled program lost its tokens input or logits");
    return RLX_OK;
}

/* The compile options of a split: segments 0 and 2 on the chosen device,
 * segment 1 on the CPU. */
typedef struct {
    const rlx_backend_i *be[3];
    rlx_device *dev[3];
} split_targets;

static rlx_compile_opts split_opts(rlx_llm *m, split_targets *t)
{
    rlx_compile_opts o = rlx_compile_default_opts();
    o.backend = rlx_session_backend(m->s);
    o.device = rlx_session_device(m->s);
    t->be[0] = t->be[2] = o.backend;
    t->dev[0] = t->dev[2] = o.device;
    t->be[1] = m->cpu ? rlx_session_backend(m->cpu) : o.backend;
    t->dev[1] = m->cpu ? rlx_session_device(m->cpu) : o.device;
    o.n_segment_targets = 3;
    o.segment_backends = t->be;
    o.segment_devices = t->dev;
    return o;
}

static rlx_status compile_program(rlx_llm *m, int32_t seq_max, bool all_logits, program *out,
                                  rlx_error **err)
{
    memset(out, 0, sizeof *out);
    out->seq_max = seq_max;
    bool split = m->cpu != NULL;
    rlx_graph *g = NULL;
    rlx_status st = build_graph(m, seq_max, all_logits, split ? m->n_gpu_layers : -1, &g, err);
    if (st != RLX_OK)
        return st;
    if (!split) {
        out->n_parts = 1;
        out->parts[0].s = m->s;
        st = rlx_session_compile(m->s, g, &out->parts[0].prog, err);
        rlx_graph_free(g);
        if (st == RLX_OK)
            st = bind_part(out, &out->parts[0], err);
        return st == RLX_OK ? check_program(out, err) : st;
    }
    split_targets t;
    rlx_compile_opts o = split_opts(m, &t);
    st = rlx_compile_split(g, &o, &out->lirs, &out->n_lirs, err);
    rlx_graph_free(g);
    if (st != RLX_OK)
        return st;
    for (int32_t i = 0; i < out->n_lirs && st == RLX_OK; i++) {
        if (out->lirs[i]->n_instrs == 0)
            continue; /* an empty segment */
        if (out->n_parts == MAX_PARTS)
            return rlx_error_set(err, RLX_ERR_INTERNAL, "llm: too many program parts");
        part *pt = &out->parts[out->n_parts++];
        pt->s = i == 1 ? m->cpu : m->s;
        st = rlx_session_load_lir(pt->s, out->lirs[i], &pt->prog, err);
        if (st == RLX_OK)
            st = bind_part(out, pt, err);
    }
    return st == RLX_OK ? check_program(out, err) : st;
}

/* ---- placement (partial offload) ------------------------------------------ */

/* The decoder layer a weight or state belongs to ("blk.3.attn_q.weight",
 * "cache.k.3"): its first all-digit name component, or -1. */
static int32_t layer_of(const char *name)
{
    const char *p = name;
    while (*p) {
        const char *e = strchr(p, '.');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        bool digits = len > 0 && len < 9;
        for (size_t i = 0; i < len && digits; i++)
            digits = p[i] >= '0' && p[i] <= '9';
        if (digits)
            return (int32_t)strtol(p, NULL, 10);
        if (!e)
            break;
        p = e + 1;
    }
    return -1;
}

typedef struct {
    uint64_t fixed;  /* weights outside the layers (embedding, output) */
    uint64_t *layer; /* per layer: weights + KV cache */
    uint64_t arena;  /* the activations (largest program) */
} figures;

static bool seen_before(rlx_lir *const *lirs, int32_t n, int32_t li, int32_t bi, bool state)
{
    for (int32_t l = 0; l <= li; l++) {
        const rlx_lir_binding *b = state ? lirs[l]->states : lirs[l]->params;
        int32_t nb = state ? lirs[l]->n_states : lirs[l]->n_params;
        const rlx_lir_binding *me = state ? &lirs[li]->states[bi] : &lirs[li]->params[bi];
        for (int32_t j = 0; j < (l == li ? bi : nb); j++)
            if (b[j].name && me->name && !strcmp(b[j].name, me->name))
                return true;
    }
    (void)n;
    return false;
}

/* Sum what a set of programs needs on one device, as the session s counts
 * it: each weight and state once, the largest arena plus each program's
 * kept input/output buffers. */
static void add_figures(const rlx_session *s, rlx_lir *const *lirs, int32_t n,
                        const rlx_llm_config *c, figures *f)
{
    uint64_t io = 0;
    for (int32_t l = 0; l < n; l++) {
        const rlx_lir *lir = lirs[l];
        for (int k = 0; k < 2; k++) {
            bool state = k == 1;
            const rlx_lir_binding *b = state ? lir->states : lir->params;
            int32_t nb = state ? lir->n_states : lir->n_params;
            for (int32_t i = 0; i < nb; i++) {
                if (!b[i].name || seen_before(lirs, n, l, i, state))
                    continue;
                int32_t il = layer_of(b[i].name);
                if (il >= 0 && il < c->n_layer && (state || !strncmp(b[i].name, "blk.", 4)))
                    f->layer[il] += b[i].max_bytes;
                else
                    f->fixed += b[i].max_bytes;
            }
        }
        if (lir->arena_bytes > f->arena)
            f->arena = lir->arena_bytes;
        io += rlx_session_io_bytes(s, lir);
    }
    f->arena += io;
}

/* The device's figures with every layer on it, from the decode and
 * prefill programs compiled for it (not loaded). */
static rlx_status measure(rlx_llm *m, figures *f, rlx_error **err)
{
    rlx_lir *lirs[2] = {NULL, NULL};
    rlx_status st = RLX_OK;
    int32_t seqs[2] = {1, m->n_batch};
    int n = m->n_batch > 1 ? 2 : 1;
    for (int i = 0; i < n && st == RLX_OK; i++) {
        rlx_graph *g = NULL;
        rlx_compile_opts o = rlx_compile_default_opts();
        o.backend = rlx_session_backend(m->s);
        o.device = rlx_session_device(m->s);
        st = build_graph(m, seqs[i], false, -1, &g, err);
        if (st == RLX_OK)
            st = rlx_compile(g, &o, &lirs[i], err);
        rlx_graph_free(g);
    }
    if (st == RLX_OK)
        add_figures(m->s, lirs, n, &m->cfg, f);
    for (int i = 0; i < 2; i++)
        rlx_lir_free(lirs[i]);
    return st;
}

/* What a split at k needs on the device, exactly: segments 0 and 2 of the
 * decode and prefill programs. */
static rlx_status split_need(rlx_llm *m, int32_t k, uint64_t *need, rlx_error **err)
{
    figures f = {0};
    f.layer = calloc((size_t)m->cfg.n_layer, sizeof *f.layer);
    if (!f.layer)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    rlx_lir *dev_lirs[4];
    int32_t n_dev = 0;
    rlx_lir **all[2] = {NULL, NULL};
    int32_t n_all[2] = {0, 0};
    int32_t seqs[2] = {1, m->n_batch};
    int n = m->n_batch > 1 ? 2 : 1;
    split_targets t;
    rlx_compile_opts o = split_opts(m, &t);
    rlx_status st = RLX_OK;
    for (int i = 0; i < n && st == RLX_OK; i++) {
        rlx_graph *g = NULL;
        st = build_graph(m, seqs[i], false, k, &g, err);
        if (st == RLX_OK)
            st = rlx_compile_split(g, &o, &all[i], &n_all[i], err);
        rlx_graph_free(g);
        for (int32_t s = 0; st == RLX_OK && s < n_all[i]; s++)
            if (s != 1)
                dev_lirs[n_dev++] = all[i][s];
    }
    if (st == RLX_OK) {
        add_figures(m->s, dev_lirs, n_dev, &m->cfg, &f);
        *need = f.fixed + f.arena;
        for (int32_t i = 0; i < m->cfg.n_layer; i++)
            *need += f.layer[i];
    }
    for (int i = 0; i < 2; i++)
        rlx_lir_free_array(all[i], n_all[i]);
    free(f.layer);
    return st;
}

static double mib(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0);
}

/* How many decoder layers go on the chosen (non-CPU) device: all when the
 * model fits its budget, else the longest prefix whose weights, KV cache
 * and activations fit with the embedding and output (or p->gpu_layers). */
static rlx_status plan(rlx_llm *m, const rlx_llm_params *p, rlx_error **err)
{
    const int32_t L = m->cfg.n_layer;
    uint64_t budget = rlx_session_memory(m->s).budget_bytes;
    figures f = {0};
    f.layer = calloc((size_t)L, sizeof *f.layer);
    if (!f.layer)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    rlx_status st = measure(m, &f, err);
    if (st != RLX_OK) {
        free(f.layer);
        return st;
    }
    uint64_t need = f.fixed + f.arena;
    int32_t k = 0;
    int32_t cap = p->gpu_layers > 0   ? (p->gpu_layers < L ? p->gpu_layers : L)
                  : p->gpu_layers < 0 ? 0
                                      : L;
    while (k < cap && need + f.layer[k] <= budget)
        need += f.layer[k++];
    m->place.fixed_bytes = f.fixed;
    m->place.activation_bytes = f.arena;
    uint64_t fixed = f.fixed, arena = f.arena;
    free(f.layer);
    if (p->gpu_layers > 0 && k < cap)
        return rlx_error_set(err, RLX_ERR_BUDGET,
                             "%s: %d layers do not fit the budget of %.1f MiB (%d do)",
                             m->place.device, cap, mib(budget), k);
    if (fixed + arena > budget)
        return rlx_error_set(err, RLX_ERR_BUDGET,
                             "%s: even without any decoder layer, the embedding and output "
                             "(%.1f MiB) and the activations (%.1f MiB) do not fit the budget "
                             "of %.1f MiB; a larger --memory-budget or --device cpu may help",
                             m->place.device, mib(fixed), mib(arena), mib(budget));
    if (k == L) {
        m->n_gpu_layers = L;
        return RLX_OK;
    }
    /* a split: the CPU runs layers [k, L); the device figure is re-measured
     * on the split programs (their arena differs a little) */
    rlx_session_params sp = rlx_session_default_params();
    sp.device = "cpu";
    sp.n_threads = cpu_threads(p);
    if ((st = rlx_session_create(&sp, &m->cpu, err)) != RLX_OK)
        return st;
    rlx_session_set_cancel_flag(m->cpu, &m->cancel);
    if ((st = add_weights(m, m->cpu, err)) != RLX_OK)
        return st;
    for (;;) {
        uint64_t exact = 0;
        if ((st = split_need(m, k, &exact, err)) != RLX_OK)
            return st;
        if (exact <= budget)
            break;
        if (p->gpu_layers > 0)
            return rlx_error_set(err, RLX_ERR_BUDGET,
                                 "%s: %d layers need %.1f MiB, more than the budget of %.1f MiB",
                                 m->place.device, k, mib(exact), mib(budget));
        if (k == 0)
            return rlx_error_set(err, RLX_ERR_BUDGET,
                                 "%s: even without any decoder layer, the embedding, output and "
                                 "activations need %.1f MiB, more than the budget of %.1f MiB",
                                 m->place.device, mib(exact), mib(budget));
        k--;
    }
    m->n_gpu_layers = k;
    return RLX_OK;
}

/* Names the file once: the readers' messages often start with it already
 * (its path or base name) or quote it. */
static void name_file(rlx_error **err, const char *path)
{
    const char *msg = err && *err ? rlx_error_message(*err) : NULL;
    if (!msg)
        return;
    const char *base = strrchr(path, '/');
    base = base && base[1] ? base + 1 : path;
    size_t lb = strlen(base);
    if (strstr(msg, path) || (!strncmp(msg, base, lb) && msg[lb] == ':'))
        return;
    rlx_error_prefix(err, "%s: ", path);
}

rlx_status rlx_llm_load(const char *path, const rlx_llm_params *p, rlx_llm **out, rlx_error **err)
{
    *out = NULL;
    rlx_llm_params def = rlx_llm_default_params();
    if (!p)
        p = &def;
    if (p->kv_dtype != RLX_DTYPE_F16 && p->kv_dtype != RLX_DTYPE_F32 &&
        p->kv_dtype != RLX_DTYPE_Q8_0)
        return rlx_error_set(err, RLX_ERR_UNSUPPORTED,
                             "the KV cache can be f16, f32 or q8_0, not %s",
                             rlx_dtype_name(p->kv_dtype));
    rlx_llm *m = calloc(1, sizeof *m);
    if (!m)
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    rlx_status st;
    rlx_error *terr = NULL;
    if (rlx_llm_hf_is_checkpoint(path)) {
        /* a Hugging Face folder: config.json, safetensors, tokenizer.json */
        if ((st = rlx_llm_hf_open(path, &m->hf, err)) != RLX_OK)
            goto fail;
        m->cfg = *rlx_llm_hf_config(m->hf);
        m->w = rlx_llm_hf_weights(m->hf);
        st = rlx_tokenizer_from_hf_json(rlx_llm_hf_dir(m->hf), &m->tok, &terr);
        if (st == RLX_ERR_IO || st == RLX_ERR_NOT_FOUND) /* no tokenizer.json */
            st = RLX_ERR_NOT_FOUND;
        m->chat_template = rlx_llm_hf_chat_template(m->hf);
    } else {
        if ((st = rlx_gguf_open(path, &m->gguf, err)) != RLX_OK)
            goto fail;
        if ((st = rlx_llm_config_from_gguf(m->gguf, &m->cfg, err)) != RLX_OK)
            goto fail;
        m->w = rlx_llm_weights_gguf(m->gguf);
        st = rlx_tokenizer_from_gguf(m->gguf, &m->tok, &terr);
    }
    if (st != RLX_OK && st != RLX_ERR_NOT_FOUND) {
        if (err && !*err)
            *err = terr;
        else
            rlx_error_free(terr);
        goto fail;
    }
    rlx_error_free(terr);
    if (m->tok && rlx_tokenizer_n_vocab(m->tok) > m->cfg.n_vocab) {
        st = rlx_error_set(err, RLX_ERR_FORMAT,
                           "%s: the tokenizer has %d tokens but the embedding only %d rows", path,
                           rlx_tokenizer_n_vocab(m->tok), m->cfg.n_vocab);
        goto fail;
    }
    const rlx_gguf_value *tv = m->gguf ? rlx_gguf_find(m->gguf, "tokenizer.chat_template") : NULL;
    if (tv && tv->type == RLX_GGUF_TYPE_STRING) {
        m->chat_template = malloc(tv->v.str.len + 1);
        if (!m->chat_template) {
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
            goto fail;
        }
        memcpy(m->chat_template, tv->v.str.ptr, tv->v.str.len);
        m->chat_template[tv->v.str.len] = 0;
    }

    m->n_ctx = p->n_ctx > 0 ? p->n_ctx
                            : (m->cfg.n_ctx_train < DEFAULT_CTX ? m->cfg.n_ctx_train : DEFAULT_CTX);
    if (m->n_ctx > m->cfg.n_ctx_train) {
        st = rlx_error_set(err, RLX_ERR_INVALID_ARG,
                           "a context of %d tokens is more than this model's %d", m->n_ctx,
                           m->cfg.n_ctx_train);
        goto fail;
    }
    if (m->n_ctx < 2) {
        st = rlx_error_set(err, RLX_ERR_INVALID_ARG, "the context must hold at least 2 tokens");
        goto fail;
    }
    m->n_batch = p->n_batch > 0 ? p->n_batch : DEFAULT_BATCH;
    if (m->n_batch >= m->n_ctx) /* PAST's bound, n_ctx - n_batch, must stay >= 1 */
        m->n_batch = m->n_ctx - 1;
    m->kv_dtype = p->kv_dtype;
    m->hist = malloc(sizeof *m->hist * (size_t)m->n_ctx);
    m->pos = malloc(sizeof *m->pos * (size_t)m->n_ctx);
    if (!m->hist || !m->pos) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }

    rlx_session_params sp = rlx_session_default_params();
    sp.device = p->device;
    sp.n_threads = cpu_threads(p);
    sp.memory_budget = p->memory_budget;
    sp.force_f32 = p->force_f32;
    sp.max_binding_bytes = p->max_binding_bytes;
    sp.cuda_unfused = p->cuda_unfused;
    sp.cuda_plain_matvec = p->cuda_plain_matvec;
    if ((st = rlx_session_create(&sp, &m->s, err)) != RLX_OK)
        goto fail;
    rlx_session_set_cancel_flag(m->s, &m->cancel);
    if (p->progress)
        rlx_session_set_progress(m->s, p->progress, p->progress_user);
    if ((st = add_weights(m, m->s, err)) != RLX_OK)
        goto fail;
    rlx_device_info di;
    if ((st = rlx_session_device_info(m->s, &di, err)) != RLX_OK)
        goto fail;
    snprintf(m->place.device, sizeof m->place.device, "%s", di.id);
    m->place.n_layers = m->cfg.n_layer;
    m->place.budget_bytes = rlx_session_memory(m->s).budget_bytes;
    m->place.on_gpu = strcmp(rlx_session_backend(m->s)->name, "cpu") != 0;
    if (m->place.on_gpu && (st = plan(m, p, err)) != RLX_OK)
        goto fail;
    if ((st = compile_program(m, 1, false, &m->decode, err)) != RLX_OK)
        goto fail;
    if (m->n_batch > 1 && (st = compile_program(m, m->n_batch, false, &m->prefill, err)) != RLX_OK)
        goto fail;
    if (m->n_batch == 1) {
        m->prefill = m->decode;
        m->prefill.alias = true;
    }
    if (p->progress)
        rlx_session_set_progress(m->s, NULL, NULL);
    m->place.n_gpu_layers = m->place.on_gpu ? m->n_gpu_layers : 0;
    rlx_session_memory_info mi = rlx_session_memory(m->s);
    m->place.device_bytes = mi.weights_bytes + mi.state_bytes + mi.arena_bytes;
    if (m->cpu) {
        rlx_session_memory_info ci = rlx_session_memory(m->cpu);
        m->place.cpu_bytes = ci.weights_bytes + ci.state_bytes + ci.arena_bytes;
    }
    *out = m;
    return RLX_OK;
fail:
    /* a GPU backend without Q8_0 cache kernels for this model (Vulkan has
     * the append and the attention read) refuses them in supports_op, and
     * legalize says which op */
    if (m->kv_dtype == RLX_DTYPE_Q8_0 && m->place.on_gpu && st == RLX_ERR_UNSUPPORTED)
        rlx_error_prefix(
            err, "the Q8_0 KV cache does not run on %s (use --kv-type f16): ", m->place.device);
    name_file(err, path);
    rlx_llm_free(m);
    return st;
}

void rlx_llm_free(rlx_llm *m)
{
    if (!m)
        return;
    rlx_session_free(m->s);
    rlx_session_free(m->cpu);
    /* the sessions borrowed the split LIRs; free those after them */
    program *progs[3] = {&m->prefill, &m->decode, &m->all};
    for (int i = 0; i < 3; i++) {
        if (!progs[i]->alias)
            rlx_lir_free_array(progs[i]->lirs, progs[i]->n_lirs);
        program_free(progs[i]);
    }
    rlx_tokenizer_free(m->tok);
    rlx_gguf_close(m->gguf);
    rlx_llm_hf_close(m->hf);
    free(m->chat_template);
    rlx_chat_template_free(m->tmpl);
    free(m->bos_text);
    free(m->eos_text);
    free(m->hist);
    free(m->pos);
    free(m);
}

const rlx_llm_config *rlx_llm_get_config(const rlx_llm *m)
{
    return &m->cfg;
}
const rlx_tokenizer *rlx_llm_get_tokenizer(const rlx_llm *m)
{
    return m->tok;
}
const char *rlx_llm_chat_template(const rlx_llm *m)
{
    return m->chat_template;
}
int32_t rlx_llm_n_ctx(const rlx_llm *m)
{
    return m->n_ctx;
}
int32_t rlx_llm_n_past(const rlx_llm *m)
{
    return m->n_past;
}
rlx_session *rlx_llm_session(rlx_llm *m)
{
    return m->s;
}
rlx_session *rlx_llm_cpu_session(rlx_llm *m)
{
    return m->cpu;
}
/* the most threads any CPU part of pr used in its last run */
static int program_threads(const program *pr)
{
    int best = 0;
    for (int i = 0; i < pr->n_parts; i++) {
        rlx_program_stats st;
        if (pr->parts[i].prog &&
            rlx_session_program_stats(pr->parts[i].prog, &st, NULL) == RLX_OK && st.threads > best)
            best = st.threads;
    }
    return best;
}

void rlx_llm_threads(const rlx_llm *m, int *decode, int *batch)
{
    if (decode)
        *decode = m ? program_threads(&m->decode) : 0;
    if (batch)
        *batch = m ? program_threads(m->prefill.alias ? &m->decode : &m->prefill) : 0;
}

void rlx_llm_decode_stats(const rlx_llm *m, rlx_llm_decode_info *out)
{
    *out = (rlx_llm_decode_info){0};
    for (int i = 0; m && i < m->decode.n_parts; i++) {
        rlx_program_stats st;
        if (!m->decode.parts[i].prog ||
            rlx_session_program_stats(m->decode.parts[i].prog, &st, NULL) != RLX_OK)
            continue;
        if (st.runs > out->runs)
            out->runs = st.runs;
        out->prep_ns += st.prep_ns;
        out->submit_ns += st.submit_ns;
        out->device_ns += st.device_ns;
        out->launches += st.launches;
    }
}

void rlx_llm_placement(const rlx_llm *m, int32_t *n_gpu, int32_t *n_total)
{
    if (n_gpu)
        *n_gpu = m->place.n_gpu_layers;
    if (n_total)
        *n_total = m->place.n_layers;
}
rlx_llm_placement_info rlx_llm_get_placement(const rlx_llm *m)
{
    return m->place;
}

void rlx_llm_cancel(rlx_llm *m)
{
    __atomic_store_n(&m->cancel, 1, __ATOMIC_RELAXED);
}

static bool cancelled(rlx_llm *m)
{
    return __atomic_load_n(&m->cancel, __ATOMIC_RELAXED) != 0;
}

static rlx_status no_tokenizer(rlx_error **err)
{
    return rlx_error_set(err, RLX_ERR_NOT_FOUND,
                         "this model has no tokenizer (a GGUF without tokenizer.ggml.* metadata, "
                         "or a folder without tokenizer.json)");
}

rlx_status rlx_llm_tokenize(const rlx_llm *m, const char *text, bool add_bos, bool parse_special,
                            rlx_token **out, size_t *n_out, rlx_error **err)
{
    *out = NULL;
    *n_out = 0;
    if (!m->tok)
        return no_tokenizer(err);
    rlx_tokenizer_encode_params ep = rlx_tokenizer_encode_default_params();
    ep.add_bos = add_bos ? -1 : 0;
    ep.add_eos = 0;
    ep.parse_special = parse_special;
    return rlx_tokenizer_encode(m->tok, text, strlen(text), ep, out, n_out, err);
}

static char *token_string(const rlx_tokenizer *t, rlx_token id)
{
    if (id == RLX_TOKEN_NULL)
        return NULL;
    size_t len = 0;
    const char *s = rlx_tokenizer_token_text(t, id, &len);
    if (!s)
        return NULL;
    char *out = malloc(len + 1);
    if (out) {
        memcpy(out, s, len);
        out[len] = 0;
    }
    return out;
}

/* Without a template: a plain transcript the model can continue. */
static char *render_plain(const rlx_chat_message *msgs, size_t n, bool gen)
{
    size_t cap = 32;
    for (size_t i = 0; i < n; i++)
        cap += strlen(msgs[i].role ? msgs[i].role : "") +
               strlen(msgs[i].content ? msgs[i].content : "") + 8;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t at = 0;
    out[0] = 0;
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s: %s\n", msgs[i].role ? msgs[i].role : "",
                               msgs[i].content ? msgs[i].content : "");
    if (gen)
        snprintf(out + at, cap - at, "assistant:");
    return out;
}

rlx_status rlx_llm_chat_prompt(rlx_llm *m, const rlx_chat_message *msgs, size_t n,
                               bool add_generation_prompt, rlx_token **out, size_t *n_out,
                               rlx_error **err)
{
    *out = NULL;
    *n_out = 0;
    if (!m->tok)
        return no_tokenizer(err);
    rlx_status st;
    if (m->chat_template && !m->tmpl) {
        if ((st = rlx_chat_template_create(m->chat_template, &m->tmpl, err)) != RLX_OK) {
            rlx_error_prefix(err, "the model's chat template: ");
            return st;
        }
        m->bos_text = token_string(m->tok, rlx_tokenizer_bos(m->tok));
        m->eos_text = token_string(m->tok, rlx_tokenizer_eos(m->tok));
    }
    char *text = NULL;
    if (m->tmpl) {
        rlx_chat_render_opts ro = rlx_chat_render_default_opts();
        ro.add_generation_prompt = add_generation_prompt;
        ro.bos_token = m->bos_text;
        ro.eos_token = m->eos_text;
        if ((st = rlx_chat_template_render(m->tmpl, msgs, n, &ro, &text, err)) != RLX_OK)
            return st;
    } else if (!(text = render_plain(msgs, n, add_generation_prompt)))
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    st = rlx_llm_tokenize(m, text, true, true, out, n_out, err);
    free(text);
    rlx_token bos = rlx_tokenizer_bos(m->tok);
    if (st == RLX_OK && *n_out >= 2 && bos != RLX_TOKEN_NULL && (*out)[0] == bos &&
        (*out)[1] == bos) { /* the template wrote BOS itself */
        memmove(*out, *out + 1, (*n_out - 1) * sizeof **out);
        (*n_out)--;
    }
    return st;
}

void rlx_llm_reset(rlx_llm *m)
{
    /* stale cache entries past n_past are never read: every run's attention
     * covers [0, PAST + SEQ) and the scatter rewrites [PAST, PAST + SEQ) */
    m->n_past = 0;
}

/* One run of `pr` on n tokens at position n_past, part after part; logits
 * of the last one (or of all with the `all` program). */
static rlx_status run(rlx_llm *m, program *pr, const rlx_token *tokens, int32_t n, float *logits,
                      rlx_error **err)
{
    for (int32_t i = 0; i < n; i++)
        m->pos[i] = m->n_past + i;
    for (int k = 0; k < pr->n_parts; k++) {
        part *pt = &pr->parts[k];
        rlx_sym_values sv = {{0}};
        sv.v[pt->sym_seq] = n;
        if (pt->sym_past >= 0)
            sv.v[pt->sym_past] = m->n_past;
        const void *ins[MAX_IO] = {0};
        void *outs[MAX_IO] = {0};
        for (int32_t i = 0; i < pt->n_inputs; i++)
            ins[i] = pt->in_kind[i] == IO_TOKENS ? (const void *)tokens
                     : pt->in_kind[i] == IO_POS  ? (const void *)m->pos
                                                 : pr->cross[pt->in_cross[i]];
        for (int32_t i = 0; i < pt->n_outputs; i++)
            outs[i] = pt->out_kind[i] == IO_LOGITS ? (void *)logits : pr->cross[pt->out_cross[i]];
        rlx_status st = rlx_session_run(pt->s, pt->prog, &sv, ins, outs, err);
        if (st != RLX_OK)
            return st;
    }
    memcpy(m->hist + m->n_past, tokens, sizeof *tokens * (size_t)n);
    m->n_past += n;
    return RLX_OK;
}

static rlx_status check_room(rlx_llm *m, size_t n, rlx_error **err)
{
    if (n > (size_t)(m->n_ctx - m->n_past))
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "%zu tokens do not fit the context: %d of %d positions are used "
                             "(a longer --ctx may help, up to the model's %d)",
                             n, m->n_past, m->n_ctx, m->cfg.n_ctx_train);
    return RLX_OK;
}

static rlx_status eval_tokens(rlx_llm *m, const rlx_token *tokens, size_t n, float *logits,
                              rlx_error **err)
{
    if (n == 0)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "llm eval: no tokens");
    rlx_status st = check_room(m, n, err);
    if (st != RLX_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->cfg.n_vocab)
            return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                                 "token %d is outside the vocabulary of %d", tokens[i],
                                 m->cfg.n_vocab);
    float *scratch = NULL;
    size_t done = 0;
    while (done < n) {
        size_t k = n - done;
        program *pr =
            k == 1 || m->n_past > m->n_ctx - m->prefill.seq_max ? &m->decode : &m->prefill;
        if (k > (size_t)pr->seq_max)
            k = (size_t)pr->seq_max;
        float *dst = logits;
        if (done + k < n || !dst) {
            /* an intermediate chunk: its logits are not wanted */
            if (!scratch && !(scratch = malloc(sizeof(float) * (size_t)m->cfg.n_vocab)))
                return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
            dst = scratch;
        }
        if (cancelled(m)) {
            free(scratch);
            return rlx_error_set(err, RLX_ERR_CANCELLED, "cancelled");
        }
        st = run(m, pr, tokens + done, (int32_t)k, dst, err);
        if (st != RLX_OK) {
            free(scratch);
            return st;
        }
        done += k;
    }
    free(scratch);
    return RLX_OK;
}

rlx_status rlx_llm_eval(rlx_llm *m, const rlx_token *tokens, size_t n, float *logits,
                        rlx_error **err)
{
    __atomic_store_n(&m->cancel, 0, __ATOMIC_RELAXED);
    return eval_tokens(m, tokens, n, logits, err);
}

rlx_status rlx_llm_eval_all(rlx_llm *m, const rlx_token *tokens, size_t n, float *logits,
                            rlx_error **err)
{
    if (n == 0 || n > (size_t)m->n_batch)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "llm eval_all: between 1 and %d tokens at a time", m->n_batch);
    __atomic_store_n(&m->cancel, 0, __ATOMIC_RELAXED);
    rlx_status st = check_room(m, n, err);
    if (st != RLX_OK)
        return st;
    if (m->all.n_parts == 0 &&
        (st = compile_program(m, m->n_batch, true, &m->all, err)) != RLX_OK) {
        m->all.n_parts = 0; /* its LIRs stay owned until rlx_llm_free */
        return st;
    }
    if (m->n_past > m->n_ctx - m->all.seq_max)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "llm eval_all: position %d is past the program's bound %d", m->n_past,
                             m->n_ctx - m->all.seq_max);
    return run(m, &m->all, tokens, (int32_t)n, logits, err);
}

static rlx_status prefill(rlx_llm *m, const rlx_token *tokens, size_t n, float *logits,
                          int32_t *reused, rlx_error **err)
{
    if (n == 0)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG, "the prompt is empty");
    if (n > (size_t)m->n_ctx)
        return rlx_error_set(err, RLX_ERR_INVALID_ARG,
                             "the prompt is %zu tokens, longer than the context of %d (a longer "
                             "--ctx may help, up to the model's %d)",
                             n, m->n_ctx, m->cfg.n_ctx_train);
    size_t common = 0;
    while (common < n && common < (size_t)m->n_past && m->hist[common] == tokens[common])
        common++;
    if (common == n) /* the logits of the last token are needed again */
        common--;
    m->n_past = (int32_t)common;
    if (reused)
        *reused = (int32_t)common;
    return eval_tokens(m, tokens + common, n - common, logits, err);
}

rlx_status rlx_llm_prefill(rlx_llm *m, const rlx_token *tokens, size_t n, float *logits,
                           rlx_error **err)
{
    __atomic_store_n(&m->cancel, 0, __ATOMIC_RELAXED);
    return prefill(m, tokens, n, logits, NULL, err);
}

/* ---- generation --------------------------------------------------------- */

static const char *const default_dry_breakers[] = {"\n", ":", "\"", "*"};

rlx_status rlx_llm_dry_breaker_ids(const rlx_llm *m, const char *const *strs, size_t n,
                                   int32_t **out, size_t *n_out, rlx_error **err)
{
    *out = NULL;
    *n_out = 0;
    if (!m->tok)
        return no_tokenizer(err);
    if (!strs) {
        strs = default_dry_breakers;
        n = sizeof default_dry_breakers / sizeof default_dry_breakers[0];
    }
    int32_t nv = rlx_tokenizer_n_vocab(m->tok);
    int32_t *ids = malloc(sizeof *ids * (size_t)(nv > 0 ? nv : 1));
    size_t cap = 256;
    char *buf = malloc(cap);
    if (!ids || !buf) {
        free(ids);
        free(buf);
        return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
    }
    size_t k = 0;
    for (int32_t id = 0; id < nv; id++) {
        if (rlx_tokenizer_is_control(m->tok, id))
            continue;
        size_t len = rlx_tokenizer_token_to_piece(m->tok, id, false, buf, cap);
        if (len > cap) {
            char *nb = realloc(buf, len);
            if (!nb) {
                free(ids);
                free(buf);
                return rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
            }
            buf = nb;
            cap = len;
            len = rlx_tokenizer_token_to_piece(m->tok, id, false, buf, cap);
        }
        for (size_t i = 0; i < n; i++) {
            size_t L = strs[i] ? strlen(strs[i]) : 0;
            bool hit = false;
            for (size_t at = 0; L && at + L <= len && !hit; at++)
                hit = !memcmp(buf + at, strs[i], L);
            if (hit) {
                ids[k++] = id;
                break;
            }
        }
    }
    free(buf);
    *out = ids;
    *n_out = k;
    return RLX_OK;
}

/* Tokens kept at the start by a context shift. */
static size_t shift_keep(const rlx_llm *m, const rlx_llm_generate_params *gp, const rlx_token *t,
                         size_t n)
{
    size_t keep = 0;
    if (gp->n_keep > 0)
        keep = (size_t)gp->n_keep;
    else if (n > 0 && m->tok && rlx_tokenizer_bos(m->tok) != RLX_TOKEN_NULL &&
             t[0] == rlx_tokenizer_bos(m->tok))
        keep = 1;
    if (keep > n)
        keep = n;
    /* at least a quarter of the context stays free to drop from */
    if (keep > (size_t)(m->n_ctx - m->n_ctx / 4))
        keep = (size_t)(m->n_ctx - m->n_ctx / 4);
    return keep;
}

/* dst = the first `keep` of t[0..n), then the newest of the rest: the older
 * half of the rest is dropped until at most `limit` tokens are left.
 * Returns the new length; *dropped counts what went. */
static size_t shift_tokens(const rlx_token *t, size_t n, size_t keep, size_t limit, rlx_token *dst,
                           int32_t *dropped)
{
    size_t drop = 0;
    while (n - drop > limit) {
        size_t rest = n - drop - keep, d = rest / 2 > 0 ? rest / 2 : 1;
        drop += d;
    }
    memmove(dst, t, keep * sizeof *t);
    memmove(dst + keep, t + keep + drop, (n - keep - drop) * sizeof *t);
    *dropped += (int32_t)drop;
    return n - drop;
}

typedef struct {
    rlx_llm_token_fn cb;
    void *user;
    const rlx_llm *m;
    const char *const *stop;
    size_t n_stop;
    char *pend; /* text held back because it may begin a stop string */
    size_t n_pend, cap_pend;
    size_t n_gen;   /* tokens generated so far */
    double t_first; /* when the first one was sampled (ms) */
    bool stopped_by_string, stopped_by_cb;
} emitter;

static bool call_cb(emitter *e, rlx_token tok, const char *s, size_t n)
{
    if (!e->cb)
        return true;
    double dt = now_ms() - e->t_first;
    rlx_llm_piece p = {.token = tok,
                       .text = s,
                       .len = n,
                       .n_generated = (int32_t)e->n_gen,
                       .n_past = e->m->n_past,
                       .n_ctx = e->m->n_ctx,
                       .tps = e->n_gen > 1 && dt > 0 ? (double)(e->n_gen - 1) * 1e3 / dt : 0};
    if (!e->cb(e->user, &p)) {
        e->stopped_by_cb = true;
        return false;
    }
    return true;
}

static bool emit(emitter *e, rlx_token tok, const char *s, size_t n)
{
    return n == 0 || call_cb(e, tok, s, n);
}

/* Add text; emit what can no longer be part of a stop string. Returns false
 * when generation must stop. */
static bool emitter_push(emitter *e, rlx_token tok, const char *s, size_t n)
{
    if (e->n_stop == 0)
        return emit(e, tok, s, n);
    if (e->n_pend + n + 1 > e->cap_pend) {
        size_t cap = (e->n_pend + n + 1) * 2;
        char *p = realloc(e->pend, cap);
        if (!p)
            return false;
        e->pend = p;
        e->cap_pend = cap;
    }
    memcpy(e->pend + e->n_pend, s, n);
    e->n_pend += n;
    /* a complete stop string: emit the text before it and stop */
    size_t first = e->n_pend;
    for (size_t i = 0; i < e->n_stop; i++) {
        size_t L = strlen(e->stop[i]);
        if (L == 0 || L > e->n_pend)
            continue;
        for (size_t at = 0; at + L <= e->n_pend; at++)
            if (!memcmp(e->pend + at, e->stop[i], L)) {
                if (at < first)
                    first = at;
                break;
            }
    }
    if (first < e->n_pend) {
        emit(e, tok, e->pend, first);
        e->n_pend = 0;
        e->stopped_by_string = true;
        return false;
    }
    /* hold the longest tail that begins some stop string */
    size_t hold = 0;
    for (size_t i = 0; i < e->n_stop; i++) {
        size_t L = strlen(e->stop[i]);
        for (size_t k = L > 1 ? L - 1 : 0; k > hold; k--)
            if (k <= e->n_pend && !memcmp(e->pend + e->n_pend - k, e->stop[i], k)) {
                hold = k;
                break;
            }
    }
    size_t out = e->n_pend - hold;
    bool ok = emit(e, tok, e->pend, out);
    memmove(e->pend, e->pend + out, hold);
    e->n_pend = hold;
    return ok;
}

rlx_status rlx_llm_generate(rlx_llm *m, const rlx_token *prompt, size_t n_prompt,
                            const rlx_llm_generate_params *gp, rlx_llm_token_fn cb, void *user,
                            rlx_llm_stats *stats, rlx_token **out_tokens, size_t *n_out_tokens,
                            rlx_error **err)
{
    rlx_llm_stats dummy;
    if (!stats)
        stats = &dummy;
    memset(stats, 0, sizeof *stats);
    if (out_tokens)
        *out_tokens = NULL;
    if (n_out_tokens)
        *n_out_tokens = 0;
    rlx_llm_generate_params defp = rlx_llm_generate_default_params();
    if (!gp)
        gp = &defp;
    __atomic_store_n(&m->cancel, 0, __ATOMIC_RELAXED);

    const int32_t V = m->cfg.n_vocab;
    float *logits = malloc(sizeof(float) * (size_t)V);
    size_t cap_gen = (size_t)m->n_ctx;
    rlx_token *gen = malloc(sizeof(rlx_token) * cap_gen);
    rlx_token *shifted = NULL; /* context_shift: the tokens kept */
    int32_t *breakers = NULL;
    rlx_sampler *smp = NULL;
    rlx_detokenizer *dt = NULL;
    emitter em = {.cb = cb, .user = user, .m = m, .stop = gp->stop, .n_stop = gp->n_stop};
    size_t n_gen = 0;
    rlx_status st = RLX_OK;
    if (!logits || !gen) {
        st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    rlx_sampler_params sp = gp->sampler;
    if (sp.dry_multiplier > 0 && sp.n_dry_sequence_breakers == 0 && m->tok) {
        size_t nb = 0;
        if ((st = rlx_llm_dry_breaker_ids(m, gp->dry_breakers,
                                          gp->dry_breakers ? gp->n_dry_breakers : 0, &breakers, &nb,
                                          err)) != RLX_OK)
            goto done;
        sp.dry_sequence_breakers = breakers;
        sp.n_dry_sequence_breakers = nb;
    }
    if ((st = rlx_sampler_create(sp, V, &smp, err)) != RLX_OK)
        goto done;
    if (gp->context_shift) {
        size_t cap = (size_t)m->n_ctx > n_prompt ? (size_t)m->n_ctx : n_prompt;
        if (!(shifted = malloc(sizeof *shifted * (cap + 1)))) {
            st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
            goto done;
        }
    }
    if (m->tok) {
        rlx_tokenizer_decode_params dp = rlx_tokenizer_decode_default_params(m->tok);
        /* a continuation keeps its leading space; only a decode of a
         * whole text drops SentencePiece's prefix space */
        dp.strip_leading_space = false;
        if ((st = rlx_detokenizer_create(m->tok, dp, &dt, err)) != RLX_OK)
            goto done;
    }
    /* penalties see the prompt too, as llama.cpp does */
    for (size_t i = 0; i < n_prompt; i++)
        rlx_sampler_accept(smp, prompt[i]);

    stats->n_prompt = (int32_t)n_prompt;
    if (gp->context_shift && n_prompt > (size_t)m->n_ctx) {
        size_t keep = shift_keep(m, gp, prompt, n_prompt);
        n_prompt =
            shift_tokens(prompt, n_prompt, keep, (size_t)m->n_ctx, shifted, &stats->n_dropped);
        prompt = shifted;
        stats->n_shifts++;
    }
    double t0 = now_ms();
    if ((st = prefill(m, prompt, n_prompt, logits, &stats->n_reused, err)) != RLX_OK) {
        if (st == RLX_ERR_CANCELLED) {
            stats->stop = RLX_LLM_STOP_CANCELLED;
            rlx_error_clear(err);
            st = RLX_OK;
        }
        goto done;
    }
    double t1 = now_ms();
    stats->prefill_ms = t1 - t0;
    int32_t evaluated = (int32_t)n_prompt - stats->n_reused;
    stats->prefill_tps = stats->prefill_ms > 0 ? evaluated * 1e3 / stats->prefill_ms : 0;

    stats->stop = RLX_LLM_STOP_LENGTH;
    for (;;) {
        if (cancelled(m)) {
            stats->stop = RLX_LLM_STOP_CANCELLED;
            break;
        }
        if (gp->max_tokens > 0 && (int32_t)n_gen >= gp->max_tokens) {
            stats->stop = RLX_LLM_STOP_LENGTH;
            break;
        }
        rlx_token tok;
        if (rlx_sampler_sample(smp, logits, &tok) != RLX_OK) {
            st = rlx_error_set(err, RLX_ERR_INTERNAL, "sampling failed: %s",
                               rlx_sampler_last_error(smp));
            break;
        }
        rlx_sampler_accept(smp, tok);
        if (!gp->ignore_eos && m->tok && rlx_tokenizer_is_eog(m->tok, tok)) {
            stats->stop = RLX_LLM_STOP_EOG;
            break;
        }
        if (n_gen == cap_gen) { /* a context shift lets a reply outgrow n_ctx */
            rlx_token *ng = realloc(gen, sizeof *gen * cap_gen * 2);
            if (!ng) {
                st = rlx_error_set(err, RLX_ERR_NO_MEMORY, "out of memory");
                break;
            }
            gen = ng;
            cap_gen *= 2;
        }
        gen[n_gen++] = tok;
        em.n_gen = n_gen;
        if (n_gen == 1)
            em.t_first = now_ms();
        if (dt) {
            const char *piece;
            size_t len;
            if ((st = rlx_detokenizer_push(dt, tok, &piece, &len, err)) != RLX_OK)
                break;
            if (!emitter_push(&em, tok, piece, len)) {
                stats->stop = em.stopped_by_string ? RLX_LLM_STOP_STRING : RLX_LLM_STOP_CALLBACK;
                break;
            }
        } else if (!call_cb(&em, tok, "", 0)) {
            stats->stop = RLX_LLM_STOP_CALLBACK;
            break;
        }
        if (gp->max_tokens > 0 && (int32_t)n_gen >= gp->max_tokens) {
            stats->stop = RLX_LLM_STOP_LENGTH;
            break;
        }
        if (m->n_past >= m->n_ctx && !gp->context_shift) {
            stats->stop = RLX_LLM_STOP_CONTEXT;
            break;
        }
        if (m->n_past >= m->n_ctx) {
            /* drop the older half after the kept start and re-prefill the
             * rest with the new token: the cache's rotated keys cannot be
             * moved to new positions in place */
            size_t keep = shift_keep(m, gp, m->hist, (size_t)m->n_past);
            memcpy(shifted, m->hist, sizeof *shifted * (size_t)m->n_past);
            shifted[m->n_past] = tok;
            size_t ns = shift_tokens(shifted, (size_t)m->n_past + 1, keep,
                                     (size_t)m->n_ctx - (size_t)(m->n_ctx - keep) / 2, shifted,
                                     &stats->n_dropped);
            stats->n_shifts++;
            st = prefill(m, shifted, ns, logits, NULL, err);
        } else
            st = eval_tokens(m, &tok, 1, logits, err);
        if (st == RLX_ERR_CANCELLED) {
            rlx_error_clear(err);
            st = RLX_OK;
            stats->stop = RLX_LLM_STOP_CANCELLED;
            break;
        }
        if (st != RLX_OK)
            break;
    }
    if (st == RLX_OK && dt && stats->stop != RLX_LLM_STOP_STRING &&
        stats->stop != RLX_LLM_STOP_CALLBACK) {
        const char *piece;
        size_t len;
        rlx_detokenizer_flush(dt, &piece, &len);
        if (len)
            emitter_push(&em, RLX_TOKEN_NULL, piece, len);
        if (em.n_pend)
            emit(&em, RLX_TOKEN_NULL, em.pend, em.n_pend);
    }
    stats->decode_ms = now_ms() - t1;
    stats->n_generated = (int32_t)n_gen;
    stats->decode_tps = stats->decode_ms > 0 ? n_gen * 1e3 / stats->decode_ms : 0;
done:
    stats->n_past = m->n_past;
    if (st == RLX_OK && out_tokens) {
        *out_tokens = gen;
        gen = NULL;
        if (n_out_tokens)
            *n_out_tokens = n_gen;
    }
    free(gen);
    free(shifted);
    free(breakers);
    free(logits);
    free(em.pend);
    rlx_sampler_free(smp);
    rlx_detokenizer_free(dt);
    return st;
}
