/* loader.c — strictly typed GGUF keys and shape-checked tensor binding for the architecture files (see
 * loader.h for the rules and why they are llama.cpp's). */
#include "models/loader.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "tensor/dot.h"
#include "tensor/types.h"

braid_status bd_loader_init(bd_loader *l, const gguf_file *f, const char *arch) {
    memset(l, 0, sizeof *l);
    l->f = f;
    if (strlen(arch) + 2 > sizeof l->arch) return bd_error(BRAID_E_FORMAT, "architecture name too long: %s", arch);
    snprintf(l->arch, sizeof l->arch, "%s.", arch);
    l->n_tensors = gguf_n_tensors(f);
    l->used = bd_calloc(l->n_tensors ? l->n_tensors : 1, 1);
    if (!l->used) return bd_error(BRAID_E_NOMEM, "loader: out of memory");
    return BRAID_OK;
}

void bd_loader_free(bd_loader *l) {
    bd_free(l->used);
    l->used = NULL;
}

static const gguf_value *find_key(const bd_loader *l, const char *suffix, char *key, size_t cap) {
    snprintf(key, cap, "%s%s", l->arch, suffix);
    return gguf_find(l->f, key);
}

static braid_status wrong_type(const char *key, const char *want, const gguf_value *v) {
    return bd_error(BRAID_E_FORMAT, "key %s has type %s, expected %s", key, gguf_vtype_name(v->type), want);
}

braid_status bd_key_u32(const bd_loader *l, const char *suffix, int required, uint32_t *out) {
    char key[256];
    const gguf_value *v = find_key(l, suffix, key, sizeof key);
    if (!v) return required ? bd_error(BRAID_E_FORMAT, "key not found in model: %s", key) : BRAID_OK;
    if (v->type != GGUF_TYPE_UINT32) return wrong_type(key, "uint32", v);
    *out = (uint32_t)v->u64;
    return BRAID_OK;
}

/* Float hyperparameters with a sign constraint (suffixes after "<arch>."); every float key must be finite. A
 * NaN or zero here does not fail the load in llama.cpp either: it fails much later as NaN logits, far from
 * the key that caused it, so the loader names the key instead. */
static const struct {
    const char *suffix;
    int allow_zero; /* 0: must be > 0; 1: >= 0 */
} f32_rules[] = {
    {"attention.layer_norm_rms_epsilon", 0}, /* divides by sqrt(mean + eps) */
    {"attention.layer_norm_epsilon", 0},
    {"rope.freq_base", 0},                   /* theta = base^(-2i/n): 0, negative or NaN give NaN angles */
    {"rope.scaling.factor", 1},              /* 0: no scaling; else the inverse scales positions */
};

braid_status bd_key_f32(const bd_loader *l, const char *suffix, int required, float *out) {
    char key[256];
    const gguf_value *v = find_key(l, suffix, key, sizeof key);
    if (!v) return required ? bd_error(BRAID_E_FORMAT, "key not found in model: %s", key) : BRAID_OK;
    if (v->type != GGUF_TYPE_FLOAT32) return wrong_type(key, "float32", v);
    const float x = (float)v->f64;
    if (!isfinite(x)) return bd_error(BRAID_E_FORMAT, "key %s is %g, not a finite number", key, (double)x);
    for (size_t i = 0; i < sizeof f32_rules / sizeof f32_rules[0]; i++)
        if (!strcmp(suffix, f32_rules[i].suffix) && (f32_rules[i].allow_zero ? x < 0.0f : x <= 0.0f))
            return bd_error(BRAID_E_FORMAT, "key %s is %g, must be %s", key, (double)x,
                            f32_rules[i].allow_zero ? ">= 0" : "> 0");
    *out = x;
    return BRAID_OK;
}

braid_status bd_key_str(const bd_loader *l, const char *suffix, int required, gguf_str *out) {
    char key[256];
    const gguf_value *v = find_key(l, suffix, key, sizeof key);
    if (!v) return required ? bd_error(BRAID_E_FORMAT, "key not found in model: %s", key) : BRAID_OK;
    if (v->type != GGUF_TYPE_STRING) return wrong_type(key, "string", v);
    *out = v->str;
    return BRAID_OK;
}

/* Element i of an INT32/UINT32/BOOL array as a uint32 (BOOL: nonzero -> 1). */
static uint32_t arr_elem(const gguf_value *v, uint64_t i) {
    const unsigned char *p = (const unsigned char *)v->arr.data;
    if (v->arr.type == GGUF_TYPE_BOOL) return p[i] != 0;
    uint32_t x;
    memcpy(&x, p + 4 * i, 4); /* little-endian file, little-endian host (checked at build time by gguf) */
    return x;
}

static int int_array(const gguf_value *v) {
    return v->type == GGUF_TYPE_ARRAY && (v->arr.type == GGUF_TYPE_INT32 || v->arr.type == GGUF_TYPE_UINT32 ||
                                          v->arr.type == GGUF_TYPE_BOOL);
}

braid_status bd_key_u32_per_layer(const bd_loader *l, const char *suffix, uint32_t n, int required, uint32_t *out,
                                  int *found) {
    char key[256];
    const gguf_value *v = find_key(l, suffix, key, sizeof key);
    *found = 0;
    if (!v) return required ? bd_error(BRAID_E_FORMAT, "key not found in model: %s", key) : BRAID_OK;
    if (v->type == GGUF_TYPE_ARRAY) {
        if (!int_array(v)) return bd_error(BRAID_E_FORMAT, "key %s: array of %s, expected int32/uint32/bool", key,
                                           gguf_vtype_name(v->arr.type));
        if (v->arr.n != n)
            return bd_error(BRAID_E_FORMAT, "key %s has wrong array length; expected %u, got %llu", key, n,
                            (unsigned long long)v->arr.n);
        for (uint32_t i = 0; i < n; i++) out[i] = arr_elem(v, i);
    } else {
        if (v->type != GGUF_TYPE_UINT32) return wrong_type(key, "uint32 or array", v);
        for (uint32_t i = 0; i < n; i++) out[i] = (uint32_t)v->u64;
    }
    *found = 1;
    return BRAID_OK;
}

braid_status bd_key_i32_array(const bd_loader *l, const char *suffix, uint32_t cap, int required, int32_t *out,
                              int *found) {
    char key[256];
    const gguf_value *v = find_key(l, suffix, key, sizeof key);
    *found = 0;
    if (!v) return required ? bd_error(BRAID_E_FORMAT, "array key not found in model: %s", key) : BRAID_OK;
    if (!int_array(v)) return bd_error(BRAID_E_FORMAT, "key %s: expected an int32/uint32/bool array", key);
    if (v->arr.n > cap)
        return bd_error(BRAID_E_FORMAT, "array length %llu for key %s exceeds max %u", (unsigned long long)v->arr.n,
                        key, cap);
    memset(out, 0, cap * sizeof *out);
    for (uint64_t i = 0; i < v->arr.n; i++) out[i] = (int32_t)arr_elem(v, i);
    *found = 1;
    return BRAID_OK;
}

braid_status bd_bind3(bd_loader *l, const char *name, int64_t ne0, int64_t ne1, int64_t ne2, int f32_only,
                      int required, bd_weight *out) {
    memset(out, 0, sizeof *out);
    const gguf_tensor *t = gguf_find_tensor(l->f, name);
    if (!t) return required ? bd_error(BRAID_E_FORMAT, "missing tensor %s", name) : BRAID_OK;
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1) {
        char want[96];
        if (ne2 == 1) snprintf(want, sizeof want, "{%lld, %lld}", (long long)ne0, (long long)ne1);
        else snprintf(want, sizeof want, "{%lld, %lld, %lld}", (long long)ne0, (long long)ne1, (long long)ne2);
        return bd_error(BRAID_E_FORMAT, "tensor %s has wrong shape; expected %s, got {%lld, %lld, %lld, %lld}", name,
                        want, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    }
    const bd_type_traits *tr = bd_type_traits_get(t->type);
    if (!tr || !bd_type_supported(t->type))
        return bd_error(BRAID_E_UNSUPPORTED, "tensor %s has unsupported type %u", name, t->type);
    if (f32_only && t->type != BRAID_TYPE_F32)
        return bd_error(BRAID_E_FORMAT, "tensor %s must be F32, is %s", name, tr->name);
    size_t rs = bd_row_size(t->type, ne0);
    if (rs == 0)
        return bd_error(BRAID_E_FORMAT, "tensor %s: row of %lld is not a multiple of the %s block size", name,
                        (long long)ne0, tr->name);
    out->data = t->data;
    out->type = t->type;
    out->n_in = ne0;
    out->n_out = ne1;
    out->row_size = rs;
    for (size_t i = 0; i < l->n_tensors; i++)
        if (gguf_tensor_at(l->f, i) == t) l->used[i] = 1;
    return BRAID_OK;
}

braid_status bd_bind(bd_loader *l, const char *name, int64_t ne0, int64_t ne1, int f32_only, int required,
                     bd_weight *out) {
    return bd_bind3(l, name, ne0, ne1, 1, f32_only, required, out);
}

braid_status bd_bind_layer3(bd_loader *l, int il, const char *suffix, int64_t ne0, int64_t ne1, int64_t ne2,
                            int f32_only, int required, bd_weight *out) {
    char name[256];
    snprintf(name, sizeof name, "blk.%d.%s", il, suffix);
    return bd_bind3(l, name, ne0, ne1, ne2, f32_only, required, out);
}

braid_status bd_bind_layer(bd_loader *l, int il, const char *suffix, int64_t ne0, int64_t ne1, int f32_only,
                           int required, bd_weight *out) {
    char name[256];
    snprintf(name, sizeof name, "blk.%d.%s", il, suffix);
    return bd_bind(l, name, ne0, ne1, f32_only, required, out);
}

int bd_tensor_skipped(const char *name, int first_skipped_layer) {
    int il;
    return sscanf(name, "blk.%d.", &il) == 1 && il >= first_skipped_layer;
}

braid_status bd_loader_finish(bd_loader *l, int first_skipped_layer) {
    for (size_t i = 0; i < l->n_tensors; i++) {
        if (l->used[i]) continue;
        const char *name = gguf_tensor_at(l->f, i)->name;
        if (bd_tensor_skipped(name, first_skipped_layer)) continue;
        return bd_error(BRAID_E_FORMAT, "unexpected tensor %s (the file has tensors this architecture does not use)",
                        name);
    }
    return BRAID_OK;
}
