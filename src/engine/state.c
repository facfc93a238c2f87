/* state.c — braid_state_* on the memory's state format (src/memory/state_io.c, design.md §5): the engine
 * adds the model fingerprint (hash of arch, hparams, tensor names/shapes/types and a digest of the weights) and
 * a description, and the files. Loading verifies everything before it changes anything; a state of another
 * model is refused with a reason that names both models. */
#include "gguf/gguf.h"

#include <stdio.h>

#include "base/alloc.h"
#include "base/status.h"
#include "engine/context.h"

/* What a state file says about its model, and what a refusal names for both models: the architecture, the
 * file's general.name, the shape and the weights digest (two models of one shape differ there). */
static void describe(const braid_context *ctx, char *buf, size_t cap) {
    const braid_model *m = ctx->model;
    gguf_str name = {"", 0};
    if (gguf_get_str(m->gguf, "general.name", 0, &name) != BRAID_OK) name = (gguf_str){"", 0};
    bd_error_clear();
    snprintf(buf, cap, "%s '%.*s' n_embd %d n_layer %d weights %016llx", m->arch_name,
             (int)(name.len > 48 ? 48 : name.len), name.ptr, m->n_embd, m->layout.n_layer,
             (unsigned long long)m->weights_digest);
}

/* A state that belongs to another model or configuration: the memory's reason names the saved model; add
 * this context's, so the message names both. */
static braid_status load_result(const braid_context *ctx, braid_status st) {
    if (st != BRAID_E_MISMATCH) return st;
    char why[512], desc[160];
    snprintf(why, sizeof why, "%s", braid_last_error());
    describe(ctx, desc, sizeof desc);
    return bd_error(st, "%s; this context's model is \"%s\" (fingerprint %016llx)", why, desc,
                    (unsigned long long)ctx->model->fingerprint);
}

static braid_status save(braid_context *ctx, braid_seq_id s, void **data, size_t *size) {
    if (!ctx || !data || !size) return bd_error(BRAID_E_INVALID, "state save: NULL argument");
    char desc[160];
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
    return load_result(ctx, mem_state_load(ctx->mem, s, ctx->model->fingerprint, data, size));
}

braid_status braid_state_load(braid_context *ctx, const void *data, size_t size) {
    if (!ctx || !data) return bd_error(BRAID_E_INVALID, "state load: NULL argument");
    return load_result(ctx, mem_state_load(ctx->mem, -1, ctx->model->fingerprint, data, size));
}

static braid_status save_file(braid_context *ctx, braid_seq_id s, const char *path) {
    if (!ctx || !path) return bd_error(BRAID_E_INVALID, "state save: NULL argument");
    char desc[160];
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
    return load_result(ctx, mem_state_load_file(ctx->mem, s, ctx->model->fingerprint, path));
}

braid_status braid_state_load_file(braid_context *ctx, const char *path) {
    if (!ctx || !path) return bd_error(BRAID_E_INVALID, "state load: NULL argument");
    return load_result(ctx, mem_state_load_file(ctx->mem, -1, ctx->model->fingerprint, path));
}
