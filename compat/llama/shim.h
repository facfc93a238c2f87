/* shim.h — what the files of libllama-braid.so share: the objects behind llama.h's opaque handles (each one a
 * thin wrapper around a braid object), the log that stands in for llama_log_set's callback, and timing.
 * The shim is compiled against the pinned llama.h (the oracle tree's include/), so every struct layout and
 * enum value a program sees is llama.cpp's; the implementation uses only braid's public API (braid.h). */
#ifndef BRAID_COMPAT_LLAMA_SHIM_H
#define BRAID_COMPAT_LLAMA_SHIM_H

#include <stdint.h>

#include "braid.h"
#include "llama.h"

struct llama_vocab {
    braid_model *bm;
};

struct llama_model {
    braid_model *bm;
    struct llama_vocab vocab;
    char *chat_template;      /* NUL-terminated copies handed out by llama_model_chat_template */
    char *chat_template_name; /* the name the cached copy belongs to ("" for the default one) */
    double t_load_ms;
};

/* llama_memory_t points at this member of the context (llama.h only ever passes it back). */
struct llama_memory_i {
    struct llama_context *ctx;
};

struct llama_context {
    braid_context *bc;
    const struct llama_model *model;
    struct llama_memory_i mem;
    struct llama_context_params params;
    int32_t n_vocab;
    /* Rows of the last decode that asked for logits, in batch order (llama_get_logits_ith's "i" is a batch row,
     * negative counts back from the last output), and their logits packed (llama_get_logits). */
    int32_t *out_rows;
    int32_t n_out;
    int32_t cap_out;
    int32_t n_batch_rows; /* rows of the last decode */
    float *packed;        /* n_out x n_vocab, filled when llama_get_logits asks */
    int packed_valid;
    ggml_abort_callback abort_cb; /* llama_set_abort_callback's, asked by braid between layers */
    void *abort_data;
    int warned_threads;
    /* llama_perf_context_data */
    double t_start_ms, t_p_eval_ms, t_eval_ms;
    int32_t n_p_eval, n_eval;
};

/* Logs through the callback of llama_log_set (stderr by default). level: GGML_LOG_LEVEL_*. */
void shim_log(enum ggml_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Logs braid's reason for a failed call: "<what>: <braid_last_error()>" at error level. */
void shim_log_braid(const char *what, braid_status st);
/* Microseconds on a monotonic clock. */
int64_t shim_time_us(void);

#endif
