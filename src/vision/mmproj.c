/* mmproj.c — braid_mmproj: loading a vision projector GGUF (general.architecture "clip") and the public
 * encode call. Loading checks everything the forward pass relies on — the projector type, every key with
 * its type, every tensor's presence, shape and storage type — so vit.c trusts the struct. The keys and names
 * are reference/vision.md §1.2-1.3 (what llama.cpp's converter writes and mtmd reads). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "tensor/types.h"
#include "vision/image.h"
#include "vision/vision.h"

braid_mmproj_params braid_mmproj_default_params(void) {
    braid_mmproj_params p = {0, 0, 0, 0};
    return p;
}

static int str_is(const gguf_str *s, const char *want) {
    return s->len == strlen(want) && !memcmp(s->ptr, want, s->len);
}

/* A tensor with the given dims (unused dims 0) and one of the allowed types (a bit per type id < 32). */
static braid_status tensor(const braid_mmproj *mm, const char *name, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                           uint32_t types, const gguf_tensor **out) {
    const gguf_tensor *t = gguf_find_tensor(mm->f, name);
    if (!t) return bd_error(BRAID_E_FORMAT, "mmproj: tensor %s is missing", name);
    const int64_t want[4] = {ne0, ne1 ? ne1 : 1, ne2 ? ne2 : 1, ne3 ? ne3 : 1};
    for (int i = 0; i < 4; i++)
        if (t->ne[i] != want[i])
            return bd_error(BRAID_E_FORMAT, "mmproj: tensor %s is {%lld, %lld, %lld, %lld}, want {%lld, %lld, %lld, %lld}",
                            name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                            (long long)want[0], (long long)want[1], (long long)want[2], (long long)want[3]);
    if (t->type >= 32 || !(types & (1u << t->type)))
        return bd_error(BRAID_E_UNSUPPORTED, "mmproj: tensor %s has type %s, not supported here", name,
                        gguf_type_name(t->type));
    *out = t;
    return BRAID_OK;
}

#define T_F32 (1u << BRAID_TYPE_F32)
#define T_MAT ((1u << BRAID_TYPE_F32) | (1u << BRAID_TYPE_F16) | (1u << BRAID_TYPE_BF16))

static braid_status vec(const braid_mmproj *mm, const char *name, int64_t n, const float **out) {
    const gguf_tensor *t = NULL;
    BD_TRY(tensor(mm, name, n, 0, 0, 0, T_F32, &t));
    *out = t->data;
    return BRAID_OK;
}

/* A matrix of n rows of k (ggml ne {k, n}). */
static braid_status mat(const braid_mmproj *mm, const char *name, int64_t k, int64_t n, bd_vmat *out) {
    const gguf_tensor *t = NULL;
    BD_TRY(tensor(mm, name, k, n, 0, 0, T_MAT, &t));
    out->w = t->data;
    out->type = t->type;
    out->n = n;
    out->k = k;
    return BRAID_OK;
}

static braid_status get_u32(const braid_mmproj *mm, const char *key, int required, int32_t lo, int32_t hi, int32_t *out) {
    uint32_t v = (uint32_t)*out;
    BD_TRY(gguf_get_u32(mm->f, key, required, &v));
    if (v < (uint32_t)lo || v > (uint32_t)hi)
        return bd_error(BRAID_E_FORMAT, "mmproj: %s = %u, want %d..%d", key, v, lo, hi);
    *out = (int32_t)v;
    return BRAID_OK;
}

static braid_status get_f32x3(const braid_mmproj *mm, const char *key, float *out) {
    const gguf_value *v = gguf_find(mm->f, key);
    if (!v) return BRAID_OK; /* keep the default */
    if (v->type != GGUF_TYPE_ARRAY || v->arr.type != GGUF_TYPE_FLOAT32 || v->arr.n < 3)
        return bd_error(BRAID_E_FORMAT, "mmproj: %s is not an array of 3 floats", key);
    memcpy(out, v->arr.data, 3 * sizeof(float));
    for (int i = 0; i < 3; i++)
        if (!isfinite(out[i])) return bd_error(BRAID_E_FORMAT, "mmproj: %s[%d] is not finite", key, i);
    return BRAID_OK;
}

static braid_status load(braid_mmproj *mm, const braid_mmproj_params *p) {
    gguf_str s;
    BD_TRY(gguf_get_str(mm->f, "general.architecture", 1, &s));
    if (!str_is(&s, "clip"))
        return bd_error(BRAID_E_FORMAT, "mmproj: general.architecture is '%.*s', not 'clip' (a text model?)",
                        (int)(s.len > 64 ? 64 : s.len), s.ptr);
    int has_vision = 0;
    BD_TRY(gguf_get_bool(mm->f, "clip.has_vision_encoder", 1, &has_vision));
    if (!has_vision) return bd_error(BRAID_E_UNSUPPORTED, "mmproj: no vision encoder (clip.has_vision_encoder false)");
    s.len = 0;
    if (gguf_find(mm->f, "clip.vision.projector_type")) BD_TRY(gguf_get_str(mm->f, "clip.vision.projector_type", 1, &s));
    else BD_TRY(gguf_get_str(mm->f, "clip.projector_type", 1, &s));
    if (!str_is(&s, "qwen3vl_merger"))
        return bd_error(BRAID_E_UNSUPPORTED, "mmproj: projector type '%.*s' is not supported (qwen3vl_merger only)",
                        (int)(s.len > 64 ? 64 : s.len), s.ptr);
    BD_TRY(get_u32(mm, "clip.vision.embedding_length", 1, 4, 1 << 16, &mm->n_embd));
    BD_TRY(get_u32(mm, "clip.vision.attention.head_count", 1, 1, 1024, &mm->n_head));
    BD_TRY(get_u32(mm, "clip.vision.block_count", 1, 1, 1024, &mm->n_layer));
    BD_TRY(get_u32(mm, "clip.vision.patch_size", 1, 1, 64, &mm->patch));
    int32_t merge = 2;
    BD_TRY(get_u32(mm, "clip.vision.spatial_merge_size", 0, 1, 64, &merge));
    if (merge != BD_VISION_MERGE)
        return bd_error(BRAID_E_UNSUPPORTED, "mmproj: spatial_merge_size %d (qwen3vl_merger merges 2x2)", merge);
    if (mm->n_embd % mm->n_head) return bd_error(BRAID_E_FORMAT, "mmproj: %d heads do not divide %d", mm->n_head, mm->n_embd);
    mm->head_dim = mm->n_embd / mm->n_head;
    if (gguf_find(mm->f, "clip.vision.attention.head_dim")) {
        int32_t hd = 0;
        BD_TRY(get_u32(mm, "clip.vision.attention.head_dim", 1, 1, 1 << 16, &hd));
        if (hd != mm->head_dim)
            return bd_error(BRAID_E_UNSUPPORTED, "mmproj: head_dim %d differs from embd/heads %d", hd, mm->head_dim);
    }
    if (mm->head_dim % 4 || mm->head_dim > 1024)
        return bd_error(BRAID_E_FORMAT, "mmproj: head size %d is not a multiple of 4 up to 1024 (2-D RoPE)", mm->head_dim);
    BD_TRY(gguf_get_f32(mm->f, "clip.vision.attention.layer_norm_epsilon", 1, &mm->eps));
    if (!(mm->eps >= 0) || !isfinite(mm->eps)) return bd_error(BRAID_E_FORMAT, "mmproj: bad layer_norm_epsilon");
    for (int i = 0; i < 3; i++) mm->mean[i] = mm->std[i] = 0.5f;
    BD_TRY(get_f32x3(mm, "clip.vision.image_mean", mm->mean));
    BD_TRY(get_f32x3(mm, "clip.vision.image_std", mm->std));
    for (int i = 0; i < 3; i++)
        if (mm->std[i] == 0) return bd_error(BRAID_E_FORMAT, "mmproj: image_std[%d] is 0", i);
    int gelu = 0;
    BD_TRY(gguf_get_bool(mm->f, "clip.use_gelu", 0, &gelu));
    if (!gelu) return bd_error(BRAID_E_UNSUPPORTED, "mmproj: clip.use_gelu is not set (gelu_quick MLPs are not supported)");
    if (gguf_find_tensor(mm->f, "v.pre_ln.weight"))
        return bd_error(BRAID_E_UNSUPPORTED, "mmproj: v.pre_ln is not supported (Qwen projectors have none)");

    const int64_t E = mm->n_embd, P = mm->patch;
    /* patch kernels, rounded to fp16 (ggml's im2col is F16 unless the kernel is BF16) */
    const gguf_tensor *pk[2] = {NULL, NULL};
    BD_TRY(tensor(mm, "v.patch_embd.weight", P, P, 3, E, (1u << BRAID_TYPE_F32) | (1u << BRAID_TYPE_F16), &pk[0]));
    BD_TRY(tensor(mm, "v.patch_embd.weight.1", P, P, 3, E, (1u << BRAID_TYPE_F32) | (1u << BRAID_TYPE_F16), &pk[1]));
    const size_t kn = (size_t)E * 3 * P * P;
    for (int i = 0; i < 2; i++) {
        mm->patch_w[i] = bd_mallocn(kn, sizeof(uint16_t));
        if (!mm->patch_w[i]) return bd_error(BRAID_E_NOMEM, "mmproj: out of memory for the patch kernel");
        if (pk[i]->type == BRAID_TYPE_F16) memcpy(mm->patch_w[i], pk[i]->data, kn * sizeof(uint16_t));
        else bd_fp32_to_fp16_row(pk[i]->data, mm->patch_w[i], (int64_t)kn);
    }
    BD_TRY(vec(mm, "v.patch_embd.bias", E, &mm->patch_b));
    const gguf_tensor *pe = gguf_find_tensor(mm->f, "v.position_embd.weight");
    if (!pe) return bd_error(BRAID_E_FORMAT, "mmproj: tensor v.position_embd.weight is missing");
    int64_t S = (int64_t)llround(sqrt((double)pe->ne[1]));
    if (S < 1 || S * S != pe->ne[1] || S > 1024)
        return bd_error(BRAID_E_FORMAT, "mmproj: v.position_embd.weight has %lld positions, not a square grid",
                        (long long)pe->ne[1]);
    mm->pos_side = (int32_t)S;
    const gguf_tensor *t = NULL;
    BD_TRY(tensor(mm, "v.position_embd.weight", E, S * S, 0, 0, T_F32, &t));
    mm->pos_embd = t->data;

    /* the merger fixes the row width T */
    const gguf_tensor *m2b = gguf_find_tensor(mm->f, "mm.2.bias");
    if (!m2b || m2b->ne[0] < 1 || m2b->ne[0] > (1 << 20))
        return bd_error(BRAID_E_FORMAT, "mmproj: tensor mm.2.bias is missing or has a bad size");
    mm->n_text = (int32_t)m2b->ne[0];
    const int64_t T = mm->n_text, E4 = 4 * E;
    const gguf_tensor *up0 = gguf_find_tensor(mm->f, "v.blk.0.ffn_up.weight");
    if (!up0 || up0->ne[1] < 1 || up0->ne[1] > (1 << 20))
        return bd_error(BRAID_E_FORMAT, "mmproj: tensor v.blk.0.ffn_up.weight is missing or has a bad size");
    mm->n_ff = (int32_t)up0->ne[1];
    const int64_t F = mm->n_ff;
    mm->layers = bd_calloc((size_t)mm->n_layer, sizeof *mm->layers);
    if (!mm->layers) return bd_error(BRAID_E_NOMEM, "mmproj: out of memory");
    char nm[96];
#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
    for (int i = 0; i < mm->n_layer; i++) {
        bd_vit_layer *L = &mm->layers[i];
        BD_TRY(vec(mm, NAME("v.blk.%d.ln1.weight", i), E, &L->ln1_w));
        BD_TRY(vec(mm, NAME("v.blk.%d.ln1.bias", i), E, &L->ln1_b));
        BD_TRY(mat(mm, NAME("v.blk.%d.attn_qkv.weight", i), E, 3 * E, &L->qkv));
        BD_TRY(vec(mm, NAME("v.blk.%d.attn_qkv.bias", i), 3 * E, &L->qkv_b));
        BD_TRY(mat(mm, NAME("v.blk.%d.attn_out.weight", i), E, E, &L->out));
        BD_TRY(vec(mm, NAME("v.blk.%d.attn_out.bias", i), E, &L->out_b));
        BD_TRY(vec(mm, NAME("v.blk.%d.ln2.weight", i), E, &L->ln2_w));
        BD_TRY(vec(mm, NAME("v.blk.%d.ln2.bias", i), E, &L->ln2_b));
        BD_TRY(mat(mm, NAME("v.blk.%d.ffn_up.weight", i), E, F, &L->up));
        BD_TRY(vec(mm, NAME("v.blk.%d.ffn_up.bias", i), F, &L->up_b));
        BD_TRY(mat(mm, NAME("v.blk.%d.ffn_down.weight", i), F, E, &L->down));
        BD_TRY(vec(mm, NAME("v.blk.%d.ffn_down.bias", i), E, &L->down_b));
        if (gguf_find_tensor(mm->f, NAME("v.blk.%d.ffn_gate.weight", i)))
            return bd_error(BRAID_E_UNSUPPORTED, "mmproj: gated ViT MLPs (%s) are not qwen3vl_merger's", nm);
        if (gguf_find_tensor(mm->f, NAME("v.deepstack.%d.fc1.weight", i))) {
            L->has_ds = 1;
            mm->n_ds++;
            BD_TRY(vec(mm, NAME("v.deepstack.%d.norm.weight", i), E4, &L->ds_norm_w));
            BD_TRY(vec(mm, NAME("v.deepstack.%d.norm.bias", i), E4, &L->ds_norm_b));
            BD_TRY(mat(mm, NAME("v.deepstack.%d.fc1.weight", i), E4, E4, &L->ds_fc1));
            BD_TRY(vec(mm, NAME("v.deepstack.%d.fc1.bias", i), E4, &L->ds_fc1_b));
            BD_TRY(mat(mm, NAME("v.deepstack.%d.fc2.weight", i), E4, T, &L->ds_fc2));
            BD_TRY(vec(mm, NAME("v.deepstack.%d.fc2.bias", i), T, &L->ds_fc2_b));
        }
    }
#undef NAME
    BD_TRY(vec(mm, "v.post_ln.weight", E, &mm->post_ln_w));
    BD_TRY(vec(mm, "v.post_ln.bias", E, &mm->post_ln_b));
    BD_TRY(mat(mm, "mm.0.weight", E4, E4, &mm->mm0));
    BD_TRY(vec(mm, "mm.0.bias", E4, &mm->mm0_b));
    BD_TRY(mat(mm, "mm.2.weight", E4, T, &mm->mm2));
    BD_TRY(vec(mm, "mm.2.bias", T, &mm->mm2_b));

    /* token limits: llama.cpp's set_limit_image_tokens(8, 4096) unless the caller gives its own */
    const int64_t area = (int64_t)P * P * BD_VISION_MERGE * BD_VISION_MERGE;
    int64_t lo = p->image_min_tokens > 0 ? p->image_min_tokens : 8, hi = p->image_max_tokens > 0 ? p->image_max_tokens : 4096;
    if (p->image_min_tokens < 0 || p->image_max_tokens < 0 || lo > hi || hi > 65536)
        return bd_error(BRAID_E_INVALID, "mmproj: image tokens %d..%d (want 0 <= min <= max <= 65536)",
                        p->image_min_tokens, p->image_max_tokens);
    mm->min_pixels = lo * area;
    mm->max_pixels = hi * area;
    mm->cache_budget = p->cache_bytes == 0 ? (size_t)256 << 20 : p->cache_bytes == 1 ? 0 : (size_t)p->cache_bytes;
    return BRAID_OK;
}

braid_status braid_mmproj_load(const char *path, const braid_mmproj_params *params, braid_mmproj **out) {
    if (!path || !out) return bd_error(BRAID_E_INVALID, "mmproj: no path or output pointer");
    *out = NULL;
    braid_mmproj_params p = params ? *params : braid_mmproj_default_params();
    if (p.n_threads > BRAID_MAX_THREADS)
        return bd_error(BRAID_E_INVALID, "mmproj: n_threads %u not in 0..%u", p.n_threads, BRAID_MAX_THREADS);
    braid_mmproj *mm = bd_calloc(1, sizeof *mm);
    if (!mm) return bd_error(BRAID_E_NOMEM, "mmproj: out of memory");
    braid_status s = gguf_open(path, &mm->f);
    if (s == BRAID_OK) s = load(mm, &p);
    if (s == BRAID_OK) {
        long nt = p.n_threads ? (long)p.n_threads : sysconf(_SC_NPROCESSORS_ONLN);
        if (nt < 1) nt = 1;
        if (nt > BRAID_MAX_THREADS) nt = BRAID_MAX_THREADS;
        s = bd_threadpool_new((int)nt, &mm->tp);
    }
    if (s != BRAID_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", braid_last_error());
        braid_mmproj_free(mm);
        return bd_error(s, "%s%s%s", strstr(why, path) ? "" : path, strstr(why, path) ? "" : ": ", why);
    }
    *out = mm;
    return BRAID_OK;
}

void braid_mmproj_free(braid_mmproj *mm) {
    if (!mm) return;
    bd_threadpool_free(mm->tp);
    for (size_t i = 0; i < mm->n_cache; i++) bd_free(mm->cache[i].rows);
    bd_free(mm->cache);
    bd_free(mm->patch_w[0]);
    bd_free(mm->patch_w[1]);
    bd_free(mm->layers);
    gguf_close(mm->f);
    bd_free(mm);
}

int32_t braid_mmproj_n_embd(const braid_mmproj *mm) { return mm ? mm->n_text * (1 + mm->n_ds) : 0; }

braid_status braid_mmproj_check_model(const braid_mmproj *mm, const braid_model *model) {
    if (!mm || !model) return bd_error(BRAID_E_INVALID, "mmproj: no projector or model");
    const char *arch = braid_model_arch(model);
    const int32_t n_embd = braid_model_n_embd(model);
    if (mm->n_ds > 0)
        return bd_error(BRAID_E_MISMATCH,
                        "mmproj: the projector has %d deepstack layers (rows of %d = %d x %d floats), which only "
                        "qwen3vl / qwen3vlmoe text models take; %s adds no deepstack input (n_embd %d)",
                        mm->n_ds, braid_mmproj_n_embd(mm), 1 + mm->n_ds, mm->n_text, arch, n_embd);
    if (mm->n_text != n_embd)
        return bd_error(BRAID_E_MISMATCH, "mmproj: rows of %d floats, but the %s text model's n_embd is %d", mm->n_text,
                        arch, n_embd);
    if (braid_model_n_pos_per_token(model) != 4)
        return bd_error(BRAID_E_MISMATCH, "mmproj: image rows need M-RoPE positions; %s has %d position per input",
                        arch, braid_model_n_pos_per_token(model));
    return BRAID_OK;
}

braid_status braid_mmproj_image_grid(const braid_mmproj *mm, const braid_image *img, int32_t *nx, int32_t *ny) {
    if (!mm || !img || !nx || !ny) return bd_error(BRAID_E_INVALID, "mmproj: NULL argument");
    int32_t tw, th;
    bd_vision_target_size(mm, img->w, img->h, &tw, &th);
    *nx = tw / (mm->patch * BD_VISION_MERGE);
    *ny = th / (mm->patch * BD_VISION_MERGE);
    return BRAID_OK;
}

/* ---- the rows cache --------------------------------------------------------------------------------------- */

/* A second 64-bit hash of the pixels (another seed), checked on a hit: a false hit needs both to collide. */
static uint64_t hash2(const braid_image *img) {
    return bd_hash64(img->rgb, (size_t)img->w * (size_t)img->h * 3, 0x7669736e32ull);
}

static void cache_drop(braid_mmproj *mm, size_t i) {
    mm->cache_used -= mm->cache[i].bytes;
    bd_free(mm->cache[i].rows);
    memmove(mm->cache + i, mm->cache + i + 1, (mm->n_cache - i - 1) * sizeof *mm->cache);
    mm->n_cache--;
}

/* Keeps a copy of rows (most recent last), dropping the oldest past the budget. Best effort: no memory, no copy. */
static void cache_put(braid_mmproj *mm, const braid_image *img, const float *rows, int32_t nx, int32_t ny) {
    size_t bytes = (size_t)nx * ny * (size_t)braid_mmproj_n_embd(mm) * sizeof(float);
    if (bytes > mm->cache_budget) return;
    while (mm->n_cache && mm->cache_used + bytes > mm->cache_budget) cache_drop(mm, 0);
    if (mm->n_cache == mm->cap_cache) {
        size_t nc = mm->cap_cache ? 2 * mm->cap_cache : 8;
        struct bd_vcache_entry *e = bd_realloc(mm->cache, nc * sizeof *e);
        if (!e) return;
        mm->cache = e;
        mm->cap_cache = nc;
    }
    float *copy = bd_malloc(bytes);
    if (!copy) return;
    memcpy(copy, rows, bytes);
    mm->cache[mm->n_cache++] = (struct bd_vcache_entry){img->hash, hash2(img), img->w, img->h, nx, ny, copy, bytes};
    mm->cache_used += bytes;
}

/* A copy of the cached rows of img (moved to most recent), or NULL. */
static float *cache_get(braid_mmproj *mm, const braid_image *img, int32_t *nx, int32_t *ny) {
    uint64_t h2 = 0;
    for (size_t i = mm->n_cache; i-- > 0;) {
        struct bd_vcache_entry e = mm->cache[i];
        if (e.hash != img->hash || e.w != img->w || e.h != img->h) continue;
        if (!h2) h2 = hash2(img);
        if (e.hash2 != h2) continue;
        float *copy = bd_malloc(e.bytes);
        if (!copy) return NULL;
        memcpy(copy, e.rows, e.bytes);
        memmove(mm->cache + i, mm->cache + i + 1, (mm->n_cache - i - 1) * sizeof *mm->cache);
        mm->cache[mm->n_cache - 1] = e;
        *nx = e.nx;
        *ny = e.ny;
        return copy;
    }
    return NULL;
}

braid_status braid_mmproj_encode(braid_mmproj *mm, const braid_image *img, float **rows, int32_t *nx, int32_t *ny) {
    if (!mm || !img || !rows) return bd_error(BRAID_E_INVALID, "mmproj: NULL argument");
    *rows = NULL;
    int32_t gx = 0, gy = 0;
    float *hit = mm->cache_budget ? cache_get(mm, img, &gx, &gy) : NULL;
    if (hit) {
        mm->cache_hits++;
        *rows = hit;
        if (nx) *nx = gx;
        if (ny) *ny = gy;
        return BRAID_OK;
    }
    mm->cache_misses++;
    float *pix = NULL;
    int32_t tw = 0, th = 0;
    BD_TRY(bd_vision_preprocess(mm, img, &pix, &tw, &th));
    gx = tw / (mm->patch * BD_VISION_MERGE);
    gy = th / (mm->patch * BD_VISION_MERGE);
    float *out = bd_mallocn((size_t)gx * gy, (size_t)braid_mmproj_n_embd(mm) * sizeof(float));
    braid_status s = out ? BRAID_OK : bd_error(BRAID_E_NOMEM, "mmproj: out of memory for %d x %d rows", gx, gy);
    if (s == BRAID_OK) s = bd_vit_encode(mm, pix, tw, th, out);
    bd_free(pix);
    if (s != BRAID_OK) {
        bd_free(out);
        return s;
    }
    if (mm->cache_budget) cache_put(mm, img, out, gx, gy);
    *rows = out;
    if (nx) *nx = gx;
    if (ny) *ny = gy;
    return BRAID_OK;
}

void braid_mmproj_cache_stats(const braid_mmproj *mm, uint64_t *hits, uint64_t *misses) {
    if (hits) *hits = mm ? mm->cache_hits : 0;
    if (misses) *misses = mm ? mm->cache_misses : 0;
}
