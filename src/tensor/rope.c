/* rope.c — rotary position embedding: NORM, NEOX, MROPE and IMROPE (architectures.md §0.2, §1.6).
 *
 * The angles follow ggml exactly: θ starts at the position (as float) and is multiplied by
 * base^(-2/n_rot) (powf) once per pair, in float, so pair k gets p·s·s·…·s rather than p·base^(-2k/n_rot);
 * the difference grows with k and p and is what a conformance test against llama.cpp would see. M-RoPE keeps
 * one running θ per position component and picks, per pair, the component its section says. Then
 * θ·freq_scale, cos/sin times attn_factor. YaRN's ramp (ext_factor != 0) is not supported: no architecture
 * braid runs uses it. */
#include <assert.h>
#include <math.h>

#include "tensor/ops.h"

void bd_rope_cache(const bd_rope *r, const int32_t *pos, int n_pos, float *cache) {
    assert(r->n_rot > 0 && r->n_rot % 2 == 0);
    const float theta_scale = powf(r->freq_base, -2.0f / (float)r->n_rot);
    const int half = r->n_rot / 2;
    if (r->mode != BD_ROPE_MROPE && r->mode != BD_ROPE_IMROPE) {
        float theta = (float)pos[0];
        for (int k = 0; k < half; k++) {
            const float t = theta * r->freq_scale;
            cache[2 * k] = cosf(t) * r->attn_factor;
            cache[2 * k + 1] = sinf(t) * r->attn_factor;
            theta *= theta_scale;
        }
        return;
    }
    /* text tokens (one component) are (p, p, p, 0) */
    float th[4];
    for (int c = 0; c < 4; c++) th[c] = n_pos >= 4 ? (float)pos[c] : c < 3 ? (float)pos[0] : 0.0f;
    const int *s = r->sections;
    const int sect = s[0] + s[1] + s[2] + s[3];
    assert(sect > 0);
    for (int k = 0; k < half; k++) {
        const int sector = k % sect;
        int c;
        if (r->mode == BD_ROPE_IMROPE) {
            if (sector % 3 == 1 && sector < 3 * s[1]) c = 1;
            else if (sector % 3 == 2 && sector < 3 * s[2]) c = 2;
            else if (sector % 3 == 0 && sector < 3 * s[0]) c = 0;
            else c = 3;
        } else {
            c = sector < s[0] ? 0 : sector < s[0] + s[1] ? 1 : sector < s[0] + s[1] + s[2] ? 2 : 3;
        }
        const float t = th[c] * r->freq_scale;
        cache[2 * k] = cosf(t) * r->attn_factor;
        cache[2 * k + 1] = sinf(t) * r->attn_factor;
        for (int j = 0; j < 4; j++) th[j] *= theta_scale;
    }
}

void bd_rope_apply(const bd_rope *r, const float *cache, float *x, int64_t n_head, int64_t head_stride) {
    const int half = r->n_rot / 2;
    /* NORM rotates adjacent pairs (x[2k], x[2k+1]); the others pair x[k] with x[k + n_rot/2]. */
    const int stride = r->mode == BD_ROPE_NORM ? 1 : half;
    for (int64_t h = 0; h < n_head; h++) {
        float *xh = x + h * head_stride;
        for (int k = 0; k < half; k++) {
            const int i0 = r->mode == BD_ROPE_NORM ? 2 * k : k;
            const float c = cache[2 * k], s = cache[2 * k + 1];
            const float x0 = xh[i0], x1 = xh[i0 + stride];
            /* ggml's rounding (its compiler fuses one product of each): x0·c − (x1·s), x0·s + (x1·c) */
            xh[i0] = fmaf(x0, c, -(x1 * s));
            xh[i0 + stride] = fmaf(x0, s, x1 * c);
        }
    }
}

typedef struct rope_rows {
    const bd_rope *r;
    float *x;
    int64_t T, ldx, n_head, head_stride;
    const int32_t *pos;
    int n_pos;
} rope_rows;

static void rope_rows_task(void *p, int ith, int nth) {
    const rope_rows *a = p;
    float cache[BD_ROPE_MAX_ROT];
    int64_t t0, t1;
    bd_split(a->T, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        bd_rope_cache(a->r, a->pos + t * a->n_pos, a->n_pos, cache);
        bd_rope_apply(a->r, cache, a->x + t * a->ldx, a->n_head, a->head_stride);
    }
}

void bd_rope_rows(bd_threadpool *tp, const bd_rope *r, float *x, int64_t T, int64_t ldx, int64_t n_head,
                  int64_t head_stride, const int32_t *pos, int n_pos) {
    assert(r->n_rot <= BD_ROPE_MAX_ROT);
    rope_rows a = {r, x, T, ldx, n_head, head_stride, pos, n_pos};
    bd_threadpool_run(T < 8 ? NULL : tp, rope_rows_task, &a);
}
