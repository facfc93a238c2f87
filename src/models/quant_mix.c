/* quant_mix.c — llama.cpp's quantization presets: per-tensor type rules and the file writer (quant_mix.h).
 *
 * The rules are llama.cpp 3.22.1's (src/llama-quant.cpp), restated for the presets braid can write: a tensor
 * is quantized if it is a matrix (2-D or 3-D) named *weight that is not a norm, a MoE router, or a conv kernel;
 * its type starts as the preset's main type, is changed by its role (category), layer and the model's shape,
 * then falls back where its rows do not fit the type's blocks. Counters (the how-manyth attention V or FFN
 * down tensor this is) run in llama.cpp's tensor order: by layer, then by name. */
#include "models/quant_mix.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "tensor/types.h"

enum { FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9, FT_Q2_K = 10, FT_Q3_K_S = 11,
       FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_S = 16, FT_Q5_K_M = 17,
       FT_Q6_K = 18, FT_IQ4_NL = 25, FT_IQ4_XS = 30, FT_F16 = 1, FT_BF16 = 32, FT_MXFP4_MOE = 38 };

static const struct {
    const char *name;
    uint32_t ftype, type;
} presets[] = {
    {"Q4_0", FT_Q4_0, BD_TYPE_Q4_0},       {"Q4_1", FT_Q4_1, BD_TYPE_Q4_1},       {"Q5_0", FT_Q5_0, BD_TYPE_Q5_0},
    {"Q5_1", FT_Q5_1, BD_TYPE_Q5_1},       {"Q8_0", FT_Q8_0, BD_TYPE_Q8_0},       {"Q2_K", FT_Q2_K, BD_TYPE_Q2_K},
    {"Q3_K_S", FT_Q3_K_S, BD_TYPE_Q3_K},   {"Q3_K_M", FT_Q3_K_M, BD_TYPE_Q3_K},   {"Q3_K_L", FT_Q3_K_L, BD_TYPE_Q3_K},
    {"Q4_K_S", FT_Q4_K_S, BD_TYPE_Q4_K},   {"Q4_K_M", FT_Q4_K_M, BD_TYPE_Q4_K},   {"Q5_K_S", FT_Q5_K_S, BD_TYPE_Q5_K},
    {"Q5_K_M", FT_Q5_K_M, BD_TYPE_Q5_K},   {"Q6_K", FT_Q6_K, BD_TYPE_Q6_K},       {"IQ4_NL", FT_IQ4_NL, BD_TYPE_IQ4_NL},
    {"IQ4_XS", FT_IQ4_XS, BD_TYPE_IQ4_XS}, {"MXFP4_MOE", FT_MXFP4_MOE, BD_TYPE_MXFP4}, {"F16", FT_F16, BD_TYPE_F16},
    {"BF16", FT_BF16, BD_TYPE_BF16},
};

/* llama.cpp's presets braid refuses, and why. */
static const struct {
    const char *name, *why;
} refused[] = {
    {"IQ2_XXS", "needs an importance matrix"}, {"IQ2_XS", "needs an importance matrix"},
    {"IQ2_S", "needs an importance matrix"},   {"IQ2_M", "needs an importance matrix"},
    {"IQ1_S", "needs an importance matrix"},   {"IQ1_M", "needs an importance matrix"},
    {"IQ3_XXS", "needs an importance matrix"}, {"Q2_K_S", "needs an importance matrix"},
    {"IQ3_XS", "uses IQ3_S, which braid has no quantizer for"}, {"IQ3_S", "uses IQ3_S, which braid has no quantizer for"},
    {"IQ3_M", "uses IQ3_S, which braid has no quantizer for"},  {"TQ1_0", "is not a type braid supports"},
    {"TQ2_0", "is not a type braid supports"},
};

static int same_name(const char *a, const char *b) {
    while (*a && *b && toupper((unsigned char)*a) == toupper((unsigned char)*b)) a++, b++;
    return *a == 0 && *b == 0;
}

braid_status bd_quant_preset(const char *name, uint32_t *ftype, uint32_t *main_type) {
    for (size_t i = 0; name && i < sizeof presets / sizeof presets[0]; i++)
        if (same_name(name, presets[i].name)) {
            *ftype = presets[i].ftype, *main_type = presets[i].type;
            return BRAID_OK;
        }
    for (size_t i = 0; name && i < sizeof refused / sizeof refused[0]; i++)
        if (same_name(name, refused[i].name))
            return bd_error(BRAID_E_UNSUPPORTED, "quantize: preset %s %s: braid cannot write it", refused[i].name,
                            refused[i].why);
    return bd_error(BRAID_E_INVALID, "quantize: unknown preset '%s'", name ? name : "(null)");
}

/* ---- the rules ---- */

typedef enum { CAT_OTHER, CAT_OUTPUT, CAT_TOKEN_EMBD, CAT_ATTN_QKV, CAT_ATTN_KV_B, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_Q,
               CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN } category;

static category tensor_category(const char *n) {
    if (!strcmp(n, "output.weight")) return CAT_OUTPUT;
    if (!strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight")) return CAT_TOKEN_EMBD;
    static const struct {
        const char *s;
        category c;
    } subs[] = {{"attn_qkv.weight", CAT_ATTN_QKV}, {"attn_kv_b.weight", CAT_ATTN_KV_B}, {"attn_v.weight", CAT_ATTN_V},
                {"attn_k.weight", CAT_ATTN_K},     {"attn_q.weight", CAT_ATTN_Q},       {"attn_output.weight", CAT_ATTN_OUTPUT},
                {"ffn_up", CAT_FFN_UP},            {"ffn_gate", CAT_FFN_GATE},          {"ffn_down", CAT_FFN_DOWN}};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strstr(n, subs[i].s)) return subs[i].c;
    return CAT_OTHER;
}

static int is_attn_v(category c) { return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B; }

static int ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* Whether llama.cpp quantizes this tensor at all (the names of other architectures' small matrices it skips
 * are listed too, so a file of any architecture gets the same answer). */
static int allows_quantization(const gguf_tensor *t) {
    if (t->n_dims < 2 || !ends_with(t->name, "weight")) return 0;
    static const char *const skip[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight", "time_mix_first.weight",
        "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
        "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
        "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
        ".patch_merger", "a.rvq.codebook", "mm.a.code_embd"};
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (strstr(t->name, skip[i])) return 0;
    return strcmp(t->name, "position_embd.weight") != 0 && strcmp(t->name, "token_types.weight") != 0;
}

typedef struct mix_state {
    uint32_t ftype;
    int falcon, tied, n_expert, n_gqa;
    int n_attn_v, i_attn_v, n_layer, i_ffn_down;
} mix_state;

static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* The layer of an FFN tensor: its position among its kind for dense models, the blk number for MoE ones (whose
 * expert tensors are not one per layer). */
static int layer_of(const mix_state *s, int counter, const char *name) {
    int l = counter;
    if (s->n_expert > 1 && sscanf(name, "blk.%d.", &l) != 1) l = 0;
    return l;
}

static int64_t blck(uint32_t type) {
    const bd_type_traits *t = bd_type_traits_get(type);
    return t ? t->blck_size : 1;
}

/* The type of a quantizable tensor under the preset (before the fallback). */
static uint32_t rule_type(mix_state *s, uint32_t t, const gguf_tensor *tensor, category cat) {
    const uint32_t ft = s->ftype;
    if (cat == CAT_OUTPUT || (s->tied && cat == CAT_TOKEN_EMBD)) {
        if (ft == FT_MXFP4_MOE || s->falcon || tensor->ne[0] % blck(t) != 0) return BD_TYPE_Q8_0;
        return t != BD_TYPE_Q8_0 ? BD_TYPE_Q6_K : t;
    }
    if (ft == FT_MXFP4_MOE) return tensor->ne[2] > 1 ? BD_TYPE_MXFP4 : BD_TYPE_Q8_0;
    if (cat == CAT_TOKEN_EMBD) return t;
    if (is_attn_v(cat)) {
        if (ft == FT_Q2_K) t = s->n_gqa >= 4 ? BD_TYPE_Q4_K : BD_TYPE_Q3_K;
        else if (ft == FT_Q3_K_M) t = s->i_attn_v < 2 ? BD_TYPE_Q5_K : BD_TYPE_Q4_K;
        else if (ft == FT_Q3_K_L) t = BD_TYPE_Q5_K;
        else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && s->n_gqa >= 4) t = BD_TYPE_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(s->i_attn_v, s->n_attn_v)) t = BD_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && s->i_attn_v < 4) t = BD_TYPE_Q5_K;
        /* (llama.cpp also raises Q3_K / Q4_K to Q5_K for LLaMA-2-70B-class models: not an architecture braid runs) */
        if (s->n_expert == 8) t = BD_TYPE_Q8_0;
        s->i_attn_v++;
        return t;
    }
    if (cat == CAT_ATTN_K) return s->n_expert == 8 ? BD_TYPE_Q8_0 : t;
    if (cat == CAT_ATTN_Q) return t;
    if (cat == CAT_FFN_DOWN) {
        const int il = layer_of(s, s->i_ffn_down, tensor->name), nl = s->n_layer;
        if (ft == FT_Q2_K) t = BD_TYPE_Q3_K;
        else if (ft == FT_Q3_K_M)
            t = il < nl / 16 ? BD_TYPE_Q5_K : !s->falcon || use_more_bits(il, nl) ? BD_TYPE_Q4_K : BD_TYPE_Q3_K;
        else if (ft == FT_Q3_K_L) t = s->falcon ? BD_TYPE_Q4_K : BD_TYPE_Q5_K;
        else if (ft == FT_Q4_K_M) {
            if (s->falcon) t = il < nl / 16 ? BD_TYPE_Q6_K : use_more_bits(il, nl) ? BD_TYPE_Q5_K : BD_TYPE_Q4_K;
            else if (use_more_bits(il, nl)) t = BD_TYPE_Q6_K;
        } else if (il < nl / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS)) t = BD_TYPE_Q5_K;
        else if (ft == FT_Q5_K_M && use_more_bits(il, nl)) t = BD_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && !s->falcon && il < nl / 8) t = BD_TYPE_Q5_K;
        s->i_ffn_down++;
        return t;
    }
    if (cat == CAT_ATTN_OUTPUT) {
        if (s->falcon) return ft == FT_Q3_K_L ? BD_TYPE_Q4_K : t;
        if (s->n_expert == 8) {
            const int up = ft == FT_Q2_K || ft == FT_Q3_K_S || ft == FT_Q3_K_M || ft == FT_IQ4_NL || ft == FT_Q4_K_S ||
                           ft == FT_Q4_K_M || ft == FT_IQ4_XS;
            return up ? BD_TYPE_Q5_K : t;
        }
        if (ft == FT_Q2_K) return BD_TYPE_Q3_K;
        if (ft == FT_Q3_K_M) return BD_TYPE_Q4_K;
        if (ft == FT_Q3_K_L) return BD_TYPE_Q5_K;
        return t;
    }
    return t; /* FFN gate / up: only presets braid does not write change them */
}

/* A type whose blocks do not fit the rows falls back to a 32-element type, then to F16. */
static uint32_t fallback(uint32_t t, int64_t ncols) {
    if (ncols % blck(t) == 0) return t;
    uint32_t r = t;
    switch (t) {
    case BD_TYPE_IQ4_XS: r = BD_TYPE_IQ4_NL; break;
    case BD_TYPE_Q2_K:
    case BD_TYPE_Q3_K: r = BD_TYPE_Q4_0; break;
    case BD_TYPE_Q4_K: r = BD_TYPE_Q5_0; break;
    case BD_TYPE_Q5_K: r = BD_TYPE_Q5_1; break;
    case BD_TYPE_Q6_K: r = BD_TYPE_Q8_0; break;
    default: break;
    }
    return ncols % blck(r) == 0 ? r : BD_TYPE_F16;
}

/* A model hyperparameter "<arch>.<key>" as an integer (an array's first element), or def if absent. */
static int64_t hparam(const gguf_file *f, const char *arch, const char *key, int64_t def) {
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    const gguf_value *v = gguf_find(f, full);
    if (!v) return def;
    if (v->type == GGUF_TYPE_ARRAY) {
        int32_t first[1];
        uint64_t n = 0;
        if (v->arr.n == 0) return def;
        gguf_value one = *v;
        one.arr.n = 1;
        return gguf_array_to_i32(&one, first, 1, &n) == BRAID_OK && n == 1 ? first[0] : def;
    }
    if (v->type == GGUF_TYPE_UINT8 || v->type == GGUF_TYPE_UINT16 || v->type == GGUF_TYPE_UINT32 ||
        v->type == GGUF_TYPE_UINT64)
        return (int64_t)v->u64;
    if (v->type == GGUF_TYPE_INT8 || v->type == GGUF_TYPE_INT16 || v->type == GGUF_TYPE_INT32 || v->type == GGUF_TYPE_INT64)
        return v->i64;
    return def;
}

/* llama.cpp's tensor order: tensors outside the blocks first, then by block number, then by name. */
static int layer_key(const char *name) {
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1) l = -1;
    return l;
}

static const gguf_file *sort_file; /* qsort has no context argument; bd_quant_* are not reentrant for this */

static int cmp_tensor(const void *a, const void *b) {
    const gguf_tensor *x = gguf_tensor_at(sort_file, *(const size_t *)a), *y = gguf_tensor_at(sort_file, *(const size_t *)b);
    const int lx = layer_key(x->name), ly = layer_key(y->name);
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The tensor indices of f in llama.cpp's order (owned by the caller). */
static braid_status tensor_order(const gguf_file *f, size_t **out) {
    const size_t n = gguf_n_tensors(f);
    size_t *ord = bd_mallocn(n ? n : 1, sizeof *ord);
    if (!ord) return bd_error(BRAID_E_NOMEM, "quantize: tensor order");
    for (size_t i = 0; i < n; i++) ord[i] = i;
    sort_file = f;
    qsort(ord, n, sizeof *ord, cmp_tensor);
    *out = ord;
    return BRAID_OK;
}

braid_status bd_quant_plan(const gguf_file *f, const char *preset, uint32_t *types) {
    uint32_t ftype, main_type;
    BD_TRY(bd_quant_preset(preset, &ftype, &main_type));
    gguf_str arch_s = {0};
    BD_TRY(gguf_get_str(f, "general.architecture", 1, &arch_s));
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)(arch_s.len < 63 ? arch_s.len : 63), arch_s.ptr);
    mix_state s = {.ftype = ftype, .falcon = !strcmp(arch, "falcon"), .tied = 1};
    s.n_expert = (int)hparam(f, arch, "expert_count", 0);
    const int64_t nh = hparam(f, arch, "attention.head_count", 0), nkv = hparam(f, arch, "attention.head_count_kv", nh);
    s.n_gqa = nkv > 0 ? (int)(nh / nkv) : 0;
    s.n_layer = (int)hparam(f, arch, "block_count", 0);
    const size_t n = gguf_n_tensors(f);
    for (size_t i = 0; i < n; i++) {
        const category c = tensor_category(gguf_tensor_at(f, i)->name);
        s.n_attn_v += is_attn_v(c);
        if (c == CAT_OUTPUT) s.tied = 0;
    }
    size_t *ord = NULL;
    BD_TRY(tensor_order(f, &ord));
    const int quantized_main = main_type != BD_TYPE_F16 && main_type != BD_TYPE_BF16;
    for (size_t k = 0; k < n; k++) {
        const gguf_tensor *t = gguf_tensor_at(f, ord[k]);
        uint32_t ty = t->type;
        if (allows_quantization(t)) {
            ty = main_type;
            if (quantized_main) ty = fallback(rule_type(&s, main_type, t, tensor_category(t->name)), t->ne[0]);
        }
        types[ord[k]] = ty;
    }
    bd_free(ord);
    return BRAID_OK;
}

/* ---- the writer ---- */

typedef struct quant_job {
    const gguf_file *f;
    const size_t *ord;
    const uint32_t *types;
    size_t next; /* position in ord of the tensor the writer asks for next */
    float *row;
    int64_t row_cap;
} quant_job;

/* Converts the next tensor's rows to float and quantizes them into buf. */
static braid_status quant_fill(void *user, const char *name, void *buf, size_t nbytes) {
    quant_job *j = user;
    const gguf_tensor *t = gguf_tensor_at(j->f, j->ord[j->next]);
    const uint32_t to = j->types[j->ord[j->next]];
    j->next++;
    if (strcmp(t->name, name) != 0) return bd_error(BRAID_E_INVALID, "quantize: writer asked for %s, not %s", name, t->name);
    if (to == t->type) {
        if (nbytes != t->nbytes) return bd_error(BRAID_E_INVALID, "quantize: %s: %zu bytes, %zu expected", name, t->nbytes, nbytes);
        memcpy(buf, t->data, nbytes);
        return BRAID_OK;
    }
    const bd_type_traits *src = bd_type_traits_get(t->type), *dst = bd_type_traits_get(to);
    if (t->type != BD_TYPE_F32 && t->type != BD_TYPE_F16 && t->type != BD_TYPE_BF16)
        return bd_error(BRAID_E_UNSUPPORTED, "quantize: %s is %s: requantizing is not supported (start from F32/F16/BF16)",
                        name, gguf_type_name(t->type));
    if (!src || !dst || !dst->from_float) return bd_error(BRAID_E_UNSUPPORTED, "quantize: no quantizer for %s", name);
    const int64_t ncols = t->ne[0], nrows = t->ne[1] * t->ne[2] * t->ne[3];
    const size_t in_row = bd_row_size(t->type, ncols), out_row = bd_row_size(to, ncols);
    if (!in_row || !out_row || out_row * (size_t)nrows != nbytes)
        return bd_error(BRAID_E_INVALID, "quantize: %s: rows of %lld do not fit %s", name, (long long)ncols, dst->name);
    if (j->row_cap < ncols) {
        float *r = bd_realloc(j->row, (size_t)ncols * sizeof(float));
        if (!r) return bd_error(BRAID_E_NOMEM, "quantize: row buffer");
        j->row = r, j->row_cap = ncols;
    }
    for (int64_t r = 0; r < nrows; r++) {
        src->to_float((const uint8_t *)t->data + (size_t)r * in_row, j->row, ncols);
        dst->from_float(j->row, (uint8_t *)buf + (size_t)r * out_row, ncols);
    }
    return BRAID_OK;
}

braid_status bd_quant_write(const gguf_file *f, const char *preset, const char *path) {
    uint32_t ftype, main_type;
    BD_TRY(bd_quant_preset(preset, &ftype, &main_type));
    const size_t n = gguf_n_tensors(f);
    uint32_t *types = bd_mallocn(n ? n : 1, sizeof *types);
    size_t *ord = NULL;
    gguf_writer *w = NULL;
    quant_job job = {0};
    braid_status st = types ? BRAID_OK : bd_error(BRAID_E_NOMEM, "quantize: plan");
    if (st == BRAID_OK) st = bd_quant_plan(f, preset, types);
    if (st == BRAID_OK) st = tensor_order(f, &ord);
    if (st == BRAID_OK) st = gguf_writer_new(3, &w);
    /* metadata in the input's order, the two keys llama.cpp sets moved to the end, split keys dropped */
    for (size_t i = 0; st == BRAID_OK && i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        if (!strcmp(kv->key, "general.quantization_version") || !strcmp(kv->key, "general.file_type") ||
            !strcmp(kv->key, "split.no") || !strcmp(kv->key, "split.count") || !strcmp(kv->key, "split.tensors.count"))
            continue;
        st = gguf_writer_set_value(w, kv->key, &kv->value);
    }
    if (st == BRAID_OK) st = gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (st == BRAID_OK) st = gguf_writer_set_u32(w, "general.file_type", ftype);
    for (size_t k = 0; st == BRAID_OK && k < n; k++) {
        const gguf_tensor *t = gguf_tensor_at(f, ord[k]);
        st = gguf_writer_add_tensor(w, t->name, types[ord[k]], t->n_dims, t->ne, NULL);
    }
    if (st == BRAID_OK) {
        job = (quant_job){f, ord, types, 0, NULL, 0};
        st = gguf_writer_write(w, path, quant_fill, &job);
    }
    bd_free(job.row);
    gguf_writer_free(w);
    bd_free(ord);
    bd_free(types);
    return st;
}
