/* writer.c — the GGUF writer: collects metadata and tensor descriptions, then streams the file.
 *
 * Values are deep-copied when set (so a value parsed from another file can be carried over and that file
 * closed). Tensor bytes are not copied: they come from the caller's pointer or from the fill callback at
 * write time, one tensor at a time, so writing a multi-GB model needs one tensor's worth of memory.
 * The layout is the one llama.cpp writes: metadata, tensor infos, zero padding to the alignment, then each
 * tensor's bytes followed by zero padding to the alignment (also after the last one). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "gguf/gguf.h"
#include "gguf/utf8.h"

typedef struct writer_kv {
    char *key;        /* owned */
    gguf_value value; /* owned deep (strings, array data, items) */
} writer_kv;

typedef struct writer_tensor {
    char *name; /* owned */
    uint32_t type, n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    const void *data; /* caller's, or NULL = fill callback */
    size_t nbytes;
} writer_tensor;

struct gguf_writer {
    uint32_t version;
    writer_kv *kv; /* [n_kv], capacity cap_kv */
    size_t n_kv, cap_kv;
    writer_tensor *t; /* [n_t], capacity cap_t */
    size_t n_t, cap_t;
};

/* ---- owned values ------------------------------------------------------------------------------------------ */

static void value_free(gguf_value *v) {
    if (v->type == GGUF_TYPE_STRING) {
        bd_free((void *)v->str.ptr);
    } else if (v->type == GGUF_TYPE_ARRAY) {
        bd_free((void *)v->arr.data);
        if (v->arr.items) {
            gguf_value *items = (gguf_value *)v->arr.items;
            for (uint64_t i = 0; i < v->arr.n; i++) value_free(&items[i]);
            bd_free(items);
        }
    }
    memset(v, 0, sizeof *v);
}

/* Deep copy of src into dst (dst is fully owned, or left zeroed on failure). */
static braid_status value_copy(gguf_value *dst, const gguf_value *src, int depth) {
    memset(dst, 0, sizeof *dst);
    if ((unsigned)src->type >= GGUF_TYPE_COUNT) return bd_error(BRAID_E_INVALID, "gguf writer: bad value type");
    if (depth > 16) return bd_error(BRAID_E_INVALID, "gguf writer: arrays nested too deep");
    if (src->type == GGUF_TYPE_STRING) {
        if (src->str.len > SIZE_MAX - 1 || (src->str.len && !src->str.ptr))
            return bd_error(BRAID_E_INVALID, "gguf writer: bad string");
        char *p = bd_malloc((size_t)src->str.len + 1);
        if (!p) return bd_error(BRAID_E_NOMEM, "gguf writer: no memory for a string of %" PRIu64 " bytes",
                                src->str.len);
        if (src->str.len) memcpy(p, src->str.ptr, (size_t)src->str.len);
        p[src->str.len] = '\0';
        dst->type = GGUF_TYPE_STRING;
        dst->str.ptr = p;
        dst->str.len = src->str.len;
        return BRAID_OK;
    }
    if (src->type != GGUF_TYPE_ARRAY) {
        if (src->type == GGUF_TYPE_BOOL && (src->b != 0 && src->b != 1))
            return bd_error(BRAID_E_INVALID, "gguf writer: bool value %d is not 0 or 1", src->b);
        *dst = *src;
        return BRAID_OK;
    }
    gguf_vtype et = src->arr.type;
    if ((unsigned)et >= GGUF_TYPE_COUNT) return bd_error(BRAID_E_INVALID, "gguf writer: bad array element type");
    uint64_t n = src->arr.n;
    if (n > SIZE_MAX) return bd_error(BRAID_E_NOMEM, "gguf writer: array too long");
    size_t es = gguf_vtype_size(et);
    gguf_value tmp = {.type = GGUF_TYPE_ARRAY};
    tmp.arr.type = et;
    tmp.arr.n = n;
    if (es) {
        if (n && !src->arr.data) return bd_error(BRAID_E_INVALID, "gguf writer: array without data");
        if (et == GGUF_TYPE_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (((const uint8_t *)src->arr.data)[i] > 1)
                    return bd_error(BRAID_E_INVALID, "gguf writer: bool element %" PRIu64 " is not 0 or 1", i);
        void *d = bd_mallocn((size_t)n, es);
        if (!d) return bd_error(BRAID_E_NOMEM, "gguf writer: no memory for an array of %" PRIu64, n);
        if (n) memcpy(d, src->arr.data, (size_t)n * es);
        tmp.arr.data = d;
        *dst = tmp;
        return BRAID_OK;
    }
    if (n && !src->arr.items) return bd_error(BRAID_E_INVALID, "gguf writer: array without items");
    if (n == 0) {
        *dst = tmp;
        return BRAID_OK;
    }
    gguf_value *items = bd_calloc((size_t)n, sizeof *items);
    if (!items) return bd_error(BRAID_E_NOMEM, "gguf writer: no memory for an array of %" PRIu64, n);
    tmp.arr.items = items;
    for (uint64_t i = 0; i < n; i++) {
        if (src->arr.items[i].type != et) {
            value_free(&tmp);
            return bd_error(BRAID_E_INVALID, "gguf writer: array element %" PRIu64 " has type %s, not %s", i,
                            gguf_vtype_name(src->arr.items[i].type), gguf_vtype_name(et));
        }
        braid_status s = value_copy(&items[i], &src->arr.items[i], depth + 1);
        if (s != BRAID_OK) {
            value_free(&tmp);
            return s;
        }
    }
    *dst = tmp;
    return BRAID_OK;
}

/* ---- building ---------------------------------------------------------------------------------------------- */

braid_status gguf_writer_new(uint32_t version, gguf_writer **out) {
    if (!out) return bd_error(BRAID_E_INVALID, "gguf_writer_new: NULL argument");
    *out = NULL;
    if (version != 2 && version != 3)
        return bd_error(BRAID_E_INVALID, "gguf writer: version %" PRIu32 " (only 2 and 3 are written)", version);
    gguf_writer *w = bd_calloc(1, sizeof *w);
    if (!w) return bd_error(BRAID_E_NOMEM, "gguf writer: no memory");
    w->version = version;
    *out = w;
    return BRAID_OK;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        bd_free(w->kv[i].key);
        value_free(&w->kv[i].value);
    }
    for (size_t i = 0; i < w->n_t; i++) bd_free(w->t[i].name);
    bd_free(w->kv);
    bd_free(w->t);
    bd_free(w);
}

static braid_status check_name(const char *s, const char *what) {
    if (!s || !*s) return bd_error(BRAID_E_INVALID, "gguf writer: empty %s", what);
    if (!gguf_utf8_valid_nonul((const uint8_t *)s, strlen(s)))
        return bd_error(BRAID_E_INVALID, "gguf writer: %s '%s' is not valid UTF-8", what, s);
    return BRAID_OK;
}

/* Takes ownership of *v (deep copy made by the caller) on success; on failure the caller frees it. */
static braid_status put(gguf_writer *w, const char *key, gguf_value *v) {
    for (size_t i = 0; i < w->n_kv; i++) {
        if (!strcmp(w->kv[i].key, key)) {
            value_free(&w->kv[i].value);
            w->kv[i].value = *v;
            return BRAID_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        writer_kv *nk = bd_realloc(w->kv, cap * sizeof *nk);
        if (!nk) return bd_error(BRAID_E_NOMEM, "gguf writer: no memory for keys");
        w->kv = nk;
        w->cap_kv = cap;
    }
    char *k = bd_strdup(key);
    if (!k) return bd_error(BRAID_E_NOMEM, "gguf writer: no memory for a key");
    w->kv[w->n_kv].key = k;
    w->kv[w->n_kv].value = *v;
    w->n_kv++;
    return BRAID_OK;
}

braid_status gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v) {
    if (!w || !v) return bd_error(BRAID_E_INVALID, "gguf writer: NULL argument");
    BD_TRY(check_name(key, "key"));
    gguf_value copy;
    BD_TRY(value_copy(&copy, v, 0));
    braid_status s = put(w, key, &copy);
    if (s != BRAID_OK) value_free(&copy);
    return s;
}

braid_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    gguf_value x = {.type = GGUF_TYPE_UINT32, .u64 = v};
    return gguf_writer_set_value(w, key, &x);
}
braid_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) {
    gguf_value x = {.type = GGUF_TYPE_INT32, .i64 = v};
    return gguf_writer_set_value(w, key, &x);
}
braid_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) {
    gguf_value x = {.type = GGUF_TYPE_UINT64, .u64 = v};
    return gguf_writer_set_value(w, key, &x);
}
braid_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v) {
    gguf_value x = {.type = GGUF_TYPE_FLOAT32, .f64 = v};
    return gguf_writer_set_value(w, key, &x);
}
braid_status gguf_writer_set_bool(gguf_writer *w, const char *key, int v) {
    gguf_value x = {.type = GGUF_TYPE_BOOL, .b = v ? 1 : 0};
    return gguf_writer_set_value(w, key, &x);
}
braid_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    if (!v) return bd_error(BRAID_E_INVALID, "gguf writer: NULL string for key '%s'", key ? key : "");
    gguf_value x = {.type = GGUF_TYPE_STRING, .str = {v, strlen(v)}};
    return gguf_writer_set_value(w, key, &x);
}

braid_status gguf_writer_set_array(gguf_writer *w, const char *key, gguf_vtype t, const void *data, uint64_t n) {
    if ((unsigned)t >= GGUF_TYPE_COUNT || gguf_vtype_size(t) == 0)
        return bd_error(BRAID_E_INVALID, "gguf writer: set_array needs a fixed-size element type, not %s",
                        gguf_vtype_name(t));
    gguf_value x = {.type = GGUF_TYPE_ARRAY};
    x.arr.type = t;
    x.arr.n = n;
    x.arr.data = data;
    return gguf_writer_set_value(w, key, &x);
}

braid_status gguf_writer_set_str_array(gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    if (n && !v) return bd_error(BRAID_E_INVALID, "gguf writer: NULL string array for key '%s'", key ? key : "");
    if (n > SIZE_MAX / sizeof(gguf_value)) return bd_error(BRAID_E_NOMEM, "gguf writer: string array too long");
    gguf_value *items = NULL;
    if (n) {
        items = bd_mallocn((size_t)n, sizeof *items);
        if (!items) return bd_error(BRAID_E_NOMEM, "gguf writer: no memory for %" PRIu64 " strings", n);
        for (uint64_t i = 0; i < n; i++) {
            if (!v[i]) {
                bd_free(items);
                return bd_error(BRAID_E_INVALID, "gguf writer: NULL string %" PRIu64 " for key '%s'", i, key);
            }
            items[i] = (gguf_value){.type = GGUF_TYPE_STRING, .str = {v[i], strlen(v[i])}};
        }
    }
    gguf_value x = {.type = GGUF_TYPE_ARRAY};
    x.arr.type = GGUF_TYPE_STRING;
    x.arr.n = n;
    x.arr.items = items;
    braid_status s = gguf_writer_set_value(w, key, &x);
    bd_free(items);
    return s;
}

braid_status gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                    const int64_t *ne, const void *data) {
    if (!w || !ne) return bd_error(BRAID_E_INVALID, "gguf writer: NULL argument");
    BD_TRY(check_name(name, "tensor name"));
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return bd_error(BRAID_E_INVALID, "gguf writer: duplicate tensor '%s'", name);
    int64_t blck;
    size_t bpb;
    if (!gguf_type_block(type, &blck, &bpb))
        return bd_error(BRAID_E_INVALID, "gguf writer: tensor '%s' has unknown type %" PRIu32, name, type);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return bd_error(BRAID_E_INVALID, "gguf writer: tensor '%s' has %" PRIu32 " dims", name, n_dims);
    writer_tensor t = {.type = type, .n_dims = n_dims, .data = data};
    int64_t nel = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] <= 0 || __builtin_mul_overflow(nel, t.ne[d], &nel))
            return bd_error(BRAID_E_INVALID, "gguf writer: tensor '%s' has a bad dimension %" PRIu32, name, d);
    }
    if (t.ne[0] % blck != 0)
        return bd_error(BRAID_E_INVALID, "gguf writer: tensor '%s' row of %" PRId64 " is not a multiple of %s's "
                        "block size %" PRId64, name, t.ne[0], gguf_type_name(type), blck);
    if (!bd_mul_size((size_t)(nel / blck), bpb, &t.nbytes))
        return bd_error(BRAID_E_INVALID, "gguf writer: tensor '%s' is too large", name);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 64;
        writer_tensor *nt = bd_realloc(w->t, cap * sizeof *nt);
        if (!nt) return bd_error(BRAID_E_NOMEM, "gguf writer: no memory for tensors");
        w->t = nt;
        w->cap_t = cap;
    }
    t.name = bd_strdup(name);
    if (!t.name) return bd_error(BRAID_E_NOMEM, "gguf writer: no memory for a tensor name");
    w->t[w->n_t++] = t;
    return BRAID_OK;
}

/* ---- streaming --------------------------------------------------------------------------------------------- */

typedef struct wout {
    FILE *fp;
    const char *path;
    uint64_t pos;
    int failed;
} wout;

static void put_bytes(wout *o, const void *p, size_t n) {
    if (o->failed || n == 0) return;
    errno = 0;
    if (fwrite(p, 1, n, o->fp) != n) o->failed = errno ? errno : EIO;
    o->pos += n;
}
static void put_u32(wout *o, uint32_t v) { put_bytes(o, &v, 4); }
static void put_u64(wout *o, uint64_t v) { put_bytes(o, &v, 8); }
static void put_str(wout *o, const char *p, uint64_t len) {
    put_u64(o, len);
    put_bytes(o, p, (size_t)len);
}
static void put_pad(wout *o, size_t align) {
    static const uint8_t zeros[256];
    size_t pad = (size_t)((align - o->pos % align) % align);
    while (pad) {
        size_t k = pad < sizeof zeros ? pad : sizeof zeros;
        put_bytes(o, zeros, k);
        pad -= k;
    }
}

/* The payload of a value of type v->type (without the type tag). */
static void put_value(wout *o, const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: {
        uint8_t x = v->type == GGUF_TYPE_BOOL ? (uint8_t)v->b : (uint8_t)v->u64;
        put_bytes(o, &x, 1);
    } break;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: {
        uint16_t x = (uint16_t)v->u64;
        put_bytes(o, &x, 2);
    } break;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: put_u32(o, (uint32_t)v->u64); break;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: put_u64(o, v->u64); break;
    case GGUF_TYPE_FLOAT32: {
        float x = (float)v->f64;
        put_bytes(o, &x, 4);
    } break;
    case GGUF_TYPE_FLOAT64: put_bytes(o, &v->f64, 8); break;
    case GGUF_TYPE_STRING: put_str(o, v->str.ptr, v->str.len); break;
    case GGUF_TYPE_ARRAY:
        put_u32(o, (uint32_t)v->arr.type);
        put_u64(o, v->arr.n);
        if (gguf_vtype_size(v->arr.type)) {
            put_bytes(o, v->arr.data, (size_t)v->arr.n * gguf_vtype_size(v->arr.type));
        } else {
            for (uint64_t i = 0; i < v->arr.n; i++) put_value(o, &v->arr.items[i]);
        }
        break;
    default: break;
    }
}

static braid_status writer_alignment(const gguf_writer *w, size_t *align) {
    *align = GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment") != 0) continue;
        const gguf_value *v = &w->kv[i].value;
        if (v->type != GGUF_TYPE_UINT32 || v->u64 == 0 || (v->u64 & (v->u64 - 1)))
            return bd_error(BRAID_E_INVALID, "gguf writer: general.alignment must be a u32 power of two");
        *align = (size_t)v->u64;
    }
    return BRAID_OK;
}

braid_status gguf_writer_write(gguf_writer *w, const char *path, gguf_fill_fn fill, void *user) {
    if (!w || !path) return bd_error(BRAID_E_INVALID, "gguf writer: NULL argument");
    size_t align;
    BD_TRY(writer_alignment(w, &align));
    /* Offsets and the fill buffer size, before anything is written. */
    uint64_t *offsets = bd_mallocn(w->n_t ? w->n_t : 1, sizeof *offsets);
    if (!offsets) return bd_error(BRAID_E_NOMEM, "gguf writer: no memory");
    uint64_t off = 0;
    size_t fill_max = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        offsets[i] = off;
        uint64_t end = off + w->t[i].nbytes;
        if (end < off || end > UINT64_MAX - align) {
            bd_free(offsets);
            return bd_error(BRAID_E_INVALID, "gguf writer: tensor data exceeds 2^64 bytes");
        }
        off = (end + align - 1) / align * align;
        if (!w->t[i].data) {
            if (!fill) {
                bd_free(offsets);
                return bd_error(BRAID_E_INVALID, "gguf writer: tensor '%s' has no data and no fill callback",
                                w->t[i].name);
            }
            if (w->t[i].nbytes > fill_max) fill_max = w->t[i].nbytes;
        }
    }
    void *buf = NULL;
    if (fill_max) {
        buf = bd_malloc(fill_max);
        if (!buf) {
            bd_free(offsets);
            return bd_error(BRAID_E_NOMEM, "gguf writer: no memory for a %zu-byte tensor buffer", fill_max);
        }
    }
    wout o = {.fp = fopen(path, "wb"), .path = path};
    if (!o.fp) {
        int e = errno;
        bd_free(offsets);
        bd_free(buf);
        return bd_error(BRAID_E_IO, "gguf writer: cannot create '%s': %s", path, strerror(e));
    }
    braid_status s = BRAID_OK;
    put_u32(&o, GGUF_MAGIC);
    put_u32(&o, w->version);
    put_u64(&o, w->n_t);
    put_u64(&o, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(&o, w->kv[i].key, strlen(w->kv[i].key));
        put_u32(&o, (uint32_t)w->kv[i].value.type);
        put_value(&o, &w->kv[i].value);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        const writer_tensor *t = &w->t[i];
        put_str(&o, t->name, strlen(t->name));
        put_u32(&o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(&o, (uint64_t)t->ne[d]);
        put_u32(&o, t->type);
        put_u64(&o, offsets[i]);
    }
    put_pad(&o, align);
    uint64_t data_start = o.pos;
    for (size_t i = 0; i < w->n_t && s == BRAID_OK && !o.failed; i++) {
        const writer_tensor *t = &w->t[i];
        if (o.pos - data_start != offsets[i]) {
            s = bd_error(BRAID_E_INVALID, "gguf writer: internal offset mismatch at tensor '%s'", t->name);
            break;
        }
        const void *src = t->data;
        if (!src) {
            s = fill(user, t->name, buf, t->nbytes);
            if (s != BRAID_OK) break;
            src = buf;
        }
        put_bytes(&o, src, t->nbytes);
        put_pad(&o, align);
    }
    if (fclose(o.fp) != 0 && !o.failed) o.failed = errno ? errno : EIO;
    if (s == BRAID_OK && o.failed) s = bd_error(BRAID_E_IO, "gguf writer: writing '%s' failed: %s", path,
                                                strerror(o.failed));
    if (s != BRAID_OK) remove(path);
    bd_free(offsets);
    bd_free(buf);
    return s;
}
