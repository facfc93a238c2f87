/* tap.h — a test-only window on the intermediates of a forward pass, to find the first op where braid and
 * llama.cpp part (the oracle driver's dump command gives llama.cpp's side, named as its graph names them).
 *
 * Off by default: a model's forward calls bd_tap at a few points, which costs one load and branch each while
 * no callback is set. A test sets one with bd_tap_set before decoding and clears it after; the callback sees
 * rows of floats that are only valid during the call. Process-wide and not thread-safe: for single-context
 * diagnostics only. */
#ifndef BRAID_TENSOR_TAP_H
#define BRAID_TENSOR_TAP_H

#include <stdint.h>

/* name: llama.cpp's graph name without the layer suffix (e.g. "attn_norm"); layer: the layer index or -1;
 * x: rows [rows][n] with row stride ld floats. */
typedef void (*bd_tap_fn)(void *user, const char *name, int layer, const float *x, int64_t n, int64_t rows,
                          int64_t ld);

extern bd_tap_fn bd_tap_cb;
extern void *bd_tap_user;

/* Sets (fn != NULL) or clears the callback. */
void bd_tap_set(bd_tap_fn fn, void *user);

static inline void bd_tap(const char *name, int layer, const float *x, int64_t n, int64_t rows, int64_t ld) {
    if (bd_tap_cb) bd_tap_cb(bd_tap_user, name, layer, x, n, rows, ld);
}

#endif
