/* qwen3next.c — the array transforms of qwen3next.h: Qwen3-Next's grouped GDN projections and its interleaved
 * key-head repeat, expressed in the layout qwen35.c's Gated DeltaNet consumes. Pure copies: no arithmetic, so
 * the values reaching the conv, the delta rule and the gated norm are the ones llama.cpp's views select. */
#include "models/qwen3next.h"

#include <string.h>

void q3n_split_qkvz(const float *qkvz, int32_t T, int S, int H_k, int r, float *mixed, int64_t ldm, float *z,
                    int64_t ldz) {
    const size_t group = (size_t)(2 * S + 2 * r * S), KD = (size_t)H_k * S, vs = (size_t)r * S;
    for (int32_t t = 0; t < T; t++) {
        const float *src = qkvz + (size_t)t * group * H_k;
        float *m = mixed + (size_t)t * ldm, *zt = z + (size_t)t * ldz;
        for (int g = 0; g < H_k; g++, src += group) {
            memcpy(m + (size_t)g * S, src, (size_t)S * sizeof(float));               /* q_g */
            memcpy(m + KD + (size_t)g * S, src + S, (size_t)S * sizeof(float));      /* k_g */
            memcpy(m + 2 * KD + g * vs, src + 2 * S, vs * sizeof(float));            /* v heads g·r .. g·r+r-1 */
            memcpy(zt + g * vs, src + 2 * S + vs, vs * sizeof(float));               /* z of the same heads */
        }
    }
}

void q3n_split_ba(const float *ba, int32_t T, int H_k, int r, float *beta, float *alpha) {
    const int H_v = H_k * r;
    for (int32_t t = 0; t < T; t++) {
        const float *src = ba + (size_t)t * 2 * H_v;
        for (int g = 0; g < H_k; g++)
            for (int m = 0; m < r; m++) {
                beta[(size_t)t * H_v + g * r + m] = src[g * 2 * r + m];
                alpha[(size_t)t * H_v + g * r + m] = src[g * 2 * r + r + m];
            }
    }
}

void q3n_repeat_qk(const float *y, int64_t ldy, int32_t T, int S, int H_k, int r, float *qk) {
    const size_t H_v = (size_t)H_k * r, VD = H_v * S, KD = (size_t)H_k * S;
    for (int32_t t = 0; t < T; t++) {
        const float *q = y + (size_t)t * ldy, *k = q + KD;
        float *dq = qk + (size_t)t * 2 * VD, *dk = dq + VD;
        for (size_t h = 0; h < H_v; h++) {
            memcpy(dq + h * S, q + (h / r) * S, (size_t)S * sizeof(float));
            memcpy(dk + h * S, k + (h / r) * S, (size_t)S * sizeof(float));
        }
    }
}
