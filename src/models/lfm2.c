/* lfm2.c — Liquid LFM2 (architectures.md §3) and LFM2-MoE (lfm2moe, archs-more.md §5): short-convolution layers
 * braided with attention layers (per-head Q/K RMSNorm, NEOX RoPE over the whole head), each followed by a
 * SwiGLU FFN — in lfm2moe, after leading_dense_block_count dense layers, moe.h's MoE instead (routing by
 * expert_gating_func with a selection bias, renormalized weights, SwiGLU experts, no shared expert):
 *
 *     x = token_embd[tokens]
 *     for each layer: h = x + Op(RMSNorm(x; attn_norm)); x = h + SwiGLU(RMSNorm(h; ffn_norm))
 *     logits = W_out · RMSNorm(x; token_embd_norm)           (LFM2 names its final norm token_embd_norm)
 *
 * A layer is short-conv iff its head_count_kv is 0. Short conv: B ‖ C ‖ X = W_in·u; y = C ⊙ conv(B ⊙ X), a
 * causal depthwise conv of length L without bias or activation whose state is the last L-1 values of B ⊙ X
 * (rm[n_embd][L-1]); out = W_out·y. Sliding-window attention (attention.sliding_window > 0) is refused. */
#include <assert.h>
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

typedef struct lf_hparams {
    uint32_t n_ctx_train, n_embd, n_layer, n_vocab, n_ff;
    uint32_t n_head, n_head_kv, head_dim, l_cache;
    uint32_t n_dense_lead; /* lfm2moe: layers before this one are dense */
    float eps, freq_base;
} lf_hparams;

typedef struct lf_layer {
    int conv;            /* 1: short conv, 0: attention */
    int slot;
    bd_weight attn_norm, ffn_norm;
    layer_attn attn;
    bd_weight in_proj;   /* [3*n_embd][n_embd] B ‖ C ‖ X */
    bd_weight conv_w;    /* [n_embd][L] F32 */
    bd_weight out_proj;  /* [n_embd][n_embd] */
    layer_ffn ffn;
    moe_weights moe;
    int is_moe;
} lf_layer;

typedef struct lfm2 {
    const char *name;      /* "lfm2" or "lfm2moe" */
    int moe_arch;
    lf_hparams hp;
    moe_hparams moe;
    bd_rope rope;
    layer_attn_shape ash;
    layer_map map;         /* short-conv layers recurrent, the rest attention */
    bd_weight tok_embd, output_norm, output;
    lf_layer *layers;
} lfm2;

static void lf_free(void *data) {
    lfm2 *m = data;
    if (!m) return;
    layer_map_free(&m->map);
    bd_free(m->layers);
    bd_free(m);
}

static braid_status lf_load_hparams(lfm2 *m, bd_loader *l) {
    lf_hparams *hp = &m->hp;
    BD_TRY(layer_base_keys(l, &hp->n_ctx_train, &hp->n_embd, &hp->n_layer));
    BD_TRY(bd_key_u32(l, "shortconv.l_cache", 1, &hp->l_cache));
    if (hp->l_cache < 2 || hp->l_cache > 16)
        return bd_error(BRAID_E_UNSUPPORTED, "lfm2: shortconv.l_cache %u is not in 2..16", hp->l_cache);
    BD_TRY(bd_key_f32(l, "attention.layer_norm_rms_epsilon", 1, &hp->eps));
    BD_TRY(bd_key_u32(l, "feed_forward_length", 1, &hp->n_ff));
    if (hp->n_ff == 0 || hp->n_ff > (1u << 24)) return bd_error(BRAID_E_FORMAT, "lfm2: bad feed_forward_length");
    BD_TRY(bd_key_u32(l, "attention.head_count", 1, &hp->n_head));
    uint32_t swa = 0;
    BD_TRY(bd_key_u32(l, "attention.sliding_window", 0, &swa));
    if (swa) return bd_error(BRAID_E_UNSUPPORTED, "lfm2: sliding-window attention (%u) is not supported", swa);
    hp->freq_base = 10000.0f;
    BD_TRY(bd_key_f32(l, "rope.freq_base", 0, &hp->freq_base));
    if (hp->n_head == 0 || hp->n_head > 4096 || hp->n_embd % hp->n_head)
        return bd_error(BRAID_E_FORMAT, "lfm2: attention.head_count %u must divide embedding_length %u", hp->n_head,
                        hp->n_embd);
    hp->head_dim = hp->n_embd / hp->n_head;
    if (hp->head_dim % 2 || hp->head_dim > BD_ROPE_MAX_ROT)
        return bd_error(BRAID_E_UNSUPPORTED, "lfm2: head size %u", hp->head_dim);

    uint32_t *kv = bd_calloc(hp->n_layer, sizeof *kv);
    braid_status st = kv ? layer_map_init(&m->map, "lfm2", hp->n_layer) : bd_error(BRAID_E_NOMEM, "lfm2: out of memory");
    int found = 0;
    if (st == BRAID_OK) st = bd_key_u32_per_layer(l, "attention.head_count_kv", hp->n_layer, 1, kv, &found);
    for (uint32_t i = 0; st == BRAID_OK && i < hp->n_layer; i++) {
        m->map.kind[i] = kv[i] == 0 ? LAYER_MEM_RECR : LAYER_MEM_ATTN;
        if (!kv[i]) continue;
        if (hp->n_head_kv && kv[i] != hp->n_head_kv)
            st = bd_error(BRAID_E_UNSUPPORTED, "lfm2: attention layers differ in kv heads (%u vs %u)", kv[i],
                          hp->n_head_kv);
        hp->n_head_kv = kv[i];
    }
    bd_free(kv);
    BD_TRY(st);
    if (hp->n_head_kv && hp->n_head % hp->n_head_kv)
        return bd_error(BRAID_E_FORMAT, "lfm2: head_count %u is not a multiple of head_count_kv %u", hp->n_head,
                        hp->n_head_kv);
    hp->n_dense_lead = hp->n_layer;
    if (m->moe_arch) {
        hp->n_dense_lead = 0;
        BD_TRY(bd_key_u32(l, "leading_dense_block_count", 0, &hp->n_dense_lead));
        uint32_t gating = 0, *ffe = bd_calloc(hp->n_layer, sizeof *ffe);
        if (!ffe) return bd_error(BRAID_E_NOMEM, "lfm2moe: out of memory");
        st = bd_key_u32_per_layer(l, "expert_feed_forward_length", hp->n_layer, 1, ffe, &found);
        bd_free(ffe);
        BD_TRY(st);
        BD_TRY(bd_key_u32(l, "expert_gating_func", 1, &gating));
        if (gating != 1 && gating != 2) /* llama.cpp's enum: 1 softmax, 2 sigmoid */
            return bd_error(BRAID_E_UNSUPPORTED, "lfm2moe: expert_gating_func %u (braid has softmax 1, sigmoid 2)",
                            gating);
        if (hp->n_dense_lead > hp->n_layer)
            return bd_error(BRAID_E_FORMAT, "lfm2moe: leading_dense_block_count %u > block_count %u",
                            hp->n_dense_lead, hp->n_layer);
        BD_TRY(moe_load_hparams(l, hp->n_layer, hp->n_layer, hp->n_ff, &m->moe));
        m->moe.sigmoid = gating == 2, m->moe.sel_bias = 1, m->moe.norm_w = 1, m->moe.w_scale = 0.0f;
        m->moe.relu2 = 0, m->moe.shexp = MOE_SHEXP_NONE, m->moe.n_ff_shexp = 0;
    }
    m->rope = (bd_rope){.mode = BD_ROPE_NEOX, .n_rot = (int)hp->head_dim, .freq_base = hp->freq_base,
                        .freq_scale = 1.0f, .attn_factor = 1.0f};
    m->ash = (layer_attn_shape){.n_head = (int32_t)hp->n_head, .n_head_kv = (int32_t)hp->n_head_kv,
                                .head_dim = (int32_t)hp->head_dim, .rope = &m->rope, .n_pos = 1, .eps = hp->eps};
    return BRAID_OK;
}

static braid_status lf_bind(lfm2 *m, bd_loader *l) {
    const lf_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab;
    BD_TRY(layer_bind_io(l, E, V, "token_embd_norm.weight", &m->tok_embd, &m->output_norm, &m->output));
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        lf_layer *L = &m->layers[il];
        L->conv = m->map.kind[il] == LAYER_MEM_RECR;
        BD_TRY(bd_bind_layer(l, (int)il, "attn_norm.weight", E, 1, 1, 1, &L->attn_norm));
        BD_TRY(bd_bind_layer(l, (int)il, "ffn_norm.weight", E, 1, 1, 1, &L->ffn_norm));
        if (L->conv) {
            BD_TRY(bd_bind_layer(l, (int)il, "shortconv.in_proj.weight", E, 3 * E, 0, 1, &L->in_proj));
            BD_TRY(bd_bind_layer(l, (int)il, "shortconv.conv.weight", hp->l_cache, E, 1, 1, &L->conv_w));
            BD_TRY(bd_bind_layer(l, (int)il, "shortconv.out_proj.weight", E, E, 0, 1, &L->out_proj));
        } else {
            BD_TRY(layer_attn_bind(l, (int)il, E, &m->ash, LAYER_QK_NORM_REQUIRED, LAYER_OUT_BIAS_NONE, &L->attn));
        }
        L->is_moe = m->moe_arch && il >= hp->n_dense_lead;
        if (L->is_moe) BD_TRY(moe_bind(l, (int)il, E, &m->moe, &L->moe));
        else BD_TRY(layer_ffn_bind(l, (int)il, E, hp->n_ff, 1, 0, &L->ffn));
    }
    return bd_loader_finish(l, (int)hp->n_layer);
}

static braid_status lf_load(const gguf_file *f, int32_t n_vocab, const char *name, void **data,
                            bd_mem_layout *layout) {
    lfm2 *m = bd_calloc(1, sizeof *m);
    if (!m) return bd_error(BRAID_E_NOMEM, "lfm2: out of memory");
    m->name = name;
    m->moe_arch = !strcmp(name, "lfm2moe");
    bd_loader l;
    braid_status st = bd_loader_init(&l, f, name);
    if (st == BRAID_OK) st = lf_load_hparams(m, &l);
    if (st == BRAID_OK && n_vocab <= 0) st = bd_error(BRAID_E_FORMAT, "lfm2: the vocabulary is empty");
    const lf_hparams *hp = &m->hp;
    if (st == BRAID_OK) {
        m->hp.n_vocab = (uint32_t)n_vocab;
        m->layers = bd_calloc(hp->n_layer, sizeof *m->layers);
        if (!m->layers) st = bd_error(BRAID_E_NOMEM, "lfm2: out of memory");
    }
    if (st == BRAID_OK) st = lf_bind(m, &l);
    bd_loader_free(&l);
    if (st == BRAID_OK)
        st = layer_map_layout(&m->map, name, hp->n_layer, 1, &m->hp, sizeof m->hp, &m->moe, sizeof m->moe, layout);
    if (st != BRAID_OK) {
        lf_free(m);
        return st;
    }
    for (uint32_t il = 0; il < hp->n_layer; il++) m->layers[il].slot = m->map.slot[il];
    layout->n_embd_k = (int32_t)(hp->head_dim * hp->n_head_kv);
    layout->n_embd_v = layout->n_embd_k;
    layout->n_conv = (int64_t)(hp->l_cache - 1) * hp->n_embd;
    layout->n_ssm = 0;
    *data = m;
    return BRAID_OK;
}

static int32_t lf_n_embd(const void *data) { return (int32_t)((const lfm2 *)data)->hp.n_embd; }

static void lf_hparams_bytes(const void *data, const void **bytes, size_t *len) {
    layer_map_fingerprint(&((const lfm2 *)data)->map, bytes, len);
}

typedef struct lf_scratch {
    float *x, *u, *f;     /* [T][n_embd] residual stream, normed input / mixer output, FFN output */
    float *bcx;           /* [T][3*n_embd] B ‖ C ‖ X, then B ⊙ X in B's place */
    float *y;             /* [T][n_embd] conv output, then C ⊙ conv */
    float *ff_g, *ff_u;   /* [T][n_ff] */
    float **snap;         /* [T] */
    void *moe;            /* lfm2moe: moe_scratch_size */
    layer_attn_scratch att;
    void *wbuf;
} lf_scratch;

static void lf_carve(const lfm2 *m, bd_arena *a, int32_t T, int32_t n_ctx, int32_t n_threads, lf_scratch *s) {
    const lf_hparams *hp = &m->hp;
    const size_t E = hp->n_embd;
    s->x = bd_arena_floats(a, (size_t)T * E);
    s->u = bd_arena_floats(a, (size_t)T * E);
    s->f = bd_arena_floats(a, (size_t)T * E);
    s->bcx = bd_arena_floats(a, (size_t)T * 3 * E);
    s->y = bd_arena_floats(a, (size_t)T * E);
    s->ff_g = bd_arena_floats(a, (size_t)T * hp->n_ff);
    s->ff_u = bd_arena_floats(a, (size_t)T * hp->n_ff);
    s->snap = bd_arena_take(a, (size_t)2 * T * sizeof(float *));
    s->moe = m->moe_arch ? bd_arena_take(a, moe_scratch_size(&m->moe, hp->n_embd, T)) : NULL;
    layer_attn_carve(a, &m->ash, T, n_ctx, n_threads, &s->att);
    size_t w = blk_matmul_wsize(m->output.type, m->output.n_in, T);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const lf_layer *L = &m->layers[il];
        size_t lw = L->is_moe ? moe_wsize(&L->moe, T) : layer_ffn_wsize(&L->ffn, T);
        if (L->conv) {
            const size_t a1 = blk_matmul_wsize(L->in_proj.type, L->in_proj.n_in, T);
            const size_t a2 = blk_matmul_wsize(L->out_proj.type, L->out_proj.n_in, T);
            lw = lw > a1 ? lw : a1;
            lw = lw > a2 ? lw : a2;
        } else {
            const size_t a1 = layer_attn_wsize(&L->attn, T);
            lw = lw > a1 ? lw : a1;
        }
        if (lw > w) w = lw;
    }
    s->wbuf = bd_arena_take(a, w);
}

static size_t lf_scratch_size(const void *data, int32_t n_batch, int32_t n_ctx, int32_t n_threads) {
    lf_scratch s;
    bd_arena a = bd_arena_at(NULL);
    lf_carve(data, &a, n_batch, n_ctx, n_threads, &s);
    return bd_arena_size(&a);
}

/* §3.3 short conv. u [T][n_embd] -> out [T][n_embd] (may equal u). */
static void lf_shortconv(const lfm2 *m, const lf_layer *L, lf_scratch *s, bd_threadpool *tp, const bd_fwd_batch *b,
                         const bd_fwd_memory *mem, int il, float *out) {
    const int32_t T = b->n, E = (int32_t)m->hp.n_embd;
    blk_matmul(tp, &L->in_proj, s->u, T, s->bcx, s->wbuf);
    for (int32_t t = 0; t < T; t++) { /* B ⊙ X, in B's place */
        float *r = s->bcx + (size_t)t * 3 * E;
        bd_mul(r, r, r + 2 * E, E);
    }
    for (int32_t k = 0; k < mem->n_runs; k++) {
        const bd_fwd_run *run = &mem->runs[k];
        layer_rs rs;
        layer_rs_view(mem, run, L->slot, s->snap, &rs);
        bd_conv1d_causal_from(tp, s->y + (size_t)run->row0 * E, E, s->bcx + (size_t)run->row0 * 3 * E, 3 * E,
                              rs.conv_in, rs.conv_out, L->conv_w.data, NULL, E, (int)m->hp.l_cache, run->n_rows, 0,
                              rs.conv_snap);
    }
    bd_tap("model.layers.{}.conv.conv", il, s->y, E, T, E);
    for (int32_t t = 0; t < T; t++) { /* y = C ⊙ conv */
        float *y = s->y + (size_t)t * E;
        bd_mul(y, s->bcx + (size_t)t * 3 * E + E, y, E);
    }
    blk_matmul(tp, &L->out_proj, s->y, T, out, s->wbuf);
}

static braid_status lf_forward(const void *data, const bd_fwd_scratch *sc, bd_threadpool *tp, const bd_fwd_batch *b,
                               const bd_fwd_memory *mem, float *logits) {
    const lfm2 *m = data;
    const lf_hparams *hp = &m->hp;
    const int32_t T = b->n, E = (int32_t)hp->n_embd;
    lf_scratch s;
    bd_arena a = bd_arena_at(sc->base);
    lf_carve(m, &a, sc->n_batch, sc->n_ctx, sc->n_threads, &s);
    assert(T <= sc->n_batch);

    layer_embed(b, &m->tok_embd, E, s.x);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        if (bd_fwd_cancelled(sc)) return bd_error(BRAID_E_CANCELLED, "decode cancelled by the abort callback");
        const lf_layer *L = &m->layers[il];
        for (int32_t t = 0; t < T; t++)
            bd_rmsnorm(s.u + (size_t)t * E, s.x + (size_t)t * E, L->attn_norm.data, E, hp->eps);
        if (L->conv) lf_shortconv(m, L, &s, tp, b, mem, (int)il, s.u);
        else layer_attention(tp, &L->attn, &m->ash, &s.att, s.wbuf, b, mem, L->slot, (int)il, s.u, s.u);
        bd_add(s.x, s.x, s.u, (int64_t)T * E);
        for (int32_t t = 0; t < T; t++)
            bd_rmsnorm(s.u + (size_t)t * E, s.x + (size_t)t * E, L->ffn_norm.data, E, hp->eps);
        if (L->is_moe) moe_ffn(tp, &m->moe, &L->moe, s.u, E, T, s.f, s.moe, s.wbuf, (int)il);
        else layer_ffn_swiglu(tp, &L->ffn, s.u, T, s.f, s.ff_g, s.ff_u, s.wbuf, (int)il);
        bd_add(s.x, s.x, s.f, (int64_t)T * E);
        bd_tap("l_out", (int)il, s.x, E, T, E);
    }
    layer_logits(tp, b, &m->output_norm, &m->output, hp->eps, s.x, E, s.u, s.wbuf, logits);
    return BRAID_OK;
}

static void lf_rerotate_k(const void *data, float *k_row, const braid_pos *old_pos, const braid_pos *new_pos) {
    const lfm2 *m = data;
    /* Rotation composes: R(new) = R(new − old)·R(old). */
    const braid_pos d = new_pos[0] - old_pos[0];
    float cs[BD_ROPE_MAX_ROT];
    bd_rope_cache(&m->rope, &d, 1, cs);
    bd_rope_apply(&m->rope, cs, k_row, m->hp.n_head_kv, m->hp.head_dim);
}

static braid_status lf_load_dense(const gguf_file *f, int32_t n_vocab, void **data, bd_mem_layout *layout) {
    return lf_load(f, n_vocab, "lfm2", data, layout);
}
static braid_status lf_load_moe(const gguf_file *f, int32_t n_vocab, void **data, bd_mem_layout *layout) {
    return lf_load(f, n_vocab, "lfm2moe", data, layout);
}

/* One family, two names. */
#define LF_ARCH(sym, arch_name, loader)                                                                          \
    const bd_arch sym = {.name = arch_name, .load = loader, .free_data = lf_free, .n_embd = lf_n_embd,             \
                         .hparams_bytes = lf_hparams_bytes, .scratch_size = lf_scratch_size, .forward = lf_forward, \
                         .rerotate_k = lf_rerotate_k}
LF_ARCH(bd_arch_lfm2, "lfm2", lf_load_dense);
LF_ARCH(bd_arch_lfm2moe, "lfm2moe", lf_load_moe);
