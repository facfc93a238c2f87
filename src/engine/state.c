/* state.c — braid_state_* on the memory's state format (src/memory/state_io.c, design.md §5): the engine
 * adds the model fingerprint (hash of arch, hparams, tensor names/shapes/types) and a description, and the
 * files. Loading verifies everything before it changes anything. */
#include <stdio.h>

#include "base/alloc.h"
#include "base/status.h"
#include "engine/context.h"

static void describe(const braid_context *ctx, char *buf, size_t cap) {
    snprintf(buf, cap, "%s n_embd %d n_layer %d", ctx->model->arch_name, ctx->model->n_embd,
             ctx->model->layout.n_layer);
}

static braid_status save(braid_context *ctx, braid_seq_id s, void **data, size_t *size) {
    if (!ctx || !data || !size) return bd_error(BRAID_E_INVALID, "state save: NULL argument");
    char desc[128];
    describe(ctx, desc, sizeof desc);
    return mem_state_save_alloc(ctx->mem, s, ctx->model->fingerprint, desc, data, size);
}

braid_status braid_state_seq_save(braid_context *ctx, braid_seq_id s, void **data, size_t *size) {
    if (s < 0) return bd_error(BRAID_E_RANGE, "state save: sequence id %d", s);
    return save(ctx, s, data, size);
}

braid_status braid_state_save(braid_context *ctx, void **data, size_t *size) { return save(ctx, -1, data, size); }

braid_status braid_state_seq_load(braid_context *ctx, braid_seq_id s, const void *data, size_t size) {
    if (!ctx || !data) return bd_error(BRAID_E_INVALID, "state load: NULL argument");
    if (s < 0) return bd_error(BRAID_E_RANGE, "state load: sequence id %d", s);
    return mem_state_load(ctx->mem, s, ctx->model->fingerprint, data, size);
}

braid_status braid_state_load(braid_context *ctx, const void *data, size_t size) {
    if (!ctx || !data) return bd_error(BRAID_E_INVALID, "state load: NULL argument");
    return mem_state_load(ctx->mem, -1, ctx->model->fingerprint, data, size);
}

static braid_status save_file(braid_context *ctx, braid_seq_id s, const char *path) {
    if (!ctx || !path) return bd_error(BRAID_E_INVALID, "state save: NULL argument");
    char desc[128];
    describe(ctx, desc, sizeof desc);
    return mem_state_save_file(ctx->mem, s, ctx->model->fingerprint, desc, path);
}

braid_status braid_state_seq_save_file(braid_context *ctx, braid_seq_id s, const char *path) {
    if (s < 0) return bd_error(BRAID_E_RANGE, "state save: sequence id %d", s);
    return save_file(ctx, s, path);
}

braid_status braid_state_save_file(braid_context *ctx, const char *path) { return save_file(ctx, -1, path); }

braid_status braid_state_seq_load_file(braid_context *ctx, braid_seq_id s, const char *path) {
    if (!ctx || !path) return bd_error(BRAID_E_INVALID, "state load: NULL argument");
    if (s < 0) return bd_error(BRAID_E_RANGE, "state load: sequence id %d", s);
    return mem_state_load_file(ctx->mem, s, ctx->model->fingerprint, path);
}

braid_status braid_state_load_file(braid_context *ctx, const char *path) {
    if (!ctx || !path) return bd_error(BRAID_E_INVALID, "state load: NULL argument");
    return mem_state_load_file(ctx->mem, -1, ctx->model->fingerprint, path);
}
