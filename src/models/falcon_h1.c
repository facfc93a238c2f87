/* falcon_h1.c — TII Falcon-H1 (archs-more.md §4): attention and a Mamba2 mixer side by side on every layer, on
 * the same normed input, summed before the one residual add; then a SwiGLU FFN:
 *
 *     x = token_embd[tokens]
 *     for each layer: u = RMSNorm(x; attn_norm)
 *                     h = x + (Attn(u) + Mamba2(u))          (NEOX RoPE over the head; attn_output.bias ignored)
 *                     x = h + SwiGLU(RMSNorm(h; ffn_norm))    (the tensor is named blk.N.ffn_norm, no .weight)
 *     logits = W_out · RMSNorm(x; output_norm)
 *
 * So every layer keeps K/V rows and a recurrent state: attention slot and recurrent slot il. The µP multipliers
 * are folded into the weights by the converter; the optional rope_freqs.weight is bound and ignored, as
 * llama.cpp's graph does. */
#include <assert.h>
#include <string.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "base/status.h"
#include "models/arch.h"
#include "models/layers.h"
#include "models/loader.h"
#include "tensor/ops.h"
#include "tensor/tap.h"

typedef struct fh_hparams {
    uint32_t n_ctx_train, n_embd, n_layer, n_vocab, n_ff;
    uint32_t n_head, n_head_kv, head_dim, n_rot;
    float eps, freq_base;
    layer_mamba2_shape ssm;
} fh_hparams;

typedef struct fh_layer {
    bd_weight attn_norm, ffn_norm;
    layer_attn attn;
    layer_mamba2 mixer;
    layer_ffn ffn;
} fh_layer;

typedef struct falcon_h1 {
    fh_hparams hp;
    bd_rope rope;
    layer_attn_shape ash;
    layer_map map;         /* every layer both: attention slot il and recurrent slot il */
    bd_weight tok_embd, output_norm, output, rope_freqs;
    fh_layer *layers;
} falcon_h1;

static void fh_free(void *data) {
    falcon_h1 *m = data;
    if (!m) return;
    layer_map_free(&m->map);
    bd_free(m->layers);
    bd_free(m);
}

static braid_status fh_load_hparams(falcon_h1 *m, bd_loader *l) {
    fh_hparams *hp = &m->hp;
    BD_TRY(layer_base_keys(l, &hp->n_ctx_train, &hp->n_embd, &hp->n_layer));
    BD_TRY(bd_key_f32(l, "attention.layer_norm_rms_epsilon", 1, &hp->eps));
    BD_TRY(layer_mamba2_keys(l, &hp->ssm));
    hp->ssm.eps = hp->eps;
    BD_TRY(layer_mamba2_check("falcon-h1", &hp->ssm));
    BD_TRY(bd_key_u32(l, "feed_forward_length", 1, &hp->n_ff));
    BD_TRY(bd_key_u32(l, "attention.head_count", 1, &hp->n_head));
    hp->n_head_kv = hp->n_head;
    BD_TRY(bd_key_u32(l, "attention.head_count_kv", 0, &hp->n_head_kv));
    if (hp->n_ff == 0 || hp->n_ff > (1u << 24) || hp->n_head == 0 || hp->n_head > 4096 || hp->n_head_kv == 0 ||
        hp->n_head % hp->n_head_kv)
        return bd_error(BRAID_E_FORMAT, "falcon-h1: bad feed_forward_length %u or heads %u/%u", hp->n_ff, hp->n_head,
                        hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    BD_TRY(bd_key_u32(l, "attention.key_length", 0, &hp->head_dim));
    uint32_t vlen = hp->head_dim;
    BD_TRY(bd_key_u32(l, "attention.value_length", 0, &vlen));
    hp->n_rot = hp->head_dim;
    BD_TRY(bd_key_u32(l, "rope.dimension_count", 0, &hp->n_rot));
    if (hp->head_dim == 0 || hp->head_dim > 4096 || vlen != hp->head_dim || hp->n_rot == 0 || hp->n_rot % 2 ||
        hp->n_rot > hp->head_dim || hp->n_rot > BD_ROPE_MAX_ROT)
        return bd_error(BRAID_E_UNSUPPORTED, "falcon-h1: key_length %u, value_length %u, rope dims %u", hp->head_dim,
                        vlen, hp->n_rot);
    hp->freq_base = 10000.0f;
    BD_TRY(bd_key_f32(l, "rope.freq_base", 0, &hp->freq_base));
    m->rope = (bd_rope){.mode = BD_ROPE_NEOX, .n_rot = (int)hp->n_rot, .freq_base = hp->freq_base,
                        .freq_scale = 1.0f, .attn_factor = 1.0f};
    m->ash = (layer_attn_shape){.n_head = (int32_t)hp->n_head, .n_head_kv = (int32_t)hp->n_head_kv,
                                .head_dim = (int32_t)hp->head_dim, .rope = &m->rope, .n_pos = 1, .eps = hp->eps};
    return BRAID_OK;
}

static braid_status fh_bind(falcon_h1 *m, bd_loader *l) {
    const fh_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab;
    BD_TRY(layer_bind_io(l, E, V, "output_norm.weight", &m->tok_embd, &m->output_norm, &m->output));
    BD_TRY(bd_bind(l, "rope_freqs.weight", hp->n_rot / 2, 1, 1, 0, &m->rope_freqs)); /* accepted, unused */
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        fh_layer *L = &m->layers[il];
        BD_TRY(bd_bind_layer(l, (int)il, "attn_norm.weight", E, 1, 1, 1, &L->attn_norm));
        BD_TRY(bd_bind_layer(l, (int)il, "ffn_norm", E, 1, 1, 1, &L->ffn_norm));
        BD_TRY(layer_mamba2_bind(l, (int)il, E, &hp->ssm, 0, &L->mixer));
        BD_TRY(layer_attn_bind(l, (int)il, E, &m->ash, LAYER_QK_NORM_NONE, LAYER_OUT_BIAS_IGNORED, &L->attn));
        BD_TRY(layer_ffn_bind(l, (int)il, E, hp->n_ff, 1, 1, &L->ffn));
    }
    return bd_loader_finish(l, (int)hp->n_layer);
}

static braid_status fh_load(const gguf_file *f, int32_t n_vocab, void **data, bd_mem_layout *layout) {
    falcon_h1 *m = bd_calloc(1, sizeof *m);
    if (!m) return bd_error(BRAID_E_NOMEM, "falcon-h1: out of memory");
    bd_loader l;
    braid_status st = bd_loader_init(&l, f, "falcon-h1");
    if (st == BRAID_OK) st = fh_load_hparams(m, &l);
    if (st == BRAID_OK && n_vocab <= 0) st = bd_error(BRAID_E_FORMAT, "falcon-h1: the vocabulary is empty");
    const fh_hparams *hp = &m->hp;
    if (st == BRAID_OK) {
        m->hp.n_vocab = (uint32_t)n_vocab;
        m->layers = bd_calloc(hp->n_layer, sizeof *m->layers);
        st = m->layers ? layer_map_init(&m->map, "falcon-h1", hp->n_layer)
                       : bd_error(BRAID_E_NOMEM, "falcon-h1: out of memory");
    }
    if (st == BRAID_OK) st = fh_bind(m, &l);
    bd_loader_free(&l);
    if (st == BRAID_OK) {
        memset(m->map.kind, LAYER_MEM_BOTH, hp->n_layer);
        st = layer_map_layout(&m->map, "falcon-h1", hp->n_layer, 1, &m->hp, sizeof m->hp, NULL, 0, layout);
    }
    if (st != BRAID_OK) {
        fh_free(m);
        return st;
    }
    layout->n_embd_k = (int32_t)(hp->head_dim * hp->n_head_kv);
    layout->n_embd_v = layout->n_embd_k;
    layout->n_conv = layer_mamba2_n_conv(&hp->ssm);
    layout->n_ssm = layer_mamba2_n_ssm(&hp->ssm);
    *data = m;
    return BRAID_OK;
}

static int32_t fh_n_embd(const void *data) { return (int32_t)((const falcon_h1 *)data)->hp.n_embd; }

static void fh_hparams_bytes(const void *data, const void **bytes, size_t *len) {
    layer_map_fingerprint(&((const falcon_h1 *)data)->map, bytes, len);
}

typedef struct fh_scratch {
    float *x, *u;     /* [T][n_embd] residual stream, normed input */
    float *a, *s;     /* [T][n_embd] attention and Mamba2 outputs */
    float *ff_g, *ff_u;
    layer_mamba2_scratch mix;
    layer_attn_scratch att;
    void *wbuf;
} fh_scratch;

static void fh_carve(const falcon_h1 *m, bd_arena *a, int32_t T, int32_t n_ctx, int32_t n_threads, fh_scratch *s) {
    const fh_hparams *hp = &m->hp;
    s->x = bd_arena_floats(a, (size_t)T * hp->n_embd);
    s->u = bd_arena_floats(a, (size_t)T * hp->n_embd);
    s->a = bd_arena_floats(a, (size_t)T * hp->n_embd);
    s->s = bd_arena_floats(a, (size_t)T * hp->n_embd);
    s->ff_g = bd_arena_floats(a, (size_t)T * hp->n_ff);
    s->ff_u = bd_arena_floats(a, (size_t)T * hp->n_ff);
    layer_mamba2_carve(a, &hp->ssm, T, &s->mix);
    layer_attn_carve(a, &m->ash, T, n_ctx, n_threads, &s->att);
    size_t w = blk_matmul_wsize(m->output.type, m->output.n_in, T);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const fh_layer *L = &m->layers[il];
        const size_t ws[3] = {layer_mamba2_wsize(&L->mixer, T), layer_attn_wsize(&L->attn, T),
                              layer_ffn_wsize(&L->ffn, T)};
        for (int i = 0; i < 3; i++)
            if (ws[i] > w) w = ws[i];
    }
    s->wbuf = bd_arena_take(a, w);
}

static size_t fh_scratch_size(const void *data, int32_t n_batch, int32_t n_ctx, int32_t n_threads) {
    fh_scratch s;
    bd_arena a = bd_arena_at(NULL);
    fh_carve(data, &a, n_batch, n_ctx, n_threads, &s);
    return bd_arena_size(&a);
}

static braid_status fh_forward(const void *data, const bd_fwd_scratch *sc, bd_threadpool *tp, const bd_fwd_batch *b,
                               const bd_fwd_memory *mem, float *logits) {
    const falcon_h1 *m = data;
    const fh_hparams *hp = &m->hp;
    const int32_t T = b->n, E = (int32_t)hp->n_embd;
    const int64_t TE = (int64_t)T * E;
    fh_scratch s;
    bd_arena a = bd_arena_at(sc->base);
    fh_carve(m, &a, sc->n_batch, sc->n_ctx, sc->n_threads, &s);
    assert(T <= sc->n_batch);

    layer_embed(b, &m->tok_embd, E, s.x);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        if (bd_fwd_cancelled(sc)) return bd_error(BRAID_E_CANCELLED, "decode cancelled by the abort callback");
        const fh_layer *L = &m->layers[il];
        for (int32_t t = 0; t < T; t++)
            bd_rmsnorm(s.u + (size_t)t * E, s.x + (size_t)t * E, L->attn_norm.data, E, hp->eps);
        layer_attention(tp, &L->attn, &m->ash, &s.att, s.wbuf, b, mem, (int)il, (int)il, s.u, s.a);
        layer_mamba2_mix(tp, &L->mixer, &hp->ssm, &s.mix, s.wbuf, b, mem, (int)il, (int)il, s.u, s.s);
        bd_add(s.a, s.a, s.s, TE); /* attn + ssm, then the residual */
        bd_add(s.x, s.a, s.x, TE);
        for (int32_t t = 0; t < T; t++)
            bd_rmsnorm(s.u + (size_t)t * E, s.x + (size_t)t * E, L->ffn_norm.data, E, hp->eps);
        layer_ffn_swiglu(tp, &L->ffn, s.u, T, s.a, s.ff_g, s.ff_u, s.wbuf, (int)il);
        bd_add(s.x, s.a, s.x, TE);
        bd_tap("l_out", (int)il, s.x, E, T, E);
    }
    layer_logits(tp, b, &m->output_norm, &m->output, hp->eps, s.x, E, s.u, s.wbuf, logits);
    return BRAID_OK;
}

static void fh_rerotate_k(const void *data, float *k_row, const braid_pos *old_pos, const braid_pos *new_pos) {
    const falcon_h1 *m = data;
    const braid_pos d = new_pos[0] - old_pos[0]; /* rotations compose */
    float cs[BD_ROPE_MAX_ROT];
    bd_rope_cache(&m->rope, &d, 1, cs);
    bd_rope_apply(&m->rope, cs, k_row, m->hp.n_head_kv, m->hp.head_dim);
}

const bd_arch bd_arch_falcon_h1 = {
    .name = "falcon-h1",
    .load = fh_load,
    .free_data = fh_free,
    .n_embd = fh_n_embd,
    .hparams_bytes = fh_hparams_bytes,
    .scratch_size = fh_scratch_size,
    .forward = fh_forward,
    .rerotate_k = fh_rerotate_k,
};
