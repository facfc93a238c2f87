/* granitehybrid.c — IBM Granite-4.0-H (archs-more.md §3): Mamba2 layers (head_count_kv 0) and GQA attention
 * layers, each followed by a SwiGLU FFN (dense, or a softmax-routed MoE with an optional ungated SwiGLU shared
 * expert), with Granite's four µP scalars:
 *
 *     x = token_embd[tokens] · s_embedding
 *     for each layer: h = x + s_residual · Mixer(RMSNorm(x; attn_norm))   (attention q·k scaled by s_attention)
 *                     x = h + s_residual · FFN(RMSNorm(h; ffn_norm))
 *     logits = (W_out · RMSNorm(x; output_norm)) · (1 / s_logit)
 *
 * A scalar of 0 (or absent) means no scaling, as in llama.cpp. Granite-4.0-H has no positional encoding
 * (rope.scaling.finetuned false); files that ask for RoPE (the Bamba variant) are refused. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "base/status.h"
#include "models/arch.h"
#include "models/layers.h"
#include "models/loader.h"
#include "models/moe.h"
#include "tensor/ops.h"
#include "tensor/tap.h"

typedef struct gh_hparams {
    uint32_t n_ctx_train, n_embd, n_layer, n_vocab, n_ff;
    uint32_t n_head, n_head_kv, head_dim;
    float eps, s_embd, s_resid, s_attn, s_logit;
    layer_mamba2_shape ssm;
} gh_hparams;

typedef struct gh_layer {
    int recurrent, slot;
    bd_weight attn_norm, ffn_norm;
    layer_mamba2 mixer;
    layer_attn attn;
    layer_ffn ffn;
    moe_weights moe;
} gh_layer;

typedef struct granitehybrid {
    gh_hparams hp;
    moe_hparams moe;      /* n_expert 0: dense FFNs */
    layer_attn_shape ash;
    layer_map map;        /* Mamba2 layers recurrent, the rest attention */
    bd_weight tok_embd, output_norm, output;
    gh_layer *layers;
} granitehybrid;

static void gh_free(void *data) {
    granitehybrid *m = data;
    if (!m) return;
    layer_map_free(&m->map);
    bd_free(m->layers);
    bd_free(m);
}

static braid_status gh_load_hparams(granitehybrid *m, bd_loader *l) {
    gh_hparams *hp = &m->hp;
    BD_TRY(layer_base_keys(l, &hp->n_ctx_train, &hp->n_embd, &hp->n_layer));
    BD_TRY(bd_key_f32(l, "attention.layer_norm_rms_epsilon", 1, &hp->eps));
    BD_TRY(layer_mamba2_keys(l, &hp->ssm));
    hp->ssm.eps = hp->eps;
    BD_TRY(layer_mamba2_check("granitehybrid", &hp->ssm));
    if ((uint32_t)hp->ssm.d_inner != 2 * hp->n_embd) /* llama.cpp's loader asserts it */
        return bd_error(BRAID_E_FORMAT, "granitehybrid: ssm.inner_size %d != 2 * embedding_length %u", hp->ssm.d_inner,
                        hp->n_embd);
    BD_TRY(bd_key_f32(l, "embedding_scale", 0, &hp->s_embd));
    BD_TRY(bd_key_f32(l, "residual_scale", 0, &hp->s_resid));
    BD_TRY(bd_key_f32(l, "attention.scale", 0, &hp->s_attn));
    BD_TRY(bd_key_f32(l, "logit_scale", 0, &hp->s_logit));
    char key[96];
    int rope = 1; /* llama.cpp's default: RoPE on unless the file says the model was not fine-tuned with it */
    snprintf(key, sizeof key, "%srope.scaling.finetuned", l->arch);
    BD_TRY(gguf_get_bool(l->f, key, 0, &rope));
    if (rope) return bd_error(BRAID_E_UNSUPPORTED, "granitehybrid: RoPE (rope.scaling.finetuned true) is not supported");
    BD_TRY(bd_key_u32(l, "feed_forward_length", 1, &hp->n_ff));
    BD_TRY(bd_key_u32(l, "attention.head_count", 1, &hp->n_head));
    if (hp->n_ff == 0 || hp->n_ff > (1u << 24) || hp->n_head == 0 || hp->n_head > 4096)
        return bd_error(BRAID_E_FORMAT, "granitehybrid: bad feed_forward_length %u / head_count %u", hp->n_ff,
                        hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    BD_TRY(bd_key_u32(l, "attention.key_length", 0, &hp->head_dim));
    if (hp->head_dim == 0 || hp->head_dim > 4096) return bd_error(BRAID_E_FORMAT, "granitehybrid: bad head size");

    uint32_t *kv = bd_calloc(hp->n_layer, sizeof *kv);
    braid_status st = kv ? layer_map_init(&m->map, "granitehybrid", hp->n_layer)
                         : bd_error(BRAID_E_NOMEM, "granitehybrid: out of memory");
    int found = 0;
    if (st == BRAID_OK) st = bd_key_u32_per_layer(l, "attention.head_count_kv", hp->n_layer, 1, kv, &found);
    for (uint32_t i = 0; st == BRAID_OK && i < hp->n_layer; i++) {
        m->map.kind[i] = kv[i] == 0 ? LAYER_MEM_RECR : LAYER_MEM_ATTN;
        if (!kv[i]) continue;
        if (hp->n_head_kv && kv[i] != hp->n_head_kv)
            st = bd_error(BRAID_E_UNSUPPORTED, "granitehybrid: attention layers differ in kv heads");
        hp->n_head_kv = kv[i];
    }
    bd_free(kv);
    BD_TRY(st);
    if (hp->n_head_kv && hp->n_head % hp->n_head_kv)
        return bd_error(BRAID_E_FORMAT, "granitehybrid: head_count %u is not a multiple of kv heads %u", hp->n_head,
                        hp->n_head_kv);
    m->ash = (layer_attn_shape){.n_head = (int32_t)hp->n_head, .n_head_kv = (int32_t)hp->n_head_kv,
                                .head_dim = (int32_t)hp->head_dim, .n_pos = 1, .eps = hp->eps, .scale = hp->s_attn};

    uint32_t n_expert = 0;
    BD_TRY(bd_key_u32(l, "expert_count", 0, &n_expert));
    if (!n_expert) return BRAID_OK;
    /* MoE: feed_forward_length is the expert width; softmax, renormalized, never scaled; a shared SwiGLU
     * expert, ungated, when expert_shared_feed_forward_length > 0 */
    uint32_t n_shexp = 0;
    BD_TRY(bd_key_u32(l, "expert_shared_feed_forward_length", 0, &n_shexp));
    BD_TRY(moe_load_hparams(l, hp->n_layer, hp->n_layer, hp->n_ff * n_expert, &m->moe));
    m->moe.n_ff_exp = hp->n_ff;
    m->moe.n_ff_shexp = n_shexp;
    m->moe.shexp = n_shexp ? MOE_SHEXP_PLAIN : MOE_SHEXP_NONE;
    return BRAID_OK;
}

static braid_status gh_bind(granitehybrid *m, bd_loader *l) {
    const gh_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab;
    BD_TRY(layer_bind_io(l, E, V, "output_norm.weight", &m->tok_embd, &m->output_norm, &m->output));
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        gh_layer *L = &m->layers[il];
        L->recurrent = m->map.kind[il] == LAYER_MEM_RECR;
        BD_TRY(bd_bind_layer(l, (int)il, "attn_norm.weight", E, 1, 1, 1, &L->attn_norm));
        BD_TRY(bd_bind_layer(l, (int)il, "ffn_norm.weight", E, 1, 1, 1, &L->ffn_norm));
        if (L->recurrent) BD_TRY(layer_mamba2_bind(l, (int)il, E, &hp->ssm, 1, &L->mixer));
        else BD_TRY(layer_attn_bind(l, (int)il, E, &m->ash, LAYER_QK_NORM_NONE, LAYER_OUT_BIAS_OPTIONAL, &L->attn));
        if (m->moe.n_expert) BD_TRY(moe_bind(l, (int)il, E, &m->moe, &L->moe));
        else BD_TRY(layer_ffn_bind(l, (int)il, E, hp->n_ff, 1, 1, &L->ffn));
    }
    return bd_loader_finish(l, (int)hp->n_layer);
}

static braid_status gh_load(const gguf_file *f, int32_t n_vocab, void **data, bd_mem_layout *layout) {
    granitehybrid *m = bd_calloc(1, sizeof *m);
    if (!m) return bd_error(BRAID_E_NOMEM, "granitehybrid: out of memory");
    bd_loader l;
    braid_status st = bd_loader_init(&l, f, "granitehybrid");
    if (st == BRAID_OK) st = gh_load_hparams(m, &l);
    if (st == BRAID_OK && n_vocab <= 0) st = bd_error(BRAID_E_FORMAT, "granitehybrid: the vocabulary is empty");
    const gh_hparams *hp = &m->hp;
    if (st == BRAID_OK) {
        m->hp.n_vocab = (uint32_t)n_vocab;
        m->layers = bd_calloc(hp->n_layer, sizeof *m->layers);
        if (!m->layers) st = bd_error(BRAID_E_NOMEM, "granitehybrid: out of memory");
    }
    if (st == BRAID_OK) st = gh_bind(m, &l);
    bd_loader_free(&l);
    if (st == BRAID_OK)
        st = layer_map_layout(&m->map, "granitehybrid", hp->n_layer, 1, &m->hp, sizeof m->hp, &m->moe, sizeof m->moe,
                              layout);
    if (st != BRAID_OK) {
        gh_free(m);
        return st;
    }
    for (uint32_t il = 0; il < hp->n_layer; il++) m->layers[il].slot = m->map.slot[il];
    layout->n_embd_k = (int32_t)(hp->head_dim * hp->n_head_kv);
    layout->n_embd_v = layout->n_embd_k;
    layout->n_conv = layer_mamba2_n_conv(&hp->ssm);
    layout->n_ssm = layer_mamba2_n_ssm(&hp->ssm);
    *data = m;
    return BRAID_OK;
}

static int32_t gh_n_embd(const void *data) { return (int32_t)((const granitehybrid *)data)->hp.n_embd; }

static void gh_hparams_bytes(const void *data, const void **bytes, size_t *len) {
    layer_map_fingerprint(&((const granitehybrid *)data)->map, bytes, len);
}

typedef struct gh_scratch {
    float *x, *u, *f;     /* [T][n_embd] residual stream, normed input / mixer output, FFN output */
    float *ff_g, *ff_u;   /* [T][n_ff] */
    void *moe;
    layer_mamba2_scratch mix;
    layer_attn_scratch att;
    void *wbuf;
} gh_scratch;

static void gh_carve(const granitehybrid *m, bd_arena *a, int32_t T, int32_t n_ctx, int32_t n_threads, gh_scratch *s) {
    const gh_hparams *hp = &m->hp;
    s->x = bd_arena_floats(a, (size_t)T * hp->n_embd);
    s->u = bd_arena_floats(a, (size_t)T * hp->n_embd);
    s->f = bd_arena_floats(a, (size_t)T * hp->n_embd);
    s->ff_g = bd_arena_floats(a, (size_t)T * hp->n_ff);
    s->ff_u = bd_arena_floats(a, (size_t)T * hp->n_ff);
    s->moe = m->moe.n_expert ? bd_arena_take(a, moe_scratch_size(&m->moe, hp->n_embd, T)) : NULL;
    layer_mamba2_carve(a, &hp->ssm, T, &s->mix);
    layer_attn_carve(a, &m->ash, T, n_ctx, n_threads, &s->att);
    size_t w = blk_matmul_wsize(m->output.type, m->output.n_in, T);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const gh_layer *L = &m->layers[il];
        const size_t a1 = L->recurrent ? layer_mamba2_wsize(&L->mixer, T) : layer_attn_wsize(&L->attn, T);
        const size_t a2 = m->moe.n_expert ? moe_wsize(&L->moe, T) : layer_ffn_wsize(&L->ffn, T);
        if (a1 > w) w = a1;
        if (a2 > w) w = a2;
    }
    s->wbuf = bd_arena_take(a, w);
}

static size_t gh_scratch_size(const void *data, int32_t n_batch, int32_t n_ctx, int32_t n_threads) {
    gh_scratch s;
    bd_arena a = bd_arena_at(NULL);
    gh_carve(data, &a, n_batch, n_ctx, n_threads, &s);
    return bd_arena_size(&a);
}

/* x += v · s (s == 0: x += v), one op per element as ggml_scale then ggml_add. */
static void add_scaled(float *x, const float *v, float s, int64_t n) {
    if (s == 0.0f) bd_add(x, x, v, n);
    else
        for (int64_t i = 0; i < n; i++) x[i] += v[i] * s;
}

static braid_status gh_forward(const void *data, const bd_fwd_scratch *sc, bd_threadpool *tp, const bd_fwd_batch *b,
                               const bd_fwd_memory *mem, float *logits) {
    const granitehybrid *m = data;
    const gh_hparams *hp = &m->hp;
    const int32_t T = b->n, E = (int32_t)hp->n_embd;
    gh_scratch s;
    bd_arena a = bd_arena_at(sc->base);
    gh_carve(m, &a, sc->n_batch, sc->n_ctx, sc->n_threads, &s);
    assert(T <= sc->n_batch);

    layer_embed(b, &m->tok_embd, E, s.x);
    if (hp->s_embd != 0.0f)
        for (int64_t i = 0; i < (int64_t)T * E; i++) s.x[i] *= hp->s_embd;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        if (bd_fwd_cancelled(sc)) return bd_error(BRAID_E_CANCELLED, "decode cancelled by the abort callback");
        const gh_layer *L = &m->layers[il];
        for (int32_t t = 0; t < T; t++)
            bd_rmsnorm(s.u + (size_t)t * E, s.x + (size_t)t * E, L->attn_norm.data, E, hp->eps);
        bd_tap("attn_norm", (int)il, s.u, E, T, E);
        if (L->recurrent) layer_mamba2_mix(tp, &L->mixer, &hp->ssm, &s.mix, s.wbuf, b, mem, L->slot, (int)il, s.u, s.u);
        else layer_attention(tp, &L->attn, &m->ash, &s.att, s.wbuf, b, mem, L->slot, (int)il, s.u, s.u);
        add_scaled(s.x, s.u, hp->s_resid, (int64_t)T * E);
        bd_tap("ffn_inp", (int)il, s.x, E, T, E);
        for (int32_t t = 0; t < T; t++)
            bd_rmsnorm(s.u + (size_t)t * E, s.x + (size_t)t * E, L->ffn_norm.data, E, hp->eps);
        bd_tap("ffn_norm", (int)il, s.u, E, T, E);
        if (m->moe.n_expert) moe_ffn(tp, &m->moe, &L->moe, s.u, E, T, s.f, s.moe, s.wbuf, (int)il);
        else layer_ffn_swiglu(tp, &L->ffn, s.u, T, s.f, s.ff_g, s.ff_u, s.wbuf, (int)il);
        add_scaled(s.x, s.f, hp->s_resid, (int64_t)T * E);
        bd_tap("l_out", (int)il, s.x, E, T, E);
    }
    const int32_t n_out = layer_logits(tp, b, &m->output_norm, &m->output, hp->eps, s.x, E, s.u, s.wbuf, logits);
    if (hp->s_logit != 0.0f && n_out) {
        const float inv = 1.0f / hp->s_logit;
        int32_t first = -1;
        for (int32_t t = 0; t < T && first < 0; t++) first = b->out[t];
        float *lg = logits + (size_t)first * hp->n_vocab;
        for (int64_t i = 0; i < (int64_t)n_out * hp->n_vocab; i++) lg[i] *= inv;
    }
    return BRAID_OK;
}

const bd_arch bd_arch_granitehybrid = {
    .name = "granitehybrid",
    .load = gh_load,
    .free_data = gh_free,
    .n_embd = gh_n_embd,
    .hparams_bytes = gh_hparams_bytes,
    .scratch_size = gh_scratch_size,
    .forward = gh_forward,
    .rerotate_k = NULL, /* NoPE */
};
