/* genmodel.c — the shared part of the model generator (see genmodel.h): preset and override resolution, the
 * vocabulary copy, the tensor plan, and the weights, drawn row by row into the GGUF writer's fill callback. */
#include "genmodel/genmodel.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/status.h"
#include "gguf/gguf.h"
#include "genmodel/gen_arch.h"
#include "genmodel/gen_rng.h"
#include "tensor/types.h"

static const gen_arch *const gen_archs[] = {&gen_arch_qwen35, &gen_arch_mamba2, &gen_arch_nemotron_h,
                                            &gen_arch_lfm2,  &gen_arch_llama,  &gen_arch_qwen3,
                                            &gen_arch_qwen35moe, &gen_arch_qwen3next, &gen_arch_nemotron_h_moe,
                                            &gen_arch_granitehybrid, &gen_arch_lfm2moe,
                                            &gen_arch_falcon_h1};
#define GEN_N_ARCHS (sizeof gen_archs / sizeof gen_archs[0])

static const char *const preset_names[GEN_N_PRESETS + 1] = {"tiny", "small", "medium", "0.5b", NULL};

const char *const *gen_preset_names(void) { return preset_names; }

const char *const *gen_arch_names(void) {
    static const char *names[GEN_N_ARCHS + 1];
    for (size_t i = 0; i < GEN_N_ARCHS; i++) names[i] = gen_archs[i]->name;
    return names;
}

const char *gen_default_vocab(void) {
    static char path[4096];
    const char *dir = getenv("BRAID_ORACLE_DIR");
    if (dir && *dir) {
        snprintf(path, sizeof path, "%s/src/models/ggml-vocab-qwen35.gguf", dir);
    } else {
        const char *cache = getenv("BRAID_CACHE");
        const char *home = getenv("HOME");
        if (cache && *cache) snprintf(path, sizeof path, "%s/oracle/3.22.1/src/models/ggml-vocab-qwen35.gguf", cache);
        else
            snprintf(path, sizeof path, "%s/.cache/braid/oracle/3.22.1/src/models/ggml-vocab-qwen35.gguf",
                     home ? home : ".");
    }
    return path;
}

void gen_params_default(gen_params *p) {
    memset(p, 0, sizeof *p);
    p->arch = "qwen35";
    p->preset = "tiny";
    int64_t *fields[] = {&p->over.n_ctx, &p->over.n_layer, &p->over.n_embd, &p->over.n_ff, &p->over.n_head,
                         &p->over.n_head_kv, &p->over.head_dim, &p->over.n_rot, &p->over.ssm_conv,
                         &p->over.ssm_state, &p->over.ssm_groups, &p->over.ssm_heads, &p->over.ssm_inner,
                         &p->over.interval};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) *fields[i] = GEN_UNSET;
    p->type = BRAID_TYPE_F32;
    p->seed = 1;
    p->std = 0.1f;
    p->n_vocab = 1024;
}

braid_status gen_check_positive(const char *arch, const char *what, int64_t v) {
    if (v <= 0) return bd_error(BRAID_E_INVALID, "%s: %s must be positive (got %lld)", arch, what, (long long)v);
    return BRAID_OK;
}

static void apply_override(int64_t *dst, int64_t v) {
    if (v != GEN_UNSET) *dst = v;
}

braid_status gen_model_shape(const gen_params *p, gen_shape *out) {
    const gen_arch *a = NULL;
    for (size_t i = 0; i < GEN_N_ARCHS; i++)
        if (p->arch && !strcmp(p->arch, gen_archs[i]->name)) a = gen_archs[i];
    if (!a) return bd_error(BRAID_E_INVALID, "gen-model: unknown architecture '%s'", p->arch ? p->arch : "(null)");
    int preset = -1;
    for (int i = 0; i < GEN_N_PRESETS; i++)
        if (p->preset && !strcmp(p->preset, preset_names[i])) preset = i;
    if (preset < 0)
        return bd_error(BRAID_E_INVALID, "gen-model: unknown preset '%s'", p->preset ? p->preset : "(null)");
    gen_shape s = a->presets[preset];
    const gen_shape *o = &p->over;
    apply_override(&s.n_ctx, o->n_ctx);
    apply_override(&s.n_layer, o->n_layer);
    apply_override(&s.n_embd, o->n_embd);
    apply_override(&s.n_ff, o->n_ff);
    apply_override(&s.n_head, o->n_head);
    apply_override(&s.n_head_kv, o->n_head_kv);
    apply_override(&s.head_dim, o->head_dim);
    apply_override(&s.n_rot, o->n_rot);
    apply_override(&s.ssm_conv, o->ssm_conv);
    apply_override(&s.ssm_state, o->ssm_state);
    apply_override(&s.ssm_groups, o->ssm_groups);
    apply_override(&s.ssm_heads, o->ssm_heads);
    apply_override(&s.ssm_inner, o->ssm_inner);
    apply_override(&s.interval, o->interval);
    if (o->rope_base != 0) s.rope_base = o->rope_base;
    if (o->eps != 0) s.eps = o->eps;
    /* the MoE fields keep the preset unless positive (0 and GEN_UNSET both keep it) */
    if (o->n_expert > 0) s.n_expert = o->n_expert;
    if (o->n_expert_used > 0) s.n_expert_used = o->n_expert_used;
    if (o->n_ff_exp > 0) s.n_ff_exp = o->n_ff_exp;
    if (o->n_ff_shexp > 0) s.n_ff_shexp = o->n_ff_shexp;
    if (o->gate_up > 0) s.gate_up = o->gate_up;
    if (o->qkvz > 0) s.qkvz = o->qkvz;
    if (o->nextn > 0) s.nextn = o->nextn;
    if (s.nextn > 1)
        return bd_error(BRAID_E_INVALID, "gen-model: --nextn %lld: llama.cpp runs one MTP block", (long long)s.nextn);
    if (s.nextn && strcmp(a->name, "qwen35") && strcmp(a->name, "qwen35moe") && strcmp(a->name, "qwen3next"))
        return bd_error(BRAID_E_INVALID, "gen-model: --nextn: %s has no MTP block here (qwen35 family only)", a->name);
    if (o->pattern[0]) memcpy(s.pattern, o->pattern, sizeof s.pattern);
    s.pattern[sizeof s.pattern - 1] = 0;
    BD_TRY(a->check(&s));
    *out = s;
    return BRAID_OK;
}

/* ---- the plan: keys go straight to the writer, tensors are recorded for the fill callback ------------ */

typedef struct gen_tensor_desc {
    char name[96];
    uint32_t n_dims;
    int64_t ne[3];
    gen_init init;
    uint32_t type;
} gen_tensor_desc;

struct gen_plan {
    gguf_writer *w;
    const char *arch;
    uint32_t type; /* requested matrix type */
    gen_tensor_desc *t;
    size_t n, cap;
    /* fill state */
    size_t next;
    uint64_t seed;
    float std;
    float *row; /* [max ne0] */
    size_t row_cap;
    size_t n_fallback;
};

static braid_status key_name(gen_plan *p, const char *suffix, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s.%s", p->arch, suffix);
    if (n < 0 || (size_t)n >= cap) return bd_error(BRAID_E_INVALID, "gen-model: key %s.%s too long", p->arch, suffix);
    return BRAID_OK;
}

braid_status gen_key_u32(gen_plan *p, const char *suffix, uint32_t v) {
    char key[128];
    BD_TRY(key_name(p, suffix, key, sizeof key));
    return gguf_writer_set_u32(p->w, key, v);
}

braid_status gen_key_f32(gen_plan *p, const char *suffix, float v) {
    char key[128];
    BD_TRY(key_name(p, suffix, key, sizeof key));
    return gguf_writer_set_f32(p->w, key, v);
}

braid_status gen_key_bool(gen_plan *p, const char *suffix, int v) {
    char key[128];
    BD_TRY(key_name(p, suffix, key, sizeof key));
    return gguf_writer_set_bool(p->w, key, v);
}

braid_status gen_key_i32_array(gen_plan *p, const char *suffix, const int32_t *v, uint64_t n) {
    char key[128];
    BD_TRY(key_name(p, suffix, key, sizeof key));
    return gguf_writer_set_array(p->w, key, GGUF_TYPE_INT32, v, n);
}

/* The storage type of a tensor: --type for matrices whose rows fit its blocks, else Q8_0 (rows of 32), else
 * F16; F32 for everything that is not a matrix (llama.cpp wants norms, biases, A, D and conv kernels F32). */
static uint32_t tensor_type(gen_plan *p, gen_init init, int64_t ne0) {
    if (init != GEN_MATRIX) return BRAID_TYPE_F32;
    if (bd_row_size(p->type, ne0) != 0) return p->type;
    p->n_fallback++;
    if (bd_row_size(BRAID_TYPE_Q8_0, ne0) != 0) return BRAID_TYPE_Q8_0;
    return BRAID_TYPE_F16;
}

static braid_status gen_tensor_v(gen_plan *p, gen_init init, int64_t ne0, int64_t ne1, int64_t ne2, const char *fmt,
                                 va_list ap) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        gen_tensor_desc *t = bd_realloc(p->t, cap * sizeof *t);
        if (!t) return bd_error(BRAID_E_NOMEM, "gen-model: out of memory for the tensor list");
        p->t = t;
        p->cap = cap;
    }
    gen_tensor_desc *d = &p->t[p->n];
    memset(d, 0, sizeof *d);
    int n = vsnprintf(d->name, sizeof d->name, fmt, ap);
    if (n < 0 || (size_t)n >= sizeof d->name) return bd_error(BRAID_E_INVALID, "gen-model: tensor name too long");
    if (ne0 <= 0 || ne1 < 0 || ne2 < 0 || (ne2 > 0 && ne1 == 0))
        return bd_error(BRAID_E_INVALID, "gen-model: tensor %s has dims {%lld, %lld, %lld}", d->name, (long long)ne0,
                        (long long)ne1, (long long)ne2);
    d->n_dims = ne2 > 0 ? 3 : ne1 > 0 ? 2 : 1;
    d->ne[0] = ne0;
    d->ne[1] = ne1 > 0 ? ne1 : 1;
    d->ne[2] = ne2 > 0 ? ne2 : 1;
    d->init = init;
    d->type = tensor_type(p, init, ne0);
    if ((size_t)ne0 > p->row_cap) p->row_cap = (size_t)ne0;
    p->n++;
    return BRAID_OK;
}

braid_status gen_tensor(gen_plan *p, gen_init init, int64_t ne0, int64_t ne1, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    braid_status s = gen_tensor_v(p, init, ne0, ne1, 0, fmt, ap);
    va_end(ap);
    return s;
}

braid_status gen_tensor3(gen_plan *p, gen_init init, int64_t ne0, int64_t ne1, int64_t ne2, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    braid_status s = gen_tensor_v(p, init, ne0, ne1, ne2, fmt, ap);
    va_end(ap);
    return s;
}

/* ---- weights ---------------------------------------------------------------------------------------- */

static void draw_row(const gen_tensor_desc *d, float std, uint64_t *s, float *row) {
    int64_t n = d->ne[0];
    switch (d->init) {
    case GEN_MATRIX:
    case GEN_BIAS:
    case GEN_F32MAT:
        for (int64_t i = 0; i < n; i++) row[i] = std * rng_normal(s);
        break;
    case GEN_NORM:
        for (int64_t i = 0; i < n; i++) row[i] = 1.0f + 0.1f * rng_normal(s);
        break;
    case GEN_NEG:
        for (int64_t i = 0; i < n; i++) row[i] = -(0.1f + fabsf(rng_normal(s)));
        break;
    case GEN_CONV: {
        float k = 1.0f / sqrtf((float)n);
        for (int64_t i = 0; i < n; i++) row[i] = k * rng_normal(s);
        break;
    }
    }
}

static braid_status fill(void *user, const char *name, void *buf, size_t nbytes) {
    gen_plan *p = user;
    if (p->next >= p->n || strcmp(name, p->t[p->next].name))
        return bd_error(BRAID_E_INVALID, "gen-model: writer asked for tensor '%s' out of order", name);
    const gen_tensor_desc *d = &p->t[p->next++];
    size_t row_bytes = bd_row_size(d->type, d->ne[0]);
    const int64_t n_rows = d->ne[1] * d->ne[2];
    if (row_bytes == 0 || row_bytes * (size_t)n_rows != nbytes)
        return bd_error(BRAID_E_INVALID, "gen-model: tensor %s: writer wants %zu bytes, rows give %zu", name, nbytes,
                        row_bytes * (size_t)n_rows);
    const bd_type_traits *tt = bd_type_traits_get(d->type);
    if (!tt || (d->type != BRAID_TYPE_F32 && !tt->from_float))
        return bd_error(BRAID_E_UNSUPPORTED, "gen-model: no conversion to type %u", d->type);
    /* One generator per tensor, seeded by the model seed and the name: a tensor's values do not depend on
     * which tensors come before it or on the storage type. */
    uint64_t state = bd_hash64(name, strlen(name), p->seed);
    uint8_t *out = buf;
    for (int64_t r = 0; r < n_rows; r++) {
        draw_row(d, p->std, &state, p->row);
        /* the writer's buffer has no alignment promise, so F32 rows are copied, not drawn in place */
        if (d->type == BRAID_TYPE_F32) memcpy(out + (size_t)r * row_bytes, p->row, row_bytes);
        else tt->from_float(p->row, out + (size_t)r * row_bytes, d->ne[0]);
    }
    return BRAID_OK;
}

/* ---- the vocabulary --------------------------------------------------------------------------------- */

static braid_status copy_vocab(gen_plan *p, const char *path, int64_t *n_vocab) {
    gguf_file *f;
    BD_TRY(gguf_open(path, &f));
    braid_status s = BRAID_OK;
    const gguf_value *tokens;
    uint64_t n = 0;
    s = gguf_get_str_array(f, "tokenizer.ggml.tokens", 1, &tokens, &n);
    if (s == BRAID_OK && (n == 0 || n > INT32_MAX))
        s = bd_error(BRAID_E_FORMAT, "gen-model: %s has %llu tokens", path, (unsigned long long)n);
    for (size_t i = 0; s == BRAID_OK && i < gguf_n_kv(f); i++) {
        const gguf_kv *kv = gguf_kv_at(f, i);
        if (!strncmp(kv->key, "tokenizer.", 10)) s = gguf_writer_set_value(p->w, kv->key, &kv->value);
    }
    gguf_close(f);
    if (s == BRAID_OK) *n_vocab = (int64_t)n;
    return s;
}

/* ---- writing ---------------------------------------------------------------------------------------- */

braid_status gen_model_write(const gen_params *params, const char *path, gen_summary *out) {
    if (!params || !path) return bd_error(BRAID_E_INVALID, "gen-model: no parameters or output path");
    gen_shape shape;
    BD_TRY(gen_model_shape(params, &shape));
    const gen_arch *a = NULL;
    for (size_t i = 0; i < GEN_N_ARCHS; i++)
        if (!strcmp(params->arch, gen_archs[i]->name)) a = gen_archs[i];
    const bd_type_traits *tt = bd_type_traits_get(params->type);
    if (!tt) return bd_error(BRAID_E_UNSUPPORTED, "gen-model: unsupported weight type %u", params->type);
    if (!(params->std > 0) || !isfinite(params->std))
        return bd_error(BRAID_E_INVALID, "gen-model: std must be a positive number (got %g)", (double)params->std);

    gen_plan p = {0};
    p.arch = a->name;
    p.type = params->type;
    p.seed = params->seed;
    p.std = params->std;
    BD_TRY(gguf_writer_new(3, &p.w));
    braid_status s = gguf_writer_set_str(p.w, "general.architecture", a->name);
    char name[128];
    snprintf(name, sizeof name, "braid gen-model %s %s seed %llu", a->name, params->preset,
             (unsigned long long)params->seed);
    if (s == BRAID_OK) s = gguf_writer_set_str(p.w, "general.name", name);
    int64_t n_vocab = 0;
    if (s == BRAID_OK) {
        if (params->vocab && !strcmp(params->vocab, "none")) {
            n_vocab = params->n_vocab;
            if (n_vocab <= 0 || n_vocab > INT32_MAX)
                s = bd_error(BRAID_E_INVALID, "gen-model: n_vocab %lld", (long long)n_vocab);
            if (s == BRAID_OK) s = gguf_writer_set_str(p.w, "tokenizer.ggml.model", "none");
            if (s == BRAID_OK) s = gen_key_u32(&p, "vocab_size", (uint32_t)n_vocab);
        } else {
            s = copy_vocab(&p, params->vocab ? params->vocab : gen_default_vocab(), &n_vocab);
        }
    }
    if (s == BRAID_OK) s = a->describe(&shape, n_vocab, &p);
    uint64_t n_params = 0, n_bytes = 0;
    for (size_t i = 0; s == BRAID_OK && i < p.n; i++) {
        const gen_tensor_desc *d = &p.t[i];
        s = gguf_writer_add_tensor(p.w, d->name, d->type, d->n_dims, d->ne, NULL);
        n_params += (uint64_t)d->ne[0] * (uint64_t)d->ne[1] * (uint64_t)d->ne[2];
        n_bytes += (uint64_t)bd_row_size(d->type, d->ne[0]) * (uint64_t)d->ne[1] * (uint64_t)d->ne[2];
    }
    if (s == BRAID_OK) {
        p.row = bd_mallocn(p.row_cap ? p.row_cap : 1, sizeof(float));
        if (!p.row) s = bd_error(BRAID_E_NOMEM, "gen-model: out of memory for a row of %zu floats", p.row_cap);
    }
    if (s == BRAID_OK) s = gguf_writer_write(p.w, path, fill, &p);
    if (s == BRAID_OK && p.next != p.n)
        s = bd_error(BRAID_E_INVALID, "gen-model: writer filled %zu of %zu tensors", p.next, p.n);
    if (s == BRAID_OK && out) {
        memset(out, 0, sizeof *out);
        out->shape = shape;
        out->n_vocab = n_vocab;
        out->n_params = n_params;
        out->n_bytes = n_bytes;
        out->n_tensors = p.n;
        out->n_fallback = p.n_fallback;
    }
    bd_free(p.row);
    bd_free(p.t);
    gguf_writer_free(p.w);
    return s;
}
