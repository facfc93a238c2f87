/* gguf.h — GGUF reader and writer (versions 2 and 3).
 *
 * Reader: gguf_open() maps the file and validates all of it before returning: magic, version, every count
 * against the bytes that remain, string and array lengths, key uniqueness, value types, tensor names, dims,
 * types, offsets, alignment, overlaps and size arithmetic. Nothing read from the file is trusted afterwards
 * without having passed through that check, so accessors need no further bounds checks. A bad file gives
 * BRAID_E_FORMAT with a message naming the problem and the byte offset. Allocation is bounded by the file
 * size (every parsed item consumes at least one byte of input).
 *
 * Strings in values point into the mapping and are NOT NUL-terminated (GGUF strings may contain NUL); keys
 * and tensor names are copied NUL-terminated (the reader rejects keys and names that contain NUL or are not
 * valid UTF-8). Everything returned stays valid until gguf_close().
 *
 * Writer: collect metadata and tensor descriptions, then gguf_writer_write() streams the file; tensor bytes
 * come from a pointer given when the tensor was added, or from a fill callback (so a multi-GB model is never
 * held in memory).
 *
 * Names: gguf_find_tensor and gguf_type_name also exist in llama.cpp's libggml-base with other meanings, and
 * the GGUF_TYPE_* names match its gguf.h. So this header cannot share a file with llama.cpp's gguf.h/llama.h,
 * and braid's library is built with hidden visibility so that a program linking both never hands llama.cpp
 * braid's functions (tests/conformance/test_gguf.c checks it). */
#ifndef BRAID_GGUF_GGUF_H
#define BRAID_GGUF_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "braid.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

typedef enum gguf_vtype {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_vtype;

typedef struct gguf_str {
    const char *ptr; /* into the mapping (reader) or owned by the writer; not NUL-terminated */
    uint64_t len;
} gguf_str;

typedef struct gguf_value gguf_value;
struct gguf_value {
    gguf_vtype type;
    union {
        uint64_t u64; /* UINT8/16/32/64 widened */
        int64_t i64;  /* INT8/16/32/64 widened */
        double f64;   /* FLOAT32/64 widened */
        int b;        /* BOOL (0 or 1; other bytes are rejected) */
        gguf_str str; /* STRING */
        struct {
            gguf_vtype type;         /* element type */
            uint64_t n;              /* element count */
            const void *data;        /* fixed-size element types: n raw little-endian elements (unaligned) */
            const gguf_value *items; /* STRING and ARRAY elements: n parsed values; NULL otherwise */
        } arr;
    };
};

typedef struct gguf_kv {
    const char *key; /* NUL-terminated copy */
    gguf_value value;
} gguf_kv;

typedef struct gguf_tensor {
    const char *name; /* NUL-terminated copy */
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] fastest; unused dims are 1 */
    uint32_t type;             /* ggml type id (braid_type for supported ones) */
    uint64_t offset;           /* relative to the start of the data section */
    size_t nbytes;
    const void *data; /* into the mapping */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* Opens and validates a file (mmap'd, read-only). On success *out owns it; release with gguf_close.
 * Tensor types: any id that gguf_type_block knows is accepted (so any llama.cpp file can be listed); the model
 * loader decides which of them it can compute with (tensor/dot.h: bd_type_supported). Tensors may be in any order and
 * leave gaps (llama.cpp insists on consecutive padded offsets); they must be aligned, in the file and
 * disjoint. As with any mapping, a file truncated by another process while open faults when its data is read. */
BRAID_NODISCARD braid_status gguf_open(const char *path, gguf_file **out);
/* Validates a buffer in memory (the caller keeps it alive until gguf_close; it is not copied). */
BRAID_NODISCARD braid_status gguf_open_memory(const void *data, size_t size, gguf_file **out);
void gguf_close(gguf_file *f);
/* Maps the pages of [p, p + n) (inside the file's tensor data) into the process now: a mapped file; a no-op
 * for a buffer. A model about to compute touches all of its weights on the first token anyway; paying for
 * that one page fault at a time costs far more (seconds on a large model under virtualization) than one
 * populate call at load. The caller chooses the ranges (the tensors a model binds, not the ones it skips) and
 * whether they fit in memory. Best effort: without MADV_POPULATE_READ it only asks for read-ahead. */
void gguf_prefault(const gguf_file *f, const void *p, size_t n);

uint32_t gguf_version(const gguf_file *f);
size_t gguf_alignment(const gguf_file *f);
size_t gguf_data_offset(const gguf_file *f); /* file offset of the tensor data section */
size_t gguf_file_size(const gguf_file *f);

size_t gguf_n_kv(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, size_t i);
const gguf_value *gguf_find(const gguf_file *f, const char *key); /* NULL if absent */

size_t gguf_n_tensors(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, size_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name); /* NULL if absent */

/* Typed lookups for loaders. BRAID_E_FORMAT if the key is present with another type (message names the key
 * and both types); if absent: BRAID_E_FORMAT when required, else BRAID_OK with *out left unchanged (so callers
 * set the default first). Integer getters accept any integer type whose value fits. */
BRAID_NODISCARD braid_status gguf_get_u32(const gguf_file *f, const char *key, int required, uint32_t *out);
BRAID_NODISCARD braid_status gguf_get_i32(const gguf_file *f, const char *key, int required, int32_t *out);
BRAID_NODISCARD braid_status gguf_get_u64(const gguf_file *f, const char *key, int required, uint64_t *out);
BRAID_NODISCARD braid_status gguf_get_f32(const gguf_file *f, const char *key, int required, float *out);
BRAID_NODISCARD braid_status gguf_get_bool(const gguf_file *f, const char *key, int required, int *out);
BRAID_NODISCARD braid_status gguf_get_str(const gguf_file *f, const char *key, int required, gguf_str *out);
/* An array of strings (e.g. tokenizer.ggml.tokens): *out points at n values of type STRING. */
BRAID_NODISCARD braid_status gguf_get_str_array(const gguf_file *f, const char *key, int required,
                                                const gguf_value **items, uint64_t *n);
/* An integer array (any integer element type, or bool) converted to int32: n values written to out, which the
 * caller sizes from gguf_find. BRAID_E_RANGE with *n = the count needed if cap is too small; BRAID_E_FORMAT
 * if v is not an integer array or an element does not fit int32 (out may then be partly written). */
BRAID_NODISCARD braid_status gguf_array_to_i32(const gguf_value *v, int32_t *out, uint64_t cap, uint64_t *n);

const char *gguf_vtype_name(gguf_vtype t);
size_t gguf_vtype_size(gguf_vtype t); /* bytes of a fixed-size element; 0 for STRING and ARRAY */

/* ggml tensor types as GGUF stores them (every id ggml 3.22.1 knows, not only the ones braid computes with).
 * gguf_type_block: 1 and the block geometry for a known id, 0 for an unknown one (outputs untouched). */
int gguf_type_block(uint32_t type, int64_t *blck, size_t *bytes);
const char *gguf_type_name(uint32_t type); /* "f32", "q4_K", ...; "unknown" for an unknown id */

/* ---- writer -------------------------------------------------------------------------------------------- */

typedef struct gguf_writer gguf_writer;
/* Fills nbytes of tensor `name` into buf (called once per tensor added with data == NULL, in order). */
typedef braid_status (*gguf_fill_fn)(void *user, const char *name, void *buf, size_t nbytes);

BRAID_NODISCARD braid_status gguf_writer_new(uint32_t version, gguf_writer **out); /* version 2 or 3 */
void gguf_writer_free(gguf_writer *w);
/* Setters copy their arguments. Setting a key twice replaces it. general.alignment (u32) is honoured. */
BRAID_NODISCARD braid_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
BRAID_NODISCARD braid_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
BRAID_NODISCARD braid_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
BRAID_NODISCARD braid_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
BRAID_NODISCARD braid_status gguf_writer_set_bool(gguf_writer *w, const char *key, int v);
BRAID_NODISCARD braid_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* A copy of any parsed value (including nested arrays), e.g. to carry a vocabulary from one file to another. */
BRAID_NODISCARD braid_status gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v);
/* Fixed-size element arrays: n elements of type t, raw little-endian. */
BRAID_NODISCARD braid_status gguf_writer_set_array(gguf_writer *w, const char *key, gguf_vtype t, const void *data,
                                                   uint64_t n);
BRAID_NODISCARD braid_status gguf_writer_set_str_array(gguf_writer *w, const char *key, const char *const *v,
                                                       uint64_t n);
/* data: nbytes (computed from type and ne) to copy at write time, or NULL to use the fill callback.
 * The pointer must stay valid until gguf_writer_write returns. */
BRAID_NODISCARD braid_status gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type,
                                                    uint32_t n_dims, const int64_t *ne, const void *data);
BRAID_NODISCARD braid_status gguf_writer_write(gguf_writer *w, const char *path, gguf_fill_fn fill, void *user);

#endif
