/* model_meta.c — a loaded model's GGUF metadata as text, and its size, for programs that show what they run
 * (and for the llama.h compatibility layer's llama_model_meta_* and llama_model_desc). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "engine/model.h"

int32_t braid_model_n_meta(const braid_model *m) {
    return m && m->gguf ? (int32_t)gguf_n_kv(m->gguf) : 0;
}

braid_status braid_model_meta_key(const braid_model *m, int32_t i, const char **key) {
    if (!m || !key) return bd_error(BRAID_E_INVALID, "braid_model_meta_key: NULL argument");
    if (i < 0 || i >= braid_model_n_meta(m))
        return bd_error(BRAID_E_RANGE, "braid_model_meta_key: index %d not in 0..%d", i, braid_model_n_meta(m) - 1);
    *key = gguf_kv_at(m->gguf, (size_t)i)->key;
    return BRAID_OK;
}

/* Writes v as text with snprintf semantics: returns the full length. */
static size_t value_text(const gguf_value *v, char *buf, size_t cap) {
    int n = 0;
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        n = snprintf(buf, cap, "%" PRIu64, v->u64);
        break;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        n = snprintf(buf, cap, "%" PRId64, v->i64);
        break;
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64:
        n = snprintf(buf, cap, "%.9g", v->f64);
        break;
    case GGUF_TYPE_BOOL:
        n = snprintf(buf, cap, "%s", v->b ? "true" : "false");
        break;
    case GGUF_TYPE_STRING: {
        size_t len = (size_t)v->str.len;
        if (cap) {
            size_t k = len < cap - 1 ? len : cap - 1;
            memcpy(buf, v->str.ptr, k);
            buf[k] = 0;
        }
        return len;
    }
    case GGUF_TYPE_ARRAY:
        n = snprintf(buf, cap, "[%" PRIu64 " elements of %s]", v->arr.n, gguf_vtype_name(v->arr.type));
        break;
    default:
        n = snprintf(buf, cap, "?");
        break;
    }
    return n < 0 ? 0 : (size_t)n;
}

braid_status braid_model_meta_str(const braid_model *m, const char *key, char *buf, size_t cap, size_t *n_out) {
    if (!m || !key || (!buf && cap)) return bd_error(BRAID_E_INVALID, "braid_model_meta_str: NULL argument");
    const gguf_value *v = m->gguf ? gguf_find(m->gguf, key) : NULL;
    if (!v) return bd_error(BRAID_E_RANGE, "braid_model_meta_str: no key %s", key);
    size_t n = value_text(v, buf, cap);
    if (n_out) *n_out = n;
    return BRAID_OK;
}

uint64_t braid_model_n_params(const braid_model *m) {
    uint64_t n = 0;
    for (size_t i = 0; m && m->gguf && i < gguf_n_tensors(m->gguf); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->gguf, i);
        uint64_t e = 1;
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) e *= (uint64_t)t->ne[d];
        n += e;
    }
    return n;
}

uint64_t braid_model_size(const braid_model *m) {
    uint64_t n = 0;
    for (size_t i = 0; m && m->gguf && i < gguf_n_tensors(m->gguf); i++) n += gguf_tensor_at(m->gguf, i)->nbytes;
    return n;
}
