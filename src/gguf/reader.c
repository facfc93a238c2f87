/* reader.c — the GGUF reader: maps a file (or takes a buffer) and validates all of it before handing it out.
 *
 * Layout (GGUF v2 and v3 share it; v3 only added big-endian files, which braid does not read):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x  (string key | u32 value type | value)
 *   n_tensors x (string name | u32 n_dims | n_dims x i64 ne | u32 ggml type | u64 offset)
 *   padding to general.alignment (default 32) | tensor data (offsets relative to here, each aligned)
 *   string = u64 length + bytes; array value = u32 element type | u64 count | count elements.
 *
 * Trust model: every length and count read from the file is checked against the bytes that remain before
 * it is used, so a count of 2^62 fails at once instead of allocating. Each parsed item consumes at least one
 * input byte, so everything allocated here is bounded by a small multiple of the file size (a gguf_value is
 * 40 bytes for the 8 bytes of an empty string; that is the worst ratio). Keys and tensor names are indexed in
 * hash tables so that duplicate checks and lookups stay linear on hostile files with millions of entries.
 *
 * Memory: the kv and tensor tables grow as entries are parsed; one arena (a chain of blocks) holds parsed
 * array items and the NUL-terminated copies of keys and names; gguf_close frees it all. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/file.h"
#include "base/hash.h"
#include "base/status.h"
#include "gguf/gguf.h"
#include "gguf/utf8.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

/* Nested arrays deeper than this are refused: real files use none, and the parser recurses per level. */
#define GGUF_MAX_ARRAY_DEPTH 16
/* Smallest possible encodings, used to bound counts by the bytes that remain. */
#define MIN_KV_BYTES 14     /* u64 key length + 1 key byte + u32 type + 1 value byte */
#define MIN_TENSOR_BYTES 33 /* u64 name length + 1 name byte + u32 n_dims + one i64 ne + u32 type + u64 offset */
#define MIN_STRING_BYTES 8  /* u64 length */
#define MIN_ARRAY_BYTES 12  /* u32 element type + u64 count */

/* ---- arena ------------------------------------------------------------------------------------------------ */

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    max_align_t data[]; /* cap bytes */
} arena_block;

#define ARENA_BLOCK_MIN ((size_t)64 * 1024)

/* Returns size bytes aligned for any type, or NULL on allocation failure (or size overflow). */
static void *arena_alloc(arena_block **head, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (size == 0) size = 16;
    arena_block *b = *head;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > ARENA_BLOCK_MIN ? size : ARENA_BLOCK_MIN, total;
        if (!bd_add_size(sizeof(arena_block), cap, &total)) return NULL;
        arena_block *nb = bd_malloc(total);
        if (!nb) return NULL;
        nb->cap = cap;
        nb->used = 0;
        /* A block bigger than the standard size goes behind the current one, so the current one's free
         * space stays usable for the small requests that follow. */
        if (b && cap > ARENA_BLOCK_MIN) {
            nb->next = b->next;
            b->next = nb;
            nb->used = size;
            return nb->data;
        }
        nb->next = b;
        *head = b = nb;
    }
    void *p = (char *)b->data + b->used;
    b->used += size;
    return p;
}

static void *arena_allocn(arena_block **head, size_t n, size_t size) {
    size_t total;
    if (!bd_mul_size(n, size, &total)) return NULL;
    return arena_alloc(head, total);
}

static void arena_free(arena_block *b) {
    while (b) {
        arena_block *next = b->next;
        bd_free(b);
        b = next;
    }
}

/* ---- the file ---------------------------------------------------------------------------------------------- */

/* Open-addressing hash index of names: slots[i] = 0 if empty, else record index + 1; [mask + 1] slots. */
typedef struct name_index {
    size_t *slots;
    size_t mask;
} name_index;

struct gguf_file {
    const uint8_t *base; /* size bytes: the mapping or the caller's buffer */
    size_t size;
    void *map; /* non-NULL if we mapped it (munmap on close) */
    uint32_t version;
    size_t alignment;
    size_t alignment_at; /* file offset of general.alignment's value, for messages */
    size_t data_offset;
    size_t n_kv;
    gguf_kv *kv; /* [n_kv] (capacity cap_kv while parsing) */
    size_t n_tensors;
    gguf_tensor *tensors; /* [n_tensors] (capacity cap_tensors while parsing) */
    size_t cap_kv, cap_tensors;
    name_index kv_index, t_index;
    arena_block *arena;
};

/* A cursor over the input. All reads go through need(), which is where truncation is detected. */
typedef struct rd {
    const uint8_t *p;
    size_t size, pos;
} rd;

static size_t rd_left(const rd *r) { return r->size - r->pos; }

static braid_status need(const rd *r, uint64_t n, const char *what) {
    if (n > rd_left(r))
        return bd_error(BRAID_E_FORMAT, "gguf: truncated %s at offset %zu: need %" PRIu64 " bytes, %zu remain "
                        "(file size %zu)", what, r->pos, n, rd_left(r), r->size);
    return BRAID_OK;
}

static braid_status rd_u32(rd *r, uint32_t *v, const char *what) {
    BD_TRY(need(r, 4, what));
    memcpy(v, r->p + r->pos, 4);
    r->pos += 4;
    return BRAID_OK;
}

static braid_status rd_u64(rd *r, uint64_t *v, const char *what) {
    BD_TRY(need(r, 8, what));
    memcpy(v, r->p + r->pos, 8);
    r->pos += 8;
    return BRAID_OK;
}

/* A string: u64 length then bytes (pointing into the input). */
static braid_status rd_str(rd *r, gguf_str *s, const char *what) {
    size_t at = r->pos;
    uint64_t len;
    BD_TRY(rd_u64(r, &len, what));
    if (len > rd_left(r))
        return bd_error(BRAID_E_FORMAT, "gguf: %s at offset %zu has length %" PRIu64 " but only %zu bytes remain "
                        "(file size %zu)", what, at, len, rd_left(r), r->size);
    s->ptr = (const char *)r->p + r->pos;
    s->len = len;
    r->pos += (size_t)len;
    return BRAID_OK;
}

/* ---- hash index of names ----------------------------------------------------------------------------------- */

static uint64_t name_hash(const char *s, size_t len) { return bd_hash64(s, len, 0x67677566u); }

/* The name of record i (each record starts with its const char * name). */
static const char *record_name(const void *records, size_t stride, size_t i) {
    return *(const char *const *)((const char *)records + i * stride);
}

/* Finds name (len bytes) in the index over records. Returns the slot where it is or where it would go;
 * *found gets the record index + 1, or 0. */
static size_t index_probe(const name_index *ix, const void *records, size_t stride, const char *name, size_t len,
                          size_t *found) {
    *found = 0;
    if (!ix->slots) return 0; /* nothing inserted yet */
    size_t h = (size_t)name_hash(name, len) & ix->mask;
    for (;;) {
        size_t v = ix->slots[h];
        if (v == 0) {
            *found = 0;
            return h;
        }
        const char *other = record_name(records, stride, v - 1);
        if (strncmp(other, name, len) == 0 && other[len] == '\0') {
            *found = v;
            return h;
        }
        h = (h + 1) & ix->mask;
    }
}

/* Makes room for n entries, keeping the load at most 1/2 (re-hashes the entries already in). 0 on failure. */
static int index_reserve(name_index *ix, const void *records, size_t stride, size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap *= 2; /* n <= size/14: cannot overflow */
    if (ix->slots && cap <= ix->mask + 1) return 1;
    size_t *slots = bd_calloc(cap, sizeof *slots);
    if (!slots) return 0;
    for (size_t i = 0; ix->slots && i <= ix->mask; i++) {
        size_t v = ix->slots[i];
        if (!v) continue;
        const char *name = record_name(records, stride, v - 1);
        size_t h = (size_t)name_hash(name, strlen(name)) & (cap - 1);
        while (slots[h]) h = (h + 1) & (cap - 1);
        slots[h] = v;
    }
    bd_free(ix->slots);
    ix->slots = slots;
    ix->mask = cap - 1;
    return 1;
}

/* Grows an array of elem-byte records to hold need entries (doubling, at most max). 0 on failure. */
static int table_reserve(void **arr, size_t *cap, size_t need, size_t elem, size_t max) {
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap * 2 : 64;
    if (c > max) c = max;
    if (c < need) c = need;
    void *p = bd_realloc(*arr, c * elem); /* c <= size/14 and elem < 100: cannot overflow */
    if (!p) return 0;
    *arr = p;
    *cap = c;
    return 1;
}

/* ---- values ------------------------------------------------------------------------------------------------ */

static const char *vtype_names[GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};
static const uint8_t vtype_sizes[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *gguf_vtype_name(gguf_vtype t) { return (unsigned)t < GGUF_TYPE_COUNT ? vtype_names[t] : "invalid"; }
size_t gguf_vtype_size(gguf_vtype t) { return (unsigned)t < GGUF_TYPE_COUNT ? vtype_sizes[t] : 0; }

/* Reads one scalar of fixed-size type t at p into v (widened). */
static void load_scalar(gguf_value *v, gguf_vtype t, const uint8_t *p) {
    switch (t) {
    case GGUF_TYPE_UINT8: v->u64 = p[0]; break;
    case GGUF_TYPE_INT8: v->i64 = (int8_t)p[0]; break;
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, p, 2); v->u64 = x; } break;
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, p, 2); v->i64 = x; } break;
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, p, 4); v->u64 = x; } break;
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, p, 4); v->i64 = x; } break;
    case GGUF_TYPE_FLOAT32: { float x; memcpy(&x, p, 4); v->f64 = x; } break;
    case GGUF_TYPE_BOOL: v->b = p[0]; break;
    case GGUF_TYPE_UINT64: memcpy(&v->u64, p, 8); break;
    case GGUF_TYPE_INT64: memcpy(&v->i64, p, 8); break;
    case GGUF_TYPE_FLOAT64: memcpy(&v->f64, p, 8); break;
    default: break;
    }
}

static braid_status rd_vtype(rd *r, const char *key, gguf_vtype *t, const char *what) {
    size_t at = r->pos;
    uint32_t x;
    BD_TRY(rd_u32(r, &x, what));
    if (x >= GGUF_TYPE_COUNT)
        return bd_error(BRAID_E_FORMAT, "gguf: key '%s': invalid %s %" PRIu32 " at offset %zu", key, what, x, at);
    *t = (gguf_vtype)x;
    return BRAID_OK;
}

static braid_status parse_value(gguf_file *f, rd *r, const char *key, gguf_vtype t, gguf_value *v, int depth) {
    memset(v, 0, sizeof *v);
    v->type = t;
    size_t at = r->pos;
    if (t == GGUF_TYPE_STRING) return rd_str(r, &v->str, "string value");
    if (t != GGUF_TYPE_ARRAY) {
        BD_TRY(need(r, vtype_sizes[t], "value"));
        if (t == GGUF_TYPE_BOOL && r->p[at] > 1)
            return bd_error(BRAID_E_FORMAT, "gguf: key '%s': bool value %u at offset %zu is not 0 or 1", key,
                            r->p[at], at);
        load_scalar(v, t, r->p + at);
        r->pos += vtype_sizes[t];
        return BRAID_OK;
    }
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return bd_error(BRAID_E_FORMAT, "gguf: key '%s': arrays nested deeper than %d at offset %zu", key,
                        GGUF_MAX_ARRAY_DEPTH, at);
    gguf_vtype et = GGUF_TYPE_UINT8;
    uint64_t n;
    BD_TRY(rd_vtype(r, key, &et, "array element type"));
    size_t n_at = r->pos;
    BD_TRY(rd_u64(r, &n, "array length"));
    v->arr.type = et;
    v->arr.n = n;
    size_t es = vtype_sizes[et];
    if (es) {
        if (n > rd_left(r) / es)
            return bd_error(BRAID_E_FORMAT, "gguf: key '%s': array of %" PRIu64 " %s at offset %zu needs more than "
                            "the %zu bytes that remain (file size %zu)", key, n, vtype_names[et], n_at, rd_left(r),
                            r->size);
        const uint8_t *p = r->p + r->pos;
        if (et == GGUF_TYPE_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (p[i] > 1)
                    return bd_error(BRAID_E_FORMAT, "gguf: key '%s': bool element %" PRIu64 " = %u at offset %zu "
                                    "is not 0 or 1", key, i, p[i], r->pos + (size_t)i);
        v->arr.data = p;
        r->pos += (size_t)n * es;
        return BRAID_OK;
    }
    size_t min = et == GGUF_TYPE_STRING ? MIN_STRING_BYTES : MIN_ARRAY_BYTES;
    if (n > rd_left(r) / min)
        return bd_error(BRAID_E_FORMAT, "gguf: key '%s': array of %" PRIu64 " %s at offset %zu cannot fit in the "
                        "%zu bytes that remain (file size %zu)", key, n, vtype_names[et], n_at, rd_left(r), r->size);
    if (n == 0) return BRAID_OK;
    gguf_value *items = arena_allocn(&f->arena, (size_t)n, sizeof *items);
    if (!items)
        return bd_error(BRAID_E_NOMEM, "gguf: key '%s': no memory for %" PRIu64 " array items", key, n);
    v->arr.items = items;
    for (uint64_t i = 0; i < n; i++) {
        if (et == GGUF_TYPE_STRING) {
            items[i].type = GGUF_TYPE_STRING;
            BD_TRY(rd_str(r, &items[i].str, "string array element"));
        } else {
            BD_TRY(parse_value(f, r, key, et, &items[i], depth + 1));
        }
    }
    return BRAID_OK;
}

/* Copies a key or tensor name, after checking it is non-empty, NUL-free UTF-8. */
static braid_status copy_name(gguf_file *f, const gguf_str *s, size_t at, const char *what, const char **out) {
    if (s->len == 0) return bd_error(BRAID_E_FORMAT, "gguf: empty %s at offset %zu", what, at);
    if (!gguf_utf8_valid_nonul((const uint8_t *)s->ptr, (size_t)s->len))
        return bd_error(BRAID_E_FORMAT, "gguf: %s at offset %zu (%" PRIu64 " bytes) is not NUL-free UTF-8", what,
                        at, s->len);
    char *c = arena_alloc(&f->arena, (size_t)s->len + 1);
    if (!c) return bd_error(BRAID_E_NOMEM, "gguf: no memory for a %s", what);
    memcpy(c, s->ptr, (size_t)s->len);
    c[s->len] = '\0';
    *out = c;
    return BRAID_OK;
}

/* ---- parsing ----------------------------------------------------------------------------------------------- */

/* Reads entry i's name at r, copies it into the file (*out) and enters it in ix, whose records (stride bytes
 * each, the name first) are the key or tensor table. what names the string in messages ("key", "tensor name"),
 * entry names the record ("key", "tensor"). A name already entered is a format error naming the first one. */
static braid_status read_unique_name(gguf_file *f, rd *r, name_index *ix, const void *records, size_t stride,
                                     size_t i, const char *what, const char *entry, const char **out) {
    size_t at = r->pos;
    gguf_str s = {0}; /* rd_str fills it on success; the initializer keeps gcc's inlined flow analysis quiet */
    BD_TRY(rd_str(r, &s, what));
    BD_TRY(copy_name(f, &s, at, what, out));
    size_t found, slot = index_probe(ix, records, stride, *out, (size_t)s.len, &found);
    if (found)
        return bd_error(BRAID_E_FORMAT, "gguf: duplicate %s '%s' at offset %zu (first as %s %zu)", what, *out, at,
                        entry, found - 1);
    ix->slots[slot] = i + 1;
    return BRAID_OK;
}

/* The tables grow with what is actually parsed, not with the counts the header claims, so a lying header
 * cannot make the reader allocate before the bytes that back the entries have been seen. */
static braid_status parse_kvs(gguf_file *f, rd *r, size_t n_kv) {
    for (size_t i = 0; i < n_kv; i++) {
        if (!table_reserve((void **)&f->kv, &f->cap_kv, i + 1, sizeof *f->kv, n_kv) ||
            !index_reserve(&f->kv_index, f->kv, sizeof *f->kv, i + 1))
            return bd_error(BRAID_E_NOMEM, "gguf: no memory for %zu keys", i + 1);
        gguf_kv *kv = &f->kv[i];
        memset(kv, 0, sizeof *kv);
        f->n_kv = i + 1;
        BD_TRY(read_unique_name(f, r, &f->kv_index, f->kv, sizeof *f->kv, i, "key", "key", &kv->key));
        gguf_vtype t = GGUF_TYPE_UINT8;
        BD_TRY(rd_vtype(r, kv->key, &t, "value type"));
        if (!strcmp(kv->key, "general.alignment")) f->alignment_at = r->pos;
        BD_TRY(parse_value(f, r, kv->key, t, &kv->value, 0));
    }
    return BRAID_OK;
}

static braid_status parse_alignment(gguf_file *f) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_value *v = gguf_find(f, "general.alignment");
    if (!v) return BRAID_OK;
    if (v->type != GGUF_TYPE_UINT32)
        return bd_error(BRAID_E_FORMAT, "gguf: general.alignment at offset %zu must be u32, not %s",
                        f->alignment_at, gguf_vtype_name(v->type));
    if (v->u64 == 0 || (v->u64 & (v->u64 - 1)) != 0)
        return bd_error(BRAID_E_FORMAT, "gguf: general.alignment %" PRIu64 " at offset %zu is not a nonzero power "
                        "of two", v->u64, f->alignment_at);
    f->alignment = (size_t)v->u64;
    return BRAID_OK;
}

static braid_status parse_tensor_info(gguf_file *f, rd *r, size_t i, size_t n_tensors) {
    if (!table_reserve((void **)&f->tensors, &f->cap_tensors, i + 1, sizeof *f->tensors, n_tensors) ||
        !index_reserve(&f->t_index, f->tensors, sizeof *f->tensors, i + 1))
        return bd_error(BRAID_E_NOMEM, "gguf: no memory for %zu tensors", i + 1);
    gguf_tensor *t = &f->tensors[i];
    memset(t, 0, sizeof *t);
    f->n_tensors = i + 1;
    BD_TRY(read_unique_name(f, r, &f->t_index, f->tensors, sizeof *f->tensors, i, "tensor name", "tensor",
                            &t->name));

    size_t dims_at = r->pos;
    BD_TRY(rd_u32(r, &t->n_dims, "tensor n_dims"));
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return bd_error(BRAID_E_FORMAT, "gguf: tensor '%s' has %" PRIu32 " dimensions at offset %zu (must be 1..%d)",
                        t->name, t->n_dims, dims_at, GGUF_MAX_DIMS);
    int64_t nel = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        size_t ne_at = r->pos;
        uint64_t x;
        BD_TRY(rd_u64(r, &x, "tensor dimension"));
        t->ne[d] = (int64_t)x;
        if (t->ne[d] <= 0)
            return bd_error(BRAID_E_FORMAT, "gguf: tensor '%s' dimension %" PRIu32 " is %" PRId64 " at offset %zu "
                            "(must be > 0)", t->name, d, t->ne[d], ne_at);
        if (__builtin_mul_overflow(nel, t->ne[d], &nel))
            return bd_error(BRAID_E_FORMAT, "gguf: tensor '%s' element count overflows at dimension %" PRIu32
                            " (offset %zu)", t->name, d, ne_at);
    }
    size_t type_at = r->pos;
    BD_TRY(rd_u32(r, &t->type, "tensor type"));
    int64_t blck;
    size_t bpb;
    if (!gguf_type_block(t->type, &blck, &bpb))
        return bd_error(BRAID_E_FORMAT, "gguf: tensor '%s' has unknown ggml type %" PRIu32 " at offset %zu", t->name,
                        t->type, type_at);
    if (t->ne[0] % blck != 0)
        return bd_error(BRAID_E_FORMAT, "gguf: tensor '%s' of type %s has rows of %" PRId64 " elements, not a "
                        "multiple of the block size %" PRId64 " (offset %zu)", t->name, gguf_type_name(t->type),
                        t->ne[0], blck, type_at);
    if (!bd_mul_size((size_t)(nel / blck), bpb, &t->nbytes))
        return bd_error(BRAID_E_FORMAT, "gguf: tensor '%s' byte size overflows (offset %zu)", t->name, type_at);
    size_t off_at = r->pos;
    BD_TRY(rd_u64(r, &t->offset, "tensor offset"));
    if (t->offset % f->alignment != 0)
        return bd_error(BRAID_E_FORMAT, "gguf: tensor '%s' offset %" PRIu64 " at offset %zu is not a multiple of "
                        "the alignment %zu", t->name, t->offset, off_at, f->alignment);
    return BRAID_OK;
}

static int cmp_by_offset(const void *a, const void *b, void *ctx) {
    const gguf_tensor *ts = ctx;
    uint64_t x = ts[*(const size_t *)a].offset, y = ts[*(const size_t *)b].offset;
    return x < y ? -1 : x > y;
}

/* Places every tensor's data in the file and rejects data past the end or overlapping another tensor. */
static braid_status check_tensor_data(gguf_file *f) {
    for (size_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        uint64_t start = (uint64_t)f->data_offset + t->offset, end; /* data_offset <= size, offset < 2^64 */
        if (start < t->offset || __builtin_add_overflow(start, (uint64_t)t->nbytes, &end) || end > f->size) {
            if (start < t->offset)
                return bd_error(BRAID_E_FORMAT, "gguf: tensor '%s' data offset %" PRIu64 " overflows", t->name,
                                t->offset);
            return bd_error(BRAID_E_FORMAT, "gguf: tensor '%s' data [offset %" PRIu64 ", %zu bytes) extends past "
                            "end of file (%zu bytes)", t->name, start, t->nbytes, f->size);
        }
        t->data = f->base + start;
    }
    if (f->n_tensors < 2) return BRAID_OK;
    size_t *order = bd_mallocn(f->n_tensors, sizeof *order);
    if (!order) return bd_error(BRAID_E_NOMEM, "gguf: no memory to sort %zu tensors", f->n_tensors);
    for (size_t i = 0; i < f->n_tensors; i++) order[i] = i;
    qsort_r(order, f->n_tensors, sizeof *order, cmp_by_offset, f->tensors);
    braid_status s = BRAID_OK;
    for (size_t k = 1; k < f->n_tensors; k++) {
        const gguf_tensor *a = &f->tensors[order[k - 1]], *b = &f->tensors[order[k]];
        if (a->offset + a->nbytes > b->offset) { /* both in bounds, so no overflow */
            s = bd_error(BRAID_E_FORMAT, "gguf: tensors '%s' [offset %zu, %zu bytes) and '%s' [offset %zu, %zu "
                         "bytes) overlap", a->name, f->data_offset + (size_t)a->offset, a->nbytes, b->name,
                         f->data_offset + (size_t)b->offset, b->nbytes);
            break;
        }
    }
    bd_free(order);
    return s;
}

static braid_status parse(gguf_file *f) {
    rd r = {f->base, f->size, 0};
    uint32_t magic;
    BD_TRY(rd_u32(&r, &magic, "magic"));
    if (magic != GGUF_MAGIC) {
        char c[4];
        memcpy(c, &magic, 4);
        for (int i = 0; i < 4; i++)
            if (c[i] < 0x20 || c[i] > 0x7e) c[i] = '?';
        return bd_error(BRAID_E_FORMAT, "gguf: bad magic '%c%c%c%c' (0x%08" PRIx32 ") at offset 0, expected 'GGUF'",
                        c[0], c[1], c[2], c[3], magic);
    }
    BD_TRY(rd_u32(&r, &f->version, "version"));
    if (f->version == 1)
        return bd_error(BRAID_E_FORMAT, "gguf: version 1 at offset 4 is not supported (only 2 and 3); convert the "
                        "file with a newer llama.cpp");
    if (f->version != 2 && f->version != 3) {
        if (f->version != 0 && (f->version & 0xFFFFu) == 0)
            return bd_error(BRAID_E_FORMAT, "gguf: version 0x%08" PRIx32 " at offset 4 looks byte-swapped: "
                            "big-endian files are not supported", f->version);
        return bd_error(BRAID_E_FORMAT, "gguf: unsupported version %" PRIu32 " at offset 4 (only 2 and 3)",
                        f->version);
    }
    uint64_t n_tensors, n_kv;
    BD_TRY(rd_u64(&r, &n_tensors, "tensor count"));
    BD_TRY(rd_u64(&r, &n_kv, "key-value count"));
    size_t left = rd_left(&r);
    if (n_kv > left / MIN_KV_BYTES)
        return bd_error(BRAID_E_FORMAT, "gguf: header declares %" PRIu64 " key-value pairs (offset 16) but only %zu "
                        "bytes remain (each takes at least %d)", n_kv, left, MIN_KV_BYTES);
    left -= (size_t)n_kv * MIN_KV_BYTES;
    if (n_tensors > left / MIN_TENSOR_BYTES)
        return bd_error(BRAID_E_FORMAT, "gguf: header declares %" PRIu64 " tensors (offset 8) but only %zu bytes "
                        "remain for them (each takes at least %d)", n_tensors, left, MIN_TENSOR_BYTES);
    BD_TRY(parse_kvs(f, &r, (size_t)n_kv));
    BD_TRY(parse_alignment(f));
    for (size_t i = 0; i < (size_t)n_tensors; i++) BD_TRY(parse_tensor_info(f, &r, i, (size_t)n_tensors));

    /* The data section starts at the next multiple of the alignment (llama.cpp only pads when there are
     * tensors; a vocabulary-only file may end right after its tensor infos). */
    f->data_offset = r.pos;
    if (f->n_tensors > 0) {
        size_t pad = (f->alignment - r.pos % f->alignment) % f->alignment;
        if (pad > rd_left(&r))
            return bd_error(BRAID_E_FORMAT, "gguf: file ends at %zu, before the data section at offset %zu "
                            "(alignment %zu)", r.size, r.pos + pad, f->alignment);
        f->data_offset = r.pos + pad;
    }
    return check_tensor_data(f);
}

/* ---- open / close ------------------------------------------------------------------------------------------ */

static braid_status open_common(gguf_file *f, gguf_file **out) {
    braid_status s = parse(f);
    if (s != BRAID_OK) {
        gguf_close(f);
        return s;
    }
    *out = f;
    return BRAID_OK;
}

braid_status gguf_open_memory(const void *data, size_t size, gguf_file **out) {
    if (!out || (!data && size)) return bd_error(BRAID_E_INVALID, "gguf_open_memory: NULL argument");
    *out = NULL;
    gguf_file *f = bd_calloc(1, sizeof *f);
    if (!f) return bd_error(BRAID_E_NOMEM, "gguf: no memory");
    static const uint8_t empty[1];
    f->base = data ? data : empty;
    f->size = size;
    return open_common(f, out);
}

braid_status gguf_open(const char *path, gguf_file **out) {
    if (!path || !out) return bd_error(BRAID_E_INVALID, "gguf_open: NULL argument");
    *out = NULL;
    int fd;
    uint64_t fsize;
    BD_TRY(bd_open_regular(path, "gguf", &fd, &fsize)); /* a FIFO must not block the caller */
    if (fsize > SIZE_MAX) {
        close(fd);
        return bd_error(BRAID_E_IO, "gguf: '%s' is too large for this address space", path);
    }
    size_t size = (size_t)fsize;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return bd_error(BRAID_E_IO, "gguf: cannot map '%s' (%zu bytes): %s", path, size, strerror(e));
        }
    }
    close(fd); /* the mapping keeps the file */
    gguf_file *f = bd_calloc(1, sizeof *f);
    if (!f) {
        if (map) munmap(map, size);
        return bd_error(BRAID_E_NOMEM, "gguf: no memory");
    }
    static const uint8_t empty[1];
    f->map = map;
    f->base = map ? map : empty;
    f->size = size;
    return open_common(f, out);
}

void gguf_prefault(const gguf_file *f, const void *p, size_t n) {
    if (!f || !f->map || !p || !n) return;
    const uint8_t *base = f->map, *q = p;
    if (q < base || (size_t)(q - base) >= f->size) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), lo = (size_t)(q - base) / page * page;
    size_t hi = (size_t)(q - base) + (n < f->size - (size_t)(q - base) ? n : f->size - (size_t)(q - base));
    uint8_t *start = (uint8_t *)f->map + lo;
#ifdef MADV_POPULATE_READ
    if (madvise(start, hi - lo, MADV_POPULATE_READ) == 0) return;
#endif
    (void)madvise(start, hi - lo, MADV_WILLNEED);
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    if (f->map) munmap(f->map, f->size);
    arena_free(f->arena);
    bd_free(f->kv);
    bd_free(f->tensors);
    bd_free(f->kv_index.slots);
    bd_free(f->t_index.slots);
    bd_free(f);
}

/* ---- accessors --------------------------------------------------------------------------------------------- */

uint32_t gguf_version(const gguf_file *f) { return f->version; }
size_t gguf_alignment(const gguf_file *f) { return f->alignment; }
size_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
size_t gguf_file_size(const gguf_file *f) { return f->size; }
size_t gguf_n_kv(const gguf_file *f) { return f->n_kv; }
size_t gguf_n_tensors(const gguf_file *f) { return f->n_tensors; }

const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i) { return i < f->n_kv ? &f->kv[i] : NULL; }
const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i) { return i < f->n_tensors ? &f->tensors[i] : NULL; }

const gguf_value *gguf_find(const gguf_file *f, const char *key) {
    if (!key) return NULL;
    size_t found;
    index_probe(&f->kv_index, f->kv, sizeof *f->kv, key, strlen(key), &found);
    return found ? &f->kv[found - 1].value : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    if (!name) return NULL;
    size_t found;
    index_probe(&f->t_index, f->tensors, sizeof *f->tensors, name, strlen(name), &found);
    return found ? &f->tensors[found - 1] : NULL;
}
