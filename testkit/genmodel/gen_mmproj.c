/* gen_mmproj.c — see gen_mmproj.h. Keys are the clip.* ones llama.cpp's mtmd reads for qwen3vl_merger (it
 * reads every integer key as UINT32 strictly); tensors are listed in ggml ne order. Weights are drawn per
 * tensor from (seed, name), so F16 and F32 files of one seed hold the same values up to rounding. Scales keep
 * activations of order 1 through the blocks: a larger one on qkv so attention is not uniform, random norm
 * weights and biases so that a misplaced one shows. */
#include "genmodel/gen_mmproj.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/status.h"
#include "genmodel/gen_rng.h"
#include "gguf/gguf.h"
#include "tensor/types.h"

typedef enum { MM_MAT, MM_BIAS, MM_NORM_W, MM_NORM_B, MM_POS } mm_init;

typedef struct mm_tensor {
    char name[64];
    int64_t ne[4];
    uint32_t n_dims, type;
    mm_init init;
    float std;
} mm_tensor;

typedef struct mm_plan {
    mm_tensor t[16 + 16 * GEN_MMPROJ_MAX_LAYERS];
    size_t n, next;
    uint64_t seed;
    float *row;
} mm_plan;

void gen_mmproj_default(gen_mmproj_params *p) {
    memset(p, 0, sizeof *p);
    p->n_embd = 64;
    p->n_head = 4;
    p->n_ff = 128;
    p->n_layer = 2;
    p->pos_side = 16;
    p->n_text = 256;
    p->type = BRAID_TYPE_F16;
    p->seed = 1;
    p->std = 0.05f;
    p->eps = 1e-6f;
}

static void add(mm_plan *p, mm_init init, float std, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                const char *fmt, int idx) {
    mm_tensor *t = &p->t[p->n++];
    snprintf(t->name, sizeof t->name, fmt, idx);
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->ne[3] = ne3;
    t->n_dims = ne3 > 1 ? 4 : ne1 > 1 ? 2 : 1;
    t->type = init == MM_MAT ? type : BRAID_TYPE_F32;
    t->init = init;
    t->std = std;
}

static braid_status fill(void *user, const char *name, void *buf, size_t nbytes) {
    mm_plan *p = user;
    if (p->next >= p->n || strcmp(name, p->t[p->next].name))
        return bd_error(BRAID_E_INVALID, "gen-model: writer asked for tensor '%s' out of order", name);
    const mm_tensor *t = &p->t[p->next++];
    size_t row_bytes = bd_row_size(t->type, t->ne[0]);
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (row_bytes * (size_t)rows != nbytes) return bd_error(BRAID_E_INVALID, "gen-model: %s: size mismatch", name);
    const bd_type_traits *tt = bd_type_traits_get(t->type);
    uint64_t st = bd_hash64(name, strlen(name), p->seed);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < t->ne[0]; i++) {
            float z = rng_normal(&st);
            p->row[i] = t->init == MM_NORM_W ? 1.0f + 0.25f * z : t->std * z;
        }
        uint8_t *dst = (uint8_t *)buf + (size_t)r * row_bytes;
        if (t->type == BRAID_TYPE_F32) memcpy(dst, p->row, row_bytes);
        else tt->from_float(p->row, dst, t->ne[0]);
    }
    return BRAID_OK;
}

braid_status gen_mmproj_write(const gen_mmproj_params *a, const char *path, uint64_t *n_params) {
    const int64_t E = a->n_embd, H = a->n_head, F = a->n_ff, L = a->n_layer, S = a->pos_side, T = a->n_text, P = 16;
    if (E <= 0 || H <= 0 || F <= 0 || L <= 0 || S <= 0 || T <= 0 || E > 65536 || F > 1 << 20 || T > 1 << 20 ||
        S > 1024)
        return bd_error(BRAID_E_INVALID, "gen-model: qwen3vl-mmproj dimensions must be positive and sane");
    if (E % H || (E / H) % 4)
        return bd_error(BRAID_E_INVALID, "gen-model: qwen3vl-mmproj head dim %lld/%lld must be a multiple of 4",
                        (long long)E, (long long)H);
    if (L > GEN_MMPROJ_MAX_LAYERS) return bd_error(BRAID_E_INVALID, "gen-model: at most %d layers", GEN_MMPROJ_MAX_LAYERS);
    if (a->type != BRAID_TYPE_F16 && a->type != BRAID_TYPE_F32)
        return bd_error(BRAID_E_UNSUPPORTED, "gen-model: qwen3vl-mmproj matrices are f16 or f32");
    int ds[GEN_MMPROJ_MAX_LAYERS] = {0};
    for (int i = 0; i < a->n_deepstack; i++) {
        if (a->deepstack[i] < 0 || a->deepstack[i] >= L)
            return bd_error(BRAID_E_INVALID, "gen-model: deepstack layer %d is not in 0..%lld", a->deepstack[i],
                            (long long)L - 1);
        ds[a->deepstack[i]] = 1;
    }
    mm_plan *p = bd_calloc(1, sizeof *p);
    if (!p) return bd_error(BRAID_E_NOMEM, "gen-model: out of memory");
    p->seed = a->seed;
    const uint32_t ty = a->type;
    const float sd = a->std;
    add(p, MM_MAT, 0.02f, ty, P, P, 3, E, "v.patch_embd.weight%.0d", 0);
    add(p, MM_MAT, 0.02f, ty, P, P, 3, E, "v.patch_embd.weight.%d", 1);
    add(p, MM_BIAS, 0.02f, ty, E, 1, 1, 1, "v.patch_embd.bias%.0d", 0);
    add(p, MM_POS, 0.5f, ty, E, S * S, 1, 1, "v.position_embd.weight%.0d", 0);
    for (int i = 0; i < L; i++) {
        add(p, MM_NORM_W, 0, ty, E, 1, 1, 1, "v.blk.%d.ln1.weight", i);
        add(p, MM_NORM_B, 0.1f, ty, E, 1, 1, 1, "v.blk.%d.ln1.bias", i);
        add(p, MM_MAT, 0.15f, ty, E, 3 * E, 1, 1, "v.blk.%d.attn_qkv.weight", i);
        add(p, MM_BIAS, 0.02f, ty, 3 * E, 1, 1, 1, "v.blk.%d.attn_qkv.bias", i);
        add(p, MM_MAT, sd, ty, E, E, 1, 1, "v.blk.%d.attn_out.weight", i);
        add(p, MM_BIAS, 0.02f, ty, E, 1, 1, 1, "v.blk.%d.attn_out.bias", i);
        add(p, MM_NORM_W, 0, ty, E, 1, 1, 1, "v.blk.%d.ln2.weight", i);
        add(p, MM_NORM_B, 0.1f, ty, E, 1, 1, 1, "v.blk.%d.ln2.bias", i);
        add(p, MM_MAT, 0.1f, ty, E, F, 1, 1, "v.blk.%d.ffn_up.weight", i);
        add(p, MM_BIAS, 0.02f, ty, F, 1, 1, 1, "v.blk.%d.ffn_up.bias", i);
        add(p, MM_MAT, sd, ty, F, E, 1, 1, "v.blk.%d.ffn_down.weight", i);
        add(p, MM_BIAS, 0.02f, ty, E, 1, 1, 1, "v.blk.%d.ffn_down.bias", i);
    }
    add(p, MM_NORM_W, 0, ty, E, 1, 1, 1, "v.post_ln.weight%.0d", 0);
    add(p, MM_NORM_B, 0.1f, ty, E, 1, 1, 1, "v.post_ln.bias%.0d", 0);
    add(p, MM_MAT, sd, ty, 4 * E, 4 * E, 1, 1, "mm.0.weight%.0d", 0);
    add(p, MM_BIAS, 0.02f, ty, 4 * E, 1, 1, 1, "mm.0.bias%.0d", 0);
    add(p, MM_MAT, sd, ty, 4 * E, T, 1, 1, "mm.2.weight%.0d", 0);
    add(p, MM_BIAS, 0.02f, ty, T, 1, 1, 1, "mm.2.bias%.0d", 0);
    for (int i = 0; i < L; i++) {
        if (!ds[i]) continue;
        add(p, MM_NORM_W, 0, ty, 4 * E, 1, 1, 1, "v.deepstack.%d.norm.weight", i);
        add(p, MM_NORM_B, 0.1f, ty, 4 * E, 1, 1, 1, "v.deepstack.%d.norm.bias", i);
        add(p, MM_MAT, sd, ty, 4 * E, 4 * E, 1, 1, "v.deepstack.%d.fc1.weight", i);
        add(p, MM_BIAS, 0.02f, ty, 4 * E, 1, 1, 1, "v.deepstack.%d.fc1.bias", i);
        add(p, MM_MAT, sd, ty, 4 * E, T, 1, 1, "v.deepstack.%d.fc2.weight", i);
        add(p, MM_BIAS, 0.02f, ty, T, 1, 1, 1, "v.deepstack.%d.fc2.bias", i);
    }

    gguf_writer *w = NULL;
    braid_status s = gguf_writer_new(3, &w);
    const float mean[3] = {0.5f, 0.5f, 0.5f};
    uint8_t is_ds[GEN_MMPROJ_MAX_LAYERS];
    for (int i = 0; i < L; i++) is_ds[i] = (uint8_t)ds[i];
    char name[96];
    snprintf(name, sizeof name, "braid gen-model qwen3vl-mmproj seed %llu", (unsigned long long)a->seed);
#define K(expr)                                                                                                 \
    if (s == BRAID_OK) s = (expr)
    K(gguf_writer_set_str(w, "general.architecture", "clip"));
    K(gguf_writer_set_str(w, "general.type", "mmproj"));
    K(gguf_writer_set_str(w, "general.name", name));
    K(gguf_writer_set_u32(w, "general.file_type", ty == BRAID_TYPE_F16 ? 1 : 0));
    K(gguf_writer_set_bool(w, "clip.has_vision_encoder", 1));
    K(gguf_writer_set_str(w, "clip.projector_type", "qwen3vl_merger"));
    K(gguf_writer_set_u32(w, "clip.vision.projection_dim", (uint32_t)T));
    K(gguf_writer_set_u32(w, "clip.vision.image_size", (uint32_t)(S * P)));
    K(gguf_writer_set_u32(w, "clip.vision.patch_size", (uint32_t)P));
    K(gguf_writer_set_u32(w, "clip.vision.embedding_length", (uint32_t)E));
    K(gguf_writer_set_u32(w, "clip.vision.feed_forward_length", (uint32_t)F));
    K(gguf_writer_set_u32(w, "clip.vision.block_count", (uint32_t)L));
    K(gguf_writer_set_u32(w, "clip.vision.attention.head_count", (uint32_t)H));
    K(gguf_writer_set_array(w, "clip.vision.image_mean", GGUF_TYPE_FLOAT32, mean, 3));
    K(gguf_writer_set_array(w, "clip.vision.image_std", GGUF_TYPE_FLOAT32, mean, 3));
    K(gguf_writer_set_bool(w, "clip.use_gelu", 1));
    K(gguf_writer_set_u32(w, "clip.vision.spatial_merge_size", 2));
    K(gguf_writer_set_f32(w, "clip.vision.attention.layer_norm_epsilon", a->eps));
    K(gguf_writer_set_array(w, "clip.vision.is_deepstack_layers", GGUF_TYPE_BOOL, is_ds, (uint64_t)L));
#undef K
    uint64_t np = 0;
    int64_t max_row = 0;
    for (size_t i = 0; s == BRAID_OK && i < p->n; i++) {
        const mm_tensor *t = &p->t[i];
        s = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, NULL);
        np += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        if (t->ne[0] > max_row) max_row = t->ne[0];
    }
    if (s == BRAID_OK) {
        p->row = bd_mallocn((size_t)max_row, sizeof(float));
        if (!p->row) s = bd_error(BRAID_E_NOMEM, "gen-model: out of memory");
    }
    if (s == BRAID_OK) s = gguf_writer_write(w, path, fill, p);
    if (s == BRAID_OK && n_params) *n_params = np;
    bd_free(p->row);
    bd_free(p);
    gguf_writer_free(w);
    return s;
}
