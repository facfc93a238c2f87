/* layers.c — the shared blocks of layers.h: attention variants, dense FFNs, K/V stores, biases, run views. */
#include "models/layers.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "tensor/tap.h"
#include "tensor/types.h"

braid_status layer_base_keys(const bd_loader *l, uint32_t *n_ctx_train, uint32_t *n_embd, uint32_t *n_layer) {
    BD_TRY(bd_key_u32(l, "context_length", 1, n_ctx_train));
    BD_TRY(bd_key_u32(l, "embedding_length", 1, n_embd));
    BD_TRY(bd_key_u32(l, "block_count", 1, n_layer));
    if (*n_layer == 0 || *n_layer > 4096) return bd_error(BRAID_E_FORMAT, "%sblock_count %u is out of range", l->arch, *n_layer);
    if (*n_embd == 0 || *n_embd > (1u << 20))
        return bd_error(BRAID_E_FORMAT, "%sembedding_length %u is out of range", l->arch, *n_embd);
    return BRAID_OK;
}

braid_status layer_map_init(layer_map *m, const char *arch, uint32_t n_layer) {
    memset(m, 0, sizeof *m);
    m->kind = bd_calloc(n_layer, 1);
    m->slot = bd_calloc(n_layer, sizeof *m->slot);
    m->attn_layer = bd_calloc(n_layer, sizeof *m->attn_layer);
    m->recr_layer = bd_calloc(n_layer, sizeof *m->recr_layer);
    if (m->kind && m->slot && m->attn_layer && m->recr_layer) return BRAID_OK;
    layer_map_free(m);
    return bd_error(BRAID_E_NOMEM, "%s: out of memory", arch);
}

braid_status layer_map_layout(layer_map *m, const char *arch, uint32_t n_layer, int32_t n_pos, const void *hp,
                              size_t hp_len, const void *extra, size_t extra_len, bd_mem_layout *layout) {
    memset(layout, 0, sizeof *layout);
    layout->n_layer = (int32_t)n_layer;
    layout->n_pos_per_token = n_pos;
    for (uint32_t il = 0; il < n_layer; il++) {
        const uint8_t k = m->kind[il];
        m->slot[il] = -1;
        if (k == LAYER_MEM_BOTH) {
            /* one slot index in both memories: attention and recurrent slots advance together */
            m->slot[il] = layout->n_attn;
            if (layout->n_recr != layout->n_attn)
                return bd_error(BRAID_E_UNSUPPORTED, "%s: layer %u uses both memories after a layer with one", arch, il);
            m->attn_layer[layout->n_attn++] = m->recr_layer[layout->n_recr++] = (int32_t)il;
        } else if (k == LAYER_MEM_ATTN) {
            m->slot[il] = layout->n_attn;
            m->attn_layer[layout->n_attn++] = (int32_t)il;
        } else if (k == LAYER_MEM_RECR) {
            m->slot[il] = layout->n_recr;
            m->recr_layer[layout->n_recr++] = (int32_t)il;
        }
    }
    layout->attn_layer = m->attn_layer;
    layout->recr_layer = m->recr_layer;
    bd_free(m->fp);
    m->fp_len = hp_len + n_layer + extra_len;
    m->fp = bd_malloc(m->fp_len ? m->fp_len : 1);
    if (!m->fp) return bd_error(BRAID_E_NOMEM, "%s: out of memory", arch);
    if (hp_len) memcpy(m->fp, hp, hp_len);
    memcpy(m->fp + hp_len, m->kind, n_layer);
    if (extra_len) memcpy(m->fp + hp_len + n_layer, extra, extra_len);
    return BRAID_OK;
}

void layer_map_free(layer_map *m) {
    bd_free(m->kind);
    bd_free(m->slot);
    bd_free(m->attn_layer);
    bd_free(m->recr_layer);
    bd_free(m->fp);
    memset(m, 0, sizeof *m);
}

braid_status layer_bind_io(bd_loader *l, int64_t n_embd, int64_t n_vocab, const char *norm_name, bd_weight *tok_embd,
                           bd_weight *norm, bd_weight *output) {
    BD_TRY(bd_bind(l, "token_embd.weight", n_embd, n_vocab, 0, 1, tok_embd));
    BD_TRY(bd_bind(l, norm_name, n_embd, 1, 1, 1, norm));
    BD_TRY(bd_bind(l, "output.weight", n_embd, n_vocab, 0, 0, output));
    if (!output->data) *output = *tok_embd; /* tied */
    return BRAID_OK;
}

void layer_add_bias(float *y, const bd_weight *b, int32_t T) {
    if (!b->data) return;
    const float *bb = b->data;
    for (int32_t t = 0; t < T; t++)
        for (int64_t i = 0; i < b->n_in; i++) y[(size_t)t * b->n_in + i] += bb[i];
}

void layer_kv_store(void *cache, braid_type type, int32_t cell, int32_t n, const float *src) {
    if (type == BRAID_TYPE_F32) {
        memcpy((float *)cache + (size_t)cell * n, src, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *d = (uint16_t *)cache + (size_t)cell * n;
    for (int32_t i = 0; i < n; i++) d[i] = bd_fp32_to_fp16(src[i]);
}

void layer_embed(const bd_fwd_batch *b, const bd_weight *tok_embd, int32_t E, float *x) {
    for (int32_t t = 0; t < b->n; t++) {
        if (b->embd) memcpy(x + (size_t)t * E, b->embd + (size_t)t * E, (size_t)E * sizeof(float));
        else blk_get_row(tok_embd, b->token[t], x + (size_t)t * E);
    }
}

int32_t layer_logits(bd_threadpool *tp, const bd_fwd_batch *b, const bd_weight *norm, const bd_weight *w_out,
                     float eps, const float *x, int32_t E, float *u, void *wbuf, float *logits) {
    /* gathered in their output order, which is consecutive */
    int32_t n_out = 0, first = -1;
    for (int32_t t = 0; t < b->n; t++) {
        if (b->out[t] < 0) continue;
        if (first < 0) first = b->out[t];
        bd_rmsnorm(u + (size_t)n_out * E, x + (size_t)t * E, norm->data, E, eps);
        n_out++;
    }
    if (n_out) blk_matmul(tp, w_out, u, n_out, logits + (size_t)first * w_out->n_out, wbuf);
    return n_out;
}

/* ---- attention ------------------------------------------------------------------------------------------- */

static int64_t q_rows(const layer_attn_shape *sh) {
    return (int64_t)(sh->gated ? 2 : 1) * sh->head_dim * sh->n_head;
}

braid_status layer_attn_bind(bd_loader *l, int il, int64_t E, const layer_attn_shape *sh, int qk_norm, int out_bias,
                             layer_attn *w) {
    const int64_t hd = sh->head_dim, nq = q_rows(sh), nkv = hd * sh->n_head_kv;
    memset(w, 0, sizeof *w);
    bd_weight fused;
    BD_TRY(bd_bind_layer(l, il, "attn_qkv.weight", E, nq + 2 * nkv, 0, 0, &fused));
    if (fused.data) { /* Q ‖ K ‖ V rows in one matrix: three row views */
        w->wq = fused, w->wq.n_out = nq;
        w->wk = fused, w->wk.n_out = nkv, w->wk.data = bd_weight_row(&fused, nq);
        w->wv = fused, w->wv.n_out = nkv, w->wv.data = bd_weight_row(&fused, nq + nkv);
        bd_weight fb;
        BD_TRY(bd_bind_layer(l, il, "attn_qkv.bias", nq + 2 * nkv, 1, 1, 0, &fb));
        if (fb.data) {
            const float *b = fb.data;
            w->bq = fb, w->bq.n_in = nq;
            w->bk = fb, w->bk.n_in = nkv, w->bk.data = b + nq;
            w->bv = fb, w->bv.n_in = nkv, w->bv.data = b + nq + nkv;
        }
    } else {
        BD_TRY(bd_bind_layer(l, il, "attn_q.weight", E, nq, 0, 1, &w->wq));
        BD_TRY(bd_bind_layer(l, il, "attn_k.weight", E, nkv, 0, 1, &w->wk));
        BD_TRY(bd_bind_layer(l, il, "attn_v.weight", E, nkv, 0, 1, &w->wv));
        BD_TRY(bd_bind_layer(l, il, "attn_q.bias", nq, 1, 1, 0, &w->bq));
        BD_TRY(bd_bind_layer(l, il, "attn_k.bias", nkv, 1, 1, 0, &w->bk));
        BD_TRY(bd_bind_layer(l, il, "attn_v.bias", nkv, 1, 1, 0, &w->bv));
    }
    BD_TRY(bd_bind_layer(l, il, "attn_output.weight", hd * sh->n_head, E, 0, 1, &w->wo));
    if (out_bias != LAYER_OUT_BIAS_NONE) {
        BD_TRY(bd_bind_layer(l, il, "attn_output.bias", E, 1, 1, 0, &w->bo));
        if (out_bias == LAYER_OUT_BIAS_IGNORED) w->bo.data = NULL;
    }
    if (qk_norm == LAYER_QK_NORM_REQUIRED) {
        BD_TRY(bd_bind_layer(l, il, "attn_q_norm.weight", hd, 1, 1, 1, &w->q_norm));
        BD_TRY(bd_bind_layer(l, il, "attn_k_norm.weight", hd, 1, 1, 1, &w->k_norm));
    }
    return BRAID_OK;
}

void layer_attn_carve(bd_arena *a, const layer_attn_shape *sh, int32_t T, int32_t n_ctx, int32_t n_threads,
                      layer_attn_scratch *s) {
    const size_t hd = (size_t)sh->head_dim;
    s->q = bd_arena_floats(a, (size_t)T * (size_t)q_rows(sh));
    s->k = bd_arena_floats(a, (size_t)T * hd * (size_t)sh->n_head_kv);
    s->v = bd_arena_floats(a, (size_t)T * hd * (size_t)sh->n_head_kv);
    s->o = bd_arena_floats(a, (size_t)T * hd * (size_t)sh->n_head);
    s->rope = bd_arena_floats(a, (size_t)T * (sh->rope ? (size_t)sh->rope->n_rot : 0));
    s->vis = bd_arena_take(a, (size_t)T * sizeof(int32_t *));
    /* A row sees at most n_ctx cells (its sequence's cells, itself included). */
    const bd_attn shape = {.n_head = sh->n_head, .n_head_kv = sh->n_head_kv, .head_dim = sh->head_dim};
    s->att_bytes = bd_attention_scratch_size(&shape, n_ctx, n_threads);
    s->att = bd_arena_take(a, s->att_bytes);
}

static size_t maxz(size_t a, size_t b) { return a > b ? a : b; }

size_t layer_attn_wsize(const layer_attn *w, int32_t T) {
    size_t s = 0;
    const bd_weight *ws[] = {&w->wq, &w->wk, &w->wv, &w->wo};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        if (ws[i]->data) s = maxz(s, blk_matmul_wsize(ws[i]->type, ws[i]->n_in, T));
    return s;
}

void layer_attention(bd_threadpool *tp, const layer_attn *w, const layer_attn_shape *sh, layer_attn_scratch *s,
                     void *wbuf, const bd_fwd_batch *b, const bd_fwd_memory *mem, int slot, int il, const float *u,
                     float *out) {
    const int32_t T = b->n, hd = sh->head_dim, nh = sh->n_head, nkv = sh->n_head_kv;
    const int32_t n_kv = hd * nkv, ldq = (int32_t)q_rows(sh), qstride = sh->gated ? 2 * hd : hd;
    void *kc = mem->k[slot], *vc = mem->v[slot];

    /* q (‖ gate per head), k, v: one dispatch */
    blk_matmul_multi(tp, (const bd_weight *[]){&w->wq, &w->wk, &w->wv}, (float *[]){s->q, s->k, s->v}, 3, u, T,
                     wbuf);
    layer_add_bias(s->q, &w->bq, T);
    layer_add_bias(s->k, &w->bk, T);
    layer_add_bias(s->v, &w->bv, T);
    bd_tap("Vcur", il, s->v, n_kv, T, n_kv);

    for (int32_t t = 0; t < T; t++) {
        float *q = s->q + (size_t)t * ldq, *k = s->k + (size_t)t * n_kv;
        if (w->q_norm.data) {
            for (int32_t h = 0; h < nh; h++) bd_rmsnorm(q + (size_t)h * qstride, q + (size_t)h * qstride, w->q_norm.data, hd, sh->eps);
            for (int32_t j = 0; j < nkv; j++) bd_rmsnorm(k + (size_t)j * hd, k + (size_t)j * hd, w->k_norm.data, hd, sh->eps);
        }
        if (sh->rope) {
            float *cs = s->rope + (size_t)t * sh->rope->n_rot;
            bd_rope_cache(sh->rope, b->pos + (size_t)t * sh->n_pos, sh->n_pos, cs);
            bd_rope_apply(sh->rope, cs, q, nh, qstride);
            bd_rope_apply(sh->rope, cs, k, nkv, hd);
        }
        /* The cache holds post-norm, post-RoPE K and raw V. */
        bd_tap("Qcur", il, q, hd, nh, qstride);
        bd_tap("Kcur", il, k, n_kv, 1, n_kv);
        if (mem->dst_cell[t] < 0) continue; /* a replay: the cell already holds this row's K/V */
        layer_kv_store(kc, mem->kv_type, mem->dst_cell[t], n_kv, k);
        layer_kv_store(vc, mem->kv_type, mem->dst_cell[t], n_kv, s->v + (size_t)t * n_kv);
    }

    /* o_h = softmax(scale · q_h·K_jᵀ over the visible cells) · V_j (tensor/ops.h bd_attention) */
    const size_t esz = mem->kv_type == BRAID_TYPE_F32 ? sizeof(float) : sizeof(uint16_t);
    const bd_attn a = {.n_head = nh, .n_head_kv = nkv, .head_dim = hd,
                       .scale = sh->scale != 0.0f ? sh->scale : 1.0f / sqrtf((float)hd),
                       .kv_type = (uint32_t)mem->kv_type, .k = kc, .v = vc, .k_cell_bytes = (size_t)n_kv * esz,
                       .v_cell_bytes = (size_t)n_kv * esz, .k_head_bytes = (size_t)hd * esz,
                       .v_head_bytes = (size_t)hd * esz};
    for (int32_t t = 0; t < T; t++) s->vis[t] = mem->runs[b->seq[t]].cells;
    braid_status st = bd_attention(tp, &a, T, s->q, ldq, qstride, (const int32_t *const *)s->vis, mem->n_visible,
                                   s->o, (int64_t)hd * nh, s->att, s->att_bytes);
    assert(st == BRAID_OK); /* shapes validated at load, scratch sized by layer_attn_carve */
    (void)st;
    if (sh->gated) {
        bd_tap("attn_pregate", il, s->o, (int64_t)hd * nh, T, (int64_t)hd * nh);
        for (int32_t t = 0; t < T; t++)
            for (int32_t h = 0; h < nh; h++) {
                float *o = s->o + (size_t)t * hd * nh + (size_t)h * hd;
                bd_mul_sigmoid(o, o, s->q + (size_t)t * ldq + (size_t)h * 2 * hd + hd, hd);
            }
        bd_tap("attn_gated", il, s->o, (int64_t)hd * nh, T, (int64_t)hd * nh);
    }
    blk_matmul(tp, &w->wo, s->o, T, out, wbuf);
    layer_add_bias(out, &w->bo, T);
    bd_tap("attn_output", il, out, w->wo.n_out, T, w->wo.n_out);
}

/* ---- dense FFNs ------------------------------------------------------------------------------------------ */

braid_status layer_ffn_bind(bd_loader *l, int il, int64_t E, int64_t n_ff, int gated, int biases, layer_ffn *w) {
    memset(w, 0, sizeof *w);
    if (gated) BD_TRY(bd_bind_layer(l, il, "ffn_gate.weight", E, n_ff, 0, 1, &w->gate));
    BD_TRY(bd_bind_layer(l, il, "ffn_up.weight", E, n_ff, 0, 1, &w->up));
    BD_TRY(bd_bind_layer(l, il, "ffn_down.weight", n_ff, E, 0, 1, &w->down));
    if (!biases) return BRAID_OK;
    if (gated) BD_TRY(bd_bind_layer(l, il, "ffn_gate.bias", n_ff, 1, 1, 0, &w->b_gate));
    BD_TRY(bd_bind_layer(l, il, "ffn_up.bias", n_ff, 1, 1, 0, &w->b_up));
    BD_TRY(bd_bind_layer(l, il, "ffn_down.bias", E, 1, 1, 0, &w->b_down));
    return BRAID_OK;
}

size_t layer_ffn_wsize(const layer_ffn *w, int32_t T) {
    size_t s = 0;
    const bd_weight *ws[] = {&w->gate, &w->up, &w->down};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        if (ws[i]->data) s = maxz(s, blk_matmul_wsize(ws[i]->type, ws[i]->n_in, T));
    return s;
}

void layer_ffn_swiglu(bd_threadpool *tp, const layer_ffn *w, const float *u, int32_t T, float *out, float *g,
                      float *up, void *wbuf, int il) {
    const int64_t n_ff = w->up.n_out;
    blk_matmul_multi(tp, (const bd_weight *[]){&w->gate, &w->up}, (float *[]){g, up}, 2, u, T, wbuf);
    layer_add_bias(g, &w->b_gate, T);
    layer_add_bias(up, &w->b_up, T);
    bd_tap("ffn_gate", il, g, n_ff, T, n_ff);
    bd_tap("ffn_up", il, up, n_ff, T, n_ff);
    bd_swiglu_rows(tp, g, n_ff, g, n_ff, up, n_ff, n_ff, T);
    bd_tap("ffn_swiglu", il, g, n_ff, T, n_ff);
    blk_matmul(tp, &w->down, g, T, out, wbuf);
    layer_add_bias(out, &w->b_down, T);
}

void layer_ffn_relu2(bd_threadpool *tp, const layer_ffn *w, const float *u, int32_t T, float *out, float *h,
                     void *wbuf, int il) {
    const int64_t n_ff = w->up.n_out;
    blk_matmul(tp, &w->up, u, T, h, wbuf);
    layer_add_bias(h, &w->b_up, T);
    bd_relu_sqr(h, h, (int64_t)T * n_ff);
    bd_tap("ffn_relu_sqr", il, h, n_ff, T, n_ff);
    blk_matmul(tp, &w->down, h, T, out, wbuf);
    layer_add_bias(out, &w->b_down, T);
}

/* ---- recurrent runs -------------------------------------------------------------------------------------- */

void layer_rs_view(const bd_fwd_memory *m, const bd_fwd_run *r, int slot, float **snapbuf, layer_rs *v) {
    const int64_t co = m->conv_off[slot], so = m->ssm_off[slot];
    v->conv_in = r->state_in + co;
    v->ssm_in = r->state_in + so;
    v->conv_out = r->state_out + co;
    v->ssm_out = r->state_out + so;
    v->conv_snap = v->ssm_snap = NULL;
    if (!m->snap) return;
    for (int32_t i = 0; i < r->n_rows; i++) {
        float *blk = m->snap[r->row0 + i];
        snapbuf[i] = blk ? blk + co : NULL;
        snapbuf[r->n_rows + i] = blk ? blk + so : NULL;
    }
    v->conv_snap = snapbuf;
    v->ssm_snap = snapbuf + r->n_rows;
}
