/* mamba2.c — pure Mamba2 (architectures.md §2.2): every layer is the Mamba2 mixer of layers.h behind an
 * RMSNorm, with a residual; no attention, no positions, so the memory is recurrent states only:
 *
 *     x = token_embd[tokens]
 *     for each layer: x = x + Mamba2(RMSNorm(x; attn_norm))
 *     logits = W_out · RMSNorm(x; output_norm)
 *
 * Truncation cannot roll an SSM back by arithmetic: the memory restores a rollback state or a checkpoint and
 * replays the inputs after it (design.md §3), which this forward pass runs like any other ubatch. */
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

/* Hyperparameters; fixed-width fields so that their bytes feed the model fingerprint. */
typedef struct m2_hparams {
    uint32_t n_ctx_train, n_embd, n_layer, n_vocab;
    float eps;
    layer_mamba2_shape ssm;
} m2_hparams;

typedef struct m2_layer {
    bd_weight attn_norm; /* [n_embd] */
    layer_mamba2 mixer;
} m2_layer;

typedef struct mamba2 {
    m2_hparams hp;
    layer_map map;         /* every layer recurrent */
    bd_weight tok_embd;    /* [n_vocab][n_embd] */
    bd_weight output_norm; /* [n_embd] */
    bd_weight output;      /* [n_vocab][n_embd] (token_embd when tied) */
    m2_layer *layers;      /* [n_layer] */
} mamba2;

static void m2_free(void *data) {
    mamba2 *m = data;
    if (!m) return;
    layer_map_free(&m->map);
    bd_free(m->layers);
    bd_free(m);
}

static braid_status m2_load_hparams(mamba2 *m, bd_loader *l) {
    m2_hparams *hp = &m->hp;
    BD_TRY(layer_base_keys(l, &hp->n_ctx_train, &hp->n_embd, &hp->n_layer));
    BD_TRY(bd_key_f32(l, "attention.layer_norm_rms_epsilon", 1, &hp->eps));
    BD_TRY(layer_mamba2_keys(l, &hp->ssm));
    hp->ssm.eps = hp->eps;
    return layer_mamba2_check("mamba2", &hp->ssm);
}

static braid_status m2_bind(mamba2 *m, bd_loader *l) {
    const m2_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab;
    BD_TRY(layer_bind_io(l, E, V, "output_norm.weight", &m->tok_embd, &m->output_norm, &m->output));
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        m2_layer *L = &m->layers[il];
        BD_TRY(bd_bind_layer(l, (int)il, "attn_norm.weight", E, 1, 1, 1, &L->attn_norm));
        BD_TRY(layer_mamba2_bind(l, (int)il, E, &hp->ssm, 1, &L->mixer));
    }
    return bd_loader_finish(l, (int)hp->n_layer);
}

static braid_status m2_load(const gguf_file *f, int32_t n_vocab, void **data, bd_mem_layout *layout) {
    mamba2 *m = bd_calloc(1, sizeof *m);
    if (!m) return bd_error(BRAID_E_NOMEM, "mamba2: out of memory");
    bd_loader l;
    braid_status st = bd_loader_init(&l, f, "mamba2");
    if (st == BRAID_OK) st = m2_load_hparams(m, &l);
    if (st == BRAID_OK && n_vocab <= 0) st = bd_error(BRAID_E_FORMAT, "mamba2: the vocabulary is empty");
    if (st == BRAID_OK) {
        m->hp.n_vocab = (uint32_t)n_vocab;
        m->layers = bd_calloc(m->hp.n_layer, sizeof *m->layers);
        st = m->layers ? layer_map_init(&m->map, "mamba2", m->hp.n_layer)
                       : bd_error(BRAID_E_NOMEM, "mamba2: out of memory");
    }
    if (st == BRAID_OK) st = m2_bind(m, &l);
    bd_loader_free(&l);
    if (st == BRAID_OK) {
        memset(m->map.kind, LAYER_MEM_RECR, m->hp.n_layer);
        st = layer_map_layout(&m->map, "mamba2", m->hp.n_layer, 1, &m->hp, sizeof m->hp, NULL, 0, layout);
    }
    if (st != BRAID_OK) {
        m2_free(m);
        return st;
    }
    layout->n_conv = layer_mamba2_n_conv(&m->hp.ssm);
    layout->n_ssm = layer_mamba2_n_ssm(&m->hp.ssm);
    *data = m;
    return BRAID_OK;
}

static int32_t m2_n_embd(const void *data) { return (int32_t)((const mamba2 *)data)->hp.n_embd; }

static void m2_hparams_bytes(const void *data, const void **bytes, size_t *len) {
    layer_map_fingerprint(&((const mamba2 *)data)->map, bytes, len);
}

typedef struct m2_scratch {
    float *x, *u;               /* [T][n_embd] residual stream, normed input / mixer output */
    layer_mamba2_scratch mix;
    void *wbuf;
} m2_scratch;

static void m2_carve(const mamba2 *m, bd_arena *a, int32_t T, m2_scratch *s) {
    s->x = bd_arena_floats(a, (size_t)T * m->hp.n_embd);
    s->u = bd_arena_floats(a, (size_t)T * m->hp.n_embd);
    layer_mamba2_carve(a, &m->hp.ssm, T, &s->mix);
    size_t w = blk_matmul_wsize(m->output.type, m->output.n_in, T);
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        const size_t lw = layer_mamba2_wsize(&m->layers[il].mixer, T);
        if (lw > w) w = lw;
    }
    s->wbuf = bd_arena_take(a, w);
}

static size_t m2_scratch_size(const void *data, int32_t n_batch, int32_t n_ctx, int32_t n_threads) {
    (void)n_ctx, (void)n_threads;
    m2_scratch s;
    bd_arena a = bd_arena_at(NULL);
    m2_carve(data, &a, n_batch, &s);
    return bd_arena_size(&a);
}

static braid_status m2_forward(const void *data, const bd_fwd_scratch *sc, bd_threadpool *tp, const bd_fwd_batch *b,
                               const bd_fwd_memory *mem, float *logits) {
    const mamba2 *m = data;
    const m2_hparams *hp = &m->hp;
    const int32_t T = b->n, E = (int32_t)hp->n_embd;
    m2_scratch s;
    bd_arena a = bd_arena_at(sc->base);
    m2_carve(m, &a, sc->n_batch, &s);
    assert(T <= sc->n_batch);

    layer_embed(b, &m->tok_embd, E, s.x);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        if (bd_fwd_cancelled(sc)) return bd_error(BRAID_E_CANCELLED, "decode cancelled by the abort callback");
        const m2_layer *L = &m->layers[il];
        for (int32_t t = 0; t < T; t++)
            bd_rmsnorm(s.u + (size_t)t * E, s.x + (size_t)t * E, L->attn_norm.data, E, hp->eps);
        bd_tap("attn_norm", (int)il, s.u, E, T, E);
        layer_mamba2_mix(tp, &L->mixer, &hp->ssm, &s.mix, s.wbuf, b, mem, (int)il, (int)il, s.u, s.u);
        bd_add(s.x, s.x, s.u, (int64_t)T * E);
        bd_tap("l_out", (int)il, s.x, E, T, E);
    }
    layer_logits(tp, b, &m->output_norm, &m->output, hp->eps, s.x, E, s.u, s.wbuf, logits);
    return BRAID_OK;
}

const bd_arch bd_arch_mamba2 = {
    .name = "mamba2",
    .load = m2_load,
    .free_data = m2_free,
    .n_embd = m2_n_embd,
    .hparams_bytes = m2_hparams_bytes,
    .scratch_size = m2_scratch_size,
    .forward = m2_forward,
    .rerotate_k = NULL, /* no attention, no positions */
};
