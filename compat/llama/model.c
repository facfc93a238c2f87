/* model.c — llama.h's model and vocabulary calls over braid_model: parameters, load and free, the
 * hyperparameter and metadata accessors, tokenize / detokenize and the special tokens. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

struct llama_model_params llama_model_default_params(void) {
    struct llama_model_params p;
    memset(&p, 0, sizeof p);
    p.n_gpu_layers = -1; /* llama.cpp's defaults; braid runs on the CPU whatever they say */
    p.split_mode = LLAMA_SPLIT_MODE_LAYER;
    p.load_mode = LLAMA_LOAD_MODE_AUTO;
    p.lazy_mode = LLAMA_LAZY_MODE_AUTO;
    p.use_extra_bufts = true;
    return p;
}

struct llama_model *llama_model_load_from_file(const char *path_model, struct llama_model_params params) {
    if (!path_model) {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_model_load_from_file: NULL path\n");
        return NULL;
    }
    /* Metadata overrides change what the file says; braid validates the file as it is and does not patch it. */
    if (params.kv_overrides && params.kv_overrides[0].key[0]) {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_model_load_from_file: kv_overrides are not supported by braid\n");
        return NULL;
    }
    if (params.progress_callback && !params.progress_callback(0.0f, params.progress_callback_user_data)) {
        shim_log(GGML_LOG_LEVEL_INFO, "llama_model_load_from_file: cancelled by the progress callback\n");
        return NULL;
    }
    int64_t t0 = shim_time_us();
    braid_model_params bp = braid_model_default_params();
    bp.use_mmap = params.load_mode != LLAMA_LOAD_MODE_NONE && params.load_mode != LLAMA_LOAD_MODE_DIRECT_IO;
    bp.vocab_only = params.vocab_only;
    struct llama_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    braid_status st = braid_model_load(path_model, &bp, &m->bm);
    if (st != BRAID_OK) {
        shim_log_braid("llama_model_load_from_file", st);
        free(m);
        return NULL;
    }
    m->vocab.bm = m->bm;
    m->t_load_ms = (double)(shim_time_us() - t0) / 1000.0;
    if (params.progress_callback) params.progress_callback(1.0f, params.progress_callback_user_data);
    return m;
}

struct llama_model *llama_load_model_from_file(const char *path_model, struct llama_model_params params) {
    return llama_model_load_from_file(path_model, params);
}

void llama_model_free(struct llama_model *model) {
    if (!model) return;
    braid_model_free(model->bm);
    free(model->chat_template);
    free(model->chat_template_name);
    free(model);
}

void llama_free_model(struct llama_model *model) { llama_model_free(model); }

const struct llama_vocab *llama_model_get_vocab(const struct llama_model *model) {
    return model ? &model->vocab : NULL;
}

/* An integer hyperparameter "<arch>.<suffix>", or fallback when the file does not have it (or has an array). */
static int32_t arch_int(const braid_model *bm, const char *suffix, int32_t fallback) {
    char key[160], val[64];
    size_t n;
    snprintf(key, sizeof key, "%s.%s", braid_model_arch(bm), suffix);
    if (braid_model_meta_str(bm, key, val, sizeof val, &n) != BRAID_OK || val[0] == '[') return fallback;
    char *end;
    long v = strtol(val, &end, 10);
    return *end ? fallback : (int32_t)v;
}

int32_t llama_model_n_ctx_train(const struct llama_model *m) { return arch_int(m->bm, "context_length", 0); }
int32_t llama_model_n_embd(const struct llama_model *m) { return braid_model_n_embd(m->bm); }
int32_t llama_model_n_embd_inp(const struct llama_model *m) { return braid_model_n_embd(m->bm); }
int32_t llama_model_n_embd_out(const struct llama_model *m) { return braid_model_n_embd(m->bm); }
int32_t llama_model_n_layer(const struct llama_model *m) { return braid_model_n_layer(m->bm); }
int32_t llama_model_n_head(const struct llama_model *m) { return arch_int(m->bm, "attention.head_count", 0); }
int32_t llama_model_n_head_kv(const struct llama_model *m) {
    return arch_int(m->bm, "attention.head_count_kv", llama_model_n_head(m));
}
int32_t llama_model_n_swa(const struct llama_model *m) { return arch_int(m->bm, "attention.sliding_window", 0); }
int32_t llama_model_n_layer_nextn(const struct llama_model *m) { return arch_int(m->bm, "nextn_predict_layers", 0); }
uint64_t llama_model_n_params(const struct llama_model *m) { return braid_model_n_params(m->bm); }
uint64_t llama_model_size(const struct llama_model *m) { return braid_model_size(m->bm); }
bool llama_model_has_encoder(const struct llama_model *m) { (void)m; return false; }
bool llama_model_has_decoder(const struct llama_model *m) { (void)m; return true; }
llama_token llama_model_decoder_start_token(const struct llama_model *m) { (void)m; return -1; }
bool llama_model_is_recurrent(const struct llama_model *m) {
    return braid_model_has_recurrent(m->bm) && !braid_model_has_attention(m->bm);
}
bool llama_model_is_hybrid(const struct llama_model *m) {
    return braid_model_has_recurrent(m->bm) && braid_model_has_attention(m->bm);
}
bool llama_model_is_diffusion(const struct llama_model *m) { (void)m; return false; }

/* llama.cpp's rope type per architecture (llama_model_rope_type), for the architectures braid runs. */
enum llama_rope_type llama_model_rope_type(const struct llama_model *m) {
    static const struct { const char *arch; enum llama_rope_type type; } rows[] = {
        {"qwen35", LLAMA_ROPE_TYPE_IMROPE},    {"qwen35moe", LLAMA_ROPE_TYPE_IMROPE},
        {"qwen3next", LLAMA_ROPE_TYPE_NEOX},   {"lfm2", LLAMA_ROPE_TYPE_NEOX},
        {"lfm2moe", LLAMA_ROPE_TYPE_NEOX},     {"falcon-h1", LLAMA_ROPE_TYPE_NEOX},
        {"granitehybrid", LLAMA_ROPE_TYPE_NORM}, {"mamba2", LLAMA_ROPE_TYPE_NONE},
        {"nemotron_h", LLAMA_ROPE_TYPE_NONE},  {"nemotron_h_moe", LLAMA_ROPE_TYPE_NONE},
    };
    const char *a = braid_model_arch(m->bm);
    for (size_t i = 0; a && i < sizeof rows / sizeof rows[0]; i++)
        if (!strcmp(a, rows[i].arch)) return rows[i].type;
    return braid_model_n_pos_per_token(m->bm) == 4 ? LLAMA_ROPE_TYPE_IMROPE : LLAMA_ROPE_TYPE_NORM;
}

/* snprintf's contract, as llama.h's string getters have it: the full length, or -1 on failure. */
static int32_t put_str(char *buf, size_t size, const char *s, size_t len) {
    if (size) {
        size_t k = len < size - 1 ? len : size - 1;
        memcpy(buf, s, k);
        buf[k] = 0;
    }
    return (int32_t)len;
}

int32_t llama_model_meta_val_str(const struct llama_model *m, const char *key, char *buf, size_t buf_size) {
    size_t n;
    if (braid_model_meta_str(m->bm, key, buf, buf_size, &n) != BRAID_OK) {
        if (buf_size) buf[0] = 0;
        return -1;
    }
    return (int32_t)n;
}

int32_t llama_model_meta_count(const struct llama_model *m) { return braid_model_n_meta(m->bm); }

int32_t llama_model_meta_key_by_index(const struct llama_model *m, int32_t i, char *buf, size_t buf_size) {
    const char *key;
    if (braid_model_meta_key(m->bm, i, &key) != BRAID_OK) {
        if (buf_size) buf[0] = 0;
        return -1;
    }
    return put_str(buf, buf_size, key, strlen(key));
}

int32_t llama_model_meta_val_str_by_index(const struct llama_model *m, int32_t i, char *buf, size_t buf_size) {
    const char *key;
    if (braid_model_meta_key(m->bm, i, &key) != BRAID_OK) {
        if (buf_size) buf[0] = 0;
        return -1;
    }
    return llama_model_meta_val_str(m, key, buf, buf_size);
}

int32_t llama_model_desc(const struct llama_model *m, char *buf, size_t buf_size) {
    char name[256];
    size_t n;
    if (braid_model_meta_str(m->bm, "general.size_label", name, sizeof name, &n) != BRAID_OK) name[0] = 0;
    int k = snprintf(buf, buf_size, "%s %s%s(braid)", braid_model_arch(m->bm), name, name[0] ? " " : "");
    return k < 0 ? -1 : k;
}

const char *llama_model_chat_template(const struct llama_model *m, const char *name) {
    struct llama_model *mm = (struct llama_model *)m; /* the copy is a cache; the model itself does not change */
    const char *want = name ? name : "";
    if (mm->chat_template && !strcmp(mm->chat_template_name, want)) return mm->chat_template;
    const char *t;
    size_t len;
    if (braid_model_chat_template(m->bm, name, &t, &len) != BRAID_OK) return NULL;
    char *copy = malloc(len + 1), *nm = strdup(want);
    if (!copy || !nm) {
        free(copy);
        free(nm);
        return NULL;
    }
    memcpy(copy, t, len);
    copy[len] = 0;
    free(mm->chat_template);
    free(mm->chat_template_name);
    mm->chat_template = copy;
    mm->chat_template_name = nm;
    return copy;
}

/* ---- vocabulary --------------------------------------------------------------------------------------- */

enum llama_vocab_type llama_vocab_type(const struct llama_vocab *v) {
    char model[64];
    size_t n;
    if (braid_model_meta_str(v->bm, "tokenizer.ggml.model", model, sizeof model, &n) != BRAID_OK)
        return LLAMA_VOCAB_TYPE_NONE;
    if (!strcmp(model, "gpt2")) return LLAMA_VOCAB_TYPE_BPE;
    if (!strcmp(model, "llama")) return LLAMA_VOCAB_TYPE_SPM;
    if (!strcmp(model, "bert")) return LLAMA_VOCAB_TYPE_WPM;
    if (!strcmp(model, "t5")) return LLAMA_VOCAB_TYPE_UGM;
    return LLAMA_VOCAB_TYPE_NONE;
}

int32_t llama_vocab_n_tokens(const struct llama_vocab *v) { return braid_model_n_vocab(v->bm); }
int32_t llama_n_vocab(const struct llama_vocab *v) { return llama_vocab_n_tokens(v); }
bool llama_vocab_is_eog(const struct llama_vocab *v, llama_token t) { return braid_token_is_eog(v->bm, t) != 0; }
llama_token llama_vocab_bos(const struct llama_vocab *v) { return braid_token_bos(v->bm); }
llama_token llama_vocab_eos(const struct llama_vocab *v) { return braid_token_eos(v->bm); }
llama_token llama_vocab_eot(const struct llama_vocab *v) { return braid_token_eot(v->bm); }

/* A special token id from the metadata ("tokenizer.ggml.<name>_token_id"), -1 when absent. */
static llama_token meta_token(const struct llama_vocab *v, const char *name) {
    char key[96], val[32];
    size_t n;
    snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", name);
    if (braid_model_meta_str(v->bm, key, val, sizeof val, &n) != BRAID_OK) return -1;
    return (llama_token)strtol(val, NULL, 10);
}

llama_token llama_vocab_sep(const struct llama_vocab *v) { return meta_token(v, "seperator"); }
llama_token llama_vocab_pad(const struct llama_vocab *v) { return meta_token(v, "padding"); }
llama_token llama_vocab_mask(const struct llama_vocab *v) { return meta_token(v, "mask"); }
llama_token llama_vocab_nl(const struct llama_vocab *v) {
    llama_token t[4];
    size_t n = 0;
    if (braid_tokenize(v->bm, "\n", 1, 0, 0, t, 4, &n) != BRAID_OK || n != 1) return -1;
    return t[0];
}

static bool meta_flag(const struct llama_vocab *v, const char *key, bool fallback) {
    char val[16];
    size_t n;
    if (braid_model_meta_str(v->bm, key, val, sizeof val, &n) != BRAID_OK) return fallback;
    return !strcmp(val, "true");
}

bool llama_vocab_get_add_bos(const struct llama_vocab *v) {
    return meta_flag(v, "tokenizer.ggml.add_bos_token", false);
}
bool llama_vocab_get_add_eos(const struct llama_vocab *v) {
    return meta_flag(v, "tokenizer.ggml.add_eos_token", false);
}
bool llama_vocab_get_add_sep(const struct llama_vocab *v) {
    return meta_flag(v, "tokenizer.ggml.add_sep_token", false);
}

int32_t llama_tokenize(const struct llama_vocab *v, const char *text, int32_t text_len, llama_token *tokens,
                       int32_t n_tokens_max, bool add_special, bool parse_special) {
    if (!v || (!text && text_len) || text_len < 0 || n_tokens_max < 0) {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_tokenize: invalid arguments\n");
        return INT32_MIN;
    }
    size_t n = 0;
    braid_status st = braid_tokenize(v->bm, text ? text : "", (size_t)text_len, add_special, parse_special, tokens,
                                     (size_t)n_tokens_max, &n);
    if (st == BRAID_E_RANGE) return n > (size_t)INT32_MAX ? INT32_MIN : -(int32_t)n;
    if (st != BRAID_OK) {
        shim_log_braid("llama_tokenize", st);
        return INT32_MIN;
    }
    return (int32_t)n;
}

int32_t llama_token_to_piece(const struct llama_vocab *v, llama_token token, char *buf, int32_t length,
                             int32_t lstrip, bool special) {
    char tmp[256];
    size_t n = 0;
    braid_status st = braid_token_to_piece(v->bm, token, special, tmp, sizeof tmp, &n);
    char *big = NULL;
    const char *src = tmp;
    if (st == BRAID_OK && n > sizeof tmp) {
        big = malloc(n);
        if (!big || braid_token_to_piece(v->bm, token, special, big, n, &n) != BRAID_OK) {
            free(big);
            return 0;
        }
        src = big;
    }
    if (st != BRAID_OK) {
        shim_log_braid("llama_token_to_piece", st);
        return 0;
    }
    while (lstrip > 0 && n > 0 && *src == ' ') {
        src++;
        n--;
        lstrip--;
    }
    int32_t r;
    if (n > (size_t)(length < 0 ? 0 : length)) {
        r = -(int32_t)n;
    } else {
        memcpy(buf, src, n);
        r = (int32_t)n;
    }
    free(big);
    return r;
}

int32_t llama_detokenize(const struct llama_vocab *v, const llama_token *tokens, int32_t n_tokens, char *text,
                         int32_t text_len_max, bool remove_special, bool unparse_special) {
    if (n_tokens < 0 || text_len_max < 0) return INT32_MIN;
    if (remove_special && n_tokens > 0 && llama_vocab_get_add_bos(v) && tokens[0] == llama_vocab_bos(v)) {
        tokens++;
        n_tokens--;
    }
    if (remove_special && n_tokens > 0 && llama_vocab_get_add_eos(v) && tokens[n_tokens - 1] == llama_vocab_eos(v))
        n_tokens--;
    char *out = NULL;
    size_t len = 0;
    braid_status st = braid_detokenize(v->bm, tokens, (size_t)n_tokens, unparse_special, &out, &len);
    if (st != BRAID_OK) {
        shim_log_braid("llama_detokenize", st);
        return INT32_MIN;
    }
    int32_t r;
    if (len > (size_t)text_len_max) {
        r = len > (size_t)INT32_MAX ? INT32_MIN : -(int32_t)len;
    } else {
        memcpy(text, out, len);
        r = (int32_t)len;
    }
    braid_free(out);
    return r;
}
