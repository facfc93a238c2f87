/* loader.h — what every architecture file needs to read a GGUF: strictly typed hyperparameter keys and
 * shape-checked tensor binding with an exact-set check.
 *
 * The rules are llama.cpp's (architectures.md §0.1), so that a file braid accepts is one llama.cpp accepts:
 * scalar u32 keys must be stored as UINT32, floats as FLOAT32, bools as BOOL; per-layer keys are an
 * INT32/UINT32/BOOL array of exactly n_layer entries or a scalar UINT32 broadcast to every layer. Every tensor
 * an architecture binds must have exactly the expected dims and a type braid supports; after binding,
 * bd_loader_finish() rejects files that carry tensors nobody bound (llama.cpp: "wrong number of tensors").
 *
 * Bound weights point into the GGUF mapping: they live as long as the gguf_file. */
#ifndef BRAID_MODELS_LOADER_H
#define BRAID_MODELS_LOADER_H

#include <stdint.h>

#include "braid.h"
#include "gguf/gguf.h"

/* A 2-D weight matrix W = rm[n_out][n_in] (ggml ne = {n_in, n_out}), or a 1-D vector (n_out = 1). */
typedef struct bd_weight {
    const void *data; /* n_out rows of row_size bytes, into the mapping */
    uint32_t type;    /* ggml type id */
    int64_t n_in;     /* ne0: elements per row */
    int64_t n_out;    /* ne1: rows */
    size_t row_size;  /* bytes per row */
} bd_weight;

typedef struct bd_loader {
    const gguf_file *f;
    char arch[32];   /* key prefix: "<arch>." */
    uint8_t *used;   /* [n_tensors] 1 once bound */
    size_t n_tensors;
} bd_loader;

BRAID_NODISCARD braid_status bd_loader_init(bd_loader *l, const gguf_file *f, const char *arch);
void bd_loader_free(bd_loader *l);

/* Scalars "<arch>.<suffix>". Absent and !required: BRAID_OK, *out unchanged (set the default first). */
BRAID_NODISCARD braid_status bd_key_u32(const bd_loader *l, const char *suffix, int required, uint32_t *out);
/* Float keys must be finite; epsilons and rope.freq_base > 0, rope.scaling.factor >= 0 (BRAID_E_FORMAT naming
 * the key otherwise). */
BRAID_NODISCARD braid_status bd_key_f32(const bd_loader *l, const char *suffix, int required, float *out);
BRAID_NODISCARD braid_status bd_key_str(const bd_loader *l, const char *suffix, int required, gguf_str *out);
/* Per-layer key: array of exactly n (INT32/UINT32/BOOL) or a scalar UINT32 broadcast. *found = 0 if absent. */
BRAID_NODISCARD braid_status bd_key_u32_per_layer(const bd_loader *l, const char *suffix, uint32_t n, int required,
                                                  uint32_t *out, int *found);
/* Array of at most cap INT32/UINT32/BOOL values; the rest of out[0..cap) is zeroed. *found = 0 if absent. */
BRAID_NODISCARD braid_status bd_key_i32_array(const bd_loader *l, const char *suffix, uint32_t cap, int required,
                                              int32_t *out, int *found);

/* Binds tensor `name` expecting ggml dims {ne0, ne1} (ne1 = 1 for a vector). f32_only: the type must be F32
 * (norms, conv kernels, biases). Absent and !required: BRAID_OK with out->data = NULL. */
BRAID_NODISCARD braid_status bd_bind(bd_loader *l, const char *name, int64_t ne0, int64_t ne1, int f32_only,
                                     int required, bd_weight *out);
/* The same with the name "blk.<il>.<suffix>". */
BRAID_NODISCARD braid_status bd_bind_layer(bd_loader *l, int il, const char *suffix, int64_t ne0, int64_t ne1,
                                           int f32_only, int required, bd_weight *out);
/* A stack of ne2 matrices {ne0, ne1} (MoE experts, ggml ne = {n_in, n_out, n_expert}): *out is matrix 0;
 * matrix e starts (size_t)e * ne1 * out->row_size bytes further. */
BRAID_NODISCARD braid_status bd_bind3(bd_loader *l, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                                      int f32_only, int required, bd_weight *out);
BRAID_NODISCARD braid_status bd_bind_layer3(bd_loader *l, int il, const char *suffix, int64_t ne0, int64_t ne1,
                                            int64_t ne2, int f32_only, int required, bd_weight *out);
/* 1 if `name` is a tensor of a layer >= first_skipped_layer ("blk.<il>.", an MTP/NextN block that the main
 * forward never runs). */
int bd_tensor_skipped(const char *name, int first_skipped_layer);
/* Marks tensors of layers >= first_skipped_layer (bd_tensor_skipped) as used, then fails with BRAID_E_FORMAT
 * naming the first tensor that nobody bound. So after a successful load every tensor of the file is bound
 * except the skipped ones: the engine prefaults exactly those (layout.n_layer is the first skipped layer). */
BRAID_NODISCARD braid_status bd_loader_finish(bd_loader *l, int first_skipped_layer);

/* Row r of a weight, e.g. one embedding row. */
static inline const void *bd_weight_row(const bd_weight *w, int64_t r) {
    return (const char *)w->data + (size_t)r * w->row_size;
}

#endif
