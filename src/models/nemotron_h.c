/* nemotron_h.c — NVIDIA Nemotron-H (architectures.md §2.3) and Nemotron-3 Nano (nemotron_h_moe, archs-more.md
 * §2): three kinds of layer, each behind an RMSNorm with a residual, told apart by the per-layer arrays
 * (head_count_kv, feed_forward_length):
 *
 *     Mamba2 mixer        n_head_kv == 0 && n_ff == 0     (layers.h layer_mamba2_mix)
 *     attention           n_head_kv  > 0 && n_ff == 0     (plain GQA: no RoPE, no Q/K norm, optional biases)
 *     MLP                 n_ff > 0                        (W_down·relu(W_up·x)², optional biases), or with
 *                                                         expert_count > 0 the MoE of moe.h: sigmoid routing
 *                                                         with a selection bias, relu² experts, a relu² shared
 *                                                         expert (nemotron_h_moe's MTP block is skipped)
 *
 *     x = token_embd[tokens]; for each layer: x = x + Block(RMSNorm(x; attn_norm))
 *     logits = W_out · RMSNorm(x; output_norm)
 *
 * Mamba2 layers keep a recurrent state, attention layers K/V rows, MLP layers nothing. Without RoPE a K row
 * does not depend on its position, so a context shift re-rotates nothing (rerotate_k NULL). */
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

enum { NH_MAMBA = 0, NH_ATTN = 1, NH_MLP = 2, NH_MOE = 3 };

typedef struct nh_hparams {
    uint32_t n_ctx_train, n_embd, n_layer_all, n_layer, n_vocab;
    uint32_t n_head, n_head_kv, head_dim, n_ff_max;
    float eps;
    layer_mamba2_shape ssm;
} nh_hparams;

typedef struct nh_layer {
    int kind;            /* NH_* */
    int slot;            /* among attention or among recurrent layers */
    bd_weight attn_norm; /* [n_embd] */
    layer_mamba2 mixer;
    layer_attn attn;
    layer_ffn ffn;       /* up, down (+ biases) */
    moe_weights moe;
} nh_layer;

typedef struct nemotron_h {
    const char *name;      /* "nemotron_h" or "nemotron_h_moe" */
    nh_hparams hp;
    moe_hparams moe;       /* MoE layers (expert_count > 0) */
    layer_attn_shape ash;
    uint8_t *kinds;        /* [n_layer] NH_* */
    layer_map map;         /* Mamba2 layers recurrent, attention layers attention, MLP / MoE layers neither */
    bd_weight tok_embd, output_norm, output;
    nh_layer *layers;      /* [n_layer] */
} nemotron_h;

static void nh_free(void *data) {
    nemotron_h *m = data;
    if (!m) return;
    bd_free(m->kinds);
    layer_map_free(&m->map);
    bd_free(m->layers);
    bd_free(m);
}

static braid_status nh_load_hparams(nemotron_h *m, bd_loader *l) {
    nh_hparams *hp = &m->hp;
    BD_TRY(layer_base_keys(l, &hp->n_ctx_train, &hp->n_embd, &hp->n_layer_all));
    uint32_t nextn = 0; /* nemotron_h_moe's MTP block: bound as skipped, never run */
    BD_TRY(bd_key_u32(l, "nextn_predict_layers", 0, &nextn));
    if (nextn >= hp->n_layer_all)
        return bd_error(BRAID_E_FORMAT, "%s: nextn_predict_layers %u >= block_count %u", m->name, nextn,
                        hp->n_layer_all);
    hp->n_layer = hp->n_layer_all - nextn;
    /* RMSNorms use layer_norm_rms_epsilon when present, else the required layer_norm_epsilon */
    BD_TRY(bd_key_f32(l, "attention.layer_norm_epsilon", 1, &hp->eps));
    BD_TRY(bd_key_f32(l, "attention.layer_norm_rms_epsilon", 0, &hp->eps));
    BD_TRY(layer_mamba2_keys(l, &hp->ssm));
    hp->ssm.eps = hp->eps;
    BD_TRY(layer_mamba2_check("nemotron_h", &hp->ssm));

    const uint32_t L = hp->n_layer, LA = hp->n_layer_all;
    uint32_t *ff = bd_calloc(LA, sizeof *ff), *kv = bd_calloc(LA, sizeof *kv), *nh = bd_calloc(LA, sizeof *nh);
    m->kinds = bd_calloc(L, 1);
    uint32_t n_expert = 0, n_ff_moe = 0;
    braid_status st = ff && kv && nh && m->kinds ? BRAID_OK : bd_error(BRAID_E_NOMEM, "nemotron_h: out of memory");
    int found;
    if (st == BRAID_OK) st = bd_key_u32(l, "expert_count", 0, &n_expert);
    if (st == BRAID_OK) st = bd_key_u32_per_layer(l, "feed_forward_length", LA, 0, ff, &found);
    if (st == BRAID_OK) st = bd_key_u32_per_layer(l, "attention.head_count_kv", LA, 0, kv, &found);
    if (st == BRAID_OK) st = bd_key_u32_per_layer(l, "attention.head_count", LA, 0, nh, &found);
    for (uint32_t i = 0; st == BRAID_OK && i < L; i++) {
        m->kinds[i] = ff[i] > 0 ? (n_expert ? NH_MOE : NH_MLP) : kv[i] > 0 ? NH_ATTN : NH_MAMBA;
        if (m->kinds[i] == NH_MOE && !n_ff_moe) n_ff_moe = ff[i];
        if (m->kinds[i] == NH_MLP && ff[i] > hp->n_ff_max) hp->n_ff_max = ff[i];
        if (m->kinds[i] != NH_ATTN) continue;
        /* braid's K/V rows are one width: every attention layer must agree */
        if (hp->n_head_kv && (kv[i] != hp->n_head_kv || nh[i] != hp->n_head))
            st = bd_error(BRAID_E_UNSUPPORTED, "nemotron_h: attention layers differ in heads (%u/%u vs %u/%u)",
                          nh[i], kv[i], hp->n_head, hp->n_head_kv);
        hp->n_head = nh[i], hp->n_head_kv = kv[i];
    }
    bd_free(ff), bd_free(kv), bd_free(nh);
    BD_TRY(st);
    if (hp->n_ff_max > (1u << 24)) return bd_error(BRAID_E_FORMAT, "nemotron_h: feed_forward_length out of range");
    if (hp->n_head_kv) {
        if (hp->n_head == 0 || hp->n_head > 4096 || hp->n_head % hp->n_head_kv)
            return bd_error(BRAID_E_FORMAT, "nemotron_h: attention heads %u must be a multiple of kv heads %u",
                            hp->n_head, hp->n_head_kv);
        hp->head_dim = hp->n_embd / hp->n_head;
        BD_TRY(bd_key_u32(l, "attention.key_length", 0, &hp->head_dim));
        uint32_t vlen = hp->head_dim;
        BD_TRY(bd_key_u32(l, "attention.value_length", 0, &vlen));
        if (hp->head_dim == 0 || hp->head_dim > 4096 || vlen != hp->head_dim)
            return bd_error(BRAID_E_UNSUPPORTED, "nemotron_h: key_length %u / value_length %u", hp->head_dim, vlen);
    }
    m->ash = (layer_attn_shape){.n_head = (int32_t)hp->n_head, .n_head_kv = (int32_t)hp->n_head_kv,
                                .head_dim = (int32_t)hp->head_dim, .n_pos = 1, .eps = hp->eps};
    if (!n_expert) return BRAID_OK;
    /* MoE (archs-more.md §2.1): sigmoid routing with a selection bias, relu² experts and shared expert */
    BD_TRY(moe_load_hparams(l, LA, L, n_ff_moe, &m->moe));
    m->moe.sigmoid = 1, m->moe.relu2 = 1, m->moe.norm_w = 0, m->moe.w_scale = 0.0f, m->moe.shexp = MOE_SHEXP_PLAIN;
    m->moe.sel_bias = 1;
    char key[96];
    int norm = 0;
    snprintf(key, sizeof key, "%sexpert_weights_norm", l->arch);
    BD_TRY(gguf_get_bool(l->f, key, 0, &norm));
    m->moe.norm_w = norm != 0;
    BD_TRY(bd_key_f32(l, "expert_weights_scale", 0, &m->moe.w_scale));
    uint32_t latent = 0;
    BD_TRY(bd_key_u32(l, "moe_latent_size", 0, &latent));
    if (latent) return bd_error(BRAID_E_UNSUPPORTED, "%s: latent MoE projections (moe_latent_size %u)", m->name, latent);
    return BRAID_OK;
}

static braid_status nh_bind(nemotron_h *m, bd_loader *l, const uint32_t *ff) {
    const nh_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab;
    BD_TRY(layer_bind_io(l, E, V, "output_norm.weight", &m->tok_embd, &m->output_norm, &m->output));
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        nh_layer *L = &m->layers[il];
        L->kind = m->kinds[il];
        BD_TRY(bd_bind_layer(l, (int)il, "attn_norm.weight", E, 1, 1, 1, &L->attn_norm));
        if (L->kind == NH_MAMBA) BD_TRY(layer_mamba2_bind(l, (int)il, E, &hp->ssm, 1, &L->mixer));
        else if (L->kind == NH_ATTN)
            BD_TRY(layer_attn_bind(l, (int)il, E, &m->ash, LAYER_QK_NORM_NONE, LAYER_OUT_BIAS_OPTIONAL, &L->attn));
        else if (L->kind == NH_MOE) BD_TRY(moe_bind(l, (int)il, E, &m->moe, &L->moe));
        else BD_TRY(layer_ffn_bind(l, (int)il, E, ff[il], 0, 1, &L->ffn));
    }
    return bd_loader_finish(l, (int)hp->n_layer);
}

static braid_status nh_load(const gguf_file *f, int32_t n_vocab, const char *name, void **data,
                            bd_mem_layout *layout) {
    nemotron_h *m = bd_calloc(1, sizeof *m);
    if (!m) return bd_error(BRAID_E_NOMEM, "nemotron_h: out of memory");
    m->name = name;
    bd_loader l;
    uint32_t *ff = NULL;
    braid_status st = bd_loader_init(&l, f, name);
    if (st == BRAID_OK) st = nh_load_hparams(m, &l);
    if (st == BRAID_OK && n_vocab <= 0) st = bd_error(BRAID_E_FORMAT, "nemotron_h: the vocabulary is empty");
    const nh_hparams *hp = &m->hp;
    if (st == BRAID_OK) {
        int found;
        m->hp.n_vocab = (uint32_t)n_vocab;
        m->layers = bd_calloc(hp->n_layer, sizeof *m->layers);
        ff = bd_calloc(hp->n_layer_all, sizeof *ff);
        if (!m->layers || !ff) st = bd_error(BRAID_E_NOMEM, "nemotron_h: out of memory");
        if (st == BRAID_OK) st = layer_map_init(&m->map, name, hp->n_layer);
        if (st == BRAID_OK) st = bd_key_u32_per_layer(&l, "feed_forward_length", hp->n_layer_all, 0, ff, &found);
    }
    if (st == BRAID_OK) st = nh_bind(m, &l, ff);
    bd_free(ff);
    bd_loader_free(&l);
    for (uint32_t il = 0; st == BRAID_OK && il < hp->n_layer; il++)
        m->map.kind[il] = m->kinds[il] == NH_MAMBA ? LAYER_MEM_RECR : m->kinds[il] == NH_ATTN ? LAYER_MEM_ATTN
                                                                                            : LAYER_MEM_NONE;
    if (st == BRAID_OK)
        st = layer_map_layout(&m->map, name, hp->n_layer, 1, &m->hp, sizeof m->hp, &m->moe, sizeof m->moe, layout);
    if (st != BRAID_OK) {
        nh_free(m);
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

static int32_t nh_n_embd(const void *data) { return (int32_t)((const nemotron_h *)data)->hp.n_embd; }

static void nh_hparams_bytes(const void *data, const void **bytes, size_t *len) {
    layer_map_fingerprint(&((const nemotron_h *)data)->map, bytes, len);
}

typedef struct nh_scratch {
    float *x, *u;  /* [T][n_embd] residual stream, normed input / block output */
    float *f;      /* [T][n_embd] MoE output (moe_ffn writes apart from its input) */
    void *moe;     /* moe_scratch_size */
    float *h;      /* [T][n_ff_max] MLP hidden */
    layer_mamba2_scratch mix;
    layer_attn_scratch att;
    void *wbuf;
} nh_scratch;

static void nh_carve(const nemotron_h *m, bd_arena *a, int32_t T, int32_t n_ctx, int32_t n_threads, nh_scratch *s) {
    const nh_hparams *hp = &m->hp;
    s->x = bd_arena_floats(a, (size_t)T * hp->n_embd);
    s->u = bd_arena_floats(a, (size_t)T * hp->n_embd);
    s->h = bd_arena_floats(a, (size_t)T * hp->n_ff_max);
    s->f = bd_arena_floats(a, (size_t)T * hp->n_embd);
    s->moe = m->moe.n_expert ? bd_arena_take(a, moe_scratch_size(&m->moe, hp->n_embd, T)) : NULL;
    layer_mamba2_carve(a, &hp->ssm, T, &s->mix);
    layer_attn_carve(a, &m->ash, T, n_ctx, n_threads, &s->att);
    size_t w = blk_matmul_wsize(m->output.type, m->output.n_in, T);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const nh_layer *L = &m->layers[il];
        const size_t lw = L->kind == NH_MAMBA ? layer_mamba2_wsize(&L->mixer, T)
                          : L->kind == NH_ATTN ? layer_attn_wsize(&L->attn, T)
                          : L->kind == NH_MOE  ? moe_wsize(&L->moe, T) : layer_ffn_wsize(&L->ffn, T);
        if (lw > w) w = lw;
    }
    s->wbuf = bd_arena_take(a, w);
}

static size_t nh_scratch_size(const void *data, int32_t n_batch, int32_t n_ctx, int32_t n_threads) {
    nh_scratch s;
    bd_arena a = bd_arena_at(NULL);
    nh_carve(data, &a, n_batch, n_ctx, n_threads, &s);
    return bd_arena_size(&a);
}

static braid_status nh_forward(const void *data, const bd_fwd_scratch *sc, bd_threadpool *tp, const bd_fwd_batch *b,
                               const bd_fwd_memory *mem, float *logits) {
    const nemotron_h *m = data;
    const nh_hparams *hp = &m->hp;
    const int32_t T = b->n, E = (int32_t)hp->n_embd;
    nh_scratch s;
    bd_arena a = bd_arena_at(sc->base);
    nh_carve(m, &a, sc->n_batch, sc->n_ctx, sc->n_threads, &s);
    assert(T <= sc->n_batch);

    layer_embed(b, &m->tok_embd, E, s.x);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        if (bd_fwd_cancelled(sc)) return bd_error(BRAID_E_CANCELLED, "decode cancelled by the abort callback");
        const nh_layer *L = &m->layers[il];
        for (int32_t t = 0; t < T; t++)
            bd_rmsnorm(s.u + (size_t)t * E, s.x + (size_t)t * E, L->attn_norm.data, E, hp->eps);
        bd_tap("attn_norm", (int)il, s.u, E, T, E);
        if (L->kind == NH_MAMBA) layer_mamba2_mix(tp, &L->mixer, &hp->ssm, &s.mix, s.wbuf, b, mem, L->slot, (int)il, s.u, s.u);
        else if (L->kind == NH_ATTN) layer_attention(tp, &L->attn, &m->ash, &s.att, s.wbuf, b, mem, L->slot, (int)il, s.u, s.u);
        else if (L->kind == NH_MLP) layer_ffn_relu2(tp, &L->ffn, s.u, T, s.u, s.h, s.wbuf, (int)il);
        else moe_ffn(tp, &m->moe, &L->moe, s.u, E, T, s.f, s.moe, s.wbuf, (int)il);
        bd_add(s.x, s.x, L->kind == NH_MOE ? s.f : s.u, (int64_t)T * E);
        bd_tap("l_out", (int)il, s.x, E, T, E);
    }
    layer_logits(tp, b, &m->output_norm, &m->output, hp->eps, s.x, E, s.u, s.wbuf, logits);
    return BRAID_OK;
}

static braid_status nh_load_dense(const gguf_file *f, int32_t n_vocab, void **data, bd_mem_layout *layout) {
    return nh_load(f, n_vocab, "nemotron_h", data, layout);
}
static braid_status nh_load_moe(const gguf_file *f, int32_t n_vocab, void **data, bd_mem_layout *layout) {
    return nh_load(f, n_vocab, "nemotron_h_moe", data, layout);
}

/* One family, two names (the converter picks nemotron_h_moe for checkpoints with experts). */
#define NH_ARCH(sym, arch_name, loader)                                                                          \
    const bd_arch sym = {.name = arch_name, .load = loader, .free_data = nh_free, .n_embd = nh_n_embd,             \
                         .hparams_bytes = nh_hparams_bytes, .scratch_size = nh_scratch_size, .forward = nh_forward, \
                         .rerotate_k = NULL /* NoPE */}
NH_ARCH(bd_arch_nemotron_h, "nemotron_h", nh_load_dense);
NH_ARCH(bd_arch_nemotron_h_moe, "nemotron_h_moe", nh_load_moe);
