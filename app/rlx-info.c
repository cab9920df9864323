/* rlx info: what a model file or checkpoint folder holds.
 *
 * The description is built once as a JSON object; --json prints it as is and
 * the default output is a readable rendering of the same object, so the two
 * never disagree. */
#include <errno.h>
#include <json-c/json.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/backend.h"
#include "rlx-config.h"
#if RLX_HAVE_CUDA
#include "backends/cuda/cuda-backend.h"
#endif
#include "engine/formats/gguf.h"
#include "engine/formats/safetensors.h"
#include "engine/formats/torch-zip.h"
#include "models/whisper/whisper-file.h"
#include "rlx-cli.h"

static void human_bytes(uint64_t b, char *buf, size_t cap)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%" PRIu64 " B", b);
    else
        snprintf(buf, cap, "%.2f %s", v, units[u]);
}

static json_object *str_n(const char *p, uint64_t n)
{
    return json_object_new_string_len(p, n > INT32_MAX ? INT32_MAX : (int)n);
}

/* Per-dtype tensor counts and bytes. */
static void add_dtype_total(json_object *dtypes, rlx_dtype t, uint64_t bytes)
{
    json_object *e = NULL;
    const char *name = rlx_dtype_name(t);
    if (!json_object_object_get_ex(dtypes, name, &e)) {
        e = json_object_new_object();
        json_object_object_add(e, "tensors", json_object_new_int64(0));
        json_object_object_add(e, "bytes", json_object_new_int64(0));
        json_object_object_add(dtypes, name, e);
    }
    json_object *n, *b;
    json_object_object_get_ex(e, "tensors", &n);
    json_object_object_get_ex(e, "bytes", &b);
    json_object_set_int64(n, json_object_get_int64(n) + 1);
    json_object_set_int64(b, json_object_get_int64(b) + (int64_t)bytes);
}

static json_object *tensor_entry(const char *name, rlx_dtype t, uint32_t n_dims,
                                 const uint64_t *dims, uint64_t bytes)
{
    json_object *o = json_object_new_object();
    json_object *shape = json_object_new_array();
    for (uint32_t d = 0; d < n_dims; d++)
        json_object_array_add(shape, json_object_new_int64((int64_t)dims[d]));
    json_object_object_add(o, "name", json_object_new_string(name));
    json_object_object_add(o, "dtype", json_object_new_string(rlx_dtype_name(t)));
    json_object_object_add(o, "shape", shape);
    json_object_object_add(o, "bytes", json_object_new_int64((int64_t)bytes));
    return o;
}

static json_object *gguf_scalar(const rlx_gguf_value *v)
{
    switch (v->type) {
    case RLX_GGUF_TYPE_UINT8:
    case RLX_GGUF_TYPE_UINT16:
    case RLX_GGUF_TYPE_UINT32:
    case RLX_GGUF_TYPE_UINT64:
        return json_object_new_uint64(v->v.u64);
    case RLX_GGUF_TYPE_INT8:
    case RLX_GGUF_TYPE_INT16:
    case RLX_GGUF_TYPE_INT32:
    case RLX_GGUF_TYPE_INT64:
        return json_object_new_int64(v->v.i64);
    case RLX_GGUF_TYPE_FLOAT32: {
        /* print an f32 with the digits it really has (1e-05, not 9.99999974e-06) */
        char buf[32];
        snprintf(buf, sizeof buf, "%.7g", v->v.f64);
        return json_object_new_double_s(v->v.f64, buf);
    }
    case RLX_GGUF_TYPE_FLOAT64:
        return json_object_new_double(v->v.f64);
    case RLX_GGUF_TYPE_BOOL:
        return json_object_new_boolean(v->v.u64 != 0);
    case RLX_GGUF_TYPE_STRING:
        return str_n(v->v.str.ptr, v->v.str.len);
    case RLX_GGUF_TYPE_ARRAY: {
        /* Hyper-parameters such as per-layer head counts are short arrays of
         * numbers; long arrays are summarized by their length. */
        if (v->v.arr.count > 64 || v->v.arr.elem_type == RLX_GGUF_TYPE_STRING ||
            v->v.arr.elem_type == RLX_GGUF_TYPE_ARRAY) {
            char buf[96];
            snprintf(buf, sizeof buf, "[%" PRIu64 " x %s]", v->v.arr.count,
                     rlx_gguf_type_name(v->v.arr.elem_type));
            return json_object_new_string(buf);
        }
        return NULL; /* filled by the caller, which has the file handle */
    }
    default:
        return NULL;
    }
}

static json_object *gguf_value_json(const rlx_gguf *g, const rlx_gguf_value *v)
{
    json_object *o = gguf_scalar(v);
    if (o || v->type != RLX_GGUF_TYPE_ARRAY)
        return o;
    json_object *arr = json_object_new_array();
    for (uint64_t i = 0; i < v->v.arr.count; i++) {
        rlx_gguf_value e;
        if (rlx_gguf_array_get(g, v, i, &e, NULL) != RLX_OK)
            break;
        json_object *x = gguf_scalar(&e);
        json_object_array_add(arr, x ? x : json_object_new_null());
    }
    return arr;
}

static const char *tokenizer_kind(const char *model)
{
    static const struct {
        const char *model, *kind;
    } kinds[] = {
        {"llama", "SentencePiece (BPE with byte fallback)"},
        {"gemma4", "SentencePiece (BPE)"},
        {"gpt2", "byte-level BPE"},
        {"bert", "WordPiece"},
        {"t5", "SentencePiece (unigram)"},
        {"rwkv", "RWKV trie"},
        {"plamo2", "PLaMo-2 (Aho-Corasick)"},
        {"no_vocab", "none"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(model, kinds[i].model))
            return kinds[i].kind;
    return "unknown";
}

static int describe_gguf(const char *path, bool with_tensors, json_object **out)
{
    rlx_gguf *g = NULL;
    rlx_error *err = NULL;
    if (rlx_gguf_open(path, &g, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "path", json_object_new_string(path));
    json_object_object_add(o, "format", json_object_new_string("gguf"));
    json_object_object_add(o, "gguf_version", json_object_new_int((int)rlx_gguf_version(g)));
    json_object_object_add(o, "alignment", json_object_new_int64((int64_t)rlx_gguf_alignment(g)));

    rlx_gguf_str arch = {"", 0};
    rlx_gguf_get_str(g, "general.architecture", &arch, NULL);
    json_object_object_add(o, "architecture", str_n(arch.ptr, arch.len));
    rlx_gguf_str name;
    if (rlx_gguf_get_str(g, "general.name", &name, NULL) == RLX_OK)
        json_object_object_add(o, "name", str_n(name.ptr, name.len));
    uint32_t ftype;
    if (rlx_gguf_get_u32(g, "general.file_type", &ftype, NULL) == RLX_OK)
        json_object_object_add(o, "file_type", json_object_new_int((int)ftype));

    /* Every "<arch>.*" key is a hyper-parameter of that architecture. */
    json_object *hp = json_object_new_object();
    for (uint64_t i = 0; i < rlx_gguf_n_kv(g); i++) {
        const rlx_gguf_kv *kv = rlx_gguf_kv_at(g, i);
        if (arch.len == 0 || kv->key.len <= arch.len + 1 ||
            memcmp(kv->key.ptr, arch.ptr, arch.len) != 0 || kv->key.ptr[arch.len] != '.')
            continue;
        char key[256];
        uint64_t n = kv->key.len - arch.len - 1;
        if (n >= sizeof key)
            continue;
        memcpy(key, kv->key.ptr + arch.len + 1, n);
        key[n] = '\0';
        json_object *v = gguf_value_json(g, &kv->value);
        if (v)
            json_object_object_add(hp, key, v);
    }
    json_object_object_add(o, "hyperparameters", hp);

    rlx_gguf_str model;
    if (rlx_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL) == RLX_OK) {
        json_object *tok = json_object_new_object();
        char m[64];
        snprintf(m, sizeof m, "%.*s", (int)(model.len < 63 ? model.len : 63), model.ptr);
        json_object_object_add(tok, "model", json_object_new_string(m));
        json_object_object_add(tok, "kind", json_object_new_string(tokenizer_kind(m)));
        rlx_gguf_str pre;
        if (rlx_gguf_get_str(g, "tokenizer.ggml.pre", &pre, NULL) == RLX_OK)
            json_object_object_add(tok, "pre", str_n(pre.ptr, pre.len));
        const rlx_gguf_value *toks;
        if (rlx_gguf_get_arr(g, "tokenizer.ggml.tokens", RLX_GGUF_TYPE_STRING, &toks, NULL) ==
            RLX_OK)
            json_object_object_add(tok, "vocab_size",
                                   json_object_new_int64((int64_t)toks->v.arr.count));
        json_object_object_add(
            tok, "has_chat_template",
            json_object_new_boolean(rlx_gguf_find(g, "tokenizer.chat_template") != NULL));
        json_object_object_add(o, "tokenizer", tok);
    }

    json_object *dtypes = json_object_new_object();
    json_object *list = with_tensors ? json_object_new_array() : NULL;
    uint64_t total = 0;
    for (uint64_t i = 0; i < rlx_gguf_n_tensors(g); i++) {
        const rlx_gguf_tensor *t = rlx_gguf_tensor_at(g, i);
        total += t->n_bytes;
        add_dtype_total(dtypes, t->dtype, t->n_bytes);
        if (list)
            json_object_array_add(list,
                                  tensor_entry(t->name, t->dtype, t->n_dims, t->ne, t->n_bytes));
    }
    json_object_object_add(o, "n_tensors", json_object_new_int64((int64_t)rlx_gguf_n_tensors(g)));
    json_object_object_add(o, "dtypes", dtypes);
    json_object_object_add(o, "weight_bytes", json_object_new_int64((int64_t)total));
    if (list)
        json_object_object_add(o, "tensors", list);
    rlx_gguf_close(g);
    *out = o;
    return 0;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* HF config.json: architecture and the numeric hyper-parameters. */
static void add_hf_config(json_object *o, const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    json_object *cfg = json_object_from_file(p);
    if (!cfg)
        return;
    json_object *v;
    if (json_object_object_get_ex(cfg, "architectures", &v) &&
        json_object_is_type(v, json_type_array) && json_object_array_length(v) > 0)
        json_object_object_add(o, "architecture", json_object_get(json_object_array_get_idx(v, 0)));
    else if (json_object_object_get_ex(cfg, "model_type", &v))
        json_object_object_add(o, "architecture", json_object_get(v));
    if (json_object_object_get_ex(cfg, "_name_or_path", &v))
        json_object_object_add(o, "name", json_object_get(v));
    json_object *hp = json_object_new_object();
    json_object_object_foreach(cfg, key, val)
    {
        if (json_object_is_type(val, json_type_int) || json_object_is_type(val, json_type_double) ||
            json_object_is_type(val, json_type_boolean))
            json_object_object_add(hp, key, json_object_get(val));
    }
    json_object_object_add(o, "hyperparameters", hp);
    json_object_put(cfg);
}

/* HF tokenizer.json: model type and vocabulary size. */
static void add_hf_tokenizer(json_object *o, const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    json_object *tj = json_object_from_file(p);
    if (!tj)
        return;
    json_object *tok = json_object_new_object();
    json_object *model, *type, *vocab, *added;
    int64_t n = 0;
    if (json_object_object_get_ex(tj, "model", &model)) {
        if (json_object_object_get_ex(model, "type", &type)) {
            const char *t = json_object_get_string(type);
            json_object_object_add(tok, "model", json_object_new_string(t));
            json_object_object_add(tok, "kind",
                                   json_object_new_string(!strcmp(t, "BPE") ? "BPE"
                                                          : !strcmp(t, "Unigram")
                                                              ? "SentencePiece (unigram)"
                                                          : !strcmp(t, "WordPiece") ? "WordPiece"
                                                                                    : t));
        }
        if (json_object_object_get_ex(model, "vocab", &vocab)) {
            if (json_object_is_type(vocab, json_type_object))
                n = json_object_object_length(vocab);
            else if (json_object_is_type(vocab, json_type_array))
                n = (int64_t)json_object_array_length(vocab);
        }
    }
    /* added tokens with ids past the base vocabulary extend it */
    if (json_object_object_get_ex(tj, "added_tokens", &added) &&
        json_object_is_type(added, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(added); i++) {
            json_object *id;
            if (json_object_object_get_ex(json_object_array_get_idx(added, i), "id", &id) &&
                json_object_get_int64(id) >= n)
                n = json_object_get_int64(id) + 1;
        }
    }
    json_object_object_add(tok, "vocab_size", json_object_new_int64(n));
    json_object_object_add(o, "tokenizer", tok);
    json_object_put(tj);
}

static int describe_safetensors(const char *path, bool with_tensors, json_object **out)
{
    rlx_safetensors *st = NULL;
    rlx_error *err = NULL;
    if (rlx_safetensors_open(path, &st, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "path", json_object_new_string(path));
    json_object_object_add(o, "format", json_object_new_string("safetensors"));
    json_object_object_add(o, "shards", json_object_new_int((int)rlx_safetensors_n_shards(st)));
    if (is_dir(path)) {
        add_hf_config(o, path);
        add_hf_tokenizer(o, path);
    }
    if (rlx_safetensors_n_metadata(st) > 0) {
        json_object *md = json_object_new_object();
        for (uint64_t i = 0; i < rlx_safetensors_n_metadata(st); i++) {
            const char *k, *v;
            rlx_safetensors_metadata_at(st, i, &k, &v);
            json_object_object_add(md, k, json_object_new_string(v));
        }
        json_object_object_add(o, "metadata", md);
    }
    json_object *dtypes = json_object_new_object();
    json_object *list = with_tensors ? json_object_new_array() : NULL;
    uint64_t total = 0;
    for (uint64_t i = 0; i < rlx_safetensors_n_tensors(st); i++) {
        const rlx_st_tensor *t = rlx_safetensors_tensor_at(st, i);
        total += t->n_bytes;
        add_dtype_total(dtypes, t->dtype, t->n_bytes);
        if (list)
            json_object_array_add(list,
                                  tensor_entry(t->name, t->dtype, t->n_dims, t->shape, t->n_bytes));
    }
    json_object_object_add(o, "n_tensors",
                           json_object_new_int64((int64_t)rlx_safetensors_n_tensors(st)));
    json_object_object_add(o, "dtypes", dtypes);
    json_object_object_add(o, "weight_bytes", json_object_new_int64((int64_t)total));
    if (list)
        json_object_object_add(o, "tensors", list);
    rlx_safetensors_close(st);
    *out = o;
    return 0;
}

/* A PyTorch checkpoint (torch.save's zip): read by the restricted unpickler,
 * which runs nothing from the file. */
static int describe_torch(const char *path, bool with_tensors, json_object **out)
{
    rlx_torch_zip *tz = NULL;
    rlx_error *err = NULL;
    if (rlx_torch_zip_open(path, &tz, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "path", json_object_new_string(path));
    json_object_object_add(o, "format", json_object_new_string("pytorch"));
    json_object_object_add(o, "archive_folder", json_object_new_string(rlx_torch_zip_prefix(tz)));
    if (*rlx_torch_zip_root(tz))
        json_object_object_add(o, "state_dict_key", json_object_new_string(rlx_torch_zip_root(tz)));
    json_object *dtypes = json_object_new_object();
    json_object *list = with_tensors ? json_object_new_array() : NULL;
    uint64_t total = 0, strided = 0;
    for (uint64_t i = 0; i < rlx_torch_zip_n_tensors(tz); i++) {
        const rlx_torch_tensor *t = rlx_torch_zip_tensor_at(tz, i);
        total += t->n_bytes;
        strided += !t->contiguous;
        add_dtype_total(dtypes, t->dtype, t->n_bytes);
        if (list) {
            json_object *e = tensor_entry(t->name, t->dtype, t->n_dims, t->shape, t->n_bytes);
            if (!t->contiguous)
                json_object_object_add(e, "contiguous", json_object_new_boolean(0));
            json_object_array_add(list, e);
        }
    }
    json_object_object_add(o, "n_tensors",
                           json_object_new_int64((int64_t)rlx_torch_zip_n_tensors(tz)));
    if (strided)
        json_object_object_add(o, "n_strided", json_object_new_int64((int64_t)strided));
    json_object_object_add(o, "dtypes", dtypes);
    json_object_object_add(o, "weight_bytes", json_object_new_int64((int64_t)total));
    if (list)
        json_object_object_add(o, "tensors", list);
    rlx_torch_zip_close(tz);
    *out = o;
    return 0;
}

/* A whisper model: a whisper.cpp ggml .bin or an HF openai/whisper-* folder. */
static int describe_whisper(const char *path, bool with_tensors, json_object **out)
{
    rlx_whisper_file *f = NULL;
    rlx_error *err = NULL;
    if (rlx_whisper_file_open(path, &f, &err) != RLX_OK) {
        int rc = rlx_cli_fail("%s", rlx_error_message(err));
        rlx_error_free(err);
        return rc;
    }
    bool ggml = !strcmp(rlx_whisper_file_format(f), "ggml");
    json_object *o = json_object_new_object();
    json_object_object_add(o, "path", json_object_new_string(path));
    json_object_object_add(o, "format", json_object_new_string(ggml ? "ggml" : "safetensors"));
    if (!ggml) {
        rlx_safetensors *st = NULL;
        int shards = 0;
        if (rlx_safetensors_open(path, &st, NULL) == RLX_OK)
            shards = (int)rlx_safetensors_n_shards(st);
        rlx_safetensors_close(st);
        json_object_object_add(o, "shards", json_object_new_int(shards));
    }
    json_object_object_add(o, "architecture", json_object_new_string("whisper"));
    const rlx_whisper_hparams *h = rlx_whisper_file_hparams(f);
    json_object *hp = json_object_new_object();
    const struct {
        const char *k;
        int32_t v;
    } hv[] = {{"n_vocab", h->n_vocab},
              {"n_audio_ctx", h->n_audio_ctx},
              {"n_audio_state", h->n_audio_state},
              {"n_audio_head", h->n_audio_head},
              {"n_audio_layer", h->n_audio_layer},
              {"n_text_ctx", h->n_text_ctx},
              {"n_text_state", h->n_text_state},
              {"n_text_head", h->n_text_head},
              {"n_text_layer", h->n_text_layer},
              {"n_mels", h->n_mels},
              {"ftype", h->ftype}};
    for (size_t i = 0; i < sizeof hv / sizeof hv[0]; i++)
        json_object_object_add(hp, hv[i].k, json_object_new_int(hv[i].v));
    json_object_object_add(o, "hyperparameters", hp);

    json_object *w = json_object_new_object();
    const rlx_whisper_special *sp = rlx_whisper_file_special(f);
    json_object_object_add(w, "kind", json_object_new_string(rlx_whisper_file_kind(f)));
    json_object_object_add(w, "multilingual",
                           json_object_new_boolean(rlx_whisper_file_multilingual(f)));
    json_object_object_add(w, "languages", json_object_new_int(sp->n_langs));
    json_object *langs = json_object_new_array();
    for (int i = 0; i < sp->n_langs; i++)
        json_object_array_add(langs, json_object_new_string(rlx_whisper_language_code(i)));
    json_object_object_add(w, "language_codes", langs);
    json_object_object_add(w, "eot", json_object_new_int(sp->eot));
    json_object_object_add(w, "sot", json_object_new_int(sp->sot));
    json_object_object_add(w, "timestamp_begin", json_object_new_int(sp->timestamp_begin));
    size_t n_heads = 0;
    rlx_whisper_file_alignment_heads(f, &n_heads);
    json_object_object_add(w, "alignment_heads", json_object_new_int((int)n_heads));
    json_object_object_add(o, "whisper", w);

    json_object *tok = json_object_new_object();
    json_object_object_add(tok, "kind",
                           json_object_new_string(ggml ? "byte-level (no merges: "
                                                         "greedy longest match)"
                                                       : "byte-level BPE"));
    json_object_object_add(tok, "vocab_size", json_object_new_int(h->n_vocab));
    json_object_object_add(o, "tokenizer", tok);

    json_object *dtypes = json_object_new_object();
    json_object *list = with_tensors ? json_object_new_array() : NULL;
    uint64_t total = 0;
    size_t n = rlx_whisper_file_n_tensors(f);
    for (size_t i = 0; i < n; i++) {
        rlx_dtype dt;
        rlx_shape sh;
        uint64_t bytes;
        const char *name = rlx_whisper_file_tensor_at(f, i, &dt, &sh, &bytes);
        total += bytes;
        add_dtype_total(dtypes, dt, bytes);
        if (list) {
            uint64_t dims[RLX_MAX_DIMS];
            for (int d = 0; d < sh.rank; d++)
                dims[d] = (uint64_t)sh.d[d].k;
            json_object_array_add(list, tensor_entry(name, dt, (uint32_t)sh.rank, dims, bytes));
        }
    }
    json_object_object_add(o, "n_tensors", json_object_new_int64((int64_t)n));
    json_object_object_add(o, "dtypes", dtypes);
    json_object_object_add(o, "weight_bytes", json_object_new_int64((int64_t)total));
    if (list)
        json_object_object_add(o, "tensors", list);
    rlx_whisper_file_free(f);
    *out = o;
    return 0;
}

/* Whether a folder's config.json says model_type "whisper". */
static bool is_whisper_folder(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    json_object *cfg = json_object_from_file(p);
    if (!cfg)
        return false;
    json_object *v;
    bool yes = json_object_object_get_ex(cfg, "model_type", &v) &&
               json_object_is_type(v, json_type_string) &&
               !strcmp(json_object_get_string(v), "whisper");
    json_object_put(cfg);
    return yes;
}

static const char *jstr(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

static void print_human(json_object *o)
{
    char b[64];
    const char *fmt = jstr(o, "format");
    printf("file:          %s\n", jstr(o, "path"));
    if (!strcmp(fmt, "gguf"))
        printf("format:        GGUF v%s (alignment %s)\n", jstr(o, "gguf_version"),
               jstr(o, "alignment"));
    else if (!strcmp(fmt, "ggml"))
        printf("format:        whisper.cpp ggml .bin\n");
    else if (!strcmp(fmt, "pytorch"))
        printf("format:        PyTorch checkpoint (zip, folder '%s'%s%s%s)\n",
               jstr(o, "archive_folder"), jstr(o, "state_dict_key") ? ", tensors under '" : "",
               jstr(o, "state_dict_key") ? jstr(o, "state_dict_key") : "",
               jstr(o, "state_dict_key") ? "'" : "");
    else
        printf("format:        safetensors (%s shard%s)\n", jstr(o, "shards"),
               strcmp(jstr(o, "shards"), "1") ? "s" : "");
    const char *arch = jstr(o, "architecture");
    printf("architecture:  %s\n", arch && *arch ? arch : "(not stated)");
    if (jstr(o, "name"))
        printf("name:          %s\n", jstr(o, "name"));
    json_object *wh;
    if (json_object_object_get_ex(o, "whisper", &wh)) {
        printf("whisper:       %s, %s, %s languages, %s alignment heads\n", jstr(wh, "kind"),
               json_object_get_boolean(json_object_object_get(wh, "multilingual")) ? "multilingual"
                                                                                   : "English-only",
               jstr(wh, "languages"), jstr(wh, "alignment_heads"));
        printf("special ids:   eot %s, sot %s, timestamps from %s\n", jstr(wh, "eot"),
               jstr(wh, "sot"), jstr(wh, "timestamp_begin"));
    }
    json_object *hp;
    if (json_object_object_get_ex(o, "hyperparameters", &hp) && json_object_object_length(hp)) {
        printf("hyper-parameters:\n");
        json_object_object_foreach(hp, k, v)
        {
            printf("  %-34s %s\n", k, json_object_get_string(v));
        }
    }
    json_object *md;
    if (json_object_object_get_ex(o, "metadata", &md)) {
        printf("metadata:\n");
        json_object_object_foreach(md, k, v)
        {
            printf("  %-34s %s\n", k, json_object_get_string(v));
        }
    }
    json_object *tok;
    if (json_object_object_get_ex(o, "tokenizer", &tok)) {
        printf("tokenizer:     %s", jstr(tok, "kind") ? jstr(tok, "kind") : "?");
        if (jstr(tok, "model"))
            printf(" [%s]", jstr(tok, "model"));
        if (jstr(tok, "pre"))
            printf(", pre-tokenizer %s", jstr(tok, "pre"));
        if (jstr(tok, "vocab_size"))
            printf(", %s tokens", jstr(tok, "vocab_size"));
        json_object *ct;
        if (json_object_object_get_ex(tok, "has_chat_template", &ct) && json_object_get_boolean(ct))
            printf(", chat template");
        printf("\n");
    } else {
        printf("tokenizer:     none\n");
    }
    human_bytes((uint64_t)json_object_get_int64(json_object_object_get(o, "weight_bytes")), b,
                sizeof b);
    printf("tensors:       %s\n", jstr(o, "n_tensors"));
    printf("weights:       %s\n", b);
    json_object *dt;
    if (json_object_object_get_ex(o, "dtypes", &dt)) {
        json_object_object_foreach(dt, k, v)
        {
            human_bytes((uint64_t)json_object_get_int64(json_object_object_get(v, "bytes")), b,
                        sizeof b);
            const char *nt = jstr(v, "tensors");
            printf("  %-8s %6s tensors  %s\n", k, nt ? nt : "?", b);
        }
    }
    json_object *list;
    if (json_object_object_get_ex(o, "tensors", &list)) {
        printf("\n%-48s %-8s %-24s %s\n", "name", "dtype", "shape (as stored)", "bytes");
        for (size_t i = 0; i < json_object_array_length(list); i++) {
            json_object *t = json_object_array_get_idx(list, i);
            char shape[128] = "";
            size_t pos = 0;
            json_object *sh = json_object_object_get(t, "shape");
            for (size_t d = 0; d < json_object_array_length(sh) && pos < sizeof shape; d++)
                pos += (size_t)snprintf(shape + pos, sizeof shape - pos, "%s%s", d ? " x " : "",
                                        json_object_get_string(json_object_array_get_idx(sh, d)));
            printf("%-48s %-8s %-24s %s\n", jstr(t, "name"), jstr(t, "dtype"), shape,
                   jstr(t, "bytes"));
        }
    }
}

/* Sniff the format from the first bytes, not the file name. */
static int sniff(const char *path, char *kind, size_t cap)
{
    if (is_dir(path)) {
        snprintf(kind, cap, is_whisper_folder(path) ? "whisper" : "safetensors");
        return 0;
    }
    FILE *f = fopen(path, "rb");
    if (!f)
        return rlx_cli_fail("%s: cannot open: %s", path, strerror(errno));
    unsigned char h[9] = {0};
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (n >= 4 && !memcmp(h, "GGUF", 4))
        snprintf(kind, cap, "gguf");
    else if (n >= 4 && !memcmp(h, "lmgg", 4)) /* 0x67676d6c little endian */
        snprintf(kind, cap, "whisper");
    else if (n >= 4 && !memcmp(h, "ggml", 4))
        return rlx_cli_fail("%s: a ggml legacy file of another kind; rlx info reads GGUF, "
                            "safetensors and whisper.cpp's ggml .bin",
                            path);
    else if (strlen(path) > 5 && !strcmp(path + strlen(path) - 5, ".onnx"))
        snprintf(kind, cap, "onnx"); /* protobuf has no magic number */
    else if (rlx_torch_zip_sniff(h, n))
        snprintf(kind, cap, "pytorch");
    else if (n == 9 && h[8] == '{')
        snprintf(kind, cap, "safetensors");
    else if (strstr(path, ".json"))
        snprintf(kind, cap, "safetensors"); /* a shard index */
    else
        return rlx_cli_fail("%s: not a GGUF, safetensors or PyTorch file", path);
    return 0;
}

/* rlx info --devices: every device of every compiled-in backend, with its
 * memory and feature line (a Vulkan device's says which kernels it runs:
 * "f16 kernels" with 16-bit storage and float16 arithmetic, else "f32"). */
static int list_devices(bool as_json)
{
    json_object *arr = json_object_new_array();
    for (int b = 0; b < rlx_backend_count(); b++) {
        const rlx_backend_i *be = rlx_backend_at(b);
        int n = be->device_count ? be->device_count() : 0;
#if RLX_HAVE_CUDA
        if (n == 0 && !as_json && !strcmp(be->name, "cuda")) {
            const char *why = rlx_cuda_unavailable_reason();
            printf("%-10s no device: %s\n", "cuda", why ? why : "none found");
        }
#endif
        for (int i = 0; i < n; i++) {
            rlx_device_info di;
            rlx_error *err = NULL;
            if (be->device_info(i, &di, &err) != RLX_OK) {
                fprintf(stderr, "rlx: info: %s device %d: %s\n", be->name, i,
                        rlx_error_message(err));
                rlx_error_free(err);
                continue;
            }
            json_object *o = json_object_new_object();
            json_object_object_add(o, "id", json_object_new_string(di.id));
            json_object_object_add(o, "name", json_object_new_string(di.name));
            json_object_object_add(o, "memory", json_object_new_int64((int64_t)di.total_memory));
            json_object_object_add(o, "features", json_object_new_string(di.features));
            json_object_array_add(arr, o);
            if (!as_json) {
                char mem[32];
                human_bytes(di.total_memory, mem, sizeof mem);
                printf("%-10s %s\n           memory %s; %s\n", di.id, di.name, mem, di.features);
            }
        }
    }
    if (as_json)
        printf("%s\n", json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(arr);
    return 0;
}

static const char info_usage[] =
    "usage: rlx info FILE_OR_DIR [--tensors] [--json]\n"
    "       rlx info --devices [--json]\n"
    "Describes a model: a .gguf file, a .safetensors file, a Hugging Face\n"
    "checkpoint folder, a PyTorch .pt/.pth (torch.save's zip; its pickle is read,\n"
    "never run) or a whisper.cpp ggml .bin (architecture, hyper-parameters,\n"
    "tokenizer, weights; for whisper: kind, languages, special ids), or an ONNX\n"
    "model (.onnx: opset, inputs and outputs, op histogram, the ops rlx lacks).\n"
    "  --tensors  every tensor: name, type, shape, bytes\n"
    "  --json     one JSON object instead of the text\n"
    "  --devices  the CPU and GPU devices: memory, features\n";

int rlx_cmd_info(int argc, char **argv)
{
    bool tensors = false, as_json = false, devices = false;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(info_usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--tensors"))
            tensors = true;
        else if (!strcmp(argv[i], "--devices"))
            devices = true;
        else if (!strcmp(argv[i], "--json"))
            as_json = true;
        else if (argv[i][0] == '-' && argv[i][1])
            return rlx_cli_fail("info: unknown option '%s' (see rlx info --help)", argv[i]);
        else if (!path)
            path = argv[i];
        else
            return rlx_cli_fail("info: more than one file given ('%s' and '%s'; see rlx info "
                                "--help)",
                                path, argv[i]);
    }
    if (devices && path)
        return rlx_cli_fail("info: --devices takes no file (see rlx info --help)");
    if (devices)
        return list_devices(as_json);
    if (!path)
        return rlx_cli_fail("info: no file given (see rlx info --help)");
    char kind[32];
    int rc = sniff(path, kind, sizeof kind);
    if (rc)
        return rc;
    if (!strcmp(kind, "onnx"))
        return rlx_info_onnx(path, tensors, as_json);
    json_object *o = NULL;
    rc = !strcmp(kind, "gguf")      ? describe_gguf(path, tensors, &o)
         : !strcmp(kind, "whisper") ? describe_whisper(path, tensors, &o)
         : !strcmp(kind, "pytorch") ? describe_torch(path, tensors, &o)
                                    : describe_safetensors(path, tensors, &o);
    if (rc)
        return rc;
    if (as_json)
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE));
    else
        print_human(o);
    json_object_put(o);
    return 0;
}
