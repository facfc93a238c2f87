/* state.c — llama.h's state calls over braid's state format (design.md §5: versioned, checksummed, validated
 * whole before anything changes). The bytes are braid's, not llama.cpp's: a file written by llama.cpp is
 * refused with a reason, as any foreign file is. The token lists of the session-file calls are the
 * sequence's own history in braid's file (the tokens the caller passes on save are checked against it). */
#include <string.h>

#include "shim.h"

/* Serializes the whole context (seq < 0) or one sequence; NULL and a logged reason on failure. */
static void *save(struct llama_context *c, llama_seq_id seq, size_t *size, const char *what) {
    void *data = NULL;
    braid_status st = seq < 0 ? braid_state_save(c->bc, &data, size) : braid_state_seq_save(c->bc, seq, &data, size);
    if (st != BRAID_OK) {
        shim_log_braid(what, st);
        return NULL;
    }
    return data;
}

static size_t copy_out(struct llama_context *c, llama_seq_id seq, uint8_t *dst, size_t cap, const char *what) {
    size_t size = 0;
    void *data = save(c, seq, &size, what);
    if (!data) return 0;
    size_t r = 0;
    if (size > cap) shim_log(GGML_LOG_LEVEL_ERROR, "%s: the state needs %zu bytes, the buffer has %zu\n", what, size, cap);
    else {
        memcpy(dst, data, size);
        r = size;
    }
    braid_free(data);
    return r;
}

size_t llama_state_get_size(struct llama_context *c) {
    size_t size = 0;
    void *data = save(c, -1, &size, "llama_state_get_size");
    braid_free(data);
    return data ? size : 0;
}

size_t llama_state_get_data(struct llama_context *c, uint8_t *dst, size_t size) {
    return copy_out(c, -1, dst, size, "llama_state_get_data");
}

size_t llama_state_set_data(struct llama_context *c, const uint8_t *src, size_t size) {
    braid_status st = braid_state_load(c->bc, src, size);
    if (st != BRAID_OK) {
        shim_log_braid("llama_state_set_data", st);
        return 0;
    }
    c->n_out = 0;
    return size;
}

size_t llama_state_seq_get_size(struct llama_context *c, llama_seq_id seq) {
    size_t size = 0;
    void *data = save(c, seq, &size, "llama_state_seq_get_size");
    braid_free(data);
    return data ? size : 0;
}

size_t llama_state_seq_get_data(struct llama_context *c, uint8_t *dst, size_t size, llama_seq_id seq) {
    return copy_out(c, seq, dst, size, "llama_state_seq_get_data");
}

size_t llama_state_seq_set_data(struct llama_context *c, const uint8_t *src, size_t size, llama_seq_id dest) {
    braid_status st = braid_state_seq_load(c->bc, dest, src, size);
    if (st != BRAID_OK) {
        shim_log_braid("llama_state_seq_set_data", st);
        return 0;
    }
    return size;
}

/* The tokens of seq's history (embedding inputs give -1) into out; false if cap is too small. */
static bool history_tokens(struct llama_context *c, llama_seq_id seq, llama_token *out, size_t cap, size_t *n_out) {
    int32_t len = braid_seq_len(c->bc, seq);
    if (len < 0) len = 0;
    if (n_out) *n_out = (size_t)len;
    if ((size_t)len > cap) return false;
    for (int32_t i = 0; i < len; i++)
        if (braid_seq_input(c->bc, seq, i, &out[i], NULL) != BRAID_OK) return false;
    return true;
}

/* A caller's token list that differs from what the sequence holds would make the file lie about its state. */
static bool tokens_match(struct llama_context *c, llama_seq_id seq, const llama_token *tokens, size_t n,
                         const char *what) {
    int32_t len = braid_seq_len(c->bc, seq);
    bool ok = len >= 0 && (size_t)len == n;
    for (size_t i = 0; ok && i < n; i++) {
        llama_token t;
        ok = braid_seq_input(c->bc, seq, (int32_t)i, &t, NULL) == BRAID_OK && t == tokens[i];
    }
    if (!ok)
        shim_log(GGML_LOG_LEVEL_ERROR, "%s: the %zu tokens given are not the %d inputs sequence %d holds; braid's "
                                       "file stores the sequence's own history\n", what, n, len, seq);
    return ok;
}

bool llama_state_save_file(struct llama_context *c, const char *path, const llama_token *tokens, size_t n) {
    if (tokens && !tokens_match(c, 0, tokens, n, "llama_state_save_file")) return false;
    braid_status st = braid_state_save_file(c->bc, path);
    if (st != BRAID_OK) shim_log_braid("llama_state_save_file", st);
    return st == BRAID_OK;
}

bool llama_state_load_file(struct llama_context *c, const char *path, llama_token *tokens_out, size_t cap,
                           size_t *n_out) {
    braid_status st = braid_state_load_file(c->bc, path);
    if (st != BRAID_OK) {
        shim_log_braid("llama_state_load_file", st);
        return false;
    }
    c->n_out = 0;
    if (!tokens_out) return true;
    if (!history_tokens(c, 0, tokens_out, cap, n_out)) {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_state_load_file: %zu tokens do not fit in %zu\n", n_out ? *n_out : 0,
                 cap);
        return false;
    }
    return true;
}

size_t llama_state_seq_save_file(struct llama_context *c, const char *path, llama_seq_id seq,
                                 const llama_token *tokens, size_t n) {
    if (tokens && !tokens_match(c, seq, tokens, n, "llama_state_seq_save_file")) return 0;
    size_t size = 0;
    void *data = save(c, seq, &size, "llama_state_seq_save_file");
    braid_free(data);
    if (!data) return 0;
    braid_status st = braid_state_seq_save_file(c->bc, seq, path);
    if (st != BRAID_OK) {
        shim_log_braid("llama_state_seq_save_file", st);
        return 0;
    }
    return size;
}

size_t llama_state_seq_load_file(struct llama_context *c, const char *path, llama_seq_id dest,
                                 llama_token *tokens_out, size_t cap, size_t *n_out) {
    if (!tokens_out) {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_state_seq_load_file: counting tokens without loading is not "
                                       "supported by braid\n");
        return 0;
    }
    braid_status st = braid_state_seq_load_file(c->bc, dest, path);
    if (st != BRAID_OK) {
        shim_log_braid("llama_state_seq_load_file", st);
        return 0;
    }
    size_t n = 0;
    if (!history_tokens(c, dest, tokens_out, cap, &n)) {
        shim_log(GGML_LOG_LEVEL_ERROR, "llama_state_seq_load_file: %zu tokens do not fit in %zu\n", n, cap);
        return 0;
    }
    if (n_out) *n_out = n;
    size_t size = 0;
    void *data = save(c, dest, &size, "llama_state_seq_load_file");
    braid_free(data);
    return data ? size : 0;
}
