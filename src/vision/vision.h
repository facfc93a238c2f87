/* vision.h — the internal side of the vision encoder (braid_mmproj): the projector's hyperparameters and
 * weights as loaded from the mmproj GGUF (mmproj.c), the preprocessing of an image into the encoder's input
 * (preprocess.c) and the ViT + merger forward pass (vit.c, its row work in vit_rows.c). The math is docs
 * reference/vision.md §1, computed in the order and with the fp16 roundings llama.cpp's CPU path uses, so rows
 * agree with libmtmd's. */
#ifndef BRAID_VISION_VISION_H
#define BRAID_VISION_VISION_H

#include <stdint.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "braid.h"
#include "gguf/gguf.h"

#define BD_VISION_MERGE 2 /* the 2x2 patch merger: qwen3vl's graph hard-codes it */

/* A weight matrix rm[n][k] in a storage type bd_matmul computes with. */
typedef struct bd_vmat {
    const void *w;
    uint32_t type;
    int64_t n, k;
} bd_vmat;

typedef struct bd_vit_layer {
    const float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    bd_vmat qkv, out, up, down;
    const float *qkv_b, *out_b, *up_b, *down_b;
    int has_ds; /* a deepstack merger taps this layer's output */
    const float *ds_norm_w, *ds_norm_b, *ds_fc1_b, *ds_fc2_b;
    bd_vmat ds_fc1, ds_fc2;
} bd_vit_layer;

struct braid_mmproj {
    gguf_file *f;
    /* hyperparameters */
    int32_t n_embd, n_head, head_dim, n_ff, n_layer, patch, pos_side, n_text, n_ds;
    float eps, mean[3], std[3];
    int64_t min_pixels, max_pixels; /* of the resized image */
    /* weights (pointers into the mapping, except patch_w: the two temporal kernels rounded to fp16 as ggml's
     * F16 im2col does, owned) */
    uint16_t *patch_w[2];    /* rm[E][3*P*P], element (c, ky, kx) at c*P*P + ky*P + kx */
    const float *patch_b;    /* [E] */
    const float *pos_embd;   /* [S*S][E], grid row-major */
    bd_vit_layer *layers;    /* [n_layer], owned */
    const float *post_ln_w, *post_ln_b;
    bd_vmat mm0, mm2;
    const float *mm0_b, *mm2_b;
    bd_threadpool *tp;       /* owned */
    /* rows of recent images by content (mmproj.c): most recently used last */
    struct bd_vcache_entry {
        uint64_t hash, hash2;
        int32_t w, h, nx, ny;
        float *rows; /* owned */
        size_t bytes;
    } *cache;
    size_t n_cache, cap_cache, cache_used, cache_budget;
    uint64_t cache_hits, cache_misses;
};

/* The resized size (W', H', multiples of patch*2) of a W x H image: vision.md §1.4 step 2. */
void bd_vision_target_size(const braid_mmproj *mm, int32_t w, int32_t h, int32_t *tw, int32_t *th);
/* The encoder input of img: planar [3][th][tw] floats, resized (Pillow bicubic), padded and normalized
 * (§1.4 steps 3-5). *out is allocated (bd_free). */
BRAID_NODISCARD braid_status bd_vision_preprocess(const braid_mmproj *mm, const braid_image *img, float **out,
                                                  int32_t *tw, int32_t *th);
/* The forward pass on preprocessed pixels (tw x th, multiples of 32): rows [nx*ny][n_text*(1+n_ds)] into out. */
BRAID_NODISCARD braid_status bd_vit_encode(braid_mmproj *mm, const float *pix, int32_t tw, int32_t th, float *out);

/* The row work between the ViT's products (vit_rows.c), rows split over the pool; b is a bias of n floats.
 * y[r] = LayerNorm(x[r]) * w + b over n elements (ggml_norm's sums in double). */
void bd_vit_layernorm(bd_threadpool *tp, float *y, int64_t ldy, const float *x, int64_t ldx, int64_t n, int64_t rows,
                      const float *w, const float *b, float eps);
/* y = gelu(y + b) on rows of n contiguous floats (b may be NULL): GELU as ggml computes it on the CPU, through
 * the fp16 table of the tanh approximation. */
void bd_vit_gelu(bd_threadpool *tp, float *y, int64_t n, int64_t rows, const float *b);
/* h = (y + b) + h on rows of n contiguous floats: a projection's bias, then the residual. */
void bd_vit_add(bd_threadpool *tp, float *h, const float *y, int64_t n, int64_t rows, const float *b);
/* The fused qkv rows ([rows][3*n_head*d]: q, k, v) get their bias b, then q and k the vision RoPE of their
 * token: cs + r*d, from bd_vit_rope_table. */
void bd_vit_bias_rope(bd_threadpool *tp, float *qkv, int64_t rows, int n_head, int d, const float *b, const float *cs);
/* The RoPE angles of a patch at (row, col), head size d: cs[j] = cos θ_j, cs[d/2 + j] = sin θ_j for j < d/2,
 * θ built by repeated float multiplication by theta_scale as ggml's mrope cache does (vision.md §1.8). */
void bd_vit_rope_table(float *cs, int d, int row, int col, float theta_scale);

#endif
