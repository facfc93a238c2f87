/* getters.c — typed metadata lookups for loaders, with the type and range checks they would all repeat.
 *
 * Integer getters accept any integer value type whose value fits the requested type (converters disagree
 * about u32 vs i32 for counts); floats accept f32 and f64; bools and strings need their exact type. */
#include <inttypes.h>
#include <string.h>

#include "base/status.h"
#include "gguf/gguf.h"

static int is_signed_int(gguf_vtype t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}
static int is_unsigned_int(gguf_vtype t) {
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}

/* Looks key up; *v = NULL and BRAID_OK if absent and optional. */
static braid_status lookup(const gguf_file *f, const char *key, int required, const gguf_value **v) {
    if (!f || !key) return bd_error(BRAID_E_INVALID, "gguf: NULL argument to a getter");
    *v = gguf_find(f, key);
    if (!*v && required) return bd_error(BRAID_E_FORMAT, "gguf: required key '%s' is missing", key);
    return BRAID_OK;
}

static braid_status wrong_type(const char *key, const char *want, gguf_vtype got) {
    return bd_error(BRAID_E_FORMAT, "gguf: key '%s' has type %s, expected %s", key, gguf_vtype_name(got), want);
}

/* Checks that an integer value lies in [lo, hi]; gives it as signed and unsigned. */
static braid_status int_in_range(const char *key, const gguf_value *v, int64_t lo, uint64_t hi, const char *want,
                                 int64_t *si, uint64_t *ui) {
    if (is_unsigned_int(v->type)) {
        if (v->u64 > hi)
            return bd_error(BRAID_E_FORMAT, "gguf: key '%s' value %" PRIu64 " does not fit %s", key, v->u64, want);
        *ui = v->u64;
        *si = (int64_t)v->u64;
        return BRAID_OK;
    }
    if (is_signed_int(v->type)) {
        if (v->i64 < lo || (v->i64 >= 0 && (uint64_t)v->i64 > hi))
            return bd_error(BRAID_E_FORMAT, "gguf: key '%s' value %" PRId64 " does not fit %s", key, v->i64, want);
        *si = v->i64;
        *ui = (uint64_t)v->i64;
        return BRAID_OK;
    }
    return wrong_type(key, want, v->type);
}

/* The integer getters' common part: looks key up and range-checks it. *found = 0 (and BRAID_OK) if absent and
 * optional, in which case *si and *ui are left alone. */
static braid_status lookup_int(const gguf_file *f, const char *key, int required, int64_t lo, uint64_t hi,
                               const char *want, int64_t *si, uint64_t *ui, int *found) {
    const gguf_value *v = NULL;
    BD_TRY(lookup(f, key, required, &v));
    *found = v != NULL;
    return v ? int_in_range(key, v, lo, hi, want, si, ui) : BRAID_OK;
}

/* The other scalar getters' common part: looks key up and requires type a or b (pass the same type twice for
 * one). *v = NULL if absent and optional. */
static braid_status lookup_typed(const gguf_file *f, const char *key, int required, gguf_vtype a, gguf_vtype b,
                                 const char *want, const gguf_value **v) {
    BD_TRY(lookup(f, key, required, v));
    if (*v && (*v)->type != a && (*v)->type != b) return wrong_type(key, want, (*v)->type);
    return BRAID_OK;
}

braid_status gguf_get_u32(const gguf_file *f, const char *key, int required, uint32_t *out) {
    int64_t si = 0;
    uint64_t ui = 0;
    int found;
    BD_TRY(lookup_int(f, key, required, 0, UINT32_MAX, "u32", &si, &ui, &found));
    if (found) *out = (uint32_t)ui;
    return BRAID_OK;
}

braid_status gguf_get_i32(const gguf_file *f, const char *key, int required, int32_t *out) {
    int64_t si = 0;
    uint64_t ui = 0;
    int found;
    BD_TRY(lookup_int(f, key, required, INT32_MIN, INT32_MAX, "i32", &si, &ui, &found));
    if (found) *out = (int32_t)si;
    return BRAID_OK;
}

braid_status gguf_get_u64(const gguf_file *f, const char *key, int required, uint64_t *out) {
    int64_t si = 0;
    uint64_t ui = 0;
    int found;
    BD_TRY(lookup_int(f, key, required, 0, UINT64_MAX, "u64", &si, &ui, &found));
    if (found) *out = ui;
    return BRAID_OK;
}

braid_status gguf_get_f32(const gguf_file *f, const char *key, int required, float *out) {
    const gguf_value *v = NULL;
    BD_TRY(lookup_typed(f, key, required, GGUF_TYPE_FLOAT32, GGUF_TYPE_FLOAT64, "f32", &v));
    if (v) *out = (float)v->f64;
    return BRAID_OK;
}

braid_status gguf_get_bool(const gguf_file *f, const char *key, int required, int *out) {
    const gguf_value *v = NULL;
    BD_TRY(lookup_typed(f, key, required, GGUF_TYPE_BOOL, GGUF_TYPE_BOOL, "bool", &v));
    if (v) *out = v->b;
    return BRAID_OK;
}

braid_status gguf_get_str(const gguf_file *f, const char *key, int required, gguf_str *out) {
    const gguf_value *v = NULL;
    BD_TRY(lookup_typed(f, key, required, GGUF_TYPE_STRING, GGUF_TYPE_STRING, "string", &v));
    if (v) *out = v->str;
    return BRAID_OK;
}

braid_status gguf_get_str_array(const gguf_file *f, const char *key, int required, const gguf_value **items,
                                uint64_t *n) {
    const gguf_value *v = NULL;
    BD_TRY(lookup(f, key, required, &v));
    if (!v) return BRAID_OK;
    if (v->type != GGUF_TYPE_ARRAY || v->arr.type != GGUF_TYPE_STRING)
        return bd_error(BRAID_E_FORMAT, "gguf: key '%s' has type %s%s%s, expected array of string", key,
                        gguf_vtype_name(v->type), v->type == GGUF_TYPE_ARRAY ? " of " : "",
                        v->type == GGUF_TYPE_ARRAY ? gguf_vtype_name(v->arr.type) : "");
    *items = v->arr.items;
    *n = v->arr.n;
    return BRAID_OK;
}

braid_status gguf_array_to_i32(const gguf_value *v, int32_t *out, uint64_t cap, uint64_t *n) {
    if (!v || !n || (!out && cap)) return bd_error(BRAID_E_INVALID, "gguf_array_to_i32: NULL argument");
    if (v->type != GGUF_TYPE_ARRAY)
        return bd_error(BRAID_E_FORMAT, "gguf: value of type %s is not an array", gguf_vtype_name(v->type));
    gguf_vtype t = v->arr.type;
    if (!is_signed_int(t) && !is_unsigned_int(t) && t != GGUF_TYPE_BOOL)
        return bd_error(BRAID_E_FORMAT, "gguf: array of %s is not an integer array", gguf_vtype_name(t));
    *n = v->arr.n;
    if (v->arr.n > cap)
        return bd_error(BRAID_E_RANGE, "gguf: integer array of %" PRIu64 " elements does not fit %" PRIu64,
                        v->arr.n, cap);
    size_t es = gguf_vtype_size(t);
    const uint8_t *p = v->arr.data;
    for (uint64_t i = 0; i < v->arr.n; i++) {
        const uint8_t *e = p + i * es;
        int64_t x;
        switch (t) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_BOOL: x = e[0]; break;
        case GGUF_TYPE_INT8: x = (int8_t)e[0]; break;
        case GGUF_TYPE_UINT16: { uint16_t y; memcpy(&y, e, 2); x = y; } break;
        case GGUF_TYPE_INT16: { int16_t y; memcpy(&y, e, 2); x = y; } break;
        case GGUF_TYPE_UINT32: { uint32_t y; memcpy(&y, e, 4); x = y; } break;
        case GGUF_TYPE_INT32: { int32_t y; memcpy(&y, e, 4); x = y; } break;
        case GGUF_TYPE_UINT64: {
            uint64_t y;
            memcpy(&y, e, 8);
            x = y > INT32_MAX ? INT64_MAX : (int64_t)y;
        } break;
        default: memcpy(&x, e, 8); break; /* INT64 */
        }
        if (x < INT32_MIN || x > INT32_MAX)
            return bd_error(BRAID_E_FORMAT, "gguf: array element %" PRIu64 " does not fit i32", i);
        out[i] = (int32_t)x;
    }
    return BRAID_OK;
}
