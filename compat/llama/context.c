/* context.c — llama.h's context, batch and decode calls over braid_context: parameters and their mapping
 * (what braid cannot honour is refused with a logged reason, never ignored when it changes results), the
 * batch helpers, llama_decode with llama.cpp's return codes, the logits getters and the perf counters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

struct llama_context_params llama_context_default_params(void) {
    struct llama_context_params p;
    memset(&p, 0, sizeof p);
    /* llama.cpp's defaults, so that a program that changes one field gets what it would get there. */
    p.n_ctx = 512;
    p.n_batch = 2048;
    p.n_ubatch = 512;
    p.n_seq_max = 1;
    p.n_outputs_max_per_seq = 1;
    p.n_threads = p.n_threads_batch = GGML_DEFAULT_N_THREADS;
    p.ctx_type = LLAMA_CONTEXT_TYPE_DEFAULT;
    p.rope_scaling_type = LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED;
    p.pooling_type = LLAMA_POOLING_TYPE_UNSPECIFIED;
    p.attention_type = LLAMA_ATTENTION_TYPE_UNSPECIFIED;
    p.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    p.yarn_ext_factor = p.yarn_attn_factor = p.yarn_beta_fast = p.yarn_beta_slow = -1.0f;
    p.defrag_thold = -1.0f;
    p.type_k = p.type_v = GGML_TYPE_F16;
    p.offload_kqv = p.op_offload = p.swa_full = true;
    p.no_perf = true;
    return p;
}

static int shim_abort(void *user) {
    struct llama_context *c = user;
    return c->abort_cb && c->abort_cb(c->abort_data);
}

/* Refuses what braid cannot do as asked; returns NULL or the reason. */
static const char *unsupported(const struct llama_context_params *p) {
    if (p->ctx_type != LLAMA_CONTEXT_TYPE_DEFAULT) return "ctx_type MTP (braid has no MTP context yet)";
    if (p->embeddings) return "embeddings output";
    if (p->type_k != p->type_v) return "different K and V cache types";
    if (p->type_k != GGML_TYPE_F16 && p->type_k != GGML_TYPE_F32) return "a K/V cache type other than F16 or F32";
    if (p->rope_freq_base != 0.0f || p->rope_freq_scale != 0.0f) return "RoPE frequency overrides";
    if (p->rope_scaling_type != LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED &&
        p->rope_scaling_type != LLAMA_ROPE_SCALING_TYPE_NONE)
        return "RoPE scaling";
    if (p->samplers && p->n_samplers) return "backend samplers";
    if (p->ctx_other) return "ctx_other";
    if (p->n_batch == 0 || p->n_ubatch == 0 || p->n_seq_max == 0) return "a zero n_batch, n_ubatch or n_seq_max";
    return NULL;
}

struct llama_context *llama_init_from_model(struct llama_model *model, struct llama_context_params params) {
    if (!model) return NULL;
    const char *why = unsupported(&params);
    if (why) {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_init_from_model: braid does not support %s\n", why);
        return NULL;
    }
    if (params.cb_eval)
        shim_log(GGML_LOG_LEVEL_WARN, "llama_init_from_model: cb_eval is not called: braid's forward pass is not a "
                                      "ggml graph\n");
    struct llama_context *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->model = model;
    c->mem.ctx = c;
    c->n_vocab = braid_model_n_vocab(model->bm);
    c->abort_cb = params.abort_callback;
    c->abort_data = params.abort_callback_data;
    braid_context_params bp = braid_context_default_params();
    uint32_t n_ctx = params.n_ctx;
    if (n_ctx == 0) {
        int32_t train = llama_model_n_ctx_train(model);
        n_ctx = train > 0 ? (uint32_t)train : 4096;
        if (n_ctx > BRAID_MAX_CTX) n_ctx = BRAID_MAX_CTX;
    }
    bp.n_ctx = n_ctx;
    bp.n_seq_max = params.n_seq_max;
    bp.n_batch = params.n_ubatch < params.n_batch ? params.n_ubatch : params.n_batch;
    bp.n_threads = params.n_threads_batch > params.n_threads ? (uint32_t)params.n_threads_batch
                                                              : (uint32_t)(params.n_threads > 0 ? params.n_threads : 0);
    if (params.n_rs_seq) bp.n_rollback = params.n_rs_seq;
    bp.kv_type = params.type_k == GGML_TYPE_F32 ? BRAID_TYPE_F32 : BRAID_TYPE_F16;
    bp.abort_callback = shim_abort;
    bp.abort_user = c;
    params.n_ctx = n_ctx;
    c->params = params;
    braid_status st = braid_context_new(model->bm, &bp, &c->bc);
    if (st != BRAID_OK) {
        shim_log_braid("llama_init_from_model", st);
        free(c);
        return NULL;
    }
    c->t_start_ms = (double)shim_time_us() / 1000.0;
    return c;
}

struct llama_context *llama_new_context_with_model(struct llama_model *model, struct llama_context_params params) {
    return llama_init_from_model(model, params);
}

void llama_free(struct llama_context *c) {
    if (!c) return;
    braid_context_free(c->bc);
    free(c->out_rows);
    free(c->packed);
    free(c);
}

uint32_t llama_n_ctx(const struct llama_context *c) { return c->params.n_ctx; }
uint32_t llama_n_ctx_seq(const struct llama_context *c) { return c->params.n_ctx; }
uint32_t llama_n_batch(const struct llama_context *c) { return c->params.n_batch; }
uint32_t llama_n_ubatch(const struct llama_context *c) { return c->params.n_ubatch; }
uint32_t llama_n_seq_max(const struct llama_context *c) { return c->params.n_seq_max; }
uint32_t llama_n_rs_seq(const struct llama_context *c) { return c->params.n_rs_seq; }
const struct llama_model *llama_get_model(const struct llama_context *c) { return c->model; }
int32_t llama_n_threads(struct llama_context *c) { return c->params.n_threads; }
int32_t llama_n_threads_batch(struct llama_context *c) { return c->params.n_threads_batch; }
void llama_synchronize(struct llama_context *c) { (void)c; }

void llama_set_n_threads(struct llama_context *c, int32_t n_threads, int32_t n_threads_batch) {
    if (n_threads == c->params.n_threads && n_threads_batch == c->params.n_threads_batch) return;
    if (!c->warned_threads)
        shim_log(GGML_LOG_LEVEL_WARN, "llama_set_n_threads: braid fixes its thread count when the context is made; "
                                      "keeping %d\n", c->params.n_threads);
    c->warned_threads = 1;
}

void llama_set_abort_callback(struct llama_context *c, ggml_abort_callback cb, void *data) {
    c->abort_cb = cb;
    c->abort_data = data;
}

/* ---- batches ------------------------------------------------------------------------------------------ */

struct llama_batch llama_batch_get_one(llama_token *tokens, int32_t n_tokens) {
    struct llama_batch b;
    memset(&b, 0, sizeof b);
    b.n_tokens = n_tokens;
    b.token = tokens;
    return b;
}

struct llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max) {
    struct llama_batch b;
    memset(&b, 0, sizeof b);
    if (n_tokens <= 0 || embd < 0 || n_seq_max <= 0) return b;
    size_t n = (size_t)n_tokens;
    if (embd) b.embd = malloc(sizeof *b.embd * n * (size_t)embd);
    else b.token = malloc(sizeof *b.token * n);
    b.pos = malloc(sizeof *b.pos * n);
    b.n_seq_id = malloc(sizeof *b.n_seq_id * n);
    b.seq_id = calloc(n + 1, sizeof *b.seq_id); /* NULL-terminated, as llama_batch_free expects */
    b.logits = malloc(n);
    int ok = (embd ? b.embd != NULL : b.token != NULL) && b.pos && b.n_seq_id && b.seq_id && b.logits;
    for (size_t i = 0; ok && i < n; i++) {
        b.seq_id[i] = malloc(sizeof **b.seq_id * (size_t)n_seq_max);
        ok = b.seq_id[i] != NULL;
    }
    if (!ok) {
        llama_batch_free(b);
        memset(&b, 0, sizeof b);
    }
    return b;
}

void llama_batch_free(struct llama_batch b) {
    free(b.token);
    free(b.embd);
    free(b.pos);
    free(b.n_seq_id);
    if (b.seq_id)
        for (size_t i = 0; b.seq_id[i]; i++) free(b.seq_id[i]);
    free(b.seq_id);
    free(b.logits);
}

/* ---- decode ------------------------------------------------------------------------------------------- */

static int grow_out(struct llama_context *c, int32_t n) {
    if (n <= c->cap_out) return 1;
    int32_t *p = realloc(c->out_rows, sizeof *p * (size_t)n);
    if (!p) return 0;
    c->out_rows = p;
    c->cap_out = n;
    return 1;
}

int32_t llama_decode(struct llama_context *c, struct llama_batch batch) {
    const int32_t n = batch.n_tokens;
    const int32_t n_pos = braid_model_n_pos_per_token(c->model->bm);
    if (n <= 0 || (!batch.token == !batch.embd)) {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_decode: a batch needs n_tokens > 0 and either tokens or embd\n");
        return -1;
    }
    if ((uint32_t)n > c->params.n_batch) {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_decode: %d tokens exceed n_batch %u\n", n, c->params.n_batch);
        return -1;
    }
    braid_seq_id *seq = NULL;
    braid_pos *pos = NULL;
    uint8_t *flags = malloc((size_t)n);
    int32_t rc = -1;
    if (!flags) return -3;
    if (batch.seq_id) {
        seq = malloc(sizeof *seq * (size_t)n);
        if (!seq) goto done;
        for (int32_t i = 0; i < n; i++) {
            if (batch.n_seq_id && batch.n_seq_id[i] != 1) {
                /* braid's inputs belong to one sequence each; a shared prefix is decoded once and copied. */
                shim_log(GGML_LOG_LEVEL_ERROR, "llama_decode: token %d is in %d sequences; braid takes one per token "
                                               "(decode it in one and use llama_memory_seq_cp)\n",
                         i, batch.n_seq_id[i]);
                goto done;
            }
            seq[i] = batch.seq_id[i][0];
        }
    }
    if (batch.pos) {
        pos = malloc(sizeof *pos * (size_t)n * (size_t)n_pos);
        if (!pos) goto done;
        for (int32_t i = 0; i < n; i++) {
            if (n_pos == 1) {
                pos[i] = batch.pos[i];
            } else if (batch.token) {
                /* A text token of an M-RoPE model is at (p, p, p, 0), as llama.cpp lays it out. */
                pos[i * 4 + 0] = pos[i * 4 + 1] = pos[i * 4 + 2] = batch.pos[i];
                pos[i * 4 + 3] = 0;
            } else {
                /* Embedding rows carry n_pos components, stored one component after another (llama.cpp). */
                for (int32_t k = 0; k < n_pos; k++) pos[i * n_pos + k] = batch.pos[(size_t)k * (size_t)n + (size_t)i];
            }
        }
    }
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++) {
        flags[i] = batch.logits ? batch.logits[i] != 0 : i == n - 1; /* no flags: the last token only */
        n_out += flags[i];
    }
    if (!grow_out(c, n_out)) {
        rc = -3;
        goto done;
    }
    braid_batch bb = {n, batch.token, batch.embd, pos, seq, flags};
    int64_t t0 = shim_time_us();
    braid_status st = braid_decode(c->bc, &bb);
    if (st != BRAID_OK) {
        switch (st) {
        case BRAID_E_FULL: rc = 1; break;
        case BRAID_E_CANCELLED: rc = 2; break;
        case BRAID_E_INVALID: case BRAID_E_RANGE: rc = -1; break;
        default: rc = -3; break;
        }
        shim_log_braid("llama_decode", st);
        c->n_out = 0; /* braid keeps no logits of an earlier decode after a failed one */
        c->packed_valid = 0;
        goto done;
    }
    double ms = (double)(shim_time_us() - t0) / 1000.0;
    if (n == 1) {
        c->t_eval_ms += ms;
        c->n_eval += 1;
    } else {
        c->t_p_eval_ms += ms;
        c->n_p_eval += n;
    }
    c->n_out = 0;
    for (int32_t i = 0; i < n; i++)
        if (flags[i]) c->out_rows[c->n_out++] = i;
    c->n_batch_rows = n;
    c->packed_valid = 0;
    rc = 0;
done:
    free(flags);
    free(seq);
    free(pos);
    return rc;
}

int32_t llama_encode(struct llama_context *c, struct llama_batch batch) {
    (void)c;
    (void)batch;
    shim_log(GGML_LOG_LEVEL_ERROR, "llama_encode: braid runs decoder-only models\n");
    return -1;
}

float *llama_get_logits_ith(struct llama_context *c, int32_t i) {
    int32_t row = i;
    if (i < 0) {
        if (-i > c->n_out) goto bad;
        row = c->out_rows[c->n_out + i];
    }
    /* The pointer is into braid's buffer; llama.h hands out a mutable one and some programs edit the row. */
    const float *l = braid_logits(c->bc, row);
    if (l) return (float *)l;
bad:
    shim_log(GGML_LOG_LEVEL_ERROR, "llama_get_logits_ith: no logits for row %d of the last decode\n", i);
    return NULL;
}

float *llama_get_logits(struct llama_context *c) {
    if (c->n_out == 0) return NULL;
    if (!c->packed_valid) {
        float *p = realloc(c->packed, sizeof *p * (size_t)c->n_out * (size_t)c->n_vocab);
        if (!p) return NULL;
        c->packed = p;
        for (int32_t j = 0; j < c->n_out; j++)
            memcpy(p + (size_t)j * (size_t)c->n_vocab, braid_logits(c->bc, c->out_rows[j]),
                   sizeof *p * (size_t)c->n_vocab);
        c->packed_valid = 1;
    }
    return c->packed;
}

/* ---- performance counters ----------------------------------------------------------------------------- */

struct llama_perf_context_data llama_perf_context(const struct llama_context *c) {
    struct llama_perf_context_data d;
    memset(&d, 0, sizeof d);
    d.t_start_ms = c->t_start_ms;
    d.t_load_ms = c->model->t_load_ms;
    d.t_p_eval_ms = c->t_p_eval_ms;
    d.t_eval_ms = c->t_eval_ms;
    d.n_p_eval = c->n_p_eval;
    d.n_eval = c->n_eval;
    return d;
}

void llama_perf_context_print(const struct llama_context *c) {
    struct llama_perf_context_data d = llama_perf_context(c);
    shim_log(GGML_LOG_LEVEL_NONE, "braid_perf_context_print:        load time = %10.2f ms\n", d.t_load_ms);
    shim_log(GGML_LOG_LEVEL_NONE, "braid_perf_context_print: prompt eval time = %10.2f ms / %5d tokens (%8.2f tokens per second)\n",
             d.t_p_eval_ms, d.n_p_eval, d.t_p_eval_ms > 0 ? 1e3 * d.n_p_eval / d.t_p_eval_ms : 0.0);
    shim_log(GGML_LOG_LEVEL_NONE, "braid_perf_context_print:        eval time = %10.2f ms / %5d runs   (%8.2f tokens per second)\n",
             d.t_eval_ms, d.n_eval, d.t_eval_ms > 0 ? 1e3 * d.n_eval / d.t_eval_ms : 0.0);
}

void llama_perf_context_reset(struct llama_context *c) {
    c->t_start_ms = (double)shim_time_us() / 1000.0;
    c->t_p_eval_ms = c->t_eval_ms = 0;
    c->n_p_eval = c->n_eval = 0;
}
