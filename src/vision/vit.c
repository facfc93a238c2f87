/* vit.c — the qwen3vl_merger forward pass (reference/vision.md §1.5-1.11) on braid's kernels: patch embedding
 * (both temporal kernels over the same frame, fp16 operands as ggml's im2col), the learned position grid
 * (bilinear, align-corners resize), L pre-norm ViT blocks (LayerNorm, fused qkv, 2-D vision RoPE, full
 * attention, GELU MLP), deepstack taps, then post-LayerNorm and the 2x2 merger MLP.
 *
 * Tokens are kept in 2x2 block order from the start (block row Y, block column X, then dy, dx), the order
 * llama.cpp permutes to, so the merger is a plain reshape: 4 consecutive tokens form one output row, and
 * output rows come out row-major over the nx x ny grid. Matmuls (bd_matmul: the prompt GEMM tiles for 16
 * patches on) split weight rows over the threads; attention is dense products per head (bd_attention_full);
 * the row work between them (LayerNorm, biases, GELU, RoPE from a per-token table built once) is threaded in
 * vit_rows.c. Activations going into F16 / BF16 weights are rounded to that type (bd_matmul does), as ggml's
 * CPU matmul. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "tensor/matmul.h"
#include "tensor/ops.h"
#include "tensor/types.h"
#include "vision/vision.h"

/* ---- products ---------------------------------------------------------------------------------------------- */

static void add_bias_rows(float *y, int64_t ld, int64_t n, int64_t rows, const float *b) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++) y[r * ld + i] += b[i];
}

typedef struct vit_ws {
    bd_threadpool *tp;
    void *scratch;
    size_t scratch_size;
} vit_ws;

/* y[T][m.n] = x[T][m.k] · mᵀ. bd_matmul rounds x to the weight's vec_dot_type (fp16 for F16), as ggml. Biases
 * are added by the row op that follows (vit_rows.c). */
static braid_status linear(vit_ws *ws, const bd_vmat *m, float *x, int64_t T, float *y) {
    return bd_matmul(ws->tp, m->type, m->w, m->n, m->k, x, m->k, T, y, m->n, ws->scratch, ws->scratch_size);
}

/* ---- the pass ----------------------------------------------------------------------------------------------- */

braid_status bd_vit_encode(braid_mmproj *mm, const float *pix, int32_t tw, int32_t th, float *out) {
    const int P = mm->patch, E = mm->n_embd, F = mm->n_ff, H = mm->n_head, d = mm->head_dim, T = mm->n_text;
    const int gw = tw / P, gh = th / P; /* patch grid */
    const int nx = gw / 2, ny = gh / 2;
    const int64_t n = (int64_t)gw * gh, K = 3 * (int64_t)P * P, E4 = 4 * (int64_t)E, rows = n / 4;
    const int64_t out_w = (int64_t)T * (1 + mm->n_ds);
    if (tw % (2 * P) || th % (2 * P) || n < 4)
        return bd_error(BRAID_E_INVALID, "vision: a %dx%d input is not a multiple of %d", tw, th, 2 * P);

    int nth = bd_threadpool_size(mm->tp);
    /* buffers: h [n][E] residual, x [n][max(K, E4, 3E, F)] work, y [n][max(3E, F, E4)], o [n][E] attention out */
    int64_t wide = K;
    if (3 * (int64_t)E > wide) wide = 3 * (int64_t)E;
    if (F > wide) wide = F;
    if (E4 > wide) wide = E4;
    size_t att_scratch = bd_attention_full_scratch_size(n, H, d, nth);
    /* weights are F32, F16 or BF16 (mmproj.c checks): these cover every product */
    size_t mm_scratch = bd_matmul_scratch_size(BRAID_TYPE_F16, wide, n);
    size_t s2 = bd_matmul_scratch_size(BRAID_TYPE_BF16, wide, n);
    if (s2 > mm_scratch) mm_scratch = s2;
    float *h = bd_mallocn((size_t)n * E, sizeof(float));
    float *x = bd_mallocn((size_t)n * wide, sizeof(float));
    float *y = bd_mallocn((size_t)n * wide, sizeof(float));
    float *o = bd_mallocn((size_t)(n * E > rows * T ? n * E : rows * T), sizeof(float));
    float *pos = bd_mallocn((size_t)n * E, sizeof(float));
    float *rope = bd_mallocn((size_t)n * d, sizeof(float)); /* [n][d]: cos, sin of each token's angles */
    void *scratch = bd_malloc(mm_scratch > att_scratch ? mm_scratch : att_scratch);
    braid_status s = BRAID_OK;
    if (!h || !x || !y || !o || !pos || !rope || !scratch) {
        s = bd_error(BRAID_E_NOMEM, "vision: out of memory for %lld patches", (long long)n);
        goto done;
    }
    vit_ws ws = {mm->tp, scratch, mm_scratch > att_scratch ? mm_scratch : att_scratch};

    /* token k in block order -> patch (row, col) */
#define TOK_ROW(k) ((int)(((k) / 4) / nx * 2 + ((k) % 4) / 2))
#define TOK_COL(k) ((int)(((k) / 4) % nx * 2 + ((k) % 2)))

    /* 1. patch embedding: im2col rows (c, ky, kx) rounded to fp16, times each temporal kernel */
    const int64_t plane = (int64_t)tw * th;
    for (int64_t k = 0; k < n; k++) {
        const int pr = TOK_ROW(k), pc = TOK_COL(k);
        float *row = x + k * K;
        for (int c = 0; c < 3; c++)
            for (int ky = 0; ky < P; ky++) {
                const float *src = pix + c * plane + (int64_t)(pr * P + ky) * tw + (int64_t)pc * P;
                for (int kx = 0; kx < P; kx++) row[(c * P + ky) * P + kx] = src[kx];
            }
    }
    const bd_vmat pw0 = {mm->patch_w[0], BRAID_TYPE_F16, E, K}, pw1 = {mm->patch_w[1], BRAID_TYPE_F16, E, K};
    if ((s = linear(&ws, &pw0, x, n, h)) != BRAID_OK) goto done;
    if ((s = linear(&ws, &pw1, x, n, y)) != BRAID_OK) goto done;
    for (int64_t i = 0; i < n * E; i++) h[i] += y[i];
    add_bias_rows(h, E, E, n, mm->patch_b);

    /* 2. learned positions: the S x S grid resized to gw x gh (bilinear, align corners), in token order */
    {
        const int S = mm->pos_side;
        float sf0 = (float)gw / (float)S, sf1 = (float)gh / (float)S;
        if (gw > 1 && S > 1) sf0 = (float)(gw - 1) / (float)(S - 1);
        if (gh > 1 && S > 1) sf1 = (float)(gh - 1) / (float)(S - 1);
        for (int64_t k = 0; k < n; k++) {
            const int r = TOK_ROW(k), c = TOK_COL(k);
            float *dst = pos + k * E;
            if (gw == S && gh == S) {
                memcpy(dst, mm->pos_embd + ((int64_t)r * S + c) * E, (size_t)E * sizeof(float));
                continue;
            }
            const float fy = (float)r / sf1, fx = (float)c / sf0;
            int64_t y0 = (int64_t)floorf(fy), x0 = (int64_t)floorf(fx);
            int64_t y1 = y0 + 1, x1 = x0 + 1;
            y0 = y0 < 0 ? 0 : y0 > S - 1 ? S - 1 : y0;
            y1 = y1 < 0 ? 0 : y1 > S - 1 ? S - 1 : y1;
            x0 = x0 < 0 ? 0 : x0 > S - 1 ? S - 1 : x0;
            x1 = x1 < 0 ? 0 : x1 > S - 1 ? S - 1 : x1;
            float dy = fy - (float)y0, dx = fx - (float)x0;
            dy = dy < 0 ? 0 : dy > 1 ? 1 : dy;
            dx = dx < 0 ? 0 : dx > 1 ? 1 : dx;
            const float *a = mm->pos_embd + (y0 * S + x0) * E, *b = mm->pos_embd + (y0 * S + x1) * E;
            const float *cc = mm->pos_embd + (y1 * S + x0) * E, *e = mm->pos_embd + (y1 * S + x1) * E;
            for (int i = 0; i < E; i++)
                dst[i] = a[i] * (1 - dx) * (1 - dy) + b[i] * dx * (1 - dy) + cc[i] * (1 - dx) * dy + e[i] * dx * dy;
        }
        for (int64_t i = 0; i < n * E; i++) h[i] += pos[i];
    }

    /* 3. the blocks */
    const float theta_scale = powf(10000.0f, -2.0f / (float)(d / 2));
    for (int64_t k = 0; k < n; k++) bd_vit_rope_table(rope + k * d, d, TOK_ROW(k), TOK_COL(k), theta_scale);
    int ds_slot = 0;
    for (int l = 0; l < mm->n_layer; l++) {
        const bd_vit_layer *L = &mm->layers[l];
        bd_vit_layernorm(mm->tp, x, E, h, E, E, n, L->ln1_w, L->ln1_b, mm->eps);
        if ((s = linear(&ws, &L->qkv, x, n, y)) != BRAID_OK) goto done;
        bd_vit_bias_rope(mm->tp, y, n, H, d, L->qkv_b, rope);
        if ((s = bd_attention_full(mm->tp, n, H, d, 1.0f / sqrtf((float)d), y, 3 * E, y + E, 3 * E, y + 2 * E, 3 * E,
                                   o, E, scratch, ws.scratch_size)) != BRAID_OK)
            goto done;
        if ((s = linear(&ws, &L->out, o, n, x)) != BRAID_OK) goto done;
        bd_vit_add(mm->tp, h, x, E, n, L->out_b);
        bd_vit_layernorm(mm->tp, x, E, h, E, E, n, L->ln2_w, L->ln2_b, mm->eps);
        if ((s = linear(&ws, &L->up, x, n, y)) != BRAID_OK) goto done;
        bd_vit_gelu(mm->tp, y, F, n, L->up_b);
        if ((s = linear(&ws, &L->down, y, n, x)) != BRAID_OK) goto done;
        bd_vit_add(mm->tp, h, x, E, n, L->down_b);
        if (L->has_ds) {
            /* deepstack: the layer output grouped 2x2 (no post_ln), LayerNorm over 4E, fc1, GELU, fc2 */
            bd_vit_layernorm(mm->tp, x, E4, h, E4, E4, rows, L->ds_norm_w, L->ds_norm_b, mm->eps);
            if ((s = linear(&ws, &L->ds_fc1, x, rows, y)) != BRAID_OK) goto done;
            bd_vit_gelu(mm->tp, y, E4, rows, L->ds_fc1_b);
            if ((s = linear(&ws, &L->ds_fc2, y, rows, o)) != BRAID_OK) goto done;
            add_bias_rows(o, T, T, rows, L->ds_fc2_b);
            ds_slot++;
            for (int64_t r = 0; r < rows; r++)
                memcpy(out + r * out_w + (int64_t)ds_slot * T, o + r * T, (size_t)T * sizeof(float));
        }
    }

    /* 4. post-LayerNorm per patch, the 2x2 merge (a reshape in block order), the merger MLP */
    bd_vit_layernorm(mm->tp, x, E, h, E, E, n, mm->post_ln_w, mm->post_ln_b, mm->eps);
    if ((s = linear(&ws, &mm->mm0, x, rows, y)) != BRAID_OK) goto done;
    bd_vit_gelu(mm->tp, y, E4, rows, mm->mm0_b);
    if ((s = linear(&ws, &mm->mm2, y, rows, o)) != BRAID_OK) goto done;
    add_bias_rows(o, T, T, rows, mm->mm2_b);
    for (int64_t r = 0; r < rows; r++) memcpy(out + r * out_w, o + r * T, (size_t)T * sizeof(float));
    (void)ny;
#undef TOK_ROW
#undef TOK_COL
done:
    bd_free(h);
    bd_free(x);
    bd_free(y);
    bd_free(o);
    bd_free(pos);
    bd_free(rope);
    bd_free(scratch);
    return s;
}
